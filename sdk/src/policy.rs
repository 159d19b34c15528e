use crate::bindings::toolgate::plugin::types::{CallResult, ContentBlock};
use crate::bindings::toolgate::plugin::{execute_chain, post_execute_chain, pre_execute_chain};
use crate::{Call, Outcome};

pub use crate::bindings::toolgate::plugin::types::{PostDecision, PreDecision};

/// A guard: it can only refuse. Return `Some(reason)` to deny the call.
/// A guard that panics denies too (the host fails closed).
pub trait Guard {
    fn check(call: &Call) -> Option<String>;
}

/// The rest of the pre-execute waterfall.
pub struct PreChain(pub(crate) ());

impl PreChain {
    /// Run the listeners after this one and return their decision (at most
    /// once; later calls return the same answer).
    pub fn next(&self) -> PreDecision {
        pre_execute_chain::next()
    }
}

/// A listener on the pre-execute waterfall: allow, deny(reason) or
/// ask(question). Call `chain.next()` to hear the listeners after you (a
/// hook that never does runs on the host's fast synchronous path).
pub trait PreExecuteHook {
    fn pre_execute(call: &Call, chain: PreChain) -> PreDecision;
}

/// The rest of the execute waterfall: the wrappers after this one, then the
/// tool body.
pub struct ExecChain(pub(crate) ());

impl ExecChain {
    /// Run the rest; `deadline_ms` shortens the deadline (never extends it).
    /// Returning the handle passes the result on unchanged; read it with
    /// [`Outcome::of`].
    pub fn next(&self, deadline_ms: Option<u64>) -> CallResult {
        execute_chain::next(deadline_ms)
    }
}

/// A wrapper around the tool body (e.g. a timeout policy). Return what
/// `chain.next(..)` returned, or a new result
/// ([`outcome::success`](crate::outcome::success),
/// [`outcome::failure`](crate::outcome::failure)).
pub trait ExecuteAroundHook {
    fn around_execute(call: &Call, chain: ExecChain) -> CallResult;
}

/// The rest of the post-execute waterfall.
pub struct PostChain(pub(crate) ());

impl PostChain {
    pub fn next(&self) -> PostDecision {
        post_execute_chain::next()
    }
}

/// A listener on the post-execute waterfall: accept, replace the value,
/// replace the content, or block.
pub trait PostExecuteHook {
    fn post_execute(call: &Call, result: &Outcome, chain: PostChain) -> PostDecision;
}

/// Adjusts the content of every final result (once). `None` keeps it.
pub trait Finalizer {
    fn finalize_content(call: &Call, result: &Outcome) -> Option<Vec<ContentBlock>>;
}

/// Sees every frozen result (it has no value: `result.value()` is `None`).
/// Cannot change it.
pub trait ResultObserver {
    fn on_result(call: &Call, result: &Outcome);
}
