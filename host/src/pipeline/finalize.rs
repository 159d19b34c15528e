//! Stage D, finalize: materialize → finalize content → materialize.
//!
//! The finalizers in force are fixed when execution starts ([`snapshot`]):
//! the tool's own `finalize-content` (if it has the feature) and then the
//! finalizer policies of that generation. A reload mid-call changes nothing
//! for this call. Each is called exactly once per result, success or
//! failure, and may only replace the content. A finalizer that fails is
//! logged and leaves the content as it was.
//!
//! Materializing checks that the value and meta can be snapshotted
//! losslessly; if not, the result becomes an `INVALID_RESULT` error.

use std::sync::Arc;
use std::time::Instant;

use super::PipelineSettings;
use crate::call::{CallInfo, Features};
use crate::outcome::{CallError, ErrorCode, Outcome, Stage};
use crate::policy::{Chain, Finalizer};
use crate::tool::ToolEntry;

/// The finalizers in force for one call.
pub struct Finalizers {
    tool: Option<Arc<ToolEntry>>,
    chain: Chain<dyn Finalizer>,
}

/// Fix the finalizers of a call; called when execution starts.
pub fn snapshot(chain: &Chain<dyn Finalizer>, entry: &Arc<ToolEntry>) -> Finalizers {
    Finalizers {
        tool: entry
            .def
            .meta
            .features
            .contains(Features::FINALIZER)
            .then(|| entry.clone()),
        chain: chain.clone(),
    }
}

/// Materialize, apply every finalizer once, materialize again.
pub async fn run(
    finalizers: &Finalizers,
    call: &Arc<CallInfo>,
    outcome: Outcome,
    settings: &PipelineSettings,
) -> Outcome {
    let mut outcome = materialize(outcome, &settings.limits);
    if let Some(entry) = &finalizers.tool {
        let started = Instant::now();
        let shared = Arc::new(outcome);
        let answer = entry.body.finalize_content(call, &shared).await;
        outcome = unshare(shared);
        match answer {
            Ok(Some(content)) => replace_content(&mut outcome, content),
            Ok(None) => {}
            Err(error) => tracing::warn!(
                stage = "finalize",
                finalizer = %entry.def.name,
                %error,
                "the tool's finalize-content failed; content kept"
            ),
        }
        tracing::info!(
            stage = "finalize",
            finalizer = %entry.def.name,
            elapsed_us = started.elapsed().as_micros() as u64,
            "tool finalizer ran"
        );
    }
    for finalizer in finalizers.chain.iter() {
        finalizer.invoked();
        let started = Instant::now();
        let shared = Arc::new(outcome);
        let answer = finalizer
            .within(
                settings.policy_timeout(),
                finalizer.policy.finalize_content(call, &shared),
            )
            .await;
        outcome = unshare(shared);
        match answer {
            Some(Ok(Some(content))) => replace_content(&mut outcome, content),
            Some(Ok(None)) => {}
            Some(Err(error)) if !error.is_timeout() => tracing::warn!(
                stage = "finalize",
                finalizer = %finalizer.name,
                %error,
                "finalizer failed; content kept"
            ),
            Some(Err(_)) | None => tracing::warn!(
                stage = "finalize",
                finalizer = %finalizer.name,
                "finalizer timed out; content kept"
            ),
        }
        tracing::info!(
            stage = "finalize",
            finalizer = %finalizer.name,
            elapsed_us = started.elapsed().as_micros() as u64,
            "finalizer ran"
        );
    }
    materialize(outcome, &settings.limits)
}

/// The outcome back from the finalizer that read it (which holds no copy
/// once it has answered or been dropped).
fn unshare(shared: Arc<Outcome>) -> Outcome {
    Arc::try_unwrap(shared).unwrap_or_else(|still| (*still).clone())
}

fn replace_content(outcome: &mut Outcome, new: Vec<crate::content::Content>) {
    match outcome {
        Outcome::Success { content, .. } | Outcome::Failure { content, .. } => *content = new,
    }
}

/// Check that everything in the result can be snapshotted losslessly.
pub fn materialize(outcome: Outcome, limits: &toolgate_schema::Limits) -> Outcome {
    let problem = match &outcome {
        Outcome::Success {
            value,
            meta,
            content,
        } => toolgate_schema::check_value(value, limits)
            .err()
            .map(|e| format!("value: {e}"))
            .or_else(|| {
                meta.as_ref()
                    .and_then(|m| toolgate_schema::check_value(m, limits).err())
                    .map(|e| format!("meta: {e}"))
            })
            .or_else(|| check_content(content, limits)),
        Outcome::Failure { error, content } => error
            .details
            .as_ref()
            .and_then(|d| toolgate_schema::check_value(d, limits).err())
            .map(|e| format!("error details: {e}"))
            .or_else(|| check_content(content, limits)),
    };
    match problem {
        None => outcome,
        Some(problem) => Outcome::failure(CallError::new(
            ErrorCode::InvalidResult,
            Stage::Finalize,
            format!("the result cannot be recorded losslessly ({problem})"),
        )),
    }
}

fn check_content(
    content: &[crate::content::Content],
    limits: &toolgate_schema::Limits,
) -> Option<String> {
    content.iter().enumerate().find_map(|(i, c)| match c {
        crate::content::Content::Json(v) => toolgate_schema::check_value(v, limits)
            .err()
            .map(|e| format!("content block {i}: {e}")),
        _ => None,
    })
}
