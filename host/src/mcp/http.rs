//! MCP over streamable HTTP (`toolgate serve --http ADDR`), at `/mcp`.
//!
//! The protocol (sessions, SSE streams, resumption, the stateless
//! revision) is the SDK's tower service; this module is the listener in
//! front of it, because a tool host on a port is an attack surface:
//!
//! * **Bind**: loopback by default. A non-loopback address is refused unless
//!   a bearer token is configured (`--token-file`): tools that read files
//!   and run commands are not offered to a network unauthenticated.
//! * **Bearer token**: with one, every request must carry
//!   `Authorization: Bearer <token>` (compared in constant time), else 401.
//! * **DNS rebinding**: a web page can make a browser send requests to
//!   `127.0.0.1` under a name the attacker controls. So the `Host` header
//!   must name this server (by default `localhost`, `127.0.0.1`, `[::1]` or
//!   the bound address; more with `--allow-host`), and an `Origin` header,
//!   which browsers send, must be in the allowlist (by default none: a
//!   browser page cannot talk to the server at all; `--allow-origin` adds
//!   one). Both answer 403.
//! * **Bounds**: connections at once ([`Limits::max_connections`]; more are
//!   closed on accept), sessions at once ([`Limits::max_sessions`]; a
//!   request that would open one more gets 503 with `Retry-After`), idle
//!   sessions closed ([`Limits::session_idle`], their calls cancelled),
//!   headers in [`Limits::header_timeout`] and 64 KiB, bodies of at most
//!   [`Limits::max_message_bytes`] (413).
//!
//! A client that drops a connection does not cancel its calls (the
//! protocol lets it resume the stream); `notifications/cancelled`, ending
//! the session (`DELETE`), or its idle timeout does — at once
//! ([`super::session`]).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::Limits;
use super::server::{Slot, ToolgateServer};
use super::session::Sessions;

/// The path the MCP endpoint is served at.
pub const PATH: &str = "/mcp";

/// Largest request head (request line and headers) accepted.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// What `--http` was given besides the address.
#[derive(Clone, Debug, Default)]
pub struct HttpOptions {
    /// The bearer token every request must carry, if any.
    pub token: Option<String>,
    /// `Host` values accepted besides the loopback names and the bound
    /// address (`--allow-host`).
    pub allow_hosts: Vec<String>,
    /// `Origin` values accepted (`--allow-origin`); none by default.
    pub allow_origins: Vec<String>,
}

/// Why the HTTP server could not start.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error(
        "refusing to serve on {addr}, which is not a loopback address, without a bearer token: \
         give one with --token-file FILE (clients then send `Authorization: Bearer <token>`), \
         or bind 127.0.0.1"
    )]
    Unauthenticated { addr: SocketAddr },
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// A bound listener, ready to serve.
pub struct Listener {
    listener: TcpListener,
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
    Ok(Listener { listener, options })
}

impl Listener {
    /// The address bound (the port, when 0 was asked).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serve until `shutdown` is cancelled. `server` is the prototype every
    /// session is made from.
    pub async fn serve(self, server: ToolgateServer, limits: Limits, shutdown: CancellationToken) {
        let local = self.listener.local_addr().ok();
        let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
        if let Some(addr) = local
            && !addr.ip().is_unspecified()
        {
            hosts.push(addr.ip().to_string());
        }
        hosts.extend(self.options.allow_hosts.iter().cloned());
        let config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(hosts)
            .with_allowed_origins(self.options.allow_origins.clone())
            .enforce_origin_validation()
            .with_max_request_body_bytes(limits.max_message_bytes)
            .with_cancellation_token(shutdown.child_token());
        let mut sessions = Sessions::default();
        sessions.0.session_config.keep_alive = Some(limits.session_idle);
        let live = Arc::new(AtomicUsize::new(0));
        let max_sessions = limits.max_sessions;
        let sessions_live = live.clone();
        let service = StreamableHttpService::new(
            move || match Slot::take(&live, max_sessions) {
                Some(slot) => Ok(server.for_session(Some(slot))),
                None => {
                    tracing::warn!(max_sessions, "too many sessions; refused");
                    Err(std::io::Error::other(format!(
                        "too many sessions ({max_sessions}); end one or retry later"
                    )))
                }
            },
            Arc::new(sessions),
            config,
        );
        let token: Option<Arc<[u8]>> = self.options.token.as_deref().map(|t| t.as_bytes().into());
        let connections = Arc::new(Semaphore::new(limits.max_connections.max(1)));
        loop {
            let accepted = tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                accepted = self.listener.accept() => accepted,
            };
            let (stream, peer) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors, mostly: wait a little, go on.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Ok(permit) = connections.clone().try_acquire_owned() else {
                tracing::warn!(%peer, "too many connections; closed");
                drop(stream);
                continue;
            };
            let _ = stream.set_nodelay(true);
            let service = service.clone();
            let token = token.clone();
            let shutdown = shutdown.clone();
            let full = SessionCount {
                live: sessions_live.clone(),
                max: max_sessions,
            };
            tokio::spawn(async move {
                let handler = service_fn(move |request: Request<Incoming>| {
                    let service = service.clone();
                    let token = token.clone();
                    let full = full.clone();
                    async move {
                        Ok::<_, Infallible>(route(&service, token.as_deref(), &full, request).await)
                    }
                });
                let connection = http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(limits.header_timeout)
                    .max_buf_size(MAX_HEAD_BYTES)
                    .serve_connection(TokioIo::new(stream), handler);
                tokio::pin!(connection);
                tokio::select! {
                    result = connection.as_mut() => {
                        if let Err(e) = result {
                            tracing::debug!(%peer, error = %e, "connection ended with an error");
                        }
                    }
                    _ = shutdown.cancelled() => connection.as_mut().graceful_shutdown(),
                }
                drop(permit);
            });
        }
    }
}

type Body = BoxBody<Bytes, Infallible>;

/// How many sessions are alive, against the limit.
#[derive(Clone)]
struct SessionCount {
    live: Arc<AtomicUsize>,
    max: usize,
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

async fn route(
    service: &StreamableHttpService<ToolgateServer, Sessions>,
    token: Option<&[u8]>,
    full: &SessionCount,
    request: Request<Incoming>,
) -> Response<Body> {
    if request.uri().path() != PATH {
        return plain(
            StatusCode::NOT_FOUND,
            "not found: the MCP endpoint is /mcp\n",
        );
    }
    if let Some(expected) = token {
        let given = request
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
        if !given.is_some_and(|g| constant_time_eq(g, expected)) {
            let mut response = plain(
                StatusCode::UNAUTHORIZED,
                "unauthorized: send `Authorization: Bearer <token>`\n",
            );
            response.headers_mut().insert(
                http::header::WWW_AUTHENTICATE,
                http::HeaderValue::from_static("Bearer"),
            );
            return response;
        }
    }
    // A request outside a session opens one (or is served statelessly):
    // refused while every slot is taken. (The session factory refuses too,
    // as a last resort, with a 500.)
    if request.method() == http::Method::POST
        && !request.headers().contains_key("mcp-session-id")
        && full.live.load(std::sync::atomic::Ordering::Relaxed) >= full.max
    {
        tracing::debug!(max = full.max, "too many sessions; refused");
        let mut response = plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many sessions: end one (DELETE) or retry later\n",
        );
        response.headers_mut().insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("1"),
        );
        return response;
    }
    // Host and Origin are checked by the service (403), with the lists
    // configured in `serve`.
    service.handle(request).await
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
