//! The scheduler (seed §6–§7, DESIGN "Scheduler"): parallel vs exclusive,
//! the rolling pool, reclassification mid-turn, model-order commit, layered
//! cancellation, scheduler failure.
//!
//! No sleeps: bodies are `gate` calls held by a [`Coordinator`] until the
//! test releases them, and the test waits for the scheduler to report that
//! it is blocked ([`SchedulerWatch`]) before it asserts that nothing else
//! started. The coordinator checks every arrival against the pool size and
//! against exclusivity.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use tokio::sync::{mpsc, oneshot};
use toolgate::pipeline::{ApprovalAnswer, ApprovalRequest, Approver};
use toolgate::{CallRecord, ToolCall, Toolgate, ToolgateBuilder, TurnOptions};
use toolgate_tests::gate::{
    Boom, Coordinator, Event, NativeGate, SchedulerWatch, Verdict, Waiting,
};
use toolgate_tests::{PluginDir, TempDir, builder, fixtures, native};

/// Only a guard against a broken scheduler hanging the suite; nothing waits
/// for it to pass.
const HANG_GUARD: Duration = Duration::from_secs(60);

struct Setup {
    host: Toolgate,
    coord: Coordinator,
    /// What the recording observer saw, in commit order.
    seen: Arc<Mutex<Vec<CallRecord>>>,
    dir: PluginDir,
    modes: TempDir,
}

/// A host with the `gate` fixture, a pool of `pool`, a recording observer,
/// and whatever `extra` adds.
async fn setup(
    pool: usize,
    extra: impl FnOnce(ToolgateBuilder, &Coordinator) -> ToolgateBuilder,
) -> Setup {
    let coord = Coordinator::start(pool).await;
    let modes = TempDir::new("modes");
    std::fs::create_dir_all(modes.path().join("modes")).expect("modes directory");
    let dir = PluginDir::new();
    dir.add("gate", fixtures::GATE);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let b = builder(&dir, &coord.plugin_config(Some(modes.path())))
        .max_parallel(pool)
        .observer(
            "recorder",
            1000,
            native::Obs {
                behavior: "ok".into(),
                seen: seen.clone(),
            },
        );
    let host = extra(b, &coord).build().await.expect("host builds");
    assert!(host.problems().is_empty(), "{:?}", host.problems());
    Setup {
        host,
        coord,
        seen,
        dir,
        modes,
    }
}

impl Setup {
    fn set_mode(&self, id: &str, mode: &str) {
        std::fs::write(self.modes.path().join("modes").join(id), mode).expect("write a mode");
    }

    fn seen(&self) -> Vec<(String, String)> {
        outcomes(&self.seen.lock().unwrap())
    }
}

fn gate(id: &str, class: &str) -> ToolCall {
    ToolCall::new(id, "gate", json!({"id": id, "class": class}))
}

fn parallel(ids: &[&str]) -> Vec<ToolCall> {
    ids.iter().map(|id| gate(id, "parallel")).collect()
}

/// (id, code) of each record; `OK` for a success.
fn outcomes(records: &[CallRecord]) -> Vec<(String, String)> {
    records
        .iter()
        .map(|r| (r.id.clone(), r.code().unwrap_or("OK").to_string()))
        .collect()
}

fn expect(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(i, c)| (i.to_string(), c.to_string()))
        .collect()
}

fn w(reason: &str, running: u64, next: u64) -> Waiting {
    Waiting::new(reason, running, next)
}

fn stage(r: &CallRecord) -> String {
    r.error
        .as_ref()
        .map(|e| e.stage.to_string())
        .unwrap_or_default()
}

/// Run the turn and the test's driver side by side (one task: the scheduler
/// and the driver interleave only at their awaits).
async fn drive<T>(turn: impl Future<Output = T>, driver: impl Future<Output = ()>) -> T {
    let both = async { tokio::join!(turn, driver).0 };
    tokio::time::timeout(HANG_GUARD, both)
        .await
        .expect("the turn hung: the scheduler never reached the state the test waits for")
}

#[tokio::test]
async fn parallel_calls_overlap_up_to_the_pool_size_and_never_beyond() {
    let s = setup(3, |b, _| b).await;
    let mut watch = SchedulerWatch::install();
    let turn = TurnOptions::default();
    let calls = parallel(&["g0", "g1", "g2", "g3", "g4", "g5"]);
    let records = drive(s.host.execute_tool_calls(calls, &turn), async {
        // The pool fills to exactly three and the scheduler stops there.
        watch.expect(w("slot", 3, 3)).await;
        for id in ["g0", "g1", "g2"] {
            s.coord.arrived(id).await;
        }
        // Each slot that frees up is refilled with the next call, and only
        // then (the order in which slots free up does not matter).
        s.coord.release("g2", Verdict::Go);
        watch.expect(w("slot", 3, 4)).await;
        s.coord.arrived("g3").await;
        s.coord.release("g3", Verdict::Go);
        watch.expect(w("slot", 3, 5)).await;
        s.coord.arrived("g4").await;
        s.coord.release("g0", Verdict::Go);
        watch.expect(w("finish", 3, 6)).await;
        s.coord.arrived("g5").await;
        let mut running = s.coord.in_flight();
        running.sort();
        assert_eq!(running, ["g1", "g4", "g5"]);
        for id in ["g1", "g4", "g5"] {
            s.coord.release(id, Verdict::Go);
        }
    })
    .await
    .expect("no scheduler failure");
    assert_eq!(
        outcomes(&records),
        expect(&[
            ("g0", "OK"),
            ("g1", "OK"),
            ("g2", "OK"),
            ("g3", "OK"),
            ("g4", "OK"),
            ("g5", "OK")
        ])
    );
    let report = s.coord.report();
    assert!(report.violations.is_empty(), "{report:?}");
    assert_eq!(report.max_in_flight, 3, "{report:?}");
}

#[tokio::test]
async fn an_exclusive_call_never_overlaps_anything() {
    let s = setup(4, |b, _| b).await;
    let mut watch = SchedulerWatch::install();
    let turn = TurnOptions::default();
    let calls = vec![
        gate("p0", "parallel"),
        gate("p1", "parallel"),
        gate("x", "exclusive"),
        gate("p3", "parallel"),
        gate("p4", "parallel"),
    ];
    let records = drive(s.host.execute_tool_calls(calls, &turn), async {
        // x is a barrier: the two calls before it drain first...
        watch.expect(w("barrier", 2, 2)).await;
        s.coord.arrived("p0").await;
        s.coord.arrived("p1").await;
        s.coord.release("p0", Verdict::Go);
        watch.expect(w("barrier", 1, 2)).await;
        s.coord.release("p1", Verdict::Go);
        // ...then x runs alone (in the scheduler's own task), and nothing
        // after it starts until it has finished.
        s.coord.arrived("x").await;
        assert_eq!(s.coord.in_flight(), ["x"]);
        s.coord.release("x", Verdict::Go);
        watch.expect(w("finish", 2, 5)).await;
        s.coord.arrived("p3").await;
        s.coord.arrived("p4").await;
        s.coord.release("p3", Verdict::Go);
        s.coord.release("p4", Verdict::Go);
    })
    .await
    .expect("no scheduler failure");
    assert_eq!(
        outcomes(&records),
        expect(&[
            ("p0", "OK"),
            ("p1", "OK"),
            ("x", "OK"),
            ("p3", "OK"),
            ("p4", "OK")
        ])
    );
    assert!(s.coord.report().violations.is_empty());
}

#[tokio::test]
async fn results_commit_in_model_order_when_later_calls_finish_first() {
    let s = setup(4, |b, _| b).await;
    let mut watch = SchedulerWatch::install();
    let turn = TurnOptions::default();
    let calls = parallel(&["g0", "g1", "g2", "g3"]);
    let records = drive(s.host.execute_tool_calls(calls, &turn), async {
        watch.expect(w("finish", 4, 4)).await;
        for id in ["g0", "g1", "g2", "g3"] {
            s.coord.arrived(id).await;
        }
        // The last call finishes first: nothing may be committed yet.
        s.coord.release("g3", Verdict::Go);
        watch.expect(w("finish", 3, 4)).await;
        assert_eq!(s.seen(), expect(&[]));
        s.coord.release("g1", Verdict::Go);
        watch.expect(w("finish", 2, 4)).await;
        assert_eq!(s.seen(), expect(&[]));
        // g0 finishes: the ready prefix is g0, g1 (g2 is still running).
        s.coord.release("g0", Verdict::Go);
        watch.expect(w("finish", 1, 4)).await;
        assert_eq!(s.seen(), expect(&[("g0", "OK"), ("g1", "OK")]));
        s.coord.release("g2", Verdict::Go);
    })
    .await
    .expect("no scheduler failure");
    let in_order = expect(&[("g0", "OK"), ("g1", "OK"), ("g2", "OK"), ("g3", "OK")]);
    assert_eq!(outcomes(&records), in_order);
    assert_eq!(s.seen(), in_order);
    assert_eq!(records[3].text(), "g3 done");
}

#[tokio::test]
async fn a_call_that_becomes_exclusive_mid_turn_drains_the_pool_and_waits_at_the_barrier() {
    let s = setup(2, |b, _| b).await;
    s.set_mode("c", "parallel");
    let mut watch = SchedulerWatch::install();
    let turn = TurnOptions::default();
    let calls = vec![
        gate("a", "parallel"),
        gate("b", "parallel"),
        gate("c", "file"),
        gate("d", "parallel"),
    ];
    let records = drive(s.host.execute_tool_calls(calls, &turn), async {
        // c waits for a slot; when the turn started its classifier said
        // parallel. Now it says exclusive.
        watch.expect(w("slot", 2, 2)).await;
        s.coord.arrived("a").await;
        s.coord.arrived("b").await;
        s.set_mode("c", "exclusive");
        // A slot frees up: c is classified again before the fill, turns out
        // exclusive, and the pool drains instead of taking it.
        s.coord.release("a", Verdict::Go);
        watch.expect(w("barrier", 1, 2)).await;
        s.coord.release("b", Verdict::Go);
        s.coord.arrived("c").await;
        s.coord.release("c", Verdict::Go);
        watch.expect(w("finish", 1, 4)).await;
        s.coord.release("d", Verdict::Go);
    })
    .await
    .expect("no scheduler failure");
    assert_eq!(
        outcomes(&records),
        expect(&[("a", "OK"), ("b", "OK"), ("c", "OK"), ("d", "OK")])
    );
    assert!(s.coord.report().violations.is_empty());
}

#[tokio::test]
async fn a_call_that_becomes_parallel_mid_turn_takes_a_slot() {
    let s = setup(2, |b, _| b).await;
    s.set_mode("c", "exclusive");
    let mut watch = SchedulerWatch::install();
    let turn = TurnOptions::default();
    let calls = vec![
        gate("a", "parallel"),
        gate("b", "parallel"),
        gate("c", "file"),
        gate("d", "parallel"),
    ];
    let records = drive(s.host.execute_tool_calls(calls, &turn), async {
        watch.expect(w("slot", 2, 2)).await;
        s.coord.arrived("a").await;
        s.coord.arrived("b").await;
        s.set_mode("c", "parallel");
        // c now overlaps b, and d waits for a slot.
        s.coord.release("a", Verdict::Go);
        watch.expect(w("slot", 2, 3)).await;
        s.coord.arrived("c").await;
        s.coord.release("b", Verdict::Go);
        watch.expect(w("finish", 2, 4)).await;
        s.coord.release("c", Verdict::Go);
        s.coord.release("d", Verdict::Go);
    })
    .await
    .expect("no scheduler failure");
    assert_eq!(
        outcomes(&records),
        expect(&[("a", "OK"), ("b", "OK"), ("c", "OK"), ("d", "OK")])
    );
    assert!(s.coord.report().violations.is_empty());
}

#[tokio::test]
async fn a_hot_reload_mid_turn_is_seen_by_the_calls_after_it() {
    let s = setup(4, |b, _| b).await;
    let turn = TurnOptions::default();
    let calls = vec![
        gate("g0", "exclusive"),
        ToolCall::new("e1", "echo", json!({"text": "after the reload"})),
    ];
    let records = drive(s.host.execute_tool_calls(calls, &turn), async {
        s.coord.arrived("g0").await;
        // `echo` did not exist when the turn started.
        s.dir.add("tools", fixtures::TOOLS);
        s.host.reload().await.expect("reload");
        s.coord.release("g0", Verdict::Go);
    })
    .await
    .expect("no scheduler failure");
    assert_eq!(outcomes(&records), expect(&[("g0", "OK"), ("e1", "OK")]));
    assert_eq!(records[1].text(), "after the reload");
}

/// Approves every call, except that the ones in `hold` wait for the test.
struct HeldApprover {
    asked: Arc<Mutex<Vec<String>>>,
    requests: mpsc::UnboundedSender<String>,
    hold: Mutex<HashMap<String, oneshot::Receiver<()>>>,
}

#[async_trait]
impl Approver for HeldApprover {
    fn name(&self) -> &str {
        "held"
    }
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        let id = request.call.call_id.clone();
        self.asked.lock().unwrap().push(id.clone());
        let _ = self.requests.send(id.clone());
        let held = self.hold.lock().unwrap().remove(&id);
        if let Some(rx) = held
            && rx.await.is_err()
        {
            return ApprovalAnswer::Unavailable("the test went away".into());
        }
        ApprovalAnswer::Approve
    }
}

struct Approvals {
    asked: Arc<Mutex<Vec<String>>>,
    requests: mpsc::UnboundedReceiver<String>,
    release: HashMap<String, oneshot::Sender<()>>,
}

impl Approvals {
    async fn requested(&mut self, id: &str) {
        while self.requests.recv().await.expect("approver alive") != id {}
    }
    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

/// Every call asks (a native pre-execute hook); `hold` wait for the test.
fn asking(b: ToolgateBuilder, hold: &[&str]) -> (ToolgateBuilder, Approvals) {
    let (tx, requests) = mpsc::unbounded_channel();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let mut gates = HashMap::new();
    let mut release = HashMap::new();
    for id in hold {
        let (t, r) = oneshot::channel();
        gates.insert(id.to_string(), r);
        release.insert(id.to_string(), t);
    }
    let approver = HeldApprover {
        asked: asked.clone(),
        requests: tx,
        hold: Mutex::new(gates),
    };
    let b = b
        .pre_execute(
            "ask-all",
            10,
            native::Pre {
                name: "ask-all".into(),
                behavior: "ask".into(),
            },
        )
        .approver(Arc::new(approver));
    (
        b,
        Approvals {
            asked,
            requests,
            release,
        },
    )
}

#[tokio::test]
async fn policies_run_in_model_order_and_may_wait_while_bodies_run() {
    let mut approvals = None;
    let s = setup(4, |b, _| {
        let (b, a) = asking(b, &["g1"]);
        approvals = Some(a);
        b
    })
    .await;
    let mut approvals = approvals.expect("set up");
    let mut watch = SchedulerWatch::install();
    let turn = TurnOptions::default();
    let calls = parallel(&["g0", "g1", "g2"]);
    let records = drive(s.host.execute_tool_calls(calls, &turn), async {
        // g1's approval waits for a person; g0's body runs meanwhile, and
        // g2's policies have not started: they come after g1's.
        approvals.requested("g1").await;
        s.coord.arrived("g0").await;
        assert_eq!(approvals.asked(), ["g0", "g1"]);
        let _ = approvals.release.remove("g1").expect("held").send(());
        approvals.requested("g2").await;
        watch.expect(w("finish", 3, 3)).await;
        for id in ["g0", "g1", "g2"] {
            s.coord.release(id, Verdict::Go);
        }
    })
    .await
    .expect("no scheduler failure");
    assert_eq!(approvals.asked(), ["g0", "g1", "g2"]);
    assert_eq!(
        outcomes(&records),
        expect(&[("g0", "OK"), ("g1", "OK"), ("g2", "OK")])
    );
}

// Cancellation, row by row (seed §7).

#[tokio::test]
async fn cancelled_calls_that_were_not_dispatched_end_aborted_before_dispatch() {
    let s = setup(2, |b, _| b).await;
    let mut watch = SchedulerWatch::install();

    // Waiting for a slot.
    let turn = TurnOptions::default();
    let calls = parallel(&["a0", "a1", "a2", "a3"]);
    let records = drive(s.host.execute_tool_calls(calls, &turn), async {
        watch.expect(w("slot", 2, 2)).await;
        s.coord.arrived("a0").await;
        s.coord.arrived("a1").await;
        turn.cancel.cancel();
    })
    .await
    .expect("no scheduler failure");
    assert_eq!(
        outcomes(&records),
        expect(&[
            ("a0", "ABORTED"),
            ("a1", "ABORTED"),
            ("a2", "ABORTED_BEFORE_DISPATCH"),
            ("a3", "ABORTED_BEFORE_DISPATCH"),
        ])
    );

    // Waiting at a barrier.
    watch.clear();
    let turn = TurnOptions::default();
    let calls = vec![
        gate("b0", "parallel"),
        gate("bx", "exclusive"),
        gate("b2", "parallel"),
    ];
    let records = drive(s.host.execute_tool_calls(calls, &turn), async {
        watch.expect(w("barrier", 1, 1)).await;
        s.coord.arrived("b0").await;
        turn.cancel.cancel();
    })
    .await
    .expect("no scheduler failure");
    assert_eq!(
        outcomes(&records),
        expect(&[
            ("b0", "ABORTED"),
            ("bx", "ABORTED_BEFORE_DISPATCH"),
            ("b2", "ABORTED_BEFORE_DISPATCH"),
        ])
    );
    // None of them reached a body (a0 and a1 ran at once: in either order).
    let mut arrivals = s.coord.report().arrivals;
    arrivals.sort();
    assert_eq!(arrivals, ["a0", "a1", "b0"]);
    assert!(s.coord.report().violations.is_empty());
}

#[tokio::test]
async fn a_call_waiting_for_approval_when_the_turn_is_cancelled_is_aborted_before_dispatch() {
    let mut approvals = None;
    let s = setup(4, |b, _| {
        let (b, a) = asking(b, &["g1"]);
        approvals = Some(a);
        b
    })
    .await;
    let mut approvals = approvals.expect("set up");
    let turn = TurnOptions::default();
    let calls = parallel(&["g0", "g1"]);
    let records = drive(s.host.execute_tool_calls(calls, &turn), async {
        approvals.requested("g1").await;
        s.coord.arrived("g0").await;
        // Nobody answers g1's approval; the cancellation does not wait for it.
        turn.cancel.cancel();
    })
    .await
    .expect("no scheduler failure");
    assert_eq!(
        outcomes(&records),
        expect(&[("g0", "ABORTED"), ("g1", "ABORTED_BEFORE_DISPATCH")])
    );
    assert_eq!(s.coord.report().arrivals, ["g0"]);
}

#[tokio::test]
async fn a_started_call_that_succeeded_is_aborted_once_the_turn_has_drained() {
    let s = setup(4, |b, _| b).await;
    let mut watch = SchedulerWatch::install();
    let turn = TurnOptions::default();
    let calls = parallel(&["g0", "g1", "g2"]);
    let records = drive(s.host.execute_tool_calls(calls, &turn), async {
        watch.expect(w("finish", 3, 3)).await;
        for id in ["g0", "g1", "g2"] {
            s.coord.arrived(id).await;
        }
        // g0 succeeds and is committed before the cancellation.
        s.coord.release("g0", Verdict::Go);
        watch.expect(w("finish", 2, 3)).await;
        assert_eq!(s.seen(), expect(&[("g0", "OK")]));
        // g2 succeeds but waits behind g1 for its commit.
        s.coord.release("g2", Verdict::Go);
        watch.expect(w("finish", 1, 3)).await;
        // Cancelled: g1, still running, is stopped; the turn drains.
        turn.cancel.cancel();
        s.coord.until(Event::Dropped("g1".into())).await;
    })
    .await
    .expect("no scheduler failure");
    let expected = expect(&[("g0", "OK"), ("g1", "ABORTED"), ("g2", "ABORTED")]);
    assert_eq!(outcomes(&records), expected);
    assert_eq!(s.seen(), expected, "observers see what is returned");
    // g1 was interrupted in its body; g2 had completed.
    assert_eq!(stage(&records[1]), "body");
    let g2 = &records[2];
    assert_eq!(stage(g2), "scheduler");
    let error = g2.error.as_ref().expect("an error");
    assert_eq!(error.details, Some(json!({"completed": true})));
    assert!(
        error.message.contains("after `gate` had completed"),
        "{error:?}"
    );
    // What the tool returned is kept, after the notice.
    assert!(
        g2.content.len() == 2 && g2.text().ends_with("g2 done"),
        "{g2:?}"
    );
}

#[tokio::test]
async fn a_started_call_that_failed_keeps_its_own_error_when_the_turn_is_cancelled() {
    let s = setup(4, |b, _| b).await;
    let mut watch = SchedulerWatch::install();
    let turn = TurnOptions::default();
    let calls = parallel(&["g0", "g1"]);
    let records = drive(s.host.execute_tool_calls(calls, &turn), async {
        watch.expect(w("finish", 2, 2)).await;
        s.coord.arrived("g0").await;
        s.coord.arrived("g1").await;
        s.coord.release("g1", Verdict::Fail);
        watch.expect(w("finish", 1, 2)).await;
        turn.cancel.cancel();
    })
    .await
    .expect("no scheduler failure");
    assert_eq!(
        outcomes(&records),
        expect(&[("g0", "ABORTED"), ("g1", "GATE_FAILED")])
    );
    let error = records[1].error.as_ref().expect("an error");
    assert_eq!(error.stage.to_string(), "body");
    assert_eq!(error.decided_by.as_deref(), Some("gate"));
    assert!(
        error.message.contains("g1 failed as the coordinator asked"),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_cancelled_body_that_computes_forever_is_interrupted() {
    let s = setup(4, |b, _| b).await;
    let turn = TurnOptions::default();
    let calls = parallel(&["g0", "g1"]);
    let records = drive(s.host.execute_tool_calls(calls, &turn), async {
        s.coord.arrived("g0").await;
        s.coord.arrived("g1").await;
        // g0 never makes a host call again: only the epoch interruption can
        // stop it (a current-thread runtime: if it kept running, nothing
        // else would, and the turn would hang).
        s.coord.release("g0", Verdict::Spin);
        s.coord.until(Event::Spinning("g0".into())).await;
        turn.cancel.cancel();
        s.coord.until(Event::Dropped("g0".into())).await;
    })
    .await
    .expect("no scheduler failure");
    assert_eq!(
        outcomes(&records),
        expect(&[("g0", "ABORTED"), ("g1", "ABORTED")])
    );
    // The host keeps serving.
    let records = drive(
        s.host
            .execute_tool_calls(parallel(&["g2"]), &TurnOptions::default()),
        async {
            s.coord.release("g2", Verdict::Go);
        },
    )
    .await
    .expect("no scheduler failure");
    assert_eq!(outcomes(&records), expect(&[("g2", "OK")]));
}

// Classification fails closed.

#[tokio::test]
async fn a_classifier_that_traps_makes_its_call_exclusive() {
    let s = setup(4, |b, _| b).await;
    let mut watch = SchedulerWatch::install();
    let turn = TurnOptions::default();
    let calls = vec![
        gate("g0", "parallel"),
        gate("t", "trap"),
        gate("g2", "parallel"),
    ];
    let records = drive(s.host.execute_tool_calls(calls, &turn), async {
        watch.expect(w("barrier", 1, 1)).await;
        s.coord.arrived("g0").await;
        s.coord.release("g0", Verdict::Go);
        s.coord.arrived("t").await;
        s.coord.release("t", Verdict::Go);
        watch.expect(w("finish", 1, 3)).await;
        s.coord.release("g2", Verdict::Go);
    })
    .await
    .expect("no scheduler failure");
    assert_eq!(
        outcomes(&records),
        expect(&[("g0", "OK"), ("t", "OK"), ("g2", "OK")])
    );
    assert!(s.coord.report().violations.is_empty());
}

#[tokio::test]
async fn a_classifier_that_does_not_answer_in_time_makes_its_call_exclusive() {
    let s = setup(4, |b, _| b).await;
    let mut watch = SchedulerWatch::install();
    let turn = TurnOptions::default();
    let calls = vec![
        gate("g0", "parallel"),
        gate("h", "hang"),
        gate("g2", "parallel"),
    ];
    let records = drive(s.host.execute_tool_calls(calls, &turn), async {
        watch.expect(w("barrier", 1, 1)).await;
        s.coord.release("g0", Verdict::Go);
        s.coord.arrived("h").await;
        s.coord.release("h", Verdict::Go);
        watch.expect(w("finish", 1, 3)).await;
        s.coord.release("g2", Verdict::Go);
    })
    .await
    .expect("no scheduler failure");
    assert_eq!(
        outcomes(&records),
        expect(&[("g0", "OK"), ("h", "OK"), ("g2", "OK")])
    );
    assert!(s.coord.report().violations.is_empty());
}

#[tokio::test]
async fn only_a_declared_classifier_can_make_a_call_parallel() {
    let s = setup(4, |b, c| {
        // Both answer `true`; only one declares the `classifier` feature.
        b.tool(
            NativeGate::definition("undeclared", false),
            Arc::new(NativeGate {
                addr: c.addr(),
                answer: Some(true),
                exclusive: true,
            }),
        )
        .expect("valid tool")
        .tool(
            NativeGate::definition("declared", true),
            Arc::new(NativeGate {
                addr: c.addr(),
                answer: Some(true),
                exclusive: false,
            }),
        )
        .expect("valid tool")
    })
    .await;
    let mut watch = SchedulerWatch::install();
    let turn = TurnOptions::default();
    let calls = vec![
        ToolCall::new("u0", "undeclared", json!({"id": "u0"})),
        ToolCall::new("d1", "declared", json!({"id": "d1"})),
        ToolCall::new("d2", "declared", json!({"id": "d2"})),
    ];
    let records = drive(s.host.execute_tool_calls(calls, &turn), async {
        s.coord.arrived("u0").await;
        s.coord.release("u0", Verdict::Go);
        watch.expect(w("finish", 2, 3)).await;
        s.coord.arrived("d1").await;
        s.coord.arrived("d2").await;
        s.coord.release("d1", Verdict::Go);
        s.coord.release("d2", Verdict::Go);
    })
    .await
    .expect("no scheduler failure");
    assert_eq!(
        outcomes(&records),
        expect(&[("u0", "OK"), ("d1", "OK"), ("d2", "OK")])
    );
    assert!(s.coord.report().violations.is_empty());
}

#[tokio::test]
async fn a_call_refused_at_materialize_takes_no_slot_and_keeps_its_place() {
    let s = setup(4, |b, _| b).await;
    let mut watch = SchedulerWatch::install();
    let turn = TurnOptions::default();
    let calls = vec![
        gate("g0", "parallel"),
        ToolCall::new("nope", "no_such_tool", json!({})),
        gate("g2", "parallel"),
        ToolCall::new("bad", "gate", json!({"id": 7})),
    ];
    let records = drive(s.host.execute_tool_calls(calls, &turn), async {
        watch.expect(w("finish", 2, 4)).await;
        s.coord.release("g2", Verdict::Go);
        s.coord.release("g0", Verdict::Go);
    })
    .await
    .expect("no scheduler failure");
    assert_eq!(
        outcomes(&records),
        expect(&[
            ("g0", "OK"),
            ("nope", "UNKNOWN_TOOL"),
            ("g2", "OK"),
            ("bad", "INVALID_ARGS")
        ])
    );
}

#[tokio::test]
async fn a_scheduler_failure_stops_dispatch_drains_and_fabricates_nothing() {
    let s = setup(2, |b, _| {
        b.tool(NativeGate::definition("boom", true), Arc::new(Boom))
            .expect("valid tool")
    })
    .await;
    let mut watch = SchedulerWatch::install();
    let turn = TurnOptions::default();
    let calls = vec![
        gate("g0", "parallel"),
        ToolCall::new("b1", "boom", json!({"id": "b1"})),
        gate("g2", "parallel"),
        gate("g3", "parallel"),
    ];
    let result = drive(s.host.execute_tool_calls(calls, &turn), async {
        watch.expect(w("slot", 2, 2)).await;
        // b1's task panics: a slot is free, but nothing new is dispatched;
        // g0, which started, is drained.
        watch.expect(w("failed", 1, 2)).await;
        s.coord.arrived("g0").await;
        s.coord.release("g0", Verdict::Go);
    })
    .await;
    let error = result.expect_err("a scheduler failure");
    assert_eq!((error.index, error.call_id.as_str()), (1, "b1"));
    assert!(
        error.to_string().contains("boom: a deliberate panic"),
        "{error}"
    );
    // The call before the failure is committed; nothing is made up for the
    // failed call or the calls after it.
    assert_eq!(outcomes(&error.committed), expect(&[("g0", "OK")]));
    assert_eq!(s.seen(), expect(&[("g0", "OK")]));
    assert_eq!(s.coord.report().arrivals, ["g0"]);
}

#[tokio::test]
async fn a_panic_in_a_call_running_alone_is_a_scheduler_failure_too() {
    let s = setup(4, |b, _| {
        // No classifier declared: exclusive, so it runs in the scheduler's
        // own task rather than a spawned one.
        b.tool(NativeGate::definition("boom", false), Arc::new(Boom))
            .expect("valid tool")
    })
    .await;
    let mut watch = SchedulerWatch::install();
    let turn = TurnOptions::default();
    let calls = vec![
        gate("g0", "parallel"),
        ToolCall::new("b1", "boom", json!({"id": "b1"})),
        gate("g2", "parallel"),
    ];
    let result = drive(s.host.execute_tool_calls(calls, &turn), async {
        watch.expect(w("barrier", 1, 1)).await;
        s.coord.release("g0", Verdict::Go);
    })
    .await;
    let error = result.expect_err("a scheduler failure");
    assert_eq!((error.index, error.call_id.as_str()), (1, "b1"));
    assert!(
        error.to_string().contains("boom: a deliberate panic"),
        "{error}"
    );
    assert_eq!(outcomes(&error.committed), expect(&[("g0", "OK")]));
    assert_eq!(s.seen(), expect(&[("g0", "OK")]));
    assert_eq!(s.coord.report().arrivals, ["g0"]);
}
