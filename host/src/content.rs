//! Model-visible content blocks.
//!
//! Inside the host, content mirrors the WIT `content-block` variant exactly
//! (so nothing is lost between stages); it is serialized to the MCP content
//! shapes only at the edge (`toolgate run`, the MCP server, audit records).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;

use crate::bindings::wit;

/// URI given to embedded JSON documents when they are shown as MCP resources.
pub const JSON_RESOURCE_URI: &str = "toolgate:json";

/// One block of model-visible content.
#[derive(Clone, Debug, PartialEq)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// An image; `data` is raw bytes (base64-encoded on the wire).
    Image { data: Vec<u8>, mime_type: String },
    /// A JSON document (an `application/json` embedded resource on the wire).
    Json(Value),
    /// An embedded resource.
    Resource {
        uri: String,
        mime_type: Option<String>,
        contents: ResourceContents,
    },
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
            Content::Image { data, mime_type } => data.len() + mime_type.len(),
            Content::Json(v) => v.to_string().len(),
            Content::Resource { uri, contents, .. } => {
                uri.len()
                    + match contents {
                        ResourceContents::Text(t) => t.len(),
                        ResourceContents::Blob(b) => b.len(),
                    }
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

/// Convert guest content to host content. Embedded JSON is snapshotted like
/// every other JSON crossing the boundary.
pub fn from_wit(
    blocks: Vec<wit::ContentBlock>,
    limits: &toolgate_schema::Limits,
) -> Result<Vec<Content>, ContentError> {
    blocks
        .into_iter()
        .enumerate()
        .map(|(index, b)| {
            Ok(match b {
                wit::ContentBlock::Text(t) => Content::Text(t),
                wit::ContentBlock::Image(img) => Content::Image {
                    data: img.data,
                    mime_type: img.mime_type,
                },
                wit::ContentBlock::Json(text) => {
                    Content::Json(toolgate_schema::parse(&text, limits).map_err(|e| {
                        ContentError {
                            index,
                            reason: format!("embedded JSON is not acceptable: {e}"),
                        }
                    })?)
                }
                wit::ContentBlock::Resource(r) => Content::Resource {
                    uri: r.uri,
                    mime_type: r.mime_type,
                    contents: match r.contents {
                        wit::ResourceContents::Text(t) => ResourceContents::Text(t),
                        wit::ResourceContents::Blob(b) => ResourceContents::Blob(b),
                    },
                },
            })
        })
        .collect()
}

/// Convert host content to the WIT shape, for policies that receive a result.
pub fn to_wit(blocks: &[Content]) -> Vec<wit::ContentBlock> {
    blocks
        .iter()
        .map(|b| match b {
            Content::Text(t) => wit::ContentBlock::Text(t.clone()),
            Content::Image { data, mime_type } => wit::ContentBlock::Image(wit::Image {
                data: data.clone(),
                mime_type: mime_type.clone(),
            }),
            Content::Json(v) => wit::ContentBlock::Json(v.to_string()),
            Content::Resource {
                uri,
                mime_type,
                contents,
            } => wit::ContentBlock::Resource(wit::EmbeddedResource {
                uri: uri.clone(),
                mime_type: mime_type.clone(),
                contents: match contents {
                    ResourceContents::Text(t) => wit::ResourceContents::Text(t.clone()),
                    ResourceContents::Blob(b) => wit::ResourceContents::Blob(b.clone()),
                },
            }),
        })
        .collect()
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
