//! Issue 41, goals: `create_goal`, `get_goal`, `update_goal` of the
//! built-in `goals` plugin, with Codex's semantics — one goal per agent
//! scope at a time, `complete` or `blocked` with a note, kept in the host's
//! store (so it survives a restart); pause, resume and clear are the
//! user's (`toolgate goals`, in `cli/tests`).

use serde_json::json;

use crate::catalog::{Bench, failed, ok};

/// A scope of this test's own: the benches share one state store.
fn scope(tag: &str) -> String {
    format!("goals-{tag}-{}", std::process::id())
}

#[tokio::test]
async fn one_goal_at_a_time_completed_then_the_next() {
    let b = Bench::new().await;
    let s = scope("one");
    let call = |tool: &'static str, args: serde_json::Value| {
        let (b, s) = (&b, s.clone());
        async move { b.call_in(&s, tool, args).await }
    };
    let t = ok(&call("get_goal", json!({})).await);
    assert_eq!(t, "No goal is set for this session.");
    failed(
        &call("update_goal", json!({"status": "complete", "note": "x"})).await,
        "NO_GOAL",
    );
    let r = call(
        "create_goal",
        json!({"objective": "Make the build green", "token_budget": 50000}),
    )
    .await;
    let t = ok(&r);
    assert!(
        t.starts_with("Goal (active, set 0 min ago): Make the build green"),
        "{t}"
    );
    assert!(t.contains("Token budget: 50000"), "{t}");
    let v = r.structured_content.clone().unwrap();
    assert_eq!(v["goal"]["status"], "active", "{v}");
    assert_eq!(v["goal"]["tokenBudget"], 50000, "{v}");

    let t = failed(
        &call("create_goal", json!({"objective": "Something else"})).await,
        "GOAL_EXISTS",
    );
    assert!(t.contains("Make the build green"), "{t}");
    // Another scope has its own.
    ok(&b
        .call_in(
            &scope("other"),
            "create_goal",
            json!({"objective": "Other work"}),
        )
        .await);

    let t = ok(&call(
        "update_goal",
        json!({"status": "blocked", "note": "needs the CI token"}),
    )
    .await);
    assert!(
        t.contains("Goal (blocked") && t.contains("Note: needs the CI token"),
        "{t}"
    );
    let t = ok(&call(
        "update_goal",
        json!({"status": "complete", "note": "green at abc123"}),
    )
    .await);
    assert!(
        t.contains("Goal (complete") && t.contains("a new goal may be set"),
        "{t}"
    );
    failed(
        &call("update_goal", json!({"status": "blocked", "note": "x"})).await,
        "GOAL_COMPLETE",
    );
    let t = ok(&call("create_goal", json!({"objective": "Ship it"})).await);
    assert!(t.contains("Goal (active") && t.contains("Ship it"), "{t}");

    // Bad shapes are refused before anything is stored.
    failed(
        &call("create_goal", json!({"objective": "  "})).await,
        "INVALID_INPUT",
    );
    failed(
        &call("create_goal", json!({"objective": "x".repeat(4001)})).await,
        "INVALID_INPUT",
    );
    failed(
        &call("update_goal", json!({"status": "paused", "note": "x"})).await,
        "INVALID_ARGS",
    );
    failed(
        &call("update_goal", json!({"status": "complete"})).await,
        "INVALID_ARGS",
    );
}

/// The goal is the host's state, not an instance's: a new host on the
/// same state store (a restart) finds it.
#[tokio::test]
async fn a_goal_survives_a_restart() {
    let s = scope("restart");
    {
        let b = Bench::new().await;
        ok(&b
            .call_in(&s, "create_goal", json!({"objective": "Outlive the host"}))
            .await);
        b.host.shutdown().await;
    }
    let b = Bench::new().await;
    let t = ok(&b.call_in(&s, "get_goal", json!({})).await);
    assert!(t.contains("Outlive the host"), "{t}");
}

/// A policy reads the goal: the `goal-guard` example, granted the `goals`
/// plugin's store read-only (`kv_read = "goals"`), refuses every tool that
/// is not read-only once the scope's goal is complete — read-only tools
/// and the goals tools still run, another scope is not touched. Without
/// the grant it does not load; `kv` and `kv_read` together, or a name
/// that is no plugin's, are refused saying so.
#[tokio::test]
async fn a_guard_reads_the_goal_through_kv_read_and_stops_the_work() {
    use toolgate_tests::{PluginDir, fixtures};
    let work = toolgate_tests::TempDir::new("goal-guard");
    let dir = PluginDir::new();
    dir.add("goal-guard", fixtures::EXAMPLE_GOAL_GUARD_RS);
    let build = |config: &str| {
        toolgate::Toolgate::builder()
            .runtime_options(toolgate_tests::test_runtime())
            .workdir(work.path())
            .plugin_dir(dir.path())
            .config(toolgate::HostConfig::parse(config, "test").unwrap())
            .state_store(std::sync::Arc::new(
                toolgate::store::sqlite::SqliteKv::memory(),
            ))
            .build()
    };
    let host = build("").await.unwrap();
    assert!(
        host.problems()
            .iter()
            .any(|p| p.plugin == "goal-guard" && p.message.contains("kv = true")),
        "{:?}",
        host.problems()
    );
    for (grants, says) in [
        ("kv = true\nkv_read = \"goals\"", "keep one"),
        ("kv_read = \"../goals\"", "name a plugin"),
    ] {
        let host = build(&format!("[plugins.goal-guard.grants]\n{grants}\n"))
            .await
            .unwrap();
        assert!(
            host.problems().iter().any(|p| p.message.contains(says)),
            "{grants}: {:?}",
            host.problems()
        );
    }

    let host = build("[plugins.goal-guard.grants]\nkv_read = \"goals\"\n")
        .await
        .unwrap();
    assert!(host.problems().is_empty(), "{:?}", host.problems());
    let call = |scope: &str, tool: &str, args: serde_json::Value| {
        let turn = toolgate::TurnOptions {
            agent_scope: scope.into(),
            ..Default::default()
        };
        let host = &host;
        let call = toolgate::ToolCall::new("c", tool, args);
        async move { host.call(call, &turn).await }
    };
    let todo = || json!({"todos": [{"content": "x", "status": "pending"}]});
    ok(&call("s", "create_goal", json!({"objective": "Ship it"})).await);
    ok(&call("s", "todo_write", todo()).await);
    ok(&call(
        "s",
        "update_goal",
        json!({"status": "complete", "note": "shipped"}),
    )
    .await);
    let r = call("s", "todo_write", todo()).await;
    assert!(r.is_error, "{r:?}");
    assert!(
        r.text()
            .contains("goal-guard: the goal is complete, so `todo_write` does not run"),
        "{}",
        r.text()
    );
    ok(&call("s", "get_goal", json!({})).await);
    ok(&call("s", "list_dir", json!({"path": "."})).await);
    ok(&call("other", "todo_write", todo()).await);
}
