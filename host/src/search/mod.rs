//! Web search: the providers behind the `web-search` seam.
//!
//! Why in the host: a provider's API key must never be readable by what the
//! host runs, and a component that made the request itself would hold it.
//! So the host keeps the key ([`SearchService::open`] reads `[web_search]
//! key_file`, a secret path hidden from every sandbox) and makes the
//! request — through the searching plugin's egress, like the component's
//! own `wasi:http` requests: `[egress] deny`, its `egress`/`network`
//! grant, the address classes, the audit record (see
//! [`crate::seams::search`]). This module is what does not depend on the
//! transport: each provider's documented request ([`SearchService::request`])
//! and response ([`SearchService::parse`]), and the domain rules applied to
//! the results whatever the provider did with them ([`filter`]).
//!
//! Providers: a SearXNG instance's JSON API, Brave Search, Tavily and Exa.
//! Limits, named here: [`MAX_QUERY_BYTES`], [`MAX_DOMAINS`] of each list,
//! [`MAX_RESULTS`] per search (default [`DEFAULT_RESULTS`]),
//! [`MAX_RESPONSE_BYTES`] of a provider's answer, and each result's title,
//! URL and snippet cut at [`MAX_TITLE_CHARS`], [`MAX_URL_BYTES`] and
//! [`MAX_SNIPPET_CHARS`].

pub mod config;

use std::time::Duration;

use serde_json::{Value, json};

pub use config::{SearchProviderKind, WebSearchConfig};

/// The longest `[web_search] timeout_ms`.
pub const MAX_TIMEOUT_MS: u64 = 30_000;
/// `[web_search] timeout_ms` when unset.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
/// Results one search returns at most.
pub const MAX_RESULTS: u32 = 20;
/// Results when the request does not say.
pub const DEFAULT_RESULTS: u32 = 10;
/// Bytes of a query.
pub const MAX_QUERY_BYTES: usize = 2_048;
/// Domains in `allowed-domains`, and in `blocked-domains`.
pub const MAX_DOMAINS: usize = 32;
/// Bytes of a provider's answer read at most; a longer one is an error.
pub const MAX_RESPONSE_BYTES: usize = 2 * 1024 * 1024;
/// A result's title, in characters.
pub const MAX_TITLE_CHARS: usize = 300;
/// A result's snippet, in characters.
pub const MAX_SNIPPET_CHARS: usize = 1_000;
/// A result's URL, in bytes (a longer one is dropped, not cut).
pub const MAX_URL_BYTES: usize = 2_048;

/// One result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hit {
    pub title: String,
    pub url: String,
    pub snippet: String,
}

/// What a search asks for.
#[derive(Clone, Debug, Default)]
pub struct Query {
    pub text: String,
    /// Only results from these domains (or their subdomains).
    pub allowed: Vec<String>,
    /// No results from these domains (or their subdomains).
    pub blocked: Vec<String>,
    /// At most this many results (0: the default).
    pub max: u32,
}

/// Why a search gave no results (the WIT `search-error`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SearchError {
    /// No provider is configured, or it cannot be used.
    #[error("{0}")]
    NotConfigured(String),
    /// Egress refused the provider's host (the message names the rule).
    #[error("{0}")]
    Refused(String),
    /// The provider is limiting the rate: retry after so many seconds, if
    /// it said.
    #[error("the search provider is limiting the rate{}", .0.map(|s| format!("; retry after {s} s")).unwrap_or_default())]
    RateLimited(Option<u32>),
    /// The provider failed, or answered something that is not its format.
    #[error("{0}")]
    Provider(String),
    /// The request is malformed.
    #[error("{0}")]
    InvalidRequest(String),
}

/// Why `[web_search]` cannot be used at start.
#[derive(Debug, thiserror::Error)]
pub enum SearchStartError {
    #[error("`[web_search] key_file` {path}: {source}")]
    Key {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`[web_search] key_file` {path} is empty: it must hold the provider's API key")]
    EmptyKey { path: String },
    #[error("`[web_search]`: {0}")]
    Config(String),
}

impl From<SearchStartError> for crate::error::HostError {
    fn from(e: SearchStartError) -> Self {
        crate::error::HostError::Feature(Box::new(e))
    }
}

/// A provider's base URL: scheme, authority and path prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BaseUrl {
    /// `https://host[:port]` or `http://…`, without a trailing slash.
    origin: String,
    /// The path prefix, without a trailing slash (`""` or `/searx`).
    path: String,
}

impl BaseUrl {
    /// `http(s)://host[:port][/path]`: no user, query or fragment.
    pub fn parse(text: &str) -> Result<BaseUrl, String> {
        let uri: http::Uri = text
            .parse()
            .map_err(|e| format!("{text:?} is not a URL ({e})"))?;
        match uri.scheme_str() {
            Some("http" | "https") => {}
            _ => return Err(format!("{text:?}: expected an http:// or https:// URL")),
        }
        let Some(authority) = uri.authority() else {
            return Err(format!("{text:?}: no host"));
        };
        if authority.as_str().contains('@') {
            return Err(format!(
                "{text:?}: a user or password in the URL is not taken (the key goes in key_file)"
            ));
        }
        if uri.query().is_some() || text.contains('#') {
            return Err(format!("{text:?}: no query or fragment, the base URL only"));
        }
        Ok(BaseUrl {
            origin: format!("{}://{}", uri.scheme_str().unwrap_or("https"), authority),
            path: uri.path().trim_end_matches('/').to_string(),
        })
    }

    pub fn at(&self, path: &str) -> String {
        format!("{}{}{path}", self.origin, self.path)
    }
}

/// A request to a provider, as the host sends it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderRequest {
    pub method: &'static str,
    pub url: String,
    /// Headers besides `Host` (the key's among them: never shown).
    pub headers: Vec<(&'static str, String)>,
    pub body: Option<Vec<u8>>,
}

/// The configured provider, with its key.
pub struct SearchService {
    kind: SearchProviderKind,
    base: BaseUrl,
    key: Option<String>,
    timeout: Duration,
}

impl std::fmt::Debug for SearchService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("SearchService")
            .field("kind", &self.kind)
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl SearchService {
    /// The service `config` describes (`None`: no provider configured),
    /// its key read now (a relative `key_file` is relative to the host's
    /// working directory `workdir`).
    pub fn open(
        config: &WebSearchConfig,
        workdir: &std::path::Path,
    ) -> Result<Option<SearchService>, SearchStartError> {
        let Some(kind) = config.provider else {
            return Ok(None);
        };
        let url = config
            .url
            .as_deref()
            .or(kind.default_url())
            .ok_or_else(|| {
                SearchStartError::Config(format!("the {} provider needs `url`", kind.name()))
            })?;
        let base = BaseUrl::parse(url).map_err(SearchStartError::Config)?;
        let key = match &config.key_file {
            Some(path) => {
                let path = workdir.join(path);
                let shown = path.display().to_string();
                let text =
                    std::fs::read_to_string(&path).map_err(|source| SearchStartError::Key {
                        path: shown.clone(),
                        source,
                    })?;
                let key = text.trim().to_string();
                if key.is_empty() {
                    return Err(SearchStartError::EmptyKey { path: shown });
                }
                Some(key)
            }
            None if kind.needs_key() => {
                return Err(SearchStartError::Config(format!(
                    "the {} provider needs `key_file`",
                    kind.name()
                )));
            }
            None => None,
        };
        let ms = config
            .timeout_ms
            .unwrap_or(DEFAULT_TIMEOUT_MS)
            .clamp(1, MAX_TIMEOUT_MS);
        Ok(Some(SearchService {
            kind,
            base,
            key,
            timeout: Duration::from_millis(ms),
        }))
    }

    /// The provider's name.
    pub fn provider(&self) -> &'static str {
        self.kind.name()
    }

    /// How long one search may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The request for `q` (checked first: see [`check`]).
    pub fn request(&self, q: &Query) -> ProviderRequest {
        let count = wanted(q.max);
        let enc = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        let key = self.key.clone().unwrap_or_default();
        match self.kind {
            SearchProviderKind::Searxng => ProviderRequest {
                method: "GET",
                url: self
                    .base
                    .at(&format!("/search?q={}&format=json", enc(&q.text))),
                headers: vec![("accept", "application/json".into())],
                body: None,
            },
            SearchProviderKind::Brave => ProviderRequest {
                method: "GET",
                url: self.base.at(&format!(
                    "/res/v1/web/search?q={}&count={count}",
                    enc(&q.text)
                )),
                headers: vec![
                    ("accept", "application/json".into()),
                    ("x-subscription-token", key),
                ],
                body: None,
            },
            SearchProviderKind::Tavily => ProviderRequest {
                method: "POST",
                url: self.base.at("/search"),
                headers: vec![
                    ("content-type", "application/json".into()),
                    ("authorization", format!("Bearer {key}")),
                ],
                body: Some(
                    json!({
                        "query": q.text,
                        "max_results": count,
                        "include_domains": q.allowed,
                        "exclude_domains": q.blocked,
                    })
                    .to_string()
                    .into_bytes(),
                ),
            },
            SearchProviderKind::Exa => ProviderRequest {
                method: "POST",
                url: self.base.at("/search"),
                headers: vec![
                    ("content-type", "application/json".into()),
                    ("x-api-key", key),
                ],
                body: Some({
                    let mut body = json!({
                        "query": q.text,
                        "numResults": count,
                        "contents": { "text": { "maxCharacters": MAX_SNIPPET_CHARS } },
                    });
                    if !q.allowed.is_empty() {
                        body["includeDomains"] = json!(q.allowed);
                    }
                    if !q.blocked.is_empty() {
                        body["excludeDomains"] = json!(q.blocked);
                    }
                    body.to_string().into_bytes()
                }),
            },
        }
    }

    /// The provider's answer: `status`, its `Retry-After` header, `body`.
    pub fn parse(
        &self,
        status: u16,
        retry_after: Option<&str>,
        body: &[u8],
    ) -> Result<Vec<Hit>, SearchError> {
        let name = self.kind.name();
        if status == 429 {
            return Err(SearchError::RateLimited(
                retry_after.and_then(|v| v.trim().parse::<u32>().ok()),
            ));
        }
        if !(200..300).contains(&status) {
            let said = String::from_utf8_lossy(&body[..body.len().min(300)])
                .chars()
                .filter(|c| !c.is_control())
                .collect::<String>();
            let hint = match status {
                401 | 403 => " (is the key in `[web_search] key_file` valid?)",
                _ => "",
            };
            return Err(SearchError::Provider(format!(
                "the {name} search provider answered HTTP {status}{hint}: {said}"
            )));
        }
        let v: Value = serde_json::from_slice(body).map_err(|e| {
            SearchError::Provider(format!(
                "the {name} search provider's answer is not JSON ({e})"
            ))
        })?;
        let (list, title, url, snippet): (&Value, &str, &str, &[&str]) = match self.kind {
            SearchProviderKind::Searxng => (&v["results"], "title", "url", &["content"]),
            SearchProviderKind::Brave => (&v["web"]["results"], "title", "url", &["description"]),
            SearchProviderKind::Tavily => (&v["results"], "title", "url", &["content"]),
            SearchProviderKind::Exa => (
                &v["results"],
                "title",
                "url",
                &["highlights", "summary", "text"],
            ),
        };
        let list = match list {
            Value::Array(items) => items,
            // Brave leaves `web` out when nothing matched.
            Value::Null if self.kind == SearchProviderKind::Brave && v.is_object() => {
                return Ok(Vec::new());
            }
            _ => {
                return Err(SearchError::Provider(format!(
                    "the {name} search provider's answer has no list of results where its format puts one"
                )));
            }
        };
        let text = |item: &Value, key: &str| -> Option<String> {
            match &item[key] {
                Value::String(s) => Some(s.clone()),
                // Exa's highlights are a list of passages.
                Value::Array(parts) => parts.first().and_then(Value::as_str).map(str::to_string),
                _ => None,
            }
        };
        Ok(list
            .iter()
            .filter_map(|item| {
                let url = text(item, url)?;
                if url.len() > MAX_URL_BYTES
                    || !(url.starts_with("https://") || url.starts_with("http://"))
                {
                    return None;
                }
                Some(Hit {
                    title: clean(&text(item, title).unwrap_or_default(), MAX_TITLE_CHARS),
                    snippet: clean(
                        &snippet
                            .iter()
                            .find_map(|k| text(item, k))
                            .unwrap_or_default(),
                        MAX_SNIPPET_CHARS,
                    ),
                    url,
                })
            })
            .collect())
    }
}

/// Results asked of the provider for `max`.
fn wanted(max: u32) -> u32 {
    match max {
        0 => DEFAULT_RESULTS,
        n => n.min(MAX_RESULTS),
    }
}

/// `text` on one line, without control characters, at most `max` chars.
fn clean(text: &str, max: usize) -> String {
    let one_line: String = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    match one_line.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &one_line[..at]),
        None => one_line,
    }
}

/// A domain as a rule: lower case, no scheme, no leading dot or `*.`, no
/// path. `None`: not a domain.
fn domain(text: &str) -> Option<String> {
    let t = text.trim().to_ascii_lowercase();
    let t = t
        .strip_prefix("https://")
        .or_else(|| t.strip_prefix("http://"))
        .unwrap_or(&t);
    let t = t.split('/').next().unwrap_or("");
    let t = t.trim_start_matches("*.").trim_start_matches('.');
    (!t.is_empty()
        && t.len() <= 253
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.'))
    .then(|| t.to_string())
}

/// The query checked and its domains in rule form.
pub fn check(mut q: Query) -> Result<Query, SearchError> {
    q.text = q.text.trim().to_string();
    if q.text.is_empty() {
        return Err(SearchError::InvalidRequest("the query is empty".into()));
    }
    if q.text.len() > MAX_QUERY_BYTES {
        return Err(SearchError::InvalidRequest(format!(
            "the query is {} bytes, more than a search takes ({MAX_QUERY_BYTES})",
            q.text.len()
        )));
    }
    for (name, list) in [
        ("allowed_domains", &mut q.allowed),
        ("blocked_domains", &mut q.blocked),
    ] {
        if list.len() > MAX_DOMAINS {
            return Err(SearchError::InvalidRequest(format!(
                "{} {name}, more than a search takes ({MAX_DOMAINS})",
                list.len()
            )));
        }
        let mut ruled = Vec::with_capacity(list.len());
        for d in list.iter() {
            ruled.push(domain(d).ok_or_else(|| {
                SearchError::InvalidRequest(format!(
                    "{name}: {d:?} is not a domain (write it as `example.com`)"
                ))
            })?);
        }
        *list = ruled;
    }
    Ok(q)
}

/// Whether `url`'s host is `domain` or under it.
fn under(url: &str, domain: &str) -> bool {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .unwrap_or(url);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    let host = host
        .split(':')
        .next()
        .unwrap_or("")
        .trim_end_matches('.')
        .to_ascii_lowercase();
    host == domain || host.ends_with(&format!(".{domain}"))
}

/// The hits the domain rules keep, at most `max` (the default when 0), and
/// how many the rules removed: applied to every provider's results, whether
/// or not it was asked to filter.
pub fn filter(hits: Vec<Hit>, q: &Query) -> (Vec<Hit>, u32) {
    let before = hits.len();
    let mut kept: Vec<Hit> = hits
        .into_iter()
        .filter(|h| q.allowed.is_empty() || q.allowed.iter().any(|d| under(&h.url, d)))
        .filter(|h| !q.blocked.iter().any(|d| under(&h.url, d)))
        .collect();
    let removed = (before - kept.len()) as u32;
    kept.truncate(wanted(q.max) as usize);
    (kept, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(kind: SearchProviderKind) -> SearchService {
        SearchService {
            kind,
            base: BaseUrl::parse("http://127.0.0.1:9/base/").unwrap(),
            key: Some("k3y".into()),
            timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn each_provider_is_asked_as_its_documentation_says() {
        let q = check(Query {
            text: " rust & wasm ".into(),
            allowed: vec!["https://Docs.rs/".into()],
            blocked: vec!["*.spam.example".into()],
            max: 50,
        })
        .unwrap();
        assert_eq!(q.allowed, ["docs.rs"]);
        assert_eq!(q.blocked, ["spam.example"]);
        let r = service(SearchProviderKind::Searxng).request(&q);
        assert_eq!(
            (r.method, r.url.as_str()),
            (
                "GET",
                "http://127.0.0.1:9/base/search?q=rust+%26+wasm&format=json"
            )
        );
        let r = service(SearchProviderKind::Brave).request(&q);
        assert!(
            r.url
                .ends_with("/res/v1/web/search?q=rust+%26+wasm&count=20"),
            "{}",
            r.url
        );
        assert!(r.headers.contains(&("x-subscription-token", "k3y".into())));
        let r = service(SearchProviderKind::Tavily).request(&q);
        let body: Value = serde_json::from_slice(r.body.as_deref().unwrap()).unwrap();
        assert_eq!(body["include_domains"], json!(["docs.rs"]));
        assert!(r.headers.contains(&("authorization", "Bearer k3y".into())));
        let r = service(SearchProviderKind::Exa).request(&q);
        let body: Value = serde_json::from_slice(r.body.as_deref().unwrap()).unwrap();
        assert_eq!(body["numResults"], 20);
        assert_eq!(body["excludeDomains"], json!(["spam.example"]));
        assert!(r.headers.contains(&("x-api-key", "k3y".into())));
        assert!(!format!("{:?}", service(SearchProviderKind::Exa)).contains("k3y"));
    }

    #[test]
    fn answers_errors_and_rate_limits_are_read_as_said() {
        let s = service(SearchProviderKind::Brave);
        let hits = s
            .parse(
                200,
                None,
                br#"{"web":{"results":[{"title":"A\ntitle","url":"https://a.example/x","description":"one"},{"title":"no url"},{"title":"js","url":"javascript:alert(1)"}]}}"#,
            )
            .unwrap();
        assert_eq!(
            hits,
            [Hit {
                title: "A title".into(),
                url: "https://a.example/x".into(),
                snippet: "one".into()
            }]
        );
        assert_eq!(s.parse(200, None, br#"{"query":{}}"#).unwrap(), []);
        assert_eq!(
            s.parse(429, Some("7"), b"slow down"),
            Err(SearchError::RateLimited(Some(7)))
        );
        let e = s.parse(401, None, b"bad key").unwrap_err().to_string();
        assert!(e.contains("401") && e.contains("key_file"), "{e}");
        let e = s.parse(200, None, b"<html>").unwrap_err().to_string();
        assert!(e.contains("not JSON"), "{e}");
        let exa = service(SearchProviderKind::Exa)
            .parse(
                200,
                None,
                br#"{"results":[{"title":"t","url":"https://e.example","highlights":["best part"],"text":"all"}]}"#,
            )
            .unwrap();
        assert_eq!(exa[0].snippet, "best part");
    }

    #[test]
    fn domain_rules_hold_on_the_results() {
        let hit = |u: &str| Hit {
            title: String::new(),
            url: u.into(),
            snippet: String::new(),
        };
        let q = check(Query {
            text: "x".into(),
            allowed: vec!["docs.rs".into()],
            blocked: vec!["bad.docs.rs".into()],
            max: 2,
        })
        .unwrap();
        let (kept, removed) = filter(
            vec![
                hit("https://docs.rs/a"),
                hit("https://evil-docs.rs/"),
                hit("https://docs.rs.evil.example/"),
                hit("https://bad.docs.rs/x"),
                hit("https://user@www.docs.rs:443/b"),
                hit("https://docs.rs/c"),
            ],
            &q,
        );
        assert_eq!(removed, 3);
        assert_eq!(
            kept.iter().map(|h| h.url.as_str()).collect::<Vec<_>>(),
            ["https://docs.rs/a", "https://user@www.docs.rs:443/b"]
        );
        assert!(
            check(Query {
                text: "  ".into(),
                ..Query::default()
            })
            .is_err()
        );
        assert!(
            check(Query {
                text: "x".into(),
                allowed: vec!["not a domain".into()],
                ..Query::default()
            })
            .is_err()
        );
    }
}
