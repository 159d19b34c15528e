//! Policy versus kernel: which protections a spawn would lack, and whether
//! the policy's [`Enforcement`] lets it run without them.
//!
//! Fail closed by default: with [`Enforcement::Strict`] the first missing
//! protection refuses the spawn with a message that says what it protects,
//! what the kernel would need and what it has. Whatever runs without a
//! protection is logged on every spawn by the caller.

use crate::error::SpawnError;
use crate::kernel::Capabilities;
use crate::policy::{Enforcement, Feature, SandboxPolicy};
use crate::seccomp;

/// A protection the kernel cannot provide for this policy.
#[derive(Clone, Debug)]
pub(crate) struct Missing {
    pub feature: Feature,
    pub what: &'static str,
    pub needs: &'static str,
    pub have: String,
}

impl Missing {
    fn refusal(&self) -> SpawnError {
        SpawnError::Unenforceable {
            feature: self.feature,
            what: self.what.into(),
            needs: self.needs.into(),
            have: self.have.clone(),
        }
    }
}

/// Every protection `policy` needs that `caps` lacks. `protects_in_grants`:
/// some protected path of the policy overlaps a read-write grant (see
/// [`crate::view::View::needs_protection`]), which only the mount view can
/// keep read-only. `hides_in_view`: some hidden path of the policy exists
/// where the view could read it (see [`crate::view::View::needs_masks`]),
/// which only the mount view can mask.
pub(crate) fn missing_protections(
    caps: &Capabilities,
    policy: &SandboxPolicy,
    protects_in_grants: bool,
    hides_in_view: bool,
) -> Vec<Missing> {
    let c = caps;
    let abi = match c.landlock_abi {
        Some(v) => format!("Landlock ABI {v}"),
        None => "no Landlock".to_string(),
    };
    let wants_tcp = !policy.tcp_connect_ports.is_empty() || !policy.tcp_bind_ports.is_empty();
    let seccomp_ok = c.seccomp && seccomp::SUPPORTED_ARCH;
    let checks = [
        (
            c.fs,
            Feature::Filesystem,
            "file system confinement",
            "Landlock (Linux 5.13+, with `landlock` in the `lsm=` boot list)",
            abi.clone(),
        ),
        (
            c.fs_truncate,
            Feature::FilesystemTruncate,
            "truncate confinement",
            "Landlock ABI 3 (Linux 6.2+)",
            abi.clone(),
        ),
        (
            c.tcp || !wants_tcp,
            Feature::TcpPorts,
            "TCP port rules",
            "Landlock ABI 4 (Linux 6.7+)",
            abi.clone(),
        ),
        (
            c.scope_signals,
            Feature::ScopeSignals,
            "signal scoping (the sandbox could signal the host)",
            "Landlock ABI 6 (Linux 6.12+)",
            abi.clone(),
        ),
        (
            c.scope_abstract_unix,
            Feature::ScopeAbstractUnix,
            "abstract UNIX socket scoping",
            "Landlock ABI 6 (Linux 6.12+)",
            abi,
        ),
        (
            seccomp_ok,
            Feature::Seccomp,
            "the seccomp filter (socket kinds, privileged calls, process group)",
            "seccomp filters on x86_64 or aarch64",
            if seccomp::SUPPORTED_ARCH {
                "no seccomp filter support".into()
            } else {
                format!("architecture {}", std::env::consts::ARCH)
            },
        ),
        (
            policy.limits.max_processes.is_none()
                || c.pids_cgroup
                || (seccomp_ok && c.seccomp_user_notif),
            Feature::ProcessLimit,
            "the process limit",
            "a writable pids cgroup (v1 pids controller, or a delegated v2 subtree), \
             or seccomp user notification with CONTINUE (Linux 5.5+)",
            format!("Linux {}", c.kernel_release),
        ),
        (
            c.mount_isolation,
            Feature::MountIsolation,
            "the read-only mount view (metadata changes outside the grants)",
            "user namespaces usable by this process (root, or user.max_user_namespaces > 0 \
             without an AppArmor/SELinux userns restriction) and the new mount API (Linux 5.12+)",
            "them unavailable".into(),
        ),
        (
            c.mount_isolation || !protects_in_grants,
            Feature::ProtectedPaths,
            "read-only protection of the host's own files inside read-write grants (its \
             configuration, plugin directories, compile cache, `.git`)",
            "the read-only mount view (user namespaces and the new mount API, Linux 5.12+); \
             Landlock cannot deny a path beneath a read-write grant",
            "no mount view".into(),
        ),
        (
            c.mount_isolation || !hides_in_view,
            Feature::HiddenPaths,
            "hiding the files that hold credentials (the host's configuration, token and key \
             files) from what runs in the sandbox",
            "the mount view (user namespaces and the new mount API, Linux 5.12+); Landlock \
             cannot deny a path beneath a granted directory",
            "no mount view".into(),
        ),
    ];
    checks
        .into_iter()
        .filter(|(ok, ..)| !ok)
        .map(|(_, feature, what, needs, have)| Missing {
            feature,
            what,
            needs,
            have,
        })
        .collect()
}

/// Applies the policy's enforcement: the protections it may run without, or
/// the refusal.
pub(crate) fn decide(
    missing: Vec<Missing>,
    enforcement: &Enforcement,
) -> Result<Vec<Missing>, SpawnError> {
    let refused = match enforcement {
        Enforcement::BestEffort => None,
        Enforcement::Strict => missing.first(),
        Enforcement::Waive(waived) => missing.iter().find(|m| !waived.contains(&m.feature)),
    };
    match refused {
        Some(m) => Err(m.refusal()),
        None => Ok(missing),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::probe_capabilities;

    #[test]
    fn tcp_rules_are_needed_only_with_tcp_grants() {
        let old = probe_capabilities().with_landlock_abi(Some(3));
        let mut policy = SandboxPolicy::default();
        let has = |m: &[Missing], f| m.iter().any(|x| x.feature == f);
        assert!(!has(
            &missing_protections(&old, &policy, false, false),
            Feature::TcpPorts
        ));
        policy.tcp_bind_ports = vec![8080];
        assert!(has(
            &missing_protections(&old, &policy, false, false),
            Feature::TcpPorts
        ));
    }

    #[test]
    fn protected_paths_need_the_mount_view_only_when_they_lie_in_a_grant() {
        let no_view = Capabilities {
            mount_isolation: false,
            ..probe_capabilities()
        };
        let policy = SandboxPolicy::default();
        let features = |m: Vec<Missing>| m.into_iter().map(|m| m.feature).collect::<Vec<_>>();
        let without = features(missing_protections(&no_view, &policy, false, false));
        assert!(!without.contains(&Feature::ProtectedPaths));
        let with = features(missing_protections(&no_view, &policy, true, false));
        assert!(with.contains(&Feature::ProtectedPaths));
        // Waiving the mount view does not waive the protection.
        let waive_view = Enforcement::Waive([Feature::MountIsolation].into());
        assert!(matches!(
            decide(
                missing_protections(&no_view, &policy, true, false),
                &waive_view
            ),
            Err(SpawnError::Unenforceable {
                feature: Feature::ProtectedPaths,
                ..
            })
        ));
    }

    #[test]
    fn hidden_paths_need_the_mount_view_only_when_the_view_reaches_them() {
        let no_view = Capabilities {
            mount_isolation: false,
            ..probe_capabilities()
        };
        let policy = SandboxPolicy::default();
        let features = |m: Vec<Missing>| m.into_iter().map(|m| m.feature).collect::<Vec<_>>();
        assert!(
            !features(missing_protections(&no_view, &policy, false, false))
                .contains(&Feature::HiddenPaths)
        );
        let waive_view = Enforcement::Waive([Feature::MountIsolation].into());
        assert!(matches!(
            decide(
                missing_protections(&no_view, &policy, false, true),
                &waive_view
            ),
            Err(SpawnError::Unenforceable {
                feature: Feature::HiddenPaths,
                ..
            })
        ));
    }

    #[test]
    fn enforcement_modes() {
        let old = probe_capabilities().with_landlock_abi(Some(5));
        let missing = missing_protections(&old, &SandboxPolicy::default(), false, false);
        let features: Vec<Feature> = missing.iter().map(|m| m.feature).collect();
        assert_eq!(
            features,
            [Feature::ScopeSignals, Feature::ScopeAbstractUnix]
        );
        assert!(decide(missing.clone(), &Enforcement::Strict).is_err());
        assert_eq!(
            decide(missing.clone(), &Enforcement::BestEffort)
                .unwrap()
                .len(),
            2
        );
        let one = Enforcement::Waive([Feature::ScopeSignals].into());
        assert!(matches!(
            decide(missing.clone(), &one),
            Err(SpawnError::Unenforceable {
                feature: Feature::ScopeAbstractUnix,
                ..
            })
        ));
        let both = Enforcement::Waive([Feature::ScopeSignals, Feature::ScopeAbstractUnix].into());
        assert_eq!(decide(missing, &both).unwrap().len(), 2);
    }
}
