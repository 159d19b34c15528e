//! Approvers for the command line: a terminal prompt, allow-all, deny-all.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use async_trait::async_trait;

use super::ApproveMode;
use toolgate::pipeline::approval::{AllowAll, DenyAll};
use toolgate::pipeline::{ApprovalAnswer, ApprovalRequest, Approver};

/// The approver the operator chose with `--approve`: it wins over
/// `[approval] mode`. `None`: no explicit choice (`queue` is the host's own
/// approval queue, `ToolgateBuilder::approval_queue`; `client` asks the
/// MCP client of `serve`).
pub fn approver(mode: Option<ApproveMode>) -> Option<Arc<dyn Approver>> {
    match mode {
        Some(ApproveMode::Allow) => Some(Arc::new(AllowAll)),
        Some(ApproveMode::Deny) => Some(Arc::new(DenyAll)),
        Some(ApproveMode::Prompt) => Some(Arc::new(TerminalApprover)),
        Some(ApproveMode::Queue | ApproveMode::Client) | None => None,
    }
}

/// Who answers when neither `--approve` nor `[approval] mode` says: the
/// terminal when there is one, else nobody (`ask` denies).
pub fn default_approver() -> Option<Arc<dyn Approver>> {
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    interactive.then(|| Arc::new(TerminalApprover) as Arc<dyn Approver>)
}

/// Asks on the terminal: shows the tool, its arguments and the question.
pub struct TerminalApprover;

static PROMPT_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[async_trait]
impl Approver for TerminalApprover {
    fn name(&self) -> &str {
        "terminal"
    }

    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        if !std::io::stdin().is_terminal() {
            return ApprovalAnswer::Unavailable("stdin is not a terminal".into());
        }
        let _one_at_a_time = PROMPT_LOCK.lock().await;
        // The card comes from the tool's component: each line is escaped
        // (no terminal escape sequences), the lines kept.
        let shown = |s: &str| {
            s.lines()
                .map(|l| toolgate::plugin::log::escape(l).into_owned())
                .collect::<Vec<_>>()
                .join("\n")
        };
        let card = match &request.card {
            Some(c) => format!(
                "  card:      {}\n{}",
                shown(&c.title),
                c.detail
                    .as_deref()
                    .map(|d| format!("{}\n", shown(d)))
                    .unwrap_or_default()
            ),
            None => String::new(),
        };
        let text = format!(
            "\n`{}` asks to approve a call:\n  tool:      {}\n  arguments: {}\n  question:  {}\n{card}Approve? [y/N] ",
            request.asked_by, request.call.tool_name, request.call.arguments, request.prompt
        );
        let answer = tokio::task::spawn_blocking(move || {
            let mut err = std::io::stderr();
            let _ = err.write_all(text.as_bytes());
            let _ = err.flush();
            let mut line = String::new();
            std::io::stdin()
                .lock()
                .read_line(&mut line)
                .map(|n| (n, line))
        })
        .await;
        match answer {
            Ok(Ok((0, _))) => ApprovalAnswer::Unavailable("stdin closed".into()),
            Ok(Ok((_, line)))
                if matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes") =>
            {
                ApprovalAnswer::Approve
            }
            Ok(Ok(_)) => ApprovalAnswer::Deny("refused at the terminal".into()),
            Ok(Err(e)) => ApprovalAnswer::Unavailable(format!("cannot read the terminal: {e}")),
            Err(e) => ApprovalAnswer::Unavailable(format!("prompt failed: {e}")),
        }
    }
}
