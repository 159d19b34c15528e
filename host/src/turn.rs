//! A model turn's options: who is calling, how the turn can be cancelled,
//! and who answers an `ask` for its calls.
//!
//! Kept apart from [`crate::call`] (the domain's bottom layer) because it
//! names the approval service.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::approval::Approver;
use crate::call::CallOrigin;
pub use crate::call::Client;

/// Per-turn options: who is calling, and how the turn can be cancelled.
#[derive(Clone, Default)]
pub struct TurnOptions {
    /// The agent scope the calls come from (`""` = global).
    pub agent_scope: String,
    /// Code Mode: direct calls to anything but `run_code` are refused.
    pub code_mode: bool,
    /// The call whose program made these calls (Code Mode), if any.
    pub parent_id: Option<String>,
    /// Cancels the whole turn.
    pub cancel: CancellationToken,
    /// Who answers an `ask` for the calls of this turn, instead of the
    /// host's approver: a server with several clients asks each client
    /// about its own calls (`toolgate serve`: an MCP elicitation).
    pub approver: Option<Arc<dyn Approver>>,
    /// Who sent the calls, as the audit record names it (`toolgate
    /// serve`: the MCP client's transport, session and name).
    pub client: Option<Arc<Client>>,
    /// Who is calling, validated (`[auth]`): what policies read, and what
    /// `[[access]]` decides by. A program's calls (Code Mode) carry their
    /// parent's.
    pub caller: Option<Arc<crate::identity::Caller>>,
    /// The MCP client, for what a bridged server asks of it during a call
    /// (see [`crate::call::ClientLink`]). A program's calls carry their
    /// parent's.
    pub link: Option<Arc<dyn crate::call::ClientLink>>,
}

impl TurnOptions {
    /// Where the calls of this turn come from.
    pub fn origin(&self) -> CallOrigin {
        CallOrigin {
            agent_scope: self.agent_scope.clone(),
            code_mode: self.code_mode,
            parent_id: self.parent_id.clone(),
            cancel: self.cancel.clone(),
            caller: self.caller.clone(),
            trace: self.client.as_ref().and_then(|c| c.trace.clone()),
            link: self.link.clone(),
        }
    }
}

impl std::fmt::Debug for TurnOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnOptions")
            .field("agent_scope", &self.agent_scope)
            .field("code_mode", &self.code_mode)
            .field("parent_id", &self.parent_id)
            .field("cancelled", &self.cancel.is_cancelled())
            .field(
                "approver",
                &self.approver.as_ref().map(|a| a.name().to_string()),
            )
            .field("client", &self.client)
            .finish()
    }
}
