//! `toolgate:plugin@0.1.0` components behind the policy and tool traits,
//! as they always behaved: records in, records out, every call on a fiber.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use serde_json::Value;
use wasmtime::component::InstancePre;

use super::convert::{
    AnswerError, call_info, content_from_wit, outcome_to_wit, post_decision_from_wit,
    pre_decision_from_wit, record_to_wit,
};
use crate::bindings::v0_1::exports::toolgate::plugin::{
    execute_around_hook, finalizer, guard, post_execute_hook, pre_execute_hook, result_observer,
    tool,
};
use crate::bindings::v0_1::wit;
use crate::budgets::cut;
use crate::call::{CallInfo, CallSignal};
use crate::content::Content;
use crate::outcome::{CallRecord, Outcome};
use crate::plugin::component::{ComponentPlugin, InvokeError};
use crate::plugin::contract::v0_2::roles::{
    Hint, body_error, executed, helper_signal, invalid_answer, invalid_content, observer_signal,
    outcome_from_wit, policy_error, rendered,
};
use crate::plugin::store::{CallScope, ExecSlot, Slot, StoreData};
use crate::policy::{
    ExecNext, ExecuteAroundHook, Finalizer, Guard, PolicyError, PostDecision, PostExecuteHook,
    PostNext, PreDecision, PreExecuteHook, PreNext, ResultObserver, Role,
};
use crate::tool::{BodyContext, BodyError, ToolBody};

/// Export lookups, resolved once per component.
#[derive(Default)]
pub struct Indices {
    tool: Option<tool::GuestIndices>,
    pre_execute: Option<pre_execute_hook::GuestIndices>,
    execute_around: Option<execute_around_hook::GuestIndices>,
    post_execute: Option<post_execute_hook::GuestIndices>,
    guard: Option<guard::GuestIndices>,
    finalizer: Option<finalizer::GuestIndices>,
    observer: Option<result_observer::GuestIndices>,
}

/// The exports of one instance.
pub struct Exports {
    tool: Option<tool::Guest>,
    pre_execute: Option<pre_execute_hook::Guest>,
    execute_around: Option<execute_around_hook::Guest>,
    post_execute: Option<post_execute_hook::Guest>,
    guard: Option<guard::Guest>,
    finalizer: Option<finalizer::Guest>,
    observer: Option<result_observer::Guest>,
}

fn missing(role: &str) -> wasmtime::Error {
    wasmtime::format_err!("the component does not export the {role} role")
}

impl Indices {
    /// Resolve the exports of `roles`; `Err` names the incomplete one.
    pub fn new(pre: &InstancePre<StoreData>, roles: &[Role]) -> Result<Indices, String> {
        let mut ix = Indices::default();
        let err = |role: Role, e: wasmtime::Error| {
            format!("its `{}` export is incomplete: {e:#}", role.interface())
        };
        for role in roles {
            match role {
                Role::Tool => {
                    ix.tool = Some(tool::GuestIndices::new(pre).map_err(|e| err(*role, e))?)
                }
                Role::PreExecute => {
                    ix.pre_execute =
                        Some(pre_execute_hook::GuestIndices::new(pre).map_err(|e| err(*role, e))?)
                }
                Role::ExecuteAround => {
                    ix.execute_around = Some(
                        execute_around_hook::GuestIndices::new(pre).map_err(|e| err(*role, e))?,
                    )
                }
                Role::PostExecute => {
                    ix.post_execute =
                        Some(post_execute_hook::GuestIndices::new(pre).map_err(|e| err(*role, e))?)
                }
                Role::Guard => {
                    ix.guard = Some(guard::GuestIndices::new(pre).map_err(|e| err(*role, e))?)
                }
                Role::Finalizer => {
                    ix.finalizer =
                        Some(finalizer::GuestIndices::new(pre).map_err(|e| err(*role, e))?)
                }
                Role::Observer => {
                    ix.observer =
                        Some(result_observer::GuestIndices::new(pre).map_err(|e| err(*role, e))?)
                }
            }
        }
        Ok(ix)
    }

    /// Look the exports up in a new instance (this checks their types).
    pub fn load(
        &self,
        store: &mut wasmtime::Store<StoreData>,
        instance: &wasmtime::component::Instance,
    ) -> wasmtime::Result<Exports> {
        macro_rules! load {
            ($f:ident) => {
                self.$f
                    .as_ref()
                    .map(|i| i.load(&mut *store, instance))
                    .transpose()?
            };
        }
        Ok(Exports {
            tool: load!(tool),
            pre_execute: load!(pre_execute),
            execute_around: load!(execute_around),
            post_execute: load!(post_execute),
            guard: load!(guard),
            finalizer: load!(finalizer),
            observer: load!(observer),
        })
    }
}

impl Exports {
    fn tool(&self) -> wasmtime::Result<&tool::Guest> {
        self.tool.as_ref().ok_or_else(|| missing("tool"))
    }
}

/// Run `f` on a leased instance of `plugin` (always on a fiber).
async fn invoke<R: Send>(
    plugin: &ComponentPlugin,
    scope: CallScope,
    f: impl for<'a> FnOnce(
        &'a mut wasmtime::Store<StoreData>,
        &'a Exports,
    ) -> futures::future::BoxFuture<'a, wasmtime::Result<R>>
    + Send,
) -> Result<R, InvokeError> {
    let mut lease = plugin.lease(scope).await?;
    let answer = {
        let (store, exports) = lease.parts::<Exports>();
        f(store, exports).await
    };
    lease.finish(answer)
}

/// A 0.1 policy's signal: the turn's cancellation; its budget is the
/// pipeline's timeout, which drops the fiber.
fn policy_signal(call: &CallInfo) -> CallSignal {
    CallSignal::new(call.cancel.clone(), None)
}

/// A 0.1 component's `pre-execute-hook` export.
pub struct PreHook(pub Arc<ComponentPlugin>);

#[async_trait]
impl PreExecuteHook for PreHook {
    async fn pre_execute(
        &self,
        call: &Arc<CallInfo>,
        next: PreNext,
    ) -> Result<PreDecision, PolicyError> {
        let signal = policy_signal(call);
        let info = call_info(call, Some(&signal));
        let mut scope = CallScope::new(Some(call.clone()), signal);
        scope.pre_next = Some(Slot::Pending(next));
        let d = invoke(&self.0, scope, move |store, ex| {
            Box::pin(async move {
                ex.pre_execute
                    .as_ref()
                    .ok_or_else(|| missing("pre-execute"))?
                    .call_pre_execute(store, &info)
                    .await
            })
        })
        .await
        .map_err(policy_error)?;
        Ok(pre_decision_from_wit(d, &self.0.context.budgets))
    }
}

/// A 0.1 component's `execute-around-hook` export.
pub struct AroundHook(pub Arc<ComponentPlugin>);

#[async_trait]
impl ExecuteAroundHook for AroundHook {
    async fn around_execute(
        &self,
        call: &Arc<CallInfo>,
        next: ExecNext,
    ) -> Result<Outcome, PolicyError> {
        let signal = next.signal().clone();
        let info = call_info(call, Some(&signal));
        let mut scope = CallScope::new(Some(call.clone()), signal);
        let done = Arc::new(std::sync::Mutex::new(None));
        scope.exec_next = Some(ExecSlot {
            next: Some(next),
            done: done.clone(),
        });
        let answer = invoke(&self.0, scope, move |store, ex| {
            Box::pin(async move {
                ex.execute_around
                    .as_ref()
                    .ok_or_else(|| missing("execute-around"))?
                    .call_around_execute(store, &info)
                    .await
            })
        })
        .await;
        let inner: Option<Arc<Outcome>> = done.lock().unwrap_or_else(|p| p.into_inner()).take();
        let unshare = |o: Arc<Outcome>| Arc::try_unwrap(o).unwrap_or_else(|s| (*s).clone());
        match (answer, inner) {
            // Passed on unchanged: keep the inner result exactly (its stage,
            // who decided), not a copy that went through the guest.
            (Ok(r), Some(outcome)) if r == outcome_to_wit(&outcome) => Ok(unshare(outcome)),
            (Ok(r), _) => outcome_from_wit(r.into(), &self.0),
            (Err(InvokeError::Interrupted(_)), Some(outcome)) => Ok(unshare(outcome)),
            (Err(e), _) => Err(policy_error(e)),
        }
    }
}

/// A 0.1 component's `post-execute-hook` export.
pub struct PostHook(pub Arc<ComponentPlugin>);

#[async_trait]
impl PostExecuteHook for PostHook {
    async fn post_execute(
        &self,
        call: &Arc<CallInfo>,
        result: &Arc<Outcome>,
        next: PostNext,
    ) -> Result<PostDecision, PolicyError> {
        let signal = policy_signal(call);
        let info = call_info(call, Some(&signal));
        let result = outcome_to_wit(result);
        let mut scope = CallScope::new(Some(call.clone()), signal);
        scope.post_next = Some(Slot::Pending(next));
        let d = invoke(&self.0, scope, move |store, ex| {
            Box::pin(async move {
                ex.post_execute
                    .as_ref()
                    .ok_or_else(|| missing("post-execute"))?
                    .call_post_execute(store, &info, &result)
                    .await
            })
        })
        .await
        .map_err(policy_error)?;
        post_decision_from_wit(d, &self.0.context.budgets, &self.0.limits).map_err(invalid_answer)
    }
}

/// A 0.1 component's `guard` export.
pub struct GuardPolicy(pub Arc<ComponentPlugin>);

#[async_trait]
impl Guard for GuardPolicy {
    async fn check(&self, call: &Arc<CallInfo>) -> Result<Option<String>, PolicyError> {
        let signal = policy_signal(call);
        let info = call_info(call, Some(&signal));
        let reason = invoke(
            &self.0,
            CallScope::new(Some(call.clone()), signal),
            move |store, ex| {
                Box::pin(async move {
                    ex.guard
                        .as_ref()
                        .ok_or_else(|| missing("guard"))?
                        .call_check(store, &info)
                        .await
                })
            },
        )
        .await
        .map_err(policy_error)?;
        Ok(reason.map(|r| cut(r, self.0.context.budgets.max_message_bytes)))
    }
}

/// A 0.1 component's `finalizer` export.
pub struct FinalizerPolicy(pub Arc<ComponentPlugin>);

#[async_trait]
impl Finalizer for FinalizerPolicy {
    async fn finalize_content(
        &self,
        call: &Arc<CallInfo>,
        result: &Arc<Outcome>,
    ) -> Result<Option<Vec<Content>>, PolicyError> {
        let signal = policy_signal(call);
        let info = call_info(call, Some(&signal));
        let result = outcome_to_wit(result);
        let c = invoke(
            &self.0,
            CallScope::new(Some(call.clone()), signal),
            move |store, ex| {
                Box::pin(async move {
                    ex.finalizer
                        .as_ref()
                        .ok_or_else(|| missing("finalizer"))?
                        .call_finalize_content(store, &info, &result)
                        .await
                })
            },
        )
        .await
        .map_err(policy_error)?;
        c.map(|c| content_from_wit(c, &self.0.context.budgets, &self.0.limits))
            .transpose()
            .map_err(|source| invalid_answer(AnswerError::Content { part: None, source }))
    }
}

/// A 0.1 component's `result-observer` export.
pub struct Observer(pub Arc<ComponentPlugin>);

#[async_trait]
impl ResultObserver for Observer {
    async fn on_result(
        &self,
        call: &Arc<CallInfo>,
        record: &Arc<CallRecord>,
    ) -> Result<(), PolicyError> {
        let signal = observer_signal(&self.0);
        let info = call_info(call, Some(&signal));
        let record = record_to_wit(record);
        invoke(
            &self.0,
            CallScope::new(Some(call.clone()), signal),
            move |store, ex| {
                Box::pin(async move {
                    ex.observer
                        .as_ref()
                        .ok_or_else(|| missing("observer"))?
                        .call_on_result(store, &info, &record)
                        .await
                })
            },
        )
        .await
        .map_err(policy_error)
    }
}

/// The tools of a 0.1 component's `tool` export.
pub struct Tool(pub Arc<ComponentPlugin>);

/// `list-tools` at load, under `signal`.
pub async fn list_tools(
    plugin: &ComponentPlugin,
    signal: CallSignal,
) -> Result<Vec<wit::ToolSpec>, InvokeError> {
    invoke(plugin, CallScope::new(None, signal), |store, ex| {
        Box::pin(async move { ex.tool()?.call_list_tools(store).await })
    })
    .await
}

#[async_trait]
impl ToolBody for Tool {
    async fn is_concurrency_safe(&self, call: &Arc<CallInfo>) -> Option<bool> {
        let tool = call.tool_name.clone();
        let args = call.arguments_json().to_string();
        let signal = CallSignal::new(
            call.cancel.clone(),
            Some(Instant::now() + self.0.context.budgets.classify_timeout),
        );
        invoke(
            &self.0,
            CallScope::new(Some(call.clone()), signal),
            move |store, ex| {
                Box::pin(async move {
                    ex.tool()?
                        .call_is_concurrency_safe(store, &tool, &args)
                        .await
                })
            },
        )
        .await
        .ok()
    }

    async fn execute(&self, call: &Arc<CallInfo>, ctx: BodyContext) -> Result<Value, BodyError> {
        let info = call_info(call, Some(&ctx.signal));
        let tool = call.tool_name.clone();
        let mut scope = CallScope::new(Some(call.clone()), ctx.signal);
        scope.deferred = Some(ctx.deferred);
        scope.extensions = ctx.extensions;
        let answer = invoke(&self.0, scope, move |store, ex| {
            Box::pin(async move { ex.tool()?.call_execute(store, &tool, &info).await })
        })
        .await
        .map_err(body_error)?;
        executed(answer.map_err(Into::into), &self.0, Hint::None)
    }

    async fn render(&self, call: &Arc<CallInfo>, value: &Value) -> Result<Vec<Content>, BodyError> {
        let tool = call.tool_name.clone();
        let value = value.to_string();
        let scope = CallScope::new(Some(call.clone()), helper_signal(&self.0, call));
        let answer = invoke(&self.0, scope, move |store, ex| {
            Box::pin(async move { ex.tool()?.call_render(store, &tool, &value).await })
        })
        .await
        .map_err(body_error)?;
        let answer = answer
            .map(|c| c.into_iter().map(Into::into).collect())
            .map_err(Into::into);
        rendered(answer, &self.0)
    }

    async fn finalize_content(
        &self,
        call: &Arc<CallInfo>,
        outcome: &Arc<Outcome>,
    ) -> Result<Option<Vec<Content>>, BodyError> {
        let signal = helper_signal(&self.0, call);
        let info = call_info(call, Some(&signal));
        let tool = call.tool_name.clone();
        let result = outcome_to_wit(outcome);
        let answer = invoke(
            &self.0,
            CallScope::new(Some(call.clone()), signal),
            move |store, ex| {
                Box::pin(async move {
                    ex.tool()?
                        .call_finalize_content(store, &tool, &info, &result)
                        .await
                })
            },
        )
        .await
        .map_err(body_error)?;
        answer
            .map(|c| content_from_wit(c, &self.0.context.budgets, &self.0.limits))
            .transpose()
            .map_err(invalid_content)
    }
}
