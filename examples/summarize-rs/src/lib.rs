//! A tool that summarizes a file with a model the operator configured,
//! through the host's `model` seam (contract 0.2.8): the file is read here,
//! from the directory the plugin is granted, and only the summary goes
//! back to the caller — the model that called `summarize` spends its
//! context on the answer, not on the file.
//!
//! Why through the seam and not `wasi:http`: the model's key stays in the
//! host (this component never sees it), the request goes through the
//! host's egress and retries, its tokens count against the calling
//! client's budget, and the call's record keeps a `model-request` note.
//! The cost is a grant: `models = ["NAME"]` under
//! `[plugins.summarize.grants]`.
//!
//! Settings (`vars` of `[plugins.summarize]`):
//! * `MODEL` — the model to ask (default: the first one granted);
//! * `MAX_FILE_KB` — the largest file summarized (default 256).

use serde::{Deserialize, Serialize};
use toolgate_sdk::model::{self, Message, Request};
use toolgate_sdk::{Annotations, Call, Content, ContentBlock, Schema, Tool, ToolError, setting};

/// Summarize a text file in a few sentences, or answer a question about
/// it, without reading it into your context.
#[derive(Deserialize, Schema)]
pub struct Summarize {
    /// The file, relative to the working directory.
    path: String,
    /// What to look for (default: a summary of the whole file).
    question: Option<String>,
}

#[derive(Serialize, Deserialize)]
pub struct Summary {
    summary: String,
    model: String,
    /// Input and output tokens the model counted.
    tokens: [u64; 2],
}

/// The system prompt: what the model is asked to do with the file.
pub const SYSTEM: &str = "You summarize files for another assistant. Answer in at most five \
sentences, plain text, naming the file's purpose and anything the question asks about.";

/// The model to ask: `MODEL`, else the first granted.
fn model_name() -> Result<String, ToolError> {
    let configured = setting("MODEL", "").trim();
    if !configured.is_empty() {
        return Ok(configured.to_string());
    }
    model::models().into_iter().next().ok_or_else(|| {
        ToolError::new(
            "NOT_CONFIGURED",
            "no model is granted to this plugin: add models = [\"NAME\"] to [plugins.summarize.grants]",
        )
    })
}

/// The user message: the question, then the file.
pub fn prompt(path: &str, question: Option<&str>, text: &str) -> String {
    format!(
        "{}\n\nThe file `{path}`:\n\n{text}",
        question.unwrap_or("Summarize this file.")
    )
}

impl Tool for Summarize {
    const NAME: &'static str = "summarize";
    type Output = Summary;

    fn execute(self, _call: &Call) -> Result<Summary, ToolError> {
        let max = setting("MAX_FILE_KB", "256")
            .trim()
            .parse::<u64>()
            .unwrap_or(256)
            << 10;
        let meta = std::fs::metadata(&self.path)
            .map_err(|e| ToolError::new("NOT_FOUND", format!("{}: {e}", self.path)))?;
        if meta.len() > max {
            return Err(ToolError::new(
                "TOO_LARGE",
                format!(
                    "{} is {} bytes; this plugin summarizes at most {max} (MAX_FILE_KB)",
                    self.path,
                    meta.len()
                ),
            ));
        }
        let bytes = std::fs::read(&self.path)
            .map_err(|e| ToolError::new("NOT_FOUND", format!("{}: {e}", self.path)))?;
        let text = String::from_utf8_lossy(&bytes);
        let name = model_name()?;
        let reply = model::complete(&Request {
            model: name.clone(),
            system: SYSTEM.into(),
            messages: vec![Message::User(prompt(
                &self.path,
                self.question.as_deref(),
                &text,
            ))],
            tools: vec![],
        })
        .map_err(|e| ToolError::new("MODEL_ERROR", model::message(&e)))?;
        Ok(Summary {
            summary: reply.text,
            model: name,
            tokens: [reply.usage.input_tokens, reply.usage.output_tokens],
        })
    }

    fn render(v: Summary) -> Vec<ContentBlock> {
        vec![Content::text(v.summary)]
    }

    fn annotations() -> Annotations {
        Annotations::READ_ONLY
    }

    fn is_concurrency_safe(&self) -> bool {
        true
    }

    fn timeout_ms() -> Option<u32> {
        Some(120_000)
    }
}

toolgate_sdk::export! { tools: [Summarize] }

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_puts_the_question_before_the_file() {
        let p = prompt("a.md", Some("Which port?"), "port = 80");
        assert!(p.starts_with("Which port?"));
        assert!(p.ends_with("port = 80"));
        assert!(prompt("a.md", None, "x").starts_with("Summarize this file."));
    }
}
