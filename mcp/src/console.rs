//! The approval console's API, at `/console/api/…` on the `serve --http`
//! listener (see [`toolgate::approval::queue`] for what it decides on).
//!
//! Deciding here approves calls that run as the operator, so access is
//! never open:
//!
//! * **a token** of its own (`[console] token_file`; made, owner-only, at
//!   the first start), sent either as `Authorization: Bearer <token>` (the
//!   CLI, scripts) or once to `POST /console/login`, which answers with a
//!   session cookie (`HttpOnly; SameSite=Strict; Path=/console`) and a
//!   CSRF token;
//! * **CSRF**: a request authenticated by the cookie that changes anything
//!   (every `POST`) must carry `X-CSRF-Token` with its session's token —
//!   a cross-site form cannot read it; a bearer request needs none (a
//!   browser never adds the header by itself);
//! * **Host and Origin**, as for `/mcp`: the `Host` must name this server,
//!   and an `Origin`, when sent, must be this server's own (or one allowed
//!   with `--allow-origin`) — DNS rebinding and cross-site requests get 403;
//! * who decided is recorded: `console:NAME` (the name given at login) or
//!   `api:NAME` (`X-Toolgate-Identity`, default `api`), in the entry and in
//!   the call's audit record (`decidedBy`).
//!
//! Logins are kept where the queue is ([`ApprovalQueue::log_in`]): in the
//! shared store when replicas share the queue (`[state] url`), so a
//! balancer may send each of the page's requests to any replica — with
//! one console token for all of them (`[console] token_file` naming the
//! same token on each). The store holds a login's SHA-256, never the
//! cookie itself.
//!
//! Bounds: request bodies of [`CONSOLE_MAX_BODY_BYTES`], at most
//! [`CONSOLE_MAX_BATCH`] ids per decision, [`CONSOLE_MAX_SESSIONS`] login
//! sessions (the oldest goes), each for [`CONSOLE_SESSION_TTL`].

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use serde::Deserialize;
use serde_json::{Value, json};

use toolgate::approval::grant::GrantSpec;
use toolgate::approval::queue::{ApprovalQueue, Event, Verdict};
use toolgate::approval::store::{ConsoleSession, Entry};
#[cfg(doc)]
use toolgate::budgets::CONSOLE_MAX_SESSIONS;
use toolgate::budgets::{CONSOLE_MAX_BATCH, CONSOLE_MAX_BODY_BYTES, CONSOLE_SESSION_TTL};

mod page;

type Body = BoxBody<Bytes, Infallible>;

/// Where the console lives.
pub const PREFIX: &str = "/console";
/// The session cookie's name.
pub const COOKIE: &str = "toolgate_console";

/// The console: the queue it decides on (and keeps its logins in), its
/// token.
pub struct Console {
    queue: Arc<ApprovalQueue>,
    token: Vec<u8>,
    /// The host's state store, for the goals (see [`Console::new`]).
    goals: Option<Arc<dyn toolgate::store::KvBackend>>,
}

/// What the store keeps of a session cookie's value.
fn session_digest(sid: &str) -> String {
    toolgate::audit::chain::hex(&toolgate::audit::chain::sha256(sid.as_bytes()))
}

/// How a request proved itself.
enum Caller {
    Bearer(String),
    Cookie { name: String, csrf: String },
}

impl Caller {
    fn identity(&self) -> String {
        match self {
            Caller::Bearer(name) => format!("api:{name}"),
            Caller::Cookie { name, .. } => format!("console:{name}"),
        }
    }
}

fn random_hex(n: usize) -> String {
    // Fail closed: an unguessable value or none.
    toolgate::state::random_hex(n).expect("cannot read /dev/urandom for a console session")
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A name someone gave (login, `X-Toolgate-Identity`): printable, short.
fn clean_name(name: &str) -> String {
    let n: String = name
        .chars()
        .filter(|c| c.is_alphanumeric() || "-_.@".contains(*c))
        .take(64)
        .collect();
    if n.is_empty() { "anonymous".into() } else { n }
}

fn respond(status: StatusCode, value: &Value) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(value.to_string())).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r.headers_mut().insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    r
}

fn error(status: StatusCode, message: &str) -> Response<Body> {
    respond(status, &json!({ "error": message }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Login {
    token: String,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Decide {
    ids: Vec<String>,
    /// `approve`, `deny`, `grant`, or `answer` (questions for the user).
    verdict: String,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    grant: Option<GrantSpec>,
    /// With `answer`: one per question, `{"header", "selected", "other"}`.
    #[serde(default)]
    answers: Option<Vec<toolgate::approval::questions::Given>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Ids {
    ids: Vec<String>,
}

/// A goal to see or change (`POST /console/api/goal`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GoalRequest {
    /// The agent scope (`""`: global).
    #[serde(default)]
    scope: String,
    /// `show`, `pause`, `resume` or `clear`.
    action: String,
}

impl Console {
    /// The console over `queue`, opened with `token`; with `goals`, the
    /// host's state store, it also shows and changes the goals the model
    /// set (see [`toolgate::goals`]).
    pub fn new(
        queue: Arc<ApprovalQueue>,
        token: &str,
        goals: Option<Arc<dyn toolgate::store::KvBackend>>,
    ) -> Arc<Console> {
        Arc::new(Console {
            queue,
            token: token.as_bytes().to_vec(),
            goals,
        })
    }

    /// `POST /console/api/goal`: the scope's goal, after the action.
    async fn goal(&self, body: &[u8], by: &str) -> Response<Body> {
        use toolgate::goals::{self, GoalAction, GoalError};
        let Some(store) = &self.goals else {
            return error(StatusCode::NOT_FOUND, "this console has no state store");
        };
        let r: GoalRequest = match serde_json::from_slice(body) {
            Ok(r) => r,
            Err(e) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    &format!(
                        "expected {{\"scope\", \"action\": \"show|pause|resume|clear\"}}: {e}"
                    ),
                );
            }
        };
        if r.scope.len() > 256 {
            return error(StatusCode::BAD_REQUEST, "a scope is at most 256 bytes");
        }
        let done = match r.action.as_str() {
            "show" => goals::read(store.as_ref(), &r.scope).await,
            other => match GoalAction::parse(other) {
                Some(action) => {
                    let done = goals::change(store.as_ref(), &r.scope, action).await;
                    if done.is_ok() {
                        tracing::info!(scope = %r.scope, action = other, by, "goal changed from the console");
                    }
                    done
                }
                None => {
                    return error(
                        StatusCode::BAD_REQUEST,
                        "action is `show`, `pause`, `resume` or `clear`",
                    );
                }
            },
        };
        match done {
            Ok(goal) => respond(StatusCode::OK, &json!({"scope": r.scope, "goal": goal})),
            Err(e @ GoalError::NoGoal(_)) => error(StatusCode::NOT_FOUND, &e.to_string()),
            Err(e @ GoalError::Store { .. }) => {
                error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string())
            }
            Err(e) => error(StatusCode::CONFLICT, &e.to_string()),
        }
    }

    /// Who is calling, if anyone (the cookie's session must be alive);
    /// `Err` when the store that keeps the logins cannot be read.
    async fn caller(&self, parts: &http::request::Parts) -> Result<Option<Caller>, String> {
        if let Some(given) = parts
            .headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
        {
            if !constant_time_eq(given, &self.token) {
                return Ok(None);
            }
            let name = parts
                .headers
                .get("x-toolgate-identity")
                .and_then(|v| v.to_str().ok())
                .map(clean_name)
                .unwrap_or_else(|| "api".into());
            return Ok(Some(Caller::Bearer(name)));
        }
        let Some(sid) = self.cookie_sid(parts) else {
            return Ok(None);
        };
        let session = self
            .queue
            .console_session(&session_digest(&sid))
            .await
            .map_err(|e| e.to_string())?;
        Ok(session.map(|s| Caller::Cookie {
            name: s.name,
            csrf: s.csrf,
        }))
    }

    /// Answers a request under [`PREFIX`]: the page (`GET /console`, see
    /// [`page`]) or the API. `host_ok`/`origin_ok` say whether the listener
    /// accepts the request's `Host` and `Origin`. Every answer carries the
    /// page's strict headers ([`page::harden`]).
    pub async fn handle(
        &self,
        request: Request<Incoming>,
        host_ok: bool,
        origin_ok: bool,
        body_timeout: Duration,
    ) -> Response<Body> {
        let mut r = self.answer(request, host_ok, origin_ok, body_timeout).await;
        page::harden(r.headers_mut());
        r
    }

    async fn answer(
        &self,
        request: Request<Incoming>,
        host_ok: bool,
        origin_ok: bool,
        body_timeout: Duration,
    ) -> Response<Body> {
        if !host_ok {
            return error(
                StatusCode::FORBIDDEN,
                "this Host is not accepted (DNS rebinding protection; see --allow-host)",
            );
        }
        if !origin_ok {
            return error(
                StatusCode::FORBIDDEN,
                "this Origin is not accepted: the console answers its own pages only (see --allow-origin)",
            );
        }
        // The page itself is public (it holds no secret; the login is on
        // it); everything it does goes through the API below.
        if let Some(page) = page::serve(request.method(), request.uri().path()) {
            return page;
        }
        let (parts, body) = request.into_parts();
        let limited = http_body_util::Limited::new(body, CONSOLE_MAX_BODY_BYTES);
        let body = match tokio::time::timeout(body_timeout, limited.collect()).await {
            Ok(Ok(b)) => b.to_bytes(),
            Ok(Err(_)) => {
                return error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &format!(
                        "the body is larger than {CONSOLE_MAX_BODY_BYTES} bytes or unreadable"
                    ),
                );
            }
            Err(_) => {
                return error(
                    StatusCode::REQUEST_TIMEOUT,
                    "the body did not arrive in time",
                );
            }
        };
        let path = parts.uri.path().to_string();
        let post = parts.method == http::Method::POST;
        if path == "/console/login" && post {
            return self.login(&body).await;
        }
        let caller = match self.caller(&parts).await {
            Ok(Some(caller)) => caller,
            Ok(None) => {
                return error(
                    StatusCode::UNAUTHORIZED,
                    "log in (POST /console/login with the console token) or send `Authorization: Bearer <console token>`",
                );
            }
            Err(e) => {
                return error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &format!("the store that keeps console logins cannot be read: {e}"),
                );
            }
        };
        if post && let Caller::Cookie { csrf, .. } = &caller {
            let given = parts.headers.get("x-csrf-token").map(|v| v.as_bytes());
            if !given.is_some_and(|g| constant_time_eq(g, csrf.as_bytes())) {
                return error(
                    StatusCode::FORBIDDEN,
                    "missing or wrong X-CSRF-Token (every change needs the token /console/login gave)",
                );
            }
        }
        let by = caller.identity();
        match (parts.method.as_str(), path.as_str()) {
            ("POST", "/console/logout") => {
                if let Some(sid) = self.cookie_sid(&parts)
                    && let Err(e) = self.queue.log_out(&session_digest(&sid)).await
                {
                    return error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        &format!("the login could not be ended: {e}"),
                    );
                }
                respond(StatusCode::OK, &json!({"ok": true}))
            }
            // A reloaded page gets its session's CSRF token back here: the
            // cookie is SameSite=Strict and a cross-site page cannot read
            // this answer (no CORS), so the token stays the page's.
            ("GET", "/console/api/whoami") => match &caller {
                Caller::Cookie { csrf, .. } => {
                    respond(StatusCode::OK, &json!({ "identity": by, "csrf": csrf }))
                }
                Caller::Bearer(_) => respond(StatusCode::OK, &json!({ "identity": by })),
            },
            ("GET", "/console/api/pending") => match self.queue.pending().await {
                Ok(list) => respond(
                    StatusCode::OK,
                    &Value::Array(list.iter().map(Entry::to_json).collect()),
                ),
                Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
            },
            ("GET", "/console/api/decided") => {
                let n = parts
                    .uri
                    .query()
                    .and_then(|q| q.strip_prefix("limit="))
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(50usize)
                    .min(toolgate::budgets::APPROVAL_KEEP_DECIDED);
                match self.queue.decided(n).await {
                    Ok(list) => respond(
                        StatusCode::OK,
                        &Value::Array(list.iter().map(Entry::to_json).collect()),
                    ),
                    Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
                }
            }
            ("POST", "/console/api/decide") => self.decide(&body, &by).await,
            ("GET", "/console/api/grants") => match self.queue.grants().await {
                Ok(g) => respond(StatusCode::OK, &json!(g)),
                Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
            },
            ("POST", "/console/api/grants") => {
                let spec: GrantSpec = match serde_json::from_slice(&body) {
                    Ok(s) => s,
                    Err(e) => return error(StatusCode::BAD_REQUEST, &format!("not a grant: {e}")),
                };
                match self.queue.grant(&spec, &by).await {
                    Ok(g) => respond(StatusCode::OK, &json!(g)),
                    Err(e) => error(StatusCode::BAD_REQUEST, &e.to_string()),
                }
            }
            ("POST", "/console/api/grants/revoke") => {
                let ids: Ids = match serde_json::from_slice(&body) {
                    Ok(i) => i,
                    Err(e) => {
                        return error(
                            StatusCode::BAD_REQUEST,
                            &format!("expected {{\"ids\": [...]}}: {e}"),
                        );
                    }
                };
                let mut results = Vec::new();
                for id in ids.ids.iter().take(CONSOLE_MAX_BATCH) {
                    results.push(match self.queue.revoke(id, &by).await {
                        Ok(_) => json!({"id": id, "ok": true}),
                        Err(e) => json!({"id": id, "ok": false, "error": e.to_string()}),
                    });
                }
                respond(StatusCode::OK, &json!({ "results": results }))
            }
            ("GET", "/console/api/events") => self.events(),
            ("POST", "/console/api/goal") => self.goal(&body, &by).await,
            _ => error(StatusCode::NOT_FOUND, "no such console endpoint"),
        }
    }

    fn cookie_sid(&self, parts: &http::request::Parts) -> Option<String> {
        parts
            .headers
            .get_all(http::header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|c| c.trim().split_once('='))
            .find(|(k, _)| *k == COOKIE)
            .map(|(_, v)| v.to_string())
    }

    async fn login(&self, body: &[u8]) -> Response<Body> {
        let login: Login = match serde_json::from_slice(body) {
            Ok(l) => l,
            Err(_) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "expected {\"token\": \"...\", \"name\": \"...\"}",
                );
            }
        };
        if !constant_time_eq(login.token.trim().as_bytes(), &self.token) {
            tracing::info!("console login with a wrong token; 401");
            return error(StatusCode::UNAUTHORIZED, "wrong token");
        }
        let sid = random_hex(32);
        let csrf = random_hex(32);
        let name = clean_name(login.name.as_deref().unwrap_or("operator"));
        let session = ConsoleSession {
            id_sha256: session_digest(&sid),
            name: name.clone(),
            csrf: csrf.clone(),
            expires_ms: toolgate::approval::queue::now_ms()
                + CONSOLE_SESSION_TTL.as_millis() as u64,
        };
        if let Err(e) = self.queue.log_in(&session).await {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("the login could not be kept: {e}"),
            );
        }
        tracing::info!(name, "console login");
        let mut r = respond(
            StatusCode::OK,
            &json!({ "csrf": csrf, "identity": format!("console:{name}") }),
        );
        let cookie = format!(
            "{COOKIE}={sid}; HttpOnly; SameSite=Strict; Path={PREFIX}; Max-Age={}",
            CONSOLE_SESSION_TTL.as_secs()
        );
        if let Ok(v) = HeaderValue::from_str(&cookie) {
            r.headers_mut().insert(http::header::SET_COOKIE, v);
        }
        r
    }

    async fn decide(&self, body: &[u8], by: &str) -> Response<Body> {
        let d: Decide = match serde_json::from_slice(body) {
            Ok(d) => d,
            Err(e) => return error(StatusCode::BAD_REQUEST, &format!("not a decision: {e}")),
        };
        if d.ids.len() > CONSOLE_MAX_BATCH {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("at most {CONSOLE_MAX_BATCH} ids per decision"),
            );
        }
        let verdict = match (d.verdict.as_str(), d.grant, d.answers) {
            ("approve", None, None) => Verdict::Approve,
            ("deny", None, None) => Verdict::Deny(d.message),
            ("grant", Some(spec), None) => Verdict::Grant(spec),
            ("answer", None, Some(answers)) if d.ids.len() == 1 => Verdict::Answer(answers),
            _ => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "verdict is `approve`, `deny` (with an optional message), `grant` (with a grant) or `answer` (one id, with `answers`: [{\"header\", \"selected\", \"other\"}])",
                );
            }
        };
        let mut results = Vec::new();
        let mut granted: Option<String> = None;
        for id in &d.ids {
            // One grant for the selection: the first decision makes it, the
            // others are approvals under it.
            let v = match (&verdict, &granted) {
                (Verdict::Grant(_), Some(_)) => Verdict::Approve,
                (v, _) => v.clone(),
            };
            results.push(match self.queue.decide(id, v, by).await {
                Ok(e) => {
                    if let Some(g) = e.decided.as_ref().and_then(|d| d.grant.clone()) {
                        granted = Some(g);
                    }
                    json!({"id": id, "ok": true, "state": e.state.as_str()})
                }
                Err(e) => json!({"id": id, "ok": false, "error": e.to_string()}),
            });
        }
        respond(
            StatusCode::OK,
            &json!({ "results": results, "grant": granted }),
        )
    }

    /// Server-sent events: `pending` (a new entry) and `ended` (a wait
    /// ended), each with the entry as JSON; `lagged` when this watcher
    /// fell behind (reload the list).
    fn events(&self) -> Response<Body> {
        let rx = self.queue.subscribe();
        let stream = futures::stream::unfold(Some(rx), |rx| async move {
            let mut rx = rx?;
            let text = match rx.recv().await {
                Ok(Event::Pending(e)) => format!("event: pending\ndata: {}\n\n", e.to_json()),
                Ok(Event::Ended(e)) => format!("event: ended\ndata: {}\n\n", e.to_json()),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    format!("event: lagged\ndata: {n}\n\n")
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            };
            Some((
                Ok::<_, Infallible>(Frame::data(Bytes::from(text))),
                Some(rx),
            ))
        });
        // A first comment, so the client sees the stream open at once.
        let first = futures::stream::once(async {
            Ok::<_, Infallible>(Frame::data(Bytes::from_static(b": open\n\n")))
        });
        let body = StreamBody::new(futures::StreamExt::chain(first, stream));
        let mut r = Response::new(BodyExt::boxed(body));
        r.headers_mut().insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        r.headers_mut().insert(
            http::header::CACHE_CONTROL,
            HeaderValue::from_static("no-store"),
        );
        r
    }
}
