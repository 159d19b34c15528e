//! What a bridged server asks of its client while a call runs: input from
//! the user (`elicitation/create`), a completion from the model
//! (`sampling/createMessage`), and the progress it reports.
//!
//! toolgate has no user or model of its own; the call's MCP client has
//! them ([`ClientLink`], set by `toolgate serve`). So a server's request
//! goes to the client of the call it is for, and the client's answer back.
//! Which call that is: the server's progress reports name it (each call
//! gives the server a progress token of its own), but its requests carry
//! no sign of the call, so a request is answered only while exactly one
//! call is in flight on the connection — with several, nobody is asked
//! rather than the wrong client's user.
//!
//! The operator decides per server what may be passed on
//! (`[mcp.servers.NAME] elicitation`, `sampling`; both off by default): a
//! server's question reaches a person with the server's own words, and
//! its sampling spends the client's model. A server that asks for what it
//! was not offered, asks outside a call, asks more than
//! [`MAX_ASKS_PER_CALL`] times in one call, or asks a client that cannot
//! answer, gets an error saying so at once. One request per call at a
//! time; each ends with the call (or the server's own cancellation).
//! Each request forwarded is a note in the call's audit record (what was
//! asked, and the client's action).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use rmcp::ErrorData;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::body::{Flight, InFlight};
use crate::call::ClientLink;

/// Most requests a server may make of the client of one call.
pub const MAX_ASKS_PER_CALL: usize = 16;

/// The most of a request's message the audit record's note keeps, in bytes.
pub const NOTE_MESSAGE_BYTES: usize = 1024;

/// What one connection's server may ask, and of whom.
pub struct Asks {
    pub server: String,
    pub in_flight: Arc<InFlight>,
    /// `[mcp.servers.NAME] elicitation`.
    pub elicitation: bool,
    /// `[mcp.servers.NAME] sampling`.
    pub sampling: bool,
}

/// The two kinds of request.
#[derive(Clone, Copy)]
pub enum Kind {
    Elicitation,
    Sampling,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Elicitation => "elicitation",
            Kind::Sampling => "sampling",
        }
    }
}

impl Asks {
    /// Forward one request of `kind` (its params as the server sent them)
    /// to the client of the call in flight; its answer, or why not.
    pub async fn forward(
        &self,
        kind: Kind,
        params: Value,
        cancelled: CancellationToken,
    ) -> Result<Value, ErrorData> {
        let what = kind.name();
        let offered = match kind {
            Kind::Elicitation => self.elicitation,
            Kind::Sampling => self.sampling,
        };
        if !offered {
            return Err(ErrorData::invalid_request(
                format!(
                    "toolgate does not pass {what} requests of `{}` on to its clients \
                     (the operator's `[mcp.servers.{}] {what} = true` would)",
                    self.server, self.server
                ),
                None,
            ));
        }
        let flight = self.flight(what)?;
        let call = &flight.call;
        if flight.asked.fetch_add(1, Ordering::Relaxed) >= MAX_ASKS_PER_CALL {
            return Err(ErrorData::invalid_request(
                format!("a call takes at most {MAX_ASKS_PER_CALL} requests of its client"),
                None,
            ));
        }
        let Some(link) = call.link.clone() else {
            return Err(ErrorData::invalid_request(
                format!(
                    "the call `{}` came from no MCP client that can be asked ({what})",
                    call.tool_name
                ),
                None,
            ));
        };
        let _one = flight.one_at_a_time.lock().await;
        tracing::info!(server = %self.server, tool = %call.tool_name, call = %call.call_id, "passing the server's {what} request on to the call's client");
        let asked = asked(kind, &params);
        let answer = tokio::select! {
            answer = ask(link.as_ref(), kind, params) => answer,
            _ = call.cancel.cancelled() => Err("the call was cancelled".into()),
            _ = cancelled.cancelled() => Err("the server cancelled its request".into()),
        };
        call.notes.push(note(kind, asked, &answer));
        answer.map_err(|why| ErrorData::internal_error(why, None))
    }

    /// A progress report for the call that gave `token`, passed on.
    pub async fn progress(
        &self,
        token: &str,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) {
        let Some(flight) = self.in_flight.by_token(token) else {
            return;
        };
        if let Some(link) = &flight.call.link {
            link.progress(progress, total, message).await;
        }
    }

    fn flight(&self, what: &str) -> Result<Arc<Flight>, ErrorData> {
        self.in_flight.only().map_err(|n| {
            let message = if n == 0 {
                format!("no call is running on this connection: a {what} request is answered only during a call")
            } else {
                format!(
                    "{n} calls are running on this connection and a {what} request does not say which it is for: \
                     nobody is asked rather than the wrong client"
                )
            };
            ErrorData::invalid_request(message, None)
        })
    }
}

async fn ask(link: &dyn ClientLink, kind: Kind, params: Value) -> Result<Value, String> {
    match kind {
        Kind::Elicitation => link.elicit(params).await,
        Kind::Sampling => link.sample(params).await,
    }
}

/// What the audit record's note keeps of a request: its message (cut), or
/// the number of messages to sample.
fn asked(kind: Kind, params: &Value) -> Value {
    match kind {
        Kind::Elicitation => json!(
            params["message"]
                .as_str()
                .map(|m| crate::budgets::cut(m.to_string(), NOTE_MESSAGE_BYTES))
        ),
        Kind::Sampling => json!(params["messages"].as_array().map_or(0, Vec::len)),
    }
}

/// The audit record's note of one forwarded request: what was asked, and
/// the client's action.
fn note(kind: Kind, asked: Value, answer: &Result<Value, String>) -> Value {
    let outcome = match answer {
        Ok(a) => match kind {
            Kind::Elicitation => a["action"].clone(),
            Kind::Sampling => json!("answered"),
        },
        Err(why) => json!({"failed": why}),
    };
    json!({"kind": "server-request", "request": kind.name(), "asked": asked, "outcome": outcome})
}
