//! `web_fetch`: a web page (HTTP or HTTPS), as Markdown.
//!
//! Requests go out through `wasi:http`; the host sends each one only where
//! this plugin's egress allows (`egress = [...]` or `network = [...]`
//! under its grants, `[egress] deny` and the refused address classes
//! first; nothing by default: the tool loads, and every fetch is refused
//! with the host's message naming the rule to add).
//! Redirects are followed here, at most [`MAX_REDIRECTS`], each a new
//! request that the host checks again — a page on a granted host cannot
//! send the fetch to a host that is not. HTML is converted to Markdown
//! (`htmd`, html5ever underneath); other text is returned as it is;
//! anything else is refused. The body is read up to `max_bytes`; the text
//! returned is cut at [`MAX_TEXT_BYTES`].

use std::time::Duration;

use serde::{Deserialize, Serialize};
use toolgate_sdk::{Annotations, Call, Content, ContentBlock, Schema, Tool, ToolError};
use wasi::http::outgoing_handler;
use wasi::http::types::{
    ErrorCode, Fields, IncomingResponse, Method, OutgoingRequest, RequestOptions, Scheme,
    http_error_code,
};
use wasi::io::streams::StreamError;

/// Bytes of body read when the call gives no `max_bytes`.
pub const DEFAULT_MAX_BYTES: u64 = 2 * 1024 * 1024;
/// The largest `max_bytes` a call may ask for.
pub const MAX_BYTES: u64 = 10 * 1024 * 1024;
/// Bytes of text returned (after conversion); the rest is cut, with a note.
pub const MAX_TEXT_BYTES: usize = 100 * 1024;
/// Redirects followed at most.
pub const MAX_REDIRECTS: usize = 5;
/// Connect, first-byte and between-bytes timeout of each request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);
/// The tool's time budget (all requests and redirects together).
pub const TIMEOUT_MS: u32 = 60_000;

/// What to return.
#[derive(Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, Schema)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// HTML converted to Markdown; other text as it is.
    #[default]
    Markdown,
    /// The body as it came (text only).
    Raw,
}

/// Fetch a URL (http or https) and return its content: HTML as Markdown,
/// other text as it is. Redirects are followed (at most 5). Only the hosts
/// the operator granted are reachable. Reads at most `max_bytes` of the
/// body (default 2 MiB, at most 10 MiB) and returns at most 100 KiB of text.
#[derive(Deserialize, Schema)]
pub struct WebFetch {
    /// The URL, e.g. `https://docs.rs/serde`.
    url: String,
    /// Most bytes of the body to read. Default: 2097152; at most 10485760.
    max_bytes: Option<u64>,
    /// `markdown` (default) or `raw`.
    format: Option<Format>,
}

/// What was fetched.
#[derive(Serialize, Deserialize, Schema)]
pub struct Page {
    /// The URL finally fetched (after redirects).
    url: String,
    /// The HTTP status.
    status: u16,
    /// The response's content type.
    content_type: String,
    /// The content (Markdown for HTML).
    text: String,
    /// The text was cut at 100 KiB.
    truncated: bool,
}

/// A response, read.
struct Fetched {
    status: u16,
    location: Option<String>,
    content_type: String,
    body: Vec<u8>,
}

fn header(resp: &IncomingResponse, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .into_iter()
        .next()
        .map(|v| String::from_utf8_lossy(&v).into_owned())
}

fn failed(code: &ErrorCode, url: &url::Url, plugin: &str) -> ToolError {
    match code {
        // The host's egress refused it: its message names the rule to add.
        ErrorCode::InternalError(Some(why)) if why.starts_with("toolgate egress:") => {
            ToolError::permission_denied(format!("fetching `{url}`: {why}"))
        }
        ErrorCode::HttpRequestDenied => {
            let host = url.host_str().unwrap_or("");
            let port = url.port_or_known_default().unwrap_or(443);
            let shown = if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            };
            ToolError::permission_denied(format!(
                "the host refused to connect to `{shown}`: it is not in the egress grant of plugin `{plugin}`. The operator can allow it by adding \"{shown}\" to `egress = [...]` under [plugins.{plugin}.grants] in toolgate.toml"
            ))
        }
        ErrorCode::ConnectionTimeout | ErrorCode::ConnectionReadTimeout => ToolError::new(
            "TIMEOUT",
            format!("`{url}` did not answer in time ({code:?})"),
        ),
        ErrorCode::DnsError(_) | ErrorCode::DestinationNotFound => {
            ToolError::not_found(format!("`{url}`: the host name does not resolve"))
        }
        other => ToolError::new(
            "FETCH_FAILED",
            format!("fetching `{url}` failed: {other:?}"),
        ),
    }
}

/// One GET of `url`, its body read up to `max` bytes.
fn get(url: &url::Url, max: u64, plugin: &str, call: &Call) -> Result<Fetched, ToolError> {
    let headers = Fields::new();
    let _ = headers.append("user-agent", b"toolgate-web-fetch/0.1");
    let _ = headers.append(
        "accept",
        b"text/html, text/*;q=0.9, application/json;q=0.8, */*;q=0.1",
    );
    let req = OutgoingRequest::new(headers);
    let _ = req.set_method(&Method::Get);
    let scheme = if url.scheme() == "http" {
        Scheme::Http
    } else {
        Scheme::Https
    };
    let _ = req.set_scheme(Some(&scheme));
    let authority = match url.port() {
        Some(p) => format!("{}:{p}", url.host_str().unwrap_or("")),
        None => url.host_str().unwrap_or("").to_string(),
    };
    req.set_authority(Some(&authority))
        .map_err(|_| ToolError::invalid_input(format!("`{url}`: the host is not valid")))?;
    let path = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    };
    req.set_path_with_query(Some(&path))
        .map_err(|_| ToolError::invalid_input(format!("`{url}`: the path is not valid")))?;
    let options = RequestOptions::new();
    let ns = REQUEST_TIMEOUT.as_nanos() as u64;
    let _ = options.set_connect_timeout(Some(ns));
    let _ = options.set_first_byte_timeout(Some(ns));
    let _ = options.set_between_bytes_timeout(Some(ns));
    let future =
        outgoing_handler::handle(req, Some(options)).map_err(|e| failed(&e, url, plugin))?;
    future.subscribe().block();
    let resp = match future.get() {
        Some(Ok(Ok(resp))) => resp,
        Some(Ok(Err(e))) => return Err(failed(&e, url, plugin)),
        _ => {
            return Err(ToolError::new(
                "FETCH_FAILED",
                format!("fetching `{url}` failed"),
            ));
        }
    };
    let status = resp.status();
    let location = header(&resp, "location");
    let content_type = header(&resp, "content-type").unwrap_or_default();
    if let Some(len) = header(&resp, "content-length").and_then(|l| l.trim().parse::<u64>().ok())
        && len > max
        && !(300..400).contains(&status)
    {
        return Err(too_large(url, max));
    }
    let mut body = Vec::new();
    if !(300..400).contains(&status) {
        let incoming = resp
            .consume()
            .map_err(|_| ToolError::new("FETCH_FAILED", "the response body cannot be read"))?;
        {
            let stream = incoming
                .stream()
                .map_err(|_| ToolError::new("FETCH_FAILED", "the response body cannot be read"))?;
            loop {
                match stream.blocking_read(64 * 1024) {
                    Ok(chunk) => body.extend_from_slice(&chunk),
                    // The end of the body.
                    Err(StreamError::Closed) => break,
                    // A body cut short (a peer that announced more than it
                    // sent, a reset, a stall past the between-bytes
                    // timeout) is a failure, never a shorter page.
                    Err(StreamError::LastOperationFailed(e)) => {
                        return Err(match http_error_code(&e) {
                            Some(code) => failed(&code, url, plugin),
                            None => ToolError::new(
                                "FETCH_FAILED",
                                format!(
                                    "reading the body of `{url}` failed after {} bytes: {}",
                                    body.len(),
                                    e.to_debug_string()
                                ),
                            ),
                        });
                    }
                }
                if body.len() as u64 > max {
                    return Err(too_large(url, max));
                }
                if call.is_cancelled() {
                    return Err(ToolError::new("CANCELLED", "the call was cancelled"));
                }
            }
        }
        drop(incoming);
    }
    Ok(Fetched {
        status,
        location,
        content_type,
        body,
    })
}

fn too_large(url: &url::Url, max: u64) -> ToolError {
    ToolError::new(
        "TOO_LARGE",
        format!(
            "the body of `{url}` is larger than max_bytes ({max}); give a larger max_bytes (at most {MAX_BYTES}) or fetch a smaller page"
        ),
    )
}

fn is_text(content_type: &str) -> bool {
    let ct = content_type.to_ascii_lowercase();
    ct.is_empty()
        || ct.starts_with("text/")
        || ct.contains("json")
        || ct.contains("xml")
        || ct.contains("javascript")
}

impl Tool for WebFetch {
    const NAME: &'static str = "web_fetch";
    type Output = Page;

    fn execute(self, call: &Call) -> Result<Page, ToolError> {
        let max = self.max_bytes.unwrap_or(DEFAULT_MAX_BYTES);
        if max == 0 || max > MAX_BYTES {
            return Err(ToolError::invalid_input(format!(
                "`max_bytes` must be 1 to {MAX_BYTES} (10 MiB); it is {max}"
            )));
        }
        let mut url = url::Url::parse(&self.url)
            .map_err(|e| ToolError::invalid_input(format!("`{}` is not a URL: {e}", self.url)))?;
        let plugin = call.provider().to_string();
        let mut hops = 0;
        let fetched = loop {
            if !matches!(url.scheme(), "http" | "https") {
                return Err(ToolError::invalid_input(format!(
                    "`{url}`: only http and https URLs can be fetched"
                )));
            }
            let f = get(&url, max, &plugin, call)?;
            if !(300..400).contains(&f.status) || f.location.is_none() {
                break f;
            }
            hops += 1;
            if hops > MAX_REDIRECTS {
                return Err(ToolError::new(
                    "TOO_MANY_REDIRECTS",
                    format!("`{}` redirected more than {MAX_REDIRECTS} times", self.url),
                ));
            }
            let to = f.location.unwrap_or_default();
            url = url.join(&to).map_err(|e| {
                ToolError::new(
                    "FETCH_FAILED",
                    format!("`{url}` redirected to `{to}`, which is not a URL: {e}"),
                )
            })?;
        };
        if !is_text(&fetched.content_type) {
            return Err(ToolError::new(
                "UNSUPPORTED_TYPE",
                format!(
                    "`{url}` is `{}`, not text; web_fetch returns HTML and other text only",
                    fetched.content_type
                ),
            ));
        }
        let body = String::from_utf8_lossy(&fetched.body).into_owned();
        let html = fetched.content_type.to_ascii_lowercase().contains("html");
        let text = if html && self.format.unwrap_or_default() == Format::Markdown {
            htmd::HtmlToMarkdown::builder()
                .skip_tags(vec!["script", "style", "noscript", "svg", "head"])
                .build()
                .convert(&body)
                .map_err(|e| {
                    ToolError::new(
                        "CONVERSION_FAILED",
                        format!("the HTML could not be converted: {e}"),
                    )
                })?
        } else {
            body
        };
        if !(200..300).contains(&fetched.status) {
            let (shown, _) = cut(&text, 2000);
            return Err(ToolError::new(
                "HTTP_STATUS",
                format!("`{url}` answered {}:\n{shown}", fetched.status),
            )
            .with_details(serde_json::json!({"status": fetched.status, "url": url.as_str()})));
        }
        let (text, truncated) = cut(&text, MAX_TEXT_BYTES);
        Ok(Page {
            url: url.to_string(),
            status: fetched.status,
            content_type: fetched.content_type,
            text,
            truncated,
        })
    }

    fn render(p: Page) -> Vec<ContentBlock> {
        let mut s = p.text;
        if p.truncated {
            s.push_str(&format!("\n… (cut at {MAX_TEXT_BYTES} bytes of text)"));
        }
        vec![Content::text(s)]
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(Page::schema())
    }

    fn timeout_ms() -> Option<u32> {
        Some(TIMEOUT_MS)
    }

    fn annotations() -> Annotations {
        Annotations::READ_ONLY | Annotations::OPEN_WORLD
    }

    fn is_concurrency_safe(&self) -> bool {
        true
    }
}

/// `s` cut to `max` bytes at a character boundary.
fn cut(s: &str, max: usize) -> (String, bool) {
    if s.len() <= max {
        return (s.to_string(), false);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    (s[..end].to_string(), true)
}

toolgate_sdk::export! { tools: [WebFetch] }
