//! Stage C, execute: the around-waterfall and the tool body.
//!
//! Wrappers run outermost first; each gets an [`ExecNext`] continuation that runs the
//! wrappers after it and finally the body. `next.run(Some(d))` shortens the
//! deadline to `d` from now. The body always receives the caller's
//! cancellation fused with every deadline set on the way in
//! ([`CallSignal`]): a wrapper can shorten, never extend or detach.
//!
//! The body is bounded twice: the epoch callback interrupts Wasm that
//! ignores the deadline, and the host races the call against the signal, so
//! a body blocked in a host call is dropped too. Either way the result is a
//! `TIMEOUT` (deadline) or `ABORTED` (caller) failure within one epoch tick.

use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::approval::Approver;
use crate::call::{CallInfo, CallSignal, Extensions, Interrupt};
use crate::outcome::{CallError, ErrorCode, Outcome, Stage};
use crate::policy::{Chain, ExecNext, ExecuteAroundHook, PolicyError};
use crate::tool::{BodyContext, BodyError, DeferredContexts, ToolEntry};

struct Shared {
    chain: Chain<dyn ExecuteAroundHook>,
    entry: Arc<ToolEntry>,
    call: Arc<CallInfo>,
    deferred: DeferredContexts,
    approver: Option<Arc<dyn Approver>>,
    extensions: Extensions,
    limits: toolgate_schema::Limits,
}

/// How the body is run: the turn's own approver (for calls it makes in
/// turn) and what features attach to the call.
pub struct BodyAsks {
    pub approver: Option<Arc<dyn Approver>>,
    pub extensions: Extensions,
}

/// Run the execute waterfall and the body.
pub async fn run(
    chain: &Chain<dyn ExecuteAroundHook>,
    entry: &Arc<ToolEntry>,
    call: &Arc<CallInfo>,
    signal: CallSignal,
    deferred: DeferredContexts,
    asks: BodyAsks,
    limits: &toolgate_schema::Limits,
) -> Outcome {
    let shared = Arc::new(Shared {
        chain: chain.clone(),
        entry: entry.clone(),
        call: call.clone(),
        deferred,
        approver: asks.approver,
        extensions: asks.extensions,
        limits: *limits,
    });
    run_from(shared, 0, signal).await
}

fn run_from(shared: Arc<Shared>, index: usize, signal: CallSignal) -> BoxFuture<'static, Outcome> {
    Box::pin(async move {
        let Some(wrapper) = shared.chain.get(index) else {
            return dispatch_body(&shared, signal).await;
        };
        wrapper.invoked();
        let started = Instant::now();
        let next = {
            let shared = shared.clone();
            ExecNext::new(signal.clone(), move |signal| {
                run_from(shared, index + 1, signal)
            })
        };
        // The wrapper itself is bounded by the signal it was given.
        let outcome = match signal
            .guard(wrapper.policy.around_execute(&shared.call, next))
            .await
        {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(PolicyError::Interrupted(interrupt))) | Err(interrupt) => {
                interrupted(interrupt, Stage::Execute, &shared.call)
            }
            Ok(Err(error)) => Outcome::failure(
                CallError::new(
                    ErrorCode::Trapped,
                    Stage::Execute,
                    format!("execute-around hook `{}` failed: {error}", wrapper.name),
                )
                .decided_by(&wrapper.name),
            ),
        };
        tracing::info!(
            stage = "execute",
            wrapper = %wrapper.name,
            is_error = outcome.is_error(),
            elapsed_us = started.elapsed().as_micros() as u64,
            "wrapper returned"
        );
        outcome
    })
}

async fn dispatch_body(shared: &Shared, signal: CallSignal) -> Outcome {
    let entry = &shared.entry;
    let call = &shared.call;
    if let Some(interrupt) = signal.fired() {
        return interrupted(interrupt, Stage::Body, call);
    }
    let started = Instant::now();
    let ctx = BodyContext {
        signal: signal.clone(),
        deferred: shared.deferred.clone(),
        approver: shared.approver.clone(),
        extensions: shared.extensions.clone(),
    };
    let answer = signal.guard(entry.body.execute(call, ctx)).await;
    let outcome = match answer {
        Err(interrupt) | Ok(Err(BodyError::Interrupted(interrupt))) => {
            interrupted(interrupt, Stage::Body, call)
        }
        Ok(Err(error)) => body_failure(entry, error, Stage::Body),
        Ok(Ok(value)) => success_from_value(entry, call, value, Stage::Body, &shared.limits).await,
    };
    tracing::info!(
        stage = "body",
        provider = %entry.def.meta.provider,
        is_error = outcome.is_error(),
        code = outcome.error().map(|e| e.code.as_str()).unwrap_or(""),
        elapsed_us = started.elapsed().as_micros() as u64,
        "body returned"
    );
    outcome
}

/// A failure from the tool (or its component) as a result.
pub fn body_failure(entry: &ToolEntry, error: BodyError, stage: Stage) -> Outcome {
    let provider = entry.def.meta.provider.clone();
    let error = match error {
        BodyError::Failure(f) => CallError {
            name: f.name,
            code: ErrorCode::Tool(f.code),
            message: f.message,
            stage,
            decided_by: Some(provider),
            details: f.details,
        },
        BodyError::Trapped(message) => CallError::new(
            ErrorCode::Trapped,
            stage,
            format!("`{}` crashed: {message}", entry.def.name),
        )
        .decided_by(provider),
        BodyError::InvalidResult(message) => CallError::new(
            ErrorCode::InvalidResult,
            stage,
            format!(
                "`{}` returned an unacceptable result: {message}",
                entry.def.name
            ),
        )
        .decided_by(provider),
        BodyError::Internal(message) => CallError::new(
            ErrorCode::Internal,
            stage,
            format!("the host could not run `{}`: {message}", entry.def.name),
        ),
        BodyError::Interrupted(Interrupt::DeadlineExceeded) => CallError::new(
            ErrorCode::Timeout,
            stage,
            format!("`{}` timed out", entry.def.name),
        )
        .decided_by(provider),
        BodyError::Interrupted(Interrupt::Cancelled) => {
            CallError::new(ErrorCode::Aborted, stage, "the call was cancelled")
        }
    };
    Outcome::failure(error)
}

/// The failure for a call whose signal fired.
pub fn interrupted(interrupt: Interrupt, stage: Stage, call: &CallInfo) -> Outcome {
    Outcome::failure(match interrupt {
        Interrupt::DeadlineExceeded => CallError::new(
            ErrorCode::Timeout,
            stage,
            match call.tool.timeout_ms {
                Some(ms) => format!(
                    "`{}` did not finish within its time budget ({ms} ms)",
                    call.tool_name
                ),
                None => format!("`{}` did not finish before its deadline", call.tool_name),
            },
        ),
        Interrupt::Cancelled => CallError::new(
            ErrorCode::Aborted,
            stage,
            "the call was cancelled while running",
        ),
    })
}

/// Check a canonical value against the tool's output schema and the
/// snapshot limits, then render it.
pub async fn success_from_value(
    entry: &ToolEntry,
    call: &Arc<CallInfo>,
    value: Value,
    stage: Stage,
    limits: &toolgate_schema::Limits,
) -> Outcome {
    if let Err(e) = toolgate_schema::check_value(&value, limits) {
        return Outcome::failure(
            CallError::new(
                ErrorCode::InvalidResult,
                stage,
                format!(
                    "the value of `{}` cannot be snapshotted: {e}",
                    entry.def.name
                ),
            )
            .decided_by(&entry.def.meta.provider),
        );
    }
    if let Some(schema) = &entry.output
        && let Err(violations) = schema.validate(&value)
    {
        return Outcome::failure(
            CallError::new(
                ErrorCode::InvalidResult,
                stage,
                format!(
                    "the value of `{}` does not match its output schema ({} violation(s), first at `{}`: expected {}, got {})",
                    entry.def.name,
                    violations.len(),
                    violations[0].path,
                    violations[0].expected,
                    violations[0].got
                ),
            )
            .with_details(json!({ "violations": violations })),
        );
    }
    match entry.body.render(call, &value).await {
        Ok(content) => Outcome::Success {
            value,
            content,
            meta: None,
        },
        Err(error) => body_failure(entry, error, stage),
    }
}
