//! Policies: the roles that decide about calls, and the traits an embedder
//! implements to add them in native Rust.
//!
//! Every role has one trait. A Wasm component exporting the role is adapted
//! to the same trait (see [`crate::plugin::adapters`]), so the pipeline has
//! one semantics whatever the source: order by priority, fail closed on error.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;

use crate::call::CallInfo;
use crate::content::Content;
use crate::outcome::{CallRecord, Outcome};
use crate::pipeline::execute::ExecNext;
use crate::pipeline::post_execute::PostNext;
use crate::pipeline::pre_execute::PreNext;

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
#[derive(Clone, Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("trapped: {0}")]
    Trapped(String),
    #[error("timed out after {0} ms")]
    TimedOut(u64),
    /// The call's signal fired while the policy ran (cancellation, deadline).
    #[error("interrupted: {0:?}")]
    Interrupted(crate::call::Interrupt),
    #[error("returned an unacceptable answer: {0}")]
    Invalid(String),
    #[error("{0}")]
    Failed(String),
}

/// A listener on the pre-execute waterfall.
#[async_trait]
pub trait PreExecuteHook: Send + Sync {
    /// Decide; `next.run()` runs the listeners after this one.
    async fn pre_execute(&self, call: &CallInfo, next: PreNext)
    -> Result<PreDecision, PolicyError>;
}

/// A wrapper on the execute waterfall.
#[async_trait]
pub trait ExecuteAroundHook: Send + Sync {
    /// Run the call, usually by `next.run(deadline)`.
    async fn around_execute(&self, call: &CallInfo, next: ExecNext)
    -> Result<Outcome, PolicyError>;
}

/// A listener on the post-execute waterfall.
#[async_trait]
pub trait PostExecuteHook: Send + Sync {
    async fn post_execute(
        &self,
        call: &CallInfo,
        result: &Outcome,
        next: PostNext,
    ) -> Result<PostDecision, PolicyError>;
}

/// A guard: `Some(reason)` denies. There is no allow.
#[async_trait]
pub trait Guard: Send + Sync {
    async fn check(&self, call: &CallInfo) -> Result<Option<String>, PolicyError>;
}

/// Adjusts the content of final results (only the content).
#[async_trait]
pub trait Finalizer: Send + Sync {
    async fn finalize_content(
        &self,
        call: &CallInfo,
        result: &Outcome,
    ) -> Result<Option<Vec<Content>>, PolicyError>;
}

/// Sees every frozen record. Cannot change it.
#[async_trait]
pub trait ResultObserver: Send + Sync {
    async fn on_result(&self, call: &CallInfo, record: &CallRecord) -> Result<(), PolicyError>;
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
            calls: AtomicU64::new(0),
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
