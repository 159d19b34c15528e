//! Issue 44, "Prove it": the agent harnesses people run — Claude Code,
//! Codex CLI, Gemini CLI and opencode, from npm
//! (tests/harness/harnesses.txt, installed by
//! `tests/harness/setup-harnesses.sh`) — with toolgate as their MCP
//! server, over stdio and over HTTP, with only the operator's documented
//! settings (`--approve allow` for a headless harness; each harness's own
//! MCP configuration), driven by a scripted model
//! (tests/harness/model_server.py speaks the Anthropic Messages API, the
//! OpenAI Responses and Chat Completions APIs and the Gemini API, and
//! answers with tool calls from a script).
//!
//! The model receives the listing, a file's content, a `bash` output and a
//! guard's denial (the goal-guard example, stopping work on a completed
//! goal); the test then holds what the model was shown against the audit
//! record: one record per call the model made, with its arguments, its
//! outcome, and — for the denial — the guard's reason as the model read
//! it. And the model is shown the text the tool rendered, never the
//! `structuredContent` JSON Claude Code and Codex would prefer (see
//! `serve --structured-content`).
//!
//! The record keeps digests of the result, not its text: `contentSha256`
//! is the SHA-256 of the content blocks every MCP client is given (see
//! docs/operators/audit.md). For every call it is recomputed from the text
//! the model received and must equal the record's, so a harness that
//! shows the model other text than the host recorded fails.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use toolgate_tests::{PluginDir, TempDir, fixtures, needs, toolgate_bin};

/// A harness's program in the install; gone now (the build saw it), the
/// test fails.
fn harness_bin(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("harnesses");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("harness/setup-harnesses.sh");
    needs::expect(
        "harnesses",
        toolgate_tests::installed(&script, &dir).map(|()| dir.join("node_modules/.bin").join(name)),
    )
}

/// The harnesses driven here.
#[derive(Clone, Copy)]
enum Harness {
    ClaudeCode,
    Codex,
    GeminiCli,
    Opencode,
}

impl Harness {
    /// How the harness names toolgate's tools to the model.
    fn prefix(self) -> &'static str {
        match self {
            Harness::ClaudeCode | Harness::Codex => "mcp__toolgate__",
            Harness::GeminiCli => "mcp_toolgate_",
            Harness::Opencode => "toolgate_",
        }
    }
}

/// How a harness reaches toolgate.
enum Mcp {
    /// It starts `toolgate` with these arguments and environment.
    Stdio(Vec<String>, Vec<(String, String)>),
    /// It connects to this URL with this bearer token.
    Http(String, String),
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
        // A plugin file's tool (the test fixture's), besides the built-ins.
        ("sleep", json!({"ms": 0})),
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
/// granted the goals' store, the test tools (`sleep`), and where the
/// server keeps its state.
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
        plugins.add("fixture-tools", fixtures::TOOLS);
        let work = Work { dir, plugins };
        work.compile_tools();
        work
    }

    /// Compile the test tools into the server's cache now (`toolgate
    /// check`, with the server's state directory: its cache key). `serve`
    /// answers at once and lists the tools of a plugin file that must
    /// compile only in its second generation, telling the client the list
    /// changed; Codex takes the list once, when it starts the server, and
    /// would never offer `sleep`. (The goal guard still compiles as the
    /// server starts: calls wait for a policy still loading.)
    fn compile_tools(&self) {
        let out = Command::new(toolgate_bin())
            .arg("check")
            .arg(self.plugins.path().join("fixture-tools.wasm"))
            // Not the work directory: its toolgate.toml configures the
            // goal guard, which `check` does not load.
            .current_dir(self.dir.path())
            .envs(self.serve_env())
            .env_remove("TOOLGATE_STATE_DIR")
            .output()
            .expect("run toolgate check");
        assert!(
            out.status.success(),
            "toolgate check: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
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

/// The harness, headless, against the scripted model on `port`, with
/// toolgate as its one MCP server; what it printed (its final answer in
/// it).
fn run(harness: Harness, work: &Work, port: u16, mcp: &Mcp) -> String {
    let mut cmd = match harness {
        Harness::ClaudeCode => {
            let server = match mcp {
                Mcp::Stdio(args, env) => json!({
                    "command": toolgate_bin(),
                    "args": args,
                    "env": env_json(env),
                }),
                Mcp::Http(url, token) => json!({
                    "type": "http",
                    "url": url,
                    "headers": {"Authorization": format!("Bearer {token}")},
                }),
            };
            let config = work.path("mcp.json");
            std::fs::write(
                &config,
                json!({"mcpServers": {"toolgate": server}}).to_string(),
            )
            .unwrap();
            let mut cmd = bare(work, harness_bin("claude"));
            cmd.args(["-p", "Work through the task.", "--output-format", "json"])
                .arg("--mcp-config")
                .arg(&config)
                .args(["--strict-mcp-config", "--allowedTools", "mcp__toolgate"])
                .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
                .env("ANTHROPIC_API_KEY", "sk-scripted")
                // The tools in the model's request itself, not behind
                // ToolSearch; no traffic but the model's.
                .env("ENABLE_TOOL_SEARCH", "false")
                .env("DISABLE_AUTOUPDATER", "1")
                .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
                .env("DISABLE_TELEMETRY", "1");
            cmd
        }
        Harness::Codex => {
            // A provider of its own for the scripted model; toolgate as
            // docs/operators/serving.md configures it for Codex (its tools
            // approved by Codex itself: toolgate's own policies decide).
            let server = match mcp {
                Mcp::Stdio(args, env) => format!(
                    "command = {}\nargs = {}\nenv = {{ {} }}\n",
                    toml_str(&toolgate_bin().display().to_string()),
                    format_args!(
                        "[{}]",
                        args.iter()
                            .map(|a| toml_str(a))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    env.iter()
                        .map(|(k, v)| format!("{k} = {}", toml_str(v)))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Mcp::Http(url, _) => format!(
                    "url = {}\nbearer_token_env_var = \"TOOLGATE_TOKEN\"\n",
                    toml_str(url)
                ),
            };
            let home = work.path("codex");
            std::fs::create_dir_all(&home).unwrap();
            std::fs::write(
                home.join("config.toml"),
                format!(
                    "model = \"scripted\"\nmodel_provider = \"scripted\"\napproval_policy = \"never\"\n\n\
                     [model_providers.scripted]\nname = \"scripted\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\n\
                     wire_api = \"responses\"\nenv_key = \"SCRIPTED_API_KEY\"\n\n\
                     [mcp_servers.toolgate]\n{server}default_tools_approval_mode = \"approve\"\n"
                ),
            )
            .unwrap();
            let mut cmd = bare(work, harness_bin("codex"));
            cmd.args(["exec", "--skip-git-repo-check", "Work through the task."])
                .env("CODEX_HOME", &home)
                .env("SCRIPTED_API_KEY", "sk-scripted");
            if let Mcp::Http(_, token) = mcp {
                cmd.env("TOOLGATE_TOKEN", token);
            }
            cmd
        }
        Harness::GeminiCli => {
            // Its `wait_for_previous` accepted, as docs/operators/serving.md says;
            // the server trusted (Gemini CLI asks before every tool of an
            // untrusted one, and headless that is a refusal).
            let server = match mcp {
                Mcp::Stdio(args, env) => {
                    let mut args = args.clone();
                    args.extend(["--accept-harness-arguments".into(), "gemini-cli".into()]);
                    json!({
                        "command": toolgate_bin(),
                        "args": args,
                        "env": env_json(env),
                        "trust": true,
                    })
                }
                Mcp::Http(url, token) => json!({
                    "httpUrl": url,
                    "headers": {"Authorization": format!("Bearer {token}")},
                    "trust": true,
                }),
            };
            let settings = work.path("home/.gemini");
            std::fs::create_dir_all(&settings).unwrap();
            std::fs::write(
                settings.join("settings.json"),
                json!({
                    "mcpServers": {"toolgate": server},
                    "security": {"auth": {"selectedType": "gemini-api-key"}},
                })
                .to_string(),
            )
            .unwrap();
            let mut cmd = bare(work, harness_bin("gemini"));
            cmd.args(["-p", "Work through the task.", "--output-format", "json"])
                .env("GEMINI_API_KEY", "scripted")
                .env("GOOGLE_GEMINI_BASE_URL", format!("http://127.0.0.1:{port}"))
                .env("GEMINI_CLI_TRUST_WORKSPACE", "true");
            cmd
        }
        Harness::Opencode => {
            // The scripted model as an OpenAI-compatible provider (the AI
            // SDK package opencode fetches from npm once, into a cache
            // the runs share).
            let server = match mcp {
                Mcp::Stdio(args, env) => {
                    let mut command = vec![toolgate_bin().display().to_string()];
                    command.extend(args.iter().cloned());
                    json!({
                        "type": "local",
                        "command": command,
                        "environment": env_json(env),
                    })
                }
                Mcp::Http(url, token) => json!({
                    "type": "remote",
                    "url": url,
                    "headers": {"Authorization": format!("Bearer {token}")},
                }),
            };
            let config = work.path("home/.config/opencode");
            std::fs::create_dir_all(&config).unwrap();
            std::fs::write(
                config.join("opencode.json"),
                json!({
                    "model": "scripted/scripted",
                    "provider": {"scripted": {
                        "npm": "@ai-sdk/openai-compatible",
                        "name": "Scripted",
                        "options": {"baseURL": format!("http://127.0.0.1:{port}/v1"), "apiKey": "sk-scripted"},
                        "models": {"scripted": {"name": "Scripted"}},
                    }},
                    "mcp": {"toolgate": server},
                    "autoupdate": false,
                    "share": "disabled",
                })
                .to_string(),
            )
            .unwrap();
            let mut cmd = bare(work, harness_bin("opencode"));
            cmd.args(["run", "Work through the task."]).env(
                "XDG_CACHE_HOME",
                PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("harnesses/cache"),
            );
            cmd
        }
    };
    let out = cmd
        .current_dir(work.path("work"))
        .stdin(Stdio::null())
        .output()
        .expect("run the harness");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the harness failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `program` with nothing of this process's environment but `PATH`, and a
/// home of its own.
fn bare(work: &Work, program: PathBuf) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", work.path("home"));
    cmd
}

/// The server's environment as a JSON object (the harnesses' JSON
/// configurations).
fn env_json(env: &[(String, String)]) -> Value {
    Value::Object(
        env.iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    )
}

/// A TOML basic string.
fn toml_str(s: &str) -> String {
    Value::String(s.to_string()).to_string()
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

/// The text blocks of a tool result exactly as the harness gave them to
/// the model, without the harness's own framing: Codex's first block
/// (`Wall time: … seconds\nOutput:`), Gemini CLI's `{"output":
/// "<untrusted_context>\n…\n</untrusted_context>"}` (and, for an error,
/// the MCP result it quotes whole in `{"error": "… with response: […]"}`).
/// Framing that changes makes the digest differ: the test fails, and says
/// what the model was shown.
fn seen_blocks(harness: Harness, result: &Value) -> Vec<String> {
    let texts = |blocks: &[Value]| -> Vec<String> {
        blocks
            .iter()
            .filter_map(|b| b["text"].as_str().map(str::to_string))
            .collect()
    };
    match (harness, &result["content"]) {
        (Harness::Codex, Value::Array(blocks)) => {
            let own = blocks
                .first()
                .and_then(|b| b["text"].as_str())
                .is_some_and(|t| t.starts_with("Wall time: ") && t.ends_with(" seconds\nOutput:"));
            texts(&blocks[usize::from(own)..])
        }
        (Harness::GeminiCli, Value::String(response)) => {
            // The model server logs Gemini's `functionResponse.response`
            // as JSON text.
            let response: Value = serde_json::from_str(response)
                .unwrap_or_else(|e| panic!("Gemini's response is not JSON ({e}): {response}"));
            if let Some(output) = response["output"].as_str() {
                let inner = output
                    .strip_prefix("<untrusted_context>\n")
                    .and_then(|o| o.strip_suffix("\n</untrusted_context>"))
                    .unwrap_or(output);
                return vec![inner.to_string()];
            }
            let error = response["error"].as_str().unwrap_or_default();
            let Some((_, quoted)) = error.split_once(" with response: ") else {
                return vec![error.to_string()];
            };
            let quoted: Value = serde_json::from_str(quoted)
                .unwrap_or_else(|e| panic!("Gemini's quoted result is not JSON ({e}): {quoted}"));
            texts(
                quoted[0]["functionResponse"]["response"]["content"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default(),
            )
        }
        (_, Value::Array(blocks)) => texts(blocks),
        (_, Value::String(s)) => vec![s.clone()],
        (_, other) => vec![other.to_string()],
    }
}

/// The audit record's `result.contentSha256` recomputed from the text
/// blocks the model was shown: the compact JSON of the blocks as the host
/// serialises its content (`[{"type":"text","text":T}, …]`).
fn content_digest(blocks: &[String]) -> String {
    let content: Vec<Value> = blocks
        .iter()
        .map(|text| json!({"type": "text", "text": text}))
        .collect();
    Sha256::digest(serde_json::to_vec(&content).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The scripted run, and what the model was shown against the record.
fn drive(harness: Harness, work: &Work, mcp: impl FnOnce() -> (Mcp, Option<Killed>)) {
    let script = work.path("script.json");
    let steps = steps();
    std::fs::write(
        &script,
        json!({
            "prefix": harness.prefix(),
            "steps": steps.iter().map(|(t, i)| json!({"tool": t, "input": i})).collect::<Vec<_>>(),
            "final": "All done.",
        })
        .to_string(),
    )
    .unwrap();
    let log = work.path("model.jsonl");
    let (_model, port) = model(&script, &log);
    let (mcp, server) = mcp();
    let printed = run(harness, work, port, &mcp);
    match harness {
        Harness::ClaudeCode => {
            let answer: Value = serde_json::from_str(printed.trim())
                .unwrap_or_else(|e| panic!("not JSON ({e}): {printed}"));
            assert_eq!(answer["result"], "All done.", "{answer}");
            assert_eq!(answer["is_error"], false, "{answer}");
        }
        Harness::Codex | Harness::Opencode => {
            assert!(printed.contains("All done."), "{printed}")
        }
        Harness::GeminiCli => {
            let answer: Value = serde_json::from_str(printed.trim())
                .unwrap_or_else(|e| panic!("not JSON ({e}): {printed}"));
            assert_eq!(answer["response"], "All done.", "{answer}");
        }
    }
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
            offered.contains(&format!("{}{tool}", harness.prefix()).as_str()),
            "{tool} not offered: {offered:?}"
        );
    }
    let last = requests.last().unwrap();
    assert_eq!(last["step"], steps.len(), "{last}");
    let results = last["results"].as_array().unwrap();
    let texts: Vec<String> = results.iter().map(shown).collect();
    let at = |tool: &str| steps.iter().position(|(t, _)| *t == tool).unwrap();
    let denied = at("todo_write");
    let listing = &texts[at("list_dir")];
    assert!(listing.contains("notes.txt"), "the listing: {listing}");
    let file = &texts[at("read")];
    assert!(file.contains("hello from notes"), "the file: {file}");
    // The rendered output, not `{"kind":"completed","exit_code":0,…}`.
    let bash = &texts[at("bash")];
    assert!(bash.contains("from-bash"), "bash: {bash}");
    assert!(!bash.contains("exit_code"), "bash: {bash}");
    let goal = &texts[at("create_goal")];
    assert!(
        goal.contains("Goal (active, set 0 min ago): Ship it"),
        "create_goal: {goal}"
    );
    assert!(
        texts[denied].contains("goal-guard: the goal is complete, so `todo_write` does not run"),
        "the denial: {}",
        texts[denied]
    );
    // Claude Code tells the model which results are errors (the others'
    // function outputs carry no such flag: the text says it).
    if let Harness::ClaudeCode = harness {
        for (i, r) in results.iter().enumerate() {
            assert_eq!(r["is_error"] == true, i == denied, "step {i}: {r}");
        }
    }

    // The record: one call per step, in order, with the arguments the
    // model sent and the outcome it was shown.
    let records = work.audited();
    let calls: Vec<&Value> = records
        .iter()
        .filter(|r| steps.iter().any(|(t, _)| r["tool"] == *t))
        .collect();
    assert_eq!(calls.len(), steps.len(), "{records:#?}");
    for (i, ((tool, input), record)) in steps.iter().zip(&calls).enumerate() {
        assert_eq!(record["tool"], *tool, "{record}");
        assert_eq!(&record["arguments"], input, "{record}");
        assert_eq!(record["result"]["isError"], i == denied, "{record}");
    }
    let denial = calls[denied]["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["verdict"] == "deny")
        .unwrap_or_else(|| panic!("no denial in {}", calls[denied]));
    assert_eq!(denial["stage"], "guard", "{denial}");
    assert_eq!(denial["decidedBy"], "goal-guard", "{denial}");
    let reason = denial["reason"].as_str().unwrap();
    assert!(
        texts[denied].contains(reason),
        "{reason} vs {}",
        texts[denied]
    );

    // The result the model was shown is the one recorded: the digest of
    // its content, recomputed from the text the model received, is the
    // record's — for every call.
    for (((tool, _), record), result) in steps.iter().zip(&calls).zip(results) {
        let blocks = seen_blocks(harness, result);
        assert_eq!(
            content_digest(&blocks),
            record["result"]["contentSha256"]
                .as_str()
                .unwrap_or_default(),
            "{tool}: the model was shown {blocks:?}, not the content the record holds ({record})\nas the harness sent it: {result}"
        );
    }
}

/// `toolgate serve` as the harness starts it (stdio), configured as
/// docs/operators/serving.md shows.
fn stdio(work: &Work) -> (Mcp, Option<Killed>) {
    (Mcp::Stdio(work.serve_args(&[]), work.serve_env()), None)
}

/// A running `toolgate serve --http`, reached with its bearer token.
fn http(work: &Work) -> (Mcp, Option<Killed>) {
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
    // Each call's record is written (to the kernel) before its result is
    // returned, so killing the server loses none.
    (Mcp::Http(url, token), Some(Killed(child)))
}

macro_rules! harness_test {
    ($name:ident, $harness:expr, $transport:ident) => {
        #[test]
        #[cfg_attr(
            not(has_harnesses),
            ignore = "needs the agent harnesses of tests/harness/harnesses.txt: run `bash tests/harness/setup-harnesses.sh target/tmp/harnesses`"
        )]
        fn $name() {
            let work = Work::new(stringify!($name));
            drive($harness, &work, || $transport(&work));
        }
    };
}

harness_test!(claude_code_over_stdio, Harness::ClaudeCode, stdio);
harness_test!(claude_code_over_http, Harness::ClaudeCode, http);
harness_test!(codex_over_stdio, Harness::Codex, stdio);
harness_test!(codex_over_http, Harness::Codex, http);
harness_test!(gemini_cli_over_stdio, Harness::GeminiCli, stdio);
harness_test!(gemini_cli_over_http, Harness::GeminiCli, http);
harness_test!(opencode_over_stdio, Harness::Opencode, stdio);
harness_test!(opencode_over_http, Harness::Opencode, http);
