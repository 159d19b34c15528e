//! toolgate as an MCP server: every tool call of any MCP client (Claude Code,
//! Codex, Cursor, goose, anything built on an official SDK) passes the
//! nine-point pipeline.
//!
//! Why a crate of its own: the server is an edge of the runtime (the
//! `toolgate` library), not part of it — an embedder that hands the
//! model's calls to [`toolgate::Toolgate`] itself builds no listener, no
//! MCP server and no console. It uses the runtime only through its public
//! API; the runtime knows nothing of it.
//!
//! Why these pieces:
//!
//! * [`projection`] — what a client (and through it the model) sees of a
//!   tool. The same projection feeds `toolgate tools` and MCP `tools/list`,
//!   so the two can never disagree: name, description, input schema, the
//!   MCP annotation hints the tool claims, and its output schema.
//! * [`server`] — the MCP handler (the official Rust SDK, `rmcp`, speaks
//!   the protocol: handshake, version negotiation, cancellation, progress).
//!   `tools/call` runs through [`toolgate::scheduler::Arrivals`] exactly as
//!   `toolgate run` runs a turn, and the record maps to MCP content,
//!   `isError`, `structuredContent` and `_meta`.
//! * [`approval`] — an `ask` goes to the client that made the call, as an
//!   MCP elicitation, when it declared the capability; with the host's
//!   approval queue, a stateless client's call is parked and retried, or
//!   followed as a task ([`tasks`]: the Tasks extension).
//! * [`stdio`] — a transport of our own for stdin/stdout: bounded frames,
//!   a JSON-RPC error for every bad frame, a bounded number of requests in
//!   flight and a bounded output queue, and a disconnect that cancels
//!   every call at once. The SDK's own line transport drops oversized and
//!   unparsable frames without an answer and keeps no bound on requests.
//! * [`http`] — streamable HTTP: the SDK's tower service behind a listener
//!   of ours that refuses a non-loopback bind without a bearer token,
//!   checks `Host` and `Origin` (DNS rebinding), and bounds connections,
//!   sessions, header and body sizes and times, each client to its share
//!   ([`peer`] says who a client is). [`session`] makes an HTTP session's
//!   end cancel its calls at once, and ends sessions that are never used.
//!
//! * [`harness`] — arguments an agent harness adds to every call (Gemini
//!   CLI's `wait_for_previous`), stripped where the operator accepts them.
//!
//! * [`questions`] — `ask_user_question` as one form elicitation (the
//!   options a titled enum, each with an optional answer in the user's
//!   own words), its answer checked against what was asked.
//!
//! * [`passthrough`] — bridged servers' resources and prompts, for the
//!   servers the session's scope sees; each resource read is audited.
//!
//! * [`skills`] — the host's skills as prompts (`prompts/list`,
//!   `prompts/get`), while a scope sees the `skill` tool.
//!
//! * [`exact`] — the letter of the protocol where the SDK answers loosely:
//!   JSON-RPC errors for bad HTTP bodies, batches (2025-03-26 only), exact
//!   error messages, on both transports. (The CLI's logging, `quiet.rs`
//!   in `toolgate-cli`, logs the SDK's expected events — a cancel by
//!   closing a stream — at debug, not as errors.)
//!
//! * [`health`] — `/healthz` and `/readyz` on the HTTP listener, and the
//!   drain a SIGTERM begins ([`health::Stop`]).
//!
//! * `console` — the approval console (its page and API under `/console`,
//!   or on an address of its own), over the host's approval queue. It is
//!   the cargo feature `console`, on by default (the CLI builds it):
//!   without it the module, `http::bind_console` and
//!   `HttpOptions::console` do not exist, and `/console` on the MCP
//!   listener answers 404 saying the server was built without it.
//!
//! Limits are in [`Limits`], each with the threat it answers and its
//! default; `toolgate serve` exposes every one as a flag.

pub mod approval;
#[cfg(feature = "console")]
pub mod console;
pub mod exact;
pub mod harness;
pub mod health;
pub mod http;
pub mod link;
pub mod oauth;
pub mod passthrough;
pub mod peer;
pub mod projection;
pub mod questions;
pub mod server;
pub mod session;
pub mod skills;
pub mod stdio;
pub mod tasks;

use std::time::Duration;

pub use server::ToolgateServer;

/// Default of [`Limits::max_message_bytes`]: 8 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

/// Default of [`Limits::max_connections`]: 256.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// Default of [`Limits::max_sessions`]: 64.
pub const DEFAULT_MAX_SESSIONS: usize = 64;

/// Default of [`Limits::body_timeout`]: 30 s.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// Default of [`Limits::session_unused_idle`]: 30 s.
pub const DEFAULT_SESSION_UNUSED_IDLE: Duration = Duration::from_secs(30);
/// How long a draining `serve --http` (SIGTERM) waits for the MCP requests
/// in flight to be answered before it cancels what is left
/// (`--drain-timeout-ms`; see [`health`]).
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a `serve --http` given SIGTERM answers 503 on `/readyz` while
/// still serving, before it drains (`--drain-grace-ms`; see [`health`]):
/// none by default — set it above the balancer's health-check interval ×
/// its failures to mark a server down.
pub const DEFAULT_DRAIN_GRACE: Duration = Duration::ZERO;
/// The longest `--drain-grace-ms` accepted: 60 s (a longer grace only
/// delays the stop; an orchestrator's kill timeout is usually 30 s).
pub const MAX_DRAIN_GRACE: Duration = Duration::from_secs(60);

/// One client's default share of the HTTP connections and of the sessions:
/// a quarter of the total ([`client_share`]).
pub const CLIENT_SHARE_DIVISOR: usize = 4;

/// One client's default share of `total`: a [`CLIENT_SHARE_DIVISOR`]th,
/// rounded up, at least 1.
pub fn client_share(total: usize) -> usize {
    total.div_ceil(CLIENT_SHARE_DIVISOR).max(1)
}

/// Bounds on what a client can make the server hold.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest JSON-RPC message accepted (a stdio line, an HTTP body). A
    /// larger one gets an error and is discarded as it is read, never
    /// buffered whole. Default [`DEFAULT_MAX_MESSAGE_BYTES`]
    /// (`--max-message-bytes`).
    pub max_message_bytes: usize,
    /// Tool calls waiting or running at once, per scheduler (one per
    /// session; one shared by stateless requests). Beyond it a call is refused at once
    /// with a JSON-RPC error: a flood costs a refusal each, not memory.
    /// Default [`toolgate::scheduler::arrivals::DEFAULT_MAX_QUEUED`]
    /// (`--max-queued-calls`).
    pub max_queued_calls: usize,
    /// Requests of one stdio client read and not yet answered (every kind,
    /// not only calls). Beyond it the request is answered with an error
    /// without being dispatched. Default: `max_queued_calls` + 16.
    pub max_in_flight: usize,
    /// Messages waiting to be written to one stdio client. When the client
    /// does not read, the queue fills and the server stops reading from it
    /// (its requests wait in the pipe, not in our memory). Default 64.
    pub max_output_queue: usize,
    /// HTTP connections open at once; more are closed on accept. Default 256.
    pub max_connections: usize,
    /// HTTP sessions alive at once (each holds a client's state until it
    /// ends it, or `session_idle` passes). More are refused. Default 64.
    pub max_sessions: usize,
    /// An HTTP session with no request for this long is closed (its calls
    /// cancelled). Default 5 minutes.
    pub session_idle: Duration,
    /// Time a client may take to send an HTTP request's headers (slowloris).
    /// Default 10 s.
    pub header_timeout: Duration,
    /// Time a client may take to send an HTTP request's body, from the end
    /// of its headers; a slower one gets 408 and the connection is closed
    /// (bodies trickled to hold connections). Default
    /// [`DEFAULT_BODY_TIMEOUT`] (`--body-timeout-ms`).
    pub body_timeout: Duration,
    /// HTTP connections one client ([`peer::Client`]: a local user, or a
    /// remote address) may hold at once; more of its connections are closed
    /// on accept, the others' are not. Default a quarter of
    /// `max_connections` (64) (`--max-connections-per-client`).
    pub max_connections_per_client: usize,
    /// HTTP sessions (and stateless requests in flight) one client may
    /// hold at once; more get 503. Default a quarter of `max_sessions` (16)
    /// (`--max-sessions-per-client`).
    pub max_sessions_per_client: usize,
    /// An HTTP session that has sent no request besides `initialize` and
    /// `ping` for this long after it opened is closed: a slot taken and
    /// never used is given back soon, not after `session_idle`. Default
    /// [`DEFAULT_SESSION_UNUSED_IDLE`] (`--unused-session-idle-ms`).
    pub session_unused_idle: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        let max_queued_calls = toolgate::scheduler::arrivals::DEFAULT_MAX_QUEUED;
        Limits {
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_queued_calls,
            max_in_flight: max_queued_calls + 16,
            max_output_queue: 64,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_sessions: DEFAULT_MAX_SESSIONS,
            session_idle: Duration::from_secs(300),
            header_timeout: Duration::from_secs(10),
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_connections_per_client: client_share(DEFAULT_MAX_CONNECTIONS),
            max_sessions_per_client: client_share(DEFAULT_MAX_SESSIONS),
            session_unused_idle: DEFAULT_SESSION_UNUSED_IDLE,
        }
    }
}
