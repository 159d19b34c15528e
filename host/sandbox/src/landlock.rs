//! Landlock, driven by raw syscalls.
//!
//! The ruleset is built in the parent (opening each granted path, adding one
//! rule per path and port) and only its file descriptor crosses the fork: the
//! child calls `landlock_restrict_self(fd, 0)`, one async-signal-safe syscall.
//! Rights are chosen from the ABI the kernel reports, so a right the kernel
//! does not know is never requested (the kernel would refuse the ruleset).
//!
//! Two things to know about Landlock (documented for operators in the policy):
//! TCP rules match the port only, never the address; and Landlock does not
//! control metadata changes (`chmod`, `utime`, xattrs) — the read-only mount
//! view in [`crate::child`] does.

use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::error::SpawnError;

const CREATE_RULESET_VERSION: u32 = 1;
const RULE_PATH_BENEATH: libc::c_int = 1;
const RULE_NET_PORT: libc::c_int = 2;

/// File system access rights (`LANDLOCK_ACCESS_FS_*`).
#[allow(dead_code)] // the full list, for reference; rights are mostly used as sets
pub(crate) mod fs {
    pub const EXECUTE: u64 = 1 << 0;
    pub const WRITE_FILE: u64 = 1 << 1;
    pub const READ_FILE: u64 = 1 << 2;
    pub const READ_DIR: u64 = 1 << 3;
    pub const REMOVE_DIR: u64 = 1 << 4;
    pub const REMOVE_FILE: u64 = 1 << 5;
    pub const MAKE_CHAR: u64 = 1 << 6;
    pub const MAKE_DIR: u64 = 1 << 7;
    pub const MAKE_REG: u64 = 1 << 8;
    pub const MAKE_SOCK: u64 = 1 << 9;
    pub const MAKE_FIFO: u64 = 1 << 10;
    pub const MAKE_BLOCK: u64 = 1 << 11;
    pub const MAKE_SYM: u64 = 1 << 12;
    pub const REFER: u64 = 1 << 13;
    pub const TRUNCATE: u64 = 1 << 14;
    pub const IOCTL_DEV: u64 = 1 << 15;

    /// Rights that make sense on a file (the kernel rejects the others).
    pub const FILE: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;
    /// Read and execute.
    pub const READ: u64 = EXECUTE | READ_FILE | READ_DIR;
    /// Everything (masked by the ABI's handled set).
    pub const ALL: u64 = (1 << 16) - 1;
}

const NET_BIND_TCP: u64 = 1 << 0;
const NET_CONNECT_TCP: u64 = 1 << 1;
const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
const SCOPE_SIGNAL: u64 = 1 << 1;

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

#[repr(C)]
struct NetPortAttr {
    allowed_access: u64,
    port: u64,
}

/// The Landlock ABI version of the running kernel, `None` without Landlock.
pub(crate) fn abi_version() -> Option<i32> {
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    (v >= 1).then_some(v as i32)
}

/// File system rights the kernel with this ABI handles.
pub(crate) fn handled_fs(abi: i32) -> u64 {
    let mut rights = (1u64 << 13) - 1; // ABI 1: EXECUTE ..= MAKE_SYM
    if abi >= 2 {
        rights |= fs::REFER;
    }
    if abi >= 3 {
        rights |= fs::TRUNCATE;
    }
    if abi >= 5 {
        rights |= fs::IOCTL_DEV;
    }
    rights
}

/// One path rule: a path and the rights granted beneath it.
#[derive(Clone, Debug)]
pub(crate) struct PathRule {
    pub path: PathBuf,
    pub access: u64,
}

/// What to put into one ruleset.
#[derive(Clone, Debug, Default)]
pub(crate) struct RulesetSpec {
    pub paths: Vec<PathRule>,
    /// `Some` to handle TCP (deny all but these ports).
    pub tcp: Option<(Vec<u16>, Vec<u16>)>,
    pub scope_signals: bool,
    pub scope_abstract_unix: bool,
}

/// Creates the ruleset and adds every rule. The returned fd is what the child
/// hands to `landlock_restrict_self`.
pub(crate) fn build_ruleset(abi: i32, spec: &RulesetSpec) -> Result<OwnedFd, SpawnError> {
    let handled = handled_fs(abi);
    let attr = RulesetAttr {
        handled_access_fs: handled,
        handled_access_net: if spec.tcp.is_some() {
            NET_BIND_TCP | NET_CONNECT_TCP
        } else {
            0
        },
        scoped: (if spec.scope_signals { SCOPE_SIGNAL } else { 0 })
            | (if spec.scope_abstract_unix {
                SCOPE_ABSTRACT_UNIX_SOCKET
            } else {
                0
            }),
    };
    let fd = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const RulesetAttr,
            std::mem::size_of::<RulesetAttr>(),
            0u32,
        )
    };
    if fd < 0 {
        return Err(SpawnError::io(
            "creating the Landlock ruleset (landlock_create_ruleset)",
            io::Error::last_os_error(),
        ));
    }
    let ruleset = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    let rfd = fd as RawFd;

    for rule in &spec.paths {
        add_path_rule(rfd, &rule.path, rule.access & handled)?;
    }
    if let Some((connect, bind)) = &spec.tcp {
        for &port in connect {
            add_port_rule(rfd, port, NET_CONNECT_TCP)?;
        }
        for &port in bind {
            add_port_rule(rfd, port, NET_BIND_TCP)?;
        }
    }
    Ok(ruleset)
}

fn add_path_rule(ruleset: RawFd, path: &Path, access: u64) -> Result<(), SpawnError> {
    let cpath = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| SpawnError::InvalidRequest(format!("path {} contains NUL", path.display())))?;
    let pfd = unsafe { libc::open(cpath.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if pfd < 0 {
        return Err(SpawnError::io(
            format!("opening {} for a Landlock rule", path.display()),
            io::Error::last_os_error(),
        ));
    }
    let pfd = unsafe { OwnedFd::from_raw_fd(pfd) };
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(std::os::fd::AsRawFd::as_raw_fd(&pfd), &mut st) } != 0 {
        return Err(SpawnError::io(
            format!("stat {} for a Landlock rule", path.display()),
            io::Error::last_os_error(),
        ));
    }
    let access = if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
        access
    } else {
        access & fs::FILE
    };
    if access == 0 {
        return Ok(());
    }
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd: std::os::fd::AsRawFd::as_raw_fd(&pfd),
    };
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        )
    };
    if r != 0 {
        return Err(SpawnError::io(
            format!("adding the Landlock rule for {}", path.display()),
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

fn add_port_rule(ruleset: RawFd, port: u16, access: u64) -> Result<(), SpawnError> {
    let attr = NetPortAttr {
        allowed_access: access,
        port: u64::from(port),
    };
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            RULE_NET_PORT,
            &attr as *const NetPortAttr,
            0u32,
        )
    };
    if r != 0 {
        return Err(SpawnError::io(
            format!("adding the Landlock rule for TCP port {port}"),
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// In the child: restrict the calling thread with the prebuilt ruleset.
/// Async-signal-safe.
pub(crate) fn restrict_self(ruleset: RawFd) -> Result<(), i32> {
    let r = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) };
    if r == 0 {
        Ok(())
    } else {
        Err(crate::sys::errno())
    }
}
