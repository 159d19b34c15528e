//! Probes the kernel the tests will run on, for the tests that need a
//! sandbox layer (`toolgate_guest_build::needs`): Landlock's ABI, seccomp
//! with user notification, user + mount namespaces. A test whose layer is
//! missing is ignored with the reason; the crate's own probe
//! (`probe_capabilities`, at run time) is what the library uses, and each
//! such test checks with it again. Nothing here changes the library.
//!
//! Probed again when this file changes or after `cargo clean -p
//! toolgate-sandbox` (a new kernel is not noticed by itself; a test that
//! then finds a layer gone fails, it does not pass).

use toolgate_guest_build::needs::Probes;

/// What to do about a missing layer, for the warnings.
const HOW: &str = "Linux ≥ 6.12 with Landlock enabled (lsm=…,landlock), unprivileged user namespaces allowed; `toolgate sandbox check` lists what this kernel lacks";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let abi = landlock_abi();
    let abi_at_least = |v: i32| match abi {
        Some(a) if a >= v => Ok(()),
        Some(a) => Err(format!("Landlock ABI {a} < {v}; {HOW}")),
        None => Err(format!("no Landlock on this kernel; {HOW}")),
    };
    let seccomp = seccomp_action_available(libc::SECCOMP_RET_ERRNO);
    let notif = seccomp_action_available(libc::SECCOMP_RET_USER_NOTIF);
    let userns = user_and_mount_namespaces();
    let mut probes = Probes::new();
    probes.need("landlock_abi3", abi_at_least(3));
    probes.need("landlock_abi6", abi_at_least(6));
    let userns_seccomp = match (&userns, seccomp) {
        (Ok(()), true) => Ok(()),
        (Err(e), _) => Err(format!("{e}; {HOW}")),
        (Ok(()), false) => Err(format!("no seccomp filters; {HOW}")),
    };
    probes.need("userns_seccomp", userns_seccomp.clone());
    let full = abi_at_least(6).and(userns_seccomp).and(if notif {
        Ok(())
    } else {
        Err(format!("no seccomp user notification; {HOW}"))
    });
    probes.need("full_kernel", full);
    probes.finish();
}

/// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`.
fn landlock_abi() -> Option<i32> {
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    (v > 0).then_some(v as i32)
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

/// In a throwaway child: new user + mount namespaces, our ids mapped, and
/// the mount tree made private (which needs the namespace's capabilities:
/// a kernel or LSM that allows the namespace but not its use fails here).
fn user_and_mount_namespaces() -> Result<(), String> {
    // SAFETY: the build script is single-threaded; the child only makes
    // syscalls and writes three small files before `_exit`.
    unsafe {
        let (uid, gid) = (libc::geteuid(), libc::getegid());
        let pid = libc::fork();
        if pid < 0 {
            return Err("fork failed".into());
        }
        if pid == 0 {
            let ok = libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) == 0
                && std::fs::write("/proc/self/setgroups", "deny").is_ok()
                && std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1\n")).is_ok()
                && std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1\n")).is_ok()
                && libc::mount(
                    std::ptr::null(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ) == 0;
            libc::_exit(if ok { 0 } else { 1 });
        }
        let mut status = 0;
        while libc::waitpid(pid, &mut status, 0) < 0 {
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return Err("waitpid failed".into());
            }
        }
        if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
            Ok(())
        } else {
            Err("user + mount namespaces cannot be created and used here".into())
        }
    }
}
