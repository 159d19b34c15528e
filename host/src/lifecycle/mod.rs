//! The plugin lifecycle: loading every layer of plugins into a new
//! generation, again and again, without ever taking a working plugin down.
//!
//! A reload (at start, on [`crate::Toolgate::reload`], or when the
//! [`watch`]er sees a plugin directory or the configuration change) reads
//! the configuration file again, lists every layer's plugin files, and
//! decides, per plugin, what serves in the next generation:
//!
//! * **Unchanged** (same [`scan::Stamp`], same resolved settings): the
//!   loaded version is kept as it is — not read, not compiled, not
//!   instantiated again. Only what changed is loaded, in parallel, off the
//!   call path, each under its load budget (compilation goes through the
//!   content-keyed compile cache, so a version seen before is not compiled
//!   again either).
//! * **Changed and good**: the new version serves — if it does not ask for
//!   more than the version it replaces ([`footprint`]), and if none of its
//!   new tool names clashes with another plugin's of the same layer.
//! * **Changed and bad** — not a component, a contract this host does not
//!   speak, a tool whose schema the compiler rejects, imports its grant
//!   does not cover, a digest that is not the configuration's `sha256`, an
//!   escalation, a clash: the update is *refused*, reported (log,
//!   [`crate::registry::PluginStatus`], a [`ReloadEvent`] that `toolgate
//!   serve` turns into an MCP log notification), and the previous version
//!   keeps serving. A refused file is not tried again until it or the
//!   plugin's configuration changes.
//! * **Being written** (it changed while it was read): the previous
//!   version keeps serving, and the file is read at the next reload.
//! * **Removed**: gone from the next generation.
//!
//! Settings follow the configuration: when a plugin's grant or settings
//! change, its serving version is instantiated again under the new ones
//! (from the bytes it was loaded from); if it no longer loads under them —
//! a grant revoked that it imports — it stops serving, because the
//! operator's configuration is the authority, never a previous version.
//! A plugin that does not load and has nothing serving behaves as at start:
//! if it might be a policy and is not `optional`, the generation refuses
//! every call.
//!
//! Then the generation is assembled — the global layer, and each
//! configured scope's view ([`crate::registry::scopes`]) — and swapped in
//! atomically: calls in flight keep the generation they started with.
//! Reloads are serialized; one asked for while another runs waits for it.
//!
//! # Start: built-ins first, plugin files that must compile in the background
//!
//! The built-ins are precompiled ([`crate::plugin::precompiled`]): loading them
//! compiles nothing. A plugin *file* not in the compile cache compiles on
//! first use, which may take seconds; so does one whose entry does not
//! verify under this host's key (tampered with, or written by a host with
//! another state directory), and it is deferred the same way. With background loading on
//! (`toolgate serve`: [`crate::ToolgateBuilder::background_loading`]), the
//! first generation serves without such files ([`Lifecycle::start`]) and a
//! second pass loads them and publishes the complete generation
//! ([`Lifecycle::finish_start`]), logging how long each compile took. A
//! call is never run without a policy that is still loading: a file whose
//! exports name any role but `tool` ([`loader::tool_only`]; one that does
//! not parse counts as a policy) is listed in the first generation's
//! `blocked` (which refuses every call), and calls arriving meanwhile wait
//! for the second pass ([`crate::Toolgate`] waits for
//! [`Lifecycle::settled`] when its generation is blocked or lacks the
//! tool called) instead of being refused. A tool-only file holds nothing
//! back: its tools appear with the second generation (a `tools/list`
//! client is told the list changed).
//!
//! Restart-only settings: `max_parallel_tool_calls`, `policy_timeout_ms`,
//! `[limits]`, `sandbox` and `sandbox_waive` are read at start; a reload
//! that sees them changed says so and keeps the values it started with.

mod authority;
mod decide;
pub mod footprint;
pub mod ledger;
mod oci;
pub mod scan;
pub mod watch;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use tokio::sync::broadcast;

use crate::HostConfig;
use crate::error::HostError;
use crate::pipeline::PipelineSettings;
use crate::plugin::PluginConfig;
use crate::plugin::{
    ComponentPlugin, LoadError, LoadSettings, LoadedTool, Origin, PluginSource, Runtime, builtin,
    loader,
};
use crate::registry::layers::{self, Entry, EntryState};
use crate::registry::{self, Cost, Generation, NativePolicies, Registry};
use crate::seams::HostSeams;
use decide::{Decision, Plan};
use footprint::Footprint;
use scan::{Read, Stamp};
use toolgate_sandbox::Enforcement;

/// How many reload events a slow subscriber may fall behind before it
/// misses some (it is told how many, and can read the current state).
pub const EVENT_BUFFER: usize = 64;

/// The configuration file a host reads at start and at every reload.
#[derive(Clone, Debug)]
pub struct ConfigFile {
    pub path: PathBuf,
    /// Must exist at start (`--config`); else an absent file is the
    /// default configuration (`./toolgate.toml`).
    pub required: bool,
}

/// What one reload did, for subscribers ([`crate::Toolgate::subscribe`]).
#[derive(Clone, Debug)]
pub struct ReloadEvent {
    /// The generation it produced.
    pub generation: u64,
    /// Plugins (`name`, or `name@scope`) whose new version serves now.
    pub loaded: Vec<String>,
    /// Plugins gone from this generation.
    pub removed: Vec<String>,
    /// Updates refused by this reload (each names the plugin and why); the
    /// previous version, if there was one, keeps serving.
    pub refused: Vec<LoadError>,
    /// The configuration file could not be used; the previous one stays.
    pub config_problem: Option<String>,
}

/// A plugin by layer and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    /// `""`: the global layer; else a configured scope.
    pub scope: String,
    pub name: String,
}

impl Key {
    /// The name it runs under: `name`, or `name@scope` for a scope's own.
    pub fn qualified(&self) -> String {
        if self.scope.is_empty() {
            self.name.clone()
        } else {
            format!("{}@{}", self.name, self.scope)
        }
    }

    /// Where its settings are written: `[plugins.NAME]` or
    /// `[scopes."S".plugins.NAME]`.
    fn table(&self) -> String {
        format!("[{}]", self.path())
    }

    /// `plugins.NAME` or `scopes."S".plugins.NAME`.
    fn path(&self) -> String {
        if self.scope.is_empty() {
            format!("plugins.{}", self.name)
        } else {
            format!("scopes.\"{}\".plugins.{}", self.scope, self.name)
        }
    }
}

/// A version that serves (or served), with what it was loaded from.
struct Serving {
    source: PluginSource,
    stamp: Stamp,
    sha256: String,
    settings: LoadSettings,
    plugin: Arc<ComponentPlugin>,
    tools: Vec<LoadedTool>,
    notes: Vec<LoadError>,
    generation: u64,
    load_us: u64,
}

/// An attempt that was refused, remembered so that the same file under
/// the same configuration is not tried (and reported) again.
#[derive(Clone)]
struct Refusal {
    stamp: Option<Stamp>,
    settings_config: Option<PluginConfig>,
    error: LoadError,
    sha256: Option<String>,
}

/// What the lifecycle remembers between reloads.
#[derive(Default)]
struct State {
    config: Arc<HostConfig>,
    serving: BTreeMap<Key, Arc<Serving>>,
    refused: BTreeMap<Key, Refusal>,
    /// The footprint of the last version accepted per plugin: outlives
    /// the plugin's removal.
    baselines: BTreeMap<Key, Footprint>,
    /// The names whose last verified version held a policy role (see
    /// [`ledger`]).
    ledger: ledger::Ledger,
}

/// What the host was built with, for loading.
pub(crate) struct Sources {
    pub builtins: bool,
    pub plugin_dirs: Vec<PathBuf>,
    pub workdir: PathBuf,
    pub config_file: Option<ConfigFile>,
    /// Authority paths the embedder named (see `ToolgateBuilder::authority_path`).
    pub extra_authority: Vec<(PathBuf, String)>,
    /// Secret authority the embedder named (see `ToolgateBuilder::secret_path`).
    pub extra_secrets: Vec<(PathBuf, String)>,
    /// `ToolgateBuilder::code_mode`: wins over the file at every reload.
    pub code_mode: Option<bool>,
    pub natives: NativePolicies,
    /// Load plugin files that must be compiled in a second pass, after the
    /// first generation serves (see the module documentation).
    pub background: bool,
}

/// The loader of generations: owns the registry and the lifecycle state.
///
/// A reload runs in three phases, each with its own type: [`Scan`] (the
/// configuration and every layer's candidates), [`Plan`] (each plugin's
/// settings and what it had), [`Decision`] (what serves), then the commit
/// (the next state, the registry assembled by [`registry::layers`], the
/// swap, the event). Its state is private: the host asks through methods.
pub(crate) struct Lifecycle {
    runtime: Arc<Runtime>,
    enforcement: Enforcement,
    settings: PipelineSettings,
    sources: Sources,
    registry: ArcSwap<Registry>,
    /// The seams' host-wide state (the kv store, the job table: dropping
    /// it with the host kills every background job).
    seams: HostSeams,
    /// External MCP servers' tools, merged into the global layer of every
    /// generation (set once, right after construction).
    bridge: std::sync::OnceLock<crate::bridge::Bridge>,
    /// Held while a registry is stored, so that publishing a bridged
    /// listing (which starts from the registry in force) never stores over
    /// a reload's newer one.
    swap: Mutex<()>,
    state: tokio::sync::Mutex<State>,
    /// The configuration in force, readable without `state`'s lock (a
    /// reload holds that lock while it compiles: a start's second pass
    /// for seconds). Written where `state.config` is.
    config: ArcSwap<HostConfig>,
    /// The skills of the last reload (see [`crate::skills`]): what plugins
    /// granted `skills = true` were loaded with, and `serve`'s prompts.
    skills: ArcSwap<crate::skills::Catalog>,
    /// Plugins being loaded right now (for `PluginState::Loading`).
    loading: Mutex<BTreeSet<Key>>,
    generations: std::sync::atomic::AtomicU64,
    events: broadcast::Sender<Arc<ReloadEvent>>,
    /// `false` while plugin files deferred at start are loading (see
    /// [`Lifecycle::start`]).
    settled: tokio::sync::watch::Sender<bool>,
}

/// The candidates of a directory, and the problems of its entries.
type Found = (Vec<(Key, Candidate)>, Vec<LoadError>);

/// A plugin found for the next generation, before deciding.
// One per plugin per reload, moved once: not worth a box.
#[allow(clippy::large_enum_variant)]
enum Candidate {
    /// Its stamp is the serving version's.
    Unchanged,
    /// New bytes to load.
    Source(PluginSource, Stamp),
    /// Being written, or its directory cannot be read: keep what serves.
    Keep,
    /// It cannot be a plugin.
    Failed(LoadError),
}

/// What the scan phase found: the configuration in force, every layer's
/// candidates, and the problems so far.
struct Scan {
    config: Arc<HostConfig>,
    /// The configuration file could not be used (the previous one stays).
    config_problem: Option<String>,
    /// Per layer (`""` first, then each scope), its candidates.
    layers: Vec<(String, Vec<(Key, Candidate)>)>,
    problems: Vec<LoadError>,
    /// OCI sources the local store lacks: pulled before the plan (their
    /// candidates meanwhile say they are not pulled).
    pulls: Vec<(Key, oci::Pull)>,
}

impl Refusal {
    /// The refusal as the registry reads it.
    fn view(&self) -> layers::Refused<'_> {
        layers::Refused {
            error: &self.error,
            sha256: self.sha256.as_deref(),
        }
    }
}

impl Lifecycle {
    pub fn new(
        runtime: Arc<Runtime>,
        enforcement: Enforcement,
        settings: PipelineSettings,
        sources: Sources,
        config: HostConfig,
        kv: crate::seams::kv::KvStore,
        replica_id: Arc<str>,
    ) -> Lifecycle {
        let placeholder = registry::assemble(0, Vec::new(), &NativePolicies::default(), Vec::new());
        let runtime_state = runtime.state.as_ref().map(|s| s.path().to_path_buf());
        let config = Arc::new(config);
        Lifecycle {
            runtime,
            enforcement,
            settings,
            sources,
            registry: ArcSwap::from_pointee(Registry::global_only(placeholder, Vec::new())),
            seams: HostSeams {
                kv: Arc::new(kv),
                jobs: Arc::new(crate::seams::jobs::JobTable::for_replica(
                    replica_id.clone(),
                )),
                terminals: Arc::new(crate::seams::terminals::TerminalTable::for_replica(
                    replica_id,
                )),
                questions_timeout_ms: Arc::new(config.questions.timeout_ms().into()),
                ..HostSeams::default()
            },
            bridge: std::sync::OnceLock::new(),
            swap: Mutex::default(),
            state: tokio::sync::Mutex::new(State {
                config: config.clone(),
                ledger: ledger::Ledger::load(runtime_state.as_deref()),
                ..State::default()
            }),
            config: ArcSwap::new(config),
            skills: Default::default(),
            loading: Mutex::default(),
            generations: std::sync::atomic::AtomicU64::new(0),
            events: broadcast::channel(EVENT_BUFFER).0,
            settled: tokio::sync::watch::Sender::new(true),
        }
    }

    /// The first generation. With background loading, plugin files that
    /// would compile are left out of it (those that may be policies block
    /// it); then `true` is returned, [`settled`](Self::settled) is `false`
    /// and [`finish_start`](Self::finish_start) must run.
    pub async fn start(&self) -> Result<bool, HostError> {
        let (_, deferred) = self.pass(true, self.sources.background).await?;
        if deferred > 0 {
            self.settled.send_replace(false);
        }
        Ok(deferred > 0)
    }

    /// The second pass of a start: load what [`start`](Self::start) left
    /// out, publish the complete generation, and settle (also when the
    /// pass fails: the generation in force then still blocks every call
    /// if a policy is missing).
    pub async fn finish_start(&self) {
        let started = std::time::Instant::now();
        match self.pass(true, false).await {
            Ok(_) => tracing::info!(
                elapsed_ms = started.elapsed().as_millis() as u64,
                "the plugins left out of the first generation are loaded"
            ),
            Err(e) => tracing::warn!(
                error = %e,
                "loading the plugins left out of the first generation failed; the generation in force stays"
            ),
        }
        self.settled.send_replace(true);
    }

    /// The registry in force.
    pub fn registry(&self) -> Arc<Registry> {
        self.registry.load_full()
    }

    /// The generation a call from `scope` sees now.
    pub fn generation_for(&self, scope: &str) -> Arc<Generation> {
        self.registry.load().view(scope).clone()
    }

    /// The global layer's generation now.
    pub fn global(&self) -> Arc<Generation> {
        self.registry.load().global.clone()
    }

    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    pub fn settings(&self) -> &PipelineSettings {
        &self.settings
    }

    /// The seams' host-wide state.
    pub fn seams(&self) -> &HostSeams {
        &self.seams
    }

    /// Set the bridge (once, right after construction).
    pub fn set_bridge(&self, bridge: crate::bridge::Bridge) {
        let _ = self.bridge.set(bridge);
    }

    pub fn bridge(&self) -> Option<&crate::bridge::Bridge> {
        self.bridge.get()
    }

    /// Whether the plugin files left out of a start's first pass are
    /// loaded (see the module documentation), as a receiver to wait on.
    pub fn settled(&self) -> tokio::sync::watch::Receiver<bool> {
        self.settled.subscribe()
    }

    /// Subscribe to reload events.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<ReloadEvent>> {
        self.events.subscribe()
    }

    /// The configuration in force (never waits for a reload).
    pub async fn config(&self) -> Arc<HostConfig> {
        self.config.load_full()
    }

    /// The skills of the last reload.
    pub fn skills(&self) -> Arc<crate::skills::Catalog> {
        self.skills.load_full()
    }

    /// Scans the skill directories again; a catalog that changed is
    /// stored and said (its problems logged once per change).
    fn scan_skills(&self, config: &HostConfig) -> Arc<crate::skills::Catalog> {
        let journal = self.runtime.state.as_ref().map(|s| s.journal());
        let catalog =
            crate::skills::scan(&config.skills, &self.sources.workdir, journal.as_deref());
        let old = self.skills.load();
        if **old == catalog {
            return old.clone();
        }
        let names: Vec<&str> = catalog.skills().map(|s| s.name.as_str()).collect();
        tracing::info!(target: "toolgate::skills", skills = ?names, "skills loaded");
        for p in catalog.problems() {
            tracing::warn!(target: "toolgate::skills", "{p}");
        }
        let catalog = Arc::new(catalog);
        self.skills.store(catalog.clone());
        catalog
    }

    /// Plugins being loaded right now.
    pub fn loading(&self) -> BTreeSet<Key> {
        self.loading
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Every directory a reload reads (global and scopes), and the
    /// configuration file: what the watcher watches.
    pub async fn watched(&self) -> watch::WatchTargets {
        let config = self.config().await;
        let mut dirs = self.sources.plugin_dirs.clone();
        for scope in config.scopes.values() {
            dirs.extend(scope.plugin_dirs.iter().map(|d| scope_dir(&config, d)));
        }
        let mut skill_dirs: Vec<PathBuf> =
            crate::skills::roots(&config.skills, &self.sources.workdir)
                .into_iter()
                .map(|r| r.dir)
                .collect();
        skill_dirs.extend(self.skills().skills().map(|s| s.dir.clone()));
        watch::WatchTargets {
            plugin_dirs: dirs,
            config: self.sources.config_file.as_ref().map(|c| c.path.clone()),
            skill_dirs,
        }
    }

    /// Publish the bridge's current tools in the global layer at once (an
    /// MCP server's listing changed): a new generation with every plugin
    /// and policy as it is. Scope views follow at the next reload.
    pub fn publish_bridged(&self) {
        let Some(bridge) = self.bridge.get() else {
            return;
        };
        let _swap = self.swap.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.registry.load_full();
        let g = &old.global;
        let p = &g.policies;
        let mut global = Generation {
            number: self
                .generations
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                + 1,
            tools: g.tools.clone(),
            policies: registry::Policies {
                pre_execute: p.pre_execute.clone(),
                execute_around: p.execute_around.clone(),
                post_execute: p.post_execute.clone(),
                guards: p.guards.clone(),
                finalizers: p.finalizers.clone(),
                observers: p.observers.clone(),
            },
            plugins: g.plugins.clone(),
            problems: g.problems.clone(),
            blocked: g.blocked.clone(),
            tools_digest: g.tools_digest,
        };
        crate::bridge::merge(&mut global, bridge);
        self.registry.store(Arc::new(old.with_global(global)));
    }

    /// Load a generation and swap it in.
    pub async fn reload(&self, initial: bool) -> Result<Arc<Registry>, HostError> {
        self.pass(initial, false).await.map(|(r, _)| r)
    }

    /// Load a generation and swap it in; `defer`: leave out plugin files
    /// not in the compile cache. Returns how many were left out.
    ///
    /// The phases: [`scan`](Self::scan) → [`plan`](Self::plan) →
    /// [`decide_all`](Self::decide_all) (and, on a reload, clashes) →
    /// [`commit`](Self::commit).
    async fn pass(&self, initial: bool, defer: bool) -> Result<(Arc<Registry>, usize), HostError> {
        let mut state = self.state.lock().await;
        let mut scan = self.scan(&mut state, initial)?;
        self.pull_missing(&mut scan).await;
        let number = self
            .generations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let plans = self.plan(&mut scan, &state);
        let mut decisions = self.decide_all(plans, defer, number).await;
        if !initial {
            self.refuse_clashes(&mut decisions, &state, number).await;
        }
        Ok(self.commit(&mut state, scan, decisions, number))
    }

    /// Scan: read the configuration again (a file that does not parse
    /// keeps the previous configuration in force) and list every layer's
    /// candidates. At start, an unreadable directory or configuration
    /// naming no plugin is an error; on a reload, a problem reported.
    fn scan(&self, state: &mut State, initial: bool) -> Result<Scan, HostError> {
        let mut problems: Vec<LoadError> = Vec::new();
        let mut config_problem = None;
        if !initial && let Some(file) = &self.sources.config_file {
            let journal = self.runtime.state.as_ref().map(|s| s.journal());
            match read_config(file, journal.as_deref()) {
                Ok(Some(mut c)) => {
                    if let Some(on) = self.sources.code_mode {
                        c.code_mode = on;
                    }
                    for key in restart_only(&state.config, &c) {
                        problems.push(config_note(
                            &c,
                            format!("`{key}` changed; it takes effect at the next start"),
                        ));
                    }
                    if c.access != state.config.access {
                        self.settings
                            .access
                            .store(Arc::new(crate::identity::Access::new(&c.access)));
                    }
                    state.config = Arc::new(c);
                    self.config.store(state.config.clone());
                    self.seams.questions_timeout_ms.store(
                        state.config.questions.timeout_ms(),
                        std::sync::atomic::Ordering::Relaxed,
                    );
                }
                Ok(None) => {}
                Err(e) => {
                    let message =
                        format!("{e}; the configuration in force stays (from before the change)");
                    problems.push(config_note(&state.config, message.clone()));
                    config_problem = Some(message);
                }
            }
        }
        let config = state.config.clone();
        // Every layer's candidates.
        let mut layers: Vec<(String, Vec<(Key, Candidate)>)> = Vec::new();
        let mut global = Vec::new();
        let mut unreadable: Vec<PathBuf> = Vec::new();
        if self.sources.builtins {
            let (sources, p) = builtin::sources();
            problems.extend(p);
            for s in sources {
                let key = Key {
                    scope: String::new(),
                    name: s.name.clone(),
                };
                let candidate = match state.serving.get(&key) {
                    Some(old) if old.stamp == Stamp::Builtin => Candidate::Unchanged,
                    _ => Candidate::Source(s, Stamp::Builtin),
                };
                push(&mut global, key, candidate);
            }
        }
        for dir in &self.sources.plugin_dirs {
            match self.candidates(dir, "", state) {
                Ok((found, p)) => {
                    problems.extend(p);
                    for (k, c) in found {
                        push(&mut global, k, c);
                    }
                }
                Err(e) if initial => {
                    return Err(HostError::PluginDir {
                        path: dir.clone(),
                        message: format!("cannot be read: {e}"),
                    });
                }
                Err(e) => {
                    problems.push(dir_problem(dir, &e));
                    unreadable.push(dir.clone());
                }
            }
        }
        let mut pulls = Vec::new();
        for (name, c) in &config.plugins {
            let Some(source) = &c.source else { continue };
            let key = Key {
                scope: String::new(),
                name: name.clone(),
            };
            if let Some((_, Candidate::Source(file, _))) = global.iter().find(|(k, _)| *k == key)
                && matches!(file.origin, Origin::File(_))
            {
                problems.push(LoadError::note(
                    name,
                    &file.origin,
                    format!(
                        "{} is not loaded: [plugins.{name}] source names {source}",
                        file.origin
                    ),
                ));
            }
            let candidate = self.oci_candidate(&key, source, state, &mut pulls, &config);
            push(&mut global, key, candidate);
        }
        layers.push((String::new(), global));
        for (name, scope) in &config.scopes {
            let mut own = Vec::new();
            for d in &scope.plugin_dirs {
                let dir = scope_dir(&config, d);
                match self.candidates(&dir, name, state) {
                    Ok((found, p)) => {
                        problems.extend(p);
                        for (k, c) in found {
                            push(&mut own, k, c);
                        }
                    }
                    Err(e) if initial => {
                        return Err(HostError::PluginDir {
                            path: dir.clone(),
                            message: format!(
                                "cannot be read: {e} (named by [scopes.\"{name}\"] plugin_dirs in {})",
                                config.origin()
                            ),
                        });
                    }
                    Err(e) => {
                        problems.push(dir_problem(&dir, &e));
                        unreadable.push(dir.clone());
                    }
                }
            }
            layers.push((name.clone(), own));
        }
        // What served from a directory that cannot be read now keeps serving.
        for (key, old) in &state.serving {
            let from_unreadable = match &old.source.origin {
                Origin::File(p) => unreadable.iter().any(|d| p.parent() == Some(d.as_path())),
                Origin::Builtin | Origin::Oci { .. } => false,
            };
            if from_unreadable
                && let Some((_, layer)) = layers.iter_mut().find(|(s, _)| *s == key.scope)
            {
                push(layer, key.clone(), Candidate::Keep);
            }
        }

        // Configuration naming no plugin: an error at start (a typo would
        // silently drop a grant or a setting), reported on a reload.
        let unknown = unknown_plugins(&config, &layers);
        if !unknown.is_empty() && initial {
            return Err(HostError::Config(crate::config::ConfigError::Invalid {
                path: config.origin(),
                problems: unknown,
            }));
        }
        problems.extend(unknown.into_iter().map(|m| config_note(&config, m)));
        Ok(Scan {
            config,
            config_problem,
            layers,
            problems,
            pulls,
        })
    }

    /// Plan: resolve each candidate's settings (its grants first: the
    /// compile cache must lie outside all of them before the first
    /// component is read from it) and gather what the decision reads.
    fn plan(&self, scan: &mut Scan, state: &State) -> Vec<Plan> {
        let config = scan.config.clone();
        let authority = self.authority(&config);
        let skills = self.scan_skills(&config);
        let mut plans = Vec::new();
        let mut cache_grants: Vec<(PathBuf, String)> = Vec::new();
        let mut key_grants: Vec<(PathBuf, String)> = Vec::new();
        {
            let mut loading = self.loading.lock().unwrap_or_else(|p| p.into_inner());
            for (_, layer) in &scan.layers {
                for (key, candidate) in layer {
                    if matches!(candidate, Candidate::Source(..)) {
                        loading.insert(key.clone());
                    }
                }
            }
        }
        for (_, layer) in scan.layers.iter_mut() {
            for (key, candidate) in layer.drain(..) {
                let plugin_config = plugin_config(&config, &key).cloned();
                // A built-in that is off unless the configuration turns it
                // on (`builtin::off_by_default`).
                let builtin = match &candidate {
                    Candidate::Source(_, Stamp::Builtin) => true,
                    Candidate::Unchanged => state
                        .serving
                        .get(&key)
                        .is_some_and(|s| s.stamp == Stamp::Builtin),
                    _ => false,
                };
                let enabled = plugin_config.as_ref().and_then(|c| c.enabled).unwrap_or(
                    !(builtin && key.scope.is_empty() && builtin::off_by_default(&key.name)),
                );
                if !enabled {
                    continue;
                }
                let settings =
                    self.load_settings(&key, &config, &authority, &skills, &candidate, state);
                if let Ok(s) = &settings {
                    let g = &s.grants;
                    let whose = format!("plugin `{}`", key.qualified());
                    cache_grants.extend(
                        g.fs.iter()
                            .map(|f| f.host.clone())
                            .chain(g.sandbox.read_only.iter().cloned())
                            .chain(g.sandbox.read_write.iter().cloned())
                            .map(|p| (p, whose.clone())),
                    );
                    // The key (in the hidden state directory) is out of a
                    // sandbox's sight unless the plugin may run without
                    // hidden paths; components' own opens are always
                    // checked against it (`grants::check_hidden`).
                    let may_unhide = match &g.sandbox.enforcement {
                        Enforcement::Strict => false,
                        Enforcement::BestEffort => true,
                        Enforcement::Waive(w) => {
                            w.contains(&toolgate_sandbox::Feature::HiddenPaths)
                        }
                    };
                    if may_unhide {
                        key_grants.extend(
                            g.sandbox
                                .read_only
                                .iter()
                                .chain(g.sandbox.read_write.iter())
                                .map(|p| (p.clone(), whose.clone())),
                        );
                    }
                }
                plans.push(Plan {
                    prev: state.serving.get(&key).cloned(),
                    refusal: state.refused.get(&key).cloned(),
                    baseline: state.baselines.get(&key).cloned(),
                    key,
                    candidate,
                    settings,
                    plugin_config,
                });
            }
        }
        // Every grant first: the compile cache must lie outside all of
        // them before the first component is read from it.
        if let Some(cache) = &self.runtime.cache {
            cache.refuse_if_granted(
                cache_grants.iter().map(|(p, w)| (p.as_path(), w.as_str())),
                key_grants.iter().map(|(p, w)| (p.as_path(), w.as_str())),
            );
        }
        plans
    }

    /// Decide every plugin, loading in parallel what must be loaded.
    async fn decide_all(&self, plans: Vec<Plan>, defer: bool, number: u64) -> Vec<(Key, Decision)> {
        futures::future::join_all(plans.into_iter().map(|plan| async move {
            let key = plan.key.clone();
            let decision = if defer
                && plan.settings.is_ok()
                && let Some(error) = self.deferred(
                    &key,
                    &plan.candidate,
                    plan.settings.as_ref().is_ok_and(|s| s.known_policy),
                ) {
                Decision::Deferred(error)
            } else {
                self.decide(plan, number).await
            };
            self.loading
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&key);
            (key, decision)
        }))
        .await
    }

    /// Commit: the next state (what serves, what was refused, the
    /// baselines of what was loaded), the registry assembled and swapped
    /// in, the event sent. Returns the registry and how many plugins were
    /// left out (deferred).
    fn commit(
        &self,
        state: &mut State,
        scan: Scan,
        decisions: Vec<(Key, Decision)>,
        number: u64,
    ) -> (Arc<Registry>, usize) {
        // The next state.
        let mut event = ReloadEvent {
            generation: number,
            loaded: Vec::new(),
            removed: Vec::new(),
            refused: Vec::new(),
            config_problem: scan.config_problem,
        };
        let mut serving = BTreeMap::new();
        let mut refused = BTreeMap::new();
        for (key, d) in &decisions {
            let r = match d {
                Decision::Serve {
                    serving: s,
                    fresh,
                    refused: r,
                } => {
                    serving.insert(key.clone(), s.clone());
                    if *fresh {
                        event.loaded.push(key.qualified());
                        state
                            .baselines
                            .insert(key.clone(), Footprint::of(&s.plugin, &s.source.manifest));
                        for n in &s.notes {
                            warn(n);
                        }
                    }
                    r.as_ref()
                }
                Decision::Down(r) => Some(r),
                Decision::Pending | Decision::Deferred(_) => None,
            };
            if let Some(r) = r {
                let new = state
                    .refused
                    .get(key)
                    .is_none_or(|old| old.error != r.error || old.stamp != r.stamp);
                if new {
                    warn(&r.error);
                    event.refused.push(r.error.clone());
                }
                refused.insert(key.clone(), r.clone());
            }
        }
        for key in state.serving.keys() {
            if !serving.contains_key(key) {
                event.removed.push(key.qualified());
            }
        }
        for p in &scan.problems {
            warn(p);
        }
        state.serving = serving;
        state.refused = refused;
        let present: BTreeSet<Key> = decisions.iter().map(|(k, _)| k.clone()).collect();
        state.ledger.update(
            state
                .serving
                .iter()
                .map(|(k, s)| (k, s.plugin.roles.iter().copied().collect())),
            &present,
        );

        let registry = Arc::new(self.assemble(number, &scan.config, &decisions, scan.problems));
        {
            let _swap = self.swap.lock().unwrap_or_else(|p| p.into_inner());
            self.registry.store(registry.clone());
        }
        tracing::info!(
            generation = number,
            loaded = ?event.loaded,
            removed = ?event.removed,
            refused = event.refused.len(),
            "generation {number} serves"
        );
        let _ = self.events.send(Arc::new(event));
        let deferred = decisions
            .iter()
            .filter(|(_, d)| matches!(d, Decision::Deferred(_)))
            .count();
        (registry, deferred)
    }

    /// Why `candidate` is left out of this pass, if it is: a plugin file
    /// whose code is not in the compile cache (or is there but does not
    /// verify under this host's key: it would compile too). The reason says whether it
    /// may be a policy (then it blocks the generation until it is loaded).
    fn deferred(&self, key: &Key, candidate: &Candidate, was_policy: bool) -> Option<LoadError> {
        let Candidate::Source(source, _) = candidate else {
            return None;
        };
        if source.origin == Origin::Builtin {
            return None;
        }
        let cached = self
            .runtime
            .cache
            .as_ref()
            .is_some_and(|c| c.has_verified_entry(&self.runtime.engine, &source.bytes));
        if cached {
            return None;
        }
        // Not yet verified: its own bytes cannot lift a name the ledger
        // holds as a policy out of the generation's wait.
        let tool_only = loader::tool_only(&source.bytes) && !was_policy;
        let mut error = LoadError::new(
            &key.qualified(),
            &source.origin,
            if tool_only {
                "is still loading (compiling it: the compile cache holds no entry for it that verifies); its tools appear when it is ready"
            } else {
                "is still loading (compiling it: the compile cache holds no entry for it that verifies) and may be a policy: calls wait for it"
            },
        );
        error.may_be_policy = !tool_only;
        Some(error)
    }

    /// The candidates of one directory of one layer.
    fn candidates(&self, dir: &Path, scope: &str, state: &State) -> std::io::Result<Found> {
        let (found, problems) = scan::list(dir)?;
        let mut out = Vec::new();
        for f in found {
            let key = Key {
                scope: scope.to_string(),
                name: f.name.clone(),
            };
            let candidate = match state.serving.get(&key) {
                Some(old) if old.stamp == f.stamp => Candidate::Unchanged,
                _ => match scan::read(&f) {
                    Read::Source(mut s, stamp) => {
                        s.name = key.qualified();
                        Candidate::Source(s, stamp)
                    }
                    Read::Busy => Candidate::Keep,
                    Read::Failed(e) => Candidate::Failed(e),
                },
            };
            out.push((key, candidate));
        }
        Ok((out, problems))
    }

    /// The registry of the decisions ([`registry::layers`]), the bridge's
    /// tools merged into the global layer.
    fn assemble(
        &self,
        number: u64,
        config: &HostConfig,
        decisions: &[(Key, Decision)],
        problems: Vec<LoadError>,
    ) -> Registry {
        let entries: Vec<Entry<'_>> = decisions
            .iter()
            .map(|(key, d)| Entry {
                scope: &key.scope,
                name: &key.name,
                config: plugin_config(config, key),
                state: match d {
                    Decision::Serve {
                        serving: s,
                        refused,
                        ..
                    } => EntryState::Serving(layers::Serving {
                        plugin: &s.plugin,
                        tools: &s.tools,
                        manifest: &s.source.manifest,
                        notes: &s.notes,
                        generation: s.generation,
                        sha256: &s.sha256,
                        cost: Cost {
                            component_bytes: s.source.bytes.len() as u64,
                            load_us: s.load_us,
                            idle_instances: 0,
                            memory_mb: s.settings.grants.memory_bytes >> 20,
                        },
                        refused: refused.as_ref().map(Refusal::view),
                    }),
                    Decision::Down(r) => EntryState::Down(r.view()),
                    Decision::Deferred(e) => EntryState::Loading(Some(e)),
                    Decision::Pending => EntryState::Loading(None),
                },
            })
            .collect();
        layers::assemble(
            number,
            &config.scopes,
            &entries,
            &self.sources.natives,
            problems,
            |global| {
                if let Some(bridge) = self.bridge.get() {
                    crate::bridge::merge(global, bridge);
                }
            },
        )
    }
}

fn push(layer: &mut Vec<(Key, Candidate)>, key: Key, candidate: Candidate) {
    // A plugin of the same name replaces the earlier one.
    layer.retain(|(k, _)| *k != key);
    layer.push((key, candidate));
}

fn warn(p: &LoadError) {
    tracing::warn!(
        plugin = %crate::plugin::log::escape(&p.plugin),
        origin = %p.origin,
        "{}",
        p.message
    );
}

fn dir_problem(dir: &Path, e: &std::io::Error) -> LoadError {
    LoadError::note(
        "plugin directory",
        &Origin::File(dir.to_path_buf()),
        format!("cannot be read ({e}); the plugins it served keep serving"),
    )
}

fn config_note(config: &HostConfig, message: String) -> LoadError {
    LoadError {
        plugin: "configuration".into(),
        origin: config.origin(),
        message,
        may_be_policy: false,
        ..LoadError::default()
    }
}

/// A scope's plugin directory: relative to the configuration file's
/// directory (the current directory when it came from no file).
pub fn scope_dir(config: &HostConfig, dir: &Path) -> PathBuf {
    if dir.is_absolute() {
        return dir.to_path_buf();
    }
    match config.source.as_ref().and_then(|s| s.parent()) {
        Some(parent) if !parent.as_os_str().is_empty() => parent.join(dir),
        _ => dir.to_path_buf(),
    }
}

/// The `[plugins.NAME]` (or `[scopes."S".plugins.NAME]`) table of a plugin.
fn plugin_config<'a>(config: &'a HostConfig, key: &Key) -> Option<&'a PluginConfig> {
    if key.scope.is_empty() {
        config.plugins.get(&key.name)
    } else {
        config
            .scopes
            .get(&key.scope)
            .and_then(|s| s.plugins.get(&key.name))
    }
}

/// Configuration tables that name no plugin of their layer.
fn unknown_plugins(config: &HostConfig, layers: &[(String, Vec<(Key, Candidate)>)]) -> Vec<String> {
    let mut out = Vec::new();
    let names = |scope: &str| -> Vec<&str> {
        layers
            .iter()
            .filter(|(s, _)| s == scope)
            .flat_map(|(_, l)| l.iter().map(|(k, _)| k.name.as_str()))
            .collect()
    };
    let mut check = |at: String, tables: &BTreeMap<String, PluginConfig>, scope: &str| {
        let known = names(scope);
        for name in tables.keys() {
            if !known.contains(&name.as_str()) {
                out.push(format!(
                    "{at}/{name}: no plugin is named `{name}` (the plugins are: {})",
                    known.join(", ")
                ));
            }
        }
    };
    check("/plugins".into(), &config.plugins, "");
    for (name, scope) in &config.scopes {
        check(format!("/scopes/{name}/plugins"), &scope.plugins, name);
    }
    out
}

/// Read the configuration file; `Ok(None)`: absent and not required
/// (keep what is in force).
/// Read through [`crate::state::read_authority`]: a file that a live
/// sandboxed run could have created is refused, not obeyed.
pub fn read_config(
    file: &ConfigFile,
    journal: Option<&Path>,
) -> Result<Option<HostConfig>, HostError> {
    match crate::state::read_authority(&file.path, journal)? {
        Some(text) => {
            let mut c = HostConfig::parse(&text, &file.path.display().to_string())?;
            c.source = Some(file.path.clone());
            Ok(Some(c))
        }
        None if file.required => Err(crate::config::ConfigError::Read {
            path: file.path.clone(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        }
        .into()),
        None => Ok(None),
    }
}

/// Settings read only at start that differ between `a` and `b`.
fn restart_only(a: &HostConfig, b: &HostConfig) -> Vec<&'static str> {
    let mut out = Vec::new();
    if a.max_parallel_tool_calls != b.max_parallel_tool_calls {
        out.push("max_parallel_tool_calls");
    }
    if a.policy_timeout_ms != b.policy_timeout_ms {
        out.push("policy_timeout_ms");
    }
    if a.limits != b.limits {
        out.push("limits");
    }
    if a.sandbox != b.sandbox {
        out.push("sandbox");
    }
    if a.sandbox_waive != b.sandbox_waive {
        out.push("sandbox_waive");
    }
    if a.mcp != b.mcp {
        out.push("mcp");
    }
    if a.code_mode != b.code_mode || a.run_code != b.run_code {
        out.push("code_mode / run_code");
    }
    if a.serve != b.serve {
        out.push("serve");
    }
    // `serve --http` builds its resource server once; `[[access]]` reloads.
    if a.auth != b.auth {
        out.push("auth");
    }
    out
}
