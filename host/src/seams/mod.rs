//! The capability seams a component may import: what a request may do under
//! the plugin's grant, and the host side of the seam's WIT interface.
//!
//! * [`process`]: the `shell` and `subprocess` seams, every spawn sandboxed;
//! * [`kv`]: a small key-value store per plugin and agent scope;
//! * [`jobs`]: background shell jobs, in a host-wide job table;
//! * [`terminals`]: interactive programs on pseudo-terminals of their own,
//!   in a host-wide table, their screens rendered;
//! * [`files`]: whole-file writes by the host, never into protected paths
//!   (`files`), and batched whole-file reads of the preopened grants
//!   (`bulk-read`);
//! * [`search`]: web search through the configured provider, the request
//!   made by the host under the plugin's egress (linked for every
//!   component, like `wasi:http`: each search is decided when it is made);
//! * [`lsp`]: questions to the language servers the host runs, about
//!   files in the preopened grants;
//! * [`skills`]: the skills of `[skills]`, read-only;
//! * [`questions`]: questions for the user, through the call's approver;
//! * [`history`]: the calling client's own calls, from the audit record;
//! * [`model`]: the models of `[models]` a plugin is granted, asked by the
//!   host with their keys, under the models' egress and the client's
//!   token budget;
//! * [`http`]: outgoing `wasi:http` requests, under the plugin's egress (a
//!   WASI interface, linked with WASI, not a `toolgate:plugin` seam);
//! * the file system itself: WASI preopens of exactly the granted
//!   directories (see [`crate::grants`]).
//!
//! # A seam is one unit
//!
//! As a wasmtime-wasi capability (`WasiClocksCtx` + `WasiClocksView`) or a
//! Spin factor, each seam's module holds all of it:
//!
//! * **its grant**: a [`Seam`] says which interface it is, whether a
//!   [`Grants`] covers it, and the grant line that would;
//! * **its state**, at the lifetime it needs: host-wide in [`HostSeams`]
//!   (the kv store, the job table: they outlive reloads), per plugin in
//!   [`PluginSeams`] (its namespace of those), per instance in
//!   [`StoreSeams`] (the `bulk-read` batches);
//! * **its host side**: the WIT `Host` impls on the seam's own *view* of a
//!   store (`kv::KvView`, `process::Requester`, `jobs::JobsView`,
//!   `files::FilesView`), built from the [`SeamCtx`] a store lends —
//!   never on the whole store, so a seam reaches nothing it was not given;
//! * **its `add_to_linker`**, through that view.
//!
//! [`all`] is the one list: the loader checks each imported seam's grant
//! against it, the contract reads the seam names from it, the linkers link
//! every seam from it. Adding a seam is: its module here (the four parts
//! above), one line in [`all`], and — if it keeps state — a field in the
//! struct of that lifetime below. A seam that needs a grant no existing
//! key gives adds the key to `GrantsConfig` (`config.rs`, documented in
//! docs/operators/sandbox.md) and its resolved form to [`Grants`] (`grants.rs`).
//! See docs/layout.md, "Adding a seam".
//!
//! Dependencies point one way: seams import the grants, the bindings and
//! the domain; `plugin` imports seams (its store implements [`SeamHost`]),
//! never the reverse.

pub mod files;
pub mod history;
pub mod http;
pub mod jobs;
pub mod kv;
pub mod lsp;
pub mod model;
pub mod process;
pub mod questions;
pub mod search;
pub mod skills;
pub mod terminals;

use std::sync::Arc;

use wasmtime::component::{Linker, ResourceTable};

use crate::call::{CallInfo, CallSignal};
use crate::grants::{Capability, Grants};

/// One seam: a `toolgate:plugin` interface a component may import, and
/// what it takes to be allowed to.
pub struct Seam<T: 'static> {
    /// The interface, without package and version (`kv`, `shell`, …).
    pub interface: &'static str,
    /// None of its functions waits: a component importing it may still
    /// take the synchronous path.
    pub sync: bool,
    /// `Ok` when `grants` covers the seam; else the line that would,
    /// under `[plugins.NAME.grants]`.
    pub granted: fn(&Grants) -> Result<(), &'static str>,
    /// What importing it reaches for, for the no-escalation check on
    /// update (`lifecycle::footprint`): an update that newly imports the
    /// seam needs the configuration to grant this.
    pub capability: Capability,
    /// Link its host functions (contract 0.2) through the seam's view.
    pub link: fn(&mut Linker<T>) -> wasmtime::Result<()>,
}

/// Every seam. The one place a seam is registered.
pub fn all<T: SeamHost>() -> [Seam<T>; 13] {
    [
        process::shell_seam(),
        process::subprocess_seam(),
        kv::seam(),
        jobs::seam(),
        terminals::seam(),
        search::seam(),
        lsp::seam(),
        skills::seam(),
        questions::seam(),
        history::seam(),
        model::seam(),
        files::files(),
        files::bulk_read(),
    ]
}

/// The seam named `interface`, if it is one.
pub fn find<T: SeamHost>(interface: &str) -> Option<Seam<T>> {
    all().into_iter().find(|s| s.interface == interface)
}

/// Link every seam (`sync_only`: only those that never wait, for the
/// synchronous path's linker).
pub fn add_to_linker<T: SeamHost>(linker: &mut Linker<T>, sync_only: bool) -> wasmtime::Result<()> {
    if !sync_only {
        process::add_types_to_linker(linker)?;
    }
    for seam in all::<T>() {
        if seam.sync || !sync_only {
            (seam.link)(linker)?;
        }
    }
    Ok(())
}

/// What a store lends the seams for one host call: each seam builds its
/// view from it and takes only what it needs.
pub struct SeamCtx<'a> {
    /// The plugin's name (for messages and logs).
    pub plugin: &'a Arc<str>,
    pub grants: &'a Grants,
    /// The plugin's share of host-wide seam state.
    pub shared: &'a PluginSeams,
    /// This instance's seam state.
    pub state: &'a mut StoreSeams,
    /// The store's resource table (for handles a seam gives out).
    pub table: &'a mut ResourceTable,
    /// The call being served, if any (its scope namespaces kv and jobs).
    pub call: Option<&'a CallInfo>,
    /// The call's signal (a spawned process dies with it).
    pub signal: Option<&'a CallSignal>,
    /// What features attach to the call (the egress question a spawn's
    /// proxy asks, …; see [`crate::call::Extensions`]).
    pub extensions: &'a crate::call::Extensions,
    /// The instance's egress (its `wasi:http` requests', attributed to the
    /// call being served): host requests made for a seam go through it.
    pub egress: &'a Arc<crate::egress::component::ComponentEgress>,
}

impl SeamCtx<'_> {
    /// The agent scope of the call being served (`""` outside a call).
    pub fn scope(&self) -> &str {
        self.call.map_or("", |c| c.agent_scope.as_str())
    }
}

/// A store the seams can be linked into: it lends a [`SeamCtx`].
pub trait SeamHost: Send + 'static {
    fn seams(&mut self) -> SeamCtx<'_>;
}

/// Records one host event: its kind (the audit record's `kind`) and fields.
pub type HostEventSink = Arc<dyn Fn(&'static str, serde_json::Value) + Send + Sync>;

/// Host-wide seam state: one per host, kept across reloads.
#[derive(Clone, Default)]
pub struct HostSeams {
    /// The `kv` seam's store.
    pub kv: Arc<kv::KvStore>,
    /// The `jobs` seam's table: every background job; dropping the last
    /// handle (with the host) kills them all.
    pub jobs: Arc<jobs::JobTable>,
    /// The `terminals` seam's table: every terminal; dropping the last
    /// handle (with the host) closes them all.
    pub terminals: Arc<terminals::TerminalTable>,
    /// Where egress connections are recorded besides the log: set once,
    /// when the host keeps an audit record.
    pub egress_record: Arc<std::sync::OnceLock<crate::egress::proxy::RecordSink>>,
    /// Where host events that are not calls (a bridged tool withheld or
    /// accepted) are recorded: set once, when the host keeps an audit
    /// record.
    pub host_events: Arc<std::sync::OnceLock<HostEventSink>>,
    /// The `web-search` seam's provider: set once at start, when
    /// `[web_search]` names one.
    pub search: search::SearchSlot,
    /// The `lsp` seam's language servers: set once at start.
    pub lsp: lsp::LspSlot,
    /// The `questions` seam's wait (`[questions] timeout_ms`), kept with
    /// the configuration.
    pub questions_timeout_ms: Arc<std::sync::atomic::AtomicU64>,
    /// The `history` seam's record: set once, when the host keeps an
    /// audit record.
    pub history: Arc<std::sync::OnceLock<crate::history::Source>>,
    /// The `model` seam's models: set once at start, when `[models]`
    /// names one.
    pub models: model::ModelsSlot,
}

impl HostSeams {
    /// The share of `plugin`, granted `grants`: only what it is granted.
    pub fn for_plugin(&self, plugin: &Arc<str>, grants: &Grants) -> PluginSeams {
        PluginSeams {
            kv: (kv::seam::<NoStore>().granted)(grants)
                .is_ok()
                .then(|| match &grants.kv_read {
                    Some(other) => self.kv.read_only(other.clone()),
                    None => self.kv.space(plugin.clone()),
                }),
            jobs: (jobs::seam::<NoStore>().granted)(grants)
                .is_ok()
                .then(|| self.jobs.space(plugin.clone())),
            terminals: (terminals::seam::<NoStore>().granted)(grants)
                .is_ok()
                .then(|| self.terminals.space(plugin.clone())),
            egress_record: self.egress_record.clone(),
            search: self.search.clone(),
            lsp: self.lsp.clone(),
            questions_timeout_ms: self.questions_timeout_ms.clone(),
            history: self.history.clone(),
            models: self.models.clone(),
        }
    }
}

/// One plugin's share of the host-wide state, shared by its instances.
#[derive(Clone, Default)]
pub struct PluginSeams {
    /// Its namespace of the kv store, if granted.
    pub kv: Option<kv::KvSpace>,
    /// Its view of the job table, if granted the shell.
    pub jobs: Option<jobs::JobSpace>,
    /// Its view of the terminal table, if granted the shell.
    pub terminals: Option<terminals::TerminalSpace>,
    /// The host's egress record sink (see [`HostSeams::egress_record`]).
    pub egress_record: Arc<std::sync::OnceLock<crate::egress::proxy::RecordSink>>,
    /// The web search provider (see [`HostSeams::search`]).
    pub search: search::SearchSlot,
    /// The language servers (see [`HostSeams::lsp`]).
    pub lsp: lsp::LspSlot,
    /// See [`HostSeams::questions_timeout_ms`].
    pub questions_timeout_ms: Arc<std::sync::atomic::AtomicU64>,
    /// See [`HostSeams::history`].
    pub history: Arc<std::sync::OnceLock<crate::history::Source>>,
    /// See [`HostSeams::models`].
    pub models: model::ModelsSlot,
}

/// One instance's seam state.
#[derive(Default)]
pub struct StoreSeams {
    /// `bulk-read` batches held or still reading.
    pub reads: files::ReadSlots,
}

/// A store type for reading a seam's descriptor where no store is at hand
/// (its `link` is never called).
pub struct NoStore;

impl SeamHost for NoStore {
    fn seams(&mut self) -> SeamCtx<'_> {
        unreachable!("NoStore is never linked")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The list names each seam once, and its grant check refuses the
    /// default (empty) grant with a line to add.
    #[test]
    fn every_seam_is_listed_once_and_denied_by_default() {
        let seams = all::<NoStore>();
        let mut names: Vec<&str> = seams.iter().map(|s| s.interface).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), seams.len(), "{names:?}");
        for s in &seams {
            if s.interface == "web-search" {
                // Like `wasi:http`: linked for all, each request decided by
                // the plugin's egress (no grant: refused, naming the rule).
                assert!((s.granted)(&Grants::default()).is_ok());
                continue;
            }
            let line = (s.granted)(&Grants::default()).expect_err(s.interface);
            assert!(line.contains('='), "{}: {line}", s.interface);
        }
        assert!(find::<NoStore>("kv").is_some_and(|s| s.sync));
        assert!(find::<NoStore>("log").is_none());
    }
}
