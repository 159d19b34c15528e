//! Liveness, readiness and draining for `toolgate serve --http`: what a
//! load balancer in front of several replicas needs to route around one
//! that starts, reloads or stops.
//!
//! * `GET /healthz`: 200 while the process serves (liveness).
//! * `GET /readyz`: 200 when this replica takes calls — its plugins are
//!   loaded (the start's background loading has settled) and no policy
//!   that failed to load blocks the generation — and it is not draining;
//!   503 otherwise. The body says which generation it serves, and why not
//!   when it is not ready.
//!
//! Neither needs the bearer token or a `Host` the server names: a
//! balancer's probe knows neither, and the answer holds nothing but the
//! generation number.
//!
//! **Leaving** (SIGTERM with `--drain-grace-ms`): `/readyz` answers 503
//! first while everything else goes on — the listener accepts, requests
//! are served — so that a balancer's health check marks the replica down
//! and stops sending it requests *before* its listener closes. Without
//! it a balancer learns of the drain from refused connections, and a
//! request it sends on a kept-alive connection just as the replica closes
//! it can be lost in between (HAProxy does not resend a request it
//! already sent).
//!
//! **Draining** (SIGTERM, `serve --http`, after the grace): the listener stops accepting,
//! `/readyz` answers 503, every open connection takes no request after
//! the one it serves, and the server waits until every MCP `POST` in
//! flight has its answer written ([`InFlight`]), at most `--drain-timeout-ms`;
//! only then are the calls still running cancelled. A `GET` stream
//! (notifications, `subscriptions/listen`) is not waited for: it has no
//! end to wait for, and a client reopens it on another replica.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// The liveness probe's path.
pub const HEALTHZ: &str = "/healthz";
/// The readiness probe's path.
pub const READYZ: &str = "/readyz";

type Body = BoxBody<Bytes, std::convert::Infallible>;

/// How serving ends. `leaving` first (`/readyz` says 503, all else goes
/// on: the balancer's grace), then `drain` (stop accepting, finish what is
/// in flight), then `shutdown` (cancel what is left and return).
/// Cancelling `shutdown` alone does both at once.
#[derive(Clone, Debug, Default)]
pub struct Stop {
    pub leaving: CancellationToken,
    pub drain: CancellationToken,
    pub shutdown: CancellationToken,
}

impl Stop {
    /// `/readyz` says 503: leaving, draining or shut down.
    pub fn unready(&self) -> bool {
        self.leaving.is_cancelled() || self.draining()
    }

    /// Draining or shut down.
    pub fn draining(&self) -> bool {
        self.drain.is_cancelled() || self.shutdown.is_cancelled()
    }

    /// Resolves when draining begins (or shutdown, which implies it).
    pub async fn drain_begun(&self) {
        tokio::select! {
            _ = self.drain.cancelled() => {}
            _ = self.shutdown.cancelled() => {}
        }
    }
}

/// MCP `POST` requests whose answer is not yet written: counted from the
/// request until its response body (a JSON answer or the request's SSE
/// stream, which ends after the answer) has been written and dropped.
#[derive(Clone, Debug, Default)]
pub struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    /// Requests in flight now.
    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }

    /// One request in flight, until the [`Held`] is dropped or its
    /// response's body is.
    pub(super) fn enter(&self) -> Held {
        self.0.fetch_add(1, Ordering::SeqCst);
        Held(self.0.clone())
    }

    /// Wait until no request is in flight, at most `within`; the count
    /// left (0: all answered).
    pub async fn settle(&self, within: Duration) -> usize {
        let deadline = Instant::now() + within;
        loop {
            let left = self.count();
            if left == 0 || Instant::now() >= deadline {
                return left;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A request's place in [`InFlight`].
pub(super) struct Held(Arc<AtomicUsize>);

impl Held {
    /// Keep the place until `response`'s body has been written and dropped.
    pub(super) fn hold(self, response: Response<Body>) -> Response<Body> {
        response.map(|inner| Counted { inner, _held: self }.boxed())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A response body that holds its request's place in [`InFlight`].
struct Counted {
    inner: Body,
    _held: Held,
}

impl HttpBody for Counted {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Whether `server`'s host takes calls now, and which generation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Readiness {
    /// The generation calls run against now.
    pub generation: u64,
    /// The start's (or a reload's) loading has settled.
    pub loaded: bool,
    /// Plugins that failed to load and might be policies: while any is
    /// listed the generation refuses every call.
    pub blocked: usize,
}

/// The answer to `path` if it is a probe's, else `None`.
pub(super) fn answer(
    path: &str,
    method: &http::Method,
    readiness: &dyn Fn() -> Readiness,
    stop: &Stop,
) -> Option<Response<Body>> {
    if path != HEALTHZ && path != READYZ {
        return None;
    }
    if method != http::Method::GET && method != http::Method::HEAD {
        let mut response = json_response(
            StatusCode::METHOD_NOT_ALLOWED,
            json!({"error": format!("{path} answers GET and HEAD")}),
        );
        response.headers_mut().insert(
            http::header::ALLOW,
            http::HeaderValue::from_static("GET, HEAD"),
        );
        return Some(response);
    }
    if path == HEALTHZ {
        return Some(json_response(StatusCode::OK, json!({"status": "ok"})));
    }
    let r = readiness();
    let reason = if stop.unready() {
        Some("draining: this replica is stopping".to_string())
    } else if !r.loaded {
        Some("loading plugins".to_string())
    } else if r.blocked > 0 {
        Some(format!(
            "{} plugin(s) that may be policies failed to load; every call is refused (see `toolgate plugins`)",
            r.blocked
        ))
    } else {
        None
    };
    let (status, body) = match reason {
        None => (
            StatusCode::OK,
            json!({"ready": true, "generation": r.generation}),
        ),
        Some(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"ready": false, "generation": r.generation, "reason": reason}),
        ),
    };
    Some(json_response(status, body))
}

fn json_response(status: StatusCode, body: serde_json::Value) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string() + "\n")).boxed());
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    headers.insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    response
}
