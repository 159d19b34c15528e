//! The `web-search` seam: a query the host sends to the provider the
//! operator configured (`[web_search]`, see [`crate::search`]).
//!
//! The host makes the request — the provider's key never enters the
//! component — through the *component's* egress ([`crate::seams::http`]'s
//! host requests): the provider's host must be allowed by the plugin's
//! `egress` (or `network`) grant, `[egress] deny` and the address classes
//! apply, and the connection is recorded against the call being served, as
//! the component's own `wasi:http` request would be. So, like `wasi:http`,
//! the seam needs no grant of its own to be linked: a component importing
//! it loads, and each search is decided when it is made (refused, naming
//! the `egress` rule to add). The domain rules are applied to the results
//! by the host, whatever the provider did with them.
//!
//! The seam as a unit (see [`crate::seams`]): linked for every component
//! ([`seam`]), host-wide state the configured [`SearchService`] (in
//! [`super::HostSeams::search`], set at start), the 0.2 `web-search`
//! interface implemented on [`SearchView`].

use std::sync::{Arc, OnceLock};

use wasmtime::component::HasData;

use super::http::{HostRequest, HostRequestError, host_request};
use super::{Seam, SeamCtx, SeamHost};
use crate::bindings::v0_2::toolgate::plugin::web_search as wit;
use crate::egress::component::ComponentEgress;
use crate::grants::Capability;
use crate::search::{MAX_RESPONSE_BYTES, Query, SearchError, SearchService, check, filter};

/// The `web-search` seam: decided per request by the plugin's egress.
pub fn seam<T: SeamHost>() -> Seam<T> {
    Seam {
        interface: "web-search",
        // What an update newly importing it reaches for: the network.
        capability: Capability::Network,
        sync: false,
        // Like `wasi:http`: linked for every component, each request
        // decided by its egress when it is made.
        granted: |_| Ok(()),
        link: |linker| {
            wit::add_to_linker::<T, SearchView<'static>>(linker, |t| SearchView::new(t.seams()))
        },
    }
}

/// What the `web-search` interface sees of a store: the service, and the
/// instance's egress (attributed to the call being served).
pub struct SearchView<'a> {
    service: Option<&'a Arc<SearchService>>,
    egress: &'a Arc<ComponentEgress>,
}

impl<'a> SearchView<'a> {
    pub fn new(ctx: SeamCtx<'a>) -> Self {
        SearchView {
            service: ctx.shared.search.get(),
            egress: ctx.egress,
        }
    }
}

impl HasData for SearchView<'static> {
    type Data<'a> = SearchView<'a>;
}

/// Where the service is set at start (`[web_search]`), once.
pub type SearchSlot = Arc<OnceLock<Arc<SearchService>>>;

impl From<SearchError> for wit::SearchError {
    fn from(e: SearchError) -> Self {
        match e {
            SearchError::NotConfigured(m) => wit::SearchError::NotConfigured(m),
            SearchError::Refused(m) => wit::SearchError::Refused(m),
            SearchError::RateLimited(s) => wit::SearchError::RateLimited(s),
            SearchError::Provider(m) => wit::SearchError::Provider(m),
            SearchError::InvalidRequest(m) => wit::SearchError::InvalidRequest(m),
        }
    }
}

/// Runs one search: checked, sent through `egress`, parsed, filtered.
pub async fn search(
    service: Option<&SearchService>,
    egress: Arc<ComponentEgress>,
    q: Query,
) -> Result<(Vec<crate::search::Hit>, u32), SearchError> {
    let service = service.ok_or_else(|| {
        SearchError::NotConfigured(
            "no web search provider is configured: set `[web_search] provider` (and `url`, `key_file`) in toolgate.toml, and allow its host in this plugin's `egress` grant".into(),
        )
    })?;
    let q = check(q)?;
    let r = service.request(&q);
    let answer = host_request(
        egress,
        HostRequest {
            method: r.method,
            url: &r.url,
            headers: &r.headers,
            body: r.body,
            timeout: service.timeout(),
            max_body: MAX_RESPONSE_BYTES,
        },
    )
    .await
    .map_err(|e| match e {
        HostRequestError::Refused(m) => SearchError::Refused(m),
        HostRequestError::Failed(m) => SearchError::Provider(format!(
            "the {} search provider could not be reached: {m}",
            service.provider()
        )),
    })?;
    let hits = service.parse(answer.status, answer.retry_after.as_deref(), &answer.body)?;
    Ok(filter(hits, &q))
}

impl wit::Host for SearchView<'_> {
    async fn search(
        &mut self,
        query: String,
        options: wit::SearchOptions,
    ) -> wasmtime::Result<Result<wit::SearchAnswer, wit::SearchError>> {
        let q = Query {
            text: query,
            allowed: options.allowed_domains,
            blocked: options.blocked_domains,
            max: options.max_results,
        };
        let provider = self.service.map_or("", |s| s.provider()).to_string();
        let found = search(self.service.map(|s| &**s), self.egress.clone(), q).await;
        Ok(found
            .map(|(hits, filtered)| wit::SearchAnswer {
                provider,
                hits: hits
                    .into_iter()
                    .map(|h| wit::SearchHit {
                        title: h.title,
                        url: h.url,
                        snippet: h.snippet,
                    })
                    .collect(),
                filtered,
            })
            .map_err(Into::into))
    }
}
