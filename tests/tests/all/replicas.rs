//! Replicas with real parts (issue 32): Debian's `redis-server`, three
//! `toolgate serve --http` replicas sharing it (`[state] url`), and
//! Debian's `haproxy` round-robin in front — all plain processes on free
//! local ports with temporary configurations. Clients speak MCP 2026-07-28
//! (stateless: no session, no affinity) through HAProxy.
//!
//! What must hold:
//! * the `rate-limit` example (100 per minute, counted with the atomic
//!   `kv.increment`) allows exactly 100 of 300 calls, however HAProxy
//!   spreads them over the three replicas;
//! * every call is answered exactly once;
//! * `kill -9` of one replica under load: HAProxy routes around it, no call
//!   hangs (an in-flight call on the dead replica gets an HTTP error), the
//!   others go on;
//! * `redis-server` stopped for 5 s: the guard that needs its counter
//!   denies with a clear error, a tool no stateful policy guards still
//!   serves, and after redis returns the guard counts again — no restart.
//!
//! `measure_calls_per_second` (ignored: run it with `--ignored
//! --nocapture`) gives the figures in BENCHMARKS.md.
//!
//! Without `redis-server` or `haproxy` the tests are ignored, saying so
//! (`has_replica_parts`, probed by `tests/build.rs`), and fail under CI.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_tests::{
    PluginDir, TempDir, fixtures, http_get_status, needs, stateless_call, toolgate_bin,
};

use crate::oci::free_port;

/// The longest any call may take before it counts as a hang.
pub(crate) const HANG: Duration = Duration::from_secs(30);

pub(crate) fn parts() {
    needs::expect(
        "replica_parts",
        ["redis-server", "haproxy"].iter().try_for_each(|p| {
            match Command::new(p)
                .arg(if *p == "haproxy" { "-v" } else { "--version" })
                .output()
            {
                Ok(o) if o.status.success() => Ok(()),
                _ => Err(format!(
                    "`{p}` is not on PATH; run `apt-get install -y redis-server haproxy`"
                )),
            }
        }),
    );
}

/// Wait until `ok` holds, or fail saying `what`.
pub(crate) fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let started = Instant::now();
    while !ok() {
        assert!(started.elapsed() < limit, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A `redis-server` on a free port, in memory only (no RDB, no AOF).
pub(crate) struct Redis {
    child: Option<Child>,
    port: u16,
    dir: TempDir,
}

impl Redis {
    pub(crate) fn start() -> Redis {
        let mut r = Redis {
            child: None,
            port: free_port(),
            dir: TempDir::new("redis"),
        };
        r.start_again();
        r
    }

    fn start_again(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        let port = self.port;
        wait_for("redis-server listens", Duration::from_secs(10), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
    }

    /// `kill -9`: stopped, as a crash or a network cut would stop it.
    pub(crate) fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One `toolgate serve --http` replica.
pub(crate) struct Replica {
    pub(crate) child: Child,
    pub(crate) port: u16,
}

impl Replica {
    pub(crate) fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// HAProxy, round-robin over the replicas, `/readyz` as its health check.
pub(crate) struct Haproxy {
    child: Child,
    port: u16,
    socket: std::path::PathBuf,
    _dir: TempDir,
}

impl Haproxy {
    pub(crate) fn start(backends: &[u16]) -> Haproxy {
        Haproxy::start_with(backends, "")
    }

    /// `backend`: lines added to the backend section (each `    …\n`).
    pub(crate) fn start_with(backends: &[u16], backend: &str) -> Haproxy {
        let dir = TempDir::new("haproxy");
        let port = free_port();
        let socket = dir.path().join("stats.sock");
        let servers: String = backends
            .iter()
            .enumerate()
            .map(|(i, p)| format!("    server r{} 127.0.0.1:{p} check\n", i + 1))
            .collect();
        // `retries` + `redispatch`: a connection refused (a dead replica
        // before its check fails) goes to another. Never retried: a
        // request that reached a replica (it may have run) — HAProxy's
        // default `retry-on conn-failure` does not resend those.
        let config = format!(
            "global\n    maxconn 2000\n    stats socket {} mode 600 level admin\n\
             defaults\n    mode http\n    timeout connect 1s\n    timeout client 60s\n    timeout server 60s\n\
             \x20   retries 3\n    option redispatch\n\
             frontend fe\n    bind 127.0.0.1:{port}\n    default_backend replicas\n\
             backend replicas\n    balance roundrobin\n    option httpchk GET /readyz\n\
             \x20   http-check expect status 200\n    default-server inter 200ms fall 1 rise 2\n{backend}{servers}",
            socket.display()
        );
        let path = dir.path().join("haproxy.cfg");
        std::fs::write(&path, config).unwrap();
        let child = Command::new("haproxy")
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start haproxy");
        wait_for("haproxy listens", Duration::from_secs(10), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        Haproxy {
            child,
            port,
            socket,
            _dir: dir,
        }
    }

    pub(crate) fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Per server of the backend: (name, status, sessions in total).
    pub(crate) fn stats(&self) -> Vec<(String, String, u64)> {
        use std::io::{Read, Write};
        let mut s = std::os::unix::net::UnixStream::connect(&self.socket).expect("stats socket");
        s.write_all(b"show stat\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out.lines()
            .filter(|l| l.starts_with("replicas,r"))
            .map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                (
                    f[1].to_string(),
                    f[17].to_string(),
                    f[7].parse().unwrap_or(0),
                )
            })
            .collect()
    }

    /// Wait until the servers' health checks say `up` of them are UP.
    pub(crate) fn wait_up(&self, up: usize) {
        wait_for(
            &format!("haproxy sees {up} replicas up"),
            Duration::from_secs(20),
            || self.stats().iter().filter(|s| s.1 == "UP").count() == up,
        );
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Redis, N replicas, HAProxy; the `tools` fixture (`echo`, `value`, …) and
/// the `rate-limit` example guarding `echo` only.
struct Cluster {
    redis: Redis,
    replicas: Vec<Replica>,
    haproxy: Haproxy,
    token: String,
    ids: AtomicU64,
    _plugins: PluginDir,
    _work: TempDir,
}

/// The binary the replicas run: `TOOLGATE_REPLICAS_BIN` (the
/// measurement runs a release build), else the one built with the tests.
pub(crate) fn replica_bin() -> std::path::PathBuf {
    std::env::var_os("TOOLGATE_REPLICAS_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(toolgate_bin)
}

/// The compile cache the replicas share (the first one fills it).
pub(crate) fn cache_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("replicas-compile-cache")
}

impl Cluster {
    /// `state`: the `[state]` table's body (`None`: Redis's).
    fn start(n: usize, limit: u64, state: Option<&str>) -> Cluster {
        parts();
        let redis = Redis::start();
        let work = TempDir::new("replicas");
        let plugins = PluginDir::new();
        plugins
            .add("tools", fixtures::TOOLS)
            .add("rate-limit", fixtures::EXAMPLE_RATE_LIMIT_RS);
        let state = match state {
            Some(s) => s.to_string(),
            None => format!("url = \"{}\"\ntimeout_ms = 500\n", redis.url()),
        };
        let config = work.path().join("toolgate.toml");
        std::fs::write(
            &config,
            format!(
                "[state]\n{state}\
                 [plugins.rate-limit]\nvars = {{ LIMIT = \"{limit}\", WINDOW_SECONDS = \"60\", TOOLS = \"echo\" }}\n\
                 [plugins.rate-limit.grants]\nkv = true\n"
            ),
        )
        .unwrap();
        // One token for all: the balancer sends any request anywhere.
        let token = format!("replicas-test-token-{}", std::process::id());
        let token_file = work.path().join("token");
        std::fs::write(&token_file, &token).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut replicas = Vec::new();
        for i in 0..n {
            let port = free_port();
            let state_dir = work.path().join(format!("state-{i}"));
            let log = work.path().join(format!("replica-{i}.log"));
            let child = Command::new(replica_bin())
                .arg("--plugins")
                .arg(plugins.path())
                .arg("--config")
                .arg(&config)
                .args(["serve", "--http", &format!("127.0.0.1:{port}")])
                .arg("--token-file")
                .arg(&token_file)
                .args(["--approve", "deny", "--no-watch", "--max-sessions", "512"])
                .args([
                    "--max-sessions-per-client",
                    "512",
                    "--max-queued-calls",
                    "1024",
                ])
                .args([
                    "--max-connections",
                    "1024",
                    "--max-connections-per-client",
                    "1024",
                ])
                .current_dir(work.path())
                .env("TOOLGATE_CACHE_DIR", cache_dir())
                .env("TOOLGATE_STATE_DIR", &state_dir)
                .env("RUST_LOG", "error")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .expect("start a replica");
            let mut replica = Replica { child, port };
            // One at a time: the first fills the compile cache the others
            // read.
            let addr = replica.addr();
            let started = Instant::now();
            while http_get_status(&addr, "/readyz") != 200 {
                let exited = replica.child.try_wait().unwrap();
                assert!(
                    exited.is_none() && started.elapsed() < Duration::from_secs(120),
                    "replica {i} not ready (exited: {exited:?}); its stderr:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
            replicas.push(replica);
        }
        let haproxy = Haproxy::start(&replicas.iter().map(|r| r.port).collect::<Vec<_>>());
        haproxy.wait_up(n);
        Cluster {
            redis,
            replicas,
            haproxy,
            token,
            ids: AtomicU64::new(1),
            _plugins: plugins,
            _work: work,
        }
    }

    /// One call through HAProxy.
    fn call(&self, tool: &str, arguments: Value) -> Result<Value, String> {
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        stateless_call(&self.haproxy.addr(), &self.token, id, tool, arguments, HANG)
    }

    /// `count` calls from `threads` clients at once; each answer (or
    /// transport error) with the time it took.
    fn calls(
        self: &Arc<Self>,
        threads: usize,
        count: usize,
        tool: &'static str,
        arguments: Value,
    ) -> Vec<(Result<Value, String>, Duration)> {
        let next = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (c, next, arguments) = (self.clone(), next.clone(), arguments.clone());
                std::thread::spawn(move || {
                    let mut out = Vec::new();
                    while next.fetch_add(1, Ordering::Relaxed) < count as u64 {
                        let started = Instant::now();
                        let r = c.call(tool, arguments.clone());
                        out.push((r, started.elapsed()));
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    }
}

/// The tool call's result: `Ok(text)` or `Err(the host's error message)`.
pub(crate) fn outcome(answer: &Value) -> Result<String, String> {
    let r = &answer["result"];
    assert!(answer.get("error").is_none(), "a JSON-RPC error: {answer}");
    let text = r["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if r["isError"] == true {
        Err(format!("{} {text}", r["_meta"]["toolgate/error"]))
    } else {
        Ok(text)
    }
}

/// Wait until at least 20 s are left in the current minute: the limit is
/// per clock minute, and the 300 calls must fall in one.
fn start_of_a_window() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let left = 60_000 - (now.as_millis() % 60_000) as u64;
    if left < 20_000 {
        std::thread::sleep(Duration::from_millis(left + 200));
    }
}

#[test]
#[cfg_attr(
    not(has_replica_parts),
    ignore = "needs redis-server and haproxy: run `apt-get install -y redis-server haproxy`"
)]
fn a_limit_of_100_holds_across_three_replicas_and_every_call_is_answered_once() {
    let c = Arc::new(Cluster::start(3, 100, None));
    start_of_a_window();
    let answers = c.calls(12, 300, "echo", json!({"text": "hi"}));
    assert_eq!(answers.len(), 300);
    let mut allowed = 0;
    let mut denied = 0;
    for (a, _) in &answers {
        let a = a.as_ref().unwrap_or_else(|e| panic!("a call failed: {e}"));
        match outcome(a) {
            Ok(t) => {
                assert_eq!(t, "hi");
                allowed += 1;
            }
            Err(e) => {
                assert!(
                    e.contains("DENIED") && e.contains("may be called 100 times per 60 s"),
                    "{e}"
                );
                denied += 1;
            }
        }
    }
    assert_eq!(
        (allowed, denied),
        (100, 200),
        "exactly the limit, across replicas"
    );
    // Calls no stateful policy guards: 600 more, each answered once.
    let answers = c.calls(12, 600, "value", json!({"mode": "valid"}));
    assert_eq!(answers.len(), 600);
    for (a, _) in &answers {
        let a = a.as_ref().unwrap_or_else(|e| panic!("a call failed: {e}"));
        assert_eq!(outcome(a), Ok("n = 1".into()), "{a}");
    }
    // Round-robin spread them: every replica served its share.
    let stats = c.haproxy.stats();
    assert_eq!(stats.len(), 3, "{stats:?}");
    for (name, status, sessions) in &stats {
        assert_eq!(status, "UP", "{name}");
        assert!(
            *sessions >= 250,
            "{name} served {sessions} of 900: {stats:?}"
        );
    }
}

#[test]
#[cfg_attr(
    not(has_replica_parts),
    ignore = "needs redis-server and haproxy: run `apt-get install -y redis-server haproxy`"
)]
fn a_replica_killed_and_redis_stopped_under_load_fail_closed_and_recover() {
    let mut cluster = Cluster::start(3, 1_000_000_000, None);
    // 1. `kill -9` of one replica while calls run (some of them sleeping
    // 200 ms in the tool, so calls are in flight on it).
    let victim = cluster.replicas.remove(1);
    let c = Arc::new(cluster);
    let load = {
        let c = c.clone();
        std::thread::spawn(move || c.calls(8, 400, "sleep", json!({"ms": 50})))
    };
    std::thread::sleep(Duration::from_millis(700));
    let killed_at = Instant::now();
    drop(victim); // SIGKILL, then reaped
    let answers = load.join().unwrap();
    assert_eq!(answers.len(), 400);
    let failed: Vec<_> = answers.iter().filter(|(a, _)| a.is_err()).collect();
    // Only what was in flight on the dead replica may fail — with an HTTP
    // error, never a hang (a hang is an `Err` too, after 30 s: checked by
    // the durations).
    assert!(
        failed.len() <= 8,
        "{} calls failed: {failed:?}",
        failed.len()
    );
    for (a, took) in &answers {
        assert!(
            *took < Duration::from_secs(10),
            "a call took {took:?}: {a:?}"
        );
        if let Err(e) = a {
            assert!(e.starts_with("HTTP 5"), "{e}");
        }
    }
    c.haproxy.wait_up(2);
    assert!(killed_at.elapsed() < Duration::from_secs(20));
    // The others go on: every call now answered.
    for (a, _) in c.calls(4, 100, "echo", json!({"text": "after"})) {
        assert_eq!(
            outcome(&a.expect("a call after the kill")),
            Ok("after".into())
        );
    }

    // 2. Redis stopped for 5 s: the guarded tool denies, saying why; the
    // unguarded one serves.
    let c = Arc::into_inner(c).expect("no other handle");
    let mut c = c;
    c.redis.stop();
    let stopped = Instant::now();
    let c = Arc::new(c);
    let mut denials = 0;
    while stopped.elapsed() < Duration::from_secs(5) {
        let started = Instant::now();
        let a = c.call("echo", json!({"text": "x"})).expect("an answer");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        let e = outcome(&a).expect_err("the guard cannot count: it denies");
        assert!(
            e.contains("DENIED")
                && e.contains("rate-limit: cannot count the call")
                && e.contains("state store")
                && e.contains("unavailable"),
            "{e}"
        );
        denials += 1;
        assert_eq!(
            outcome(
                &c.call("value", json!({"mode": "valid"}))
                    .expect("an answer")
            ),
            Ok("n = 1".into())
        );
    }
    assert!(denials >= 3, "{denials}");
    // 3. Redis back (empty: it kept nothing): the guard counts again, the
    // same processes — no restart.
    let mut c = Arc::into_inner(c).expect("no other handle");
    c.redis.start_again();
    let pids: Vec<u32> = c.replicas.iter().map(|r| r.child.id()).collect();
    let c = Arc::new(c);
    wait_for(
        "the guard counts again after redis returns",
        Duration::from_secs(10),
        || {
            c.calls(2, 6, "echo", json!({"text": "back"}))
                .iter()
                .all(|(a, _)| a.as_ref().is_ok_and(|a| outcome(a) == Ok("back".into())))
        },
    );
    let mut c = Arc::into_inner(c).expect("no other handle");
    for (r, pid) in c.replicas.iter_mut().zip(pids) {
        assert_eq!(r.child.id(), pid);
        assert!(
            r.child.try_wait().unwrap().is_none(),
            "replica {pid} exited"
        );
    }
}

/// Figures for BENCHMARKS.md: calls per second through HAProxy with 1, 2
/// and 3 replicas (a stateless tool, and the same tool under the
/// rate-limit guard counting in Redis), and the per-call latency of the
/// guarded call with the embedded store against Redis (one replica,
/// sequential calls: median). Every call must succeed.
#[test]
#[ignore = "a measurement: [TOOLGATE_REPLICAS_BIN=target/release/toolgate] cargo test -p toolgate-tests --test all -- replicas::measure --ignored --nocapture"]
fn measure_calls_per_second() {
    const CALLS: usize = 2000;
    const CLIENTS: usize = 16;
    println!("| replicas | tool | calls | clients | calls/s |\n| --- | --- | --- | --- | --- |");
    for n in 1..=3 {
        let c = Arc::new(Cluster::start(n, 1_000_000_000, None));
        for (tool, args) in [
            ("value", json!({"mode": "valid"})),
            ("echo", json!({"text": "x"})),
        ] {
            c.calls(CLIENTS, 200, tool, args.clone()); // warm
            let started = Instant::now();
            let answers = c.calls(CLIENTS, CALLS, tool, args);
            let secs = started.elapsed().as_secs_f64();
            assert!(
                answers
                    .iter()
                    .all(|(a, _)| a.as_ref().is_ok_and(|a| outcome(a).is_ok()))
            );
            let what = if tool == "echo" {
                "echo + rate-limit (Redis)"
            } else {
                "value (no state)"
            };
            println!(
                "| {n} | {what} | {CALLS} | {CLIENTS} | {:.0} |",
                CALLS as f64 / secs
            );
        }
    }
    println!("\n| store | median per guarded call | p90 |\n| --- | --- | --- |");
    let mut medians = Vec::new();
    for store in ["embedded", "redis"] {
        let state = (store == "embedded").then_some("path = \"kv.sqlite\"\n");
        let c = Arc::new(Cluster::start(1, 1_000_000_000, state));
        let mut lat: Vec<Duration> = Vec::new();
        for i in 0..1200 {
            let started = Instant::now();
            let a = c.call("echo", json!({"text": "x"})).expect("an answer");
            assert!(outcome(&a).is_ok(), "{a}");
            if i >= 200 {
                lat.push(started.elapsed());
            }
        }
        lat.sort();
        let (median, p90) = (lat[lat.len() / 2], lat[lat.len() * 9 / 10]);
        medians.push(median);
        println!("| {store} | {median:?} | {p90:?} |");
    }
    println!(
        "\nredis / embedded (median): {:.2}",
        medians[1].as_secs_f64() / medians[0].as_secs_f64()
    );
}

/// The Redis store itself, against a real `redis-server`: increments from
/// many tasks at once are exact, compare-and-swap has one winner, the
/// limits and the quota hold, a value that is not an integer is refused,
/// and a restart of the server is survived without reopening.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_replica_parts),
    ignore = "needs redis-server and haproxy: run `apt-get install -y redis-server haproxy`"
)]
async fn the_redis_store_is_atomic_and_keeps_the_limits() {
    use toolgate::store::KvBackend;
    use toolgate::store::redis::RedisStore;
    parts();
    let mut redis = Redis::start();
    let s = Arc::new(RedisStore::open(&redis.url(), "t", Duration::from_millis(500)).unwrap());
    s.ping().await.unwrap();
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let s = s.clone();
            tokio::spawn(async move {
                for _ in 0..50 {
                    s.increment("p", "scope", "n", 1).await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(
        s.get("p", "scope", "n").await.unwrap(),
        Some(b"800".to_vec())
    );
    assert_eq!(s.get("p", "other", "n").await.unwrap(), None);
    assert_eq!(s.get("q", "scope", "n").await.unwrap(), None);
    let tasks: Vec<_> = (0..8u8)
        .map(|i| {
            let s = s.clone();
            tokio::spawn(async move {
                s.compare_and_swap("p", "scope", "owner", None, &[i])
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut wins = 0;
    for t in tasks {
        wins += t.await.unwrap() as usize;
    }
    assert_eq!(wins, 1);
    s.set("p", "scope", "text", b"abc").await.unwrap();
    assert_eq!(
        s.increment("p", "scope", "text", 1).await,
        Err(toolgate::store::KvError::NotInteger { key: "text".into() })
    );
    assert_eq!(
        s.keys("p", "scope", "").await.unwrap(),
        vec!["n", "owner", "text"]
    );
    s.delete("p", "scope", "text").await.unwrap();
    assert_eq!(s.keys("p", "scope", "o").await.unwrap(), vec!["owner"]);
    // The quota counts all scopes, atomically.
    let half = vec![0u8; toolgate::budgets::KV_QUOTA_BYTES / 2];
    s.set("big", "a", "k", &half).await.unwrap();
    let e = s.set("big", "b", "k", &half).await.unwrap_err();
    assert!(matches!(e, toolgate::store::KvError::Quota { .. }), "{e}");
    s.delete("big", "a", "k").await.unwrap();
    s.set("big", "b", "k", &half).await.unwrap();
    // Down: fails closed, fast; back: answers again, same store object.
    redis.stop();
    let started = Instant::now();
    let e = s.increment("p", "scope", "n", 1).await.unwrap_err();
    assert!(e.is_unavailable(), "{e}");
    assert!(started.elapsed() < Duration::from_secs(2));
    redis.start_again();
    let started = Instant::now();
    loop {
        match s.increment("p", "scope", "n", 1).await {
            Ok(n) => {
                assert_eq!(n, 1, "the new server started empty");
                break;
            }
            Err(e) => assert!(
                started.elapsed() < Duration::from_secs(10),
                "no recovery: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
