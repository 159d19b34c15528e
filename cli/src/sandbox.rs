//! `toolgate sandbox check`: what this kernel can enforce, then the escape
//! probes run for real, as a table of blocked/allowed.
//!
//! The probes are this very binary, re-executed as `toolgate __probe NAME
//! ARGS…` inside the sandbox; each attempt is paired with a legitimate
//! counterpart that must still work. Then the host's authority: a planted
//! configuration, and every path the configuration names tried from inside
//! `bash`'s sandbox ([`toolgate::authority::try_from_sandbox`]) — the
//! configuration in force (`--config`, else `./toolgate.toml`), and one
//! generated from the schema with every path-valued key set, in a scratch
//! directory.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use toolgate::authority::Verdict as AuthorityVerdict;
use toolgate_sandbox::probes::{Observed, Verdict, run_escape_suite_with};

use super::GlobalArgs;

#[derive(Args, Debug)]
pub struct SandboxArgs {
    #[command(subcommand)]
    command: SandboxCommand,
}

#[derive(Subcommand, Debug)]
enum SandboxCommand {
    /// Report the Landlock ABI and what is enforceable here, then run the
    /// escape probes and print which were blocked.
    ///
    /// The authority cases try, from inside the sandbox `bash` gets in the
    /// working directory, to change every authority path and read every
    /// secret the configuration names (`--config`, else ./toolgate.toml),
    /// and expect a grant reaching host-written data to be refused. They
    /// leave nothing behind: a write is an append of nothing, a rename is
    /// undone at once, and the twin file beside each path is removed.
    Check {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Run each escape probe on a pseudo-terminal of its own (its
        /// controlling terminal), as the programs of `terminal_open` run,
        /// instead of on pipes as `bash` runs them.
        #[arg(long)]
        terminal: bool,
    },
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "NO" }
}

fn observed(o: &Observed) -> String {
    match o {
        Observed::Succeeded => "allowed".into(),
        Observed::Denied => "blocked".into(),
        Observed::Signaled(s) => format!("killed (signal {s})"),
        Observed::TimedOut => "killed (timeout)".into(),
        Observed::Inconclusive => "inconclusive".into(),
        Observed::Refused(_) => "refused to spawn".into(),
    }
}

pub async fn run(global: &GlobalArgs, args: SandboxArgs) -> anyhow::Result<ExitCode> {
    let SandboxCommand::Check { json, terminal } = args.command;
    let config = global.load_config()?;
    let caps = toolgate_sandbox::probe_capabilities();
    let exe = std::env::current_exe()?;
    let scratch =
        std::env::temp_dir().join(format!("toolgate-sandbox-check-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let reports = run_escape_suite_with(&exe, &["__probe"], &scratch, terminal).await;
    let planted = planted_configuration(&scratch.join("authority")).await;
    let workdir = std::env::current_dir()?;
    let mut authority = toolgate::authority::try_from_sandbox(&config, &workdir).await?;
    for c in &mut authority {
        c.key = format!("{} ({})", c.key, config.origin());
    }
    let generated = scratch.join("schema");
    std::fs::create_dir_all(&generated)?;
    let generated = generated.canonicalize()?;
    let sample = toolgate::authority::sample_config(&generated).map_err(anyhow::Error::msg)?;
    authority.extend(
        toolgate::authority::try_from_sandbox(&sample, &generated)
            .await?
            .into_iter()
            .map(|mut c| {
                c.key = format!("{} (generated from the schema)", c.key);
                c
            }),
    );
    let _ = std::fs::remove_dir_all(&scratch);
    let authority_escaped = authority
        .iter()
        .filter(|c| matches!(c.verdict, AuthorityVerdict::Escaped(_)))
        .count();
    let authority_broken = authority
        .iter()
        .filter(|c| matches!(c.verdict, AuthorityVerdict::Inconclusive(_)))
        .count();
    let escaped = reports
        .iter()
        .filter(|r| r.verdict == Verdict::Escaped)
        .count()
        + usize::from(planted.is_err())
        + authority_escaped;
    let broken = reports
        .iter()
        .filter(|r| {
            matches!(
                r.verdict,
                Verdict::CounterpartFailed | Verdict::Inconclusive
            )
        })
        .count()
        + authority_broken;
    if json {
        let v = serde_json::json!({
            "kernel": caps.kernel_release,
            "landlockAbi": caps.landlock_abi,
            "enforceable": {
                "filesystem": caps.fs, "truncate": caps.fs_truncate, "tcpPorts": caps.tcp,
                "scopeSignals": caps.scope_signals, "scopeAbstractUnix": caps.scope_abstract_unix,
                "seccomp": caps.seccomp,
                "processLimit": caps.pids_cgroup || (caps.seccomp && caps.seccomp_user_notif),
                "processLimitBy": if caps.pids_cgroup { Some("pids-cgroup") }
                    else if caps.seccomp && caps.seccomp_user_notif { Some("seccomp-notify") }
                    else { None },
                "mountIsolation": caps.mount_isolation,
                "protectedPaths": caps.mount_isolation,
                "hiddenPaths": caps.mount_isolation,
            },
            "probes": reports.iter().map(|r| serde_json::json!({
                "name": r.name, "category": r.category, "description": r.description,
                "attempt": observed(&r.attempt.observed), "attemptMessage": r.attempt.message,
                "counterpart": r.counterpart.as_ref().map(|c| observed(&c.observed)),
                "verdict": format!("{:?}", r.verdict),
            })).collect::<Vec<_>>(),
            "authority": [{
                "name": "planted-configuration",
                "description": PLANTED,
                "verdict": if planted.is_ok() { "Contained" } else { "Escaped" },
                "message": match &planted { Ok(m) | Err(m) => m },
            }],
            "configured": authority,
            "escaped": escaped,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("kernel {}", caps.kernel_release);
        match caps.landlock_abi {
            Some(abi) => println!("Landlock ABI {abi}"),
            None => println!("Landlock: not available"),
        }
        println!("enforceable here:");
        for (what, ok) in [
            ("file system rules (Landlock)", caps.fs),
            ("truncate control (Landlock ABI 3)", caps.fs_truncate),
            ("TCP port rules (Landlock ABI 4)", caps.tcp),
            ("signal scoping (Landlock ABI 6)", caps.scope_signals),
            (
                "abstract UNIX socket scoping (Landlock ABI 6)",
                caps.scope_abstract_unix,
            ),
            ("seccomp filter", caps.seccomp),
            ("process limit (pids cgroup)", caps.pids_cgroup),
            (
                "  fallback: seccomp user notification",
                caps.seccomp && caps.seccomp_user_notif,
            ),
            (
                "read-only mount view (user + mount namespaces)",
                caps.mount_isolation,
            ),
            (
                "  protected paths inside read-write grants",
                caps.mount_isolation,
            ),
            (
                "  hidden paths (credentials) inside grants",
                caps.mount_isolation,
            ),
        ] {
            println!("  {:<48} {}", what, yes(ok));
        }
        println!("\nescape probes ({}):", reports.len());
        println!(
            "  {:<36} {:<12} {:<18} {:<10} verdict",
            "probe", "category", "attempt", "allowed twin"
        );
        for r in &reports {
            let verdict = match &r.verdict {
                Verdict::Contained => "contained".to_string(),
                Verdict::Escaped => "ESCAPED".to_string(),
                Verdict::CounterpartFailed => "twin failed".to_string(),
                Verdict::Inconclusive => "inconclusive".to_string(),
                Verdict::Skipped(why) => format!("skipped: {why}"),
            };
            println!(
                "  {:<36} {:<12} {:<18} {:<10} {verdict}",
                r.name,
                r.category,
                observed(&r.attempt.observed),
                r.counterpart
                    .as_ref()
                    .map(|c| observed(&c.observed))
                    .unwrap_or_else(|| "-".into()),
            );
        }
        println!("\nthe host's authority:");
        match &planted {
            Ok(m) => println!("  {:<36} contained: {m}", "planted-configuration"),
            Err(m) => println!("  {:<36} ESCAPED: {m}", "planted-configuration"),
        }
        println!(
            "\nwhat the configuration names, tried from bash's sandbox ({}):",
            authority.len()
        );
        for c in &authority {
            let verdict = match &c.verdict {
                AuthorityVerdict::Contained => "contained".to_string(),
                AuthorityVerdict::Refused(_) => "refused: no grant may reach it".to_string(),
                AuthorityVerdict::OutOfReach => "out of bash's reach".to_string(),
                AuthorityVerdict::Absent => "absent (kept absent)".to_string(),
                AuthorityVerdict::Escaped(m) => format!("ESCAPED: {m}"),
                AuthorityVerdict::Inconclusive(m) => format!("inconclusive: {m}"),
            };
            println!("  {:<68} {:<7} {verdict}", c.key, c.attempt);
        }
        println!(
            "\n{} contained, {escaped} escaped, {broken} inconclusive or broken, {} skipped",
            reports
                .iter()
                .filter(|r| r.verdict == Verdict::Contained)
                .count()
                + usize::from(planted.is_ok())
                + authority.iter().filter(|c| c.held()).count(),
            reports
                .iter()
                .filter(|r| matches!(r.verdict, Verdict::Skipped(_)))
                .count()
        );
    }
    Ok(if escaped == 0 && broken == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// What the planted-configuration case tries.
const PLANTED: &str = "a sandboxed command with write access to the working directory creates \
    the absent ./toolgate.toml; the host must not obey it while the command runs, and must move \
    it aside afterwards; a file written after the run is obeyed";

/// The planted-configuration case: `Ok(what happened)` when contained.
async fn planted_configuration(dir: &std::path::Path) -> Result<String, String> {
    use toolgate::state::{AuthorityError, StateDir, read_authority};
    use toolgate_sandbox::{Program, SandboxPolicy, SpawnRequest};
    let work = dir.join("work");
    std::fs::create_dir_all(&work).map_err(|e| format!("cannot set up {}: {e}", work.display()))?;
    let work = work.canonicalize().map_err(|e| e.to_string())?;
    let state = StateDir::open(dir.join("state")).map_err(|e| e.to_string())?;
    let config = work.join("toolgate.toml");
    let policy = SandboxPolicy {
        read_write: vec![work.clone()],
        protected: vec![config.clone()],
        watch_journal: Some(state.journal()),
        ..SandboxPolicy::default()
    };
    let mut req = SpawnRequest::new(
        Program::Shell("echo 'max_parallel_tool_calls = 1' > toolgate.toml && sleep 3".into()),
        &work,
    );
    req.timeout = Some(std::time::Duration::from_secs(10));
    let run =
        tokio::spawn(
            async move { toolgate_sandbox::run(req, &policy, std::future::pending()).await },
        );
    let started = std::time::Instant::now();
    while !config.exists() && started.elapsed() < std::time::Duration::from_secs(5) {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    if !config.exists() {
        let out = run.await.map_err(|e| e.to_string())?;
        return Err(format!(
            "the command could not plant the file, so nothing was tried ({out:?})"
        ));
    }
    let during = read_authority(&config, Some(&state.journal()));
    let out = run
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    if !matches!(during, Err(AuthorityError::Exposed { .. })) {
        return Err(format!(
            "while the command ran, the planted file was read as configuration: {during:?}"
        ));
    }
    if config.exists() {
        return Err(format!(
            "the planted file is still at {} after the run (exit {:?})",
            config.display(),
            out.exit_code
        ));
    }
    std::fs::write(&config, "max_parallel_tool_calls = 2\n").map_err(|e| e.to_string())?;
    match read_authority(&config, Some(&state.journal())) {
        Ok(Some(_)) => Ok("refused while the command ran, moved aside after it; \
            the operator's own file is read"
            .into()),
        other => Err(format!(
            "the operator's own file, written after the run, is not read: {other:?}"
        )),
    }
}
