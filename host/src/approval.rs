//! The approval service: who answers when a pre-execute hook asks.
//!
//! A person at a terminal, a UI, an MCP client (elicitation), a remote
//! reviewer — anything that implements [`Approver`]. The pipeline's
//! approval stage (`pipeline::approval`) calls it; a turn may bring its own
//! (`TurnOptions::approver`). Kept below the pipeline so that the turn's
//! options can name it without a cycle.
//!
//! The approval queue (`--approve queue`) is one such service, owned by
//! the host: [`queue`] (the waiting, grants, expiry), [`store`] (what it
//! keeps, behind a trait), [`grant`] (what a grant matches), [`hold`]
//! (a stateless request's Code Mode program waiting, bounded, for its
//! nested call's decision), [`webhook`] (the signed delegate). Where it
//! keeps it is the storage engines' business, shared with the `kv` seam
//! ([`crate::store`]: `store::sqlite::approvals`, the embedded file;
//! `store::redis::approvals`, the store replicas share), opened with them
//! by [`crate::store::open`]; nothing here names them.

pub mod config;
pub mod grant;
pub mod hold;
pub mod questions;
pub mod queue;
pub mod store;
pub mod webhook;

use std::sync::Arc;

use async_trait::async_trait;

use crate::call::CallInfo;
pub use config::{ApprovalConfig, ApprovalMode, ConsoleConfig};

/// What the approver is shown.
#[derive(Debug)]
pub struct ApprovalRequest {
    pub call: Arc<CallInfo>,
    /// The question the hook asked.
    pub prompt: String,
    /// The hook that asked.
    pub asked_by: String,
    /// The tool's card for the call (`present-call`: e.g. the diff an edit
    /// would make), if it has one.
    pub card: Option<CallCard>,
    /// Who sent the call, when the turn says (a served MCP client).
    pub client: Option<Arc<crate::call::Client>>,
}

/// What the approver answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApprovalAnswer {
    Approve,
    /// Approved by someone the approver names (a person's identity, a
    /// grant): the audit record's `decidedBy`.
    ApprovedBy(String),
    /// Denied by someone the approver names, with the reason the model sees.
    DeniedBy {
        by: String,
        reason: String,
    },
    /// A person said no (with their reason, if any).
    Deny(String),
    /// Nobody could be asked (not interactive, no agent, channel closed).
    Unavailable(String),
}

impl std::fmt::Display for ApprovalAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApprovalAnswer::Approve => f.write_str("approve"),
            ApprovalAnswer::ApprovedBy(by) => write!(f, "approve (by {by})"),
            ApprovalAnswer::DeniedBy { by, reason } => write!(f, "deny by {by} ({reason})"),
            ApprovalAnswer::Deny(r) => write!(f, "deny ({r})"),
            ApprovalAnswer::Unavailable(r) => write!(f, "unavailable ({r})"),
        }
    }
}

/// An approval service: a person at a terminal, a UI, a remote reviewer.
#[async_trait]
pub trait Approver: Send + Sync {
    /// Shown in results as who decided.
    fn name(&self) -> &str;
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer;

    /// A connection of `request.call` to a destination no egress rule
    /// allows (`[egress] ask = true`; see `crate::egress::ask`): may it
    /// go on? `request.prompt` says what connects where. By default the
    /// same question as any other ([`approve`](Self::approve)); the
    /// approval queue keeps the destination in its entry and answers from
    /// its egress grants.
    async fn approve_egress(
        &self,
        request: &ApprovalRequest,
        egress: &EgressAsk,
    ) -> ApprovalAnswer {
        let _ = egress;
        self.approve(request).await
    }

    /// The approver of the calls a call's body makes in turn (Code Mode's
    /// nested calls), given the body's signal; `None`: this one. An
    /// approver that cannot be asked from inside a body (one that ends
    /// the request and waits for the client's retry) names one that can
    /// ([`hold::HoldingApprover`]).
    fn nested(&self, _signal: &crate::call::CallSignal) -> Option<Arc<dyn Approver>> {
        None
    }

    /// Questions for the user (`ask_user_question`; see [`questions`]).
    /// By default nobody can be asked: the answer says so at once, with
    /// what would make it possible.
    async fn ask_questions(
        &self,
        request: &questions::QuestionRequest,
    ) -> questions::QuestionAnswer {
        let _ = request;
        questions::QuestionAnswer::Unavailable(questions::nobody(self.name()))
    }
}

/// The destination an egress approval is about (`[egress] ask = true`):
/// what the queue's entry shows and an egress grant matches.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EgressAsk {
    /// The destination as the process named it (normalised: lowercase,
    /// no trailing dot), or an address.
    pub name: String,
    pub port: u16,
    /// The address it resolved to (the one the connection would go to).
    pub address: String,
    /// The plugin whose process or component connects.
    pub plugin: String,
    /// `connect`, `http`, `socks5` (the proxy) or `wasi:http`.
    pub via: String,
}

/// Who asks about egress: the `asked_by` of its approval requests.
pub const EGRESS_ASKED_BY: &str = "egress";

/// Approves everything (`--approve allow`).
pub struct AllowAll;

#[async_trait]
impl Approver for AllowAll {
    fn name(&self) -> &str {
        "approve-all"
    }
    async fn approve(&self, _request: &ApprovalRequest) -> ApprovalAnswer {
        ApprovalAnswer::Approve
    }
}

/// Denies everything (`--approve deny`).
pub struct DenyAll;

#[async_trait]
impl Approver for DenyAll {
    fn name(&self) -> &str {
        "deny-all"
    }
    async fn approve(&self, _request: &ApprovalRequest) -> ApprovalAnswer {
        ApprovalAnswer::Deny(
            "approvals are set to deny (--approve deny, or [approval] mode = \"deny\")".into(),
        )
    }
}

/// A card showing a call in a user interface (a tool's `present-call`),
/// e.g. the unified diff of an edit, for the person asked to approve it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CallCard {
    pub title: String,
    pub detail: Option<String>,
}
