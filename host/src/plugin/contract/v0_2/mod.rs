//! `toolgate:plugin@0.2.x`: the current contract.
//!
//! * [`imports`] — the host side of every import (the call and result
//!   handles, log, cancellation, kv, the waterfalls' `next`, the process
//!   seams);
//! * [`exports`] — each role's functions, looked up and type-checked;
//! * [`convert`] — host ↔ WIT types, with the budgets applied;
//! * [`roles`] — components behind the policy and tool traits.

pub mod convert;
pub mod exports;
pub mod imports;
pub mod roles;

use crate::bindings::v0_2::wit;
use crate::call::CallSignal;
use crate::plugin::component::{ComponentPlugin, InvokeError};
use crate::plugin::store::CallScope;

/// `list-tools` at load, under `signal`.
pub async fn list_tools(
    plugin: &ComponentPlugin,
    signal: CallSignal,
) -> Result<Vec<wit::ToolSpec>, InvokeError> {
    let mut lease = plugin.lease(CallScope::new(None, signal)).await?;
    let answer = async {
        let (_, exports) = lease.parts::<exports::Exports>();
        let func = exports
            .list_tools
            .ok_or_else(|| wasmtime::format_err!("the component exports no `list-tools`"))?;
        lease.call(func, ()).await
    }
    .await;
    lease.finish(answer).map(|(specs,)| specs)
}
