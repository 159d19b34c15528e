//! Issue 3: the conformance suite of the nine-point pipeline. Every rule of
//! the seed chapter (§3–§4, §7) and the DESIGN brief's pipeline section,
//! with real policy components built from source — and, where the rule is
//! about semantics rather than Wasm, the same scenario against native Rust
//! policies (`both!`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::json;
use toolgate::pipeline::{ApprovalAnswer, ApprovalRequest, Approver};
use toolgate::policy::Role;
use toolgate::{CallRecord, ToolCall, TurnOptions};
use toolgate_tests::both;
use toolgate_tests::stack::{Built, Source, Stack};

async fn echo(b: &Built) -> CallRecord {
    call(b, "echo", json!({"text": "hi"})).await
}

async fn call(b: &Built, tool: &str, args: serde_json::Value) -> CallRecord {
    b.host
        .call(ToolCall::new("c1", tool, args), &TurnOptions::default())
        .await
}

fn code(r: &CallRecord) -> &str {
    r.code().unwrap_or("OK")
}

fn stage(r: &CallRecord) -> String {
    r.error
        .as_ref()
        .map(|e| e.stage.to_string())
        .unwrap_or_default()
}

fn by(r: &CallRecord) -> String {
    r.error
        .as_ref()
        .and_then(|e| e.decided_by.clone())
        .unwrap_or_default()
}

struct Answer(ApprovalAnswer);

#[async_trait]
impl Approver for Answer {
    fn name(&self) -> &str {
        "test-approver"
    }
    async fn approve(&self, _request: &ApprovalRequest) -> ApprovalAnswer {
        self.0.clone()
    }
}

fn full_stack() -> Stack {
    Stack {
        pre: vec![("pre-a", "pass")],
        guards: vec![("guard-a", "pass")],
        around: vec![("around-a", "pass")],
        post: vec![("post-a", "pass")],
        finalizers: vec![("fin-a", "keep")],
        ..Stack::new()
    }
}

// ---- A. materialize -------------------------------------------------------

both!(code_mode_refuses_before_any_policy, |src| {
    let b = full_stack().build(src).await;
    let turn = TurnOptions {
        code_mode: true,
        ..Default::default()
    };
    let r = b
        .host
        .call(ToolCall::new("c1", "echo", json!({"text": "x"})), &turn)
        .await;
    assert_eq!(code(&r), "DENIED");
    assert_eq!(stage(&r), "materialize");
    assert_eq!(by(&r), "code-mode");
    for (role, name) in [
        (Role::PreExecute, "pre-a"),
        (Role::Guard, "guard-a"),
        (Role::ExecuteAround, "around-a"),
        (Role::PostExecute, "post-a"),
        (Role::Finalizer, "fin-a"),
    ] {
        assert_eq!(b.calls(role, name), 0, "{role} {name} saw a collapsed call");
    }
    // The result is still recorded (observers see every call).
    assert_eq!(b.seen.lock().unwrap().len(), 1);
});

both!(code_mode_lets_run_code_through_materialize, |src| {
    let b = full_stack().build(src).await;
    let turn = TurnOptions {
        code_mode: true,
        ..Default::default()
    };
    let r = b
        .host
        .call(ToolCall::new("c1", "run_code", json!({})), &turn)
        .await;
    // Not refused by Code Mode: it reaches the lookup (no run_code here).
    assert_eq!(code(&r), "UNKNOWN_TOOL");
});

both!(a_cancelled_turn_is_aborted_before_dispatch, |src| {
    let b = full_stack().build(src).await;
    let turn = TurnOptions::default();
    turn.cancel.cancel();
    let r = b
        .host
        .call(ToolCall::new("c1", "echo", json!({"text": "x"})), &turn)
        .await;
    assert_eq!(code(&r), "ABORTED_BEFORE_DISPATCH");
    assert_eq!(b.calls(Role::PreExecute, "pre-a"), 0);
});

both!(invalid_arguments_never_reach_a_policy, |src| {
    let b = full_stack().build(src).await;
    let r = call(&b, "echo", json!({"text": 5})).await;
    assert_eq!(code(&r), "INVALID_ARGS");
    assert_eq!(b.calls(Role::PreExecute, "pre-a"), 0);
    assert_eq!(b.calls(Role::Guard, "guard-a"), 0);
});

// ---- B. pre-execute waterfall, approval, guards ---------------------------

both!(every_stage_runs_once_for_an_allowed_call, |src| {
    let b = full_stack().build(src).await;
    let r = echo(&b).await;
    assert_eq!(code(&r), "OK", "{r:?}");
    for (role, name) in [
        (Role::PreExecute, "pre-a"),
        (Role::Guard, "guard-a"),
        (Role::ExecuteAround, "around-a"),
        (Role::PostExecute, "post-a"),
        (Role::Finalizer, "fin-a"),
    ] {
        assert_eq!(b.calls(role, name), 1, "{role} {name}");
    }
});

both!(a_pre_execute_deny_stops_the_call, |src| {
    let b = Stack {
        pre: vec![("pre-a", "deny")],
        around: vec![("around-a", "pass")],
        ..Stack::new()
    }
    .build(src)
    .await;
    let r = echo(&b).await;
    assert_eq!(code(&r), "DENIED");
    assert_eq!(stage(&r), "pre_execute");
    assert_eq!(by(&r), "pre-a");
    assert!(r.text().contains("pre-a denies echo"), "{r:?}");
    assert_eq!(
        b.calls(Role::ExecuteAround, "around-a"),
        0,
        "the body must not run"
    );
});

both!(an_outer_hook_overrides_an_inner_deny, |src| {
    let b = Stack {
        pre: vec![("outer", "override"), ("inner", "deny")],
        ..Stack::new()
    }
    .build(src)
    .await;
    let r = echo(&b).await;
    assert_eq!(code(&r), "OK", "{r:?}");
    assert_eq!(
        b.calls(Role::PreExecute, "inner"),
        1,
        "the inner listener was heard"
    );
});

both!(a_guard_denial_stands_after_an_override, |src| {
    let b = Stack {
        pre: vec![("outer", "override"), ("inner", "deny")],
        guards: vec![("guard-a", "deny")],
        ..Stack::new()
    }
    .build(src)
    .await;
    let r = echo(&b).await;
    assert_eq!(code(&r), "DENIED");
    assert_eq!(stage(&r), "guard");
    assert_eq!(by(&r), "guard-a");
});

both!(a_guard_denial_is_final_whatever_the_order, |src| {
    for guards in [
        vec![("g1", "pass"), ("g2", "deny")],
        vec![("g1", "deny"), ("g2", "pass")],
    ] {
        let b = Stack {
            pre: vec![("pre-a", "allow")],
            guards: guards.clone(),
            ..Stack::new()
        }
        .build(src)
        .await;
        let r = echo(&b).await;
        assert_eq!(code(&r), "DENIED", "{guards:?}");
        assert_eq!(stage(&r), "guard");
    }
});

both!(
    an_outer_listener_that_does_not_continue_skips_the_rest,
    |src| {
        let b = Stack {
            pre: vec![("outer", "skip"), ("inner", "deny")],
            ..Stack::new()
        }
        .build(src)
        .await;
        let r = echo(&b).await;
        assert_eq!(code(&r), "OK");
        assert_eq!(b.calls(Role::PreExecute, "inner"), 0);
    }
);

both!(a_passed_on_decision_keeps_its_author, |src| {
    let b = Stack {
        pre: vec![("outer", "pass"), ("inner", "deny")],
        ..Stack::new()
    }
    .build(src)
    .await;
    let r = echo(&b).await;
    assert_eq!(code(&r), "DENIED");
    assert_eq!(by(&r), "inner");
});

both!(a_trapping_hook_denies, |src| {
    let b = Stack {
        pre: vec![("pre-a", "trap")],
        ..Stack::new()
    }
    .build(src)
    .await;
    let r = echo(&b).await;
    assert_eq!(code(&r), "DENIED");
    assert_eq!(by(&r), "pre-a");
    assert!(r.text().contains("failing closed"), "{r:?}");
});

both!(a_hook_that_never_answers_denies, |src| {
    let b = Stack {
        pre: vec![("pre-a", "loop")],
        policy_timeout: Some(Duration::from_millis(100)),
        ..Stack::new()
    }
    .build(src)
    .await;
    let started = Instant::now();
    let r = echo(&b).await;
    assert_eq!(code(&r), "DENIED");
    assert!(r.text().contains("did not answer within 100 ms"), "{r:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
    // The host keeps serving.
    let b2 = Stack::new().build(src).await;
    assert_eq!(code(&echo(&b2).await), "OK");
});

#[tokio::test]
async fn next_runs_the_rest_of_the_chain_at_most_once() {
    // Wasm only: a component can call the import twice; a native hook
    // consumes its `PreNext`, so the type system already says "once".
    let b = Stack {
        pre: vec![("outer", "twice"), ("inner", "allow")],
        ..Stack::new()
    }
    .build(Source::Wasm)
    .await;
    let r = echo(&b).await;
    assert_eq!(code(&r), "OK", "{r:?}");
    assert_eq!(b.calls(Role::PreExecute, "inner"), 1);
}

both!(ask_without_an_approver_denies, |src| {
    let b = Stack {
        pre: vec![("pre-a", "ask")],
        guards: vec![("guard-a", "pass")],
        ..Stack::new()
    }
    .build(src)
    .await;
    let r = echo(&b).await;
    assert_eq!(code(&r), "DENIED");
    assert_eq!(stage(&r), "approval");
    assert!(r.text().contains("no approval service"), "{r:?}");
    // What the operator can do about it, named (issue 44).
    assert!(r.text().contains("--approve"), "{r:?}");
    assert_eq!(b.calls(Role::Guard, "guard-a"), 0);
});

both!(an_approved_ask_still_meets_the_guards, |src| {
    let approver: Arc<dyn Approver> = Arc::new(Answer(ApprovalAnswer::Approve));
    let ok = Stack {
        pre: vec![("pre-a", "ask")],
        guards: vec![("guard-a", "pass")],
        approver: Some(approver.clone()),
        ..Stack::new()
    }
    .build(src)
    .await;
    assert_eq!(code(&echo(&ok).await), "OK");
    let denied = Stack {
        pre: vec![("pre-a", "ask")],
        guards: vec![("guard-a", "deny")],
        approver: Some(approver),
        ..Stack::new()
    }
    .build(src)
    .await;
    let r = echo(&denied).await;
    assert_eq!(code(&r), "DENIED");
    assert_eq!(stage(&r), "guard");
});

both!(an_approver_that_reaches_nobody_denies, |src| {
    for answer in [
        ApprovalAnswer::Unavailable("no terminal".into()),
        ApprovalAnswer::Deny("no".into()),
    ] {
        let b = Stack {
            pre: vec![("pre-a", "ask")],
            approver: Some(Arc::new(Answer(answer.clone()))),
            ..Stack::new()
        }
        .build(src)
        .await;
        let r = echo(&b).await;
        assert_eq!(code(&r), "DENIED", "{answer:?}");
        assert_eq!(stage(&r), "approval");
        assert_eq!(by(&r), "test-approver");
    }
});

both!(the_first_guard_reason_ends_the_chain, |src| {
    let b = Stack {
        guards: vec![("g1", "deny"), ("g2", "pass")],
        ..Stack::new()
    }
    .build(src)
    .await;
    let r = echo(&b).await;
    assert_eq!(by(&r), "g1");
    assert_eq!(b.calls(Role::Guard, "g2"), 0);
});

both!(a_trapping_guard_denies, |src| {
    let b = Stack {
        pre: vec![("pre-a", "allow")],
        guards: vec![("guard-a", "trap")],
        ..Stack::new()
    }
    .build(src)
    .await;
    let r = echo(&b).await;
    assert_eq!(code(&r), "DENIED");
    assert_eq!(stage(&r), "guard");
    assert!(r.text().contains("failing closed"), "{r:?}");
    // The next call on the same host is served (the trapped instance is gone).
    let b2 = Stack {
        guards: vec![("guard-a", "deny-tool:fail")],
        ..Stack::new()
    }
    .build(src)
    .await;
    assert_eq!(code(&echo(&b2).await), "OK");
});

both!(a_guard_that_never_answers_denies, |src| {
    let b = Stack {
        guards: vec![("guard-a", "loop")],
        policy_timeout: Some(Duration::from_millis(100)),
        ..Stack::new()
    }
    .build(src)
    .await;
    let r = echo(&b).await;
    assert_eq!(code(&r), "DENIED");
    assert!(r.text().contains("did not answer"), "{r:?}");
});

// ---- C. execute: wrappers, deadlines, the body ----------------------------

#[tokio::test]
async fn a_looping_body_times_out_and_the_host_keeps_serving() {
    let b = Stack {
        timeout: true,
        ..Stack::new()
    }
    .build(Source::Wasm)
    .await;
    let started = Instant::now();
    let r = call(&b, "spin", json!({})).await;
    let elapsed = started.elapsed();
    assert_eq!(code(&r), "TIMEOUT", "{r:?}");
    assert_eq!(stage(&r), "body");
    // spin declares timeout-ms 200; the epoch ticks every 10 ms.
    assert!(elapsed >= Duration::from_millis(190), "{elapsed:?}");
    assert!(
        elapsed < Duration::from_millis(200 + 10 + 150),
        "stopped too late: {elapsed:?}"
    );
    assert_eq!(code(&echo(&b).await), "OK");
    assert_eq!(code(&call(&b, "spin", json!({})).await), "TIMEOUT");
}

both!(a_body_blocked_in_a_host_call_times_out, |src| {
    let b = Stack {
        timeout: true,
        ..Stack::new()
    }
    .build(src)
    .await;
    let started = Instant::now();
    let r = call(&b, "sleep", json!({"ms": 5000})).await;
    assert_eq!(code(&r), "TIMEOUT", "{r:?}");
    assert!(
        started.elapsed() < Duration::from_millis(300 + 200),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(code(&call(&b, "sleep", json!({"ms": 1})).await), "OK");
});

both!(a_wrapper_can_shorten_the_deadline, |src| {
    let b = Stack {
        timeout: true,
        around: vec![("around-a", "shorten:50")],
        ..Stack::new()
    }
    .build(src)
    .await;
    let started = Instant::now();
    let r = call(&b, "sleep", json!({"ms": 250})).await;
    assert_eq!(code(&r), "TIMEOUT");
    assert!(
        started.elapsed() < Duration::from_millis(200),
        "{:?}",
        started.elapsed()
    );
});

both!(a_wrapper_cannot_extend_the_deadline, |src| {
    // The timeout policy (outermost) sets 300 ms; an inner wrapper asks for
    // 10 s; the body still ends at 300 ms.
    let b = Stack {
        timeout: true,
        around: vec![("around-a", "shorten:10000")],
        ..Stack::new()
    }
    .build(src)
    .await;
    let started = Instant::now();
    let r = call(&b, "sleep", json!({"ms": 2000})).await;
    assert_eq!(code(&r), "TIMEOUT");
    assert!(
        started.elapsed() < Duration::from_millis(800),
        "{:?}",
        started.elapsed()
    );
});

both!(
    a_wrapper_cannot_detach_from_the_callers_cancellation,
    |src| {
        let b = Stack {
            around: vec![("around-a", "shorten:10000")],
            ..Stack::new()
        }
        .build(src)
        .await;
        let turn = TurnOptions::default();
        let cancel = turn.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            cancel.cancel();
        });
        let started = Instant::now();
        let r = b
            .host
            .call(ToolCall::new("c1", "sleep", json!({"ms": 5000})), &turn)
            .await;
        assert_eq!(code(&r), "ABORTED", "{r:?}");
        assert!(
            started.elapsed() < Duration::from_millis(1000),
            "{:?}",
            started.elapsed()
        );
    }
);

both!(the_body_sees_the_deadline_the_wrappers_set, |src| {
    let b = Stack {
        timeout: true,
        around: vec![("around-a", "report-deadline")],
        ..Stack::new()
    }
    .build(src)
    .await;
    let r = call(&b, "sleep", json!({"ms": 1})).await;
    assert_eq!(code(&r), "OK", "{r:?}");
    let seen: u64 = r
        .text()
        .rsplit(": ")
        .next()
        .unwrap()
        .trim()
        .parse()
        .expect("a number of ms");
    assert!(seen <= 300 && seen > 200, "the wrapper saw {seen} ms");
});

#[tokio::test]
async fn a_wrapper_that_continues_twice_runs_the_body_once() {
    let b = Stack {
        around: vec![("around-a", "twice")],
        ..Stack::new()
    }
    .build(Source::Wasm)
    .await;
    let r = call(&b, "defer", json!({"text": "ran"})).await;
    assert_eq!(code(&r), "OK");
    assert_eq!(
        r.additional_contexts,
        vec!["ran".to_string()],
        "the body ran more than once"
    );
}

both!(a_trapping_wrapper_is_an_error_naming_it, |src| {
    let b = Stack {
        around: vec![("around-a", "trap")],
        ..Stack::new()
    }
    .build(src)
    .await;
    let r = echo(&b).await;
    assert_eq!(code(&r), "TRAPPED");
    assert_eq!(stage(&r), "execute");
    assert_eq!(by(&r), "around-a");
});

#[tokio::test]
async fn a_crashing_body_is_trapped_with_its_panic_and_the_host_keeps_serving() {
    let b = Stack::new().build(Source::Wasm).await;
    let r = call(&b, "crash", json!({})).await;
    assert_eq!(code(&r), "TRAPPED");
    assert_eq!(stage(&r), "body");
    assert!(r.text().contains("deliberate panic"), "{r:?}");
    assert_eq!(code(&echo(&b).await), "OK");
}

both!(a_tool_failure_keeps_its_own_code_and_details, |src| {
    let b = Stack::new().build(src).await;
    let r = call(
        &b,
        "fail",
        json!({"code": "QUOTA_EXCEEDED", "message": "too many"}),
    )
    .await;
    let e = r.error.clone().unwrap();
    assert_eq!(e.code.as_str(), "QUOTA_EXCEEDED");
    assert_eq!(e.name, "QuotaExceeded");
    assert_eq!(e.stage.to_string(), "body");
    assert_eq!(e.details, Some(json!({"fixture": true})));
    assert_eq!(r.text(), "too many");
});

both!(deferred_context_is_merged_into_the_result, |src| {
    let b = Stack::new().build(src).await;
    let r = call(&b, "defer", json!({"text": "remember this"})).await;
    assert_eq!(r.additional_contexts, vec!["remember this".to_string()]);
    assert_eq!(
        toolgate_tests::json(&r)["additionalContexts"],
        json!(["remember this"])
    );
});

both!(a_value_outside_the_output_schema_is_an_error, |src| {
    let b = Stack::new().build(src).await;
    assert_eq!(
        code(&call(&b, "value", json!({"mode": "valid"})).await),
        "OK"
    );
    let r = call(&b, "value", json!({"mode": "schema"})).await;
    assert_eq!(code(&r), "INVALID_RESULT");
    assert!(r.text().contains("output schema"), "{r:?}");
    let r = call(&b, "value", json!({"mode": "bigint"})).await;
    assert_eq!(code(&r), "INVALID_RESULT");
    assert!(r.text().contains("outside ±9007199254740991"), "{r:?}");
});

// ---- D. post-execute, finalize --------------------------------------------

both!(
    post_execute_accept_value_is_revalidated_and_rerendered,
    |src| {
        let b = Stack {
            post: vec![("post-a", r#"value:{"n": 5}"#)],
            ..Stack::new()
        }
        .build(src)
        .await;
        let r = call(&b, "value", json!({"mode": "valid"})).await;
        assert_eq!(code(&r), "OK");
        assert_eq!(r.text(), "n = 5", "re-rendered by the tool");
    }
);

both!(
    post_execute_value_against_the_output_schema_is_an_error,
    |src| {
        let b = Stack {
            post: vec![("post-a", r#"value:{"n": "five"}"#)],
            ..Stack::new()
        }
        .build(src)
        .await;
        let r = call(&b, "value", json!({"mode": "valid"})).await;
        assert_eq!(code(&r), "INVALID_RESULT");
        assert_eq!(stage(&r), "post_execute");
        assert_eq!(by(&r), "post-a");
    }
);

both!(post_execute_accept_content_keeps_the_value, |src| {
    let b = Stack {
        post: vec![("post-a", "content:replaced")],
        ..Stack::new()
    }
    .build(src)
    .await;
    let r = echo(&b).await;
    assert_eq!(code(&r), "OK");
    assert_eq!(r.text(), "replaced");
});

both!(
    post_execute_block_is_an_error_with_the_feedback_as_content,
    |src| {
        let b = Stack {
            post: vec![("post-a", "block:not today")],
            ..Stack::new()
        }
        .build(src)
        .await;
        let r = echo(&b).await;
        assert_eq!(code(&r), "BLOCKED");
        assert_eq!(stage(&r), "post_execute");
        assert_eq!(by(&r), "post-a");
        assert_eq!(r.text(), "not today");
    }
);

both!(a_post_execute_waterfall_is_a_waterfall, |src| {
    let b = Stack {
        post: vec![("outer", "pass"), ("inner", "block:inner says no")],
        ..Stack::new()
    }
    .build(src)
    .await;
    let r = echo(&b).await;
    assert_eq!(code(&r), "BLOCKED");
    assert_eq!(by(&r), "inner");
    let b = Stack {
        post: vec![("outer", "accept"), ("inner", "block:never heard")],
        ..Stack::new()
    }
    .build(src)
    .await;
    assert_eq!(code(&echo(&b).await), "OK");
    assert_eq!(b.calls(Role::PostExecute, "inner"), 0);
});

both!(a_trapping_post_execute_hook_withholds_the_result, |src| {
    let b = Stack {
        post: vec![("post-a", "trap")],
        ..Stack::new()
    }
    .build(src)
    .await;
    let r = echo(&b).await;
    assert_eq!(code(&r), "BLOCKED");
    assert!(r.text().contains("withheld"), "{r:?}");
});

both!(the_finalizer_runs_exactly_once_per_result, |src| {
    let b = Stack {
        finalizers: vec![("fin-a", "append:[footer]")],
        ..Stack::new()
    }
    .build(src)
    .await;
    let ok = echo(&b).await;
    assert_eq!(b.calls(Role::Finalizer, "fin-a"), 1);
    assert_eq!(ok.text(), "hi\n[footer]");
    let failed = call(&b, "fail", json!({"code": "X", "message": "bad"})).await;
    assert_eq!(b.calls(Role::Finalizer, "fin-a"), 2);
    assert_eq!(failed.text(), "bad\n[footer]");
    // Content only: the failure is still the same failure.
    assert_eq!(code(&failed), "X");
});

both!(the_tools_own_finalizer_runs_before_the_policies, |src| {
    let b = Stack {
        finalizers: vec![("fin-a", "append:[policy]")],
        ..Stack::new()
    }
    .build(src)
    .await;
    let r = call(&b, "finalizing", json!({})).await;
    assert_eq!(r.text(), "body\n[finalized by the tool]\n[policy]");
    let r = call(&b, "finalizing", json!({"fail": true})).await;
    assert_eq!(code(&r), "FIXTURE_FAILURE");
    assert_eq!(
        r.text(),
        "failed on purpose\n[finalized by the tool]\n[policy]"
    );
});

both!(a_trapping_finalizer_leaves_the_content, |src| {
    let b = Stack {
        finalizers: vec![("fin-a", "trap"), ("fin-b", "append:[b]")],
        ..Stack::new()
    }
    .build(src)
    .await;
    let r = echo(&b).await;
    assert_eq!(code(&r), "OK");
    assert_eq!(r.text(), "hi\n[b]");
});

#[tokio::test]
async fn the_finalizer_in_force_is_fixed_when_execution_starts() {
    let b = Stack {
        finalizers: vec![("fin-a", "append:[old generation]")],
        ..Stack::new()
    }
    .build(Source::Wasm)
    .await;
    let host = b.host.clone();
    let running = tokio::spawn(async move {
        host.call(
            ToolCall::new("slow", "sleep", json!({"ms": 300})),
            &TurnOptions::default(),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Reload without the finalizer while the call runs.
    std::fs::remove_file(b.dir.path().join("fin-a.wasm")).unwrap();
    let g = b.host.reload().await.unwrap();
    assert!(g.policies.finalizers.is_empty());
    let r = running.await.unwrap();
    assert_eq!(r.text(), "slept 300 ms\n[old generation]");
    // New calls use the new generation.
    assert_eq!(echo(&b).await.text(), "hi");
}

// ---- E. result, observers, the closed set ----------------------------------

#[tokio::test]
async fn a_trapping_observer_changes_nothing() {
    let b = Stack {
        observers: vec![("obs-a", "trap")],
        ..Stack::new()
    }
    .build(Source::Wasm)
    .await;
    let r = echo(&b).await;
    assert_eq!(code(&r), "OK");
    assert_eq!(r.text(), "hi");
    assert_eq!(b.calls(Role::Observer, "obs-a"), 1);
    // The observer after it still saw the record, unchanged.
    assert_eq!(b.seen.lock().unwrap().as_slice(), &[r]);
}

#[tokio::test]
async fn a_failing_native_observer_changes_nothing() {
    let b = Stack {
        observers: vec![("obs-a", "trap")],
        ..Stack::new()
    }
    .build(Source::Native)
    .await;
    let r = echo(&b).await;
    assert_eq!(code(&r), "OK");
    let seen = b.seen.lock().unwrap();
    assert_eq!(seen.len(), 2, "both observers saw it");
    assert!(seen.iter().all(|s| *s == r));
}

both!(observers_see_exactly_what_the_model_sees, |src| {
    let b = Stack {
        guards: vec![("guard-a", "deny-tool:fail")],
        ..Stack::new()
    }
    .build(src)
    .await;
    let ok = echo(&b).await;
    let denied = call(&b, "fail", json!({"code": "X", "message": "m"})).await;
    let seen = b.seen.lock().unwrap().clone();
    assert_eq!(seen, vec![ok.clone(), denied.clone()]);
    // Nothing but content, error and meta is recorded — and the value of a
    // tool that declares an output schema (`echo` does), which MCP clients
    // are shown as `structuredContent`.
    let v = toolgate_tests::json(&ok);
    assert_eq!(v["structuredContent"], json!({"text": "hi"}), "{v}");
    assert!(
        toolgate_tests::json(&denied)
            .get("structuredContent")
            .is_none()
    );
    let keys: std::collections::BTreeSet<_> = v.as_object().unwrap().keys().cloned().collect();
    assert!(
        keys.iter().all(|k| [
            "id",
            "name",
            "isError",
            "content",
            "error",
            "meta",
            "structuredContent",
            "additionalContexts"
        ]
        .contains(&k.as_str())),
        "{keys:?}"
    );
});

both!(every_failure_names_a_closed_code_and_a_stage, |src| {
    let b = Stack {
        guards: vec![("guard-a", "deny-tool:fail")],
        ..Stack::new()
    }
    .build(src)
    .await;
    let records = vec![
        call(&b, "nope", json!({})).await,
        call(&b, "echo", json!({})).await,
        call(&b, "fail", json!({"code": "X", "message": "m"})).await,
    ];
    for r in records {
        let e = r.error.expect("a failure");
        assert!(
            toolgate::ErrorCode::HOST_CODES.contains(&e.code.as_str()),
            "{e:?}"
        );
        assert!(!e.message.is_empty());
    }
});
