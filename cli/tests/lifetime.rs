//! Nothing the host started outlives it: the real `toolgate` binary, real
//! sandboxed processes, found afterwards by a unique marker in their argv
//! (`/proc/PID/cmdline`).
//!
//! Each hostile case starts, through `serve`, (a) a foreground `bash` call
//! that double-forks (trying `setsid` too) a `sleep 1000` under a marker,
//! (b) a background job that closes its stdout and stderr and sleeps, and
//! (c) a bridged stdio MCP server (a small Node script) that double-forks a
//! child of its own, (d) an interactive terminal (`terminal_open`)
//! whose shell double-forks the same way, and (e) a language server (the
//! `lsp` tool's, configured in `[lsp]`) that does too; then kills the host (SIGKILL,
//! SIGTERM) and asserts that no process of those trees is left.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A compile cache for these tests, private to this user, outside every
/// grant (the same as `cli.rs` uses).
fn cli_cache() -> PathBuf {
    use std::os::unix::fs::DirBuilderExt;
    let uid = std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m));
    let dir = std::env::temp_dir().join(format!("toolgate-cli-test-cache-{}", uid.unwrap_or(0)));
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
    dir
}

/// The state directory beside the cache (the host makes it, `0700`): the
/// servers' audit record, store and the cache's key, never in the real home.
fn cli_state() -> PathBuf {
    let uid = std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m));
    std::env::temp_dir().join(format!("toolgate-cli-test-state-{}", uid.unwrap_or(0)))
}

fn temp(name: &str) -> PathBuf {
    let d =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Live (not zombie) processes whose argv contains `marker`.
fn processes_with(marker: &str) -> Vec<(i32, String)> {
    let me = std::process::id() as i32;
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .filter_map(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if !cmd.contains(marker) {
                return None;
            }
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let state = stat[stat.rfind(')')? + 1..].split_whitespace().next()?;
            (state != "Z" && state != "X").then_some((pid, cmd))
        })
        .collect()
}

/// Waits (up to `limit`) until `f` holds; false if it never did.
fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if f() {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Kills every process carrying `marker` (cleanup after a failed assertion).
fn reap(marker: &str) {
    for (pid, _) in processes_with(marker) {
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// `sleep SECS` running under the name `marker` (`bash` tool commands run
/// in `/bin/sh`, which has no `exec -a`).
fn named_sleep(marker: &str, secs: u32) -> String {
    format!("bash -c 'exec -a {marker} sleep {secs}'")
}

/// A shell snippet that leaves `sleep 1000` behind under `marker`: a double
/// fork, trying `setsid` first (the sandbox's seccomp filter refuses it).
fn daemon(marker: &str) -> String {
    let sleep = named_sleep(marker, 1000);
    format!("( ( setsid {sleep} 2>/dev/null || {sleep} ) & )")
}

/// The tests' language server, in Python (`tests/lsp/fake_server.py`;
/// mode `plain`: answers `initialize`, and every other request with null).
const TINY_LANGUAGE_SERVER: &str = include_str!("../../tests/lsp/fake_server.py");

/// A minimal stdio MCP server that double-forks a child under its marker
/// (its first argument) when it starts.
const FORKY_SERVER: &str = r#"
const { spawn } = require('child_process');
const marker = process.argv[2];
spawn('bash', ['-c', `( ( setsid bash -c 'exec -a ${marker} sleep 1000' 2>/dev/null || exec -a ${marker} sleep 1000 ) & )`], { stdio: 'ignore' });
const rl = require('readline').createInterface({ input: process.stdin });
rl.on('line', (line) => {
  let m;
  try { m = JSON.parse(line); } catch (e) { return; }
  if (m.id === undefined) return;
  let result = {};
  if (m.method === 'initialize') {
    result = { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} },
               serverInfo: { name: 'forky', version: '0' } };
  } else if (m.method === 'tools/list') {
    result = { tools: [] };
  }
  process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id: m.id, result }) + '\n');
});
"#;

/// `toolgate serve` over stdio, driven line by line.
struct Serve {
    child: Child,
    out: BufReader<ChildStdout>,
    next: u64,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serve {
    /// Starts `toolgate --approve allow serve` in `work` (which may hold a
    /// `toolgate.toml`) and initializes the session.
    fn start(work: &Path) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .args([
                "--approve",
                "allow",
                "serve",
                "--no-watch",
                "--structured-content",
            ])
            .current_dir(work)
            .env("TOOLGATE_CACHE_DIR", cli_cache())
            .env("TOOLGATE_STATE_DIR", cli_state())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("toolgate serve starts");
        let out = BufReader::new(child.stdout.take().unwrap());
        let mut s = Serve {
            child,
            out,
            next: 0,
        };
        let init = s.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
        );
        assert!(init.get("result").is_some(), "{init}");
        s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
    }

    fn send(&mut self, v: Value) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a request; returns its id.
    fn send_request(&mut self, method: &str, params: Value) -> u64 {
        self.next += 1;
        let id = self.next;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// The answer to request `id` (`None`: the server closed its output).
    fn answer(&mut self, id: u64) -> Option<Value> {
        loop {
            let mut line = String::new();
            if self.out.read_line(&mut line).ok()? == 0 {
                return None;
            }
            let Ok(m) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if m["id"] == id {
                return Some(m);
            }
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        self.answer(id).expect("serve answers")
    }

    /// A `tools/call`'s result; an answer without one (a JSON-RPC error)
    /// fails the test, showing it.
    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let r = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        r.get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{tool}: no result in {r}"))
    }

    /// Waits (up to `limit`) for the process to exit.
    fn exit_within(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let start = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return Some(s);
            }
            if start.elapsed() > limit {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The trees of the hostile case (a job, a terminal, a foreground call, an
/// MCP server, a language server), started through `serve` in `work`.
fn start_trees(work: &Path, marker: &str) -> Serve {
    std::fs::write(work.join("forky.js"), FORKY_SERVER).unwrap();
    std::fs::write(
        work.join("toolgate.toml"),
        format!(
            "[mcp.servers.forky]\ncommand = \"node\"\nargs = [\"forky.js\", \"{marker}-mcp\"]\n\
             [lsp]\npresets = false\n\
             [lsp.servers.tree]\ncommand = \"/bin/bash\"\nargs = [\"-c\", {:?}]\nextensions = [\"tree\"]\n",
            format!(
                "{}; exec -a {marker}-lsp-leader /usr/bin/python3 lsp.py plain",
                daemon(&format!("{marker}-lsp")),
            )
        ),
    )
    .unwrap();
    let mut serve = Serve::start(work);
    // (b) a background job that closes its output and sleeps.
    let job = serve.call(
        "bash",
        json!({"command": format!("exec >&- 2>&-; exec {}", named_sleep(&format!("{marker}-job"), 1000)), "run_in_background": true}),
    );
    assert_ne!(job["isError"], true, "{job}");
    // (d) a terminal whose program leaves a daemon behind.
    let term = serve.call(
        "terminal_open",
        json!({"command": format!("{}; exec {}", daemon(&format!("{marker}-term")), named_sleep(&format!("{marker}-term-leader"), 1000)), "yield_ms": 0}),
    );
    assert_ne!(term["isError"], true, "{term}");
    // (e) a language server that leaves a daemon behind, kept warm after
    // the question that started it.
    std::fs::write(work.join("lsp.py"), TINY_LANGUAGE_SERVER).unwrap();
    std::fs::write(work.join("x.tree"), "x\n").unwrap();
    let symbols = serve.call(
        "lsp",
        json!({"operation": "documentSymbol", "file": "x.tree"}),
    );
    assert_ne!(symbols["isError"], true, "{symbols}");
    // (a) a foreground call, in flight when the host dies.
    serve.send_request(
        "tools/call",
        json!({"name": "bash", "arguments": {"command": format!("{}; exec {}", daemon(&format!("{marker}-fg")), named_sleep(&format!("{marker}-fg-leader"), 1000))}}),
    );
    let all_up = eventually(Duration::from_secs(20), || {
        let found = processes_with(marker);
        [
            "-job",
            "-fg-leader",
            "-fg ",
            "-mcp ",
            "-term-leader",
            "-term ",
            "-lsp-leader",
            "-lsp ",
        ]
        .iter()
        .all(|part| {
            found
                .iter()
                .any(|(_, c)| c.contains(&format!("{marker}{part}")) && c.starts_with(marker))
        })
    });
    if !all_up {
        let found = processes_with(marker);
        reap(marker);
        panic!("not every tree started: {found:?}");
    }
    serve
}

fn assert_none_left(marker: &str, how: &str) {
    let gone = eventually(Duration::from_secs(5), || processes_with(marker).is_empty());
    let left = processes_with(marker);
    reap(marker);
    assert!(
        gone,
        "after the host was {how}, these outlived it: {left:#?}"
    );
}

#[test]
fn a_host_killed_with_sigkill_leaves_no_process_behind() {
    let work = temp("lifetime-kill");
    let marker = format!("tgmark{}k", std::process::id());
    let mut serve = start_trees(&work, &marker);
    serve.child.kill().unwrap();
    serve.child.wait().unwrap();
    assert_none_left(&marker, "killed with SIGKILL");
}

#[test]
fn sigterm_stops_serve_and_everything_it_started() {
    let work = temp("lifetime-term");
    let marker = format!("tgmark{}t", std::process::id());
    let mut serve = start_trees(&work, &marker);
    unsafe { libc::kill(serve.child.id() as i32, libc::SIGTERM) };
    let status = serve.exit_within(Duration::from_secs(15));
    assert_none_left(&marker, "sent SIGTERM");
    let status = status.expect("serve exits on SIGTERM");
    assert!(status.success(), "serve exits 0 on SIGTERM, got {status:?}");
}

/// The legitimate twin: a call in flight when SIGTERM arrives is answered
/// (as cancelled), and serve exits 0 at once, not at the call's end.
#[test]
fn sigterm_answers_the_call_in_flight_and_exits_zero() {
    let work = temp("lifetime-graceful");
    let marker = format!("tgmark{}g", std::process::id());
    let mut serve = Serve::start(&work);
    let ok = serve.call("bash", json!({"command": "echo still-works"}));
    assert!(ok.to_string().contains("still-works"), "{ok}");
    let id = serve.send_request(
        "tools/call",
        json!({"name": "bash", "arguments": {"command": format!("exec {}", named_sleep(&marker, 30))}}),
    );
    assert!(eventually(Duration::from_secs(10), || !processes_with(
        &marker
    )
    .is_empty()));
    let sent = Instant::now();
    unsafe { libc::kill(serve.child.id() as i32, libc::SIGTERM) };
    let answer = serve.answer(id);
    let status = serve.exit_within(Duration::from_secs(10));
    assert_none_left(&marker, "sent SIGTERM");
    let status = status.expect("serve exits on SIGTERM");
    assert!(status.success(), "{status:?}");
    assert!(sent.elapsed() < Duration::from_secs(10));
    let answer = answer.expect("the call in flight is answered before serve exits");
    assert_eq!(
        answer["result"]["_meta"]["toolgate/error"]["code"], "ABORTED",
        "{answer}"
    );
}

/// A job that closes its stdout and stderr is still watched: killed at its
/// timeout and by `job_kill`. Its twin, an ordinary job, runs to its end and
/// its output is kept.
#[test]
fn a_job_with_closed_output_ends_at_its_timeout_and_by_job_kill() {
    let work = temp("lifetime-jobs");
    let marker = format!("tgmark{}j", std::process::id());
    let mut serve = Serve::start(&work);
    let start = |serve: &mut Serve, name: &str, timeout: Option<u32>| -> String {
        let mut args = json!({"command": format!("exec >&- 2>&-; exec {}", named_sleep(&format!("{marker}-{name}"), 1000)), "run_in_background": true});
        if let Some(t) = timeout {
            args["timeoutMs"] = json!(t);
        }
        let r = serve.call("bash", args);
        r["structuredContent"]["job"]
            .as_str()
            .unwrap_or_else(|| panic!("a job id in {r}"))
            .to_string()
    };
    let timed = start(&mut serve, "timed", Some(1500));
    let killed = start(&mut serve, "killed", None);
    let twin = serve.call(
        "bash",
        json!({"command": "echo twin-output; sleep 0.2", "run_in_background": true}),
    );
    let twin = twin["structuredContent"]["job"]
        .as_str()
        .unwrap_or_else(|| panic!("a job id in {twin}"))
        .to_string();
    let has = |suffix: &str| {
        let m = format!("{marker}-{suffix}");
        move || processes_with(&m).iter().any(|(_, c)| c.starts_with(&m))
    };
    assert!(eventually(Duration::from_secs(10), has("timed")));
    assert!(eventually(Duration::from_secs(10), has("killed")));

    let answer = serve.call("job_kill", json!({"id": killed}));
    let still = has("killed")();
    if still {
        reap(&marker);
    }
    assert!(!still, "job_kill left the job running: {answer}");
    assert_eq!(answer["structuredContent"]["status"], "killed", "{answer}");

    let ended = eventually(Duration::from_secs(8), || !has("timed")());
    if !ended {
        reap(&marker);
    }
    assert!(ended, "the job outlived its 1.5 s timeout");
    // The table records the end when the host has reaped the process, a
    // moment after it is gone from /proc: ask again until the timed job is
    // no longer running (bounded).
    let mut list = Value::Null;
    let mut jobs: Vec<Value> = Vec::new();
    let recorded = eventually(Duration::from_secs(5), || {
        list = serve.call("job_list", json!({}));
        // A list has no structured content: its first text block is the JSON.
        jobs = list["content"][0]["text"]
            .as_str()
            .and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or_else(|| panic!("a list in {list}"));
        jobs.iter()
            .any(|j| j["id"] == timed.as_str() && j["status"] != "running")
    });
    assert!(recorded, "the timed job's end was never recorded: {list}");
    let info = |id: &str| {
        jobs.iter()
            .find(|j| j["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} in {list}"))
    };
    assert_eq!(info(&timed)["status"], "killed", "{list}");

    let out = serve.call("job_output", json!({"id": twin}));
    assert!(out.to_string().contains("twin-output"), "{out}");
    assert_eq!(info(&twin)["status"], "exited", "{list}");
    drop(serve);
    reap(&marker);
}

/// `toolgate run` stops on SIGTERM like on Ctrl-C: the turn is cancelled,
/// its records printed, its processes gone, exit 0.
#[test]
fn sigterm_stops_run_and_everything_it_started() {
    let work = temp("lifetime-run");
    let marker = format!("tgmark{}r", std::process::id());
    let batch = json!([
        {"id": "1", "name": "bash", "arguments": {"command": format!("exec >&- 2>&-; exec {}", named_sleep(&format!("{marker}-job"), 1000)), "run_in_background": true}},
        {"id": "2", "name": "bash", "arguments": {"command": format!("{}; exec {}", daemon(&format!("{marker}-fg")), named_sleep(&format!("{marker}-fg-leader"), 1000))}}
    ]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["--approve", "allow", "run", "-"])
        .current_dir(&work)
        .env("TOOLGATE_CACHE_DIR", cli_cache())
        .env("TOOLGATE_STATE_DIR", cli_state())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(batch.to_string().as_bytes())
        .unwrap();
    let up = eventually(Duration::from_secs(20), || {
        let found = processes_with(&marker);
        found
            .iter()
            .any(|(_, c)| c.starts_with(&format!("{marker}-fg ")))
            && found
                .iter()
                .any(|(_, c)| c.starts_with(&format!("{marker}-job")))
    });
    if !up {
        let _ = child.kill();
        reap(&marker);
        panic!("the batch did not start");
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    assert_none_left(&marker, "sent SIGTERM");
    assert!(
        out.status.success(),
        "{:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("SIGTERM"));
}
