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
//!   which browsers send, must be in the allowlist (by default none: a
//!   browser page cannot talk to the server at all; `--allow-origin` adds
//!   one). Both answer 403.
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
use std::path::{Path, PathBuf};
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
use tokio_util::sync::CancellationToken;

use super::Limits;
use super::peer::{self, Client};
use super::server::{Slot, ToolgateServer};
use super::session::Sessions;

/// The path the MCP endpoint is served at.
pub const PATH: &str = "/mcp";

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
}

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token itself.
        f.debug_struct("HttpOptions")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("allow_hosts", &self.allow_hosts)
            .field("allow_origins", &self.allow_origins)
            .finish()
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
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// Why a bearer token could not be read or made.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error(
        "no place for the HTTP bearer token: none of TOOLGATE_STATE_DIR, XDG_STATE_HOME, HOME \
         is set; give one with --token-file FILE"
    )]
    NoStateDir,
    #[error("the token file {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the token in {path} must be one line of at least {MIN_TOKEN_LEN} characters without spaces"
    )]
    Malformed { path: PathBuf },
    #[error(
        "the token file {path} is readable or writable by other users (mode {mode:o}); `chmod 600` it"
    )]
    Loose { path: PathBuf, mode: u32 },
    #[error(
        "the token file {path} belongs to uid {owner}, not to this user ({me}): \
         another user could read or change it"
    )]
    Owner { path: PathBuf, owner: u32, me: u32 },
    #[error("cannot make a random token: {0}")]
    Random(#[source] std::io::Error),
}

/// Shortest bearer token accepted.
pub const MIN_TOKEN_LEN: usize = 16;

/// Where the token is generated when `--token-file` is not given:
/// `serve-token` in the host's state directory ([`crate::state`]:
/// `$TOOLGATE_STATE_DIR`, else `$XDG_STATE_HOME/toolgate`, else
/// `~/.local/state/toolgate`), which is hidden from everything the host
/// runs.
pub fn default_token_path() -> Result<PathBuf, TokenError> {
    let state = crate::state::default_dir()
        .filter(|p| p.is_absolute())
        .ok_or(TokenError::NoStateDir)?;
    Ok(state.join("serve-token"))
}

/// The token in `path`, or a new one written there if there is no file
/// (`true`: it was made now). The file must be this user's and not
/// readable or writable by anyone else; a new one is made with mode 600
/// (its directory, when made, 700), never through a symlink.
pub fn load_or_create_token(path: &Path) -> Result<(String, bool), TokenError> {
    use std::io::{Read, Write};
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
    let io = |source| TokenError::Io {
        path: path.to_path_buf(),
        source,
    };
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path);
    let file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(io)?;
            }
            let mut bytes = [0u8; 32];
            std::fs::File::open("/dev/urandom")
                .and_then(|mut r| r.read_exact(&mut bytes))
                .map_err(TokenError::Random)?;
            let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            let mut file = match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(path)
            {
                Ok(file) => file,
                // Another server made it meanwhile: use that one.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    std::thread::sleep(std::time::Duration::from_millis(100));
                    return load_or_create_token(path);
                }
                Err(e) => return Err(io(e)),
            };
            file.write_all(format!("{token}\n").as_bytes())
                .and_then(|()| file.sync_all())
                .map_err(io)?;
            return Ok((token, true));
        }
        Err(e) => return Err(io(e)),
    };
    // The opened file's own metadata: no window between check and read.
    let meta = file.metadata().map_err(io)?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(TokenError::Owner {
            path: path.to_path_buf(),
            owner: meta.uid(),
            me,
        });
    }
    if meta.mode() & 0o077 != 0 {
        return Err(TokenError::Loose {
            path: path.to_path_buf(),
            mode: meta.mode() & 0o777,
        });
    }
    let mut text = String::new();
    file.take(4096).read_to_string(&mut text).map_err(io)?;
    let token = text.trim();
    if token.len() < MIN_TOKEN_LEN || token.contains(char::is_whitespace) {
        return Err(TokenError::Malformed {
            path: path.to_path_buf(),
        });
    }
    Ok((token.to_string(), false))
}

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
        let sessions = Sessions::new(limits.session_idle, limits.session_unused_idle);
        let session_shares = Shares::new(
            "sessions",
            limits.max_sessions,
            limits.max_sessions_per_client,
        );
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
            Arc::new(sessions),
            config,
        );
        let token: Option<Arc<[u8]>> = self.options.token.as_deref().map(|t| t.as_bytes().into());
        let connections = Shares::new(
            "connections",
            limits.max_connections,
            limits.max_connections_per_client,
        );
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
            // The accepted socket's own address (the listener's may be
            // 0.0.0.0): the client's socket is connected to it.
            let client = match stream.local_addr() {
                Ok(local) => peer::identify(peer, local),
                Err(_) => Client::Addr(peer.ip()),
            };
            let permit = match connections.take(client) {
                Ok(permit) => permit,
                Err(full) => {
                    refused(&connections, client, full);
                    drop(stream);
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let route = Route {
                service: service.clone(),
                token: token.clone(),
                sessions: session_shares.clone(),
                client,
                limits,
            };
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                let route = Arc::new(route);
                let handler = service_fn(move |request: Request<Incoming>| {
                    let route = route.clone();
                    async move { Ok::<_, Infallible>(route.handle(request).await) }
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
    sessions: Arc<Shares>,
    client: Client,
    limits: Limits,
}

impl Route {
    async fn handle(&self, request: Request<Incoming>) -> Response<Body> {
        if request.uri().path() != PATH {
            return plain(
                StatusCode::NOT_FOUND,
                "not found: the MCP endpoint is /mcp\n",
            );
        }
        if let Some(expected) = &self.token {
            let given = request
                .headers()
                .get(http::header::AUTHORIZATION)
                .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
            if !given.is_some_and(|g| constant_time_eq(g, expected)) {
                tracing::debug!(client = %self.client, "request without the bearer token; 401");
                return unauthorized();
            }
        }
        // The body, whole, within the deadline and the size bound: a body
        // trickled to hold the connection ends at the deadline.
        let (parts, body) = request.into_parts();
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
        let request = Request::from_parts(parts, Full::new(body));
        // Host and Origin are checked by the service (403), with the lists
        // configured in `serve`.
        OPENING
            .scope(Mutex::new(opening), self.service.handle(request))
            .await
    }
}

/// 401: the header RFC 6750 asks for, a JSON-RPC error for MCP clients,
/// and the connection closed (an unauthenticated client holds nothing).
fn unauthorized() -> Response<Body> {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {
            "code": -32001,
            "message": "unauthorized: send `Authorization: Bearer <token>` (the token of `toolgate serve`)"
        }
    });
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *response.status_mut() = StatusCode::UNAUTHORIZED;
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    headers.insert(
        http::header::WWW_AUTHENTICATE,
        http::HeaderValue::from_static("Bearer realm=\"toolgate\""),
    );
    closing(response)
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
