//! Between pre-execute and the guards: `ask` goes to an approval service.
//!
//! No service, or a service that cannot reach anyone, means deny. An
//! approval only lifts the `ask`; the guards still run afterwards.

use std::sync::Arc;
use std::time::Instant;

pub use crate::approval::{AllowAll, ApprovalAnswer, ApprovalRequest, Approver, DenyAll};
use crate::call::CallInfo;
use crate::outcome::{CallError, ErrorCode, Stage};

/// How long an approval waits before the log says it is waiting.
const APPROVAL_WAIT_NOTICE: std::time::Duration = std::time::Duration::from_secs(1);

/// Ask; `Ok` names who approved (the approver, or whom it names: a
/// person, a grant), `Err` is the denial.
pub async fn run(
    approver: Option<&Arc<dyn Approver>>,
    call: &Arc<CallInfo>,
    prompt: String,
    asked_by: &str,
    card: Option<crate::tool::CallCard>,
    client: Option<Arc<crate::call::Client>>,
) -> Result<String, CallError> {
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
            format!("`{asked_by}` asked for approval (\"{prompt}\") but no approval service is available, so the call is denied (the operator chooses who approves: `--approve prompt|allow|deny|queue` on the command line, or `[approval] mode = \"queue\"` in toolgate.toml)"),
        )
        .decided_by("approval"));
    };
    let request = ApprovalRequest {
        call: call.clone(),
        prompt,
        asked_by: asked_by.to_string(),
        card,
        client,
    };
    // An approver that answers at once (allow, deny, a grant) says
    // nothing more; one that waits for a person says so once it has
    // waited a moment, and says when the answer came.
    let approving = approver.approve(&request);
    tokio::pin!(approving);
    let (answer, waited) = tokio::select! {
        answer = &mut approving => (answer, false),
        () = tokio::time::sleep(APPROVAL_WAIT_NOTICE) => {
            tracing::info!(
                target: crate::PROGRESS,
                stage = "approval",
                tool = %call.tool_name,
                call_id = %call.call_id,
                asked_by,
                approver = approver.name(),
                "waiting for approval"
            );
            (approving.await, true)
        }
    };
    let elapsed_us = started.elapsed().as_micros() as u64;
    if waited {
        tracing::info!(
            target: crate::PROGRESS,
            stage = "approval",
            tool = %call.tool_name,
            call_id = %call.call_id,
            asked_by,
            approver = approver.name(),
            answer = %answer,
            elapsed_us,
            "approval answered"
        );
    } else {
        tracing::info!(
            stage = "approval",
            asked_by,
            approver = approver.name(),
            answer = %answer,
            elapsed_us,
            "approval answered"
        );
    }
    match answer {
        ApprovalAnswer::Approve => Ok(approver.name().to_string()),
        ApprovalAnswer::ApprovedBy(by) => Ok(by),
        ApprovalAnswer::DeniedBy { by, reason } => Err(CallError::new(
            ErrorCode::Denied,
            Stage::Approval,
            format!("approval for `{}` was refused: {reason}", call.tool_name),
        )
        .decided_by(by)),
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
