//! The seccomp filter: what Landlock does not cover.
//!
//! Landlock confines paths, TCP ports, signals and abstract sockets. It does
//! not restrict which *kinds* of sockets exist (UDP, raw, netlink, packet,
//! vsock, UNIX sockets addressed by path), `listen` on an implicitly bound
//! ephemeral port, namespaces and mounts, kernel
//! keyrings, BPF, perf, io_uring (whose operations bypass seccomp), or calls
//! that act on another process by pid without a ptrace check (`setpriority`,
//! `prlimit64`, `sched_setaffinity`…, which a uid-0 sandbox could aim at the
//! host), or inotify watches (which reveal file names anywhere). This filter
//! denies those.
//!
//! It also refuses what would outlive the sandbox or slip past Landlock:
//!
//! * **setuid/setgid files.** Inside a read-write grant a program could
//!   `chmod 4755` a copy of a program; the sandbox's own mounts are
//!   `nosuid`, but the file stays on the host's file system, where (with the
//!   host running as root) it is a setuid-root binary for anyone. The filter
//!   refuses `S_ISUID`/`S_ISGID` in the mode of `chmod`, `fchmod`,
//!   `fchmodat`, `fchmodat2`, `creat`, `mkdir`, `mkdirat`, `mknod`, `mknodat`,
//!   and of `open`/`openat` when they create (`O_CREAT`, `O_TMPFILE`: without
//!   them the kernel ignores the mode). `openat2` keeps its flags and mode in
//!   a struct a filter cannot read, so it answers `ENOSYS` and libc falls
//!   back to `openat`. (File capabilities, the other way to a privileged
//!   program, need `CAP_SETFCAP`, which the sandbox never holds.)
//! * **TCP Fast Open.** `sendto`/`sendmsg`/`sendmmsg` with `MSG_FASTOPEN`
//!   connect an unconnected TCP socket without going through `connect`, so
//!   Landlock's port rule never sees the destination (a known Landlock gap).
//!   With TCP allowed, the flag is refused, and so is the
//!   `TCP_FASTOPEN_CONNECT` socket option.
//!
//! It also keeps the process group closed: the child calls `setsid()` before
//! the filter is loaded, and the filter then denies `setsid`/`setpgid` and
//! `clone(CLONE_PARENT)`, so no descendant can leave the group and `killpg`
//! reaches all of them. `fork`/`vfork`/`clone` go to the host through seccomp
//! user notification when a process limit is set ([`crate::supervisor`]).
//!
//! The program is written by hand rather than with `seccompiler`: it needs
//! masked not-equal comparisons on arguments (socket type), a user-notify
//! action and the x32 check, and at ~150 instructions it is easier to review
//! as a list than as a rule map. It is built in the parent; the child only
//! calls `seccomp(SECCOMP_SET_MODE_FILTER)`.
//!
//! Denied calls fail with `EPERM` (privileged operations, setuid modes),
//! `EACCES` (network) or `ENOSYS` (`clone3` and `openat2`, whose arguments
//! live in memory a filter cannot read, so that libc falls back to `clone`
//! and `openat`). A foreign architecture (32-bit syscalls
//! on x86_64) kills the process.

use libc::{c_long, sock_filter};

const RET_ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const RET_KILL_PROCESS: u32 = libc::SECCOMP_RET_KILL_PROCESS;
const RET_USER_NOTIF: u32 = libc::SECCOMP_RET_USER_NOTIF;
const fn ret_errno(e: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (e as u32 & libc::SECCOMP_RET_DATA)
}

// struct seccomp_data offsets.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
const fn off_arg_lo(i: u32) -> u32 {
    16 + 8 * i
}

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// Whether a filter can be built for this architecture.
pub(crate) const SUPPORTED_ARCH: bool = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));

/// What the filter allows beyond its fixed denials.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FilterOptions {
    /// TCP sockets (AF_INET/AF_INET6, SOCK_STREAM, protocol 0 or TCP) may be
    /// created. Without TCP grants no IP socket is needed at all.
    pub allow_tcp: bool,
    /// `bind` and `listen` may be called (TCP bind grants). Without them the
    /// sandbox cannot serve: Landlock does not see the ephemeral port that
    /// `listen` binds implicitly, nor a socketpair end bound to an abstract
    /// UNIX name (squatting a name a host service may need).
    pub allow_bind: bool,
    pub allow_ptrace: bool,
    pub allow_io_uring: bool,
    pub allow_inotify: bool,
    /// Route fork/vfork/clone to the host (process limit).
    pub notify_fork: bool,
    /// The sandbox runs on a terminal of its own: `tcsetpgrp`
    /// (`ioctl(TIOCSPGRP)`) answers success and does nothing. A job-control
    /// shell (dash) makes itself a process group (`setpgid`, denied here to
    /// keep the group closed) and then makes that group the terminal's
    /// foreground without checking the first step: the kernel accepts the
    /// pid of a process that leads no group, and the shell's next read of
    /// its terminal fails as a background read (`EIO`). Kept a no-op, the
    /// whole sandbox stays the foreground group: input reaches it and
    /// Ctrl-C interrupts what runs, as without job control.
    pub terminal: bool,
}

// ---------------------------------------------------------------------------
// A tiny assembler: forward jumps to labels, resolved in one pass.

#[derive(Clone, Copy)]
enum Target {
    Next,
    Label(u16),
}

enum Ins {
    Ld(u32),
    And(u32),
    Jeq(u32, Target, Target),
    Jset(u32, Target, Target),
    Ret(u32),
    Label(u16),
}

struct Asm {
    ins: Vec<Ins>,
    next_label: u16,
}

impl Asm {
    fn new() -> Self {
        Asm {
            ins: Vec::new(),
            next_label: 0,
        }
    }
    fn label(&mut self) -> Target {
        self.next_label += 1;
        Target::Label(self.next_label)
    }
    fn bind(&mut self, t: Target) {
        if let Target::Label(l) = t {
            self.ins.push(Ins::Label(l));
        }
    }
    fn ld(&mut self, off: u32) {
        self.ins.push(Ins::Ld(off));
    }
    fn and(&mut self, k: u32) {
        self.ins.push(Ins::And(k));
    }
    fn jeq(&mut self, k: u32, t: Target, f: Target) {
        self.ins.push(Ins::Jeq(k, t, f));
    }
    fn jset(&mut self, k: u32, t: Target, f: Target) {
        self.ins.push(Ins::Jset(k, t, f));
    }
    fn ret(&mut self, k: u32) {
        self.ins.push(Ins::Ret(k));
    }

    fn assemble(self) -> Vec<sock_filter> {
        // Position of each label = index of the next real instruction.
        let mut positions = std::collections::HashMap::new();
        let mut pc = 0usize;
        for i in &self.ins {
            match i {
                Ins::Label(l) => {
                    positions.insert(*l, pc);
                }
                _ => pc += 1,
            }
        }
        let rel = |from: usize, t: Target| -> u8 {
            match t {
                Target::Next => 0,
                Target::Label(l) => {
                    let to = positions[&l];
                    let off = to - from - 1;
                    u8::try_from(off).expect("seccomp jump too long")
                }
            }
        };
        let mut out = Vec::with_capacity(pc);
        for i in &self.ins {
            let at = out.len();
            let f = match *i {
                Ins::Label(_) => continue,
                Ins::Ld(off) => stmt(BPF_LD | BPF_W | BPF_ABS, off),
                Ins::And(k) => stmt(BPF_ALU | BPF_AND | BPF_K, k),
                Ins::Jeq(k, t, f) => jump(BPF_JMP | BPF_JEQ | BPF_K, k, rel(at, t), rel(at, f)),
                Ins::Jset(k, t, f) => jump(BPF_JMP | BPF_JSET | BPF_K, k, rel(at, t), rel(at, f)),
                Ins::Ret(k) => stmt(BPF_RET | BPF_K, k),
            };
            out.push(f);
        }
        out
    }
}

const BPF_LD: u16 = 0x00;
const BPF_W: u16 = 0x00;
const BPF_ABS: u16 = 0x20;
const BPF_ALU: u16 = 0x04;
const BPF_AND: u16 = 0x50;
const BPF_JMP: u16 = 0x05;
const BPF_JEQ: u16 = 0x10;
const BPF_JSET: u16 = 0x40;
const BPF_K: u16 = 0x00;
const BPF_RET: u16 = 0x06;

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}
fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

// ---------------------------------------------------------------------------

fn nr(n: c_long) -> u32 {
    n as u32
}

/// `fchmodat2` (Linux 6.6), the same number on every architecture; not in
/// `libc` for all of them yet.
const SYS_FCHMODAT2: c_long = 452;

/// The mode bits the sandbox may not set on any file.
const SETID_BITS: u32 = libc::S_ISUID | libc::S_ISGID;

/// `open` flags under which the mode argument is used: `O_CREAT`, and the
/// `__O_TMPFILE` bit of `O_TMPFILE` (which also carries `O_DIRECTORY`).
const CREATING_FLAGS: u32 = (libc::O_CREAT | (libc::O_TMPFILE & !libc::O_DIRECTORY)) as u32;

/// Calls whose mode argument (index) always applies.
fn mode_calls() -> Vec<(c_long, u32)> {
    use libc::*;
    #[allow(unused_mut)]
    let mut v = vec![
        (SYS_fchmod, 1),
        (SYS_fchmodat, 2),
        (SYS_FCHMODAT2, 2),
        (SYS_mkdirat, 2),
        (SYS_mknodat, 2),
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        (SYS_chmod, 1),
        (SYS_creat, 1),
        (SYS_mkdir, 1),
        (SYS_mknod, 1),
    ]);
    v
}

/// Calls that create with a mode only under [`CREATING_FLAGS`]: (number,
/// flags index, mode index).
fn open_calls() -> Vec<(c_long, u32, u32)> {
    #[allow(unused_mut)]
    let mut v = vec![(libc::SYS_openat, 2, 3)];
    #[cfg(target_arch = "x86_64")]
    v.push((libc::SYS_open, 1, 2));
    v
}

/// Calls denied with EPERM, always.
fn always_denied() -> Vec<c_long> {
    use libc::*;
    let mut v = vec![
        // Mounts and namespaces.
        SYS_mount,
        SYS_umount2,
        SYS_pivot_root,
        SYS_chroot,
        SYS_unshare,
        SYS_setns,
        SYS_open_tree,
        SYS_move_mount,
        SYS_fsopen,
        SYS_fsconfig,
        SYS_fsmount,
        SYS_fspick,
        SYS_mount_setattr,
        // Kernel attack surface and administration.
        SYS_bpf,
        SYS_perf_event_open,
        SYS_userfaultfd,
        SYS_kexec_load,
        SYS_kexec_file_load,
        SYS_init_module,
        SYS_finit_module,
        SYS_delete_module,
        SYS_keyctl,
        SYS_add_key,
        SYS_request_key,
        SYS_open_by_handle_at,
        SYS_name_to_handle_at,
        SYS_swapon,
        SYS_swapoff,
        SYS_reboot,
        SYS_sethostname,
        SYS_setdomainname,
        SYS_settimeofday,
        SYS_clock_settime,
        SYS_clock_adjtime,
        SYS_adjtimex,
        SYS_quotactl,
        SYS_quotactl_fd,
        SYS_syslog,
        SYS_vhangup,
        SYS_acct,
        SYS_fanotify_init,
        SYS_lookup_dcookie,
        SYS_migrate_pages,
        SYS_move_pages,
        // Identity.
        SYS_setuid,
        SYS_setgid,
        SYS_setreuid,
        SYS_setregid,
        SYS_setresuid,
        SYS_setresgid,
        SYS_setfsuid,
        SYS_setfsgid,
        SYS_setgroups,
        // Process group containment.
        SYS_setsid,
        SYS_setpgid,
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([SYS_iopl, SYS_ioperm, SYS_uselib, SYS_nfsservctl]);
    v
}

fn ptrace_calls() -> Vec<c_long> {
    use libc::*;
    vec![
        SYS_ptrace,
        SYS_process_vm_readv,
        SYS_process_vm_writev,
        SYS_pidfd_getfd,
        SYS_process_madvise,
    ]
}

fn io_uring_calls() -> Vec<c_long> {
    use libc::*;
    vec![
        SYS_io_uring_setup,
        SYS_io_uring_enter,
        SYS_io_uring_register,
    ]
}

/// Builds the filter program.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) fn build_filter(opts: FilterOptions) -> Vec<sock_filter> {
    use libc::*;
    let eperm = ret_errno(EPERM);
    let eacces = ret_errno(EACCES);
    let fork_action = if opts.notify_fork {
        RET_USER_NOTIF
    } else {
        RET_ALLOW
    };

    let mut a = Asm::new();
    // Architecture: anything but the native one dies.
    let native = a.label();
    a.ld(OFF_ARCH);
    a.jeq(AUDIT_ARCH, native, Target::Next);
    a.ret(RET_KILL_PROCESS);
    a.bind(native);
    a.ld(OFF_NR);
    #[cfg(target_arch = "x86_64")]
    {
        // x32 syscalls (bit 30) share the arch value: refuse them all.
        let not_x32 = a.label();
        a.jset(0x4000_0000, Target::Next, not_x32);
        a.ret(ret_errno(ENOSYS));
        a.bind(not_x32);
    }

    let mut deny = always_denied();
    if !opts.allow_ptrace {
        deny.extend(ptrace_calls());
    }
    if !opts.allow_io_uring {
        deny.extend(io_uring_calls());
    }
    if !opts.allow_inotify {
        deny.push(SYS_inotify_add_watch);
    }
    for n in deny {
        let skip = a.label();
        a.jeq(nr(n), Target::Next, skip);
        a.ret(eperm);
        a.bind(skip);
    }

    // No setuid/setgid bits on any file: they would outlive the sandbox.
    for (n, mode) in mode_calls() {
        let skip = a.label();
        let denied = a.label();
        a.jeq(nr(n), Target::Next, skip);
        a.ld(off_arg_lo(mode));
        a.jset(SETID_BITS, denied, Target::Next);
        a.ret(RET_ALLOW);
        a.bind(denied);
        a.ret(eperm);
        a.bind(skip);
    }
    for (n, flags, mode) in open_calls() {
        let skip = a.label();
        let allow = a.label();
        let denied = a.label();
        a.jeq(nr(n), Target::Next, skip);
        a.ld(off_arg_lo(flags));
        a.jset(CREATING_FLAGS, Target::Next, allow);
        a.ld(off_arg_lo(mode));
        a.jset(SETID_BITS, denied, allow);
        a.bind(allow);
        a.ret(RET_ALLOW);
        a.bind(denied);
        a.ret(eperm);
        a.bind(skip);
    }
    {
        let skip = a.label();
        a.jeq(nr(SYS_openat2), Target::Next, skip);
        a.ret(ret_errno(ENOSYS));
        a.bind(skip);
    }

    if opts.terminal {
        let skip = a.label();
        let other = a.label();
        a.jeq(nr(SYS_ioctl), Target::Next, skip);
        a.ld(off_arg_lo(1));
        a.jeq(TIOCSPGRP as u32, Target::Next, other);
        a.ret(ret_errno(0));
        // Any other ioctl goes on to the rules below, the syscall number
        // back in the accumulator.
        a.bind(other);
        a.ld(OFF_NR);
        a.bind(skip);
    }

    // socket(domain, type, protocol): TCP over IPv4/IPv6 only, and only with a
    // TCP grant. Everything else (AF_UNIX, UDP, raw, netlink, packet, vsock…).
    {
        let skip = a.label();
        a.jeq(nr(SYS_socket), Target::Next, skip);
        if opts.allow_tcp {
            let inet = a.label();
            let allow = a.label();
            let denied = a.label();
            a.ld(off_arg_lo(0));
            a.jeq(AF_INET as u32, inet, Target::Next);
            a.jeq(AF_INET6 as u32, inet, denied);
            a.bind(inet);
            a.ld(off_arg_lo(1));
            a.and(0xf);
            a.jeq(SOCK_STREAM as u32, Target::Next, denied);
            a.ld(off_arg_lo(2));
            a.jeq(0, allow, Target::Next);
            a.jeq(IPPROTO_TCP as u32, allow, denied);
            a.bind(allow);
            a.ret(RET_ALLOW);
            a.bind(denied);
        }
        a.ret(eacces);
        a.bind(skip);
    }
    // TCP Fast Open connects without `connect`, past Landlock's port rule.
    if opts.allow_tcp {
        for (n, flags) in [(SYS_sendto, 3), (SYS_sendmsg, 2), (SYS_sendmmsg, 3)] {
            let skip = a.label();
            let denied = a.label();
            a.jeq(nr(n), Target::Next, skip);
            a.ld(off_arg_lo(flags));
            a.jset(MSG_FASTOPEN as u32, denied, Target::Next);
            a.ret(RET_ALLOW);
            a.bind(denied);
            a.ret(eacces);
            a.bind(skip);
        }
        let skip = a.label();
        let allow = a.label();
        let denied = a.label();
        a.jeq(nr(SYS_setsockopt), Target::Next, skip);
        a.ld(off_arg_lo(1));
        a.jeq(IPPROTO_TCP as u32, Target::Next, allow);
        a.ld(off_arg_lo(2));
        a.jeq(TCP_FASTOPEN_CONNECT as u32, denied, allow);
        a.bind(allow);
        a.ret(RET_ALLOW);
        a.bind(denied);
        a.ret(eacces);
        a.bind(skip);
    }
    if !opts.allow_bind {
        for n in [SYS_bind, SYS_listen] {
            let skip = a.label();
            a.jeq(nr(n), Target::Next, skip);
            a.ret(eacces);
            a.bind(skip);
        }
    }
    // socketpair: AF_UNIX stream or seqpacket. Not datagram: a connected
    // datagram socket can still `sendto` any pathname socket on the host, and
    // Landlock does not control that.
    {
        let skip = a.label();
        let allow = a.label();
        let denied = a.label();
        a.jeq(nr(SYS_socketpair), Target::Next, skip);
        a.ld(off_arg_lo(0));
        a.jeq(AF_UNIX as u32, Target::Next, denied);
        a.ld(off_arg_lo(1));
        a.and(0xf);
        a.jeq(SOCK_STREAM as u32, allow, Target::Next);
        a.jeq(SOCK_SEQPACKET as u32, allow, denied);
        a.bind(allow);
        a.ret(RET_ALLOW);
        a.bind(denied);
        a.ret(eacces);
        a.bind(skip);
    }
    // clone(flags, …): no namespaces, no CLONE_PARENT (a sibling of the
    // sandbox would be the host's child); otherwise counted.
    {
        let skip = a.label();
        let denied = a.label();
        let forbidden = (CLONE_NEWNS
            | CLONE_NEWCGROUP
            | CLONE_NEWUTS
            | CLONE_NEWIPC
            | CLONE_NEWUSER
            | CLONE_NEWPID
            | CLONE_NEWNET
            | CLONE_PARENT) as u32;
        a.jeq(nr(SYS_clone), Target::Next, skip);
        a.ld(off_arg_lo(0));
        a.jset(forbidden, denied, Target::Next);
        a.ret(fork_action);
        a.bind(denied);
        a.ret(eperm);
        a.bind(skip);
    }
    {
        let skip = a.label();
        a.jeq(nr(SYS_clone3), Target::Next, skip);
        a.ret(ret_errno(ENOSYS));
        a.bind(skip);
    }
    #[cfg(target_arch = "x86_64")]
    for n in [SYS_fork, SYS_vfork] {
        let skip = a.label();
        a.jeq(nr(n), Target::Next, skip);
        a.ret(fork_action);
        a.bind(skip);
    }
    // kill(-1, …) signals every process the caller may signal; Landlock scoping
    // already confines it, this is the belt to those braces.
    {
        let skip = a.label();
        let denied = a.label();
        a.jeq(nr(SYS_kill), Target::Next, skip);
        a.ld(off_arg_lo(0));
        a.jeq(u32::MAX, denied, Target::Next);
        a.ret(RET_ALLOW);
        a.bind(denied);
        a.ret(eperm);
        a.bind(skip);
    }
    // Calls that act on another process by pid with only a same-uid check
    // (no ptrace check, so Landlock does not see them): self only (pid 0).
    for n in [
        SYS_prlimit64,
        SYS_sched_setaffinity,
        SYS_sched_setscheduler,
        SYS_sched_setparam,
        SYS_sched_setattr,
    ] {
        let skip = a.label();
        let denied = a.label();
        a.jeq(nr(n), Target::Next, skip);
        a.ld(off_arg_lo(0));
        a.jeq(0, Target::Next, denied);
        a.ret(RET_ALLOW);
        a.bind(denied);
        a.ret(eperm);
        a.bind(skip);
    }
    // setpriority(PRIO_PROCESS, 0, …) and ioprio_set(IOPRIO_WHO_PROCESS, 0, …): self only.
    for (n, which) in [(SYS_setpriority, PRIO_PROCESS), (SYS_ioprio_set, 1)] {
        let skip = a.label();
        let denied = a.label();
        a.jeq(nr(n), Target::Next, skip);
        a.ld(off_arg_lo(0));
        a.jeq(which, Target::Next, denied);
        a.ld(off_arg_lo(1));
        a.jeq(0, Target::Next, denied);
        a.ret(RET_ALLOW);
        a.bind(denied);
        a.ret(eperm);
        a.bind(skip);
    }
    a.ret(RET_ALLOW);
    a.assemble()
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(crate) fn build_filter(_opts: FilterOptions) -> Vec<sock_filter> {
    unreachable!("seccomp is reported unavailable on this architecture")
}

/// In the child: load the filter. Returns the notification listener fd when
/// `listener` is set. Async-signal-safe (the program is prebuilt).
pub(crate) fn load(prog: &[sock_filter], listener: bool) -> Result<i32, i32> {
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut sock_filter,
    };
    let flags: libc::c_ulong = if listener {
        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER
    } else {
        0
    };
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &fprog as *const libc::sock_fprog,
        )
    };
    if r < 0 {
        Err(crate::sys::errno())
    } else {
        Ok(r as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_fits_and_ends_in_allow() {
        for allow_tcp in [false, true] {
            for notify_fork in [false, true] {
                for terminal in [false, true] {
                    let p = build_filter(FilterOptions {
                        allow_tcp,
                        allow_bind: allow_tcp,
                        allow_ptrace: false,
                        allow_io_uring: false,
                        allow_inotify: false,
                        notify_fork,
                        terminal,
                    });
                    assert!(
                        p.len() < 4096,
                        "BPF programs are limited to 4096 instructions"
                    );
                    let last = p.last().unwrap();
                    assert_eq!((last.code, last.k), (BPF_RET | BPF_K, RET_ALLOW));
                }
            }
        }
    }
}
