//! Policies: the roles that decide about calls, the traits an embedder
//! implements to add them in native Rust, and the continuations through
//! which a waterfall listener runs the rest of its chain.
//!
//! Every role has one trait. A Wasm component exporting the role is adapted
//! to the same trait (see [`crate::plugin::contract`]), so the pipeline has
//! one semantics whatever the source: order by priority, fail closed on error.
//!
//! The call and the result are handed over as `Arc`s: a component adapter
//! lends them to the guest as resource handles without copying them, and a
//! native policy reads them through `Deref` as if they were plain references.
//!
//! A native guard, in full:
//!
//! ```
//! use std::sync::Arc;
//! use toolgate::policy::{Guard, PolicyError};
//! use toolgate::CallInfo;
//!
//! struct NoRoot;
//!
//! #[async_trait::async_trait]
//! impl Guard for NoRoot {
//!     async fn check(&self, call: &Arc<CallInfo>) -> Result<Option<String>, PolicyError> {
//!         let touches_root = call.argument("/path").and_then(|p| p.as_str()) == Some("/");
//!         Ok(touches_root.then(|| "the root directory is off limits".to_string()))
//!     }
//! }
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;

use crate::call::{CallInfo, CallSignal};
use crate::cause::Cause;
use crate::content::Content;
use crate::outcome::{CallRecord, Outcome};

/// The rest of the pre-execute waterfall, as a listener sees it: the
/// listeners after it, then the default (`allow`). Built by the
/// pre-execute stage; running it is the only thing a listener can do with it.
pub struct PreNext(Box<dyn FnOnce() -> BoxFuture<'static, PreDecision> + Send>);

impl PreNext {
    /// A continuation that runs `rest` (used by the pipeline, and by tests
    /// that call a listener directly).
    pub fn new(rest: impl FnOnce() -> BoxFuture<'static, PreDecision> + Send + 'static) -> Self {
        PreNext(Box::new(rest))
    }

    /// Run the listeners after this one and return their decision.
    pub async fn run(self) -> PreDecision {
        (self.0)().await
    }
}

/// The rest of the execute waterfall (the wrappers after this one, then the
/// tool body), as a wrapper sees it.
pub struct ExecNext {
    signal: CallSignal,
    rest: Box<dyn FnOnce(CallSignal) -> BoxFuture<'static, Outcome> + Send>,
}

impl ExecNext {
    /// A continuation that runs `rest` under the signal it is given.
    pub fn new(
        signal: CallSignal,
        rest: impl FnOnce(CallSignal) -> BoxFuture<'static, Outcome> + Send + 'static,
    ) -> Self {
        ExecNext {
            signal,
            rest: Box::new(rest),
        }
    }

    /// The signal the rest of the chain would run under if not shortened.
    pub fn signal(&self) -> &CallSignal {
        &self.signal
    }

    /// Run the rest of the chain; `deadline` shortens (never extends) it.
    pub async fn run(self, deadline: Option<Duration>) -> Outcome {
        let signal = match deadline {
            Some(d) => self.signal.shorten_by(d),
            None => self.signal,
        };
        (self.rest)(signal).await
    }
}

/// The rest of the post-execute waterfall, as a listener sees it.
pub struct PostNext(Box<dyn FnOnce() -> BoxFuture<'static, PostDecision> + Send>);

impl PostNext {
    /// A continuation that runs `rest`.
    pub fn new(rest: impl FnOnce() -> BoxFuture<'static, PostDecision> + Send + 'static) -> Self {
        PostNext(Box::new(rest))
    }

    /// Run the listeners after this one and return their decision.
    pub async fn run(self) -> PostDecision {
        (self.0)().await
    }
}

/// A pre-execute decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PreDecision {
    Allow,
    /// Refuse the call with this reason.
    Deny(String),
    /// Ask a person; the string is the question.
    Ask(String),
}

impl std::fmt::Display for PreDecision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PreDecision::Allow => f.write_str("allow"),
            PreDecision::Deny(r) => write!(f, "deny: {r}"),
            PreDecision::Ask(q) => write!(f, "ask: {q}"),
        }
    }
}

/// A post-execute decision.
#[derive(Clone, Debug, PartialEq)]
pub enum PostDecision {
    Accept,
    /// Replace the canonical value (re-validated and re-rendered).
    AcceptValue(serde_json::Value),
    /// Replace the content, keep the value.
    AcceptContent(Vec<Content>),
    /// Turn the result into an error whose content is this feedback.
    Block(String),
}

/// A policy could not decide. The pipeline turns this into a denial (pre,
/// guard), an error result (around, post), or a logged no-op (finalizer,
/// observer) — never into an allow.
///
/// The message is what the pipeline shows; the error underneath (a guest
/// trap, a refused answer) is kept as the `source()` ([`Cause`]).
#[derive(Clone, Debug, thiserror::Error)]
pub enum PolicyError {
    /// Guest code trapped (or could not be run): the cause is the
    /// component's `InvokeError`, with the wasmtime error under it.
    #[error("trapped: {0}")]
    Trapped(#[source] Cause),
    #[error("timed out after {0} ms")]
    TimedOut(u64),
    /// The call's signal fired while the policy ran (cancellation, deadline).
    #[error("interrupted: {0:?}")]
    Interrupted(crate::call::Interrupt),
    /// The policy's answer broke a limit or was not acceptable JSON.
    #[error("returned an unacceptable answer: {0}")]
    Invalid(#[source] Cause),
    #[error("{0}")]
    Failed(String),
}

impl PolicyError {
    /// The policy ran out of its time budget (the pipeline's timeout, or the
    /// deadline the host's epoch callback enforces on the synchronous path).
    pub fn is_timeout(&self) -> bool {
        matches!(
            self,
            PolicyError::TimedOut(_)
                | PolicyError::Interrupted(crate::call::Interrupt::DeadlineExceeded)
        )
    }
}

/// A listener on the pre-execute waterfall.
#[async_trait]
pub trait PreExecuteHook: Send + Sync {
    /// Decide; `next.run()` runs the listeners after this one.
    async fn pre_execute(
        &self,
        call: &Arc<CallInfo>,
        next: PreNext,
    ) -> Result<PreDecision, PolicyError>;
}

/// A wrapper on the execute waterfall.
#[async_trait]
pub trait ExecuteAroundHook: Send + Sync {
    /// Run the call, usually by `next.run(deadline)`.
    async fn around_execute(
        &self,
        call: &Arc<CallInfo>,
        next: ExecNext,
    ) -> Result<Outcome, PolicyError>;
}

/// A listener on the post-execute waterfall.
#[async_trait]
pub trait PostExecuteHook: Send + Sync {
    async fn post_execute(
        &self,
        call: &Arc<CallInfo>,
        result: &Arc<Outcome>,
        next: PostNext,
    ) -> Result<PostDecision, PolicyError>;
}

/// A guard: `Some(reason)` denies. There is no allow.
#[async_trait]
pub trait Guard: Send + Sync {
    async fn check(&self, call: &Arc<CallInfo>) -> Result<Option<String>, PolicyError>;
}

/// Adjusts the content of final results (only the content).
#[async_trait]
pub trait Finalizer: Send + Sync {
    async fn finalize_content(
        &self,
        call: &Arc<CallInfo>,
        result: &Arc<Outcome>,
    ) -> Result<Option<Vec<Content>>, PolicyError>;
}

/// Sees every frozen record. Cannot change it.
#[async_trait]
pub trait ResultObserver: Send + Sync {
    async fn on_result(
        &self,
        call: &Arc<CallInfo>,
        record: &Arc<CallRecord>,
    ) -> Result<(), PolicyError>;
}

/// Where a policy came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PolicySource {
    /// A component in a plugin.
    Component { plugin: String },
    /// Registered in Rust by the embedder.
    Native,
}

/// A policy in a chain: its name, place and implementation, and how often
/// it has been invoked (for `toolgate plugins` and the conformance tests).
pub struct Listener<P: ?Sized> {
    pub name: String,
    /// Lower runs first (outermost in a waterfall).
    pub priority: i32,
    pub source: PolicySource,
    pub policy: Arc<P>,
    /// The policy enforces its own budget (a component on the synchronous
    /// path, stopped by epoch interruption): the pipeline's timeout could
    /// not preempt it anyway, so it is not armed.
    pub self_bounded: bool,
    calls: AtomicU64,
}

impl<P: ?Sized> Listener<P> {
    pub fn new(
        name: impl Into<String>,
        priority: i32,
        source: PolicySource,
        policy: Arc<P>,
    ) -> Self {
        Listener {
            name: name.into(),
            priority,
            source,
            policy,
            self_bounded: false,
            calls: AtomicU64::new(0),
        }
    }

    /// Mark the policy as enforcing its own budget.
    pub fn self_bounded(mut self, yes: bool) -> Self {
        self.self_bounded = yes;
        self
    }

    /// Run `fut` (an invocation of this listener) within `budget`: `None`
    /// if the budget ran out. The pipeline's timer is armed only for
    /// policies that do not enforce their own budget.
    pub async fn within<F: std::future::Future>(
        &self,
        budget: std::time::Duration,
        fut: F,
    ) -> Option<F::Output> {
        if self.self_bounded {
            Some(fut.await)
        } else {
            tokio::time::timeout(budget, fut).await.ok()
        }
    }

    /// Count one invocation.
    pub(crate) fn invoked(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    /// How many times this listener has been invoked.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }
}

impl<P: ?Sized> std::fmt::Debug for Listener<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("name", &self.name)
            .field("priority", &self.priority)
            .field("source", &self.source)
            .finish()
    }
}

/// An ordered chain of listeners, shared by every call of a generation.
pub type Chain<P> = Arc<[Listener<P>]>;

/// Sort listeners into their deterministic order: priority, then name.
pub fn order<P: ?Sized>(mut listeners: Vec<Listener<P>>) -> Chain<P> {
    listeners.sort_by(|a, b| {
        a.priority
            .cmp(&b.priority)
            .then_with(|| a.name.cmp(&b.name))
    });
    listeners.into()
}

/// The policy roles, for listings and configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    Tool,
    PreExecute,
    ExecuteAround,
    PostExecute,
    Guard,
    Finalizer,
    Observer,
}

impl Role {
    pub const ALL: [Role; 7] = [
        Role::Tool,
        Role::PreExecute,
        Role::ExecuteAround,
        Role::PostExecute,
        Role::Guard,
        Role::Finalizer,
        Role::Observer,
    ];

    /// The WIT interface a component exports for this role.
    pub fn interface(self) -> &'static str {
        match self {
            Role::Tool => "tool",
            Role::PreExecute => "pre-execute-hook",
            Role::ExecuteAround => "execute-around-hook",
            Role::PostExecute => "post-execute-hook",
            Role::Guard => "guard",
            Role::Finalizer => "finalizer",
            Role::Observer => "result-observer",
        }
    }

    /// The name used in manifests and listings.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Tool => "tool",
            Role::PreExecute => "pre-execute",
            Role::ExecuteAround => "execute-around",
            Role::PostExecute => "post-execute",
            Role::Guard => "guard",
            Role::Finalizer => "finalizer",
            Role::Observer => "observer",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The schema of a `priorities` table (`[plugins.NAME] priorities`, a
/// manifest's `priorities`): a priority per policy role, by its name
/// (`{ guard = 10, pre-execute = 50 }`); nothing else.
pub struct RolePriorities;

impl toolgate_schema::derive::Schema for RolePriorities {
    fn schema() -> serde_json::Value {
        let properties: serde_json::Map<String, serde_json::Value> = Role::ALL
            .iter()
            .filter(|r| **r != Role::Tool)
            .map(|r| {
                (
                    r.as_str().to_string(),
                    serde_json::json!({"type": "integer"}),
                )
            })
            .collect();
        serde_json::json!({
            "type": "object",
            "properties": properties,
            "additionalProperties": false,
        })
    }
}
