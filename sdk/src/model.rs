//! The `model` seam (since contract 0.2.8): ask one of the models the
//! operator configured (`[models.NAME]`), granted by `models = ["NAME"]`.
//! The host makes the request with the model's key (the component never
//! sees it), through its egress, with retries, within the call's deadline;
//! the tokens count against the calling client's budget and the request is
//! in the call's record. The model runs no tool: its answer holds the tool
//! calls it wants, and the component decides what to do with them.
//!
//! ```ignore
//! use toolgate_sdk::model::{self, Message, Request};
//! let reply = model::complete(&Request {
//!     model: "local".into(),
//!     system: "Answer in one word.".into(),
//!     messages: vec![Message::User("Capital of France?".into())],
//!     tools: vec![],
//! })
//! .map_err(|e| model::message(&e))?;
//! ```

use crate::bindings::toolgate::plugin::model as raw;
pub use crate::bindings::toolgate::plugin::model::{
    Message, ModelError, Reply, Request, ToolResult, ToolSpec, ToolUse, Usage,
};

/// The models this plugin may ask (its grant, as configured).
pub fn models() -> Vec<String> {
    raw::models()
}

/// One answer of `request.model` to the conversation.
pub fn complete(request: &Request) -> Result<Reply, ModelError> {
    raw::complete(request)
}

/// What an error says, as one sentence for the model or the user.
pub fn message(e: &ModelError) -> String {
    match e {
        ModelError::NotGranted(m)
        | ModelError::InvalidRequest(m)
        | ModelError::Budget(m)
        | ModelError::Refused(m)
        | ModelError::Unavailable(m) => m.clone(),
        ModelError::Rejected((status, m)) => format!("the provider refused (HTTP {status}): {m}"),
    }
}
