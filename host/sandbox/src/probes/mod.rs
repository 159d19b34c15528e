//! Escape attempts, performed for real with direct syscalls.
//!
//! A *probe* is one attempt: [`run_probe`] performs it in the current process
//! and says whether it [succeeded](ProbeOutcome::Succeeded) (for an escape
//! attempt, that is an escape) or was [denied](ProbeOutcome::Denied). The
//! `toolgate-sandbox-probe` binary of this crate runs one probe named by its
//! first argument; the `toolgate` binary offers the same as a hidden
//! `__probe NAME ARGS…` subcommand by calling [`probe_main`]. Both exit with
//! [`EXIT_SUCCEEDED`], [`EXIT_DENIED`] or [`EXIT_INCONCLUSIVE`] and print one
//! line saying what happened.
//!
//! Probes take arguments (paths, ports, pids) because what to attack depends
//! on the fixtures the [`suite`] sets up around the sandbox.
//!
//! An error only counts as *denied* when its errno is one the sandbox
//! produces (`EPERM`, `EACCES`, `EROFS`, `EXDEV`…, or the resource limit's
//! own errno); anything else (`ENOENT`: a fixture is missing) is
//! *inconclusive*, so a broken test setup never passes as a blocked escape.

pub mod suite;

use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use libc::{c_int, c_long, c_void};

pub use suite::{
    Check, EscapeSuite, Fixtures, Invocation, Observation, Observed, PolicyVariant, ProbeReport,
    ProbeSpec, Verdict, probe_suite, run_escape_suite, run_escape_suite_via, run_escape_suite_with,
};

/// Exit code: the attempt succeeded.
pub const EXIT_SUCCEEDED: i32 = 0;
/// Exit code: bad probe name or arguments.
pub const EXIT_USAGE: i32 = 2;
/// Exit code: the probe could not tell (setup problem, unexpected errno).
pub const EXIT_INCONCLUSIVE: i32 = 3;
/// Exit code: the attempt was denied.
pub const EXIT_DENIED: i32 = 10;

/// What a probe observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// The attempt worked.
    Succeeded(String),
    /// The attempt was refused by the kernel with a sandbox errno.
    Denied(String),
    /// Neither (setup problem, unexpected error).
    Inconclusive(String),
}

impl ProbeOutcome {
    /// The process exit code for this outcome.
    pub fn exit_code(&self) -> i32 {
        match self {
            ProbeOutcome::Succeeded(_) => EXIT_SUCCEEDED,
            ProbeOutcome::Denied(_) => EXIT_DENIED,
            ProbeOutcome::Inconclusive(_) => EXIT_INCONCLUSIVE,
        }
    }

    /// The one-line report printed by the probe binary.
    pub fn line(&self) -> String {
        match self {
            ProbeOutcome::Succeeded(m) => format!("SUCCEEDED: {m}"),
            ProbeOutcome::Denied(m) => format!("DENIED: {m}"),
            ProbeOutcome::Inconclusive(m) => format!("INCONCLUSIVE: {m}"),
        }
    }
}

/// Entry point of the probe binary (and of `toolgate __probe`): `args` are
/// the process arguments *after* the program name: `NAME [ARGS…]`. Prints the
/// outcome and returns the exit code.
pub fn probe_main(args: impl IntoIterator<Item = String>) -> i32 {
    let args: Vec<String> = args.into_iter().collect();
    let Some((name, rest)) = args.split_first() else {
        eprintln!(
            "usage: toolgate-sandbox-probe NAME [ARGS…]; probes: {}",
            PROBES.join(", ")
        );
        return EXIT_USAGE;
    };
    if !PROBES.contains(&name.as_str()) {
        eprintln!("unknown probe `{name}`; probes: {}", PROBES.join(", "));
        return EXIT_USAGE;
    }
    let outcome = run_probe(name, rest);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", outcome.line());
    let _ = out.flush();
    outcome.exit_code()
}

/// Every probe name [`run_probe`] knows.
pub const PROBES: &[&str] = &[
    "noop",
    "write_file",
    "create_file",
    "read_file",
    "list_dir",
    "inotify_watch",
    "truncate",
    "rename",
    "create_and_rename",
    "link",
    "create_and_link",
    "mkfifo",
    "mkdir",
    "unlink",
    "create_and_unlink",
    "chmod",
    "fchmod",
    "utime",
    "setxattr",
    "exec",
    "reopen_write",
    "reopen_read",
    "openat",
    "procfd_path",
    "proc_root",
    "proc_read",
    "use_fd",
    "leaked_fds",
    "tcp_connect",
    "tcp_bind",
    "tcp_listen",
    "udp_send",
    "socket",
    "socketpair",
    "unix_connect",
    "unix_dgram_sendto",
    "unix_bind",
    "io_uring",
    "signal",
    "ptrace",
    "vm_read",
    "renice",
    "prlimit",
    "setaffinity",
    "setuid",
    "getuid",
    "unshare",
    "clone_newuser",
    "fork",
    "mount",
    "chroot",
    "chdir",
    "bpf",
    "perf_event_open",
    "keyctl",
    "userfaultfd",
    "setsid",
    "setpgid",
    "caps",
    "no_new_privs",
    "env_has",
    "env_only",
    "fork_bomb",
    "fork_n",
    "mmap",
    "write_bytes",
    "open_many",
    "spin",
    "flood",
    "daemonize",
    "daemon_stay",
    "sandbox_host",
    "set_mode",
    "create_mode",
    "openat2",
    "setcap",
    "tcp_fastopen",
    "tcp_fastopen_connect",
    "plant",
];

/// Performs probe `name` with `args` in this process.
pub fn run_probe(name: &str, args: &[String]) -> ProbeOutcome {
    let a = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    match name {
        "noop" => ProbeOutcome::Succeeded("the probe runs".into()),
        "write_file" => write_file(a(0)),
        "create_file" => create_file(a(0)),
        "read_file" => read_file(a(0)),
        "list_dir" => list_dir(a(0)),
        "inotify_watch" => inotify_watch(a(0)),
        "truncate" => {
            let p = c(a(0));
            sys_outcome(unsafe { libc::truncate(p.as_ptr(), 0) } as c_long, || {
                format!("truncate({}, 0)", a(0))
            })
        }
        "rename" => {
            let (from, to) = (c(a(0)), c(a(1)));
            sys_outcome(
                unsafe { libc::rename(from.as_ptr(), to.as_ptr()) } as c_long,
                || format!("rename({}, {})", a(0), a(1)),
            )
        }
        "create_and_rename" => in_dir(a(0), |f| {
            let g = format!("{f}.renamed");
            let (cf, cg) = (c(&f), c(&g));
            let r = unsafe { libc::rename(cf.as_ptr(), cg.as_ptr()) };
            let out = sys_outcome(r as c_long, || format!("rename({f}, {g})"));
            let _ = std::fs::remove_file(&g);
            out
        }),
        "link" => {
            let (from, to) = (c(a(0)), c(a(1)));
            sys_outcome(
                unsafe { libc::link(from.as_ptr(), to.as_ptr()) } as c_long,
                || format!("link({}, {})", a(0), a(1)),
            )
        }
        "create_and_link" => in_dir(a(0), |f| {
            let g = format!("{f}.link");
            let (cf, cg) = (c(&f), c(&g));
            let r = unsafe { libc::link(cf.as_ptr(), cg.as_ptr()) };
            let out = sys_outcome(r as c_long, || format!("link({f}, {g})"));
            let _ = std::fs::remove_file(&g);
            out
        }),
        "mkfifo" => {
            let p = c(a(0));
            let out = sys_outcome(unsafe { libc::mkfifo(p.as_ptr(), 0o600) } as c_long, || {
                format!("mkfifo({})", a(0))
            });
            if matches!(out, ProbeOutcome::Succeeded(_)) {
                let _ = std::fs::remove_file(a(0));
            }
            out
        }
        "mkdir" => {
            let p = c(a(0));
            let out = sys_outcome(unsafe { libc::mkdir(p.as_ptr(), 0o700) } as c_long, || {
                format!("mkdir({})", a(0))
            });
            if matches!(out, ProbeOutcome::Succeeded(_)) {
                let _ = std::fs::remove_dir(a(0));
            }
            out
        }
        "unlink" => {
            let p = c(a(0));
            sys_outcome(unsafe { libc::unlink(p.as_ptr()) } as c_long, || {
                format!("unlink({})", a(0))
            })
        }
        "create_and_unlink" => in_dir(a(0), |f| {
            let cf = c(&f);
            sys_outcome(unsafe { libc::unlink(cf.as_ptr()) } as c_long, || {
                format!("unlink({f})")
            })
        }),
        "chmod" => chmod(a(0), false),
        "fchmod" => chmod(a(0), true),
        "utime" => utime(a(0)),
        "setxattr" => {
            let p = c(a(0));
            let r = unsafe {
                libc::setxattr(
                    p.as_ptr(),
                    c"user.toolgate_probe".as_ptr(),
                    b"1".as_ptr() as *const c_void,
                    1,
                    0,
                )
            };
            sys_outcome(r as c_long, || {
                format!("setxattr({}, user.toolgate_probe)", a(0))
            })
        }
        "exec" => exec(a(0)),
        "reopen_write" | "reopen_read" => reopen(a(0), name == "reopen_write"),
        "openat" => openat(a(0), a(1)),
        "procfd_path" => procfd_path(a(0), a(1)),
        "proc_root" => {
            let pid = target_pid(a(0));
            read_file(&format!("/proc/{pid}/root{}", a(1)))
        }
        "proc_read" => {
            let pid = target_pid(a(0));
            read_file(&format!("/proc/{pid}/{}", a(1)))
        }
        "use_fd" => use_fd(a(0)),
        "leaked_fds" => leaked_fds(),
        "tcp_connect" => tcp_connect(a(0), a(1)),
        "tcp_bind" => tcp_bind(a(0)),
        "tcp_listen" => tcp_listen(),
        "udp_send" => udp_send(a(0), a(1)),
        "socket" => socket_kind(a(0)),
        "socketpair" => socketpair(a(0)),
        "unix_connect" => unix_connect(a(0)),
        "unix_dgram_sendto" => unix_dgram_sendto(a(0)),
        "unix_bind" => unix_bind(a(0)),
        "io_uring" => io_uring(),
        "signal" => with_target(a(0), |pid| {
            sys_outcome(unsafe { libc::kill(pid, 0) } as c_long, || {
                format!("kill({pid}, 0)")
            })
        }),
        "ptrace" => with_target(a(0), ptrace_seize),
        "vm_read" => with_target(a(0), vm_read),
        "renice" => with_target(a(0), |pid| {
            let who = if pid == unsafe { libc::getpid() } {
                0
            } else {
                pid
            } as libc::id_t;
            unsafe { *libc::__errno_location() = 0 };
            let prio = unsafe { libc::getpriority(libc::PRIO_PROCESS, who) };
            let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, who, prio) };
            sys_outcome(r as c_long, || {
                format!("setpriority(PRIO_PROCESS, {who}, {prio})")
            })
        }),
        "prlimit" => with_target(a(0), |pid| {
            let who = if pid == unsafe { libc::getpid() } {
                0
            } else {
                pid
            };
            let mut old = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            let r = unsafe { libc::prlimit(who, libc::RLIMIT_NOFILE, std::ptr::null(), &mut old) };
            if r != 0 {
                return sys_outcome(r as c_long, || format!("prlimit({who}) get"));
            }
            let r = unsafe { libc::prlimit(who, libc::RLIMIT_NOFILE, &old, std::ptr::null_mut()) };
            sys_outcome(r as c_long, || format!("prlimit({who}, RLIMIT_NOFILE) set"))
        }),
        "setaffinity" => with_target(a(0), |pid| {
            let who = if pid == unsafe { libc::getpid() } {
                0
            } else {
                pid
            };
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            let size = std::mem::size_of::<libc::cpu_set_t>();
            let r = unsafe { libc::sched_getaffinity(who, size, &mut set) };
            if r != 0 {
                return sys_outcome(r as c_long, || format!("sched_getaffinity({who})"));
            }
            let r = unsafe { libc::sched_setaffinity(who, size, &set) };
            sys_outcome(r as c_long, || {
                format!("sched_setaffinity({who}) to its current mask")
            })
        }),
        "setuid" => {
            let uid: libc::uid_t = a(0).parse().unwrap_or(65534);
            sys_outcome(unsafe { libc::setuid(uid) } as c_long, || {
                format!("setuid({uid})")
            })
        }
        "getuid" => {
            let (mut r, mut e, mut s) = (0, 0, 0);
            unsafe { libc::getresuid(&mut r, &mut e, &mut s) };
            ProbeOutcome::Succeeded(format!("uid {r} euid {e} suid {s}"))
        }
        "unshare" => {
            let flag = match a(0) {
                "user" => libc::CLONE_NEWUSER,
                "mount" => libc::CLONE_NEWNS,
                "net" => libc::CLONE_NEWNET,
                "pid" => libc::CLONE_NEWPID,
                other => return usage(format!("unshare: unknown namespace `{other}`")),
            };
            in_child(move || {
                sys_outcome(unsafe { libc::unshare(flag) } as c_long, || {
                    format!("unshare({})", a(0))
                })
            })
        }
        "clone_newuser" => clone_newuser(),
        "fork" => fork_n(1),
        "mount" => {
            let p = c(a(0));
            let r = unsafe {
                libc::mount(
                    c"none".as_ptr(),
                    p.as_ptr(),
                    c"tmpfs".as_ptr(),
                    0,
                    std::ptr::null(),
                )
            };
            if r == 0 {
                unsafe { libc::umount2(p.as_ptr(), libc::MNT_DETACH) };
            }
            sys_outcome(r as c_long, || format!("mount(tmpfs on {})", a(0)))
        }
        "chroot" => {
            let p = c(a(0));
            sys_outcome(unsafe { libc::chroot(p.as_ptr()) } as c_long, || {
                format!("chroot({})", a(0))
            })
        }
        "chdir" => {
            let p = c(a(0));
            sys_outcome(unsafe { libc::chdir(p.as_ptr()) } as c_long, || {
                format!("chdir({})", a(0))
            })
        }
        "bpf" => bpf_map(),
        "perf_event_open" => perf_event(),
        "keyctl" => {
            let r = unsafe {
                libc::syscall(
                    libc::SYS_add_key,
                    c"user".as_ptr(),
                    c"toolgate-probe".as_ptr(),
                    b"x".as_ptr(),
                    1usize,
                    -2i32, // KEY_SPEC_PROCESS_KEYRING
                )
            };
            sys_outcome(r, || "add_key(user, toolgate-probe)".into())
        }
        "userfaultfd" => {
            let r = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC) };
            sys_outcome(r, || "userfaultfd()".into())
        }
        "setsid" => in_child(|| {
            sys_outcome(unsafe { libc::setsid() } as c_long, || {
                "setsid() in a child".into()
            })
        }),
        "setpgid" => in_child(|| {
            sys_outcome(unsafe { libc::setpgid(0, 0) } as c_long, || {
                "setpgid(0, 0) in a child".into()
            })
        }),
        "caps" => capabilities(),
        "no_new_privs" => {
            let r = unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) };
            if r == 1 {
                ProbeOutcome::Denied("no_new_privs is set".into())
            } else {
                ProbeOutcome::Succeeded(format!(
                    "no_new_privs is {r}: privileges can be gained on exec"
                ))
            }
        }
        "env_has" => match std::env::var_os(a(0)) {
            Some(v) => ProbeOutcome::Succeeded(format!("{} is visible ({} bytes)", a(0), v.len())),
            None => ProbeOutcome::Denied(format!("{} is not in the environment", a(0))),
        },
        "env_only" => {
            let extra: Vec<String> = std::env::vars_os()
                .map(|(k, _)| k.to_string_lossy().into_owned())
                .filter(|k| !args.iter().any(|a| a == k))
                .collect();
            if extra.is_empty() {
                ProbeOutcome::Denied(format!("the environment holds exactly {:?}", args))
            } else {
                ProbeOutcome::Succeeded(format!("unexpected environment variables: {extra:?}"))
            }
        }
        "fork_bomb" => fork_bomb(a(0).parse().unwrap_or(10_000)),
        "fork_n" => fork_n(a(0).parse().unwrap_or(4)),
        "mmap" => mmap(a(0).parse().unwrap_or(8 << 30)),
        "write_bytes" => write_bytes(a(0), a(1).parse().unwrap_or(64 << 20)),
        "open_many" => open_many(a(0).parse().unwrap_or(100_000)),
        "spin" => spin(a(0).parse().unwrap_or(30.0)),
        "flood" => flood(a(0).parse().unwrap_or(100 << 20)),
        "daemonize" => daemonize(),
        "daemon_stay" => daemon_stay(),
        "sandbox_host" => sandbox_host(a(0), a(1), args.get(2..).unwrap_or(&[])),
        "set_mode" => set_mode(a(0), a(1), a(2)),
        "create_mode" => create_mode(a(0), a(1), a(2)),
        "openat2" => openat2(a(0), a(1)),
        "setcap" => setcap(a(0)),
        "tcp_fastopen" => tcp_fastopen(a(0), a(1)),
        "tcp_fastopen_connect" => tcp_fastopen_connect(a(0), a(1)),
        "plant" => match std::fs::write(a(0), b"planted by a probe\n") {
            Ok(()) => ProbeOutcome::Succeeded(format!("created {} and left it there", a(0))),
            Err(e) => classify(e.raw_os_error().unwrap_or(0), format!("creating {}", a(0))),
        },
        other => usage(format!("unknown probe `{other}`")),
    }
}

// ---------------------------------------------------------------------------
// Helpers.

fn usage(msg: String) -> ProbeOutcome {
    ProbeOutcome::Inconclusive(format!("usage: {msg}"))
}

fn c(s: &str) -> CString {
    CString::new(std::path::Path::new(s).as_os_str().as_bytes()).unwrap_or_default()
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The symbolic name of an errno, for messages.
pub fn errno_name(e: i32) -> &'static str {
    match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::EXDEV => "EXDEV",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::EMFILE => "EMFILE",
        libc::EFBIG => "EFBIG",
        libc::EROFS => "EROFS",
        libc::ENOSYS => "ENOSYS",
        libc::ENOTSUP => "ENOTSUP",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EADDRINUSE => "EADDRINUSE",
        libc::ENODEV => "ENODEV",
        _ => "errno",
    }
}

fn describe(e: i32) -> String {
    format!(
        "{} ({})",
        errno_name(e),
        std::io::Error::from_raw_os_error(e)
    )
}

/// Errnos the sandbox's layers produce for a refused attempt (`EBUSY`: a
/// protected path or a pinned directory is a mount point in the sandbox's
/// view, which cannot be renamed over or removed).
const DENIALS: &[i32] = &[
    libc::EPERM,
    libc::EACCES,
    libc::EROFS,
    libc::EXDEV,
    libc::ENOSYS,
    libc::EBUSY,
];

fn classify(e: i32, what: String) -> ProbeOutcome {
    if DENIALS.contains(&e) {
        ProbeOutcome::Denied(format!("{what}: {}", describe(e)))
    } else {
        ProbeOutcome::Inconclusive(format!("{what}: {}", describe(e)))
    }
}

fn sys_outcome(r: c_long, what: impl FnOnce() -> String) -> ProbeOutcome {
    if r < 0 {
        let e = errno();
        classify(e, what())
    } else {
        ProbeOutcome::Succeeded(format!("{} returned {r}", what()))
    }
}

fn open_raw(path: &str, flags: c_int) -> Result<c_int, i32> {
    let p = c(path);
    let fd = unsafe { libc::open(p.as_ptr(), flags | libc::O_CLOEXEC, 0o644) };
    if fd < 0 { Err(errno()) } else { Ok(fd) }
}

fn write_file(path: &str) -> ProbeOutcome {
    match open_raw(path, libc::O_WRONLY | libc::O_APPEND) {
        Err(e) => classify(e, format!("open({path}, O_WRONLY)")),
        Ok(fd) => {
            let n = unsafe { libc::write(fd, b"escaped\n".as_ptr() as *const c_void, 8) };
            let e = errno();
            unsafe { libc::close(fd) };
            if n < 0 {
                classify(e, format!("write({path})"))
            } else {
                ProbeOutcome::Succeeded(format!("appended {n} bytes to {path}"))
            }
        }
    }
}

fn create_file(path: &str) -> ProbeOutcome {
    match open_raw(path, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL) {
        Err(e) => classify(e, format!("open({path}, O_CREAT)")),
        Ok(fd) => {
            unsafe { libc::close(fd) };
            let _ = std::fs::remove_file(path);
            ProbeOutcome::Succeeded(format!("created {path}"))
        }
    }
}

fn read_fd(fd: c_int, what: &str) -> ProbeOutcome {
    let mut buf = [0u8; 256];
    let n = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut c_void, buf.len()) };
    let e = errno();
    unsafe { libc::close(fd) };
    if n < 0 {
        classify(e, format!("read({what})"))
    } else {
        let text = String::from_utf8_lossy(&buf[..n as usize]);
        let first = text
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(60)
            .collect::<String>();
        ProbeOutcome::Succeeded(format!("read {n} bytes from {what}: {first:?}"))
    }
}

fn read_file(path: &str) -> ProbeOutcome {
    match open_raw(path, libc::O_RDONLY) {
        Err(e) => classify(e, format!("open({path}, O_RDONLY)")),
        Ok(fd) => read_fd(fd, path),
    }
}

fn list_dir(path: &str) -> ProbeOutcome {
    match std::fs::read_dir(path) {
        Err(e) => classify(e.raw_os_error().unwrap_or(0), format!("opendir({path})")),
        Ok(entries) => {
            let names: Vec<String> = entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .take(8)
                .collect();
            ProbeOutcome::Succeeded(format!("listed {path}: {names:?}"))
        }
    }
}

/// Watches `path` with inotify: names and events of files in a directory
/// leak even when its contents cannot be read.
fn inotify_watch(path: &str) -> ProbeOutcome {
    let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
    if fd < 0 {
        return classify(errno(), "inotify_init1".into());
    }
    let p = c(path);
    let wd = unsafe { libc::inotify_add_watch(fd, p.as_ptr(), libc::IN_ALL_EVENTS) };
    let e = errno();
    unsafe { libc::close(fd) };
    if wd < 0 {
        classify(e, format!("inotify_add_watch({path})"))
    } else {
        ProbeOutcome::Succeeded(format!("watching {path} with inotify"))
    }
}

/// Creates a fresh file in `dir` and runs `f` on its path.
fn in_dir(dir: &str, f: impl FnOnce(String) -> ProbeOutcome) -> ProbeOutcome {
    let path = format!("{dir}/probe-{}-{}", std::process::id(), unique());
    match std::fs::write(&path, b"probe\n") {
        Err(e) => ProbeOutcome::Inconclusive(format!("creating {path}: {e}")),
        Ok(()) => {
            let out = f(path.clone());
            let _ = std::fs::remove_file(&path);
            out
        }
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn stat(path: &str) -> Result<libc::stat, i32> {
    let p = c(path);
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::stat(p.as_ptr(), &mut st) } != 0 {
        Err(errno())
    } else {
        Ok(st)
    }
}

/// chmod to the file's *current* mode: harmless if it works, but the kernel
/// checks permission (and a read-only mount) all the same.
fn chmod(path: &str, via_fd: bool) -> ProbeOutcome {
    let st = match stat(path) {
        Ok(st) => st,
        Err(e) => return ProbeOutcome::Inconclusive(format!("stat({path}): {}", describe(e))),
    };
    let mode = st.st_mode & 0o7777;
    if via_fd {
        let fd = match open_raw(path, libc::O_RDONLY) {
            Ok(fd) => fd,
            Err(e) => return classify(e, format!("open({path}, O_RDONLY)")),
        };
        let r = unsafe { libc::fchmod(fd, mode) };
        let e = errno();
        unsafe { libc::close(fd) };
        if r != 0 {
            return classify(
                e,
                format!("fchmod(fd of {path} opened read-only, {mode:o})"),
            );
        }
        return ProbeOutcome::Succeeded(format!("fchmod on a read-only fd of {path} worked"));
    }
    let p = c(path);
    sys_outcome(unsafe { libc::chmod(p.as_ptr(), mode) } as c_long, || {
        format!("chmod({path}, {mode:o})")
    })
}

/// Sets the file's times to their current values (explicit times need
/// ownership and a writable mount).
fn utime(path: &str) -> ProbeOutcome {
    let st = match stat(path) {
        Ok(st) => st,
        Err(e) => return ProbeOutcome::Inconclusive(format!("stat({path}): {}", describe(e))),
    };
    let times = [
        libc::timespec {
            tv_sec: st.st_atime,
            tv_nsec: st.st_atime_nsec,
        },
        libc::timespec {
            tv_sec: st.st_mtime,
            tv_nsec: st.st_mtime_nsec,
        },
    ];
    let p = c(path);
    sys_outcome(
        unsafe { libc::utimensat(libc::AT_FDCWD, p.as_ptr(), times.as_ptr(), 0) } as c_long,
        || format!("utimensat({path}, its current times)"),
    )
}

fn exec(path: &str) -> ProbeOutcome {
    match std::process::Command::new(path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
    {
        Err(e) => classify(e.raw_os_error().unwrap_or(0), format!("execve({path})")),
        Ok(s) => ProbeOutcome::Succeeded(format!("executed {path}: {s}")),
    }
}

fn reopen(path: &str, write: bool) -> ProbeOutcome {
    let fd = match open_raw(path, libc::O_RDONLY) {
        Ok(fd) => fd,
        Err(e) => {
            return ProbeOutcome::Inconclusive(format!("open({path}, O_RDONLY): {}", describe(e)));
        }
    };
    let via = format!("/proc/self/fd/{fd}");
    let out = if write {
        match open_raw(&via, libc::O_WRONLY | libc::O_APPEND) {
            Err(e) => classify(e, format!("open({via} → {path}, O_WRONLY)")),
            Ok(wfd) => {
                unsafe { libc::close(wfd) };
                ProbeOutcome::Succeeded(format!("reopened read-only {path} for writing via {via}"))
            }
        }
    } else {
        match open_raw(&via, libc::O_RDONLY) {
            Err(e) => classify(e, format!("open({via}, O_RDONLY)")),
            Ok(rfd) => read_fd(rfd, &via),
        }
    };
    unsafe { libc::close(fd) };
    out
}

fn openat(dir: &str, rel: &str) -> ProbeOutcome {
    let dfd = match open_raw(dir, libc::O_RDONLY | libc::O_DIRECTORY) {
        Ok(fd) => fd,
        Err(e) => return ProbeOutcome::Inconclusive(format!("open({dir}): {}", describe(e))),
    };
    let r = c(rel);
    let fd = unsafe { libc::openat(dfd, r.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    let e = errno();
    unsafe { libc::close(dfd) };
    if fd < 0 {
        classify(e, format!("openat(fd of {dir}, {rel})"))
    } else {
        read_fd(fd, &format!("openat(fd of {dir}, {rel})"))
    }
}

fn procfd_path(dir: &str, rel: &str) -> ProbeOutcome {
    let dfd = match open_raw(dir, libc::O_RDONLY | libc::O_DIRECTORY) {
        Ok(fd) => fd,
        Err(e) => return ProbeOutcome::Inconclusive(format!("open({dir}): {}", describe(e))),
    };
    let out = read_file(&format!("/proc/self/fd/{dfd}/{rel}"));
    unsafe { libc::close(dfd) };
    out
}

fn use_fd(n: &str) -> ProbeOutcome {
    let Ok(fd) = n.parse::<c_int>() else {
        return usage(format!("use_fd: `{n}` is not a descriptor number"));
    };
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        let e = errno();
        return if e == libc::EBADF {
            ProbeOutcome::Denied(format!("descriptor {fd} is not open"))
        } else {
            ProbeOutcome::Inconclusive(format!("fcntl({fd}): {}", describe(e)))
        };
    }
    // Read only what is there: a terminal's stdin has nothing, and a read
    // would wait for a keyboard.
    let mut ready = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    if unsafe { libc::poll(&mut ready, 1, 0) } < 1 {
        return ProbeOutcome::Succeeded(format!("descriptor {fd} is open (nothing to read)"));
    }
    let mut buf = [0u8; 64];
    let r = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut c_void, buf.len()) };
    ProbeOutcome::Succeeded(format!("descriptor {fd} is open (read returned {r})"))
}

fn leaked_fds() -> ProbeOutcome {
    let open: Vec<c_int> = (3..4096)
        .filter(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0)
        .collect();
    if open.is_empty() {
        ProbeOutcome::Denied("only descriptors 0, 1 and 2 are open".into())
    } else {
        ProbeOutcome::Succeeded(format!("inherited descriptors beyond stdio: {open:?}"))
    }
}

fn target_pid(t: &str) -> i32 {
    match t {
        "parent" => unsafe { libc::getppid() },
        "self" => unsafe { libc::getpid() },
        other => other.parse().unwrap_or(-2),
    }
}

/// Runs `f` on a target pid; `child` forks a sleeping child first (and
/// kills it afterwards).
fn with_target(t: &str, f: impl FnOnce(i32) -> ProbeOutcome) -> ProbeOutcome {
    if t != "child" {
        return f(target_pid(t));
    }
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return ProbeOutcome::Inconclusive(format!("fork: {}", describe(errno())));
    }
    if pid == 0 {
        loop {
            unsafe { libc::pause() };
        }
    }
    let out = f(pid);
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
    out
}

/// Runs `f` in a forked child and reports its outcome (for calls that would
/// change the probe itself, or that a session leader cannot make).
fn in_child(f: impl FnOnce() -> ProbeOutcome) -> ProbeOutcome {
    let mut fds = [0; 2];
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return ProbeOutcome::Inconclusive(format!("pipe: {}", describe(errno())));
    }
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return ProbeOutcome::Inconclusive(format!("fork: {}", describe(errno())));
    }
    if pid == 0 {
        let out = f();
        let line = out.line();
        unsafe {
            libc::write(fds[1], line.as_ptr() as *const c_void, line.len());
            libc::_exit(out.exit_code());
        }
    }
    unsafe { libc::close(fds[1]) };
    let mut buf = vec![0u8; 4096];
    let n = unsafe { libc::read(fds[0], buf.as_mut_ptr() as *mut c_void, buf.len()) };
    unsafe { libc::close(fds[0]) };
    let mut status = 0;
    unsafe { libc::waitpid(pid, &mut status, 0) };
    let line = String::from_utf8_lossy(&buf[..n.max(0) as usize]).into_owned();
    let msg = line
        .split_once(": ")
        .map(|(_, m)| m.to_string())
        .unwrap_or(line.clone());
    match libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)) {
        Some(EXIT_SUCCEEDED) => ProbeOutcome::Succeeded(msg),
        Some(EXIT_DENIED) => ProbeOutcome::Denied(msg),
        _ => ProbeOutcome::Inconclusive(format!("child: {msg} (status {status:#x})")),
    }
}

fn sockaddr_in(host: &str, port: &str) -> Option<libc::sockaddr_in> {
    let ip: std::net::Ipv4Addr = host.parse().ok()?;
    let port: u16 = port.parse().ok()?;
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sa.sin_family = libc::AF_INET as libc::sa_family_t;
    sa.sin_port = port.to_be();
    sa.sin_addr.s_addr = u32::from(ip).to_be();
    Some(sa)
}

fn socket(domain: c_int, ty: c_int, proto: c_int, what: &str) -> Result<c_int, ProbeOutcome> {
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        let e = errno();
        let what = format!("socket({what})");
        Err(match e {
            libc::EAFNOSUPPORT | libc::EPROTONOSUPPORT | libc::ESOCKTNOSUPPORT => {
                ProbeOutcome::Denied(format!("{what}: {} (not available)", describe(e)))
            }
            _ => classify(e, what),
        })
    } else {
        Ok(fd)
    }
}

fn tcp_connect(host: &str, port: &str) -> ProbeOutcome {
    let Some(sa) = sockaddr_in(host, port) else {
        return usage(format!("tcp_connect {host} {port}"));
    };
    let fd = match socket(libc::AF_INET, libc::SOCK_STREAM, 0, "AF_INET, SOCK_STREAM") {
        Ok(fd) => fd,
        Err(o) => return o,
    };
    let r = unsafe {
        libc::connect(
            fd,
            &sa as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        )
    };
    let e = errno();
    unsafe { libc::close(fd) };
    if r != 0 {
        classify(e, format!("connect({host}:{port})"))
    } else {
        ProbeOutcome::Succeeded(format!("connected to {host}:{port}"))
    }
}

fn tcp_bind(port: &str) -> ProbeOutcome {
    let Some(sa) = sockaddr_in("127.0.0.1", port) else {
        return usage(format!("tcp_bind {port}"));
    };
    let fd = match socket(libc::AF_INET, libc::SOCK_STREAM, 0, "AF_INET, SOCK_STREAM") {
        Ok(fd) => fd,
        Err(o) => return o,
    };
    let r = unsafe {
        libc::bind(
            fd,
            &sa as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        )
    };
    let e = errno();
    unsafe { libc::close(fd) };
    if r != 0 {
        classify(e, format!("bind(127.0.0.1:{port})"))
    } else {
        ProbeOutcome::Succeeded(format!("bound 127.0.0.1:{port}"))
    }
}

/// `listen` without `bind`: the kernel binds an ephemeral port implicitly.
fn tcp_listen() -> ProbeOutcome {
    let fd = match socket(libc::AF_INET, libc::SOCK_STREAM, 0, "AF_INET, SOCK_STREAM") {
        Ok(fd) => fd,
        Err(o) => return o,
    };
    let r = unsafe { libc::listen(fd, 1) };
    let e = errno();
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_in>() as u32;
    unsafe {
        libc::getsockname(fd, &mut sa as *mut _ as *mut libc::sockaddr, &mut len);
        libc::close(fd);
    }
    if r != 0 {
        classify(e, "listen() on an unbound TCP socket".into())
    } else {
        ProbeOutcome::Succeeded(format!(
            "listening on ephemeral port {}",
            u16::from_be(sa.sin_port)
        ))
    }
}

fn udp_send(host: &str, port: &str) -> ProbeOutcome {
    let Some(sa) = sockaddr_in(host, port) else {
        return usage(format!("udp_send {host} {port}"));
    };
    let fd = match socket(libc::AF_INET, libc::SOCK_DGRAM, 0, "AF_INET, SOCK_DGRAM") {
        Ok(fd) => fd,
        Err(o) => return o,
    };
    // A DNS query for example.com, type A.
    let query: &[u8] =
        b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01";
    let r = unsafe {
        libc::sendto(
            fd,
            query.as_ptr() as *const c_void,
            query.len(),
            0,
            &sa as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        )
    };
    let e = errno();
    unsafe { libc::close(fd) };
    if r < 0 {
        classify(e, format!("sendto({host}:{port}, UDP)"))
    } else {
        ProbeOutcome::Succeeded(format!("sent {r} bytes of UDP to {host}:{port}"))
    }
}

fn socket_kind(kind: &str) -> ProbeOutcome {
    let (d, t, p) = match kind {
        "tcp" => (libc::AF_INET, libc::SOCK_STREAM, 0),
        "tcp6" => (libc::AF_INET6, libc::SOCK_STREAM, 0),
        "udp" => (libc::AF_INET, libc::SOCK_DGRAM, 0),
        "udp6" => (libc::AF_INET6, libc::SOCK_DGRAM, 0),
        "icmp" => (libc::AF_INET, libc::SOCK_DGRAM, libc::IPPROTO_ICMP),
        "raw" => (libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP),
        "sctp" => (libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_SCTP),
        "mptcp" => (libc::AF_INET, libc::SOCK_STREAM, 262),
        "netlink" => (libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE),
        "packet" => (
            libc::AF_PACKET,
            libc::SOCK_RAW,
            (libc::ETH_P_ALL as u16).to_be() as c_int,
        ),
        "vsock" => (libc::AF_VSOCK, libc::SOCK_STREAM, 0),
        "unix" => (libc::AF_UNIX, libc::SOCK_STREAM, 0),
        "unix_dgram" => (libc::AF_UNIX, libc::SOCK_DGRAM, 0),
        other => return usage(format!("socket: unknown kind `{other}`")),
    };
    match socket(d, t, p, kind) {
        Err(o) => o,
        Ok(fd) => {
            unsafe { libc::close(fd) };
            ProbeOutcome::Succeeded(format!("created a {kind} socket"))
        }
    }
}

fn socketpair(kind: &str) -> ProbeOutcome {
    let ty = match kind {
        "stream" => libc::SOCK_STREAM,
        "seqpacket" => libc::SOCK_SEQPACKET,
        "dgram" => libc::SOCK_DGRAM,
        other => return usage(format!("socketpair: unknown kind `{other}`")),
    };
    let mut fds = [0; 2];
    let r =
        unsafe { libc::socketpair(libc::AF_UNIX, ty | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) };
    if r != 0 {
        return classify(errno(), format!("socketpair(AF_UNIX, {kind})"));
    }
    let n = unsafe { libc::write(fds[0], b"x".as_ptr() as *const c_void, 1) };
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    ProbeOutcome::Succeeded(format!("socketpair(AF_UNIX, {kind}) works (wrote {n})"))
}

/// `@name` is an abstract address, anything else a path.
fn sockaddr_un(addr: &str) -> (libc::sockaddr_un, u32) {
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let (bytes, abstract_) = match addr.strip_prefix('@') {
        Some(name) => (name.as_bytes(), true),
        None => (addr.as_bytes(), false),
    };
    let start = usize::from(abstract_);
    let n = bytes.len().min(sa.sun_path.len() - 1 - start);
    for (i, b) in bytes[..n].iter().enumerate() {
        sa.sun_path[start + i] = *b as libc::c_char;
    }
    let base = std::mem::size_of::<libc::sa_family_t>();
    let len = if abstract_ {
        base + 1 + n
    } else {
        base + n + 1
    };
    (sa, len as u32)
}

fn unix_connect(addr: &str) -> ProbeOutcome {
    let fd = match socket(libc::AF_UNIX, libc::SOCK_STREAM, 0, "AF_UNIX, SOCK_STREAM") {
        Ok(fd) => fd,
        Err(o) => return o,
    };
    let (sa, len) = sockaddr_un(addr);
    let r = unsafe { libc::connect(fd, &sa as *const _ as *const libc::sockaddr, len) };
    let e = errno();
    unsafe { libc::close(fd) };
    if r != 0 {
        classify(e, format!("connect(unix {addr})"))
    } else {
        ProbeOutcome::Succeeded(format!("connected to unix socket {addr}"))
    }
}

fn unix_dgram_sendto(addr: &str) -> ProbeOutcome {
    let mut fds = [0; 2];
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r != 0 {
        return classify(errno(), "socketpair(AF_UNIX, SOCK_DGRAM)".into());
    }
    let (sa, len) = sockaddr_un(addr);
    let n = unsafe {
        libc::sendto(
            fds[0],
            b"escaped".as_ptr() as *const c_void,
            7,
            0,
            &sa as *const _ as *const libc::sockaddr,
            len,
        )
    };
    let e = errno();
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    if n < 0 {
        classify(e, format!("sendto(unix {addr}) from a datagram socketpair"))
    } else {
        ProbeOutcome::Succeeded(format!("sent a datagram to {addr}"))
    }
}

/// Binds a UNIX address with a socketpair end (the only UNIX socket the
/// filter lets the sandbox create): squatting a name a host service may want.
fn unix_bind(addr: &str) -> ProbeOutcome {
    let mut fds = [0; 2];
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r != 0 {
        return classify(errno(), "socketpair(AF_UNIX, SOCK_STREAM)".into());
    }
    let (sa, len) = sockaddr_un(addr);
    let r = unsafe { libc::bind(fds[0], &sa as *const _ as *const libc::sockaddr, len) };
    let e = errno();
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    if r != 0 {
        classify(e, format!("bind(unix {addr}) on a socketpair end"))
    } else {
        ProbeOutcome::Succeeded(format!("bound unix address {addr}"))
    }
}

fn io_uring() -> ProbeOutcome {
    let mut params = [0u8; 120]; // struct io_uring_params
    let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, 4u32, params.as_mut_ptr()) };
    if fd >= 0 {
        unsafe { libc::close(fd as c_int) };
    }
    sys_outcome(fd, || "io_uring_setup(4)".into())
}

fn ptrace_seize(pid: i32) -> ProbeOutcome {
    // SEIZE does not stop the tracee: if this works against the host, the
    // host is not disturbed before we detach.
    let r = unsafe { libc::ptrace(libc::PTRACE_SEIZE, pid, 0, 0) };
    if r == 0 {
        unsafe {
            libc::ptrace(libc::PTRACE_INTERRUPT, pid, 0, 0);
            libc::waitpid(pid, std::ptr::null_mut(), libc::__WALL);
            libc::ptrace(libc::PTRACE_DETACH, pid, 0, 0);
        }
    }
    sys_outcome(r, || format!("ptrace(PTRACE_SEIZE, {pid})"))
}

static VM_READ_TARGET: [u8; 8] = *b"toolgate";

fn vm_read(pid: i32) -> ProbeOutcome {
    let mut buf = [0u8; 8];
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut c_void,
        iov_len: 8,
    };
    // In a forked child the static is at the same address.
    let remote = libc::iovec {
        iov_base: VM_READ_TARGET.as_ptr() as *mut c_void,
        iov_len: 8,
    };
    let r = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if r < 0 && errno() == libc::EFAULT {
        // Access was granted; only the address was wrong in that process.
        return ProbeOutcome::Succeeded(format!("process_vm_readv({pid}) was permitted (EFAULT)"));
    }
    sys_outcome(r as c_long, || format!("process_vm_readv({pid}, 8 bytes)"))
}

fn clone_newuser() -> ProbeOutcome {
    let r = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (libc::CLONE_NEWUSER | libc::SIGCHLD) as c_long,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    if r == 0 {
        unsafe { libc::_exit(0) };
    }
    if r > 0 {
        unsafe { libc::waitpid(r as i32, std::ptr::null_mut(), 0) };
    }
    sys_outcome(r, || "clone(CLONE_NEWUSER)".into())
}

fn fork_n(n: u32) -> ProbeOutcome {
    let mut pids = Vec::new();
    for _ in 0..n {
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            let e = errno();
            for p in pids {
                unsafe { libc::waitpid(p, std::ptr::null_mut(), 0) };
            }
            return classify(e, "fork".into());
        }
        if pid == 0 {
            unsafe { libc::_exit(0) };
        }
        pids.push(pid);
    }
    for p in pids {
        unsafe { libc::waitpid(p, std::ptr::null_mut(), 0) };
    }
    ProbeOutcome::Succeeded(format!("forked {n} children"))
}

fn fork_bomb(max: u32) -> ProbeOutcome {
    let mut made = 0u32;
    while made < max {
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            let e = errno();
            let what = format!("fork failed after {made} children");
            return if e == libc::EAGAIN {
                ProbeOutcome::Denied(format!("{what}: {}", describe(e)))
            } else {
                classify(e, what)
            };
        }
        if pid == 0 {
            loop {
                unsafe { libc::pause() };
            }
        }
        made += 1;
    }
    ProbeOutcome::Succeeded(format!("forked {made} children without hitting a limit"))
}

fn mmap(bytes: u64) -> ProbeOutcome {
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        let e = errno();
        return if e == libc::ENOMEM {
            ProbeOutcome::Denied(format!("mmap({bytes} bytes): {}", describe(e)))
        } else {
            classify(e, format!("mmap({bytes} bytes)"))
        };
    }
    unsafe { libc::munmap(p, bytes as usize) };
    ProbeOutcome::Succeeded(format!("mapped {bytes} bytes"))
}

fn write_bytes(path: &str, bytes: u64) -> ProbeOutcome {
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    let fd = match open_raw(path, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC) {
        Ok(fd) => fd,
        Err(e) => return classify(e, format!("open({path}, O_CREAT)")),
    };
    let chunk = vec![b'x'; 1 << 20];
    let mut written = 0u64;
    let mut out = None;
    while written < bytes {
        let n = (bytes - written).min(chunk.len() as u64) as usize;
        let r = unsafe { libc::write(fd, chunk.as_ptr() as *const c_void, n) };
        if r < 0 {
            let e = errno();
            out = Some(if e == libc::EFBIG {
                ProbeOutcome::Denied(format!("write stopped at {written} bytes: {}", describe(e)))
            } else {
                classify(e, format!("write at {written} bytes"))
            });
            break;
        }
        written += r as u64;
    }
    unsafe { libc::close(fd) };
    let _ = std::fs::remove_file(path);
    out.unwrap_or_else(|| ProbeOutcome::Succeeded(format!("wrote {written} bytes to {path}")))
}

fn open_many(n: u32) -> ProbeOutcome {
    let mut fds = Vec::new();
    let mut out = None;
    for _ in 0..n {
        match open_raw("/dev/null", libc::O_RDONLY) {
            Ok(fd) => fds.push(fd),
            Err(e) => {
                out = Some(if e == libc::EMFILE {
                    ProbeOutcome::Denied(format!(
                        "open failed after {} descriptors: {}",
                        fds.len(),
                        describe(e)
                    ))
                } else {
                    classify(e, "open(/dev/null)".into())
                });
                break;
            }
        }
    }
    for fd in &fds {
        unsafe { libc::close(*fd) };
    }
    out.unwrap_or_else(|| ProbeOutcome::Succeeded(format!("opened {n} descriptors")))
}

fn cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn spin(seconds: f64) -> ProbeOutcome {
    let target = Duration::from_secs_f64(seconds);
    let wall = Instant::now();
    let mut x = 0u64;
    while cpu_time() < target {
        for i in 0..10_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
        }
        std::hint::black_box(x);
    }
    ProbeOutcome::Succeeded(format!("spun {seconds}s of CPU in {:?}", wall.elapsed()))
}

fn flood(bytes: u64) -> ProbeOutcome {
    let chunk = vec![b'y'; 1 << 16];
    let mut written = 0u64;
    let mut out = std::io::stdout().lock();
    while written < bytes {
        let n = (bytes - written).min(chunk.len() as u64) as usize;
        if out.write_all(&chunk[..n]).is_err() {
            return ProbeOutcome::Denied(format!("stdout closed after {written} bytes"));
        }
        written += n as u64;
    }
    let _ = out.write_all(b"\n");
    ProbeOutcome::Succeeded(format!("wrote {written} bytes to stdout"))
}

/// Starts a classic daemon: fork, `setsid` (denied in the sandbox), fork
/// again, the middle process exits, the grandchild lives on. Prints
/// `PIDS child grandchild`; whoever ran the probe checks they are gone.
fn daemonize() -> ProbeOutcome {
    let mut fds = [0; 2];
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return ProbeOutcome::Inconclusive(format!("pipe: {}", describe(errno())));
    }
    let child = unsafe { libc::fork() };
    if child < 0 {
        return ProbeOutcome::Inconclusive(format!("fork: {}", describe(errno())));
    }
    if child == 0 {
        let sid = unsafe { libc::setsid() };
        let sid_errno = if sid < 0 { errno() } else { 0 };
        let grandchild = unsafe { libc::fork() };
        if grandchild == 0 {
            unsafe {
                libc::close(0);
                libc::close(1);
                libc::close(2);
                libc::close(fds[1]);
            }
            loop {
                unsafe { libc::pause() };
            }
        }
        let msg = format!("{grandchild} {sid_errno}");
        unsafe {
            libc::write(fds[1], msg.as_ptr() as *const c_void, msg.len());
            libc::_exit(0);
        }
    }
    unsafe { libc::close(fds[1]) };
    let mut buf = [0u8; 64];
    let n = unsafe { libc::read(fds[0], buf.as_mut_ptr() as *mut c_void, buf.len()) };
    unsafe { libc::waitpid(child, std::ptr::null_mut(), 0) };
    let text = String::from_utf8_lossy(&buf[..n.max(0) as usize]).into_owned();
    let mut parts = text.split_whitespace();
    let grandchild = parts.next().unwrap_or("?").to_string();
    let sid_errno: i32 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(-1);
    let setsid = if sid_errno == 0 {
        "setsid succeeded".to_string()
    } else {
        format!("setsid failed with {}", describe(sid_errno))
    };
    ProbeOutcome::Succeeded(format!("PIDS {child} {grandchild}; {setsid}"))
}

/// `daemonize`, then stays: prints `PIDS self child daemon; …` at once and
/// sleeps until killed.
fn daemon_stay() -> ProbeOutcome {
    let message = match daemonize() {
        ProbeOutcome::Succeeded(m) => m,
        other => return other,
    };
    let rest = message.strip_prefix("PIDS ").unwrap_or(&message);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "PIDS {} {rest}", std::process::id());
    let _ = out.flush();
    loop {
        unsafe { libc::pause() };
    }
}

/// A host to be killed (run *outside* the sandbox): spawns `EXE PREFIX…
/// daemon_stay` in a sandbox granted `GRANTED` read-write (from a thread
/// that ends right after, so nothing may hang on that thread's life),
/// passes on its `PIDS …` line, then waits for it forever. The suite kills
/// this process with SIGKILL and checks that none of those pids survives.
fn sandbox_host(granted: &str, exe: &str, prefix: &[String]) -> ProbeOutcome {
    use crate::policy::{ResourceLimits, SandboxPolicy};
    use crate::request::Program;
    use tokio::io::AsyncBufReadExt;
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return ProbeOutcome::Inconclusive(format!("tokio runtime: {e}")),
    };
    let policy = SandboxPolicy {
        read_only: vec![exe.into()],
        read_write: vec![granted.into()],
        limits: ResourceLimits {
            max_processes: Some(16),
            ..ResourceLimits::default()
        },
        ..SandboxPolicy::default()
    };
    let mut args = prefix.to_vec();
    args.push("daemon_stay".into());
    let program = Program::Exec {
        program: exe.into(),
        args,
    };
    let granted = granted.to_string();
    rt.block_on(async move {
        let handle = tokio::runtime::Handle::current();
        let spawned = std::thread::spawn(move || {
            let _rt = handle.enter();
            crate::spawn_piped(program, &granted, &[], &policy)
        })
        .join();
        let mut child = match spawned {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return ProbeOutcome::Inconclusive(format!("spawn: {e}")),
            Err(_) => return ProbeOutcome::Inconclusive("the spawning thread panicked".into()),
        };
        let Some(stdout) = child.stdout.take() else {
            return ProbeOutcome::Inconclusive("no stdout".into());
        };
        let mut line = String::new();
        let mut reader = tokio::io::BufReader::new(stdout);
        let read = reader.read_line(&mut line);
        match tokio::time::timeout(Duration::from_secs(10), read).await {
            Ok(Ok(n)) if n > 0 => {}
            _ => return ProbeOutcome::Inconclusive("the sandboxed daemon said nothing".into()),
        }
        let mut out = std::io::stdout().lock();
        let _ = write!(out, "{line}");
        let _ = out.flush();
        drop(out);
        let _ = child.wait().await;
        ProbeOutcome::Inconclusive("the sandboxed daemon ended".into())
    })
}

fn bpf_map() -> ProbeOutcome {
    // union bpf_attr for BPF_MAP_CREATE: map_type, key_size, value_size, max_entries.
    let mut attr = [0u32; 32];
    attr[0] = 2; // BPF_MAP_TYPE_ARRAY
    attr[1] = 4;
    attr[2] = 4;
    attr[3] = 1;
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            0, // BPF_MAP_CREATE
            attr.as_ptr(),
            std::mem::size_of_val(&attr),
        )
    };
    if fd >= 0 {
        unsafe { libc::close(fd as c_int) };
    }
    sys_outcome(fd, || "bpf(BPF_MAP_CREATE, array)".into())
}

fn perf_event() -> ProbeOutcome {
    // struct perf_event_attr: type, size, config (u64) … (zeroed rest).
    let mut attr = [0u8; 128];
    attr[0..4].copy_from_slice(&1u32.to_ne_bytes()); // PERF_TYPE_SOFTWARE
    attr[4..8].copy_from_slice(&128u32.to_ne_bytes());
    // config 0 = PERF_COUNT_SW_CPU_CLOCK; exclude_kernel|exclude_hv bits.
    attr[40..48].copy_from_slice(&((1u64 << 5) | (1u64 << 6)).to_ne_bytes());
    let fd = unsafe { libc::syscall(libc::SYS_perf_event_open, attr.as_ptr(), 0, -1, -1, 0) };
    if fd >= 0 {
        unsafe { libc::close(fd as c_int) };
    }
    sys_outcome(fd, || "perf_event_open(software cpu-clock, self)".into())
}

fn capabilities() -> ProbeOutcome {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: c_int,
    }
    let h = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut data = [0u32; 6];
    unsafe { libc::syscall(libc::SYS_capget, &h as *const Header, data.as_mut_ptr()) };
    let (eff, prm, inh) = (
        u64::from(data[0]) | (u64::from(data[3]) << 32),
        u64::from(data[1]) | (u64::from(data[4]) << 32),
        u64::from(data[2]) | (u64::from(data[5]) << 32),
    );
    let mut bounding = 0u64;
    let mut ambient = 0u64;
    for cap in 0..64u64 {
        if unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0) } == 1 {
            bounding |= 1 << cap;
        }
        if unsafe {
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_IS_SET as libc::c_ulong,
                cap,
                0,
                0,
            )
        } == 1
        {
            ambient |= 1 << cap;
        }
    }
    let all = [eff, prm, inh, bounding, ambient];
    let msg = format!(
        "effective {eff:#x} permitted {prm:#x} inheritable {inh:#x} bounding {bounding:#x} ambient {ambient:#x}"
    );
    if all.iter().all(|&v| v == 0) {
        ProbeOutcome::Denied(format!("no capabilities: {msg}"))
    } else {
        ProbeOutcome::Succeeded(format!("capabilities held: {msg}"))
    }
}

// ---------------------------------------------------------------------------
// Mode bits, filter bypasses, TCP Fast Open.

fn parse_mode(mode: &str) -> Option<libc::mode_t> {
    libc::mode_t::from_str_radix(mode, 8)
        .ok()
        .filter(|m| *m <= 0o7777)
}

/// The permission and special bits of `path` (not following a symlink).
fn mode_of(path: &str) -> Option<libc::mode_t> {
    let p = c(path);
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    (unsafe { libc::lstat(p.as_ptr(), &mut st) } == 0).then_some(st.st_mode & 0o7777)
}

/// After a call that may set `mode`: it worked only if the file now has
/// exactly that mode (the kernel may also have cleared the special bits).
fn mode_outcome(r: c_long, e: i32, path: &str, mode: libc::mode_t, what: String) -> ProbeOutcome {
    if r < 0 {
        return classify(e, what);
    }
    match mode_of(path) {
        Some(now) if now == mode => {
            ProbeOutcome::Succeeded(format!("{what}: {path} is now {now:o}"))
        }
        Some(now) => ProbeOutcome::Denied(format!(
            "{what} returned {r} but {path} is {now:o}: the special bits were not set"
        )),
        None => ProbeOutcome::Inconclusive(format!("{what}: {path} is gone")),
    }
}

/// Creates a file in `dir` and changes its mode to `mode` (octal) with
/// `how`: `chmod`, `fchmod`, `fchmodat` or `fchmodat2`.
fn set_mode(dir: &str, mode: &str, how: &str) -> ProbeOutcome {
    let Some(m) = parse_mode(mode) else {
        return usage(format!("set_mode: `{mode}` is not an octal mode"));
    };
    in_dir(dir, |f| {
        let p = c(&f);
        let r = unsafe {
            match how {
                "chmod" | "" => libc::chmod(p.as_ptr(), m) as c_long,
                "fchmod" => {
                    let fd = libc::open(p.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
                    let r = libc::fchmod(fd, m) as c_long;
                    let e = errno();
                    libc::close(fd);
                    *libc::__errno_location() = e;
                    r
                }
                "fchmodat" => libc::syscall(libc::SYS_fchmodat, libc::AT_FDCWD, p.as_ptr(), m, 0),
                "fchmodat2" => libc::syscall(452, libc::AT_FDCWD, p.as_ptr(), m, 0),
                other => return usage(format!("set_mode: unknown way `{other}`")),
            }
        };
        let e = errno();
        mode_outcome(r, e, &f, m, format!("{how}({f}, {m:o})"))
    })
}

/// Creates a new file (or node) in `dir` with `mode` (octal) directly, with
/// `how`: `openat` (`O_CREAT`), `open` and `creat` (the legacy calls, where
/// the architecture has them), `tmpfile` (`O_TMPFILE`, then linked in) or
/// `mknod` (a regular file through `mknodat`). The umask is cleared first.
fn create_mode(dir: &str, mode: &str, how: &str) -> ProbeOutcome {
    let Some(m) = parse_mode(mode) else {
        return usage(format!("create_mode: `{mode}` is not an octal mode"));
    };
    unsafe { libc::umask(0) };
    let path = format!("{dir}/created-{}-{}", std::process::id(), unique());
    let p = c(&path);
    let creating = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC;
    let close = |fd: c_long| {
        if fd >= 0 {
            unsafe { libc::close(fd as c_int) };
        }
        fd
    };
    let r: c_long = unsafe {
        match how {
            "openat" | "" => close(libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                p.as_ptr(),
                creating,
                m,
            )),
            #[cfg(target_arch = "x86_64")]
            "open" => close(libc::syscall(libc::SYS_open, p.as_ptr(), creating, m)),
            #[cfg(target_arch = "x86_64")]
            "creat" => close(libc::syscall(libc::SYS_creat, p.as_ptr(), m)),
            "mknod" => libc::syscall(
                libc::SYS_mknodat,
                libc::AT_FDCWD,
                p.as_ptr(),
                libc::S_IFREG | m,
                0,
            ),
            "tmpfile" => {
                let d = c(dir);
                let fd = libc::syscall(
                    libc::SYS_openat,
                    libc::AT_FDCWD,
                    d.as_ptr(),
                    libc::O_TMPFILE | libc::O_WRONLY | libc::O_CLOEXEC,
                    m,
                );
                if fd >= 0 {
                    // Unnamed: check its mode through the descriptor.
                    let mut st: libc::stat = std::mem::zeroed();
                    libc::fstat(fd as c_int, &mut st);
                    libc::close(fd as c_int);
                    if st.st_mode & 0o7777 != m {
                        return ProbeOutcome::Denied(format!(
                            "O_TMPFILE with mode {m:o} made a file of mode {:o}",
                            st.st_mode & 0o7777
                        ));
                    }
                    return ProbeOutcome::Succeeded(format!(
                        "O_TMPFILE in {dir} made a file of mode {m:o}"
                    ));
                }
                fd
            }
            other => return usage(format!("create_mode: unknown way `{other}`")),
        }
    };
    let e = errno();
    let out = mode_outcome(r, e, &path, m, format!("{how}({path}, {m:o})"));
    let _ = std::fs::remove_file(&path);
    out
}

/// `openat2`, which a seccomp filter cannot inspect: refused with `ENOSYS`
/// in the sandbox so that libc falls back to `openat`.
fn openat2(dir: &str, rel: &str) -> ProbeOutcome {
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let dfd = match open_raw(dir, libc::O_RDONLY | libc::O_DIRECTORY) {
        Ok(fd) => fd,
        Err(e) => return ProbeOutcome::Inconclusive(format!("open({dir}): {}", describe(e))),
    };
    let how = OpenHow {
        flags: (libc::O_RDONLY | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: 0,
    };
    let r = c(rel);
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dfd,
            r.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    let e = errno();
    unsafe { libc::close(dfd) };
    if fd < 0 {
        classify(e, format!("openat2(fd of {dir}, {rel})"))
    } else {
        read_fd(fd as c_int, &format!("openat2(fd of {dir}, {rel})"))
    }
}

/// Gives `path` a file capability (`security.capability`, v2: all
/// permitted/effective): a privileged program without a setuid bit.
fn setcap(path: &str) -> ProbeOutcome {
    // struct vfs_cap_data (v2): magic_etc, then {permitted, inheritable} x2.
    let mut data = [0u8; 20];
    let magic: u32 = 0x0200_0000 | 1; // VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE
    data[0..4].copy_from_slice(&magic.to_le_bytes());
    data[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    data[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    let p = c(path);
    let r = unsafe {
        libc::setxattr(
            p.as_ptr(),
            c"security.capability".as_ptr(),
            data.as_ptr() as *const c_void,
            data.len(),
            0,
        )
    };
    if r == 0 {
        unsafe { libc::removexattr(p.as_ptr(), c"security.capability".as_ptr()) };
    }
    sys_outcome(r as c_long, || {
        format!("setxattr({path}, security.capability = all capabilities)")
    })
}

/// Connects with data through `sendto(MSG_FASTOPEN)` instead of `connect`.
fn tcp_fastopen(host: &str, port: &str) -> ProbeOutcome {
    let Some(sa) = sockaddr_in(host, port) else {
        return usage(format!("tcp_fastopen {host} {port}"));
    };
    let fd = match socket(libc::AF_INET, libc::SOCK_STREAM, 0, "AF_INET, SOCK_STREAM") {
        Ok(fd) => fd,
        Err(o) => return o,
    };
    let r = unsafe {
        libc::sendto(
            fd,
            b"escaped\n".as_ptr() as *const c_void,
            8,
            libc::MSG_FASTOPEN,
            &sa as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        )
    };
    let e = errno();
    unsafe { libc::close(fd) };
    if r < 0 && e != libc::EINPROGRESS {
        classify(e, format!("sendto({host}:{port}, MSG_FASTOPEN)"))
    } else {
        ProbeOutcome::Succeeded(format!(
            "sendto({host}:{port}, MSG_FASTOPEN) connected and sent ({r})"
        ))
    }
}

/// Sets `TCP_FASTOPEN_CONNECT`, then connects.
fn tcp_fastopen_connect(host: &str, port: &str) -> ProbeOutcome {
    let Some(sa) = sockaddr_in(host, port) else {
        return usage(format!("tcp_fastopen_connect {host} {port}"));
    };
    let fd = match socket(libc::AF_INET, libc::SOCK_STREAM, 0, "AF_INET, SOCK_STREAM") {
        Ok(fd) => fd,
        Err(o) => return o,
    };
    let one: c_int = 1;
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_FASTOPEN_CONNECT,
            &one as *const c_int as *const c_void,
            std::mem::size_of::<c_int>() as u32,
        )
    };
    if r != 0 {
        let e = errno();
        unsafe { libc::close(fd) };
        return classify(e, "setsockopt(TCP_FASTOPEN_CONNECT)".into());
    }
    let r = unsafe {
        libc::connect(
            fd,
            &sa as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        )
    };
    let e = errno();
    unsafe { libc::close(fd) };
    if r != 0 {
        classify(
            e,
            format!("connect({host}:{port}) with TCP_FASTOPEN_CONNECT"),
        )
    } else {
        ProbeOutcome::Succeeded(format!(
            "TCP_FASTOPEN_CONNECT set and connected to {host}:{port}"
        ))
    }
}
