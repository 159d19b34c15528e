//! Issue 44, "Prove it": an agent harness people run — Claude Code, from
//! npm (tests/harness/harnesses.txt, installed by
//! `tests/harness/setup-harnesses.sh`) — with toolgate as its MCP server,
//! over stdio and over HTTP, with only the operator's documented settings
//! (`--approve allow` for a headless harness; its own `--mcp-config`),
//! driven by a scripted model (tests/harness/model_server.py speaks the
//! Anthropic Messages API and answers with tool calls from a script).
//!
//! The model receives the listing, a file's content, a `bash` output and a
//! guard's denial (the goal-guard example, stopping work on a completed
//! goal); the test then holds what the model was shown against the audit
//! record: one record per call the model made, with its arguments, its
//! outcome, and — for the denial — the guard's reason as the model read
//! it. And the model is shown the text the tool rendered, never the
//! `structuredContent` JSON Claude Code would prefer (see `serve
//! --structured-content`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};
use toolgate_tests::{PluginDir, TempDir, fixtures, needs, toolgate_bin};

/// The harnesses' install; gone now (the build saw it), the test fails.
fn claude() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("harnesses");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("harness/setup-harnesses.sh");
    needs::expect(
        "harnesses",
        toolgate_tests::installed(&script, &dir).map(|()| dir.join("node_modules/.bin/claude")),
    )
}

/// A child killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The scripted model on a local port, logging to `log`.
fn model(script: &Path, log: &Path) -> (Killed, u16) {
    let server = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("harness/model_server.py");
    let mut child = Command::new("python3")
        .arg(server)
        .arg(script)
        .arg(log)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the scripted model");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .strip_prefix("listening ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("the model server said {line:?}"));
    (Killed(child), port)
}

/// What the model is scripted to call, in order, as the harness names
/// toolgate's tools (`mcp__toolgate__NAME`).
fn steps() -> Vec<(&'static str, Value)> {
    vec![
        ("list_dir", json!({"path": "."})),
        ("read", json!({"path": "notes.txt"})),
        ("bash", json!({"command": "echo from-bash"})),
        ("create_goal", json!({"objective": "Ship it"})),
        (
            "update_goal",
            json!({"status": "complete", "note": "shipped"}),
        ),
        (
            "todo_write",
            json!({"todos": [{"content": "more work", "status": "pending"}]}),
        ),
    ]
}

/// A working directory with a file to read, the goal-guard example
/// granted the goals' store, and where the server keeps its state.
struct Work {
    dir: TempDir,
    plugins: PluginDir,
}

impl Work {
    fn new(tag: &str) -> Work {
        let dir = TempDir::new(tag);
        for d in ["work", "home", "state"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        std::fs::write(dir.path().join("work/notes.txt"), "hello from notes\n").unwrap();
        std::fs::write(
            dir.path().join("work/toolgate.toml"),
            "[plugins.goal-guard.grants]\nkv_read = \"goals\"\n",
        )
        .unwrap();
        let plugins = PluginDir::new();
        plugins.add("goal-guard", fixtures::EXAMPLE_GOAL_GUARD_RS);
        Work { dir, plugins }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// `toolgate serve` as the operator's docs write it for a headless
    /// harness, plus where this test keeps its plugins and state.
    fn serve_args(&self, extra: &[&str]) -> Vec<String> {
        let mut args = vec![
            "--plugins".to_string(),
            self.plugins.path().display().to_string(),
            "serve".into(),
            "--approve".into(),
            "allow".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }

    fn serve_env(&self) -> Vec<(String, String)> {
        vec![
            (
                "XDG_STATE_HOME".into(),
                self.path("state").display().to_string(),
            ),
            (
                "TOOLGATE_CACHE_DIR".into(),
                self.path("cache").display().to_string(),
            ),
            ("RUST_LOG".into(), "warn".into()),
        ]
    }

    /// The audit record's call records, in order.
    fn audited(&self) -> Vec<Value> {
        let file = self.path("state/toolgate/audit.jsonl");
        std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|r| r["kind"] == "call")
            .collect()
    }
}

/// `claude -p` headless against the scripted model on `port`, with
/// `mcp` as its one MCP server; its JSON answer.
fn run_claude(work: &Work, port: u16, mcp: &Value) -> Value {
    let config = work.path("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"toolgate": mcp}}).to_string(),
    )
    .unwrap();
    let out = Command::new(claude())
        .args(["-p", "Work through the task.", "--output-format", "json"])
        .arg("--mcp-config")
        .arg(&config)
        .args(["--strict-mcp-config", "--allowedTools", "mcp__toolgate"])
        .current_dir(work.path("work"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", work.path("home"))
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
        .env("ANTHROPIC_API_KEY", "sk-scripted")
        // The tools in the model's request itself, not behind ToolSearch;
        // no traffic but the model's.
        .env("ENABLE_TOOL_SEARCH", "false")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_TELEMETRY", "1")
        .output()
        .expect("run claude");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "claude failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// The text of a tool result as the harness gave it to the model.
fn shown(result: &Value) -> String {
    match &result["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        other => other.to_string(),
    }
}

/// The scripted run, and what the model was shown against the record.
fn drive(work: &Work, mcp: impl FnOnce() -> (Value, Option<Killed>)) {
    let script = work.path("script.json");
    let steps = steps();
    std::fs::write(
        &script,
        json!({
            "prefix": "mcp__toolgate__",
            "steps": steps.iter().map(|(t, i)| json!({"tool": t, "input": i})).collect::<Vec<_>>(),
            "final": "All done.",
        })
        .to_string(),
    )
    .unwrap();
    let log = work.path("model.jsonl");
    let (_model, port) = model(&script, &log);
    let (mcp, server) = mcp();
    let answer = run_claude(work, port, &mcp);
    assert_eq!(answer["result"], "All done.", "{answer}");
    assert_eq!(answer["is_error"], false, "{answer}");
    drop(server);

    // What the model was shown: the last request holds every result.
    let requests: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let first = &requests[0];
    let offered: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t.as_str())
        .collect();
    for tool in ["list_dir", "read", "bash", "todo_write", "create_goal"] {
        assert!(
            offered.contains(&format!("mcp__toolgate__{tool}").as_str()),
            "{tool} not offered: {offered:?}"
        );
    }
    let last = requests.last().unwrap();
    assert_eq!(last["step"], steps.len(), "{last}");
    let results = last["results"].as_array().unwrap();
    let texts: Vec<String> = results.iter().map(shown).collect();
    assert!(texts[0].contains("notes.txt"), "the listing: {}", texts[0]);
    assert!(
        texts[1].contains("hello from notes"),
        "the file: {}",
        texts[1]
    );
    // The rendered output, not `{"kind":"completed","exit_code":0,…}`.
    assert!(texts[2].contains("from-bash"), "bash: {}", texts[2]);
    assert!(!texts[2].contains("exit_code"), "bash: {}", texts[2]);
    assert!(!texts[3].starts_with('{'), "create_goal: {}", texts[3]);
    assert_eq!(results[5]["is_error"], true, "{}", results[5]);
    assert!(
        texts[5].contains("goal-guard: the goal is complete, so `todo_write` does not run"),
        "the denial: {}",
        texts[5]
    );
    for (i, r) in results.iter().enumerate().take(5) {
        assert_ne!(r["is_error"], true, "step {i}: {r}");
    }

    // The record: one call per step, in order, with the arguments the
    // model sent and the outcome it was shown.
    let records = work.audited();
    let calls: Vec<&Value> = records
        .iter()
        .filter(|r| steps.iter().any(|(t, _)| r["tool"] == *t))
        .collect();
    assert_eq!(calls.len(), steps.len(), "{records:#?}");
    for ((tool, input), (record, result)) in steps.iter().zip(calls.iter().zip(results)) {
        assert_eq!(record["tool"], *tool, "{record}");
        assert_eq!(&record["arguments"], input, "{record}");
        assert_eq!(
            record["result"]["isError"],
            result["is_error"] == true,
            "{record}"
        );
    }
    let denial = calls[5]["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["verdict"] == "deny")
        .unwrap_or_else(|| panic!("no denial in {}", calls[5]));
    assert_eq!(denial["stage"], "guard", "{denial}");
    assert_eq!(denial["decidedBy"], "goal-guard", "{denial}");
    let reason = denial["reason"].as_str().unwrap();
    assert!(texts[5].contains(reason), "{reason} vs {}", texts[5]);
}

/// Claude Code runs `toolgate serve` itself (stdio), as
/// docs/operators.md configures it.
#[test]
#[cfg_attr(
    not(has_harnesses),
    ignore = "needs the agent harnesses of tests/harness/harnesses.txt: run `bash tests/harness/setup-harnesses.sh target/tmp/harnesses`"
)]
fn claude_code_over_stdio_shows_the_model_what_the_record_holds() {
    let work = Work::new("harness-claude-stdio");
    drive(&work, || {
        let env: serde_json::Map<String, Value> = work
            .serve_env()
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        let mcp = json!({
            "command": toolgate_bin(),
            "args": work.serve_args(&[]),
            "env": env,
        });
        (mcp, None)
    });
}

/// Claude Code reaches a running `toolgate serve --http` with its bearer
/// token.
#[test]
#[cfg_attr(
    not(has_harnesses),
    ignore = "needs the agent harnesses of tests/harness/harnesses.txt: run `bash tests/harness/setup-harnesses.sh target/tmp/harnesses`"
)]
fn claude_code_over_http_shows_the_model_what_the_record_holds() {
    let work = Work::new("harness-claude-http");
    drive(&work, || {
        let mut child = Command::new(toolgate_bin())
            .args(work.serve_args(&["--http", "127.0.0.1:0"]))
            .current_dir(work.path("work"))
            .envs(work.serve_env())
            .env_remove("TOOLGATE_STATE_DIR")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start serve --http");
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let url = loop {
            line.clear();
            assert!(
                stderr.read_line(&mut line).unwrap_or(0) > 0,
                "serve exited before listening"
            );
            if let Some(url) = line.trim().strip_prefix("toolgate: serving MCP at ") {
                break url.to_string();
            }
        };
        line.clear();
        stderr.read_line(&mut line).unwrap();
        let token_file = line
            .trim()
            .split_once("the token is in ")
            .map(|(_, p)| p.trim_end_matches(" (made now)").to_string())
            .unwrap_or_else(|| panic!("no token line: {line}"));
        let token = std::fs::read_to_string(token_file)
            .unwrap()
            .trim()
            .to_string();
        std::thread::spawn(move || {
            let mut line = String::new();
            while stderr.read_line(&mut line).unwrap_or(0) > 0 {
                line.clear();
            }
        });
        let mcp = json!({
            "type": "http",
            "url": url,
            "headers": {"Authorization": format!("Bearer {token}")},
        });
        // Each call's record is written (to the kernel) before its result
        // is returned, so killing the server loses none.
        (mcp, Some(Killed(child)))
    });
}
