//! `toolgate:plugin@0.2.x` components behind the policy and tool traits.
//!
//! Each call lends the guest the call (and the result) as handles for the
//! duration of the export call, and takes them back afterwards; nothing is
//! copied unless the guest asks. Every answer crosses back through
//! [`super::convert`], and a trap, an interruption or an unacceptable
//! answer becomes a [`PolicyError`] or [`BodyError`] — which the pipeline
//! turns into a denial or an error, never an allow.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use serde_json::Value;
use wasmtime::component::{ComponentNamedList, Lift, Lower, Resource, TypedFunc};

use super::convert::{
    AnswerError, GuestFailure, content_from_wit, failure_from_wit, post_decision_from_wit,
    pre_decision_from_wit,
};
use super::exports::Exports;
use crate::bindings::v0_2::wit;
use crate::bindings::{CallHandle, ResultHandle};
use crate::budgets::cut;
use crate::call::{CallInfo, CallSignal};
use crate::cause::Cause;
use crate::content::{Content, ContentError};
use crate::outcome::{CallError, CallRecord, ErrorCode, Outcome, Stage};
use crate::plugin::component::{CallPath, ComponentPlugin, InvokeError};
use crate::plugin::store::{CallScope, ExecSlot, Slot, StoreData};
use crate::policy::{
    ExecNext, ExecuteAroundHook, Finalizer, Guard, PolicyError, PostDecision, PostExecuteHook,
    PostNext, PreDecision, PreExecuteHook, PreNext, ResultObserver,
};
use crate::tool::{BodyContext, BodyError, CallCard, ToolBody, ToolFailure};

/// What the host lends the guest for one export call.
#[derive(Default)]
struct Lent {
    call: Option<Arc<CallInfo>>,
    result: Option<ResultHandle>,
}

/// The handles of what was lent, for building the export's parameters.
struct Reps {
    call: Option<u32>,
    result: Option<u32>,
}

impl Reps {
    fn call(&self) -> Resource<CallHandle> {
        Resource::new_borrow(self.call.expect("the call was lent"))
    }
    fn result(&self) -> Resource<ResultHandle> {
        Resource::new_borrow(self.result.expect("the result was lent"))
    }
}

/// Call one export: lease an instance, lend the handles, call, take the
/// handles back, let `after` read the answer while the store is at hand,
/// and give the instance back (or drop it, if the call failed).
async fn invoke<P, R, T>(
    plugin: &ComponentPlugin,
    scope: CallScope,
    lent: Lent,
    func: impl FnOnce(&Exports) -> Option<TypedFunc<P, R>>,
    params: impl FnOnce(&Reps) -> P,
    after: impl FnOnce(&mut StoreData, R) -> wasmtime::Result<T>,
) -> Result<T, InvokeError>
where
    P: ComponentNamedList + Lower + Send + Sync,
    R: ComponentNamedList + Lift + Send + Sync + 'static,
{
    let mut lease = plugin.lease(scope).await?;
    let answer = async {
        let (store, exports) = lease.parts::<Exports>();
        let func = func(exports).ok_or_else(|| {
            wasmtime::format_err!("the component lacks an export its roles require")
        })?;
        let data = store.data_mut();
        let reps = Reps {
            call: lent.call.map(|c| data.lend_call(c)).transpose()?,
            result: lent.result.map(|r| data.lend_result(r)).transpose()?,
        };
        let answer = lease.call(func, params(&reps)).await;
        let data = lease.store().data_mut();
        data.vacate_lent()?;
        after(data, answer?)
    }
    .await;
    lease.finish(answer)
}

fn done<R>(_: &mut StoreData, r: R) -> wasmtime::Result<R> {
    Ok(r)
}

/// The scope of a policy invocation. On the synchronous path the guest
/// cannot be dropped mid-call, so its budget is counted in epoch ticks by
/// the epoch callback; on a fiber the pipeline's timeout drops the call (a
/// waterfall hook's budget must not run while it waits for `next`). Either
/// way the turn's cancellation reaches it.
fn policy_scope(plugin: &ComponentPlugin, call: &Arc<CallInfo>) -> CallScope {
    let mut scope = CallScope::for_policy(call.clone());
    if plugin.path == CallPath::Sync {
        scope.ticks_left = Some(plugin.context.policy_ticks);
    }
    scope
}

/// The signal of a tool's helper export (render, finalize, present): its
/// own budget, on either path, and the turn's cancellation.
pub(in crate::plugin::contract) fn helper_signal(
    plugin: &ComponentPlugin,
    call: &CallInfo,
) -> CallSignal {
    CallSignal::new(
        call.cancel.clone(),
        Some(Instant::now() + plugin.context.budgets.policy_timeout),
    )
}

/// The signal of a result observer: its own budget, on either path, and
/// not the turn's cancellation — a cancelled call is a record like any
/// other, and an observer that keeps a log must see it (the pipeline's
/// timeout bounds the wait as for every observer).
pub(in crate::plugin::contract) fn observer_signal(plugin: &ComponentPlugin) -> CallSignal {
    /// One token nobody cancels, shared (a clone is a reference count, not
    /// an allocation per observer call).
    static NEVER: std::sync::LazyLock<tokio_util::sync::CancellationToken> =
        std::sync::LazyLock::new(tokio_util::sync::CancellationToken::new);
    CallSignal::new(
        NEVER.clone(),
        Some(Instant::now() + plugin.context.budgets.policy_timeout),
    )
}

/// A policy export that did not answer, as the policy traits say it (the
/// [`InvokeError`] kept as the cause).
pub(in crate::plugin::contract) fn policy_error(e: InvokeError) -> PolicyError {
    match e {
        InvokeError::Interrupted(i) => PolicyError::Interrupted(i),
        other => PolicyError::Trapped(Cause::new(other)),
    }
}

/// A tool export that did not answer, as the tool trait says it.
pub(in crate::plugin::contract) fn body_error(e: InvokeError) -> BodyError {
    match e {
        InvokeError::Interrupted(i) => BodyError::Interrupted(i),
        e @ InvokeError::Trap { .. } => BodyError::Trapped(Cause::new(e)),
        e @ InvokeError::Host { .. } => BodyError::Internal(Cause::new(e)),
    }
}

/// A policy's answer that is not acceptable.
pub(in crate::plugin::contract) fn invalid_answer(e: AnswerError) -> PolicyError {
    PolicyError::Invalid(Cause::new(e))
}

/// Content a tool returned that is not acceptable.
pub(in crate::plugin::contract) fn invalid_content(e: ContentError) -> BodyError {
    BodyError::InvalidResult(Cause::new(e))
}

/// A result a wrapper built (0.2, or 0.1 converted), checked like any
/// guest answer.
pub(in crate::plugin::contract) fn outcome_from_wit(
    r: wit::ToolResult,
    plugin: &ComponentPlugin,
) -> Result<Outcome, PolicyError> {
    let budgets = &plugin.context.budgets;
    let limits = &plugin.limits;
    let content = |c| {
        content_from_wit(c, budgets, limits).map_err(|source| AnswerError::Content {
            part: Some("content"),
            source,
        })
    };
    Ok(match r {
        wit::ToolResult::Success(s) => Outcome::Success {
            value: AnswerError::json("value", &s.value, limits).map_err(invalid_answer)?,
            content: content(s.content).map_err(invalid_answer)?,
            meta: s
                .meta
                .map(|m| AnswerError::json("meta", &m, limits))
                .transpose()
                .map_err(invalid_answer)?,
        },
        wit::ToolResult::Failure(f) => {
            let content = content(f.content).map_err(invalid_answer)?;
            let GuestFailure {
                name,
                code,
                message,
                details,
            } = failure_from_wit(f.error, budgets, limits);
            Outcome::Failure {
                error: CallError {
                    code: ErrorCode::from_host_code(&code).unwrap_or(ErrorCode::Tool(code)),
                    name,
                    message,
                    stage: Stage::Execute,
                    decided_by: Some(plugin.name.clone()),
                    details,
                },
                content,
            }
        }
    })
}

/// Whether a tool's failure gets the host's hint about file grants (0.2
/// tools do; 0.1 tools keep their message as it always was).
#[derive(Clone, PartialEq, Eq)]
pub(in crate::plugin::contract) enum Hint {
    /// With the paths the host refused the call (no grant covers them).
    FsGrants(Vec<String>),
    None,
}

/// What a tool's `execute` answered, checked: its value, or its failure.
#[allow(
    clippy::result_large_err,
    reason = "the error of `ToolBody`, which these answer for"
)]
pub(in crate::plugin::contract) fn executed(
    answer: Result<String, wit::ToolFailure>,
    plugin: &ComponentPlugin,
    hint: Hint,
) -> Result<Value, BodyError> {
    let f = match answer {
        Ok(text) => {
            return AnswerError::json("the value is not acceptable JSON", &text, &plugin.limits)
                .map_err(|e| BodyError::InvalidResult(Cause::new(e)));
        }
        Err(f) => failure_from_wit(f, &plugin.context.budgets, &plugin.limits),
    };
    // A tool that reports a missing file outside its grants: say it is
    // not granted, and what to add.
    let hinted = match hint {
        Hint::FsGrants(ungranted) => plugin.fs_hint(&f.message, &ungranted),
        Hint::None => None,
    };
    let message = match hinted {
        Some(hint) => format!("{}; {hint}", f.message),
        None => f.message,
    };
    Err(BodyError::Failure(ToolFailure {
        name: f.name,
        code: f.code,
        message,
        details: f.details,
    }))
}

/// What a tool's `render` answered, checked: its content, or why not.
#[allow(
    clippy::result_large_err,
    reason = "the error of `ToolBody`, which these answer for"
)]
pub(in crate::plugin::contract) fn rendered(
    answer: Result<Vec<wit::ContentBlock>, wit::ToolFailure>,
    plugin: &ComponentPlugin,
) -> Result<Vec<Content>, BodyError> {
    match answer {
        Ok(blocks) => content_from_wit(blocks, &plugin.context.budgets, &plugin.limits)
            .map_err(invalid_content),
        Err(f) => {
            let f = failure_from_wit(f, &plugin.context.budgets, &plugin.limits);
            // The guest's own failure: its code and message are all there
            // is (strings, by the contract).
            Err(BodyError::InvalidResult(
                format!("render failed: {}: {}", f.code, f.message).into(),
            ))
        }
    }
}

/// A component's `pre-execute-hook` export.
pub struct PreHook(pub Arc<ComponentPlugin>);

#[async_trait]
impl PreExecuteHook for PreHook {
    async fn pre_execute(
        &self,
        call: &Arc<CallInfo>,
        next: PreNext,
    ) -> Result<PreDecision, PolicyError> {
        let plugin = &*self.0;
        let mut scope = policy_scope(plugin, call);
        scope.pre_next = Some(Slot::Pending(next));
        let lent = Lent {
            call: Some(call.clone()),
            ..Lent::default()
        };
        let (d,) = invoke(
            plugin,
            scope,
            lent,
            |e| e.pre_execute,
            |r| (r.call(),),
            done,
        )
        .await
        .map_err(policy_error)?;
        Ok(pre_decision_from_wit(d, &plugin.context.budgets))
    }
}

/// What a wrapper returned, taken out of its store.
enum Returned {
    /// The handle `next` gave it: the inner result, exactly.
    Passed(Arc<Outcome>),
    /// A result it built.
    Built(Box<wit::ToolResult>),
}

/// A component's `execute-around-hook` export.
pub struct AroundHook(pub Arc<ComponentPlugin>);

#[async_trait]
impl ExecuteAroundHook for AroundHook {
    async fn around_execute(
        &self,
        call: &Arc<CallInfo>,
        next: ExecNext,
    ) -> Result<Outcome, PolicyError> {
        let plugin = &*self.0;
        let mut scope = CallScope::new(Some(call.clone()), next.signal().clone());
        let inner = Arc::new(std::sync::Mutex::new(None));
        scope.exec_next = Some(ExecSlot {
            next: Some(next),
            done: inner.clone(),
        });
        let lent = Lent {
            call: Some(call.clone()),
            ..Lent::default()
        };
        let answer = invoke(
            plugin,
            scope,
            lent,
            |e| e.around_execute,
            |r| (r.call(),),
            |data, (handle,)| match data.take(handle)? {
                ResultHandle::Chain(o) => Ok(Returned::Passed(o)),
                ResultHandle::New(r) => Ok(Returned::Built(r)),
                _ => Err(wasmtime::format_err!(
                    "`around-execute` returned a handle it was only lent"
                )),
            },
        )
        .await;
        let inner = inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        match (answer, inner) {
            (Ok(Returned::Passed(o)), inner) => {
                drop(inner);
                Ok(Arc::try_unwrap(o).unwrap_or_else(|shared| (*shared).clone()))
            }
            (Ok(Returned::Built(r)), _) => outcome_from_wit(*r, plugin),
            // The signal fired after the rest of the chain answered: that
            // answer (a TIMEOUT or ABORTED from the body) is the result.
            (Err(InvokeError::Interrupted(_)), Some(outcome)) => {
                Ok(Arc::try_unwrap(outcome).unwrap_or_else(|shared| (*shared).clone()))
            }
            (Err(e), _) => Err(policy_error(e)),
        }
    }
}

/// A component's `post-execute-hook` export.
pub struct PostHook(pub Arc<ComponentPlugin>);

#[async_trait]
impl PostExecuteHook for PostHook {
    async fn post_execute(
        &self,
        call: &Arc<CallInfo>,
        result: &Arc<Outcome>,
        next: PostNext,
    ) -> Result<PostDecision, PolicyError> {
        let plugin = &*self.0;
        let mut scope = policy_scope(plugin, call);
        scope.post_next = Some(Slot::Pending(next));
        let lent = Lent {
            call: Some(call.clone()),
            result: Some(ResultHandle::Outcome(result.clone())),
        };
        let (d,) = invoke(
            plugin,
            scope,
            lent,
            |e| e.post_execute,
            |r| (r.call(), r.result()),
            done,
        )
        .await
        .map_err(policy_error)?;
        post_decision_from_wit(d, &plugin.context.budgets, &plugin.limits).map_err(invalid_answer)
    }
}

/// A component's `guard` export.
pub struct GuardPolicy(pub Arc<ComponentPlugin>);

#[async_trait]
impl Guard for GuardPolicy {
    async fn check(&self, call: &Arc<CallInfo>) -> Result<Option<String>, PolicyError> {
        let plugin = &*self.0;
        let scope = policy_scope(plugin, call);
        let lent = Lent {
            call: Some(call.clone()),
            ..Lent::default()
        };
        let (reason,) = invoke(plugin, scope, lent, |e| e.check, |r| (r.call(),), done)
            .await
            .map_err(policy_error)?;
        Ok(reason.map(|r| cut(r, plugin.context.budgets.max_message_bytes)))
    }
}

/// A component's `finalizer` export.
pub struct FinalizerPolicy(pub Arc<ComponentPlugin>);

#[async_trait]
impl Finalizer for FinalizerPolicy {
    async fn finalize_content(
        &self,
        call: &Arc<CallInfo>,
        result: &Arc<Outcome>,
    ) -> Result<Option<Vec<Content>>, PolicyError> {
        let plugin = &*self.0;
        let scope = policy_scope(plugin, call);
        let lent = Lent {
            call: Some(call.clone()),
            result: Some(ResultHandle::Outcome(result.clone())),
        };
        let (c,) = invoke(
            plugin,
            scope,
            lent,
            |e| e.finalize,
            |r| (r.call(), r.result()),
            done,
        )
        .await
        .map_err(policy_error)?;
        c.map(|c| content_from_wit(c, &plugin.context.budgets, &plugin.limits))
            .transpose()
            .map_err(|source| invalid_answer(AnswerError::Content { part: None, source }))
    }
}

/// A component's `result-observer` export.
pub struct Observer(pub Arc<ComponentPlugin>);

#[async_trait]
impl ResultObserver for Observer {
    async fn on_result(
        &self,
        call: &Arc<CallInfo>,
        record: &Arc<CallRecord>,
    ) -> Result<(), PolicyError> {
        let plugin = &*self.0;
        let mut scope = CallScope::new(Some(call.clone()), observer_signal(plugin));
        if plugin.path == CallPath::Sync {
            scope.ticks_left = Some(plugin.context.policy_ticks);
        }
        let lent = Lent {
            call: Some(call.clone()),
            result: Some(ResultHandle::Record(record.clone())),
        };
        invoke(
            plugin,
            scope,
            lent,
            |e| e.on_result,
            |r| (r.call(), r.result()),
            done,
        )
        .await
        .map_err(policy_error)
    }
}

/// The tools of a component's `tool` export.
pub struct Tool(pub Arc<ComponentPlugin>);

#[async_trait]
impl ToolBody for Tool {
    async fn is_concurrency_safe(&self, call: &Arc<CallInfo>) -> Option<bool> {
        let plugin = &*self.0;
        let signal = CallSignal::new(
            call.cancel.clone(),
            Some(Instant::now() + plugin.context.budgets.classify_timeout),
        );
        let lent = Lent {
            call: Some(call.clone()),
            ..Lent::default()
        };
        invoke(
            plugin,
            CallScope::new(Some(call.clone()), signal),
            lent,
            |e| e.is_concurrency_safe,
            |r| (r.call(),),
            done,
        )
        .await
        .ok()
        .map(|(safe,)| safe)
    }

    async fn execute(&self, call: &Arc<CallInfo>, ctx: BodyContext) -> Result<Value, BodyError> {
        let plugin = &*self.0;
        let mut scope = CallScope::new(Some(call.clone()), ctx.signal);
        scope.deferred = Some(ctx.deferred);
        scope.extensions = ctx.extensions;
        let lent = Lent {
            call: Some(call.clone()),
            ..Lent::default()
        };
        // The paths the host refused it this call (no grant covers them):
        // certainty for the hint.
        let (answer, ungranted) = invoke(
            plugin,
            scope,
            lent,
            |e| e.execute,
            |r| (r.call(),),
            |data: &mut StoreData, (answer,)| {
                Ok((answer, std::mem::take(&mut data.scope.ungranted)))
            },
        )
        .await
        .map_err(body_error)?;
        executed(answer, plugin, Hint::FsGrants(ungranted))
    }

    async fn render(&self, call: &Arc<CallInfo>, value: &Value) -> Result<Vec<Content>, BodyError> {
        let plugin = &*self.0;
        let scope = CallScope::new(Some(call.clone()), helper_signal(plugin, call));
        let params = (call.tool_name.clone(), value.to_string());
        let (answer,) = invoke(
            plugin,
            scope,
            Lent::default(),
            |e| e.render,
            |_| params,
            done,
        )
        .await
        .map_err(body_error)?;
        rendered(answer, plugin)
    }

    async fn present_call(&self, call: &Arc<CallInfo>) -> Result<Option<CallCard>, BodyError> {
        let plugin = &*self.0;
        let scope = CallScope::new(Some(call.clone()), helper_signal(plugin, call));
        let lent = Lent {
            call: Some(call.clone()),
            ..Lent::default()
        };
        let (answer,) = invoke(
            plugin,
            scope,
            lent,
            |e| e.present_call,
            |r| (r.call(),),
            done,
        )
        .await
        .map_err(body_error)?;
        let max = plugin.context.budgets.max_message_bytes;
        Ok(answer.map(|v| CallCard {
            title: cut(v.title, max),
            detail: v.detail.map(|d| cut(d, max)),
        }))
    }

    async fn finalize_content(
        &self,
        call: &Arc<CallInfo>,
        outcome: &Arc<Outcome>,
    ) -> Result<Option<Vec<Content>>, BodyError> {
        let plugin = &*self.0;
        let scope = CallScope::new(Some(call.clone()), helper_signal(plugin, call));
        let lent = Lent {
            call: Some(call.clone()),
            result: Some(ResultHandle::Outcome(outcome.clone())),
        };
        let (answer,) = invoke(
            plugin,
            scope,
            lent,
            |e| e.tool_finalize,
            |r| (r.call(), r.result()),
            done,
        )
        .await
        .map_err(body_error)?;
        answer
            .map(|c| content_from_wit(c, &plugin.context.budgets, &plugin.limits))
            .transpose()
            .map_err(invalid_content)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::memory::MemoryError;

    /// A trap reaches the pipeline as the same sentence, with the guest's
    /// error (and the host's cause in it) kept underneath.
    #[test]
    fn a_trap_keeps_the_guest_error() {
        let trap = || InvokeError::Trap {
            message: "plugin `p` ran out of memory".into(),
            stderr: String::new(),
            hint: String::new(),
            source: wasmtime::Error::from(MemoryError::OverCap {
                plugin: "p".into(),
                desired: 2,
                cap: 1,
                setting: "`[limits] guest_memory_mb`",
            }),
        };
        let e = policy_error(trap());
        assert_eq!(e.to_string(), "trapped: plugin `p` ran out of memory");
        let PolicyError::Trapped(cause) = &e else {
            panic!("not a trap: {e:?}");
        };
        assert!(cause.downcast_ref::<InvokeError>().is_some());
        assert!(cause.find::<MemoryError>().is_some());
        let source = std::error::Error::source(&e).expect("a source()");
        assert!(source.downcast_ref::<InvokeError>().is_some());
        let BodyError::Trapped(cause) = body_error(trap()) else {
            panic!("a tool's trap is a trap");
        };
        assert!(cause.find::<MemoryError>().is_some());
    }

    /// A refused answer names the part and keeps the snapshot's error.
    #[test]
    fn a_refused_answer_keeps_its_cause() {
        let limits = toolgate_schema::Limits::default();
        let e = AnswerError::json("value", "{not json", &limits).unwrap_err();
        assert!(e.to_string().starts_with("value: "), "{e}");
        let PolicyError::Invalid(cause) = invalid_answer(e) else {
            panic!("an unacceptable answer is Invalid");
        };
        assert!(cause.find::<toolgate_schema::SnapshotError>().is_some());
    }
}
