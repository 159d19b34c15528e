use std::sync::OnceLock;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::bindings::toolgate::plugin::{cancellation, deferred_context, types};

/// A call, as a tool body or a policy sees it.
///
/// The arguments arrive as JSON text and are parsed on first use: most
/// policies decide from the tool's name and annotations alone, and a parse
/// they never need is a cost every call would pay.
#[derive(Clone, Debug)]
pub struct Call {
    info: types::CallInfo,
    arguments: OnceLock<Value>,
}

impl Call {
    pub(crate) fn new(info: types::CallInfo) -> Self {
        Call {
            info,
            arguments: OnceLock::new(),
        }
    }

    /// The model's id for the call.
    pub fn id(&self) -> &str {
        &self.info.call_id
    }

    /// The tool being called.
    pub fn tool(&self) -> &str {
        &self.info.tool_name
    }

    /// The plugin (or MCP server) that provides the tool.
    pub fn provider(&self) -> &str {
        &self.info.provider
    }

    /// The validated arguments.
    pub fn arguments(&self) -> &Value {
        self.arguments
            .get_or_init(|| serde_json::from_str(&self.info.arguments).unwrap_or(Value::Null))
    }

    /// The arguments as a Rust type.
    pub fn arguments_as<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(&self.info.arguments)
    }

    /// Every string in the arguments, with its JSON pointer: what a guard
    /// usually wants to inspect.
    pub fn argument_strings(&self) -> Vec<(String, &str)> {
        let mut out = Vec::new();
        let mut stack: Vec<(String, &Value)> = vec![(String::new(), self.arguments())];
        while let Some((path, v)) = stack.pop() {
            match v {
                Value::String(s) => out.push((path, s.as_str())),
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate().rev() {
                        stack.push((format!("{path}/{i}"), item));
                    }
                }
                Value::Object(map) => {
                    for (k, item) in map.iter().rev() {
                        let k = k.replace('~', "~0").replace('/', "~1");
                        stack.push((format!("{path}/{k}"), item));
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// The agent scope the call came from.
    pub fn agent_scope(&self) -> &str {
        &self.info.agent_scope
    }

    /// Code Mode is on for this turn.
    pub fn code_mode(&self) -> bool {
        self.info.code_mode
    }

    /// The tool's declared time budget.
    pub fn tool_timeout(&self) -> Option<Duration> {
        self.info
            .tool_timeout_ms
            .map(|ms| Duration::from_millis(ms.into()))
    }

    /// The tool's annotations (read-only, destructive, ...).
    pub fn annotations(&self) -> types::ToolAnnotations {
        self.info.tool_annotations
    }

    /// The deadline, as time left when the call was handed over.
    pub fn deadline(&self) -> Option<Duration> {
        self.info.deadline_ms.map(Duration::from_millis)
    }

    /// Time left now (asks the host).
    pub fn remaining(&self) -> Option<Duration> {
        cancellation::remaining_ms().map(Duration::from_millis)
    }

    /// The caller cancelled or the deadline passed: stop soon. Long loops
    /// should check this; the host stops guests that don't, at their
    /// deadline.
    pub fn is_cancelled(&self) -> bool {
        cancellation::is_cancelled()
    }

    /// Add context for the model's next turn (the result's
    /// `additionalContexts`). Only while a tool body runs.
    pub fn defer_context(&self, context: impl AsRef<str>) {
        deferred_context::add(context.as_ref());
    }

    /// The raw WIT record.
    pub fn info(&self) -> &types::CallInfo {
        &self.info
    }
}
