//! Replicas behind HAProxy with the real MCP Python SDK as the client
//! (issue 32), on the parts of `replicas.rs` (Debian's `redis-server` and
//! `haproxy`, `toolgate serve --http` replicas, all plain processes):
//!
//! * 3,000 calls of the SDK's default mode (2026-07-28, stateless: no
//!   session, so no affinity) through round-robin: every call answered
//!   exactly once with its own text, and counted exactly once by the
//!   `rate-limit` guard in Redis (the side effect: one atomic increment
//!   per call that ran);
//! * 2025-era sessions (`Mcp-Session-Id`): with HAProxy's stick table on
//!   the header ([`SESSION_AFFINITY`], the snippet in docs/operators/serving.md)
//!   several sessions at once make all their calls; without it a session's
//!   request that lands on another replica is told at once, with 404 and
//!   a JSON-RPC error saying why — never a hang;
//! * SIGTERM of one replica under load through HAProxy, with
//!   `--drain-grace-ms`: `/readyz` says 503 while the listener still
//!   serves, HAProxy takes the replica out, it drains and exits 0, and no
//!   call fails;
//! * background job ids name their replica (`job-1@r1`): asked through
//!   the balancer, the replica that holds the job answers, the others say
//!   which replica does;
//! * each replica's audit record names it in every record, and `toolgate
//!   audit verify` given both replicas' files verifies each chain on its
//!   own and reports each.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_tests::{PluginDir, TempDir, fixtures, http_get_status, stateless_call};

use crate::replicas::{
    HANG, Haproxy, Launch, Redis, Replica, outcome, parts, replica_bin, wait_for,
};

/// The HAProxy lines (in the backend) that keep a 2025-era session on the
/// replica that opened it: the response to `initialize` carries the new
/// session's id, stored with the server that answered; every later
/// request carrying it goes there. 2026-07-28 requests carry no session
/// id and are balanced as before. The same lines are in docs/operators/serving.md.
pub(crate) const SESSION_AFFINITY: &str = "    stick-table type string len 128 size 100k expire 30m\n\
    \x20   stick on req.hdr(mcp-session-id)\n\
    \x20   stick store-response res.hdr(mcp-session-id)\n";

/// The grace the drain test gives HAProxy (its check runs every 200 ms and
/// one failure marks a server down: see `Haproxy::start_with`).
const GRACE_MS: u64 = 1500;

/// Redis, N replicas `r1`…`rN` (each its own state directory), HAProxy
/// round-robin in front; the `tools` fixture, the built-ins (`bash` and
/// its job tools) and the `rate-limit` example counting every `echo` in
/// Redis (a limit no test reaches, in one window for the whole test).
struct Fleet {
    redis: Redis,
    replicas: Vec<Option<Replica>>,
    haproxy: Haproxy,
    token: String,
    ids: AtomicU64,
    work: TempDir,
    _plugins: PluginDir,
}

impl Fleet {
    /// `backend`: lines for HAProxy's backend; `args`: more flags of each
    /// replica's `serve`.
    fn start(n: usize, backend: &str, args: &[&str]) -> Fleet {
        parts();
        let redis = Redis::start();
        let work = TempDir::new("replicas-sdk");
        let plugins = PluginDir::new();
        plugins
            .add("tools", fixtures::TOOLS)
            .add("rate-limit", fixtures::EXAMPLE_RATE_LIMIT_RS);
        let config = work.path().join("toolgate.toml");
        std::fs::write(
            &config,
            format!(
                "[state]\nurl = \"{}\"\ntimeout_ms = 1000\n\
                 [plugins.rate-limit]\nvars = {{ LIMIT = \"1000000000\", WINDOW_SECONDS = \"100000000\", TOOLS = \"echo\" }}\n\
                 [plugins.rate-limit.grants]\nkv = true\n",
                redis.url()
            ),
        )
        .unwrap();
        let token = format!("replicas-sdk-token-{}", std::process::id());
        let token_file = work.path().join("token");
        std::fs::write(&token_file, &token).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut replicas = Vec::new();
        for i in 1..=n {
            replicas.push(Some(
                Launch {
                    work: work.path(),
                    plugins: plugins.path(),
                    config: &config,
                    token_file: &token_file,
                    name: format!("r{i}"),
                    id: true,
                    // `bash` asks by default; nobody is there to answer.
                    approve: "allow",
                    args,
                }
                .start(),
            ));
        }
        let haproxy = Haproxy::start_with(&ports(&replicas), backend);
        haproxy.wait_up(n);
        Fleet {
            redis,
            replicas,
            haproxy,
            token,
            ids: AtomicU64::new(1),
            work,
            _plugins: plugins,
        }
    }

    fn replica(&self, i: usize) -> &Replica {
        self.replicas[i - 1].as_ref().expect("replica running")
    }

    /// One stateless call at `addr` (HAProxy's or a replica's).
    fn call_at(&self, addr: &str, tool: &str, arguments: Value) -> Result<Value, String> {
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        stateless_call(addr, &self.token, id, tool, arguments, HANG)
    }

    /// One stateless call through HAProxy.
    fn call(&self, tool: &str, arguments: Value) -> Result<Value, String> {
        self.call_at(&self.haproxy.addr(), tool, arguments)
    }

    /// The MCP endpoint through HAProxy.
    fn url(&self) -> String {
        format!("http://{}/mcp", self.haproxy.addr())
    }

    /// `echo` calls the rate-limit guard counted in Redis (all windows).
    fn counted_echoes(&self) -> u64 {
        use toolgate::store::KvBackend;
        tokio::runtime::Runtime::new().unwrap().block_on(async {
            // Opened in the runtime: its connection is a task of it.
            let store = toolgate::store::redis::RedisKv::new(
                toolgate::store::redis::Redis::open(
                    &self.redis.url(),
                    "toolgate",
                    Duration::from_secs(2),
                )
                .unwrap(),
            );
            let mut total = 0;
            // The example counts per caller; these calls have none (`-`).
            for key in store.keys("rate-limit", "", "count/-/echo/").await.unwrap() {
                let v = store.get("rate-limit", "", &key).await.unwrap().unwrap();
                total += String::from_utf8(v).unwrap().parse::<u64>().unwrap();
            }
            total
        })
    }

    /// SIGTERM to replica `i`.
    fn terminate(&self, i: usize) {
        let pid = self.replica(i).child.id();
        let sent = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    }

    /// Wait for replica `i` to exit (at most `within`); its status.
    fn exited(&mut self, i: usize, within: Duration) -> std::process::ExitStatus {
        let mut r = self.replicas[i - 1].take().expect("replica running");
        let started = Instant::now();
        loop {
            if let Some(status) = r.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                started.elapsed() < within,
                "replica r{i} still runs {within:?} after SIGTERM; its stderr:\n{}",
                std::fs::read_to_string(self.work.path().join(format!("r{i}.log")))
                    .unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Replica `i`'s audit record.
    fn audit_file(&self, i: usize) -> PathBuf {
        self.work.path().join(format!("state-r{i}/audit.jsonl"))
    }
}

fn ports(replicas: &[Option<Replica>]) -> Vec<u16> {
    replicas.iter().flatten().map(|r| r.port).collect()
}

/// Run `tests/mcp/replicas_client.py` against `url`; its JSON report. A
/// client that outlasts `within` is killed and the test fails: a hang.
fn sdk(url: &str, token: &str, args: &[&str], within: Duration) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/replicas_client.py");
    let mut child = Command::new(crate::serve::python())
        .arg(&script)
        .args(["--http", url, "--token", token])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the Python client");
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > within {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the SDK client hung ({within:?}); stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the SDK client failed: {}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap_or_else(|e| {
        panic!(
            "not a report ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// `POST /mcp` at `addr` with `headers` and `body`: the status and body.
fn raw_post(addr: &str, token: &str, headers: &str, body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(HANG)).unwrap();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nAuthorization: Bearer {token}\r\n\
         {headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).expect("an answer, not a hang");
    let status = reply
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = reply
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

#[test]
#[cfg_attr(
    not(all(has_replica_parts, has_mcp_client)),
    ignore = "needs redis-server, haproxy and the MCP Python SDK: run `apt-get install -y redis-server haproxy` and `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
fn three_thousand_sdk_calls_through_round_robin_are_each_answered_and_run_once() {
    let fleet = Arc::new(Fleet::start(3, "", &[]));
    let before = fleet.haproxy.stats();
    // Three SDK clients at once, 1,000 calls each, 8 at a time.
    let clients: Vec<_> = (0..3)
        .map(|k| {
            let f = fleet.clone();
            std::thread::spawn(move || {
                sdk(
                    &f.url(),
                    &f.token,
                    &[
                        "stateless",
                        "--calls",
                        "1000",
                        "--concurrency",
                        "8",
                        "--tag",
                        &format!("c{k}"),
                    ],
                    Duration::from_secs(600),
                )
            })
        })
        .collect();
    for c in clients {
        let r = c.join().unwrap();
        assert_eq!(r["protocol"], "2026-07-28", "the SDK's default mode: {r}");
        assert_eq!(
            (&r["answered"], &r["unanswered"], &r["twice"], &r["errors"]),
            (&json!(1000), &json!(0), &json!(0), &json!(0)),
            "{r}"
        );
        assert_eq!(r["wrong"], json!([]), "each answer is its own call's: {r}");
    }
    // Each call ran exactly once: the guard in front of `echo` counted
    // 3,000 in Redis, whichever replica ran it.
    assert_eq!(fleet.counted_echoes(), 3000);
    // No affinity: round-robin spread the requests evenly.
    let after = fleet.haproxy.stats();
    for (b, a) in before.iter().zip(&after) {
        let served = a.2 - b.2;
        assert!(
            (950..=1100).contains(&served),
            "{} served {served} of about 3,000 requests: {after:?}",
            a.0
        );
    }
}

#[test]
#[cfg_attr(
    not(all(has_replica_parts, has_mcp_client)),
    ignore = "needs redis-server, haproxy and the MCP Python SDK: run `apt-get install -y redis-server haproxy` and `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
fn sessions_stick_with_affinity_and_are_told_unknown_without_it() {
    let fleet = Fleet::start(3, SESSION_AFFINITY, &[]);
    // 1. With affinity: 9 sessions at once, 25 calls each, all answered.
    let before = fleet.haproxy.stats();
    let r = sdk(
        &fleet.url(),
        &fleet.token,
        &["sessions", "--clients", "9", "--calls", "25"],
        Duration::from_secs(300),
    );
    let clients = r["clients"].as_array().unwrap();
    assert_eq!(clients.len(), 9);
    for c in clients {
        assert!(
            c["protocol"].as_str().unwrap().starts_with("2025-"),
            "a 2025-era session: {c}"
        );
        assert_eq!((&c["ok"], &c["error"]), (&json!(25), &Value::Null), "{c}");
    }
    // The sessions were spread over the replicas, not all on one.
    let after = fleet.haproxy.stats();
    for (b, a) in before.iter().zip(&after) {
        assert!(
            a.2 - b.2 >= 9 * 25 / 3 / 2,
            "{} served too few: {after:?}",
            a.0
        );
    }

    // 2. The same replicas behind a balancer without affinity: a session's
    // requests go round the replicas, and the first that lands on one that
    // does not hold the session is told so at once.
    let plain = Haproxy::start(&ports(&fleet.replicas));
    plain.wait_up(3);
    let r = sdk(
        &format!("http://{}/mcp", plain.addr()),
        &fleet.token,
        &["sessions", "--clients", "3", "--calls", "6"],
        Duration::from_secs(120),
    );
    for c in r["clients"].as_array().unwrap() {
        let e = &c["error"];
        assert!(
            e["code"] == -32600
                && e["message"]
                    .as_str()
                    .unwrap()
                    .contains("the session is unknown to this server")
                && e["message"].as_str().unwrap().contains("affinity"),
            "a clear error: {c}"
        );
        assert!(e["seconds"].as_f64().unwrap() < 5.0, "no hang: {c}");
        assert!(c["ok"].as_u64().unwrap() < 6, "{c}");
    }
    // On the wire: 404, as the spec says, with a JSON-RPC error.
    let (status, body) = raw_post(
        &plain.addr(),
        &fleet.token,
        "MCP-Protocol-Version: 2025-06-18\r\nMcp-Session-Id: 0b6e2c5e-no-such-session\r\n",
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#,
    );
    assert_eq!(status, 404, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["code"], -32600);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("lives on another replica"),
        "{body}"
    );
}

#[test]
#[cfg_attr(
    not(all(has_replica_parts, has_mcp_client)),
    ignore = "needs redis-server, haproxy and the MCP Python SDK: run `apt-get install -y redis-server haproxy` and `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
fn sigterm_under_load_through_haproxy_fails_no_call() {
    let grace = GRACE_MS.to_string();
    let mut fleet = Fleet::start(3, "", &["--drain-grace-ms", &grace]);
    let victim_addr = fleet.replica(2).addr();
    let stop_load = Arc::new(AtomicBool::new(false));
    // Steady load: 8 raw clients calling `sleep` (150 ms: calls are always
    // in flight on every replica) and one SDK client with keep-alive
    // connections through HAProxy, until told to stop.
    let stop = stop_load.clone();
    let (addr, token) = (fleet.haproxy.addr(), fleet.token.clone());
    let raw: Vec<_> = (0..8)
        .map(|t| {
            let (stop, addr, token) = (stop.clone(), addr.clone(), token.clone());
            std::thread::spawn(move || {
                let mut out = Vec::new();
                let mut id = 1_000_000 * (t + 1);
                while !stop.load(Ordering::Relaxed) {
                    id += 1;
                    let started = Instant::now();
                    let r = stateless_call(&addr, &token, id, "sleep", json!({"ms": 150}), HANG);
                    out.push((r, started.elapsed()));
                }
                out
            })
        })
        .collect();
    let url = fleet.url();
    let python = {
        let token = token.clone();
        std::thread::spawn(move || {
            sdk(
                &url,
                &token,
                &[
                    "stateless",
                    "--calls",
                    "1500",
                    "--concurrency",
                    "4",
                    "--tag",
                    "d",
                ],
                Duration::from_secs(300),
            )
        })
    };
    std::thread::sleep(Duration::from_millis(1500));
    let served_before = fleet.haproxy.stats()[1].2;
    assert!(served_before > 0, "r2 took calls before the signal");
    fleet.terminate(2);
    let signalled = Instant::now();
    // The grace: not ready, yet still accepting (its listener is open).
    wait_for("r2 says 503 on /readyz", Duration::from_secs(2), || {
        http_get_status(&victim_addr, "/readyz") == 503
    });
    assert_eq!(http_get_status(&victim_addr, "/healthz"), 200);
    // HAProxy's check sees it and takes r2 out within the grace.
    fleet.haproxy.wait_up(2);
    let out_after = signalled.elapsed();
    assert!(
        out_after < Duration::from_millis(GRACE_MS),
        "HAProxy took r2 out after {out_after:?}, beyond the grace"
    );
    let status = fleet.exited(2, Duration::from_secs(GRACE_MS / 1000 + 15));
    assert!(status.success(), "a drained replica exits 0: {status:?}");
    let exited_after = signalled.elapsed();
    assert!(exited_after >= Duration::from_millis(GRACE_MS));
    // Load goes on a while on the two left.
    std::thread::sleep(Duration::from_millis(1500));
    stop_load.store(true, Ordering::Relaxed);
    let mut calls = 0;
    for t in raw {
        for (r, took) in t.join().unwrap() {
            calls += 1;
            let a = r.unwrap_or_else(|e| panic!("a call failed during the drain: {e}"));
            assert_eq!(outcome(&a), Ok("slept 150 ms".into()), "{a}");
            assert!(took < Duration::from_secs(5), "{took:?}");
        }
    }
    assert!(calls > 50, "a steady load: {calls} calls");
    let r = python.join().unwrap();
    assert_eq!(
        (&r["answered"], &r["unanswered"], &r["twice"], &r["errors"]),
        (&json!(1500), &json!(0), &json!(0), &json!(0)),
        "{r}"
    );
    assert_eq!(r["wrong"], json!([]), "{r}");
    println!(
        "drain under HAProxy: {calls} raw calls + 1500 SDK calls, none failed; r2 out of HAProxy after {out_after:?}, exited 0 after {exited_after:?}"
    );
}

/// The job id in a `bash` `run_in_background` answer.
fn job_id(text: &str) -> String {
    text.split_whitespace()
        .find(|w| w.starts_with("job-"))
        .map(|w| w.trim_end_matches(['.', ',']).to_string())
        .unwrap_or_else(|| panic!("no job id in {text}"))
}

#[test]
#[cfg_attr(
    not(has_replica_parts),
    ignore = "needs redis-server and haproxy: run `apt-get install -y redis-server haproxy`"
)]
fn a_job_id_names_its_replica_and_the_others_say_where_it_runs() {
    let fleet = Fleet::start(3, "", &[]);
    let r1 = fleet.replica(1).addr();
    let r2 = fleet.replica(2).addr();
    let started = fleet
        .call_at(
            &r1,
            "bash",
            json!({"command": "echo started; sleep 60", "run_in_background": true}),
        )
        .unwrap();
    let job = job_id(&outcome(&started).expect("started"));
    assert!(
        job.starts_with("job-") && job.ends_with("@r1"),
        "the id names its replica: {job}"
    );
    // Through the balancer: round-robin takes job_output to each replica
    // in turn; r1 answers, the others name r1.
    let mut held = 0;
    let mut elsewhere = std::collections::BTreeSet::new();
    for _ in 0..6 {
        let a = fleet.call("job_output", json!({"id": job})).unwrap();
        match outcome(&a) {
            Ok(text) => {
                assert!(text.contains(&job), "{text}");
                held += 1;
            }
            Err(e) => {
                assert!(
                    e.contains("NOT_FOUND")
                        && e.contains(&format!("job `{job}` runs on replica `r1`")),
                    "{e}"
                );
                let here = e
                    .split("not on this one (`")
                    .nth(1)
                    .and_then(|t| t.split('`').next())
                    .unwrap_or_else(|| panic!("names this replica: {e}"))
                    .to_string();
                elsewhere.insert(here);
            }
        }
    }
    assert_eq!(held, 2, "r1 answered its turns");
    assert_eq!(
        elsewhere.into_iter().collect::<Vec<_>>(),
        ["r2", "r3"],
        "each other replica said where the job runs"
    );
    // job_kill on another replica: refused, naming r1; on r1: killed.
    let e = outcome(&fleet.call_at(&r2, "job_kill", json!({"id": job})).unwrap()).unwrap_err();
    assert!(
        e.contains("runs on replica `r1`, not on this one (`r2`)"),
        "{e}"
    );
    let killed = outcome(&fleet.call_at(&r1, "job_kill", json!({"id": job})).unwrap());
    assert!(killed.is_ok(), "{killed:?}");
    // An id that names no replica, or this one, but no job: no such job.
    for id in ["job-1", "job-99@r2"] {
        let e = outcome(&fleet.call_at(&r2, "job_output", json!({"id": id})).unwrap()).unwrap_err();
        assert!(e.contains(&format!("there is no job `{id}`")), "{e}");
    }
}

/// `toolgate audit verify ARGS`: exit code and stdout.
fn audit_verify(args: &[&Path], extra: &[&str]) -> (i32, String) {
    let out = Command::new(replica_bin())
        .args(["audit", "verify"])
        .args(extra)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
#[cfg_attr(
    not(has_replica_parts),
    ignore = "needs redis-server and haproxy: run `apt-get install -y redis-server haproxy`"
)]
fn each_replica_keeps_its_own_audit_chain_and_verify_checks_each() {
    let mut fleet = Fleet::start(2, "", &[]);
    for i in 0..20 {
        let a = fleet
            .call("echo", json!({"text": format!("a{i}")}))
            .unwrap();
        assert!(outcome(&a).is_ok(), "{a}");
    }
    // A clean stop: each record ends with its signed shutdown checkpoint.
    for i in 1..=2 {
        fleet.terminate(i);
        assert!(fleet.exited(i, Duration::from_secs(30)).success());
    }
    let files = [fleet.audit_file(1), fleet.audit_file(2)];
    for (i, f) in files.iter().enumerate() {
        let text = std::fs::read_to_string(f).unwrap();
        let records: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let calls = records.iter().filter(|r| r["kind"] == "call").count();
        assert!(calls >= 5, "round-robin gave r{} calls: {calls}", i + 1);
        for r in &records {
            assert_eq!(r["replica"], format!("r{}", i + 1), "every record: {r}");
        }
    }
    let paths: Vec<&Path> = files.iter().map(|p| p.as_path()).collect();
    // Both files at once: one chain per replica, each verified.
    let (code, out) = audit_verify(&paths, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("replica r1 (")
            && out.contains("replica r2 (")
            && out.contains("2 of 2 replica chain(s) intact"),
        "{out}"
    );
    let (code, out) = audit_verify(&paths, &["--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["intact"], true);
    let chains = v["chains"].as_array().unwrap();
    assert_eq!(
        chains
            .iter()
            .map(|c| c["replica"].clone())
            .collect::<Vec<_>>(),
        [json!("r1"), json!("r2")]
    );
    for c in chains {
        assert_eq!(
            (&c["intact"], &c["cleanEnd"]),
            (&json!(true), &json!(true)),
            "{c}"
        );
    }
    // One file alone: the report of one record, as before.
    let (code, out) = audit_verify(&paths[..1], &["--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(v.get("chains").is_none() && v["intact"] == true, "{v}");
    // One byte changed in r2's record: r2's chain is broken, r1's intact.
    let text = std::fs::read_to_string(&files[1]).unwrap();
    let target = text
        .lines()
        .position(|l| l.contains("\"kind\":\"call\""))
        .unwrap();
    let tampered: String = text
        .lines()
        .enumerate()
        .map(|(n, l)| {
            let l = if n == target {
                l.replacen("\"tool\":\"echo\"", "\"tool\":\"ecHo\"", 1)
            } else {
                l.to_string()
            };
            l + "\n"
        })
        .collect();
    assert_ne!(tampered, text);
    std::fs::write(&files[1], tampered).unwrap();
    let (code, out) = audit_verify(&paths, &["--json"]);
    assert_eq!(code, 1, "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["intact"], false);
    let chains = v["chains"].as_array().unwrap();
    assert_eq!(chains[0]["intact"], true, "r1's chain is not r2's");
    assert_eq!(chains[1]["intact"], false);
    assert_eq!(chains[1]["firstBroken"], json!(target as u64 + 1), "{v}");
    let (_, out) = audit_verify(&paths, &[]);
    assert!(
        out.contains("replica r2 (")
            && out.contains("BROKEN at record")
            && out.contains("1 of 2 replica chain(s) intact"),
        "{out}"
    );
}
