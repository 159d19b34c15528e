//! Stage B, the guard chain: monotonic, deny-only.
//!
//! A guard returns a reason to deny or nothing. The first reason denies and
//! ends the chain; no guard can allow, so neither order nor any pre-execute
//! listener can turn a guard's denial back into an allow. A guard that fails,
//! traps or exceeds its budget denies.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::call::CallInfo;
use crate::outcome::{CallError, ErrorCode, Stage};
use crate::policy::{Chain, Guard};

/// Run every guard in order; `Err` is the denial.
pub async fn run(
    chain: &Chain<dyn Guard>,
    call: &Arc<CallInfo>,
    budget: Duration,
) -> Result<(), CallError> {
    for guard in chain.iter() {
        guard.invoked();
        let started = Instant::now();
        let verdict = match guard.within(budget, guard.policy.check(call)).await {
            Some(Ok(None)) => None,
            Some(Ok(Some(reason))) => Some(reason),
            Some(Err(error)) if !error.is_timeout() => Some(format!(
                "guard `{}` failed ({error}); failing closed",
                guard.name
            )),
            Some(Err(_)) | None => Some(format!(
                "guard `{}` did not answer within {} ms; failing closed",
                guard.name,
                budget.as_millis()
            )),
        };
        tracing::info!(
            stage = "guard",
            guard = %guard.name,
            denied = verdict.is_some(),
            reason = verdict.as_deref().unwrap_or(""),
            elapsed_us = started.elapsed().as_micros() as u64,
            "guard checked"
        );
        if let Some(reason) = verdict {
            return Err(
                CallError::new(ErrorCode::Denied, Stage::Guard, reason).decided_by(&guard.name)
            );
        }
    }
    Ok(())
}
