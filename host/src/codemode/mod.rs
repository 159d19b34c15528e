//! Code Mode: `run_code`, a JavaScript program whose tool calls each
//! re-enter the whole pipeline (seed §1, §3.A).
//!
//! Why: a model that writes one program instead of many tool calls reads
//! one compact API (TypeScript-like signatures) instead of every schema,
//! and chains calls without a round trip per call. Why it stays safe: the
//! program runs in an interpreter compiled to a Wasm component that
//! imports nothing but `tool-calls` (its WASI imports are served empty: no
//! files, no network, no environment), and every call it makes is a call
//! like any other — materialize, hooks (`ask` included), guards, wrappers,
//! the body, observers — with `code-mode` set and the program's call as
//! its parent.
//!
//! * [`interpreter`] — the Boa component (built from `plugins/run-code`
//!   by `host/build.rs`), its store, limits and epoch interruption;
//! * [`nested`] — the host side of `tool-calls`: a batch of calls through
//!   the scheduler, the nested-call limit, the parent's deadline;
//! * [`signatures`] — the model-facing `run_code` whose description
//!   declares the other tools.
//!
//! The module depends on the pipeline's types and on [`NestedCalls`], which
//! the host implements: it never names `Toolgate` (no import cycle).

pub mod config;
pub mod interpreter;
pub mod nested;
pub mod signatures;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::call::{Annotations, CallInfo, Features, ToolCall, ToolMeta};
use crate::content::Content;
use crate::outcome::CallRecord;
use crate::tool::{BodyContext, BodyError, ToolBody, ToolDefinition, ToolFailure};
use crate::turn::TurnOptions;
pub use config::RunCodeConfig;

pub use crate::pipeline::materialize::RUN_CODE;

/// Tool calls one program may make (`[run_code] max_nested_calls`): a
/// program in a loop must not turn one model call into an unbounded number
/// of tool calls. The call past the limit fails with `NESTED_CALL_LIMIT`,
/// which the program can catch.
pub const MAX_NESTED_CALLS: usize = 100;
/// Printed output kept (`[run_code] max_output_kb`, 64 KiB); the rest is
/// dropped and the result says so. The return value is capped the same.
pub const MAX_OUTPUT_BYTES: usize = 64 << 10;
/// The interpreter instance's memory (`[run_code] memory_mb`, 64 MiB).
pub const MEMORY_BYTES: usize = 64 << 20;
/// Wall time of one program (`[run_code] timeout_ms`, 30 s), fused with
/// the caller's deadline; a call's `timeoutMs` may shorten it.
pub const TIMEOUT_MS: u32 = 30_000;

/// The limits of `run_code`, from the configuration.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_nested_calls: usize,
    pub max_output_bytes: usize,
    pub memory_bytes: usize,
    pub timeout_ms: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_nested_calls: MAX_NESTED_CALLS,
            max_output_bytes: MAX_OUTPUT_BYTES,
            memory_bytes: MEMORY_BYTES,
            timeout_ms: TIMEOUT_MS,
        }
    }
}

impl From<&RunCodeConfig> for Limits {
    fn from(c: &RunCodeConfig) -> Self {
        let d = Limits::default();
        Limits {
            max_nested_calls: c.max_nested_calls.unwrap_or(d.max_nested_calls),
            max_output_bytes: c
                .max_output_kb
                .map(|kb| kb << 10)
                .unwrap_or(d.max_output_bytes),
            memory_bytes: c.memory_mb.map(|mb| mb << 20).unwrap_or(d.memory_bytes),
            timeout_ms: c.timeout_ms.unwrap_or(d.timeout_ms),
        }
    }
}

/// Runs a batch of calls a program made, through the pipeline and the
/// scheduler, as a turn of their own. The host implements it.
#[async_trait]
pub trait NestedCalls: Send + Sync {
    /// One record per call, in order; `Err` is a scheduler failure (a host
    /// bug), reported to the program as `INTERNAL` for every call.
    async fn run_batch(
        &self,
        calls: Vec<ToolCall>,
        turn: &TurnOptions,
    ) -> Result<Vec<CallRecord>, String>;

    /// The model-facing projection of every tool a call from `scope` may
    /// use (never Code Mode's projection: a nested call names the tool).
    fn model_tools(&self, scope: &str) -> Vec<crate::tool::ModelTool>;
}

/// Where the host is, set once it exists (the tool is registered before).
pub type HostSlot = Arc<OnceLock<Arc<dyn NestedCalls>>>;

/// The `run_code` tool.
pub struct RunCode {
    limits: Limits,
    interpreter: interpreter::Interpreter,
    host: HostSlot,
}

impl RunCode {
    pub fn new(runtime: Arc<crate::plugin::Runtime>, limits: Limits, host: HostSlot) -> Self {
        RunCode {
            limits,
            interpreter: interpreter::Interpreter::new(runtime),
            host,
        }
    }

    /// The definition the host registers (its model-facing description is
    /// made per listing by [`signatures::project`]).
    pub fn definition(limits: &Limits) -> ToolDefinition {
        ToolDefinition {
            name: RUN_CODE.to_string(),
            description: signatures::BASE_DESCRIPTION.to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "code": {
                        "type": "string",
                        "description": "JavaScript (ES2020+): the body of an async function. `await tools.NAME(args)` calls a tool; `return` a JSON value; console.log prints."
                    },
                    "timeoutMs": {
                        "type": "integer",
                        "description": "Wall time of the program in milliseconds (it cannot exceed the host's limit)."
                    }
                },
                "required": ["code"],
                "additionalProperties": false
            }),
            output_schema: None,
            meta: ToolMeta {
                provider: "code-mode".into(),
                // Every nested call runs under its own policies; the
                // program's own deadline is this plus the grace.
                timeout_ms: Some(limits.timeout_ms),
                annotations: Annotations::OPEN_WORLD,
                features: Features::empty(),
                effects: true,
            },
        }
    }

    /// Time the first program waits for the interpreter to be compiled (or
    /// read from the compile cache): the start a measurement calls "fresh".
    pub async fn warm_up(&self) -> Result<Duration, BodyError> {
        self.interpreter.warm_up().await
    }
}

#[async_trait]
impl ToolBody for RunCode {
    async fn is_concurrency_safe(&self, _call: &Arc<CallInfo>) -> Option<bool> {
        // A program's calls may write: it is a barrier.
        Some(false)
    }

    async fn execute(&self, call: &Arc<CallInfo>, ctx: BodyContext) -> Result<Value, BodyError> {
        let code = call
            .arguments
            .get("code")
            .and_then(Value::as_str)
            .ok_or_else(|| failure("INVALID_ARGS", "`code` must be a string"))?;
        let mut signal = ctx
            .signal
            .shorten_by(Duration::from_millis(self.limits.timeout_ms.into()));
        if let Some(ms) = call.arguments.get("timeoutMs").and_then(Value::as_u64) {
            signal = signal.shorten_by(Duration::from_millis(ms));
        }
        let host =
            self.host.get().cloned().ok_or_else(|| {
                BodyError::Internal("the host is not ready for nested calls".into())
            })?;
        let nested = nested::Nested::new(
            host,
            call.clone(),
            // Who sent the program sent its calls: the record names the
            // client, and what answers by it (the `history` seam) sees the
            // same one as for the program.
            ctx.extensions.get::<Arc<crate::call::Client>>().cloned(),
            signal.clone(),
            // The program's approver, or the one it names for calls made
            // inside a body (a stateless request's: `approval::hold`).
            ctx.approver
                .as_ref()
                .map(|a| a.nested(&signal).unwrap_or_else(|| a.clone())),
            self.limits.max_nested_calls,
        );
        let ran = self
            .interpreter
            .run(code, &self.limits, signal, nested)
            .await?;
        ran.into_value(&self.limits)
    }

    async fn render(
        &self,
        _call: &Arc<CallInfo>,
        value: &Value,
    ) -> Result<Vec<Content>, BodyError> {
        Ok(render(value))
    }
}

/// A failure of `run_code` itself (not of a nested call).
pub(crate) fn failure(code: &str, message: impl Into<String>) -> BodyError {
    BodyError::Failure(ToolFailure {
        name: "CodeError".into(),
        code: code.into(),
        message: message.into(),
        details: None,
    })
}

/// `{output, outputTruncated, result, calls}` → what the model reads:
/// the printed output, then the return value as JSON.
fn render(value: &Value) -> Vec<Content> {
    let mut content = Vec::new();
    let output = value.get("output").and_then(Value::as_str).unwrap_or("");
    if !output.is_empty() {
        let mut text = output.to_string();
        if value.get("outputTruncated").and_then(Value::as_bool) == Some(true) {
            text.push_str("\n[output truncated]");
        }
        content.push(Content::text(text));
    }
    // `undefined` and `null` both arrive as `null`: said only when nothing
    // was printed, so that the result is never empty.
    let result = value.get("result").unwrap_or(&Value::Null);
    if !result.is_null() || content.is_empty() {
        content.push(Content::text(format!(
            "Result: {}",
            serde_json::to_string(result).unwrap_or_default()
        )));
    }
    content
}
