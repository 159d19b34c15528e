//! MCP ↔ host: a server's tool listing becomes tool definitions, a call's
//! result becomes content and a canonical value.
//!
//! Everything a server sends is untrusted, exactly like what a component
//! returns: names are mapped to public names ([`super::names`]), schemas go
//! through the same compiler as a component's (a tool whose input schema uses
//! a keyword the host does not support is not registered, and the reason is
//! reported — the server's other tools are), descriptions and schemas are
//! held to the same budgets, and results to the same content limits.
//!
//! Annotations: the server's hints become the tool's [`Annotations`] (only
//! the hints it sets to `true`; a policy reading `read-only` knows it is the
//! server's claim). No hint changes what the pipeline runs: every guard and
//! hook sees every call.

use std::collections::{BTreeMap, HashSet};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents, Tool};
use serde_json::Value;

use super::names::name_in;
use crate::budgets::Budgets;
use crate::content::{Content, ResourceContents as Contents, ResourceLink};
use crate::tool::{Annotations, Features, ToolDefinition, ToolMeta};

/// One listed tool, ready to register: its definition, compiled schemas and
/// raw name.
pub struct Listed {
    pub raw: String,
    pub def: ToolDefinition,
    pub parameters: toolgate_schema::Schema,
    pub output: Option<toolgate_schema::Schema>,
}

/// What the operator's configuration says about a server's tools.
pub struct Filter<'a> {
    pub allow: Option<&'a [String]>,
    pub deny: &'a [String],
    /// `[tools.NAME] timeout_ms` by public name.
    pub tool_timeouts: &'a BTreeMap<String, u32>,
    /// The server's `timeout_ms`.
    pub timeout_ms: Option<u32>,
    /// The server's `namespace` (default `true`: `mcp__NAME__TOOL`).
    pub namespaced: bool,
}

/// Turn a server's listing into tools. Returns the tools and one message
/// per tool not registered (or adjusted).
pub fn listing(
    server: &str,
    tools: Vec<Tool>,
    filter: &Filter<'_>,
    budgets: &Budgets,
) -> (Vec<Listed>, Vec<String>) {
    let mut out: Vec<Listed> = Vec::new();
    let mut notes = Vec::new();
    let mut public: HashSet<String> = HashSet::new();
    let mut raws: HashSet<String> = HashSet::new();
    let max = budgets.max_tools_per_plugin;
    let total = tools.len();
    for tool in tools {
        let raw = tool.name.to_string();
        let shown = crate::plugin::log::escape(&raw);
        if filter.allow.is_some_and(|a| !a.contains(&raw)) || filter.deny.contains(&raw) {
            continue;
        }
        if !raws.insert(raw.clone()) {
            notes.push(format!(
                "tool `{shown}` is listed twice by the server; the second is ignored"
            ));
            continue;
        }
        if out.len() == max {
            notes.push(format!(
                "lists {total} tools, more than the host accepts from one server ({max}, `[limits] max_tools_per_plugin`); `{shown}` and the rest are not registered"
            ));
            break;
        }
        let (name, sanitized) = name_in(server, &raw, filter.namespaced);
        if !public.insert(name.clone()) {
            let other = out
                .iter()
                .find(|l| l.def.name == name)
                .map(|l| crate::plugin::log::escape(&l.raw))
                .unwrap_or_default();
            notes.push(format!(
                "tool `{shown}` is not registered: its public name `{name}` is already taken by `{other}` (their digests collide)"
            ));
            continue;
        }
        match one(server, tool, &name, filter, budgets) {
            Ok((listed, note)) => {
                if sanitized {
                    notes.push(format!("tool `{shown}` is registered as `{name}`"));
                }
                if let Some(note) = note {
                    notes.push(format!("tool `{shown}`: {note}"));
                }
                out.push(listed);
            }
            Err(why) => notes.push(format!("tool `{shown}` is not registered: {why}")),
        }
    }
    (out, notes)
}

fn one(
    server: &str,
    tool: Tool,
    name: &str,
    filter: &Filter<'_>,
    budgets: &Budgets,
) -> Result<(Listed, Option<String>), String> {
    let raw = tool.name.to_string();
    let mut note = None;
    let description = tool
        .description
        .as_deref()
        .or(tool.title.as_deref())
        .unwrap_or("")
        .trim()
        .to_string();
    let description = if description.is_empty() {
        format!("`{raw}` from the MCP server `{server}`")
    } else if description.len() > budgets.max_description_bytes {
        note = Some(format!(
            "its description of {} bytes was cut to the host's limit ({}, `[limits] max_description_bytes`)",
            description.len(),
            budgets.max_description_bytes
        ));
        let mut end = budgets.max_description_bytes;
        while !description.is_char_boundary(end) {
            end -= 1;
        }
        description[..end].to_string()
    } else {
        description
    };
    let schema = |what: &str, map: &serde_json::Map<String, Value>| -> Result<Value, String> {
        let value = Value::Object(map.clone());
        let size = value.to_string().len();
        if size > budgets.max_schema_bytes {
            return Err(format!(
                "its {what} schema is {size} bytes, more than the host accepts ({}, `[limits] max_schema_bytes`)",
                budgets.max_schema_bytes
            ));
        }
        toolgate_schema::check_value(&value, &toolgate_schema::Limits::default())
            .map_err(|e| format!("its {what} schema cannot be snapshotted: {e}"))?;
        Ok(value)
    };
    let parameters = schema("input", &tool.input_schema)?;
    let compiled = toolgate_schema::Schema::compile_parameters(&parameters)
        .map_err(|e| format!("its input schema is not accepted: {e}"))?;
    let (output_schema, output) = match &tool.output_schema {
        None => (None, None),
        Some(s) => {
            let v = schema("output", s)?;
            match toolgate_schema::Schema::compile(&v) {
                Ok(c) => (Some(v), Some(c)),
                // The input schema guards the host; the output schema only
                // describes the result. A tool whose output schema the host
                // cannot check is registered without one: its structured
                // content is still its canonical value, but is not passed on
                // as `structuredContent` (which promises a checked shape).
                Err(e) => {
                    let msg = format!(
                        "its output schema is not accepted ({e}); registered without one, so its structuredContent is not checked and not passed on"
                    );
                    note = Some(match note {
                        Some(n) => format!("{n}; {msg}"),
                        None => msg,
                    });
                    (None, None)
                }
            }
        }
    };
    let mut annotations = Annotations::empty();
    if let Some(a) = &tool.annotations {
        for (hint, flag) in [
            (a.read_only_hint, Annotations::READ_ONLY),
            (a.destructive_hint, Annotations::DESTRUCTIVE),
            (a.idempotent_hint, Annotations::IDEMPOTENT),
            (a.open_world_hint, Annotations::OPEN_WORLD),
        ] {
            if hint == Some(true) {
                annotations.insert(flag);
            }
        }
    }
    let timeout_ms = filter
        .tool_timeouts
        .get(name)
        .copied()
        .or(filter.timeout_ms);
    Ok((
        Listed {
            raw,
            def: ToolDefinition {
                name: name.to_string(),
                description,
                parameters,
                output_schema,
                meta: ToolMeta {
                    provider: server.to_string(),
                    timeout_ms,
                    annotations,
                    features: Features::CLASSIFIER,
                    effects: true,
                },
            },
            parameters: compiled,
            output,
        },
        note,
    ))
}

/// A result's content blocks, checked against the content budgets.
pub fn content(blocks: Vec<ContentBlock>, budgets: &Budgets) -> Result<Vec<Content>, String> {
    if blocks.len() > budgets.max_content_blocks {
        return Err(format!(
            "{} content blocks, more than the host accepts in one result ({}, `[limits] max_content_blocks`)",
            blocks.len(),
            budgets.max_content_blocks
        ));
    }
    let mut out = Vec::with_capacity(blocks.len());
    let mut bytes = 0usize;
    for (i, block) in blocks.into_iter().enumerate() {
        let c = block_to_content(block).map_err(|e| format!("content block {i}: {e}"))?;
        bytes += c.approx_len();
        if bytes > budgets.max_content_bytes {
            return Err(format!(
                "more than {} bytes of content (`[limits] max_content_bytes`)",
                budgets.max_content_bytes
            ));
        }
        out.push(c);
    }
    Ok(out)
}

fn decode(what: &str, data: &str) -> Result<Vec<u8>, String> {
    BASE64
        .decode(data.as_bytes())
        .map_err(|e| format!("its {what} is not valid base64: {e}"))
}

/// One MCP content block as host content. Annotations and `_meta` of a
/// block are not kept (host content has no place for them).
pub fn block_to_content(block: ContentBlock) -> Result<Content, String> {
    Ok(match block {
        ContentBlock::Text(t) => Content::Text(t.text),
        ContentBlock::Image(i) => Content::Image {
            data: decode("image data", &i.data)?,
            mime_type: i.mime_type,
        },
        ContentBlock::Audio(a) => Content::Audio {
            data: decode("audio data", &a.data)?,
            mime_type: a.mime_type,
        },
        ContentBlock::Resource(r) => match r.resource {
            ResourceContents::TextResourceContents {
                uri,
                mime_type,
                text,
                ..
            } => Content::Resource {
                uri,
                mime_type,
                contents: Contents::Text(text),
            },
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => Content::Resource {
                uri,
                mime_type,
                contents: Contents::Blob(decode("blob", &blob)?),
            },
            other => {
                return Err(format!(
                    "a kind of resource the host does not know: {other:?}"
                ));
            }
        },
        ContentBlock::ResourceLink(l) => Content::Link(ResourceLink {
            uri: l.uri,
            name: l.name,
            title: l.title,
            description: l.description,
            mime_type: l.mime_type,
        }),
        other => {
            return Err(format!(
                "a kind of content the host does not know: {other:?}"
            ));
        }
    })
}

/// The text of an error result, for its failure message: the text blocks
/// joined, else a description of what it held.
pub fn error_text(result: &CallToolResult) -> String {
    let text: Vec<&str> = result
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    if text.is_empty() {
        format!(
            "the tool reported an error ({} non-text content block(s))",
            result.content.len()
        )
    } else {
        text.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(v: Value) -> Tool {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_tool_with_an_unsupported_keyword_is_refused_the_others_register() {
        let tools = vec![
            tool(
                json!({"name": "ok", "description": "d", "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"a": {"type": "number", "default": 3}}}, "annotations": {"readOnlyHint": true, "destructiveHint": false}}),
            ),
            tool(
                json!({"name": "bad", "description": "d", "inputSchema": {"type": "object", "properties": {"n": {"type": "array", "unevaluatedItems": false}}}}),
            ),
            tool(
                json!({"name": "out", "description": "d", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object", "properties": {"r": {"$id": "r"}}}}),
            ),
            tool(json!({"name": "a.b", "inputSchema": {"type": "object"}})),
        ];
        let timeouts = BTreeMap::from([("mcp__s__ok".to_string(), 77)]);
        let filter = Filter {
            allow: None,
            deny: &[],
            tool_timeouts: &timeouts,
            timeout_ms: Some(5),
            namespaced: true,
        };
        let (listed, notes) = listing("s", tools, &filter, &Budgets::default());
        let names: Vec<&str> = listed.iter().map(|l| l.def.name.as_str()).collect();
        assert_eq!(names[..2], ["mcp__s__ok", "mcp__s__out"]);
        assert!(names[2].starts_with("mcp__s__a_b_"), "{names:?}");
        let all = notes.join("\n");
        assert!(
            all.contains("`bad` is not registered") && all.contains("unevaluatedItems"),
            "{all}"
        );
        assert!(all.contains("output schema is not accepted"), "{all}");
        let ok = &listed[0];
        assert_eq!(ok.def.meta.annotations, Annotations::READ_ONLY);
        assert_eq!(ok.def.meta.provider, "s");
        assert_eq!(ok.def.meta.timeout_ms, Some(77));
        assert_eq!(listed[1].def.meta.timeout_ms, Some(5));
        assert!(listed[1].output.is_none());
        // No description: one is made up naming the server.
        assert!(listed[2].def.description.contains("`s`"));
    }

    /// What pydantic-based servers list (FastMCP, `mcp-server-time`):
    /// `$schema`, `$defs`, recursive references. Registered, checked, and
    /// listed exactly as given.
    #[test]
    fn schemas_with_local_references_register_and_pass_through_unchanged() {
        let input = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {"Node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}, "additionalProperties": false}},
            "properties": {"tree": {"$ref": "#/$defs/Node"}},
            "required": ["tree"],
            "additionalProperties": false,
        });
        let output = json!({"type": "object", "properties": {"t": {"$ref": "#/definitions/T"}}, "definitions": {"T": {"type": "string"}}});
        let tools = vec![tool(
            json!({"name": "refs", "description": "d", "inputSchema": input, "outputSchema": output}),
        )];
        let timeouts = BTreeMap::new();
        let filter = Filter {
            allow: None,
            deny: &[],
            tool_timeouts: &timeouts,
            timeout_ms: None,
            namespaced: true,
        };
        let (listed, notes) = listing("s", tools, &filter, &Budgets::default());
        assert!(notes.is_empty(), "{notes:?}");
        let refs = &listed[0];
        assert_eq!(refs.def.parameters, input);
        assert_eq!(refs.def.output_schema.as_ref(), Some(&output));
        assert!(refs.output.is_some());
        assert!(
            refs.parameters
                .validate(&json!({"tree": {"kids": [{"kids": []}]}}))
                .is_ok()
        );
        let bad = refs
            .parameters
            .validate(&json!({"tree": {"kids": [{"x": 1}]}}))
            .unwrap_err();
        assert_eq!(bad[0].path, "/tree/kids/0/x", "{bad:?}");
        // The MCP listing shows the definition's schemas as they are
        // (toolgate-mcp, `projection::tests`), so as the server gave them.
    }

    #[test]
    fn allow_and_deny_lists_use_raw_names() {
        let tools = || {
            vec![
                tool(json!({"name": "a", "inputSchema": {"type": "object"}})),
                tool(json!({"name": "b", "inputSchema": {"type": "object"}})),
            ]
        };
        let none = BTreeMap::new();
        let allow = vec!["a".to_string()];
        let f = Filter {
            allow: Some(&allow),
            deny: &[],
            tool_timeouts: &none,
            timeout_ms: None,
            namespaced: true,
        };
        let (l, _) = listing("s", tools(), &f, &Budgets::default());
        assert_eq!(l.len(), 1);
        let deny = vec!["a".to_string()];
        let f = Filter {
            allow: None,
            deny: &deny,
            tool_timeouts: &none,
            timeout_ms: None,
            namespaced: true,
        };
        let (l, _) = listing("s", tools(), &f, &Budgets::default());
        assert_eq!(l[0].raw, "b");
    }

    #[test]
    fn every_content_kind_maps() {
        let blocks: Vec<ContentBlock> = serde_json::from_value(json!([
            {"type": "text", "text": "hi", "annotations": {"priority": 1.0}},
            {"type": "image", "data": "AQID", "mimeType": "image/png"},
            {"type": "audio", "data": "BAU=", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "x:1", "mimeType": "text/plain", "text": "t"}},
            {"type": "resource", "resource": {"uri": "x:2", "blob": "AAE="}},
            {"type": "resource_link", "uri": "x:3", "name": "n", "description": "d"}
        ]))
        .unwrap();
        let c = content(blocks, &Budgets::default()).unwrap();
        assert_eq!(c[0], Content::text("hi"));
        assert_eq!(
            c[1],
            Content::Image {
                data: vec![1, 2, 3],
                mime_type: "image/png".into()
            }
        );
        assert!(matches!(&c[2], Content::Audio { data, .. } if data == &[4, 5]));
        assert!(
            matches!(&c[4], Content::Resource { contents: Contents::Blob(b), .. } if b == &[0, 1])
        );
        assert!(
            matches!(&c[5], Content::Link(l) if l.uri == "x:3" && l.description.as_deref() == Some("d"))
        );
        // The wire shape is what the server sent (annotations aside).
        let back = serde_json::to_value(&c).unwrap();
        assert_eq!(back[3]["resource"]["text"], "t");
        assert_eq!(back[5]["type"], "resource_link");
        let bad: Vec<ContentBlock> = serde_json::from_value(
            json!([{"type": "image", "data": "!!", "mimeType": "image/png"}]),
        )
        .unwrap();
        assert!(
            content(bad, &Budgets::default())
                .unwrap_err()
                .contains("base64")
        );
        let budgets = Budgets {
            max_content_blocks: 1,
            ..Budgets::default()
        };
        let two: Vec<ContentBlock> = vec![ContentBlock::text("a"), ContentBlock::text("b")];
        assert!(
            content(two, &budgets)
                .unwrap_err()
                .contains("max_content_blocks")
        );
    }
}
