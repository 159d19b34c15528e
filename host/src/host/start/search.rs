//! Web search (`[web_search]`): the provider and its key, read at start —
//! a missing or empty key file stops the start, naming the path — and set
//! where the `web-search` seam finds it.

use std::sync::Arc;

use super::{Feature, StartContext, Wiring};
use crate::error::HostError;
use crate::lifecycle::Lifecycle;
use crate::search::SearchService;

/// See the module docs.
pub(crate) struct WebSearch;

impl Feature for WebSearch {
    fn attach(
        &self,
        start: &StartContext<'_>,
        _wiring: &Wiring,
        lifecycle: &Lifecycle,
    ) -> Result<(), HostError> {
        if let Some(service) = SearchService::open(&start.config.web_search, start.workdir)? {
            tracing::info!(
                provider = service.provider(),
                "web search provider configured"
            );
            let _ = lifecycle.seams().search.set(Arc::new(service));
        }
        Ok(())
    }
}
