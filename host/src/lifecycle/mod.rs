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
//! first use, which may take seconds. With background loading on
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

pub mod footprint;
pub mod scan;
pub mod watch;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::broadcast;

use crate::config::{HostConfig, PluginConfig};
use crate::error::HostError;
use crate::pipeline::PipelineSettings;
use crate::plugin::cache::CompileCache;
use crate::plugin::grants::{Authority, resolve_grants};
use crate::plugin::manifest::DEFAULT_PRIORITY;
use crate::plugin::{
    ComponentPlugin, InstanceMode, LoadError, LoadSettings, Loaded, LoadedTool, Manifest, Origin,
    PluginSource, Runtime, builtin, loader,
};
use crate::policy::Role;
use crate::registry::scopes::{self, ScopeRules};
use crate::registry::{
    self, Cost, Generation, NativePolicies, Placed, PluginState, PluginStatus, Registry,
};
use crate::seams::jobs::JobTable;
use crate::seams::kv::KvStore;
use footprint::{Consent, Footprint};
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
pub(crate) struct Lifecycle {
    pub runtime: Arc<Runtime>,
    pub enforcement: Enforcement,
    pub settings: PipelineSettings,
    pub sources: Sources,
    pub registry: ArcSwap<Registry>,
    pub kv: Arc<KvStore>,
    /// The `jobs` seam's table: every background job; dropping it (with
    /// the host) kills them all.
    pub jobs: Arc<JobTable>,
    /// External MCP servers' tools, merged into the global layer of every
    /// generation (set once, right after construction).
    pub bridge: std::sync::OnceLock<crate::bridge::Bridge>,
    /// Held while a registry is stored, so that publishing a bridged
    /// listing (which starts from the registry in force) never stores over
    /// a reload's newer one.
    swap: Mutex<()>,
    state: tokio::sync::Mutex<State>,
    /// Plugins being loaded right now (for `PluginState::Loading`).
    loading: Mutex<BTreeSet<Key>>,
    generations: std::sync::atomic::AtomicU64,
    events: broadcast::Sender<Arc<ReloadEvent>>,
    /// `false` while plugin files deferred at start are loading (see
    /// [`Lifecycle::start`]).
    pub settled: tokio::sync::watch::Sender<bool>,
}

/// The candidates of a directory, and the problems of its entries.
type Found = (Vec<(Key, Candidate)>, Vec<LoadError>);

/// One layer being assembled: what serves, its problems, and what blocks it.
type LayerParts = (Vec<Placed>, Vec<LoadError>, Vec<LoadError>);

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

/// What serves for a plugin in the next generation.
enum Decision {
    Serve {
        serving: Arc<Serving>,
        /// Loaded by this reload (not kept from an earlier generation).
        fresh: bool,
        /// The update refused while this version keeps serving.
        refused: Option<Refusal>,
    },
    /// Nothing serves.
    Down(Refusal),
    /// A new file still being written: nothing serves yet.
    Pending,
    /// Left out of a start's first pass (it must compile); why, and
    /// whether it may be a policy.
    Deferred(LoadError),
}

impl Lifecycle {
    pub fn new(
        runtime: Arc<Runtime>,
        enforcement: Enforcement,
        settings: PipelineSettings,
        sources: Sources,
        config: HostConfig,
    ) -> Lifecycle {
        let placeholder = registry::assemble(0, Vec::new(), &NativePolicies::default(), Vec::new());
        Lifecycle {
            runtime,
            enforcement,
            settings,
            sources,
            registry: ArcSwap::from_pointee(Registry::global_only(placeholder, Vec::new())),
            kv: Arc::default(),
            jobs: Arc::default(),
            bridge: std::sync::OnceLock::new(),
            swap: Mutex::default(),
            state: tokio::sync::Mutex::new(State {
                config: Arc::new(config),
                ..State::default()
            }),
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

    /// Subscribe to reload events.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<ReloadEvent>> {
        self.events.subscribe()
    }

    /// The configuration in force.
    pub async fn config(&self) -> Arc<HostConfig> {
        self.state.lock().await.config.clone()
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
    pub async fn watched(&self) -> (Vec<PathBuf>, Option<PathBuf>) {
        let config = self.config().await;
        let mut dirs = self.sources.plugin_dirs.clone();
        for scope in config.scopes.values() {
            dirs.extend(scope.plugin_dirs.iter().map(|d| scope_dir(&config, d)));
        }
        (
            dirs,
            self.sources.config_file.as_ref().map(|c| c.path.clone()),
        )
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
    async fn pass(&self, initial: bool, defer: bool) -> Result<(Arc<Registry>, usize), HostError> {
        let mut state = self.state.lock().await;
        let mut problems: Vec<LoadError> = Vec::new();
        let mut config_problem = None;
        // The configuration: read again (a file that does not parse keeps
        // the previous configuration in force).
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
                    state.config = Arc::new(c);
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
        let authority = self.authority(&config);
        let number = self
            .generations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;

        // Every layer's candidates, and the settings of each.
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
            match self.candidates(dir, "", &state) {
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
        layers.push((String::new(), global));
        for (name, scope) in &config.scopes {
            let mut own = Vec::new();
            for d in &scope.plugin_dirs {
                let dir = scope_dir(&config, d);
                match self.candidates(&dir, name, &state) {
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
                Origin::Builtin => false,
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

        // Decide every plugin, loading in parallel what must be loaded.
        let mut jobs = Vec::new();
        let mut cache_grants: Vec<(PathBuf, String)> = Vec::new();
        let mut key_grants: Vec<(PathBuf, String)> = Vec::new();
        {
            let mut loading = self.loading.lock().unwrap_or_else(|p| p.into_inner());
            for (_, layer) in &layers {
                for (key, candidate) in layer {
                    if matches!(candidate, Candidate::Source(..)) {
                        loading.insert(key.clone());
                    }
                }
            }
        }
        for (_, layer) in layers.iter_mut() {
            for (key, candidate) in layer.drain(..) {
                let plugin_config = plugin_config(&config, &key).cloned();
                if plugin_config.as_ref().and_then(|c| c.enabled) == Some(false) {
                    continue;
                }
                let settings = self.load_settings(&key, &config, &authority, &candidate, &state);
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
                let prev = state.serving.get(&key).cloned();
                let refusal = state.refused.get(&key).cloned();
                let baseline = state.baselines.get(&key).cloned();
                jobs.push((
                    key,
                    candidate,
                    settings,
                    plugin_config,
                    prev,
                    refusal,
                    baseline,
                ));
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
        let decisions = futures::future::join_all(jobs.into_iter().map(
            |(key, candidate, settings, plugin_config, prev, refusal, baseline)| async move {
                if defer
                    && settings.is_ok()
                    && let Some(error) = self.deferred(&key, &candidate)
                {
                    self.loading
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&key);
                    return (key, Decision::Deferred(error));
                }
                let d = self
                    .decide(
                        &key,
                        candidate,
                        settings,
                        plugin_config,
                        prev,
                        refusal,
                        baseline,
                        number,
                    )
                    .await;
                self.loading
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&key);
                (key, d)
            },
        ))
        .await;
        let mut decisions: Vec<(Key, Decision)> = decisions;
        if !initial {
            self.refuse_clashes(&mut decisions, &state, number).await;
        }

        // The next state.
        let mut event = ReloadEvent {
            generation: number,
            loaded: Vec::new(),
            removed: Vec::new(),
            refused: Vec::new(),
            config_problem,
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
        for p in &problems {
            warn(p);
        }
        state.serving = serving;
        state.refused = refused;

        let registry = self.assemble(number, &config, &decisions, problems);
        let registry = Arc::new(registry);
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
        Ok((registry, deferred))
    }

    /// Why `candidate` is left out of this pass, if it is: a plugin file
    /// whose code is not in the compile cache. The reason says whether it
    /// may be a policy (then it blocks the generation until it is loaded).
    fn deferred(&self, key: &Key, candidate: &Candidate) -> Option<LoadError> {
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
            .is_some_and(|c| c.has_entry(&self.runtime.engine, &source.bytes));
        if cached {
            return None;
        }
        let tool_only = loader::tool_only(&source.bytes);
        let mut error = LoadError::new(
            &key.qualified(),
            &source.origin,
            if tool_only {
                "is still loading (compiling it: it is not in the compile cache); its tools appear when it is ready"
            } else {
                "is still loading (compiling it: it is not in the compile cache) and may be a policy: calls wait for it"
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

    /// Decide what serves for one plugin.
    #[allow(clippy::too_many_arguments)]
    async fn decide(
        &self,
        key: &Key,
        candidate: Candidate,
        settings: Result<LoadSettings, LoadError>,
        plugin_config: Option<PluginConfig>,
        prev: Option<Arc<Serving>>,
        refusal: Option<Refusal>,
        baseline: Option<Footprint>,
        number: u64,
    ) -> Decision {
        let settings = match settings {
            Ok(s) => s,
            Err(error) => {
                let r = Refusal {
                    stamp: None,
                    settings_config: plugin_config,
                    error,
                    sha256: None,
                };
                return match prev {
                    Some(p) => Decision::Serve {
                        serving: p,
                        fresh: false,
                        refused: Some(r),
                    },
                    None => Decision::Down(r),
                };
            }
        };
        match candidate {
            Candidate::Unchanged => {
                let p = prev.expect("unchanged means serving");
                if same_settings(&p.settings, &settings) {
                    return Decision::Serve {
                        serving: p,
                        fresh: false,
                        refused: None,
                    };
                }
                match self
                    .load(key, p.source.clone(), p.stamp, &settings, number)
                    .await
                {
                    Ok(s) => Decision::Serve {
                        serving: Arc::new(s),
                        fresh: true,
                        refused: None,
                    },
                    Err(error) => Decision::Down(Refusal {
                        stamp: Some(p.stamp),
                        settings_config: plugin_config,
                        sha256: Some(p.sha256.clone()),
                        error,
                    }),
                }
            }
            Candidate::Keep => match prev {
                Some(p) => Decision::Serve {
                    serving: p,
                    fresh: false,
                    refused: refusal,
                },
                None => Decision::Pending,
            },
            Candidate::Failed(error) => {
                let r = Refusal {
                    stamp: None,
                    settings_config: plugin_config,
                    error,
                    sha256: None,
                };
                self.fall_back(key, prev, &settings, r, number).await
            }
            Candidate::Source(source, stamp) => {
                // The same refused file under the same configuration: not
                // tried (nor reported) again.
                if let Some(r) = refusal
                    && r.stamp == Some(stamp)
                    && r.settings_config == plugin_config
                    && prev
                        .as_ref()
                        .is_none_or(|p| same_settings(&p.settings, &settings))
                {
                    return match prev {
                        Some(p) => Decision::Serve {
                            serving: p,
                            fresh: false,
                            refused: Some(r),
                        },
                        None => Decision::Down(r),
                    };
                }
                let sha256 = source.sha256();
                let origin = source.origin.clone();
                let refuse = |error: LoadError| Refusal {
                    stamp: Some(stamp),
                    settings_config: plugin_config.clone(),
                    sha256: Some(sha256.clone()),
                    error,
                };
                let loaded = match self.load(key, source, stamp, &settings, number).await {
                    Ok(s) => s,
                    Err(e) => {
                        return self
                            .fall_back(key, prev, &settings, refuse(e), number)
                            .await;
                    }
                };
                // Built-ins ship with the binary: only files are updates.
                let is_update = (prev.is_some() || baseline.is_some()) && origin != Origin::Builtin;
                if is_update {
                    if let Some(rejected) = rejected_tools(&loaded.notes) {
                        let e = LoadError::new(&key.qualified(), &origin, rejected);
                        return self
                            .fall_back(key, prev, &settings, refuse(e), number)
                            .await;
                    }
                    if let Some(before) = &baseline {
                        let consent = Consent {
                            grants: &settings.grants,
                            config: plugin_config.as_ref(),
                            pinned: plugin_config
                                .as_ref()
                                .and_then(|c| c.sha256.as_deref())
                                .is_some_and(|pin| pin.eq_ignore_ascii_case(&sha256)),
                            table: &key.table(),
                        };
                        let now = Footprint::of(&loaded.plugin, &loaded.source.manifest);
                        if let Some(why) = footprint::escalation(before, &now, &consent) {
                            let e = LoadError::new(
                                &key.qualified(),
                                &origin,
                                format!(
                                    "its update asks for more than the version it replaces: {why}"
                                ),
                            );
                            return self
                                .fall_back(key, prev, &settings, refuse(e), number)
                                .await;
                        }
                    }
                }
                Decision::Serve {
                    serving: Arc::new(loaded),
                    fresh: true,
                    refused: None,
                }
            }
        }
    }

    /// An update was refused: the previous version keeps serving, under
    /// the settings in force (instantiated again if they changed).
    async fn fall_back(
        &self,
        key: &Key,
        prev: Option<Arc<Serving>>,
        settings: &LoadSettings,
        mut refusal: Refusal,
        number: u64,
    ) -> Decision {
        let Some(p) = prev else {
            return Decision::Down(refusal);
        };
        if same_settings(&p.settings, settings) {
            refusal.error.may_be_policy = false;
            return Decision::Serve {
                serving: p,
                fresh: false,
                refused: Some(refusal),
            };
        }
        match self
            .load(key, p.source.clone(), p.stamp, settings, number)
            .await
        {
            Ok(s) => {
                refusal.error.may_be_policy = false;
                Decision::Serve {
                    serving: Arc::new(s),
                    fresh: true,
                    refused: Some(refusal),
                }
            }
            Err(e) => {
                refusal.error.message = format!(
                    "{}; and the version that served does not load under the new configuration either: {}",
                    refusal.error.message, e.message
                );
                refusal.error.may_be_policy |= e.may_be_policy;
                Decision::Down(refusal)
            }
        }
    }

    /// Load one version.
    async fn load(
        &self,
        key: &Key,
        source: PluginSource,
        stamp: Stamp,
        settings: &LoadSettings,
        number: u64,
    ) -> Result<Serving, LoadError> {
        let sha256 = source.sha256();
        let qualified = key.qualified();
        let fix = |mut e: LoadError| {
            if !key.scope.is_empty() {
                e.message = e.message.replace(
                    &format!("[plugins.{qualified}"),
                    &format!("[{}", key.path()),
                );
            }
            e
        };
        let loaded: Loaded = loader::load(&self.runtime, source.clone(), settings)
            .await
            .map_err(fix)?;
        Ok(Serving {
            stamp,
            sha256,
            settings: settings.clone(),
            plugin: loaded.plugin,
            tools: loaded.tools,
            notes: loaded.problems.into_iter().map(fix).collect(),
            generation: number,
            load_us: loaded.load_time.as_micros() as u64,
            source,
        })
    }

    /// On a reload, a new version that claims a tool name another plugin
    /// of its layer serves is refused (the name stays with the plugin that
    /// had it); at start, a later plugin overrides an earlier one.
    async fn refuse_clashes(&self, decisions: &mut [(Key, Decision)], state: &State, number: u64) {
        let mut providers: BTreeMap<(String, String), Vec<Key>> = BTreeMap::new();
        for (key, d) in decisions.iter() {
            if let Decision::Serve { serving, .. } = d {
                for t in &serving.tools {
                    providers
                        .entry((key.scope.clone(), t.def.name.clone()))
                        .or_default()
                        .push(key.clone());
                }
            }
        }
        for (key, d) in decisions.iter_mut() {
            let Decision::Serve {
                serving,
                fresh: true,
                ..
            } = d
            else {
                continue;
            };
            let prev = state.serving.get(key);
            let had = |name: &str| prev.is_some_and(|p| p.tools.iter().any(|t| t.def.name == name));
            let clash: Vec<String> = serving
                .tools
                .iter()
                .map(|t| t.def.name.clone())
                .filter(|name| !had(name))
                .filter(|name| {
                    providers
                        .get(&(key.scope.clone(), name.clone()))
                        .is_some_and(|p| p.len() > 1)
                })
                .collect();
            if clash.is_empty() {
                continue;
            }
            let others: Vec<String> = clash
                .iter()
                .flat_map(|name| {
                    providers[&(key.scope.clone(), name.clone())]
                        .iter()
                        .filter(|k| *k != key)
                        .map(move |k| format!("`{name}` of `{}`", k.qualified()))
                })
                .collect();
            let error = LoadError::new(
                &key.qualified(),
                &serving.source.origin,
                format!(
                    "its update adds tools whose names another plugin serves ({}); rename them, or remove the other plugin first",
                    others.join(", ")
                ),
            );
            let refusal = Refusal {
                stamp: Some(serving.stamp),
                settings_config: None,
                sha256: Some(serving.sha256.clone()),
                error,
            };
            let settings = serving.settings.clone();
            *d = self
                .fall_back(
                    key,
                    state.serving.get(key).cloned(),
                    &settings,
                    refusal,
                    number,
                )
                .await;
        }
    }

    /// Resolve what one plugin is granted and how it runs.
    fn load_settings(
        &self,
        key: &Key,
        config: &HostConfig,
        authority: &Authority,
        candidate: &Candidate,
        state: &State,
    ) -> Result<LoadSettings, LoadError> {
        let plugin_config = plugin_config(config, key);
        let origin_path = match candidate {
            Candidate::Source(s, _) => s.origin.clone(),
            Candidate::Failed(_) => Origin::Builtin,
            _ => state
                .serving
                .get(key)
                .map(|s| s.source.origin.clone())
                .unwrap_or(Origin::Builtin),
        };
        let manifest_instances = match candidate {
            Candidate::Source(s, _) => s.manifest.instances,
            _ => state
                .serving
                .get(key)
                .and_then(|s| s.source.manifest.instances),
        };
        let (grants_config, grant_source) = match plugin_config.and_then(|c| c.grants.clone()) {
            Some(g) => (
                Some(g),
                format!("{}: [{}.grants]", config.origin(), key.path()),
            ),
            None => match origin_path {
                Origin::Builtin if key.scope.is_empty() => (
                    builtin::default_grants(&key.name, &self.sources.workdir),
                    "built-in default".to_string(),
                ),
                _ => (
                    None,
                    format!("none (no [{}.grants] in the configuration)", key.path()),
                ),
            },
        };
        let mut grants = resolve_grants(
            grants_config,
            grant_source,
            &self.sources.workdir,
            &self.enforcement,
            authority,
        )
        .map_err(|message| LoadError::new(&key.qualified(), &origin_path, message))?;
        if let Some(c) = plugin_config {
            grants
                .env
                .extend(c.vars.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        let mode = plugin_config
            .and_then(|c| c.instances)
            .or(manifest_instances)
            .unwrap_or_default();
        Ok(LoadSettings {
            grants: Arc::new(grants),
            mode,
            limits: self.settings.limits,
            budgets: self.settings.budgets,
            kv: self.kv.clone(),
            jobs: self.jobs.clone(),
            sha256: plugin_config.and_then(|c| c.sha256.clone()),
            max_idle: if mode == InstanceMode::Fresh { 0 } else { 16 },
            tool_timeouts: config
                .tools
                .iter()
                .filter_map(|(name, t)| t.timeout_ms.map(|ms| (name.clone(), ms)))
                .collect(),
        })
    }

    /// Everything the host reads as authority (see [`Authority`]).
    pub(crate) fn authority(&self, config: &HostConfig) -> Authority {
        let mut a = Authority::default();
        // The configuration holds credentials (MCP servers' `env`,
        // headers): secret, not only protected.
        if let Some(path) = &config.source {
            a.add_secret(path, "the host's configuration");
        }
        if let Some(file) = &self.sources.config_file {
            a.add_secret(&file.path, "the host's configuration");
        }
        for (path, what) in &self.sources.extra_authority {
            a.add(path, what.clone());
        }
        for (path, what) in &self.sources.extra_secrets {
            a.add_secret(path, what.clone());
        }
        for (name, server) in &config.mcp.servers {
            if let Some(file) = &server.bearer_token_file {
                a.add_secret(
                    file,
                    format!("the bearer token file of MCP server `{name}`"),
                );
            }
        }
        let mut dirs = self.sources.plugin_dirs.clone();
        for scope in config.scopes.values() {
            dirs.extend(scope.plugin_dirs.iter().map(|d| scope_dir(config, d)));
        }
        for dir in &dirs {
            a.add(dir, "a plugin directory (components and manifests)");
            // A component or manifest may be a symlink to a file elsewhere:
            // that file is read as a plugin too.
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                let plugin_file = path.extension().is_some_and(|e| e == "wasm" || e == "toml");
                if plugin_file && entry.file_type().is_ok_and(|t| t.is_symlink()) {
                    a.add(
                        &path,
                        format!("a plugin file linked from {}", dir.display()),
                    );
                }
            }
        }
        // Every place a cache or the state could be on *any* start, in use
        // now or not: a grant that reaches an unused one today could plant
        // something there for a start that uses it.
        for dir in self
            .runtime
            .options
            .cache_dir
            .clone()
            .into_iter()
            .chain(CompileCache::candidate_dirs())
        {
            a.add(dir, "a compile cache (native code the host runs)");
        }
        for dir in self
            .runtime
            .options
            .state_dir
            .clone()
            .into_iter()
            .chain(crate::state::candidate_dirs())
        {
            // Hidden, not only read-only: it holds the compile cache's key
            // (which signs native code) and the server's token.
            a.add_secret(
                dir,
                "a state directory of the host (the compile cache's key, the serve token, the journal of protected paths)",
            );
        }
        // The audit record and its key, wherever configured: a grant that
        // could write them could rewrite the record (or sign a forged one).
        for (path, what) in [
            (&config.audit.path, "the audit record"),
            (&config.audit.signing_key, "the audit record's signing key"),
        ] {
            if let Some(path) = path {
                a.add_secret(path, what);
            }
        }
        a.set_journal(self.runtime.state.as_ref().map(|s| s.journal()));
        if let Ok(exe) = std::env::current_exe() {
            a.add(exe, "the host's executable");
        }
        a
    }

    /// The registry of the decisions: every layer's generation, every
    /// scope's view, every plugin's status.
    fn assemble(
        &self,
        number: u64,
        config: &HostConfig,
        decisions: &[(Key, Decision)],
        mut problems: Vec<LoadError>,
    ) -> Registry {
        // Places in the chains: the operator's, else what the manifest
        // proposes — within limits for plugin files (see `manifest_floors`).
        let floors = manifest_floors(decisions);
        let mut statuses = Vec::new();
        let mut layers: BTreeMap<String, LayerParts> = BTreeMap::new();
        layers.entry(String::new()).or_default();
        for name in config.scopes.keys() {
            layers.entry(name.clone()).or_default();
        }
        for (key, d) in decisions {
            let layer = layers.entry(key.scope.clone()).or_default();
            let pc = plugin_config(config, key);
            match d {
                Decision::Serve {
                    serving: s,
                    refused,
                    ..
                } => {
                    let (priorities, notes) =
                        priorities(&s.plugin, &s.source.manifest, pc, &floors);
                    layer.1.extend(notes);
                    layer.1.extend(s.notes.iter().cloned());
                    if let Some(r) = refused {
                        let mut e = r.error.clone();
                        e.may_be_policy = false;
                        e.message = format!(
                            "{} — the update was refused; the version loaded in generation {} keeps serving",
                            e.message, s.generation
                        );
                        layer.1.push(e);
                    }
                    layer.0.push(Placed {
                        loaded: Loaded {
                            plugin: s.plugin.clone(),
                            tools: s.tools.clone(),
                            problems: Vec::new(),
                            load_time: Duration::from_micros(s.load_us),
                        },
                        priorities,
                    });
                    statuses.push(PluginStatus {
                        scope: key.scope.clone(),
                        name: key.name.clone(),
                        origin: s.source.origin.to_string(),
                        state: PluginState::Serving,
                        generation: Some(s.generation),
                        sha256: Some(s.sha256.clone()),
                        refused: refused.as_ref().map(|r| r.error.message.clone()),
                        refused_sha256: refused.as_ref().and_then(|r| r.sha256.clone()),
                        cost: Cost {
                            component_bytes: s.source.bytes.len() as u64,
                            load_us: s.load_us,
                            idle_instances: 0,
                            memory_mb: s.settings.grants.memory_bytes >> 20,
                        },
                        plugin: Some(s.plugin.clone()),
                    });
                }
                Decision::Down(r) => {
                    layer.1.push(r.error.clone());
                    if r.error.may_be_policy && !pc.is_some_and(|c| c.optional) {
                        layer.2.push(r.error.clone());
                    }
                    statuses.push(PluginStatus {
                        scope: key.scope.clone(),
                        name: key.name.clone(),
                        origin: r.error.origin.clone(),
                        state: PluginState::Refused,
                        generation: None,
                        sha256: None,
                        refused: Some(r.error.message.clone()),
                        refused_sha256: r.sha256.clone(),
                        cost: Cost::default(),
                        plugin: None,
                    });
                }
                Decision::Deferred(e) => {
                    // Even when `optional` (which means: serve without it
                    // if it does not load): while it loads, it may still
                    // be a policy that will serve.
                    if e.may_be_policy {
                        layer.2.push(e.clone());
                    }
                    statuses.push(loading_status(key, e.origin.clone()));
                }
                Decision::Pending => statuses.push(loading_status(key, String::new())),
            }
        }
        let (placed, layer_problems, blocked) = layers.remove("").unwrap_or_default();
        problems.extend(layer_problems);
        let mut global = registry::assemble(number, placed, &self.sources.natives, problems);
        global.blocked = blocked;
        if let Some(bridge) = self.bridge.get() {
            crate::bridge::merge(&mut global, bridge);
        }
        let mut registry = Registry::global_only(global, statuses);
        for (name, scope) in &config.scopes {
            let (placed, layer_problems, blocked) = layers.remove(name).unwrap_or_default();
            let mut own =
                registry::assemble(number, placed, &NativePolicies::default(), layer_problems);
            own.blocked = blocked;
            let rules = ScopeRules::new(scope.allow.as_deref(), &scope.deny)
                .expect("checked when the configuration was read");
            let parent = match name.rsplit_once('/') {
                Some((parent, _)) => registry.view(parent).clone(),
                None => registry.global.clone(),
            };
            let view = scopes::compose(&parent, own, &rules);
            registry.add_scope(name, view);
        }
        registry
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
pub(crate) fn read_config(
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

/// The status of a plugin still loading.
fn loading_status(key: &Key, origin: String) -> PluginStatus {
    PluginStatus {
        scope: key.scope.clone(),
        name: key.name.clone(),
        origin,
        state: PluginState::Loading,
        generation: None,
        sha256: None,
        refused: None,
        refused_sha256: None,
        cost: Cost::default(),
        plugin: None,
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
    out
}

/// Two load settings that load the same plugin the same way.
fn same_settings(a: &LoadSettings, b: &LoadSettings) -> bool {
    *a.grants == *b.grants
        && a.mode == b.mode
        && a.sha256 == b.sha256
        && a.tool_timeouts == b.tool_timeouts
        && a.max_idle == b.max_idle
}

/// Tools of an update that the host did not register (a schema the
/// compiler rejects, a bad name): on an update, that refuses it.
fn rejected_tools(notes: &[LoadError]) -> Option<String> {
    let rejected: Vec<&str> = notes
        .iter()
        .filter(|n| n.message.contains(loader::TOOL_NOT_REGISTERED))
        .map(|n| n.message.as_str())
        .collect();
    (!rejected.is_empty()).then(|| {
        format!(
            "its update has tools the host does not accept: {}",
            rejected.join("; ")
        )
    })
}

/// For each policy role, the lowest priority a plugin *file's own manifest*
/// may propose: just after the built-in policies of that role. A third
/// party's manifest may say where it would like to go, but a place outside
/// the built-in wrappers and guards (before the timeout wrapper, say) is
/// the operator's to give, in `[plugins.NAME]`.
fn manifest_floors(decisions: &[(Key, Decision)]) -> BTreeMap<Role, i32> {
    let mut floors = BTreeMap::new();
    for (_, d) in decisions {
        let Decision::Serve { serving: s, .. } = d else {
            continue;
        };
        if s.plugin.origin != Origin::Builtin {
            continue;
        }
        for role in &s.plugin.roles {
            let p = s
                .source
                .manifest
                .priority(*role)
                .unwrap_or(DEFAULT_PRIORITY);
            let floor = floors.entry(*role).or_insert(p + 1);
            *floor = (*floor).max(p + 1);
        }
    }
    floors
}

/// The priority of each role of `plugin`: the operator's, else its
/// manifest's (raised to the floor for plugin files, with a note).
fn priorities(
    plugin: &ComponentPlugin,
    manifest: &Manifest,
    config: Option<&PluginConfig>,
    floors: &BTreeMap<Role, i32>,
) -> (BTreeMap<Role, i32>, Vec<LoadError>) {
    let mut out = BTreeMap::new();
    let mut notes = Vec::new();
    for role in Role::ALL {
        let from_config =
            config.and_then(|c| c.priorities.get(role.as_str()).copied().or(c.priority));
        if let Some(p) = from_config {
            out.insert(role, p);
            continue;
        }
        let Some(mut p) = manifest.priority(role) else {
            continue;
        };
        if plugin.origin != Origin::Builtin
            && plugin.roles.contains(&role)
            && let Some(floor) = floors.get(&role)
            && p < *floor
        {
            notes.push(LoadError::note(
                &plugin.name,
                &plugin.origin,
                format!(
                    "its manifest asks for priority {p} in the {role} chain, before the built-in policies; placed at {floor} instead (only the operator can place it earlier: `priority` under [plugins.{}])",
                    plugin.name
                ),
            ));
            p = *floor;
        }
        out.insert(role, p);
    }
    (out, notes)
}
