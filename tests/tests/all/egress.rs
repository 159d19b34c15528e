//! Egress by name (issue 30), end to end: `bash` (the real plugin, running
//! real `curl`, `pip`, `npm`, `cargo` under the sandbox) reaches the
//! network only through its call's proxy — granted names through, every
//! other destination refused with the proxy's message in the tool's own
//! output, and each connection recorded (log and audit record) with its
//! call. The attack suite runs as sandboxed processes too.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use toolgate::Toolgate;
use toolgate_tests::{PluginDir, Tree, fixtures, host, run};

/// A local HTTP server on the host's loopback: `/hello` answers `hello
/// from origin`, `/redirect` sends the client to `location`, `/public/…`
/// answers `saw REQUEST-LINE host=HOST`. Counts every connection it gets.
fn origin(location: &'static str) -> (u16, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            h.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut line = String::new();
                let mut r = BufReader::new(s.try_clone().unwrap());
                let _ = r.read_line(&mut line);
                let mut host = String::from("(none)");
                loop {
                    let mut l = String::new();
                    if r.read_line(&mut l).unwrap_or(0) == 0 || l == "\r\n" {
                        break;
                    }
                    if let Some((name, value)) = l.split_once(':')
                        && name.eq_ignore_ascii_case("host")
                    {
                        host = value.trim().to_string();
                    }
                }
                let resp = if line.contains("/redirect") {
                    format!(
                        "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n"
                    )
                } else if line.contains(" /public/") {
                    let body = format!("saw {} host={host}", line.trim_end());
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    )
                } else {
                    "HTTP/1.1 200 OK\r\nContent-Length: 17\r\n\r\nhello from origin".to_string()
                };
                // `Connection: close` (the proxy asks for it): done.
                let _ = s.write_all(resp.as_bytes());
            });
        }
    });
    (port, hits)
}

async fn bash_host(t: &Tree, grants: &str, global: &str, audit: &Path) -> (Toolgate, PluginDir) {
    let dir = PluginDir::new();
    dir.add("bash", fixtures::PLUGIN_BASH);
    let h = host(
        &dir,
        &format!(
            "[audit]\npath = {:?}\n\n[egress]\n{global}\n\n[plugins.bash.grants]\nshell = true\n{grants}\n\
             fs = [{{ path = {:?}, access = \"read-write\", spawn_only = true }}]\n",
            audit.display().to_string(),
            t.path.display().to_string()
        ),
    )
    .await;
    assert!(h.problems().is_empty(), "{:?}", h.problems());
    (h, dir)
}

async fn bash(h: &Toolgate, command: &str) -> String {
    let r = run(h, "bash", json!({ "command": command })).await;
    assert!(
        !r.is_error || r.code() == Some("EXIT_STATUS"),
        "bash itself failed: {r:?}"
    );
    r.text()
}

fn egress_records(audit: &Path) -> Vec<Value> {
    std::fs::read_to_string(audit)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["kind"] == "egress")
        .collect()
}

/// The queue's pending entries once there are some (polled every 20 ms,
/// at most `polls` times).
async fn pending_entries(
    queue: &toolgate::approval::queue::ApprovalQueue,
    polls: u32,
) -> Vec<toolgate::approval::store::Entry> {
    for _ in 0..polls {
        let p = queue.pending().await.unwrap();
        if !p.is_empty() {
            return p;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("no entry");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn granted_names_pass_everything_else_is_refused_and_recorded() {
    let t = Tree::new("egress-names");
    let audit = t.beside("audit.jsonl");
    let (port, hits) = origin("http://169.254.169.254/latest/meta-data/");
    let (h, _d) = bash_host(
        &t,
        &format!("egress = [\"localhost:{port}\", \"169.254.169.254\"]"),
        "allow_private = [\"127.0.0.1/32\"]",
        &audit,
    )
    .await;
    // The environment points at the proxy, in both cases.
    let out = bash(&h, "env | grep -i _proxy | sort").await;
    for v in [
        "HTTP_PROXY=http://127.0.0.1:3128",
        "https_proxy=http://127.0.0.1:3128",
        "ALL_PROXY=socks5h://127.0.0.1:3128",
        // `localhost` is granted: not the namespace's own (issue 44).
        "no_proxy=127.0.0.1,::1",
    ] {
        assert!(out.contains(v), "{v}: {out}");
    }
    // Granted: plain HTTP, a CONNECT tunnel, SOCKS5 with the name resolved
    // in the proxy.
    let out = bash(
        &h,
        &format!(
            "curl -sS -m 10 --noproxy '' http://localhost:{port}/hello; echo; \
             curl -sS -m 10 --noproxy '' -p http://localhost:{port}/hello; echo; \
             curl -sS -m 10 --noproxy '' -x socks5h://127.0.0.1:3128 http://localhost:{port}/hello; echo; \
             curl -sS -m 10 http://localhost:{port}/hello"
        ),
    )
    .await;
    assert_eq!(out.matches("hello from origin").count(), 4, "{out}");
    // Not granted: refused with the line to add, in curl's own output.
    let out = bash(
        &h,
        "curl -sS -m 10 -v https://example.com/ 2>&1 | grep -i toolgate",
    )
    .await;
    assert!(
        out.contains("add \"example.com\" to `egress = [...]` under [plugins.bash.grants]"),
        "{out}"
    );
    // Over HTTPS curl itself says only "CONNECT tunnel failed, response
    // 403": the result tells why (issue 44).
    let out = bash(&h, "curl -sS -m 10 https://example.com/").await;
    assert!(
        out.contains("[toolgate] the egress proxy refused:")
            && out.contains("example.com:443")
            && out.contains("add \"example.com\""),
        "{out}"
    );
    // A redirect from the allowed server to the metadata address: curl's
    // new connection is checked again, and the address class refuses it.
    let out = bash(
        &h,
        &format!("curl -sSf -m 10 -L --noproxy '' http://localhost:{port}/redirect; echo curl=$?"),
    )
    .await;
    assert!(out.contains("curl=22") && !out.contains("curl=0"), "{out}");
    let recs = egress_records(&audit);
    assert!(
        recs.iter().any(|r| r["name"] == "169.254.169.254"
            && r["allowed"] == false
            && r["rule"] == "class:link-local"),
        "the redirect's target is refused by class: {recs:#?}"
    );
    // Every connection is tied to its call and plugin, with bytes.
    let allowed: Vec<&Value> = recs.iter().filter(|r| r["allowed"] == true).collect();
    assert!(allowed.len() >= 3, "{recs:#?}");
    for r in &allowed {
        assert_eq!(r["plugin"], "bash");
        assert_eq!(r["callId"], "c1");
        assert!(r["bytesDown"].as_u64().unwrap() > 0, "{r}");
        assert_eq!(r["address"], "127.0.0.1");
    }
    assert!(
        recs.iter()
            .any(|r| r["name"] == "example.com" && r["allowed"] == false)
    );
    assert_eq!(
        hits.load(Ordering::SeqCst),
        5,
        "four fetches and the redirect"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_attack_suite_is_refused_and_recorded() {
    let t = Tree::new("egress-attacks");
    let audit = t.beside("audit.jsonl");
    let (port, hits) = origin("http://127.0.0.1/");
    // The rules even name every spelling: the address class still refuses
    // them (no allow_private).
    let (h, _d) = bash_host(
        &t,
        "egress = [\"localhost\", \"2130706433\", \"0x7f.1\", \"0177.0.0.1\", \"127.1\", \
         \"[::ffff:127.0.0.1]\", \"[::1]\", \"169.254.169.254\", \"[::ffff:169.254.169.254]\", \
         \"0xa9fea9fe\", \"10.0.0.1\", \"100.64.0.1\", \"[fd00::1]\", \"0.0.0.0\"]",
        "",
        &audit,
    )
    .await;
    let targets = [
        format!("localhost:{port}"),
        format!("2130706433:{port}"),
        format!("0x7f.1:{port}"),
        format!("0177.0.0.1:{port}"),
        format!("127.1:{port}"),
        format!("[::ffff:127.0.0.1]:{port}"),
        format!("[::1]:{port}"),
        "169.254.169.254".into(),
        "[::ffff:169.254.169.254]".into(),
        "0xa9fea9fe".into(),
        "10.0.0.1".into(),
        "100.64.0.1".into(),
        "[fd00::1]".into(),
        format!("0.0.0.0:{port}"),
    ];
    let script: String = targets
        .iter()
        .map(|t| {
            format!(
                "curl -sS -m 5 --noproxy '' -v http://{t}/ 2>&1 | grep -o 'toolgate egress: [^(]*' | head -1; "
            )
        })
        .collect();
    let out = bash(&h, &script).await;
    // curl's own lines, then the host's note of what the proxy refused.
    let (curls, note) = out
        .split_once("[toolgate] the egress proxy refused:")
        .expect("the note of refusals");
    assert_eq!(
        curls.matches("toolgate egress:").count(),
        targets.len(),
        "each refused by the proxy: {out}"
    );
    assert!(
        note.matches("toolgate egress:").count() == 8 && note.contains("more refusal"),
        "at most 8 told, the rest counted: {note}"
    );
    // Around the proxy: straight to the outside, the host's loopback, UDP
    // to a resolver, ICMP, raw sockets, IPv6, a host daemon's socket.
    let out = bash(
        &h,
        &format!(
            "curl -sS -m 5 --noproxy '*' http://1.1.1.1/; echo direct=$?; \
             curl -sS -m 5 --noproxy '*' http://127.0.0.1:{port}/; echo host_loopback=$?; \
             curl -sS -m 5 --noproxy '*' -g 'http://[::1]:{port}/'; echo host_v6=$?; \
             python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b\"x\", (\"8.8.8.8\", 53))'; echo udp=$?; \
             python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)'; echo icmp=$?; \
             ping -c1 -W2 1.1.1.1 >/dev/null 2>&1; echo ping=$?; \
             python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.connect(\"/run/systemd/private\")'; echo unix=$?"
        ),
    )
    .await;
    for probe in [
        "direct",
        "host_loopback",
        "host_v6",
        "udp",
        "icmp",
        "ping",
        "unix",
    ] {
        assert!(
            out.contains(&format!("{probe}=")) && !out.contains(&format!("{probe}=0")),
            "{probe} must fail: {out}"
        );
    }
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "the origin was never reached"
    );
    let recs = egress_records(&audit);
    assert!(recs.len() >= targets.len(), "{recs:#?}");
    assert!(recs.iter().all(|r| r["allowed"] == false), "{recs:#?}");
    for class in [
        "class:loopback",
        "class:link-local",
        "class:private",
        "class:carrier-grade NAT",
        "class:unspecified",
    ] {
        assert!(
            recs.iter().any(|r| r["rule"] == class),
            "{class}: {recs:#?}"
        );
    }
}

/// Issue 40, cases 5 and 7 through real `curl` in the sandbox: under
/// `GET localhost:PORT/public/*`, `curl --path-as-is` cannot climb out of
/// `/public/` (plain or encoded dots: refused by the proxy, the origin
/// never reached), `/public/./a.txt` reaches the origin as
/// `/public/a.txt`, and the origin gets `Host` from the allowed name,
/// whatever curl was told to send.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_path_as_is_cannot_leave_the_allowed_path() {
    let t = Tree::new("egress-dots");
    let audit = t.beside("audit.jsonl");
    let (port, hits) = origin("http://127.0.0.1/");
    let (h, _d) = bash_host(
        &t,
        &format!("egress = [\"GET localhost:{port}/public/*\"]"),
        "allow_private = [\"127.0.0.1/32\"]",
        &audit,
    )
    .await;
    let out = bash(
        &h,
        &format!(
            "for p in /public/../secret.txt /public/%2e%2e/secret.txt /public/./a.txt; do \
               curl -sS -m 10 --noproxy '' --path-as-is -H 'Host: admin.internal' \
                 -w ' status=%{{http_code}}\\n' http://localhost:{port}$p; \
             done"
        ),
    )
    .await;
    assert_eq!(out.matches("status=403").count(), 2, "{out}");
    assert!(
        out.contains(&format!(
            "saw GET /public/a.txt HTTP/1.1 host=localhost:{port} status=200"
        )),
        "{out}"
    );
    assert_eq!(
        hits.load(Ordering::SeqCst),
        1,
        "only the allowed request: {out}"
    );
    let recs = egress_records(&audit);
    assert_eq!(
        recs.iter()
            .filter(|r| r["allowed"] == false && r["name"] == "localhost")
            .count(),
        2,
        "{recs:#?}"
    );
}

/// Whether `host:443` answers from here (the registries are outside).
fn reachable(host: &str) -> Result<(), String> {
    use std::net::ToSocketAddrs;
    let addr = (host, 443)
        .to_socket_addrs()
        .map_err(|e| format!("{host} does not resolve: {e}"))?
        .next()
        .ok_or(format!("{host} has no address"))?;
    std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(5))
        .map(|_| ())
        .map_err(|e| format!("{host}:443 is unreachable from this machine: {e}"))
}

/// `pip download`, `npm view` and `cargo fetch` — real tools, unmodified,
/// from `bash` — reach their registries through the proxy when granted,
/// and are refused with the proxy's message when not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pip_npm_and_cargo_work_through_the_proxy_when_granted() {
    let how = "run where pypi.org, registry.npmjs.org and index.crates.io are reachable over HTTPS";
    for host in ["pypi.org", "registry.npmjs.org", "index.crates.io"] {
        if !toolgate_guest_build::needs::present_or_skip("registries", reachable(host), how) {
            return;
        }
    }
    let t = Tree::new("egress-tools");
    let audit = t.beside("audit.jsonl");
    let cargo = Path::new(env!("CARGO"));
    let toolchain = cargo.parent().and_then(Path::parent).unwrap();
    let dir = PluginDir::new();
    dir.add("bash", fixtures::PLUGIN_BASH);
    // This machine reaches its registries through a mirror that may sit
    // at an address egress refuses as a class (here 203.0.113.80, a
    // documentation address): the operator names it, as anyone must.
    let mirrors: Vec<String> = [
        "pypi.org",
        "files.pythonhosted.org",
        "registry.npmjs.org",
        "index.crates.io",
        "static.crates.io",
    ]
    .iter()
    .filter_map(|h| {
        use std::net::ToSocketAddrs;
        (*h, 443).to_socket_addrs().ok()?.next()
    })
    .map(|a| a.ip())
    .filter(|ip| toolgate::egress::addr::refused_class(*ip).is_some())
    .map(|ip| format!("\"{ip}/32\""))
    .collect();
    let allow_private = format!("[egress]\nallow_private = [{}]\n", mirrors.join(", "));
    let config = |egress: &str| {
        format!(
            "{allow_private}[audit]\npath = {:?}\n\n[plugins.bash.grants]\nshell = true\n{egress}\n\
             fs = [{{ path = {:?}, access = \"read-write\", spawn_only = true }}, \
                   {{ path = {:?}, access = \"read-only\", spawn_only = true }}]\n",
            audit.display().to_string(),
            t.path.display().to_string(),
            toolchain.display().to_string(),
        )
    };
    let script = format!(
        "export HOME=$PWD NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt CARGO_HOME=$PWD/cargo-home RUSTC={}/bin/rustc; \
         python3 -m pip download --no-cache-dir --no-deps --cert /etc/ssl/certs/ca-certificates.crt \
           -d wheels six==1.16.0 2>&1 | tail -3; echo pip=${{PIPESTATUS[0]}}; ls wheels; \
         npm view left-pad version --cache $PWD/npm-cache 2>&1 | grep -v \"npm notice\" | tail -3; echo npm=${{PIPESTATUS[0]}}; \
         mkdir -p fetch/src && touch fetch/src/lib.rs && \
         printf \"[package]\\nname = \\\"f\\\"\\nversion = \\\"0.1.0\\\"\\nedition = \\\"2021\\\"\\n[dependencies]\\nitoa = \\\"=1.0.11\\\"\\n\" > fetch/Cargo.toml; \
         {} fetch --manifest-path fetch/Cargo.toml 2>&1 | tail -3; echo cargo=${{PIPESTATUS[0]}}; \
         ls cargo-home/registry/cache/*/ 2>/dev/null",
        toolchain.display(),
        cargo.display()
    );
    // Granted: each tool gets its answer.
    let h = host(
        &dir,
        &config(
            "egress = [\"pypi.org\", \"files.pythonhosted.org\", \"registry.npmjs.org\", \
             \"index.crates.io\", \"static.crates.io\"]",
        ),
    )
    .await;
    assert!(h.problems().is_empty(), "{:?}", h.problems());
    let out = bash(&h, &format!("bash -c '{}'", script.replace('\'', "'\\''"))).await;
    assert!(
        out.contains("six-1.16.0-py2.py3-none-any.whl"),
        "pip: {out}"
    );
    assert!(out.contains("1.3.0"), "npm view left-pad: {out}");
    assert!(out.contains("itoa-1.0.11.crate"), "cargo fetch: {out}");
    let recs = egress_records(&audit);
    for name in [
        "pypi.org",
        "files.pythonhosted.org",
        "registry.npmjs.org",
        "index.crates.io",
    ] {
        assert!(
            recs.iter()
                .any(|r| r["name"] == name && r["allowed"] == true),
            "{name}: {recs:#?}"
        );
    }
    drop(h);
    // Not granted (only something else): refused, the proxy's message in
    // their output.
    for d in ["wheels", "cargo-home", "npm-cache", "fetch"] {
        std::fs::remove_dir_all(t.path.join(d)).ok();
    }
    let h = host(&dir, &config("egress = [\"example.org\"]")).await;
    let out = bash(&h, &format!("bash -c '{}'", script.replace('\'', "'\\''"))).await;
    assert!(!out.contains(".whl"), "{out}");
    assert!(
        out.contains("toolgate egress"),
        "the proxy's message is shown: {out}"
    );
    for tool in ["pip", "npm", "cargo"] {
        assert!(
            !out.contains(&format!("{tool}=0")),
            "{tool} must fail: {out}"
        );
    }
}

// ---- components under the same rules -------------------------------------

/// A local HTTP server for components: `/hello` (text), `/to-metadata`
/// and `/to-loopback` redirects to a private address. Counts connections.
fn page_server() -> (u16, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            h.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut line = String::new();
                let mut r = BufReader::new(s.try_clone().unwrap());
                let _ = r.read_line(&mut line);
                loop {
                    let mut l = String::new();
                    if r.read_line(&mut l).unwrap_or(0) == 0 || l == "\r\n" {
                        break;
                    }
                }
                let redirect = |to: String| {
                    format!(
                        "HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    )
                };
                let resp = if line.contains("/to-metadata") {
                    redirect("http://169.254.169.254/latest/meta-data/".into())
                } else if line.contains("/to-loopback") {
                    redirect(format!("http://127.0.0.2:{port}/hello"))
                } else {
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 17\r\nConnection: close\r\n\r\nhello from origin".to_string()
                };
                let _ = s.write_all(resp.as_bytes());
            });
        }
    });
    (port, hits)
}

async fn component_host(
    plugin: &str,
    fixture: &str,
    global: &str,
    grants: &str,
    audit: &Path,
) -> (Toolgate, PluginDir) {
    let dir = PluginDir::new();
    dir.add(plugin, fixture);
    let h = host(
        &dir,
        &format!(
            "[audit]\npath = {:?}\n\n[egress]\n{global}\n\n[plugins.{plugin}.grants]\n{grants}\n",
            audit.display().to_string()
        ),
    )
    .await;
    assert!(h.problems().is_empty(), "{:?}", h.problems());
    (h, dir)
}

/// The refusal's message, from a failed call with `code`.
fn refused(r: &toolgate::CallRecord, code: &str) -> String {
    assert!(r.is_error, "allowed: {r:?}");
    assert_eq!(r.code(), Some(code), "{r:?}");
    r.error.as_ref().unwrap().message.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_fetch_is_under_the_same_egress_rules_and_recorded() {
    let t = Tree::new("egress-web-fetch");
    let audit = t.beside("audit.jsonl");
    let (port, hits) = page_server();
    // Every private destination is in the rules: only `[egress] deny` and
    // the address classes can refuse them.
    let (h, _d) = component_host(
        "web-fetch",
        fixtures::PLUGIN_WEB_FETCH,
        "allow_private = [\"127.0.0.1/32\"]\ndeny = [\"*.denied.test\"]",
        "egress = [\"127.0.0.1\", \"127.0.0.2\", \"169.254.169.254\", \"*.denied.test\"]",
        &audit,
    )
    .await;
    let fetch = |url: String| {
        let h = &h;
        async move { run(h, "web_fetch", json!({ "url": url })).await }
    };
    // Allowed (allow_private names 127.0.0.1).
    let r = fetch(format!("http://127.0.0.1:{port}/hello")).await;
    assert_eq!(r.text(), "hello from origin", "{r:?}");
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    // Denied by name, before anything resolves.
    let e = refused(
        &fetch("http://www.denied.test/".into()).await,
        "PERMISSION_DENIED",
    );
    assert!(e.contains("\"*.denied.test\" in `[egress] deny`"), "{e}");
    // The metadata address, as written and in hex: refused by class.
    for url in [
        "http://169.254.169.254/latest/meta-data/",
        "http://0xa9fea9fe/latest/meta-data/",
    ] {
        let e = refused(&fetch(url.into()).await, "PERMISSION_DENIED");
        assert!(
            e.contains("169.254.169.254 is a link-local address")
                && e.contains("allow_private = [...]"),
            "{url}: {e}"
        );
    }
    // A redirect from the allowed server to a private address: the
    // component follows it with a new request, checked again.
    for (path, shown) in [
        ("/to-metadata", "169.254.169.254 is a link-local"),
        ("/to-loopback", "127.0.0.2 is a loopback"),
    ] {
        let e = refused(
            &fetch(format!("http://127.0.0.1:{port}{path}")).await,
            "PERMISSION_DENIED",
        );
        assert!(e.contains(shown), "{path}: {e}");
    }
    assert_eq!(hits.load(Ordering::SeqCst), 3, "the two redirects' origins");
    // Not in the rules: the message names the rule to add.
    let e = refused(
        &fetch("https://example.invalid/".into()).await,
        "PERMISSION_DENIED",
    );
    assert!(
        e.contains("add \"example.invalid\" to `egress = [...]` under [plugins.web-fetch.grants]"),
        "{e}"
    );
    // Recorded: attributed to the call and plugin, by which rule, bytes.
    let recs = egress_records(&audit);
    let web: Vec<&Value> = recs.iter().filter(|r| r["via"] == "wasi:http").collect();
    let allowed: Vec<&&Value> = web.iter().filter(|r| r["allowed"] == true).collect();
    assert_eq!(
        allowed.len(),
        3,
        "/hello and the two redirects' origins: {web:#?}"
    );
    for r in &allowed {
        assert_eq!(r["plugin"], "web-fetch");
        assert_eq!(r["callId"], "c1");
        assert_eq!(r["address"], "127.0.0.1");
        assert_eq!(r["rule"], "127.0.0.1");
        assert!(r["bytesDown"].as_u64().unwrap() > 0, "{r}");
        assert!(r["bytesUp"].as_u64().unwrap() > 0, "{r}");
    }
    let refusal = |name: &str, rule: &str| {
        web.iter()
            .any(|r| r["name"] == name && r["allowed"] == false && r["rule"] == rule)
    };
    assert!(refusal("www.denied.test", "*.denied.test"), "{web:#?}");
    assert!(refusal("169.254.169.254", "class:link-local"), "{web:#?}");
    assert!(refusal("127.0.0.2", "class:loopback"), "{web:#?}");
    assert!(
        web.iter()
            .any(|r| r["name"] == "example.invalid" && r["allowed"] == false),
        "{web:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_resolving_to_loopback_is_refused_without_allow_private() {
    let t = Tree::new("egress-web-fetch-name");
    let audit = t.beside("audit.jsonl");
    let (port, hits) = page_server();
    let (h, _d) = component_host(
        "web-fetch",
        fixtures::PLUGIN_WEB_FETCH,
        "",
        "egress = [\"localhost\"]",
        &audit,
    )
    .await;
    let r = run(
        &h,
        "web_fetch",
        json!({ "url": format!("http://localhost:{port}/hello") }),
    )
    .await;
    let e = refused(&r, "PERMISSION_DENIED");
    assert!(
        e.contains("localhost resolves to") && e.contains("loopback address"),
        "{e}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0, "nothing reached the server");
    assert!(
        egress_records(&audit)
            .iter()
            .any(|r| r["name"] == "localhost"
                && r["allowed"] == false
                && r["rule"] == "class:loopback"),
        "recorded"
    );
}

/// The older `network = ["host:port"]` grant keeps working (the operator
/// named the exact address, so its class does not refuse it), and
/// `[egress] deny` applies to it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_network_grant_coexists_and_deny_applies_to_it() {
    let t = Tree::new("egress-network-grant");
    let audit = t.beside("audit.jsonl");
    let (port, _hits) = page_server();
    let grant = format!("network = [\"127.0.0.1:{port}\"]");
    let url = format!("http://127.0.0.1:{port}/hello");
    let (h, _d) = component_host("web-fetch", fixtures::PLUGIN_WEB_FETCH, "", &grant, &audit).await;
    assert_eq!(
        run(&h, "web_fetch", json!({ "url": url })).await.text(),
        "hello from origin"
    );
    let recs = egress_records(&audit);
    let rule = format!("network: 127.0.0.1:{port}");
    assert!(
        recs.iter()
            .any(|r| r["allowed"] == true && r["rule"] == rule.as_str()),
        "{recs:#?}"
    );
    let (h, _d) = component_host(
        "web-fetch",
        fixtures::PLUGIN_WEB_FETCH,
        "deny = [\"127.0.0.0/8\"]",
        &grant,
        &audit,
    )
    .await;
    let e = refused(
        &run(&h, "web_fetch", json!({ "url": url })).await,
        "PERMISSION_DENIED",
    );
    assert!(e.contains("\"127.0.0.0/8\" in `[egress] deny`"), "{e}");
}

/// A component connecting with `wasi:sockets` (the probe: Rust's
/// `std::net::TcpStream` on wasm32-wasip2) to loopback, the metadata
/// address, an IPv4-mapped IPv6 form and IPv6 loopback, all named in its
/// rules: refused by class, and recorded; allowed once `allow_private`
/// names the block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wasi_sockets_connects_are_under_the_same_rules() {
    let t = Tree::new("egress-sockets");
    let audit = t.beside("audit.jsonl");
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let h2 = hits.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            h2.fetch_add(1, Ordering::SeqCst);
            let mut line = String::new();
            let _ = BufReader::new(&s).read_line(&mut line);
            let _ = s.write_all(b"pong");
        }
    });
    let grants =
        format!("egress = [\"127.0.0.1:{port}\", \"169.254.169.254\", \"[::1]\", \"10.0.0.1\"]");
    let (h, _d) = component_host("probe", fixtures::PROBE, "", &grants, &audit).await;
    for addr in [
        format!("127.0.0.1:{port}"),
        format!("[::ffff:127.0.0.1]:{port}"),
        "169.254.169.254:80".to_string(),
        "[::ffff:169.254.169.254]:80".to_string(),
        format!("[::1]:{port}"),
        "10.0.0.1:80".to_string(),
        // Not in the rules at all.
        "192.0.2.1:80".to_string(),
    ] {
        let r = run(&h, "connect", json!({ "addr": addr })).await;
        assert!(r.is_error, "{addr} connected: {r:?}");
    }
    assert_eq!(hits.load(Ordering::SeqCst), 0, "nothing reached the server");
    let recs = egress_records(&audit);
    let refused_by = |name: &str, rule: &str| {
        recs.iter().any(|r| {
            r["via"] == "wasi:sockets"
                && r["name"] == name
                && r["allowed"] == false
                && r["rule"] == rule
                && r["plugin"] == "probe"
                && r["callId"] == "c1"
        })
    };
    assert!(refused_by("127.0.0.1", "class:loopback"), "{recs:#?}");
    assert!(
        refused_by("169.254.169.254", "class:link-local"),
        "{recs:#?}"
    );
    assert!(refused_by("::1", "class:loopback"), "{recs:#?}");
    assert!(refused_by("10.0.0.1", "class:private"), "{recs:#?}");
    assert!(
        recs.iter()
            .any(|r| r["name"] == "192.0.2.1" && r["allowed"] == false),
        "{recs:#?}"
    );
    // allow_private opens exactly the named block.
    let (h, _d) = component_host(
        "probe",
        fixtures::PROBE,
        "allow_private = [\"127.0.0.1/32\"]",
        &grants,
        &audit,
    )
    .await;
    let r = run(
        &h,
        "connect",
        json!({ "addr": format!("127.0.0.1:{port}") }),
    )
    .await;
    assert_eq!(r.text(), "pong", "{r:?}");
    assert!(
        run(&h, "connect", json!({ "addr": "169.254.169.254:80" }))
            .await
            .is_error
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}

// ---- `[egress] ask = true`: unknown destinations asked about ---------------

/// Answers every question `allow`ing or not, counting the egress
/// questions (and keeping the last one's prompt and destination).
struct Asked {
    allow: bool,
    egress: AtomicUsize,
    last: std::sync::Mutex<Option<(String, toolgate::approval::EgressAsk)>>,
}

impl Asked {
    fn new(allow: bool) -> Arc<Asked> {
        Arc::new(Asked {
            allow,
            egress: AtomicUsize::new(0),
            last: std::sync::Mutex::new(None),
        })
    }
}

#[async_trait::async_trait]
impl toolgate::approval::Approver for Asked {
    fn name(&self) -> &str {
        if self.allow {
            "test-allow"
        } else {
            "test-deny"
        }
    }
    async fn approve(
        &self,
        _request: &toolgate::approval::ApprovalRequest,
    ) -> toolgate::approval::ApprovalAnswer {
        // A person taking a moment: concurrent connections wait for this
        // one answer.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        if self.allow {
            toolgate::approval::ApprovalAnswer::Approve
        } else {
            toolgate::approval::ApprovalAnswer::Deny("not from this call".into())
        }
    }
    async fn approve_egress(
        &self,
        request: &toolgate::approval::ApprovalRequest,
        egress: &toolgate::approval::EgressAsk,
    ) -> toolgate::approval::ApprovalAnswer {
        self.egress.fetch_add(1, Ordering::SeqCst);
        *self.last.lock().unwrap() = Some((request.prompt.clone(), egress.clone()));
        self.approve(request).await
    }
}

/// `bash` granted `example.org` only (so its spawns have the proxy), with
/// `[egress]` holding `global` (and `ask = true`), answered by `approver`;
/// `tables`: more of the configuration.
async fn asking_bash(
    t: &Tree,
    global: &str,
    tables: &str,
    approver: Option<Arc<dyn toolgate::approval::Approver>>,
    audit: &Path,
) -> (Toolgate, PluginDir) {
    let dir = PluginDir::new();
    dir.add("bash", fixtures::PLUGIN_BASH);
    let config = format!(
        "[audit]\npath = {:?}\n\n{tables}\n[egress]\nask = true\n{global}\n\n\
         [plugins.bash.grants]\nshell = true\negress = [\"example.org\"]\n\
         fs = [{{ path = {:?}, access = \"read-write\", spawn_only = true }}]\n",
        audit.display().to_string(),
        t.path.display().to_string()
    );
    let mut b = toolgate_tests::builder(&dir, &config);
    if let Some(a) = approver {
        b = b.approver(a);
    }
    let h = b.build().await.expect("host builds");
    assert!(h.problems().is_empty(), "{:?}", h.problems());
    (h, dir)
}

/// Ten `curl`s at once, through the proxy, to `localhost:PORT/hello`.
fn ten_curls(port: u16) -> String {
    format!(
        "for i in $(seq 10); do curl -sS -m 30 --noproxy '' http://localhost:{port}/hello & done; wait; echo; \
         curl -sS -m 30 --noproxy '' -v http://localhost:{port}/hello 2>&1 | grep -E 'hello from|toolgate egress: ' | tail -1"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_approves_an_unknown_destination_once_per_call_and_records_who() {
    let t = Tree::new("egress-ask-allow");
    let audit = t.beside("audit.jsonl");
    let (port, hits) = origin("http://127.0.0.1/");
    let approver = Asked::new(true);
    let (h, _d) = asking_bash(
        &t,
        "allow_private = [\"127.0.0.1/32\"]",
        "",
        Some(approver.clone()),
        &audit,
    )
    .await;
    let out = bash(&h, &ten_curls(port)).await;
    assert_eq!(out.matches("hello from origin").count(), 11, "{out}");
    assert_eq!(hits.load(Ordering::SeqCst), 11);
    // Eleven connections, one question — naming the call, the destination
    // and the address it resolved to.
    assert_eq!(approver.egress.load(Ordering::SeqCst), 1);
    let (prompt, asked) = approver.last.lock().unwrap().clone().unwrap();
    assert_eq!(
        (
            asked.name.as_str(),
            asked.port,
            asked.address.as_str(),
            asked.plugin.as_str()
        ),
        ("localhost", port, "127.0.0.1", "bash")
    );
    for shown in [
        "tool `bash`",
        "call c1",
        &format!("localhost:{port}"),
        "127.0.0.1",
    ] {
        assert!(prompt.contains(shown), "{shown}: {prompt}");
    }
    // Recorded: allowed by an approval, and whose.
    let recs = egress_records(&audit);
    let approved: Vec<&Value> = recs
        .iter()
        .filter(|r| r["allowed"] == true && r["name"] == "localhost")
        .collect();
    // (A connection is recorded when it ends; the call's end may take the
    // proxy away before the last one is: at least one is there.)
    assert!(!approved.is_empty(), "{recs:#?}");
    for r in approved {
        assert_eq!(r["rule"], "approval", "{r}");
        assert_eq!(r["approval"], "test-allow", "{r}");
        assert_eq!(r["callId"], "c1");
    }
    // The next call asks again (an approval is for one call).
    let out = bash(
        &h,
        &format!("curl -sS -m 30 --noproxy '' http://localhost:{port}/hello"),
    )
    .await;
    assert!(out.contains("hello from origin"), "{out}");
    assert_eq!(approver.egress.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_refused_shows_the_rule_to_add_and_never_opens_what_rules_close() {
    let t = Tree::new("egress-ask-deny");
    let audit = t.beside("audit.jsonl");
    let (port, hits) = origin("http://127.0.0.1/");
    // `--approve deny`: the process sees the proxy's refusal naming the
    // rule to add, and who refused.
    let (h, _d) = asking_bash(
        &t,
        "allow_private = [\"127.0.0.1/32\"]",
        "",
        Some(Arc::new(toolgate::approval::DenyAll)),
        &audit,
    )
    .await;
    let out = bash(&h, &ten_curls(port)).await;
    assert!(!out.contains("hello from origin"), "{out}");
    assert!(
        out.contains(&format!(
            "add \"localhost:{port}\" to `egress = [...]` under [plugins.bash.grants]"
        )) && out.contains("deny-all refused: approvals are set to deny"),
        "{out}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    let recs = egress_records(&audit);
    assert!(
        recs.iter().any(|r| r["name"] == "localhost"
            && r["allowed"] == false
            && r["rule"] == "approval"
            && r["approval"] == "deny-all"),
        "{recs:#?}"
    );
    drop(h);
    // An approver that allows everything still never opens a private
    // address `allow_private` does not name: a name resolving to
    // 127.0.0.1 is refused by class, and nobody is asked.
    let approver = Asked::new(true);
    let (h, _d) = asking_bash(&t, "", "", Some(approver.clone()), &audit).await;
    let out = bash(
        &h,
        &format!("curl -sS -m 30 --noproxy '' -v http://localhost:{port}/hello 2>&1 | grep -o 'toolgate egress: .*' | head -1"),
    )
    .await;
    assert!(
        out.contains("localhost resolves to 127.0.0.1, which is a loopback address"),
        "{out}"
    );
    drop(h);
    // Nor anything `[egress] deny` names.
    let (h, _d) = asking_bash(
        &t,
        "allow_private = [\"127.0.0.1/32\"]\ndeny = [\"localhost\"]",
        "",
        Some(approver.clone()),
        &audit,
    )
    .await;
    let out = bash(
        &h,
        &format!("curl -sS -m 30 --noproxy '' -v http://localhost:{port}/hello 2>&1 | grep -o 'toolgate egress: .*' | head -1"),
    )
    .await;
    assert!(out.contains("in `[egress] deny`"), "{out}");
    assert_eq!(approver.egress.load(Ordering::SeqCst), 0, "never asked");
    assert_eq!(hits.load(Ordering::SeqCst), 0);
}

/// The approval queue: a connection waits as a pending entry naming its
/// destination; a grant made from it lets the call through, and the next
/// call's connection too, with no new entry; a denial reaches the process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_asks_about_a_destination_and_an_egress_grant_answers_the_next_call() {
    use toolgate::approval::grant::GrantSpec;
    use toolgate::approval::queue::Verdict;
    let t = Tree::new("egress-ask-queue");
    let audit = t.beside("audit.jsonl");
    let (port, hits) = origin("http://127.0.0.1/");
    let tables = format!(
        "[approval]\nmode = \"queue\"\nstore = {:?}\n",
        t.beside("approvals.sqlite").display().to_string()
    );
    let (h, _d) = asking_bash(
        &t,
        "allow_private = [\"127.0.0.1/32\"]",
        &tables,
        None,
        &audit,
    )
    .await;
    let queue = h.approvals().expect("the queue").clone();
    let curl = format!(
        "curl -sS -m 60 --noproxy '' -v http://localhost:{port}/hello 2>&1 | grep -E 'hello from|toolgate egress'"
    );
    let first = {
        let (h, curl) = (h.clone(), curl.clone());
        tokio::spawn(async move { bash(&h, &curl).await })
    };
    let pending = pending_entries(&queue, 1000).await;
    assert_eq!(pending.len(), 1, "{pending:?}");
    let e = &pending[0];
    let asked = e.egress.as_ref().expect("an egress entry");
    assert_eq!(
        (
            asked.name.as_str(),
            asked.port,
            asked.address.as_str(),
            asked.via.as_str()
        ),
        ("localhost", port, "127.0.0.1", "http")
    );
    assert_eq!((e.tool.as_str(), e.asked_by.as_str()), ("bash", "egress"));
    assert!(e.reason.contains("call c1"), "{}", e.reason);
    assert_eq!(hits.load(Ordering::SeqCst), 0, "it waits");
    // Granted for any local* name on that port, for ten minutes.
    let spec = GrantSpec {
        destination: Some("local*".into()),
        port: Some(port),
        duration_ms: Some(600_000),
        ..GrantSpec::default()
    };
    let decided = queue
        .decide(&e.id, Verdict::Grant(spec), "api:alice")
        .await
        .unwrap();
    let grant = decided.decided.unwrap().grant.unwrap();
    let out = first.await.unwrap();
    assert!(out.contains("hello from origin"), "{out}");
    let grants = queue.grants().await.unwrap();
    let g = grants.iter().find(|g| g.id == grant).unwrap();
    assert_eq!(
        (g.destination.as_deref(), g.port),
        (Some("local*"), Some(port))
    );
    // The next call: through at once under the grant, no new entry.
    let out = bash(&h, &curl).await;
    assert!(out.contains("hello from origin"), "{out}");
    assert!(queue.pending().await.unwrap().is_empty());
    assert_eq!(
        queue.decided(50).await.unwrap().len(),
        1,
        "one entry in all"
    );
    let recs = egress_records(&audit);
    let approvals: Vec<&str> = recs
        .iter()
        .filter(|r| r["allowed"] == true && r["rule"] == "approval")
        .filter_map(|r| r["approval"].as_str())
        .collect();
    let by_entry = format!("approval {} by api:alice, grant {grant}", e.id);
    assert!(approvals.contains(&by_entry.as_str()), "{recs:#?}");
    let by_grant = format!("grant {grant}: egress to `local*:{port}` for `bash`");
    assert!(
        approvals
            .iter()
            .any(|a| a.starts_with(&by_grant) && a.ends_with("granted by api:alice")),
        "{recs:#?}"
    );
    // Revoked, the next call asks again; denied, the process is told.
    queue.revoke(&grant, "api:alice").await.unwrap();
    let third = {
        let (h, curl) = (h.clone(), curl.clone());
        tokio::spawn(async move { bash(&h, &curl).await })
    };
    let e = pending_entries(&queue, 1000).await.pop().unwrap();
    queue
        .decide(
            &e.id,
            Verdict::Deny(Some("use the mirror".into())),
            "api:bob",
        )
        .await
        .unwrap();
    let out = third.await.unwrap();
    assert!(
        out.contains("api:bob refused: use the mirror") && out.contains("to allow it, add"),
        "{out}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 2);
}

/// A component's own `wasi:http` requests (the real `web_fetch`) ask the
/// same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_fetch_asks_about_an_unknown_destination_too() {
    let t = Tree::new("egress-ask-web-fetch");
    let audit = t.beside("audit.jsonl");
    let (port, hits) = page_server();
    let config = format!(
        "[audit]\npath = {:?}\n\n[egress]\nask = true\nallow_private = [\"127.0.0.1/32\"]\n\n\
         [plugins.web-fetch.grants]\negress = [\"example.org\"]\n",
        audit.display().to_string()
    );
    let url = format!("http://localhost:{port}/hello");
    for allow in [true, false] {
        let approver = Asked::new(allow);
        let dir = PluginDir::new();
        dir.add("web-fetch", fixtures::PLUGIN_WEB_FETCH);
        let h = toolgate_tests::builder(&dir, &config)
            .approver(approver.clone())
            .build()
            .await
            .unwrap();
        let r = run(&h, "web_fetch", json!({ "url": url })).await;
        if allow {
            assert_eq!(r.text(), "hello from origin", "{r:?}");
        } else {
            let e = refused(&r, "PERMISSION_DENIED");
            assert!(
                e.contains(&format!(
                    "add \"localhost:{port}\" to `egress = [...]` under [plugins.web-fetch.grants]"
                )) && e.contains("test-deny refused: not from this call"),
                "{e}"
            );
        }
        assert_eq!(approver.egress.load(Ordering::SeqCst), 1);
        let (_, asked) = approver.last.lock().unwrap().clone().unwrap();
        assert_eq!(
            (asked.via.as_str(), asked.plugin.as_str()),
            ("wasi:http", "web-fetch")
        );
    }
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    let recs = egress_records(&audit);
    assert!(
        recs.iter().any(|r| r["via"] == "wasi:http"
            && r["allowed"] == true
            && r["rule"] == "approval"
            && r["approval"] == "test-allow"),
        "{recs:#?}"
    );
    assert!(
        recs.iter().any(|r| r["via"] == "wasi:http"
            && r["allowed"] == false
            && r["approval"] == "test-deny"),
        "{recs:#?}"
    );
}

/// A TCP server on the host's loopback answering each connection `pong`;
/// counts them.
fn pong_server() -> (u16, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            h.fetch_add(1, Ordering::SeqCst);
            let mut line = String::new();
            let _ = BufReader::new(&s).read_line(&mut line);
            let _ = s.write_all(b"pong");
        }
    });
    (port, hits)
}

/// The probe (`wasi:sockets`: Rust's `std::net::TcpStream` on
/// wasm32-wasip2) granted `example.org` only, with `[egress] ask = true`
/// and `global`, answered by `approver`.
async fn asking_probe(
    global: &str,
    approver: Arc<dyn toolgate::approval::Approver>,
    audit: &Path,
) -> (Toolgate, PluginDir) {
    let dir = PluginDir::new();
    dir.add("probe", fixtures::PROBE);
    let config = format!(
        "[audit]\npath = {:?}\n\n[egress]\nask = true\n{global}\n\n\
         [plugins.probe.grants]\negress = [\"example.org\"]\n",
        audit.display().to_string()
    );
    let h = toolgate_tests::builder(&dir, &config)
        .approver(approver)
        .build()
        .await
        .expect("host builds");
    assert!(h.problems().is_empty(), "{:?}", h.problems());
    (h, dir)
}

/// A component's `wasi:sockets` connect to an address no rule allows is
/// asked about (the question says it is an address, no name), and
/// connects once approved; refused, the connect fails and the record
/// names who refused and the rule to add. Both recorded `rule =
/// approval`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wasi_sockets_connects_are_asked_about() {
    let t = Tree::new("egress-ask-sockets");
    let audit = t.beside("audit.jsonl");
    let (port, hits) = pong_server();
    let addr = format!("127.0.0.1:{port}");
    for allow in [true, false] {
        let approver = Asked::new(allow);
        let (h, _d) = asking_probe(
            "allow_private = [\"127.0.0.1/32\"]",
            approver.clone(),
            &audit,
        )
        .await;
        let r = run(&h, "connect", json!({ "addr": addr })).await;
        if allow {
            assert_eq!(r.text(), "pong", "{r:?}");
        } else {
            assert!(r.is_error, "connected: {r:?}");
        }
        assert_eq!(approver.egress.load(Ordering::SeqCst), 1);
        let (prompt, asked) = approver.last.lock().unwrap().clone().unwrap();
        assert_eq!(
            (
                asked.name.as_str(),
                asked.port,
                asked.address.as_str(),
                asked.via.as_str(),
                asked.plugin.as_str()
            ),
            ("127.0.0.1", port, "127.0.0.1", "wasi:sockets", "probe")
        );
        for shown in [
            "`probe`",
            "call c1",
            &format!("127.0.0.1:{port}"),
            "an address, no name",
        ] {
            assert!(prompt.contains(shown), "{shown}: {prompt}");
        }
    }
    assert_eq!(hits.load(Ordering::SeqCst), 1, "only the approved one");
    let recs = egress_records(&audit);
    let sockets: Vec<&Value> = recs.iter().filter(|r| r["via"] == "wasi:sockets").collect();
    assert!(
        sockets.iter().any(|r| r["allowed"] == true
            && r["rule"] == "approval"
            && r["approval"] == "test-allow"
            && r["callId"] == "c1"
            && r["name"] == "127.0.0.1"),
        "{recs:#?}"
    );
    let refused = sockets
        .iter()
        .find(|r| r["allowed"] == false)
        .unwrap_or_else(|| panic!("{recs:#?}"));
    assert_eq!(refused["rule"], "approval");
    assert_eq!(refused["approval"], "test-deny");
    let reason = refused["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!(
            "add \"127.0.0.1:{port}\" to `egress = [...]` under [plugins.probe.grants]"
        )) && reason.contains("test-deny refused: not from this call"),
        "{reason}"
    );
}

/// An approver that says yes to everything still never opens an address
/// a class refuses (loopback without `allow_private`, the metadata
/// address) or a deny rule names: nobody is asked. And one call asks
/// about at most 16 addresses (`EGRESS_MAX_ASKS_PER_CALL`); the rest are
/// refused without asking, saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wasi_sockets_asks_never_open_private_addresses_and_are_bounded() {
    let t = Tree::new("egress-ask-sockets-bound");
    let audit = t.beside("audit.jsonl");
    let (port, hits) = pong_server();
    let approver = Asked::new(true);
    let (h, _d) = asking_probe("deny = [\"198.51.100.0/24\"]", approver.clone(), &audit).await;
    for addr in [
        format!("127.0.0.1:{port}"),
        format!("[::ffff:127.0.0.1]:{port}"),
        "169.254.169.254:80".to_string(),
        "10.0.0.1:80".to_string(),
        "198.51.100.7:80".to_string(),
    ] {
        let r = run(&h, "connect", json!({ "addr": addr })).await;
        assert!(r.is_error, "{addr} connected: {r:?}");
    }
    assert_eq!(approver.egress.load(Ordering::SeqCst), 0, "never asked");
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    let recs = egress_records(&audit);
    for (name, rule) in [
        ("127.0.0.1", "class:loopback"),
        ("169.254.169.254", "class:link-local"),
        ("10.0.0.1", "class:private"),
        ("198.51.100.7", "198.51.100.0/24"),
    ] {
        assert!(
            recs.iter()
                .any(|r| r["name"] == name && r["allowed"] == false && r["rule"] == rule),
            "{name}: {recs:#?}"
        );
    }
    drop(h);
    // The bound: 17 destinations in one call (ports of the loopback
    // `allow_private` names, no rule allowing them; all but the first
    // have nobody listening), 16 asked, the 17th refused unasked.
    let approver = Asked::new(true);
    let (h, _d) = asking_probe(
        "allow_private = [\"127.0.0.1/32\"]",
        approver.clone(),
        &audit,
    )
    .await;
    let addrs: Vec<String> = (0..17)
        .map(|i| format!("127.0.0.1:{}", if i == 0 { port } else { 1 + i }))
        .collect();
    let r = run(&h, "connects", json!({ "addrs": addrs })).await;
    let answers: Vec<String> = r
        .structured_content
        .clone()
        .and_then(|v| serde_json::from_value(v).ok())
        .or_else(|| serde_json::from_str(&r.text()).ok())
        .unwrap_or_else(|| panic!("{r:?}"));
    assert_eq!(answers.len(), 17, "{answers:?}");
    assert_eq!(answers[0], "connected");
    assert!(answers[16].starts_with("error"), "{answers:?}");
    assert_eq!(
        approver.egress.load(Ordering::SeqCst),
        16,
        "EGRESS_MAX_ASKS_PER_CALL"
    );
    let recs = egress_records(&audit);
    assert!(
        recs.iter().any(|r| r["via"] == "wasi:sockets"
            && r["port"] == 17
            && r["allowed"] == false
            && r["reason"]
                .as_str()
                .is_some_and(|m| m.contains("asked about 16 destinations already"))),
        "{recs:#?}"
    );
}

/// A bridged stdio MCP server (`tests/mcp/egress_server.py`, standard
/// library only) under the sandbox, granted `example.org`, with `[egress]
/// ask = true` and the approval queue: its connection to a destination
/// no rule allows (a `CONNECT` through its `HTTP_PROXY`) waits as an
/// entry asked on the server's behalf (tool `mcp:fetcher`, naming the one
/// call in flight); a grant from it lets it through and answers the next
/// call's connection with no entry; a denial reaches the server as the
/// proxy's refusal. Each connection is recorded `rule = approval` with
/// who decided.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridged_server_s_connections_are_asked_about_on_its_behalf() {
    use toolgate::approval::grant::GrantSpec;
    use toolgate::approval::queue::Verdict;
    let t = Tree::new("egress-ask-bridged");
    let audit = t.beside("audit.jsonl");
    let (port, hits) = origin("http://127.0.0.1/");
    let (other, other_hits) = origin("http://127.0.0.1/");
    let script = t.path.join("egress_server.py");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/egress_server.py"),
        &script,
    )
    .unwrap();
    let config = format!(
        "[audit]\npath = {:?}\n\n[approval]\nmode = \"queue\"\nstore = {:?}\n\n\
         [egress]\nask = true\nallow_private = [\"127.0.0.1/32\"]\n\n\
         [mcp.servers.fetcher]\ncommand = \"/usr/bin/python3\"\nargs = [{:?}]\ncwd = {:?}\n\
         [mcp.servers.fetcher.grants]\nfs = [{{ path = \".\", access = \"read-only\" }}]\n\
         egress = [\"example.org\"]\n",
        audit.display().to_string(),
        t.beside("approvals.sqlite").display().to_string(),
        script.display().to_string(),
        t.path.display().to_string(),
    );
    let dir = PluginDir::new();
    let h = toolgate_tests::builder(&dir, &config)
        .build()
        .await
        .expect("host builds");
    h.wait_for_mcp(std::time::Duration::from_secs(60)).await;
    assert!(h.problems().is_empty(), "{:?}", h.problems());
    let queue = h.approvals().expect("the queue").clone();
    let fetch = |url: String| {
        let h = h.clone();
        tokio::spawn(async move {
            let r = run(&h, "mcp__fetcher__fetch", json!({ "url": url })).await;
            let error = r
                .error
                .as_ref()
                .map(|e| e.message.clone())
                .unwrap_or_default();
            (r.is_error, format!("{} {error}", r.text()))
        })
    };
    let first = fetch(format!("http://localhost:{port}/hello"));
    let e = pending_entries(&queue, 1500).await.pop().unwrap();
    let asked = e.egress.as_ref().expect("an egress entry");
    assert_eq!(
        (
            asked.name.as_str(),
            asked.port,
            asked.address.as_str(),
            asked.via.as_str(),
            asked.plugin.as_str()
        ),
        ("localhost", port, "127.0.0.1", "connect", "mcp:fetcher")
    );
    assert_eq!(
        (e.tool.as_str(), e.asked_by.as_str()),
        ("mcp:fetcher", "egress")
    );
    assert!(
        e.reason.contains("MCP server `mcp:fetcher`")
            && e.reason
                .contains("while serving call c1 (tool `mcp__fetcher__fetch`)"),
        "{}",
        e.reason
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0, "it waits");
    let decided = queue
        .decide(
            &e.id,
            Verdict::Grant(GrantSpec {
                duration_ms: Some(600_000),
                ..GrantSpec::default()
            }),
            "api:alice",
        )
        .await
        .unwrap();
    let grant = decided.decided.unwrap().grant.unwrap();
    let (is_error, out) = first.await.unwrap();
    assert!(!is_error && out.contains("hello from origin"), "{out}");
    // The grant (tool `mcp:fetcher`, that destination and port) answers
    // the next call's connection: no new entry.
    let (is_error, out) = fetch(format!("http://localhost:{port}/hello"))
        .await
        .unwrap();
    assert!(!is_error && out.contains("hello from origin"), "{out}");
    assert!(queue.pending().await.unwrap().is_empty());
    assert_eq!(hits.load(Ordering::SeqCst), 2);
    // Another port: asked again, denied; the server gets the proxy's 403.
    let third = fetch(format!("http://localhost:{other}/hello"));
    let e2 = pending_entries(&queue, 1500).await.pop().unwrap();
    queue
        .decide(
            &e2.id,
            Verdict::Deny(Some("use the mirror".into())),
            "api:bob",
        )
        .await
        .unwrap();
    let (is_error, out) = third.await.unwrap();
    assert!(is_error, "{out}");
    assert!(
        out.contains("Tunnel connection failed: 403") && out.contains("toolgate egress"),
        "{out}"
    );
    assert_eq!(other_hits.load(Ordering::SeqCst), 0);
    // Recorded: attributed to the server, `rule = approval`, who decided.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let recs = egress_records(&audit);
    let ours: Vec<&Value> = recs
        .iter()
        .filter(|r| r["plugin"] == "mcp:fetcher")
        .collect();
    let by_entry = format!("approval {} by api:alice, grant {grant}", e.id);
    assert!(
        ours.iter().any(|r| r["allowed"] == true
            && r["rule"] == "approval"
            && r["approval"] == by_entry.as_str()),
        "{recs:#?}"
    );
    let by_grant = format!("grant {grant}: egress to `localhost:{port}` for `mcp:fetcher`");
    assert!(
        ours.iter().any(|r| r["allowed"] == true
            && r["rule"] == "approval"
            && r["approval"]
                .as_str()
                .is_some_and(|a| a.starts_with(&by_grant))),
        "{recs:#?}"
    );
    let refused = ours
        .iter()
        .find(|r| r["allowed"] == false && r["port"] == other)
        .unwrap_or_else(|| panic!("{recs:#?}"));
    assert_eq!(refused["rule"], "approval");
    assert_eq!(refused["approval"], "api:bob");
    let reason = refused["reason"].as_str().unwrap();
    assert!(
        reason.contains("api:bob refused: use the mirror")
            && reason.contains(&format!("add \"localhost:{other}\" to `egress = [...]`")),
        "{reason}"
    );
}
