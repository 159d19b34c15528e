//! The scheduler for calls that arrive one by one ([`Arrivals`], what
//! `toolgate serve` runs `tools/call` through): the rolling pool, exclusive
//! calls as barriers in arrival order, per-call cancellation, the bounded
//! queue, and answers as soon as each call is done.
//!
//! Bodies are `gate` calls held by a [`Coordinator`] (see `gate.rs`), which
//! checks every arrival against the pool size and exclusivity. A call is
//! submitted only once the previous one is inside the scheduler, so the
//! arrival order is the test's.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use toolgate::scheduler::{Arrivals, ArrivalsError};
use toolgate::{CallRecord, ToolCall, TurnOptions};
use toolgate_tests::gate::{Coordinator, Verdict};
use toolgate_tests::{PluginDir, builder, fixtures, wait_for};

const HANG_GUARD: Duration = Duration::from_secs(60);

struct Setup {
    arrivals: Arc<Arrivals>,
    coord: Coordinator,
    _dir: PluginDir,
}

async fn setup(pool: usize, max_queued: usize) -> Setup {
    let coord = Coordinator::start(pool).await;
    let dir = PluginDir::new();
    dir.add("gate", fixtures::GATE);
    let host = builder(&dir, &coord.plugin_config(None))
        .max_parallel(pool)
        .build()
        .await
        .expect("host builds");
    assert!(host.problems().is_empty(), "{:?}", host.problems());
    Setup {
        arrivals: Arc::new(Arrivals::new(host, max_queued)),
        coord,
        _dir: dir,
    }
}

fn gate(id: &str, class: &str) -> ToolCall {
    ToolCall::new(id, "gate", json!({"id": id, "class": class}))
}

type Pending = tokio::task::JoinHandle<Result<CallRecord, ArrivalsError>>;

impl Setup {
    /// Submit a call in a task of its own (as the MCP SDK runs each
    /// request) and wait until it is inside the scheduler.
    async fn submit(&self, call: ToolCall, cancel: CancellationToken) -> Pending {
        let before = self.arrivals.inside();
        let arrivals = self.arrivals.clone();
        let task = tokio::spawn(async move {
            let turn = TurnOptions {
                cancel,
                ..TurnOptions::default()
            };
            arrivals.run(call, &turn).await
        });
        while self.arrivals.inside() == before {
            tokio::task::yield_now().await;
        }
        task
    }

    /// Wait until the scheduler holds back what it must: `running` bodies
    /// run, `waiting` calls wait for a slot, and `inside` calls in all.
    /// The state is stable (only a release changes it), so what the
    /// coordinator sees next is what the scheduler decided, not a race.
    async fn holds(&self, running: usize, waiting: usize, inside: usize) {
        let a = &self.arrivals;
        wait_for(
            HANG_GUARD,
            &format!("{running} running, {waiting} waiting for a slot, {inside} inside"),
            || a.running() == running && a.waiting() == waiting && a.inside() == inside,
        )
        .await;
    }
}

async fn record(p: Pending) -> CallRecord {
    tokio::time::timeout(HANG_GUARD, p)
        .await
        .expect("the call hung")
        .expect("the task")
        .expect("a record")
}

fn code(r: &CallRecord) -> &str {
    r.code().unwrap_or("OK")
}

#[tokio::test]
async fn calls_that_arrive_overlap_in_a_rolling_pool_and_answer_as_they_finish() {
    let s = setup(2, 16).await;
    let mut pending = Vec::new();
    for id in ["a", "b", "c", "d"] {
        pending.push(
            s.submit(gate(id, "parallel"), CancellationToken::new())
                .await,
        );
    }
    s.coord.arrived("a").await;
    s.coord.arrived("b").await;
    // c waits for a slot, d for c (arrival order).
    s.holds(2, 1, 4).await;
    assert_eq!(s.coord.in_flight().len(), 2, "the pool holds two");
    // b finishes first and is answered at once, while a still runs.
    s.coord.release("b", Verdict::Go);
    let d = pending.pop().unwrap();
    let c = pending.pop().unwrap();
    let b = pending.pop().unwrap();
    assert_eq!(code(&record(b).await), "OK");
    // Its slot goes to the next arrival.
    s.coord.arrived("c").await;
    for id in ["a", "c", "d"] {
        s.coord.release(id, Verdict::Go);
    }
    assert_eq!(code(&record(c).await), "OK");
    assert_eq!(code(&record(d).await), "OK");
    assert_eq!(code(&record(pending.pop().unwrap()).await), "OK");
    let report = s.coord.report();
    assert!(report.violations.is_empty(), "{report:?}");
    assert_eq!(report.max_in_flight, 2);
    assert_eq!(report.arrivals, ["a", "b", "c", "d"]);
}

#[tokio::test]
async fn an_exclusive_arrival_is_a_barrier_in_arrival_order() {
    let s = setup(4, 16).await;
    let p0 = s
        .submit(gate("p0", "parallel"), CancellationToken::new())
        .await;
    let p1 = s
        .submit(gate("p1", "parallel"), CancellationToken::new())
        .await;
    s.coord.arrived("p0").await;
    s.coord.arrived("p1").await;
    let x = s
        .submit(gate("x", "exclusive"), CancellationToken::new())
        .await;
    let p3 = s
        .submit(gate("p3", "parallel"), CancellationToken::new())
        .await;
    // x waits for the pool to drain; p3, behind it, does not overtake it.
    s.holds(2, 1, 4).await;
    let mut running = s.coord.in_flight();
    running.sort();
    assert_eq!(running, ["p0", "p1"]);
    s.coord.release("p0", Verdict::Go);
    s.coord.release("p1", Verdict::Go);
    s.coord.arrived("x").await;
    // x holds every slot: p3 waits for one.
    s.holds(1, 1, 2).await;
    assert_eq!(s.coord.in_flight(), ["x"], "x runs alone");
    s.coord.release("x", Verdict::Go);
    s.coord.arrived("p3").await;
    s.coord.release("p3", Verdict::Go);
    for p in [p0, p1, x, p3] {
        assert_eq!(code(&record(p).await), "OK");
    }
    let report = s.coord.report();
    assert!(report.violations.is_empty(), "{report:?}");
    assert_eq!(report.arrivals, ["p0", "p1", "x", "p3"]);
}

#[tokio::test]
async fn each_call_is_cancelled_on_its_own() {
    let s = setup(1, 16).await;
    let running = CancellationToken::new();
    let waiting = CancellationToken::new();
    let g0 = s.submit(gate("g0", "parallel"), running.clone()).await;
    s.coord.arrived("g0").await;
    let g1 = s.submit(gate("g1", "parallel"), waiting.clone()).await;
    // g1 waits for the only slot; cancelled, it ends at once, unstarted,
    // while g0 goes on.
    waiting.cancel();
    let r1 = record(g1).await;
    assert_eq!(code(&r1), "ABORTED_BEFORE_DISPATCH", "{r1:?}");
    assert_eq!(s.coord.in_flight(), ["g0"]);
    // g0 is stopped while its body runs.
    running.cancel();
    let r0 = record(g0).await;
    assert_eq!(code(&r0), "ABORTED", "{r0:?}");
    // The scheduler goes on.
    let g2 = s
        .submit(gate("g2", "parallel"), CancellationToken::new())
        .await;
    s.coord.release("g2", Verdict::Go);
    assert_eq!(code(&record(g2).await), "OK");
    let report = s.coord.report();
    assert!(report.violations.is_empty(), "{report:?}");
    assert!(!report.arrivals.contains(&"g1".to_string()));
}

#[tokio::test]
async fn beyond_the_queue_a_call_is_refused_at_once() {
    let s = setup(1, 2).await;
    let a = s
        .submit(gate("a", "parallel"), CancellationToken::new())
        .await;
    let b = s
        .submit(gate("b", "parallel"), CancellationToken::new())
        .await;
    let turn = TurnOptions::default();
    let refused = tokio::time::timeout(
        Duration::from_secs(5),
        s.arrivals.run(gate("c", "parallel"), &turn),
    )
    .await
    .expect("a refusal does not wait");
    assert!(
        matches!(refused, Err(ArrivalsError::Busy { limit: 2 })),
        "{refused:?}"
    );
    for id in ["a", "b"] {
        s.coord.release(id, Verdict::Go);
    }
    assert_eq!(code(&record(a).await), "OK");
    assert_eq!(code(&record(b).await), "OK");
    assert_eq!(s.arrivals.inside(), 0);
}
