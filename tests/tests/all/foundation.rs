//! Issue 2: loading, listing, running, projection, bad plugins.

use std::collections::BTreeSet;

use serde_json::json;
use toolgate::policy::Role;
use toolgate::{ToolCall, TurnOptions};
use toolgate_tests::{PluginDir, fixtures, host, json, run};

#[tokio::test]
async fn loads_a_component_and_lists_its_tools() {
    let dir = PluginDir::new();
    dir.add("tools", fixtures::TOOLS);
    let host = host(&dir, "").await;
    let g = host.generation();
    assert!(g.problems.is_empty(), "{:?}", g.problems);
    assert_eq!(g.plugins.len(), 1);
    assert_eq!(g.plugins[0].name, "tools");
    assert_eq!(g.plugins[0].roles, vec![Role::Tool]);
    assert_eq!(g.plugins[0].wit_version, "0.2.8");
    let names: BTreeSet<_> = g.tools.keys().cloned().collect();
    for expected in [
        "echo",
        "fail",
        "crash",
        "spin",
        "sleep",
        "value",
        "defer",
        "finalizing",
    ] {
        assert!(names.contains(expected), "missing {expected} in {names:?}");
    }
    // Host metadata is kept, not lost: the spin tool declares a timeout.
    assert_eq!(g.tools["spin"].def.meta.timeout_ms, Some(200));
}

#[tokio::test]
async fn runs_a_call_end_to_end() {
    let dir = PluginDir::new();
    dir.add("tools", fixtures::TOOLS);
    let host = host(&dir, "").await;
    let record = run(&host, "echo", json!({"text": "hello"})).await;
    assert!(!record.is_error, "{record:?}");
    assert_eq!(record.text(), "hello");
    let v = json(&record);
    assert_eq!(v["id"], "c1");
    assert_eq!(v["name"], "echo");
    assert_eq!(v["isError"], false);
    assert_eq!(v["content"], json!([{"type": "text", "text": "hello"}]));
    // The canonical value never leaves the pipeline.
    assert!(v.get("value").is_none(), "{v}");
    assert!(v.get("error").is_none(), "{v}");
}

#[tokio::test]
async fn projection_has_exactly_name_description_parameters() {
    let dir = PluginDir::new();
    dir.add("tools", fixtures::TOOLS);
    let host = host(&dir, "").await;
    let tools = host.tools();
    assert!(tools.len() >= 8);
    for format in [
        toolgate_mcp::projection::ToolsFormat::Json,
        toolgate_mcp::projection::ToolsFormat::Anthropic,
        toolgate_mcp::projection::ToolsFormat::Openai,
    ] {
        let projected = toolgate_mcp::projection::project(&tools, format);
        for t in projected.as_array().unwrap() {
            let t = if format == toolgate_mcp::projection::ToolsFormat::Openai {
                assert_eq!(t["type"], "function");
                assert_eq!(t.as_object().unwrap().len(), 2, "{t}");
                &t["function"]
            } else {
                t
            };
            let keys: BTreeSet<_> = t.as_object().unwrap().keys().cloned().collect();
            let params = if format == toolgate_mcp::projection::ToolsFormat::Anthropic {
                "input_schema"
            } else {
                "parameters"
            };
            assert_eq!(
                keys,
                BTreeSet::from([
                    "name".to_string(),
                    "description".to_string(),
                    params.to_string()
                ]),
                "{t}"
            );
        }
        // Host metadata (timeouts, classifiers, presentation) never leaks.
        let text = projected.to_string();
        assert!(!text.contains("timeout"), "{text}");
        assert!(!text.contains("concurrency"), "{text}");
    }
}

#[tokio::test]
async fn a_bad_plugin_is_reported_by_file_and_reason_and_the_others_serve() {
    let dir = PluginDir::new();
    dir.add("tools", fixtures::TOOLS);
    dir.add_bytes("garbage", b"this is not webassembly at all");
    dir.add_bytes("core-module", b"\0asm\x01\0\0\0");
    dir.add_bytes("empty", b"");
    dir.add_bytes("truncated", &std::fs::read(fixtures::GUARD).unwrap()[..200]);
    dir.add("future", fixtures::FUTURE_VERSION);
    let host = host(&dir, "").await;
    let problems = host.problems();
    let find = |name: &str| {
        problems
            .iter()
            .find(|p| p.plugin == name)
            .unwrap_or_else(|| panic!("no problem reported for {name}: {problems:?}"))
    };
    let garbage = find("garbage");
    assert!(garbage.origin.ends_with("garbage.wasm"), "{garbage}");
    assert!(
        garbage.message.contains("not a WebAssembly file"),
        "{garbage}"
    );
    assert!(
        find("core-module")
            .message
            .contains("core WebAssembly module, not a component")
    );
    assert!(find("empty").message.contains("not a WebAssembly file"));
    assert!(
        find("truncated").message.contains("not a valid component"),
        "{}",
        find("truncated")
    );
    let future = find("future");
    assert!(
        future.message.contains("0.9.0") && future.message.contains("0.2.x"),
        "{future}"
    );
    // The good plugin loaded, but any of the broken ones might have been a
    // guard: the host refuses every call, naming them, until the operator
    // says they are optional.
    assert_eq!(host.generation().plugins.len(), 1);
    let refused = run(&host, "echo", json!({"text": "still here"})).await;
    assert_eq!(refused.code(), Some("DENIED"), "{refused:?}");
    let why = refused.text();
    for name in ["garbage", "core-module", "empty", "truncated", "future"] {
        assert!(why.contains(&format!("plugin `{name}`")), "{why}");
    }
    assert!(why.contains("optional = true"), "{why}");
    let optional = ["garbage", "core-module", "empty", "truncated", "future"]
        .iter()
        .map(|n| format!("[plugins.{n}]\noptional = true\n"))
        .collect::<String>();
    let host = toolgate_tests::host(&dir, &optional).await;
    let record = run(&host, "echo", json!({"text": "still here"})).await;
    assert!(!record.is_error, "{record:?}");
    assert_eq!(record.text(), "still here");
}

#[tokio::test]
async fn an_unknown_tool_is_a_structured_error() {
    let dir = PluginDir::new();
    dir.add("tools", fixtures::TOOLS);
    let host = host(&dir, "").await;
    let record = run(&host, "ecko", json!({"text": "x"})).await;
    assert!(record.is_error);
    let v = json(&record);
    assert_eq!(v["error"]["code"], "UNKNOWN_TOOL");
    assert_eq!(v["error"]["stage"], "materialize");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did you mean `echo`"),
        "{v}"
    );
    assert_eq!(v["content"][0]["type"], "text");
}

#[tokio::test]
async fn invalid_arguments_list_every_violation() {
    let dir = PluginDir::new();
    dir.add("tools", fixtures::TOOLS);
    let host = host(&dir, "").await;
    let record = run(&host, "echo", json!({"txt": 1})).await;
    let v = json(&record);
    assert_eq!(v["error"]["code"], "INVALID_ARGS");
    let violations = v["error"]["details"]["violations"].as_array().unwrap();
    let paths: BTreeSet<_> = violations
        .iter()
        .map(|x| x["path"].as_str().unwrap())
        .collect();
    assert!(paths.contains("/text"), "{v}");
    assert!(paths.contains("/txt"), "{v}");
}

#[tokio::test]
async fn a_batch_comes_back_in_model_order() {
    let dir = PluginDir::new();
    dir.add("tools", fixtures::TOOLS);
    let host = host(&dir, "").await;
    let calls = (0..6)
        .map(|i| ToolCall::new(format!("id{i}"), "echo", json!({"text": format!("t{i}")})))
        .collect();
    let records = host
        .execute_tool_calls(calls, &TurnOptions::default())
        .await
        .expect("no scheduler failure");
    let texts: Vec<_> = records.iter().map(|r| (r.id.clone(), r.text())).collect();
    assert_eq!(
        texts,
        (0..6)
            .map(|i| (format!("id{i}"), format!("t{i}")))
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_plugin_directory_that_does_not_exist_is_a_host_error() {
    let err = toolgate::Toolgate::builder()
        .runtime_options(toolgate_tests::test_runtime())
        .builtin_plugins(false)
        .plugin_dir("/definitely/not/here")
        .build()
        .await
        .err()
        .expect("a missing plugin directory is an error");
    assert!(err.to_string().contains("/definitely/not/here"), "{err}");
}

#[tokio::test]
async fn a_tool_whose_schema_is_refused_does_not_register_and_its_siblings_do() {
    let dir = PluginDir::new();
    dir.add("bad", fixtures::BAD_SCHEMA);
    let host = host(&dir, "").await;
    let g = host.generation();
    assert_eq!(g.tools.keys().collect::<Vec<_>>(), vec!["good"]);
    let problems: Vec<String> = host.problems().iter().map(|p| p.to_string()).collect();
    let find = |needle: &str| {
        problems
            .iter()
            .find(|p| p.contains(needle))
            .unwrap_or_else(|| panic!("no problem mentions {needle}: {problems:?}"))
            .clone()
    };
    let pattern = find("uses_pattern");
    assert!(
        pattern.contains("`pattern`") && pattern.contains("/properties/name"),
        "{pattern}"
    );
    assert!(find("not_object").contains("object"));
    assert!(find("bad name").contains("[A-Za-z0-9_-]"));
    assert_eq!(run(&host, "good", json!({"text": "ok"})).await.text(), "ok");
}
