//! The host side of every `toolgate:plugin@0.2.x` import.
//!
//! The call and result handles read from what the pipeline lent the store
//! for this call, copying only the field asked for. Imports that never wait
//! are synchronous (and so available on the synchronous path); the
//! waterfalls' `next` are async. The seams' imports are each seam's own
//! ([`crate::seams`]).

use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::{ComponentType, HasSelf, Linker, Lower, Resource};

use super::convert::{
    annotations_to_wit, content_to_wit, failure_to_wit, post_decision_to_wit, pre_decision_to_wit,
    text_of,
};
use crate::bindings::v0_2::toolgate::plugin as imports;
use crate::bindings::v0_2::wit;
use crate::bindings::{CallHandle, ResultHandle};
use crate::budgets::cut;
use crate::call::CallSignal;
use crate::outcome::Outcome;
use crate::plugin::log::Level;
use crate::plugin::store::{CallScope, Slot, StoreData};
use crate::policy::{PostNext, PreNext};

pub use crate::call::Misuse;

/// Add the imports every path can use (none of them waits): the call and
/// result handles, log, cancellation. The seams are linked from their own
/// list ([`crate::seams::add_to_linker`]).
pub fn add_sync_to_linker(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    type D = HasSelf<StoreData>;
    imports::types::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::log::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::cancellation::add_to_linker::<StoreData, D>(linker, |d| d)?;
    Ok(())
}

/// Add the synchronous `pre-execute-chain.next` and `post-execute-chain.next`
/// (the synchronous path's linker only): a waterfall hook runs the rest of
/// its chain in place. The rest is policies too — components and native
/// hooks that answer at once —, so it is driven without a fiber; in the
/// rare case it has to wait (a listener after it doing I/O), the thread
/// waits for it (see [`wait_here`]).
pub fn add_sync_chains_to_linker(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    link_sync_next(
        linker,
        PRE,
        |s| &mut s.pre_next,
        PreNext::run,
        pre_decision_to_wit,
    )?;
    link_sync_next(
        linker,
        POST,
        |s| &mut s.post_next,
        PostNext::run,
        post_decision_to_wit,
    )
}

/// Link one waterfall's synchronous `next`: [`chain_next`] on the slot
/// `slot` picks from the call's scope, the rest of the chain waited for in
/// place.
fn link_sync_next<N, D, F, W>(
    linker: &mut Linker<StoreData>,
    chain: &'static str,
    slot: fn(&mut CallScope) -> &mut Option<Slot<N, D>>,
    run: fn(N) -> F,
    to_wit: fn(&D) -> W,
) -> wasmtime::Result<()>
where
    N: 'static,
    D: 'static,
    F: std::future::Future<Output = D> + 'static,
    W: ComponentType + Lower + Send + Sync + 'static,
{
    linker
        .instance(&format!(
            "toolgate:plugin/{chain}@{}",
            super::super::CURRENT
        ))?
        .func_wrap(
            "next",
            move |mut store: wasmtime::StoreContextMut<'_, StoreData>, (): ()| {
                let next = chain_next(slot(&mut store.data_mut().scope), chain, run, to_wit);
                Ok((wait_here(next)??,))
            },
        )
}

/// The waterfalls whose `next` answers with a decision: the interface, and
/// the export it may be called from.
const PRE: &str = "pre-execute-chain";
const POST: &str = "post-execute-chain";

/// A waterfall's `next`, on either path: the rest of the chain (`run`)
/// runs at most once per call and a second `next` gets the same answer;
/// called outside its hook, or re-entered while the rest runs, it is a
/// misuse (a trap). `to_wit` makes the answer the guest gets.
async fn chain_next<N, D, F, W>(
    slot: &mut Option<Slot<N, D>>,
    chain: &str,
    run: impl FnOnce(N) -> F,
    to_wit: impl FnOnce(&D) -> W,
) -> wasmtime::Result<W>
where
    F: std::future::Future<Output = D>,
{
    let Some(taken) = slot.as_mut() else {
        let hook = chain.trim_end_matches("-chain");
        return Err(Misuse(format!("`{chain}.next` may only be called from `{hook}`")).into());
    };
    let answer = match std::mem::replace(taken, Slot::Running) {
        Slot::Pending(next) => run(next).await,
        Slot::Done(answer) => answer,
        Slot::Running => return Err(Misuse(format!("`{chain}.next` re-entered")).into()),
    };
    let wit = to_wit(&answer);
    *slot = Some(Slot::Done(answer));
    Ok(wit)
}

/// Drive `fut` to its end on this thread, from inside a synchronous guest
/// call. It is polled once; it nearly always finishes then (the rest of a
/// chain of policies). If it has to wait, a multi-threaded runtime lets
/// this thread block for it (`block_in_place`: the runtime moves its other
/// work elsewhere); a single-threaded one cannot, and the guest's call
/// fails (closed).
fn wait_here<F: std::future::Future>(fut: F) -> wasmtime::Result<F::Output> {
    use std::task::{Context, Poll};
    let mut fut = std::pin::pin!(fut);
    let waker = futures::task::noop_waker();
    if let Poll::Ready(v) = fut.as_mut().poll(&mut Context::from_waker(&waker)) {
        return Ok(v);
    }
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            Ok(tokio::task::block_in_place(|| h.block_on(fut)))
        }
        _ => Err(Misuse(
            "the rest of the chain had to wait, which a hook on the synchronous path can do only on a multi-threaded runtime".into(),
        )
        .into()),
    }
}

/// Add every import (the async path).
pub fn add_to_linker(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    add_sync_to_linker(linker)?;
    type D = HasSelf<StoreData>;
    imports::deferred_context::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::pre_execute_chain::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::execute_chain::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::post_execute_chain::add_to_linker::<StoreData, D>(linker, |d| d)?;
    Ok(())
}

/// The interfaces of [`add_sync_to_linker`] and
/// [`add_sync_chains_to_linker`], by name; with the seams that never wait
/// ([`is_sync`]), what a component may import and take the synchronous
/// path.
pub const SYNC_INTERFACES: &[&str] = &[
    "types",
    "log",
    "cancellation",
    "pre-execute-chain",
    "post-execute-chain",
];

/// Whether the synchronous path's linker provides `interface` (of
/// `toolgate:plugin`).
pub fn is_sync(interface: &str) -> bool {
    SYNC_INTERFACES.contains(&interface)
        || crate::seams::find::<StoreData>(interface).is_some_and(|s| s.sync)
}

impl imports::types::Host for StoreData {}

impl StoreData {
    fn call_info(&self, call: &Resource<CallHandle>) -> wasmtime::Result<&crate::CallInfo> {
        self.get(call)?.0.as_deref().ok_or_else(|| {
            Misuse("this call handle is not valid outside the call it was lent for".into()).into()
        })
    }

    fn result(&self, result: &Resource<ResultHandle>) -> wasmtime::Result<&ResultHandle> {
        match self.get(result)? {
            ResultHandle::Vacant => Err(Misuse(
                "this result handle is not valid outside the call it was lent for".into(),
            )
            .into()),
            h => Ok(h),
        }
    }
}

impl imports::types::HostCall for StoreData {
    fn id(&mut self, call: Resource<CallHandle>) -> wasmtime::Result<String> {
        Ok(self.call_info(&call)?.call_id.clone())
    }

    fn tool_name(&mut self, call: Resource<CallHandle>) -> wasmtime::Result<String> {
        Ok(self.call_info(&call)?.tool_name.clone())
    }

    fn provider(&mut self, call: Resource<CallHandle>) -> wasmtime::Result<String> {
        Ok(self.call_info(&call)?.tool.provider.clone())
    }

    fn arguments(&mut self, call: Resource<CallHandle>) -> wasmtime::Result<String> {
        Ok(self.call_info(&call)?.arguments_json().to_string())
    }

    fn argument(
        &mut self,
        call: Resource<CallHandle>,
        pointer: String,
    ) -> wasmtime::Result<Option<String>> {
        Ok(self
            .call_info(&call)?
            .argument(&pointer)
            .map(|v| v.to_string()))
    }

    fn scope(&mut self, call: Resource<CallHandle>) -> wasmtime::Result<String> {
        Ok(self.call_info(&call)?.agent_scope.clone())
    }

    fn parent_id(&mut self, call: Resource<CallHandle>) -> wasmtime::Result<Option<String>> {
        Ok(self.call_info(&call)?.parent_id.clone())
    }

    fn code_mode(&mut self, call: Resource<CallHandle>) -> wasmtime::Result<bool> {
        Ok(self.call_info(&call)?.code_mode)
    }

    fn deadline_ms(&mut self, call: Resource<CallHandle>) -> wasmtime::Result<Option<u64>> {
        self.call_info(&call)?;
        Ok(self
            .scope
            .signal
            .as_ref()
            .and_then(CallSignal::remaining)
            .map(|d| d.as_millis() as u64))
    }

    fn tool_timeout_ms(&mut self, call: Resource<CallHandle>) -> wasmtime::Result<Option<u32>> {
        Ok(self.call_info(&call)?.tool.timeout_ms)
    }

    fn annotations(
        &mut self,
        call: Resource<CallHandle>,
    ) -> wasmtime::Result<wit::ToolAnnotations> {
        Ok(annotations_to_wit(self.call_info(&call)?.tool.annotations))
    }

    fn caller(&mut self, call: Resource<CallHandle>) -> wasmtime::Result<Option<wit::Caller>> {
        Ok(self
            .call_info(&call)?
            .caller
            .as_deref()
            .map(|c| wit::Caller {
                subject: c.subject.clone(),
                issuer: c.issuer.clone(),
                client_id: c.client_id.clone(),
                scopes: c.scopes.clone(),
                claims: c.claims_json(),
                // Only `serve --http` validates tokens.
                transport: "http".into(),
                session: c.session.clone(),
            }))
    }

    fn drop(&mut self, call: Resource<CallHandle>) -> wasmtime::Result<()> {
        self.take(call)?;
        Ok(())
    }
}

/// The outcome a handle stands for, if it stands for one.
fn outcome_of(h: &ResultHandle) -> Option<&Outcome> {
    match h {
        ResultHandle::Outcome(o) | ResultHandle::Chain(o) => Some(o),
        _ => None,
    }
}

impl imports::types::HostCallResult for StoreData {
    fn new(&mut self, result: wit::ToolResult) -> wasmtime::Result<Resource<ResultHandle>> {
        self.push(ResultHandle::New(Box::new(result)))
    }

    fn is_error(&mut self, r: Resource<ResultHandle>) -> wasmtime::Result<bool> {
        Ok(match self.result(&r)? {
            ResultHandle::Outcome(o) | ResultHandle::Chain(o) => o.is_error(),
            ResultHandle::Record(rec) => rec.is_error,
            ResultHandle::New(n) => matches!(**n, wit::ToolResult::Failure(_)),
            ResultHandle::Vacant => unreachable!("`result` refuses a vacant handle"),
        })
    }

    fn value(&mut self, r: Resource<ResultHandle>) -> wasmtime::Result<Option<String>> {
        let h = self.result(&r)?;
        Ok(match (outcome_of(h), h) {
            (Some(Outcome::Success { value, .. }), _) => Some(value.to_string()),
            (_, ResultHandle::New(n)) => match &**n {
                wit::ToolResult::Success(s) => Some(s.value.clone()),
                wit::ToolResult::Failure(_) => None,
            },
            _ => None,
        })
    }

    fn content(&mut self, r: Resource<ResultHandle>) -> wasmtime::Result<Vec<wit::ContentBlock>> {
        let h = self.result(&r)?;
        Ok(match h {
            ResultHandle::Outcome(o) | ResultHandle::Chain(o) => content_to_wit(o.content()),
            ResultHandle::Record(rec) => content_to_wit(&rec.content),
            ResultHandle::New(n) => match &**n {
                wit::ToolResult::Success(s) => s.content.clone(),
                wit::ToolResult::Failure(f) => f.content.clone(),
            },
            ResultHandle::Vacant => unreachable!("`result` refuses a vacant handle"),
        })
    }

    fn text(&mut self, r: Resource<ResultHandle>) -> wasmtime::Result<String> {
        let h = self.result(&r)?;
        Ok(match h {
            ResultHandle::Outcome(o) | ResultHandle::Chain(o) => text_of(o.content()),
            ResultHandle::Record(rec) => text_of(&rec.content),
            ResultHandle::Vacant => unreachable!("`result` refuses a vacant handle"),
            ResultHandle::New(n) => {
                let blocks = match &**n {
                    wit::ToolResult::Success(s) => &s.content,
                    wit::ToolResult::Failure(f) => &f.content,
                };
                blocks
                    .iter()
                    .filter_map(|b| match b {
                        wit::ContentBlock::Text(t) => Some(t.as_str()),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            }
        })
    }

    fn meta(&mut self, r: Resource<ResultHandle>) -> wasmtime::Result<Option<String>> {
        let h = self.result(&r)?;
        Ok(match h {
            ResultHandle::Outcome(o) | ResultHandle::Chain(o) => match &**o {
                Outcome::Success { meta, .. } => meta.as_ref().map(|m| m.to_string()),
                Outcome::Failure { .. } => None,
            },
            ResultHandle::Record(rec) => rec.meta.as_ref().map(|m| m.to_string()),
            ResultHandle::New(n) => match &**n {
                wit::ToolResult::Success(s) => s.meta.clone(),
                wit::ToolResult::Failure(_) => None,
            },
            ResultHandle::Vacant => unreachable!("`result` refuses a vacant handle"),
        })
    }

    fn error(&mut self, r: Resource<ResultHandle>) -> wasmtime::Result<Option<wit::ToolFailure>> {
        let h = self.result(&r)?;
        Ok(match h {
            ResultHandle::Outcome(o) | ResultHandle::Chain(o) => o.error().map(failure_to_wit),
            ResultHandle::Record(rec) => rec.error.as_ref().map(failure_to_wit),
            ResultHandle::New(n) => match &**n {
                wit::ToolResult::Success(_) => None,
                wit::ToolResult::Failure(f) => Some(f.error.clone()),
            },
            ResultHandle::Vacant => unreachable!("`result` refuses a vacant handle"),
        })
    }

    fn drop(&mut self, r: Resource<ResultHandle>) -> wasmtime::Result<()> {
        self.take(r)?;
        Ok(())
    }
}

impl imports::log::Host for StoreData {
    fn log(&mut self, level: imports::log::Level, message: String) -> wasmtime::Result<()> {
        use imports::log::Level as L;
        let level = match level {
            L::Trace => Level::Trace,
            L::Debug => Level::Debug,
            L::Info => Level::Info,
            L::Warn => Level::Warn,
            L::Error => Level::Error,
        };
        self.plugin.log.line(level, &message);
        Ok(())
    }
}

impl imports::cancellation::Host for StoreData {
    fn is_cancelled(&mut self) -> wasmtime::Result<bool> {
        Ok(self.interrupted().is_some())
    }

    fn remaining_ms(&mut self) -> wasmtime::Result<Option<u64>> {
        Ok(self
            .scope
            .signal
            .as_ref()
            .and_then(CallSignal::remaining)
            .map(|d| d.as_millis() as u64))
    }
}

impl imports::deferred_context::Host for StoreData {
    fn add(&mut self, context: String) -> wasmtime::Result<()> {
        let Some(sink) = &self.scope.deferred else {
            return Err(Misuse(
                "`deferred-context.add` may only be called while a tool body runs".into(),
            )
            .into());
        };
        let budgets = &self.plugin.budgets;
        let mut sink = sink.lock().unwrap_or_else(|p| p.into_inner());
        if sink.len() >= budgets.max_deferred {
            drop(sink);
            self.plugin.log.host_warning(&format!(
                "deferred context dropped: at most {} per call",
                budgets.max_deferred
            ));
        } else {
            sink.push(cut(context, budgets.max_deferred_bytes));
        }
        Ok(())
    }
}

impl imports::pre_execute_chain::Host for StoreData {
    async fn next(&mut self) -> wasmtime::Result<wit::PreDecision> {
        chain_next(
            &mut self.scope.pre_next,
            PRE,
            PreNext::run,
            pre_decision_to_wit,
        )
        .await
    }
}

impl imports::execute_chain::Host for StoreData {
    async fn next(&mut self, deadline_ms: Option<u64>) -> wasmtime::Result<Resource<ResultHandle>> {
        let slot = self.scope.exec_next.as_mut().ok_or_else(|| {
            Misuse("`execute-chain.next` may only be called from `around-execute`".into())
        })?;
        let done = slot.done.clone();
        let finished = done.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let outcome = match finished {
            Some(outcome) => outcome,
            None => {
                let next = slot
                    .next
                    .take()
                    .ok_or_else(|| Misuse("`execute-chain.next` re-entered".into()))?;
                let outcome = Arc::new(next.run(deadline_ms.map(Duration::from_millis)).await);
                *done.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome.clone());
                outcome
            }
        };
        self.push(ResultHandle::Chain(outcome))
    }
}

impl imports::post_execute_chain::Host for StoreData {
    async fn next(&mut self) -> wasmtime::Result<wit::PostDecision> {
        chain_next(
            &mut self.scope.post_next,
            POST,
            PostNext::run,
            post_decision_to_wit,
        )
        .await
    }
}
