//! The body of a bridged tool: a `tools/call` to the server.
//!
//! One [`BridgedTools`] serves every tool of one listing of one server
//! connection. A listing is a generation of that server's tools: a new
//! listing (`notifications/tools/list_changed`, a reconnect) makes a new
//! `BridgedTools`, and a call keeps the one it started with.
//!
//! * The call's signal (the caller's cancellation fused with every deadline)
//!   is forwarded: when it fires, the pipeline drops the body's future, and
//!   dropping an unanswered request sends `notifications/cancelled` to the
//!   server with the reason (`deadline exceeded` or `cancelled by the
//!   caller`).
//! * `isError: true` becomes a failure carrying the server's text
//!   (`MCP_TOOL_ERROR`); a JSON-RPC error one carrying its message and code
//!   (`MCP_ERROR`); a server that is down or goes away fails the call naming
//!   the server (`MCP_UNAVAILABLE`).
//! * The canonical value is the result's `structuredContent`; without one,
//!   the content blocks in their MCP shape. The server's content blocks are
//!   the content: [`ToolBody::render`] hands them back for the value the
//!   call produced, and renders a value a post-execute hook put in its place
//!   as JSON text.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use async_trait::async_trait;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam,
    ClientRequest, RequestId, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, ServiceError};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::convert;
use crate::budgets::Budgets;
use crate::call::{CallInfo, CallSignal, Interrupt};
use crate::content::Content;
use crate::tool::{BodyContext, BodyError, ToolBody, ToolFailure};

/// The calls in flight on one connection, by the progress token each
/// gave the server: what the server asks during a call (elicitation,
/// sampling) and the progress it reports go to that call's client
/// (`super::ask`).
#[derive(Default)]
pub struct InFlight {
    calls: Mutex<HashMap<String, Arc<Flight>>>,
}

/// One call in flight on a connection.
pub struct Flight {
    pub call: Arc<CallInfo>,
    /// Requests the server made of the call's client so far.
    pub asked: std::sync::atomic::AtomicUsize,
    /// One request at a time per call: a server cannot queue up questions.
    pub one_at_a_time: tokio::sync::Mutex<()>,
}

impl InFlight {
    /// The call that gave `token`.
    pub fn by_token(&self, token: &str) -> Option<Arc<Flight>> {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(token)
            .cloned()
    }

    /// The one call in flight, if exactly one is: a server's request
    /// carries no sign of the call it is for, so with several none is.
    pub fn only(&self) -> Result<Arc<Flight>, usize> {
        let calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        match calls.len() {
            1 => Ok(calls.values().next().cloned().expect("one")),
            n => Err(n),
        }
    }

    fn enter(self: &Arc<Self>, token: String, call: Arc<CallInfo>) -> Entered {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).insert(
            token.clone(),
            Arc::new(Flight {
                call,
                asked: Default::default(),
                one_at_a_time: Default::default(),
            }),
        );
        Entered {
            in_flight: self.clone(),
            token,
        }
    }
}

/// A call's place in [`InFlight`], given up when the call ends.
struct Entered {
    in_flight: Arc<InFlight>,
    token: String,
}

impl Entered {
    /// File the call under `token` instead.
    fn rekey(&mut self, token: String) {
        let mut calls = self
            .in_flight
            .calls
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(flight) = calls.remove(&self.token) {
            calls.insert(token.clone(), flight);
        }
        self.token = token;
    }
}

/// A progress token as text (the key of [`InFlight`]).
pub fn token_text(token: &rmcp::model::ProgressToken) -> String {
    match &token.0 {
        rmcp::model::NumberOrString::String(s) => s.to_string(),
        rmcp::model::NumberOrString::Number(n) => n.to_string(),
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        self.in_flight
            .calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.token);
    }
}

/// One live connection to a server, shared by the listings made on it.
pub struct Session {
    pub server: String,
    pub peer: Peer<RoleClient>,
    /// Fired when the connection ends.
    pub closed: CancellationToken,
    /// Why it ended, once it has.
    pub why: Mutex<Option<String>>,
    /// The server's egress asking (`[egress] ask = true`, a stdio server
    /// with an `egress` grant): each call marks itself in flight on it,
    /// so that a question names the call when exactly one is.
    pub egress_ask: Option<Arc<crate::egress::ask::ServerAsk>>,
    /// Its calls in flight, for what the server asks during one.
    pub in_flight: Arc<InFlight>,
}

impl Session {
    fn unavailable(&self, during: bool) -> BodyError {
        let why = self
            .why
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .unwrap_or_else(|| "the connection ended".into());
        let message = if during {
            format!(
                "the MCP server `{}` went away during the call ({why}); it is being reconnected",
                self.server
            )
        } else {
            format!(
                "the MCP server `{}` is not available ({why}); it is being reconnected",
                self.server
            )
        };
        failure("McpServerUnavailable", "MCP_UNAVAILABLE", message, None)
    }
}

fn failure(name: &str, code: &str, message: String, details: Option<Value>) -> BodyError {
    BodyError::Failure(ToolFailure {
        name: name.into(),
        code: code.into(),
        message,
        details,
    })
}

/// What a call produced, kept until the pipeline renders it.
struct Produced {
    call: Weak<CallInfo>,
    value: Value,
    content: Vec<Content>,
}

/// The tools of one listing of one server.
pub struct BridgedTools {
    pub session: Arc<Session>,
    /// Public name → raw name.
    pub raw: HashMap<String, String>,
    pub parallel: bool,
    pub budgets: Budgets,
    produced: Mutex<HashMap<u64, Produced>>,
}

impl BridgedTools {
    pub fn new(
        session: Arc<Session>,
        raw: HashMap<String, String>,
        parallel: bool,
        budgets: Budgets,
    ) -> Self {
        BridgedTools {
            session,
            raw,
            parallel,
            budgets,
            produced: Mutex::default(),
        }
    }

    fn keep(&self, call: &Arc<CallInfo>, value: Value, content: Vec<Content>) {
        let mut produced = self.produced.lock().unwrap_or_else(|p| p.into_inner());
        // A call whose result was never rendered (its value failed the
        // output schema) has ended by now: drop what it left.
        produced.retain(|_, p| p.call.strong_count() > 0);
        produced.insert(
            call.token,
            Produced {
                call: Arc::downgrade(call),
                value,
                content,
            },
        );
    }
}

/// Sends `notifications/cancelled` for a request dropped before its answer.
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
    signal: CallSignal,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let reason = match self.signal.fired() {
            Some(Interrupt::DeadlineExceeded) => "deadline exceeded",
            Some(Interrupt::Cancelled) => "cancelled by the caller",
            None => "abandoned by the host",
        };
        let notification = CancelledNotification::new(CancelledNotificationParam::new(
            Some(id),
            Some(reason.into()),
        ));
        let peer = self.peer.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                if let Err(e) = peer.send_notification(notification.into()).await {
                    tracing::debug!(error = %e, "could not forward a cancellation to an MCP server");
                }
            });
        }
    }
}

#[async_trait]
impl ToolBody for BridgedTools {
    fn mcp_server(&self) -> Option<&str> {
        Some(&self.session.server)
    }

    async fn is_concurrency_safe(&self, _call: &Arc<CallInfo>) -> Option<bool> {
        Some(self.parallel)
    }

    async fn execute(&self, call: &Arc<CallInfo>, ctx: BodyContext) -> Result<Value, BodyError> {
        let session = &self.session;
        if session.closed.is_cancelled() {
            return Err(session.unavailable(false));
        }
        let raw = self.raw.get(&call.tool_name).ok_or_else(|| {
            BodyError::Internal(
                format!(
                    "`{}` is not a tool of this listing of `{}`",
                    call.tool_name, session.server
                )
                .into(),
            )
        })?;
        let _in_flight = session
            .egress_ask
            .as_ref()
            .map(|a| a.in_flight(call.clone()));
        let mut params = CallToolRequestParams::new(raw.clone());
        params.arguments = match call.arguments.as_ref() {
            Value::Object(m) => Some(m.clone()),
            _ => None,
        };
        let mut meta = rmcp::model::RequestMetaObject::default();
        // The client's trace context goes on with the call (SEP-414), so
        // the server's spans join the client's trace.
        if let Some(trace) = &call.trace {
            meta.set_traceparent(trace.traceparent.clone());
            if let Some(state) = &trace.tracestate {
                meta.set_tracestate(state.clone());
            }
        }
        params.meta = Some(meta);
        // In flight before the request goes (the server may ask at once);
        // under the progress token the SDK gives the request once it has
        // one, which the server's progress names.
        let mut entered = session
            .in_flight
            .enter(format!("pending-{}", call.token), call.clone());
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = match session
            .peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(h) => h,
            Err(ServiceError::TransportClosed | ServiceError::TransportSend(_)) => {
                return Err(session.unavailable(false));
            }
            Err(e) => return Err(BodyError::Internal(crate::Cause::new(e))),
        };
        entered.rekey(token_text(&handle.progress_token));
        let mut guard = CancelOnDrop {
            peer: session.peer.clone(),
            id: Some(handle.id.clone()),
            signal: ctx.signal.clone(),
        };
        let answer = tokio::select! {
            answer = handle.rx => answer,
            _ = session.closed.cancelled() => {
                guard.id = None;
                return Err(session.unavailable(true));
            }
            // The pipeline also races the body against the signal; this
            // keeps the cancellation's reason exact when it fires here.
            interrupt = ctx.signal.wait() => {
                drop(guard);
                return Err(BodyError::Interrupted(interrupt));
            }
        };
        guard.id = None;
        let result = match answer {
            Err(_) | Ok(Err(ServiceError::TransportClosed)) => {
                return Err(session.unavailable(true));
            }
            Ok(Err(ServiceError::McpError(e))) => {
                return Err(failure(
                    "McpError",
                    "MCP_ERROR",
                    format!(
                        "the MCP server `{}` answered: {}",
                        session.server, e.message
                    ),
                    Some(
                        json!({"server": session.server, "jsonrpcCode": e.code.0, "data": e.data}),
                    ),
                ));
            }
            Ok(Err(e)) => {
                return Err(failure(
                    "McpError",
                    "MCP_ERROR",
                    format!("the MCP server `{}`: {e}", session.server),
                    Some(json!({"server": session.server})),
                ));
            }
            Ok(Ok(ServerResult::CallToolResult(r))) => r,
            Ok(Ok(_)) => {
                return Err(BodyError::InvalidResult(format!(
                    "the MCP server `{}` answered tools/call with something other than a result (tasks and input requests are not supported)",
                    session.server
                ).into()));
            }
        };
        if result.is_error == Some(true) {
            let mut message = convert::error_text(&result);
            let max = self.budgets.max_message_bytes;
            if message.len() > max {
                let mut end = max;
                while !message.is_char_boundary(end) {
                    end -= 1;
                }
                message.truncate(end);
            }
            return Err(failure(
                "McpToolError",
                "MCP_TOOL_ERROR",
                message,
                Some(json!({"server": session.server})),
            ));
        }
        let content = convert::content(result.content, &self.budgets)
            .map_err(|m| BodyError::InvalidResult(m.into()))?;
        let value = match result.structured_content {
            Some(v) => v,
            None => serde_json::to_value(&content).unwrap_or(Value::Null),
        };
        self.keep(call, value.clone(), content);
        Ok(value)
    }

    async fn render(&self, call: &Arc<CallInfo>, value: &Value) -> Result<Vec<Content>, BodyError> {
        let kept = self
            .produced
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&call.token);
        if let Some(p) = kept
            && &p.value == value
        {
            return Ok(p.content);
        }
        // A value a post-execute hook put in place of the server's.
        Ok(vec![match value {
            Value::String(s) => Content::Text(s.clone()),
            v => Content::Text(v.to_string()),
        }])
    }
}
