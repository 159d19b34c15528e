//! Stage E, result: the record is frozen (a [`CallRecord`] has no canonical
//! value and no way to change it), then every observer is notified in
//! order. An observer that fails, traps or times out is isolated: logged,
//! and nothing else happens — it cannot change the result, stop the other
//! observers, or fail the call.

use std::time::{Duration, Instant};

use tracing::Instrument;

use super::Finished;
use crate::policy::{Chain, ResultObserver};

/// Notify the observers of a committed record.
pub async fn notify(chain: &Chain<dyn ResultObserver>, finished: &Finished, budget: Duration) {
    notify_all(chain, finished, budget)
        .instrument(finished.span.clone())
        .await
}

async fn notify_all(chain: &Chain<dyn ResultObserver>, finished: &Finished, budget: Duration) {
    for observer in chain.iter() {
        observer.invoked();
        let started = Instant::now();
        let answer = tokio::time::timeout(
            budget,
            observer.policy.on_result(&finished.info, &finished.record),
        )
        .await;
        match answer {
            Ok(Ok(())) => tracing::info!(
                stage = "result",
                observer = %observer.name,
                elapsed_us = started.elapsed().as_micros() as u64,
                "observer notified"
            ),
            Ok(Err(error)) => tracing::warn!(
                stage = "result",
                observer = %observer.name,
                %error,
                "observer failed; isolated, the result is unchanged"
            ),
            Err(_) => tracing::warn!(
                stage = "result",
                observer = %observer.name,
                "observer timed out; isolated, the result is unchanged"
            ),
        }
    }
}
