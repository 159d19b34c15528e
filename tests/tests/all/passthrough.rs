//! Bridged servers' resources and prompts through `toolgate serve`, driven
//! by the official Python SDK (`tests/mcp/passthrough.py`) against
//! `@modelcontextprotocol/server-everything` (npm): listed namespaced
//! (`toolgate-mcp://everything/…`, `mcp__everything__…`), read and got
//! through those names (a template expanded too), every read in the audit
//! record, unknown names refused with the specification's codes, and a
//! scope that is denied the server's tools sees none of its resources or
//! prompts.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use toolgate_tests::{TempDir, toolgate_bin};

/// The Python client's report of one `toolgate serve` (stdio) run.
fn report(python: &Path, work: &Path, config: &Path, extra: &[&str]) -> Value {
    let mut serve = vec!["--no-elicitation", "--approve", "deny"];
    serve.extend(extra);
    drive(python, "passthrough.py", &[], work, config, &serve)
}

/// `tests/mcp/SCRIPT CLIENT_ARGS -- toolgate --config CONFIG serve SERVE_ARGS`
/// in `work`: the report (the last line of its output, JSON).
pub(crate) fn drive(
    python: &Path,
    script: &str,
    client: &[&str],
    work: &Path,
    config: &Path,
    serve: &[&str],
) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("mcp")
        .join(script);
    let out = Command::new(python)
        .arg(path)
        .args(client)
        .arg("--")
        .arg(toolgate_bin())
        .arg("--config")
        .arg(config)
        .arg("serve")
        .args(serve)
        .current_dir(work)
        .env(
            "TOOLGATE_CACHE_DIR",
            PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve-compile-cache"),
        )
        .env("XDG_STATE_HOME", work.join("state"))
        .env_remove("TOOLGATE_STATE_DIR")
        .env("RUST_LOG", "warn")
        .output()
        .unwrap_or_else(|e| panic!("run tests/mcp/{script}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{script} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{script} printed no report ({e}): {stdout}"))
}

/// The audit record's directory: beside the working directory (a
/// `TempDir`, which removes it too: `TempDir::beside`), whose grant (the
/// server's default) may not reach it.
fn records(work: &Path) -> PathBuf {
    let dir = work.with_extension("beside");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn config(work: &Path, extra: &str) -> PathBuf {
    let everything = crate::bridge::servers()
        .join("npm/node_modules/.bin/mcp-server-everything")
        .display()
        .to_string();
    let config = work.join("toolgate.toml");
    std::fs::write(
        &config,
        format!(
            "[audit]\npath = {:?}\n\
             [mcp.servers.everything]\ncommand = {everything:?}\nargs = [\"stdio\"]\n{extra}",
            records(work).join("audit.jsonl")
        ),
    )
    .unwrap();
    config
}

fn error_code(step: &Value) -> i64 {
    step["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("expected an error, got {step}"))
}

#[test]
#[cfg_attr(
    not(all(has_mcp_servers, has_mcp_client)),
    ignore = "needs the MCP servers of tests/mcp/servers.txt and the MCP Python SDK: run `bash tests/mcp/setup-servers.sh target/tmp/mcp-servers` and `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
fn bridged_resources_and_prompts_pass_through_namespaced_and_audited() {
    let python = crate::serve::python();
    let work = TempDir::new("passthrough");
    let config = config(work.path(), "");
    let r = report(&python, work.path(), &config, &[]);

    assert!(r["capabilities"]["resources"].is_object(), "{r}");
    assert!(r["capabilities"]["prompts"].is_object(), "{r}");
    let resources = r["resources"].as_array().unwrap_or_else(|| panic!("{r}"));
    assert!(!resources.is_empty(), "{r}");
    for res in resources {
        let uri = res["uri"].as_str().unwrap();
        assert!(
            uri.starts_with("toolgate-mcp://everything/demo://"),
            "not namespaced: {uri}"
        );
    }
    let templates = r["templates"].as_array().unwrap_or_else(|| panic!("{r}"));
    assert!(
        templates.iter().any(|t| t["uriTemplate"]
            == "toolgate-mcp://everything/demo://resource/dynamic/text/{resourceId}"),
        "{r}"
    );
    let prompts: Vec<&str> = r["prompts"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(
        prompts.contains(&"mcp__everything__args-prompt"),
        "{prompts:?}"
    );
    assert!(
        prompts.iter().all(|p| p.starts_with("mcp__everything__")),
        "{prompts:?}"
    );

    // Read back through the public URI; the contents name it too.
    let first = resources[0]["uri"].as_str().unwrap();
    let contents = &r["read"]["contents"][0];
    assert_eq!(contents["uri"], first, "{r}");
    assert!(
        contents["text"].as_str().is_some_and(|t| !t.is_empty()),
        "{r}"
    );
    let expanded = &r["read_template"]["contents"][0];
    assert_eq!(
        expanded["uri"], "toolgate-mcp://everything/demo://resource/dynamic/text/7",
        "{r}"
    );
    // A URI the server does not have: its own error, code kept, named.
    assert_eq!(error_code(&r["read_unknown"]), -32602, "{r}");
    assert!(
        r["read_unknown"]["error"]
            .as_str()
            .unwrap()
            .contains("`everything`"),
        "{r}"
    );
    // A raw URI of a namespaced server is not routed to it: the
    // specification's "resource not found".
    assert_eq!(error_code(&r["read_unrouted"]), -32002, "{r}");
    let text = r["get_args"]["messages"].to_string();
    assert!(text.contains("Lyon") && text.contains("ARA"), "{r}");
    // The server's own answer to a prompt it does not have keeps its code.
    assert_eq!(error_code(&r["get_unknown"]), -32602, "{r}");
    assert!(
        r["get_unknown"]["error"]
            .as_str()
            .unwrap()
            .contains("everything"),
        "{r}"
    );

    // Every read is in the audit record: the URI as the server knows it.
    let audit = std::fs::read_to_string(records(work.path()).join("audit.jsonl")).unwrap();
    let reads: Vec<Value> = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["kind"] == "resource_read")
        .collect();
    let raw = first.trim_start_matches("toolgate-mcp://everything/");
    assert!(
        reads.iter().any(|v| v["server"] == "everything"
            && v["uri"] == raw
            && v["bytes"].as_u64() > Some(0)),
        "{reads:?}"
    );
    assert!(
        reads
            .iter()
            .any(|v| v["uri"] == "demo://resource/dynamic/text/7"),
        "{reads:?}"
    );
    assert!(
        reads.iter().any(|v| v["error"].is_string()),
        "a refused read is recorded too: {reads:?}"
    );
}

#[test]
#[cfg_attr(
    not(all(has_mcp_servers, has_mcp_client)),
    ignore = "needs the MCP servers of tests/mcp/servers.txt and the MCP Python SDK: run `bash tests/mcp/setup-servers.sh target/tmp/mcp-servers` and `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
fn a_scope_denied_a_servers_tools_sees_none_of_its_resources_or_prompts() {
    let python = crate::serve::python();
    let work = TempDir::new("passthrough-scope");
    let config = config(
        work.path(),
        "[scopes.\"agents/closed\"]\ndeny = [\"mcp__everything__*\"]\n",
    );
    let r = report(&python, work.path(), &config, &["--scope", "agents/closed"]);
    assert_eq!(r["resources"], serde_json::json!([]), "{r}");
    assert_eq!(r["templates"], serde_json::json!([]), "{r}");
    assert_eq!(r["prompts"], serde_json::json!([]), "{r}");
    assert_eq!(
        error_code(&r["get_args"]),
        -32602,
        "a prompt of a server the scope cannot see is unknown: {r}"
    );
}

/// Issue 27, item 1 with a bridged server: its `notifications/tools/list_changed`
/// reaches a 2026-07-28 client listening with `subscriptions/listen` (the
/// official Python SDK, `tests/mcp/letter.py`), and the new tool is listed.
#[test]
#[cfg_attr(
    not(has_mcp_client),
    ignore = "needs the MCP Python SDK from PyPI: run `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
fn a_bridged_servers_list_change_reaches_a_listening_client() {
    let python = crate::serve::python();
    let work = TempDir::new("listen-bridged");
    let script = work.path().join("conformance_server.py");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/conformance_server.py"),
        &script,
    )
    .unwrap();
    let trigger = work.path().join("trigger");
    let config = work.path().join("toolgate.toml");
    std::fs::write(
        &config,
        format!(
            "[mcp.servers.conf]\ncommand = {:?}\nargs = [{:?}, \"--appear-on\", {:?}]\n",
            python.display().to_string(),
            script.display().to_string(),
            trigger.display().to_string()
        ),
    )
    .unwrap();
    let w = |p: &Path| p.display().to_string();
    let args = vec![
        "listen".to_string(),
        "--cwd".to_string(),
        w(work.path()),
        "--env".to_string(),
        format!(
            "TOOLGATE_CACHE_DIR={}",
            w(&PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve-compile-cache"))
        ),
        "--env".to_string(),
        format!("XDG_STATE_HOME={}", w(&work.path().join("state"))),
        "--stdio".to_string(),
        w(&toolgate_bin()),
        "--config".to_string(),
        w(&config),
        "serve".to_string(),
        "--approve".to_string(),
        "deny".to_string(),
    ];
    let report = crate::serve::run_letter(&python, &args, || {
        std::fs::write(&trigger, "").unwrap();
    });
    assert_eq!(report["protocol"], "2026-07-28", "{report}");
    assert_eq!(report["event"], "ToolsListChanged", "{report}");
    let tools = report["tools"].as_array().unwrap();
    assert!(
        tools.contains(&Value::from("mcp__conf__appeared")),
        "{report}"
    );
}

/// A bridged server that pages its resources without end, answers a read
/// with 9 MiB, never answers another, and gives prompts of 2000 messages:
/// each is cut off or refused naming the limit, within the server's
/// deadline, and the host keeps serving.
#[test]
#[cfg_attr(
    not(has_mcp_client),
    ignore = "needs the MCP Python SDK from PyPI: run `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
fn a_hostile_servers_resources_and_prompts_are_bounded() {
    let work = TempDir::new("passthrough-hostile");
    let config = crate::conformance::bridging_conformance_server(
        work.path(),
        "hostile",
        ", \"--hostile\"",
        "timeout_ms = 1500\n",
    );
    let mut raw = crate::bridge::Raw::start(&config, work.path());
    let started = std::time::Instant::now();
    let listed = raw.request("resources/list", serde_json::json!({}));
    assert_eq!(
        listed["result"]["resources"],
        serde_json::json!([]),
        "{listed}"
    );
    let huge = raw.request(
        "resources/read",
        serde_json::json!({"uri": "toolgate-mcp://hostile/test://huge"}),
    );
    assert_eq!(huge["error"]["code"], -32603, "{huge}");
    assert!(
        huge["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_content_bytes"),
        "{huge}"
    );
    let slow = raw.request(
        "resources/read",
        serde_json::json!({"uri": "toolgate-mcp://hostile/test://slow"}),
    );
    assert!(
        slow["error"]["message"]
            .as_str()
            .unwrap()
            .contains("within 1500 ms"),
        "{slow}"
    );
    let prompt = raw.request(
        "prompts/get",
        serde_json::json!({"name": "mcp__hostile__test_simple_prompt"}),
    );
    assert!(
        prompt["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_content_blocks"),
        "{prompt}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "bounded in time: {:?}",
        started.elapsed()
    );
    // Still serving: its tools, and a read that is within bounds.
    let text = raw.request(
        "resources/read",
        serde_json::json!({"uri": "toolgate-mcp://hostile/test://static-text"}),
    );
    assert_eq!(
        text["result"]["contents"][0]["uri"], "toolgate-mcp://hostile/test://static-text",
        "{text}"
    );
    let tools = raw.request("tools/list", serde_json::json!({}));
    assert!(
        tools["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "mcp__hostile__test_simple_text"),
        "{tools}"
    );
}

/// `tests/mcp/asking_client.py CLIENT_ARGS -- toolgate … serve` with
/// `config`: its report.
fn asking(python: &Path, work: &Path, config: &Path, client: &[&str]) -> Value {
    drive(
        python,
        "asking_client.py",
        client,
        work,
        config,
        &["--approve", "allow"],
    )
}

/// Issue 45: what a bridged server asks of its client during a call — its
/// user (elicitation), its model (sampling) — reaches toolgate's own
/// client, and the answer goes back; its progress reaches the client as
/// the call's. Only what the operator lets the server ask: by default
/// toolgate declares neither (server-everything then does not even offer
/// the tools that ask). A client that cannot answer is said to at once.
#[test]
#[cfg_attr(
    not(all(has_mcp_servers, has_mcp_client)),
    ignore = "needs the MCP servers of tests/mcp/servers.txt and the MCP Python SDK: run `bash tests/mcp/setup-servers.sh target/tmp/mcp-servers` and `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
fn a_bridged_servers_questions_reach_the_calls_client_and_its_answers_return() {
    let python = crate::serve::python();
    let work = TempDir::new("asking");
    let cfg = config(work.path(), "elicitation = true\nsampling = true\n");
    let r = asking(&python, work.path(), &cfg, &[]);
    let calls = &r["calls"];
    let elicited = calls["trigger-elicitation-request"]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"));
    assert!(
        elicited.contains("User provided the requested information")
            && elicited.contains("Ada Lovelace"),
        "{r}"
    );
    let sampled = calls["trigger-sampling-request"]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"));
    assert!(
        sampled.contains("the model's answer, from the client"),
        "{r}"
    );
    assert_eq!(r["asked"].as_array().map(Vec::len), Some(2), "{r}");
    assert!(
        r["asked"][1]["sampling"][0]
            .as_str()
            .unwrap()
            .contains("say hi"),
        "{r}"
    );
    // Progress: the call's own start (0), then the server's four steps as
    // fractions of the call, each above the last.
    assert_eq!(
        calls["trigger-long-running-operation"]["isError"], false,
        "{r}"
    );
    let progress: Vec<f64> = r["progress"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[0].as_f64().unwrap())
        .collect();
    // The server's last report (1.0) and its result leave it together: the
    // client may take the result first and drop the report (its token is
    // done), so only the steps before it are certain.
    assert!(progress.contains(&0.25) && progress.contains(&0.75), "{r}");
    assert!(progress.windows(2).all(|w| w[0] < w[1]), "{r}");
    // The record says what the server asked and what the client did.
    let text = std::fs::read_to_string(records(work.path()).join("audit.jsonl")).unwrap();
    let record = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| {
            r["kind"] == "call" && r["tool"] == "mcp__everything__trigger-elicitation-request"
        })
        .unwrap_or_else(|| panic!("no record: {text}"));
    assert_eq!(record["notes"][0]["kind"], "server-request", "{record}");
    assert_eq!(record["notes"][0]["request"], "elicitation", "{record}");
    assert_eq!(record["notes"][0]["outcome"], "accept", "{record}");

    // A client that can answer neither: told at once, nothing hangs.
    let work = TempDir::new("asking-mute");
    let cfg = config(work.path(), "elicitation = true\nsampling = true\n");
    let r = asking(&python, work.path(), &cfg, &["--no-answers"]);
    for tool in ["trigger-elicitation-request", "trigger-sampling-request"] {
        let said = r["calls"][tool].to_string();
        assert!(said.contains("did not declare"), "{tool}: {r}");
    }

    // By default nothing is passed on: toolgate declares neither, and the
    // server offers no tool that would ask.
    let work = TempDir::new("asking-off");
    let cfg = config(work.path(), "");
    let r = asking(&python, work.path(), &cfg, &[]);
    let tools: Vec<&str> = r["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        !tools.contains(&"mcp__everything__trigger-elicitation-request"),
        "{tools:?}"
    );
    assert!(
        !tools.contains(&"mcp__everything__trigger-sampling-request"),
        "{tools:?}"
    );
    assert!(
        tools.contains(&"mcp__everything__trigger-long-running-operation"),
        "{tools:?}"
    );
}
