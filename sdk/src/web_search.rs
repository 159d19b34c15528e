//! The `web-search` seam (since contract 0.2.4): a query the host sends to
//! the search provider the operator configured (`[web_search]`), with the
//! provider's key, which the component never sees. The request goes
//! through the component's egress: the provider's host must be allowed by
//! its `egress` (or `network`) grant, else the search is refused with the
//! rule to add. Results are untrusted web content.

use crate::bindings::toolgate::plugin::web_search as raw;
pub use crate::bindings::toolgate::plugin::web_search::{
    SearchAnswer, SearchError, SearchHit, SearchOptions,
};

/// Search the web for `query`.
pub fn search(query: &str, options: &SearchOptions) -> Result<SearchAnswer, SearchError> {
    raw::search(query, options)
}
