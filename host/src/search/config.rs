//! `[web_search]` in the configuration: the provider the `web-search`
//! seam sends queries to.

use serde::{Deserialize, Serialize};
use toolgate_schema::derive::Schema;

use crate::config::path::Secret;

/// `[web_search]`: where the `web-search` seam sends a query. The
/// provider's host must also be allowed by the searching plugin's `egress`
/// (or `network`) grant: the request goes through the same egress rules as
/// the component's own.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct WebSearchConfig {
    /// `"searxng"` (a self-hosted instance's JSON API; `url` required),
    /// `"brave"`, `"tavily"` or `"exa"` (their HTTP APIs; `key_file`
    /// required). Unset: no provider, and every search says so.
    pub provider: Option<SearchProviderKind>,
    /// The provider's base URL, `http(s)://host[:port][/path]`. Default:
    /// the provider's own (`https://api.search.brave.com`,
    /// `https://api.tavily.com`, `https://api.exa.ai`).
    pub url: Option<String>,
    /// The file holding the provider's API key (one line). A secret: read
    /// by the host only, hidden from everything it runs.
    pub key_file: Option<Secret>,
    /// How long one search may take, in milliseconds (default 10000, at
    /// most 30000).
    pub timeout_ms: Option<u64>,
}

/// `[web_search] provider`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, Schema)]
#[schema(crate = "toolgate_schema::derive")]
#[serde(rename_all = "lowercase")]
pub enum SearchProviderKind {
    /// A SearXNG instance (`GET /search?format=json`).
    Searxng,
    /// Brave Search (`GET /res/v1/web/search`, `X-Subscription-Token`).
    Brave,
    /// Tavily (`POST /search`, a bearer key).
    Tavily,
    /// Exa (`POST /search`, `x-api-key`).
    Exa,
}

impl SearchProviderKind {
    /// Its name in messages and results.
    pub fn name(self) -> &'static str {
        match self {
            SearchProviderKind::Searxng => "searxng",
            SearchProviderKind::Brave => "brave",
            SearchProviderKind::Tavily => "tavily",
            SearchProviderKind::Exa => "exa",
        }
    }

    /// Its default base URL, if it has one.
    pub fn default_url(self) -> Option<&'static str> {
        match self {
            SearchProviderKind::Searxng => None,
            SearchProviderKind::Brave => Some("https://api.search.brave.com"),
            SearchProviderKind::Tavily => Some("https://api.tavily.com"),
            SearchProviderKind::Exa => Some("https://api.exa.ai"),
        }
    }

    /// Whether it needs an API key.
    pub fn needs_key(self) -> bool {
        self != SearchProviderKind::Searxng
    }
}

impl WebSearchConfig {
    /// What the schema cannot say, each problem with its path.
    pub fn check(&self, problems: &mut Vec<String>) {
        let Some(kind) = self.provider else {
            if self.url.is_some() || self.key_file.is_some() {
                problems.push(
                    "/web_search/provider: missing; `url` and `key_file` need a provider (\"searxng\", \"brave\", \"tavily\" or \"exa\")"
                        .into(),
                );
            }
            return;
        };
        match (&self.url, kind.default_url()) {
            (None, None) => problems.push(format!(
                "/web_search/url: missing; the {} provider has no default URL (your instance's, e.g. \"http://127.0.0.1:8888\")",
                kind.name()
            )),
            (Some(url), _) => {
                if let Err(e) = super::BaseUrl::parse(url) {
                    problems.push(format!("/web_search/url: {e}"));
                }
            }
            _ => {}
        }
        if kind.needs_key() && self.key_file.is_none() {
            problems.push(format!(
                "/web_search/key_file: missing; the {} provider needs an API key (a file holding it, one line)",
                kind.name()
            ));
        }
        if let Some(ms) = self.timeout_ms
            && !(1..=super::MAX_TIMEOUT_MS).contains(&ms)
        {
            problems.push(format!(
                "/web_search/timeout_ms: expected 1 to {}, got {ms}",
                super::MAX_TIMEOUT_MS
            ));
        }
    }
}
