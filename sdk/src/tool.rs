use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::bindings::toolgate::plugin::types::{
    CallView, ContentBlock, ResultView, ToolAnnotations,
};
use crate::{Call, Content, Outcome, Schema, ToolError};

/// A tool, implemented on the type of its arguments.
///
/// The parameters schema is `<Self as Schema>::schema()` (derive it with
/// `#[derive(Schema)]`), the description the type's doc comment unless
/// [`Tool::description`] says otherwise. Only `NAME`, the description and
/// the parameters reach the model; everything else is host metadata.
pub trait Tool: DeserializeOwned + Schema + Sized {
    /// The tool's name: 1–64 characters of `[A-Za-z0-9_-]`.
    const NAME: &'static str;

    /// The canonical value `execute` returns.
    type Output: Serialize + DeserializeOwned;

    /// Adjusts content once per final result ([`Tool::finalize_content`]).
    const FINALIZES: bool = false;

    /// Run the call.
    fn execute(self, call: &Call) -> Result<Self::Output, ToolError>;

    /// What the model is told the tool does.
    fn description() -> String {
        <Self as Schema>::description()
            .map(str::to_string)
            .unwrap_or_else(|| format!("The `{}` tool.", Self::NAME))
    }

    /// Project the value to model-visible content. Default: a string value
    /// is its text, anything else its JSON text.
    fn render(output: Self::Output) -> Vec<ContentBlock> {
        match serde_json::to_value(&output) {
            Ok(v) => Content::from_value(&v),
            Err(e) => vec![Content::text(format!("(unrenderable value: {e})"))],
        }
    }

    /// JSON Schema of the output, checked by the host (e.g.
    /// `Some(MyOutput::schema())`). Default: unchecked.
    fn output_schema() -> Option<serde_json::Value> {
        None
    }

    /// Cooperative time budget of one call, enforced by the timeout policy.
    fn timeout_ms() -> Option<u32> {
        None
    }

    /// Behaviour hints for policies.
    fn annotations() -> ToolAnnotations {
        ToolAnnotations::empty()
    }

    /// May this call overlap other calls? Only an exact `true` makes it
    /// parallel. Default: no.
    fn is_concurrency_safe(&self) -> bool {
        false
    }

    /// With `FINALIZES = true`: adjust the final content (`None` keeps it).
    fn finalize_content(call: &Call, result: &Outcome) -> Option<Vec<ContentBlock>> {
        let _ = (call, result);
        None
    }

    /// A card for the call in a user interface.
    fn present_call(&self) -> Option<CallView> {
        None
    }

    /// A card for the result in a user interface.
    fn present_result(&self, result: &Outcome) -> Option<ResultView> {
        let _ = result;
        None
    }
}
