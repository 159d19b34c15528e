//! `ask`, answered by the client that made the call.
//!
//! A pre-execute hook that answers `ask` wants a person to decide. Over MCP
//! the person is behind the client, and the protocol has a way to reach
//! them: elicitation. So when the client declared the elicitation
//! capability, its calls get an approver of their own (the turn's
//! [`TurnOptions::approver`](crate::TurnOptions)) that asks it; otherwise the
//! operator's `--approve allow|deny` decides (default deny).
//!
//! The client that answers is the approver: nothing tells a person's
//! answer from the client's own. Where the client is not trusted to
//! approve its own calls, `serve --no-elicitation`
//! ([`ToolgateServer::with_elicitation`](super::ToolgateServer::with_elicitation))
//! never asks it, and `--approve` answers every `ask`.
//!
//! The answer maps fail-closed: `accept` approves, `decline` and `cancel`
//! deny, and anything else — an error, a client that goes away, a
//! malformed answer — denies too (as "nobody could be asked").
//!
//! Two protocol eras, two ways to ask:
//!
//! * a session opened with `initialize` (revisions up to 2025-11-25): the
//!   server sends an `elicitation/create` request and waits for the
//!   answer ([`ElicitingApprover`]);
//! * the stateless revision (2026-07-28): a server cannot send requests, so
//!   the call ends with an `InputRequiredResult` carrying the elicitation,
//!   and the client calls again with the answer in `inputResponses`
//!   ([`RoundTripApprover`]). The retried call goes through the whole
//!   pipeline again (it is a new request; nothing is kept between the two),
//!   and the first attempt is recorded as denied — "approval requested from
//!   the client" — so an audit shows both.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, InputRequests,
};
use rmcp::service::{Peer, RoleServer};
use serde_json::Value;

use crate::pipeline::{ApprovalAnswer, ApprovalRequest, Approver};

/// The key of the approval in `inputRequests` / `inputResponses`.
pub const APPROVAL_INPUT: &str = "toolgate/approval";

/// What the client is asked: the question, the tool, its arguments.
pub fn question(request: &ApprovalRequest) -> String {
    let mut args = request.call.arguments.to_string();
    if args.len() > 2_000 {
        let mut end = 2_000;
        while !args.is_char_boundary(end) {
            end -= 1;
        }
        args.truncate(end);
        args.push('…');
    }
    format!(
        "`{}` asks for approval: {}\n\ntool: {}\narguments: {}\n\nAccept to run the call, decline to refuse it.",
        request.asked_by, request.prompt, request.call.tool_name, args
    )
}

fn params(request: &ApprovalRequest) -> ElicitRequestParams {
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: question(request),
        requested_schema: ElicitationSchema::new(Default::default()),
    }
}

/// What an elicitation answer means for the call.
pub fn answer(result: &ElicitResult) -> ApprovalAnswer {
    match result.action {
        ElicitationAction::Accept => ApprovalAnswer::Approve,
        ElicitationAction::Decline => {
            ApprovalAnswer::Deny("the client declined the elicitation".into())
        }
        ElicitationAction::Cancel => {
            ApprovalAnswer::Deny("the client cancelled the elicitation".into())
        }
        // An action this version does not know: not an approval.
        _ => ApprovalAnswer::Unavailable("the client answered with an unknown action".into()),
    }
}

/// Asks the client with an `elicitation/create` request (sessions opened
/// with `initialize`).
pub struct ElicitingApprover {
    peer: Peer<RoleServer>,
}

impl ElicitingApprover {
    pub fn new(peer: Peer<RoleServer>) -> Self {
        ElicitingApprover { peer }
    }
}

#[async_trait]
impl Approver for ElicitingApprover {
    fn name(&self) -> &str {
        "mcp-elicitation"
    }

    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        // Waits as long as the person takes; the call's cancellation (or
        // the client going away) drops this wait.
        match self.peer.create_elicitation(params(request)).await {
            Ok(result) => answer(&result),
            Err(e) => ApprovalAnswer::Unavailable(format!("the elicitation failed: {e}")),
        }
    }
}

/// Answers from the `inputResponses` of a retried stateless call, or
/// records that the client must be asked (the 2026-07-28 revision).
pub struct RoundTripApprover {
    response: Option<Value>,
    needed: Mutex<Option<InputRequests>>,
}

impl RoundTripApprover {
    /// `response`: what the client sent back under [`APPROVAL_INPUT`], if
    /// anything.
    pub fn new(response: Option<Value>) -> Arc<Self> {
        Arc::new(RoundTripApprover {
            response,
            needed: Mutex::new(None),
        })
    }

    /// The input the client must provide before the call can go on, if the
    /// call asked and there was no answer yet.
    pub fn take_needed(&self) -> Option<InputRequests> {
        self.needed.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

#[async_trait]
impl Approver for RoundTripApprover {
    fn name(&self) -> &str {
        "mcp-elicitation"
    }

    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        match &self.response {
            Some(value) => match serde_json::from_value::<ElicitResult>(value.clone()) {
                Ok(result) => answer(&result),
                Err(e) => ApprovalAnswer::Unavailable(format!(
                    "the client's answer under `{APPROVAL_INPUT}` is not an elicitation result: {e}"
                )),
            },
            None => {
                let mut requests = InputRequests::new();
                requests.insert(
                    APPROVAL_INPUT.to_string(),
                    InputRequest::Elicitation(ElicitRequest::new(params(request))),
                );
                *self.needed.lock().unwrap_or_else(|p| p.into_inner()) = Some(requests);
                ApprovalAnswer::Unavailable(
                    "approval requested from the client; the call runs when it answers".into(),
                )
            }
        }
    }
}
