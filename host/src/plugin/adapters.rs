//! Components as policies and tools: each role's trait implemented by
//! calling the component's export, plus the conversions between host types
//! and WIT types.
//!
//! Every guest answer crosses an untrusted boundary: JSON is snapshotted and
//! checked, content converted with limits, and a trap becomes a
//! [`PolicyError`] or [`BodyError`] — which the pipeline turns into a denial
//! or an error, never an allow.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::component::{ComponentPlugin, InvokeError};
use super::store::{CallScope, ExecSlot, Slot};
use crate::bindings::wit;
use crate::call::{CallInfo, CallSignal};
use crate::content::{self, Content};
use crate::outcome::{CallError, CallRecord, ErrorCode, Outcome, Stage};
use crate::pipeline::execute::ExecNext;
use crate::pipeline::post_execute::PostNext;
use crate::pipeline::pre_execute::PreNext;
use crate::policy::{
    ExecuteAroundHook, Finalizer, Guard, PolicyError, PostDecision, PostExecuteHook, PreDecision,
    PreExecuteHook, ResultObserver,
};
use crate::tool::{BodyContext, BodyError, ToolBody, ToolFailure};

/// The signal a policy runs under: none of its own (its budget is enforced
/// by the pipeline, which drops the invocation when it runs out). One
/// never-cancelled token serves every invocation: a new token per call
/// would be an allocation on the hot path for nothing.
fn policy_signal() -> CallSignal {
    static NEVER: std::sync::OnceLock<tokio_util::sync::CancellationToken> =
        std::sync::OnceLock::new();
    CallSignal::new(NEVER.get_or_init(Default::default).clone(), None)
}

fn policy_error(e: InvokeError) -> PolicyError {
    match e {
        InvokeError::Interrupted(i) => PolicyError::Interrupted(i),
        other => PolicyError::Trapped(other.to_string()),
    }
}

pub(crate) fn pre_decision_to_wit(d: &PreDecision) -> wit::PreDecision {
    match d {
        PreDecision::Allow => wit::PreDecision::Allow,
        PreDecision::Deny(r) => wit::PreDecision::Deny(r.clone()),
        PreDecision::Ask(p) => wit::PreDecision::Ask(p.clone()),
    }
}

fn pre_decision_from_wit(d: wit::PreDecision) -> PreDecision {
    match d {
        wit::PreDecision::Allow => PreDecision::Allow,
        wit::PreDecision::Deny(r) => PreDecision::Deny(r),
        wit::PreDecision::Ask(p) => PreDecision::Ask(p),
    }
}

pub(crate) fn post_decision_to_wit(d: &PostDecision) -> wit::PostDecision {
    match d {
        PostDecision::Accept => wit::PostDecision::Accept,
        PostDecision::AcceptValue(v) => wit::PostDecision::AcceptValue(v.to_string()),
        PostDecision::AcceptContent(c) => wit::PostDecision::AcceptContent(content::to_wit(c)),
        PostDecision::Block(f) => wit::PostDecision::Block(f.clone()),
    }
}

fn post_decision_from_wit(
    d: wit::PostDecision,
    limits: &toolgate_schema::Limits,
) -> Result<PostDecision, PolicyError> {
    Ok(match d {
        wit::PostDecision::Accept => PostDecision::Accept,
        wit::PostDecision::AcceptValue(text) => {
            PostDecision::AcceptValue(toolgate_schema::parse(&text, limits).map_err(|e| {
                PolicyError::Invalid(format!("accept-value is not acceptable JSON: {e}"))
            })?)
        }
        wit::PostDecision::AcceptContent(c) => PostDecision::AcceptContent(
            content::from_wit(c, limits).map_err(|e| PolicyError::Invalid(e.to_string()))?,
        ),
        wit::PostDecision::Block(f) => PostDecision::Block(f),
    })
}

fn failure_to_wit(error: &CallError) -> wit::ToolFailure {
    wit::ToolFailure {
        name: error.name.clone(),
        code: error.code.as_str().to_string(),
        message: error.message.clone(),
        details: error.details.as_ref().map(Value::to_string),
    }
}

/// A result as policies see it.
pub(crate) fn outcome_to_wit(o: &Outcome) -> wit::ToolResult {
    match o {
        Outcome::Success {
            value,
            content,
            meta,
        } => wit::ToolResult::Success(wit::Success {
            value: value.to_string(),
            content: content::to_wit(content),
            meta: meta.as_ref().map(Value::to_string),
        }),
        Outcome::Failure { error, content } => wit::ToolResult::Failure(wit::Failure {
            error: failure_to_wit(error),
            content: content::to_wit(content),
        }),
    }
}

/// A result produced by a guest wrapper (execute-around). A failure keeps a
/// host code if the guest passed one through, else it is the tool's code.
fn outcome_from_wit(
    r: wit::ToolResult,
    by: &str,
    limits: &toolgate_schema::Limits,
) -> Result<Outcome, PolicyError> {
    let invalid =
        |what: &str, e: &dyn std::fmt::Display| PolicyError::Invalid(format!("{what}: {e}"));
    Ok(match r {
        wit::ToolResult::Success(s) => Outcome::Success {
            value: toolgate_schema::parse(&s.value, limits).map_err(|e| invalid("value", &e))?,
            content: content::from_wit(s.content, limits).map_err(|e| invalid("content", &e))?,
            meta: s
                .meta
                .map(|m| toolgate_schema::parse(&m, limits))
                .transpose()
                .map_err(|e| invalid("meta", &e))?,
        },
        wit::ToolResult::Failure(f) => Outcome::Failure {
            error: CallError {
                code: host_code(&f.error.code).unwrap_or(ErrorCode::Tool(f.error.code)),
                name: f.error.name,
                message: f.error.message,
                stage: Stage::Execute,
                decided_by: Some(by.to_string()),
                details: f
                    .error
                    .details
                    .map(|d| toolgate_schema::parse(&d, limits))
                    .transpose()
                    .map_err(|e| invalid("error details", &e))?,
            },
            content: content::from_wit(f.content, limits).map_err(|e| invalid("content", &e))?,
        },
    })
}

fn host_code(code: &str) -> Option<ErrorCode> {
    Some(match code {
        "INVALID_ARGS" => ErrorCode::InvalidArgs,
        "UNKNOWN_TOOL" => ErrorCode::UnknownTool,
        "DENIED" => ErrorCode::Denied,
        "ABORTED_BEFORE_DISPATCH" => ErrorCode::AbortedBeforeDispatch,
        "ABORTED" => ErrorCode::Aborted,
        "TIMEOUT" => ErrorCode::Timeout,
        "TRAPPED" => ErrorCode::Trapped,
        "INVALID_RESULT" => ErrorCode::InvalidResult,
        "BLOCKED" => ErrorCode::Blocked,
        "INTERNAL" => ErrorCode::Internal,
        _ => return None,
    })
}

/// The recorded result, as observers see it.
fn record_to_wit(r: &CallRecord) -> wit::RecordedResult {
    match &r.error {
        None => wit::RecordedResult::Success(wit::RecordedSuccess {
            content: content::to_wit(&r.content),
            meta: r.meta.as_ref().map(Value::to_string),
        }),
        Some(error) => wit::RecordedResult::Failure(wit::Failure {
            error: failure_to_wit(error),
            content: content::to_wit(&r.content),
        }),
    }
}

/// A component's `pre-execute-hook` export.
pub struct ComponentPreHook(pub Arc<ComponentPlugin>);

#[async_trait]
impl PreExecuteHook for ComponentPreHook {
    async fn pre_execute(
        &self,
        call: &CallInfo,
        next: PreNext,
    ) -> Result<PreDecision, PolicyError> {
        let signal = policy_signal();
        let info = call.to_wit(&signal);
        let mut scope = CallScope::with_signal(signal);
        scope.pre_next = Some(Slot::Pending(next));
        let d = self
            .0
            .invoke(scope, move |store, ex| {
                Box::pin(async move { ex.pre_execute()?.call_pre_execute(store, &info).await })
            })
            .await
            .map_err(policy_error)?;
        Ok(pre_decision_from_wit(d))
    }
}

/// A component's `execute-around-hook` export.
pub struct ComponentAroundHook(pub Arc<ComponentPlugin>);

#[async_trait]
impl ExecuteAroundHook for ComponentAroundHook {
    async fn around_execute(
        &self,
        call: &CallInfo,
        next: ExecNext,
    ) -> Result<Outcome, PolicyError> {
        let signal = next.signal().clone();
        let info = call.to_wit(&signal);
        let mut scope = CallScope::with_signal(signal);
        let done = Arc::new(std::sync::Mutex::new(None));
        scope.exec_next = Some(ExecSlot {
            next: Some(next),
            done: done.clone(),
        });
        let answer = self
            .0
            .invoke(scope, move |store, ex| {
                Box::pin(
                    async move { ex.execute_around()?.call_around_execute(store, &info).await },
                )
            })
            .await;
        let inner = done.lock().unwrap_or_else(|p| p.into_inner()).take();
        match (answer, inner) {
            // Passed on unchanged: keep the inner result exactly (its stage,
            // who decided), not a copy that went through the guest.
            (Ok(r), Some((seen, outcome))) if r == seen => Ok(outcome),
            (Ok(r), _) => outcome_from_wit(r, &self.0.name, &self.0.limits),
            // The signal fired after the rest of the chain answered: that
            // answer (a TIMEOUT or ABORTED from the body) is the result.
            (Err(InvokeError::Interrupted(_)), Some((_, outcome))) => Ok(outcome),
            (Err(e), _) => Err(policy_error(e)),
        }
    }
}

/// A component's `post-execute-hook` export.
pub struct ComponentPostHook(pub Arc<ComponentPlugin>);

#[async_trait]
impl PostExecuteHook for ComponentPostHook {
    async fn post_execute(
        &self,
        call: &CallInfo,
        result: &Outcome,
        next: PostNext,
    ) -> Result<PostDecision, PolicyError> {
        let signal = policy_signal();
        let info = call.to_wit(&signal);
        let result = outcome_to_wit(result);
        let mut scope = CallScope::with_signal(signal);
        scope.post_next = Some(Slot::Pending(next));
        let d = self
            .0
            .invoke(scope, move |store, ex| {
                Box::pin(async move {
                    ex.post_execute()?
                        .call_post_execute(store, &info, &result)
                        .await
                })
            })
            .await
            .map_err(policy_error)?;
        post_decision_from_wit(d, &self.0.limits)
    }
}

/// A component's `guard` export.
pub struct ComponentGuard(pub Arc<ComponentPlugin>);

#[async_trait]
impl Guard for ComponentGuard {
    async fn check(&self, call: &CallInfo) -> Result<Option<String>, PolicyError> {
        let signal = policy_signal();
        let info = call.to_wit(&signal);
        self.0
            .invoke(CallScope::with_signal(signal), move |store, ex| {
                Box::pin(async move { ex.guard()?.call_check(store, &info).await })
            })
            .await
            .map_err(policy_error)
    }
}

/// A component's `finalizer` export.
pub struct ComponentFinalizer(pub Arc<ComponentPlugin>);

#[async_trait]
impl Finalizer for ComponentFinalizer {
    async fn finalize_content(
        &self,
        call: &CallInfo,
        result: &Outcome,
    ) -> Result<Option<Vec<Content>>, PolicyError> {
        let signal = policy_signal();
        let info = call.to_wit(&signal);
        let result = outcome_to_wit(result);
        let c = self
            .0
            .invoke(CallScope::with_signal(signal), move |store, ex| {
                Box::pin(async move {
                    ex.finalizer()?
                        .call_finalize_content(store, &info, &result)
                        .await
                })
            })
            .await
            .map_err(policy_error)?;
        c.map(|c| content::from_wit(c, &self.0.limits))
            .transpose()
            .map_err(|e| PolicyError::Invalid(e.to_string()))
    }
}

/// A component's `result-observer` export.
pub struct ComponentObserver(pub Arc<ComponentPlugin>);

#[async_trait]
impl ResultObserver for ComponentObserver {
    async fn on_result(&self, call: &CallInfo, record: &CallRecord) -> Result<(), PolicyError> {
        let signal = policy_signal();
        let info = call.to_wit(&signal);
        let record = record_to_wit(record);
        self.0
            .invoke(CallScope::with_signal(signal), move |store, ex| {
                Box::pin(async move { ex.observer()?.call_on_result(store, &info, &record).await })
            })
            .await
            .map_err(policy_error)
    }
}

/// One tool of a component's `tool` export.
pub struct ComponentTool {
    pub plugin: Arc<ComponentPlugin>,
}

fn body_error(e: InvokeError) -> BodyError {
    match e {
        InvokeError::Interrupted(i) => BodyError::Interrupted(i),
        InvokeError::Trap { .. } => BodyError::Trapped(e.to_string()),
        InvokeError::Host(m) => BodyError::Internal(m),
    }
}

#[async_trait]
impl ToolBody for ComponentTool {
    async fn is_concurrency_safe(&self, tool: &str, arguments: &Value) -> Option<bool> {
        let tool = tool.to_string();
        let args = arguments.to_string();
        self.plugin
            .invoke(CallScope::with_signal(policy_signal()), move |store, ex| {
                Box::pin(async move {
                    ex.tool()?
                        .call_is_concurrency_safe(store, &tool, &args)
                        .await
                })
            })
            .await
            .ok()
    }

    async fn execute(&self, call: &CallInfo, ctx: BodyContext) -> Result<Value, BodyError> {
        let info = call.to_wit(&ctx.signal);
        let tool = call.tool_name.clone();
        let mut scope = CallScope::with_signal(ctx.signal);
        scope.deferred = Some(ctx.deferred);
        let answer = self
            .plugin
            .invoke(scope, move |store, ex| {
                Box::pin(async move { ex.tool()?.call_execute(store, &tool, &info).await })
            })
            .await
            .map_err(body_error)?;
        match answer {
            Ok(text) => toolgate_schema::parse(&text, &self.plugin.limits).map_err(|e| {
                BodyError::InvalidResult(format!("the value is not acceptable JSON: {e}"))
            }),
            Err(f) => Err(BodyError::Failure(ToolFailure {
                details: f
                    .details
                    .and_then(|d| toolgate_schema::parse(&d, &self.plugin.limits).ok()),
                name: f.name,
                code: sanitize_code(f.code),
                message: f.message,
            })),
        }
    }

    async fn render(&self, tool: &str, value: &Value) -> Result<Vec<Content>, BodyError> {
        let tool = tool.to_string();
        let value = value.to_string();
        let answer = self
            .plugin
            .invoke(CallScope::with_signal(policy_signal()), move |store, ex| {
                Box::pin(async move { ex.tool()?.call_render(store, &tool, &value).await })
            })
            .await
            .map_err(body_error)?;
        match answer {
            Ok(blocks) => content::from_wit(blocks, &self.plugin.limits)
                .map_err(|e| BodyError::InvalidResult(e.to_string())),
            Err(f) => Err(BodyError::InvalidResult(format!(
                "render failed: {}: {}",
                f.code, f.message
            ))),
        }
    }

    async fn finalize_content(
        &self,
        call: &CallInfo,
        outcome: &Outcome,
    ) -> Result<Option<Vec<Content>>, BodyError> {
        let signal = policy_signal();
        let info = call.to_wit(&signal);
        let tool = call.tool_name.clone();
        let result = outcome_to_wit(outcome);
        let answer = self
            .plugin
            .invoke(CallScope::with_signal(signal), move |store, ex| {
                Box::pin(async move {
                    ex.tool()?
                        .call_finalize_content(store, &tool, &info, &result)
                        .await
                })
            })
            .await
            .map_err(body_error)?;
        answer
            .map(|c| content::from_wit(c, &self.plugin.limits))
            .transpose()
            .map_err(|e| BodyError::InvalidResult(e.to_string()))
    }
}

/// Tool codes are `UPPER_SNAKE`, at most 64 characters; anything else is
/// normalized so that consumers can rely on the shape.
fn sanitize_code(code: String) -> String {
    let ok = !code.is_empty()
        && code.len() <= 64
        && code
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        code
    } else {
        let mut s: String = code
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .take(64)
            .collect();
        if s.is_empty() {
            s = "TOOL_ERROR".into();
        }
        s
    }
}
