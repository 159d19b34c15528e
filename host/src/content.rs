//! Model-visible content blocks.
//!
//! Inside the host, content mirrors the WIT `content-block` variant exactly
//! (so nothing is lost between stages); it is serialized to the MCP content
//! shapes only at the edge (`toolgate run`, the MCP server, audit records).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;

/// URI given to embedded JSON documents when they are shown as MCP resources.
pub const JSON_RESOURCE_URI: &str = "toolgate:json";

/// One block of model-visible content.
#[derive(Clone, Debug, PartialEq)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// An image; `data` is raw bytes (base64-encoded on the wire).
    Image { data: Vec<u8>, mime_type: String },
    /// An audio clip; `data` is raw bytes (base64-encoded on the wire).
    Audio { data: Vec<u8>, mime_type: String },
    /// A JSON document (an `application/json` embedded resource on the wire).
    Json(Value),
    /// An embedded resource.
    Resource {
        uri: String,
        mime_type: Option<String>,
        contents: ResourceContents,
    },
    /// A link to a resource the client may fetch (MCP `resource_link`).
    Link(ResourceLink),
}

/// A link to a resource (MCP `resource_link` content).
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceLink {
    pub uri: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
}

/// What an embedded resource carries.
#[derive(Clone, Debug, PartialEq)]
pub enum ResourceContents {
    Text(String),
    Blob(Vec<u8>),
}

impl Content {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text(text.into())
    }

    /// The text of a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Content::Text(t) => Some(t),
            _ => None,
        }
    }

    /// Bytes this block occupies, roughly; used for size limits.
    pub fn approx_len(&self) -> usize {
        match self {
            Content::Text(t) => t.len(),
            Content::Image { data, mime_type } | Content::Audio { data, mime_type } => {
                data.len() + mime_type.len()
            }
            Content::Json(v) => v.to_string().len(),
            Content::Resource { uri, contents, .. } => {
                uri.len()
                    + match contents {
                        ResourceContents::Text(t) => t.len(),
                        ResourceContents::Blob(b) => b.len(),
                    }
            }
            Content::Link(l) => {
                l.uri.len()
                    + l.name.len()
                    + [&l.title, &l.description, &l.mime_type]
                        .iter()
                        .map(|s| s.as_ref().map_or(0, String::len))
                        .sum::<usize>()
            }
        }
    }
}

impl serde::Serialize for Content {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        match self {
            Content::Text(text) => {
                m.serialize_entry("type", "text")?;
                m.serialize_entry("text", text)?;
            }
            Content::Image { data, mime_type } => {
                m.serialize_entry("type", "image")?;
                m.serialize_entry("data", &BASE64.encode(data))?;
                m.serialize_entry("mimeType", mime_type)?;
            }
            Content::Audio { data, mime_type } => {
                m.serialize_entry("type", "audio")?;
                m.serialize_entry("data", &BASE64.encode(data))?;
                m.serialize_entry("mimeType", mime_type)?;
            }
            Content::Json(value) => {
                m.serialize_entry("type", "resource")?;
                m.serialize_entry(
                    "resource",
                    &serde_json::json!({
                        "uri": JSON_RESOURCE_URI,
                        "mimeType": "application/json",
                        "text": value.to_string(),
                    }),
                )?;
            }
            Content::Resource {
                uri,
                mime_type,
                contents,
            } => {
                let mut r = serde_json::Map::new();
                r.insert("uri".into(), Value::String(uri.clone()));
                if let Some(mt) = mime_type {
                    r.insert("mimeType".into(), Value::String(mt.clone()));
                }
                match contents {
                    ResourceContents::Text(t) => r.insert("text".into(), Value::String(t.clone())),
                    ResourceContents::Blob(b) => {
                        r.insert("blob".into(), Value::String(BASE64.encode(b)))
                    }
                };
                m.serialize_entry("type", "resource")?;
                m.serialize_entry("resource", &r)?;
            }
            Content::Link(l) => {
                m.serialize_entry("type", "resource_link")?;
                m.serialize_entry("uri", &l.uri)?;
                m.serialize_entry("name", &l.name)?;
                for (key, v) in [
                    ("title", &l.title),
                    ("description", &l.description),
                    ("mimeType", &l.mime_type),
                ] {
                    if let Some(v) = v {
                        m.serialize_entry(key, v)?;
                    }
                }
            }
        }
        m.end()
    }
}

/// A content block from a guest was not acceptable.
#[derive(Debug, thiserror::Error)]
#[error("content block {index}: {reason}")]
pub struct ContentError {
    pub index: usize,
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_shapes() {
        let blocks = vec![
            Content::text("hi"),
            Content::Image {
                data: vec![1, 2, 3],
                mime_type: "image/png".into(),
            },
            Content::Json(serde_json::json!({"a": 1})),
        ];
        let v = serde_json::to_value(&blocks).unwrap();
        assert_eq!(v[0], serde_json::json!({"type": "text", "text": "hi"}));
        assert_eq!(
            v[1],
            serde_json::json!({"type": "image", "data": "AQID", "mimeType": "image/png"})
        );
        assert_eq!(v[2]["resource"]["mimeType"], "application/json");
        assert_eq!(v[2]["resource"]["text"], "{\"a\":1}");
    }
}
