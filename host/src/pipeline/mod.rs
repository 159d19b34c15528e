//! The nine-point tool pipeline.
//!
//! ```text
//! materialize → pre-execute → approval → guard → execute (around) → body
//!             → post-execute → finalize content → result
//! ```
//!
//! One module per stage, so a rule lives where its stage lives. This module
//! only strings the stages together; [`run_call`] takes a call from the model
//! to a frozen [`CallRecord`], and [`result::notify`] hands that record to the
//! observers once the scheduler commits it.
//!
//! Invariants kept here:
//! * nothing but `materialize` sees unvalidated arguments;
//! * every early exit is a [`CallRecord`] with a closed-set error naming the
//!   stage and who decided;
//! * a policy that errs, traps or times out never allows anything.

pub mod approval;
pub mod execute;
pub mod finalize;
pub mod guard;
pub mod materialize;
pub mod post_execute;
pub mod pre_execute;
pub mod result;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::call::{CallInfo, CallSignal, ToolCall, TurnOptions};
use crate::outcome::{CallRecord, Outcome};
use crate::policy::PreDecision;
use crate::registry::Generation;
use crate::tool::DeferredContexts;

pub use approval::{ApprovalAnswer, ApprovalRequest, Approver};

/// Settings every stage reads.
#[derive(Clone)]
pub struct PipelineSettings {
    /// Time budget of one pre-execute/post-execute hook, guard, finalizer or
    /// observer invocation (a waterfall hook also gets the budgets of the
    /// listeners after it, which it may run through `next`).
    pub policy_timeout: Duration,
    /// Limits on arguments and values (depth, size).
    pub limits: toolgate_schema::Limits,
    /// Who answers `ask`. `None`: every `ask` is a deny.
    pub approver: Option<Arc<dyn Approver>>,
}

impl Default for PipelineSettings {
    fn default() -> Self {
        PipelineSettings {
            policy_timeout: Duration::from_millis(2_000),
            limits: toolgate_schema::Limits::default(),
            approver: None,
        }
    }
}

impl std::fmt::Debug for PipelineSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelineSettings")
            .field("policy_timeout", &self.policy_timeout)
            .field(
                "approver",
                &self.approver.as_ref().map(|a| a.name().to_string()),
            )
            .finish()
    }
}

/// A call that has been through the pipeline, ready to commit.
#[derive(Debug)]
pub struct Finished {
    pub info: Arc<CallInfo>,
    pub record: CallRecord,
    /// The call's tracing span: the commit (observers) is logged in it too.
    pub span: tracing::Span,
}

/// Run one call through every stage up to the frozen record. Observers are
/// not notified here: that is the commit, [`result::notify`].
pub async fn run_call(
    generation: &Arc<Generation>,
    settings: &PipelineSettings,
    call: ToolCall,
    turn: &TurnOptions,
    token: u64,
) -> Finished {
    let span = tracing::info_span!("call", token, id = %call.id, tool = %call.name);
    let started = Instant::now();
    let mut finished = run_stages(generation, settings, call, turn, token)
        .instrument(span.clone())
        .await;
    finished.span = span.clone();
    span.in_scope(|| {
        tracing::info!(
            stage = "result",
            is_error = finished.record.is_error,
            code = finished.record.code().unwrap_or(""),
            elapsed_us = started.elapsed().as_micros() as u64,
            "call finished"
        )
    });
    finished
}

async fn run_stages(
    generation: &Arc<Generation>,
    settings: &PipelineSettings,
    call: ToolCall,
    turn: &TurnOptions,
    token: u64,
) -> Finished {
    // A. materialize: token, Code Mode collapse, cancellation, lookup,
    // lossless snapshot and validation of the arguments.
    let (info, entry) = match materialize::run(generation, settings, call, turn, token) {
        Ok(ready) => ready,
        Err(early) => return early,
    };
    let early = |outcome: Outcome| Finished {
        record: CallRecord::freeze(
            info.call_id.clone(),
            info.tool_name.clone(),
            outcome,
            Vec::new(),
        ),
        info: info.clone(),
        span: tracing::Span::none(),
    };

    // B. pre-execute waterfall, approval, guard chain.
    let policies = &generation.policies;
    let decided = pre_execute::run(&policies.pre_execute, &info, settings.policy_timeout).await;
    match decided.decision {
        PreDecision::Allow => {}
        PreDecision::Deny(reason) => {
            return early(pre_execute::denied(&decided.by, reason));
        }
        PreDecision::Ask(prompt) => {
            if let Err(error) =
                approval::run(settings.approver.as_ref(), &info, prompt, &decided.by).await
            {
                return early(Outcome::failure(error));
            }
        }
    }
    if let Err(error) = guard::run(&policies.guards, &info, settings.policy_timeout).await {
        return early(Outcome::failure(error));
    }
    if turn.cancel.is_cancelled() {
        return early(materialize::aborted_before_dispatch(&info));
    }

    // C. execute: the finalizers in force are fixed now; then the around
    // waterfall wraps the body, with the caller's cancellation fused in.
    let finalizers = finalize::snapshot(&policies.finalizers, &entry);
    let deferred = DeferredContexts::default();
    let signal = CallSignal::new(turn.cancel.clone(), None);
    let outcome = execute::run(
        &policies.execute_around,
        &entry,
        &info,
        signal,
        deferred.clone(),
        &settings.limits,
    )
    .await;

    // D. post-execute waterfall, then materialize → finalize → materialize.
    let outcome = post_execute::run(
        &policies.post_execute,
        &entry,
        &info,
        outcome,
        settings.policy_timeout,
        &settings.limits,
    )
    .await;
    let outcome = finalize::run(&finalizers, &info, outcome, settings).await;

    // E. freeze. Observers are notified at commit.
    let contexts = std::mem::take(&mut *deferred.lock().unwrap_or_else(|p| p.into_inner()));
    Finished {
        record: CallRecord::freeze(
            info.call_id.clone(),
            info.tool_name.clone(),
            outcome,
            contexts,
        ),
        info,
        span: tracing::Span::none(),
    }
}
