//! The escape suite: every probe, run inside the sandbox against real
//! fixtures, with its allowed counterpart.
//!
//! [`Fixtures`] lays out a scratch directory — `granted/` (read-write),
//! `readonly/` (read-only), `outside/` (not granted, with a secret and a
//! target file), protected paths inside the read-write grant (a
//! configuration file, a `.git` directory, a nested file, an absent name),
//! symlinks from the grant to the outside, UNIX sockets
//! (pathname and abstract, stream and datagram), TCP listeners on granted
//! and ungranted ports, a UDP socket, a descriptor opened without
//! `O_CLOEXEC` — and [`ProbeSpec`]s say which probe attacks what, under which
//! policy, and which probe shows the legitimate counterpart still works (so
//! that a sandbox that denies everything does not pass).
//!
//! A spec is [`Verdict::Contained`] when the attempt was denied (or stopped
//! by one of the expected signals) **and** the counterpart succeeded.

use std::net::{TcpListener, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram, UnixListener};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{EXIT_DENIED, EXIT_SUCCEEDED};
use crate::SpawnError;
use crate::policy::{Enforcement, ResourceLimits, SandboxPolicy};
use crate::request::{Program, SpawnRequest};
use crate::spawn::Sandbox;

/// Which policy a probe runs under (all derived from [`Fixtures::policy`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyVariant {
    /// `readonly/`, `/proc` and the probe binary read-only; `granted/`
    /// read-write; connect to one port, bind one port; tight limits.
    Base,
    /// Base without any TCP grant.
    NoNetwork,
    /// Base with the connect grant but no bind grant.
    ConnectOnly,
    /// Base with `allow_ptrace`.
    AllowPtrace,
    /// Base with `allow_io_uring`.
    AllowIoUring,
    /// Base with `allow_inotify`.
    AllowInotify,
    /// Base with an egress proxy on port [`EGRESS_PROXY_PORT`] (a stand-in
    /// that accepts and closes): its own network namespace.
    Egress,
}

/// The port of the [`PolicyVariant::Egress`] stand-in proxy.
pub const EGRESS_PROXY_PORT: u16 = 3128;

/// A stand-in egress proxy: accepts connections and closes them.
fn stand_in_proxy() -> crate::EgressProxy {
    crate::EgressProxy {
        port: EGRESS_PROXY_PORT,
        serve: std::sync::Arc::new(|l: std::net::TcpListener| -> Box<dyn Send> {
            struct Abort(tokio::task::JoinHandle<()>);
            impl Drop for Abort {
                fn drop(&mut self) {
                    self.0.abort();
                }
            }
            let _ = l.set_nonblocking(true);
            match tokio::net::TcpListener::from_std(l) {
                Ok(l) => Box::new(Abort(tokio::spawn(async move {
                    while l.accept().await.is_ok() {}
                }))),
                Err(_) => Box::new(()),
            }
        }),
    }
}

/// What else to check about an attempt beyond its exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// Only the outcome.
    Outcome,
    /// The probe printed `PIDS a b …`: after the run they must all be gone.
    NoSurvivors,
    /// The probe printed `after N …`: N must be at most this.
    CountAtMost(u32),
    /// The attempt may create this path (relative to `granted/`, a protected
    /// path absent at spawn), but after the run nothing may be there.
    StaysAbsent(&'static str),
    /// Not run in the sandbox by the suite: a host (this binary's
    /// `sandbox_host` probe, unsandboxed) runs the attempt in its sandbox,
    /// prints the attempt's `PIDS a b …`, and is killed with SIGKILL. The
    /// pids must be alive before (the counterpart) and gone after.
    HostKilled,
}

impl Check {
    /// Whether an attempt that *worked* is judged by this check rather than
    /// counted as an escape outright.
    fn judges_success(self) -> bool {
        matches!(
            self,
            Check::NoSurvivors | Check::StaysAbsent(_) | Check::HostKilled
        )
    }
}

/// One probe run: which probe, its arguments, under which policy.
#[derive(Clone, Copy, Debug)]
pub struct Invocation {
    /// Probe name (see [`super::PROBES`]).
    pub probe: &'static str,
    /// Arguments, from the fixtures.
    pub args: fn(&Fixtures) -> Vec<String>,
    /// The policy.
    pub policy: PolicyVariant,
}

/// An escape attempt and its allowed counterpart.
#[derive(Clone, Debug)]
pub struct ProbeSpec {
    /// Unique name (also the name of its integration test).
    pub name: &'static str,
    /// `filesystem`, `network`, `process`, `privilege`, `environment`, `resources`.
    pub category: &'static str,
    /// What is attempted, in words.
    pub description: &'static str,
    /// The attempt, which must be denied.
    pub attempt: Invocation,
    /// The legitimate neighbour of the attempt, which must work.
    pub counterpart: Option<Invocation>,
    /// Signals that count as the attempt being stopped (CPU limit).
    pub stopping_signals: &'static [i32],
    /// Extra check on the attempt.
    pub check: Check,
}

/// How one probe run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observed {
    /// Exit 0: the probe's action worked.
    Succeeded,
    /// Exit 10: the kernel refused it.
    Denied,
    /// Killed by this signal.
    Signaled(i32),
    /// Killed by the suite's timeout.
    TimedOut,
    /// Anything else (exit 3, unexpected code).
    Inconclusive,
    /// The sandbox refused to spawn it.
    Refused(String),
}

/// One probe run and what it printed.
#[derive(Clone, Debug)]
pub struct Observation {
    /// How it ended.
    pub observed: Observed,
    /// The probe's report line (or stderr, or the spawn error).
    pub message: String,
}

/// The result of one spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Attempt denied, counterpart worked.
    Contained,
    /// The attempt worked: a hole in the sandbox.
    Escaped,
    /// The attempt was denied but so was its legitimate counterpart: the
    /// sandbox (or the fixture) is broken in the other direction.
    CounterpartFailed,
    /// The probes could not tell.
    Inconclusive,
    /// Not run: the kernel lacks a feature the policy needs.
    Skipped(String),
}

/// One spec's outcome, for `toolgate sandbox check` and the tests.
#[derive(Clone, Debug)]
pub struct ProbeReport {
    /// [`ProbeSpec::name`].
    pub name: &'static str,
    /// [`ProbeSpec::category`].
    pub category: &'static str,
    /// [`ProbeSpec::description`].
    pub description: &'static str,
    /// The attempt.
    pub attempt: Observation,
    /// The counterpart, if the spec has one and the attempt was contained.
    pub counterpart: Option<Observation>,
    /// The verdict.
    pub verdict: Verdict,
}

/// The scratch layout and live endpoints the probes attack.
pub struct Fixtures {
    /// The scratch directory of this suite (removed on drop).
    pub root: PathBuf,
    /// Read-write grant.
    pub granted: PathBuf,
    /// Read-only grant.
    pub readonly: PathBuf,
    /// Not granted.
    pub outside: PathBuf,
    /// The probe binary (granted read-only).
    pub probe_exe: PathBuf,
    /// A listening TCP port the base policy may connect to.
    pub tcp_granted: u16,
    /// A listening TCP port it may not connect to.
    pub tcp_denied: u16,
    /// A free port the base policy may bind.
    pub bind_granted: u16,
    /// A free port it may not bind.
    pub bind_denied: u16,
    /// A UDP port the host listens on.
    pub udp_port: u16,
    /// The first nameserver of /etc/resolv.conf (or 127.0.0.53).
    pub nameserver: String,
    /// A pathname stream socket the host listens on (outside the grants).
    pub unix_path: PathBuf,
    /// A pathname datagram socket of the host.
    pub unix_dgram_path: PathBuf,
    /// An abstract stream socket of the host (`@name`).
    pub abstract_name: String,
    /// An abstract datagram socket of the host (`@name`).
    pub abstract_dgram_name: String,
    /// A descriptor of the host opened without `O_CLOEXEC` (on the secret).
    pub leaked_fd: i32,
    /// A variable set in the host's environment, if any.
    pub host_env_var: Option<String>,
    _keep: Vec<Box<dyn std::any::Any + Send + Sync>>,
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl Fixtures {
    /// Creates the fixtures in a fresh directory under `scratch`.
    pub fn create(probe_exe: &Path, scratch: &Path) -> std::io::Result<Fixtures> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let tag = format!(
            "{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let root = scratch.join(format!("toolgate-escape-{tag}"));
        let (granted, readonly, outside) = (
            root.join("granted"),
            root.join("readonly"),
            root.join("outside"),
        );
        for d in [&granted, &readonly, &outside] {
            std::fs::create_dir_all(d)?;
        }
        std::fs::write(granted.join("own.txt"), "granted file\n")?;
        std::fs::write(granted.join("trunc.txt"), "to be truncated\n")?;
        std::fs::write(readonly.join("ro.txt"), "read-only file\n")?;
        std::fs::write(granted.join("protected.toml"), "[authority]\n")?;
        std::fs::create_dir_all(granted.join(".git/hooks"))?;
        std::fs::write(granted.join(".git/config"), "[core]\n")?;
        std::fs::create_dir_all(granted.join("nest/deep"))?;
        std::fs::write(granted.join("nest/deep/prot.toml"), "[authority]\n")?;
        std::fs::write(granted.join("secret.toml"), "token = \"TOP SECRET\"\n")?;
        std::os::unix::fs::symlink("secret.toml", granted.join("link_hidden"))?;
        std::fs::create_dir_all(readonly.join("keys"))?;
        std::fs::write(readonly.join("keys/k"), "TOP SECRET KEY\n")?;
        std::fs::write(outside.join("target.txt"), "original\n")?;
        std::fs::write(outside.join("secret.txt"), "TOP SECRET\n")?;
        std::fs::copy("/bin/true", outside.join("prog"))?;
        std::os::unix::fs::symlink(outside.join("target.txt"), granted.join("link_out"))?;
        std::os::unix::fs::symlink(outside.join("secret.txt"), granted.join("link_secret"))?;

        let mut keep: Vec<Box<dyn std::any::Any + Send + Sync>> = Vec::new();
        let t1 = TcpListener::bind("127.0.0.1:0")?;
        let t2 = TcpListener::bind("127.0.0.1:0")?;
        let (tcp_granted, tcp_denied) = (t1.local_addr()?.port(), t2.local_addr()?.port());
        keep.push(Box::new(t1));
        keep.push(Box::new(t2));
        let (bind_granted, bind_denied) = (free_port()?, free_port()?);
        let udp = UdpSocket::bind("127.0.0.1:0")?;
        let udp_port = udp.local_addr()?.port();
        keep.push(Box::new(udp));
        let unix_path = outside.join("host.sock");
        keep.push(Box::new(UnixListener::bind(&unix_path)?));
        let unix_dgram_path = outside.join("host.dgram");
        keep.push(Box::new(UnixDatagram::bind(&unix_dgram_path)?));
        let abstract_name = format!("toolgate-escape-{tag}");
        keep.push(Box::new(UnixListener::bind_addr(
            &SocketAddr::from_abstract_name(&abstract_name)?,
        )?));
        let abstract_dgram_name = format!("toolgate-escape-dgram-{tag}");
        keep.push(Box::new(UnixDatagram::bind_addr(
            &SocketAddr::from_abstract_name(&abstract_dgram_name)?,
        )?));

        let secret = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(
            outside.join("secret.txt").as_os_str(),
        ))
        .expect("no NUL");
        // Deliberately without O_CLOEXEC: the sandbox must not pass it on.
        let leaked_fd = unsafe { libc::open(secret.as_ptr(), libc::O_RDONLY) };
        if leaked_fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let nameserver = std::fs::read_to_string("/etc/resolv.conf")
            .ok()
            .and_then(|s| {
                s.lines()
                    .filter_map(|l| l.strip_prefix("nameserver"))
                    .map(|l| l.trim().to_string())
                    .find(|a| a.parse::<std::net::Ipv4Addr>().is_ok())
            })
            .unwrap_or_else(|| "127.0.0.53".into());
        let host_env_var = ["HOME", "PATH", "USER", "LANG", "TERM"]
            .iter()
            .find(|v| std::env::var_os(v).is_some())
            .map(|v| v.to_string());
        Ok(Fixtures {
            root,
            granted,
            readonly,
            outside,
            probe_exe: probe_exe.to_path_buf(),
            tcp_granted,
            tcp_denied,
            bind_granted,
            bind_denied,
            udp_port,
            nameserver,
            unix_path,
            unix_dgram_path,
            abstract_name,
            abstract_dgram_name,
            leaked_fd,
            host_env_var,
            _keep: keep,
        })
    }

    /// The policy a variant stands for.
    pub fn policy(&self, variant: PolicyVariant) -> SandboxPolicy {
        let mut p = SandboxPolicy {
            read_only: vec![
                self.probe_exe.clone(),
                self.readonly.clone(),
                PathBuf::from("/proc"),
            ],
            read_write: vec![self.granted.clone()],
            protected: PROTECTED.iter().map(|p| self.granted.join(p)).collect(),
            hidden: HIDDEN.iter().map(|p| self.root.join(p)).collect(),
            tcp_connect_ports: vec![self.tcp_granted],
            tcp_bind_ports: vec![self.bind_granted],
            egress_proxy: None,
            limits: ResourceLimits {
                max_processes: Some(32),
                address_space_bytes: Some(1 << 30),
                file_size_bytes: Some(8 << 20),
                cpu_seconds: Some(1),
                open_files: Some(64),
            },
            allow_ptrace: false,
            allow_io_uring: false,
            allow_inotify: false,
            enforcement: Enforcement::Strict,
            watch_journal: None,
        };
        match variant {
            PolicyVariant::Base => {}
            PolicyVariant::NoNetwork => {
                p.tcp_connect_ports.clear();
                p.tcp_bind_ports.clear();
            }
            PolicyVariant::ConnectOnly => p.tcp_bind_ports.clear(),
            PolicyVariant::AllowPtrace => p.allow_ptrace = true,
            PolicyVariant::AllowIoUring => p.allow_io_uring = true,
            PolicyVariant::AllowInotify => p.allow_inotify = true,
            PolicyVariant::Egress => p.egress_proxy = Some(stand_in_proxy()),
        }
        p
    }

    fn g(&self, name: &str) -> String {
        self.granted.join(name).display().to_string()
    }
    fn r(&self, name: &str) -> String {
        self.readonly.join(name).display().to_string()
    }
    fn o(&self, name: &str) -> String {
        self.outside.join(name).display().to_string()
    }
}

impl Drop for Fixtures {
    fn drop(&mut self) {
        unsafe { libc::close(self.leaked_fd) };
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// The protected paths of every policy, relative to `granted/` (the last
/// one does not exist).
pub const PROTECTED: &[&str] = &[
    "protected.toml",
    ".git",
    "nest/deep/prot.toml",
    "absent.toml",
];

/// The hidden paths of every policy, relative to the fixtures' root: a
/// file in the read-write grant, a directory in the read-only one.
pub const HIDDEN: &[&str] = &["granted/secret.toml", "readonly/keys"];

/// The environment variable every probe run gets (and nothing else).
pub const GIVEN_ENV: (&str, &str) = ("TOOLGATE_PROBE_GIVEN", "1");

macro_rules! inv {
    ($probe:literal, $policy:ident, |$f:ident| $args:expr) => {
        Invocation {
            probe: $probe,
            args: |$f: &Fixtures| $args,
            policy: PolicyVariant::$policy,
        }
    };
    ($probe:literal, |$f:ident| $args:expr) => {
        inv!($probe, Base, |$f| $args)
    };
    ($probe:literal) => {
        inv!($probe, Base, |_f| Vec::new())
    };
}

macro_rules! spec {
    ($name:literal, $cat:literal, $desc:literal, $attempt:expr, $counter:expr) => {
        ProbeSpec {
            name: $name,
            category: $cat,
            description: $desc,
            attempt: $attempt,
            counterpart: $counter,
            stopping_signals: &[],
            check: Check::Outcome,
        }
    };
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// Every escape attempt of the suite.
pub fn probe_suite() -> Vec<ProbeSpec> {
    let mut v = vec![
        // --- file system -------------------------------------------------
        spec!(
            "fs_write_outside",
            "filesystem",
            "append to a file outside the grants",
            inv!("write_file", |f| vec![f.o("target.txt")]),
            Some(inv!("write_file", |f| vec![f.g("own.txt")]))
        ),
        spec!(
            "fs_create_outside",
            "filesystem",
            "create a file outside the grants",
            inv!("create_file", |f| vec![f.o("new.txt")]),
            Some(inv!("create_file", |f| vec![f.g("new.txt")]))
        ),
        spec!(
            "fs_truncate_outside",
            "filesystem",
            "truncate a file outside the grants",
            inv!("truncate", |f| vec![f.o("target.txt")]),
            Some(inv!("truncate", |f| vec![f.g("trunc.txt")]))
        ),
        spec!(
            "fs_write_readonly_grant",
            "filesystem",
            "write to a read-only grant",
            inv!("write_file", |f| vec![f.r("ro.txt")]),
            Some(inv!("read_file", |f| vec![f.r("ro.txt")]))
        ),
        spec!(
            "fs_truncate_readonly_grant",
            "filesystem",
            "truncate a file in a read-only grant",
            inv!("truncate", |f| vec![f.r("ro.txt")]),
            Some(inv!("read_file", |f| vec![f.r("ro.txt")]))
        ),
        spec!(
            "fs_rename_out_of_grant",
            "filesystem",
            "move a granted file outside",
            inv!("rename", |f| vec![f.g("own.txt"), f.o("moved.txt")]),
            Some(inv!("create_and_rename", |f| vec![f.g("")]))
        ),
        spec!(
            "fs_rename_into_grant",
            "filesystem",
            "move an outside file into the grant",
            inv!("rename", |f| vec![f.o("target.txt"), f.g("stolen.txt")]),
            Some(inv!("create_and_rename", |f| vec![f.g("")]))
        ),
        spec!(
            "fs_hardlink_into_grant",
            "filesystem",
            "hard-link an outside secret into the grant",
            inv!("link", |f| vec![f.o("secret.txt"), f.g("secret.link")]),
            Some(inv!("create_and_link", |f| vec![f.g("")]))
        ),
        spec!(
            "fs_mkfifo_outside",
            "filesystem",
            "create a FIFO outside the grants",
            inv!("mkfifo", |f| vec![f.o("fifo")]),
            Some(inv!("mkfifo", |f| vec![f.g("fifo")]))
        ),
        spec!(
            "fs_mkdir_outside",
            "filesystem",
            "create a directory outside the grants",
            inv!("mkdir", |f| vec![f.o("dir")]),
            Some(inv!("mkdir", |f| vec![f.g("dir")]))
        ),
        spec!(
            "fs_unlink_outside",
            "filesystem",
            "delete a file outside the grants",
            inv!("unlink", |f| vec![f.o("target.txt")]),
            Some(inv!("create_and_unlink", |f| vec![f.g("")]))
        ),
        spec!(
            "fs_symlink_write_escape",
            "filesystem",
            "write through a symlink planted in the grant pointing outside",
            inv!("write_file", |f| vec![f.g("link_out")]),
            Some(inv!("write_file", |f| vec![f.g("own.txt")]))
        ),
        spec!(
            "fs_symlink_read_escape",
            "filesystem",
            "read a secret through a symlink in the grant",
            inv!("read_file", |f| vec![f.g("link_secret")]),
            Some(inv!("read_file", |f| vec![f.g("own.txt")]))
        ),
        spec!(
            "fs_read_secret_outside",
            "filesystem",
            "read a secret in a directory that is not granted",
            inv!("read_file", |f| vec![f.o("secret.txt")]),
            Some(inv!("read_file", |f| vec![f.r("ro.txt")]))
        ),
        spec!(
            "fs_list_outside",
            "filesystem",
            "list a directory that is not granted",
            inv!("list_dir", |f| vec![f.o("")]),
            Some(inv!("list_dir", |f| vec![f.r("")]))
        ),
        spec!(
            "fs_inotify_outside",
            "filesystem",
            "watch a directory that is not granted with inotify (names and events leak)",
            inv!("inotify_watch", |f| vec![f.o("")]),
            Some(inv!("inotify_watch", AllowInotify, |f| vec![f.g("")]))
        ),
        spec!(
            "fs_read_etc_shadow",
            "filesystem",
            "read /etc/shadow (readable by uid 0)",
            inv!("read_file", |_f| s(&["/etc/shadow"])),
            Some(inv!("read_file", |_f| s(&["/etc/passwd"])))
        ),
        spec!(
            "fs_chmod_outside",
            "filesystem",
            "chmod a file outside the grants (Landlock does not cover metadata)",
            inv!("chmod", |f| vec![f.o("target.txt")]),
            Some(inv!("chmod", |f| vec![f.g("own.txt")]))
        ),
        spec!(
            "fs_chmod_system_file",
            "filesystem",
            "chmod a root-owned system file",
            inv!("chmod", |_f| s(&["/etc/passwd"])),
            Some(inv!("chmod", |f| vec![f.g("own.txt")]))
        ),
        spec!(
            "fs_utime_outside",
            "filesystem",
            "set the times of a file outside the grants",
            inv!("utime", |f| vec![f.o("target.txt")]),
            Some(inv!("utime", |f| vec![f.g("own.txt")]))
        ),
        spec!(
            "fs_setxattr_outside",
            "filesystem",
            "set a user xattr on a file outside the grants",
            inv!("setxattr", |f| vec![f.o("target.txt")]),
            Some(inv!("setxattr", |f| vec![f.g("own.txt")]))
        ),
        spec!(
            "fs_fchmod_readonly_fd",
            "filesystem",
            "fchmod a read-only grant's file through a read-only descriptor",
            inv!("fchmod", |f| vec![f.r("ro.txt")]),
            Some(inv!("fchmod", |f| vec![f.g("own.txt")]))
        ),
        spec!(
            "fs_exec_outside",
            "filesystem",
            "execute a program outside the grants",
            inv!("exec", |f| vec![f.o("prog")]),
            Some(inv!("exec", |_f| s(&["/bin/true"])))
        ),
        spec!(
            "fs_procfd_reopen_write",
            "filesystem",
            "reopen a read-only file for writing via /proc/self/fd",
            inv!("reopen_write", |f| vec![f.r("ro.txt")]),
            Some(inv!("reopen_read", |f| vec![f.r("ro.txt")]))
        ),
        spec!(
            "fs_openat_dotdot",
            "filesystem",
            "openat(granted dir fd, \"../outside/secret\")",
            inv!("openat", |f| vec![f.r(""), "../outside/secret.txt".into()]),
            Some(inv!("openat", |f| vec![f.r(""), "ro.txt".into()]))
        ),
        spec!(
            "fs_procfd_dotdot",
            "filesystem",
            "open /proc/self/fd/<granted dir>/../outside/secret",
            inv!("procfd_path", |f| vec![
                f.r(""),
                "../outside/secret.txt".into()
            ]),
            Some(inv!("procfd_path", |f| vec![f.r(""), "ro.txt".into()]))
        ),
        spec!(
            "fs_proc_host_root",
            "filesystem",
            "read a secret through /proc/<host pid>/root",
            inv!("proc_root", |f| vec!["parent".into(), f.o("secret.txt")]),
            Some(inv!("proc_root", |f| vec!["self".into(), f.r("ro.txt")]))
        ),
        spec!(
            "fs_proc_host_environ",
            "filesystem",
            "read the host's environment through /proc/<host pid>/environ",
            inv!("proc_read", |_f| s(&["parent", "environ"])),
            Some(inv!("proc_read", |_f| s(&["self", "environ"])))
        ),
        spec!(
            "fs_inherited_fd",
            "filesystem",
            "use a descriptor the host opened without O_CLOEXEC",
            inv!("use_fd", |f| vec![f.leaked_fd.to_string()]),
            Some(inv!("use_fd", |_f| s(&["0"])))
        ),
        spec!(
            "fs_leaked_fds",
            "filesystem",
            "find any inherited descriptor beyond stdio",
            inv!("leaked_fds"),
            Some(inv!("noop"))
        ),
        // --- hidden paths (credentials) inside the grants -----------------
        spec!(
            "fs_hidden_read",
            "filesystem",
            "read a hidden file (the host's configuration, with credentials) inside a read-write grant",
            inv!("read_file", |f| vec![f.g("secret.toml")]),
            Some(inv!("read_file", |f| vec![f.g("own.txt")]))
        ),
        spec!(
            "fs_hidden_symlink",
            "filesystem",
            "read a hidden file through a symlink beside it",
            inv!("read_file", |f| vec![f.g("link_hidden")]),
            Some(inv!("read_file", |f| vec![f.g("own.txt")]))
        ),
        spec!(
            "fs_hidden_dir",
            "filesystem",
            "read a file in a hidden directory (a key store) inside a read-only grant",
            inv!("read_file", |f| vec![f.r("keys/k")]),
            Some(inv!("read_file", |f| vec![f.r("ro.txt")]))
        ),
        // --- protected paths inside the read-write grant ------------------
        spec!(
            "fs_protected_write",
            "filesystem",
            "rewrite a protected file (the host's configuration) inside a read-write grant",
            inv!("write_file", |f| vec![f.g("protected.toml")]),
            Some(inv!("write_file", |f| vec![f.g("own.txt")]))
        ),
        spec!(
            "fs_protected_truncate",
            "filesystem",
            "truncate a protected file inside a read-write grant",
            inv!("truncate", |f| vec![f.g("protected.toml")]),
            Some(inv!("truncate", |f| vec![f.g("trunc.txt")]))
        ),
        spec!(
            "fs_protected_replace",
            "filesystem",
            "rename another file over a protected file",
            inv!("rename", |f| vec![f.g("own.txt"), f.g("protected.toml")]),
            Some(inv!("create_and_rename", |f| vec![f.g("")]))
        ),
        spec!(
            "fs_protected_unlink",
            "filesystem",
            "delete a protected file inside a read-write grant",
            inv!("unlink", |f| vec![f.g("protected.toml")]),
            Some(inv!("create_and_unlink", |f| vec![f.g("")]))
        ),
        spec!(
            "fs_protected_chmod",
            "filesystem",
            "chmod a protected file inside a read-write grant",
            inv!("chmod", |f| vec![f.g("protected.toml")]),
            Some(inv!("chmod", |f| vec![f.g("own.txt")]))
        ),
        spec!(
            "fs_protected_move_parent",
            "filesystem",
            "move the directory above a protected file away (to put another in its place)",
            inv!("rename", |f| vec![f.g("nest"), f.g("nest-moved")]),
            Some(inv!("create_and_rename", |f| vec![f.g("nest")]))
        ),
        spec!(
            "fs_git_config_write",
            "filesystem",
            "write .git/config (core.fsmonitor runs on the operator's next git status)",
            inv!("write_file", |f| vec![f.g(".git/config")]),
            Some(inv!("read_file", |f| vec![f.g(".git/config")]))
        ),
        spec!(
            "fs_git_hook_create",
            "filesystem",
            "create a git hook in .git/hooks",
            inv!("create_file", |f| vec![f.g(".git/hooks/pre-commit")]),
            Some(inv!("create_file", |f| vec![f.g("pre-commit")]))
        ),
        // --- network -----------------------------------------------------
        spec!(
            "net_tcp_connect_ungranted_port",
            "network",
            "TCP connect to a listening port that is not granted",
            inv!("tcp_connect", |f| vec![
                "127.0.0.1".into(),
                f.tcp_denied.to_string()
            ]),
            Some(inv!("tcp_connect", |f| vec![
                "127.0.0.1".into(),
                f.tcp_granted.to_string()
            ]))
        ),
        spec!(
            "net_egress_host_loopback",
            "network",
            "with an egress proxy: TCP connect to a host loopback port that spawn_tcp_ports grants (only the proxy is reachable)",
            inv!("tcp_connect", Egress, |f| vec![
                "127.0.0.1".into(),
                f.tcp_granted.to_string()
            ]),
            Some(inv!("tcp_connect", Egress, |_f| vec![
                "127.0.0.1".into(),
                EGRESS_PROXY_PORT.to_string()
            ]))
        ),
        spec!(
            "net_tcp_connect_without_grant",
            "network",
            "TCP connect with no network grant at all",
            inv!("tcp_connect", NoNetwork, |f| vec![
                "127.0.0.1".into(),
                f.tcp_granted.to_string()
            ]),
            Some(inv!("tcp_connect", |f| vec![
                "127.0.0.1".into(),
                f.tcp_granted.to_string()
            ]))
        ),
        spec!(
            "net_tcp_bind_ungranted_port",
            "network",
            "TCP bind a port that is not granted",
            inv!("tcp_bind", |f| vec![f.bind_denied.to_string()]),
            Some(inv!("tcp_bind", |f| vec![f.bind_granted.to_string()]))
        ),
        spec!(
            "net_tcp_listen_without_bind_grant",
            "network",
            "listen on an implicitly bound ephemeral port with only a connect grant",
            inv!("tcp_listen", ConnectOnly, |_f| Vec::new()),
            Some(inv!("tcp_connect", ConnectOnly, |f| vec![
                "127.0.0.1".into(),
                f.tcp_granted.to_string()
            ]))
        ),
        spec!(
            "net_unix_abstract_squat",
            "network",
            "bind (squat) an abstract UNIX name with a socketpair end",
            inv!("unix_bind", ConnectOnly, |f| vec![format!(
                "@{}-squat",
                f.abstract_name
            )]),
            Some(inv!("socketpair", ConnectOnly, |_f| s(&["stream"])))
        ),
        spec!(
            "net_tcp_fastopen_ungranted_port",
            "network",
            "TCP Fast Open (sendto MSG_FASTOPEN, no connect) to a port that is not granted",
            inv!("tcp_fastopen", |f| vec![
                "127.0.0.1".into(),
                f.tcp_denied.to_string()
            ]),
            Some(inv!("tcp_connect", |f| vec![
                "127.0.0.1".into(),
                f.tcp_granted.to_string()
            ]))
        ),
        spec!(
            "net_tcp_fastopen_connect_option",
            "network",
            "set TCP_FASTOPEN_CONNECT and connect to a port that is not granted",
            inv!("tcp_fastopen_connect", |f| vec![
                "127.0.0.1".into(),
                f.tcp_denied.to_string()
            ]),
            Some(inv!("tcp_connect", |f| vec![
                "127.0.0.1".into(),
                f.tcp_granted.to_string()
            ]))
        ),
        spec!(
            "net_udp_send",
            "network",
            "send a UDP datagram to a host socket",
            inv!("udp_send", |f| vec![
                "127.0.0.1".into(),
                f.udp_port.to_string()
            ]),
            Some(inv!("tcp_connect", |f| vec![
                "127.0.0.1".into(),
                f.tcp_granted.to_string()
            ]))
        ),
        spec!(
            "net_dns_query",
            "network",
            "send a DNS query to the configured nameserver",
            inv!("udp_send", |f| vec![f.nameserver.clone(), "53".into()]),
            Some(inv!("read_file", |_f| s(&["/etc/resolv.conf"])))
        ),
        spec!(
            "net_raw_socket",
            "network",
            "create a raw IP socket",
            inv!("socket", |_f| s(&["raw"])),
            Some(inv!("socket", |_f| s(&["tcp"])))
        ),
        spec!(
            "net_icmp_socket",
            "network",
            "create an ICMP (ping) socket",
            inv!("socket", |_f| s(&["icmp"])),
            Some(inv!("socket", |_f| s(&["tcp"])))
        ),
        spec!(
            "net_netlink_socket",
            "network",
            "create a netlink socket",
            inv!("socket", |_f| s(&["netlink"])),
            Some(inv!("socket", |_f| s(&["tcp"])))
        ),
        spec!(
            "net_packet_socket",
            "network",
            "create a packet socket",
            inv!("socket", |_f| s(&["packet"])),
            Some(inv!("socket", |_f| s(&["tcp"])))
        ),
        spec!(
            "net_vsock_socket",
            "network",
            "create a vsock socket",
            inv!("socket", |_f| s(&["vsock"])),
            Some(inv!("socket", |_f| s(&["tcp6"])))
        ),
        spec!(
            "net_sctp_socket",
            "network",
            "create an SCTP stream socket (not TCP, not covered by Landlock)",
            inv!("socket", |_f| s(&["sctp"])),
            Some(inv!("socket", |_f| s(&["tcp"])))
        ),
        spec!(
            "net_unix_pathname_connect",
            "network",
            "connect to the host's pathname UNIX socket",
            inv!("unix_connect", |f| vec![f.unix_path.display().to_string()]),
            Some(inv!("socketpair", |_f| s(&["stream"])))
        ),
        spec!(
            "net_unix_abstract_connect",
            "network",
            "connect to the host's abstract UNIX socket",
            inv!("unix_connect", |f| vec![format!("@{}", f.abstract_name)]),
            Some(inv!("socketpair", |_f| s(&["stream"])))
        ),
        spec!(
            "net_unix_dgram_sendto_pathname",
            "network",
            "sendto the host's pathname datagram socket from a socketpair",
            inv!("unix_dgram_sendto", |f| vec![
                f.unix_dgram_path.display().to_string()
            ]),
            Some(inv!("socketpair", |_f| s(&["seqpacket"])))
        ),
        spec!(
            "net_unix_dgram_sendto_abstract",
            "network",
            "sendto the host's abstract datagram socket from a socketpair",
            inv!("unix_dgram_sendto", |f| vec![format!(
                "@{}",
                f.abstract_dgram_name
            )]),
            Some(inv!("socketpair", |_f| s(&["stream"])))
        ),
        spec!(
            "net_io_uring",
            "network",
            "set up io_uring (its operations bypass seccomp)",
            inv!("io_uring"),
            Some(inv!("io_uring", AllowIoUring, |_f| Vec::new()))
        ),
        // --- processes ---------------------------------------------------
        spec!(
            "proc_signal_host",
            "process",
            "signal the host process",
            inv!("signal", |_f| s(&["parent"])),
            Some(inv!("signal", |_f| s(&["child"])))
        ),
        spec!(
            "proc_signal_outside",
            "process",
            "signal a process outside the sandbox (pid 1)",
            inv!("signal", |_f| s(&["1"])),
            Some(inv!("signal", |_f| s(&["self"])))
        ),
        spec!(
            "proc_ptrace_host",
            "process",
            "ptrace the host",
            inv!("ptrace", |_f| s(&["parent"])),
            Some(inv!("ptrace", AllowPtrace, |_f| s(&["child"])))
        ),
        spec!(
            "proc_ptrace_host_with_grant",
            "process",
            "ptrace the host even with allow_ptrace",
            inv!("ptrace", AllowPtrace, |_f| s(&["parent"])),
            Some(inv!("ptrace", AllowPtrace, |_f| s(&["child"])))
        ),
        spec!(
            "proc_vm_read_host",
            "process",
            "read the host's memory with process_vm_readv",
            inv!("vm_read", |_f| s(&["parent"])),
            Some(inv!("vm_read", AllowPtrace, |_f| s(&["child"])))
        ),
        spec!(
            "proc_renice_host",
            "process",
            "change the host's scheduling priority",
            inv!("renice", |_f| s(&["parent"])),
            Some(inv!("renice", |_f| s(&["self"])))
        ),
        spec!(
            "proc_prlimit_host",
            "process",
            "change the host's resource limits",
            inv!("prlimit", |_f| s(&["parent"])),
            Some(inv!("prlimit", |_f| s(&["self"])))
        ),
        spec!(
            "proc_setaffinity_host",
            "process",
            "pin the host to other CPUs",
            inv!("setaffinity", |_f| s(&["parent"])),
            Some(inv!("setaffinity", |_f| s(&["self"])))
        ),
        spec!(
            "proc_setsid",
            "process",
            "leave the process group with setsid",
            inv!("setsid"),
            Some(inv!("fork"))
        ),
        spec!(
            "proc_setpgid",
            "process",
            "leave the process group with setpgid",
            inv!("setpgid"),
            Some(inv!("fork"))
        ),
        // --- privilege ---------------------------------------------------
        spec!(
            "priv_capabilities",
            "privilege",
            "hold any capability (we run as root)",
            inv!("caps"),
            Some(inv!("getuid"))
        ),
        spec!(
            "priv_no_new_privs",
            "privilege",
            "gain privileges on exec (no_new_privs unset)",
            inv!("no_new_privs"),
            Some(inv!("noop"))
        ),
        spec!(
            "priv_setuid",
            "privilege",
            "switch to another uid",
            inv!("setuid", |_f| s(&["65534"])),
            Some(inv!("getuid"))
        ),
        spec!(
            "priv_unshare_user",
            "privilege",
            "create a user namespace",
            inv!("unshare", |_f| s(&["user"])),
            Some(inv!("fork"))
        ),
        spec!(
            "priv_unshare_mount",
            "privilege",
            "create a mount namespace",
            inv!("unshare", |_f| s(&["mount"])),
            Some(inv!("fork"))
        ),
        spec!(
            "priv_clone_newuser",
            "privilege",
            "clone into a new user namespace",
            inv!("clone_newuser"),
            Some(inv!("fork"))
        ),
        spec!(
            "priv_mount",
            "privilege",
            "mount a tmpfs",
            inv!("mount", |f| vec![f.g("")]),
            Some(inv!("mkdir", |f| vec![f.g("mnt")]))
        ),
        spec!(
            "priv_chroot",
            "privilege",
            "chroot",
            inv!("chroot", |f| vec![f.g("")]),
            Some(inv!("chdir", |f| vec![f.g("")]))
        ),
        spec!(
            "priv_chmod_setuid",
            "privilege",
            "chmod 4755 a file in the grant (a setuid-root binary on the host)",
            inv!("set_mode", |f| vec![f.g(""), "4755".into(), "chmod".into()]),
            Some(inv!("set_mode", |f| vec![
                f.g(""),
                "755".into(),
                "chmod".into()
            ]))
        ),
        spec!(
            "priv_fchmod_setgid",
            "privilege",
            "fchmod 2755 a file in the grant (setgid)",
            inv!("set_mode", |f| vec![
                f.g(""),
                "2755".into(),
                "fchmod".into()
            ]),
            Some(inv!("set_mode", |f| vec![
                f.g(""),
                "755".into(),
                "fchmod".into()
            ]))
        ),
        spec!(
            "priv_fchmodat_setuid",
            "privilege",
            "fchmodat 4755 a file in the grant",
            inv!("set_mode", |f| vec![
                f.g(""),
                "4755".into(),
                "fchmodat".into()
            ]),
            Some(inv!("set_mode", |f| vec![
                f.g(""),
                "755".into(),
                "fchmodat".into()
            ]))
        ),
        spec!(
            "priv_fchmodat2_setuid",
            "privilege",
            "fchmodat2 4755 a file in the grant",
            inv!("set_mode", |f| vec![
                f.g(""),
                "4755".into(),
                "fchmodat2".into()
            ]),
            Some(inv!("set_mode", |f| vec![
                f.g(""),
                "755".into(),
                "chmod".into()
            ]))
        ),
        spec!(
            "priv_create_setuid",
            "privilege",
            "create a file with mode 4755 (openat O_CREAT)",
            inv!("create_mode", |f| vec![
                f.g(""),
                "4755".into(),
                "openat".into()
            ]),
            Some(inv!("create_mode", |f| vec![
                f.g(""),
                "755".into(),
                "openat".into()
            ]))
        ),
        spec!(
            "priv_tmpfile_setuid",
            "privilege",
            "create an O_TMPFILE with mode 4755",
            inv!("create_mode", |f| vec![
                f.g(""),
                "4755".into(),
                "tmpfile".into()
            ]),
            Some(inv!("create_mode", |f| vec![
                f.g(""),
                "755".into(),
                "tmpfile".into()
            ]))
        ),
        spec!(
            "priv_mknod_setuid",
            "privilege",
            "create a regular file with mode 6755 through mknodat",
            inv!("create_mode", |f| vec![
                f.g(""),
                "6755".into(),
                "mknod".into()
            ]),
            Some(inv!("create_mode", |f| vec![
                f.g(""),
                "755".into(),
                "mknod".into()
            ]))
        ),
        spec!(
            "priv_openat2",
            "privilege",
            "use openat2, whose flags and mode a seccomp filter cannot read",
            inv!("openat2", |f| vec![f.g(""), "own.txt".into()]),
            Some(inv!("openat", |f| vec![f.g(""), "own.txt".into()]))
        ),
        spec!(
            "priv_setcap",
            "privilege",
            "give a file in the grant every file capability (security.capability)",
            inv!("setcap", |f| vec![f.g("own.txt")]),
            Some(inv!("setxattr", |f| vec![f.g("own.txt")]))
        ),
        spec!(
            "priv_bpf",
            "privilege",
            "create a BPF map",
            inv!("bpf"),
            Some(inv!("noop"))
        ),
        spec!(
            "priv_perf_event_open",
            "privilege",
            "open a perf event",
            inv!("perf_event_open"),
            Some(inv!("noop"))
        ),
        spec!(
            "priv_keyctl",
            "privilege",
            "add a key to a kernel keyring",
            inv!("keyctl"),
            Some(inv!("noop"))
        ),
        spec!(
            "priv_userfaultfd",
            "privilege",
            "create a userfaultfd",
            inv!("userfaultfd"),
            Some(inv!("noop"))
        ),
        // --- environment -------------------------------------------------
        spec!(
            "env_host_variable",
            "environment",
            "see a variable of the host's environment",
            inv!("env_has", |f| vec![
                f.host_env_var.clone().unwrap_or_else(|| "HOME".into())
            ]),
            Some(inv!("env_has", |_f| s(&[GIVEN_ENV.0])))
        ),
        spec!(
            "env_exactly_given",
            "environment",
            "find any variable the caller did not pass",
            inv!("env_only", |_f| s(&[GIVEN_ENV.0])),
            Some(inv!("noop"))
        ),
        // --- resources ---------------------------------------------------
        spec!(
            "res_memory_bomb",
            "resources",
            "map 8 GiB (address-space limit 1 GiB)",
            inv!("mmap", |_f| s(&["8589934592"])),
            Some(inv!("mmap", |_f| s(&["67108864"])))
        ),
        spec!(
            "res_disk_fill",
            "resources",
            "write a 64 MiB file (file-size limit 8 MiB)",
            inv!("write_bytes", |f| vec![f.g("fill.bin"), "67108864".into()]),
            Some(inv!("write_bytes", |f| vec![
                f.g("small.bin"),
                "1048576".into()
            ]))
        ),
        spec!(
            "res_open_files",
            "resources",
            "open 10000 descriptors (limit 64)",
            inv!("open_many", |_f| s(&["10000"])),
            Some(inv!("open_many", |_f| s(&["16"])))
        ),
    ];
    v.push(ProbeSpec {
        check: Check::CountAtMost(31),
        ..spec!(
            "res_fork_bomb",
            "resources",
            "fork 10000 processes (process limit 32)",
            inv!("fork_bomb", |_f| s(&["10000"])),
            Some(inv!("fork_n", |_f| s(&["4"])))
        )
    });
    v.push(ProbeSpec {
        stopping_signals: &[libc::SIGXCPU, libc::SIGKILL],
        ..spec!(
            "res_cpu",
            "resources",
            "spin 30 CPU seconds (limit 1 s)",
            inv!("spin", |_f| s(&["30"])),
            Some(inv!("spin", |_f| s(&["0.05"])))
        )
    });
    v.push(ProbeSpec {
        check: Check::StaysAbsent("absent.toml"),
        ..spec!(
            "fs_protected_plant_absent",
            "filesystem",
            "create the host's absent configuration file for its next start",
            inv!("plant", |f| vec![f.g("absent.toml")]),
            Some(inv!("plant", |f| vec![f.g("notes.toml")]))
        )
    });
    v.push(ProbeSpec {
        check: Check::NoSurvivors,
        ..spec!(
            "proc_daemon_survives",
            "process",
            "leave a double-forked daemon behind after exit",
            inv!("daemonize"),
            None
        )
    });
    v.push(ProbeSpec {
        check: Check::HostKilled,
        ..spec!(
            "proc_host_killed",
            "process",
            "outlive the host: a sandboxed daemon (double fork, setsid tried) and its parent of record, the host killed with SIGKILL",
            inv!("daemon_stay"),
            None
        )
    });
    v
}

/// Runs specs against one set of fixtures.
pub struct EscapeSuite {
    fixtures: Fixtures,
    sandbox: Sandbox,
    enforcement: Enforcement,
    probe_prefix: Vec<String>,
    /// Each probe runs on a pseudo-terminal of its own
    /// ([`Sandbox::spawn_terminal`]) instead of pipes.
    on_terminal: bool,
}

impl EscapeSuite {
    /// Lays out fixtures under `scratch` for probes run from `probe_exe`.
    pub fn prepare(probe_exe: &Path, scratch: &Path) -> std::io::Result<EscapeSuite> {
        EscapeSuite::with_sandbox(probe_exe, scratch, Sandbox::new(), Enforcement::Strict)
    }

    /// Like [`EscapeSuite::prepare`], with a given sandbox (for instance one
    /// with some layers switched off through
    /// [`Sandbox::with_capabilities`]) and enforcement, to check what each
    /// layer holds on its own.
    pub fn with_sandbox(
        probe_exe: &Path,
        scratch: &Path,
        sandbox: Sandbox,
        enforcement: Enforcement,
    ) -> std::io::Result<EscapeSuite> {
        Ok(EscapeSuite {
            fixtures: Fixtures::create(probe_exe, scratch)?,
            sandbox,
            enforcement,
            probe_prefix: Vec::new(),
            on_terminal: false,
        })
    }

    /// Every probe on a pseudo-terminal of its own, its controlling
    /// terminal, as an interactive terminal's program runs: the same
    /// attempts must be contained there as on pipes.
    pub fn on_terminal(mut self) -> EscapeSuite {
        self.on_terminal = true;
        self
    }

    /// Arguments put before the probe name: `toolgate sandbox check` runs
    /// `toolgate __probe NAME ARGS…`, i.e. the prefix `["__probe"]`.
    pub fn with_probe_prefix(mut self, prefix: Vec<String>) -> EscapeSuite {
        self.probe_prefix = prefix;
        self
    }

    /// The fixtures.
    pub fn fixtures(&self) -> &Fixtures {
        &self.fixtures
    }

    /// Runs one probe invocation in the sandbox.
    pub async fn invoke(&self, inv: &Invocation) -> Observation {
        let f = &self.fixtures;
        let mut args = self.probe_prefix.clone();
        args.push(inv.probe.to_string());
        args.extend((inv.args)(f));
        let mut req = SpawnRequest::new(
            Program::Exec {
                program: f.probe_exe.clone(),
                args,
            },
            &f.granted,
        );
        req.env = vec![(GIVEN_ENV.0.into(), GIVEN_ENV.1.into())];
        req.timeout = Some(Duration::from_secs(20));
        req.stdout_cap = 16 * 1024;
        req.stderr_cap = 16 * 1024;
        let mut policy = f.policy(inv.policy);
        policy.enforcement = self.enforcement.clone();
        let ran = if self.on_terminal {
            self.run_on_terminal(req, &policy).await
        } else {
            self.sandbox.run(req, &policy, std::future::pending()).await
        };
        match ran {
            Err(e @ SpawnError::Unenforceable { .. }) => Observation {
                observed: Observed::Refused(e.to_string()),
                message: e.to_string(),
            },
            Err(e) => Observation {
                observed: Observed::Inconclusive,
                message: format!("spawn failed: {e}"),
            },
            Ok(out) => {
                let stdout = String::from_utf8_lossy(&out.stdout);
                let stderr = String::from_utf8_lossy(&out.stderr);
                let message = stdout
                    .lines()
                    .find(|l| l.contains(": "))
                    .map(str::to_string)
                    .unwrap_or_else(|| {
                        format!("stdout {:?} stderr {:?}", stdout.trim(), stderr.trim())
                    });
                let observed = if out.timed_out {
                    Observed::TimedOut
                } else if let Some(sig) = out.signal {
                    Observed::Signaled(sig)
                } else {
                    match out.exit_code {
                        Some(EXIT_SUCCEEDED) => Observed::Succeeded,
                        Some(EXIT_DENIED) => Observed::Denied,
                        _ => Observed::Inconclusive,
                    }
                };
                Observation { observed, message }
            }
        }
    }

    /// Runs `req` on a terminal: what it writes (stdout and stderr are the
    /// terminal) comes back as stdout.
    async fn run_on_terminal(
        &self,
        req: SpawnRequest,
        policy: &SandboxPolicy,
    ) -> Result<crate::Output, SpawnError> {
        use std::io::Read;
        let (mut child, master) =
            self.sandbox
                .spawn_terminal(req.program, &req.cwd, &req.env, policy, (24, 200))?;
        let cap = req.stdout_cap;
        // Blocking reads until the device is closed everywhere (`EIO`).
        let reader = tokio::task::spawn_blocking(move || {
            let mut master = std::fs::File::from(master);
            let mut out = Vec::new();
            let mut buf = [0u8; 4096];
            while let Ok(n) = master.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if out.len() < cap {
                    out.extend_from_slice(&buf[..n.min(cap - out.len())]);
                }
            }
            out
        });
        let killer = child.kill_handle();
        let timeout = req.timeout.unwrap_or(Duration::from_secs(20));
        let (status, timed_out) = match tokio::time::timeout(timeout, child.wait()).await {
            Ok(status) => (status?, false),
            Err(_) => {
                killer.kill();
                (child.wait().await?, true)
            }
        };
        let stdout = reader.await.unwrap_or_default();
        use std::os::unix::process::ExitStatusExt;
        Ok(crate::Output {
            exit_code: status.code(),
            signal: status.signal(),
            stdout,
            timed_out,
            ..Default::default()
        })
    }

    /// Runs a [`Check::HostKilled`] spec (see there).
    async fn host_killed(&self, spec: &ProbeSpec) -> ProbeReport {
        let mut report = ProbeReport {
            name: spec.name,
            category: spec.category,
            description: spec.description,
            attempt: Observation {
                observed: Observed::Inconclusive,
                message: String::new(),
            },
            counterpart: None,
            verdict: Verdict::Inconclusive,
        };
        let f = &self.fixtures;
        let mut host = tokio::process::Command::new(&f.probe_exe);
        host.args(&self.probe_prefix)
            .arg("sandbox_host")
            .arg(&f.granted)
            .arg(&f.probe_exe)
            .args(&self.probe_prefix)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        let mut host = match host.spawn() {
            Ok(h) => h,
            Err(e) => {
                report.attempt.message = format!("starting the host: {e}");
                return report;
            }
        };
        let mut line = String::new();
        if let Some(out) = host.stdout.take() {
            use tokio::io::AsyncBufReadExt;
            let mut out = tokio::io::BufReader::new(out);
            let _ = tokio::time::timeout(Duration::from_secs(20), out.read_line(&mut line)).await;
        }
        let line = line.trim().to_string();
        let before = survivors(&line).unwrap_or_default();
        let pids = line.split("PIDS ").nth(1).map(|rest| {
            rest.split(|c: char| !c.is_ascii_digit())
                .take_while(|s| !s.is_empty())
                .count()
        });
        // The program and its daemon (the middle process has exited).
        let ok_before = pids == Some(3) && before.len() == 2;
        report.counterpart = Some(Observation {
            observed: if ok_before {
                Observed::Succeeded
            } else {
                Observed::Inconclusive
            },
            message: format!("while the host ran: {line:?}, alive {before:?}"),
        });
        let _ = host.start_kill();
        let _ = host.wait().await;
        if !ok_before {
            report.attempt.message = "the sandboxed daemon did not start".into();
            report.verdict = Verdict::CounterpartFailed;
            return report;
        }
        let until = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let alive = survivors(&line).unwrap_or_default();
            if alive.is_empty() {
                report.attempt = Observation {
                    observed: Observed::Denied,
                    message: format!("{line} — none alive after the host was killed"),
                };
                report.verdict = Verdict::Contained;
                return report;
            }
            if std::time::Instant::now() >= until {
                for pid in &alive {
                    unsafe { libc::kill(*pid, libc::SIGKILL) };
                }
                report.attempt = Observation {
                    observed: Observed::Succeeded,
                    message: format!(
                        "{line} — still alive 5 s after the host was killed: {alive:?}"
                    ),
                };
                report.verdict = Verdict::Escaped;
                return report;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Runs one spec: the attempt, then (if it was contained) the counterpart.
    pub async fn run_spec(&self, spec: &ProbeSpec) -> ProbeReport {
        if spec.check == Check::HostKilled {
            return self.host_killed(spec).await;
        }
        let attempt = self.invoke(&spec.attempt).await;
        let mut report = ProbeReport {
            name: spec.name,
            category: spec.category,
            description: spec.description,
            attempt: attempt.clone(),
            counterpart: None,
            verdict: Verdict::Inconclusive,
        };
        let stopped = match &attempt.observed {
            Observed::Refused(why) => {
                report.verdict = Verdict::Skipped(why.clone());
                return report;
            }
            Observed::Denied => true,
            Observed::Signaled(s) => spec.stopping_signals.contains(s),
            Observed::Succeeded => spec.check.judges_success(),
            Observed::TimedOut | Observed::Inconclusive => false,
        };
        if matches!(attempt.observed, Observed::Succeeded) && !spec.check.judges_success() {
            report.verdict = Verdict::Escaped;
            return report;
        }
        if !stopped {
            return report;
        }
        match spec.check {
            Check::Outcome | Check::HostKilled => {}
            Check::NoSurvivors => match survivors(&attempt.message) {
                None => return report,
                Some(alive) if !alive.is_empty() => {
                    report.attempt.message =
                        format!("{} — still alive after run: {alive:?}", attempt.message);
                    report.verdict = Verdict::Escaped;
                    return report;
                }
                Some(_) => {}
            },
            Check::StaysAbsent(rel) => {
                let path = self.fixtures.granted.join(rel);
                if std::fs::symlink_metadata(&path).is_ok() {
                    report.attempt.message = format!(
                        "{} — and {} is still there after the run",
                        attempt.message,
                        path.display()
                    );
                    report.verdict = Verdict::Escaped;
                    return report;
                }
            }
            Check::CountAtMost(max) => {
                let n = count_after(&attempt.message);
                if n.is_none_or(|n| n > max) {
                    report.attempt.message =
                        format!("{} — expected at most {max}", attempt.message);
                    report.verdict = Verdict::Escaped;
                    return report;
                }
            }
        }
        if let Some(cp) = &spec.counterpart {
            let obs = self.invoke(cp).await;
            let ok = obs.observed == Observed::Succeeded;
            report.counterpart = Some(obs.clone());
            report.verdict = match obs.observed {
                _ if ok => Verdict::Contained,
                Observed::Refused(why) => Verdict::Skipped(why),
                _ => Verdict::CounterpartFailed,
            };
        } else {
            report.verdict = Verdict::Contained;
        }
        report
    }

    /// Runs every spec of [`probe_suite`], one after the other.
    pub async fn run_all(&self) -> Vec<ProbeReport> {
        let mut out = Vec::new();
        for spec in probe_suite() {
            out.push(self.run_spec(&spec).await);
        }
        out
    }
}

/// Pids from `PIDS a b …` that are still alive (not zombies); `None` when
/// the message names no pids.
fn survivors(message: &str) -> Option<Vec<i32>> {
    let rest = message.split("PIDS ").nth(1)?;
    let pids: Vec<i32> = rest
        .split(|c: char| !c.is_ascii_digit())
        .take_while(|s| !s.is_empty())
        .filter_map(|s| s.parse::<i32>().ok())
        .collect();
    if pids.len() < 2 {
        return None;
    }
    let alive = pids
        .into_iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rfind(')')
                    .and_then(|i| stat[i + 1..].split_whitespace().next())
                    .is_some_and(|st| st != "Z" && st != "X")
            })
        })
        .collect();
    Some(alive)
}

/// N from "… after N …".
fn count_after(message: &str) -> Option<u32> {
    message
        .split("after ")
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Runs the whole suite with fixtures under `scratch`. `probe_exe` must run
/// the probe named by its first argument (this crate's
/// `toolgate-sandbox-probe`); see [`run_escape_suite_via`] for a binary that
/// takes a subcommand first.
pub async fn run_escape_suite(probe_exe: &Path, scratch: &Path) -> Vec<ProbeReport> {
    run_escape_suite_via(probe_exe, &[], scratch).await
}

/// Runs the whole suite with probes started as `probe_exe PREFIX… NAME
/// ARGS…` — for `toolgate sandbox check`, which re-executes itself as
/// `toolgate __probe NAME ARGS…` (forwarding to [`super::probe_main`]).
pub async fn run_escape_suite_via(
    probe_exe: &Path,
    prefix: &[&str],
    scratch: &Path,
) -> Vec<ProbeReport> {
    run_escape_suite_with(probe_exe, prefix, scratch, false).await
}

/// [`run_escape_suite_via`], with every probe on a pseudo-terminal of its
/// own when `on_terminal` (see [`EscapeSuite::on_terminal`]).
pub async fn run_escape_suite_with(
    probe_exe: &Path,
    prefix: &[&str],
    scratch: &Path,
    on_terminal: bool,
) -> Vec<ProbeReport> {
    match EscapeSuite::prepare(probe_exe, scratch) {
        Ok(suite) => {
            let suite = suite.with_probe_prefix(prefix.iter().map(|s| s.to_string()).collect());
            let suite = if on_terminal {
                suite.on_terminal()
            } else {
                suite
            };
            suite.run_all().await
        }
        Err(e) => probe_suite()
            .into_iter()
            .map(|spec| ProbeReport {
                name: spec.name,
                category: spec.category,
                description: spec.description,
                attempt: Observation {
                    observed: Observed::Inconclusive,
                    message: format!(
                        "could not set up the fixtures in {}: {e}",
                        scratch.display()
                    ),
                },
                counterpart: None,
                verdict: Verdict::Inconclusive,
            })
            .collect(),
    }
}
