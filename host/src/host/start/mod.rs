//! The host's start: every optional feature opens what it needs from one
//! [`StartContext`] and leaves what it made in the [`Wiring`].
//!
//! [`crate::ToolgateBuilder::build`] does the part every host has — the
//! state directory opened once, the configuration read, the replica's id,
//! the engine — and then iterates over [`FEATURES`] three times: `open`
//! (before the lifecycle exists: stores, the record, the approval queue,
//! Code Mode's tool), `attach` (the lifecycle exists: the bridge, the
//! egress record's sink) and `started` (the host answers calls: the
//! record's reload events). A feature is one file here and one line in
//! [`FEATURES`]; it reads only its own configuration section and what an
//! earlier feature left in the wiring, so adding one changes nothing in
//! the builder (see `docs/layout.md`, "Adding a feature that opens
//! something at start").
//!
//! The order of [`FEATURES`] is the order of dependencies: the stores
//! before the approval queue that keeps its requests in one of them.

mod approval;
mod audit;
mod bridge;
mod codemode;
mod delegation;
mod lsp;
mod search;
mod store;

use std::path::Path;
use std::sync::Arc;

use futures::future::BoxFuture;

use crate::HostConfig;
use crate::budgets::Budgets;
use crate::error::HostError;
use crate::lifecycle::Lifecycle;
use crate::pipeline::Approver;
use crate::plugin::Runtime;
use crate::tool::ToolEntry;

/// What every feature may read at the start.
pub(crate) struct StartContext<'a> {
    /// The configuration in force (the file's, with the builder's own
    /// settings applied).
    pub config: &'a HostConfig,
    /// The engine, with its state directory ([`Runtime::state`]).
    pub runtime: &'a Arc<Runtime>,
    /// The state directory, opened and checked once (`None`: the host
    /// keeps nothing on disk).
    pub state: Option<&'a Path>,
    /// This replica's id (job ids, audit records, the approval queue).
    pub replica_id: &'a Arc<str>,
    pub budgets: Budgets,
    /// The directory calls run in.
    pub workdir: &'a Path,
    /// What the embedder asked for beside the configuration.
    pub asked: &'a Asked,
}

/// The builder's switches that choose features beside the configuration.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Asked {
    /// A record even when `[audit]` does not ask for one (the CLI's
    /// `serve` and `run`).
    pub audit_by_default: bool,
    /// No record whatever the configuration says.
    pub without_audit: bool,
    /// The approval queue even when `[approval] mode` is not `queue`.
    pub approval_queue: bool,
    /// The embedder chose the approver (`--approve allow`, say): the
    /// configuration's `[approval] mode` does not replace it with the queue.
    pub explicit_approver: bool,
}

/// What the features made, for the host and for the features after them.
#[derive(Default)]
pub(crate) struct Wiring {
    /// The audit record, when one is kept.
    pub audit: Option<crate::audit::Audit>,
    /// The `kv` seam's storage (an embedder's, or the engine `[state]`
    /// names).
    pub kv: Option<Arc<dyn crate::store::KvBackend>>,
    /// The approval queue's storage, when a queue is kept.
    pub approval_store: Option<Arc<dyn crate::approval::store::ApprovalStore>>,
    /// The approval queue.
    pub approvals: Option<Arc<crate::approval::queue::ApprovalQueue>>,
    /// Who decides `ask` (the queue, or the embedder's approver).
    pub approver: Option<Arc<dyn Approver>>,
    /// Tools the host itself provides (Code Mode's `run_code`, the
    /// sub-agent tools).
    pub tools: Vec<Arc<ToolEntry>>,
    /// Where the host's own tools (`run_code`, `subagent`) find the host
    /// once it exists: one slot, filled by the builder.
    pub nested: Option<crate::codemode::HostSlot>,
    /// The sub-agent tools' state, when `[models]` names a model.
    pub delegation: Option<Arc<crate::delegation::Delegation>>,
    /// `[models]`, read at start: shared by the family and the `model` seam.
    pub models: Option<Arc<crate::models::Models>>,
}

/// One optional part of the host, opened at its start.
pub(crate) trait Feature: Sync {
    /// Before the lifecycle exists: open stores, files, connections; put
    /// what others need in `wiring`.
    fn open<'a>(
        &'a self,
        _start: &'a StartContext<'a>,
        _wiring: &'a mut Wiring,
    ) -> BoxFuture<'a, Result<(), HostError>> {
        Box::pin(async { Ok(()) })
    }

    /// The lifecycle exists (nothing is loaded yet): connect to it.
    fn attach(
        &self,
        _start: &StartContext<'_>,
        _wiring: &Wiring,
        _lifecycle: &Lifecycle,
    ) -> Result<(), HostError> {
        Ok(())
    }

    /// The host answers calls: start what watches it.
    fn started<'a>(&'a self, _wiring: &'a Wiring, _host: &'a crate::Toolgate) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}

/// Every feature, in the order they open.
pub(crate) const FEATURES: &[&dyn Feature] = &[
    &store::Stores,
    &audit::Record,
    &approval::Queue,
    &codemode::CodeMode,
    &delegation::Delegation,
    &search::WebSearch,
    &lsp::LanguageServers,
    &bridge::McpBridge,
];
