//! The escape suite: each test runs one real escape attempt inside the
//! sandbox (with the `toolgate-sandbox-probe` binary) and asserts that it was
//! denied AND that its legitimate counterpart still works.
//!
//! The strict sandbox refuses to spawn where the kernel lacks a layer, so
//! the per-attempt tests need every layer: ignored with the reason where the
//! build found one missing (`build.rs`, `toolgate_guest_build::needs`), and
//! failed (not passed) when a spawn is refused anyway.

use std::path::PathBuf;

use toolgate_guest_build::needs;
use toolgate_sandbox::probes::{
    EscapeSuite, ProbeReport, Verdict, probe_suite, run_escape_suite_via, run_escape_suite_with,
};

const PROBE: &str = env!("CARGO_BIN_EXE_toolgate-sandbox-probe");

fn scratch() -> PathBuf {
    std::env::temp_dir()
}

async fn check(name: &str) {
    let spec = probe_suite()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no spec named {name}"));
    let suite = EscapeSuite::prepare(PROBE.as_ref(), &scratch()).expect("fixtures");
    let report = suite.run_spec(&spec).await;
    print_report(&report);
    match &report.verdict {
        Verdict::Contained => {}
        Verdict::Skipped(why) => needs::expect(
            "full_kernel",
            Err(format!("{name}: the sandbox refused the spawn: {why}")),
        ),
        other => panic!(
            "{name}: {other:?}\n  attempt: {:?} {}\n  counterpart: {:?}",
            report.attempt.observed, report.attempt.message, report.counterpart
        ),
    }
}

toolgate_guest_build::ci_test!();

fn print_report(r: &ProbeReport) {
    println!(
        "{:<34} {:?}\n  attempt:     {:?} {}",
        r.name, r.verdict, r.attempt.observed, r.attempt.message
    );
    if let Some(c) = &r.counterpart {
        println!("  counterpart: {:?} {}", c.observed, c.message);
    }
}

/// `run_escape_suite_via` (what `toolgate sandbox check` calls, with the
/// `__probe` subcommand prefix) reports every spec, and none escapes.
#[tokio::test]
async fn the_whole_suite_reports_every_spec() {
    every_spec_contained(run_escape_suite_via(PROBE.as_ref(), &["__probe"], &scratch()).await);
}

/// Every spec reported and contained. Where the build found every layer, a
/// refused spawn is a failure too; elsewhere the strict sandbox must refuse
/// (never run uncontained).
fn every_spec_contained(reports: Vec<ProbeReport>) {
    assert_eq!(reports.len(), probe_suite().len());
    for r in &reports {
        print_report(r);
    }
    let refusal_ok = !cfg!(has_full_kernel);
    let bad: Vec<_> = reports
        .iter()
        .filter(|r| match r.verdict {
            Verdict::Contained => false,
            Verdict::Skipped(_) => !refusal_ok,
            _ => true,
        })
        .map(|r| (r.name, r.verdict.clone(), r.attempt.message.clone()))
        .collect();
    assert!(bad.is_empty(), "{bad:?}");
}

/// The same suite with every probe on a pseudo-terminal that is its
/// controlling terminal (what `terminal_open` gives a program): a terminal
/// opens no way out (`toolgate sandbox check --terminal`).
#[tokio::test]
async fn the_whole_suite_holds_on_a_terminal() {
    every_spec_contained(
        run_escape_suite_with(PROBE.as_ref(), &["__probe"], &scratch(), true).await,
    );
}

/// The probes are real: run *outside* the sandbox against the same fixtures,
/// the attempts work — so a denial inside is the sandbox's doing.
#[tokio::test]
async fn probes_succeed_outside_the_sandbox() {
    let suite = EscapeSuite::prepare(PROBE.as_ref(), &scratch()).expect("fixtures");
    let f = suite.fixtures();
    let o = |n: &str| f.outside.join(n).display().to_string();
    let g = |n: &str| f.granted.join(n).display().to_string();
    let attempts: Vec<Vec<String>> = vec![
        vec!["write_file".into(), o("target.txt")],
        vec!["read_file".into(), o("secret.txt")],
        vec!["chmod".into(), o("target.txt")],
        vec!["utime".into(), o("target.txt")],
        vec!["inotify_watch".into(), o("")],
        vec![
            "tcp_connect".into(),
            "127.0.0.1".into(),
            f.tcp_denied.to_string(),
        ],
        vec!["tcp_listen".into()],
        vec![
            "udp_send".into(),
            "127.0.0.1".into(),
            f.udp_port.to_string(),
        ],
        vec!["unix_connect".into(), f.unix_path.display().to_string()],
        vec!["unix_connect".into(), format!("@{}", f.abstract_name)],
        vec!["signal".into(), "parent".into()],
        vec!["setsid".into()],
        vec!["use_fd".into(), f.leaked_fd.to_string()],
        vec!["env_has".into(), "PATH".into()],
        vec![
            "tcp_fastopen".into(),
            "127.0.0.1".into(),
            f.tcp_denied.to_string(),
        ],
        vec![
            "tcp_fastopen_connect".into(),
            "127.0.0.1".into(),
            f.tcp_denied.to_string(),
        ],
        vec!["set_mode".into(), g(""), "4755".into(), "chmod".into()],
        vec!["set_mode".into(), g(""), "2755".into(), "fchmod".into()],
        vec!["set_mode".into(), g(""), "4755".into(), "fchmodat2".into()],
        vec!["create_mode".into(), g(""), "4755".into(), "openat".into()],
        vec!["create_mode".into(), g(""), "4755".into(), "tmpfile".into()],
        vec!["create_mode".into(), g(""), "6755".into(), "mknod".into()],
        vec!["openat2".into(), g(""), "own.txt".into()],
        vec!["setcap".into(), g("own.txt")],
        vec!["write_file".into(), g("protected.toml")],
        vec!["write_file".into(), g(".git/config")],
    ];
    for args in attempts {
        let out = std::process::Command::new(PROBE)
            .args(&args)
            .output()
            .unwrap();
        let line = String::from_utf8_lossy(&out.stdout);
        println!("{args:?}: {}", line.trim());
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?} should work unsandboxed: {line}"
        );
    }
}

macro_rules! escape_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            #[cfg_attr(
                not(has_full_kernel),
                ignore = "needs every sandbox layer (Landlock ABI 6, seccomp with user notification, user namespaces): Linux >= 6.12 with Landlock on; `toolgate sandbox check` lists what is missing"
            )]
            async fn $name() {
                check(stringify!($name)).await;
            }
        )*

        /// Every spec of the suite has a test above.
        #[test]
        fn every_spec_has_a_test() {
            let tested = [$(stringify!($name)),*];
            for spec in probe_suite() {
                assert!(tested.contains(&spec.name), "spec {} has no test", spec.name);
            }
            assert!(tested.len() >= 30);
        }
    };
}

escape_tests!(
    fs_write_outside,
    fs_create_outside,
    fs_truncate_outside,
    fs_write_readonly_grant,
    fs_truncate_readonly_grant,
    fs_rename_out_of_grant,
    fs_rename_into_grant,
    fs_hardlink_into_grant,
    fs_mkfifo_outside,
    fs_mkdir_outside,
    fs_unlink_outside,
    fs_symlink_write_escape,
    fs_symlink_read_escape,
    fs_read_secret_outside,
    fs_list_outside,
    fs_inotify_outside,
    fs_read_etc_shadow,
    fs_chmod_outside,
    fs_chmod_system_file,
    fs_utime_outside,
    fs_setxattr_outside,
    fs_fchmod_readonly_fd,
    fs_exec_outside,
    fs_procfd_reopen_write,
    fs_openat_dotdot,
    fs_procfd_dotdot,
    fs_proc_host_root,
    fs_proc_host_environ,
    fs_inherited_fd,
    fs_leaked_fds,
    fs_protected_write,
    fs_protected_truncate,
    fs_protected_replace,
    fs_protected_unlink,
    fs_protected_chmod,
    fs_protected_move_parent,
    fs_hidden_read,
    fs_hidden_symlink,
    fs_hidden_dir,
    fs_protected_plant_absent,
    fs_git_config_write,
    fs_git_hook_create,
    net_tcp_connect_ungranted_port,
    net_egress_host_loopback,
    net_tcp_connect_without_grant,
    net_tcp_bind_ungranted_port,
    net_tcp_listen_without_bind_grant,
    net_unix_abstract_squat,
    net_tcp_fastopen_ungranted_port,
    net_tcp_fastopen_connect_option,
    net_udp_send,
    net_dns_query,
    net_raw_socket,
    net_icmp_socket,
    net_netlink_socket,
    net_packet_socket,
    net_vsock_socket,
    net_sctp_socket,
    net_unix_pathname_connect,
    net_unix_abstract_connect,
    net_unix_dgram_sendto_pathname,
    net_unix_dgram_sendto_abstract,
    net_io_uring,
    proc_signal_host,
    proc_signal_outside,
    proc_ptrace_host,
    proc_ptrace_host_with_grant,
    proc_vm_read_host,
    proc_renice_host,
    proc_prlimit_host,
    proc_setaffinity_host,
    proc_setsid,
    proc_setpgid,
    proc_daemon_survives,
    proc_host_killed,
    priv_capabilities,
    priv_no_new_privs,
    priv_setuid,
    priv_unshare_user,
    priv_unshare_mount,
    priv_clone_newuser,
    priv_mount,
    priv_chroot,
    priv_chmod_setuid,
    priv_fchmod_setgid,
    priv_fchmodat_setuid,
    priv_fchmodat2_setuid,
    priv_create_setuid,
    priv_tmpfile_setuid,
    priv_mknod_setuid,
    priv_openat2,
    priv_setcap,
    priv_bpf,
    priv_perf_event_open,
    priv_keyctl,
    priv_userfaultfd,
    env_host_variable,
    env_exactly_given,
    res_memory_bomb,
    res_disk_fill,
    res_open_files,
    res_fork_bomb,
    res_cpu,
);
