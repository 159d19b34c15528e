//! A policy as a process: reads one JSON request on stdin, writes one JSON
//! answer on stdout, exits. This is the hook model of today's coding agents
//! (a command per hook, JSON in and out) — the baseline the pipeline
//! benchmark compares Wasm policies with.

use std::io::{Read, Write};

fn main() {
    let mut input = String::new();
    if std::io::stdin().read_to_string(&mut input).is_err() {
        std::process::exit(2);
    }
    let request: serde_json::Value = match serde_json::from_str(&input) {
        Ok(v) => v,
        Err(_) => std::process::exit(2),
    };
    let answer = match request["role"].as_str() {
        Some("pre-execute") => serde_json::json!({"decision": "allow"}),
        Some("guard") => serde_json::json!({"deny": null}),
        Some("execute-around") => serde_json::json!({"deadline_ms": request["call"]["timeout_ms"]}),
        Some("post-execute") => serde_json::json!({"decision": "accept"}),
        Some("finalizer") => serde_json::json!({"content": null}),
        Some("observer") => serde_json::json!({}),
        _ => std::process::exit(2),
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{answer}");
}
