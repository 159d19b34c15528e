//! The `shell` and `subprocess` seams: a component asks, the host checks
//! the request against the plugin's grant and runs it in the sandbox
//! (`toolgate-sandbox`: Landlock, seccomp, limits, a process group killed as
//! a whole).
//!
//! Paths in a request are the guest's: a `workdir` is interpreted like a
//! path the component would open (relative to the directory granted as
//! `.`, or under a granted guest path) and must stay inside the grant. The
//! environment is clean: `PATH`, `LANG`, the granted variables (with their
//! host values) and whatever the request sets — but only for granted names.
//! The process runs under the call's signal: the deadline and the caller's
//! cancellation kill its whole process group, and so does dropping the
//! call (the pipeline drops a body that outlives its deadline).

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use toolgate_sandbox::{Program, SpawnRequest};

use crate::bindings::toolgate::plugin::process::{Options, Output, SpawnError};
use crate::plugin::grants::Grants;
use crate::plugin::store::StoreData;

/// The `PATH` a spawned process gets.
pub const SANDBOX_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// `shell.run`: `/bin/sh -c COMMAND` in the sandbox.
pub async fn shell(
    data: &mut StoreData,
    command: String,
    options: Options,
) -> anyhow::Result<Result<Output, SpawnError>> {
    if !data.grants.shell {
        return Ok(Err(SpawnError::NotGranted(format!(
            "plugin `{}` is not granted the shell seam; add `shell = true` under [plugins.{}.grants] in toolgate.toml",
            data.plugin, data.plugin
        ))));
    }
    if command.trim().is_empty() {
        return Ok(Err(SpawnError::InvalidRequest(
            "the command is empty".into(),
        )));
    }
    Ok(spawn(data, Program::Shell(command), options).await)
}

/// `subprocess.run`: PROGRAM ARGS… in the sandbox, no shell. PROGRAM must be
/// on the plugin's allow-list, exactly as written there.
pub async fn subprocess(
    data: &mut StoreData,
    program: String,
    args: Vec<String>,
    options: Options,
) -> anyhow::Result<Result<Output, SpawnError>> {
    let allowed = &data.grants.subprocess;
    if !allowed.contains(&program) {
        return Ok(Err(SpawnError::NotGranted(if allowed.is_empty() {
            format!(
                "plugin `{}` may not run programs; list them in `subprocess = [...]` under [plugins.{}.grants]",
                data.plugin, data.plugin
            )
        } else {
            format!(
                "plugin `{}` may run only {}; `{program}` is not on its subprocess list",
                data.plugin,
                allowed
                    .iter()
                    .map(|p| format!("`{p}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })));
    }
    Ok(spawn(
        data,
        Program::Exec {
            program: PathBuf::from(program),
            args,
        },
        options,
    )
    .await)
}

async fn spawn(
    data: &mut StoreData,
    program: Program,
    options: Options,
) -> Result<Output, SpawnError> {
    let grants = data.grants.clone();
    let signal = data.scope.signal.clone();
    let request = request(
        &grants,
        program,
        options,
        signal.as_ref().and_then(|s| s.remaining()),
    )?;
    tracing::info!(
        plugin = &*data.plugin,
        cwd = %request.cwd.display(),
        program = ?request.program,
        "spawning in the sandbox"
    );
    let cancelled = async {
        match &signal {
            Some(s) => {
                s.wait().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    let out = toolgate_sandbox::run(request, &grants.sandbox, cancelled)
        .await
        .map_err(spawn_error)?;
    Ok(Output {
        exit_code: out.exit_code,
        signal: out.signal,
        stdout: out.stdout,
        stderr: out.stderr,
        stdout_truncated: out.stdout_truncated,
        stderr_truncated: out.stderr_truncated,
        timed_out: out.timed_out || out.cancelled,
    })
}

fn spawn_error(e: toolgate_sandbox::SpawnError) -> SpawnError {
    use toolgate_sandbox::SpawnError as E;
    match e {
        E::Unenforceable { .. } => SpawnError::SandboxUnavailable(e.to_string()),
        E::InvalidRequest(_) | E::NotFound { .. } => SpawnError::InvalidRequest(e.to_string()),
        other => SpawnError::Failed(other.to_string()),
    }
}

/// Check a request against the grant and turn it into a sandbox request.
pub fn request(
    grants: &Grants,
    program: Program,
    options: Options,
    remaining: Option<Duration>,
) -> Result<SpawnRequest, SpawnError> {
    let cwd = workdir(grants, options.workdir.as_deref())?;
    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), SANDBOX_PATH.into()),
        ("LANG".into(), "C.UTF-8".into()),
    ];
    env.extend(grants.env.iter().cloned());
    for (name, value) in options.env {
        if !grants.env.iter().any(|(granted, _)| *granted == name)
            && name != "PATH"
            && name != "LANG"
        {
            return Err(SpawnError::NotGranted(format!(
                "environment variable `{name}` is not granted; add it to `env = [...]` under the plugin's grants"
            )));
        }
        env.retain(|(n, _)| *n != name);
        env.push((name, value));
    }
    let timeout = match (
        options
            .timeout_ms
            .map(|ms| Duration::from_millis(ms.into())),
        remaining,
    ) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    Ok(SpawnRequest {
        program,
        cwd,
        env,
        stdin: options.stdin,
        timeout,
        stdout_cap: grants.output_cap,
        stderr_cap: grants.output_cap,
    })
}

/// Map the guest's working directory to a granted host directory.
fn workdir(grants: &Grants, requested: Option<&str>) -> Result<PathBuf, SpawnError> {
    let Some(first) = grants.fs.first() else {
        return Err(SpawnError::NotGranted(
            "no directory is granted to this plugin, so there is nowhere to run; grant one with `fs = [...]`".into(),
        ));
    };
    let Some(requested) = requested.filter(|r| !r.is_empty()) else {
        return Ok(first.host.clone());
    };
    let path = Path::new(requested);
    // Which grant does the guest path fall under? `.` grants take relative
    // paths; other guest paths are prefixes.
    let (grant, rest) = grants
        .fs
        .iter()
        .find_map(|g| {
            if path.is_relative() && (g.guest == "." || g.guest.is_empty()) {
                Some((g, path.to_path_buf()))
            } else {
                path.strip_prefix(&g.guest)
                    .ok()
                    .map(|rest| (g, rest.to_path_buf()))
            }
        })
        .ok_or_else(|| {
            SpawnError::InvalidRequest(format!(
                "workdir `{requested}` is not inside a granted directory (granted: {})",
                grants
                    .fs
                    .iter()
                    .map(|g| g.guest.clone())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
    let mut host = grant.host.clone();
    for c in rest.components() {
        match c {
            Component::Normal(s) => host.push(s),
            Component::CurDir => {}
            _ => {
                return Err(SpawnError::InvalidRequest(format!(
                    "workdir `{requested}` leaves the granted directory"
                )));
            }
        }
    }
    // Symlinks inside the grant must not lead out of it.
    let resolved = host
        .canonicalize()
        .map_err(|e| SpawnError::InvalidRequest(format!("workdir `{requested}`: {e}")))?;
    if !resolved.starts_with(&grant.host) {
        return Err(SpawnError::InvalidRequest(format!(
            "workdir `{requested}` resolves outside the granted directory"
        )));
    }
    if !resolved.is_dir() {
        return Err(SpawnError::InvalidRequest(format!(
            "workdir `{requested}` is not a directory"
        )));
    }
    Ok(resolved)
}
