use serde::Serialize;

use crate::bindings::toolgate::plugin::types::{
    ContentBlock, EmbeddedResource, Media, ResourceContents, ResourceLink,
};

/// Constructors for content blocks.
pub struct Content;

impl Content {
    /// A text block.
    pub fn text(text: impl Into<String>) -> ContentBlock {
        ContentBlock::Text(text.into())
    }

    /// An image block.
    pub fn image(data: Vec<u8>, mime_type: impl Into<String>) -> ContentBlock {
        ContentBlock::Image(Media {
            data,
            mime_type: mime_type.into(),
        })
    }

    /// An audio block.
    pub fn audio(data: Vec<u8>, mime_type: impl Into<String>) -> ContentBlock {
        ContentBlock::Audio(Media {
            data,
            mime_type: mime_type.into(),
        })
    }

    /// A link to a resource the client may fetch.
    pub fn link(uri: impl Into<String>, name: impl Into<String>) -> ContentBlock {
        ContentBlock::Link(ResourceLink {
            uri: uri.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
        })
    }

    /// A JSON document.
    pub fn json<T: Serialize + ?Sized>(value: &T) -> ContentBlock {
        ContentBlock::Json(serde_json::to_string(value).unwrap_or_else(|_| "null".into()))
    }

    /// An embedded text resource.
    pub fn resource_text(
        uri: impl Into<String>,
        mime_type: Option<String>,
        text: impl Into<String>,
    ) -> ContentBlock {
        ContentBlock::Resource(EmbeddedResource {
            uri: uri.into(),
            mime_type,
            contents: ResourceContents::Text(text.into()),
        })
    }

    /// The default rendering of a value: a JSON string becomes its text,
    /// anything else its compact JSON text.
    pub fn from_value(value: &serde_json::Value) -> Vec<ContentBlock> {
        match value {
            serde_json::Value::String(s) => vec![Content::text(s.clone())],
            serde_json::Value::Null => Vec::new(),
            other => vec![Content::text(other.to_string())],
        }
    }
}
