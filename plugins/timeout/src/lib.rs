//! The timeout policy: an execute-around wrapper that gives every call the
//! deadline its tool declares (`timeout-ms`).
//!
//! It only shortens: the host fuses the deadline with the caller's
//! cancellation, and a wrapper cannot extend or detach from either. A body
//! that ignores the deadline is stopped by the host (epoch interruption).

use toolgate_sdk::{Call, CallResult, ExecChain, ExecuteAroundHook};

struct Timeout;

impl ExecuteAroundHook for Timeout {
    fn around_execute(call: &Call, chain: ExecChain) -> CallResult {
        let deadline = call.tool_timeout().map(|d| d.as_millis() as u64);
        chain.next(deadline)
    }
}

toolgate_sdk::export! { execute_around: Timeout }
