//! `run` and `spawn_piped` semantics: output, stdin, environment, timeouts,
//! cancellation, process-group containment, output caps, refusals and the
//! best-effort warning. Every test spawns real sandboxed processes.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use toolgate_guest_build::needs;
use toolgate_sandbox::{
    Capabilities, Enforcement, Feature, Output, Program, ResourceLimits, Sandbox, SandboxPolicy,
    SpawnError, SpawnRequest, probe_capabilities, run, spawn_piped,
};

const PROBE: &str = env!("CARGO_BIN_EXE_toolgate-sandbox-probe");

/// A fresh scratch directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "toolgate-run-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
    fn policy(&self) -> SandboxPolicy {
        SandboxPolicy {
            read_write: vec![self.0.clone()],
            read_only: vec![PathBuf::from(PROBE)],
            ..SandboxPolicy::default()
        }
    }
    fn shell(&self, cmd: &str) -> SpawnRequest {
        SpawnRequest::new(Program::Shell(cmd.into()), &self.0)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Every layer, as the crate's own probe sees it now (the build probed
/// for `has_full_kernel`; a test it did not ignore fails when a layer is
/// gone: a strict spawn would be refused, and a test that did not run does
/// not pass).
fn full_kernel() -> Result<(), String> {
    let c = probe_capabilities();
    let ok = c.fs
        && c.fs_truncate
        && c.tcp
        && c.scope_signals
        && c.scope_abstract_unix
        && c.seccomp
        && (c.pids_cgroup || c.seccomp_user_notif)
        && c.mount_isolation;
    if ok {
        Ok(())
    } else {
        Err(format!(
            "this kernel cannot enforce every sandbox layer: {c:?}"
        ))
    }
}

macro_rules! require_full_kernel {
    () => {
        needs::expect("full_kernel", full_kernel())
    };
}

toolgate_guest_build::ci_test!();

async fn run_ok(req: SpawnRequest, policy: &SandboxPolicy) -> Output {
    run(req, policy, std::future::pending())
        .await
        .expect("sandboxed run")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Whether `pid` is a live (non-zombie) process.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rfind(')')
            .and_then(|i| s[i + 1..].split_whitespace().next())
            .is_some_and(|st| st != "Z" && st != "X")
    })
}

fn pids_in(s: &str) -> Vec<i32> {
    s.split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect()
}

async fn wait_dead(pids: &[i32], patience: Duration) -> Vec<i32> {
    let until = Instant::now() + patience;
    loop {
        let alive: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if alive.is_empty() || Instant::now() > until {
            return alive;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn shell_output_exit_code_and_stderr() {
    require_full_kernel!();
    let s = Scratch::new("basic");
    let out = run_ok(
        s.shell("echo out; echo err >&2; echo data > f.txt; cat f.txt; exit 3"),
        &s.policy(),
    )
    .await;
    assert_eq!(text(&out.stdout), "out\ndata\n");
    assert_eq!(text(&out.stderr), "err\n");
    assert_eq!(out.exit_code, Some(3));
    assert_eq!(out.signal, None);
    assert!(!out.timed_out && !out.cancelled && !out.output_flood);
    assert_eq!(
        std::fs::read_to_string(s.0.join("f.txt")).unwrap(),
        "data\n"
    );
}

#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn exec_resolves_bare_names_within_the_view() {
    require_full_kernel!();
    let s = Scratch::new("exec");
    let mut req = SpawnRequest::new(
        Program::Exec {
            program: "printf".into(),
            args: vec!["%s-%s".into(), "a".into(), "b".into()],
        },
        &s.0,
    );
    req.env = vec![("PATH".into(), "/usr/bin:/bin".into())];
    let out = run_ok(req, &s.policy()).await;
    assert_eq!(text(&out.stdout), "a-b");

    // A program that exists only outside the grants is not found.
    let hidden = Scratch::new("hidden");
    std::fs::copy("/bin/true", hidden.0.join("only-here")).unwrap();
    let mut req = SpawnRequest::new(
        Program::Exec {
            program: "only-here".into(),
            args: vec![],
        },
        &s.0,
    );
    req.env = vec![("PATH".into(), hidden.0.display().to_string())];
    match run(req, &s.policy(), std::future::pending()).await {
        Err(SpawnError::NotFound { detail, .. }) => {
            assert!(detail.contains("outside"), "{detail}")
        }
        other => panic!("expected NotFound, got {other:?}"),
    }

    let req = SpawnRequest::new(
        Program::Exec {
            program: "no-such-program-anywhere".into(),
            args: vec![],
        },
        &s.0,
    );
    assert!(matches!(
        run(req, &s.policy(), std::future::pending()).await,
        Err(SpawnError::NotFound { .. })
    ));
}

#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn stdin_is_fed_then_closed_and_defaults_to_dev_null() {
    require_full_kernel!();
    let s = Scratch::new("stdin");
    let mut req = s.shell("cat; echo done");
    req.stdin = Some(b"hello\n".to_vec());
    let out = run_ok(req, &s.policy()).await;
    assert_eq!(text(&out.stdout), "hello\ndone\n");

    let out = run_ok(s.shell("cat; echo eof"), &s.policy()).await;
    assert_eq!(text(&out.stdout), "eof\n");
}

#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn environment_is_exactly_what_the_caller_passes() {
    require_full_kernel!();
    let s = Scratch::new("env");
    let mut req = SpawnRequest::new(
        Program::Exec {
            program: "/usr/bin/env".into(),
            args: vec![],
        },
        &s.0,
    );
    req.env = vec![("A".into(), "1".into()), ("B".into(), "two words".into())];
    let out = run_ok(req, &s.policy()).await;
    assert_eq!(text(&out.stdout), "A=1\nB=two words\n");
}

#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn timeout_kills_the_whole_group() {
    require_full_kernel!();
    let s = Scratch::new("timeout");
    let mut req = s.shell(
        "sleep 1000 & echo $!; (sleep 1000 & echo $!) ; ( (sleep 1000 & echo $!) & ); sleep 1000",
    );
    req.timeout = Some(Duration::from_millis(300));
    let started = Instant::now();
    let out = run_ok(req, &s.policy()).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(out.timed_out);
    assert_eq!(out.signal, Some(libc::SIGKILL));
    let pids = pids_in(&text(&out.stdout));
    assert_eq!(pids.len(), 3, "{}", text(&out.stdout));
    // run() returns only once the group is gone: no waiting here.
    let survivors: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    assert!(survivors.is_empty(), "still alive: {survivors:?}");
}

#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn background_jobs_die_when_the_program_exits() {
    require_full_kernel!();
    let s = Scratch::new("background");
    let started = Instant::now();
    let out = run_ok(s.shell("sleep 1000 & echo $!"), &s.policy()).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(out.exit_code, Some(0));
    let pids = pids_in(&text(&out.stdout));
    assert_eq!(pids.len(), 1);
    assert!(!alive(pids[0]), "background sleep {} survived", pids[0]);
}

#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn cancellation_kills_the_group() {
    require_full_kernel!();
    let s = Scratch::new("cancel");
    let req = s.shell("sleep 1000 & echo $! > bg.pid; sleep 1000");
    let started = Instant::now();
    let out = run(
        req,
        &s.policy(),
        tokio::time::sleep(Duration::from_millis(300)),
    )
    .await
    .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(out.cancelled && !out.timed_out);
    let pid = pids_in(&std::fs::read_to_string(s.0.join("bg.pid")).unwrap());
    assert!(!alive(pid[0]));
}

#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn dropping_the_run_future_kills_the_group() {
    require_full_kernel!();
    let s = Scratch::new("drop");
    let req = s.shell("sleep 1000 & echo $! > bg.pid; echo $$ > sh.pid; sleep 1000");
    let policy = s.policy();
    let fut = run(req, &policy, std::future::pending());
    assert!(
        tokio::time::timeout(Duration::from_millis(400), fut)
            .await
            .is_err()
    );
    let mut pids = pids_in(&std::fs::read_to_string(s.0.join("bg.pid")).unwrap());
    pids.extend(pids_in(
        &std::fs::read_to_string(s.0.join("sh.pid")).unwrap(),
    ));
    let left = wait_dead(&pids, Duration::from_secs(3)).await;
    assert!(left.is_empty(), "still alive after drop: {left:?}");
}

#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn output_beyond_the_cap_is_drained_and_dropped() {
    require_full_kernel!();
    let s = Scratch::new("cap");
    let mut req = SpawnRequest::new(
        Program::Exec {
            program: PROBE.into(),
            args: vec!["flood".into(), (4 << 20).to_string()],
        },
        &s.0,
    );
    req.stdout_cap = 1000;
    let out = run_ok(req, &s.policy()).await;
    assert_eq!(
        out.exit_code,
        Some(0),
        "the child must not block on a full pipe"
    );
    assert_eq!(out.stdout.len(), 1000);
    assert!(out.stdout_truncated && !out.stderr_truncated && !out.output_flood);
}

#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn absurd_output_kills_the_group() {
    require_full_kernel!();
    let s = Scratch::new("flood");
    let mut req = SpawnRequest::new(
        Program::Exec {
            program: PROBE.into(),
            args: vec!["flood".into(), (1u64 << 40).to_string()],
        },
        &s.0,
    );
    req.stdout_cap = 1024;
    req.timeout = Some(Duration::from_secs(20));
    let out = run_ok(req, &s.policy()).await;
    assert!(out.output_flood && out.stdout_truncated && !out.timed_out);
    assert_eq!(out.stdout.len(), 1024);
    assert!(out.signal.is_some());
}

#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn a_shell_fork_bomb_is_bounded_and_the_host_survives() {
    require_full_kernel!();
    let s = Scratch::new("forkbomb");
    let mut policy = s.policy();
    policy.limits.max_processes = Some(24);
    let mut req = s.shell("bomb() { bomb | bomb & }; bomb; sleep 1; echo host-check");
    req.timeout = Some(Duration::from_secs(3));
    let out = run_ok(req, &policy).await;
    assert!(
        text(&out.stderr).contains("fork")
            || text(&out.stderr).contains("Resource temporarily unavailable"),
        "the bomb should have hit the limit: {}",
        text(&out.stderr)
    );
    // The host is fine and can still spawn.
    let again = run_ok(s.shell("echo alive"), &s.policy()).await;
    assert_eq!(text(&again.stdout), "alive\n");
}

/// Regression: under the process limit a legitimate `fork` never fails.
/// The first design answered seccomp fork notifications from a tokio task;
/// a `clone` waiting for that answer sleeps interruptibly, so a SIGCHLD
/// from a child that had just exited made it fail with `EINTR`, and dash
/// (whose SIGCHLD handler lacks `SA_RESTART`) failed most of these command
/// lines with "Cannot fork". Runs in batches of five to add the scheduling
/// pressure of parallel tool calls.
#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn pipelines_never_fail_to_fork_under_the_default_limits() {
    require_full_kernel!();
    let s = Scratch::new("pipelines");
    let policy = s.policy();
    assert_eq!(policy.limits.max_processes, Some(256));
    let mut failures = Vec::new();
    for batch in 0..10 {
        let mut set = tokio::task::JoinSet::new();
        for i in 0..5 {
            let mut req = s.shell("true | true | true; (true); env | wc -l");
            req.env = vec![("PATH".into(), "/usr/bin:/bin".into())];
            req.timeout = Some(Duration::from_secs(20));
            let policy = policy.clone();
            set.spawn(async move { (batch * 5 + i, run_ok(req, &policy).await) });
        }
        while let Some(r) = set.join_next().await {
            let (n, out) = r.unwrap();
            if out.exit_code != Some(0) || !out.stderr.is_empty() {
                failures.push(format!(
                    "run {n}: exit {:?}, stderr {:?}",
                    out.exit_code,
                    text(&out.stderr)
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of 50 runs failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Where the host can create pids cgroups, each sandbox runs in one of its
/// own, limited to its `max_processes`, and the cgroup is gone once `run`
/// has returned.
#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn the_process_limit_is_a_pids_cgroup_of_the_sandboxs_own() {
    require_full_kernel!();
    // Whether this process may create a pids cgroup depends on how it runs
    // (delegation, container), not only on the kernel: known at run time only.
    let pids = if probe_capabilities().pids_cgroup {
        Ok(())
    } else {
        Err("no pids cgroup this process may create and join (the seccomp fallback is tested below)".into())
    };
    if !needs::present_or_skip(
        "pids_cgroup",
        pids,
        "run as root or in a delegated cgroup v2 subtree (systemd-run --user --scope -p Delegate=yes)",
    ) {
        return;
    }
    let s = Scratch::new("cgroup");
    let mut policy = s.policy();
    policy.limits.max_processes = Some(7);
    // The sandbox cannot read /proc/self/cgroup (outside its view); the host can.
    let mut child = spawn_piped(
        Program::Shell("sleep 1000 & echo $!; cat > /dev/null".into()),
        &s.0,
        &[],
        &policy,
    )
    .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let bg: i32 = lines.next_line().await.unwrap().unwrap().parse().unwrap();
    let own_of = |pid: i32| {
        let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        cgroups
            .lines()
            .find_map(|l| {
                let mut f = l.splitn(3, ':');
                let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
                ctrls
                    .split(',')
                    .any(|c| c == "pids")
                    .then(|| path.to_string())
            })
            .or_else(|| {
                cgroups
                    .lines()
                    .find_map(|l| l.strip_prefix("0::").map(String::from))
            })
            .unwrap_or_else(|| panic!("no pids cgroup in {cgroups:?}"))
    };
    let own = own_of(child.id() as i32);
    let name = own.rsplit('/').next().unwrap().to_string();
    assert!(
        own.contains("/toolgate/") && name.starts_with(&format!("{}-", std::process::id())),
        "the sandbox should be in a cgroup of its own, is in {own:?}"
    );
    assert_eq!(own, own_of(bg), "a descendant left the sandbox's cgroup");
    let dir = [
        "/sys/fs/cgroup/pids",
        "/sys/fs/cgroup",
        "/sys/fs/cgroup/unified",
    ]
    .into_iter()
    .map(|m| PathBuf::from(format!("{m}{own}")))
    .find(|p| p.join("pids.max").exists())
    .unwrap_or_else(|| panic!("cgroup {own} not found under /sys/fs/cgroup"));
    assert_eq!(
        std::fs::read_to_string(dir.join("pids.max"))
            .unwrap()
            .trim(),
        "8" // 7 for the program, 1 for its watcher
    );
    drop(child.stdin.take());
    child.wait().await.unwrap();
    drop(child);
    // Gone once the child is (possibly a moment later, when the last task is released).
    let until = Instant::now() + Duration::from_secs(5);
    while dir.exists() {
        assert!(Instant::now() < until, "cgroup {own} was not removed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Without a pids cgroup the limit falls back to seccomp notification
/// answered by the host: a fork bomb still hits the limit.
#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn without_a_pids_cgroup_the_notification_fallback_bounds_a_fork_bomb() {
    require_full_kernel!();
    // `has_full_kernel` includes seccomp user notification.
    needs::expect(
        "full_kernel",
        if probe_capabilities().seccomp_user_notif {
            Ok(())
        } else {
            Err("no seccomp user notification on this kernel".into())
        },
    );
    let sandbox = Sandbox::with_capabilities(toolgate_sandbox::Capabilities {
        pids_cgroup: false,
        ..probe_capabilities()
    });
    let s = Scratch::new("fallback");
    let mut policy = s.policy();
    policy.limits.max_processes = Some(24);
    let mut req = s.shell("bomb() { bomb | bomb & }; bomb; sleep 1; echo host-check");
    req.timeout = Some(Duration::from_secs(3));
    let out = sandbox
        .run(req, &policy, std::future::pending())
        .await
        .expect("sandboxed run");
    let err = text(&out.stderr);
    assert!(
        err.contains("fork") || err.contains("Resource temporarily unavailable"),
        "the bomb should have hit the limit: {err}"
    );
}

#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn the_process_limit_is_per_sandbox_not_per_user() {
    require_full_kernel!();
    let a = Scratch::new("limit-a");
    let b = Scratch::new("limit-b");
    let mut pa = a.policy();
    pa.limits.max_processes = Some(16);
    let mut pb = b.policy();
    pb.limits.max_processes = Some(16);
    let cmd = "for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.3 & done; wait; echo ok";
    let (ra, rb) = tokio::join!(run_ok(a.shell(cmd), &pa), run_ok(b.shell(cmd), &pb));
    assert_eq!(text(&ra.stdout), "ok\n", "{}", text(&ra.stderr));
    assert_eq!(text(&rb.stdout), "ok\n", "{}", text(&rb.stderr));
}

#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn requests_outside_the_grants_are_refused() {
    require_full_kernel!();
    let s = Scratch::new("refuse");
    let other = Scratch::new("refuse-other");
    // Working directory not granted.
    let req = SpawnRequest::new(Program::Shell("true".into()), &other.0);
    match run(req, &s.policy(), std::future::pending()).await {
        Err(SpawnError::InvalidRequest(m)) => assert!(m.contains("not inside"), "{m}"),
        r => panic!("expected a refusal, got {r:?}"),
    }
    // A grant that does not exist, and a relative one.
    for bad in [s.0.join("missing"), PathBuf::from("relative/dir")] {
        let policy = SandboxPolicy {
            read_write: vec![bad],
            ..SandboxPolicy::default()
        };
        assert!(matches!(
            run(s.shell("true"), &policy, std::future::pending()).await,
            Err(SpawnError::InvalidRequest(_))
        ));
    }
    // The default policy grants nothing writable: the system view only.
    let out = run_ok(
        SpawnRequest::new(
            Program::Shell("echo x > /tmp/x-$$ || echo refused".into()),
            "/usr",
        ),
        &SandboxPolicy::default(),
    )
    .await;
    assert_eq!(text(&out.stdout), "refused\n");
}

#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn an_unenforceable_policy_is_refused_unless_waived() {
    require_full_kernel!();
    let s = Scratch::new("strict");
    // Pretend the kernel has Landlock ABI 3: no TCP rules, no scoping.
    let old = Sandbox::with_capabilities(probe_capabilities().with_landlock_abi(Some(3)));
    match old
        .run(s.shell("true"), &s.policy(), std::future::pending())
        .await
    {
        Err(SpawnError::Unenforceable { feature, needs, .. }) => {
            assert_eq!(feature, Feature::ScopeSignals);
            assert!(needs.contains("ABI 6"), "{needs}");
        }
        r => panic!("expected Unenforceable, got {r:?}"),
    }
    // Waiving the scoping is not enough when TCP ports are granted.
    let mut policy = s.policy();
    policy.tcp_connect_ports = vec![443];
    policy.enforcement = Enforcement::Waive(BTreeSet::from([
        Feature::ScopeSignals,
        Feature::ScopeAbstractUnix,
    ]));
    match old
        .run(s.shell("true"), &policy, std::future::pending())
        .await
    {
        Err(e @ SpawnError::Unenforceable { .. }) => {
            assert!(matches!(
                e,
                SpawnError::Unenforceable {
                    feature: Feature::TcpPorts,
                    ..
                }
            ));
            let msg = e.to_string();
            assert!(
                msg.contains("tcp_ports") && msg.contains("Landlock ABI 3"),
                "{msg}"
            );
        }
        r => panic!("expected Unenforceable, got {r:?}"),
    }
    // Without the TCP grant the waiver covers everything missing.
    policy.tcp_connect_ports.clear();
    let out = old
        .run(s.shell("echo ran"), &policy, std::future::pending())
        .await
        .unwrap();
    assert_eq!(text(&out.stdout), "ran\n");
}

/// Collects formatted tracing output.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn best_effort_runs_and_warns_on_every_spawn() {
    require_full_kernel!();
    let s = Scratch::new("besteffort");
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let old = Sandbox::with_capabilities(probe_capabilities().with_landlock_abi(Some(4)));
    let mut policy = s.policy();
    policy.enforcement = Enforcement::BestEffort;
    for _ in 0..2 {
        let out = old
            .run(s.shell("echo ok"), &policy, std::future::pending())
            .await
            .unwrap();
        assert_eq!(text(&out.stdout), "ok\n");
    }
    let log = text(&captured.0.lock().unwrap());
    let warnings = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("scope_signals"))
        .count();
    assert_eq!(
        warnings, 2,
        "one warning per spawn for the missing signal scoping:\n{log}"
    );
    assert!(log.contains("abstract UNIX socket scoping"), "{log}");
    // The full kernel needs no warning.
    captured.0.lock().unwrap().clear();
    let mut strict = s.policy();
    strict.enforcement = Enforcement::BestEffort;
    run_ok(s.shell("true"), &strict).await;
    assert!(!text(&captured.0.lock().unwrap()).contains("WARN"));
}

#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn spawn_piped_talks_and_dropping_it_kills_the_group() {
    require_full_kernel!();
    let s = Scratch::new("piped");
    let mut child = spawn_piped(
        Program::Shell("sleep 1000 & echo $!; while read l; do echo \"got $l\"; done".into()),
        &s.0,
        &[],
        &s.policy(),
    )
    .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let bg: i32 = lines.next_line().await.unwrap().unwrap().parse().unwrap();
    stdin.write_all(b"ping\n").await.unwrap();
    assert_eq!(lines.next_line().await.unwrap().unwrap(), "got ping");
    let leader = child.id() as i32;
    assert!(alive(leader) && alive(bg));
    drop(child);
    let left = wait_dead(&[leader, bg], Duration::from_secs(3)).await;
    assert!(left.is_empty(), "alive after drop: {left:?}");
}

#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn spawn_piped_wait_reaps_and_cleans_up() {
    require_full_kernel!();
    let s = Scratch::new("piped-wait");
    let mut child = spawn_piped(
        Program::Shell("sleep 1000 & echo $!; cat > /dev/null; exit 7".into()),
        &s.0,
        &[],
        &s.policy(),
    )
    .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let bg: i32 = lines.next_line().await.unwrap().unwrap().parse().unwrap();
    drop(child.stdin.take()); // EOF → cat ends → the shell exits 7
    let status = child.wait().await.unwrap();
    assert_eq!(status.code(), Some(7));
    assert!(!alive(bg), "background job outlived wait()");
}

#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn limits_apply_inside() {
    require_full_kernel!();
    let s = Scratch::new("limits");
    let mut policy = s.policy();
    policy.limits = ResourceLimits {
        open_files: Some(20),
        file_size_bytes: Some(4096),
        ..ResourceLimits::default()
    };
    let out = run_ok(s.shell("ulimit -n; ulimit -f; ulimit -c"), &policy).await;
    // ulimit -f reports 512-byte blocks.
    assert_eq!(text(&out.stdout), "20\n8\n0\n");
}

#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn a_read_only_grant_inside_a_read_write_one_stays_read_only() {
    require_full_kernel!();
    let s = Scratch::new("nested");
    let vendor = s.0.join("vendor");
    std::fs::create_dir(&vendor).unwrap();
    std::fs::write(vendor.join("lib.txt"), "vendored\n").unwrap();
    let mut policy = s.policy();
    policy.read_only.push(vendor.clone());
    let out = run_ok(
        s.shell(
            "cat vendor/lib.txt; echo x >> vendor/lib.txt || echo nested-denied; \
             touch vendor/new || echo create-denied; echo ok > top.txt && echo top-ok",
        ),
        &policy,
    )
    .await;
    assert_eq!(
        text(&out.stdout),
        "vendored\nnested-denied\ncreate-denied\ntop-ok\n",
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(vendor.join("lib.txt")).unwrap(),
        "vendored\n"
    );
}

#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn relative_cwd_is_invalid() {
    require_full_kernel!();
    let s = Scratch::new("relcwd");
    let req = SpawnRequest::new(Program::Shell("true".into()), Path::new("relative"));
    assert!(matches!(
        run(req, &s.policy(), std::future::pending()).await,
        Err(SpawnError::InvalidRequest(_))
    ));
}

#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn a_real_setuid_copy_cannot_be_made_but_a_normal_chmod_works() {
    require_full_kernel!();
    let s = Scratch::new("setuid");
    let out = run_ok(
        s.shell(
            "cp /bin/true x && chmod 4755 x; echo chmod=$?; chmod g+s x; echo gs=$?; \
             install -m 6755 /bin/true y; echo install=$?; chmod 755 x && echo plain=$?",
        ),
        &s.policy(),
    )
    .await;
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("plain=0") && !stdout.contains("chmod=0") && !stdout.contains("gs=0"),
        "{stdout}{}",
        text(&out.stderr)
    );
    // What is on the host's file system is what counts (we may be root).
    use std::os::unix::fs::PermissionsExt;
    for f in ["x", "y"] {
        if let Ok(m) = std::fs::metadata(s.0.join(f)) {
            assert_eq!(
                m.permissions().mode() & 0o6000,
                0,
                "{f} carries a setuid/setgid bit on the host"
            );
        }
    }
    assert_eq!(
        std::fs::metadata(s.0.join("x"))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777,
        0o755
    );
}

#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn a_protected_symlink_is_restored_and_its_target_stays_read_only() {
    require_full_kernel!();
    let s = Scratch::new("protected-link");
    std::fs::write(s.0.join("real.toml"), "operator\n").unwrap();
    std::os::unix::fs::symlink("real.toml", s.0.join("cfg.toml")).unwrap();
    let mut policy = s.policy();
    policy.protected = vec![s.0.join("cfg.toml")];
    let out = run_ok(
        s.shell(
            "echo evil > real.toml || echo target-denied; rm cfg.toml && echo evil > cfg.toml \
             && echo replaced",
        ),
        &policy,
    )
    .await;
    assert_eq!(
        text(&out.stdout),
        "target-denied\nreplaced\n",
        "{}",
        text(&out.stderr)
    );
    // After the run: the link is back, its target untouched, the planted
    // file moved aside for the operator to see.
    assert_eq!(
        std::fs::read_link(s.0.join("cfg.toml")).unwrap(),
        PathBuf::from("real.toml")
    );
    assert_eq!(
        std::fs::read_to_string(s.0.join("cfg.toml")).unwrap(),
        "operator\n"
    );
    let aside: Vec<String> = std::fs::read_dir(&s.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("cfg.toml.quarantined-"))
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(
        std::fs::read_to_string(s.0.join(&aside[0])).unwrap(),
        "evil\n"
    );
}

#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn a_protected_directory_wins_over_a_grant_nested_in_it() {
    require_full_kernel!();
    let s = Scratch::new("protected-nested");
    std::fs::create_dir_all(s.0.join(".git/hooks")).unwrap();
    let mut policy = s.policy();
    policy.read_write.push(s.0.join(".git/hooks"));
    policy.protected = vec![s.0.join(".git")];
    let out = run_ok(
        s.shell("touch .git/hooks/post-checkout || echo hook-denied; touch ok && echo top-ok"),
        &policy,
    )
    .await;
    assert_eq!(text(&out.stdout), "hook-denied\ntop-ok\n");
    assert!(!s.0.join(".git/hooks/post-checkout").exists());
}

#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn protected_paths_in_a_grant_need_the_mount_view_even_when_it_is_waived() {
    require_full_kernel!();
    let s = Scratch::new("protected-view");
    std::fs::write(s.0.join("toolgate.toml"), "").unwrap();
    let no_view = Sandbox::with_capabilities(Capabilities {
        mount_isolation: false,
        ..probe_capabilities()
    });
    let mut policy = s.policy();
    policy.enforcement = Enforcement::Waive(BTreeSet::from([Feature::MountIsolation]));
    policy.protected = vec![s.0.join("toolgate.toml")];
    match no_view
        .run(
            s.shell("echo evil > toolgate.toml"),
            &policy,
            std::future::pending(),
        )
        .await
    {
        Err(
            e @ SpawnError::Unenforceable {
                feature: Feature::ProtectedPaths,
                ..
            },
        ) => assert!(e.to_string().contains("protected_paths"), "{e}"),
        r => panic!("expected a refusal, got {r:?}"),
    }
    assert_eq!(
        std::fs::read_to_string(s.0.join("toolgate.toml")).unwrap(),
        ""
    );
    // A protected path outside every read-write grant needs no mount.
    policy.protected = vec![PathBuf::from("/etc/passwd")];
    let out = no_view
        .run(s.shell("echo ran"), &policy, std::future::pending())
        .await
        .unwrap();
    assert_eq!(text(&out.stdout), "ran\n");
}

/// A hidden file inside a hidden directory (the serve token in the state
/// directory): the directory's mask covers it, and the spawn runs (it used
/// to fail its setup — nothing left to mount over under the empty mask —
/// and never answer).
#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn a_hidden_file_inside_a_hidden_directory_is_masked_once() {
    let s = Scratch::new("hidden-nested");
    let state = s.0.join("state");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("token"), "secret").unwrap();
    let mut policy = s.policy();
    policy.hidden = vec![state.clone(), state.join("token")];
    let mut req = s.shell("cat state/token; echo twin > ok.txt; cat ok.txt");
    req.timeout = Some(std::time::Duration::from_secs(10));
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        run(req, &policy, std::future::pending()),
    )
    .await
    .expect("the spawn answers")
    .expect("the spawn runs");
    let stdout = text(&out.stdout);
    assert!(!stdout.contains("secret"), "{stdout}");
    assert!(stdout.contains("twin"), "{stdout} / {}", text(&out.stderr));
}

/// A setup step that fails after the sandbox's watcher is forked (here
/// `chdir` into a working directory that the sandbox hides, and an exec
/// whose interpreter is missing) fails the spawn at once, naming the step:
/// the watcher learns of the failure and exits instead of staying for a
/// program that never ran (std's spawn waits for it: this hung the host's
/// thread for ever).
#[tokio::test]
#[cfg_attr(
    not(has_full_kernel),
    ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
)]
async fn a_setup_or_exec_failure_after_the_watcher_fork_fails_fast() {
    let s = Scratch::new("late-failure");
    let hidden = s.0.join("hidden");
    std::fs::create_dir_all(hidden.join("inside")).unwrap();
    let mut policy = s.policy();
    policy.hidden = vec![hidden.clone()];
    let mut req = SpawnRequest::new(Program::Shell("echo ran".into()), hidden.join("inside"));
    req.timeout = Some(Duration::from_secs(10));
    let started = std::time::Instant::now();
    let out = tokio::time::timeout(
        Duration::from_secs(20),
        run(req, &policy, std::future::pending()),
    )
    .await
    .expect("the spawn answers instead of hanging");
    let err = out.expect_err("a working directory the sandbox hides cannot be entered");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    let msg = format!("{err:#}");
    assert!(
        msg.contains("working directory") || msg.contains("chdir"),
        "{msg}"
    );
    // The legitimate twin: the same policy, a visible working directory.
    let out = run_ok(s.shell("echo ran"), &policy).await;
    assert_eq!(text(&out.stdout), "ran\n");
}
