//! The file tools against the native programs, in one run on the same data:
//! `grep` (the built-in component, through the whole pipeline) against
//! `rg`, and `read` against `cat`.
//!
//! ```sh
//! cargo bench -p toolgate-tests --bench catalog
//! ```
//!
//! It generates, in a temporary directory, a tree of 5,000 files of 10 KiB
//! (about 50 MB; one file in 100 holds a match) and one 10 MiB text file,
//! warms the page cache, then times each command 7 times and prints the
//! medians and the ratios. `rg` must be on the PATH (Debian: `apt-get
//! install ripgrep`); without it the grep comparison is skipped, and says so.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use toolgate::{ToolCall, Toolgate, TurnOptions};

const FILES: usize = 5_000;
const FILE_BYTES: usize = 10 * 1024;
const BIG_BYTES: usize = 10 * 1024 * 1024;
const RUNS: usize = 7;
const PATTERN: &str = "needle_[0-9]+";

/// A cheap deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

const WORDS: &[&str] = &[
    "let", "fn", "value", "return", "match", "struct", "impl", "self", "error", "result", "option",
    "vector", "string", "config", "handler", "request", "response", "buffer", "stream", "token",
];

/// Text lines of about 60–90 bytes until `bytes`.
fn text(rng: &mut Rng, bytes: usize, needle: Option<usize>) -> String {
    let mut s = String::with_capacity(bytes + 100);
    let mut line = 0;
    while s.len() < bytes {
        if Some(line) == needle {
            s.push_str(&format!("    // needle_{} found here\n", rng.next() % 1000));
        } else {
            let n = 8 + (rng.next() % 6) as usize;
            for i in 0..n {
                if i > 0 {
                    s.push(' ');
                }
                s.push_str(WORDS[(rng.next() % WORDS.len() as u64) as usize]);
            }
            s.push('\n');
        }
        line += 1;
    }
    s
}

fn generate(root: &Path) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for i in 0..FILES {
        let dir = root.join(format!("tree/d{:02}", i / 100));
        std::fs::create_dir_all(&dir).unwrap();
        let needle = (i % 100 == 7).then_some(40);
        std::fs::write(
            dir.join(format!("f{i:04}.rs")),
            text(&mut rng, FILE_BYTES, needle),
        )
        .unwrap();
    }
    std::fs::write(root.join("big.txt"), text(&mut rng, BIG_BYTES, None)).unwrap();
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time_command(root: &Path, program: &str, args: &[&str]) -> Option<(Duration, usize)> {
    let mut times = Vec::new();
    let mut lines = 0;
    for _ in 0..RUNS + 1 {
        let started = Instant::now();
        let out = Command::new(program)
            .args(args)
            .current_dir(root)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        times.push(started.elapsed());
        lines = out.stdout.iter().filter(|&&b| b == b'\n').count();
    }
    times.remove(0); // the warm-up
    Some((median(times), lines))
}

async fn time_tool(host: &Toolgate, name: &str, args: serde_json::Value) -> (Duration, String) {
    let mut times = Vec::new();
    let mut text = String::new();
    for _ in 0..RUNS + 1 {
        let started = Instant::now();
        let r = host
            .call(
                ToolCall::new("b", name, args.clone()),
                &TurnOptions::default(),
            )
            .await;
        times.push(started.elapsed());
        assert!(!r.is_error, "{name} failed: {r:?}");
        text = r.text();
    }
    times.remove(0);
    (median(times), text)
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let root = std::env::temp_dir().join(format!("toolgate-bench-catalog-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    generate(&root);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let host = Toolgate::builder()
            .runtime_options(toolgate_tests::test_runtime())
            .workdir(&root)
            .build()
            .await
            .expect("host builds");
        println!(
            "data: {FILES} files of {FILE_BYTES} bytes under tree/ ({:.1} MB), big.txt {} bytes; median of {RUNS} runs after one warm-up",
            (FILES * FILE_BYTES) as f64 / 1e6,
            BIG_BYTES
        );
        println!("| what | command | median | ratio |");
        println!("| --- | --- | --- | --- |");
        let (ours, out) = time_tool(
            &host,
            "grep",
            json!({"pattern": PATTERN, "path": "tree", "output_mode": "content"}),
        )
        .await;
        let our_lines = out.lines().count();
        match time_command(&root, "rg", &["-n", "--no-heading", PATTERN, "tree"]) {
            Some((rg, rg_lines)) => {
                assert_eq!(our_lines, rg_lines, "grep and rg disagree");
                let (rg1, _) =
                    time_command(&root, "rg", &["-j1", "-n", "--no-heading", PATTERN, "tree"]).unwrap();
                println!(
                    "| grep, {our_lines} matching lines | `grep {{\"pattern\": \"{PATTERN}\", \"path\": \"tree\", \"output_mode\": \"content\"}}` (component, whole pipeline) | {} | |",
                    ms(ours)
                );
                println!("| | `rg -n --no-heading '{PATTERN}' tree` | {} | grep/rg = {:.1}× |", ms(rg), ours.as_secs_f64() / rg.as_secs_f64());
                println!("| | `rg -j1 -n --no-heading '{PATTERN}' tree` (one thread) | {} | grep/rg -j1 = {:.1}× |", ms(rg1), ours.as_secs_f64() / rg1.as_secs_f64());
            }
            None => println!("| grep | rg is not installed: comparison skipped | {} | |", ms(ours)),
        }
        let (files, _) = time_tool(&host, "grep", json!({"pattern": PATTERN, "path": "tree"})).await;
        if let Some((rg, _)) = time_command(&root, "rg", &["-l", PATTERN, "tree"]) {
            println!(
                "| grep, files_with_matches | `grep {{\"pattern\": \"{PATTERN}\", \"path\": \"tree\"}}` vs `rg -l` | {} vs {} | {:.1}× |",
                ms(files),
                ms(rg),
                files.as_secs_f64() / rg.as_secs_f64()
            );
        }
        let (read, out) = time_tool(&host, "read", json!({"path": "big.txt"})).await;
        let total: u64 = out
            .rsplit(" of ")
            .next()
            .and_then(|s| s.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let (cat, _) = time_command(&root, "cat", &["big.txt"]).unwrap();
        println!(
            "| read, first 2000 lines (the whole file streamed to count {total} lines) | `read {{\"path\": \"big.txt\"}}` | {} | read/cat = {:.1}× |",
            ms(read),
            read.as_secs_f64() / cat.as_secs_f64()
        );
        let (tail, _) = time_tool(
            &host,
            "read",
            json!({"path": "big.txt", "offset": total.saturating_sub(1999)}),
        )
        .await;
        println!(
            "| read, last 2000 lines | `read {{\"path\": \"big.txt\", \"offset\": {}}}` | {} | read/cat = {:.1}× |",
            total.saturating_sub(1999),
            ms(tail),
            tail.as_secs_f64() / cat.as_secs_f64()
        );
        println!("| | `cat big.txt` (10 MiB to a pipe) | {} | |", ms(cat));
        host.shutdown().await;
    });
    let _ = std::fs::remove_dir_all(&root);
}
