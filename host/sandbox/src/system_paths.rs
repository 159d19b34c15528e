//! The fixed system view every sandboxed program gets: enough to run
//! programs, nothing that holds secrets.
//!
//! * Read and execute: `/usr`, `/bin`, `/sbin`, `/lib`, `/lib32`, `/lib64`,
//!   `/libx32` (whichever exist; on merged-/usr systems most are symlinks
//!   into `/usr`).
//! * Read, file by file, from `/etc`: the dynamic loader's cache, user and
//!   group names, name service and resolver configuration, time zone, locale
//!   aliases, MIME and magic databases, the system CA certificates and
//!   OpenSSL's configuration, git's system configuration. **Not** `/etc` as a
//!   whole: as uid 0 without capabilities the sandbox could still read
//!   `/etc/shadow`, `/etc/gshadow`, `/etc/ssh/*_key`, `/etc/ssl/private`,
//!   sudoers, and whatever secrets local services keep there.
//! * Devices: `/dev/null`, `/dev/full` and `/dev/tty` (read-write),
//!   `/dev/zero`, `/dev/random`, `/dev/urandom` (read). `/dev/tty` is the
//!   opener's controlling terminal: a sandbox is a session of its own, so
//!   it has none (opening fails, `ENXIO`) unless it runs on a terminal of
//!   its own (`spawn_terminal`), never the host's.
//!
//! Not granted: `/proc` (a caller can add it read-only: `environ`, `mem`,
//! `root`, `cwd`, `fd` of processes outside the sandbox stay closed because
//! Landlock applies its ptrace rule to them, but `cmdline`, `status` and
//! `stat` of every process become readable), `/sys`, `/tmp` (give each spawn its own scratch directory as a
//! read-write grant), `/var`, `/run`, `/home`, `/root`.

use std::path::PathBuf;

use crate::landlock::fs;

/// Directories readable and executable by every sandboxed program.
pub const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// Files (and a few directories) under `/etc` readable by every sandboxed
/// program. Missing entries are skipped.
pub const ETC_FILES: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.preload",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/networks",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/locale.alias",
    "/etc/locale.conf",
    "/etc/default/locale",
    "/etc/mime.types",
    "/etc/magic",
    "/etc/magic.mime",
    "/etc/inputrc",
    "/etc/os-release",
    "/etc/debian_version",
    "/etc/gitconfig",
    "/etc/ssl/certs",
    "/etc/ssl/openssl.cnf",
    "/etc/pki/tls/certs",
    "/etc/pki/ca-trust/extracted",
    "/etc/ca-certificates.conf",
];

/// Devices readable and writable.
pub const DEV_READ_WRITE: &[&str] = &["/dev/null", "/dev/full", "/dev/tty"];
/// Devices readable.
pub const DEV_READ: &[&str] = &["/dev/zero", "/dev/random", "/dev/urandom"];

/// One entry of the system view with its Landlock rights.
#[derive(Clone, Debug)]
pub(crate) struct SystemEntry {
    pub path: PathBuf,
    pub access: u64,
    /// Programs may be executed from here.
    pub executable: bool,
}

/// The system view as it exists on this machine (missing paths dropped).
pub(crate) fn system_view() -> Vec<SystemEntry> {
    let mut v = Vec::new();
    let mut push = |p: &str, access: u64, executable: bool| {
        let path = PathBuf::from(p);
        if path.exists() {
            v.push(SystemEntry {
                path,
                access,
                executable,
            });
        }
    };
    for p in SYSTEM_DIRS {
        push(p, fs::READ, true);
    }
    for p in ETC_FILES {
        push(p, fs::READ_FILE | fs::READ_DIR, false);
    }
    for p in DEV_READ_WRITE {
        push(
            p,
            fs::READ_FILE | fs::WRITE_FILE | fs::TRUNCATE | fs::IOCTL_DEV,
            false,
        );
    }
    for p in DEV_READ {
        push(p, fs::READ_FILE | fs::IOCTL_DEV, false);
    }
    v
}
