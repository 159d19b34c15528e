//! What a spawn may do: the operator's grant, translated for the sandbox.
//!
//! A [`SandboxPolicy`] says what the sandboxed process may touch *beyond* the
//! fixed system view (see [`crate::system_paths`]): extra read-only and
//! read-write paths, TCP ports, resource limits, ptrace and io_uring. Everything
//! not granted is denied. [`Enforcement`] says what happens when the running
//! kernel cannot enforce part of that: by default the spawn is refused.

use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// What a sandboxed spawn may do beyond the system view.
///
/// `Default` grants nothing beyond the system view: no writable path, no
/// network, default [`ResourceLimits`], [`Enforcement::Strict`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SandboxPolicy {
    /// Readable (and executable) paths beyond the system view. A directory
    /// grants everything beneath it. Symlinks are resolved when the spawn is
    /// prepared; the grant applies to the target. Granting `/proc` is safe
    /// for other processes' memory, environment, descriptors and root (Landlock
    /// applies its ptrace rule there) but shows every process's command line
    /// and status.
    pub read_only: Vec<PathBuf>,
    /// Readable, writable and executable paths: files may be created, written,
    /// truncated, renamed, linked and removed beneath them, and their metadata
    /// (mode, times, user xattrs) may change. Nothing outside them can be
    /// modified in any way. A `read_only` path nested inside a read-write one
    /// stays read-only (the mount view enforces that; Landlock rights only
    /// add up, so without the mount view the outer grant wins).
    pub read_write: Vec<PathBuf>,
    /// Paths the sandboxed process must not change even where a read-write
    /// grant covers them: what the host treats as authority (its
    /// configuration, plugin directories, compile cache, executable, `.git`).
    /// Absolute; files or directories. Symlinks are resolved when the spawn
    /// is prepared.
    ///
    /// * An existing protected path that overlaps a read-write grant is
    ///   mounted read-only over itself in the sandbox's view (a file too),
    ///   and every directory between the grant and it is *pinned* (made a
    ///   mount point, so it cannot be renamed or removed to move the
    ///   protected path aside and put another in its place). Nothing in it
    ///   can be written, truncated, created, removed, renamed, linked or
    ///   have its metadata changed; reading stays as the grants say. A
    ///   protected path wins over a read-write grant nested inside it.
    /// * A protected path that does not exist (but whose parent does) must
    ///   stay absent: a mount cannot forbid creating one name in a writable
    ///   directory, so after the run whatever the sandbox put there is moved
    ///   aside to `NAME.quarantined-SECONDS-PID` and logged as an error.
    ///   Likewise a protected path that is a symlink is restored if the
    ///   sandbox replaced it.
    /// * Paths outside every read-write grant are read-only anyway.
    ///
    /// Needs the mount view ([`Feature::ProtectedPaths`]).
    pub protected: Vec<PathBuf>,
    /// A directory where the spawn records the absent (and symlinked)
    /// protected paths it exposes, *before* its child starts, and keeps the
    /// record locked until its post-run check is done: a host that dies
    /// before that check leaves the record for the next reader of
    /// authority, and a reader sees which absent paths a live run may be
    /// creating right now ([`crate::recover_watch_journal`]). `None`: no
    /// record (the check still runs after the run). Must exist, and must
    /// itself be out of every grant.
    pub watch_journal: Option<PathBuf>,
    /// Paths the sandboxed process must not even *read*, although a grant
    /// (or the system view) covers them: files holding credentials — the
    /// host's configuration (which holds every MCP server's `env`), token
    /// and key files. Absolute; files or directories; symlinks are resolved
    /// when the spawn is prepared (the target is hidden).
    ///
    /// * An existing hidden path that the view could read is *masked* in
    ///   the sandbox's mount namespace: a file by `/dev/null` mounted over
    ///   it read-only and `nodev` (opening it fails with `EACCES`, so
    ///   `cat` says "Permission denied"), a directory by an empty,
    ///   read-only, mode-000 tmpfs (listing or entering it fails with
    ///   `EACCES`). Its metadata (that it exists) stays visible, like any
    ///   path's ([`crate`] docs). Landlock cannot do this: its rights only
    ///   add up, it cannot carve a path out of a granted directory.
    /// * A hidden path outside every grant and the system view is left
    ///   alone: Landlock denies reading it anyway.
    /// * A hidden path that does not exist is not masked (there is nothing
    ///   to read); list it in [`protected`](Self::protected) too so that the
    ///   sandbox cannot create it (the host does both for its own files).
    /// * The mask holds the *path*: the same file reached by another path
    ///   (a hard link, a second mount of its file system) must be hidden by
    ///   that path too.
    ///
    /// Needs the mount view ([`Feature::HiddenPaths`]).
    pub hidden: Vec<PathBuf>,
    /// TCP ports the process may `connect` to. Landlock filters TCP by port
    /// only: a granted port is reachable on *every* address (loopback and
    /// remote hosts alike). No other socket kind (UDP, raw, netlink, UNIX…)
    /// can be created at all, so DNS over UDP does not work either.
    pub tcp_connect_ports: Vec<u16>,
    /// Network by name instead of by port: the process gets a network
    /// namespace of its own whose only interface is the loopback, and in it
    /// one listener, on `127.0.0.1:PORT`, whose descriptor the host
    /// receives and serves (its egress proxy). Nothing else is reachable:
    /// no route leaves the namespace, so no socket kind or address (IPv6,
    /// UDP, raw, another port, the host's own loopback services) reaches
    /// anything outside it, and seccomp and Landlock still allow only TCP
    /// `connect`, only to `PORT`. [`tcp_connect_ports`](Self::tcp_connect_ports)
    /// and [`tcp_bind_ports`](Self::tcp_bind_ports) are ignored with it.
    /// Needs the mount view's user namespace ([`Feature::MountIsolation`]);
    /// without one the spawn is refused whatever the [`Enforcement`] (egress
    /// never degrades into open network).
    pub egress_proxy: Option<EgressProxy>,
    /// TCP ports the process may `bind` (and so listen on), on any address.
    /// Port 0 grants binding an ephemeral port. Without any bind grant,
    /// `bind` and `listen` are denied altogether. With one, note that
    /// Landlock does not check the ephemeral port `listen` binds implicitly
    /// on an unbound socket, so a bind grant means "may serve".
    pub tcp_bind_ports: Vec<u16>,
    /// Resource limits applied to the process and all of its descendants.
    pub limits: ResourceLimits,
    /// Allow `ptrace`, `process_vm_readv/writev`, `pidfd_getfd` and
    /// `process_madvise` among the sandboxed processes (for debuggers and
    /// `strace`). Landlock still confines tracing to processes inside the same
    /// sandbox.
    pub allow_ptrace: bool,
    /// Allow io_uring. io_uring operations bypass the seccomp filter, so with
    /// this grant the "TCP only" socket rule, the setuid/setgid mode rule and
    /// the TCP Fast Open rule are no longer enforced by seccomp (Landlock's
    /// TCP port rules and file system rules still apply).
    pub allow_io_uring: bool,
    /// Allow inotify watches. Landlock does not check `inotify_add_watch`,
    /// so a watch reveals the names of files created, opened or changed in
    /// *any* directory, granted or not (contents stay protected). Off by
    /// default; file watchers then fail (`tail -f` falls back to polling).
    pub allow_inotify: bool,
    /// What to do when the kernel cannot enforce part of this policy.
    pub enforcement: Enforcement,
}

/// The proxy a sandboxed process reaches instead of the network (see
/// [`SandboxPolicy::egress_proxy`]): the port it listens on inside the
/// sandbox's network namespace, and what serves the listener.
#[derive(Clone)]
pub struct EgressProxy {
    /// The port inside the namespace (a fresh namespace: any port is free).
    pub port: u16,
    /// Called once per spawn, in the host, with the listener (created in
    /// the sandbox's namespace, so the process can connect to it); returns
    /// what keeps it served, dropped once the whole process group is gone.
    pub serve: Arc<dyn Fn(std::net::TcpListener) -> Box<dyn Send> + Send + Sync>,
}

impl fmt::Debug for EgressProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EgressProxy")
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

impl PartialEq for EgressProxy {
    fn eq(&self, other: &Self) -> bool {
        self.port == other.port && Arc::ptr_eq(&self.serve, &other.serve)
    }
}

impl Eq for EgressProxy {}

/// Resource limits. `None` leaves the host's own limit in place.
///
/// The limits hold for the whole sandbox (the spawned process and every
/// descendant), except the per-process rlimits noted below.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceLimits {
    /// Maximum number of live tasks (processes *and* threads) in the sandbox,
    /// zombies included: over the limit, `fork`/`vfork`/`clone` fail with
    /// `EAGAIN`. Enforced by a pids cgroup of the sandbox's own where the host
    /// can create one, otherwise by the host answering seccomp user
    /// notifications on those calls. (`RLIMIT_NPROC` cannot do this: it counts
    /// per user across the whole system, and uid 0 is exempt from it.)
    pub max_processes: Option<u32>,
    /// `RLIMIT_AS` per process: virtual address space in bytes; allocations
    /// beyond it fail with `ENOMEM`.
    pub address_space_bytes: Option<u64>,
    /// `RLIMIT_FSIZE` per process: largest file it may write, in bytes; writes
    /// beyond it fail with `EFBIG` (or `SIGXFSZ` kills the process if it does
    /// not ignore that signal).
    pub file_size_bytes: Option<u64>,
    /// `RLIMIT_CPU` per process: CPU seconds; then `SIGXCPU`, and `SIGKILL` one
    /// second later.
    pub cpu_seconds: Option<u64>,
    /// `RLIMIT_NOFILE` per process: open file descriptors.
    pub open_files: Option<u64>,
}

impl Default for ResourceLimits {
    /// Generous enough for compilers and test runners, small enough that a
    /// runaway command cannot take the host down: 256 tasks, 8 GiB of address
    /// space, 1 GiB files, 10 CPU minutes, 1024 descriptors.
    fn default() -> Self {
        ResourceLimits {
            max_processes: Some(256),
            address_space_bytes: Some(8 << 30),
            file_size_bytes: Some(1 << 30),
            cpu_seconds: Some(600),
            open_files: Some(1024),
        }
    }
}

impl ResourceLimits {
    /// No limits at all (the host's own limits still apply).
    pub fn unlimited() -> Self {
        ResourceLimits {
            max_processes: None,
            address_space_bytes: None,
            file_size_bytes: None,
            cpu_seconds: None,
            open_files: None,
        }
    }
}

/// What happens when the kernel cannot enforce part of a policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Enforcement {
    /// Refuse the spawn ([`crate::SpawnError::Unenforceable`]). The default.
    #[default]
    Strict,
    /// Run with whatever the kernel can enforce; every spawn logs what is
    /// missing with `tracing::warn!`.
    BestEffort,
    /// Run without exactly the named protections when the kernel lacks them
    /// (each is logged with `tracing::warn!` on every spawn); refuse if any
    /// other protection is missing. This is how an operator opts out by name.
    Waive(BTreeSet<Feature>),
}

/// One protection the sandbox relies on, as named in errors, warnings and
/// [`Enforcement::Waive`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Feature {
    /// Landlock file system rules (Landlock ABI 1).
    Filesystem,
    /// Landlock control of `truncate` (Landlock ABI 3): without it a read-only
    /// file can be truncated.
    FilesystemTruncate,
    /// Landlock TCP port rules (Landlock ABI 4), needed when TCP ports are
    /// granted (with no TCP grant, seccomp denies IP sockets altogether).
    TcpPorts,
    /// Landlock signal scoping (Landlock ABI 6): without it the sandbox can
    /// signal any process of the same user, the host included.
    ScopeSignals,
    /// Landlock abstract UNIX socket scoping (Landlock ABI 6).
    ScopeAbstractUnix,
    /// The seccomp filter (socket families, privileged and namespace calls,
    /// process group containment).
    Seccomp,
    /// The process limit (a pids cgroup per sandbox, or seccomp user
    /// notification with `CONTINUE`, Linux 5.5).
    ProcessLimit,
    /// The private, read-only mount view (user + mount namespaces): Landlock
    /// does not cover metadata (`chmod`, `utime`, xattrs), the read-only mounts do.
    MountIsolation,
    /// Read-only [`SandboxPolicy::protected`] paths inside read-write grants
    /// (read-only mounts over them, in the mount view). Landlock rights only
    /// add up, so without the mount view a read-write grant makes everything
    /// beneath it writable — the host's configuration and `.git` included.
    /// Needed only by a policy whose protected paths overlap a read-write
    /// grant; [`Enforcement::Waive`] must name it on its own (waiving
    /// `mount_isolation` does not waive it).
    ProtectedPaths,
    /// Unreadable [`SandboxPolicy::hidden`] paths inside the view (masking
    /// mounts over them, in the mount view). Needed only by a policy with a
    /// hidden path that exists inside a grant or the system view;
    /// [`Enforcement::Waive`] must name it on its own.
    HiddenPaths,
}

impl Feature {
    /// The name used in logs, errors and configuration (`snake_case`).
    pub fn name(self) -> &'static str {
        match self {
            Feature::Filesystem => "filesystem",
            Feature::FilesystemTruncate => "filesystem_truncate",
            Feature::TcpPorts => "tcp_ports",
            Feature::ScopeSignals => "scope_signals",
            Feature::ScopeAbstractUnix => "scope_abstract_unix",
            Feature::Seccomp => "seccomp",
            Feature::ProcessLimit => "process_limit",
            Feature::MountIsolation => "mount_isolation",
            Feature::ProtectedPaths => "protected_paths",
            Feature::HiddenPaths => "hidden_paths",
        }
    }

    /// Parses a [`Feature::name`].
    pub fn from_name(name: &str) -> Option<Feature> {
        Feature::ALL.iter().copied().find(|f| f.name() == name)
    }

    /// Every feature.
    pub const ALL: [Feature; 10] = [
        Feature::Filesystem,
        Feature::FilesystemTruncate,
        Feature::TcpPorts,
        Feature::ScopeSignals,
        Feature::ScopeAbstractUnix,
        Feature::Seccomp,
        Feature::ProcessLimit,
        Feature::MountIsolation,
        Feature::ProtectedPaths,
        Feature::HiddenPaths,
    ];
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
