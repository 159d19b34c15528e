//! Host types ↔ `toolgate:plugin@0.2.x` types.
//!
//! Host → guest conversions are total. Guest → host conversions cross an
//! untrusted boundary: every string and list is checked against the
//! [`Budgets`] (cut where a cut keeps the meaning — a reason, a message —
//! refused where it does not — content, JSON), and JSON is snapshotted with
//! the schema crate's limits. Nothing a guest returns reaches the rest of
//! the host without passing through here.

use serde_json::Value;

use crate::bindings::v0_2::toolgate::plugin::process as wit_process;
use crate::bindings::v0_2::wit;
use crate::budgets::{Budgets, cut};
use crate::call::{Annotations, Features};
use crate::content::{Content, ContentError, ResourceContents, ResourceLink};
use crate::outcome::CallError;
use crate::policy::{PostDecision, PreDecision};
use crate::seams::process;

/// Map each flag of one flag set to the same-named flag of another (the
/// generated WIT flags have no raw bits).
macro_rules! map_flags {
    ($value:expr, $from:ty => $to:ty, [$($flag:ident),*]) => {{
        let value = $value;
        let mut out = <$to>::empty();
        $(if value.contains(<$from>::$flag) { out |= <$to>::$flag; })*
        out
    }};
}
pub(crate) use map_flags;

pub fn annotations_to_wit(a: Annotations) -> wit::ToolAnnotations {
    map_flags!(a, Annotations => wit::ToolAnnotations, [READ_ONLY, DESTRUCTIVE, IDEMPOTENT, OPEN_WORLD])
}

pub fn annotations_from_wit(a: wit::ToolAnnotations) -> Annotations {
    map_flags!(a, wit::ToolAnnotations => Annotations, [READ_ONLY, DESTRUCTIVE, IDEMPOTENT, OPEN_WORLD])
}

pub fn features_from_wit(f: wit::ToolFeatures) -> Features {
    map_flags!(f, wit::ToolFeatures => Features, [CLASSIFIER, FINALIZER, PRESENT_CALL, PRESENT_RESULT])
}

/// Host content as the guest sees it.
pub fn content_to_wit(blocks: &[Content]) -> Vec<wit::ContentBlock> {
    blocks
        .iter()
        .map(|b| match b {
            Content::Text(t) => wit::ContentBlock::Text(t.clone()),
            Content::Image { data, mime_type } => wit::ContentBlock::Image(wit::Media {
                data: data.clone(),
                mime_type: mime_type.clone(),
            }),
            Content::Audio { data, mime_type } => wit::ContentBlock::Audio(wit::Media {
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
            Content::Link(l) => wit::ContentBlock::Link(wit::ResourceLink {
                uri: l.uri.clone(),
                name: l.name.clone(),
                title: l.title.clone(),
                description: l.description.clone(),
                mime_type: l.mime_type.clone(),
            }),
        })
        .collect()
}

/// The text blocks of `blocks`, joined by newlines.
pub fn text_of(blocks: &[Content]) -> String {
    blocks
        .iter()
        .filter_map(Content::as_text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Guest content, checked: at most `max_content_blocks` blocks and
/// `max_content_bytes` bytes in all; embedded JSON snapshotted.
pub fn content_from_wit(
    blocks: Vec<wit::ContentBlock>,
    budgets: &Budgets,
    limits: &toolgate_schema::Limits,
) -> Result<Vec<Content>, ContentError> {
    if blocks.len() > budgets.max_content_blocks {
        return Err(ContentError {
            index: budgets.max_content_blocks,
            reason: format!(
                "{} blocks, more than the host accepts in one result ({}, `[limits] max_content_blocks`)",
                blocks.len(),
                budgets.max_content_blocks
            ),
        });
    }
    let mut total = 0usize;
    let mut out = Vec::with_capacity(blocks.len());
    for (index, b) in blocks.into_iter().enumerate() {
        let block = match b {
            wit::ContentBlock::Text(t) => Content::Text(t),
            wit::ContentBlock::Image(m) => Content::Image {
                data: m.data,
                mime_type: m.mime_type,
            },
            wit::ContentBlock::Audio(m) => Content::Audio {
                data: m.data,
                mime_type: m.mime_type,
            },
            wit::ContentBlock::Json(text) => Content::Json(
                toolgate_schema::parse(&text, limits).map_err(|e| ContentError {
                    index,
                    reason: format!("embedded JSON is not acceptable: {e}"),
                })?,
            ),
            wit::ContentBlock::Resource(r) => Content::Resource {
                uri: r.uri,
                mime_type: r.mime_type,
                contents: match r.contents {
                    wit::ResourceContents::Text(t) => ResourceContents::Text(t),
                    wit::ResourceContents::Blob(b) => ResourceContents::Blob(b),
                },
            },
            wit::ContentBlock::Link(l) => Content::Link(ResourceLink {
                uri: l.uri,
                name: l.name,
                title: l.title,
                description: l.description,
                mime_type: l.mime_type,
            }),
        };
        total = total.saturating_add(block.approx_len());
        if total > budgets.max_content_bytes {
            return Err(ContentError {
                index,
                reason: format!(
                    "the content passes {} bytes here, more than the host accepts in one result ({}, `[limits] max_content_bytes`)",
                    total, budgets.max_content_bytes
                ),
            });
        }
        out.push(block);
    }
    Ok(out)
}

/// A host failure as the guest sees it.
pub fn failure_to_wit(error: &CallError) -> wit::ToolFailure {
    wit::ToolFailure {
        name: error.name.clone(),
        code: error.code.as_str().to_string(),
        message: error.message.clone(),
        details: error.details.as_ref().map(Value::to_string),
    }
}

/// A guest's failure, checked: name and code shaped, message cut, details
/// snapshotted (dropped, with a note, if they are not acceptable JSON).
pub struct GuestFailure {
    pub name: String,
    pub code: String,
    pub message: String,
    pub details: Option<Value>,
}

pub fn failure_from_wit(
    f: wit::ToolFailure,
    budgets: &Budgets,
    limits: &toolgate_schema::Limits,
) -> GuestFailure {
    let mut message = cut(f.message, budgets.max_message_bytes);
    let details = match f.details {
        None => None,
        Some(text) if text.len() > limits.max_bytes => {
            message.push_str(&format!(
                " [details of {} bytes dropped by the host]",
                text.len()
            ));
            None
        }
        Some(text) => match toolgate_schema::parse(&text, limits) {
            Ok(v) => Some(v),
            Err(e) => {
                message.push_str(&format!(" [unacceptable details dropped: {e}]"));
                None
            }
        },
    };
    GuestFailure {
        name: shape_name(f.name),
        code: shape_code(f.code),
        message,
        details,
    }
}

/// Error names are short identifiers; anything else is cut to 64 bytes of
/// `[A-Za-z0-9_]`.
fn shape_name(name: String) -> String {
    let s: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(64)
        .collect();
    if s.is_empty() { "ToolError".into() } else { s }
}

/// Tool codes are `UPPER_SNAKE`, at most 64 characters; anything else is
/// normalized so that consumers can rely on the shape.
pub fn shape_code(code: String) -> String {
    let ok = !code.is_empty()
        && code.len() <= 64
        && code
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        return code;
    }
    let s: String = code
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() { "TOOL_ERROR".into() } else { s }
}

pub fn pre_decision_to_wit(d: &PreDecision) -> wit::PreDecision {
    match d {
        PreDecision::Allow => wit::PreDecision::Allow,
        PreDecision::Deny(r) => wit::PreDecision::Deny(r.clone()),
        PreDecision::Ask(p) => wit::PreDecision::Ask(p.clone()),
    }
}

/// A guest's pre-execute decision; reasons and prompts cut.
pub fn pre_decision_from_wit(d: wit::PreDecision, budgets: &Budgets) -> PreDecision {
    match d {
        wit::PreDecision::Allow => PreDecision::Allow,
        wit::PreDecision::Deny(r) => PreDecision::Deny(cut(r, budgets.max_message_bytes)),
        wit::PreDecision::Ask(p) => PreDecision::Ask(cut(p, budgets.max_message_bytes)),
    }
}

pub fn post_decision_to_wit(d: &PostDecision) -> wit::PostDecision {
    match d {
        PostDecision::Accept => wit::PostDecision::Accept,
        PostDecision::AcceptValue(v) => wit::PostDecision::AcceptValue(v.to_string()),
        PostDecision::AcceptContent(c) => wit::PostDecision::AcceptContent(content_to_wit(c)),
        PostDecision::Block(f) => wit::PostDecision::Block(f.clone()),
    }
}

/// Why a guest's answer (a decision, a result a wrapper built, content)
/// is not acceptable: which part, and the snapshot's or the content
/// check's own error.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// A JSON part (`value`, `meta`, `accept-value`) is not acceptable.
    #[error("{part}: {source}")]
    Json {
        part: &'static str,
        #[source]
        source: toolgate_schema::SnapshotError,
    },
    /// Content broke a budget or held unacceptable JSON (`part`: where the
    /// content was, when that needs saying).
    #[error("{}{source}", part.map(|p| format!("{p}: ")).unwrap_or_default())]
    Content {
        part: Option<&'static str>,
        #[source]
        source: ContentError,
    },
}

impl AnswerError {
    /// `text` snapshotted as the `part` of an answer.
    pub fn json(
        part: &'static str,
        text: &str,
        limits: &toolgate_schema::Limits,
    ) -> Result<Value, AnswerError> {
        toolgate_schema::parse(text, limits).map_err(|source| AnswerError::Json { part, source })
    }
}

/// A guest's post-execute decision, checked.
pub fn post_decision_from_wit(
    d: wit::PostDecision,
    budgets: &Budgets,
    limits: &toolgate_schema::Limits,
) -> Result<PostDecision, AnswerError> {
    Ok(match d {
        wit::PostDecision::Accept => PostDecision::Accept,
        wit::PostDecision::AcceptValue(text) => PostDecision::AcceptValue(AnswerError::json(
            "accept-value is not acceptable JSON",
            &text,
            limits,
        )?),
        wit::PostDecision::AcceptContent(c) => PostDecision::AcceptContent(
            content_from_wit(c, budgets, limits)
                .map_err(|source| AnswerError::Content { part: None, source })?,
        ),
        wit::PostDecision::Block(f) => PostDecision::Block(cut(f, budgets.max_message_bytes)),
    })
}

/// The `process` seam's options (the conversion is the seam's own:
/// `seams::process`).
pub fn options_from_wit(o: wit_process::Options) -> process::Options {
    o.into()
}

/// What a process seam did, as the guest sees it (the conversion is the
/// seam's own: `seams::process`).
pub fn spawned_to_wit(
    r: Result<process::Output, process::SpawnError>,
) -> Result<wit_process::Output, wit_process::SpawnError> {
    r.map(Into::into).map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_content_is_refused_with_the_limit() {
        let budgets = Budgets {
            max_content_blocks: 3,
            max_content_bytes: 10,
            ..Budgets::default()
        };
        let limits = toolgate_schema::Limits::default();
        let many = vec![wit::ContentBlock::Text(String::new()); 4];
        let e = content_from_wit(many, &budgets, &limits)
            .unwrap_err()
            .to_string();
        assert!(e.contains("max_content_blocks"), "{e}");
        let big = vec![wit::ContentBlock::Text("x".repeat(11))];
        let e = content_from_wit(big, &budgets, &limits)
            .unwrap_err()
            .to_string();
        assert!(e.contains("max_content_bytes"), "{e}");
        let ok = vec![wit::ContentBlock::Text("fits".into())];
        assert_eq!(
            content_from_wit(ok, &budgets, &limits).unwrap(),
            vec![Content::text("fits")]
        );
    }

    #[test]
    fn guest_failures_are_shaped_and_cut() {
        let budgets = Budgets {
            max_message_bytes: 100,
            ..Budgets::default()
        };
        let f = failure_from_wit(
            wit::ToolFailure {
                name: "\u{1b}[31mBad Name".into(),
                code: "not found!".into(),
                message: "m".repeat(1000),
                details: Some("{not json".into()),
            },
            &budgets,
            &toolgate_schema::Limits::default(),
        );
        assert_eq!(f.name, "31mBadName");
        assert_eq!(f.code, "NOT_FOUND_");
        assert!(f.message.len() < 300, "{}", f.message.len());
        assert!(f.message.contains("unacceptable details dropped"));
        assert_eq!(f.details, None);
    }
}
