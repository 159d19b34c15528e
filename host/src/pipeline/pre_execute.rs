//! Stage B, pre-execute: a waterfall of listeners, default `allow`.
//!
//! Listeners run outermost first (lowest priority number). Each receives a
//! [`PreNext`] continuation: running it runs every listener after this one (then the
//! default) and returns their decision, which the listener may keep or
//! change. Not running it skips them. So an outer listener can turn an inner
//! deny into allow — by design; rules that must not be overruled belong in
//! guards, which run after this stage whatever it decided.
//!
//! A listener that fails, traps or exceeds its budget denies (fail closed).
//! The decision is attributed to the listener that produced it: a listener
//! that passes on the inner decision unchanged leaves the inner attribution.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;

use crate::call::CallInfo;
use crate::outcome::{CallError, ErrorCode, Outcome, Stage};
use crate::policy::{Chain, PreDecision, PreExecuteHook, PreNext};

/// A decision and who made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decided {
    pub decision: PreDecision,
    pub by: String,
}

/// Who decides when no listener does.
pub const DEFAULT: &str = "default";

/// Run the whole waterfall.
pub async fn run(
    chain: &Chain<dyn PreExecuteHook>,
    call: &Arc<CallInfo>,
    budget: Duration,
) -> Decided {
    run_from(chain.clone(), 0, call.clone(), budget).await
}

fn run_from(
    chain: Chain<dyn PreExecuteHook>,
    index: usize,
    call: Arc<CallInfo>,
    budget: Duration,
) -> BoxFuture<'static, Decided> {
    Box::pin(async move {
        let Some(listener) = chain.get(index) else {
            return Decided {
                decision: PreDecision::Allow,
                by: DEFAULT.to_string(),
            };
        };
        listener.invoked();
        let heard = Arc::new(Mutex::new(None));
        let next = {
            let (chain, call, heard) = (chain.clone(), call.clone(), heard.clone());
            PreNext::new(move || {
                Box::pin(async move {
                    let decided = run_from(chain, index + 1, call, budget).await;
                    let decision = decided.decision.clone();
                    *heard.lock().unwrap_or_else(|p| p.into_inner()) = Some(decided);
                    decision
                })
            })
        };
        // This listener's budget plus those of the listeners it may run.
        let allowance = budget * (chain.len() - index) as u32;
        let started = Instant::now();
        let answer = listener
            .within(allowance, listener.policy.pre_execute(&call, next))
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
                decision: PreDecision::Deny(format!(
                    "pre-execute hook `{}` failed ({error}); failing closed",
                    listener.name
                )),
                by: listener.name.clone(),
            },
            Some(Err(_)) | None => Decided {
                decision: PreDecision::Deny(format!(
                    "pre-execute hook `{}` did not answer within {} ms; failing closed",
                    listener.name,
                    allowance.as_millis()
                )),
                by: listener.name.clone(),
            },
        };
        tracing::info!(
            stage = "pre_execute",
            hook = %listener.name,
            decision = %decided.decision,
            decided_by = %decided.by,
            elapsed_us = started.elapsed().as_micros() as u64,
            "hook answered"
        );
        decided
    })
}

/// The result of a pre-execute denial.
pub fn denied(by: &str, reason: String) -> Outcome {
    Outcome::failure(CallError::new(ErrorCode::Denied, Stage::PreExecute, reason).decided_by(by))
}
