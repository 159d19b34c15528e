//! Issue 9, hostile components: every call into a guest is bounded, every
//! guest-provided size is capped (with blame on the component that produced
//! it), instances share one memory budget, guest log lines are escaped and
//! rate-limited, and loading fails closed. The component under test is
//! `hostile` (every role, plain wit-bindgen, no SDK): each test makes one of
//! its exports misbehave and checks that the host answers promptly, names
//! the culprit, and goes on serving.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use toolgate::policy::{ExecNext, ExecuteAroundHook};
use toolgate::{CallInfo, CallRecord, Outcome, PolicyError, ToolCall, Toolgate, TurnOptions};
use toolgate_tests::{PluginDir, builder, fixtures, host, run};

/// Tight budgets, so a misbehaving export is stopped quickly.
const LIMITS: &str =
    "policy_timeout_ms = 300\n[limits]\ndefault_tool_timeout_ms = 500\nload_timeout_ms = 2000\n";

/// A host with the `tools` fixture and `hostile` in `mode`, under the
/// tight [`LIMITS`] (`extra` goes into their `[limits]` table).
async fn hostile(mode: &str, extra: &str) -> (Toolgate, PluginDir) {
    hostile_under(mode, &format!("{LIMITS}{extra}")).await
}

/// The same, under `limits` (a configuration head).
async fn hostile_under(mode: &str, limits: &str) -> (Toolgate, PluginDir) {
    let dir = PluginDir::new();
    dir.add("tools", fixtures::TOOLS)
        .add("hostile", fixtures::HOSTILE);
    let config =
        format!("{limits}\n[plugins.hostile]\nvars = {{ MODE = {mode:?}, HOLD_MS = \"400\" }}\n");
    (host(&dir, &config).await, dir)
}

/// Budgets roomy enough for a debug build to copy a flood in and check it
/// (the flood must be refused for its size, not its time).
const ROOMY: &str = "policy_timeout_ms = 20000\n";

fn by(r: &CallRecord) -> &str {
    r.error
        .as_ref()
        .and_then(|e| e.decided_by.as_deref())
        .unwrap_or("")
}

/// Run `tool` and check it answered within `limit`; twice, to show the host
/// serves the next call too.
async fn bounded(h: &Toolgate, tool: &str, limit: Duration) -> CallRecord {
    let mut last = None;
    for _ in 0..2 {
        let started = Instant::now();
        let r = run(h, tool, json!({"text": "hi"})).await;
        assert!(
            started.elapsed() < limit,
            "{tool} took {:?}: {r:?}",
            started.elapsed()
        );
        last = Some(r);
    }
    last.unwrap()
}

#[tokio::test]
async fn every_export_that_loops_is_stopped_at_its_budget() {
    let limit = Duration::from_secs(4);
    // Policies: each fails closed in its own way.
    let (h, _d) = hostile("pre:loop", "").await;
    let r = bounded(&h, "echo", limit).await;
    assert_eq!(r.code(), Some("DENIED"), "{r:?}");
    assert!(r.text().contains("did not answer"), "{}", r.text());
    let (h, _d) = hostile("check:loop", "").await;
    assert_eq!(bounded(&h, "echo", limit).await.code(), Some("DENIED"));
    let (h, _d) = hostile("post:loop", "").await;
    assert_eq!(bounded(&h, "echo", limit).await.code(), Some("BLOCKED"));
    // Finalizers and observers are isolated: the result stands.
    for mode in ["finalizer:loop", "observer:loop"] {
        let (h, _d) = hostile(mode, "").await;
        let r = bounded(&h, "echo", limit).await;
        assert_eq!(
            (r.is_error, r.text().as_str()),
            (false, "hi"),
            "{mode}: {r:?}"
        );
    }
    // A tool's helper exports: `render` fails the call, its own
    // `finalize-content` keeps the content.
    let (h, _d) = hostile("render:loop", "").await;
    let r = bounded(&h, "hostile", limit).await;
    assert!(r.is_error, "{r:?}");
    assert_eq!(by(&r), "hostile", "{r:?}");
    let (h, _d) = hostile("finalize:loop", "").await;
    let r = bounded(&h, "hostile", limit).await;
    assert!(!r.is_error, "{r:?}");
    // A body whose tool declares no timeout: the host's default deadline.
    let (h, _d) = hostile("execute:loop", "").await;
    let r = bounded(&h, "hostile", limit).await;
    assert_eq!(r.code(), Some("TIMEOUT"), "{r:?}");
    // A wrapper placed (by the operator) outside the timeout wrapper: the
    // call's hard deadline still holds.
    let dir = PluginDir::new();
    dir.add("tools", fixtures::TOOLS)
        .add("hostile", fixtures::HOSTILE)
        .add("timeout", fixtures::PLUGIN_TIMEOUT);
    let h = host(
        &dir,
        &format!(
            "{LIMITS}[plugins.timeout]\npriority = 0\n[plugins.hostile]\npriority = -10\nvars = {{ MODE = \"around:loop\" }}\n"
        ),
    )
    .await;
    let r = bounded(&h, "echo", limit).await;
    assert_eq!(r.code(), Some("TIMEOUT"), "{r:?}");
    // A classifier that loops makes its call exclusive, in time.
    let (h, _d) = hostile("classify:loop", "").await;
    let started = Instant::now();
    let records = h
        .execute_tool_calls(
            vec![
                ToolCall::new("1", "hostile", json!({})),
                ToolCall::new("2", "hostile", json!({})),
            ],
            &TurnOptions::default(),
        )
        .await
        .expect("no scheduler failure");
    assert!(records.iter().all(|r| !r.is_error), "{records:?}");
    assert!(started.elapsed() < limit, "{:?}", started.elapsed());
}

// Several workers: a guest that computes yields at every epoch tick, and a
// single-threaded runtime would see its timers late (every 61 polls).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_reaches_a_body_that_ignores_it() {
    let dir = PluginDir::new();
    dir.add("hostile", fixtures::HOSTILE);
    let config = format!("{LIMITS}\n[plugins.hostile]\nvars = {{ MODE = \"execute:loop\" }}\n");
    let entering = Arc::new(tokio::sync::Notify::new());
    let h = builder(&dir, &config)
        .execute_around("entering", 0, Entering(entering.clone()))
        .build()
        .await
        .expect("host builds");
    let turn = TurnOptions::default();
    let cancel = turn.cancel.clone();
    let h2 = h.clone();
    let started = Instant::now();
    let running = tokio::spawn(async move {
        h2.call(ToolCall::new("c", "hostile", json!({})), &turn)
            .await
    });
    // Cancel once the call has passed every stage before the body, so
    // that it is the body (which never returns) that must be stopped.
    tokio::time::timeout(Duration::from_secs(10), entering.notified())
        .await
        .expect("the call reaches its body");
    cancel.cancel();
    let r = running.await.unwrap();
    assert_eq!(r.code(), Some("ABORTED"), "{r:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

/// An execute-around hook that says when the call enters the rest of the
/// chain (the body, here).
struct Entering(Arc<tokio::sync::Notify>);

#[async_trait::async_trait]
impl ExecuteAroundHook for Entering {
    async fn around_execute(
        &self,
        _call: &Arc<CallInfo>,
        next: ExecNext,
    ) -> Result<Outcome, PolicyError> {
        self.0.notify_one();
        Ok(next.run(None).await)
    }
}

#[tokio::test]
async fn plugins_load_in_parallel_each_under_its_load_budget() {
    let dir = PluginDir::new();
    dir.add("tools", fixtures::TOOLS);
    let mut config = String::from("[limits]\nload_timeout_ms = 1500\n");
    for i in 0..3 {
        dir.add(&format!("slow{i}"), fixtures::HOSTILE);
        config.push_str(&format!(
            "[plugins.slow{i}]\noptional = true\nvars = {{ MODE = \"list-tools:loop\" }}\n"
        ));
    }
    // Warm the compile cache, so the timing below is about loading.
    let _ = host(&dir, &config).await;
    let started = Instant::now();
    let h = host(&dir, &config).await;
    let elapsed = started.elapsed();
    // Three budgets of 1.5 s in a row would take 4.5 s.
    assert!(elapsed < Duration::from_millis(4000), "{elapsed:?}");
    let problems = h.problems();
    for i in 0..3 {
        let p = problems
            .iter()
            .find(|p| p.plugin == format!("slow{i}"))
            .expect("reported");
        assert!(p.message.contains("load budget (1500 ms"), "{p}");
    }
    assert!(!run(&h, "echo", json!({"text": "x"})).await.is_error);
}

#[tokio::test]
async fn oversized_answers_are_cut_or_refused_and_blamed_on_their_producer() {
    // A million content blocks.
    let (h, _d) = hostile_under("render:flood", ROOMY).await;
    let r = run(&h, "hostile", json!({})).await;
    assert_eq!(r.code(), Some("INVALID_RESULT"), "{r:?}");
    assert_eq!(by(&r), "hostile");
    assert!(r.text().contains("max_content_blocks"), "{}", r.text());
    // A 100 MB failure message, with the timeout wrapper around the body:
    // the tool is blamed, not the wrapper.
    let dir = PluginDir::new();
    dir.add("hostile", fixtures::HOSTILE)
        .add("timeout", fixtures::PLUGIN_TIMEOUT);
    let h = host(
        &dir,
        "[plugins.hostile]\nvars = { MODE = \"execute:flood\" }\n",
    )
    .await;
    let r = run(&h, "hostile", json!({})).await;
    assert_eq!(r.code(), Some("FLOOD"), "{r:?}");
    assert_eq!(by(&r), "hostile");
    let message = &r.error.as_ref().unwrap().message;
    assert!(message.len() < 20_000, "{}", message.len());
    assert!(
        message.contains("cut by the host"),
        "{}",
        &message[message.len() - 80..]
    );
    // A 100 MB denial reason, ask prompt and block feedback.
    for (mode, code) in [
        ("check:flood", "DENIED"),
        ("pre:flood", "DENIED"),
        ("post:flood", "BLOCKED"),
    ] {
        let (h, _d) = hostile_under(mode, ROOMY).await;
        let r = run(&h, "echo", json!({"text": "hi"})).await;
        assert_eq!(r.code(), Some(code), "{mode}: {r:?}");
        assert_eq!(by(&r), "hostile", "{mode}");
        assert!(r.text().len() < 20_000, "{mode}: {}", r.text().len());
    }
    // A finalizer's 100 MB content is refused; the content stands.
    let (h, _d) = hostile_under("finalizer:flood", ROOMY).await;
    let r = run(&h, "echo", json!({"text": "hi"})).await;
    assert_eq!((r.is_error, r.text().as_str()), (false, "hi"), "{r:?}");
    let (h, _d) = hostile_under("finalize:flood", ROOMY).await;
    let r = run(&h, "hostile", json!({})).await;
    assert!(!r.is_error && r.text().len() < 1000, "{}", r.text().len());
    // A million deferred contexts: the first 16.
    let (h, _d) = hostile_under("execute:defer", ROOMY).await;
    assert_eq!(
        run(&h, "hostile", json!({}))
            .await
            .additional_contexts
            .len(),
        16
    );
    // A stack overflow says so.
    let (h, _d) = hostile("execute:stack", "").await;
    let r = run(&h, "hostile", json!({})).await;
    assert_eq!(r.code(), Some("TRAPPED"), "{r:?}");
    assert!(r.text().contains("stack overflow"), "{}", r.text());
    // A guest hoarding handles is stopped.
    let (h, _d) = hostile("around:handles", "").await;
    let r = run(&h, "echo", json!({"text": "hi"})).await;
    assert!(r.is_error, "{r:?}");
    assert!(r.text().contains("host handles"), "{}", r.text());
}

#[tokio::test]
async fn what_list_tools_returns_is_capped() {
    let (h, _d) = hostile_under("list-tools:flood", ROOMY).await;
    let tool = &h.generation().tools["hostile"];
    assert!(
        tool.def.description.len() <= 32 << 10,
        "{}",
        tool.def.description.len()
    );
    assert!(
        h.problems()
            .iter()
            .any(|p| p.message.contains("max_description_bytes")),
        "{:?}",
        h.problems()
    );
    let (h, _d) = hostile_under("list-tools:many", ROOMY).await;
    let from_hostile = h
        .generation()
        .tools
        .values()
        .filter(|t| t.def.meta.provider == "hostile")
        .count();
    assert_eq!(from_hostile, 256);
    assert!(
        h.problems()
            .iter()
            .any(|p| p.message.contains("100000 tools"))
    );
    // A name with a terminal escape and a newline is refused, and shown
    // escaped (nothing reaches the operator's terminal raw).
    let (h, _d) = hostile("list-tools:evil-name", "").await;
    let p = h
        .problems()
        .into_iter()
        .find(|p| p.message.contains("evil"))
        .expect("reported");
    assert!(
        !p.message.contains('\u{1b}') && !p.message.contains('\n'),
        "{p:?}"
    );
    assert!(p.message.contains("\\u{1b}"), "{p}");
    assert!(h.generation().tools.contains_key("hostile"));
}

#[tokio::test]
async fn instances_share_one_memory_budget() {
    // Each call holds 150 MiB; the budget is 400 MiB for all instances.
    let dir = PluginDir::new();
    dir.add("hostile", fixtures::HOSTILE);
    let h = host(
        &dir,
        "[limits]\nguest_memory_mb = 400\n[plugins.hostile]\nvars = { MODE = \"execute:memory:150,classify:parallel\", HOLD_MS = \"300\" }\n",
    )
    .await;
    let calls = (0..4)
        .map(|i| ToolCall::new(format!("m{i}"), "hostile", json!({})))
        .collect();
    let records = h
        .execute_tool_calls(calls, &TurnOptions::default())
        .await
        .expect("no scheduler failure");
    let over: Vec<_> = records.iter().filter(|r| r.is_error).collect();
    assert!(!over.is_empty(), "all four fit in the budget? {records:?}");
    assert!(over.len() < 4, "{records:?}");
    for r in &over {
        assert!(r.text().contains("guest_memory_mb"), "{}", r.text());
    }
    let used = h.runtime().memory.used();
    assert!(used <= 400 << 20, "{used}");
    // One instance's own cap (its grant) holds too.
    let dir = PluginDir::new();
    dir.add("hostile", fixtures::HOSTILE);
    let h = host(
        &dir,
        "[plugins.hostile]\nvars = { MODE = \"execute:memory:100\" }\n[plugins.hostile.grants]\nmemory_mb = 64\n",
    )
    .await;
    let r = run(&h, "hostile", json!({})).await;
    assert!(r.text().contains("cap of"), "{r:?}");
    // A grant larger than an instance can have is a configuration error.
    let e = toolgate::HostConfig::parse("[plugins.x.grants]\nmemory_mb = 4096\n", "t.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("/plugins/x/grants/memory_mb"), "{e}");
}

/// Collects the guest log lines (`toolgate::guest`) emitted on this thread.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Lines {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().target() != "toolgate::guest" {
            return;
        }
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                if f.name() == "message" {
                    self.0 = format!("{v:?}");
                }
            }
        }
        let mut m = Message(String::new());
        event.record(&mut m);
        self.0.lock().unwrap().push(m.0);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn guest_log_lines_are_escaped_and_rate_limited() {
    use tracing_subscriber::layer::SubscriberExt;
    let lines = Lines::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(lines.clone()));
    let (h, d) = hostile("execute:log", "").await;
    let r = run(&h, "hostile", json!({})).await;
    assert!(!r.is_error, "{r:?}");
    drop((h, d));
    let lines = lines.0.lock().unwrap().clone();
    // 100 000 lines asked for; the burst of 50, what the rate refilled while
    // the loop ran, and a summary written.
    assert!(lines.len() <= 100, "{}", lines.len());
    assert!(lines.len() >= 50, "{}", lines.len());
    for l in &lines {
        assert!(!l.contains('\n') && !l.contains('\u{1b}'), "{l:?}");
    }
    assert!(
        lines[0].contains("\\n2026-01-01") && lines[0].contains("\\u{1b}"),
        "{}",
        lines[0]
    );
    assert!(
        lines.iter().any(|l| l.contains("were dropped")),
        "no summary of what was dropped: {lines:?}"
    );
}

#[tokio::test]
async fn loading_fails_closed() {
    // A typo in a guard's manifest: the guard does not load, and no call runs.
    let dir = PluginDir::new();
    dir.add("tools", fixtures::TOOLS)
        .add("guard", fixtures::GUARD)
        .manifest("guard", "priorty = 5\n");
    let h = host(&dir, "").await;
    let r = run(&h, "echo", json!({"text": "x"})).await;
    assert_eq!(r.code(), Some("DENIED"), "{r:?}");
    assert!(r.text().contains("priorty"), "{}", r.text());
    assert_eq!(r.error.as_ref().unwrap().stage.as_str(), "materialize");
    // Configuration for a plugin that does not exist is an error.
    let err = builder(&dir, "[plugins.gaurd]\npriority = 1\n")
        .build()
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("/plugins/gaurd") && err.contains("guard"),
        "{err}"
    );
    // A plugin file's manifest cannot place it before the built-in policies.
    let dir = PluginDir::new();
    dir.add("early", fixtures::GUARD)
        .manifest("early", "priority = -100\n");
    let h = Toolgate::builder()
        .runtime_options(toolgate_tests::test_runtime())
        .plugin_dir(dir.path())
        .build()
        .await
        .unwrap();
    let order = h.generation().chain_order();
    let early = order
        .iter()
        .find(|(role, name, ..)| *role == toolgate::Role::Guard && name == "early")
        .unwrap();
    let builtin = order
        .iter()
        .find(|(role, name, ..)| *role == toolgate::Role::Guard && name == "secrets-guard")
        .unwrap();
    assert!(early.2 > builtin.2, "{order:?}");
    assert!(
        h.problems()
            .iter()
            .any(|p| p.plugin == "early" && p.message.contains("-100")),
        "{:?}",
        h.problems()
    );
    // The operator may place it anywhere.
    let h = Toolgate::builder()
        .runtime_options(toolgate_tests::test_runtime())
        .plugin_dir(dir.path())
        .config(toolgate::HostConfig::parse("[plugins.early]\npriority = -100\n", "t").unwrap())
        .build()
        .await
        .unwrap();
    let order = h.generation().chain_order();
    let early = order
        .iter()
        .find(|(role, name, ..)| *role == toolgate::Role::Guard && name == "early")
        .unwrap();
    assert_eq!(early.2, -100);
}
