//! The audit record's cost per call, at each `sync` setting, against no
//! record: the warm Wasm `echo` tool and no policies (so the record's share
//! is as large as it can be), one call at a time and 16 in flight (through
//! the arrivals scheduler, as `toolgate serve` runs calls — where group
//! commit shares a write and an `fdatasync` between callers).
//!
//! Run: `cargo bench -p toolgate-tests --bench audit` (optionally
//! `-- --calls N --rounds R`). Variants alternate within each round, so
//! machine noise falls on all alike; prints each round's medians and the
//! median over rounds. The file is in `$TMPDIR` (its file system decides
//! what `fdatasync` costs).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolgate::scheduler::Arrivals;
use toolgate::{HostConfig, ToolCall, Toolgate, TurnOptions};
use toolgate_tests::{PluginDir, TempDir, fixtures, test_runtime};

const VARIANTS: [&str; 4] = ["off", "none", "batch", "always"];

async fn host(plugins: &PluginDir, dir: &std::path::Path, variant: &str) -> Toolgate {
    let config = if variant == "off" {
        String::new()
    } else {
        format!(
            "[audit]\npath = \"{}\"\nsigning_key = \"{}\"\nsync = \"{variant}\"\n",
            dir.join(format!("{variant}.jsonl")).display(),
            dir.join("audit.key").display()
        )
    };
    Toolgate::builder()
        .runtime_options(test_runtime())
        .builtin_plugins(false)
        .plugin_dir(plugins.path())
        .config(HostConfig::parse(&config, "bench").unwrap())
        .build()
        .await
        .unwrap()
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let calls = arg("--calls", 5000);
    let rounds = arg("--rounds", 3);
    let plugins = PluginDir::new();
    plugins.add("tools", fixtures::TOOLS);
    let dir = TempDir::new("audit-bench");
    let mut seq_medians: Vec<Vec<Duration>> = vec![Vec::new(); VARIANTS.len()];
    let mut conc_rates: Vec<Vec<f64>> = vec![Vec::new(); VARIANTS.len()];
    for round in 1..=rounds {
        for (v, variant) in VARIANTS.iter().enumerate() {
            let host = host(&plugins, dir.path(), variant).await;
            let turn = TurnOptions::default();
            let call = |i: usize| ToolCall::new(format!("c{i}"), "echo", json!({"text": "x"}));
            for i in 0..200 {
                host.call(call(i), &turn).await;
            }
            // One at a time.
            let mut times = Vec::with_capacity(calls);
            for i in 0..calls {
                let t = Instant::now();
                let r = host.call(call(i), &turn).await;
                times.push(t.elapsed());
                assert!(!r.is_error, "{r:?}");
            }
            let m = median(&mut times);
            // 16 in flight through the arrivals scheduler.
            let arrivals = Arc::new(Arrivals::new(host.clone(), 256));
            let started = Instant::now();
            let mut tasks = tokio::task::JoinSet::new();
            for w in 0..16 {
                let arrivals = arrivals.clone();
                tasks.spawn(async move {
                    let turn = TurnOptions::default();
                    for i in (w..calls).step_by(16) {
                        let r = arrivals
                            .run(
                                ToolCall::new(format!("p{i}"), "echo", json!({"text": "x"})),
                                &turn,
                            )
                            .await
                            .unwrap();
                        assert!(!r.is_error);
                    }
                });
            }
            while tasks.join_next().await.is_some() {}
            let rate = calls as f64 / started.elapsed().as_secs_f64();
            host.shutdown().await;
            println!(
                "round {round} {variant:>6}: median {:>7.1} µs/call sequential; {:>7.0} calls/s with 16 in flight",
                m.as_secs_f64() * 1e6,
                rate
            );
            seq_medians[v].push(m);
            conc_rates[v].push(rate);
        }
    }
    println!("\nmedian over {rounds} round(s), {calls} calls each:");
    let base = median(&mut seq_medians[0].clone());
    let mut base_rates = conc_rates[0].clone();
    base_rates.sort_by(f64::total_cmp);
    let base_rate = base_rates[base_rates.len() / 2];
    for (v, variant) in VARIANTS.iter().enumerate() {
        let m = median(&mut seq_medians[v]);
        let mut r = conc_rates[v].clone();
        r.sort_by(f64::total_cmp);
        let rate = r[r.len() / 2];
        println!(
            "{variant:>6}: {:>7.1} µs/call (record: {:+.1} µs), {:>7.0} calls/s with 16 in flight ({:+.1}% vs off)",
            m.as_secs_f64() * 1e6,
            (m.as_secs_f64() - base.as_secs_f64()) * 1e6,
            rate,
            (rate / base_rate - 1.0) * 100.0
        );
    }
}
