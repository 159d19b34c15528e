//! The scheduler, measured.
//!
//! 1. **Rolling pool.** 64 concurrency-safe calls, each waiting 20 ms
//!    cooperatively (the `nap` fixture tool: a WASI sleep, i.e. an async host
//!    call), pool of 8: wall time of the turn against the ideal
//!    64 / 8 × 20 ms = 160 ms.
//! 2. **Overhead per call** with zero-work tools: a batch of 64 calls
//!    through `execute_tool_calls` against the same 64 calls run one by one
//!    through the pipeline (`Toolgate::call`, no scheduler). A native no-op
//!    tool gives the scheduler's own cost — exclusive (no classifier: each
//!    call runs alone, in the scheduler's task) and parallel (pool of 8:
//!    classification, a spawned task per call, join, ordered commit); the
//!    Wasm `echo` component adds a classifier call into the component.
//!    Measured as `toolgate run` calls it: from `block_on` on a
//!    multi-threaded runtime.
//!
//! Run: `cargo bench -p toolgate-tests --bench scheduler` (optionally
//! `-- --runs N`, default 21). Prints medians over the runs and the ratios.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Value, json};
use toolgate::tool::{BodyContext, BodyError, ToolBody, ToolDefinition, ToolMeta};
use toolgate::{CallInfo, Content, ToolCall, Toolgate, TurnOptions};
use toolgate_tests::{PluginDir, builder, fixtures};

const CALLS: usize = 64;
const POOL: usize = 8;
const NAP_MS: u64 = 20;

/// A tool that does nothing, may overlap anything.
struct Noop;

#[async_trait]
impl ToolBody for Noop {
    async fn is_concurrency_safe(&self, _call: &Arc<CallInfo>) -> Option<bool> {
        Some(true)
    }
    async fn execute(&self, _call: &Arc<CallInfo>, _ctx: BodyContext) -> Result<Value, BodyError> {
        Ok(Value::Null)
    }
    async fn render(
        &self,
        _call: &Arc<CallInfo>,
        _value: &Value,
    ) -> Result<Vec<Content>, BodyError> {
        Ok(Vec::new())
    }
}

fn noop_definition(name: &str, classifier: bool) -> ToolDefinition {
    ToolDefinition {
        name: name.into(),
        description: "Does nothing.".into(),
        parameters: json!({"type": "object"}),
        output_schema: None,
        meta: ToolMeta {
            provider: "bench".into(),
            timeout_ms: None,
            annotations: toolgate::tool::Annotations::empty(),
            features: if classifier {
                toolgate::tool::Features::CLASSIFIER
            } else {
                toolgate::tool::Features::empty()
            },
            effects: true,
        },
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn batch(name: &str, args: Value) -> Vec<ToolCall> {
    (0..CALLS)
        .map(|i| ToolCall::new(format!("c{i}"), name, args.clone()))
        .collect()
}

/// Median wall time of one batch through the scheduler.
async fn scheduled(host: &Toolgate, name: &str, args: &Value, runs: usize) -> Duration {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let calls = batch(name, args.clone());
        let started = Instant::now();
        let records = host
            .execute_tool_calls(calls, &TurnOptions::default())
            .await
            .expect("no scheduler failure");
        times.push(started.elapsed());
        assert!(records.iter().all(|r| !r.is_error), "{:?}", records[0]);
    }
    median(times)
}

/// Median wall time of the same batch, one call at a time, no scheduler.
async fn sequential(host: &Toolgate, name: &str, args: &Value, runs: usize) -> Duration {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let calls = batch(name, args.clone());
        let turn = TurnOptions::default();
        let started = Instant::now();
        for call in calls {
            let r = host.call(call, &turn).await;
            assert!(!r.is_error, "{r:?}");
        }
        times.push(started.elapsed());
    }
    median(times)
}

fn per_call(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6 / CALLS as f64
}

fn main() {
    let mut runs = 21;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--runs" {
            runs = args.next().and_then(|n| n.parse().ok()).expect("--runs N");
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async move {
        let dir = PluginDir::new();
        dir.add("gate", fixtures::GATE);
        dir.add("tools", fixtures::TOOLS);
        let host = builder(&dir, "")
            .max_parallel(POOL)
            .tool(noop_definition("noop", true), Arc::new(Noop))
            .expect("valid tool")
            .tool(noop_definition("noop_exclusive", false), Arc::new(Noop))
            .expect("valid tool")
            .build()
            .await
            .expect("host builds");
        assert!(host.problems().is_empty(), "{:?}", host.problems());

        // Warm up: instances of every component, the allocator, the runtime.
        let nap = json!({"ms": NAP_MS});
        let echo = json!({"text": "x"});
        let noop = json!({});
        scheduled(&host, "nap", &nap, 2).await;
        for name in ["noop", "noop_exclusive"] {
            scheduled(&host, name, &noop, 3).await;
        }
        scheduled(&host, "echo", &echo, 3).await;

        println!("scheduler benchmark: {CALLS} calls per turn, pool {POOL}, median of {runs} runs");
        let ideal = Duration::from_millis(NAP_MS) * (CALLS / POOL) as u32;
        let wall = scheduled(&host, "nap", &nap, runs).await;
        println!(
            "rolling pool: {CALLS} x nap({NAP_MS} ms): {:.1} ms; ideal {} ms; ratio {:.3}",
            wall.as_secs_f64() * 1e3,
            ideal.as_millis(),
            wall.as_secs_f64() / ideal.as_secs_f64()
        );

        for (label, name, args) in [
            ("native no-op, exclusive", "noop_exclusive", &noop),
            ("native no-op, parallel", "noop", &noop),
            ("Wasm echo, parallel", "echo", &echo),
        ] {
            let q = per_call(sequential(&host, name, args, runs).await);
            let s = per_call(scheduled(&host, name, args, runs).await);
            println!(
                "{label}: {s:.1} µs/call through execute_tool_calls, {q:.1} µs/call one by one \
                 without the scheduler; difference {:+.1} µs/call, ratio {:.2}",
                s - q,
                s / q
            );
        }
    });
}
