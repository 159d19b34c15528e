//! Approvers for the command line: a terminal prompt, allow-all, deny-all.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use async_trait::async_trait;

use super::ApproveMode;
use toolgate::approval::questions::{Answer, QuestionAnswer, QuestionRequest};
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

    /// Each question on the terminal, its options numbered; the answer is
    /// a number (numbers, for several), or words of the user's own.
    async fn ask_questions(&self, request: &QuestionRequest) -> QuestionAnswer {
        if !std::io::stdin().is_terminal() {
            return QuestionAnswer::Unavailable(
                "no user can be asked here: stdin is not a terminal".into(),
            );
        }
        let _one_at_a_time = PROMPT_LOCK.lock().await;
        let questions = request.questions.questions.clone();
        let tool = request.call.tool_name.clone();
        let asked = tokio::task::spawn_blocking(move || {
            let shown = |s: &str| toolgate::plugin::log::escape(s).into_owned();
            let mut err = std::io::stderr();
            let _ = writeln!(err, "\n`{}` asks you:", shown(&tool));
            let mut answers = Vec::new();
            for q in &questions {
                let n = q.options.len();
                let mut text = format!("\n{}: {}\n", shown(&q.header), shown(&q.question));
                for (i, o) in q.options.iter().enumerate() {
                    text.push_str(&format!(
                        "  {}. {} — {}\n",
                        i + 1,
                        shown(&o.label),
                        shown(&o.description)
                    ));
                }
                text.push_str(&format!("  {}. Other (type your answer)\n", n + 1));
                text.push_str(if q.multi_select {
                    "Numbers separated by commas, or your own words (empty: decline): "
                } else {
                    "A number, or your own words (empty: decline): "
                });
                let _ = err.write_all(text.as_bytes());
                let _ = err.flush();
                let mut line = String::new();
                match std::io::stdin().lock().read_line(&mut line) {
                    Ok(0) => return Err("stdin closed".to_string()),
                    Ok(_) => {}
                    Err(e) => return Err(format!("cannot read the terminal: {e}")),
                }
                let line = line.trim();
                if line.is_empty() {
                    return Ok(None);
                }
                let picked: Option<Vec<usize>> = line
                    .split([',', ' '])
                    .filter(|p| !p.is_empty())
                    .map(|p| p.parse::<usize>().ok().filter(|i| (1..=n + 1).contains(i)))
                    .collect();
                let (selected, other) = match picked {
                    Some(p) if p.contains(&(n + 1)) => {
                        let _ = write!(err, "Your answer: ");
                        let _ = err.flush();
                        let mut own = String::new();
                        let _ = std::io::stdin().lock().read_line(&mut own);
                        let chosen = p
                            .iter()
                            .filter(|i| **i <= n)
                            .map(|i| q.options[i - 1].label.clone())
                            .collect();
                        (chosen, Some(own.trim().to_string()))
                    }
                    Some(p) => (
                        p.iter().map(|i| q.options[i - 1].label.clone()).collect(),
                        None,
                    ),
                    None => (Vec::new(), Some(line.to_string())),
                };
                answers.push(
                    q.answer(selected, other)
                        .map_err(|why| format!("at the terminal: {why}"))?,
                );
            }
            Ok(Some(answers))
        })
        .await;
        match asked {
            Ok(Ok(Some(answers))) => QuestionAnswer::Answered {
                answers: answers.into_iter().collect::<Vec<Answer>>(),
                by: "terminal".into(),
            },
            Ok(Ok(None)) => QuestionAnswer::Declined {
                by: "terminal".into(),
                reason: "the user gave no answer".into(),
            },
            Ok(Err(why)) => QuestionAnswer::Unavailable(why),
            Err(e) => QuestionAnswer::Unavailable(format!("prompt failed: {e}")),
        }
    }
}
