//! Stage D, post-execute: a waterfall of listeners, default `accept`.
//!
//! The decision of the outermost listener is applied:
//! * `accept` — keep the result;
//! * `accept-value` — replace the canonical value: it is re-validated
//!   against the output schema and re-rendered by the tool (an invalid value
//!   makes the result an `INVALID_RESULT` error);
//! * `accept-content` — replace the content, keep the value (or error);
//! * `block` — the result becomes a `BLOCKED` error whose content is the
//!   feedback.
//!
//! Replacing value and content at once cannot be expressed (the WIT variant
//! and [`PostDecision`] have no such case). A listener that fails, traps or
//! times out blocks the result (fail closed). The chain is not run for a
//! cancelled call's error (its listeners would be stopped as they start):
//! it stays the error it is.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;

use super::execute::success_from_value;
use crate::call::CallInfo;
use crate::content::Content;
use crate::outcome::{CallError, ErrorCode, Outcome, Stage};
use crate::policy::{Chain, PostDecision, PostExecuteHook, PostNext};
use crate::tool::ToolEntry;

/// A decision and who made it.
#[derive(Clone, Debug, PartialEq)]
pub struct Decided {
    pub decision: PostDecision,
    pub by: String,
}

/// Run the waterfall and apply its decision.
pub async fn run(
    chain: &Chain<dyn PostExecuteHook>,
    entry: &Arc<ToolEntry>,
    call: &Arc<CallInfo>,
    outcome: Outcome,
    budget: Duration,
    limits: &toolgate_schema::Limits,
) -> Outcome {
    if chain.is_empty() {
        return outcome;
    }
    // A cancelled call's guest calls are stopped as they start (the turn's
    // cancellation reaches every one), so a listener could only fail — and
    // blocking an error would hide why the call failed (a cancelled call
    // stays `ABORTED`). A value a cancelled call still produced goes
    // through the chain, and fails closed.
    if call.cancel.is_cancelled() && outcome.is_error() {
        return outcome;
    }
    let result = Arc::new(outcome);
    let decided = run_from(chain.clone(), 0, call.clone(), result.clone(), budget).await;
    let outcome = Arc::try_unwrap(result).unwrap_or_else(|shared| (*shared).clone());
    apply(entry, call, outcome, decided, limits).await
}

fn run_from(
    chain: Chain<dyn PostExecuteHook>,
    index: usize,
    call: Arc<CallInfo>,
    result: Arc<Outcome>,
    budget: Duration,
) -> BoxFuture<'static, Decided> {
    Box::pin(async move {
        let Some(listener) = chain.get(index) else {
            return Decided {
                decision: PostDecision::Accept,
                by: super::pre_execute::DEFAULT.to_string(),
            };
        };
        listener.invoked();
        let heard = Arc::new(Mutex::new(None));
        let next = {
            let (chain, call, result, heard) =
                (chain.clone(), call.clone(), result.clone(), heard.clone());
            PostNext::new(move || {
                Box::pin(async move {
                    let decided = run_from(chain, index + 1, call, result, budget).await;
                    let decision = decided.decision.clone();
                    *heard.lock().unwrap_or_else(|p| p.into_inner()) = Some(decided);
                    decision
                })
            })
        };
        let allowance = budget * (chain.len() - index) as u32;
        let started = Instant::now();
        let answer = listener
            .within(
                allowance,
                listener.policy.post_execute(&call, &result, next),
            )
            .await;
        let decided = match answer {
            Some(Ok(decision)) => {
                let inner = heard.lock().unwrap_or_else(|p| p.into_inner()).take();
                match inner {
                    Some(inner) if inner.decision == decision => inner,
                    _ => Decided {
                        decision,
                        by: listener.name.clone(),
                    },
                }
            }
            Some(Err(error)) if !error.is_timeout() => Decided {
                decision: PostDecision::Block(format!(
                    "post-execute hook `{}` failed ({error}); the result is withheld",
                    listener.name
                )),
                by: listener.name.clone(),
            },
            Some(Err(_)) | None => Decided {
                decision: PostDecision::Block(format!(
                    "post-execute hook `{}` did not answer within {} ms; the result is withheld",
                    listener.name,
                    allowance.as_millis()
                )),
                by: listener.name.clone(),
            },
        };
        tracing::info!(
            stage = "post_execute",
            hook = %listener.name,
            decision = decision_name(&decided.decision),
            decided_by = %decided.by,
            elapsed_us = started.elapsed().as_micros() as u64,
            "hook answered"
        );
        decided
    })
}

fn decision_name(d: &PostDecision) -> &'static str {
    match d {
        PostDecision::Accept => "accept",
        PostDecision::AcceptValue(_) => "accept-value",
        PostDecision::AcceptContent(_) => "accept-content",
        PostDecision::Block(_) => "block",
    }
}

async fn apply(
    entry: &ToolEntry,
    call: &Arc<CallInfo>,
    outcome: Outcome,
    decided: Decided,
    limits: &toolgate_schema::Limits,
) -> Outcome {
    match decided.decision {
        PostDecision::Accept => outcome,
        PostDecision::AcceptValue(value) => {
            match success_from_value(entry, call, value, Stage::PostExecute, limits).await {
                Outcome::Failure { mut error, content } => {
                    error.decided_by = Some(decided.by);
                    error.message =
                        format!("post-execute hook replaced the value: {}", error.message);
                    Outcome::Failure { error, content }
                }
                success => success,
            }
        }
        PostDecision::AcceptContent(content) => match outcome {
            Outcome::Success { value, meta, .. } => Outcome::Success {
                value,
                content,
                meta,
            },
            Outcome::Failure { error, .. } => Outcome::Failure { error, content },
        },
        PostDecision::Block(feedback) => Outcome::Failure {
            error: CallError::new(ErrorCode::Blocked, Stage::PostExecute, feedback.clone())
                .decided_by(decided.by),
            content: vec![Content::Text(feedback)],
        },
    }
}
