//! The scheduler: the calls of one model turn, run through the pipeline and
//! committed in model order (seed §6–§7).
//!
//! Why it is shaped this way: policies must see calls in the order the model
//! made them and may take their time (an approval waits for a person), while
//! tool bodies may overlap (a model often asks for several reads at once).
//! So each call goes through three steps (see [`crate::pipeline`]):
//!
//! * **prepare + classify**, just before the call would be dispatched — never
//!   earlier. The registry is re-read for every call (a hot reload mid-turn
//!   is seen by the calls that come after it), and the call's mode is asked
//!   of its tool then: a classifier may answer differently now than at the
//!   start of the turn. Only an exact `true` from `is-concurrency-safe`
//!   within [`CLASSIFIER_BUDGET`] makes a call *parallel*; no classifier
//!   (the tool does not declare the `classifier` feature), a trap, a panic,
//!   a slow answer → *exclusive*. A call that ends at materialize (unknown
//!   tool, invalid arguments, Code Mode) never reaches a body and takes no
//!   slot.
//! * **admit** (pre-execute, approval, guards), in model order, one call at
//!   a time, in the scheduler's own task. Bodies already dispatched keep
//!   running meanwhile.
//! * **complete** (execute-around, body, post-execute, finalize): a parallel
//!   call's is spawned as a task, so bodies overlap (and use every core); a
//!   call that runs alone runs in the scheduler's own task — there is nothing
//!   else to do meanwhile, and it saves two thread hand-offs per call.
//!
//! Parallel calls share a rolling pool of [`crate::Toolgate::max_parallel`] slots: a
//! slot that frees up is refilled with the next call. An exclusive call is
//! an ordered barrier: the pool drains (nothing new starts), the call is
//! prepared and classified again with nothing running, admitted and run
//! alone, and only then does the turn go on. Its policies therefore see the
//! effects of every call before it.
//!
//! **Commit** — observers notified, the record handed back — happens in model
//! order: a finished call waits until every call before it is committed (the
//! contiguous ready prefix advances). Each call is committed with the
//! observers of the generation it held.
//!
//! **Cancellation** (the turn's [`TurnOptions::cancel`]):
//!
//! | the call when the turn is cancelled | its result |
//! | --- | --- |
//! | not dispatched (waiting for a slot or a barrier, or in its policies) | `ABORTED_BEFORE_DISPATCH` |
//! | started | the turn drains to quiescence (bodies see the cancellation through their signal; a Wasm body is interrupted by the epoch callback), then: |
//! | … and succeeded, not yet committed | `ABORTED` (stage `scheduler`), see below |
//! | … and failed | its own failure, unchanged (a tool's own code, `TIMEOUT`, the `ABORTED` of an interrupted body) |
//!
//! A success replaced by `ABORTED` keeps what the tool returned, after a
//! first text block saying that the turn was cancelled after the call had
//! completed: its effects have taken place, and hiding what it did would
//! only mislead whoever reads the transcript (`details.completed = true`).
//! A record committed before the cancellation was observed stays as it was.
//!
//! **Scheduler failure** (a bug or resource exhaustion in the host, not a
//! tool failure: a body that panics — a native tool's, since a Wasm body
//! traps instead — or a native policy that panics): no new call is
//! dispatched, the calls that started are drained, the prefix before the
//! failed call is still committed, and nothing is fabricated for the failed
//! call or those after it. [`crate::Toolgate::execute_tool_calls`] reports the
//! first failure as a [`SchedulerError`].
//!
//! Calls that do not come as a turn — an MCP client sends `tools/call`
//! requests one by one, several in flight — go through [`arrivals`]: the same
//! steps and rules, with arrival order in place of model order.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use serde_json::json;
use tokio::task::{Id, JoinSet};

use crate::call::Features;
use crate::call::ToolCall;
use crate::content::Content;
use crate::outcome::{CallError, CallRecord, ErrorCode, Stage};
use crate::pipeline::{self, Finished, PipelineSettings, Prepared};
use crate::registry::Generation;
use crate::turn::TurnOptions;

pub mod arrivals;

pub use arrivals::{Arrivals, ArrivalsError};

/// Time one `is-concurrency-safe` answer may take. Classification sits on
/// the path of every call, before any slot is filled, so it must be quick;
/// a classifier that does not answer within this budget makes its call
/// exclusive (fail closed) — slower, never unsafe.
pub const CLASSIFIER_BUDGET: Duration = Duration::from_millis(250);

/// How a call may run relative to the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// May overlap other parallel calls (a slot of the pool).
    Parallel,
    /// Runs alone, as an ordered barrier.
    Exclusive,
}

/// What went wrong in the scheduler itself.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerFault {
    /// The call's body (or a stage after it) panicked, in the task it was
    /// spawned as or in the scheduler's own task.
    #[error("its execution panicked: {0}")]
    BodyPanicked(String),
    /// The runtime cancelled the task running the call's body (it is
    /// shutting down).
    #[error("the runtime cancelled the task running it")]
    TaskCancelled,
    /// A policy stage or the commit panicked in the scheduler's own task.
    #[error("{stage} panicked: {message}")]
    StagePanicked {
        stage: &'static str,
        message: String,
    },
}

/// The scheduler failed: a bug or resource exhaustion in the host, not a
/// tool failure. Dispatch stopped, what had started was drained, and no
/// result was fabricated; `committed` holds the records committed before
/// the failure (observers saw these), in model order.
#[derive(Debug, thiserror::Error)]
#[error(
    "the scheduler failed at call #{index} (id `{call_id}`, tool `{tool}`): {fault}; \
     {} of {total} call(s) committed, no result was fabricated for the others",
    committed.len()
)]
pub struct SchedulerError {
    /// The position of the call in the turn (0-based).
    pub index: usize,
    pub call_id: String,
    pub tool: String,
    pub fault: SchedulerFault,
    /// Records committed before the failure, in model order.
    pub committed: Vec<CallRecord>,
    /// How many calls the turn had.
    pub total: usize,
}

/// What the scheduler needs of the host, and nothing more: the generation
/// a call runs against, the pipeline's settings, a token per call, the
/// size of the pool, and whether plugins are still loading. The host
/// ([`crate::Toolgate`]) implements it; the scheduler never names the
/// host, so dependencies point one way (the host calls the scheduler).
pub trait Dispatch: Send + Sync + 'static {
    /// The generation a call from `scope` runs against, now.
    fn generation_for(&self, scope: &str) -> Arc<Generation>;
    fn settings(&self) -> &PipelineSettings;
    /// A token unique to one call (it keys the call's instances).
    fn next_token(&self) -> u64;
    /// Parallel calls at most (the pool).
    fn max_parallel(&self) -> usize;
    /// `true` once the plugin files a start left out are loaded (see
    /// [`crate::lifecycle`], "Start"); else it turns `true` when they are.
    fn settled(&self) -> tokio::sync::watch::Receiver<bool>;
    /// Write a committed call's audit record before its result is returned
    /// or observers see it (see [`crate::audit`]); a write that fails turns
    /// `finished` into the fail-closed error. The future waits for the
    /// write without holding the executor thread.
    fn record<'a>(
        &'a self,
        finished: &'a mut crate::pipeline::Finished,
        generation: &'a Generation,
        turn: &'a TurnOptions,
    ) -> futures::future::BoxFuture<'a, ()>;
}

/// While plugin files left out of the first generation are loading (see
/// [`crate::lifecycle`], "Start"): wait for them when the generation is
/// blocked (a policy may be among them) or lacks a tool called (it may be
/// theirs), or until the turn is cancelled. Returns at once otherwise.
pub async fn until_loaded<'a, H: Dispatch + ?Sized>(
    host: &H,
    turn: &TurnOptions,
    names: impl IntoIterator<Item = &'a str>,
) {
    let mut settled = host.settled();
    if *settled.borrow() {
        return;
    }
    let generation = host.generation_for(&turn.agent_scope);
    let wait = !generation.blocked.is_empty()
        || names.into_iter().any(|n| !generation.tools.contains_key(n));
    if wait {
        tokio::select! {
            _ = settled.wait_for(|s| *s) => {}
            _ = turn.cancel.cancelled() => {}
        }
    }
}

/// Run the calls of one model turn on `host`; one record per call, in
/// model order, or the first scheduler failure.
pub async fn run_turn<H: Dispatch + Clone>(
    host: &H,
    calls: Vec<ToolCall>,
    turn: &TurnOptions,
) -> Result<Vec<CallRecord>, SchedulerError> {
    until_loaded(host, turn, calls.iter().map(|c| c.name.as_str())).await;
    Turn::new(host, calls, turn).run().await
}

/// Why the scheduler is waiting for a running call to finish (logged at
/// debug level; tests follow the scheduler with it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    /// The pool is full; the next call waits for a slot.
    Slot,
    /// The next call is exclusive; the pool drains.
    Barrier,
    /// Every call is dispatched or settled.
    Finish,
    /// The turn was cancelled; draining to quiescence.
    Cancelled,
    /// The scheduler failed; draining what started.
    Failed,
}

impl Wait {
    fn as_str(self) -> &'static str {
        match self {
            Wait::Slot => "slot",
            Wait::Barrier => "barrier",
            Wait::Finish => "finish",
            Wait::Cancelled => "cancelled",
            Wait::Failed => "failed",
        }
    }
}

/// A call whose body is running.
struct Flight {
    index: usize,
    generation: Arc<Generation>,
}

/// A finished call waiting for its turn to be committed.
struct Ready {
    finished: Finished,
    generation: Arc<Generation>,
}

/// What one attempt to dispatch the next call did.
enum Step {
    /// The call was settled, dispatched or run; try the next one.
    Advanced,
    /// The call must wait for a running call to finish.
    Blocked(Wait),
}

/// The state of one turn.
struct Turn<'a, H> {
    host: &'a H,
    turn: &'a TurnOptions,
    pool: usize,
    /// The calls not yet taken by `step`.
    calls: Vec<Option<ToolCall>>,
    /// (id, tool) of every call, for reports.
    names: Vec<(String, String)>,
    /// One host token per call, kept if a call is prepared more than once.
    tokens: Vec<u64>,
    /// The next call to dispatch.
    next: usize,
    /// The next call was found exclusive while calls were running: drain
    /// before classifying it again.
    barrier: bool,
    running: JoinSet<Finished>,
    flights: HashMap<Id, Flight>,
    /// Finished calls, by position, until committed.
    ready: Vec<Option<Ready>>,
    committed: Vec<CallRecord>,
    failure: Option<(usize, SchedulerFault)>,
}

impl<'a, H: Dispatch + Clone> Turn<'a, H> {
    fn new(host: &'a H, calls: Vec<ToolCall>, turn: &'a TurnOptions) -> Self {
        let n = calls.len();
        Turn {
            host,
            turn,
            pool: host.max_parallel().max(1),
            names: calls
                .iter()
                .map(|c| (c.id.clone(), c.name.clone()))
                .collect(),
            tokens: calls.iter().map(|_| host.next_token()).collect(),
            calls: calls.into_iter().map(Some).collect(),
            next: 0,
            barrier: false,
            running: JoinSet::new(),
            flights: HashMap::new(),
            ready: (0..n).map(|_| None).collect(),
            committed: Vec::with_capacity(n),
            failure: None,
        }
    }

    async fn run(mut self) -> Result<Vec<CallRecord>, SchedulerError> {
        loop {
            self.commit_ready().await;
            let mut wait = self.idle_reason();
            if self.failure.is_none() && self.next < self.calls.len() {
                match self.step().await {
                    Step::Advanced => continue,
                    Step::Blocked(why) => wait = why,
                }
            }
            if self.running.is_empty() {
                break;
            }
            self.wait_one(wait).await;
        }
        self.commit_ready().await;
        match self.failure.take() {
            None => Ok(self.committed),
            Some((index, fault)) => {
                let (call_id, tool) = self.names[index].clone();
                tracing::error!(index, call_id, tool, %fault, "scheduler failure");
                Err(SchedulerError {
                    index,
                    call_id,
                    tool,
                    fault,
                    total: self.calls.len(),
                    committed: self.committed,
                })
            }
        }
    }

    /// Why the scheduler would wait if it could not dispatch anything.
    fn idle_reason(&self) -> Wait {
        if self.failure.is_some() {
            Wait::Failed
        } else if self.turn.cancel.is_cancelled() {
            Wait::Cancelled
        } else {
            Wait::Finish
        }
    }

    /// Try to settle or dispatch the next call.
    async fn step(&mut self) -> Step {
        let index = self.next;
        let cancelled = self.turn.cancel.is_cancelled();
        // Once the turn is cancelled nothing is dispatched any more: every
        // call left settles at once as ABORTED_BEFORE_DISPATCH (materialize).
        if !cancelled {
            if self.barrier && !self.running.is_empty() {
                return Step::Blocked(Wait::Barrier);
            }
            if self.running.len() >= self.pool {
                return Step::Blocked(Wait::Slot);
            }
        }
        let Some(call) = self.calls[index].take() else {
            // Unreachable: `next` moves past a call when it is taken for
            // good, and a call sent back to wait is put back.
            self.next += 1;
            return Step::Advanced;
        };
        // The generation current now: the call holds it until it ends.
        let generation = self.host.generation_for(&self.turn.agent_scope);
        let settings = self.host.settings();
        let prepared =
            match pipeline::prepare(&generation, settings, call, self.turn, self.tokens[index]) {
                Ok(p) => p,
                Err(early) => {
                    self.settle(index, early, generation);
                    return Step::Advanced;
                }
            };
        let mode = classify(&prepared).await;
        if mode == Mode::Exclusive && !self.running.is_empty() {
            // A barrier: let the pool drain, then prepare and classify this
            // call again (the registry and its classifier may say something
            // else then). Its validated arguments are what the model sent.
            let info = prepared.info();
            self.calls[index] = Some(ToolCall::new(
                info.call_id.clone(),
                info.tool_name.clone(),
                (*info.arguments).clone(),
            ));
            self.barrier = true;
            return Step::Blocked(Wait::Barrier);
        }
        self.barrier = false;
        let admitted = AssertUnwindSafe(pipeline::admit(prepared, settings, self.turn))
            .catch_unwind()
            .await;
        match admitted {
            Err(panic) => {
                self.next += 1;
                self.fail(
                    index,
                    SchedulerFault::StagePanicked {
                        stage: "its policies (pre-execute, approval, guards)",
                        message: panic_message(&*panic),
                    },
                );
            }
            Ok(Err(early)) => self.settle(index, early, generation),
            Ok(Ok(admitted)) => {
                self.next += 1;
                if mode == Mode::Exclusive || self.pool == 1 {
                    // It runs alone (the pool has drained, or holds one
                    // call): in the scheduler's own task, which has nothing
                    // else to do meanwhile. No task to spawn and join.
                    tracing::debug!(index, mode = ?mode, "running alone");
                    let done =
                        AssertUnwindSafe(pipeline::complete(admitted, settings, &self.turn.cancel))
                            .catch_unwind()
                            .await;
                    match done {
                        Ok(finished) => self.finished(index, finished, generation),
                        Err(panic) => {
                            self.fail(index, SchedulerFault::BodyPanicked(panic_message(&*panic)))
                        }
                    }
                } else {
                    let host = self.host.clone();
                    let cancel = self.turn.cancel.clone();
                    let handle = self.running.spawn(async move {
                        pipeline::complete(admitted, host.settings(), &cancel).await
                    });
                    tracing::debug!(index, running = self.running.len(), "dispatched");
                    self.flights
                        .insert(handle.id(), Flight { index, generation });
                }
            }
        }
        Step::Advanced
    }

    /// A call that ended before its body: ready to commit in its place.
    fn settle(&mut self, index: usize, finished: Finished, generation: Arc<Generation>) {
        self.next += 1;
        self.finished(index, finished, generation);
    }

    /// Call `index` finished: it waits for its turn to be committed.
    fn finished(&mut self, index: usize, finished: Finished, generation: Arc<Generation>) {
        self.ready[index] = Some(Ready {
            finished,
            generation,
        });
    }

    fn fail(&mut self, index: usize, fault: SchedulerFault) {
        tracing::error!(index, %fault, "scheduler failure; no new dispatch, draining");
        if self.failure.is_none() {
            self.failure = Some((index, fault));
        }
    }

    /// Wait for one running call to finish.
    async fn wait_one(&mut self, why: Wait) {
        tracing::debug!(
            running = self.running.len() as u64,
            next = self.next as u64,
            reason = why.as_str(),
            "waiting"
        );
        let Some(joined) = self.running.join_next_with_id().await else {
            return;
        };
        let (id, result) = match joined {
            Ok((id, finished)) => (id, Ok(finished)),
            Err(error) if error.is_panic() => (
                error.id(),
                Err(SchedulerFault::BodyPanicked(panic_message(
                    &*error.into_panic(),
                ))),
            ),
            Err(error) => (error.id(), Err(SchedulerFault::TaskCancelled)),
        };
        let Some(flight) = self.flights.remove(&id) else {
            return;
        };
        match result {
            Ok(finished) => self.finished(flight.index, finished, flight.generation),
            Err(fault) => self.fail(flight.index, fault),
        }
    }

    /// Commit the contiguous ready prefix, in model order. After a
    /// cancellation nothing is committed until every started call has
    /// finished (quiescence); then successes become `ABORTED`.
    async fn commit_ready(&mut self) {
        let cancelled = self.turn.cancel.is_cancelled();
        if cancelled && !self.running.is_empty() {
            return;
        }
        let budget = self.host.settings().policy_timeout();
        while let Some(slot) = self.ready.get_mut(self.committed.len()) {
            let Some(Ready {
                mut finished,
                generation,
            }) = slot.take()
            else {
                break;
            };
            if cancelled && !finished.record.is_error {
                finished.record = aborted_after_completion(finished.record);
            }
            self.host
                .record(&mut finished, &generation, self.turn)
                .await;
            let notified = AssertUnwindSafe(pipeline::result::notify(
                &generation.policies.observers,
                finished,
                budget,
            ))
            .catch_unwind()
            .await;
            let finished = match notified {
                Ok(finished) => finished,
                Err(panic) => {
                    let index = self.committed.len();
                    self.fail(
                        index,
                        SchedulerFault::StagePanicked {
                            stage: "its commit (result observers)",
                            message: panic_message(&*panic),
                        },
                    );
                    // Its observers did not all see it: it is not committed.
                    break;
                }
            };
            self.committed.push(finished.record);
        }
    }
}

/// Ask the tool whether this call may overlap others. Fail closed: only an
/// exact `true`, within [`CLASSIFIER_BUDGET`], from a tool that declares a
/// classifier, is parallel.
pub async fn classify(prepared: &Prepared) -> Mode {
    let entry = prepared.entry();
    let info = prepared.info();
    if !entry.def.meta.features.contains(Features::CLASSIFIER) {
        return Mode::Exclusive;
    }
    let asked = tokio::time::timeout(
        CLASSIFIER_BUDGET,
        AssertUnwindSafe(entry.body.is_concurrency_safe(info)).catch_unwind(),
    )
    .await;
    let (mode, why) = match asked {
        Ok(Ok(Some(true))) => (Mode::Parallel, "the classifier said true"),
        Ok(Ok(Some(false))) => (Mode::Exclusive, "the classifier said false"),
        Ok(Ok(None)) => (Mode::Exclusive, "the classifier failed (trap)"),
        Ok(Err(_)) => (Mode::Exclusive, "the classifier panicked"),
        Err(_) => (Mode::Exclusive, "the classifier did not answer in time"),
    };
    tracing::debug!(
        token = info.token,
        tool = %info.tool_name,
        mode = ?mode,
        why,
        "classified"
    );
    mode
}

/// A success committed after the turn was cancelled: `ABORTED`, keeping
/// what the tool returned after a first block that says what happened.
pub(crate) fn aborted_after_completion(record: CallRecord) -> CallRecord {
    let message = format!(
        "the turn was cancelled after `{}` had completed: its effects have taken place, \
         but its result is reported as aborted. What it returned follows, for reference.",
        record.name
    );
    let error = CallError::new(ErrorCode::Aborted, Stage::Scheduler, message.clone())
        .with_details(json!({ "completed": true }));
    let mut content = Vec::with_capacity(record.content.len() + 1);
    content.push(Content::Text(message));
    content.extend(record.content);
    CallRecord {
        id: record.id,
        name: record.name,
        is_error: true,
        content,
        error: Some(error),
        meta: None,
        structured_content: None,
        additional_contexts: record.additional_contexts,
    }
}

pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a panic without a message)".to_string()
    }
}
