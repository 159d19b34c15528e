//! The host's own cost per sub-agent turn, and the memory of an idle
//! background agent (issue 43), side by side in one run:
//!
//! ```sh
//! cargo bench -p toolgate-tests --bench delegation
//! ```
//!
//! A model server in this process (loopback HTTP, the Chat Completions
//! format) answers at once from a script and times its own work on each
//! request, which is subtracted. Measured, each the median of `RUNS`:
//!
//! * a direct `glob` call (the built-in component, the whole pipeline);
//! * a `subagent` call whose model answers at once (1 turn);
//! * a `subagent` call whose model calls `glob` in each of 10 turns and
//!   answers in the 11th.
//!
//! The host's cost of one turn with a tool call is then
//! `(t11 − t1) / 10 − glob − server`: building the request, the egress
//! check and connection, reading the answer, the batch through the
//! scheduler, the bookkeeping. Memory: `AGENTS` background agents whose
//! model never answers (the server holds each request), the process's
//! resident memory before and after (the server's side of each connection
//! included, so an upper bound).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolgate::{ToolCall, Toolgate, TurnOptions};

const RUNS: usize = 30;
const TURNS: usize = 11;
const AGENTS: usize = 200;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The server's state: its own time per answered request, and the held
/// requests.
#[derive(Default)]
struct Server {
    work_ns: Mutex<Vec<u64>>,
    held: AtomicUsize,
    silent: std::sync::atomic::AtomicBool,
    requests: AtomicU64,
    /// The size of the last request (the conversation and the tools).
    request_bytes: AtomicU64,
}

fn answer(body: &Value) -> Value {
    let prompt = body["messages"][1]["content"].as_str().unwrap_or("");
    let turns = body["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count());
    let want: usize = prompt.parse().unwrap_or(1);
    if turns + 1 < want {
        json!({
            "choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": format!("c{turns}"), "type": "function", "function": {"name": "glob", "arguments": "{\"pattern\":\"*.none\"}"}}
            ]}, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2}
        })
    } else {
        json!({
            "choices": [{"message": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1}
        })
    }
}

async fn serve(listener: tokio::net::TcpListener, state: Arc<Server>) {
    while let Ok((mut s, _)) = listener.accept().await {
        let state = state.clone();
        tokio::spawn(async move {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            let mut started = None;
            let (head_end, len) = loop {
                let n = s.read(&mut chunk).await.unwrap_or(0);
                if n == 0 {
                    return;
                }
                started.get_or_insert_with(Instant::now);
                buf.extend_from_slice(&chunk[..n]);
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
                    let len = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    break (i + 4, len);
                }
            };
            while buf.len() < head_end + len {
                let n = s.read(&mut chunk).await.unwrap_or(0);
                if n == 0 {
                    return;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            state.requests.fetch_add(1, Ordering::Relaxed);
            state
                .request_bytes
                .store(buf.len() as u64, Ordering::Relaxed);
            if state.silent.load(Ordering::Relaxed) {
                // Only the socket is kept: what stays is the host's.
                drop(buf);
                state.held.fetch_add(1, Ordering::Relaxed);
                // Held until the agent is interrupted (the host drops it).
                let _ = s.read(&mut chunk).await;
                state.held.fetch_sub(1, Ordering::Relaxed);
                return;
            }
            let body: Value = serde_json::from_slice(&buf[head_end..]).unwrap_or_default();
            let out = answer(&body).to_string();
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{out}",
                out.len()
            );
            let _ = s.write_all(response.as_bytes()).await;
            let took = started.map_or(0, |t| t.elapsed().as_nanos() as u64);
            state.work_ns.lock().unwrap().push(took);
        });
    }
}

async fn time_calls(host: &Toolgate, tool: &str, args: Value) -> Duration {
    let turn = TurnOptions::default();
    let mut times = Vec::with_capacity(RUNS);
    for i in 0..=RUNS {
        let t = Instant::now();
        let r = host
            .call(ToolCall::new(format!("b{i}"), tool, args.clone()), &turn)
            .await;
        assert!(!r.is_error, "{tool}: {}", r.text());
        if i > 0 {
            times.push(t.elapsed());
        }
    }
    median(times)
}

fn main() {
    let root =
        std::env::temp_dir().join(format!("toolgate-bench-delegation-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("work")).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = Arc::new(Server::default());
        tokio::spawn(serve(listener, server.clone()));
        let config = format!(
            "[models.m]\napi = \"chat-completions\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"bench\"\n\
             [delegation]\nmax_background = {AGENTS}\nmax_turns = 100\n\
             [egress]\nallow_private = [\"127.0.0.1/32\"]\n[state]\npath = {:?}\n",
            root.join("kv.sqlite").display().to_string()
        );
        let host = Toolgate::builder()
            .runtime_options(toolgate_tests::test_runtime())
            .workdir(root.join("work"))
            .config(toolgate::HostConfig::parse(&config, "bench").unwrap())
            .build()
            .await
            .expect("host builds");
        let glob = time_calls(&host, "glob", json!({"pattern": "*.none"})).await;
        server.work_ns.lock().unwrap().clear();
        let one = time_calls(&host, "subagent", json!({"description": "b", "prompt": "1"})).await;
        let many = time_calls(
            &host,
            "subagent",
            json!({"description": "b", "prompt": TURNS.to_string()}),
        )
        .await;
        let work = {
            let v: Vec<Duration> = server
                .work_ns
                .lock()
                .unwrap()
                .iter()
                .map(|n| Duration::from_nanos(*n))
                .collect();
            median(v)
        };
        let per_turn = (many.saturating_sub(one)) / (TURNS as u32 - 1);
        let host_turn = per_turn.saturating_sub(glob).saturating_sub(work);
        println!("median of {RUNS} calls after one warm-up; the model server answers at once (its own work per request: {})", us(work));
        println!("| what | median |");
        println!("| --- | --- |");
        println!("| `glob` called directly (component, whole pipeline) | {} |", us(glob));
        println!("| `subagent`, 1 model turn, no tool call | {} |", us(one));
        println!("| `subagent`, {TURNS} model turns, a `glob` in each of the first {} | {} |", TURNS - 1, us(many));
        println!("| one more turn with a tool call: (t{TURNS} − t1) / {} | {} |", TURNS - 1, us(per_turn));
        println!("| of it, the host's own (minus `glob` and the server's work) | {} |", us(host_turn));

        // Memory of idle background agents.
        server.silent.store(true, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let before = rss_kib();
        let turn = TurnOptions::default();
        for i in 0..AGENTS {
            let r = host
                .call(
                    ToolCall::new(format!("bg{i}"), "subagent", json!({"description": "idle", "prompt": "1", "run_in_background": true})),
                    &turn,
                )
                .await;
            assert!(!r.is_error, "{}", r.text());
        }
        let end = Instant::now() + Duration::from_secs(30);
        while server.held.load(Ordering::Relaxed) < AGENTS && Instant::now() < end {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let after = rss_kib();
        println!(
            "| {AGENTS} idle background agents (each waiting for its model; its request {} bytes), resident memory | {} KiB before, {} KiB after: {:.1} KiB per agent |",
            server.request_bytes.load(Ordering::Relaxed),
            before,
            after,
            (after.saturating_sub(before)) as f64 / AGENTS as f64
        );
        for i in 1..=AGENTS {
            let id = format!("a-{}", 2 * (RUNS + 1) + i);
            let _ = host
                .call(ToolCall::new("stop", "interrupt_agent", json!({"agent_id": id})), &turn)
                .await;
        }
    });
    let _ = std::fs::remove_dir_all(&root);
}
