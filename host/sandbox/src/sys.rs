//! Syscall helpers shared by the layers (`child`, `cgroup`, `landlock`,
//! `seccomp`, `spawn`): here, so that no layer imports them from another
//! (they once lived in `child`, and `cgroup`, `landlock` and `seccomp`
//! reached back into it). Async-signal-safe: the child calls them between
//! fork and exec.

/// The calling thread's `errno`.
pub(crate) fn errno() -> i32 {
    unsafe { *libc::__errno_location() }
}

/// Waits for child `pid` of a probe; whether it exited with status 0.
pub(crate) fn wait_exit_ok(pid: libc::pid_t) -> bool {
    let mut status = 0;
    loop {
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        if r < 0 && errno() != libc::EINTR {
            return false;
        }
    }
    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}
