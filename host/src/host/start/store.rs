//! `[state]`: the `kv` seam's storage and the approval queue's, on one
//! engine, opened before anything is loaded (a plugin's first call may
//! read its counters).

use futures::future::BoxFuture;

use super::{Feature, StartContext, Wiring};
use crate::approval::ApprovalMode;
use crate::error::HostError;
use crate::store::ApprovalsAt;

/// See the module docs.
pub(crate) struct Stores;

impl Feature for Stores {
    fn open<'a>(
        &'a self,
        start: &'a StartContext<'a>,
        wiring: &'a mut Wiring,
    ) -> BoxFuture<'a, Result<(), HostError>> {
        Box::pin(async move {
            let config = start.config;
            // The operator's explicit approver wins over the configuration's
            // mode, as `--approve` does over `[approval] mode`.
            let queue = start.asked.approval_queue
                || (config.approval.mode == Some(ApprovalMode::Queue)
                    && !start.asked.explicit_approver);
            let approvals = queue.then(|| match &config.approval.store {
                Some(file) => ApprovalsAt::File(file),
                None => ApprovalsAt::State,
            });
            let stores = crate::store::open(
                &config.state,
                start.state,
                start.workdir,
                wiring.kv.take(),
                approvals,
            )?;
            wiring.kv = Some(stores.kv);
            wiring.approval_store = stores.approvals;
            Ok(())
        })
    }
}
