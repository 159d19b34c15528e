//! `/metrics` on `serve --http` (issue 46): what a scrape says after real
//! calls, what a client without the token gets, and a real Prometheus
//! (Debian's `prometheus`) scraping it with the bearer token and answering
//! a query about the calls.
//!
//! Hostile cases: a client calling made-up tool names cannot grow the
//! series (they count under `(unknown)`); the endpoint refuses a request
//! without the token and anything but GET.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use toolgate_tests::{TempDir, http_exchange, needs, stateless_call};

use crate::oci::free_port;
use crate::serve::{HttpServer, setup};

/// A raw GET of `path`, with the `Authorization` line given; the status,
/// the headers and the body (status 0: nothing listens there).
fn get(addr: &str, path: &str, auth: &str) -> (u16, String, String) {
    get_as(addr, addr, path, auth)
}

/// [`get`] with `host` as the `Host` header.
fn get_as(addr: &str, host: &str, path: &str, auth: &str) -> (u16, String, String) {
    http_exchange(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Connection: close\r\n\r\n"),
    )
}

/// The value of the sample line `series` (exactly, labels included).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

#[test]
#[cfg_attr(
    not(has_prometheus),
    ignore = "needs Debian's prometheus: run `apt-get install -y prometheus`"
)]
fn metrics_count_every_call_and_only_for_the_token_holder() {
    let s = setup();
    let server = HttpServer::start(&s, &["--approve", "allow"]);
    let addr = server.addr();
    let token = server.token.clone().expect("a token");
    let call = |id, tool: &str, arguments| {
        stateless_call(&addr, &token, id, tool, arguments, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{tool}: {e}"))
    };
    for id in 1..=3 {
        call(id, "echo", json!({"text": "hi"}));
    }
    call(4, "crash", json!({}));
    // Made-up names: one series, however many names.
    for id in 5..=24 {
        call(id, &format!("no-such-tool-{id}"), json!({}));
    }

    let auth = server.auth();
    let (status, _, _) = get(&addr, "/metrics", "");
    assert_eq!(status, 401, "no token, no metrics");
    let (status, _, _) = get(&addr, "/metrics", "Authorization: Bearer wrong\r\n");
    assert_eq!(status, 401);
    let (status, head, text) = get(&addr, "/metrics", &auth);
    assert_eq!(status, 200, "{head}\n{text}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text"),
        "{head}"
    );
    assert_eq!(
        sample(&text, r#"toolgate_calls_total{tool="echo",outcome="ok"}"#),
        Some(3.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"toolgate_calls_total{tool="crash",outcome="DENIED"}"#
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"toolgate_calls_total{tool="(unknown)",outcome="UNKNOWN_TOOL"}"#
        ),
        Some(20.0),
        "{text}"
    );
    assert!(
        !text.contains("no-such-tool"),
        "a made-up name is no label: {text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"toolgate_denials_total{tool="crash",stage="guard",decided_by="guard"}"#
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"toolgate_call_duration_seconds_count{tool="echo"}"#
        ),
        Some(3.0),
        "{text}"
    );
    assert!(
        sample(&text, "toolgate_generation").is_some_and(|g| g >= 1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "toolgate_approvals_pending"),
        Some(0.0),
        "{text}"
    );
    assert!(text.contains("toolgate_egress_refused_total"), "{text}");
    assert!(text.trim_end().ends_with("# EOF"), "{text}");

    // A Host that is not this server's (DNS rebinding): refused.
    let (status, _, _) = get_as(&addr, "evil.example:80", "/metrics", &auth);
    assert_eq!(status, 403, "a Host not this server's");

    // Only GET.
    let post = format!(
        "POST /metrics HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    assert_eq!(server.raw_as_is(&post), 405);

    // A real Prometheus scrapes it with the token and answers a query.
    needs::expect(
        "prometheus",
        Command::new("prometheus")
            .arg("--version")
            .output()
            .map(|_| ())
            .map_err(|e| format!("prometheus: {e}; run `apt-get install -y prometheus`")),
    );
    let dir = TempDir::new("prometheus");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, &token).unwrap();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: toolgate\n    \
             metrics_path: /metrics\n    authorization:\n      credentials_file: {}\n    \
             static_configs:\n      - targets: ['{addr}']\n",
            token_file.display()
        ),
    )
    .unwrap();
    let port = free_port();
    let mut prometheus = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus");
    let query = "/api/v1/query?query=toolgate_calls_total%7Btool%3D%22echo%22%7D";
    let started = Instant::now();
    let answer = loop {
        let (status, _, body) = get(&format!("127.0.0.1:{port}"), query, "");
        if status == 200 && body.contains(r#""value":["#) {
            break body;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let (_, _, targets) = get(&format!("127.0.0.1:{port}"), "/api/v1/targets", "");
            let _ = prometheus.kill();
            panic!(
                "Prometheus never had the calls (last answer {status}: {body}); its targets: {targets}"
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    let _ = prometheus.kill();
    let _ = prometheus.wait();
    assert!(
        answer.contains(r#""outcome":"ok""#) && answer.contains(r#""3"]"#),
        "{answer}"
    );
}
