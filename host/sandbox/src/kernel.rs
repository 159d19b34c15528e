//! What the running kernel can enforce, probed once per process.
//!
//! Every protection the sandbox uses is a kernel feature that may be missing
//! (an old kernel, Landlock not enabled at boot, user namespaces disabled by a
//! distribution). The spawn path never assumes: it compares the policy with
//! these [`Capabilities`] and refuses (or, when the operator chose so, warns)
//! when something is missing. The probes are cheap syscalls, except
//! `mount_isolation`, which forks a throwaway child to try it for real.

use std::sync::OnceLock;

use crate::child;
use crate::landlock;

/// What this kernel can enforce. Obtain it with [`probe_capabilities`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Landlock ABI version, `None` when Landlock is unavailable.
    pub landlock_abi: Option<i32>,
    /// Landlock file system rules (ABI ≥ 1).
    pub fs: bool,
    /// Renames and links across directories can be allowed (ABI ≥ 2; before,
    /// they are always denied, which is stricter, not weaker).
    pub fs_refer: bool,
    /// `truncate` is controlled (ABI ≥ 3).
    pub fs_truncate: bool,
    /// `ioctl` on device files is controlled (ABI ≥ 5).
    pub fs_ioctl_dev: bool,
    /// TCP bind/connect port rules (ABI ≥ 4).
    pub tcp: bool,
    /// Signals to processes outside the sandbox are denied (ABI ≥ 6).
    pub scope_signals: bool,
    /// Abstract UNIX sockets outside the sandbox are unreachable (ABI ≥ 6).
    pub scope_abstract_unix: bool,
    /// seccomp filters with `SECCOMP_RET_ERRNO`.
    pub seccomp: bool,
    /// seccomp user notification with `CONTINUE` (Linux ≥ 5.5): the process limit.
    pub seccomp_user_notif: bool,
    /// A pids cgroup can be created per sandbox and joined by its first
    /// process (tried for real): the kernel's own process limit, preferred
    /// over seccomp notification.
    pub pids_cgroup: bool,
    /// A user + mount namespace can be created and the mount tree made
    /// read-only in it (tried for real in a throwaway child).
    pub mount_isolation: bool,
    /// `pidfd_open` (Linux ≥ 5.3): waiting for the child without reaping it.
    pub pidfd: bool,
    /// `close_range` (Linux ≥ 5.9): marking every inherited descriptor close-on-exec.
    pub close_range: bool,
    /// `uname -r`, for messages.
    pub kernel_release: String,
}

impl Capabilities {
    /// The capabilities present in both `self` and `other`. Used to pretend a
    /// kernel is older than it is (tests, or an operator pinning behaviour);
    /// never claims more than either side.
    pub fn intersect(&self, other: &Capabilities) -> Capabilities {
        Capabilities {
            landlock_abi: match (self.landlock_abi, other.landlock_abi) {
                (Some(a), Some(b)) => Some(a.min(b)),
                _ => None,
            },
            fs: self.fs && other.fs,
            fs_refer: self.fs_refer && other.fs_refer,
            fs_truncate: self.fs_truncate && other.fs_truncate,
            fs_ioctl_dev: self.fs_ioctl_dev && other.fs_ioctl_dev,
            tcp: self.tcp && other.tcp,
            scope_signals: self.scope_signals && other.scope_signals,
            scope_abstract_unix: self.scope_abstract_unix && other.scope_abstract_unix,
            seccomp: self.seccomp && other.seccomp,
            seccomp_user_notif: self.seccomp_user_notif && other.seccomp_user_notif,
            pids_cgroup: self.pids_cgroup && other.pids_cgroup,
            mount_isolation: self.mount_isolation && other.mount_isolation,
            pidfd: self.pidfd && other.pidfd,
            close_range: self.close_range && other.close_range,
            kernel_release: self.kernel_release.clone(),
        }
    }

    /// The capabilities of a kernel with the given Landlock ABI (`None`: no
    /// Landlock) and everything else as probed here. For tests and for
    /// reproducing an older kernel's behaviour.
    pub fn with_landlock_abi(&self, abi: Option<i32>) -> Capabilities {
        let emulated = Capabilities::from_landlock_abi(abi);
        Capabilities {
            seccomp: true,
            seccomp_user_notif: true,
            pids_cgroup: true,
            mount_isolation: true,
            pidfd: true,
            close_range: true,
            ..emulated
        }
        .intersect(self)
    }

    fn from_landlock_abi(abi: Option<i32>) -> Capabilities {
        let v = abi.unwrap_or(0);
        Capabilities {
            landlock_abi: abi,
            fs: v >= 1,
            fs_refer: v >= 2,
            fs_truncate: v >= 3,
            tcp: v >= 4,
            fs_ioctl_dev: v >= 5,
            scope_signals: v >= 6,
            scope_abstract_unix: v >= 6,
            seccomp: false,
            seccomp_user_notif: false,
            pids_cgroup: false,
            mount_isolation: false,
            pidfd: false,
            close_range: false,
            kernel_release: String::new(),
        }
    }
}

/// Probes the running kernel (once; later calls return the cached result).
pub fn probe_capabilities() -> Capabilities {
    static CAPS: OnceLock<Capabilities> = OnceLock::new();
    CAPS.get_or_init(probe_now).clone()
}

fn probe_now() -> Capabilities {
    let release = kernel_release();
    let abi = landlock::abi_version();
    let seccomp = seccomp_action_available(libc::SECCOMP_RET_ERRNO);
    let notif =
        seccomp_action_available(libc::SECCOMP_RET_USER_NOTIF) && kernel_at_least(&release, 5, 5);
    let pidfd = unsafe {
        let fd = libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0);
        if fd >= 0 {
            libc::close(fd as i32);
            true
        } else {
            false
        }
    };
    // No descriptor lives at ~0, so this only tells whether the call exists.
    let close_range = unsafe { libc::syscall(libc::SYS_close_range, !0u32, !0u32, 0) } == 0;
    Capabilities {
        seccomp,
        seccomp_user_notif: notif,
        pids_cgroup: crate::cgroup::probe(),
        mount_isolation: child::probe_mount_isolation(),
        pidfd,
        close_range,
        kernel_release: release,
        ..Capabilities::from_landlock_abi(abi)
    }
}

fn seccomp_action_available(action: u32) -> bool {
    unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_ACTION_AVAIL,
            0,
            &action as *const u32,
        ) == 0
    }
}

fn kernel_release() -> String {
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut uts) } != 0 {
        return String::from("unknown");
    }
    let bytes: Vec<u8> = uts
        .release
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn kernel_at_least(release: &str, major: u32, minor: u32) -> bool {
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u32>().unwrap_or(0));
    let (a, b) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (a, b) >= (major, minor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_versions_compare() {
        assert!(kernel_at_least("6.18.44-fc", 5, 5));
        assert!(kernel_at_least("5.5.0", 5, 5));
        assert!(!kernel_at_least("5.4.200", 5, 5));
        assert!(!kernel_at_least("garbage", 5, 5));
    }

    #[test]
    fn emulating_an_older_abi_never_adds_features() {
        let real = probe_capabilities();
        let old = real.with_landlock_abi(Some(3));
        assert!(!old.tcp && !old.scope_signals);
        assert_eq!(old.fs_truncate, real.fs_truncate);
        let none = real.with_landlock_abi(None);
        assert!(!none.fs && none.landlock_abi.is_none());
    }
}
