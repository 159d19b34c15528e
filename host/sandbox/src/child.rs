//! What the child does between `fork` and `exec`.
//!
//! The host is a multi-threaded tokio process: after `fork` only the forking
//! thread exists in the child, and any lock another thread held (the
//! allocator's, tracing's) stays locked forever. So this module does nothing
//! but raw, async-signal-safe syscalls on data prepared by the parent in a
//! [`ChildPlan`]: no allocation, no formatting, no locks. The order matters:
//!
//! 0. with a process limit on a kernel that offers a pids cgroup, join the
//!    sandbox's own cgroup (one `write` on a descriptor the parent opened;
//!    see [`crate::cgroup`]), before anything else can fork.
//! 1. `setsid()` — a new session and process group, whose id is the child's
//!    pid; the host later kills the whole group with `killpg`. Then
//!    `fork()`: the process the host spawned stays behind as the sandbox's
//!    *watcher* ([`watch`]), the new child goes on with the steps below and
//!    becomes the program. The watcher closes every descriptor but the read
//!    end of the host's *lifeline* pipe (whose write end only the host holds)
//!    the cgroup's `cgroup.kill` and the report socket, then waits for the
//!    program's exit, which it reports to the host (the raw wait status)
//!    and then stays until the host kills the group, and all along for the
//!    lifeline's hang-up, which means the host is gone however it died
//!    (SIGKILL included): then it kills the sandbox's cgroup and process
//!    group, itself included. The program gets SIGKILL when the watcher dies
//!    (`PR_SET_PDEATHSIG`, tied to the single-threaded watcher, not to one
//!    of the host's threads, which come and go).
//!    1b. For a terminal ([`crate::Sandbox::spawn_terminal`]), stdin,
//!    stdout and stderr are the pseudo-terminal's device, and before the
//!    fork the session leader makes it the session's controlling terminal
//!    (`TIOCSCTTY`): the program inherits it, so Ctrl-C reaches it as
//!    SIGINT. The watcher, in the same foreground group, ignores the
//!    terminal's signals.
//! 2. `unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC)`, then map our own
//!    uid/gid 1:1. In the new mount namespace the whole tree is made read-only
//!    and `nosuid` (recursively, private propagation so nothing leaks back to
//!    the host), and each read-write grant is a clone of the original mount
//!    moved back on top. This closes what Landlock leaves open: `chmod`,
//!    `utime`, `setxattr` and other metadata changes outside the grant. The
//!    new IPC namespace makes System V IPC and POSIX message queues private.
//!    With an egress proxy the same `unshare` makes a network namespace
//!    too (2b): its loopback is brought up and a listener bound on
//!    `127.0.0.1:PORT` is sent to the host over the report socket and
//!    closed here; the host's proxy serves it, the only thing the program
//!    can reach.
//! 3. `chdir` again (the old cwd points below the read-only mount).
//! 4. capabilities: lock the securebits (no root magic on exec), drop the
//!    bounding set, clear ambient, `capset` everything to zero. We run as
//!    root on some machines; the sandboxed program must not hold any
//!    capability, in the new user namespace or outside.
//! 5. `PR_SET_NO_NEW_PRIVS`.
//! 6. `landlock_restrict_self` with the prebuilt ruleset.
//! 7. `close_range(3, ~0, CLOSE_RANGE_CLOEXEC)`: every inherited descriptor
//!    beyond stdio is closed at exec (marking rather than closing keeps std's
//!    own exec-error pipe working).
//! 8. the seccomp filter, after everything it would deny. With a process
//!    limit enforced by notification (no pids cgroup) it returns a
//!    notification listener, which goes to the host over the report socket
//!    and is closed here: the sandbox must never hold its own listener.
//! 9. resource limits (`setrlimit`, which the filter allows on oneself),
//!    last: a low `RLIMIT_NOFILE` must not stop step 8 from getting a
//!    descriptor while the host's (close-on-exec) descriptors are still open.
//!
//! 10. `execve` itself, here rather than in std (which would call it next):
//!     a failed exec is then a failed step like the others.
//!
//! If a step fails, the child writes `(step, errno)` to the report socket so
//! the host can say which step failed, and `spawn` fails with that errno.
//! It also writes one byte to the *setup pipe* it shares with the watcher
//! only (close-on-exec: a successful exec closes it unwritten). std's
//! `spawn` waits for the process it forked — the watcher — when the child
//! reports a failure; a watcher that stayed for its host, as it does after
//! a program ran, would hang that `spawn` for ever. Seeing the byte after
//! the program's end, the watcher exits instead.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::RawFd;

use libc::{c_int, c_long, c_void, sock_filter};

use crate::sys::{errno, wait_exit_ok};

/// A step of the child's setup, named in errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Step {
    Setsid = 1,
    Unshare,
    Setgroups,
    UidMap,
    GidMap,
    CloneGrant,
    ReadOnlyRoot,
    MoveGrant,
    Chdir,
    Rlimit,
    Securebits,
    BoundingSet,
    Capset,
    NoNewPrivs,
    Landlock,
    CloseRange,
    Seccomp,
    SendListener,
    JoinCgroup,
    Pin,
    Protect,
    ParentDeath,
    Hide,
    Watcher,
    Exec,
    NetworkUp,
    ProxyListener,
    Terminal,
}

impl Step {
    pub(crate) fn from_u8(v: u8) -> Option<Step> {
        use Step::*;
        [
            Setsid,
            Unshare,
            Setgroups,
            UidMap,
            GidMap,
            CloneGrant,
            ReadOnlyRoot,
            MoveGrant,
            Chdir,
            Rlimit,
            Securebits,
            BoundingSet,
            Capset,
            NoNewPrivs,
            Landlock,
            CloseRange,
            Seccomp,
            SendListener,
            JoinCgroup,
            Pin,
            Protect,
            ParentDeath,
            Hide,
            Watcher,
            Exec,
            NetworkUp,
            ProxyListener,
            Terminal,
        ]
        .into_iter()
        .find(|s| *s as u8 == v)
    }

    pub(crate) fn describe(self) -> &'static str {
        match self {
            Step::Setsid => "setsid (new session and process group)",
            Step::Unshare => "unshare (user, mount and IPC namespaces)",
            Step::Setgroups => "writing /proc/self/setgroups",
            Step::UidMap => "writing /proc/self/uid_map",
            Step::GidMap => "writing /proc/self/gid_map",
            Step::CloneGrant => "cloning a read-write grant's mount (open_tree)",
            Step::ReadOnlyRoot => "making the mount tree read-only (mount_setattr)",
            Step::MoveGrant => "mounting a grant back (move_mount)",
            Step::Chdir => "changing to the working directory",
            Step::Rlimit => "setting resource limits (setrlimit)",
            Step::Securebits => "locking securebits (PR_SET_SECUREBITS)",
            Step::BoundingSet => "dropping the capability bounding set (PR_CAPBSET_DROP)",
            Step::Capset => "dropping capabilities (capset)",
            Step::NoNewPrivs => "setting no_new_privs",
            Step::ParentDeath => {
                "setting the parent-death signal (or the sandbox's watcher had already exited)"
            }
            Step::Watcher => "forking the sandbox's watcher",
            Step::Exec => "executing the program (execve)",
            Step::Landlock => "landlock_restrict_self",
            Step::CloseRange => "close_range (marking inherited descriptors close-on-exec)",
            Step::Seccomp => "loading the seccomp filter",
            Step::SendListener => "sending the seccomp listener to the host",
            Step::JoinCgroup => "joining the sandbox's pids cgroup",
            Step::Pin => "pinning a directory above a protected path (bind mount onto itself)",
            Step::Protect => "mounting a protected path read-only over itself",
            Step::NetworkUp => "bringing up the loopback of the sandbox's network namespace",
            Step::ProxyListener => {
                "listening for the egress proxy in the sandbox's network namespace and sending \
                 the listener to the host"
            }
            Step::Terminal => {
                "making the pseudo-terminal the session's controlling terminal (TIOCSCTTY)"
            }
            Step::Hide => {
                "masking a hidden path (/dev/null over a file, an empty tmpfs over a directory)"
            }
        }
    }
}

/// The user and mount namespace part of the plan.
pub(crate) struct MountPlan {
    pub uid_map: Vec<u8>,
    pub gid_map: Vec<u8>,
    /// Read-write grants, parents before children.
    pub read_write: Vec<CString>,
    /// Read-only grants that lie beneath a read-write grant (they would
    /// otherwise be writable mounts), parents before children.
    pub read_only_nested: Vec<CString>,
    /// Directories between a read-write grant and a protected path, bound
    /// onto themselves so that they cannot be renamed or removed; parents
    /// before children.
    pub pins: Vec<CString>,
    /// Protected paths (files or directories) to mount read-only over
    /// themselves, last; parents before children.
    pub protected: Vec<CString>,
    /// Hidden files to mask with `/dev/null` (read-only, `nodev`: opening
    /// fails with `EACCES`), after everything else.
    pub hidden_files: Vec<CString>,
    /// Hidden directories to mask with an empty, read-only, mode-000
    /// tmpfs, after everything else; parents before children.
    pub hidden_dirs: Vec<CString>,
    /// Scratch space for the cloned trees' fds; `len == read_write.len()`,
    /// allocated by the parent so the child never allocates.
    pub fds: Vec<c_int>,
}

/// Everything the child needs, prepared by the parent.
pub(crate) struct ChildPlan {
    pub report_fd: RawFd,
    pub mounts: Option<MountPlan>,
    pub cwd: CString,
    pub rlimits: Vec<(libc::__rlimit_resource_t, libc::rlimit)>,
    pub last_cap: u32,
    /// Whether the child holds CAP_SETPCAP (always, inside a new user
    /// namespace; otherwise if the host does).
    pub can_setpcap: bool,
    pub landlock: Option<RawFd>,
    pub close_range: bool,
    /// Without `close_range`: mark fds `3..fd_limit` close-on-exec one by one.
    pub fd_limit: c_int,
    pub seccomp: Option<Vec<sock_filter>>,
    pub notify: bool,
    /// The sandbox's pids cgroup join file, open for writing (step 0).
    pub cgroup_join: Option<RawFd>,
    /// The host's lifeline pipe `(read end, write end)` (step 1).
    pub lifeline: (RawFd, RawFd),
    /// The sandbox cgroup's `cgroup.kill`, open for writing (Linux ≥ 5.14).
    pub cgroup_kill: Option<RawFd>,
    /// What to execute (step 10).
    pub exec: ExecPlan,
    /// The write end of the setup pipe to the watcher, once forked (-1
    /// before): a failed step writes a byte to it.
    pub setup_failed: RawFd,
    /// With an egress proxy: a network namespace of its own (with the
    /// user namespace of step 2), its loopback up, and a listener on
    /// `127.0.0.1:PORT` sent to the host (step 2b).
    pub proxy_port: Option<u16>,
    /// Stdin, stdout and stderr are a pseudo-terminal's device: it becomes
    /// the new session's controlling terminal (step 1b), and the watcher
    /// ignores the signals the terminal sends its foreground group (Ctrl-C
    /// is for the program, not for the watcher).
    pub terminal: bool,
}

/// The program, its arguments and its environment, as `execve` takes them:
/// null-terminated arrays of pointers into the strings, built by the parent
/// (the child must not allocate).
pub(crate) struct ExecPlan {
    path: CString,
    _strings: Vec<CString>,
    /// `argv` then `envp`, each null-terminated, as addresses (so that the
    /// plan is `Send`); they point into `_strings`, whose buffers do not
    /// move when the plan does.
    pointers: Vec<usize>,
    envp_at: usize,
}

impl ExecPlan {
    /// `argv[0]` is `path`, as std would pass it.
    pub(crate) fn new(path: CString, args: Vec<CString>, env: Vec<CString>) -> ExecPlan {
        let argc = args.len() + 1;
        let mut strings = Vec::with_capacity(argc + env.len());
        strings.push(path.clone());
        strings.extend(args);
        strings.extend(env);
        let mut pointers = Vec::with_capacity(strings.len() + 2);
        for (i, s) in strings.iter().enumerate() {
            if i == argc {
                pointers.push(0);
            }
            pointers.push(s.as_ptr() as usize);
        }
        if strings.len() == argc {
            pointers.push(0);
        }
        pointers.push(0);
        ExecPlan {
            path,
            _strings: strings,
            pointers,
            envp_at: argc + 1,
        }
    }

    /// Replaces this process; returns only on failure, with errno.
    unsafe fn execve(&self) -> i32 {
        unsafe {
            let argv = self.pointers.as_ptr() as *const *const libc::c_char;
            let envp = self.pointers[self.envp_at..].as_ptr() as *const *const libc::c_char;
            libc::execve(self.path.as_ptr(), argv, envp);
        }
        errno()
    }
}

type StepResult = Result<(), (Step, i32)>;

fn check(step: Step, r: c_long) -> StepResult {
    if r < 0 { Err((step, errno())) } else { Ok(()) }
}

/// Runs the plan in the child, ending in `execve`: returns only on failure.
/// Async-signal-safe.
pub(crate) fn run_in_child(plan: &mut ChildPlan) -> io::Result<()> {
    match setup(plan) {
        Ok(()) => Ok(()),
        Err((step, err)) => {
            report_failure(plan.report_fd, step, err);
            if plan.setup_failed >= 0 {
                unsafe { libc::write(plan.setup_failed, b"F".as_ptr() as *const c_void, 1) };
            }
            Err(io::Error::from_raw_os_error(err))
        }
    }
}

fn setup(plan: &mut ChildPlan) -> StepResult {
    unsafe {
        if let Some(fd) = plan.cgroup_join {
            crate::cgroup::join(fd).map_err(|e| (Step::JoinCgroup, e))?;
        }
        check(Step::Setsid, libc::setsid() as c_long)?;
        if plan.terminal {
            // 1b: the session leader (the watcher to be) takes the terminal
            // on stdin; the program, forked next, inherits it.
            check(
                Step::Terminal,
                libc::ioctl(0, libc::TIOCSCTTY, 0 as c_long) as c_long,
            )?;
        }
        fork_watcher(plan)?;
        if let Some(m) = plan.mounts.as_mut() {
            enter_namespaces(m, plan.proxy_port.is_some())?;
            setup_mounts(m)?;
        }
        if let Some(port) = plan.proxy_port {
            // Needs CAP_NET_ADMIN in the new user namespace: before step 4.
            proxy_listener(plan.report_fd, port)?;
        }
        check(Step::Chdir, libc::chdir(plan.cwd.as_ptr()) as c_long)?;
        drop_capabilities(plan.last_cap, plan.can_setpcap)?;
        check(
            Step::NoNewPrivs,
            libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) as c_long,
        )?;
        if let Some(fd) = plan.landlock {
            crate::landlock::restrict_self(fd).map_err(|e| (Step::Landlock, e))?;
        }
        if plan.close_range {
            check(
                Step::CloseRange,
                libc::syscall(
                    libc::SYS_close_range,
                    3u32,
                    !0u32,
                    libc::CLOSE_RANGE_CLOEXEC,
                ),
            )?;
        } else {
            for fd in 3..plan.fd_limit {
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
        if let Some(prog) = plan.seccomp.as_ref() {
            let listener =
                crate::seccomp::load(prog, plan.notify).map_err(|e| (Step::Seccomp, e))?;
            if plan.notify {
                let sent = send_fd(plan.report_fd, listener, b'L');
                libc::close(listener);
                sent.map_err(|e| (Step::SendListener, e))?;
            }
        }
        // Last: a low RLIMIT_NOFILE must not stop the listener from being
        // created while the host's descriptors are still open (they close at
        // exec). The filter allows setrlimit/prlimit64 on the caller itself.
        for (res, lim) in &plan.rlimits {
            check(Step::Rlimit, libc::setrlimit(*res, lim) as c_long)?;
        }
        Err((Step::Exec, plan.exec.execve()))
    }
}

/// Step 1 (the fork): forks. The parent becomes the watcher and never returns; the
/// child (the program to be) returns and goes on with the setup.
unsafe fn fork_watcher(plan: &mut ChildPlan) -> StepResult {
    unsafe {
        // Only the host may hold the write end: close it before forking so
        // that neither the watcher nor the program has it.
        libc::close(plan.lifeline.1);
        let mut setup = [-1 as c_int; 2];
        if libc::pipe2(setup.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err((Step::Watcher, errno()));
        }
        let watcher = libc::getpid();
        let pid = libc::fork();
        if pid < 0 {
            return Err((Step::Watcher, errno()));
        }
        if pid == 0 {
            libc::close(setup[0]);
            plan.setup_failed = setup[1];
            check(
                Step::ParentDeath,
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) as c_long,
            )?;
            if libc::getppid() != watcher {
                return Err((Step::ParentDeath, libc::ESRCH));
            }
            return Ok(());
        }
        libc::close(setup[1]);
        watch(
            plan.lifeline.0,
            plan.cgroup_kill.unwrap_or(-1),
            plan.report_fd,
            setup[0],
            pid,
            plan.terminal,
        )
    }
}

/// How often the watcher looks at its program without a pidfd (Linux < 5.3).
const WATCH_POLL_MS: c_int = 50;

/// The watcher (see step 1). Async-signal-safe; never returns: it ends
/// when the host kills the group (after it reported the program's end), or
/// kills the group itself when the host is gone.
unsafe fn watch(
    lifeline: RawFd,
    cgroup_kill: RawFd,
    report: RawFd,
    setup: RawFd,
    program: libc::pid_t,
    terminal: bool,
) -> ! {
    unsafe {
        // The host's handlers (inherited across fork) must not run here.
        for sig in 1..65 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        if terminal {
            // The terminal signals its foreground group, which the watcher
            // is in: Ctrl-C, Ctrl-\ and Ctrl-Z are the program's; a hang-up
            // (the host closed the terminal) is followed by the host's kill.
            // Ignored here only: the program was forked before, and keeps
            // the default dispositions.
            for sig in [
                libc::SIGINT,
                libc::SIGQUIT,
                libc::SIGTSTP,
                libc::SIGTTIN,
                libc::SIGTTOU,
                libc::SIGHUP,
            ] {
                libc::signal(sig, libc::SIG_IGN);
            }
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        // Every other descriptor goes: the stdio pipes (their readers must
        // see the program's end, not ours), std's exec-error pipe.
        close_all_except(&mut [lifeline, cgroup_kill, report, setup]);
        let mut pidfd = libc::syscall(libc::SYS_pidfd_open, program, 0) as c_int;
        let mut running = true;
        loop {
            let mut fds = [
                libc::pollfd {
                    fd: lifeline,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: pidfd,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            let (n, wait) = match (running, pidfd >= 0) {
                (true, true) => (2, -1),
                (true, false) => (1, WATCH_POLL_MS),
                (false, _) => (1, -1),
            };
            libc::poll(fds.as_mut_ptr(), n, wait);
            if fds[0].revents != 0 {
                // The host is gone: so is everything it started here.
                if cgroup_kill >= 0 {
                    libc::write(cgroup_kill, b"1".as_ptr() as *const c_void, 1);
                }
                libc::kill(program, libc::SIGKILL);
                libc::kill(0, libc::SIGKILL);
                libc::_exit(128 + libc::SIGKILL);
            }
            let mut status: c_int = 0;
            if running && libc::waitpid(program, &mut status, libc::WNOHANG) == program {
                // The program is gone, so is the setup pipe's write end: a
                // byte means its setup (or exec) failed, and std's `spawn`
                // in the host is waiting for this process to end.
                let mut byte = 0u8;
                if libc::read(setup, &mut byte as *mut u8 as *mut c_void, 1) == 1 {
                    libc::_exit(127);
                }
                // The host kills the rest of the group (and this watcher)
                // when it reads this; until then the watcher stays, so the
                // group's id stays taken and the lifeline watched.
                running = false;
                if pidfd >= 0 {
                    libc::close(pidfd);
                    pidfd = -1;
                }
                report_exit(report, status);
            }
        }
    }
}

fn report_exit(fd: RawFd, status: c_int) {
    let mut msg = [0u8; 8];
    msg[0] = b'X';
    msg[4..8].copy_from_slice(&status.to_le_bytes());
    unsafe {
        libc::send(
            fd,
            msg.as_ptr() as *const c_void,
            msg.len(),
            libc::MSG_NOSIGNAL,
        );
    }
}

/// Closes every descriptor except those in `keep` (negative entries are
/// ignored). Async-signal-safe.
unsafe fn close_all_except(keep: &mut [RawFd]) {
    keep.sort_unstable();
    let mut from: u32 = 0;
    for &fd in keep.iter() {
        if fd < 0 {
            continue;
        }
        let fd = fd as u32;
        if fd > from {
            unsafe { close_range(from, fd - 1) };
        }
        from = fd + 1;
    }
    unsafe { close_range(from, !0u32) };
}

unsafe fn close_range(first: u32, last: u32) {
    unsafe {
        if libc::syscall(libc::SYS_close_range, first, last, 0) < 0 {
            let last = last.min(1 << 16);
            let mut fd = first;
            while fd <= last {
                libc::close(fd as c_int);
                fd += 1;
            }
        }
    }
}

unsafe fn write_file(path: &CStr, data: &[u8], step: Step) -> StepResult {
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err((step, errno()));
        }
        let n = libc::write(fd, data.as_ptr() as *const c_void, data.len());
        let e = errno();
        libc::close(fd);
        if n != data.len() as isize {
            return Err((step, if n < 0 { e } else { libc::EIO }));
        }
    }
    Ok(())
}

unsafe fn enter_namespaces(m: &MountPlan, net: bool) -> StepResult {
    unsafe {
        let netns = if net { libc::CLONE_NEWNET } else { 0 };
        check(
            Step::Unshare,
            libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWIPC | netns)
                as c_long,
        )?;
        write_file(c"/proc/self/setgroups", b"deny", Step::Setgroups)?;
        write_file(c"/proc/self/uid_map", &m.uid_map, Step::UidMap)?;
        write_file(c"/proc/self/gid_map", &m.gid_map, Step::GidMap)?;
    }
    Ok(())
}

// Mount API constants (linux/mount.h); not all are in libc yet.
const OPEN_TREE_CLONE: u32 = 1;
const AT_RECURSIVE: u32 = 0x8000;
const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOVE_MOUNT_F_EMPTY_PATH: u32 = 0x4;
const MS_PRIVATE: u64 = 1 << 18;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

unsafe fn mount_setattr(dfd: c_int, path: &CStr, flags: u32, set: u64, propagation: u64) -> c_long {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation,
        userns_fd: 0,
    };
    unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dfd,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    }
}

unsafe fn clone_tree(path: &CStr) -> Result<c_int, i32> {
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            path.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as u32 | AT_RECURSIVE,
        )
    };
    if fd < 0 {
        Err(errno())
    } else {
        Ok(fd as c_int)
    }
}

unsafe fn move_tree(fd: c_int, to: &CStr) -> c_long {
    unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            fd,
            c"".as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    }
}

unsafe fn setup_mounts(m: &mut MountPlan) -> StepResult {
    let empty_recursive = libc::AT_EMPTY_PATH as u32 | AT_RECURSIVE;
    unsafe {
        // Clone the writable grants before the tree becomes read-only.
        for (i, path) in m.read_write.iter().enumerate() {
            let fd = clone_tree(path).map_err(|e| (Step::CloneGrant, e))?;
            m.fds[i] = fd;
            check(
                Step::CloneGrant,
                mount_setattr(
                    fd,
                    c"",
                    empty_recursive,
                    MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                    0,
                ),
            )?;
        }
        check(
            Step::ReadOnlyRoot,
            mount_setattr(
                libc::AT_FDCWD,
                c"/",
                AT_RECURSIVE,
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID,
                MS_PRIVATE,
            ),
        )?;
        for (i, path) in m.read_write.iter().enumerate() {
            let r = move_tree(m.fds[i], path);
            let e = errno();
            libc::close(m.fds[i]);
            if r < 0 {
                return Err((Step::MoveGrant, e));
            }
        }
        for path in &m.read_only_nested {
            remount_over_itself(path, true, Step::MoveGrant)?;
        }
        for path in &m.pins {
            remount_over_itself(path, false, Step::Pin)?;
        }
        for path in &m.protected {
            remount_over_itself(path, true, Step::Protect)?;
        }
        // Last, so that no grant or protection mounted back covers a mask.
        for path in &m.hidden_dirs {
            mask_directory(path)?;
        }
        for path in &m.hidden_files {
            mask_file(path)?;
        }
    }
    Ok(())
}

const FSOPEN_CLOEXEC: u32 = 1;
const FSCONFIG_SET_STRING: u32 = 1;
const FSCONFIG_CMD_CREATE: u32 = 6;
const FSMOUNT_CLOEXEC: u32 = 1;
const MOUNT_ATTR_NOEXEC: u64 = 0x8;

/// Mounts `/dev/null` over the file `path`: a clone of its mount, made
/// read-only, `nodev` and `noexec`, so that opening the mask fails with
/// `EACCES` (a device on a `nodev` mount) and nothing can be written to it.
unsafe fn mask_file(path: &CStr) -> StepResult {
    let empty_recursive = libc::AT_EMPTY_PATH as u32 | AT_RECURSIVE;
    unsafe {
        let fd = clone_tree(c"/dev/null").map_err(|e| (Step::Hide, e))?;
        let mut r = mount_setattr(
            fd,
            c"",
            empty_recursive,
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
            0,
        );
        if r >= 0 {
            r = move_tree(fd, path);
        }
        let e = errno();
        libc::close(fd);
        if r < 0 {
            return Err((Step::Hide, e));
        }
    }
    Ok(())
}

/// Mounts a new, empty tmpfs over the directory `path`: mode 000 (no one
/// without capabilities may list or enter it), read-only (nor change that).
unsafe fn mask_directory(path: &CStr) -> StepResult {
    unsafe {
        let fs = libc::syscall(libc::SYS_fsopen, c"tmpfs".as_ptr(), FSOPEN_CLOEXEC);
        if fs < 0 {
            return Err((Step::Hide, errno()));
        }
        let fs = fs as c_int;
        let mut r = libc::syscall(
            libc::SYS_fsconfig,
            fs,
            FSCONFIG_SET_STRING,
            c"mode".as_ptr(),
            c"0".as_ptr(),
            0,
        );
        if r >= 0 {
            r = libc::syscall(
                libc::SYS_fsconfig,
                fs,
                FSCONFIG_SET_STRING,
                c"size".as_ptr(),
                c"4k".as_ptr(),
                0,
            );
        }
        if r >= 0 {
            r = libc::syscall(
                libc::SYS_fsconfig,
                fs,
                FSCONFIG_CMD_CREATE,
                std::ptr::null::<libc::c_char>(),
                std::ptr::null::<c_void>(),
                0,
            );
        }
        let mut mnt: c_long = -1;
        if r >= 0 {
            mnt = libc::syscall(
                libc::SYS_fsmount,
                fs,
                FSMOUNT_CLOEXEC,
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
            );
            r = mnt;
        }
        let mut e = errno();
        libc::close(fs);
        if r >= 0 {
            r = move_tree(mnt as c_int, path);
            e = errno();
        }
        if mnt >= 0 {
            libc::close(mnt as c_int);
        }
        if r < 0 {
            return Err((Step::Hide, e));
        }
    }
    Ok(())
}

/// Clones the mount tree at `path` (a directory or a file), optionally makes
/// the clone read-only (recursively), and mounts it on `path`. The clone
/// keeps the attributes of what it was cloned from (nosuid, nodev).
unsafe fn remount_over_itself(path: &CStr, read_only: bool, step: Step) -> StepResult {
    let empty_recursive = libc::AT_EMPTY_PATH as u32 | AT_RECURSIVE;
    unsafe {
        let fd = clone_tree(path).map_err(|e| (step, e))?;
        let mut r = 0;
        if read_only {
            r = mount_setattr(
                fd,
                c"",
                empty_recursive,
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                0,
            );
        }
        if r >= 0 {
            r = move_tree(fd, path);
        }
        let e = errno();
        libc::close(fd);
        if r < 0 {
            return Err((step, e));
        }
    }
    Ok(())
}

const SECURE_BITS: libc::c_ulong = 0b1110_1111; // NOROOT, NO_SETUID_FIXUP, KEEP_CAPS off, NO_CAP_AMBIENT_RAISE — all locked

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: c_int,
}
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}
const CAP_VERSION_3: u32 = 0x2008_0522;

unsafe fn drop_capabilities(last_cap: u32, can_setpcap: bool) -> StepResult {
    unsafe {
        if can_setpcap {
            check(
                Step::Securebits,
                libc::prctl(libc::PR_SET_SECUREBITS, SECURE_BITS, 0, 0, 0) as c_long,
            )?;
            for cap in 0..=last_cap {
                if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) < 0
                    && errno() != libc::EINVAL
                {
                    return Err((Step::BoundingSet, errno()));
                }
            }
        }
        // EINVAL: a kernel without ambient capabilities (< 4.3) has none to clear.
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        ) < 0
            && errno() != libc::EINVAL
        {
            return Err((Step::Capset, errno()));
        }
        let header = CapHeader {
            version: CAP_VERSION_3,
            pid: 0,
        };
        let data = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        check(
            Step::Capset,
            libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr()),
        )?;
    }
    Ok(())
}

/// Whether the calling process holds CAP_SETPCAP (parent side).
pub(crate) fn has_setpcap() -> bool {
    let header = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    let r = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &header as *const CapHeader,
            data.as_mut_ptr(),
        )
    };
    r == 0 && data[0].effective & (1 << 8) != 0
}

/// The highest capability number this kernel knows.
pub(crate) fn last_cap() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(63)
}

/// Step 2b: in the new network namespace, brings the loopback up and
/// listens on `127.0.0.1:port`; the listener goes to the host (which
/// serves it: the egress proxy) and is closed here. Async-signal-safe.
unsafe fn proxy_listener(report: RawFd, port: u16) -> StepResult {
    unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if s < 0 {
            return Err((Step::NetworkUp, errno()));
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo".iter().enumerate() {
            req.ifr_name[i] = *b as libc::c_char;
        }
        let mut r = libc::ioctl(s, libc::SIOCGIFFLAGS, &mut req);
        if r == 0 {
            req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            r = libc::ioctl(s, libc::SIOCSIFFLAGS, &req);
        }
        let e = errno();
        libc::close(s);
        if r != 0 {
            return Err((Step::NetworkUp, e));
        }
        let l = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if l < 0 {
            return Err((Step::ProxyListener, errno()));
        }
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be(),
            },
            sin_zero: [0; 8],
        };
        let mut r = libc::bind(
            l,
            &addr as *const libc::sockaddr_in as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        if r == 0 {
            r = libc::listen(l, 128);
        }
        if r != 0 {
            let e = errno();
            libc::close(l);
            return Err((Step::ProxyListener, e));
        }
        let sent = send_fd(report, l, b'P');
        libc::close(l);
        sent.map_err(|e| (Step::ProxyListener, e))
    }
}

fn report_failure(fd: RawFd, step: Step, err: i32) {
    let mut msg = [0u8; 8];
    msg[0] = b'E';
    msg[1] = step as u8;
    msg[4..8].copy_from_slice(&err.to_le_bytes());
    unsafe {
        libc::send(
            fd,
            msg.as_ptr() as *const c_void,
            msg.len(),
            libc::MSG_NOSIGNAL,
        );
    }
}

/// Sends one fd with SCM_RIGHTS. Async-signal-safe (stack buffers only).
unsafe fn send_fd(sock: RawFd, fd: c_int, tag: u8) -> Result<(), i32> {
    #[repr(C, align(8))]
    struct Buf([u8; 64]);
    let mut cbuf = Buf([0; 64]);
    let mut payload = [tag];
    let mut iov = libc::iovec {
        iov_base: payload.as_mut_ptr() as *mut c_void,
        iov_len: 1,
    };
    unsafe {
        let space = libc::CMSG_SPACE(std::mem::size_of::<c_int>() as u32) as usize;
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.0.as_mut_ptr() as *mut c_void;
        msg.msg_controllen = space as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<c_int>() as u32) as _;
        std::ptr::copy_nonoverlapping(
            &fd as *const c_int as *const u8,
            libc::CMSG_DATA(cmsg),
            std::mem::size_of::<c_int>(),
        );
        if libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) < 0 {
            return Err(errno());
        }
    }
    Ok(())
}

/// What the parent reads back from the report socket.
pub(crate) enum Report {
    /// The child failed at this step with this errno.
    Failed(Step, i32),
    /// The seccomp notification listener.
    Listener(std::os::fd::OwnedFd),
    /// The egress proxy's listener, in the sandbox's network namespace.
    Proxy(std::os::fd::OwnedFd),
    /// The program ended with this wait status (from the watcher).
    Exited(i32),
    /// The watcher is gone (end of stream).
    Closed,
    /// Nothing (yet).
    Nothing,
}

/// Parent side: reads one message from the report socket without blocking.
pub(crate) fn read_report(sock: RawFd) -> io::Result<Report> {
    use std::os::fd::FromRawFd;
    #[repr(C, align(8))]
    struct Buf([u8; 64]);
    let mut cbuf = Buf([0; 64]);
    let mut data = [0u8; 8];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr() as *mut c_void,
        iov_len: data.len(),
    };
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.0.as_mut_ptr() as *mut c_void;
        msg.msg_controllen = cbuf.0.len() as _;
        let n = libc::recvmsg(sock, &mut msg, libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC);
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::WouldBlock {
                return Ok(Report::Nothing);
            }
            return Err(e);
        }
        if n == 0 {
            return Ok(Report::Closed);
        }
        let mut received: Option<std::os::fd::OwnedFd> = None;
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let mut fd: c_int = -1;
                std::ptr::copy_nonoverlapping(
                    libc::CMSG_DATA(cmsg),
                    &mut fd as *mut c_int as *mut u8,
                    std::mem::size_of::<c_int>(),
                );
                if fd >= 0 {
                    received = Some(std::os::fd::OwnedFd::from_raw_fd(fd));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
        if data[0] == b'E' && n >= 8 {
            let step = Step::from_u8(data[1]).unwrap_or(Step::Setsid);
            let err = i32::from_le_bytes([data[4], data[5], data[6], data[7]]);
            return Ok(Report::Failed(step, err));
        }
        if data[0] == b'X' && n >= 8 {
            return Ok(Report::Exited(i32::from_le_bytes([
                data[4], data[5], data[6], data[7],
            ])));
        }
        if let Some(fd) = received {
            if data[0] == b'P' {
                return Ok(Report::Proxy(fd));
            }
            return Ok(Report::Listener(fd));
        }
    }
    Ok(Report::Nothing)
}

/// The uid/gid map lines for a 1:1 mapping of the caller's ids.
pub(crate) fn id_maps() -> (Vec<u8>, Vec<u8>) {
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    (
        format!("{uid} {uid} 1\n").into_bytes(),
        format!("{gid} {gid} 1\n").into_bytes(),
    )
}

/// Tries, in a throwaway child, what step 2 does: new user + mount + IPC
/// namespaces and a read-only mount tree.
pub(crate) fn probe_mount_isolation() -> bool {
    let (uid_map, gid_map) = id_maps();
    let plan = MountPlan {
        uid_map,
        gid_map,
        read_write: Vec::new(),
        read_only_nested: Vec::new(),
        pins: Vec::new(),
        protected: Vec::new(),
        hidden_files: Vec::new(),
        hidden_dirs: Vec::new(),
        fds: Vec::new(),
    };
    unsafe {
        let pid = libc::fork();
        if pid < 0 {
            return false;
        }
        if pid == 0 {
            let ok = enter_namespaces(&plan, false).is_ok()
                && mount_setattr(
                    libc::AT_FDCWD,
                    c"/",
                    AT_RECURSIVE,
                    MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID,
                    MS_PRIVATE,
                ) == 0
                && clone_tree(c"/").is_ok();
            libc::_exit(if ok { 0 } else { 1 });
        }
        wait_exit_ok(pid)
    }
}
