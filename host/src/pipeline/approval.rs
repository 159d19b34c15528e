//! Between pre-execute and the guards: `ask` goes to an approval service.
//!
//! No service, or a service that cannot reach anyone, means deny. An
//! approval only lifts the `ask`; the guards still run afterwards.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;

use crate::call::CallInfo;
use crate::outcome::{CallError, ErrorCode, Stage};

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
    pub card: Option<crate::tool::CallCard>,
}

/// What the approver answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApprovalAnswer {
    Approve,
    /// A person said no (with their reason, if any).
    Deny(String),
    /// Nobody could be asked (not interactive, no agent, channel closed).
    Unavailable(String),
}

impl std::fmt::Display for ApprovalAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApprovalAnswer::Approve => f.write_str("approve"),
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
}

/// Ask; `Err` is the denial.
pub async fn run(
    approver: Option<&Arc<dyn Approver>>,
    call: &Arc<CallInfo>,
    prompt: String,
    asked_by: &str,
    card: Option<crate::tool::CallCard>,
) -> Result<(), CallError> {
    let started = Instant::now();
    let Some(approver) = approver else {
        tracing::info!(
            stage = "approval",
            asked_by,
            decision = "deny",
            "no approval service"
        );
        return Err(CallError::new(
            ErrorCode::Denied,
            Stage::Approval,
            format!("`{asked_by}` asked for approval (\"{prompt}\") but no approval service is available, so the call is denied"),
        )
        .decided_by("approval"));
    };
    let request = ApprovalRequest {
        call: call.clone(),
        prompt,
        asked_by: asked_by.to_string(),
        card,
    };
    let answer = approver.approve(&request).await;
    tracing::info!(
        stage = "approval",
        asked_by,
        approver = approver.name(),
        answer = %answer,
        elapsed_us = started.elapsed().as_micros() as u64,
        "approval answered"
    );
    match answer {
        ApprovalAnswer::Approve => Ok(()),
        ApprovalAnswer::Deny(reason) => Err(CallError::new(
            ErrorCode::Denied,
            Stage::Approval,
            if reason.is_empty() {
                format!("approval for `{}` was refused", call.tool_name)
            } else {
                format!("approval for `{}` was refused: {reason}", call.tool_name)
            },
        )
        .decided_by(approver.name())),
        ApprovalAnswer::Unavailable(why) => Err(CallError::new(
            ErrorCode::Denied,
            Stage::Approval,
            format!(
                "`{asked_by}` asked for approval (\"{}\") but nobody could be asked ({why}), so the call is denied",
                request.prompt
            ),
        )
        .decided_by(approver.name())),
    }
}

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
        ApprovalAnswer::Deny("approvals are set to deny (--approve deny)".into())
    }
}
