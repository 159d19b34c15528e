//! `toolgate:plugin@0.1.0` types ↔ their 0.2 counterparts, and the few
//! host → 0.1 conversions 0.2 has no counterpart for (the call as a record,
//! a result as a value, a recorded result).
//!
//! Every 0.1 type converts to and from its 0.2 twin by `From`; the host's
//! own conversions are 0.2's ([`latest`]). 0.1 → 0.2 is total (0.1 content
//! is a subset), and every guest answer then goes through the 0.2 checks
//! (budgets, limits, shapes). 0.2 → 0.1 loses what 0.1 cannot say: an
//! audio or link block becomes a text block describing it.

use serde_json::Value;

use crate::bindings::v0_1::toolgate::plugin::log as log1;
use crate::bindings::v0_1::wit;
use crate::bindings::v0_2::toolgate::plugin::log as log2;
use crate::bindings::v0_2::wit as w2;
use crate::budgets::Budgets;
use crate::call::{CallInfo, CallSignal};
use crate::content::{Content, ContentError};
use crate::outcome::{CallError, CallRecord, Outcome};
use crate::plugin::contract::v0_2::convert::{self as latest, map_flags};
use crate::policy::{PostDecision, PreDecision};

pub use latest::AnswerError;

/// The same-named fields (or cases) of a record (or enum) of one version,
/// in the other.
macro_rules! same_fields {
    ($from:ty => $to:ty { $($field:ident),* }) => {
        impl From<$from> for $to {
            fn from(x: $from) -> Self {
                Self { $($field: x.$field.into()),* }
            }
        }
    };
}

macro_rules! same_cases {
    ($from:ty => $to:ty { $($case:ident $(($x:ident))?),* }) => {
        impl From<$from> for $to {
            fn from(x: $from) -> Self {
                type A = $from;
                match x { $(A::$case $(($x))? => Self::$case $(($x.into()))?),* }
            }
        }
    };
}

same_fields!(wit::Image => w2::Media { data, mime_type });
same_fields!(w2::Media => wit::Image { data, mime_type });
same_cases!(wit::ResourceContents => w2::ResourceContents { Text(t), Blob(b) });
same_cases!(w2::ResourceContents => wit::ResourceContents { Text(t), Blob(b) });
same_fields!(wit::EmbeddedResource => w2::EmbeddedResource { uri, mime_type, contents });
same_fields!(w2::EmbeddedResource => wit::EmbeddedResource { uri, mime_type, contents });
same_fields!(wit::ToolFailure => w2::ToolFailure { name, code, message, details });
same_fields!(w2::ToolFailure => wit::ToolFailure { name, code, message, details });
same_cases!(wit::PreDecision => w2::PreDecision { Allow, Deny(r), Ask(p) });
same_cases!(w2::PreDecision => wit::PreDecision { Allow, Deny(r), Ask(p) });
same_cases!(log1::Level => log2::Level { Trace, Debug, Info, Warn, Error });

impl From<wit::ToolAnnotations> for w2::ToolAnnotations {
    fn from(a: wit::ToolAnnotations) -> Self {
        map_flags!(a, wit::ToolAnnotations => w2::ToolAnnotations, [READ_ONLY, DESTRUCTIVE, IDEMPOTENT, OPEN_WORLD])
    }
}

impl From<wit::ToolFeatures> for w2::ToolFeatures {
    fn from(f: wit::ToolFeatures) -> Self {
        map_flags!(f, wit::ToolFeatures => w2::ToolFeatures, [CLASSIFIER, FINALIZER, PRESENT_CALL, PRESENT_RESULT])
    }
}

same_fields!(wit::ToolSpec => w2::ToolSpec {
    name, description, parameters, output_schema, timeout_ms, annotations, features
});

impl From<wit::ContentBlock> for w2::ContentBlock {
    fn from(b: wit::ContentBlock) -> Self {
        match b {
            wit::ContentBlock::Text(t) => w2::ContentBlock::Text(t),
            wit::ContentBlock::Image(i) => w2::ContentBlock::Image(i.into()),
            wit::ContentBlock::Json(j) => w2::ContentBlock::Json(j),
            wit::ContentBlock::Resource(r) => w2::ContentBlock::Resource(r.into()),
        }
    }
}

impl From<w2::ContentBlock> for wit::ContentBlock {
    fn from(b: w2::ContentBlock) -> Self {
        match b {
            w2::ContentBlock::Text(t) => wit::ContentBlock::Text(t),
            w2::ContentBlock::Image(i) => wit::ContentBlock::Image(i.into()),
            w2::ContentBlock::Audio(a) => {
                wit::ContentBlock::Text(format!("[audio: {}, {} bytes]", a.mime_type, a.data.len()))
            }
            w2::ContentBlock::Json(j) => wit::ContentBlock::Json(j),
            w2::ContentBlock::Resource(r) => wit::ContentBlock::Resource(r.into()),
            w2::ContentBlock::Link(l) => {
                wit::ContentBlock::Text(format!("[link: {} <{}>]", l.name, l.uri))
            }
        }
    }
}

/// Content blocks of one version, in the other.
fn blocks<A, B: From<A>>(blocks: Vec<A>) -> Vec<B> {
    blocks.into_iter().map(Into::into).collect()
}

impl From<wit::ToolResult> for w2::ToolResult {
    fn from(r: wit::ToolResult) -> Self {
        match r {
            wit::ToolResult::Success(s) => w2::ToolResult::Success(w2::Success {
                value: s.value,
                content: blocks(s.content),
                meta: s.meta,
            }),
            wit::ToolResult::Failure(f) => w2::ToolResult::Failure(w2::Failure {
                error: f.error.into(),
                content: blocks(f.content),
            }),
        }
    }
}

impl From<w2::PostDecision> for wit::PostDecision {
    fn from(d: w2::PostDecision) -> Self {
        match d {
            w2::PostDecision::Accept => wit::PostDecision::Accept,
            w2::PostDecision::AcceptValue(v) => wit::PostDecision::AcceptValue(v),
            w2::PostDecision::AcceptContent(c) => wit::PostDecision::AcceptContent(blocks(c)),
            w2::PostDecision::Block(f) => wit::PostDecision::Block(f),
        }
    }
}

impl From<wit::PostDecision> for w2::PostDecision {
    fn from(d: wit::PostDecision) -> Self {
        match d {
            wit::PostDecision::Accept => w2::PostDecision::Accept,
            wit::PostDecision::AcceptValue(v) => w2::PostDecision::AcceptValue(v),
            wit::PostDecision::AcceptContent(c) => w2::PostDecision::AcceptContent(blocks(c)),
            wit::PostDecision::Block(f) => w2::PostDecision::Block(f),
        }
    }
}

/// The 0.1 call record, with the deadline as seen now.
pub fn call_info(call: &CallInfo, signal: Option<&CallSignal>) -> wit::CallInfo {
    wit::CallInfo {
        call_id: call.call_id.clone(),
        tool_name: call.tool_name.clone(),
        provider: call.tool.provider.clone(),
        arguments: call.arguments_json().to_string(),
        agent_scope: call.agent_scope.clone(),
        deadline_ms: signal
            .and_then(CallSignal::remaining)
            .map(|d| d.as_millis() as u64),
        code_mode: call.code_mode,
        tool_timeout_ms: call.tool.timeout_ms,
        tool_annotations: map_flags!(
            call.tool.annotations,
            crate::call::Annotations => wit::ToolAnnotations,
            [READ_ONLY, DESTRUCTIVE, IDEMPOTENT, OPEN_WORLD]
        ),
    }
}

/// Host content as a 0.1 guest sees it.
pub fn content_to_wit(content: &[Content]) -> Vec<wit::ContentBlock> {
    blocks(latest::content_to_wit(content))
}

/// 0.1 guest content, checked as 0.2 content is.
pub fn content_from_wit(
    blocks: Vec<wit::ContentBlock>,
    budgets: &Budgets,
    limits: &toolgate_schema::Limits,
) -> Result<Vec<Content>, ContentError> {
    latest::content_from_wit(self::blocks(blocks), budgets, limits)
}

/// A result as 0.1 policies see it (a value; 0.2 lends a handle).
pub fn outcome_to_wit(o: &Outcome) -> wit::ToolResult {
    match o {
        Outcome::Success {
            value,
            content,
            meta,
        } => wit::ToolResult::Success(wit::Success {
            value: value.to_string(),
            content: content_to_wit(content),
            meta: meta.as_ref().map(Value::to_string),
        }),
        Outcome::Failure { error, content } => wit::ToolResult::Failure(wit::Failure {
            error: failure_to_wit(error),
            content: content_to_wit(content),
        }),
    }
}

/// A host failure as a 0.1 guest sees it.
fn failure_to_wit(error: &CallError) -> wit::ToolFailure {
    latest::failure_to_wit(error).into()
}

/// A 0.1 guest's failure, checked as a 0.2 one.
pub fn failure_from_wit(
    f: wit::ToolFailure,
    budgets: &Budgets,
    limits: &toolgate_schema::Limits,
) -> latest::GuestFailure {
    latest::failure_from_wit(f.into(), budgets, limits)
}

/// A 0.1 guest's pre-execute decision, checked as a 0.2 one.
pub fn pre_decision_from_wit(d: wit::PreDecision, budgets: &Budgets) -> PreDecision {
    latest::pre_decision_from_wit(d.into(), budgets)
}

/// The recorded result, as 0.1 observers see it.
pub fn record_to_wit(r: &CallRecord) -> wit::RecordedResult {
    match &r.error {
        None => wit::RecordedResult::Success(wit::RecordedSuccess {
            content: content_to_wit(&r.content),
            meta: r.meta.as_ref().map(Value::to_string),
        }),
        Some(error) => wit::RecordedResult::Failure(wit::Failure {
            error: failure_to_wit(error),
            content: content_to_wit(&r.content),
        }),
    }
}

/// A 0.1 guest's post-execute decision, checked as a 0.2 one.
pub fn post_decision_from_wit(
    d: wit::PostDecision,
    budgets: &Budgets,
    limits: &toolgate_schema::Limits,
) -> Result<PostDecision, AnswerError> {
    latest::post_decision_from_wit(d.into(), budgets, limits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::ResourceLink;

    /// What 0.1 cannot carry becomes a description; the rest round-trips.
    #[test]
    fn content_a_0_1_guest_sees() {
        let blocks = vec![
            Content::text("t"),
            Content::Audio {
                data: vec![0; 3],
                mime_type: "audio/wav".into(),
            },
            Content::Link(ResourceLink {
                uri: "file:///a".into(),
                name: "a".into(),
                title: None,
                description: None,
                mime_type: None,
            }),
        ];
        assert_eq!(
            content_to_wit(&blocks),
            vec![
                wit::ContentBlock::Text("t".into()),
                wit::ContentBlock::Text("[audio: audio/wav, 3 bytes]".into()),
                wit::ContentBlock::Text("[link: a <file:///a>]".into()),
            ]
        );
        let back = content_from_wit(
            content_to_wit(&blocks[..1]),
            &Budgets::default(),
            &toolgate_schema::Limits::default(),
        )
        .unwrap();
        assert_eq!(back, blocks[..1]);
    }
}
