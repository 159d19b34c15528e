//! Stage E, result: the record is frozen (a [`CallRecord`] has no canonical
//! value and no way to change it), then every observer is notified in
//! order. An observer that fails, traps or times out is isolated: logged,
//! and nothing else happens — it cannot change the result, stop the other
//! observers, or fail the call.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument;

use super::Finished;
use crate::call::CallInfo;
use crate::outcome::CallRecord;
use crate::policy::{Chain, ResultObserver};

/// Notify the observers of a committed record; hands the call back. The
/// record is shared with the observers (a component observer reads it
/// through a handle), never copied for them.
pub async fn notify(
    chain: &Chain<dyn ResultObserver>,
    finished: Finished,
    budget: Duration,
) -> Finished {
    if chain.is_empty() {
        return finished;
    }
    let Finished {
        info,
        record,
        span,
        decisions,
        elapsed_us,
        intent,
        notes,
    } = finished;
    let record = Arc::new(record);
    notify_all(chain, &info, &record, budget)
        .instrument(span.clone())
        .await;
    // The observers are done: nobody else holds the record now.
    let record = Arc::try_unwrap(record).unwrap_or_else(|shared| (*shared).clone());
    Finished {
        info,
        record,
        span,
        decisions,
        elapsed_us,
        intent,
        notes,
    }
}

async fn notify_all(
    chain: &Chain<dyn ResultObserver>,
    info: &Arc<CallInfo>,
    record: &Arc<CallRecord>,
    budget: Duration,
) {
    for observer in chain.iter() {
        observer.invoked();
        let started = Instant::now();
        let answer = observer
            .within(budget, observer.policy.on_result(info, record))
            .await;
        match answer {
            Some(Ok(())) => tracing::info!(
                stage = "result",
                observer = %observer.name,
                elapsed_us = started.elapsed().as_micros() as u64,
                "observer notified"
            ),
            Some(Err(error)) if !error.is_timeout() => tracing::warn!(
                stage = "result",
                observer = %observer.name,
                %error,
                "observer failed; isolated, the result is unchanged"
            ),
            Some(Err(_)) | None => tracing::warn!(
                stage = "result",
                observer = %observer.name,
                "observer timed out; isolated, the result is unchanged"
            ),
        }
    }
}
