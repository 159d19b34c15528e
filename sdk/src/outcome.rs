use std::cell::OnceCell;

use serde_json::Value;

use crate::bindings::toolgate::plugin::types::{self, ContentBlock, ToolFailure};
use crate::{Content, ToolError};

/// A result, as a post-execute hook, a finalizer or an observer sees it.
///
/// The result lives in the host; this is a handle to it. Each part is
/// fetched the first time it is asked for, then kept: a finalizer that reads
/// only the text never copies the images.
pub struct Outcome<'a> {
    handle: &'a types::CallResult,
    is_error: OnceCell<bool>,
    text: OnceCell<String>,
    content: OnceCell<Vec<ContentBlock>>,
    value: OnceCell<Option<Value>>,
    error: OnceCell<Option<ToolFailure>>,
}

impl<'a> Outcome<'a> {
    /// A view of `handle` (what `ExecChain::next` returned, say).
    pub fn of(handle: &'a types::CallResult) -> Self {
        Outcome {
            handle,
            is_error: OnceCell::new(),
            text: OnceCell::new(),
            content: OnceCell::new(),
            value: OnceCell::new(),
            error: OnceCell::new(),
        }
    }

    /// Whether the result is a failure.
    pub fn is_error(&self) -> bool {
        *self.is_error.get_or_init(|| self.handle.is_error())
    }

    /// The text blocks of the content, joined by newlines.
    pub fn text(&self) -> &str {
        self.text.get_or_init(|| self.handle.text())
    }

    /// The model-visible content.
    pub fn content(&self) -> &[ContentBlock] {
        self.content.get_or_init(|| self.handle.content())
    }

    /// The canonical value (a success, while the call executes); `None` for
    /// failures and for recorded results (observers).
    pub fn value(&self) -> Option<&Value> {
        self.value
            .get_or_init(|| {
                self.handle
                    .value()
                    .and_then(|text| serde_json::from_str(&text).ok())
            })
            .as_ref()
    }

    /// The result's meta, if any.
    pub fn meta(&self) -> Option<Value> {
        self.handle
            .meta()
            .and_then(|text| serde_json::from_str(&text).ok())
    }

    /// The failure, if the result is one.
    pub fn error(&self) -> Option<&ToolFailure> {
        self.error.get_or_init(|| self.handle.error()).as_ref()
    }

    /// The raw handle.
    pub fn handle(&self) -> &types::CallResult {
        self.handle
    }
}

/// A new successful result, for an execute-around hook that replaces the
/// one it got.
pub fn success(value: &impl serde::Serialize, content: Vec<ContentBlock>) -> types::CallResult {
    types::CallResult::new(&types::ToolResult::Success(types::Success {
        value: serde_json::to_string(value).unwrap_or_else(|_| "null".into()),
        content,
        meta: None,
    }))
}

/// A new failed result, for an execute-around hook that replaces the one it
/// got. The content defaults to the error's message.
pub fn failure(error: ToolError, content: Option<Vec<ContentBlock>>) -> types::CallResult {
    let content = content.unwrap_or_else(|| vec![Content::text(error.message())]);
    types::CallResult::new(&types::ToolResult::Failure(types::Failure {
        error: error.into_wit(),
        content,
    }))
}
