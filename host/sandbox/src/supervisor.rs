//! The host side of a running sandbox: the process limit and the group scan.
//!
//! **Process limit, fallback.** `RLIMIT_NPROC` counts every process of a
//! *user* on the whole system (the host's own threads included) and does not
//! apply to uid 0 at all, so it cannot bound one sandbox. The kernel's pids
//! cgroup can ([`crate::cgroup`], used whenever the host can create one).
//! Where it cannot, the seccomp filter sends
//! `fork`, `vfork` and `clone` to the host as user notifications; the host
//! counts the sandbox's live tasks and answers `CONTINUE` (the call proceeds
//! in the kernel) or `EAGAIN`. Counting reads `/proc/<pid>/stat` for the
//! members of the sandbox's process group, which no descendant can leave. To
//! keep the cost off ordinary workloads, the host keeps an upper bound (last
//! count + grants since) and recounts only when the bound reaches the limit;
//! grants from the last few milliseconds, whose new task may not be visible in
//! `/proc` yet, are still added to a fresh count. A fork storm at the limit is
//! answered from the last count (at most one recount per 2 ms).
//!
//! The fallback's known limit: a task waiting for the host's answer sleeps
//! interruptibly, so a signal that arrives meanwhile (typically `SIGCHLD` in a
//! shell running a pipeline) makes its `fork` fail with `EINTR`, which shells
//! report as "cannot fork". That is why the cgroup is preferred.
//!
//! **Group scan.** After `killpg(SIGKILL)` the host waits until no member of
//! the group is alive (zombies waiting for their new parent to reap them do
//! not count: they hold no resources but a pid), so when `run` returns,
//! nothing it started is still running.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// A task of the sandbox's process group.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Member {
    #[allow(dead_code)]
    pub pid: i32,
    pub state: u8,
    pub threads: u32,
}

/// Parses `/proc/<pid>/stat`: (state, pgrp, num_threads).
fn parse_stat(stat: &str) -> Option<(u8, i32, u32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_ascii_whitespace();
    let state = f.next()?.as_bytes()[0];
    let _ppid = f.next()?;
    let pgrp: i32 = f.next()?.parse().ok()?;
    // session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime priority nice
    let threads: u32 = f.nth(14)?.parse().ok()?;
    Some((state, pgrp, threads))
}

/// The members of process group `pgid` (by scanning /proc).
pub(crate) fn group_members(pgid: i32) -> Vec<Member> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some((state, pgrp, threads)) = parse_stat(&stat)
            && pgrp == pgid
        {
            out.push(Member {
                pid,
                state,
                threads,
            });
        }
    }
    out
}

/// Live (non-zombie) members of the group.
pub(crate) fn live_members(pgid: i32) -> usize {
    group_members(pgid)
        .iter()
        .filter(|m| m.state != b'Z' && m.state != b'X')
        .count()
}

/// Sends SIGKILL to the group and waits (up to `patience`) until none of its
/// members is alive. Returns whether the group is gone.
pub(crate) async fn kill_group_and_wait(pgid: i32, patience: Duration) -> bool {
    let deadline = Instant::now() + patience;
    let mut pause = Duration::from_micros(200);
    loop {
        kill_group(pgid);
        if !group_exists(pgid) || live_members(pgid) == 0 {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// Whether any task (zombies included) still has process group `pgid`: the
/// cheap check before scanning /proc.
fn group_exists(pgid: i32) -> bool {
    if pgid <= 1 {
        return false;
    }
    unsafe { libc::kill(-pgid, 0) == 0 || *libc::__errno_location() != libc::ESRCH }
}

/// `killpg(pgid, SIGKILL)`, ignoring "no such group".
pub(crate) fn kill_group(pgid: i32) {
    if pgid > 1 {
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

/// Answers fork/clone notifications for one sandbox until it is gone.
pub(crate) async fn enforce_process_limit(listener: OwnedFd, pgid: i32, max: u32) {
    if let Err(e) = enforce(listener, pgid, max).await {
        tracing::warn!(pgid, error = %e, "sandbox process-limit supervisor stopped; further forks in this sandbox will fail");
    }
}

async fn enforce(listener: OwnedFd, pgid: i32, max: u32) -> io::Result<()> {
    const IN_FLIGHT: Duration = Duration::from_millis(10);
    const RECOUNT_EVERY: Duration = Duration::from_millis(2);
    // SAFETY: we own the listener and neither replace nor close it while
    // the AsyncFd holds it.
    let fd = unsafe { AsyncFd::register_with_interest(listener, Interest::READABLE) }
        .map_err(io::Error::from)?;
    let raw = fd.as_raw_fd();
    let mut counted: u32 = 1;
    let mut granted_since: u32 = 0;
    let mut recent: VecDeque<Instant> = VecDeque::new();
    let mut last_count = Instant::now();
    loop {
        let mut guard = fd.readable().await?;
        let (pending, hup) = poll_now(raw);
        if !pending {
            if hup {
                return Ok(()); // every task of the sandbox is gone
            }
            guard.clear_ready();
            continue;
        }
        drop(guard);
        let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        if unsafe { libc::ioctl(raw, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut req) } < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                // The caller died or was interrupted before we got to it.
                Some(libc::ENOENT) | Some(libc::EINTR) => continue,
                _ => return Err(e),
            }
        }
        let now = Instant::now();
        while recent.front().is_some_and(|t| now - *t > IN_FLIGHT) {
            recent.pop_front();
        }
        if counted + granted_since >= max && now - last_count >= RECOUNT_EVERY {
            let tasks: u32 = group_members(pgid).iter().map(|m| m.threads.max(1)).sum();
            counted = tasks;
            granted_since = recent.len() as u32;
            last_count = now;
        }
        let allow = counted + granted_since < max;
        let mut resp = libc::seccomp_notif_resp {
            id: req.id,
            val: 0,
            error: 0,
            flags: 0,
        };
        if allow {
            resp.flags = libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32;
            granted_since += 1;
            recent.push_back(now);
        } else {
            resp.error = -libc::EAGAIN;
        }
        if unsafe { libc::ioctl(raw, libc::SECCOMP_IOCTL_NOTIF_SEND, &mut resp) } < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ENOENT) {
                return Err(e);
            }
        }
    }
}

/// (a notification is pending, the filter has no users left)
fn poll_now(fd: i32) -> (bool, bool) {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    if r <= 0 {
        return (false, false);
    }
    (
        p.revents & libc::POLLIN != 0,
        p.revents & (libc::POLLHUP | libc::POLLERR) != 0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_odd_command_names() {
        let line = "1234 (a b) c)) S 1 777 777 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 3 0 100 0 0";
        assert_eq!(parse_stat(line), Some((b'S', 777, 3)));
    }

    #[test]
    fn own_group_is_visible() {
        let pgid = unsafe { libc::getpgrp() };
        assert!(
            group_members(pgid)
                .iter()
                .any(|m| m.pid == std::process::id() as i32)
        );
    }
}
