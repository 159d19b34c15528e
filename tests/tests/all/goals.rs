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
