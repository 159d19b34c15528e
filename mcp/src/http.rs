//! MCP over streamable HTTP (`toolgate serve --http ADDR`), at `/mcp`.
//!
//! The protocol (sessions, SSE streams, resumption, the stateless
//! revision) is the SDK's tower service; this module is the listener in
//! front of it, because a tool host on a port is an attack surface:
//!
//! * **Bearer token, always**: loopback is not a trust boundary — every
//!   local user can connect to `127.0.0.1` — so every request must carry
//!   `Authorization: Bearer <token>` (compared in constant time), else 401
//!   (with `WWW-Authenticate: Bearer` and a JSON-RPC error body, and the
//!   connection closed). The token is the operator's `--token-file`, or one
//!   generated at the first start into an owner-only file under the state
//!   directory ([`default_token_path`], [`load_or_create_token`]); the token
//!   itself is never logged. `--no-auth` turns this off, loopback only, with
//!   a warning at every start.
//! * **Bind**: loopback by default; a non-loopback address also needs the
//!   token (`--no-auth` is refused there).
//! * **DNS rebinding**: a web page can make a browser send requests to
//!   `127.0.0.1` under a name the attacker controls. So the `Host` header
//!   must name this server (by default `localhost`, `127.0.0.1`, `[::1]` or
//!   the bound address; more with `--allow-host`), and an `Origin` header,
//!   which browsers send, must be a loopback one (`http(s)://localhost`,
//!   `127.0.0.1`, `[::1]`, any port: a page served from this machine, as
//!   the spec requires a local server to accept; it still needs the token)
//!   or in the allowlist (`--allow-origin`). Both answer 403.
//! * **The letter of the protocol** ([`super::exact`]): bad JSON and bad
//!   JSON-RPC get 400 with a JSON-RPC error (`-32700`, `-32600`), a batch
//!   is split in a 2025-03-26 session and refused elsewhere, `DELETE` of an
//!   unknown session is 404 and of a live one 204, the SDK's error
//!   messages are said exactly, and SSE priming events (empty data) go
//!   only to requests of a revision that defines them (2025-11-25 on).
//! * **Bounds**: connections at once ([`Limits::max_connections`]; more are
//!   closed on accept), sessions at once ([`Limits::max_sessions`]; a
//!   request that would open one more gets 503 with `Retry-After`), idle
//!   sessions closed ([`Limits::session_idle`], their calls cancelled;
//!   sessions never used sooner, [`Limits::session_unused_idle`]),
//!   headers in [`Limits::header_timeout`] and 64 KiB, bodies of at most
//!   [`Limits::max_message_bytes`] (413) within [`Limits::body_timeout`]
//!   (408).
//! * **Shares**: one client ([`super::peer::Client`]: the local user that
//!   owns a loopback peer socket, else the peer address — not the token,
//!   which is one for all) holds at most
//!   [`Limits::max_connections_per_client`] connections and
//!   [`Limits::max_sessions_per_client`] sessions, so one client filling
//!   its share leaves the others theirs.
//!
//! A client that drops a connection does not cancel its calls (the
//! protocol lets it resume the stream); `notifications/cancelled`, ending
//! the session (`DELETE`), or its idle timeout does — at once
//! ([`super::session`]).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;

use rmcp::transport::streamable_http_server::{SessionId, SessionManager};
use serde_json::{Value, json};

use super::Limits;
use super::exact;
use super::health::{self, InFlight, Readiness, Stop};
use super::peer::{self, Client};
use super::server::{Slot, ToolgateServer};
use super::session::Sessions;

/// The path the MCP endpoint is served at.
pub const PATH: &str = "/mcp";

/// Where the host's metrics are served (see [`toolgate::metrics`]).
pub const METRICS_PATH: &str = "/metrics";

/// Origins always accepted: a page served from this machine (the
/// Inspector's web UI, a local app), on any port, as the spec asks of a
/// local server. Every other origin needs `--allow-origin`.
pub const LOOPBACK_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
    "https://localhost:*",
    "https://127.0.0.1:*",
    "https://[::1]:*",
];

/// Largest request head (request line and headers) accepted.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// What `--http` was given besides the address.
#[derive(Clone, Default)]
pub struct HttpOptions {
    /// The bearer token every request must carry; `None` only with
    /// `--no-auth`.
    pub token: Option<String>,
    /// `Host` values accepted besides the loopback names and the bound
    /// address (`--allow-host`).
    pub allow_hosts: Vec<String>,
    /// `Origin` values accepted (`--allow-origin`); none by default.
    pub allow_origins: Vec<String>,
    /// The approval console's API under `/console` (`--approve queue`).
    #[cfg(feature = "console")]
    pub console: Option<Arc<super::console::Console>>,
    /// `[auth]`: `/mcp` takes OAuth access tokens instead of `token`
    /// (which then guards `/metrics` alone), and serves its metadata.
    pub oauth: Option<Arc<super::oauth::OAuth>>,
}

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token itself.
        let mut f = f.debug_struct("HttpOptions");
        f.field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("allow_hosts", &self.allow_hosts)
            .field("allow_origins", &self.allow_origins)
            .field("oauth", &self.oauth);
        #[cfg(feature = "console")]
        f.field("console", &self.console.is_some());
        f.finish()
    }
}

/// Why the HTTP server could not start.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error(
        "refusing to serve on {addr}, which is not a loopback address, without a bearer token: \
         drop --no-auth (a token is then required; --token-file FILE names it), or bind 127.0.0.1"
    )]
    Unauthenticated { addr: SocketAddr },
    // The cause is the source, said once: `toolgate: {e:#}` prints the chain.
    #[error("cannot listen on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

pub use toolgate::state::{MIN_TOKEN_LEN, TokenError, default_token_path, load_or_create_token};

/// Counts what clients hold (connections, sessions) against a total and a
/// per-client share.
struct Shares {
    what: &'static str,
    total: usize,
    per_client: usize,
    held: Mutex<(usize, HashMap<Client, usize>)>,
}

/// One connection or session of one client, given back when dropped.
struct Share {
    shares: Arc<Shares>,
    client: Client,
}

/// Why a share was refused.
#[derive(Clone, Copy, Debug)]
enum Taken {
    /// Every slot is taken.
    Total(usize),
    /// This client holds its whole share.
    Client(usize),
}

impl Shares {
    fn new(what: &'static str, total: usize, per_client: usize) -> Arc<Self> {
        Arc::new(Shares {
            what,
            total: total.max(1),
            per_client: per_client.clamp(1, total.max(1)),
            held: Mutex::new((0, HashMap::new())),
        })
    }

    fn take(self: &Arc<Self>, client: Client) -> Result<Share, Taken> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let (all, by_client) = &mut *held;
        if *all >= self.total {
            return Err(Taken::Total(self.total));
        }
        let mine = by_client.entry(client).or_insert(0);
        if *mine >= self.per_client {
            return Err(Taken::Client(self.per_client));
        }
        *mine += 1;
        *all += 1;
        Ok(Share {
            shares: self.clone(),
            client,
        })
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut held = self.shares.held.lock().unwrap_or_else(|p| p.into_inner());
        let (all, by_client) = &mut *held;
        *all -= 1;
        if let Some(mine) = by_client.get_mut(&self.client) {
            *mine -= 1;
            if *mine == 0 {
                by_client.remove(&self.client);
            }
        }
    }
}

tokio::task_local! {
    /// The session share taken for the request being handled, for the
    /// session factory to keep (it is called inside the request's handling).
    static OPENING: Mutex<Option<Share>>;
}

/// A bound listener, ready to serve.
pub struct Listener {
    listener: TcpListener,
    in_flight: InFlight,
    options: HttpOptions,
}

/// Check the options and bind `addr`.
pub async fn bind(addr: SocketAddr, options: HttpOptions) -> Result<Listener, HttpError> {
    if !addr.ip().is_loopback() && options.token.is_none() {
        return Err(HttpError::Unauthenticated { addr });
    }
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| HttpError::Bind { addr, source })?;
    Ok(Listener {
        listener,
        in_flight: InFlight::default(),
        options,
    })
}

impl Listener {
    /// The address bound (the port, when 0 was asked).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// MCP `POST`s whose answer is not written yet (see [`Stop`]): what a
    /// drain waits for.
    pub fn in_flight(&self) -> InFlight {
        self.in_flight.clone()
    }

    /// Serve until `stop.shutdown` is cancelled; from `stop.drain` on, no
    /// connection is accepted and open ones take no new request (see
    /// [`super::health`]). `server` is the prototype every session is made
    /// from.
    pub async fn serve(self, server: ToolgateServer, limits: Limits, stop: Stop) {
        let shutdown = stop.shutdown.clone();
        let local = self.listener.local_addr().ok();
        let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
        if let Some(addr) = local
            && !addr.ip().is_unspecified()
        {
            hosts.push(addr.ip().to_string());
        }
        hosts.extend(self.options.allow_hosts.iter().cloned());
        let metric_hosts: Arc<[String]> = hosts.clone().into();
        #[cfg(feature = "console")]
        let console = self.options.console.clone().map(|c| ConsoleRoute {
            console: c,
            hosts: hosts.clone().into(),
            origins: self.options.allow_origins.clone().into(),
        });
        let config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(hosts)
            .with_allowed_origins(
                LOOPBACK_ORIGINS
                    .iter()
                    .map(|o| o.to_string())
                    .chain(self.options.allow_origins.iter().cloned()),
            )
            .enforce_origin_validation()
            .with_max_request_body_bytes(limits.max_message_bytes)
            .with_cancellation_token(shutdown.child_token());
        let sessions = Sessions::new(limits.session_idle, limits.session_unused_idle);
        let owners = Owners::new(limits.max_sessions);
        let session_shares = Shares::new(
            "sessions",
            limits.max_sessions,
            limits.max_sessions_per_client,
        );
        let readiness: Arc<dyn Fn() -> Readiness + Send + Sync> =
            Arc::new(server.readiness_probe());
        let host = server.host().clone();
        let service = StreamableHttpService::new(
            move || {
                // The share `route` took for this request; none means the
                // request was not expected to open a session: refused.
                match OPENING.try_with(|o| o.lock().unwrap_or_else(|p| p.into_inner()).take()) {
                    Ok(Some(share)) => Ok(server.for_session(Some(Slot::new(share)))),
                    _ => Err(std::io::Error::other(
                        "no session slot was reserved for this request",
                    )),
                }
            },
            Arc::new(sessions.clone()),
            config,
        );
        let token: Option<Arc<[u8]>> = self.options.token.as_deref().map(|t| t.as_bytes().into());
        let connections = Shares::new(
            "connections",
            limits.max_connections,
            limits.max_connections_per_client,
        );
        let in_flight = self.in_flight.clone();
        accept_and_serve(&self.listener, &connections, limits, &stop, "", |client| {
            let route = Arc::new(Route {
                service: service.clone(),
                token: token.clone(),
                oauth: self.options.oauth.clone(),
                sessions: session_shares.clone(),
                known: sessions.clone(),
                owners: owners.clone(),
                client,
                limits,
                #[cfg(feature = "console")]
                console: console.clone(),
                readiness: readiness.clone(),
                host: host.clone(),
                hosts: metric_hosts.clone(),
                stop: stop.clone(),
                in_flight: in_flight.clone(),
            });
            service_fn(move |request: Request<Incoming>| {
                let route = route.clone();
                async move { Ok::<_, Infallible>(route.handle(request).await) }
            })
        })
        .await;
        // Not accepting any more (the listener closes when this returns,
        // so wait here): requests in flight finish until shutdown.
        drop(self.listener);
        shutdown.cancelled().await;
    }
}

/// The approval console on an address of its own (`serve --console
/// ADDR`): the same page and API as under `/console` of the MCP listener,
/// and nothing else (no `/mcp`, no probes).
#[cfg(feature = "console")]
pub struct ConsoleListener {
    listener: TcpListener,
    console: Arc<super::console::Console>,
    allow_hosts: Vec<String>,
    allow_origins: Vec<String>,
}

/// Bind the console's own address. Whether a non-loopback address may
/// serve it (`--console-insecure`) is the caller's decision.
#[cfg(feature = "console")]
pub async fn bind_console(
    addr: SocketAddr,
    console: Arc<super::console::Console>,
    allow_hosts: Vec<String>,
    allow_origins: Vec<String>,
) -> Result<ConsoleListener, HttpError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| HttpError::Bind { addr, source })?;
    Ok(ConsoleListener {
        listener,
        console,
        allow_hosts,
        allow_origins,
    })
}

#[cfg(feature = "console")]
impl ConsoleListener {
    /// The address bound (the port, when 0 was asked).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serve until `stop` drains. Connections are bounded as the MCP
    /// listener's are (`limits`: in all and per client).
    pub async fn serve(self, limits: Limits, stop: Stop) {
        let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
        if let Ok(addr) = self.listener.local_addr()
            && !addr.ip().is_unspecified()
        {
            hosts.push(addr.ip().to_string());
        }
        hosts.extend(self.allow_hosts.iter().cloned());
        let route = ConsoleRoute {
            console: self.console.clone(),
            hosts: hosts.into(),
            origins: self.allow_origins.clone().into(),
        };
        let connections = Shares::new(
            "console connections",
            limits.max_connections,
            limits.max_connections_per_client,
        );
        accept_and_serve(
            &self.listener,
            &connections,
            limits,
            &stop,
            " (console)",
            |_| {
                let route = route.clone();
                service_fn(move |request: Request<Incoming>| {
                    let route = route.clone();
                    async move { Ok::<_, Infallible>(route.answer(request, limits).await) }
                })
            },
        )
        .await;
    }
}

/// Accept connections until the drain begins, each within its client's
/// share of `connections`, and serve each with HTTP/1.1 (the head bounded,
/// the header timeout of `limits`) by the service `serve_as` makes for its
/// client. On drain a connection finishes the request it is serving and
/// reads no other; at shutdown it is dropped. `what` tells the log lines
/// of the listeners apart.
async fn accept_and_serve<S>(
    listener: &TcpListener,
    connections: &Arc<Shares>,
    limits: Limits,
    stop: &Stop,
    what: &'static str,
    serve_as: impl Fn(Client) -> S,
) where
    S: hyper::service::Service<Request<Incoming>, Response = Response<Body>, Error = Infallible>
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    loop {
        let accepted = tokio::select! {
            biased;
            _ = stop.drain_begun() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of descriptors, mostly: wait a little, go on.
                tracing::warn!(error = %e, "accept failed{what}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        // The accepted socket's own address (the listener's may be
        // 0.0.0.0): the client's socket is connected to it.
        let client = match stream.local_addr() {
            Ok(local) => peer::identify(peer, local),
            Err(_) => Client::Addr(peer.ip()),
        };
        let permit = match connections.take(client) {
            Ok(permit) => permit,
            Err(full) => {
                refused(connections, client, full);
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let service = serve_as(client);
        let stop = stop.clone();
        tokio::spawn(async move {
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .max_buf_size(MAX_HEAD_BYTES)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            // Draining: the request being served is finished, no other
            // is read; shutdown: the connection ends now.
            let result = tokio::select! {
                result = connection.as_mut() => Some(result),
                _ = stop.drain_begun() => {
                    connection.as_mut().graceful_shutdown();
                    tokio::select! {
                        result = connection.as_mut() => Some(result),
                        _ = stop.shutdown.cancelled() => None,
                    }
                }
            };
            if let Some(Err(e)) = result {
                tracing::debug!(%peer, error = %e, "connection ended with an error{what}");
            }
            drop(permit);
        });
    }
}

type Body = BoxBody<Bytes, Infallible>;

/// Log a refused share: the total at warn (the operator should know), a
/// client's own share at debug (a client flooding must not flood the log).
fn refused(shares: &Shares, client: Client, full: Taken) {
    match full {
        Taken::Total(max) => {
            tracing::warn!(%client, max, what = shares.what, "all slots taken; refused")
        }
        Taken::Client(max) => {
            tracing::debug!(%client, max, what = shares.what, "this client holds its share; refused")
        }
    }
}

/// Whether the request's `Host` is one of `hosts` (any port): what keeps a
/// web page elsewhere from reaching a loopback server through DNS
/// rebinding.
fn host_named(hosts: &[String], headers: &http::HeaderMap) -> bool {
    let Some(host) = headers
        .get(http::header::HOST)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map(|(h, _)| h).unwrap_or(host),
    };
    hosts.iter().any(|h| h.eq_ignore_ascii_case(name))
}

fn plain(status: StatusCode, text: &str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(text.to_string())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// A refusal that ends the connection too.
fn closing(mut response: Response<Body>) -> Response<Body> {
    response.headers_mut().insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    response
}

/// What one connection's requests need.
struct Route {
    service: StreamableHttpService<ToolgateServer, Sessions>,
    token: Option<Arc<[u8]>>,
    /// `[auth]`: who may call `/mcp` is whom the authorization server says.
    oauth: Option<Arc<super::oauth::OAuth>>,
    sessions: Arc<Shares>,
    /// The sessions themselves (the service's manager, shared), to tell an
    /// unknown session from a live one.
    known: Sessions,
    /// Under `[auth]`, whose each session is: a session is its opener's
    /// alone (the spec's "bind session IDs to user-specific information").
    owners: Owners,
    client: Client,
    limits: Limits,
    #[cfg(feature = "console")]
    console: Option<ConsoleRoute>,
    /// The host's readiness (`/readyz`).
    readiness: Arc<dyn Fn() -> Readiness + Send + Sync>,
    /// The host, for `/metrics`.
    host: toolgate::Toolgate,
    /// The `Host` names this server answers `/metrics` for (as `/mcp`).
    hosts: Arc<[String]>,
    stop: Stop,
    in_flight: InFlight,
}

/// The answer for a session id this server does not know (or that another
/// caller opened: a session id alone reveals nothing).
fn no_such_session() -> Response<Body> {
    exact::error_response(
        StatusCode::NOT_FOUND,
        None,
        rmcp::ErrorData::invalid_request(
            "no such session: it ended, or was never opened; open one with `initialize`",
            None,
        ),
    )
}

/// Under `[auth]`: each session's owner (issuer and subject).
#[derive(Clone)]
struct Owners {
    owners: Arc<Mutex<HashMap<String, String>>>,
    /// At most this many sessions are open at once ([`Limits::max_sessions`]);
    /// entries beyond twice that are sessions that ended idle, and opening
    /// one more drops them.
    max_sessions: usize,
}

impl Owners {
    fn new(max_sessions: usize) -> Owners {
        Owners {
            owners: Arc::default(),
            max_sessions,
        }
    }

    /// Whether `owner` opened session `id`.
    fn is(&self, id: &str, owner: &str) -> bool {
        let owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        owners.get(id).is_some_and(|o| o == owner)
    }

    /// `owner` opened session `id`. Sessions that ended without a DELETE
    /// (idle) are forgotten once the map holds twice as many as can be open,
    /// so a scan comes at most once per `max_sessions` openings.
    async fn open(&self, id: &str, owner: String, known: &Sessions) {
        let held: Vec<String> = {
            let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
            owners.insert(id.to_string(), owner);
            if owners.len() <= self.max_sessions.saturating_mul(2) {
                return;
            }
            owners.keys().cloned().collect()
        };
        let mut ended = Vec::new();
        for id in held {
            if !known
                .has_session(&SessionId::from(id.as_str()))
                .await
                .unwrap_or(false)
            {
                ended.push(id);
            }
        }
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        for id in ended {
            owners.remove(&id);
        }
    }

    fn close(&self, id: &str) {
        self.owners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
    }
}

/// The console's API on this listener, and what it accepts.
#[cfg(feature = "console")]
#[derive(Clone)]
struct ConsoleRoute {
    console: Arc<super::console::Console>,
    hosts: Arc<[String]>,
    origins: Arc<[String]>,
}

#[cfg(feature = "console")]
impl ConsoleRoute {
    /// A request under `/console` (anything else: 404).
    async fn answer(&self, request: Request<Incoming>, limits: Limits) -> Response<Body> {
        let path = request.uri().path();
        if path != super::console::PREFIX && !path.starts_with("/console/") {
            return plain(
                StatusCode::NOT_FOUND,
                "not found: this address serves the approval console, at /console\n",
            );
        }
        let (parts, body) = request.into_parts();
        let host_ok = self.host_ok(&parts);
        let origin_ok = self.origin_ok(&parts);
        self.console
            .handle(
                Request::from_parts(parts, body),
                host_ok,
                origin_ok,
                limits.body_timeout,
            )
            .await
    }

    /// The `Host` names this server (as for `/mcp`).
    fn host_ok(&self, parts: &http::request::Parts) -> bool {
        host_named(&self.hosts, &parts.headers)
    }

    /// No `Origin`, this server's own (same scheme-less host and port as
    /// the `Host`), or one allowed with `--allow-origin`.
    fn origin_ok(&self, parts: &http::request::Parts) -> bool {
        let Some(origin) = parts.headers.get(http::header::ORIGIN) else {
            return true;
        };
        let Ok(origin) = origin.to_str() else {
            return false;
        };
        let host = parts
            .headers
            .get(http::header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        origin == format!("http://{host}")
            || origin == format!("https://{host}")
            || self.origins.iter().any(|o| o == origin)
    }
}

impl Route {
    async fn handle(&self, request: Request<Incoming>) -> Response<Body> {
        let path = request.uri().path();
        if let Some(probe) = health::answer(path, request.method(), &*self.readiness, &self.stop) {
            return probe;
        }
        if path == "/console" || path.starts_with("/console/") {
            return self.console(request).await;
        }
        if path == METRICS_PATH {
            return self.metrics(&request).await;
        }
        if let Some(oauth) = &self.oauth
            && oauth.is_metadata_path(path)
        {
            return resource_metadata(oauth, request.method());
        }
        if request.uri().path() != PATH {
            return plain(
                StatusCode::NOT_FOUND,
                "not found: the MCP endpoint is /mcp\n",
            );
        }
        // A POST is in flight until its answer is written: a drain waits
        // for it (see `health`).
        let held = (request.method() == http::Method::POST).then(|| self.in_flight.enter());
        let response = self.mcp(request).await;
        match held {
            Some(held) => held.hold(response),
            None => response,
        }
    }

    /// A request under `/console`.
    #[cfg(feature = "console")]
    async fn console(&self, request: Request<Incoming>) -> Response<Body> {
        let Some(console) = &self.console else {
            return plain(
                StatusCode::NOT_FOUND,
                "not found: the approval console is served with --approve queue\n",
            );
        };
        console.answer(request, self.limits).await
    }

    /// A request under `/console`, in a build without the console: refused
    /// as not found, saying why (not passed on as an MCP request).
    #[cfg(not(feature = "console"))]
    async fn console(&self, _request: Request<Incoming>) -> Response<Body> {
        plain(
            StatusCode::NOT_FOUND,
            "not found: this server was built without the approval console \
             (the `console` feature of toolgate-mcp)\n",
        )
    }

    /// Whether the request carries the bearer token (or none is needed).
    fn authorized(&self, request: &Request<Incoming>) -> bool {
        let Some(expected) = &self.token else {
            return true;
        };
        let given = request
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
        if given.is_some_and(|g| constant_time_eq(g, expected)) {
            return true;
        }
        tracing::debug!(client = %self.client, "request without the bearer token; 401");
        false
    }

    /// `GET /metrics`: the host's metrics for Prometheus, behind the same
    /// bearer token as `/mcp` (they name the tools and the policies).
    async fn metrics(&self, request: &Request<Incoming>) -> Response<Body> {
        if !self.authorized(request) {
            return unauthorized();
        }
        // With the token, a page elsewhere cannot read them; without one
        // (`--no-auth`), the Host check is what stops it.
        if !host_named(&self.hosts, request.headers()) {
            return plain(
                StatusCode::FORBIDDEN,
                "forbidden: the Host header does not name this server (--allow-host adds names)\n",
            );
        }
        if request.method() != http::Method::GET {
            return plain(
                StatusCode::METHOD_NOT_ALLOWED,
                "method not allowed: GET /metrics\n",
            );
        }
        let mut response =
            Response::new(Full::new(Bytes::from(self.host.metrics_text().await)).boxed());
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static(toolgate::metrics::CONTENT_TYPE),
        );
        response
    }

    /// A request to the MCP endpoint.
    async fn mcp(&self, request: Request<Incoming>) -> Response<Body> {
        let caller = match &self.oauth {
            Some(oauth) => {
                let header = request
                    .headers()
                    .get(http::header::AUTHORIZATION)
                    .map(|v| v.as_bytes());
                match oauth.authenticate(header).await {
                    Ok(mut caller) => {
                        // The request's session, for policies (bounded as
                        // the record bounds it).
                        caller.session = request
                            .headers()
                            .get("mcp-session-id")
                            .and_then(|v| v.to_str().ok())
                            .map(|s| {
                                toolgate::budgets::cut(
                                    s.to_string(),
                                    toolgate::budgets::AUDIT_MAX_CLIENT_FIELD_BYTES,
                                )
                            });
                        Some(Arc::new(caller))
                    }
                    Err(refusal) => {
                        tracing::debug!(client = %self.client, ?refusal, "access token refused");
                        return refused_token(oauth, &refusal);
                    }
                }
            }
            None if !self.authorized(&request) => return unauthorized(),
            None => None,
        };
        // The body, whole, within the deadline and the size bound: a body
        // trickled to hold the connection ends at the deadline.
        let (mut parts, body) = request.into_parts();
        // Who sent it, for the handler (a task belongs to its client).
        parts.extensions.insert(self.client);
        if let Some(caller) = caller {
            parts.extensions.insert(caller);
        }
        let limited = http_body_util::Limited::new(body, self.limits.max_message_bytes);
        let body = match tokio::time::timeout(self.limits.body_timeout, limited.collect()).await {
            Ok(Ok(collected)) => collected.to_bytes(),
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
                return closing(plain(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &format!(
                        "the body is larger than {} bytes (--max-message-bytes)\n",
                        self.limits.max_message_bytes
                    ),
                ));
            }
            Ok(Err(e)) => {
                return closing(plain(
                    StatusCode::BAD_REQUEST,
                    &format!("the body could not be read: {e}\n"),
                ));
            }
            Err(_) => {
                tracing::debug!(client = %self.client, "request body too slow; 408");
                return closing(plain(
                    StatusCode::REQUEST_TIMEOUT,
                    &format!(
                        "the body did not arrive within {} ms\n",
                        self.limits.body_timeout.as_millis()
                    ),
                ));
            }
        };
        // A request outside a session opens one (or is served statelessly):
        // it takes one of the client's session slots now, which the session
        // keeps (the factory takes it from `OPENING`).
        let opening = if parts.method == http::Method::POST
            && !parts.headers.contains_key("mcp-session-id")
        {
            match self.sessions.take(self.client) {
                Ok(share) => Some(share),
                Err(full) => {
                    refused(&self.sessions, self.client, full);
                    let text = match full {
                        Taken::Total(max) => {
                            format!("too many sessions ({max}): end one (DELETE) or retry later\n")
                        }
                        Taken::Client(max) => format!(
                            "this client holds its share of sessions ({max}): end one (DELETE) or retry later\n"
                        ),
                    };
                    let mut response = plain(StatusCode::SERVICE_UNAVAILABLE, &text);
                    response.headers_mut().insert(
                        http::header::RETRY_AFTER,
                        http::HeaderValue::from_static("1"),
                    );
                    return response;
                }
            }
        } else {
            None
        };
        // The letter of the protocol (`exact`): bad JSON and bad JSON-RPC
        // are 400 with a JSON-RPC error, a batch is split (2025-03-26) or
        // refused, ending an unknown session is 404, a real one 204.
        let is_json = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
        // The SDK's own DNS-rebinding check comes first (403), as it would
        // without this layer.
        if let Some(refused) = self.rebinding_refused(&parts).await {
            return refused;
        }
        if parts.method == http::Method::POST && is_json {
            match exact::check_body(&body) {
                exact::Body::Message => {}
                exact::Body::Refused(response) => return response,
                exact::Body::Batch(items) => return self.batch(parts, items).await,
            }
            if let Some(refused) = exact::routing_headers(&parts.headers, &body) {
                return refused;
            }
        }
        let session = parts
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(SessionId::from);
        let deleting = parts.method == http::Method::DELETE;
        let owner = parts
            .extensions
            .get::<Arc<toolgate::identity::Caller>>()
            .map(|c| format!("{}\n{}", c.issuer, c.subject));
        if let (Some(owner), Some(id)) = (&owner, &session)
            && !self.owners.is(id, owner)
        {
            // Another caller's session (or one not opened under `[auth]`):
            // as unknown, so that a session id alone reveals nothing.
            tracing::debug!(client = %self.client, "a session id used by a caller that did not open it; 404");
            return no_such_session();
        }
        if deleting
            && let Some(id) = &session
            && !self.known.has_session(id).await.unwrap_or(false)
        {
            return no_such_session();
        }
        // Priming events only for the revisions that define them (`exact`):
        // the session's negotiated one, else the request's.
        let negotiated = session.as_ref().and_then(|id| self.known.negotiated(id));
        let primes = exact::primes(
            negotiated.as_deref().or_else(|| {
                parts
                    .headers
                    .get("mcp-protocol-version")
                    .and_then(|v| v.to_str().ok())
            }),
            &body,
        );
        let request = Request::from_parts(parts, Full::new(body));
        // Host and Origin are checked by the service (403), with the lists
        // configured in `serve`.
        let response = OPENING
            .scope(Mutex::new(opening), self.service.handle(request))
            .await;
        if let Some(owner) = owner {
            match (&session, response.headers().get("mcp-session-id")) {
                (None, Some(opened)) => {
                    if let Ok(opened) = opened.to_str() {
                        self.owners.open(opened, owner, &self.known).await;
                    }
                }
                (Some(id), _) if deleting && response.status().is_success() => {
                    self.owners.close(id);
                }
                _ => {}
            }
        }
        if deleting && response.status() == StatusCode::ACCEPTED {
            // The session is ended (the SDK says 202, the spec 200 or 204).
            let mut response = response;
            *response.status_mut() = StatusCode::NO_CONTENT;
            return response;
        }
        exact_errors(response, primes).await
    }

    /// The SDK's DNS-rebinding check (`Host`, `Origin`; configured in
    /// `serve`) on this request's head: its 403 when it refuses. Asked with
    /// the method `OPTIONS`, which the SDK answers 405 at once once the
    /// check passes, so the check has one source, the SDK's.
    async fn rebinding_refused(&self, parts: &http::request::Parts) -> Option<Response<Body>> {
        let mut probe = Request::new(Full::new(Bytes::new()));
        *probe.method_mut() = http::Method::OPTIONS;
        *probe.uri_mut() = parts.uri.clone();
        *probe.headers_mut() = parts.headers.clone();
        let answer = self.service.handle(probe).await;
        (answer.status() == StatusCode::FORBIDDEN).then_some(answer)
    }

    /// A JSON-RPC batch: allowed in a 2025-03-26 session, where each of its
    /// messages is handled as if posted alone (concurrently, in the same
    /// session) and the answers come back together as one JSON array; a
    /// clear `-32600` elsewhere.
    async fn batch(&self, parts: http::request::Parts, items: Vec<Value>) -> Response<Body> {
        let version = parts
            .headers
            .get("mcp-protocol-version")
            .and_then(|v| v.to_str().ok());
        let refuse = |why: String| {
            exact::error_response(
                StatusCode::BAD_REQUEST,
                None,
                rmcp::ErrorData::invalid_request(why, None),
            )
        };
        if let Err(why) =
            exact::batch_allowed(parts.headers.contains_key("mcp-session-id"), version)
        {
            return refuse(why);
        }
        if items.is_empty() {
            return refuse("an empty JSON-RPC batch".into());
        }
        if items.len() > exact::MAX_BATCH {
            return refuse(format!(
                "a JSON-RPC batch of {} messages; at most {} are accepted",
                items.len(),
                exact::MAX_BATCH
            ));
        }
        let answers = items.into_iter().map(|item| {
            let parts = parts.clone();
            async move {
                if serde_json::from_value::<rmcp::model::ClientJsonRpcMessage>(item.clone())
                    .is_err()
                {
                    let error = exact::invalid_message(&item);
                    return vec![
                        json!({"jsonrpc": "2.0", "id": exact::id_of(&item), "error": error}),
                    ];
                }
                let id = exact::id_of(&item);
                let request = Request::from_parts(parts, Full::new(Bytes::from(item.to_string())));
                let response = OPENING
                    .scope(Mutex::new(None), self.service.handle(request))
                    .await;
                collect_answers(response, id).await
            }
        });
        let answers: Vec<Value> = futures::future::join_all(answers)
            .await
            .into_iter()
            .flatten()
            .collect();
        if answers.is_empty() {
            // Notifications and responses only.
            let mut response = Response::new(Full::new(Bytes::new()).boxed());
            *response.status_mut() = StatusCode::ACCEPTED;
            return response;
        }
        let mut response =
            Response::new(Full::new(Bytes::from(Value::Array(answers).to_string())).boxed());
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        response
    }
}

/// The answers (responses and errors) in one message's HTTP response: the
/// JSON body, or the `data:` of its SSE events, each [`exact::exact`];
/// an HTTP error without a JSON-RPC body becomes a `-32600` for `id`.
async fn collect_answers(response: Response<Body>, id: Option<Value>) -> Vec<Value> {
    let status = response.status();
    let sse = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let Ok(collected) = response.into_body().collect().await;
    let bytes = collected.to_bytes();
    let messages: Vec<Value> = if sse {
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect()
    } else {
        serde_json::from_slice(&bytes).ok().into_iter().collect()
    };
    let mut answers: Vec<Value> = messages
        .into_iter()
        .filter(|m| m.get("result").is_some() || m.get("error").is_some())
        .map(|mut m| {
            if let Some(fixed) = exact::rewrite_json(m.to_string().as_bytes())
                && let Ok(v) = serde_json::from_slice(&fixed)
            {
                m = v;
            }
            m
        })
        .collect();
    if answers.is_empty() && !status.is_success() && id.is_some() {
        let text = String::from_utf8_lossy(&bytes).trim().to_string();
        answers.push(json!({"jsonrpc": "2.0", "id": id, "error": rmcp::ErrorData::invalid_request(text, None)}));
    }
    answers
}

/// The SDK's answer with its errors said exactly ([`exact`]): a JSON body
/// rewritten whole (it is one message, and its length changes), an SSE
/// stream event by event as it goes.
async fn exact_errors(response: Response<Body>, primes: bool) -> Response<Body> {
    let (mut parts, body) = response.into_parts();
    let content_type = parts
        .headers
        .get(http::header::CONTENT_TYPE)
        .map(|v| v.as_bytes().to_vec())
        .unwrap_or_default();
    let body = if content_type.starts_with(b"text/event-stream") {
        body.map_frame(move |frame| {
            frame.map_data(|chunk| {
                let chunk = if primes {
                    chunk
                } else {
                    exact::without_priming(chunk)
                };
                exact::rewrite_sse(chunk)
            })
        })
        .boxed()
    } else if content_type.starts_with(b"application/json") {
        let Ok(collected) = body.collect().await;
        let bytes = collected.to_bytes();
        match exact::rewrite_json(&bytes) {
            Some(fixed) => {
                parts.headers.remove(http::header::CONTENT_LENGTH);
                Full::new(Bytes::from(fixed)).boxed()
            }
            None => Full::new(bytes).boxed(),
        }
    } else if parts.status.is_client_error() && parts.status != StatusCode::FORBIDDEN {
        // The SDK's refusals in plain text (no session id, an unknown
        // session, a missing Accept): the same status, a JSON-RPC body.
        let Ok(collected) = body.collect().await;
        let text = String::from_utf8_lossy(&collected.to_bytes())
            .trim()
            .to_string();
        let message = if text.contains("Session ID is required") {
            "the session is not initialized: send `initialize` first (every later request \
             carries its Mcp-Session-Id), or, on the stateless revision (2026-07-28), give \
             each request its `_meta` fields"
                .to_string()
        } else if parts.status == StatusCode::NOT_FOUND && text.contains("Session not found") {
            // Still 404, as the spec says (the client starts a new
            // session); the text says why it may be unknown.
            "the session is unknown to this server: it ended or timed out, or (behind a load \
             balancer) it lives on another replica: 2025-era sessions need the balancer's \
             session affinity on the Mcp-Session-Id header (see docs/operators/serving.md, replicas); \
             start a new session with `initialize`"
                .to_string()
        } else {
            text
        };
        parts.headers.remove(http::header::CONTENT_LENGTH);
        let error = rmcp::ErrorData::invalid_request(message, None);
        let json = json!({"jsonrpc": "2.0", "id": null, "error": error});
        parts.headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        Full::new(Bytes::from(json.to_string())).boxed()
    } else {
        body
    };
    Response::from_parts(parts, body)
}

/// 401: the header RFC 6750 asks for, a JSON-RPC error for MCP clients,
/// and the connection closed (an unauthenticated client holds nothing).
fn unauthorized() -> Response<Body> {
    error_reply(
        StatusCode::UNAUTHORIZED,
        "unauthorized: send `Authorization: Bearer <token>` (the token of `toolgate serve`)",
        Some(http::HeaderValue::from_static("Bearer realm=\"toolgate\"")),
    )
}

/// A refused request: `status`, a JSON-RPC error (`-32001`) saying
/// `message`, the `WWW-Authenticate` challenge if any, and the connection
/// closed.
fn error_reply(
    status: StatusCode,
    message: &str,
    challenge: Option<http::HeaderValue>,
) -> Response<Body> {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32001, "message": message}
    });
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    if let Some(challenge) = challenge {
        headers.insert(http::header::WWW_AUTHENTICATE, challenge);
    }
    closing(response)
}

/// A token `[auth]` refused: 401 (none, or not valid) or 403 (too few
/// scopes) with the challenge that leads a client to the authorization
/// server, or 503 when the token could not be checked.
fn refused_token(oauth: &super::oauth::OAuth, refusal: &super::oauth::Refusal) -> Response<Body> {
    use super::oauth::Refusal;
    let (status, message) = match refusal {
        Refusal::Missing => (
            StatusCode::UNAUTHORIZED,
            format!(
                "unauthorized: send `Authorization: Bearer <access token>` from the authorization server the metadata at {} names",
                oauth.metadata_url()
            ),
        ),
        Refusal::Invalid(why) => (StatusCode::UNAUTHORIZED, format!("invalid token: {why}")),
        Refusal::InsufficientScope(scopes) => (
            StatusCode::FORBIDDEN,
            format!("insufficient scope: the token needs {}", scopes.join(" ")),
        ),
        Refusal::Unavailable(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the token could not be checked: {why}"),
        ),
    };
    // No challenge with 503: the token may be fine; it could not be
    // checked.
    let challenge = (status != StatusCode::SERVICE_UNAVAILABLE)
        .then(|| http::HeaderValue::from_str(&oauth.challenge(refusal)).ok())
        .flatten();
    error_reply(status, &message, challenge)
}

/// `GET` the Protected Resource Metadata (RFC 9728): public, readable from
/// any origin (a browser-based client discovers with it).
fn resource_metadata(oauth: &super::oauth::OAuth, method: &http::Method) -> Response<Body> {
    if method != http::Method::GET {
        return plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed: GET the metadata\n",
        );
    }
    let mut response = Response::new(Full::new(Bytes::from(oauth.metadata().to_string())).boxed());
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    headers.insert(
        http::header::ACCESS_CONTROL_ALLOW_ORIGIN,
        http::HeaderValue::from_static("*"),
    );
    response
}

/// Equal, in time that depends on the lengths only.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    #[test]
    fn token_comparison() {
        assert!(super::constant_time_eq(b"secret", b"secret"));
        assert!(!super::constant_time_eq(b"secret", b"secreT"));
        assert!(!super::constant_time_eq(b"secret", b"secret2"));
    }
}
