//! The model-facing projection of the tools, in every shape a client asks
//! for: `toolgate tools` (JSON, Anthropic, OpenAI) and MCP `tools/list`.
//!
//! Why one module: what a model is shown of a tool is a security boundary
//! (host metadata — the timeout, the classifier, the provider — never
//! reaches it), so every shape is derived here from the same
//! [`ToolDefinition`], and a new field cannot reach one shape by accident.
//! MCP adds two things the others lack: the annotation hints and the output
//! schema, both of which the MCP protocol defines for clients.

use std::sync::Arc;

use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{Map, Value, json};

use toolgate::tool::{Annotations, ModelTool, ToolDefinition};

/// The shapes of `toolgate tools`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ToolsFormat {
    /// `[{name, description, parameters}]`.
    Json,
    /// The Anthropic Messages API `tools` array.
    Anthropic,
    /// The OpenAI Chat Completions `tools` array.
    Openai,
}

/// The tools in the shape an API expects. Only name, description and
/// parameters are ever included.
pub fn project(tools: &[ModelTool], format: ToolsFormat) -> Value {
    Value::Array(
        tools
            .iter()
            .map(|t| match format {
                ToolsFormat::Json => {
                    json!({"name": t.name, "description": t.description, "parameters": t.parameters})
                }
                ToolsFormat::Anthropic => {
                    json!({"name": t.name, "description": t.description, "input_schema": t.parameters})
                }
                ToolsFormat::Openai => json!({
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters}
                }),
            })
            .collect(),
    )
}

/// A tool as MCP `tools/list` shows it: name, description, `inputSchema`,
/// the annotation hints the tool claims, and `outputSchema` if it declares
/// one.
pub fn mcp_tool(def: &ToolDefinition) -> Tool {
    let mut tool = Tool::default();
    tool.name = def.name.clone().into();
    tool.description = Some(def.description.clone().into());
    tool.input_schema = Arc::new(object(&def.parameters));
    tool.output_schema = def.output_schema.as_ref().map(|s| Arc::new(object(s)));
    tool.annotations = hints(def.meta.annotations);
    tool
}

/// The MCP hints for a tool's annotations. Only what the tool claims is
/// sent (as `true`): an omitted hint takes the protocol's default, which is
/// the cautious one (not read-only, destructive, not idempotent, open
/// world). Sending `false` for a flag the tool left unset would tell the
/// client more than the tool said — e.g. that it is safe to run unasked.
pub fn hints(a: Annotations) -> Option<ToolAnnotations> {
    if a == Annotations::empty() {
        return None;
    }
    let claim = |flag| a.contains(flag).then_some(true);
    Some(ToolAnnotations::from_raw(
        None,
        claim(Annotations::READ_ONLY),
        claim(Annotations::DESTRUCTIVE),
        claim(Annotations::IDEMPOTENT),
        claim(Annotations::OPEN_WORLD),
    ))
}

/// A schema as a JSON object (every compiled schema is one; anything else
/// becomes `{}` rather than a panic).
fn object(schema: &Value) -> Map<String, Value> {
    match schema {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgate::tool::{Features, ToolMeta};

    fn def(annotations: Annotations, output: Option<Value>) -> ToolDefinition {
        ToolDefinition {
            name: "t".into(),
            description: "d".into(),
            parameters: json!({"type": "object", "properties": {}}),
            output_schema: output,
            meta: ToolMeta {
                provider: "p".into(),
                timeout_ms: Some(5),
                annotations,
                features: Features::CLASSIFIER,
                effects: true,
            },
        }
    }

    #[test]
    fn mcp_shows_claimed_hints_and_output_schema_only() {
        let t = mcp_tool(&def(
            Annotations::READ_ONLY | Annotations::IDEMPOTENT,
            Some(json!({"type": "object"})),
        ));
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(
            v,
            json!({
                "name": "t", "description": "d",
                "inputSchema": {"type": "object", "properties": {}},
                "outputSchema": {"type": "object"},
                "annotations": {"readOnlyHint": true, "idempotentHint": true},
            })
        );
        let bare = serde_json::to_value(mcp_tool(&def(Annotations::empty(), None))).unwrap();
        assert_eq!(bare.get("annotations"), None);
        assert_eq!(bare.get("outputSchema"), None);
        // Host metadata never reaches the client.
        let text = bare.to_string();
        assert!(
            !text.contains("timeout") && !text.contains("\"p\""),
            "{text}"
        );
    }

    /// A bridged server's schemas with `$schema`, `$defs` and recursive
    /// references (kept whole by `toolgate::bridge::convert`) are listed
    /// exactly as given, input and output.
    #[test]
    fn mcp_shows_schemas_with_local_references_unchanged() {
        let input = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {"Node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}, "additionalProperties": false}},
            "properties": {"tree": {"$ref": "#/$defs/Node"}},
            "required": ["tree"],
            "additionalProperties": false,
        });
        let output = json!({"type": "object", "properties": {"t": {"$ref": "#/definitions/T"}}, "definitions": {"T": {"type": "string"}}});
        let mut d = def(Annotations::empty(), Some(output.clone()));
        d.parameters = input.clone();
        let shown = mcp_tool(&d);
        assert_eq!(Value::Object((*shown.input_schema).clone()), input);
        let shown_output = shown.output_schema.as_deref().cloned().map(Value::Object);
        assert_eq!(shown_output, Some(output));
    }
}
