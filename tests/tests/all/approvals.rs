//! Issue 29, the approval queue (`--approve queue`): real `bash` calls
//! through the built-in plugins (ask-destructive asks, secrets-guard
//! guards), held in the SQLite store until a decision, a grant, a
//! timeout, a cancellation — and a host killed with an entry pending.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate::approval::grant::GrantSpec;
use toolgate::approval::queue::{ApprovalQueue, DecideError, Verdict};
use toolgate::approval::sqlite::SqliteStore;
use toolgate::approval::store::{ApprovalStore, Entry, EntryState, Listing};
use toolgate::{CallRecord, HostConfig, ToolCall, Toolgate, TurnOptions};
use toolgate_tests::{TempDir, test_runtime, toolgate_bin};

/// The built-in plugins on `dir/work`, the queue's store and the audit
/// record in `dir`; `approval` is added to the `[approval]` table.
async fn queue_host(dir: &Path, approval: &str) -> Toolgate {
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let config = format!(
        "[approval]\nmode = \"queue\"\nstore = \"{}\"\n{approval}\n\
         [audit]\npath = \"{}\"\nsigning_key = \"{}\"\n",
        dir.join("approvals.sqlite").display(),
        dir.join("audit.jsonl").display(),
        dir.join("audit.key").display(),
    );
    let h = Toolgate::builder()
        .runtime_options(test_runtime())
        .workdir(&work)
        .config(HostConfig::parse(&config, "test config").unwrap())
        .build()
        .await
        .expect("host builds");
    assert!(h.problems().is_empty(), "{:?}", h.problems());
    h
}

fn queue(h: &Toolgate) -> &std::sync::Arc<ApprovalQueue> {
    h.approvals().expect("the queue answers `ask`")
}

/// A `bash` call of its own turn, running in the background.
fn spawn_bash(
    h: &Toolgate,
    id: &str,
    command: &str,
    turn: TurnOptions,
) -> tokio::task::JoinHandle<CallRecord> {
    let h = h.clone();
    let call = ToolCall::new(id, "bash", json!({ "command": command }));
    tokio::spawn(async move { h.call(call, &turn).await })
}

/// Waits (at most 20 s) until `n` entries are pending.
async fn pending(h: &Toolgate, n: usize) -> Vec<Entry> {
    let start = Instant::now();
    loop {
        let p = queue(h).pending().await.unwrap();
        if p.len() == n {
            return p;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{} pending, not {n}: {p:?}",
            p.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The audit record's call records, by call id (after shutdown).
fn audited(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("audit.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == "call")
        .collect()
}

fn approval_decision<'a>(records: &'a [Value], call_id: &str) -> &'a Value {
    let r = records
        .iter()
        .find(|r| r["callId"] == call_id)
        .unwrap_or_else(|| panic!("no record of {call_id}"));
    r["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["stage"] == "approval")
        .unwrap_or_else(|| panic!("no approval decision in {r}"))
}

fn ran(r: &CallRecord) -> bool {
    !r.is_error || r.code() == Some("EXIT_STATUS")
}

#[tokio::test]
async fn queued_calls_wait_until_one_action_approves_both() {
    let dir = TempDir::new("approvals-two");
    let h = queue_host(dir.path(), "timeout_ms = 60000").await;
    let a = spawn_bash(&h, "a", "echo first", TurnOptions::default());
    let b = spawn_bash(&h, "b", "echo second", TurnOptions::default());
    let entries = pending(&h, 2).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!a.is_finished() && !b.is_finished(), "the calls wait");
    for e in &entries {
        assert_eq!(e.tool, "bash");
        assert_eq!(e.asked_by, "ask-destructive");
        assert!(e.reason.contains("can change or delete data"), "{e:?}");
        assert_eq!(e.scope, "");
        assert_eq!(e.state, EntryState::Pending);
        assert_eq!(e.expires_ms - e.since_ms, 60_000);
        assert!(e.id.starts_with("a-"), "{}", e.id);
    }
    let mut commands: Vec<&str> = entries
        .iter()
        .map(|e| e.arguments["command"].as_str().unwrap())
        .collect();
    commands.sort();
    assert_eq!(commands, ["echo first", "echo second"]);
    // One action, two decisions (what the console's "approve selected" does).
    let (x, y) = tokio::join!(
        queue(&h).decide(&entries[0].id, Verdict::Approve, "alice"),
        queue(&h).decide(&entries[1].id, Verdict::Approve, "alice"),
    );
    assert!(x.is_ok() && y.is_ok(), "{x:?} {y:?}");
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    assert!(!a.is_error && a.text().contains("first"), "{a:?}");
    assert!(!b.is_error && b.text().contains("second"), "{b:?}");
    // Decided once: a second decision is too late.
    let again = queue(&h)
        .decide(&entries[0].id, Verdict::Approve, "bob")
        .await;
    assert!(
        matches!(again, Err(DecideError::NotPending(_))),
        "{again:?}"
    );
    let history = queue(&h).decided(10).await.unwrap();
    assert_eq!(history.len(), 2);
    assert!(
        history
            .iter()
            .all(|e| e.state == EntryState::Approved && e.decided.as_ref().unwrap().by == "alice")
    );
    h.shutdown().await;
    let records = audited(dir.path());
    for id in ["a", "b"] {
        let d = approval_decision(&records, id);
        assert_eq!(d["verdict"], "approve");
        assert_eq!(d["decidedBy"], "alice", "who decided is recorded");
    }
}

#[tokio::test]
async fn a_denial_s_message_reaches_the_model() {
    let dir = TempDir::new("approvals-deny");
    let h = queue_host(dir.path(), "").await;
    let a = spawn_bash(&h, "a", "rm -rf build", TurnOptions::default());
    let e = pending(&h, 1).await.remove(0);
    queue(&h)
        .decide(
            &e.id,
            Verdict::Deny(Some("use `cargo clean` instead".into())),
            "bob",
        )
        .await
        .unwrap();
    let r = a.await.unwrap();
    assert_eq!(r.code(), Some("DENIED"), "{r:?}");
    assert!(
        r.text().contains("use `cargo clean` instead"),
        "{}",
        r.text()
    );
    h.shutdown().await;
    let d = approval_decision(&audited(dir.path()), "a").clone();
    assert_eq!(d["verdict"], "deny");
    assert_eq!(d["decidedBy"], "bob");
}

#[tokio::test]
async fn a_grant_lets_matching_calls_through_and_others_queue() {
    let dir = TempDir::new("approvals-grant");
    let h = queue_host(dir.path(), "").await;
    let first = spawn_bash(&h, "first", "cargo test --version", TurnOptions::default());
    let e = pending(&h, 1).await.remove(0);
    let spec = GrantSpec {
        argument: Some("command".into()),
        pattern: Some("cargo test*".into()),
        duration_ms: Some(10 * 60 * 1000),
        ..GrantSpec::default()
    };
    let decided = queue(&h)
        .decide(&e.id, Verdict::Grant(spec), "carol")
        .await
        .unwrap();
    let grant_id = decided
        .decided
        .unwrap()
        .grant
        .expect("the decision made a grant");
    assert!(ran(&first.await.unwrap()));
    // The next matching call: no new entry, approved by the grant.
    let next = h
        .call(
            ToolCall::new("next", "bash", json!({"command": "cargo test --help"})),
            &TurnOptions::default(),
        )
        .await;
    assert!(ran(&next), "{next:?}");
    assert_eq!(
        queue(&h).decided(10).await.unwrap().len(),
        1,
        "no new entry"
    );
    let grants = queue(&h).grants().await.unwrap();
    assert_eq!(grants.len(), 1);
    assert_eq!(grants[0].id, grant_id);
    assert_eq!(grants[0].tool, "bash");
    assert_eq!(grants[0].used, 1);
    assert_eq!(grants[0].created_by, "carol");
    // A call that does not match queues.
    let other = spawn_bash(&h, "other", "echo not granted", TurnOptions::default());
    let e = pending(&h, 1).await.remove(0);
    assert_eq!(e.arguments["command"], "echo not granted");
    queue(&h)
        .decide(&e.id, Verdict::Deny(None), "carol")
        .await
        .unwrap();
    assert_eq!(other.await.unwrap().code(), Some("DENIED"));
    // Revoked: matching calls queue again.
    queue(&h).revoke(&grant_id, "carol").await.unwrap();
    assert!(queue(&h).grants().await.unwrap().is_empty());
    let after = spawn_bash(&h, "after", "cargo test --lib", TurnOptions::default());
    let e = pending(&h, 1).await.remove(0);
    queue(&h)
        .decide(&e.id, Verdict::Deny(None), "carol")
        .await
        .unwrap();
    assert_eq!(after.await.unwrap().code(), Some("DENIED"));
    h.shutdown().await;
    let records = audited(dir.path());
    assert_eq!(approval_decision(&records, "first")["decidedBy"], "carol");
    let by_grant = approval_decision(&records, "next")["decidedBy"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        by_grant.starts_with(&format!("grant {grant_id}"))
            && by_grant.contains("cargo test*")
            && by_grant.contains("granted by carol"),
        "the grant used is recorded: {by_grant}"
    );
}

#[tokio::test]
async fn a_count_grant_runs_out() {
    let dir = TempDir::new("approvals-count");
    let h = queue_host(dir.path(), "").await;
    let spec = GrantSpec {
        tool: Some("bash".into()),
        argument: Some("command".into()),
        pattern: Some("echo *".into()),
        count: Some(2),
        ..GrantSpec::default()
    };
    queue(&h).grant(&spec, "dave").await.unwrap();
    for i in 0..2 {
        let r = h
            .call(
                ToolCall::new(format!("c{i}"), "bash", json!({"command": "echo ok"})),
                &TurnOptions::default(),
            )
            .await;
        assert!(!r.is_error, "{r:?}");
    }
    let third = spawn_bash(&h, "c2", "echo ok", TurnOptions::default());
    let e = pending(&h, 1).await.remove(0);
    queue(&h)
        .decide(&e.id, Verdict::Deny(None), "dave")
        .await
        .unwrap();
    assert_eq!(third.await.unwrap().code(), Some("DENIED"));
    h.shutdown().await;
}

#[tokio::test]
async fn a_grant_never_overrides_a_guard() {
    let dir = TempDir::new("approvals-guard");
    let h = queue_host(dir.path(), "").await;
    std::fs::write(dir.path().join("work/.env"), "TOKEN=secret\n").unwrap();
    let spec = GrantSpec {
        tool: Some("bash".into()),
        argument: Some("command".into()),
        pattern: Some("cat*".into()),
        duration_ms: Some(60_000),
        ..GrantSpec::default()
    };
    queue(&h).grant(&spec, "erin").await.unwrap();
    let r = h
        .call(
            ToolCall::new("g", "bash", json!({"command": "cat .env"})),
            &TurnOptions::default(),
        )
        .await;
    assert_eq!(r.code(), Some("DENIED"), "{r:?}");
    assert!(!r.text().contains("TOKEN=secret"));
    assert!(queue(&h).pending().await.unwrap().is_empty(), "no entry");
    h.shutdown().await;
    let records = audited(dir.path());
    let rec = records.iter().find(|r| r["callId"] == "g").unwrap();
    let stages: Vec<(&str, &str)> = rec["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["stage"].as_str().unwrap(), d["verdict"].as_str().unwrap()))
        .collect();
    assert!(stages.contains(&("approval", "approve")), "{stages:?}");
    assert!(stages.contains(&("guard", "deny")), "{stages:?}");
    assert_eq!(rec["result"]["decidedBy"], "secrets-guard", "{rec}");
}

#[tokio::test]
async fn nobody_deciding_in_time_denies_saying_so() {
    let dir = TempDir::new("approvals-timeout");
    let h = queue_host(dir.path(), "timeout_ms = 300").await;
    let started = Instant::now();
    let r = h
        .call(
            ToolCall::new("t", "bash", json!({"command": "echo late"})),
            &TurnOptions::default(),
        )
        .await;
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(r.code(), Some("DENIED"), "{r:?}");
    assert!(
        r.text().contains("nobody decided within 300 ms")
            && r.text().contains("[approval] timeout_ms"),
        "{}",
        r.text()
    );
    let history = queue(&h).decided(10).await.unwrap();
    assert_eq!(history[0].state, EntryState::Expired);
    assert!(queue(&h).pending().await.unwrap().is_empty());
    h.shutdown().await;
}

#[tokio::test]
async fn a_cancelled_call_withdraws_its_entry() {
    let dir = TempDir::new("approvals-cancel");
    let h = queue_host(dir.path(), "").await;
    let turn = TurnOptions::default();
    let cancel = turn.cancel.clone();
    let call = spawn_bash(&h, "c", "echo never", turn);
    let e = pending(&h, 1).await.remove(0);
    cancel.cancel();
    let r = call.await.unwrap();
    assert!(r.is_error, "{r:?}");
    pending(&h, 0).await;
    let ended = queue(&h).get(&e.id).await.unwrap().unwrap();
    assert_eq!(ended.state, EntryState::Withdrawn);
    let late = queue(&h).decide(&e.id, Verdict::Approve, "frank").await;
    assert!(matches!(late, Err(DecideError::NotPending(_))));
    h.shutdown().await;
}

/// A `toolgate run` killed (SIGKILL) while its call waits: the entry is
/// still in the store; the next host's start expires it, saying why.
#[tokio::test]
async fn a_pending_entry_outlives_a_killed_host_and_expires_with_the_reason() {
    let dir = TempDir::new("approvals-restart");
    let store = dir.path().join("approvals.sqlite");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(
        work.join("toolgate.toml"),
        format!(
            "[approval]\nstore = \"{}\"\n[audit]\nenabled = false\n",
            store.display()
        ),
    )
    .unwrap();
    std::fs::write(
        work.join("calls.json"),
        r#"[{"id": "r", "name": "bash", "arguments": {"command": "echo restart"}}]"#,
    )
    .unwrap();
    let mut child = std::process::Command::new(toolgate_bin())
        .current_dir(&work)
        .env("TOOLGATE_STATE_DIR", dir.path().join("state"))
        .env("TOOLGATE_CACHE_DIR", test_runtime().cache_dir.unwrap())
        .args(["--approve", "queue", "run", "calls.json"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let id = loop {
        if store.exists()
            && let Ok(s) = SqliteStore::open(&store)
            && let Ok(p) = s.list(Listing::Pending).await
            && let Some(e) = p.first()
        {
            break e.id.clone();
        }
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            use std::io::Read;
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            panic!("`toolgate run` ended ({status}) before its call was queued: {err}");
        }
        assert!(start.elapsed() < Duration::from_secs(60), "never queued");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    child.kill().unwrap();
    child.wait().unwrap();
    // Still there, pending, after the host died.
    let s = SqliteStore::open(&store).unwrap();
    let e = s.get(&id).await.unwrap().unwrap();
    assert_eq!(e.state, EntryState::Pending);
    assert_eq!(e.arguments["command"], "echo restart");
    drop(s);
    // The next start: expired, saying why, and kept in the history.
    let h = queue_host(dir.path(), "").await;
    assert!(queue(&h).pending().await.unwrap().is_empty());
    let e = queue(&h).get(&id).await.unwrap().unwrap();
    assert_eq!(e.state, EntryState::Expired);
    let why = e.decided.unwrap().message.unwrap();
    assert!(why.contains("the host restarted"), "{why}");
    let late = queue(&h).decide(&id, Verdict::Approve, "gina").await;
    assert!(matches!(late, Err(DecideError::NotPending(_))));
    h.shutdown().await;
}

#[tokio::test]
async fn the_store_is_owner_only_and_never_a_symlink() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("approvals-store");
    let path = dir.path().join("store.sqlite");
    SqliteStore::open(&path).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o660)).unwrap();
    let e = SqliteStore::open(&path)
        .err()
        .expect("a group-writable store is refused");
    assert!(e.to_string().contains("owner-only"), "{e}");
    let link = dir.path().join("link.sqlite");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    let e = SqliteStore::open(&link)
        .err()
        .expect("a symlink is refused");
    assert!(e.to_string().contains("symlink"), "{e}");
}

/// Two decisions racing on one entry: exactly one wins.
#[tokio::test]
async fn racing_decisions_decide_once() {
    let dir = TempDir::new("approvals-race");
    let h = queue_host(dir.path(), "").await;
    let call = spawn_bash(&h, "r", "echo race", TurnOptions::default());
    let e = pending(&h, 1).await.remove(0);
    let q = queue(&h);
    let (x, y) = tokio::join!(
        q.decide(&e.id, Verdict::Approve, "x"),
        q.decide(&e.id, Verdict::Deny(None), "y")
    );
    assert!(x.is_ok() != y.is_ok(), "{x:?} {y:?}");
    let r = call.await.unwrap();
    assert_eq!(x.is_ok(), !r.is_error, "{r:?}");
    h.shutdown().await;
}
