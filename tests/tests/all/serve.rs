//! `toolgate serve`, the real binary, driven by a real third-party MCP
//! client (the official Python SDK, installed from PyPI into a venv under
//! the target directory by `tests/mcp/setup-venv.sh`) over stdio and over
//! HTTP, and by raw frames for the protocol-robustness cases.
//!
//! The binary is the one `cargo test` builds for the `toolgate` package
//! (`target/<profile>/toolgate`); `cargo test -p toolgate-tests` alone does
//! not rebuild it, so build it first (`cargo build -p toolgate-cli`).
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
use toolgate_tests::{PluginDir, TempDir, fixtures, needs, share_cache_key, toolgate_bin};

/// The venv's python with the MCP SDK. The build installed it (or found it
/// missing and ignored the tests that call this: `has_mcp_client`); gone
/// now, the test fails.
pub(crate) fn python() -> PathBuf {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found = PYTHON.get_or_init(|| {
        let venv = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mcp-venv");
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/setup-venv.sh");
        toolgate_tests::installed(&script, &venv)?;
        Ok(venv.join("bin/python"))
    });
    needs::expect("mcp_client", found.clone())
}

/// A working directory and a plugin directory for one server: the `tools`
/// fixture, a guard that denies `crash`, a hook that asks about every call;
/// plus the built-ins (the `bash` tool among them).
pub(crate) struct Setup {
    work: TempDir,
    plugins: PluginDir,
    config: PathBuf,
}

pub(crate) fn setup() -> Setup {
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
    let s = Setup {
        work,
        plugins,
        config,
    };
    // Every server of these tests shares the compile cache: so must its key.
    share_cache_key(&cache_dir(), &s.state_dir().join("toolgate"));
    warm_cache(&s);
    s
}

/// The fixtures compiled into the shared cache before the first server
/// starts: `serve` loads plugin files that are not in the cache after it
/// answers (see `lifecycle`, "Start"), and these tests expect every tool
/// listed at once. Same fixtures in every `setup`: once per test binary.
fn warm_cache(s: &Setup) {
    static WARM: OnceLock<()> = OnceLock::new();
    WARM.get_or_init(|| {
        // `plugins` instead of `serve`: loads everything, prints, exits.
        let args: Vec<String> = s
            .args(&[])
            .into_iter()
            .filter(|a| a != "serve" && a != "--structured-content")
            .collect();
        let out = Command::new(toolgate_bin())
            .args(&args)
            .arg("plugins")
            .current_dir(s.work.path())
            .env("TOOLGATE_CACHE_DIR", cache_dir())
            .env("XDG_STATE_HOME", s.state_dir())
            .env_remove("TOOLGATE_STATE_DIR")
            .env("RUST_LOG", "warn")
            .output()
            .expect("run toolgate plugins");
        assert!(
            out.status.success(),
            "warming the compile cache failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
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
            // These tests check tools' values (`structuredContent`); the
            // default (none) is checked by the harness tests.
            "--structured-content".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }

    /// `toolgate` with these plugins and this configuration, running
    /// `command` (one other than `serve`: `replay`, `plugins`, …) in the
    /// same environment as the server.
    pub(crate) fn other_command(&self, command: &[&str]) -> Command {
        let mut args = self.args(&[]);
        // The global options only (`--plugins P --config C`).
        args.truncate(4);
        args.extend(command.iter().map(|s| s.to_string()));
        self.in_environment(args)
    }

    fn command(&self, extra: &[&str]) -> Command {
        self.in_environment(self.args(extra))
    }

    fn in_environment(&self, args: Vec<String>) -> Command {
        let mut cmd = Command::new(toolgate_bin());
        cmd.args(args)
            .current_dir(self.work.path())
            .env("TOOLGATE_CACHE_DIR", cache_dir())
            // Where `serve --http` makes its token (never the real home;
            // not the caller's `TOOLGATE_STATE_DIR` either, which would
            // win over this).
            .env("XDG_STATE_HOME", self.state_dir())
            .env_remove("TOOLGATE_STATE_DIR")
            .env("RUST_LOG", "warn");
        cmd
    }

    fn state_dir(&self) -> PathBuf {
        self.work.path().join("state")
    }

    /// Its working directory (where the configuration is).
    pub(crate) fn work(&self) -> &Path {
        self.work.path()
    }

    /// Add plugin `name` (a built component) to its plugin directory.
    pub(crate) fn add_plugin(&self, name: &str, wasm: &str) {
        self.plugins.add(name, wasm);
    }

    /// Add `text` to its configuration.
    pub(crate) fn configure(&self, text: &str) {
        let mut config = std::fs::read_to_string(&self.config).unwrap();
        config.push_str(text);
        std::fs::write(&self.config, config).unwrap();
    }

    /// The token file `serve --http` makes when given none.
    fn default_token_file(&self) -> PathBuf {
        self.state_dir().join("toolgate/serve-token")
    }
}

fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve-compile-cache")
}

/// Processes whose command line contains `marker`, but for the MCP client
/// (whose arguments name it).
fn servers_with(marker: &str) -> Vec<toolgate_tests::Process> {
    let mut found = toolgate_tests::processes_with(marker);
    found.retain(|p| !p.cmdline.contains("client.py"));
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
    assert_eq!(
        r["protocol"], expected,
        "negotiated revision (connected in {} s)",
        r["connect_s"]
    );

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
    // Progress when the call starts (each attempt: a stateless call asked
    // about is called again); none at its end, the result being the end.
    let progress = r["progress"].as_array().unwrap();
    assert!(
        !progress.is_empty() && progress.iter().all(|p| *p == json!([0.0, 1.0, "started"])),
        "progress at the start only: {progress:?}"
    );

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
        let left = servers_with(marker);
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
            // Its audit record and state in the test's directory, never
            // the real home's (shared by every server a run starts).
            "--env".to_string(),
            format!("XDG_STATE_HOME={}", s.state_dir().display()),
            "--stdio".to_string(),
            toolgate_bin().display().to_string(),
        ];
        // The client answers the hooks' `ask` (elicitation).
        target.extend(s.args(&["--approve", "client"]));
        let report = run_client(&python, &target, mode, &marker);
        check_report(&report, mode);
        assert_no_orphans(&format!("sleep {marker}"));
    }
}

/// A server on HTTP, killed when dropped; its URL and its bearer token
/// (none with `--no-auth`), read from the token file it names.
pub(crate) struct HttpServer {
    child: Child,
    url: String,
    pub(crate) token: Option<String>,
    /// The line after the address: where the token is, or the warning.
    auth_line: String,
    /// Its stderr after those lines, so far.
    log: std::sync::Arc<std::sync::Mutex<String>>,
}

impl HttpServer {
    pub(crate) fn start(s: &Setup, extra: &[&str]) -> HttpServer {
        Self::start_env(s, extra, &[])
    }

    /// [`HttpServer::start`] at `addr` (a server whose configuration
    /// names its own address: `[auth] resource`).
    pub(crate) fn start_on(s: &Setup, addr: &str, extra: &[&str]) -> HttpServer {
        Self::start_at(s, addr, extra, &[])
    }

    /// [`HttpServer::start`] with more environment (`RUST_LOG`).
    fn start_env(s: &Setup, extra: &[&str], env: &[(&str, &str)]) -> HttpServer {
        Self::start_at(s, "127.0.0.1:0", extra, env)
    }

    fn start_at(s: &Setup, addr: &str, extra: &[&str], env: &[(&str, &str)]) -> HttpServer {
        let mut args = vec!["--http", addr];
        args.extend_from_slice(extra);
        if !args.contains(&"--approve") {
            args.extend(["--approve", "client"]);
        }
        let mut child = s
            .command(&args)
            .envs(env.iter().copied())
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
        let mut auth_line = String::new();
        stderr.read_line(&mut auth_line).unwrap();
        let token = auth_line
            .trim()
            .split_once("the token is in ")
            .map(|(_, path)| path.trim_end_matches(" (made now)"))
            .map(|path| {
                std::fs::read_to_string(path)
                    .unwrap_or_else(|e| panic!("read the token file {path}: {e}"))
                    .trim()
                    .to_string()
            });
        // Keep draining stderr so the server never blocks on it; kept.
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let kept = log.clone();
        std::thread::spawn(move || {
            let mut line = String::new();
            while stderr.read_line(&mut line).unwrap_or(0) > 0 {
                kept.lock().unwrap().push_str(&line);
                line.clear();
            }
        });
        HttpServer {
            child,
            url,
            token,
            auth_line,
            log,
        }
    }

    /// What it wrote to stderr after its first lines, so far.
    pub(crate) fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// The `Authorization` header line of a legitimate client.
    pub(crate) fn auth(&self) -> String {
        self.token
            .as_ref()
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default()
    }

    /// The Python client's arguments to reach this server.
    fn client_target(&self) -> Vec<String> {
        let mut target = vec!["--http".to_string(), self.url.clone()];
        if let Some(token) = &self.token {
            target.extend(["--token".to_string(), token.clone()]);
        }
        target
    }

    pub(crate) fn addr(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_string()
    }

    /// A raw HTTP request of a legitimate client (the token added after the
    /// request line); the status code.
    fn raw(&self, head: &str) -> u16 {
        let head = match head.split_once("\r\n") {
            Some((line, rest)) if !head.contains("Authorization:") => {
                format!("{line}\r\n{}{rest}", self.auth())
            }
            _ => head.to_string(),
        };
        self.raw_as_is(&head)
    }

    /// A raw HTTP request exactly as given; the status code.
    pub(crate) fn raw_as_is(&self, head: &str) -> u16 {
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
        let report = run_client(&python, &server.client_target(), mode, &marker);
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
        server.raw(&post(&addr, "Origin: http://other.example:8080\r\n", INIT)),
        403,
        "no foreign Origin is allowed unless --allow-origin says so"
    );
    // Another path.
    let other = post(&addr, "", INIT).replace("POST /mcp", "POST /other");
    assert_eq!(server.raw(&other), 404);
    // Sessions beyond --max-sessions: 503 (the two opened stay).
    let few = HttpServer::start(
        &s,
        &["--max-sessions", "2", "--max-sessions-per-client", "2"],
    );
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
        .command(&["--http", "0.0.0.0:0", "--no-auth"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("without a bearer token") && err.contains("--no-auth"),
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
    assert_eq!(secured.token.as_deref(), Some("0123456789abcdef-token"));
    let a = secured.addr();
    assert_eq!(secured.raw_as_is(&post(&a, "", INIT)), 401);
    assert_eq!(
        secured.raw_as_is(&post(
            &a,
            "Authorization: Bearer wrong-token-wrong\r\n",
            INIT
        )),
        401
    );
    assert_eq!(
        secured.raw_as_is(&post(
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
        &post(&addr, &server.auth(), INIT).replace("Connection: close\r\n", ""),
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let session = header(&head, "mcp-session-id")
        .expect("a session id")
        .to_string();
    let with = format!(
        "{}Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-06-18\r\n",
        server.auth()
    );
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let (head, _) = open_request(&addr, &post(&addr, &with, initialized));
    assert!(head.starts_with("HTTP/1.1 202"), "{head}");
    // A long call, left running on its stream.
    let marker = marker(30);
    let long = call(2, "bash", json!({"command": format!("sleep {marker}")}));
    let (head, _stream) = open_request(&addr, &post(&addr, &with, &long));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let started = Instant::now();
    while servers_with(&format!("sleep {marker}")).is_empty() {
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
    /// Never hang: a server still running after `limit` (one that stays
    /// silent) is killed, and the test's read fails.
    fn kill_after(&self, limit: Duration) {
        let pid = self.child.id();
        std::thread::spawn(move || {
            std::thread::sleep(limit);
            let _ = Command::new("kill").arg(pid.to_string()).status();
        });
    }

    /// A server with `extra`; `--approve client` unless it says otherwise
    /// (a client that declared elicitation is asked, others are denied).
    fn start(s: &Setup, extra: &[&str]) -> Raw {
        let mut args = extra.to_vec();
        if !args.contains(&"--approve") {
            args.extend(["--approve", "client"]);
        }
        Self::start_as_is(s, &args)
    }

    /// A server with exactly `args` after `serve`.
    fn start_as_is(s: &Setup, args: &[&str]) -> Raw {
        Raw::spawn(s.command(args))
    }

    /// `cmd` as a server whose frames the test reads and writes.
    fn spawn(mut cmd: Command) -> Raw {
        let mut child = cmd
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

/// A call that carries a progress token gets `notifications/progress` when
/// it starts, and none after that: its result is the end (issue 44: a
/// final 100% progress just before the result made Claude Code log
/// "unknown token" and "connection dropped").
#[test]
fn no_final_progress_before_the_result() {
    let s = setup();
    let mut raw = Raw::start(&s, &["--approve", "allow"]);
    raw.handshake();
    let request = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "echo", "arguments": {"text": "hi"}, "_meta": {"progressToken": "p-1"}}});
    raw.send(&request.to_string());
    let mut before = Vec::new();
    let result = loop {
        let v = raw.read();
        if v["id"] == 2 {
            break v;
        }
        before.push(v);
    };
    assert_eq!(result["result"]["isError"], false, "{result}");
    let progress: Vec<&Value> = before
        .iter()
        .filter(|v| v["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 1, "{before:?}");
    assert_eq!(progress[0]["params"]["progressToken"], "p-1");
    assert_eq!(progress[0]["params"]["progress"], 0.0, "{before:?}");
    let last = before.last().unwrap();
    assert!(
        !(last["method"] == "notifications/progress"
            && last["params"]["progress"] == last["params"]["total"]),
        "a 100% progress just before the result: {before:?}"
    );
}

/// Arguments a harness adds to every call (issue 44: Gemini CLI's
/// `wait_for_previous`): refused by default, naming the argument (the
/// tools' schemas say `additionalProperties: false`); with
/// `--accept-harness-arguments gemini-cli`, stripped before validation, the
/// call runs, and its audit record keeps what was stripped.
#[test]
fn harness_added_arguments_are_stripped_only_when_the_operator_accepts_them() {
    let s = setup();
    let arguments = json!({"text": "hi", "wait_for_previous": true});
    let mut raw = Raw::start(&s, &["--approve", "allow", "--no-watch"]);
    raw.handshake();
    raw.send(&call(2, "echo", arguments.clone()));
    let v = raw.answer(2);
    let error = &v["result"]["_meta"]["toolgate/error"];
    assert_eq!(error["code"], "INVALID_ARGS", "{v}");
    assert!(error.to_string().contains("wait_for_previous"), "{v}");
    drop(raw.stdin.take());
    assert!(raw.child.wait().unwrap().success());

    let mut raw = Raw::start(
        &s,
        &[
            "--approve",
            "allow",
            "--no-watch",
            "--accept-harness-arguments",
            "gemini-cli",
        ],
    );
    raw.handshake();
    raw.send(&call(2, "echo", arguments));
    let v = raw.answer(2);
    assert_eq!(v["result"]["isError"], false, "{v}");
    assert_eq!(v["result"]["structuredContent"], json!({"text": "hi"}));
    // The client leaves: the server exits, its record closed.
    drop(raw.stdin.take());
    assert!(raw.child.wait().unwrap().success());
    let record = std::fs::read_to_string(s.state_dir().join("toolgate/audit.jsonl")).unwrap();
    let calls: Vec<Value> = record
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["kind"] == "call" && r["tool"] == "echo")
        .collect();
    assert_eq!(calls.len(), 2, "{record}");
    assert!(calls[0]["client"].get("stripped").is_none(), "{}", calls[0]);
    assert_eq!(calls[1]["arguments"], json!({"text": "hi"}), "{}", calls[1]);
    assert_eq!(
        calls[1]["client"]["stripped"],
        json!({"wait_for_previous": true}),
        "{}",
        calls[1]
    );

    // The same from the configuration (`[serve]`); a harness nobody knows
    // stops `serve` at once, naming the key and the known ones.
    let base = std::fs::read_to_string(&s.config).unwrap();
    std::fs::write(
        &s.config,
        format!("{base}[serve]\naccept_harness_arguments = [\"gemini-clu\"]\n"),
    )
    .unwrap();
    let out = s
        .command(&["--approve", "allow", "--no-watch"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(
            "[serve] accept_harness_arguments: no harness `gemini-clu` (known: gemini-cli)"
        ),
        "{stderr}"
    );
    std::fs::write(
        &s.config,
        format!("{base}[serve]\naccept_harness_arguments = [\"gemini-cli\"]\n"),
    )
    .unwrap();
    let mut raw = Raw::start(&s, &["--approve", "allow", "--no-watch"]);
    raw.handshake();
    raw.send(&call(
        2,
        "echo",
        json!({"text": "hi", "wait_for_previous": true}),
    ));
    let v = raw.answer(2);
    assert_eq!(v["result"]["isError"], false, "{v}");
    drop(raw.stdin.take());
    assert!(raw.child.wait().unwrap().success());
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
    raw.kill_after(Duration::from_secs(90));
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

/// Issue 45: `[[access]]` reloads with the configuration, and a change of
/// the rules that shows or hides a tool for the session's caller is
/// `notifications/tools/list_changed`, though no tool changed. (Over stdio
/// there is no caller: a tool kept for named callers is hidden from it.)
#[test]
fn a_changed_access_rule_changes_the_callers_list_and_says_so() {
    let s = setup();
    let config = s.work().join("toolgate.toml");
    let before = std::fs::read_to_string(&config).unwrap();
    s.configure("[[access]]\ntools = [\"echo\"]\nsubjects = [\"alice\"]\n");
    let mut raw = Raw::start(&s, &["--approve", "allow", "--watch-debounce-ms", "20"]);
    raw.kill_after(Duration::from_secs(90));
    raw.send(INIT);
    raw.answer(1);
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let names = |raw: &mut Raw, id: i64| -> Vec<String> {
        raw.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#
        ));
        let list = raw.answer(id);
        list["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{list}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    let hidden = names(&mut raw, 2);
    assert!(!hidden.contains(&"echo".to_string()), "{hidden:?}");
    assert!(hidden.contains(&"read".to_string()), "{hidden:?}");
    raw.send(&call(3, "echo", json!({"text": "x"})));
    let refused = raw.answer(3);
    assert_eq!(
        refused["result"]["_meta"]["toolgate/error"]["code"], "UNKNOWN_TOOL",
        "{refused}"
    );

    // The rule goes: `echo` is everyone's, and the client is told.
    std::fs::write(&config, &before).unwrap();
    loop {
        let v = raw.read();
        if v["method"] == "notifications/tools/list_changed" {
            break;
        }
    }
    let shown = names(&mut raw, 4);
    assert!(shown.contains(&"echo".to_string()), "{shown:?}");
    raw.send(&call(5, "echo", json!({"text": "now"})));
    let ran = raw.answer(5);
    assert_eq!(ran["result"]["isError"], false, "{ran}");

    // A change that shows and hides nothing for this caller (a rule for
    // another tool nobody here lists) sends nothing; the call after it is
    // the next message.
    s.configure("[[access]]\ntools = [\"no-such-tool\"]\nsubjects = [\"alice\"]\n");
    std::thread::sleep(Duration::from_millis(500));
    raw.send(&call(6, "echo", json!({"text": "again"})));
    let next = raw.read();
    assert_eq!(next["id"], 6, "nothing before the answer: {next}");
}

/// `/usr/bin/python3` run as uid/gid 65534 (nobody), no groups: another
/// user of the machine. The script gets `args` in `sys.argv[1:]`; its last
/// stdout line is JSON. `ready` (if given) is called with the child once
/// the script printed `ready`, before its report is read.
fn as_nobody(script: &str, args: &[String], ready: impl FnOnce()) -> Value {
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        std::fs::metadata("/proc/self")
            .map(|m| m.uid())
            .unwrap_or(1),
        0,
        "this test runs a second user: it needs root (to drop to uid 65534)"
    );
    let mut child = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            script,
        ])
        .args(args)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("setpriv and /usr/bin/python3 (util-linux, python3)");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut ready = Some(ready);
    let mut last = String::new();
    loop {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        if line.trim() == "ready" {
            if let Some(ready) = ready.take() {
                ready();
            }
        } else if !line.trim().is_empty() {
            last = line;
        }
    }
    let mut err = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    let status = child.wait().unwrap();
    assert!(status.success(), "the uid 65534 script failed: {err}");
    serde_json::from_str(last.trim()).unwrap_or_else(|e| panic!("{e}: {last:?} / {err}"))
}

/// A local user's raw HTTP client: tries to read the token file, then posts
/// `initialize` without a token, with a wrong one, and with the one it is
/// given (if any, argv[4]); prints the statuses.
const NOBODY_CLIENT: &str = r#"
import json, socket, sys
host, port, token_file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
given = sys.argv[4] if len(sys.argv) > 4 else None
init = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},"clientInfo":{"name":"nobody","version":"1"}}}'
def post(auth):
    s = socket.create_connection((host, port), timeout=10)
    head = ("POST /mcp HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\n%sContent-Length: %d\r\nConnection: close\r\n\r\n"
            % (host, port, auth, len(init)))
    s.sendall(head.encode() + init.encode())
    reply = b""
    while b"\r\n" not in reply:
        chunk = s.recv(4096)
        if not chunk:
            break
        reply += chunk
    s.close()
    return int(reply.split()[1]) if reply else 0
try:
    open(token_file).read()
    read = "read"
except PermissionError:
    read = "denied"
except FileNotFoundError:
    read = "missing"
out = {"token_file": read, "none": post(""), "wrong": post("Authorization: Bearer " + "0" * 64 + "\r\n")}
if given:
    out["given"] = post("Authorization: Bearer " + given + "\r\n")
print(json.dumps(out))
"#;

/// Class 3 of issue 24: loopback is not a trust boundary. Another local
/// user (uid 65534) cannot call the operator's tools over HTTP: the token
/// is required by default, made owner-only, and not readable by them; the
/// operator's client, with the token, is served. With `--no-auth` the
/// same user is served: the twin that shows what the token stops.
#[test]
fn http_refuses_another_local_user_without_the_token() {
    use std::os::unix::fs::PermissionsExt;
    let s = setup();
    let server = HttpServer::start(&s, &[]);
    let file = s.default_token_file();
    assert!(
        server.auth_line.contains(&file.display().to_string())
            && server.auth_line.contains("(made now)"),
        "the token's place is printed with the address: {}",
        server.auth_line
    );
    let token = server.token.clone().unwrap();
    assert!(token.len() >= 32, "{token}");
    assert!(
        !server.auth_line.contains(&token),
        "the token itself is never printed"
    );
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the token file is owner-only");
    let addr = server.addr();
    let (host, port) = addr.rsplit_once(':').unwrap();
    let args = [
        host.to_string(),
        port.to_string(),
        file.display().to_string(),
    ];

    let other = as_nobody(NOBODY_CLIENT, &args, || ());
    assert_eq!(other["token_file"], "denied", "{other}");
    assert_eq!(other["none"], 401, "{other}");
    assert_eq!(other["wrong"], 401, "{other}");

    // The 401: WWW-Authenticate, a JSON-RPC error, the connection closed.
    let (head, mut body) = open_request(&addr, &post(&addr, "", INIT));
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    assert!(
        header(&head, "www-authenticate").is_some_and(|v| v.starts_with("Bearer")),
        "{head}"
    );
    assert_eq!(header(&head, "connection"), Some("close"), "{head}");
    let mut text = String::new();
    let _ = body.read_to_string(&mut text);
    let error: Value = serde_json::from_str(&text).expect("a JSON-RPC error body");
    assert_eq!(error["error"]["code"], -32001, "{error}");
    // The legitimate client, with the token: served.
    assert_eq!(server.raw(&post(&addr, "", INIT)), 200);

    // A second start reuses the token.
    let again = HttpServer::start(&s, &[]);
    assert_eq!(again.token.as_deref(), Some(token.as_str()));
    assert!(!again.auth_line.contains("made now"), "{}", again.auth_line);
    drop(again);

    // A token file another user could read or write is refused.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let out = s
        .command(&["--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("chmod 600"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();

    // The twin: --no-auth says so loudly, and then the other user is served.
    let open = HttpServer::start(&s, &["--no-auth"]);
    assert!(
        open.auth_line.contains("WARNING: --no-auth"),
        "{}",
        open.auth_line
    );
    let addr = open.addr();
    let (host, port) = addr.rsplit_once(':').unwrap();
    let args = [
        host.to_string(),
        port.to_string(),
        file.display().to_string(),
    ];
    let other = as_nobody(NOBODY_CLIENT, &args, || ());
    assert_eq!(
        other["none"], 200,
        "without a token anyone is served: {other}"
    );
}

/// The Python SDK without the token is refused; with it (the header it is
/// given), served — `python_sdk_over_http` runs the whole scenario so.
#[test]
#[cfg_attr(
    not(has_mcp_client),
    ignore = "needs the MCP Python SDK from PyPI: run `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
fn python_sdk_over_http_needs_the_token() {
    let python = python();
    let s = setup();
    let server = HttpServer::start(&s, &[]);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/client.py");
    let out = Command::new(&python)
        .arg(&script)
        .args(["--mode", "legacy", "--http", &server.url])
        .output()
        .unwrap();
    assert!(!out.status.success(), "served without a token");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unauthorized"), "{err}");
}

/// A client of uid 65534 that holds the token (the operator gave it one)
/// and misbehaves: it opens `n` connections, sends each a request head
/// promising a body, then trickles the body a byte at a time. Prints
/// `ready` once all are open, then after `seconds` how many connections
/// the server closed at once (refused at accept), how many got 408, how
/// many are still open.
const TRICKLER: &str = r#"
import json, socket, sys, time, select
host, port, token, n, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
head = ("POST /mcp HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\nAuthorization: Bearer %s\r\n"
        "Content-Length: 100000\r\n\r\n{" % (host, port, token)).encode()
socks = []
for _ in range(n):
    s = socket.create_connection((host, port), timeout=10)
    try:
        s.sendall(head)
    except OSError:
        pass
    socks.append(s)
# Refusals are at accept; nothing else ends before the body deadline (3 s).
time.sleep(1.0)
closed_at_once = 0
for s in socks:
    r, _, _ = select.select([s], [], [], 0)
    if r:
        try:
            data = s.recv(4096, socket.MSG_PEEK)
        except OSError:
            data = b""
        if not data:
            closed_at_once += 1
print("ready", flush=True)
status = {}
end = time.time() + seconds
while time.time() < end:
    for i, s in enumerate(socks):
        if i in status:
            continue
        # An answer (or the end) first, then one more byte.
        r, _, _ = select.select([s], [], [], 0)
        if r:
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            status[i] = data.split(b" ")[1].decode() if data.startswith(b"HTTP/1.1 ") else "closed"
            continue
        try:
            s.send(b" ")
        except OSError:
            status[i] = "closed"
    time.sleep(0.2)
counts = {}
for v in status.values():
    counts[v] = counts.get(v, 0) + 1
print(json.dumps({"closed_at_once": closed_at_once, "ended": counts, "open": n - len(status)}))
"#;

/// Class 5 of issue 24: 300 connections of another local user trickling
/// request bodies hold neither every connection slot (that user's share is
/// a quarter of them; the rest are closed on accept) nor theirs for long
/// (408 at the body deadline); the operator's client is served meanwhile.
#[test]
fn http_trickling_connections_do_not_starve_a_legitimate_client() {
    let s = setup();
    let server = HttpServer::start(&s, &["--body-timeout-ms", "3000"]);
    let addr = server.addr();
    let (host, port) = addr.rsplit_once(':').unwrap();
    let token = server.token.clone().unwrap();
    let args = [
        host.to_string(),
        port.to_string(),
        token,
        "300".to_string(),
        "6".to_string(),
    ];
    let report = as_nobody(TRICKLER, &args, || {
        // While all 300 trickle: served, promptly, every time.
        for _ in 0..5 {
            let started = Instant::now();
            assert_eq!(server.raw(&post(&addr, "", INIT)), 200);
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "{:?}",
                started.elapsed()
            );
        }
    });
    // Its share (256 / 4) accepted, the rest closed at once; the accepted
    // ones cut at the body deadline.
    assert_eq!(report["closed_at_once"], 300 - 64, "{report}");
    assert_eq!(report["ended"]["closed"], 300 - 64, "{report}");
    assert_eq!(report["ended"]["408"], 64, "{report}");
    assert_eq!(report["open"], 0, "{report}");
}

/// A session-opening `initialize` (its response left unread); the session
/// id.
fn open_session(server: &HttpServer) -> Option<String> {
    let addr = server.addr();
    let (head, _) = open_request(&addr, &post(&addr, &server.auth(), INIT));
    header(&head, "mcp-session-id").map(str::to_string)
}

/// Class 5 of issue 24: one client opening sessions up to its share leaves
/// the others theirs (503 for it, a session for another user), and a
/// session never used is closed soon, not after the idle time; a used one
/// stays.
#[test]
fn http_one_client_cannot_take_every_session_and_unused_ones_expire() {
    let s = setup();
    let server = HttpServer::start(
        &s,
        &["--max-sessions", "8", "--unused-session-idle-ms", "2000"],
    );
    let addr = server.addr();
    // The share of one client: 8 / 4 = 2.
    let used = open_session(&server).expect("a first session");
    let with = format!(
        "{}Mcp-Session-Id: {used}\r\nMCP-Protocol-Version: 2025-06-18\r\n",
        server.auth()
    );
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(server.raw(&post(&addr, &with, initialized)), 202);
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    assert_eq!(server.raw(&post(&addr, &with, list)), 200);
    let unused = open_session(&server).expect("a second session");
    let (head, _) = open_request(&addr, &post(&addr, &server.auth(), INIT));
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    assert!(header(&head, "retry-after").is_some(), "{head}");

    // Another local user, with the token, still gets a session.
    let (host, port) = addr.rsplit_once(':').unwrap();
    let args = [
        host.to_string(),
        port.to_string(),
        "/nonexistent".to_string(),
        server.token.clone().unwrap(),
    ];
    let other = as_nobody(NOBODY_CLIENT, &args, || ());
    assert_eq!(other["given"], 200, "{other}");

    // The unused session is closed after 2 s; the used one is not.
    std::thread::sleep(Duration::from_millis(3500));
    let ping = r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#;
    assert_eq!(
        server.raw(&post(&addr, &with, ping)),
        200,
        "the used session"
    );
    let with_unused = with.replace(&used, &unused);
    assert_eq!(
        server.raw(&post(&addr, &with_unused, ping)),
        404,
        "the unused session is gone"
    );
    // Its slot is free again.
    assert!(open_session(&server).is_some());
}

/// What a client that declared elicitation meets when a hook asks about
/// its call.
enum Asked {
    /// An `elicitation/create` about the call.
    Elicits,
    /// The call denied by this approver.
    DeniedBy(&'static str),
    /// The call run (its answer first, no elicitation before it).
    Runs,
}

/// A stdio server with exactly `args`, a client that declared elicitation,
/// and a `bash` call (which every hook of `setup` asks about): the first
/// frame about the call — its answer, or a question about it — checked.
fn ask_about_bash(s: &Setup, args: &[&str], expect: &Asked) {
    const INIT_ELICIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"1"}}}"#;
    // A state directory of its own (its record, its journal): these
    // servers run side by side with others of the same setup.
    let state = TempDir::new("serve-ask-state");
    share_cache_key(&cache_dir(), &state.path().join("toolgate"));
    let mut cmd = s.command(args);
    cmd.env("XDG_STATE_HOME", state.path());
    let mut raw = Raw::spawn(cmd);
    raw.send(INIT_ELICIT);
    raw.answer(1);
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    raw.send(&call(2, "bash", json!({"command": "echo ran-by-bash"})));
    let first = loop {
        let v = raw.read();
        if v["id"] == 2 || v["method"] == "elicitation/create" {
            break v;
        }
    };
    match expect {
        Asked::Elicits => {
            assert_eq!(first["method"], "elicitation/create", "{args:?}: {first}")
        }
        Asked::DeniedBy(by) => {
            let error = &first["result"]["_meta"]["toolgate/error"];
            assert_eq!(error["code"], "DENIED", "{args:?}: {first}");
            assert_eq!(error["decidedBy"], *by, "{args:?}: {first}");
        }
        Asked::Runs => {
            assert_eq!(first["id"], 2, "no elicitation, {args:?}: {first}");
            assert_eq!(first["result"]["isError"], false, "{args:?}: {first}");
            assert!(first.to_string().contains("ran-by-bash"), "{first}");
        }
    }
}

/// `--no-elicitation`: a client that can answer elicitations is not asked;
/// the host's approver (default deny) answers the hook's `ask`. The twin
/// without the flag (and without `--approve`: the default) sends the client
/// an `elicitation/create`.
#[test]
fn no_elicitation_leaves_approval_to_the_host() {
    let s = setup();
    std::thread::scope(|t| {
        t.spawn(|| ask_about_bash(&s, &[], &Asked::Elicits));
        t.spawn(|| ask_about_bash(&s, &["--no-elicitation"], &Asked::DeniedBy("deny-all")));
    });
}

/// The operator's explicit `--approve` wins over a client that declared
/// elicitation (issue 44: Claude Code and Codex, headless, decline every
/// elicitation, so `bash` was refused although the operator said allow):
/// `--approve allow` runs `bash` with no elicitation request, and so does
/// `[approval] mode = "allow"`; `--approve client` asks the client (and
/// wins over the configuration).
#[test]
fn the_operators_explicit_approve_wins_over_elicitation() {
    let s = setup();
    let configured = setup();
    let config = std::fs::read_to_string(&configured.config).unwrap();
    std::fs::write(
        &configured.config,
        format!("{config}[approval]\nmode = \"allow\"\n"),
    )
    .unwrap();
    std::thread::scope(|t| {
        t.spawn(|| ask_about_bash(&s, &["--approve", "allow"], &Asked::Runs));
        t.spawn(|| ask_about_bash(&configured, &["--no-watch"], &Asked::Runs));
        t.spawn(|| {
            ask_about_bash(
                &configured,
                &["--no-watch", "--approve", "client"],
                &Asked::Elicits,
            )
        });
    });
}

/// A server started the way a new user's first one is: a fresh, empty
/// compile cache (its own, not the tests' shared one), the built-ins, and
/// optionally a plugin directory with `config`.
struct Fresh {
    raw: Raw,
    started: Instant,
    _work: TempDir,
    _cache: TempDir,
}

fn fresh(plugins: Option<&PluginDir>, config: &str) -> Fresh {
    let work = TempDir::new("first-call-work");
    let cache = TempDir::new("first-call-cache");
    std::fs::write(work.path().join("hello.txt"), "hello\n").unwrap();
    std::fs::write(work.path().join("toolgate.toml"), config).unwrap();
    let mut cmd = Command::new(toolgate_bin());
    if let Some(p) = plugins {
        cmd.arg("--plugins").arg(p.path());
    }
    cmd.args(["serve", "--no-watch", "--approve", "deny"])
        .current_dir(work.path())
        .env("TOOLGATE_CACHE_DIR", cache.path().join("c"))
        .env("XDG_STATE_HOME", work.path().join("state"))
        .env_remove("TOOLGATE_STATE_DIR")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let started = Instant::now();
    let mut child = cmd.spawn().expect("start the server");
    let stdin = child.stdin.take();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    // Never hang: a server that stays silent is killed, and the read fails.
    let pid = child.id();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(120));
        let _ = Command::new("kill").arg(pid.to_string()).status();
    });
    Fresh {
        raw: Raw {
            child,
            stdin,
            stdout,
        },
        started,
        _work: work,
        _cache: cache,
    }
}

/// What a slow first call is allowed (issue 25: 1 s release, 3 s debug;
/// measured ≈ 60 ms debug, see BENCHMARKS.md "First call on an empty
/// compile cache"). Compiling the built-ins at start took 4.9 s (debug).
fn first_call_bound() -> Duration {
    if cfg!(debug_assertions) {
        Duration::from_secs(3)
    } else {
        Duration::from_secs(1)
    }
}

/// The first `tools/call` of a built-in tool, on an empty compile cache,
/// is answered within the bound of issue 25: the built-ins are compiled
/// with the binary, nothing is compiled at start.
#[test]
fn the_first_call_on_an_empty_compile_cache_is_answered_within_the_bound() {
    let mut f = fresh(None, "");
    f.raw.handshake();
    let initialized = f.started.elapsed();
    f.raw.send(&call(2, "read", json!({"path": "hello.txt"})));
    let v = f.raw.answer(2);
    let first = f.started.elapsed();
    assert_eq!(v["result"]["isError"], false, "{v}");
    assert!(
        v["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("hello")),
        "{v}"
    );
    assert!(
        first < first_call_bound(),
        "start -> first call answered took {first:?} (initialize {initialized:?}); the bound is {:?}",
        first_call_bound()
    );
}

/// A plugin file whose compile-cache entry does not verify under this
/// host's key (a host with another state directory wrote it) compiles like
/// one not in the cache: in the background, after the server answers — not
/// before, where on loaded cores it held `server/discover` past a client's
/// probe timeout (the Python SDK gives 10 s, then falls back to 2025). The
/// first generation serves without it; a call of its tool waits for the
/// next one.
#[test]
fn an_entry_another_key_wrote_compiles_in_the_background() {
    let work = TempDir::new("other-key-work");
    let cache = TempDir::new("other-key-cache");
    let states = TempDir::new("other-key-state");
    let plugins = PluginDir::new();
    plugins.add("tools", fixtures::TOOLS);
    let toolgate = |state: &str| {
        let mut cmd = Command::new(toolgate_bin());
        cmd.arg("--plugins")
            .arg(plugins.path())
            .current_dir(work.path())
            .env("TOOLGATE_CACHE_DIR", cache.path().join("c"))
            .env("TOOLGATE_STATE_DIR", states.path().join(state));
        cmd
    };
    // Host A fills the cache under its key...
    let out = toolgate("a")
        .arg("plugins")
        .env("RUST_LOG", "warn")
        .output()
        .expect("run toolgate plugins");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let entries = std::fs::read_dir(cache.path().join("c")).unwrap().count();
    assert_eq!(entries, 1, "host A wrote the tools fixture's entry");
    // ...host B, with its own key, serves from it.
    let log = work.path().join("serve.log");
    let mut child = toolgate("b")
        .args(["serve", "--no-watch", "--approve", "deny"])
        .env("RUST_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start the server");
    let stdin = child.stdin.take();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut raw = Raw {
        child,
        stdin,
        stdout,
    };
    raw.handshake();
    raw.send(&call(2, "echo", json!({"text": "after the compile"})));
    let v = raw.answer(2);
    assert_eq!(v["result"]["isError"], false, "{v}");
    drop(raw);
    let log = std::fs::read_to_string(&log).unwrap();
    let first = log
        .lines()
        .find(|l| l.contains("generation 1 serves"))
        .unwrap_or_else(|| panic!("no first generation in the log:\n{log}"));
    assert!(
        !first.contains("\"tools\""),
        "the unverifiable entry was compiled before the first generation served: {first}"
    );
    assert!(
        log.lines()
            .any(|l| l.contains("serves") && l.contains("\"tools\"")),
        "a later generation brings it:\n{log}"
    );
    assert!(log.contains("failed verification"), "{log}");
}

/// Read frames until every id of `ids` is answered: the answers by id,
/// and whether `notifications/tools/list_changed` came meanwhile.
fn answers(raw: &mut Raw, ids: &[i64]) -> (std::collections::BTreeMap<i64, Value>, bool) {
    let mut got = std::collections::BTreeMap::new();
    let mut changed = false;
    while !ids.iter().all(|id| got.contains_key(id)) {
        let v = raw.read();
        if v["method"] == "notifications/tools/list_changed" {
            changed = true;
        } else if let Some(id) = v["id"].as_i64() {
            got.insert(id, v);
        }
    }
    (got, changed)
}

/// A third-party policy still compiling holds calls back (fail closed):
/// the first call, sent at once, waits for the guard and is denied by it
/// — neither run without it nor refused for want of it.
#[test]
fn a_call_never_runs_before_its_policies_are_loaded() {
    let plugins = PluginDir::new();
    plugins.add("guard", fixtures::GUARD);
    let mut f = fresh(
        Some(&plugins),
        "[plugins.guard]\nvars = { BEHAVIOR = \"deny-tool:read\", NAME = \"guard\" }\n",
    );
    // Everything at once: the guard cannot be compiled yet.
    f.raw.send(INIT);
    f.raw
        .send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    f.raw.send(&call(2, "read", json!({"path": "hello.txt"})));
    f.raw.send(&call(3, "list_dir", json!({"path": "."})));
    let (got, _) = answers(&mut f.raw, &[1, 2, 3]);
    assert_eq!(
        got[&1]["result"]["serverInfo"]["name"], "toolgate",
        "{}",
        got[&1]
    );
    let read = &got[&2]["result"];
    assert_eq!(read["isError"], true, "{read}");
    assert_eq!(error_of(read)["code"], "DENIED", "{read}");
    assert_eq!(error_of(read)["stage"], "guard", "{read}");
    assert_eq!(error_of(read)["decidedBy"], "guard", "{read}");
    // Another tool passes the same guard once it is loaded.
    let list = &got[&3]["result"];
    assert_eq!(list["isError"], false, "{list}");
}

/// A third-party tool provider that must compile does not hold the
/// built-ins back: `initialize`, `tools/list` and a built-in call are
/// answered while it compiles; its tools follow with
/// `notifications/tools/list_changed`, and a call to one of them sent
/// before it was ready waits for it rather than failing.
#[test]
fn a_compiling_third_party_tool_does_not_hold_the_builtins_back() {
    let plugins = PluginDir::new();
    plugins.add("tools", fixtures::TOOLS);
    let mut f = fresh(Some(&plugins), "");
    f.raw.handshake();
    f.raw
        .send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
    f.raw.send(&call(3, "read", json!({"path": "hello.txt"})));
    f.raw.send(&call(4, "echo", json!({"text": "hi"})));
    let (got, mut changed) = answers(&mut f.raw, &[2, 3, 4]);
    let names: Vec<&str> = got[&2]["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"read"), "{names:?}");
    assert!(
        !names.contains(&"echo"),
        "the first listing waited for the third-party plugin to compile: {names:?}"
    );
    assert_eq!(got[&3]["result"]["isError"], false, "{}", got[&3]);
    let echo = &got[&4]["result"];
    assert_eq!(echo["isError"], false, "{echo}");
    assert_eq!(echo["content"][0]["text"], "hi", "{echo}");
    f.raw
        .send(r#"{"jsonrpc":"2.0","id":5,"method":"tools/list"}"#);
    let (got, more) = answers(&mut f.raw, &[5]);
    changed |= more;
    assert!(
        got[&5]["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "echo"),
        "{}",
        got[&5]
    );
    assert!(changed, "the client was told the list changed");
}

// ---- The letter of the protocol (issue 27) --------------------------------

/// A raw HTTP exchange read to its end (`Connection: close`): the status,
/// the head, the body.
fn exchange(addr: &str, request: &str) -> (u16, String, String) {
    let (head, mut reader) = open_request(addr, request);
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let mut body = Vec::new();
    let _ = reader.read_to_end(&mut body);
    (status, head, String::from_utf8_lossy(&body).into_owned())
}

/// The JSON-RPC messages of a body: a JSON one, or an SSE stream's `data:`.
fn messages(body: &str) -> Vec<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return vec![v];
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect()
}

fn request(method: &str, extra: &str, body: &str) -> String {
    post("127.0.0.1", extra, body).replacen("POST", method, 1)
}

/// Issue 27, items 2-5: bad input over HTTP gets 400 and a JSON-RPC error
/// (not rmcp's 415 in plain text); a batch is answered in a 2025-03-26
/// session and refused with a clear -32600 elsewhere; `tools/call` without
/// `name` is -32602 naming it; an unknown method says "method not found:
/// X"; a request outside a session says it is not initialized; `DELETE` is
/// 404 for an unknown session and 204 for a live one. The server serves on.
#[test]
fn http_answers_bad_input_with_exact_json_rpc_errors() {
    let s = setup();
    let server = HttpServer::start(&s, &["--approve", "allow"]);
    let addr = server.addr();
    let auth = server.auth();
    let send = |method: &str, extra: &str, body: &str| {
        let (status, head, body) =
            exchange(&addr, &request(method, &format!("{auth}{extra}"), body));
        (status, head, messages(&body))
    };
    let error_of = |answer: &[Value]| {
        answer
            .first()
            .map(|m| m["error"].clone())
            .unwrap_or_default()
    };

    // Not JSON; JSON that is not JSON-RPC 2.0; not an object.
    let (status, head, answer) = send("POST", "", "{not json");
    assert_eq!(status, 400, "{head}");
    assert!(
        header(&head, "content-type")
            .unwrap()
            .starts_with("application/json")
    );
    assert_eq!(error_of(&answer)["code"], -32700, "{answer:?}");
    let (status, _, answer) = send("POST", "", r#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#);
    assert_eq!(status, 400);
    assert_eq!(error_of(&answer)["code"], -32600, "{answer:?}");
    assert_eq!(answer[0]["id"], 7, "the id is kept: {answer:?}");
    assert!(
        error_of(&answer)["message"]
            .as_str()
            .unwrap()
            .contains("jsonrpc")
    );
    let (status, _, answer) = send("POST", "", "42");
    assert_eq!(
        (status, error_of(&answer)["code"].clone()),
        (400, json!(-32600))
    );

    // A batch outside a session (initialize is never batched).
    let (status, _, answer) = send("POST", "", &format!("[{INIT}]"));
    assert_eq!(status, 400);
    assert_eq!(error_of(&answer)["code"], -32600);
    assert!(
        error_of(&answer)["message"]
            .as_str()
            .unwrap()
            .contains("2025-03-26 session"),
        "{answer:?}"
    );

    // A request outside any session: not initialized.
    let (status, _, answer) = send(
        "POST",
        "MCP-Protocol-Version: 2025-06-18\r\n",
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    );
    assert_eq!(status, 400);
    assert!(
        error_of(&answer)["message"]
            .as_str()
            .unwrap()
            .contains("not initialized"),
        "{answer:?}"
    );

    // A 2025-03-26 session: batches are part of that revision.
    let init = |version: &str| {
        let body = INIT.replace("2025-06-18", version);
        let (status, head, _) = exchange(&addr, &request("POST", &auth, &body));
        assert_eq!(status, 200, "{head}");
        let id = header(&head, "mcp-session-id").unwrap().to_string();
        let sid = format!("Mcp-Session-Id: {id}\r\n");
        let (status, _, _) = send(
            "POST",
            &sid,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        );
        assert_eq!(status, 202);
        sid
    };
    let old = init("2025-03-26");
    let batch = format!(
        "[{},{},{},{},{}]",
        r#"{"jsonrpc":"2.0","id":10,"method":"ping"}"#,
        call(11, "echo", json!({"text": "in a batch"})),
        r#"{"jsonrpc":"2.0","id":12,"method":"no/such"}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#,
        r#"{"jsonrpc":"1.0","id":13}"#
    );
    let (status, head, answer) = send("POST", &old, &batch);
    assert_eq!(status, 200, "{head}");
    let answers = answer[0]
        .as_array()
        .unwrap_or_else(|| panic!("an array: {answer:?}"));
    let by_id = |id: i64| {
        answers
            .iter()
            .find(|a| a["id"] == id)
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(
        answers.len(),
        4,
        "one answer per request, none for a notification: {answers:?}"
    );
    assert_eq!(by_id(10)["result"], json!({}));
    assert_eq!(
        by_id(11)["result"]["structuredContent"],
        json!({"text": "in a batch"})
    );
    assert_eq!(by_id(12)["error"]["message"], "method not found: no/such");
    assert_eq!(by_id(13)["error"]["code"], -32600);
    // An empty batch, an oversized one.
    let (status, _, answer) = send("POST", &old, "[]");
    assert_eq!(
        (status, error_of(&answer)["code"].clone()),
        (400, json!(-32600))
    );
    let many = format!(
        "[{}]",
        vec![r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#; 65].join(",")
    );
    let (status, _, answer) = send("POST", &old, &many);
    assert_eq!(status, 400);
    assert!(
        error_of(&answer)["message"]
            .as_str()
            .unwrap()
            .contains("at most 64")
    );

    // A later revision: no batches, and said so.
    let new = init("2025-06-18");
    let versioned = format!("{new}MCP-Protocol-Version: 2025-06-18\r\n");
    let (status, _, answer) = send(
        "POST",
        &versioned,
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
    );
    assert_eq!(status, 400);
    assert!(
        error_of(&answer)["message"]
            .as_str()
            .unwrap()
            .contains("not part of protocol revision 2025-06-18"),
        "{answer:?}"
    );

    // tools/call without a name; an unknown method.
    let (_, _, answer) = send(
        "POST",
        &versioned,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"arguments":{}}}"#,
    );
    let error = answer
        .iter()
        .find(|m| m["id"] == 3)
        .map(|m| m["error"].clone())
        .unwrap_or_default();
    assert_eq!(error["code"], -32602, "{answer:?}");
    assert!(
        error["message"].as_str().unwrap().contains("`name`"),
        "{error}"
    );
    let (_, _, answer) = send(
        "POST",
        &versioned,
        r#"{"jsonrpc":"2.0","id":4,"method":"foo/bar"}"#,
    );
    let error = answer
        .iter()
        .find(|m| m["id"] == 4)
        .map(|m| m["error"].clone())
        .unwrap_or_default();
    assert_eq!(error["code"], -32601, "{answer:?}");
    assert_eq!(error["message"], "method not found: foo/bar");

    // DELETE: a live session 204, then (ended) 404, an unknown one 404.
    let (status, _, _) = send("DELETE", &versioned, "");
    assert_eq!(status, 204);
    let (status, _, answer) = send("DELETE", &versioned, "");
    assert_eq!(status, 404);
    assert_eq!(error_of(&answer)["code"], -32600, "{answer:?}");
    let (status, _, _) = send("DELETE", "Mcp-Session-Id: no-such-session\r\n", "");
    assert_eq!(status, 404);

    // Served on: the old session still answers, a new one opens.
    let (_, _, answer) = send("POST", &old, r#"{"jsonrpc":"2.0","id":20,"method":"ping"}"#);
    assert!(
        answer
            .iter()
            .any(|m| m["id"] == 20 && m.get("result").is_some()),
        "{answer:?}"
    );
    init("2025-06-18");
}

/// Issue 27, item 6: an `Origin` on this machine (localhost, 127.0.0.1,
/// [::1], any port, http or https) is accepted, as the spec requires of a
/// local server; other origins and hosts are still refused.
/// SSE priming events (an id, a `retry:`, empty data: 2025-11-25) go only
/// to the revisions that define them (issue 44): a 2025-06-18 client
/// (Gemini CLI's SDK) parses every event's data as JSON and drops the
/// connection at an empty one. Every `data:` line a 2025-06-18 session
/// gets is a JSON-RPC message; a 2025-11-25 session is primed.
#[test]
fn http_priming_events_only_for_the_revisions_that_define_them() {
    let s = setup();
    let server = HttpServer::start(&s, &["--approve", "allow"]);
    let addr = server.addr();
    let auth = server.auth();
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    for version in ["2025-06-18", "2025-11-25"] {
        let mut bodies = Vec::new();
        let init = INIT.replace("2025-06-18", version);
        let (status, head, body) = exchange(&addr, &request("POST", &auth, &init));
        assert_eq!(status, 200, "{head}");
        let session = header(&head, "mcp-session-id").unwrap().to_string();
        bodies.push(body);
        let with =
            format!("{auth}Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: {version}\r\n");
        let (status, _, _) = exchange(&addr, &request("POST", &with, initialized));
        assert_eq!(status, 202);
        let echo = call(2, "echo", json!({"text": "primed?"}));
        let (status, head, body) = exchange(&addr, &request("POST", &with, &echo));
        assert_eq!(status, 200, "{head}");
        assert!(
            header(&head, "content-type").is_some_and(|t| t.starts_with("text/event-stream")),
            "{head}"
        );
        assert!(body.contains("primed?"), "{body}");
        bodies.push(body);
        let data: Vec<&str> = bodies
            .iter()
            .flat_map(|b| b.lines())
            .filter_map(|l| l.strip_prefix("data:"))
            .collect();
        if version == "2025-06-18" {
            for d in &data {
                serde_json::from_str::<Value>(d.trim()).unwrap_or_else(|e| {
                    panic!("a {version} client got an event that is not JSON ({e}): {bodies:?}")
                });
            }
        } else {
            assert!(
                data.iter().any(|d| d.trim().is_empty()),
                "a {version} session is primed: {bodies:?}"
            );
        }
    }
}

/// A port already taken: `serve --http` exits with an error that says the
/// cause once (issue 44: "Address already in use" was printed twice).
#[test]
fn http_an_address_in_use_is_said_once() {
    let s = setup();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = s
        .command(&["--http", &addr, "--approve", "deny", "--no-watch"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("cannot listen on {addr}")), "{err}");
    assert_eq!(err.matches("in use").count(), 1, "{err}");
}

/// `serve` over stdio started by hand, on a terminal, says what it serves
/// and where, in one line (issue 44: it said nothing). `script`
/// (util-linux) gives it the terminal; stdin's end stops it.
#[test]
fn serve_on_a_terminal_prints_one_start_line() {
    let s = setup();
    let mut cmdline = vec![toolgate_bin().display().to_string()];
    cmdline.extend(s.args(&["--no-watch", "--approve", "deny"]));
    let out = Command::new("script")
        .args(["-qec", &cmdline.join(" "), "/dev/null"])
        .current_dir(s.work.path())
        .env("TOOLGATE_CACHE_DIR", cache_dir())
        .env("XDG_STATE_HOME", s.state_dir())
        .env_remove("TOOLGATE_STATE_DIR")
        .env("RUST_LOG", "error")
        .stdin(Stdio::null())
        .output()
        .expect("run `script` (util-linux), which gives the server a terminal");
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("toolgate: serving"))
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(
        lines[0].contains("tools over MCP on stdin/stdout"),
        "{text}"
    );
}

#[test]
fn http_accepts_loopback_origins_and_refuses_foreign_ones() {
    let s = setup();
    let server = HttpServer::start(&s, &[]);
    let addr = server.addr();
    for origin in [
        "http://localhost:5173",
        "http://127.0.0.1:9",
        "http://[::1]:6274",
        "https://localhost",
        &format!("http://{addr}"),
    ] {
        assert_eq!(
            server.raw(&post(&addr, &format!("Origin: {origin}\r\n"), INIT)),
            200,
            "{origin}"
        );
    }
    for origin in [
        "http://evil.example",
        "http://localhost.evil.example:5173",
        "http://127.0.0.1.nip.io",
        "null",
    ] {
        assert_eq!(
            server.raw(&post(&addr, &format!("Origin: {origin}\r\n"), INIT)),
            403,
            "{origin}"
        );
    }
    assert_eq!(server.raw(&post("evil.example", "", INIT)), 403);
    // Refused before the body is looked at: garbage from a foreign origin
    // is 403, not 400.
    assert_eq!(
        server.raw(&post(&addr, "Origin: http://evil.example\r\n", "{not json")),
        403
    );
}

/// Issue 27, items 4-5 over stdio: before `initialize` a request is told
/// the session is not initialized; after it, `tools/call` without `name` is
/// -32602 naming it, an unknown method "method not found: X", a batch a
/// clear -32600.
#[test]
fn stdio_errors_say_exactly_what_is_wrong() {
    let s = setup();
    let mut raw = Raw::start(&s, &[]);
    raw.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
    let v = raw.answer(2);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("the session is not initialized"),
        "{v}"
    );
    raw.handshake();
    raw.send(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{}}"#);
    let v = raw.answer(3);
    assert_eq!(v["error"]["code"], -32602, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("`name`"),
        "{v}"
    );
    raw.send(r#"{"jsonrpc":"2.0","id":4,"method":"no/such"}"#);
    assert_eq!(
        raw.answer(4)["error"]["message"],
        "method not found: no/such"
    );
    raw.send(r#"[{"jsonrpc":"2.0","id":5,"method":"ping"}]"#);
    let v = raw.read();
    assert_eq!(v["error"]["code"], -32600, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("batches"),
        "{v}"
    );
    raw.send(r#"{"jsonrpc":"2.0","id":6,"method":"ping"}"#);
    assert!(raw.answer(6).get("result").is_some());
}

pub(crate) fn run_letter(python: &Path, args: &[String], ready: impl FnOnce()) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/letter.py");
    let mut child = Command::new(python)
        .arg(&script)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run letter.py");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut ready = Some(ready);
    let mut last = String::new();
    loop {
        let mut line = String::new();
        if stdout.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        if line.trim() == "listening"
            && let Some(ready) = ready.take()
        {
            ready();
        } else if !line.trim().is_empty() {
            last = line;
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "letter.py failed: {last}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&last).unwrap_or_else(|e| panic!("letter.py's report ({e}): {last}"))
}

/// Issue 27, item 3: the Python SDK ends its session with `DELETE` and
/// gets 204, so it no longer warns "Session termination failed: 202".
#[test]
#[cfg_attr(
    not(has_mcp_client),
    ignore = "needs the MCP Python SDK from PyPI: run `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
fn letter_python_sdk_ends_its_session_without_a_warning() {
    let python = python();
    let s = setup();
    let server = HttpServer::start(&s, &[]);
    let mut args = vec!["close".to_string()];
    args.extend(server.client_target());
    let report = run_letter(&python, &args, || {});
    assert_eq!(report["protocol"], "2025-11-25", "{report}");
    assert!(report["tools"].as_u64().unwrap() > 0, "{report}");
    assert_eq!(report["warnings"], json!([]), "{report}");
}

/// Issue 27, item 1: a 2026-07-28 client (the Python SDK's default mode)
/// hears through `subscriptions/listen` that the tool list changed, over
/// HTTP and over stdio.
#[test]
#[cfg_attr(
    not(has_mcp_client),
    ignore = "needs the MCP Python SDK from PyPI: run `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
fn letter_python_sdk_listens_for_tool_list_changes() {
    let python = python();
    for transport in ["http", "stdio"] {
        let s = setup();
        let server;
        let mut args = vec!["listen".to_string()];
        let extra = ["--approve", "allow", "--watch-debounce-ms", "20"];
        if transport == "http" {
            server = Some(HttpServer::start(&s, &extra));
            args.extend(server.as_ref().unwrap().client_target());
        } else {
            server = None;
            args.extend([
                "--cwd".to_string(),
                s.work.path().display().to_string(),
                "--env".to_string(),
                format!("TOOLGATE_CACHE_DIR={}", cache_dir().display()),
                "--env".to_string(),
                format!("XDG_STATE_HOME={}", s.state_dir().display()),
                "--stdio".to_string(),
                toolgate_bin().display().to_string(),
            ]);
            args.extend(s.args(&extra));
        }
        let dir = s.plugins.path().to_path_buf();
        let report = run_letter(&python, &args, || {
            let tmp = dir.join(".v.wasm.part");
            std::fs::write(&tmp, std::fs::read(fixtures::VERSIONED_1).unwrap()).unwrap();
            std::fs::rename(&tmp, dir.join("v.wasm")).unwrap();
        });
        drop(server);
        assert_eq!(report["protocol"], "2026-07-28", "{transport}: {report}");
        assert_eq!(
            report["honored"]["toolsListChanged"], true,
            "{transport}: {report}"
        );
        assert_eq!(report["event"], "ToolsListChanged", "{transport}: {report}");
        assert!(
            report["tools"]
                .as_array()
                .unwrap()
                .contains(&json!("which_version")),
            "{transport}: {report}"
        );
    }
}

/// Issue 45: a 2026-07-28 list result says how long it is fresh and who
/// may cache it (SEP-2549): `ttlMs` from `--list-ttl-ms`, `cacheScope`
/// `public` when the list is the same for everyone (here) — `private`
/// under `[auth]` (`oauth::each_caller_sees_only_the_tools_it_may_call`).
/// Earlier revisions' results carry neither.
#[test]
fn a_stateless_list_says_how_long_it_is_fresh_and_who_may_cache_it() {
    let s = setup();
    let server = HttpServer::start(&s, &["--approve", "allow", "--list-ttl-ms", "5000"]);
    let addr = server.addr();
    let extra = format!(
        "{}MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\n",
        server.auth()
    );
    let list = http_rpc(
        &addr,
        &extra,
        1,
        "tools/list",
        json!({
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}),
    );
    assert_eq!(list["result"]["ttlMs"], 5000, "{list}");
    assert_eq!(list["result"]["cacheScope"], "public", "{list}");
    assert!(
        list["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{list}"
    );

    // A 2025 session's list: no such fields.
    let with = session_headers(&server);
    let list = http_rpc(&addr, &with, 2, "tools/list", json!({}));
    assert!(list["result"].get("ttlMs").is_none(), "{list}");
    assert!(list["result"].get("cacheScope").is_none(), "{list}");
}

/// Issue 45: a 2026-07-28 request says its method and target twice, in the
/// body and in `Mcp-Method`/`Mcp-Name` (SEP-2243), so that a balancer can
/// route by the headers. Headers that are missing or name another tool
/// than the body are refused (400, `-32020`) before anything runs: what a
/// balancer or a header-reading policy saw is what runs.
#[test]
fn a_request_routed_by_headers_other_than_its_body_is_refused() {
    let s = setup();
    let server = HttpServer::start(&s, &["--approve", "allow"]);
    let addr = server.addr();
    let marker = s.work().join("ran");
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "bash", "arguments": {"command": format!("touch {}", marker.display())},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    let version = "MCP-Protocol-Version: 2026-07-28\r\n";
    for (headers, says) in [
        (
            "Mcp-Method: tools/call\r\nMcp-Name: echo\r\n",
            "does not match",
        ),
        (
            "Mcp-Method: tools/list\r\nMcp-Name: bash\r\n",
            "does not match",
        ),
        ("Mcp-Name: bash\r\n", "missing the Mcp-Method header"),
        ("Mcp-Method: tools/call\r\n", "missing the Mcp-Name header"),
    ] {
        let extra = format!("{}{version}{headers}", server.auth());
        let (status, head, answer) =
            toolgate_tests::http_exchange(&addr, &post(&addr, &extra, &body));
        assert_eq!(status, 400, "{headers}: {head}\n{answer}");
        let answer: Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer["error"]["code"], -32020, "{answer}");
        assert_eq!(answer["id"], 3, "{answer}");
        assert!(
            answer["error"]["message"].as_str().unwrap().contains(says),
            "{headers}: {answer}"
        );
    }
    assert!(!marker.exists(), "a refused request ran");
    // The same request routed truly (the name in SEP-2243's Base64 form):
    // it runs.
    let extra = format!(
        "{}{version}Mcp-Method: tools/call\r\nMcp-Name: =?base64?YmFzaA==?=\r\n",
        server.auth()
    );
    let (status, head, answer) = toolgate_tests::http_exchange(&addr, &post(&addr, &extra, &body));
    assert_eq!(status, 200, "{head}\n{answer}");
    assert!(marker.exists(), "{answer}\n{}", server.log());
}

/// Issue 27, item 9: a 2026-07-28 client cancels a call by closing its
/// POST's response stream; the SDK's "failed to send pending response
/// during drain" that follows is an expected event, logged at debug, never
/// as an error.
#[test]
fn a_cancel_by_closing_the_stream_is_not_logged_as_an_error() {
    let s = setup();
    let server = HttpServer::start_env(
        &s,
        &["--approve", "allow"],
        &[("RUST_LOG", "warn,rmcp=error,toolgate_mcp=debug")],
    );
    let addr = server.addr();
    let marker = marker(40);
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "bash", "arguments": {"command": format!("sleep {marker}")},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    let extra = format!(
        "{}MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: bash\r\n",
        server.auth()
    );
    // The answer's head comes with its first event: nothing is read.
    let mut stream = TcpStream::connect(&addr).unwrap();
    stream
        .write_all(post(&addr, &extra, &body).as_bytes())
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while toolgate_tests::processes_with(&format!("sleep {marker}")).is_empty() {
        assert!(Instant::now() < deadline, "the call never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The client closes the stream: the call is cancelled.
    drop(stream);
    assert_no_orphans(&format!("sleep {marker}"));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = server.log.lock().unwrap().clone();
        if log.contains("its client had closed the stream") {
            assert!(!log.contains("ERROR"), "{log}");
            // The cancelled call is a record its observers see: the
            // turn's cancellation does not interrupt them.
            assert!(!log.contains("observer failed"), "{log}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the drain event never came (at debug): {log}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A session opened on `server` (initialize + initialized): the headers a
/// request of it carries.
/// One `tools/call` over an HTTP session (`with`: its headers): the
/// result, read from the answer's stream.
fn http_tool_call(addr: &str, with: &str, id: u64, tool: &str, args: Value) -> Value {
    http_rpc(
        addr,
        with,
        id,
        "tools/call",
        json!({"name": tool, "arguments": args}),
    )["result"]
        .clone()
}

/// One JSON-RPC request of a session (`with`: its headers); the answer
/// whole (`result` or `error`).
fn http_rpc(addr: &str, with: &str, id: u64, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
    let (head, mut reader) = open_request(addr, &post(addr, with, &body));
    assert!(head.starts_with("HTTP/1.1 200"), "{method}: {head}");
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            panic!("no answer to {method}");
        }
        let data = line.trim();
        let data = data.strip_prefix("data:").map_or(data, str::trim);
        if let Ok(v) = serde_json::from_str::<Value>(data)
            && v["id"] == id
        {
            return v;
        }
    }
}

fn session_headers(server: &HttpServer) -> String {
    let addr = server.addr();
    let (head, _) = open_request(&addr, &post(&addr, &server.auth(), INIT));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let session = header(&head, "mcp-session-id").expect("a session id");
    let with = format!(
        "{}Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-06-18\r\n",
        server.auth()
    );
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let (head, _) = open_request(&addr, &post(&addr, &with, initialized));
    assert!(head.starts_with("HTTP/1.1 202"), "{head}");
    with
}

/// Send `signal` to the server.
fn signal(server: &HttpServer, signal: &str) {
    let sent = Command::new("kill")
        .args([signal, &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// Until a new connection to `addr` is refused (the listener closed).
fn until_refused(addr: &str) {
    let start = Instant::now();
    while TcpStream::connect(addr).is_ok() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the server still accepts connections 5 s after the signal"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The server's exit status, within `within`.
fn exits_within(server: &mut HttpServer, within: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            return status;
        }
        assert!(
            start.elapsed() < within,
            "the server did not exit within {within:?}; log:\n{}",
            server.log.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Issue 32 (replicas behind a balancer): `/healthz` and `/readyz` answer
/// a probe that has no token; SIGTERM drains — the listener closes at
/// once, `/readyz` says 503 "draining" on a connection still open, and a
/// call in flight is answered (its result, not a cancellation) before the
/// server exits 0.
#[test]
fn http_sigterm_drains_the_calls_in_flight_and_the_probes_say_so() {
    let s = setup();
    let mut server = HttpServer::start_env(
        &s,
        &["--approve", "allow"],
        &[("RUST_LOG", "warn,toolgate_cli=info")],
    );
    let addr = server.addr();
    let probe = |path: &str| {
        exchange(
            &addr,
            &format!("GET {path} HTTP/1.1\r\nHost: balancer\r\nConnection: close\r\n\r\n"),
        )
    };
    let (status, _, body) = probe("/healthz");
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = probe("/readyz");
    assert_eq!(status, 200, "{body}");
    let ready: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(ready["ready"], true, "{body}");
    assert!(ready["generation"].as_u64().is_some(), "{body}");
    let (status, _, _) = exchange(
        &addr,
        "POST /readyz HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, 405);

    let with = session_headers(&server);
    // A call that takes a moment, in flight when the signal comes.
    let marker = format!("1.{}41", std::process::id() % 1000);
    let long = call(
        2,
        "bash",
        json!({"command": format!("sleep {marker}; echo drained-{marker}")}),
    );
    let (head, mut stream) = open_request(&addr, &post(&addr, &with, &long));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let started = Instant::now();
    while servers_with(&format!("sleep {marker}")).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the call never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // A balancer's probe connection, its request not yet complete.
    let mut probing = TcpStream::connect(&addr).unwrap();
    probing
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    probing
        .write_all(b"GET /readyz HTTP/1.1\r\nHost: balancer\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));

    signal(&server, "-TERM");
    until_refused(&addr);
    probing.write_all(b"\r\n").unwrap();
    let mut answer = String::new();
    let _ = probing.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("draining"), "{answer}");

    // The call in flight is answered, with its output.
    let mut body = String::new();
    let _ = stream.read_to_string(&mut body);
    let answers = messages(&body);
    let result = answers
        .iter()
        .find(|m| m["id"] == 2)
        .unwrap_or_else(|| panic!("no answer to the call in flight: {body}"));
    assert_eq!(result["result"]["isError"], false, "{result}");
    assert!(
        result.to_string().contains(&format!("drained-{marker}")),
        "{result}"
    );
    let status = exits_within(&mut server, Duration::from_secs(10));
    assert!(status.success(), "{status}");
    let log = server.log.lock().unwrap().clone();
    assert!(
        log.contains("every request in flight was answered"),
        "{log}"
    );
}

/// A call longer than `--drain-timeout-ms`: cancelled when the time is up
/// (its processes killed), and the server exits — a drain is bounded.
#[test]
fn http_a_drain_is_bounded_by_its_timeout() {
    let s = setup();
    let mut server = HttpServer::start_env(
        &s,
        &["--approve", "allow", "--drain-timeout-ms", "300"],
        &[("RUST_LOG", "warn,toolgate_cli=info")],
    );
    let addr = server.addr();
    let with = session_headers(&server);
    let marker = marker(42);
    let long = call(3, "bash", json!({"command": format!("sleep {marker}")}));
    let (head, _stream) = open_request(&addr, &post(&addr, &with, &long));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let started = Instant::now();
    while servers_with(&format!("sleep {marker}")).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the call never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let signalled = Instant::now();
    signal(&server, "-TERM");
    exits_within(&mut server, Duration::from_secs(10));
    assert!(
        signalled.elapsed() >= Duration::from_millis(300),
        "the server did not wait for the call in flight"
    );
    assert_no_orphans(&format!("sleep {marker}"));
    let log = server.log.lock().unwrap().clone();
    assert!(log.contains("--drain-timeout-ms passed"), "{log}");
}

/// Issue 42: the terminal tools over streamable HTTP with the bearer
/// token: a terminal one request opens is typed into, read as a screen
/// and closed by the next requests of the session — the host keeps it
/// between them.
#[test]
fn a_terminal_lives_across_the_requests_of_an_http_session() {
    let s = setup();
    let server = HttpServer::start(&s, &["--approve", "allow"]);
    let with = session_headers(&server);
    let addr = server.addr();
    let call = |id: u64, tool: &str, args: Value| http_tool_call(&addr, &with, id, tool, args);
    let opened = call(
        2,
        "terminal_open",
        json!({"command": "sh", "yield_ms": 300}),
    );
    let id = opened["structuredContent"]["terminal"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no terminal id: {opened}"))
        .to_string();
    let typed = call(
        3,
        "terminal_write",
        json!({"id": id, "input": "echo over-$((40+2))-http\n", "yield_ms": 1000}),
    );
    assert_ne!(typed["isError"], true, "{typed}");
    let screen = call(4, "terminal_screen", json!({"id": id}));
    let shown = screen["content"][0]["text"].as_str().unwrap_or_default();
    assert!(shown.contains("over-42-http"), "{screen}");
    let closed = call(5, "terminal_close", json!({"id": id}));
    assert_eq!(closed["structuredContent"]["status"], "closed", "{closed}");
}

/// The `lsp` tool over HTTP: pyright (npm), started by the first question
/// of a session, answers the next one warm, each request its own.
#[test]
#[cfg_attr(
    not(has_lsp_servers),
    ignore = "needs the language servers of tests/lsp/servers.txt: run `bash tests/lsp/setup-servers.sh target/tmp/lsp-servers`"
)]
fn a_language_server_answers_the_requests_of_an_http_session() {
    let s = setup();
    let mut config = std::fs::read_to_string(&s.config).unwrap();
    config.push_str(&format!(
        "[lsp.servers.pyright]\ncommand = \"{}\"\n",
        crate::lsp::npm_bin("pyright-langserver").display()
    ));
    std::fs::write(&s.config, config).unwrap();
    let work = s.work.path();
    std::fs::write(work.join("pyproject.toml"), "[project]\nname = \"demo\"\n").unwrap();
    std::fs::write(
        work.join("calc.py"),
        "def double(x: int) -> int:\n    return 2 * x\n",
    )
    .unwrap();
    std::fs::write(
        work.join("use.py"),
        "from calc import double\n\nprint(double(21))\n",
    )
    .unwrap();
    let server = HttpServer::start(&s, &["--approve", "allow"]);
    let with = session_headers(&server);
    let addr = server.addr();
    let call = |id: u64, args: Value| http_tool_call(&addr, &with, id, "lsp", args);
    let found = call(
        2,
        json!({"operation": "definition", "file": "use.py", "line": 3, "symbol": "double"}),
    );
    let text = found["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("calc.py:1:5: def double"), "{found}");
    let refs = call(
        3,
        json!({"operation": "references", "file": "calc.py", "line": 1, "symbol": "double"}),
    );
    assert_eq!(refs["structuredContent"]["count"], 3, "{refs}");
}

/// Issue 41: the host's skills over an HTTP session — the `skill` tool
/// and the prompts of the same skills.
#[test]
fn skills_are_a_tool_and_prompts_of_an_http_session() {
    let s = setup();
    let skills = s.work.path().join("team-skills");
    std::fs::create_dir_all(skills.join("triage")).unwrap();
    std::fs::write(
        skills.join("triage/SKILL.md"),
        "---\nname: triage\ndescription: Sort bug reports.\n---\nLabel, then assign.\n",
    )
    .unwrap();
    let mut config = std::fs::read_to_string(&s.config).unwrap();
    config.push_str(&format!(
        "[skills]\ndirs = [{:?}]\n",
        skills.display().to_string()
    ));
    std::fs::write(&s.config, config).unwrap();
    let server = HttpServer::start(&s, &["--approve", "allow"]);
    let with = session_headers(&server);
    let addr = server.addr();
    let loaded = http_tool_call(&addr, &with, 2, "skill", json!({"name": "triage"}));
    let text = loaded["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("Label, then assign."), "{loaded}");
    assert!(
        loaded["structuredContent"]["digest"]
            .as_str()
            .is_some_and(|d| d.starts_with("sha256:")),
        "{loaded}"
    );
    let listed = http_rpc(&addr, &with, 3, "prompts/list", json!({}));
    assert_eq!(listed["result"]["prompts"][0]["name"], "triage", "{listed}");
    let got = http_rpc(&addr, &with, 4, "prompts/get", json!({"name": "triage"}));
    let prompt = got["result"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(prompt.contains("Label, then assign."), "{got}");
}

/// Issue 41: `serve` over stdio offers the skills as prompts
/// (`prompts/list`, `prompts/get`, with `listChanged`), and a skill added
/// to a watched directory is said with `notifications/prompts/list_changed`
/// (and, the `skill` tool's description changing, `tools/list_changed`).
#[test]
fn skills_are_prompts_of_a_stdio_session_and_a_new_one_is_said() {
    let s = setup();
    let skills = s.work.path().join("team-skills");
    let put = |name: &str, description: &str| {
        std::fs::create_dir_all(skills.join(name)).unwrap();
        std::fs::write(
            skills.join(name).join("SKILL.md"),
            format!("---\nname: {name}\ndescription: {description}\n---\nSteps of {name}.\n"),
        )
        .unwrap();
    };
    put("release", "Cut a release.");
    let mut config = std::fs::read_to_string(&s.config).unwrap();
    config.push_str(&format!(
        "[skills]\ndirs = [{:?}]\n",
        skills.display().to_string()
    ));
    std::fs::write(&s.config, config).unwrap();
    let mut raw = Raw::start(&s, &["--approve", "allow", "--watch-debounce-ms", "20"]);
    raw.kill_after(Duration::from_secs(90));
    raw.send(INIT);
    let init = raw.answer(1);
    assert_eq!(
        init["result"]["capabilities"]["prompts"]["listChanged"], true,
        "{init}"
    );
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    raw.send(r#"{"jsonrpc":"2.0","id":2,"method":"prompts/list"}"#);
    let listed = raw.answer(2);
    let prompts = listed["result"]["prompts"].as_array().expect("prompts");
    assert_eq!(prompts.len(), 1, "{listed}");
    assert_eq!(prompts[0]["name"], "release");
    assert_eq!(prompts[0]["description"], "Cut a release.");
    raw.send(r#"{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"release"}}"#);
    let got = raw.answer(3);
    let message = &got["result"]["messages"][0];
    assert_eq!(message["role"], "user", "{got}");
    let text = message["content"]["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("<skill name=\"release\" digest=\"sha256:")
            && text.contains("Steps of release."),
        "{text}"
    );
    raw.send(r#"{"jsonrpc":"2.0","id":4,"method":"prompts/get","params":{"name":"nope"}}"#);
    let missing = raw.answer(4);
    assert!(missing.get("error").is_some(), "{missing}");

    put("hotfix", "Patch production.");
    let (mut prompts_said, mut tools_said) = (false, false);
    while !(prompts_said && tools_said) {
        let v = raw.read();
        prompts_said |= v["method"] == "notifications/prompts/list_changed";
        tools_said |= v["method"] == "notifications/tools/list_changed";
    }
    raw.send(r#"{"jsonrpc":"2.0","id":5,"method":"prompts/list"}"#);
    let listed = raw.answer(5);
    let names: Vec<&str> = listed["result"]["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["hotfix", "release"], "{listed}");
    raw.send(r#"{"jsonrpc":"2.0","id":6,"method":"tools/list"}"#);
    let tools = raw.answer(6);
    let skill = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "skill")
        .cloned()
        .expect("the skill tool");
    let description = skill["description"].as_str().unwrap();
    assert!(
        description.contains("- hotfix: Patch production.")
            && description.contains("- release: Cut a release."),
        "{description}"
    );
}

/// Issue 41: the session's goal over HTTP — set, read back, completed.
#[test]
fn a_goal_is_set_and_completed_over_http() {
    let s = setup();
    let server = HttpServer::start(&s, &["--approve", "allow"]);
    let with = session_headers(&server);
    let addr = server.addr();
    let call = |id: u64, tool: &str, args: Value| http_tool_call(&addr, &with, id, tool, args);
    let created = call(2, "create_goal", json!({"objective": "Answer over HTTP"}));
    assert_eq!(
        created["structuredContent"]["goal"]["status"], "active",
        "{created}"
    );
    let again = call(3, "create_goal", json!({"objective": "A second one"}));
    assert_eq!(again["isError"], true, "{again}");
    assert_eq!(
        again["_meta"]["toolgate/error"]["code"], "GOAL_EXISTS",
        "{again}"
    );
    let done = call(
        4,
        "update_goal",
        json!({"status": "complete", "note": "answered"}),
    );
    assert_eq!(
        done["structuredContent"]["goal"]["status"], "complete",
        "{done}"
    );
    let read = call(5, "get_goal", json!({}));
    let text = read["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("Answer over HTTP") && text.contains("Note: answered"),
        "{read}"
    );
}

/// Issue 41: `ask_user_question` through `serve` over stdio, answered by
/// the client with the official Python SDK's elicitation callback: one
/// form whose schema is the options (a titled single-select enum, a
/// multi-select array, an optional answer in the user's own words each);
/// a declined form is a clear answer to the model.
#[test]
fn questions_are_a_form_elicitation_answered_by_the_client() {
    let python = python();
    let s = setup();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/questions_client.py");
    let run = |answer: &str| -> Value {
        let mut target = vec![
            "--cwd".to_string(),
            s.work.path().display().to_string(),
            "--env".to_string(),
            format!("TOOLGATE_CACHE_DIR={}", cache_dir().display()),
            "--env".to_string(),
            format!("XDG_STATE_HOME={}", s.state_dir().display()),
            "--answer".to_string(),
            answer.to_string(),
            "--stdio".to_string(),
            toolgate_bin().display().to_string(),
        ];
        target.extend(s.args(&["--approve", "client"]));
        let out = Command::new(&python)
            .arg(&script)
            .args(&target)
            .output()
            .expect("run the questions client");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "the client failed: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("the client's JSON")
    };
    let report =
        run(r#"{"Stack": "Rust", "Extras": ["CI", "Docs"], "Extras (other)": "and a license"}"#);
    let form = report["elicitations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| {
            e["requestedSchema"]["properties"].is_object()
                && !e["requestedSchema"]["properties"]
                    .as_object()
                    .unwrap()
                    .is_empty()
        })
        .cloned()
        .unwrap_or_else(|| panic!("no question form in {report}"));
    let props = &form["requestedSchema"]["properties"];
    assert_eq!(props["Stack"]["oneOf"][0]["const"], "Rust", "{form}");
    assert_eq!(
        props["Stack"]["oneOf"][0]["title"], "Rust — compiled, safe",
        "{form}"
    );
    assert_eq!(props["Extras"]["type"], "array", "{form}");
    assert_eq!(
        props["Extras"]["items"]["anyOf"][1]["const"], "Docs",
        "{form}"
    );
    assert_eq!(props["Stack (other)"]["type"], "string", "{form}");
    assert!(
        form["message"]
            .as_str()
            .unwrap()
            .contains("Stack: Which language?"),
        "{form}"
    );
    let result = &report["result"];
    assert_ne!(result["isError"], true, "{report}");
    assert_eq!(
        result["content"][0]["text"],
        "The user answered:\n- Stack: Rust\n- Extras: CI, Docs; in their words: and a license\n",
        "{report}"
    );
    assert_eq!(
        result["structuredContent"]["answeredBy"], "mcp-elicitation",
        "{report}"
    );

    let declined = run("decline");
    let text = declined["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.starts_with("The user declined to answer"),
        "{declined}"
    );

    // A client answering what was not asked: nothing is taken from it.
    let lie = run(r#"{"Stack": "Go"}"#);
    assert_eq!(lie["result"]["isError"], true, "{lie}");
    let text = lie["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("does not fit"), "{lie}");
}

/// A stateless client (2026-07-28, the Python SDK's default mode over
/// HTTP, `--approve client`): `ask_user_question` comes back as an
/// `InputRequiredResult` carrying the form, and the SDK's retry with the
/// answer completes the call. A Code Mode program asking twice in one call
/// gets each form once, and its approval once: the earlier answers come
/// back to the server in the `requestState` (a retry carries only the
/// latest round's answers).
#[test]
fn questions_reach_a_stateless_client_as_input_required() {
    let python = python();
    let s = setup();
    let server = HttpServer::start(&s, &["--code-mode"]);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/questions_client.py");
    let run = |extra: &[&str]| -> Value {
        let out = Command::new(&python)
            .arg(&script)
            .args(server.client_target())
            .args(["--mode", "auto", "--answer"])
            .arg(r#"{"Stack": "Rust", "Extras": ["CI"], "Color": "Blue"}"#)
            .args(extra)
            .output()
            .expect("run the questions client");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "the client failed: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("the client's JSON")
    };
    let forms = |report: &Value| -> Vec<String> {
        report["elicitations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let mut keys: Vec<String> = e["requestedSchema"]["properties"]
                    .as_object()
                    .unwrap()
                    .keys()
                    .cloned()
                    .collect();
                keys.sort();
                keys.join(",")
            })
            .collect()
    };
    let report = run(&["--program"]);
    let text = report["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_ne!(report["result"]["isError"], true, "{report}");
    assert!(text.contains(r#"[["Rust","CI"],["Blue"]]"#), "{report}");
    // The approval `run_code` asks for (an empty form) and each
    // question's form, each once, over three rounds.
    assert_eq!(
        forms(&report),
        [
            "",
            "Extras,Extras (other),Stack,Stack (other)",
            "Color,Color (other)"
        ],
        "each form asked once: {report}"
    );
}

/// Issue 41, the session's own history over stdio: each `serve` process is
/// a session; the next one lists the earlier one and finds its calls (the
/// operator's own, on the operator's machine: calls with no caller that
/// came over stdio or `run`), and is not itself the earlier one.
#[test]
fn over_stdio_the_history_tools_read_the_earlier_local_sessions() {
    let s = setup();
    s.configure("[plugins.history]\nenabled = true\n");
    {
        let mut raw = Raw::start(&s, &["--approve", "allow"]);
        raw.handshake();
        raw.send(&call(2, "echo", json!({"text": "first-stdio-mark"})));
        let v = raw.answer(2);
        assert_eq!(v["result"]["isError"], false, "{v}");
    }
    let mut raw = Raw::start(&s, &["--approve", "allow"]);
    raw.handshake();
    raw.send(&call(2, "session_list", json!({})));
    let v = raw.answer(2);
    let sessions = v["result"]["structuredContent"]["sessions"].clone();
    assert_eq!(sessions.as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(sessions[0]["current"], false, "{v}");
    assert_eq!(sessions[0]["tools"], json!(["echo"]), "{v}");
    let id = sessions[0]["id"].as_str().unwrap().to_string();
    raw.send(&call(3, "session_search", json!({"query": "FIRST-STDIO"})));
    let v = raw.answer(3);
    let calls = &v["result"]["structuredContent"]["calls"];
    assert_eq!(calls[0]["session"], id.as_str(), "{v}");
    assert!(
        calls[0]["arguments"]
            .as_str()
            .unwrap()
            .contains("first-stdio-mark"),
        "{v}"
    );
    // The rendered text says the same.
    let text = v["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains(&id) && text.contains("echo {\"text\":\"first-stdio-mark\"}"),
        "{text}"
    );
    raw.send(&call(
        4,
        "session_read",
        json!({"session": id, "limit": 101}),
    ));
    let v = raw.answer(4);
    assert_eq!(v["result"]["isError"], true, "{v}");
    assert!(
        v["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("at most 100"),
        "{v}"
    );
    raw.send(&call(
        5,
        "session_read",
        json!({"session": "s-0000000000000000"}),
    ));
    let v = raw.answer(5);
    assert_eq!(v["result"]["isError"], true, "{v}");
    assert!(
        v["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("session_list shows the ids"),
        "{v}"
    );
}

/// Issue 46's soak, short, on every CI run: `tests/mcp/soak.py` (stdlib
/// Python: several HTTP clients, each call's text its own) against this
/// build's binary — 3,000 calls from 4 clients through `serve --http` while
/// `v.wasm` is replaced every 0.5 s, the audit record on. The script's own
/// checks: every call answered with its own text, `toolgate audit verify`
/// intact with exactly one `echo` record per call, no thread or descriptor
/// growth once warm, memory within 25% of its warm size. The full soak
/// (100,000 calls, release) is in BENCHMARKS.md.
#[test]
fn a_short_soak_answers_every_call_once_while_plugins_reload() {
    let guests = Path::new(fixtures::TOOLS).parent().unwrap();
    let out = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/soak.py"))
        .arg(toolgate_bin())
        .arg(guests)
        .args(["--calls", "3000", "--clients", "4", "--reload-every", "0.5"])
        .output()
        .expect("python3 runs");
    let report = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&report).unwrap_or_else(|e| {
        panic!(
            "no report ({e}): {report}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(out.status.success(), "{report}");
    assert_eq!(v["answered_right"], 3000, "{report}");
    assert_eq!(v["echo_call_records"], 3000, "{report}");
    assert!(v["reloads"].as_u64().unwrap() >= 2, "{report}");
}
