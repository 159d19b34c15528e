//! `ask_user_question`: questions with options for the user, in the shape
//! the agents people use give their models (Claude Code's
//! `AskUserQuestion`, Gemini CLI's `ask_user`). The host puts them before
//! whoever answers the call's turn — the terminal of `toolgate run`, the
//! MCP client of `toolgate serve` (a form elicitation) — through the
//! `questions` seam; nobody to ask is an error at once, never a wait. An
//! "Other" free-text answer is always offered.

use serde::{Deserialize, Serialize};
use toolgate_sdk::{Call, Content, ContentBlock, Schema, Tool, ToolError, questions};

/// How long a question waits for its answer, by default (`[tools.
/// ask_user_question] timeout_ms` changes it).
pub const TIMEOUT_MS: u32 = 600_000;

/// Ask the user 1 to 4 questions, each with 2 to 4 options, when you need
/// their choice to go on: a preference, a decision between approaches, a
/// clarification. The user can always answer in their own words instead
/// ("Other"). Use a short `header` (at most 12 characters) per question,
/// labels of a few words and a description saying what each option means.
/// Set `multiSelect` when several options may be chosen.
#[derive(Deserialize, Serialize, Schema)]
pub struct AskUserQuestion {
    /// The questions, in the order they are asked.
    questions: Vec<Question>,
}

/// One question.
#[derive(Deserialize, Serialize, Schema)]
#[serde(rename_all = "camelCase")]
pub struct Question {
    /// The full question.
    question: String,
    /// A short label for it (at most 12 characters).
    header: String,
    /// 2 to 4 choices.
    options: Vec<Choice>,
    /// Several options may be chosen (default false).
    #[serde(default)]
    multi_select: bool,
}

/// One choice.
#[derive(Deserialize, Serialize, Schema)]
pub struct Choice {
    /// What the user picks (a few words).
    label: String,
    /// What it means.
    description: String,
}

/// What the user said.
#[derive(Serialize, Deserialize, Schema)]
#[serde(rename_all = "camelCase")]
pub struct Answers {
    /// Each question's answer, in order (empty when declined).
    answers: Vec<Answer>,
    /// Who answered (the terminal, the MCP client) or declined.
    answered_by: Option<String>,
    /// Set when the user declined or cancelled: who, and why.
    declined: Option<String>,
}

/// One question's answer.
#[derive(Serialize, Deserialize, Schema)]
pub struct Answer {
    header: String,
    question: String,
    /// The labels chosen.
    selected: Vec<String>,
    /// What the user wrote instead of (or besides) choosing.
    other: Option<String>,
}

impl Tool for AskUserQuestion {
    const NAME: &'static str = "ask_user_question";
    type Output = Answers;

    fn execute(self, _call: &Call) -> Result<Answers, ToolError> {
        let asked = serde_json::to_value(&self)
            .map_err(|e| ToolError::new("INVALID_ARGS", e.to_string()))?;
        match questions::ask(&asked) {
            Ok(v) => serde_json::from_value(v).map_err(|e| {
                ToolError::new("NO_ANSWER", format!("the answer could not be read: {e}"))
            }),
            Err(questions::QuestionError::Declined(why)) => Ok(Answers {
                answers: Vec::new(),
                answered_by: None,
                declined: Some(why),
            }),
            Err(e) => {
                let code = match e {
                    questions::QuestionError::Unavailable(_) => "NO_USER",
                    questions::QuestionError::InvalidRequest(_) => "INVALID_ARGS",
                    _ => "NO_ANSWER",
                };
                Err(ToolError::new(code, questions::message(&e).to_string()))
            }
        }
    }

    fn render(v: Answers) -> Vec<ContentBlock> {
        if let Some(why) = v.declined {
            return vec![Content::text(format!(
                "The user declined to answer ({why}). Go on without their answer, or ask differently."
            ))];
        }
        let mut s = String::from("The user answered:\n");
        for a in &v.answers {
            let mut said = a.selected.join(", ");
            if let Some(o) = &a.other {
                if !said.is_empty() {
                    said.push_str("; ");
                }
                said.push_str(&format!("in their words: {o}"));
            }
            s.push_str(&format!("- {}: {said}\n", a.header));
        }
        vec![Content::text(s)]
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(Answers::schema())
    }

    fn timeout_ms() -> Option<u32> {
        Some(TIMEOUT_MS)
    }
}

toolgate_sdk::export! { tools: [AskUserQuestion] }
