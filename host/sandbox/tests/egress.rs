//! The egress proxy's sandbox side: a process given an
//! [`EgressProxy`] reaches the listener the host serves and nothing else —
//! not the host's loopback services (IPv4 or IPv6), not the outside by
//! TCP, UDP, ICMP or raw sockets, not a host daemon's Unix socket. Every
//! attempt is a real syscall from a real sandboxed process (`python3`).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::AsyncWriteExt;
use toolgate_guest_build::needs;
use toolgate_sandbox::{
    EgressProxy, Feature, Program, SandboxPolicy, SpawnError, SpawnRequest, probe_capabilities,
};

fn userns() -> Result<(), String> {
    let c = probe_capabilities();
    if c.mount_isolation && c.seccomp && c.fs {
        Ok(())
    } else {
        Err(format!(
            "needs user namespaces, seccomp and Landlock: {c:?}"
        ))
    }
}

/// A proxy stand-in: answers every connection with `proxy-hello`.
fn hello_proxy(port: u16, accepted: Arc<AtomicUsize>) -> EgressProxy {
    EgressProxy {
        port,
        serve: Arc::new(move |l: std::net::TcpListener| {
            l.set_nonblocking(true).unwrap();
            let l = tokio::net::TcpListener::from_std(l).unwrap();
            let accepted = accepted.clone();
            let task = tokio::spawn(async move {
                while let Ok((mut s, _)) = l.accept().await {
                    accepted.fetch_add(1, Ordering::SeqCst);
                    let _ = s.write_all(b"proxy-hello").await;
                }
            });
            struct Abort(tokio::task::JoinHandle<()>);
            impl Drop for Abort {
                fn drop(&mut self) {
                    self.0.abort();
                }
            }
            Box::new(Abort(task))
        }),
    }
}

const ATTEMPTS: &str = r#"
import socket, sys
def attempt(name, f):
    try:
        r = f()
        print(name, "REACHED", r)
    except Exception as e:
        print(name, "refused", type(e).__name__, getattr(e, "errno", ""))
def tcp(host, port, fam=socket.AF_INET):
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(3)
    s.connect((host, port))
    return s.recv(100)
proxy, host_port, unix_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
attempt("proxy", lambda: tcp("127.0.0.1", proxy))
attempt("host-loopback", lambda: tcp("127.0.0.1", host_port))
attempt("host-loopback-v6", lambda: tcp("::1", host_port, socket.AF_INET6))
attempt("outside-tcp", lambda: tcp("1.1.1.1", 443))
attempt("metadata", lambda: tcp("169.254.169.254", 80))
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01", ("8.8.8.8", 53))
    return s.recv(512)
attempt("udp-dns", udp)
attempt("icmp", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
attempt("icmp-dgram", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP))
attempt("raw", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW))
def unix():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(unix_path)
    return s.recv(100)
attempt("unix-daemon", unix)
def fastopen():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.sendto(b"x", 0x20000000, ("1.1.1.1", 80))
attempt("tcp-fastopen", fastopen)
attempt("other-port", lambda: tcp("127.0.0.1", proxy + 1))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_userns_seccomp),
    ignore = "needs user + mount namespaces and seccomp (unprivileged user namespaces allowed); `toolgate sandbox check` lists what is missing"
)]
async fn only_the_proxy_is_reachable() {
    needs::expect("userns_seccomp", userns());
    // Every layer: Landlock's port rule and seccomp refuse first (EACCES).
    attempts(toolgate_sandbox::Sandbox::new(), "every layer").await;
    // The namespace alone: a kernel without Landlock TCP rules (ABI 3),
    // run best-effort. What refuses now is that nothing is routable from
    // the namespace (ENETUNREACH) or listening in it (ECONNREFUSED).
    let no_port_rules = toolgate_sandbox::Sandbox::with_capabilities(
        probe_capabilities().with_landlock_abi(Some(3)),
    );
    attempts(no_port_rules, "the namespace alone").await;
}

async fn attempts(sandbox: toolgate_sandbox::Sandbox, what: &str) {
    let dir = std::env::temp_dir().join(format!("toolgate-egress-sbx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A host service on the loopback (the MCP port, say) and a host
    // daemon's Unix socket inside the granted directory: both answer.
    let host_service = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host_port = host_service.local_addr().unwrap().port();
    let host_v6 = tokio::net::TcpListener::bind(("::1", host_port)).await.ok();
    let unix_path: PathBuf = dir.join("daemon.sock");
    let daemon = tokio::net::UnixListener::bind(&unix_path).unwrap();
    let reached = Arc::new(AtomicUsize::new(0));
    {
        let r = reached.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = host_service.accept().await {
                r.fetch_add(1, Ordering::SeqCst);
                let _ = s.write_all(b"host").await;
            }
        });
    }
    {
        let r = reached.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = daemon.accept().await {
                r.fetch_add(1, Ordering::SeqCst);
                let _ = s.write_all(b"daemon").await;
            }
        });
    }
    if let Some(l) = host_v6 {
        let r = reached.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                r.fetch_add(1, Ordering::SeqCst);
                let _ = s.write_all(b"host6").await;
            }
        });
    }
    let accepted = Arc::new(AtomicUsize::new(0));
    let policy = SandboxPolicy {
        read_write: vec![dir.clone()],
        egress_proxy: Some(hello_proxy(3128, accepted.clone())),
        // A port grant must not open anything beside the proxy.
        tcp_connect_ports: vec![443, 80, host_port],
        enforcement: toolgate_sandbox::Enforcement::BestEffort,
        ..SandboxPolicy::default()
    };
    let mut req = SpawnRequest::new(
        Program::Exec {
            program: "/usr/bin/python3".into(),
            args: vec![
                "-c".into(),
                ATTEMPTS.into(),
                "3128".into(),
                host_port.to_string(),
                unix_path.display().to_string(),
            ],
        },
        &dir,
    );
    req.timeout = Some(std::time::Duration::from_secs(60));
    let out = sandbox
        .run(req, &policy, std::future::pending())
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("{what}:\n{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.success(), "{out:?}");
    assert!(
        text.contains("proxy REACHED b'proxy-hello'"),
        "the proxy is reachable: {text}"
    );
    for attempt in [
        "host-loopback",
        "host-loopback-v6",
        "outside-tcp",
        "metadata",
        "udp-dns",
        "icmp",
        "icmp-dgram",
        "raw",
        "unix-daemon",
        "tcp-fastopen",
        "other-port",
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("{attempt} refused"))),
            "{attempt} must be refused ({what}): {text}"
        );
    }
    assert_eq!(
        reached.load(Ordering::SeqCst),
        0,
        "no host service was reached"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
#[cfg_attr(
    not(has_userns_seccomp),
    ignore = "needs user + mount namespaces and seccomp (unprivileged user namespaces allowed); `toolgate sandbox check` lists what is missing"
)]
async fn egress_without_the_mount_view_is_refused_even_when_waived() {
    needs::expect("userns_seccomp", userns());
    let dir = PathBuf::from("/usr");
    let policy = SandboxPolicy {
        egress_proxy: Some(hello_proxy(3128, Arc::new(AtomicUsize::new(0)))),
        enforcement: toolgate_sandbox::Enforcement::BestEffort,
        ..SandboxPolicy::default()
    };
    let caps = probe_capabilities();
    let mut no_userns = caps.clone();
    no_userns.mount_isolation = false;
    let sandbox = toolgate_sandbox::Sandbox::with_capabilities(no_userns);
    match sandbox
        .run(
            SpawnRequest::new(Program::Shell("true".into()), &dir),
            &policy,
            std::future::pending(),
        )
        .await
    {
        Err(SpawnError::Unenforceable { feature, what, .. }) => {
            assert_eq!(feature, Feature::MountIsolation);
            assert!(what.contains("network namespace"), "{what}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}
