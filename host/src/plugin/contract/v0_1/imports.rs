//! The host side of every `toolgate:plugin@0.1.0` import: each one does
//! what its 0.2 counterpart does, through the same seams and store.

use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::{HasSelf, Linker};

use super::convert::{
    options_from_wit, outcome_to_wit, post_decision_to_wit, pre_decision_to_wit, spawned_to_wit,
};
use crate::bindings::v0_1::toolgate::plugin as imports;
use crate::bindings::v0_1::wit;
use crate::budgets::cut;
use crate::call::CallSignal;
use crate::plugin::contract::v0_2::imports::Misuse;
use crate::plugin::log::Level;
use crate::plugin::store::{Slot, StoreData};
use crate::seams::process;

/// Add every 0.1 import (all on the async path).
pub fn add_to_linker(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    type D = HasSelf<StoreData>;
    imports::types::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::log::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::cancellation::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::deferred_context::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::pre_execute_chain::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::execute_chain::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::post_execute_chain::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::process::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::shell::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::subprocess::add_to_linker::<StoreData, D>(linker, |d| d)?;
    Ok(())
}

impl imports::types::Host for StoreData {}
impl imports::process::Host for StoreData {}

impl imports::log::Host for StoreData {
    async fn log(&mut self, level: imports::log::Level, message: String) -> wasmtime::Result<()> {
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
    async fn is_cancelled(&mut self) -> wasmtime::Result<bool> {
        Ok(self.interrupted().is_some())
    }

    async fn remaining_ms(&mut self) -> wasmtime::Result<Option<u64>> {
        Ok(self
            .scope
            .signal
            .as_ref()
            .and_then(CallSignal::remaining)
            .map(|d| d.as_millis() as u64))
    }
}

impl imports::deferred_context::Host for StoreData {
    async fn add(&mut self, context: String) -> wasmtime::Result<()> {
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
    async fn next(&mut self, deadline_ms: Option<u64>) -> wasmtime::Result<wit::ToolResult> {
        let slot = self.scope.exec_next.as_mut().ok_or_else(|| {
            Misuse("`execute-chain.next` may only be called from `around-execute`".into())
        })?;
        let done = slot.done.clone();
        let finished = done.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(outcome) = finished {
            return Ok(outcome_to_wit(&outcome));
        }
        let next = slot
            .next
            .take()
            .ok_or_else(|| Misuse("`execute-chain.next` re-entered".into()))?;
        let outcome = Arc::new(next.run(deadline_ms.map(Duration::from_millis)).await);
        let wit = outcome_to_wit(&outcome);
        *done.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome);
        Ok(wit)
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
