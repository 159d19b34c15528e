//! Issue 10: contract 0.2 — the call and the result as resources, the
//! synchronous path, and 0.1 components side by side. (The pipeline
//! conformance suite runs every `both!` scenario against 0.2 components,
//! 0.1 components and native policies; this module covers what is specific
//! to the versions and the paths.)

use std::time::{Duration, Instant};

use serde_json::json;
use toolgate::plugin::{CallPath, ContractVersion};
use toolgate::policy::Role;
use toolgate::{ToolCall, TurnOptions};
use toolgate_tests::{PluginDir, fixtures, host, run};

fn info<'a>(g: &'a toolgate::Generation, name: &str) -> &'a toolgate::registry::PluginInfo {
    g.plugins
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no plugin {name}: {:?}", g.problems))
}

#[tokio::test]
async fn the_call_path_follows_what_a_component_imports() {
    let dir = PluginDir::new();
    dir.add("tools", fixtures::TOOLS)
        .add("guard", fixtures::GUARD)
        .add("pre-hook", fixtures::PRE_HOOK)
        .add("finalizer", fixtures::FINALIZER)
        .add("observer", fixtures::OBSERVER)
        .add("hostile-sync", fixtures::HOSTILE_SYNC)
        .add("old-guard", fixtures::V0_1_GUARD);
    let h = host(&dir, "").await;
    let g = h.generation();
    // Nothing that can wait: no fiber. A waterfall hook runs the rest of
    // its chain (policies that answer at once) in place.
    for name in ["guard", "pre-hook", "finalizer", "observer", "hostile-sync"] {
        assert_eq!(info(&g, name).path, CallPath::Sync, "{name}");
        assert_eq!(info(&g, name).contract, ContractVersion::V0_2, "{name}");
    }
    // A wrapper runs the tool body, which may run long; so may a tool: both
    // on a fiber.
    let dir2 = PluginDir::new();
    dir2.add("around", fixtures::AROUND);
    let h2 = host(&dir2, "").await;
    assert_eq!(info(&h2.generation(), "around").path, CallPath::Async);
    assert_eq!(info(&g, "tools").path, CallPath::Async);
    // 0.1 components behave as they always did.
    assert_eq!(info(&g, "old-guard").path, CallPath::Async);
    assert_eq!(info(&g, "old-guard").contract, ContractVersion::V0_1);
    assert_eq!(info(&g, "old-guard").wit_version, "0.1.0");
    // A file-system grant makes a guard wait for I/O: a fiber again.
    let dir = PluginDir::new();
    dir.add("guard", fixtures::GUARD);
    let granted = format!(
        "[plugins.guard.grants]\nfs = [{{ path = {:?}, access = \"read-only\" }}]\n",
        dir.path().display().to_string()
    );
    let h = host(&dir, &granted).await;
    assert_eq!(info(&h.generation(), "guard").path, CallPath::Async);
}

#[tokio::test]
async fn a_0_1_tool_plugin_keeps_working() {
    let dir = PluginDir::new();
    dir.add("old", fixtures::V0_1_TOOLS);
    let h = host(&dir, "[tools.spin]\ntimeout_ms = 200\n").await;
    let g = h.generation();
    assert!(g.problems.is_empty(), "{:?}", g.problems);
    assert_eq!(info(&g, "old").contract, ContractVersion::V0_1);
    let r = run(&h, "echo", json!({"text": "hello"})).await;
    assert_eq!((r.is_error, r.text().as_str()), (false, "hello"));
    let r = run(&h, "shout", json!({"text": "hello"})).await;
    assert_eq!(r.text(), "HELLO");
    let r = run(&h, "fail", json!({})).await;
    assert_eq!(r.code(), Some("FIXTURE_FAILURE"));
    assert_eq!(
        r.error.as_ref().unwrap().details,
        Some(json!({"why": "testing"}))
    );
    let r = run(&h, "finalizing", json!({})).await;
    assert_eq!(r.text(), "body\n[finalized by the 0.1 tool]");
    let r = run(&h, "defer", json!({})).await;
    assert_eq!(r.additional_contexts, vec!["deferred by a 0.1 tool"]);
    let started = Instant::now();
    let r = run(&h, "spin", json!({})).await;
    assert_eq!(r.code(), Some("TIMEOUT"), "{r:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let r = run(&h, "echo", json!({"text": 3})).await;
    assert_eq!(r.code(), Some("INVALID_ARGS"));
}

#[tokio::test]
async fn a_signature_that_lies_is_refused_at_load_naming_the_function() {
    let dir = PluginDir::new();
    dir.add("tools", fixtures::TOOLS)
        .add("liar", fixtures::WRONG_TYPE);
    let h = host(&dir, "[plugins.liar]\noptional = true\n").await;
    let problem = h
        .problems()
        .into_iter()
        .find(|p| p.plugin == "liar")
        .expect("the liar is reported");
    for needle in ["guard", "check", "option<string>", "bool"] {
        assert!(problem.message.contains(needle), "{needle}: {problem}");
    }
    assert!(h.generation().policies.guards.is_empty());
    // It never got the chance to deny every call.
    assert!(!run(&h, "echo", json!({"text": "x"})).await.is_error);
}

#[tokio::test]
async fn the_synchronous_path_has_no_file_system() {
    let dir = PluginDir::new();
    dir.add("tools", fixtures::TOOLS)
        .add("hostile-sync", fixtures::HOSTILE_SYNC);
    let h = host(
        &dir,
        "[plugins.hostile-sync]\nvars = { MODE = \"check:fs\" }\n",
    )
    .await;
    let r = run(&h, "echo", json!({"text": "x"})).await;
    assert_eq!(r.code(), Some("DENIED"));
    let why = r.text();
    assert!(
        why.contains("no file system") || why.contains("synchronous path"),
        "{why}"
    );
}

// Several workers: a guest on the synchronous path holds the thread it runs on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_looping_guard_on_the_synchronous_path_is_stopped_at_its_budget() {
    let dir = PluginDir::new();
    dir.add("tools", fixtures::TOOLS)
        .add("hostile-sync", fixtures::HOSTILE_SYNC);
    let h = host(
        &dir,
        "policy_timeout_ms = 200\n[plugins.hostile-sync]\nvars = { MODE = \"check:loop\" }\n",
    )
    .await;
    assert_eq!(info(&h.generation(), "hostile-sync").path, CallPath::Sync);
    for _ in 0..2 {
        let started = Instant::now();
        let r = run(&h, "echo", json!({"text": "x"})).await;
        assert_eq!(r.code(), Some("DENIED"), "{r:?}");
        assert!(
            r.text().contains("did not answer within 200 ms"),
            "{}",
            r.text()
        );
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    }
    // The turn's cancellation reaches a guest on the synchronous path too,
    // long before its budget.
    let h = host(
        &dir,
        "policy_timeout_ms = 5000\n[plugins.hostile-sync]\nvars = { MODE = \"check:loop\" }\n",
    )
    .await;
    let turn = TurnOptions::default();
    let cancel = turn.cancel.clone();
    let started = Instant::now();
    let running = tokio::spawn(async move {
        h.call(ToolCall::new("c", "echo", json!({"text": "x"})), &turn)
            .await
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    cancel.cancel();
    let r = running.await.unwrap();
    assert_eq!(r.code(), Some("ABORTED_BEFORE_DISPATCH"), "{r:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn policies_on_the_synchronous_path_read_the_result_through_handles() {
    let dir = PluginDir::new();
    dir.add("tools", fixtures::TOOLS)
        .add("hostile-sync", fixtures::HOSTILE_SYNC);
    let h = host(
        &dir,
        "[plugins.hostile-sync]\nvars = { MODE = \"post:read\" }\n",
    )
    .await;
    let r = run(&h, "echo", json!({"text": "through a handle"})).await;
    assert_eq!(r.text(), "saw: through a handle");
    let g = h.generation();
    assert_eq!(g.listener_calls(Role::Guard, "hostile-sync"), Some(1));
    assert_eq!(g.listener_calls(Role::Finalizer, "hostile-sync"), Some(1));
}

/// A native pre-execute hook that takes its time (a timer), then denies.
struct SlowNo;

#[async_trait::async_trait]
impl toolgate::policy::PreExecuteHook for SlowNo {
    async fn pre_execute(
        &self,
        _call: &std::sync::Arc<toolgate::CallInfo>,
        _next: toolgate::policy::PreNext,
    ) -> Result<toolgate::PreDecision, toolgate::PolicyError> {
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok(toolgate::PreDecision::Deny("slow says no".into()))
    }
}

async fn sync_hook_before_a_slow_one() -> toolgate::Toolgate {
    let dir = PluginDir::new();
    dir.add("tools", fixtures::TOOLS)
        .add("pre", fixtures::PRE_HOOK);
    let h = toolgate_tests::builder(
        &dir,
        "[plugins.pre]\npriority = 10\nvars = { BEHAVIOR = \"pass\" }\n",
    )
    .pre_execute("slow", 20, SlowNo)
    .build()
    .await
    .unwrap();
    assert_eq!(info(&h.generation(), "pre").path, CallPath::Sync);
    std::mem::forget(dir);
    h
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_on_the_synchronous_path_waits_for_a_slow_rest_of_its_chain() {
    let h = sync_hook_before_a_slow_one().await;
    let r = run(&h, "echo", json!({"text": "x"})).await;
    assert_eq!(r.code(), Some("DENIED"), "{r:?}");
    assert_eq!(r.text(), "slow says no");
    assert_eq!(
        r.error.as_ref().unwrap().decided_by.as_deref(),
        Some("slow")
    );
}

#[tokio::test(flavor = "current_thread")]
async fn on_a_single_threaded_runtime_a_chain_that_must_wait_fails_closed() {
    let h = sync_hook_before_a_slow_one().await;
    let r = run(&h, "echo", json!({"text": "x"})).await;
    assert_eq!(r.code(), Some("DENIED"), "{r:?}");
    assert!(r.text().contains("multi-threaded"), "{}", r.text());
}

/// `bytes` with every `toolgate:plugin/…@0.2.8` name renamed to `version`
/// (same length): the component as a toolchain would have built it against
/// that earlier patch of the contract.
fn as_built_against(bytes: &[u8], version: &str) -> Vec<u8> {
    assert_eq!(version.len(), "0.2.8".len());
    let mut out = bytes.to_vec();
    let prefix = b"toolgate:plugin/";
    let mut renamed = 0;
    let mut i = 0;
    while let Some(at) = out[i..].windows(prefix.len()).position(|w| w == prefix) {
        let start = i + at + prefix.len();
        // The interface name, then `@0.2.8`.
        let name_end = start
            + out[start..]
                .iter()
                .position(|b| !(b.is_ascii_lowercase() || *b == b'-'))
                .unwrap_or(0);
        if out[name_end..].starts_with(b"@0.2.8") {
            out[name_end + 1..name_end + 6].copy_from_slice(version.as_bytes());
            renamed += 1;
        }
        i = start;
    }
    assert!(renamed > 0, "no toolgate:plugin name found");
    out
}

/// Components built against 0.2.0 to 0.2.7 load and run on this 0.2.8
/// host: each import, seams included, is served by the linker's semver
/// matching, and each export is found under the name the component gives.
#[tokio::test]
async fn components_built_against_earlier_0_2_patches_keep_working() {
    for version in [
        "0.2.0", "0.2.1", "0.2.2", "0.2.3", "0.2.4", "0.2.5", "0.2.6", "0.2.7",
    ] {
        let dir = PluginDir::new();
        dir.add_bytes(
            "tools",
            &as_built_against(&std::fs::read(fixtures::TOOLS).unwrap(), version),
        )
        .add_bytes(
            "seams",
            &as_built_against(&std::fs::read(fixtures::SEAMS).unwrap(), version),
        )
        .add_bytes(
            "guard",
            &as_built_against(&std::fs::read(fixtures::GUARD).unwrap(), version),
        );
        let h = host(
            &dir,
            "[plugins.seams.grants]\nshell = true\nsubprocess = [\"echo\"]\n",
        )
        .await;
        assert!(h.problems().is_empty(), "{version}: {:?}", h.problems());
        let g = h.generation();
        for name in ["tools", "seams", "guard"] {
            assert_eq!(info(&g, name).wit_version, version, "{name}");
        }
        assert!(
            info(&g, "seams")
                .imports
                .iter()
                .any(|i| i == &format!("toolgate:plugin/shell@{version}")),
            "{:?}",
            info(&g, "seams").imports
        );
        let r = run(&h, "echo", json!({"text": "still here"})).await;
        assert_eq!(r.text(), "still here", "{version}: {r:?}");
    }
}
