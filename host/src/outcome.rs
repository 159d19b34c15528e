//! Results: the closed set every call ends in, and the record that is kept.
//!
//! While a call executes, a successful result carries the tool's canonical
//! `value`. What leaves the pipeline — printed, returned over MCP, shown to
//! observers, written to audit — is a [`CallRecord`]: content, error and meta,
//! plus the value itself only when the tool declares an output schema
//! (`structuredContent`). What the model saw is exactly what was recorded.
//!
//! Why the value of a tool with an output schema is kept: MCP hands it to the
//! client as `structuredContent` (a client may show the model that instead of
//! the content), so it is model-visible; recording it keeps "what the model
//! saw is what was recorded" true. It has passed the output schema and the
//! snapshot limits (and again after a post-execute hook replaced it), so it
//! is as checked as the content. A tool without an output schema promises no
//! shape: its value stays internal, as before.

use std::fmt;

use serde::Serialize;
use serde_json::Value;

use crate::content::Content;

/// The pipeline stage that produced a result or decided a denial.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Materialize,
    PreExecute,
    Approval,
    Guard,
    Execute,
    Body,
    PostExecute,
    Finalize,
    Result,
    Scheduler,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Materialize => "materialize",
            Stage::PreExecute => "pre_execute",
            Stage::Approval => "approval",
            Stage::Guard => "guard",
            Stage::Execute => "execute",
            Stage::Body => "body",
            Stage::PostExecute => "post_execute",
            Stage::Finalize => "finalize",
            Stage::Result => "result",
            Stage::Scheduler => "scheduler",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The closed list of failure codes the host produces. A tool's own failure
/// keeps its own code ([`ErrorCode::Tool`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// The arguments do not match the tool's parameters (`details.violations`).
    InvalidArgs,
    /// No tool of that name is registered for the caller's scope.
    UnknownTool,
    /// A hook, guard, approval or Code Mode refused the call.
    Denied,
    /// The turn was cancelled before the call was dispatched.
    AbortedBeforeDispatch,
    /// The turn was cancelled while the call was running.
    Aborted,
    /// The call's deadline passed.
    Timeout,
    /// Guest code trapped (a panic, an out-of-bounds access, a resource limit).
    Trapped,
    /// The tool's value or content could not be accepted (output schema,
    /// lossless snapshot, content conversion).
    InvalidResult,
    /// A post-execute hook blocked the result.
    Blocked,
    /// A bug or resource exhaustion in the host itself.
    Internal,
    /// The tool's own code.
    Tool(String),
}

impl ErrorCode {
    /// Every host code, for documentation and `toolgate codes`.
    pub const HOST_CODES: &'static [&'static str] = &[
        "INVALID_ARGS",
        "UNKNOWN_TOOL",
        "DENIED",
        "ABORTED_BEFORE_DISPATCH",
        "ABORTED",
        "TIMEOUT",
        "TRAPPED",
        "INVALID_RESULT",
        "BLOCKED",
        "INTERNAL",
    ];

    /// The host code named `code`, if it is one (a guest passing a host
    /// failure through keeps its code).
    pub fn from_host_code(code: &str) -> Option<ErrorCode> {
        Some(match code {
            "INVALID_ARGS" => ErrorCode::InvalidArgs,
            "UNKNOWN_TOOL" => ErrorCode::UnknownTool,
            "DENIED" => ErrorCode::Denied,
            "ABORTED_BEFORE_DISPATCH" => ErrorCode::AbortedBeforeDispatch,
            "ABORTED" => ErrorCode::Aborted,
            "TIMEOUT" => ErrorCode::Timeout,
            "TRAPPED" => ErrorCode::Trapped,
            "INVALID_RESULT" => ErrorCode::InvalidResult,
            "BLOCKED" => ErrorCode::Blocked,
            "INTERNAL" => ErrorCode::Internal,
            _ => return None,
        })
    }

    pub fn as_str(&self) -> &str {
        match self {
            ErrorCode::InvalidArgs => "INVALID_ARGS",
            ErrorCode::UnknownTool => "UNKNOWN_TOOL",
            ErrorCode::Denied => "DENIED",
            ErrorCode::AbortedBeforeDispatch => "ABORTED_BEFORE_DISPATCH",
            ErrorCode::Aborted => "ABORTED",
            ErrorCode::Timeout => "TIMEOUT",
            ErrorCode::Trapped => "TRAPPED",
            ErrorCode::InvalidResult => "INVALID_RESULT",
            ErrorCode::Blocked => "BLOCKED",
            ErrorCode::Internal => "INTERNAL",
            ErrorCode::Tool(code) => code,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A structured failure: who failed, how, and where.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallError {
    /// A short type name (`Denied`, `Timeout`, or the tool's own).
    pub name: String,
    pub code: ErrorCode,
    /// A sentence for the model.
    pub message: String,
    /// The stage that produced the failure.
    pub stage: Stage,
    /// The hook, guard, approver or plugin that decided, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// Anything else (e.g. `violations` for `INVALID_ARGS`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

impl CallError {
    /// A host failure with the default name for its code.
    pub fn new(code: ErrorCode, stage: Stage, message: impl Into<String>) -> Self {
        let name = match &code {
            ErrorCode::InvalidArgs => "InvalidArguments",
            ErrorCode::UnknownTool => "UnknownTool",
            ErrorCode::Denied => "Denied",
            ErrorCode::AbortedBeforeDispatch | ErrorCode::Aborted => "Aborted",
            ErrorCode::Timeout => "Timeout",
            ErrorCode::Trapped => "Trapped",
            ErrorCode::InvalidResult => "InvalidResult",
            ErrorCode::Blocked => "Blocked",
            ErrorCode::Internal => "InternalError",
            ErrorCode::Tool(_) => "ToolError",
        };
        CallError {
            name: name.to_string(),
            code,
            message: message.into(),
            stage,
            decided_by: None,
            details: None,
        }
    }

    pub fn decided_by(mut self, who: impl Into<String>) -> Self {
        self.decided_by = Some(who.into());
        self
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }
}

/// A result while the call is still in the pipeline.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Success {
        /// The canonical value; dropped when the record is frozen.
        value: Value,
        content: Vec<Content>,
        meta: Option<Value>,
    },
    Failure {
        error: CallError,
        content: Vec<Content>,
    },
}

impl Outcome {
    /// A failure whose content is its message, as the model should see it.
    pub fn failure(error: CallError) -> Self {
        let content = vec![Content::Text(error.message.clone())];
        Outcome::Failure { error, content }
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Outcome::Failure { .. })
    }

    pub fn content(&self) -> &[Content] {
        match self {
            Outcome::Success { content, .. } | Outcome::Failure { content, .. } => content,
        }
    }

    pub fn error(&self) -> Option<&CallError> {
        match self {
            Outcome::Failure { error, .. } => Some(error),
            Outcome::Success { .. } => None,
        }
    }
}

/// The frozen result of one call: exactly what the model sees and what is
/// recorded. There is no canonical value here, by construction.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallRecord {
    pub id: String,
    pub name: String,
    pub is_error: bool,
    pub content: Vec<Content>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<CallError>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
    /// The canonical value of a successful call, kept only when the tool
    /// declares an output schema (it matched it): MCP `structuredContent`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// Context the tool body deferred, for the model's next turn.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub additional_contexts: Vec<String>,
}

impl CallRecord {
    /// Freeze an outcome: the canonical value is dropped here.
    pub fn freeze(
        id: String,
        name: String,
        outcome: Outcome,
        additional_contexts: Vec<String>,
    ) -> Self {
        Self::freeze_keeping(id, name, outcome, additional_contexts, false)
    }

    /// Freeze an outcome; a success's canonical value is kept as
    /// `structured_content` when `keep_value` (the tool has an output
    /// schema, which the value matched), dropped otherwise.
    pub fn freeze_keeping(
        id: String,
        name: String,
        outcome: Outcome,
        additional_contexts: Vec<String>,
        keep_value: bool,
    ) -> Self {
        match outcome {
            Outcome::Success {
                value,
                content,
                meta,
            } => CallRecord {
                id,
                name,
                is_error: false,
                content,
                error: None,
                meta,
                structured_content: keep_value.then_some(value),
                additional_contexts,
            },
            Outcome::Failure { error, content } => CallRecord {
                id,
                name,
                is_error: true,
                content,
                error: Some(error),
                meta: None,
                structured_content: None,
                additional_contexts,
            },
        }
    }

    /// The error code, if the call failed.
    pub fn code(&self) -> Option<&str> {
        self.error.as_ref().map(|e| e.code.as_str())
    }

    /// All text content joined, for quick inspection.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(Content::as_text)
            .collect::<Vec<_>>()
            .join("\n")
    }
}
