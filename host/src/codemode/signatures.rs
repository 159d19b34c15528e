//! The model-facing `run_code` under Code Mode: one tool whose description
//! declares every other tool as a compact TypeScript-like signature,
//! generated from its parameter schema (`type, properties, required,
//! additionalProperties, items, enum, const, oneOf, anyOf, allOf`; other
//! keywords narrow a type without changing its shape, or read as `any`),
//! with the first sentence of its description as a comment.
//!
//! ```text
//! /** Read a file. */
//! read(args: { path: string; offset?: number | null; limit?: number | null }): Promise<any>
//! ```

use serde_json::Value;

use super::RUN_CODE;
use crate::tool::ModelTool;

/// What `run_code` says about itself, before the tool list.
pub const BASE_DESCRIPTION: &str = "Run a JavaScript program (ES2020+, the body of an async function) that calls tools. \
Call a tool with `await tools.NAME(args)` or `await tools.call(\"NAME\", args)`; \
a refused or failed call throws a ToolError with `.code` and `.message`, which the program may catch. \
`Promise.all` runs calls side by side where the tools allow. \
`console.log` prints; printed output and the JSON `return` value are the result. \
There is no file system, network or timer: only the tools.";

/// The longest description comment per tool (characters).
const MAX_SUMMARY_CHARS: usize = 160;

/// The model-facing list under Code Mode: `run_code` alone, declaring
/// `tools` (every other tool of `all`).
pub fn project(all: &[ModelTool]) -> Vec<ModelTool> {
    let Some(run_code) = all.iter().find(|t| t.name == RUN_CODE) else {
        return Vec::new();
    };
    let mut description = String::from(BASE_DESCRIPTION);
    description.push_str("\n\ndeclare const tools: {\n");
    for tool in all.iter().filter(|t| t.name != RUN_CODE) {
        let summary = summary(&tool.description);
        if !summary.is_empty() {
            description.push_str(&format!("  /** {summary} */\n"));
        }
        description.push_str(&format!(
            "  {}(args: {}): Promise<any>;\n",
            property_name(&tool.name),
            ts_type(&tool.parameters, 0)
        ));
    }
    description.push('}');
    vec![ModelTool {
        name: run_code.name.clone(),
        description,
        parameters: run_code.parameters.clone(),
    }]
}

/// The first sentence, on one line, cut.
fn summary(description: &str) -> String {
    let one_line = description.split_whitespace().collect::<Vec<_>>().join(" ");
    let first = match one_line.find(". ") {
        Some(i) => &one_line[..=i],
        None => one_line.as_str(),
    };
    let mut out: String = first.chars().take(MAX_SUMMARY_CHARS).collect();
    if first.chars().count() > MAX_SUMMARY_CHARS {
        out.push('…');
    }
    out.replace("*/", "* /")
}

/// A name as a TypeScript property: bare if it is an identifier, quoted if
/// not (`mcp__server__tool` is one; `my-tool` is not).
fn property_name(name: &str) -> String {
    let ident = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if ident {
        name.to_string()
    } else {
        serde_json::to_string(name).unwrap_or_default()
    }
}

/// Depth past which a type is written `any` (a deep schema stays short).
const MAX_DEPTH: usize = 4;

/// A JSON Schema of the accepted subset as a TypeScript type.
pub fn ts_type(schema: &Value, depth: usize) -> String {
    if depth > MAX_DEPTH {
        return "any".into();
    }
    let Some(obj) = schema.as_object() else {
        return "any".into();
    };
    if let Some(c) = obj.get("const") {
        return serde_json::to_string(c).unwrap_or_else(|_| "any".into());
    }
    if let Some(Value::Array(options)) = obj.get("enum") {
        return options
            .iter()
            .map(|o| serde_json::to_string(o).unwrap_or_else(|_| "any".into()))
            .collect::<Vec<_>>()
            .join(" | ");
    }
    // `allOf` beside a type of its own: the type says more (the branches
    // often only add `required` or bounds).
    let own_type = obj.contains_key("type") || obj.contains_key("properties");
    for (keyword, joint) in [("oneOf", " | "), ("anyOf", " | "), ("allOf", " & ")] {
        if keyword == "allOf" && own_type {
            continue;
        }
        if let Some(Value::Array(options)) = obj.get(keyword) {
            return options
                .iter()
                .map(|o| ts_type(o, depth + 1))
                .collect::<Vec<_>>()
                .join(joint);
        }
    }
    match obj.get("type") {
        Some(Value::String(t)) => single(t, obj, depth),
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .map(|t| single(t, obj, depth))
            .collect::<Vec<_>>()
            .join(" | "),
        _ if obj.contains_key("properties") => single("object", obj, depth),
        _ => "any".into(),
    }
}

fn single(t: &str, obj: &serde_json::Map<String, Value>, depth: usize) -> String {
    match t {
        "string" => "string".into(),
        "integer" | "number" => "number".into(),
        "boolean" => "boolean".into(),
        "null" => "null".into(),
        "array" => match obj.get("items") {
            Some(items) => {
                let inner = ts_type(items, depth + 1);
                if inner.contains(' ') {
                    format!("Array<{inner}>")
                } else {
                    format!("{inner}[]")
                }
            }
            None => "any[]".into(),
        },
        "object" => {
            let required: Vec<&str> = obj
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut fields = Vec::new();
            if let Some(Value::Object(props)) = obj.get("properties") {
                for (name, schema) in props {
                    let optional = if required.contains(&name.as_str()) {
                        ""
                    } else {
                        "?"
                    };
                    fields.push(format!(
                        "{}{optional}: {}",
                        property_name(name),
                        ts_type(schema, depth + 1)
                    ));
                }
            }
            match obj.get("additionalProperties") {
                Some(Value::Bool(false)) => {}
                Some(extra @ Value::Object(_)) => {
                    fields.push(format!("[key: string]: {}", ts_type(extra, depth + 1)))
                }
                _ if fields.is_empty() => fields.push("[key: string]: any".into()),
                _ => {}
            }
            if fields.is_empty() {
                "{}".into()
            } else {
                format!("{{ {} }}", fields.join("; "))
            }
        }
        _ => "any".into(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn object_with_optional_and_enum() {
        let s = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "mode": {"enum": ["a", "b"]},
                "lines": {"type": "array", "items": {"type": "integer"}}
            },
            "required": ["path"],
            "additionalProperties": false
        });
        assert_eq!(
            ts_type(&s, 0),
            r#"{ path: string; mode?: "a" | "b"; lines?: number[] }"#
        );
    }

    #[test]
    fn any_of_is_a_union_and_all_of_an_intersection() {
        let s = json!({"anyOf": [{"type": "string"}, {"type": "null"}]});
        assert_eq!(ts_type(&s, 0), "string | null");
        let s = json!({"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}, {"type": "object", "properties": {"b": {"type": "integer"}}}]});
        assert_eq!(ts_type(&s, 0), "{ a: string } & { b?: number }");
        let s = json!({"type": "string", "allOf": [{"minLength": 1}]});
        assert_eq!(ts_type(&s, 0), "string");
    }

    #[test]
    fn names_that_are_not_identifiers_are_quoted() {
        assert_eq!(property_name("read_file"), "read_file");
        assert_eq!(property_name("my-tool"), "\"my-tool\"");
    }

    #[test]
    fn deep_schemas_stay_short() {
        let mut s = json!({"type": "string"});
        for _ in 0..20 {
            s = json!({"type": "array", "items": s});
        }
        assert!(ts_type(&s, 0).contains("any"));
    }
}
