//! The host side of every `toolgate:plugin@0.2.x` import.
//!
//! The call and result handles read from what the pipeline lent the store
//! for this call, copying only the field asked for. Imports that never wait
//! are synchronous (and so available on the synchronous path); the
//! waterfalls' `next` and the process seams are async.

use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::{HasSelf, Linker, Resource};

use super::convert::{
    annotations_to_wit, content_to_wit, failure_to_wit, options_from_wit, post_decision_to_wit,
    pre_decision_to_wit, spawned_to_wit, text_of,
};
use crate::bindings::v0_2::toolgate::plugin as imports;
use crate::bindings::v0_2::wit;
use crate::bindings::{CallHandle, ResultHandle};
use crate::budgets::cut;
use crate::call::CallSignal;
use crate::outcome::Outcome;
use crate::plugin::log::Level;
use crate::plugin::store::{Slot, StoreData};
use crate::seams::files::PendingRead;
use crate::seams::process;

/// A host function was called where the contract does not allow it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Misuse(pub String);

/// Add the imports every path can use (none of them waits).
pub fn add_sync_to_linker(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    type D = HasSelf<StoreData>;
    imports::types::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::log::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::cancellation::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::kv::add_to_linker::<StoreData, D>(linker, |d| d)?;
    Ok(())
}

/// Add the synchronous `pre-execute-chain.next` and `post-execute-chain.next`
/// (the synchronous path's linker only): a waterfall hook runs the rest of
/// its chain in place. The rest is policies too — components and native
/// hooks that answer at once —, so it is driven without a fiber; in the
/// rare case it has to wait (a listener after it doing I/O), the thread
/// waits for it (see [`wait_here`]).
pub fn add_sync_chains_to_linker(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    linker
        .instance(&format!(
            "toolgate:plugin/pre-execute-chain@{}",
            super::super::CURRENT
        ))?
        .func_wrap(
            "next",
            |mut store: wasmtime::StoreContextMut<'_, StoreData>, (): ()| {
                let data = store.data_mut();
                let slot = data.scope.pre_next.as_mut().ok_or_else(|| {
                    Misuse("`pre-execute-chain.next` may only be called from `pre-execute`".into())
                })?;
                let decision = match std::mem::replace(slot, Slot::Running) {
                    Slot::Pending(next) => wait_here(next.run())?,
                    Slot::Done(decision) => decision,
                    Slot::Running => {
                        return Err(Misuse("`pre-execute-chain.next` re-entered".into()).into());
                    }
                };
                let wit = pre_decision_to_wit(&decision);
                *data.scope.pre_next.as_mut().expect("slot set above") = Slot::Done(decision);
                Ok((wit,))
            },
        )?;
    linker
        .instance(&format!(
            "toolgate:plugin/post-execute-chain@{}",
            super::super::CURRENT
        ))?
        .func_wrap(
            "next",
            |mut store: wasmtime::StoreContextMut<'_, StoreData>, (): ()| {
                let data = store.data_mut();
                let slot = data.scope.post_next.as_mut().ok_or_else(|| {
                    Misuse(
                        "`post-execute-chain.next` may only be called from `post-execute`".into(),
                    )
                })?;
                let decision = match std::mem::replace(slot, Slot::Running) {
                    Slot::Pending(next) => wait_here(next.run())?,
                    Slot::Done(decision) => decision,
                    Slot::Running => {
                        return Err(Misuse("`post-execute-chain.next` re-entered".into()).into());
                    }
                };
                let wit = post_decision_to_wit(&decision);
                *data.scope.post_next.as_mut().expect("slot set above") = Slot::Done(decision);
                Ok((wit,))
            },
        )?;
    Ok(())
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
    imports::process::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::shell::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::subprocess::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::jobs::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::files::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::bulk_read::add_to_linker::<StoreData, D>(linker, |d| d)?;
    Ok(())
}

/// The interfaces of [`add_sync_to_linker`] and
/// [`add_sync_chains_to_linker`], by name: a component that imports no other
/// `toolgate:plugin` interface may take the synchronous path.
pub const SYNC_INTERFACES: &[&str] = &[
    "types",
    "log",
    "cancellation",
    "kv",
    "pre-execute-chain",
    "post-execute-chain",
];

impl imports::types::Host for StoreData {}
impl imports::process::Host for StoreData {}

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

impl StoreData {
    /// The kv namespace and the scope of the call being served.
    fn kv(&self) -> wasmtime::Result<(&crate::seams::kv::KvSpace, &str)> {
        let space = self.plugin.kv.as_ref().ok_or_else(|| {
            Misuse(format!(
                "plugin `{}` is not granted the kv seam (`kv = true` in its grants)",
                self.plugin.name
            ))
        })?;
        let scope = self
            .scope
            .call
            .as_ref()
            .map_or("", |c| c.agent_scope.as_str());
        Ok((space, scope))
    }
}

impl imports::kv::Host for StoreData {
    fn get(&mut self, key: String) -> wasmtime::Result<Option<Vec<u8>>> {
        let (space, scope) = self.kv()?;
        Ok(space.get(scope, &key))
    }

    fn set(&mut self, key: String, value: Vec<u8>) -> wasmtime::Result<Result<(), String>> {
        let (space, scope) = self.kv()?;
        Ok(space.set(scope, key, value))
    }

    fn delete(&mut self, key: String) -> wasmtime::Result<()> {
        let (space, scope) = self.kv()?;
        space.delete(scope, &key);
        Ok(())
    }

    fn keys(&mut self, prefix: String) -> wasmtime::Result<Vec<String>> {
        let (space, scope) = self.kv()?;
        Ok(space.keys(scope, &prefix))
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
        let slot = self.scope.pre_next.as_mut().ok_or_else(|| {
            Misuse("`pre-execute-chain.next` may only be called from `pre-execute`".into())
        })?;
        match std::mem::replace(slot, Slot::Running) {
            Slot::Pending(next) => {
                let decision = next.run().await;
                let wit = pre_decision_to_wit(&decision);
                *self.scope.pre_next.as_mut().expect("slot set above") = Slot::Done(decision);
                Ok(wit)
            }
            Slot::Done(decision) => {
                let wit = pre_decision_to_wit(&decision);
                *slot = Slot::Done(decision);
                Ok(wit)
            }
            Slot::Running => Err(Misuse("`pre-execute-chain.next` re-entered".into()).into()),
        }
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
        let slot = self.scope.post_next.as_mut().ok_or_else(|| {
            Misuse("`post-execute-chain.next` may only be called from `post-execute`".into())
        })?;
        match std::mem::replace(slot, Slot::Running) {
            Slot::Pending(next) => {
                let decision = next.run().await;
                let wit = post_decision_to_wit(&decision);
                *self.scope.post_next.as_mut().expect("slot set above") = Slot::Done(decision);
                Ok(wit)
            }
            Slot::Done(decision) => {
                let wit = post_decision_to_wit(&decision);
                *slot = Slot::Done(decision);
                Ok(wit)
            }
            Slot::Running => Err(Misuse("`post-execute-chain.next` re-entered".into()).into()),
        }
    }
}

impl imports::shell::Host for StoreData {
    async fn run(
        &mut self,
        command: String,
        options: imports::process::Options,
    ) -> wasmtime::Result<Result<imports::process::Output, imports::process::SpawnError>> {
        let ran = process::shell(self.requester(), command, options_from_wit(options)).await;
        Ok(spawned_to_wit(ran))
    }
}

impl imports::subprocess::Host for StoreData {
    async fn run(
        &mut self,
        program: String,
        args: Vec<String>,
        options: imports::process::Options,
    ) -> wasmtime::Result<Result<imports::process::Output, imports::process::SpawnError>> {
        let ran =
            process::subprocess(self.requester(), program, args, options_from_wit(options)).await;
        Ok(spawned_to_wit(ran))
    }
}

impl StoreData {
    /// The job table view and the scope of the call being served.
    fn jobs(&self) -> wasmtime::Result<(crate::seams::jobs::JobSpace, String)> {
        let space = self.plugin.jobs.clone().ok_or_else(|| {
            Misuse(format!(
                "plugin `{}` is not granted the shell, which the jobs seam needs (`shell = true` in its grants)",
                self.plugin.name
            ))
        })?;
        let scope = self
            .scope
            .call
            .as_ref()
            .map_or(String::new(), |c| c.agent_scope.clone());
        Ok((space, scope))
    }
}

fn job_info_to_wit(i: crate::seams::jobs::JobInfo) -> imports::jobs::JobInfo {
    imports::jobs::JobInfo {
        id: i.id,
        command: i.command,
        running: i.running,
        exit_code: i.exit_code,
        signal: i.signal,
        killed: i.killed,
        elapsed_ms: i.elapsed.as_millis() as u64,
        output_bytes: i.output_bytes,
    }
}

impl imports::jobs::Host for StoreData {
    fn start(
        &mut self,
        command: String,
        options: imports::process::Options,
    ) -> wasmtime::Result<Result<imports::jobs::JobInfo, imports::process::SpawnError>> {
        let (space, scope) = self.jobs()?;
        let started = space.start(self.requester(), &scope, command, options_from_wit(options));
        Ok(match started {
            Ok(info) => Ok(job_info_to_wit(info)),
            Err(e) => Err(spawned_to_wit(Err(e)).expect_err("an error stays an error")),
        })
    }

    fn list(&mut self) -> wasmtime::Result<Vec<imports::jobs::JobInfo>> {
        let (space, scope) = self.jobs()?;
        Ok(space
            .list(&scope)
            .into_iter()
            .map(job_info_to_wit)
            .collect())
    }

    fn output(
        &mut self,
        id: String,
        since: u64,
    ) -> wasmtime::Result<Result<imports::jobs::JobOutput, String>> {
        let (space, scope) = self.jobs()?;
        let max = self.plugin.grants.output_cap.max(1);
        Ok(space
            .output(&scope, &id, since, max)
            .map(|o| imports::jobs::JobOutput {
                info: job_info_to_wit(o.info),
                data: o.data,
                next: o.next,
                skipped: o.skipped,
            }))
    }

    async fn kill(
        &mut self,
        id: String,
    ) -> wasmtime::Result<Result<imports::jobs::JobInfo, String>> {
        let (space, scope) = self.jobs()?;
        Ok(space.kill(&scope, &id).await.map(job_info_to_wit))
    }
}

impl imports::files::Host for StoreData {
    fn write(&mut self, path: String, contents: Vec<u8>) -> wasmtime::Result<Result<u64, String>> {
        let written = crate::seams::files::write(&self.plugin.grants, &path, &contents);
        match &written {
            Ok(n) => {
                tracing::info!(plugin = %self.plugin.name, path = %path, bytes = n, "file written")
            }
            Err(why) => {
                tracing::info!(plugin = %self.plugin.name, path = %path, "file write refused: {why}")
            }
        }
        Ok(written)
    }
}

impl imports::bulk_read::Host for StoreData {
    async fn read(
        &mut self,
        paths: Vec<String>,
        limits: imports::bulk_read::ReadLimits,
    ) -> wasmtime::Result<Vec<Result<Vec<u8>, String>>> {
        let grants = self.plugin.grants.clone();
        let asked = paths.len();
        // One hand-off to a blocking thread for the whole batch.
        let read = tokio::task::spawn_blocking(move || {
            crate::seams::files::read(
                &grants.fs,
                &grants.sandbox.hidden,
                &paths,
                limits.max_file_bytes,
                limits.max_total_bytes,
            )
        })
        .await?;
        tracing::debug!(plugin = %self.plugin.name, asked, read = read.len(), "bulk read");
        Ok(read)
    }
}

impl imports::bulk_read::HostBatch for StoreData {
    async fn start(
        &mut self,
        paths: Vec<String>,
        limits: imports::bulk_read::ReadLimits,
    ) -> wasmtime::Result<Resource<PendingRead>> {
        let pending = self
            .reads
            .start(
                self.plugin.grants.fs.clone(),
                self.plugin.grants.sandbox.hidden.clone(),
                paths,
                limits.max_file_bytes,
                limits.max_total_bytes,
            )
            .await
            .map_err(|e| {
                Misuse(format!(
                    "plugin `{}` misused `bulk-read`: {e}",
                    self.plugin.name
                ))
            })?;
        Ok(self.table.push(pending)?)
    }

    async fn wait(
        &mut self,
        batch: Resource<PendingRead>,
    ) -> wasmtime::Result<Vec<Result<Vec<u8>, String>>> {
        Ok(self.table.get_mut(&batch)?.wait().await?)
    }

    fn drop(&mut self, batch: Resource<PendingRead>) -> wasmtime::Result<()> {
        let batch = self.table.delete(batch)?;
        self.reads.release(batch);
        Ok(())
    }
}
