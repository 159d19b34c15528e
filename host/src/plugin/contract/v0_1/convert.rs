//! Host types ↔ `toolgate:plugin@0.1.0` types (frozen contract).
//!
//! Same rules as the 0.2 conversions: total toward the guest, checked
//! against the budgets from the guest. 0.1 content has no audio or link
//! blocks: toward a 0.1 guest they become a text block describing them.

use serde_json::Value;

use crate::bindings::v0_1::toolgate::plugin::process as wit_process;
use crate::bindings::v0_1::wit;
use crate::budgets::{Budgets, cut};
use crate::call::{CallInfo, CallSignal, Features};
use crate::content::{Content, ContentError, ResourceContents};
use crate::outcome::{CallError, CallRecord, Outcome};
use crate::plugin::contract::v0_2::convert as latest;
use crate::policy::{PostDecision, PreDecision};
use crate::seams::process;

pub use latest::{GuestFailure, shape_code};

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
        tool_annotations: latest::map_flags!(
            call.tool.annotations,
            crate::call::Annotations => wit::ToolAnnotations,
            [READ_ONLY, DESTRUCTIVE, IDEMPOTENT, OPEN_WORLD]
        ),
    }
}

pub fn features_from_wit(f: wit::ToolFeatures) -> Features {
    latest::map_flags!(f, wit::ToolFeatures => Features, [CLASSIFIER, FINALIZER, PRESENT_CALL, PRESENT_RESULT])
}

pub fn annotations_from_wit(a: wit::ToolAnnotations) -> crate::call::Annotations {
    latest::map_flags!(
        a,
        wit::ToolAnnotations => crate::call::Annotations,
        [READ_ONLY, DESTRUCTIVE, IDEMPOTENT, OPEN_WORLD]
    )
}

pub fn content_to_wit(blocks: &[Content]) -> Vec<wit::ContentBlock> {
    blocks
        .iter()
        .map(|b| match b {
            Content::Text(t) => wit::ContentBlock::Text(t.clone()),
            Content::Image { data, mime_type } => wit::ContentBlock::Image(wit::Image {
                data: data.clone(),
                mime_type: mime_type.clone(),
            }),
            Content::Audio { data, mime_type } => {
                wit::ContentBlock::Text(format!("[audio: {mime_type}, {} bytes]", data.len()))
            }
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
            Content::Link(l) => wit::ContentBlock::Text(format!("[link: {} <{}>]", l.name, l.uri)),
        })
        .collect()
}

/// 0.1 guest content, checked like 0.2 content.
pub fn content_from_wit(
    blocks: Vec<wit::ContentBlock>,
    budgets: &Budgets,
    limits: &toolgate_schema::Limits,
) -> Result<Vec<Content>, ContentError> {
    use crate::bindings::v0_2::wit as w2;
    let latest: Vec<w2::ContentBlock> = blocks
        .into_iter()
        .map(|b| match b {
            wit::ContentBlock::Text(t) => w2::ContentBlock::Text(t),
            wit::ContentBlock::Image(i) => w2::ContentBlock::Image(w2::Media {
                data: i.data,
                mime_type: i.mime_type,
            }),
            wit::ContentBlock::Json(j) => w2::ContentBlock::Json(j),
            wit::ContentBlock::Resource(r) => w2::ContentBlock::Resource(w2::EmbeddedResource {
                uri: r.uri,
                mime_type: r.mime_type,
                contents: match r.contents {
                    wit::ResourceContents::Text(t) => w2::ResourceContents::Text(t),
                    wit::ResourceContents::Blob(b) => w2::ResourceContents::Blob(b),
                },
            }),
        })
        .collect();
    latest::content_from_wit(latest, budgets, limits)
}

pub fn failure_to_wit(error: &CallError) -> wit::ToolFailure {
    wit::ToolFailure {
        name: error.name.clone(),
        code: error.code.as_str().to_string(),
        message: error.message.clone(),
        details: error.details.as_ref().map(Value::to_string),
    }
}

pub fn failure_from_wit(
    f: wit::ToolFailure,
    budgets: &Budgets,
    limits: &toolgate_schema::Limits,
) -> GuestFailure {
    latest::failure_from_wit(
        crate::bindings::v0_2::wit::ToolFailure {
            name: f.name,
            code: f.code,
            message: f.message,
            details: f.details,
        },
        budgets,
        limits,
    )
}

/// A result as 0.1 policies see it.
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

pub fn pre_decision_to_wit(d: &PreDecision) -> wit::PreDecision {
    match d {
        PreDecision::Allow => wit::PreDecision::Allow,
        PreDecision::Deny(r) => wit::PreDecision::Deny(r.clone()),
        PreDecision::Ask(p) => wit::PreDecision::Ask(p.clone()),
    }
}

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

pub fn post_decision_from_wit(
    d: wit::PostDecision,
    budgets: &Budgets,
    limits: &toolgate_schema::Limits,
) -> Result<PostDecision, String> {
    Ok(match d {
        wit::PostDecision::Accept => PostDecision::Accept,
        wit::PostDecision::AcceptValue(text) => PostDecision::AcceptValue(
            toolgate_schema::parse(&text, limits)
                .map_err(|e| format!("accept-value is not acceptable JSON: {e}"))?,
        ),
        wit::PostDecision::AcceptContent(c) => PostDecision::AcceptContent(
            content_from_wit(c, budgets, limits).map_err(|e| e.to_string())?,
        ),
        wit::PostDecision::Block(f) => PostDecision::Block(cut(f, budgets.max_message_bytes)),
    })
}

pub fn options_from_wit(o: wit_process::Options) -> process::Options {
    process::Options {
        workdir: o.workdir,
        stdin: o.stdin,
        env: o.env,
        timeout_ms: o.timeout_ms,
    }
}

pub fn spawned_to_wit(
    r: Result<process::Output, process::SpawnError>,
) -> Result<wit_process::Output, wit_process::SpawnError> {
    match r {
        Ok(o) => Ok(wit_process::Output {
            exit_code: o.exit_code,
            signal: o.signal,
            stdout: o.stdout,
            stderr: o.stderr,
            stdout_truncated: o.stdout_truncated,
            stderr_truncated: o.stderr_truncated,
            timed_out: o.timed_out,
        }),
        Err(e) => Err(match e {
            process::SpawnError::NotGranted(m) => wit_process::SpawnError::NotGranted(m),
            process::SpawnError::SandboxUnavailable(m) => {
                wit_process::SpawnError::SandboxUnavailable(m)
            }
            process::SpawnError::InvalidRequest(m) => wit_process::SpawnError::InvalidRequest(m),
            process::SpawnError::Failed(m) => wit_process::SpawnError::Failed(m),
        }),
    }
}
