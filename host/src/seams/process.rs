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
//!
//! The seams as units (see [`crate::seams`]): `shell` granted by
//! `shell = true` ([`shell_seam`]), `subprocess` by a list of programs
//! ([`subprocess_seam`]); no state of their own; the 0.2 interfaces
//! implemented on [`Requester`], the view of a store they need.

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use toolgate_sandbox::{Program, SpawnRequest};
use wasmtime::component::{HasData, Linker};

use super::{Seam, SeamCtx, SeamHost};
use crate::bindings::v0_2::toolgate::plugin as wit;
use crate::call::{CallInfo, CallSignal};
use crate::grants::Capability;
use crate::grants::Grants;

/// The `shell` seam: granted by `shell = true`.
pub fn shell_seam<T: SeamHost>() -> Seam<T> {
    Seam {
        interface: "shell",
        capability: Capability::Shell,
        sync: false,
        granted: |g| if g.shell { Ok(()) } else { Err("shell = true") },
        link: |linker| {
            wit::shell::add_to_linker::<T, Requester<'static>>(linker, |t| {
                Requester::new(t.seams())
            })
        },
    }
}

/// The `subprocess` seam: granted by a list of programs.
pub fn subprocess_seam<T: SeamHost>() -> Seam<T> {
    Seam {
        interface: "subprocess",
        capability: Capability::Subprocess,
        sync: false,
        granted: |g| {
            if g.subprocess.is_empty() {
                Err("subprocess = [\"<program>\", ...]")
            } else {
                Ok(())
            }
        },
        link: |linker| {
            wit::subprocess::add_to_linker::<T, Requester<'static>>(linker, |t| {
                Requester::new(t.seams())
            })
        },
    }
}

/// The `process` interface: the types the process seams share (no
/// functions; linked once, with every seam).
pub fn add_types_to_linker<T: SeamHost>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    wit::process::add_to_linker::<T, Requester<'static>>(linker, |t| Requester::new(t.seams()))
}

/// The `PATH` a spawned process gets.
pub const SANDBOX_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// What a component asks for besides the program (the WIT `options`).
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Working directory, a guest path inside a grant. Default: the first grant.
    pub workdir: Option<String>,
    pub stdin: Option<Vec<u8>>,
    /// Variables to set; only names the grant allows.
    pub env: Vec<(String, String)>,
    /// Kill the process group after this long.
    pub timeout_ms: Option<u32>,
}

/// What the process did (the WIT `output`).
#[derive(Clone, Debug, Default)]
pub struct Output {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    /// The timeout (or the call's cancellation) ended it.
    pub timed_out: bool,
}

/// Why a process was not run (the WIT `spawn-error`): an answer to the
/// guest, not a trap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpawnError {
    /// The grant does not allow it (which grant, and how to add it).
    NotGranted(String),
    /// The sandbox the grant needs cannot be enforced on this kernel.
    SandboxUnavailable(String),
    /// The request is malformed.
    InvalidRequest(String),
    /// The process could not be started.
    Failed(String),
}

/// Who asks: the plugin, its grant, and the signal of the call it serves
/// (the process seams' view of a store).
#[derive(Clone, Copy)]
pub struct Requester<'a> {
    pub plugin: &'a str,
    pub grants: &'a Grants,
    pub signal: Option<&'a CallSignal>,
    /// The call served (its id and scope go with every egress connection).
    pub call: Option<&'a CallInfo>,
    /// Where egress connections are recorded besides the log (the audit
    /// record), if the host records.
    pub egress_record: Option<&'a crate::egress::proxy::RecordSink>,
    /// Who the call's connections ask (`[egress] ask`), if anyone.
    pub egress_ask: Option<&'a std::sync::Arc<crate::egress::ask::CallAsk>>,
}

impl<'a> Requester<'a> {
    pub fn new(ctx: SeamCtx<'a>) -> Self {
        Requester {
            plugin: ctx.plugin,
            grants: ctx.grants,
            signal: ctx.signal,
            call: ctx.call,
            egress_record: ctx.shared.egress_record.get(),
            egress_ask: ctx.extensions.get(),
        }
    }
}

impl HasData for Requester<'static> {
    type Data<'a> = Requester<'a>;
}

impl wit::process::Host for Requester<'_> {}

impl wit::shell::Host for Requester<'_> {
    async fn run(
        &mut self,
        command: String,
        options: wit::process::Options,
    ) -> wasmtime::Result<Result<wit::process::Output, wit::process::SpawnError>> {
        let ran = shell(*self, command, options.into()).await;
        Ok(ran.map(Into::into).map_err(Into::into))
    }
}

impl wit::subprocess::Host for Requester<'_> {
    async fn run(
        &mut self,
        program: String,
        args: Vec<String>,
        options: wit::process::Options,
    ) -> wasmtime::Result<Result<wit::process::Output, wit::process::SpawnError>> {
        let ran = subprocess(*self, program, args, options.into()).await;
        Ok(ran.map(Into::into).map_err(Into::into))
    }
}

impl From<wit::process::Options> for Options {
    fn from(o: wit::process::Options) -> Self {
        Options {
            workdir: o.workdir,
            stdin: o.stdin,
            env: o.env,
            timeout_ms: o.timeout_ms,
        }
    }
}

impl From<Output> for wit::process::Output {
    fn from(o: Output) -> Self {
        wit::process::Output {
            exit_code: o.exit_code,
            signal: o.signal,
            stdout: o.stdout,
            stderr: o.stderr,
            stdout_truncated: o.stdout_truncated,
            stderr_truncated: o.stderr_truncated,
            timed_out: o.timed_out,
        }
    }
}

impl From<SpawnError> for wit::process::SpawnError {
    fn from(e: SpawnError) -> Self {
        use wit::process::SpawnError as W;
        match e {
            SpawnError::NotGranted(m) => W::NotGranted(m),
            SpawnError::SandboxUnavailable(m) => W::SandboxUnavailable(m),
            SpawnError::InvalidRequest(m) => W::InvalidRequest(m),
            SpawnError::Failed(m) => W::Failed(m),
        }
    }
}

/// `shell.run`: `/bin/sh -c COMMAND` in the sandbox.
pub async fn shell(
    who: Requester<'_>,
    command: String,
    options: Options,
) -> Result<Output, SpawnError> {
    if !who.grants.shell {
        return Err(SpawnError::NotGranted(format!(
            "plugin `{}` is not granted the shell seam; add `shell = true` under [plugins.{}.grants] in toolgate.toml",
            who.plugin, who.plugin
        )));
    }
    if command.trim().is_empty() {
        return Err(SpawnError::InvalidRequest("the command is empty".into()));
    }
    spawn(who, Program::Shell(command), options).await
}

/// `subprocess.run`: PROGRAM ARGS… in the sandbox, no shell. PROGRAM must be
/// on the plugin's allow-list, exactly as written there.
pub async fn subprocess(
    who: Requester<'_>,
    program: String,
    args: Vec<String>,
    options: Options,
) -> Result<Output, SpawnError> {
    let allowed = &who.grants.subprocess;
    if !allowed.contains(&program) {
        return Err(SpawnError::NotGranted(if allowed.is_empty() {
            format!(
                "plugin `{}` may not run programs; list them in `subprocess = [...]` under [plugins.{}.grants]",
                who.plugin, who.plugin
            )
        } else {
            format!(
                "plugin `{}` may run only {}; `{program}` is not on its subprocess list",
                who.plugin,
                allowed
                    .iter()
                    .map(|p| format!("`{p}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }));
    }
    spawn(
        who,
        Program::Exec {
            program: PathBuf::from(program),
            args,
        },
        options,
    )
    .await
}

async fn spawn(
    who: Requester<'_>,
    program: Program,
    options: Options,
) -> Result<Output, SpawnError> {
    let grants = who.grants;
    let signal = who.signal;
    let mut request = request(grants, program, options, signal.and_then(|s| s.remaining()))?;
    let refusals = crate::egress::proxy::Refusals::default();
    let policy = sandbox_policy(who, &mut request.env, Some(&refusals));
    tracing::info!(
        plugin = who.plugin,
        cwd = %request.cwd.display(),
        program = ?request.program,
        "spawning in the sandbox"
    );
    let cancelled = async {
        match signal {
            Some(s) => {
                s.wait().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    let out = toolgate_sandbox::run(request, &policy, cancelled)
        .await
        .map_err(spawn_error)?;
    let mut stderr = out.stderr;
    if let Some(note) = refusals.note() {
        stderr.extend_from_slice(note.as_bytes());
    }
    Ok(Output {
        exit_code: out.exit_code,
        signal: out.signal,
        stdout: out.stdout,
        stderr,
        stdout_truncated: out.stdout_truncated,
        stderr_truncated: out.stderr_truncated,
        timed_out: out.timed_out || out.cancelled,
    })
}

/// The sandbox of one spawn for `who`: the grant's, and with an `egress`
/// grant a proxy of its own for this call (and its variables in `env`).
/// `refusals`, when given, keeps what the proxy refuses, for the spawn's
/// result.
pub(crate) fn sandbox_policy<'a>(
    who: Requester<'a>,
    env: &mut Vec<(String, String)>,
    refusals: Option<&crate::egress::proxy::Refusals>,
) -> std::borrow::Cow<'a, toolgate_sandbox::SandboxPolicy> {
    let Some(egress) = &who.grants.egress else {
        return std::borrow::Cow::Borrowed(&who.grants.sandbox);
    };
    let attribution = crate::egress::proxy::Attribution {
        call_id: who.call.map(|c| c.call_id.clone()).unwrap_or_default(),
        plugin: who.plugin.to_string(),
        scope: who.call.map(|c| c.agent_scope.clone()).unwrap_or_default(),
    };
    env.retain(|(k, _)| !crate::egress::PROXY_VARIABLES.contains(&k.to_ascii_uppercase().as_str()));
    env.extend(crate::egress::proxy_env(egress));
    std::borrow::Cow::Owned(crate::egress::sandbox_policy(
        &who.grants.sandbox,
        egress,
        attribution,
        match refusals {
            Some(r) => Some(r.sink(who.egress_record.cloned())),
            None => who.egress_record.cloned(),
        },
        who.egress_ask
            .cloned()
            .map(|a| a as std::sync::Arc<dyn crate::egress::ask::Asker>),
    ))
}

pub(crate) fn spawn_error(e: toolgate_sandbox::SpawnError) -> SpawnError {
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
