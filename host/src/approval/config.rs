//! `[approval]` in the configuration: who answers a hook's `ask`.

use serde::{Deserialize, Serialize};
use toolgate_schema::derive::Schema;

use crate::config::path::{HostData, Secret};

/// `[approval]` in the configuration: who answers a hook's `ask`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct ApprovalConfig {
    /// Who answers a hook's `ask` (as `--approve`, which wins over it):
    /// `"queue"` the host's approval queue, `"allow"` or `"deny"` always,
    /// `"client"` the MCP client of `serve` (elicitation) when it can
    /// answer, else deny. Unset: as `"client"` under `serve`, else the
    /// terminal when there is one, else deny.
    pub mode: Option<ApprovalMode>,
    /// How long a queued call waits for a decision, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// How long a stateless client's retry is held for a decision, in
    /// milliseconds (see [`crate::budgets::APPROVAL_RETRY_HOLD_MS`]).
    pub retry_hold_ms: Option<u64>,
    /// The queue's SQLite file (default: `approvals.sqlite` in the state
    /// directory; with `[state] url` and this unset, the queue is in that
    /// shared store instead: see [`crate::store::redis::approvals`]).
    pub store: Option<HostData>,
    /// POST each new pending approval there (see
    /// [`crate::approval::webhook`]).
    pub webhook: Option<String>,
    /// The webhook's HMAC key (default: `approval-webhook-key` in the
    /// state directory; made, owner-only, when absent).
    pub webhook_key_file: Option<Secret>,
}

impl ApprovalConfig {
    /// `timeout_ms`, or [`crate::budgets::APPROVAL_TIMEOUT_MS`]; never 0.
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(
            self.timeout_ms
                .unwrap_or(crate::budgets::APPROVAL_TIMEOUT_MS)
                .max(1),
        )
    }
}

/// `[approval] mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, Schema)]
#[schema(crate = "toolgate_schema::derive")]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalMode {
    /// The durable approval queue.
    Queue,
    /// Approve every `ask`; `serve` never asks its client.
    Allow,
    /// Refuse every `ask`; `serve` never asks its client.
    Deny,
    /// `serve`: ask the MCP client (elicitation) when it declared the
    /// capability, else deny (what an unset mode does under `serve`).
    Client,
}

/// `[questions]` in the configuration: questions for the user
/// (`ask_user_question`; see [`crate::approval::questions`]).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct QuestionsConfig {
    /// How long a question waits for its answer, in milliseconds (default
    /// [`crate::budgets::QUESTIONS_TIMEOUT_MS`]); the call's deadline
    /// bounds it too.
    pub timeout_ms: Option<u64>,
}

impl QuestionsConfig {
    /// `timeout_ms`, or the default.
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms
            .unwrap_or(crate::budgets::QUESTIONS_TIMEOUT_MS)
    }
}

/// `[console]` in the configuration: the approval console on
/// `serve --http` (see `toolgate_mcp::console`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct ConsoleConfig {
    /// The file holding the console's token (default: `console-token` in
    /// the state directory); made, owner-only, when absent.
    pub token_file: Option<Secret>,
}
