//! The letter of the protocol where the SDK's own answers fall short.
//!
//! A gateway is judged on its errors as much as on its results: a client
//! library that gets a `415` in plain text for a typo in its JSON, or
//! `-32601 "tools/call"` for a call without a `name`, cannot tell its user
//! what went wrong. The SDK (`rmcp`) answers these cases loosely, so this
//! module checks and rewrites at our edges, the same way for both
//! transports:
//!
//! * [`check_body`] — an HTTP body that is not JSON is a JSON-RPC parse
//!   error (`-32700`), JSON that is not a JSON-RPC 2.0 message an invalid
//!   request (`-32600`), both with HTTP 400 and a JSON-RPC error body
//!   ([`error_response`]), as stdio answers them. A JSON array is a batch:
//!   the caller decides whether this session may send one
//!   ([`batch_allowed`]).
//! * [`exact`] — an error the SDK made, said precisely: `-32601` names the
//!   method as "method not found: X"; the SDK's "request _meta is missing"
//!   for a request that came before `initialize` says the session is not
//!   initialized (or, on the stateless revision, which `_meta` fields the
//!   request lacks). [`rewrite_json`] applies it to a JSON-RPC message in
//!   bytes (an HTTP JSON body, an SSE event's data).
//! * [`primes`], [`without_priming`] — the SDK opens every SSE stream with
//!   a *priming* event (an event id, a `retry:` and empty data: SEP-1699,
//!   protocol 2025-11-25); a client of an older revision reads every
//!   event's data as a JSON-RPC message, and an empty one ends its
//!   connection (Gemini CLI's SDK, 2025-06-18). Such events go only to
//!   requests of 2025-11-25 or later.
//! * [`routing_headers`] — on protocol revision 2026-07-28 a request
//!   mirrors its method in `Mcp-Method` and its target (a tool's or
//!   prompt's name, a resource's URI, a task's id) in `Mcp-Name` (SEP-2243),
//!   so that a balancer can route without reading bodies. A header that is
//!   missing or says other than the body is `-32020` with HTTP 400: what a
//!   balancer routed by must be what runs. The SDK leaves this unchecked.
//! * [`invalid_params`] — a request for a method the SDK knows whose params
//!   do not deserialize (the SDK then treats it as an unknown, custom
//!   method) is `-32602` with the decoding error, which names what is
//!   missing.

use std::convert::Infallible;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use rmcp::model::{ClientJsonRpcMessage, ErrorCode, ErrorData};
use serde_json::{Value, json};

/// Most messages in one JSON-RPC batch (a 2025-03-26 session); a longer
/// batch is refused whole with `-32600`. Each message is a request of its
/// own for the session's limits (`--max-queued-calls`).
pub const MAX_BATCH: usize = 64;

/// The SDK's message for a request without the per-request `_meta` of the
/// stateless revision, which is also what a request before `initialize`
/// gets.
const META_MISSING: &str = "request _meta is missing or has malformed required fields: ";

/// An error said precisely (see the module docs). Idempotent.
pub fn exact(error: &mut ErrorData) {
    if error.code == ErrorCode::METHOD_NOT_FOUND && !error.message.starts_with("method not found") {
        error.message = format!("method not found: {}", error.message).into();
    } else if error.code == ErrorCode::INVALID_PARAMS
        && let Some(at) = error.message.find(META_MISSING)
    {
        let missing = &error.message[at + META_MISSING.len()..];
        error.message = format!(
            "the session is not initialized: send `initialize` first, or (the stateless \
             revision, 2026-07-28) give every request its `_meta` fields; missing: {missing}"
        )
        .into();
    }
}

/// [`exact`] applied to one JSON-RPC message in bytes; `None` when there is
/// nothing to change (the bytes are not an error message, or already
/// exact).
pub fn rewrite_json(bytes: &[u8]) -> Option<Vec<u8>> {
    // Cheap test first: most messages are results.
    if !contains(bytes, b"\"error\"") {
        return None;
    }
    let mut value: Value = serde_json::from_slice(bytes).ok()?;
    let changed = match &mut value {
        Value::Array(items) => items
            .iter_mut()
            .map(rewrite_value)
            .fold(false, |a, b| a | b),
        v => rewrite_value(v),
    };
    changed.then(|| value.to_string().into_bytes())
}

fn rewrite_value(value: &mut Value) -> bool {
    let Some(error) = value.get_mut("error") else {
        return false;
    };
    let Ok(mut data) = serde_json::from_value::<ErrorData>(error.clone()) else {
        return false;
    };
    let before = data.message.clone();
    exact(&mut data);
    if data.message == before {
        return false;
    }
    *error = serde_json::to_value(&data).unwrap_or(Value::Null);
    true
}

/// [`rewrite_json`] on every `data:` line of an SSE chunk.
pub fn rewrite_sse(chunk: Bytes) -> Bytes {
    if !contains(&chunk, b"\"error\"") {
        return chunk;
    }
    let Ok(text) = std::str::from_utf8(&chunk) else {
        return chunk;
    };
    let mut out = String::with_capacity(text.len() + 32);
    let mut changed = false;
    for line in text.split_inclusive('\n') {
        if let Some(data) = line.strip_prefix("data: ")
            && let Some(new) = rewrite_json(data.trim_end().as_bytes())
        {
            out.push_str("data: ");
            out.push_str(&String::from_utf8_lossy(&new));
            out.push('\n');
            changed = true;
        } else {
            out.push_str(line);
        }
    }
    if changed { Bytes::from(out) } else { chunk }
}

/// The first revision that defines SSE priming events (SEP-1699).
pub const PRIMING_SINCE: &str = "2025-11-25";

/// Whether the answer to a request may carry priming events: its protocol
/// version — `version` (its session's negotiated one, else its
/// `MCP-Protocol-Version` header), else (a request before it has one:
/// `initialize`, a stateless request) the body's `params.protocolVersion`
/// of `initialize` or its `_meta` `io.modelcontextprotocol/protocolVersion`
/// — is [`PRIMING_SINCE`] or later. Unknown: no (a 2025-03-26 client sends
/// no header).
pub fn primes(version: Option<&str>, body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Message {
        method: Option<String>,
        params: Option<Params>,
    }
    #[derive(serde::Deserialize)]
    struct Params {
        #[serde(rename = "protocolVersion")]
        protocol_version: Option<String>,
        #[serde(rename = "_meta")]
        meta: Option<Meta>,
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(rename = "io.modelcontextprotocol/protocolVersion")]
        protocol_version: Option<String>,
    }
    let version = match version {
        Some(v) => Some(v.to_string()),
        None if contains(body, b"rotocolVersion") => {
            serde_json::from_slice::<Message>(body).ok().and_then(|m| {
                let params = m.params?;
                match m.method.as_deref() {
                    Some("initialize") => params.protocol_version,
                    _ => params.meta?.protocol_version,
                }
            })
        }
        None => None,
    };
    // Revisions are dates: their order is the strings'.
    version.is_some_and(|v| v.as_str() >= PRIMING_SINCE)
}

/// An SSE chunk without its events that carry no message (a priming event,
/// a bare `retry:` hint: each an empty `data:` line), for a client whose
/// revision predates them (see [`primes`]). The SDK writes each event as
/// one chunk; a chunk of several is filtered event by event.
pub fn without_priming(chunk: Bytes) -> Bytes {
    let empty = |event: &str| {
        let mut data = event.lines().filter_map(|l| l.strip_prefix("data:"));
        let first = data.next();
        first.is_some_and(|d| d.trim().is_empty()) && data.all(|d| d.trim().is_empty())
    };
    let Ok(text) = std::str::from_utf8(&chunk) else {
        return chunk;
    };
    if !text.split_inclusive("\n\n").any(empty) {
        return chunk;
    }
    let kept: String = text.split_inclusive("\n\n").filter(|e| !empty(e)).collect();
    Bytes::from(kept)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// What an HTTP body holds, as far as the layer in front of the SDK cares.
pub enum Body {
    /// One JSON-RPC message the SDK can read: passed on as it is.
    Message,
    /// A JSON array: a batch (its items unchecked).
    Batch(Vec<Value>),
    /// Not JSON, or not a JSON-RPC message: this answer (400).
    Refused(Response<BoxBody<Bytes, Infallible>>),
}

/// Check a POST body (see the module docs).
pub fn check_body(bytes: &[u8]) -> Body {
    // The fast path: what the SDK will parse anyway.
    if serde_json::from_slice::<ClientJsonRpcMessage>(bytes).is_ok() {
        return Body::Message;
    }
    match serde_json::from_slice::<Value>(bytes) {
        Err(e) => Body::Refused(error_response(
            StatusCode::BAD_REQUEST,
            None,
            ErrorData::parse_error(format!("not JSON: {e}"), None),
        )),
        Ok(Value::Array(items)) => Body::Batch(items),
        Ok(value) => {
            let error = invalid_message(&value);
            Body::Refused(error_response(
                StatusCode::BAD_REQUEST,
                id_of(&value),
                error,
            ))
        }
    }
}

/// Why `value` is not a JSON-RPC 2.0 message, as an invalid request.
pub fn invalid_message(value: &Value) -> ErrorData {
    let why = match value {
        Value::Object(o) if o.get("jsonrpc") != Some(&json!("2.0")) => {
            "`jsonrpc` must be \"2.0\"".to_string()
        }
        Value::Object(o) if !o.contains_key("method") && !o.contains_key("id") => {
            "neither a request, a notification nor a response (no `method`, no `id`)".to_string()
        }
        Value::Object(o) if o.get("method").is_some_and(|m| !m.is_string()) => {
            "`method` must be a string".to_string()
        }
        Value::Object(_) => {
            let e = serde_json::from_value::<ClientJsonRpcMessage>(value.clone())
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            format!("not a valid MCP message: {e}")
        }
        _ => "a JSON-RPC message is an object".to_string(),
    };
    ErrorData::invalid_request(format!("invalid JSON-RPC 2.0 request: {why}"), None)
}

/// The id of something that looked like a request, for an error answer
/// (a string or a number; anything else is answered with a null id).
pub fn id_of(value: &Value) -> Option<Value> {
    value
        .get("id")
        .filter(|id| id.is_string() || id.is_number())
        .cloned()
}

/// A JSON-RPC error as an HTTP response.
pub fn error_response(
    status: StatusCode,
    id: Option<Value>,
    error: ErrorData,
) -> Response<BoxBody<Bytes, Infallible>> {
    let body = json!({"jsonrpc": "2.0", "id": id, "error": error});
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// The revision whose requests carry routing headers (SEP-2243).
const ROUTED_REVISION: &str = "2026-07-28";

/// `-32020`, HeaderMismatch (2026-07-28).
const HEADER_MISMATCH: i32 = -32020;

/// What [`routing_headers`] reads of a message: its method, id and routing
/// targets — not its arguments, which are skipped unread (a call's may be
/// megabytes, and this runs on every 2026-07-28 request).
#[derive(serde::Deserialize)]
struct Routing {
    method: Option<Value>,
    /// Present (`null` included) or not: a request or a notification.
    #[serde(default, deserialize_with = "present")]
    id: Option<Value>,
    #[serde(default)]
    params: Option<RoutingParams>,
}

/// A member that is there, whatever its value (`null` too).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    <Value as serde::Deserialize>::deserialize(d).map(Some)
}

#[derive(serde::Deserialize, Default)]
struct RoutingParams {
    name: Option<Value>,
    uri: Option<Value>,
    #[serde(rename = "taskId")]
    task_id: Option<Value>,
    #[serde(rename = "_meta")]
    meta: Option<RoutingMeta>,
}

#[derive(serde::Deserialize, Default)]
struct RoutingMeta {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion")]
    protocol_version: Option<Value>,
}

/// The `Mcp-Name` a request must carry: its `params` member by method
/// (as the SDK's client sends it).
fn routed_name<'p>(method: &str, params: &'p RoutingParams) -> Option<&'p str> {
    let target = match method {
        "tools/call" | "prompts/get" => &params.name,
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => &params.uri,
        "tasks/get" | "tasks/update" | "tasks/cancel" => &params.task_id,
        _ => return None,
    };
    target.as_ref()?.as_str()
}

/// A header value as SEP-2243 encodes it: plain, or `=?base64?…?=`.
fn decoded_header(value: &http::HeaderValue) -> Option<String> {
    use base64::Engine as _;
    let text = value.to_str().ok()?;
    match text
        .strip_prefix("=?base64?")
        .and_then(|inner| inner.strip_suffix("?="))
    {
        Some(inner) => base64::engine::general_purpose::STANDARD
            .decode(inner)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
        None => Some(text.to_owned()),
    }
}

/// Check a 2026-07-28 request's `Mcp-Method` and `Mcp-Name` against its
/// body (see the module docs): `None` when they agree or the request is of
/// an earlier revision (by its `MCP-Protocol-Version` header, or the
/// `_meta` a stateless request carries); else the `-32020` answer.
pub fn routing_headers(
    headers: &http::HeaderMap,
    bytes: &[u8],
) -> Option<Response<BoxBody<Bytes, Infallible>>> {
    // Read the body again only for a request that may be of the revision.
    let by_header = headers
        .get("mcp-protocol-version")
        .is_some_and(|v| v.as_bytes() == ROUTED_REVISION.as_bytes());
    if !by_header && !contains(bytes, ROUTED_REVISION.as_bytes()) {
        return None;
    }
    let message: Routing = serde_json::from_slice(bytes).ok()?;
    let method = message.method.as_ref()?.as_str()?;
    let params = message.params.unwrap_or_default();
    let declared = headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .or_else(|| params.meta.as_ref()?.protocol_version.as_ref()?.as_str());
    if declared != Some(ROUTED_REVISION) {
        return None;
    }
    let is_request = message.id.is_some();
    let id = message.id.filter(|id| id.is_string() || id.is_number());
    let refuse = |why: String| {
        Some(error_response(
            StatusCode::BAD_REQUEST,
            id.clone(),
            ErrorData::new(ErrorCode(HEADER_MISMATCH), why, None),
        ))
    };
    match headers.get("mcp-method").map(decoded_header) {
        // Notifications may go without; a request may not.
        None if !is_request => {}
        None => {
            return refuse(format!(
                "missing the Mcp-Method header (protocol {ROUTED_REVISION} requires it on every request: `Mcp-Method: {method}`)"
            ));
        }
        Some(Some(header)) if header == method => {}
        Some(header) => {
            return refuse(format!(
                "the Mcp-Method header ({}) does not match the body's method `{method}`",
                header.map_or_else(|| "not readable".to_owned(), |h| format!("`{h}`"))
            ));
        }
    }
    let expected = routed_name(method, &params)?;
    match headers.get("mcp-name").map(decoded_header) {
        None if !is_request => None,
        None => refuse(format!(
            "missing the Mcp-Name header (protocol {ROUTED_REVISION} requires it on `{method}`: the target the body names)"
        )),
        Some(Some(header)) if header == expected => None,
        Some(header) => refuse(format!(
            "the Mcp-Name header ({}) does not match the target the body names for `{method}`",
            header.map_or_else(|| "not readable".to_owned(), |h| format!("`{h}`"))
        )),
    }
}

/// Batches belong to the 2025-03-26 revision only (later ones removed
/// them): accepted in a session whose requests carry that version, or
/// none (a 2025-03-26 client sends no `MCP-Protocol-Version` header; every
/// later one must). `Err`: why not, for a `-32600`.
pub fn batch_allowed(session: bool, version: Option<&str>) -> Result<(), String> {
    if !session {
        return Err(
            "JSON-RPC batches are accepted only inside a 2025-03-26 session \
             (initialize is never batched); send one message per request"
                .into(),
        );
    }
    match version {
        None | Some("2025-03-26") => Ok(()),
        Some(v) => Err(format!(
            "JSON-RPC batches are not part of protocol revision {v} (only 2025-03-26 has \
             them); send one message per request"
        )),
    }
}

/// The MCP methods whose params the SDK decodes into a type: when they do
/// not decode, the request reaches the handler as an unknown method. `Some`:
/// the `-32602` it deserves, naming what is wrong (the decoding error says
/// which field is missing or mistyped).
pub fn invalid_params(method: &str, params: Option<&Value>) -> Option<ErrorData> {
    use rmcp::model as m;
    let params = params.cloned().unwrap_or(Value::Null);
    fn decode<T: serde::de::DeserializeOwned>(params: Value) -> Option<String> {
        serde_json::from_value::<T>(params)
            .err()
            .map(|e| e.to_string())
    }
    let why = match method {
        "tools/call" => decode::<m::CallToolRequestParams>(params),
        "initialize" => decode::<m::InitializeRequestParams>(params),
        #[allow(deprecated)]
        "logging/setLevel" => decode::<m::SetLevelRequestParams>(params),
        "resources/read" => decode::<m::ReadResourceRequestParams>(params),
        "resources/subscribe" => decode::<m::SubscribeRequestParams>(params),
        "resources/unsubscribe" => decode::<m::UnsubscribeRequestParams>(params),
        "prompts/get" => decode::<m::GetPromptRequestParams>(params),
        "completion/complete" => decode::<m::CompleteRequestParams>(params),
        "tools/list" | "resources/list" | "resources/templates/list" | "prompts/list" => {
            decode::<Option<m::PaginatedRequestParams>>(params)
        }
        _ => return None,
    };
    Some(ErrorData::invalid_params(
        format!(
            "invalid params for {method}: {}",
            why.unwrap_or_else(|| "they do not match the method's schema".into())
        ),
        None,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priming_goes_only_to_revisions_that_define_it() {
        assert!(!primes(Some("2025-06-18"), b""));
        assert!(!primes(Some("2025-03-26"), b""));
        assert!(primes(Some("2025-11-25"), b""));
        assert!(primes(Some("2026-07-28"), b""));
        let init = |v: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"{v}","capabilities":{{}},"clientInfo":{{"name":"c","version":"1"}}}}}}"#
            )
        };
        assert!(!primes(None, init("2025-06-18").as_bytes()));
        assert!(primes(None, init("2025-11-25").as_bytes()));
        let stateless = br#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        assert!(primes(None, stateless));
        assert!(!primes(
            None,
            br#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#
        ));
    }

    #[test]
    fn without_priming_drops_the_events_without_a_message() {
        let priming = Bytes::from_static(b"data: \nid: 0\nretry: 3000\n\n");
        assert!(without_priming(priming).is_empty());
        let retry = Bytes::from_static(b"data: \nretry: 3000\n\n");
        assert!(without_priming(retry).is_empty());
        let message =
            Bytes::from_static(b"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\nid: 1\n\n");
        assert_eq!(without_priming(message.clone()), message);
        let both = [&b"data: \nid: 0\nretry: 3000\n\n"[..], &message[..]].concat();
        assert_eq!(without_priming(Bytes::from(both)), message);
        let keep_alive = Bytes::from_static(b":\n\n");
        assert_eq!(without_priming(keep_alive.clone()), keep_alive);
    }

    #[test]
    fn method_not_found_names_the_method_once() {
        let mut e = ErrorData::new(ErrorCode::METHOD_NOT_FOUND, "foo/bar", None);
        exact(&mut e);
        assert_eq!(e.message, "method not found: foo/bar");
        exact(&mut e);
        assert_eq!(e.message, "method not found: foo/bar");
    }

    #[test]
    fn uninitialized_says_so() {
        let mut e = ErrorData::invalid_params(
            format!("Invalid params: {META_MISSING}io.modelcontextprotocol/protocolVersion"),
            None,
        );
        exact(&mut e);
        assert!(
            e.message.starts_with("the session is not initialized"),
            "{}",
            e.message
        );
        assert!(
            e.message
                .ends_with("missing: io.modelcontextprotocol/protocolVersion")
        );
    }

    #[test]
    fn routing_headers_must_say_what_the_body_says() {
        let body = |method: &str, params: Value| {
            json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string()
        };
        let modern = json!({"name": "echo", "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}});
        let headers = |pairs: &[(&'static str, &str)]| {
            let mut map = http::HeaderMap::new();
            for (name, value) in pairs {
                map.insert(*name, http::HeaderValue::from_str(value).unwrap());
            }
            map
        };
        let call = body("tools/call", modern.clone());
        let refused =
            |h: &http::HeaderMap, b: &str| routing_headers(h, b.as_bytes()).map(|r| r.status());
        // Agreeing headers, plain or Base64 (SEP-2243's sentinel).
        assert_eq!(
            refused(
                &headers(&[("mcp-method", "tools/call"), ("mcp-name", "echo")]),
                &call
            ),
            None
        );
        assert_eq!(
            refused(
                &headers(&[
                    ("mcp-method", "tools/call"),
                    ("mcp-name", "=?base64?ZWNobw==?=")
                ]),
                &call
            ),
            None
        );
        // Missing, or routed elsewhere than what runs: 400.
        for bad in [
            headers(&[]),
            headers(&[("mcp-method", "tools/call")]),
            headers(&[("mcp-method", "tools/list"), ("mcp-name", "echo")]),
            headers(&[("mcp-method", "tools/call"), ("mcp-name", "bash")]),
            headers(&[("mcp-method", "tools/call"), ("mcp-name", "=?base64?!!?=")]),
        ] {
            let answer = routing_headers(&bad, call.as_bytes()).expect("refused");
            assert_eq!(answer.status(), StatusCode::BAD_REQUEST);
        }
        // By the header alone, too.
        let plain = body("tools/call", json!({"name": "echo"}));
        assert!(
            routing_headers(
                &headers(&[("mcp-protocol-version", "2026-07-28")]),
                plain.as_bytes()
            )
            .is_some()
        );
        // Earlier revisions carry none.
        assert_eq!(
            refused(&headers(&[("mcp-protocol-version", "2025-11-25")]), &plain),
            None
        );
        assert_eq!(refused(&headers(&[]), &plain), None);
        // `"id": null` is still a request (it needs the headers); the
        // arguments are not read for this.
        let null_id = json!({"jsonrpc": "2.0", "id": null, "method": "tools/call", "params": {"name": "echo", "arguments": {"big": "x".repeat(1 << 16)}}}).to_string();
        assert!(
            routing_headers(
                &headers(&[("mcp-protocol-version", "2026-07-28")]),
                null_id.as_bytes()
            )
            .is_some()
        );
        // A method without a target needs no Mcp-Name.
        let list = body(
            "tools/list",
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
        );
        assert_eq!(
            refused(&headers(&[("mcp-method", "tools/list")]), &list),
            None
        );
    }

    #[test]
    fn bodies_are_classified() {
        assert!(matches!(check_body(b"{not json"), Body::Refused(r) if r.status() == 400));
        assert!(matches!(
            check_body(br#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#),
            Body::Refused(r) if r.status() == 400
        ));
        assert!(matches!(check_body(b"[1,2]"), Body::Batch(v) if v.len() == 2));
        assert!(matches!(
            check_body(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Body::Message
        ));
        let e = invalid_params("tools/call", Some(&json!({}))).unwrap();
        assert!(e.message.contains("`name`"), "{}", e.message);
        assert!(invalid_params("foo/bar", None).is_none());
    }

    #[test]
    fn sse_events_are_rewritten() {
        let chunk = Bytes::from(
            "data: {\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32601,\"message\":\"x/y\"}}\nid: 1/1\n\n",
        );
        let out = rewrite_sse(chunk);
        let text = std::str::from_utf8(&out).unwrap();
        assert!(text.contains("method not found: x/y"), "{text}");
        assert!(text.ends_with("id: 1/1\n\n"), "{text}");
    }
}
