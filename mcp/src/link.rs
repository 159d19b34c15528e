//! The MCP client of a call, for what a bridged server asks of it while the
//! call runs ([`toolgate::call::ClientLink`]).
//!
//! A bridged server may ask its client — toolgate — for input from the
//! user (`elicitation/create`) or a completion from the model
//! (`sampling/createMessage`), and report progress. toolgate has no user
//! or model of its own: the one that has them is the client whose call
//! reached the server. So each call of a session carries a [`SessionLink`]
//! to that client, and the bridge forwards what the operator lets each
//! server ask (`[mcp.servers.NAME] elicitation`, `sampling`: off by
//! default) through it.
//!
//! What a client cannot do is said at once, never waited on: a client that
//! did not declare the capability, or a stateless (2026-07-28) request, to
//! which a server cannot send requests. Progress goes on only when the
//! client asked for progress (its `progressToken`), as a fraction of the
//! call (the server's `progress / total`), and only forward: the
//! specification wants each notification's progress above the last, and
//! the call's own "started" was 0.

use std::sync::Mutex;

use async_trait::async_trait;
use rmcp::model::{ElicitRequestParams, ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RoleServer};
use serde_json::Value;

/// One call's client (see the module docs).
#[derive(Debug)]
pub struct SessionLink {
    peer: Peer<RoleServer>,
    /// The client's `progressToken` for this call, if it asked for progress.
    progress_token: Option<ProgressToken>,
    /// The request is stateless (2026-07-28): no requests to the client.
    stateless: bool,
    /// The last progress sent (the fraction of the call).
    sent: Mutex<f64>,
}

impl SessionLink {
    pub fn new(
        peer: Peer<RoleServer>,
        progress_token: Option<ProgressToken>,
        stateless: bool,
    ) -> Self {
        SessionLink {
            peer,
            progress_token,
            stateless,
            sent: Mutex::new(0.0),
        }
    }

    /// Why the client cannot be sent `what` (a capability it lacks, or a
    /// stateless request), if it cannot.
    fn refusal(&self, what: &str, declared: bool) -> Option<String> {
        let client = self
            .peer
            .peer_info()
            .map(|i| i.client_info.name.clone())
            .unwrap_or_else(|| "the client".into());
        if self.stateless {
            return Some(format!(
                "the call came as a stateless (2026-07-28) request: a server cannot send {client} a request ({what})"
            ));
        }
        (!declared).then(|| format!("{client} did not declare `{what}`: it cannot be asked"))
    }
}

#[async_trait]
impl toolgate::call::ClientLink for SessionLink {
    async fn elicit(&self, params: Value) -> Result<Value, String> {
        let declared = self
            .peer
            .peer_info()
            .is_some_and(|i| i.capabilities.elicitation.is_some());
        if let Some(why) = self.refusal("elicitation", declared) {
            return Err(why);
        }
        let params: ElicitRequestParams = serde_json::from_value(params)
            .map_err(|e| format!("not an elicitation request: {e}"))?;
        let result = self
            .peer
            .create_elicitation(params)
            .await
            .map_err(|e| format!("the client's elicitation failed: {e}"))?;
        serde_json::to_value(result).map_err(|e| e.to_string())
    }

    // Sampling is deprecated from 2026-07-28 on (SEP-2577); the sessions
    // that can be sent it (2025 revisions) still have it, and it goes on
    // only where the operator lets a server ask for it.
    #[allow(deprecated)]
    async fn sample(&self, params: Value) -> Result<Value, String> {
        let sampling = self
            .peer
            .peer_info()
            .and_then(|i| i.capabilities.sampling.clone());
        if let Some(why) = self.refusal("sampling", sampling.is_some()) {
            return Err(why);
        }
        // A request with tools (a sub-agent's turn) only to a client that
        // said it takes them.
        if params.get("tools").is_some() && sampling.is_some_and(|s| s.tools.is_none()) {
            let client = self
                .peer
                .peer_info()
                .map(|i| i.client_info.name.clone())
                .unwrap_or_else(|| "the client".into());
            return Err(format!(
                "{client} declared `sampling` without `tools`: it cannot run a sub-agent's turn"
            ));
        }
        let params: rmcp::model::CreateMessageRequestParams =
            serde_json::from_value(params).map_err(|e| format!("not a sampling request: {e}"))?;
        let result = self
            .peer
            .create_message(params)
            .await
            .map_err(|e| format!("the client's sampling failed: {e}"))?;
        serde_json::to_value(result).map_err(|e| e.to_string())
    }

    async fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        let Some(token) = &self.progress_token else {
            return;
        };
        // A fraction of the call; without a total, no place in it.
        let Some(total) = total.filter(|t| t.is_finite() && *t > 0.0) else {
            return;
        };
        let fraction = (progress / total).clamp(0.0, 1.0);
        {
            let mut sent = self.sent.lock().unwrap_or_else(|p| p.into_inner());
            if !fraction.is_finite() || fraction <= *sent {
                return;
            }
            *sent = fraction;
        }
        let mut param = ProgressNotificationParam::new(token.clone(), fraction);
        param.total = Some(1.0);
        param.message = message.map(|m| toolgate::budgets::cut(m, PROGRESS_MESSAGE_BYTES));
        if let Err(e) = self.peer.notify_progress(param).await {
            tracing::debug!(error = %e, "could not pass a bridged server's progress on");
        }
    }
}

/// The longest progress message passed on from a bridged server, in bytes.
pub const PROGRESS_MESSAGE_BYTES: usize = 1024;
