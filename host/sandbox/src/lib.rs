//! Sandboxed process spawning for toolgate.
//!
//! Every real process the host starts — the `shell` and `subprocess` seams,
//! MCP stdio servers — goes through this crate. Tools and policies never
//! touch the OS directly, but the programs they ask to run do, so each spawn
//! is confined by several independent layers, each covering what the others
//! cannot:
//!
//! | layer | enforces |
//! | --- | --- |
//! | Landlock file system rules | reads, writes, creation, removal, execution, truncation only beneath the system view ([`system_paths`]) and the policy's grants; symlinks and `/proc/self/fd` reopening resolve to the real path, which is what is checked |
//! | Landlock TCP rules (ABI ≥ 4) | `connect`/`bind` only on granted ports (any address) |
//! | network namespace (with an egress proxy) | the loopback of a namespace of its own and nothing else: the only thing listening is the host's proxy, whose listener the sandbox creates in the namespace and hands to the host; no route leaves, so raw sockets, UDP, ICMP, IPv6 and the host's loopback services (its MCP port, daemons' abstract sockets) are unreachable ([`SandboxPolicy::egress_proxy`]) |
//! | Landlock scoping (ABI ≥ 6) | no signals to, and no abstract UNIX sockets of, processes outside the sandbox |
//! | read-only mount view (user + mount namespaces) | nothing outside the read-write grants can be modified at all: also `chmod`, `utime`, xattrs, which Landlock does not cover; protected paths (the host's configuration, plugins, cache, `.git`) stay read-only even inside a read-write grant; private System V IPC / message queues |
//! | masks (mount view) | hidden paths (files holding credentials: the host's configuration, token and key files) cannot be read even where a grant covers them: `/dev/null` (read-only, `nodev`) over a file, an empty mode-000 tmpfs over a directory |
//! | post-run watch and its journal | a protected path that was absent (or a symlink) is put back as it was if the sandbox created (or replaced) it; with a journal directory the watch is on record (locked) before the child starts, so a host killed mid-run leaves it for the next start to finish, and a reader of authority can tell which absent paths a live run may be creating ([`recover_watch_journal`]) |
//! | seccomp | only TCP sockets (and AF_UNIX stream socketpairs); no `bind`/`listen` without a TCP bind grant; no TCP Fast Open (which connects without the `connect` that Landlock checks); no setuid/setgid mode bits (`chmod` family, and the modes of `open`/`creat`/`mkdir`/`mknod`; `openat2`, whose arguments a filter cannot read, answers `ENOSYS`); no mount, namespace, keyring, BPF, perf or identity changes; no ptrace, io_uring or inotify unless granted; no `setsid`/`setpgid` (the process group stays closed; on a terminal, `tcsetpgrp` is a no-op so that the whole sandbox stays its foreground group); per-pid scheduling and limit calls only on itself |
//! | capabilities | none in any set (bounding, ambient, permitted, effective, inheritable), securebits locked, `no_new_privs` |
//! | resource limits | tasks (a pids cgroup per sandbox; host-answered seccomp notification where there is none), address space, file size, CPU, descriptors; no core dumps |
//! | process group | a new session; on exit, timeout, cancellation, output flood or drop the whole group gets SIGKILL, and `run` returns only when none of it is alive |
//! | watcher (host death) | the sandbox's first process, forked by the host, never exec'd, outside every other layer: it leads the session, forks the program, reports the program's exit, and holds the read end of the host's *lifeline* pipe (write end in the host only); when the host dies however it dies (SIGKILL, crash, any thread having spawned it) the lifeline hangs up and the watcher kills the whole group (and `cgroup.kill` where cgroup v2 has it); the program has `PR_SET_PDEATHSIG` tied to the single-threaded watcher; a setup step or `execve` that fails reaches the watcher over a close-on-exec pipe, and it exits, so that `spawn` fails at once with the step named |
//! | hygiene | only stdin/stdout/stderr are inherited; the environment is exactly what the caller passes |
//!
//! What no layer covers (Landlock ABI ≤ 7 leaves path *metadata* readable):
//! `stat`, `readlink`, `access` and `chdir` work on any path, so the existence,
//! size and times of files outside the grants are visible; their contents and
//! directory listings are not.
//!
//! When the kernel cannot enforce a layer the policy needs, the spawn is
//! refused with [`SpawnError::Unenforceable`] unless the policy's
//! [`Enforcement`] says otherwise, and then every spawn logs what is missing.
//!
//! ```no_run
//! # async fn demo() -> Result<(), toolgate_sandbox::SpawnError> {
//! use toolgate_sandbox::{Program, SandboxPolicy, SpawnRequest};
//! let scratch = std::path::PathBuf::from("/tmp/scratch-for-this-call");
//! let policy = SandboxPolicy { read_write: vec![scratch.clone()], ..Default::default() };
//! let mut req = SpawnRequest::new(Program::Shell("echo hi > out.txt && cat out.txt".into()), &scratch);
//! req.timeout = Some(std::time::Duration::from_secs(10));
//! let out = toolgate_sandbox::run(req, &policy, std::future::pending()).await?;
//! assert_eq!(out.stdout, b"hi\n");
//! # Ok(()) }
//! ```
//!
//! The `probes` module (cargo feature `probes`, which the `toolgate` CLI
//! enables) holds the escape attempts and the suite that checks them
//! (`toolgate sandbox check`).

#![warn(missing_docs)]

mod cgroup;
mod child;
mod enforce;
mod error;
mod kernel;
mod landlock;
mod policy;
#[cfg(feature = "probes")]
pub mod probes;
mod protect;
mod request;
mod seccomp;
mod spawn;
mod supervisor;
mod sys;
pub mod system_paths;
mod view;

use std::future::Future;
use std::path::Path;

pub use error::SpawnError;
pub use kernel::{Capabilities, probe_capabilities};
pub use policy::{EgressProxy, Enforcement, Feature, ResourceLimits, SandboxPolicy};
pub use protect::{Recovery, recover as recover_watch_journal};
pub use request::{Output, Program, SpawnRequest, flood_limit};
pub use spawn::{KillHandle, Sandbox, SandboxedChild};

/// Runs `req` under `policy` with this kernel's capabilities. See [`Sandbox::run`].
pub async fn run(
    req: SpawnRequest,
    policy: &SandboxPolicy,
    cancel: impl Future<Output = ()>,
) -> Result<Output, SpawnError> {
    spawn::shared().run(req, policy, cancel).await
}

/// Spawns a child on a new pseudo-terminal. See [`Sandbox::spawn_terminal`].
pub fn spawn_terminal(
    program: Program,
    cwd: impl AsRef<Path>,
    env: &[(String, String)],
    policy: &SandboxPolicy,
    size: (u16, u16),
) -> Result<(SandboxedChild, std::os::fd::OwnedFd), SpawnError> {
    spawn::shared().spawn_terminal(program, cwd, env, policy, size)
}

/// Spawns a long-running child with piped stdio. See [`Sandbox::spawn_piped`].
pub fn spawn_piped(
    program: Program,
    cwd: impl AsRef<Path>,
    env: &[(String, String)],
    policy: &SandboxPolicy,
) -> Result<SandboxedChild, SpawnError> {
    spawn::shared().spawn_piped(program, cwd, env, policy)
}
