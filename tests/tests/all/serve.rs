//! `toolgate serve`, the real binary, driven by a real third-party MCP
//! client (the official Python SDK, installed from PyPI into a venv under
//! the target directory by `tests/mcp/setup-venv.sh`) over stdio and over
//! HTTP, and by raw frames for the protocol-robustness cases.
//!
//! The binary is the one `cargo test` builds for the `toolgate` package
//! (`target/<profile>/toolgate`); `cargo test -p toolgate-tests` alone does
//! not rebuild it, so build it first (`cargo build -p toolgate`).
//!
//! The build of this crate installs the venv (`build.rs`); where it cannot,
//! the tests that need it are ignored with the reason (`has_mcp_client`),
//! and fail under CI.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_tests::{PluginDir, TempDir, fixtures, needs, toolgate_bin};

/// The venv's python with the MCP SDK. The build installed it (or found it
/// missing and ignored the tests that call this: `has_mcp_client`); gone
/// now, the test fails.
pub(crate) fn python() -> PathBuf {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found = PYTHON.get_or_init(|| {
        let venv = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mcp-venv");
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/setup-venv.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg("--check")
            .arg(&venv)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        if !out.status.success() {
            return Err(format!(
                "{}; run `bash {} {}`",
                String::from_utf8_lossy(&out.stderr).trim(),
                script.display(),
                venv.display()
            ));
        }
        Ok(venv.join("bin/python"))
    });
    needs::expect("mcp_client", found.clone())
}

/// A working directory and a plugin directory for one server: the `tools`
/// fixture, a guard that denies `crash`, a hook that asks about every call;
/// plus the built-ins (the `bash` tool among them).
struct Setup {
    work: TempDir,
    plugins: PluginDir,
    config: PathBuf,
}

fn setup() -> Setup {
    let work = TempDir::new("serve-work");
    let plugins = PluginDir::new();
    plugins
        .add("tools", fixtures::TOOLS)
        .add("guard", fixtures::GUARD)
        .add("ask", fixtures::PRE_HOOK);
    let config = work.path().join("toolgate.toml");
    std::fs::write(
        &config,
        "[plugins.guard]\nvars = { BEHAVIOR = \"deny-tool:crash\", NAME = \"guard\" }\n\
         [plugins.ask]\nvars = { BEHAVIOR = \"ask\", NAME = \"ask\" }\n",
    )
    .unwrap();
    Setup {
        work,
        plugins,
        config,
    }
}

impl Setup {
    /// The server's command line (everything after the binary).
    fn args(&self, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = vec![
            "--plugins".into(),
            self.plugins.path().display().to_string(),
            "--config".into(),
            self.config.display().to_string(),
            "serve".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }

    fn command(&self, extra: &[&str]) -> Command {
        let mut cmd = Command::new(toolgate_bin());
        cmd.args(self.args(extra))
            .current_dir(self.work.path())
            .env("TOOLGATE_CACHE_DIR", cache_dir())
            .env("RUST_LOG", "warn");
        cmd
    }
}

fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve-compile-cache")
}

/// Processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if text.contains(marker) && !text.contains("client.py") {
                found.push(format!("{}: {text}", entry.file_name().to_string_lossy()));
            }
        }
    }
    found
}

/// Run the Python client scenario; its JSON report.
fn run_client(python: &Path, target: &[String], mode: &str, marker: &str) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/client.py");
    let out = Command::new(python)
        .arg(&script)
        .args(["--mode", mode, "--marker", marker])
        .args(target)
        .output()
        .expect("run the MCP client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the MCP client failed ({}):\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("the client's JSON report")
}

fn error_of(result: &Value) -> &Value {
    &result["_meta"]["toolgate/error"]
}

/// Everything the client saw, checked.
fn check_report(r: &Value, mode: &str) {
    assert_eq!(r["server"], "toolgate", "{r}");
    let expected = if mode == "legacy" {
        "2025-11-25"
    } else {
        "2026-07-28"
    };
    assert_eq!(r["protocol"], expected, "negotiated revision");

    // tools/list: the projection, annotations, output schemas.
    let echo = &r["tools"]["echo"];
    assert_eq!(echo["inputSchema"]["properties"]["text"]["type"], "string");
    assert_eq!(echo["outputSchema"]["required"], json!(["text"]));
    assert!(echo.get("timeoutMs").is_none() && echo.get("_meta").is_none());
    let bash = &r["tools"]["bash"];
    assert_eq!(bash["annotations"]["destructiveHint"], true, "{bash}");
    assert!(r["tools"]["wait_cancel"].get("outputSchema").is_none());

    // A call: content, structuredContent (echo has an output schema).
    assert_eq!(r["echo"]["isError"], false, "{}", r["echo"]);
    assert_eq!(r["echo"]["content"][0]["text"], "hi");
    assert_eq!(r["echo"]["structuredContent"], json!({"text": "hi"}));
    let progress = r["progress"].as_array().unwrap();
    assert!(
        progress.len() >= 2,
        "progress at start and end: {progress:?}"
    );
    assert_eq!(progress.last().unwrap()[0], 1.0);

    // Invalid arguments: INVALID_ARGS with the failing paths.
    let invalid = &r["invalid"];
    assert_eq!(invalid["isError"], true);
    assert_eq!(error_of(invalid)["code"], "INVALID_ARGS", "{invalid}");
    assert_eq!(error_of(invalid)["stage"], "materialize");
    let paths: Vec<&str> = error_of(invalid)["details"]["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["path"].as_str())
        .collect();
    assert!(
        paths.contains(&"/text") && paths.contains(&"/extra"),
        "{paths:?}"
    );

    // A guard's denial, after the client approved the hook's ask.
    let denied = &r["denied"];
    assert_eq!(denied["isError"], true);
    assert_eq!(error_of(denied)["code"], "DENIED", "{denied}");
    assert_eq!(error_of(denied)["stage"], "guard");
    assert_eq!(error_of(denied)["decidedBy"], "guard");

    // `ask` through elicitation: accepted, then declined.
    assert_eq!(r["accepted"]["isError"], false, "{}", r["accepted"]);
    assert_eq!(r["accepted"]["structuredContent"], json!({"n": 1}));
    let declined = &r["declined"];
    assert_eq!(error_of(declined)["code"], "DENIED", "{declined}");
    assert_eq!(error_of(declined)["stage"], "approval");
    assert_eq!(error_of(declined)["decidedBy"], "mcp-elicitation");
    let questions = r["questions"].as_array().unwrap();
    assert!(
        questions
            .iter()
            .any(|q| q.as_str().unwrap().contains("ask asks about defer")),
        "{questions:?}"
    );

    // Cancelled long calls; the session goes on.
    assert_eq!(r["cancel_wasm"]["cancelled"], true);
    assert_eq!(r["cancel_bash"]["cancelled"], true);
    assert_eq!(r["after"]["isError"], false, "{}", r["after"]);

    // Logging at the level the client asked for.
    let logs = r["logs"].as_array().unwrap();
    assert!(
        logs.iter()
            .any(|l| l["data"]["event"] == "call finished" && l["level"] == "info"),
        "{logs:?}"
    );
    assert!(
        !logs.iter().any(|l| l["level"] == "debug"),
        "no debug below the level asked: {logs:?}"
    );
}

/// Wait (a little) for processes with `marker` to be gone.
fn assert_no_orphans(marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = processes_with(marker);
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "processes outlived their cancelled call: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn marker(n: u32) -> String {
    format!("{}.{}{n}", 30 + n, std::process::id() % 1000)
}

#[test]
#[cfg_attr(
    not(has_mcp_client),
    ignore = "needs the MCP Python SDK from PyPI: run `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
fn python_sdk_over_stdio() {
    let python = python();
    let s = setup();
    for (i, mode) in ["legacy", "auto"].into_iter().enumerate() {
        let marker = marker(i as u32);
        let mut target = vec![
            "--cwd".to_string(),
            s.work.path().display().to_string(),
            "--env".to_string(),
            format!("TOOLGATE_CACHE_DIR={}", cache_dir().display()),
            "--stdio".to_string(),
            toolgate_bin().display().to_string(),
        ];
        target.extend(s.args(&["--approve", "deny"]));
        let report = run_client(&python, &target, mode, &marker);
        check_report(&report, mode);
        assert_no_orphans(&format!("sleep {marker}"));
    }
}

/// A server on HTTP, killed when dropped; its URL.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start(s: &Setup, extra: &[&str]) -> HttpServer {
        let mut args = vec!["--http", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        if !args.contains(&"--approve") {
            args.extend(["--approve", "deny"]);
        }
        let mut child = s
            .command(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the server");
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let url = loop {
            line.clear();
            if stderr.read_line(&mut line).unwrap_or(0) == 0 {
                let _ = child.kill();
                panic!("the server exited before listening");
            }
            if let Some(url) = line.trim().strip_prefix("toolgate: serving MCP at ") {
                break url.to_string();
            }
        };
        // Keep draining stderr so the server never blocks on it.
        std::thread::spawn(move || {
            let mut sink = String::new();
            let _ = stderr.read_to_string(&mut sink);
        });
        HttpServer { child, url }
    }

    fn addr(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_string()
    }

    /// A raw HTTP request; the status code.
    fn raw(&self, head: &str) -> u16 {
        let mut stream = TcpStream::connect(self.addr()).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        // A server may answer (413) before it has read all of a request.
        let _ = stream.write_all(head.as_bytes());
        let mut reply = String::new();
        let _ = BufReader::new(stream).read_line(&mut reply);
        reply
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

fn post(host: &str, extra: &str, body: &str) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\n{extra}Content-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
}

#[test]
#[cfg_attr(
    not(has_mcp_client),
    ignore = "needs the MCP Python SDK from PyPI: run `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
fn python_sdk_over_http() {
    let python = python();
    let s = setup();
    let server = HttpServer::start(&s, &[]);
    for (i, mode) in ["legacy", "auto"].into_iter().enumerate() {
        let marker = marker(10 + i as u32);
        let report = run_client(
            &python,
            &["--http".to_string(), server.url.clone()],
            mode,
            &marker,
        );
        check_report(&report, mode);
        assert_no_orphans(&format!("sleep {marker}"));
    }
}

#[test]
fn http_refuses_forbidden_host_and_origin_and_unauthenticated_binds() {
    let s = setup();
    let server = HttpServer::start(&s, &[]);
    let addr = server.addr();
    // A client that starts a request and stalls, one that sends garbage and
    // half-closes: the server goes on serving the others.
    let mut stalled = TcpStream::connect(&addr).unwrap();
    stalled
        .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
        .unwrap();
    let mut garbage = TcpStream::connect(&addr).unwrap();
    garbage
        .write_all(b"\x00\x01 not http at all\r\n\r\n")
        .unwrap();
    garbage.shutdown(std::net::Shutdown::Write).unwrap();
    // The right Host, no Origin: served.
    assert_eq!(server.raw(&post(&addr, "", INIT)), 200);
    let mut reply = Vec::new();
    garbage
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let _ = garbage.read_to_end(&mut reply);
    assert!(
        reply.is_empty() || String::from_utf8_lossy(&reply).starts_with("HTTP/1.1 400"),
        "garbage gets a 400 or a close: {}",
        String::from_utf8_lossy(&reply)
    );
    drop(stalled);
    // DNS rebinding: a foreign Host, or a browser Origin not allowed.
    assert_eq!(server.raw(&post("evil.example", "", INIT)), 403);
    assert_eq!(
        server.raw(&post(&addr, "Origin: http://evil.example\r\n", INIT)),
        403
    );
    assert_eq!(
        server.raw(&post(&addr, &format!("Origin: http://{addr}\r\n"), INIT)),
        403,
        "no Origin is allowed unless --allow-origin says so"
    );
    // Another path.
    let other = post(&addr, "", INIT).replace("POST /mcp", "POST /other");
    assert_eq!(server.raw(&other), 404);
    // Sessions beyond --max-sessions: 503 (the two opened stay).
    let few = HttpServer::start(&s, &["--max-sessions", "2"]);
    let f = few.addr();
    assert_eq!(few.raw(&post(&f, "", INIT)), 200);
    assert_eq!(few.raw(&post(&f, "", INIT)), 200);
    assert_eq!(few.raw(&post(&f, "", INIT)), 503);
    // A body over --max-message-bytes: 413, and the server goes on.
    let small = HttpServer::start(&s, &["--max-message-bytes", "65536"]);
    let a = small.addr();
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(70_000)
    );
    assert_eq!(small.raw(&post(&a, "", &big)), 413);
    assert_eq!(small.raw(&post(&a, "", INIT)), 200);
    // An allowed Origin.
    let allowed = HttpServer::start(&s, &["--allow-origin", "http://localhost:5173"]);
    let addr2 = allowed.addr();
    assert_eq!(
        allowed.raw(&post(&addr2, "Origin: http://localhost:5173\r\n", INIT)),
        200
    );

    // A non-loopback bind without a token is refused before listening.
    let out = s
        .command(&["--http", "0.0.0.0:0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("without a bearer token") && err.contains("--token-file"),
        "{err}"
    );

    // With a token: requests without it are 401, with it served.
    let token_file = s.work.path().join("token");
    std::fs::write(&token_file, "0123456789abcdef-token\n").unwrap();
    let loose = std::process::Command::new("chmod")
        .args(["644", &token_file.display().to_string()])
        .status()
        .unwrap();
    assert!(loose.success());
    let out = s
        .command(&[
            "--http",
            "127.0.0.1:0",
            "--token-file",
            &token_file.display().to_string(),
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("chmod 600"),
        "a token readable by others is refused"
    );
    std::fs::set_permissions(
        &token_file,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let tf = token_file.display().to_string();
    let secured = HttpServer::start(&s, &["--token-file", &tf]);
    let a = secured.addr();
    assert_eq!(secured.raw(&post(&a, "", INIT)), 401);
    assert_eq!(
        secured.raw(&post(
            &a,
            "Authorization: Bearer wrong-token-wrong\r\n",
            INIT
        )),
        401
    );
    assert_eq!(
        secured.raw(&post(
            &a,
            "Authorization: Bearer 0123456789abcdef-token\r\n",
            INIT
        )),
        200
    );
}

/// Send a raw request; the response head (status line and headers), with
/// the stream left open for the body.
fn open_request(addr: &str, head: &str) -> (String, BufReader<TcpStream>) {
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    (&stream).write_all(head.as_bytes()).unwrap();
    let mut reader = BufReader::new(stream);
    let mut response = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        response.push_str(&line);
    }
    (response, reader)
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[test]
fn http_ending_a_session_cancels_its_calls() {
    let s = setup();
    let server = HttpServer::start(&s, &["--approve", "allow"]);
    let addr = server.addr();
    let (head, _) = open_request(
        &addr,
        &post(&addr, "", INIT).replace("Connection: close\r\n", ""),
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let session = header(&head, "mcp-session-id")
        .expect("a session id")
        .to_string();
    let with = format!("Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-06-18\r\n");
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let (head, _) = open_request(&addr, &post(&addr, &with, initialized));
    assert!(head.starts_with("HTTP/1.1 202"), "{head}");
    // A long call, left running on its stream.
    let marker = marker(30);
    let long = call(2, "bash", json!({"command": format!("sleep {marker}")}));
    let (head, _stream) = open_request(&addr, &post(&addr, &with, &long));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let started = Instant::now();
    while processes_with(&format!("sleep {marker}")).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the call never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The client ends its session: the call stops, its processes with it.
    let delete = format!(
        "DELETE /mcp HTTP/1.1\r\nHost: {addr}\r\n{with}Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    let ended = Instant::now();
    let status = server.raw(&delete);
    assert!(
        matches!(status, 200 | 202 | 204),
        "DELETE answered {status}"
    );
    assert_no_orphans(&format!("sleep {marker}"));
    // At once, not after the SDK's drain of in-flight requests (5 s).
    assert!(
        ended.elapsed() < Duration::from_secs(2),
        "the call outlived its session by {:?}",
        ended.elapsed()
    );
}

/// A stdio server driven by raw frames.
struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Raw {
    fn start(s: &Setup, extra: &[&str]) -> Raw {
        let mut args = extra.to_vec();
        if !args.contains(&"--approve") {
            args.extend(["--approve", "deny"]);
        }
        let mut child = s
            .command(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the server");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Raw {
            child,
            stdin,
            stdout,
        }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn read(&mut self) -> Value {
        let mut line = String::new();
        let n = self.stdout.read_line(&mut line).expect("read a frame");
        assert!(n > 0, "the server closed its output");
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carries a non-JSON line ({e}): {line}"))
    }

    /// Read frames until the answer to `id`.
    fn answer(&mut self, id: i64) -> Value {
        loop {
            let v = self.read();
            if v["id"] == id {
                return v;
            }
        }
    }

    fn handshake(&mut self) {
        self.send(INIT);
        let init = self.answer(1);
        assert_eq!(init["result"]["serverInfo"]["name"], "toolgate", "{init}");
        // An older revision, asked for, is what the session speaks.
        assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
        self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn call(id: i64, tool: &str, args: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}})
        .to_string()
}

#[test]
fn stdio_answers_malformed_unknown_and_oversized_frames() {
    let s = setup();
    let mut raw = Raw::start(&s, &["--max-message-bytes", "65536"]);
    raw.handshake();
    raw.send("garbage{");
    let v = raw.read();
    assert_eq!(v["error"]["code"], -32700, "{v}");
    assert_eq!(v["id"], Value::Null);
    raw.send(r#"{"id":5,"what":"no method"}"#);
    let v = raw.read();
    assert_eq!(v["error"]["code"], -32600, "{v}");
    assert_eq!(v["id"], 5);
    raw.send(r#"{"jsonrpc":"2.0","id":6,"method":"no/such/method"}"#);
    assert_eq!(raw.answer(6)["error"]["code"], -32601);
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/whatever"}"#);
    // Oversized: discarded as it is read, answered, the session goes on.
    let big = call(7, "echo", json!({"text": "x".repeat(200_000)}));
    raw.send(&big);
    let v = raw.read();
    assert_eq!(v["error"]["code"], -32600, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("more than 65536 bytes")
    );
    // No client with elicitation: the configured approver (deny) answers
    // the hook's ask.
    raw.send(&call(8, "echo", json!({"text": "ok"})));
    let v = raw.answer(8);
    assert_eq!(v["result"]["isError"], true, "{v}");
    let error = &v["result"]["_meta"]["toolgate/error"];
    assert_eq!(error["code"], "DENIED");
    assert_eq!(error["stage"], "approval");
    assert_eq!(error["decidedBy"], "deny-all");
    raw.send(r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#);
    assert!(raw.answer(9).get("result").is_some());
}

#[test]
fn stdio_bounds_a_flood_and_a_client_that_never_reads() {
    let s = setup();
    let mut raw = Raw::start(&s, &["--max-queued-calls", "4", "--approve", "allow"]);
    raw.handshake();
    // A flood of slow calls: at most 4 wait or run; the rest are refused
    // at once with a JSON-RPC error, and every request gets one answer.
    let n = 300;
    let mut batch = String::new();
    for id in 100..100 + n {
        batch.push_str(&call(id, "sleep", json!({"ms": 100})));
        batch.push('\n');
    }
    raw.stdin
        .as_mut()
        .unwrap()
        .write_all(batch.as_bytes())
        .unwrap();
    let mut results = 0;
    let mut busy = 0;
    let mut seen = std::collections::HashSet::new();
    while seen.len() < n as usize {
        let v = raw.read();
        let id = v["id"].as_i64().expect("an answer with an id");
        assert!(seen.insert(id), "answered twice: {id}");
        if v.get("result").is_some() {
            results += 1;
        } else {
            assert_eq!(v["error"]["code"], -32000, "{v}");
            assert!(
                v["error"]["message"].as_str().unwrap().contains("busy")
                    || v["error"]["message"].as_str().unwrap().contains("too many")
            );
            busy += 1;
        }
    }
    assert!(
        results >= 4 && busy > 0,
        "results {results}, refused {busy}"
    );

    // A client that never reads: it writes requests and does not read the
    // answers. The server stops reading once its bounded output is full;
    // its memory stays bounded; everything is answered once it reads.
    let before = raw.rss_kib();
    let mut stdin = raw.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let mut written = 0u64;
        for i in 0..50_000u64 {
            let frame = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}}\n",
                10_000 + i
            );
            if stdin.write_all(frame.as_bytes()).is_err() {
                break;
            }
            written += 1;
        }
        (stdin, written)
    });
    std::thread::sleep(Duration::from_secs(2));
    let during = raw.rss_kib();
    assert!(
        during < before + 64 * 1024,
        "memory grew from {before} KiB to {during} KiB while the client did not read"
    );
    assert!(
        !writer.is_finished(),
        "the server kept reading a client that does not read"
    );
    let mut pongs = 0;
    while pongs < 50_000 {
        let v = raw.read();
        if v["id"].as_i64().is_some_and(|id| id >= 10_000) {
            pongs += 1;
        }
    }
    let (stdin, written) = writer.join().unwrap();
    assert_eq!(written, 50_000);
    raw.stdin = Some(stdin);
    raw.send(r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#);
    assert!(raw.answer(3).get("result").is_some());
}

#[test]
fn stdio_half_closed_input_answers_and_exits() {
    let s = setup();
    let mut raw = Raw::start(&s, &["--approve", "allow"]);
    raw.handshake();
    // A long call, then the client closes its input (MCP's shutdown): the
    // call is cancelled at once, answered, and the server exits cleanly.
    let marker = marker(20);
    raw.send(&call(
        2,
        "bash",
        json!({"command": format!("sleep {marker}")}),
    ));
    std::thread::sleep(Duration::from_millis(500));
    drop(raw.stdin.take());
    let started = Instant::now();
    let v = raw.answer(2);
    assert_eq!(
        v["result"]["_meta"]["toolgate/error"]["code"], "ABORTED",
        "{v}"
    );
    let status = raw.child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_no_orphans(&format!("sleep {marker}"));
}

/// A reload that changes the tools a session sees sends
/// `notifications/tools/list_changed`; an update refused by a reload is a
/// log message (the previous version keeps serving).
#[test]
fn serve_tells_its_client_when_a_reload_changes_the_tools() {
    let s = setup();
    let mut raw = Raw::start(&s, &["--approve", "allow", "--watch-debounce-ms", "20"]);
    // Never hang: a server that stays silent is killed, and the read fails.
    let pid = raw.child.id();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(90));
        let _ = Command::new("kill").arg(pid.to_string()).status();
    });
    raw.send(INIT);
    let init = raw.answer(1);
    assert_eq!(
        init["result"]["capabilities"]["tools"]["listChanged"], true,
        "{init}"
    );
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    raw.send(
        r#"{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"warning"}}"#,
    );
    raw.answer(2);

    // A new plugin arrives the way deploy tools write it.
    let dir = s.plugins.path();
    let put = |bytes: &[u8]| {
        let tmp = dir.join(".v.wasm.part");
        std::fs::write(&tmp, bytes).unwrap();
        std::fs::rename(&tmp, dir.join("v.wasm")).unwrap();
    };
    put(&std::fs::read(fixtures::VERSIONED_1).unwrap());
    loop {
        let v = raw.read();
        if v["method"] == "notifications/tools/list_changed" {
            break;
        }
    }
    raw.send(r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#);
    let list = raw.answer(3);
    let tools = list["result"]["tools"].as_array().unwrap();
    assert!(tools.iter().any(|t| t["name"] == "which_version"), "{list}");

    // A broken update: refused, reported to the client, version 1 serves on.
    put(b"\0asm but not a component");
    let refusal = loop {
        let v = raw.read();
        if v["method"] == "notifications/message"
            && v["params"]["data"]["event"] == "update refused"
        {
            break v;
        }
        assert_ne!(v["method"], "notifications/tools/list_changed", "{v}");
    };
    assert_eq!(refusal["params"]["level"], "warning", "{refusal}");
    assert_eq!(refusal["params"]["data"]["plugin"], "v", "{refusal}");
    raw.send(&call(4, "which_version", json!({"n": 5})));
    let v = raw.answer(4);
    assert_eq!(
        v["result"]["structuredContent"],
        json!({"version": 1, "n": 5}),
        "{v}"
    );

    // Removed: the list changes again.
    std::fs::remove_file(dir.join("v.wasm")).unwrap();
    loop {
        let v = raw.read();
        if v["method"] == "notifications/tools/list_changed" {
            break;
        }
    }
}
