//! The scheduler for calls that arrive one by one (an MCP client's
//! `tools/call` requests, several in flight), under the rules of a turn.
//!
//! Why not [`crate::Toolgate::execute_tool_calls`]: a turn is a list known in
//! advance, committed in model order. A server learns of a call when its
//! request arrives, must answer each request as soon as its call is done (a
//! fast call never waits for a slow one before it), and must let calls that
//! arrive while others run overlap them — under the same rules:
//!
//! * **Arrival order** replaces model order: a call's policies (pre-execute,
//!   approval, guards) run one call at a time, in the order the calls
//!   reached the scheduler (a FIFO lock: tokio's mutex is fair). A client
//!   that needs B's policies to see A's effects waits for A's answer, as
//!   it would with any server.
//! * **Mode**, asked just before the call would run, exactly as in a turn
//!   ([`super::classify`]: only an exact `true` in time is parallel).
//! * **Rolling pool**: a parallel call holds one of
//!   [`crate::Toolgate::max_parallel`] slots (a fair semaphore) while its body
//!   runs; the next call takes a slot as soon as one frees up.
//! * **Barrier**: an exclusive call holds *every* slot. It waits, holding
//!   the admission lock (so nothing that arrives after it starts), until the
//!   calls running drain; then it is prepared and classified again, as in a
//!   turn (the registry or the classifier may say something else now), and
//!   runs alone.
//! * **Commit**: observers are notified and the record returned as soon as
//!   the call is done, not in arrival order: each request has its own
//!   answer, and there is no transcript to keep in order.
//!
//! Each call carries its own [`TurnOptions`]: its own cancellation (an MCP
//! `notifications/cancelled`, or the client going away) and its client's
//! approver. Cancellation follows the turn's table: before dispatch →
//! `ABORTED_BEFORE_DISPATCH`; while running → the body is interrupted
//! (`ABORTED`); a success whose cancellation came before it was committed →
//! `ABORTED` with what it returned.
//!
//! **Bounded**: at most `max_queued` calls are inside the scheduler at once
//! (waiting or running); the next one is refused at once with
//! [`ArrivalsError::Busy`] — a flood costs a refusal each, not memory.
//!
//! There is no task per call here: each call runs in its caller's task (for
//! `toolgate serve`, the task the MCP SDK spawned for the request), so a call
//! costs no hand-off beyond the ones its transport already makes.
//!
//! **Failure** of the scheduler itself (a native tool or policy that panics)
//! fails that call only ([`ArrivalsError::Failed`]; no record is fabricated
//! for it): a server has no turn to stop, and its other clients go on.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::FutureExt;
use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};

use super::{Dispatch, Mode, SchedulerFault, aborted_after_completion, classify, panic_message};
use crate::call::ToolCall;
use crate::outcome::CallRecord;
use crate::pipeline::{self, Finished, Prepared};
use crate::registry::Generation;
use crate::turn::TurnOptions;

/// Default for `max_queued`: calls inside one scheduler at once.
pub const DEFAULT_MAX_QUEUED: usize = 256;

/// Why a call got no record.
#[derive(Debug, thiserror::Error)]
pub enum ArrivalsError {
    /// `max_queued` calls are already waiting or running.
    #[error("too many calls in flight ({limit} are waiting or running); retry later")]
    Busy {
        /// The limit that was reached.
        limit: usize,
    },
    /// The scheduler failed on this call (a panic in a native tool or
    /// policy); no result is fabricated.
    #[error("the scheduler failed on this call: {0}")]
    Failed(SchedulerFault),
}

/// Schedules calls as they arrive: see the module docs.
pub struct Arrivals {
    host: Arc<dyn Dispatch>,
    /// Policies run one call at a time, in arrival order.
    admission: Mutex<()>,
    /// The rolling pool: a parallel call holds one slot, an exclusive call
    /// all of them.
    slots: Arc<Semaphore>,
    pool: u32,
    inside: AtomicUsize,
    /// Calls waiting for slots (the pool is full, or draining for an
    /// exclusive call).
    waiting: AtomicUsize,
    /// Calls whose body runs (they hold their slots).
    running: AtomicUsize,
    max_queued: usize,
}

impl std::fmt::Debug for Arrivals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arrivals")
            .field("pool", &self.pool)
            .field("inside", &self.inside.load(Ordering::Relaxed))
            .field("waiting", &self.waiting.load(Ordering::Relaxed))
            .field("running", &self.running.load(Ordering::Relaxed))
            .field("max_queued", &self.max_queued)
            .finish()
    }
}

/// Counts a call in one of the scheduler's states until dropped.
struct Inside<'a>(&'a AtomicUsize);

impl<'a> Inside<'a> {
    fn enter(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Inside(count)
    }
}

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Whatever slots the call holds; released when dropped.
type Slots = OwnedSemaphorePermit;

impl Arrivals {
    /// A scheduler for `host`'s calls (a [`crate::Toolgate`]), with a pool
    /// of its `max_parallel` and room for `max_queued` calls.
    pub fn new(host: impl Dispatch, max_queued: usize) -> Self {
        let pool = u32::try_from(host.max_parallel().max(1)).unwrap_or(u32::MAX >> 4);
        Arrivals {
            host: Arc::new(host),
            admission: Mutex::new(()),
            slots: Arc::new(Semaphore::new(pool as usize)),
            pool,
            inside: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            max_queued: max_queued.max(1),
        }
    }

    /// How many calls may be inside at once.
    pub fn max_queued(&self) -> usize {
        self.max_queued
    }

    /// Calls inside the scheduler right now (waiting or running).
    pub fn inside(&self) -> usize {
        self.inside.load(Ordering::Relaxed)
    }

    /// Of those, the calls waiting for a slot: the pool is full, or
    /// draining for an exclusive call. (A call behind an exclusive one
    /// waits for admission instead, and is in neither count.)
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Of those, the calls whose body runs.
    pub fn running(&self) -> usize {
        self.running.load(Ordering::Relaxed)
    }

    /// Run one call through the pipeline under the scheduler's rules, and
    /// commit it (observers notified). `turn` is this call's own: its
    /// cancellation and its approver.
    pub async fn run(
        &self,
        call: ToolCall,
        turn: &TurnOptions,
    ) -> Result<CallRecord, ArrivalsError> {
        if self.inside.fetch_add(1, Ordering::Relaxed) >= self.max_queued {
            self.inside.fetch_sub(1, Ordering::Relaxed);
            return Err(ArrivalsError::Busy {
                limit: self.max_queued,
            });
        }
        let _inside = Inside(&self.inside);
        let token = self.host.next_token();
        let admitted = match AssertUnwindSafe(self.admit(call, turn, token))
            .catch_unwind()
            .await
        {
            Ok(admitted) => admitted,
            Err(panic) => {
                return Err(ArrivalsError::Failed(SchedulerFault::StagePanicked {
                    stage: "its policies (pre-execute, approval, guards)",
                    message: panic_message(&*panic),
                }));
            }
        };
        let (finished, generation) = match admitted {
            Admission::Early(finished, generation) => (*finished, generation),
            Admission::Run(admitted, generation, slots) => {
                let settings = self.host.settings();
                let running = Inside::enter(&self.running);
                let done = AssertUnwindSafe(pipeline::complete(admitted, settings, &turn.cancel))
                    .catch_unwind()
                    .await;
                drop(running);
                drop(slots);
                match done {
                    Ok(finished) => (finished, generation),
                    Err(panic) => {
                        return Err(ArrivalsError::Failed(SchedulerFault::BodyPanicked(
                            panic_message(&*panic),
                        )));
                    }
                }
            }
        };
        self.commit(finished, &generation, turn).await
    }

    /// Wait for the call's turn, prepare, classify, take its slots, admit.
    async fn admit(&self, call: ToolCall, turn: &TurnOptions, token: u64) -> Admission {
        // Plugins still loading at start that the call may need.
        super::until_loaded(&*self.host, turn, [call.name.as_str()]).await;
        // Arrival order. A call cancelled while it waits here settles at
        // once (materialize sees the cancellation).
        let _admission = tokio::select! {
            biased;
            guard = self.admission.lock() => Some(guard),
            _ = turn.cancel.cancelled() => None,
        };
        // A slot first, as a turn checks the pool before it prepares: the
        // call is prepared against the registry as it is when it can run.
        let mut slots = if _admission.is_some() {
            self.acquire(1, turn).await
        } else {
            None
        };
        let mut call = call;
        let mut waited = false;
        loop {
            let generation = self.host.generation_for(&turn.agent_scope);
            let settings = self.host.settings();
            let prepared = match pipeline::prepare(&generation, settings, call, turn, token) {
                Ok(p) => p,
                Err(early) => return Admission::Early(Box::new(early), generation),
            };
            let mode = classify(&prepared).await;
            if mode == Mode::Exclusive && !waited {
                let more = self.pool - 1;
                if more > 0 {
                    match self.slots.clone().try_acquire_many_owned(more) {
                        Ok(extra) => {
                            if let Some(s) = slots.as_mut() {
                                s.merge(extra);
                            }
                        }
                        Err(_) => {
                            // A barrier: nothing behind this call starts (it
                            // holds the admission lock) and the pool drains;
                            // then it is prepared and classified again.
                            call = unprepare(&prepared);
                            drop(prepared);
                            tracing::debug!(token, "exclusive: waiting for the pool to drain");
                            match self.acquire(more, turn).await {
                                Some(extra) => {
                                    if let Some(s) = slots.as_mut() {
                                        s.merge(extra);
                                    }
                                }
                                None => {
                                    // Cancelled while waiting: materialize
                                    // settles it as ABORTED_BEFORE_DISPATCH.
                                    slots = None;
                                }
                            }
                            waited = true;
                            continue;
                        }
                    }
                }
            } else if mode == Mode::Parallel && waited {
                // It waited as exclusive and is parallel now: give back all
                // but its own slot.
                if let Some(s) = slots.as_mut() {
                    let extra = s.num_permits().saturating_sub(1);
                    if extra > 0 {
                        drop(s.split(extra));
                    }
                }
            }
            tracing::debug!(token, ?mode, "admitting");
            let settings = self.host.settings();
            return match pipeline::admit(prepared, settings, turn).await {
                Err(early) => Admission::Early(Box::new(early), generation),
                // Without slots only if cancelled while waiting for them, and
                // then admit has refused it; were it not so, it would run
                // without a slot rather than never answer.
                Ok(admitted) => Admission::Run(admitted, generation, slots),
            };
        }
    }

    /// `n` slots, unless the call is cancelled first.
    async fn acquire(&self, n: u32, turn: &TurnOptions) -> Option<Slots> {
        if let Ok(slots) = self.slots.clone().try_acquire_many_owned(n) {
            return Some(slots);
        }
        let _waiting = Inside::enter(&self.waiting);
        tokio::select! {
            biased;
            permit = self.slots.clone().acquire_many_owned(n) => permit.ok(),
            _ = turn.cancel.cancelled() => None,
        }
    }

    /// Notify the observers of the generation the call held, and hand the
    /// record back. A success whose cancellation arrived before now is
    /// reported as `ABORTED`, with what it returned.
    async fn commit(
        &self,
        mut finished: Finished,
        generation: &Generation,
        turn: &TurnOptions,
    ) -> Result<CallRecord, ArrivalsError> {
        if turn.cancel.is_cancelled() && !finished.record.is_error {
            finished.record = aborted_after_completion(finished.record);
        }
        self.host.record(&mut finished, generation, turn).await;
        let budget = self.host.settings().policy_timeout();
        let notified = AssertUnwindSafe(pipeline::result::notify(
            &generation.policies.observers,
            finished,
            budget,
        ))
        .catch_unwind()
        .await;
        match notified {
            Ok(finished) => Ok(finished.record),
            Err(panic) => Err(ArrivalsError::Failed(SchedulerFault::StagePanicked {
                stage: "its commit (result observers)",
                message: panic_message(&*panic),
            })),
        }
    }
}

/// Where a call stands after its policies.
enum Admission {
    /// It ended before its body (a refusal, a denial, an abort).
    Early(Box<Finished>, Arc<Generation>),
    /// Its body runs next, holding these slots.
    Run(pipeline::Admitted, Arc<Generation>, Option<Slots>),
}

/// The call as the client sent it, to prepare it again after a barrier.
fn unprepare(prepared: &Prepared) -> ToolCall {
    let info = prepared.info();
    ToolCall::new(
        info.call_id.clone(),
        info.tool_name.clone(),
        (*info.arguments).clone(),
    )
}
