//! The host side of every `toolgate:plugin@0.1.0` import, as the 0.2 one:
//! each method calls its 0.2 counterpart (`latest`), on the same store,
//! converting its arguments and answer by `From` ([`super::convert`]); a
//! chain's result is a value in 0.1, a handle in 0.2. The process types
//! are 0.2's own (`crate::bindings::v0_1`).

use wasmtime::component::{HasSelf, Linker};

use super::convert::outcome_to_wit;
use crate::bindings::ResultHandle;
use crate::bindings::v0_1::toolgate::plugin as imports;
use crate::bindings::v0_1::wit;
use crate::bindings::v0_2::toolgate::plugin as latest;
use crate::plugin::store::StoreData;

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
    // `process` holds only types (0.2's): an instance with nothing in it.
    linker.instance("toolgate:plugin/process@0.1.0")?;
    imports::shell::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::subprocess::add_to_linker::<StoreData, D>(linker, |d| d)?;
    Ok(())
}

impl imports::types::Host for StoreData {}

impl imports::log::Host for StoreData {
    async fn log(&mut self, level: imports::log::Level, message: String) -> wasmtime::Result<()> {
        latest::log::Host::log(self, level.into(), message)
    }
}

impl imports::cancellation::Host for StoreData {
    async fn is_cancelled(&mut self) -> wasmtime::Result<bool> {
        latest::cancellation::Host::is_cancelled(self)
    }

    async fn remaining_ms(&mut self) -> wasmtime::Result<Option<u64>> {
        latest::cancellation::Host::remaining_ms(self)
    }
}

impl imports::deferred_context::Host for StoreData {
    async fn add(&mut self, context: String) -> wasmtime::Result<()> {
        latest::deferred_context::Host::add(self, context)
    }
}

impl imports::pre_execute_chain::Host for StoreData {
    async fn next(&mut self) -> wasmtime::Result<wit::PreDecision> {
        Ok(latest::pre_execute_chain::Host::next(self).await?.into())
    }
}

impl imports::execute_chain::Host for StoreData {
    /// 0.2 hands the wrapper a handle; 0.1 the result itself.
    async fn next(&mut self, deadline_ms: Option<u64>) -> wasmtime::Result<wit::ToolResult> {
        let handle = latest::execute_chain::Host::next(self, deadline_ms).await?;
        match self.take(handle)? {
            ResultHandle::Chain(outcome) => Ok(outcome_to_wit(&outcome)),
            _ => Err(wasmtime::format_err!(
                "`execute-chain.next` lent something other than the chain's result"
            )),
        }
    }
}

impl imports::post_execute_chain::Host for StoreData {
    async fn next(&mut self) -> wasmtime::Result<wit::PostDecision> {
        Ok(latest::post_execute_chain::Host::next(self).await?.into())
    }
}

impl imports::shell::Host for StoreData {
    async fn run(
        &mut self,
        command: String,
        options: latest::process::Options,
    ) -> wasmtime::Result<Result<latest::process::Output, latest::process::SpawnError>> {
        latest::shell::Host::run(&mut self.requester(), command, options).await
    }
}

impl imports::subprocess::Host for StoreData {
    async fn run(
        &mut self,
        program: String,
        args: Vec<String>,
        options: latest::process::Options,
    ) -> wasmtime::Result<Result<latest::process::Output, latest::process::SpawnError>> {
        latest::subprocess::Host::run(&mut self.requester(), program, args, options).await
    }
}
