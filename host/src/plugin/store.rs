//! What a component instance's store holds, and the host side of every
//! `toolgate:plugin` import.
//!
//! A store belongs to one instance of one plugin. Between calls it holds
//! only the WASI context and limits; during a call, [`CallScope`] holds what
//! the imports need: the fused signal (read by the epoch callback too), the
//! rest of a waterfall for `*-chain.next`, the deferred-context sink.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use anyhow::anyhow;
use wasmtime::StoreLimits;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::adapters::{outcome_to_wit, post_decision_to_wit, pre_decision_to_wit};
use super::grants::Grants;
use crate::bindings::toolgate::plugin as imports;
use crate::bindings::wit;
use crate::call::{CallSignal, Interrupt};
use crate::outcome::Outcome;
use crate::pipeline::execute::ExecNext;
use crate::pipeline::post_execute::PostNext;
use crate::pipeline::pre_execute::PreNext;
use crate::policy::{PostDecision, PreDecision};
use crate::tool::DeferredContexts;

/// Most deferred contexts one call may add, and the longest one.
const MAX_DEFERRED: usize = 16;
const MAX_DEFERRED_LEN: usize = 16 * 1024;
/// Longest log message kept.
const MAX_LOG_LEN: usize = 4 * 1024;
/// How much of a guest's stderr is kept (the tail), for trap reports.
const STDERR_TAIL: usize = 4 * 1024;

/// A `*-chain.next` continuation: run at most once, then remembered.
pub(crate) enum Slot<N, D> {
    Pending(N),
    Running,
    Done(D),
}

/// The execute chain as a wrapper sees it: the rest of the chain, and what
/// it returned (shared with the adapter, which needs it even when the
/// wrapper's instance is gone).
pub(crate) struct ExecSlot {
    pub next: Option<ExecNext>,
    pub done: Arc<Mutex<Option<(wit::ToolResult, Outcome)>>>,
}

/// What the imports need during one call.
#[derive(Default)]
pub struct CallScope {
    pub(crate) signal: Option<CallSignal>,
    pub(crate) deferred: Option<DeferredContexts>,
    pub(crate) pre_next: Option<Slot<PreNext, PreDecision>>,
    pub(crate) exec_next: Option<ExecSlot>,
    pub(crate) post_next: Option<Slot<PostNext, PostDecision>>,
}

impl CallScope {
    pub fn with_signal(signal: CallSignal) -> Self {
        CallScope {
            signal: Some(signal),
            ..Default::default()
        }
    }
}

/// The data of one instance's store.
pub struct StoreData {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limits: StoreLimits,
    pub(crate) plugin: Arc<str>,
    pub(crate) scope: CallScope,
    pub(crate) stderr: TailPipe,
    /// What the operator granted this plugin (the seams check it).
    pub(crate) grants: Arc<Grants>,
}

impl StoreData {
    pub(crate) fn new(
        plugin: Arc<str>,
        wasi: WasiCtx,
        limits: StoreLimits,
        stderr: TailPipe,
        grants: Arc<Grants>,
    ) -> Self {
        StoreData {
            wasi,
            table: ResourceTable::new(),
            limits,
            plugin,
            scope: CallScope::default(),
            stderr,
            grants,
        }
    }

    /// The epoch callback's question: should the running guest stop?
    pub(crate) fn interrupt(&self) -> Option<Interrupt> {
        self.scope.signal.as_ref().and_then(CallSignal::fired)
    }
}

impl WasiView for StoreData {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// The error an epoch interruption traps with, so the host can tell a
/// deadline from a crash.
#[derive(Debug, thiserror::Error)]
#[error("interrupted by the host: {0:?}")]
pub struct Interrupted(pub Interrupt);

impl imports::types::Host for StoreData {}
impl imports::process::Host for StoreData {}

impl imports::log::Host for StoreData {
    async fn log(&mut self, level: imports::log::Level, message: String) -> anyhow::Result<()> {
        use imports::log::Level;
        let message = truncate(message, MAX_LOG_LEN);
        let plugin = &*self.plugin;
        match level {
            Level::Trace => tracing::trace!(target: "toolgate::guest", plugin, "{message}"),
            Level::Debug => tracing::debug!(target: "toolgate::guest", plugin, "{message}"),
            Level::Info => tracing::info!(target: "toolgate::guest", plugin, "{message}"),
            Level::Warn => tracing::warn!(target: "toolgate::guest", plugin, "{message}"),
            Level::Error => tracing::error!(target: "toolgate::guest", plugin, "{message}"),
        }
        Ok(())
    }
}

impl imports::cancellation::Host for StoreData {
    async fn is_cancelled(&mut self) -> anyhow::Result<bool> {
        Ok(self.interrupt().is_some())
    }

    async fn remaining_ms(&mut self) -> anyhow::Result<Option<u64>> {
        Ok(self
            .scope
            .signal
            .as_ref()
            .and_then(CallSignal::remaining)
            .map(|d| d.as_millis() as u64))
    }
}

impl imports::deferred_context::Host for StoreData {
    async fn add(&mut self, context: String) -> anyhow::Result<()> {
        let Some(sink) = &self.scope.deferred else {
            return Err(anyhow!(
                "`deferred-context.add` may only be called while a tool body runs"
            ));
        };
        let mut sink = sink.lock().unwrap_or_else(|p| p.into_inner());
        if sink.len() >= MAX_DEFERRED {
            tracing::warn!(
                plugin = &*self.plugin,
                "deferred context dropped: at most {MAX_DEFERRED} per call"
            );
        } else {
            sink.push(truncate(context, MAX_DEFERRED_LEN));
        }
        Ok(())
    }
}

impl imports::pre_execute_chain::Host for StoreData {
    async fn next(&mut self) -> anyhow::Result<wit::PreDecision> {
        let slot = self.scope.pre_next.as_mut().ok_or_else(|| {
            anyhow!("`pre-execute-chain.next` may only be called from `pre-execute`")
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
            Slot::Running => Err(anyhow!("`pre-execute-chain.next` re-entered")),
        }
    }
}

impl imports::execute_chain::Host for StoreData {
    async fn next(&mut self, deadline_ms: Option<u64>) -> anyhow::Result<wit::ToolResult> {
        let slot = self.scope.exec_next.as_mut().ok_or_else(|| {
            anyhow!("`execute-chain.next` may only be called from `around-execute`")
        })?;
        if let Some((result, _)) = &*slot.done.lock().unwrap_or_else(|p| p.into_inner()) {
            return Ok(result.clone());
        }
        let next = slot
            .next
            .take()
            .ok_or_else(|| anyhow!("`execute-chain.next` re-entered"))?;
        let done = slot.done.clone();
        let outcome = next.run(deadline_ms.map(Duration::from_millis)).await;
        let wit = outcome_to_wit(&outcome);
        *done.lock().unwrap_or_else(|p| p.into_inner()) = Some((wit.clone(), outcome));
        Ok(wit)
    }
}

impl imports::post_execute_chain::Host for StoreData {
    async fn next(&mut self) -> anyhow::Result<wit::PostDecision> {
        let slot = self.scope.post_next.as_mut().ok_or_else(|| {
            anyhow!("`post-execute-chain.next` may only be called from `post-execute`")
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
            Slot::Running => Err(anyhow!("`post-execute-chain.next` re-entered")),
        }
    }
}

impl imports::shell::Host for StoreData {
    async fn run(
        &mut self,
        command: String,
        options: imports::process::Options,
    ) -> anyhow::Result<Result<imports::process::Output, imports::process::SpawnError>> {
        crate::seams::process::shell(self, command, options).await
    }
}

impl imports::subprocess::Host for StoreData {
    async fn run(
        &mut self,
        program: String,
        args: Vec<String>,
        options: imports::process::Options,
    ) -> anyhow::Result<Result<imports::process::Output, imports::process::SpawnError>> {
        crate::seams::process::subprocess(self, program, args, options).await
    }
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

/// Keeps the last few KiB a guest wrote to stderr (a panic message, say),
/// so a trap can be reported with its cause. Never fails a write: a guest
/// that logs a lot must not crash because of it.
#[derive(Clone, Default)]
pub struct TailPipe(Arc<Mutex<VecDeque<u8>>>);

impl TailPipe {
    /// What was kept, lossily decoded.
    pub fn tail(&self) -> String {
        let buf = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let (a, b) = buf.as_slices();
        let mut bytes = a.to_vec();
        bytes.extend_from_slice(b);
        String::from_utf8_lossy(&bytes).trim().to_string()
    }

    pub fn clear(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

impl wasmtime_wasi::cli::IsTerminal for TailPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl wasmtime_wasi::cli::StdoutStream for TailPipe {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl tokio::io::AsyncWrite for TailPipe {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let mut buf = self.0.lock().unwrap_or_else(|p| p.into_inner());
        buf.extend(data.iter().rev().take(STDERR_TAIL).rev());
        let excess = buf.len().saturating_sub(STDERR_TAIL);
        buf.drain(..excess);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
