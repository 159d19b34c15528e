//! Registered tools: the model-facing definition, the host metadata that never
//! reaches the model, the compiled schemas, and the body that runs a call.
//!
//! [`ToolBody`] is a trait because tools come from several places: Wasm
//! components (the usual case), MCP servers ([`crate::bridge`]) and
//! embedders' native Rust tools. The pipeline treats them all the same.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;

use crate::approval::Approver;
pub use crate::call::{Annotations, Features, ToolMeta};
use crate::call::{CallInfo, CallSignal, Extensions, Interrupt};
use crate::cause::Cause;
use crate::content::Content;
use crate::outcome::Outcome;

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
    /// The turn's own approver (`None`: the host's), for calls the body
    /// makes in turn through the pipeline (`run_code`).
    pub approver: Option<Arc<dyn Approver>>,
    /// What features attach to the call (see [`Extensions`]).
    pub extensions: Extensions,
}

pub use crate::approval::CallCard;

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
    /// Guest code trapped (the cause: the component's `InvokeError`).
    #[error("trapped: {0}")]
    Trapped(#[source] Cause),
    /// The call's signal fired inside the body (epoch interruption).
    #[error("interrupted: {0:?}")]
    Interrupted(Interrupt),
    /// The tool returned something the host cannot accept.
    #[error("invalid result: {0}")]
    InvalidResult(#[source] Cause),
    /// The host failed (instantiation, resources).
    #[error("internal: {0}")]
    Internal(#[source] Cause),
}

/// Runs calls of one or more tools.
#[async_trait]
pub trait ToolBody: Send + Sync {
    /// Whether this call may overlap others. `None`: no classifier, or it
    /// failed (exclusive).
    async fn is_concurrency_safe(&self, call: &Arc<CallInfo>) -> Option<bool>;

    /// Run the call; returns the canonical value.
    async fn execute(&self, call: &Arc<CallInfo>, ctx: BodyContext) -> Result<Value, BodyError>;

    /// Project a canonical value of `call` to content.
    async fn render(&self, call: &Arc<CallInfo>, value: &Value) -> Result<Vec<Content>, BodyError>;

    /// A card for the call (`present-call`), for the person asked to
    /// approve it. `Ok(None)`: the tool has none.
    async fn present_call(&self, call: &Arc<CallInfo>) -> Result<Option<CallCard>, BodyError> {
        let _ = call;
        Ok(None)
    }

    /// The tool's own `finalize-content`, if it has one. `Ok(None)` keeps
    /// the content.
    async fn finalize_content(
        &self,
        call: &Arc<CallInfo>,
        outcome: &Arc<Outcome>,
    ) -> Result<Option<Vec<Content>>, BodyError> {
        let _ = (call, outcome);
        Ok(None)
    }

    /// The MCP server whose tool this is, for a bridged tool (the bridge
    /// replaces its tools in a generation by this mark).
    fn mcp_server(&self) -> Option<&str> {
        None
    }
}
