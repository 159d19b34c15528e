//! Glue called by the code `export!` generates. Not a public API.

pub use wit_bindgen;

use crate::bindings::toolgate::plugin::types::{
    self, CallView, ContentBlock, PostDecision, PreDecision, ResultView, ToolFailure, ToolFeatures,
    ToolSpec,
};
use crate::{
    Call, ExecChain, ExecuteAroundHook, Finalizer, Guard, Outcome, PostChain, PostExecuteHook,
    PreChain, PreExecuteHook, ResultObserver, Schema, Tool, ToolError,
};

/// The directory holding the WIT package (for the `export!` macro).
pub const WIT_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../wit");

pub fn tool_spec<T: Tool>() -> ToolSpec {
    let mut features =
        ToolFeatures::CLASSIFIER | ToolFeatures::PRESENT_CALL | ToolFeatures::PRESENT_RESULT;
    if T::FINALIZES {
        features.insert(ToolFeatures::FINALIZER);
    }
    let description = <T as Tool>::description();
    let mut parameters = <T as Schema>::schema();
    // The description is the tool's; repeating it in the schema costs the
    // model tokens and says nothing new.
    if let Some(map) = parameters.as_object_mut()
        && map.get("description").and_then(|d| d.as_str()) == Some(description.as_str())
    {
        map.remove("description");
    }
    ToolSpec {
        name: T::NAME.to_string(),
        description,
        parameters: parameters.to_string(),
        output_schema: T::output_schema().map(|s| s.to_string()),
        timeout_ms: T::timeout_ms(),
        annotations: T::annotations(),
        features,
    }
}

fn args<T: Tool>(arguments: &str) -> Result<T, ToolError> {
    serde_json::from_str(arguments).map_err(|e| {
        ToolError::invalid_input(format!("the arguments do not fit `{}`: {e}", T::NAME))
    })
}

pub fn is_concurrency_safe<T: Tool>(call: &types::Call) -> bool {
    args::<T>(&call.arguments())
        .map(|a| a.is_concurrency_safe())
        .unwrap_or(false)
}

pub fn execute<T: Tool>(call: &types::Call) -> Result<String, ToolFailure> {
    let call = Call::new(call);
    let a = args::<T>(call.arguments_json()).map_err(ToolError::into_wit)?;
    let output = a.execute(&call).map_err(ToolError::into_wit)?;
    serde_json::to_string(&output).map_err(|e| {
        ToolError::new(
            "UNSERIALIZABLE_OUTPUT",
            format!("the value cannot be serialized: {e}"),
        )
        .into_wit()
    })
}

pub fn render<T: Tool>(value: &str) -> Result<Vec<ContentBlock>, ToolFailure> {
    let output: T::Output = serde_json::from_str(value).map_err(|e| {
        ToolError::new(
            "INVALID_VALUE",
            format!("the value does not fit `{}`'s output type: {e}", T::NAME),
        )
        .into_wit()
    })?;
    Ok(T::render(output))
}

pub fn finalize_content<T: Tool>(
    call: &types::Call,
    result: &types::CallResult,
) -> Option<Vec<ContentBlock>> {
    T::finalize_content(&Call::new(call), &Outcome::of(result))
}

pub fn present_call<T: Tool>(call: &types::Call) -> Option<CallView> {
    args::<T>(&call.arguments()).ok()?.present_call()
}

pub fn present_result<T: Tool>(
    call: &types::Call,
    result: &types::CallResult,
) -> Option<ResultView> {
    args::<T>(&call.arguments())
        .ok()?
        .present_result(&Outcome::of(result))
}

pub fn unknown_tool(name: &str) -> ToolFailure {
    ToolError::new(
        "UNKNOWN_TOOL",
        format!("this component has no tool `{name}`"),
    )
    .into_wit()
}

pub fn guard<G: Guard>(call: &types::Call) -> Option<String> {
    G::check(&Call::new(call))
}

pub fn pre_execute<H: PreExecuteHook>(call: &types::Call) -> PreDecision {
    H::pre_execute(&Call::new(call), PreChain(()))
}

pub fn around_execute<H: ExecuteAroundHook>(call: &types::Call) -> types::CallResult {
    H::around_execute(&Call::new(call), ExecChain(()))
}

pub fn post_execute<H: PostExecuteHook>(
    call: &types::Call,
    result: &types::CallResult,
) -> PostDecision {
    H::post_execute(&Call::new(call), &Outcome::of(result), PostChain(()))
}

pub fn finalizer<F: Finalizer>(
    call: &types::Call,
    result: &types::CallResult,
) -> Option<Vec<ContentBlock>> {
    F::finalize_content(&Call::new(call), &Outcome::of(result))
}

pub fn observer<O: ResultObserver>(call: &types::Call, result: &types::CallResult) {
    O::on_result(&Call::new(call), &Outcome::of(result))
}

/// The tool a call is for (dispatch in a component with several tools).
pub fn tool_name(call: &types::Call) -> String {
    call.tool_name()
}
