//! Preparing, spawning, watching and reaping a sandboxed process.
//!
//! The parent does all the work that allocates or may block — deciding what
//! the kernel must enforce ([`crate::enforce`]), resolving the program and
//! checking the grants ([`crate::view`]), opening the Landlock rules,
//! assembling the BPF program, computing limits — and hands the child a
//! [`ChildPlan`] of raw values. After `spawn` it:
//!
//! * with a process limit, keeps the sandbox's pids cgroup ([`crate::cgroup`])
//!   until the group is gone, or, where no pids cgroup is available, receives
//!   the seccomp listener and starts the [`crate::supervisor`] task that
//!   answers fork notifications;
//! * learns the program's end from the sandbox's *watcher* (the process it
//!   spawned, which forked the program: see [`crate::child`], step 1) over
//!   the report socket; the watcher stays alive until the host kills the
//!   group, so the group id cannot be reused while the host still intends
//!   to `killpg` it, and a host that dies meanwhile is still seen;
//! * on exit, timeout, cancellation, output flood or drop: `killpg(SIGKILL)`
//!   the whole group (background jobs and double-forked daemons included: no
//!   descendant can leave the group), reaps the watcher, and waits until no
//!   member of the group is alive.

use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, Interest};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};
use tokio::task::JoinHandle;

use crate::cgroup::SandboxCgroup;
use crate::child::{self, ChildPlan, ExecPlan, Report};
use crate::enforce;
use crate::error::SpawnError;
use crate::kernel::{Capabilities, probe_capabilities};
use crate::landlock::{self, RulesetSpec};
use crate::policy::{Feature, SandboxPolicy};
use crate::protect::Watch;
use crate::request::{Output, Program, SpawnRequest, flood_limit};
use crate::seccomp::{self, FilterOptions};
use crate::supervisor;
use crate::system_paths::{self, SystemEntry};
use crate::view::{View, check_env, cstring};

/// How long the host waits for killed processes to die and pipes to close.
const KILL_PATIENCE: Duration = Duration::from_secs(2);

/// Spawns sandboxed processes with the capabilities of this kernel.
///
/// Cheap to clone. [`Sandbox::new`] probes the kernel (once per process);
/// [`Sandbox::with_capabilities`] pretends the kernel has less, which is how
/// the tests exercise the refusal and best-effort paths on a modern kernel.
#[derive(Clone, Debug)]
pub struct Sandbox {
    caps: Capabilities,
    system: Arc<Vec<SystemEntry>>,
}

impl Default for Sandbox {
    fn default() -> Self {
        Sandbox::new()
    }
}

impl Sandbox {
    /// A sandbox using everything this kernel can enforce.
    pub fn new() -> Self {
        Sandbox::with_capabilities(probe_capabilities())
    }

    /// A sandbox that uses at most `caps` (intersected with what the kernel
    /// really has).
    pub fn with_capabilities(caps: Capabilities) -> Self {
        let system = system_paths::system_view()
            .into_iter()
            .map(|mut e| {
                if let Ok(p) = e.path.canonicalize() {
                    e.path = p;
                }
                e
            })
            .collect();
        Sandbox {
            caps: caps.intersect(&probe_capabilities()),
            system: Arc::new(system),
        }
    }

    /// What this sandbox can enforce.
    pub fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    /// Runs `req` under `policy` and collects its output.
    ///
    /// The whole process group is killed when the program exits (background
    /// jobs do not outlive it), when the timeout passes, when `cancel`
    /// completes, when output floods, or when this future is dropped. When
    /// this returns, no process it started is alive.
    pub async fn run(
        &self,
        mut req: SpawnRequest,
        policy: &SandboxPolicy,
        cancel: impl Future<Output = ()>,
    ) -> Result<Output, SpawnError> {
        let stdin_data = req.stdin.take();
        let stdin = if stdin_data.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        };
        let mut running = self.spawn(
            &req.program,
            &req.cwd,
            &req.env,
            policy,
            Stdio3::Piped(stdin),
        )?;
        let pgid = running.pgid;
        let stdout = running.child.stdout.take().expect("stdout is piped");
        let stderr = running.child.stderr.take().expect("stderr is piped");
        let stdin_pipe = running.child.stdin.take();

        let mut out = Output::default();
        let (mut out_done, mut err_done, mut stdin_done) = (false, false, stdin_pipe.is_none());
        let (mut exited, mut killed) = (false, false);
        // The program's end as its watcher reported it (`None`: the watcher
        // was killed first, by a timeout, a cancellation or a flood).
        let mut reported: Option<ExitStatus> = None;

        {
            let out_fut = read_capped(stdout, req.stdout_cap, pgid);
            let err_fut = read_capped(stderr, req.stderr_cap, pgid);
            let stdin_fut = async move {
                if let (Some(mut pipe), Some(data)) = (stdin_pipe, stdin_data) {
                    let _ = pipe.write_all(&data).await;
                    let _ = pipe.shutdown().await;
                }
            };
            let deadline = async {
                match req.timeout {
                    Some(t) => tokio::time::sleep(t).await,
                    None => std::future::pending().await,
                }
            };
            let exit_fut = program_exit(&running.report);
            let drain = tokio::time::sleep(Duration::from_secs(365 * 24 * 3600));
            tokio::pin!(
                out_fut, err_fut, stdin_fut, deadline, exit_fut, drain, cancel
            );

            loop {
                if exited && out_done && err_done {
                    break;
                }
                tokio::select! {
                    status = &mut exit_fut, if !exited => {
                        exited = true;
                        match status {
                            Ok(s) => reported = s,
                            Err(e) => tracing::warn!(pgid, error = %e, "waiting for the sandboxed process failed"),
                        }
                        // Whatever it left running in the background goes with it.
                        supervisor::kill_group(pgid);
                        drain.as_mut().reset(tokio::time::Instant::now() + KILL_PATIENCE);
                    }
                    c = &mut out_fut, if !out_done => {
                        out_done = true;
                        out.stdout = c.data;
                        out.stdout_truncated = c.truncated;
                        if c.flooded && !killed {
                            out.output_flood = true;
                            killed = true;
                            supervisor::kill_group(pgid);
                        }
                    }
                    c = &mut err_fut, if !err_done => {
                        err_done = true;
                        out.stderr = c.data;
                        out.stderr_truncated = c.truncated;
                        if c.flooded && !killed {
                            out.output_flood = true;
                            killed = true;
                            supervisor::kill_group(pgid);
                        }
                    }
                    _ = &mut stdin_fut, if !stdin_done => { stdin_done = true; }
                    _ = &mut deadline, if !killed && !exited => {
                        out.timed_out = true;
                        killed = true;
                        supervisor::kill_group(pgid);
                    }
                    _ = &mut cancel, if !killed && !exited => {
                        out.cancelled = true;
                        killed = true;
                        supervisor::kill_group(pgid);
                    }
                    _ = &mut drain, if exited => {
                        tracing::warn!(pgid, "sandboxed process exited but its output pipes stayed open after the group was killed; giving up on them");
                        break;
                    }
                }
            }
        }
        // The group (the watcher included) was killed when the program ended.
        let watcher = running
            .child
            .wait()
            .await
            .map_err(|e| SpawnError::io(format!("reaping sandboxed process {pgid}"), e))?;
        running.guard.reaped = true;
        let status = reported.unwrap_or(watcher);
        if !supervisor::kill_group_and_wait(pgid, KILL_PATIENCE).await {
            tracing::warn!(
                pgid,
                "members of a sandboxed process group were still alive {KILL_PATIENCE:?} after SIGKILL"
            );
        }
        running.guard.check_watch();
        out.exit_code = status.code();
        out.signal = status.signal();
        Ok(out)
    }

    /// Spawns a long-running sandboxed process with piped stdin, stdout and
    /// stderr (for MCP stdio servers and background jobs). Dropping the
    /// returned handle kills its whole process group. Must be called within
    /// a tokio runtime. Like every sandbox, it dies with the host however
    /// the host dies (its watcher sees the host's lifeline close).
    pub fn spawn_piped(
        &self,
        program: Program,
        cwd: impl AsRef<Path>,
        env: &[(String, String)],
        policy: &SandboxPolicy,
    ) -> Result<SandboxedChild, SpawnError> {
        let mut running = self.spawn(
            &program,
            cwd.as_ref(),
            env,
            policy,
            Stdio3::Piped(Stdio::piped()),
        )?;
        Ok(SandboxedChild {
            stdin: running.child.stdin.take(),
            stdout: running.child.stdout.take(),
            stderr: running.child.stderr.take(),
            pgid: running.pgid,
            running,
        })
    }

    /// Spawns a sandboxed process on a new pseudo-terminal of `rows` ×
    /// `cols` (for interactive terminals): its stdin, stdout and stderr are
    /// the terminal's device, which is its session's controlling terminal
    /// (so Ctrl-C written to the terminal reaches it as SIGINT). Returns the
    /// child — without pipes — and the terminal's controlling side (the
    /// *master*, close-on-exec), which the host reads the output from and
    /// writes the input to; once the program's group is gone, reading it
    /// fails with `EIO`. The same sandbox as [`Self::spawn_piped`] in every
    /// other respect, and the same death with the host.
    pub fn spawn_terminal(
        &self,
        program: Program,
        cwd: impl AsRef<Path>,
        env: &[(String, String)],
        policy: &SandboxPolicy,
        (rows, cols): (u16, u16),
    ) -> Result<(SandboxedChild, OwnedFd), SpawnError> {
        let pty = |what: &str, e: rustix::io::Errno| {
            SpawnError::io(format!("{what} (a pseudo-terminal)"), e.into())
        };
        use rustix::pty::OpenptFlags;
        let master = rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY)
            .map_err(|e| pty("opening /dev/ptmx", e))?;
        rustix::io::fcntl_setfd(&master, rustix::io::FdFlags::CLOEXEC)
            .map_err(|e| pty("marking the terminal close-on-exec", e))?;
        rustix::pty::grantpt(&master).map_err(|e| pty("grantpt", e))?;
        rustix::pty::unlockpt(&master).map_err(|e| pty("unlockpt", e))?;
        rustix::termios::tcsetwinsize(
            &master,
            rustix::termios::Winsize {
                ws_row: rows,
                ws_col: cols,
                ws_xpixel: 0,
                ws_ypixel: 0,
            },
        )
        .map_err(|e| pty("setting the terminal's size", e))?;
        // The device side, opened through the master (no path to race on).
        let device = rustix::pty::ioctl_tiocgptpeer(
            &master,
            OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC,
        )
        .map_err(|e| pty("opening the terminal's device (TIOCGPTPEER)", e))?;
        let clone = |fd: &OwnedFd| {
            fd.try_clone()
                .map(Stdio::from)
                .map_err(|e| SpawnError::io("duplicating the terminal's device", e))
        };
        let stdio = Stdio3::Terminal([clone(&device)?, clone(&device)?, Stdio::from(device)]);
        let running = self.spawn(&program, cwd.as_ref(), env, policy, stdio)?;
        Ok((
            SandboxedChild {
                stdin: None,
                stdout: None,
                stderr: None,
                pgid: running.pgid,
                running,
            },
            master,
        ))
    }

    fn spawn(
        &self,
        program: &Program,
        cwd: &Path,
        env: &[(String, String)],
        policy: &SandboxPolicy,
        stdio: Stdio3,
    ) -> Result<Running, SpawnError> {
        let mut view = View::new(&self.system, policy)?;
        let missing = enforce::decide(
            enforce::missing_protections(
                &self.caps,
                policy,
                view.needs_protection(),
                view.needs_masks(),
            ),
            &policy.enforcement,
        )?;
        for m in &missing {
            tracing::warn!(
                feature = %m.feature,
                "sandbox running WITHOUT {} (needs {}; this kernel has {}): allowed by the \
                 policy's enforcement setting",
                m.what,
                m.needs,
                m.have
            );
        }
        let lacks = |f: Feature| missing.iter().any(|m| m.feature == f);

        let cwd = view.working_directory(cwd)?;
        check_env(env)?;
        let (exe, args) = match program {
            Program::Shell(cmd) => (
                PathBuf::from("/bin/sh"),
                vec!["-c".to_string(), cmd.clone()],
            ),
            Program::Exec { program, args } => (view.resolve(program, &cwd, env)?, args.clone()),
        };

        let ruleset = match self.caps.landlock_abi {
            Some(abi) if self.caps.fs => {
                let mut spec = RulesetSpec {
                    scope_signals: self.caps.scope_signals,
                    scope_abstract_unix: self.caps.scope_abstract_unix,
                    tcp: self.caps.tcp.then(|| match &policy.egress_proxy {
                        // Inside its own namespace only the proxy listens;
                        // Landlock keeps even the process's own loopback
                        // to that one port.
                        Some(p) => (vec![p.port], Vec::new()),
                        None => (
                            policy.tcp_connect_ports.clone(),
                            policy.tcp_bind_ports.clone(),
                        ),
                    }),
                    ..RulesetSpec::default()
                };
                view.landlock_rules(&mut spec);
                Some(landlock::build_ruleset(abi, &spec)?)
            }
            _ => None,
        };

        // The process limit: the kernel's pids cgroup where there is one,
        // seccomp notification answered by the host otherwise.
        let limit = policy
            .limits
            .max_processes
            .filter(|_| !lacks(Feature::ProcessLimit));
        let mut cgroup = match limit {
            Some(max) if self.caps.pids_cgroup => {
                // The watcher is a task of the cgroup too.
                Some(SandboxCgroup::create(max.saturating_add(1)).map_err(|e| {
                    SpawnError::io(format!("creating a pids cgroup limited to {max} tasks"), e)
                })?)
            }
            _ => None,
        };
        let notify = limit.is_some() && cgroup.is_none();
        // Where the kernel has it (Linux ≥ 5.14), the watcher kills the whole
        // cgroup when the host dies, whatever sessions or groups are in it.
        let cgroup_kill: Option<OwnedFd> = cgroup.as_ref().and_then(|c| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(c.path().join("cgroup.kill"))
                .ok()
                .map(OwnedFd::from)
        });
        let filter = (!lacks(Feature::Seccomp)).then(|| {
            seccomp::build_filter(FilterOptions {
                allow_tcp: policy.egress_proxy.is_some()
                    || !policy.tcp_connect_ports.is_empty()
                    || !policy.tcp_bind_ports.is_empty(),
                allow_bind: policy.egress_proxy.is_none() && !policy.tcp_bind_ports.is_empty(),
                allow_ptrace: policy.allow_ptrace,
                allow_io_uring: policy.allow_io_uring,
                allow_inotify: policy.allow_inotify,
                notify_fork: notify,
                terminal: matches!(stdio, Stdio3::Terminal(_)),
            })
        });

        let mounts = if lacks(Feature::MountIsolation) {
            None
        } else {
            let mut plan = view.mount_plan()?;
            if lacks(Feature::ProtectedPaths) {
                plan.pins.clear();
                plan.protected.clear();
            }
            if lacks(Feature::HiddenPaths) {
                plan.hidden_files.clear();
                plan.hidden_dirs.clear();
            }
            Some(plan)
        };

        // Egress needs the network namespace, which needs the user
        // namespace of the mount view: without it, no spawn (whatever the
        // enforcement: egress never degrades into open network).
        if policy.egress_proxy.is_some() && mounts.is_none() {
            return Err(SpawnError::Unenforceable {
                feature: Feature::MountIsolation,
                what: "the network namespace egress runs a process in (only its proxy reachable)"
                    .into(),
                needs: "user namespaces usable by this process and the new mount API (Linux 5.12+)"
                    .into(),
                have: if self.caps.mount_isolation {
                    "them waived by the policy".into()
                } else {
                    "them unavailable".into()
                },
            });
        }

        // The absent protected paths this spawn could create, on record
        // before the child exists (see `protect`'s journal).
        if let Some(dir) = &policy.watch_journal {
            view.watch.record(dir).map_err(|e| {
                SpawnError::io(
                    format!(
                        "recording the protected paths of this spawn in {}",
                        dir.display()
                    ),
                    e,
                )
            })?;
        }

        // Report socket: child → parent (setup failures, seccomp listener).
        let (report_parent, report_child) = report_socket()?;

        let plan = ChildPlan {
            report_fd: report_child.as_raw_fd(),
            mounts,
            cwd: cstring(cwd.as_os_str().as_bytes(), "working directory")?,
            rlimits: rlimits(policy),
            last_cap: child::last_cap(),
            can_setpcap: !lacks(Feature::MountIsolation) || child::has_setpcap(),
            landlock: ruleset.as_ref().map(|f| f.as_raw_fd()),
            close_range: self.caps.close_range,
            fd_limit: fd_limit(),
            seccomp: filter,
            notify,
            cgroup_join: cgroup.as_ref().and_then(|c| c.join_fd()),
            lifeline: lifeline()?,
            cgroup_kill: cgroup_kill.as_ref().map(|f| f.as_raw_fd()),
            exec: exec_plan(&exe, &args, env)?,
            setup_failed: -1,
            proxy_port: policy.egress_proxy.as_ref().map(|p| p.port),
            terminal: matches!(stdio, Stdio3::Terminal(_)),
        };

        // The child executes the program itself, from `plan.exec` (see
        // `child`): std's own exec, with its arguments and environment,
        // never runs.
        let (stdin, stdout, stderr) = match stdio {
            Stdio3::Piped(stdin) => (stdin, Stdio::piped(), Stdio::piped()),
            Stdio3::Terminal([i, o, e]) => (i, o, e),
        };
        let mut cmd = tokio::process::Command::new(&exe);
        cmd.current_dir(&cwd)
            .stdin(stdin)
            .stdout(stdout)
            .stderr(stderr)
            .kill_on_drop(false);
        let mut plan = plan;
        // SAFETY: `run_in_child` only issues async-signal-safe syscalls on
        // data prepared above; it does not allocate or take locks.
        unsafe {
            cmd.pre_exec(move || child::run_in_child(&mut plan));
        }
        let spawned = cmd.spawn();
        drop(report_child);
        drop(ruleset);
        drop(cgroup_kill);
        if let Some(c) = cgroup.as_mut() {
            c.joined();
        }
        let child = match spawned {
            Ok(c) => c,
            Err(e) => {
                // The listener may precede the failure report (rlimits come last).
                for _ in 0..4 {
                    match child::read_report(report_parent.as_raw_fd()) {
                        Ok(Report::Failed(child::Step::Exec, errno)) => {
                            return Err(exec_error(&exe, io::Error::from_raw_os_error(errno)));
                        }
                        Ok(Report::Failed(step, errno)) => {
                            return Err(SpawnError::Setup {
                                step: step.describe(),
                                source: io::Error::from_raw_os_error(errno),
                            });
                        }
                        Ok(Report::Listener(_) | Report::Proxy(_)) => continue,
                        _ => break,
                    }
                }
                return Err(exec_error(&exe, e));
            }
        };
        let pid = child.id().expect("a freshly spawned child has a pid") as i32;
        let mut guard = GroupGuard {
            pgid: pid,
            reaped: false,
            supervisor: None,
            watch: Some(view.watch),
            _proxy: None,
            _cgroup: cgroup,
        };
        // The proxy's listener was sent (step 2b) before the seccomp
        // listener (step 8); both are there once `spawn` has returned.
        if let Some(proxy) = &policy.egress_proxy {
            match child::read_report(report_parent.as_raw_fd()) {
                Ok(Report::Proxy(fd)) => {
                    guard._proxy = Some((proxy.serve)(std::net::TcpListener::from(fd)));
                }
                other => {
                    let detail = match other {
                        Err(e) => e.to_string(),
                        _ => "no listener received".to_string(),
                    };
                    return Err(SpawnError::io(
                        format!("receiving the egress proxy listener of sandboxed process {pid}"),
                        io::Error::other(detail),
                    ));
                }
            }
        }
        if notify {
            match child::read_report(report_parent.as_raw_fd()) {
                Ok(Report::Listener(listener)) => {
                    // The group's count includes the watcher.
                    let max = policy
                        .limits
                        .max_processes
                        .unwrap_or(u32::MAX)
                        .saturating_add(1);
                    guard.supervisor = Some(tokio::spawn(supervisor::enforce_process_limit(
                        listener, pid, max,
                    )));
                }
                other => {
                    let detail = match other {
                        Err(e) => e.to_string(),
                        _ => "no listener received".to_string(),
                    };
                    return Err(SpawnError::io(
                        format!("receiving the seccomp listener of sandboxed process {pid}"),
                        io::Error::other(detail),
                    ));
                }
            }
        }
        let report = watch_reports(report_parent, pid)?;
        Ok(Running {
            child,
            pgid: pid,
            report,
            guard,
        })
    }
}

/// The standard streams of a spawn.
enum Stdio3 {
    /// Stdin as given; stdout and stderr piped to the host.
    Piped(Stdio),
    /// All three a pseudo-terminal's device (its controlling terminal).
    Terminal([Stdio; 3]),
}

/// A spawned child before `run` or [`SandboxedChild`] takes over.
struct Running {
    child: Child,
    pgid: i32,
    /// The report socket: the watcher says here how the program ended.
    report: AsyncFd<OwnedFd>,
    guard: GroupGuard,
}

/// Kills the group when dropped before the child was reaped.
struct GroupGuard {
    pgid: i32,
    reaped: bool,
    supervisor: Option<JoinHandle<()>>,
    /// Absent and symlinked protected paths, checked once the group is gone
    /// (see [`crate::protect`]).
    watch: Option<Watch>,
    /// What serves the egress proxy's listener; dropped (the proxy stops)
    /// with the group.
    _proxy: Option<Box<dyn Send>>,
    /// The sandbox's pids cgroup, removed after the group is gone (fields
    /// drop after `drop` has killed the group).
    _cgroup: Option<SandboxCgroup>,
}

impl GroupGuard {
    /// Checks (once) the protected paths a mount could not cover.
    fn check_watch(&mut self) {
        if let Some(mut w) = self.watch.take() {
            w.check_and_repair();
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if !self.reaped {
            supervisor::kill_group(self.pgid);
        }
        if let Some(s) = self.supervisor.take() {
            s.abort();
        }
        // SIGKILL is delivered before a killed process returns to user
        // space, so nothing of the group acts after this point.
        self.check_watch();
    }
}

/// A long-running sandboxed process with piped stdio (see
/// [`Sandbox::spawn_piped`]). Dropping it kills the whole process group; the
/// child is then reaped in the background by tokio.
pub struct SandboxedChild {
    /// The child's stdin.
    pub stdin: Option<ChildStdin>,
    /// The child's stdout.
    pub stdout: Option<ChildStdout>,
    /// The child's stderr.
    pub stderr: Option<ChildStderr>,
    pgid: i32,
    running: Running,
}

impl SandboxedChild {
    /// The child's pid, which is also its process group and session id.
    pub fn id(&self) -> u32 {
        self.pgid as u32
    }

    /// Kills the whole process group now (SIGKILL). Use [`Self::wait`] to reap.
    pub fn kill(&self) {
        if !self.running.guard.reaped {
            supervisor::kill_group(self.pgid);
        }
    }

    /// A handle that kills the whole process group (SIGKILL) while another
    /// task is in [`Self::wait`]; drop it when `wait` has returned.
    pub fn kill_handle(&self) -> KillHandle {
        KillHandle { pgid: self.pgid }
    }

    /// Waits for the child to exit, kills whatever it left in its group,
    /// reaps it, and waits until no member of the group is alive.
    pub async fn wait(&mut self) -> Result<ExitStatus, SpawnError> {
        if self.running.guard.reaped {
            return Err(SpawnError::InvalidRequest(
                "this sandboxed child was already waited for".into(),
            ));
        }
        let pgid = self.pgid;
        let reported = program_exit(&self.running.report)
            .await
            .map_err(|e| SpawnError::io(format!("waiting for sandboxed process {pgid}"), e))?;
        supervisor::kill_group(pgid);
        let watcher = self
            .running
            .child
            .wait()
            .await
            .map_err(|e| SpawnError::io(format!("reaping sandboxed process {pgid}"), e))?;
        self.running.guard.reaped = true;
        supervisor::kill_group_and_wait(pgid, KILL_PATIENCE).await;
        self.running.guard.check_watch();
        Ok(reported.unwrap_or(watcher))
    }
}

/// Kills a [`SandboxedChild`]'s process group (see
/// [`SandboxedChild::kill_handle`]).
#[derive(Clone, Debug)]
pub struct KillHandle {
    pgid: i32,
}

impl KillHandle {
    /// `killpg(SIGKILL)`: the group's watcher, the program and everything
    /// they started.
    pub fn kill(&self) {
        supervisor::kill_group(self.pgid);
    }
}

/// Waits until the program ends: its wait status as the watcher reported
/// it, or `None` when the watcher is gone without a report (killed with its
/// group). Nothing is reaped: the watcher, which holds the group's id, is
/// reaped by the caller once the group was killed.
async fn program_exit(report: &AsyncFd<OwnedFd>) -> io::Result<Option<ExitStatus>> {
    loop {
        let mut guard = report.readable().await?;
        match child::read_report(report.as_raw_fd())? {
            Report::Exited(status) => return Ok(Some(ExitStatus::from_raw(status))),
            Report::Closed => return Ok(None),
            Report::Nothing => guard.clear_ready(),
            // Setup messages were read at spawn.
            Report::Failed(..) | Report::Listener(_) | Report::Proxy(_) => {}
        }
    }
}

/// Registers the report socket with the runtime.
fn watch_reports(fd: OwnedFd, pid: i32) -> Result<AsyncFd<OwnedFd>, SpawnError> {
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
    // SAFETY: we own the socket and neither replace nor close it while the
    // AsyncFd holds it.
    unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
        .map_err(|e| SpawnError::io(format!("watching sandboxed process {pid}"), e.into()))
}

struct Captured {
    data: Vec<u8>,
    truncated: bool,
    flooded: bool,
}

/// Reads everything, keeping `cap` bytes. Past the flood limit it kills the
/// group *before* letting go of the pipe (so the writer dies of SIGKILL, not
/// of a broken pipe it might handle).
async fn read_capped<R: AsyncRead + Unpin>(mut r: R, cap: usize, pgid: i32) -> Captured {
    let flood = flood_limit(cap);
    let mut c = Captured {
        data: Vec::new(),
        truncated: false,
        flooded: false,
    };
    let mut total: u64 = 0;
    let mut buf = vec![0u8; 64 * 1024];
    // The first half of the cap, then the last bytes (a ring): what a
    // failing command says at the end matters as much as how it began.
    let head_cap = cap / 2;
    let tail_cap = cap - head_cap;
    let mut tail: std::collections::VecDeque<u8> = std::collections::VecDeque::new();
    loop {
        let n = match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        total += n as u64;
        let to_head = n.min(head_cap - c.data.len().min(head_cap));
        c.data.extend_from_slice(&buf[..to_head]);
        let rest = &buf[to_head..n];
        let rest = &rest[rest.len().saturating_sub(tail_cap)..];
        let over = (tail.len() + rest.len()).saturating_sub(tail_cap);
        tail.drain(..over);
        tail.extend(rest);
        if total > flood {
            c.flooded = true;
            supervisor::kill_group(pgid);
            break;
        }
    }
    if total as usize <= cap && !c.flooded {
        c.data.extend(tail);
        return c;
    }
    c.truncated = true;
    let cut = total - (c.data.len() + tail.len()) as u64;
    let marker = format!("\n[… {cut} bytes cut …]\n");
    // Exactly `cap` bytes: head, marker, the end of the tail.
    let room = cap.saturating_sub(c.data.len() + marker.len());
    if room > 0 {
        c.data.extend_from_slice(marker.as_bytes());
        c.data
            .extend(tail.iter().skip(tail.len() - room.min(tail.len())));
    } else {
        c.data.extend(tail.iter().take(cap - c.data.len()));
    }
    c
}

fn report_socket() -> Result<(OwnedFd, OwnedFd), SpawnError> {
    let mut fds = [0 as RawFd; 2];
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(SpawnError::io(
            "creating the sandbox report socket",
            io::Error::last_os_error(),
        ));
    }
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn rlimits(policy: &SandboxPolicy) -> Vec<(libc::__rlimit_resource_t, libc::rlimit)> {
    let l = &policy.limits;
    let mut out = Vec::new();
    let mut push = |res: libc::__rlimit_resource_t, soft: u64, hard: u64| {
        let mut cur = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        unsafe { libc::getrlimit(res, &mut cur) };
        // Without CAP_SYS_RESOURCE a hard limit can only go down.
        let hard = hard.min(cur.rlim_max);
        out.push((
            res,
            libc::rlimit {
                rlim_cur: soft.min(hard),
                rlim_max: hard,
            },
        ));
    };
    push(libc::RLIMIT_CORE, 0, 0);
    if let Some(v) = l.address_space_bytes {
        push(libc::RLIMIT_AS, v, v);
    }
    if let Some(v) = l.file_size_bytes {
        push(libc::RLIMIT_FSIZE, v, v);
    }
    if let Some(v) = l.cpu_seconds {
        push(libc::RLIMIT_CPU, v, v.saturating_add(1));
    }
    if let Some(v) = l.open_files {
        push(libc::RLIMIT_NOFILE, v, v);
    }
    out
}

/// The highest fd number to sweep when `close_range` is missing.
fn fd_limit() -> libc::c_int {
    let mut cur = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut cur) };
    cur.rlim_cur.min(1 << 20) as libc::c_int
}

/// What the child executes: `exe` with `args`, and exactly `env` (a name
/// given twice keeps its last value; sorted by name, as std passes it).
fn exec_plan(
    exe: &Path,
    args: &[String],
    env: &[(String, String)],
) -> Result<ExecPlan, SpawnError> {
    let env: std::collections::BTreeMap<&str, &str> =
        env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    Ok(ExecPlan::new(
        cstring(exe.as_os_str().as_bytes(), "program path")?,
        args.iter()
            .map(|a| cstring(a.as_bytes(), "an argument"))
            .collect::<Result<_, _>>()?,
        env.into_iter()
            .map(|(k, v)| cstring(format!("{k}={v}").as_bytes(), "the environment"))
            .collect::<Result<_, _>>()?,
    ))
}

fn exec_error(exe: &Path, e: io::Error) -> SpawnError {
    match e.raw_os_error() {
        Some(libc::ENOENT) => SpawnError::NotFound {
            program: exe.display().to_string(),
            detail: "no such file (or its interpreter is missing from the sandbox's view)".into(),
        },
        Some(libc::EACCES) => SpawnError::NotFound {
            program: exe.display().to_string(),
            detail: "permission denied executing it inside the sandbox (not executable, or it or \
                     its interpreter lies outside every executable grant)"
                .into(),
        },
        _ => SpawnError::io(format!("spawning sandboxed {}", exe.display()), e),
    }
}

/// The host's lifeline `(read end, write end)`: a pipe whose write end only
/// this process holds (close-on-exec; every watcher closes its inherited
/// copy first thing), so that its read end hangs up exactly when the host
/// is gone, however it died. Every sandbox's watcher polls the read end.
fn lifeline() -> Result<(RawFd, RawFd), SpawnError> {
    static LIFELINE: OnceLock<Result<(OwnedFd, OwnedFd), i32>> = OnceLock::new();
    let pipe = LIFELINE.get_or_init(|| {
        let mut fds = [0 as RawFd; 2];
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(crate::sys::errno());
        }
        Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
    });
    match pipe {
        Ok((r, w)) => Ok((r.as_raw_fd(), w.as_raw_fd())),
        Err(e) => Err(SpawnError::io(
            "creating the host's lifeline pipe",
            io::Error::from_raw_os_error(*e),
        )),
    }
}

static SHARED: OnceLock<Sandbox> = OnceLock::new();

pub(crate) fn shared() -> &'static Sandbox {
    SHARED.get_or_init(Sandbox::new)
}
