//! `[approval]` with a queue: the queue on the store [`super::store`]
//! opened, its timeout and retry hold, and the webhook that announces its
//! requests. The queue is then the host's approver.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use super::{Feature, StartContext, Wiring};
use crate::approval::queue::ApprovalQueue;
use crate::approval::webhook::{DEFAULT_KEY_FILE, Webhook, WebhookError};
use crate::error::HostError;
use crate::pipeline::Approver;

/// See the module docs.
pub(crate) struct Queue;

impl Feature for Queue {
    fn open<'a>(
        &'a self,
        start: &'a StartContext<'a>,
        wiring: &'a mut Wiring,
    ) -> BoxFuture<'a, Result<(), HostError>> {
        Box::pin(async move {
            let Some(store) = wiring.approval_store.take() else {
                return Ok(());
            };
            let config = &start.config.approval;
            let timeout = config.timeout();
            let replica = store.shared().then(|| {
                tracing::info!(replica = %start.replica_id, "approvals in the shared store; this replica's id");
                start.replica_id.to_string()
            });
            let queue = ApprovalQueue::open_as(store, timeout, replica).await?;
            if let Some(ms) = config.retry_hold_ms {
                queue.set_retry_hold(Duration::from_millis(ms));
            }
            if let Some(url) = &config.webhook {
                let key = match (&config.webhook_key_file, start.state) {
                    // Relative to the host's working directory, as the
                    // protected set has it.
                    (Some(p), _) => start.workdir.join(p),
                    (None, Some(dir)) => dir.join(DEFAULT_KEY_FILE),
                    (None, None) => return Err(WebhookError::NoKeyFile.into()),
                };
                Webhook::new(url, &key)?.start(&queue);
            }
            wiring.approver = Some(Arc::new(queue.clone()) as Arc<dyn Approver>);
            wiring.approvals = Some(queue);
            Ok(())
        })
    }
}
