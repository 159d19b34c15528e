//! The `questions` seam (since contract 0.2.5): questions for the user,
//! put by the host before whoever answers the call's turn (the terminal,
//! the MCP client's elicitation). Granted by `questions = true`. Nobody to
//! ask is an error at once (`unavailable`), never a wait.

use crate::bindings::toolgate::plugin::questions as raw;
pub use crate::bindings::toolgate::plugin::questions::QuestionError;

/// Ask `questions` (`{"questions": [{"header", "question", "options":
/// [{"label", "description"}], "multiSelect"}]}`); the answers as JSON
/// (`{"answers": [{"header", "question", "selected", "other"?}],
/// "answeredBy"}`).
pub fn ask(questions: &serde_json::Value) -> Result<serde_json::Value, QuestionError> {
    let answer = raw::ask(&questions.to_string())?;
    serde_json::from_str(&answer)
        .map_err(|e| QuestionError::Unavailable(format!("the host's answer is not JSON: {e}")))
}

/// What an error says (each case carries a sentence for the model).
pub fn message(e: &QuestionError) -> &str {
    match e {
        QuestionError::Unavailable(m)
        | QuestionError::Declined(m)
        | QuestionError::InvalidRequest(m)
        | QuestionError::Timeout(m) => m,
    }
}
