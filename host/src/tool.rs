//! Registered tools: the model-facing definition, the host metadata that never
//! reaches the model, the compiled schemas, and the body that runs a call.
//!
//! [`ToolBody`] is a trait because tools come from several places: Wasm
//! components (the usual case), and later MCP servers and embedders' native
//! Rust tools. The pipeline treats them all the same.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;

use crate::call::{CallInfo, CallSignal, Interrupt};
use crate::content::Content;
use crate::outcome::Outcome;

/// Hints about a tool's behaviour (the MCP tool annotations): `READ_ONLY`,
/// `DESTRUCTIVE`, `IDEMPOTENT`, `OPEN_WORLD`.
pub use crate::bindings::wit::ToolAnnotations as Annotations;
/// The optional parts a tool implements: `CLASSIFIER`, `FINALIZER`,
/// `PRESENT_CALL`, `PRESENT_RESULT`.
pub use crate::bindings::wit::ToolFeatures as Features;

/// Host metadata of a tool; none of it is shown to the model.
#[derive(Clone, Debug)]
pub struct ToolMeta {
    /// The plugin (or MCP server) providing the tool.
    pub provider: String,
    /// Cooperative time budget of one call (read by the timeout policy).
    pub timeout_ms: Option<u32>,
    pub annotations: Annotations,
    pub features: Features,
}

impl ToolMeta {
    /// Metadata for a name that resolved to no tool.
    pub fn unknown() -> Self {
        ToolMeta {
            provider: String::new(),
            timeout_ms: None,
            annotations: Annotations::empty(),
            features: Features::empty(),
        }
    }
}

/// A tool as registered.
#[derive(Clone, Debug)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments (already checked by the schema compiler).
    pub parameters: Value,
    /// JSON Schema of the canonical value, if the tool declares one.
    pub output_schema: Option<Value>,
    pub meta: ToolMeta,
}

/// The model-facing projection of a tool: these three fields and nothing else.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelTool {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

impl ToolDefinition {
    pub fn projection(&self) -> ModelTool {
        ModelTool {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.parameters.clone(),
        }
    }
}

/// A tool ready to be called: definition, compiled schemas, body.
pub struct ToolEntry {
    pub def: ToolDefinition,
    pub parameters: toolgate_schema::Schema,
    pub output: Option<toolgate_schema::Schema>,
    pub body: Arc<dyn ToolBody>,
}

impl std::fmt::Debug for ToolEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolEntry")
            .field("name", &self.def.name)
            .field("provider", &self.def.meta.provider)
            .finish()
    }
}

/// Context a tool body may defer into the result (`additionalContexts`).
pub type DeferredContexts = Arc<Mutex<Vec<String>>>;

/// What the body needs besides the call: the fused signal and where to put
/// deferred context.
#[derive(Clone)]
pub struct BodyContext {
    pub signal: CallSignal,
    pub deferred: DeferredContexts,
}

/// A tool's own structured failure.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolFailure {
    pub name: String,
    pub code: String,
    pub message: String,
    pub details: Option<Value>,
}

/// Why a tool body (or one of its helpers) did not produce a value.
#[derive(Clone, Debug, thiserror::Error)]
pub enum BodyError {
    /// The tool reported a failure of its own.
    #[error("{}: {}", .0.code, .0.message)]
    Failure(ToolFailure),
    /// Guest code trapped.
    #[error("trapped: {0}")]
    Trapped(String),
    /// The call's signal fired inside the body (epoch interruption).
    #[error("interrupted: {0:?}")]
    Interrupted(Interrupt),
    /// The tool returned something the host cannot accept.
    #[error("invalid result: {0}")]
    InvalidResult(String),
    /// The host failed (instantiation, resources).
    #[error("internal: {0}")]
    Internal(String),
}

/// Runs calls of one or more tools.
#[async_trait]
pub trait ToolBody: Send + Sync {
    /// Whether this call may overlap others. `None`: no classifier (exclusive).
    async fn is_concurrency_safe(&self, tool: &str, arguments: &Value) -> Option<bool>;

    /// Run the call; returns the canonical value.
    async fn execute(&self, call: &CallInfo, ctx: BodyContext) -> Result<Value, BodyError>;

    /// Project a canonical value to content.
    async fn render(&self, tool: &str, value: &Value) -> Result<Vec<Content>, BodyError>;

    /// The tool's own `finalize-content`, if it has one. `Ok(None)` keeps
    /// the content.
    async fn finalize_content(
        &self,
        call: &CallInfo,
        outcome: &Outcome,
    ) -> Result<Option<Vec<Content>>, BodyError> {
        let _ = (call, outcome);
        Ok(None)
    }
}
