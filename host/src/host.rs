//! [`Toolgate`]: the host an embedder (or the CLI) builds and calls.
//!
//! ```no_run
//! # async fn demo() -> Result<(), toolgate::HostError> {
//! use toolgate::{Toolgate, ToolCall, TurnOptions};
//! let host = Toolgate::builder().plugin_dir("plugins").build().await?;
//! let records = host
//!     .execute_tool_calls(
//!         vec![ToolCall::new("1", "read", serde_json::json!({"path": "README.md"}))],
//!         &TurnOptions::default(),
//!     )
//!     .await;
//! println!("{}", serde_json::to_string_pretty(&records).unwrap());
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::call::ToolCall;
use crate::codemode;
use crate::config::{HostConfig, SandboxMode};
use crate::error::HostError;
use crate::outcome::CallRecord;
use crate::pipeline::{self, Approver, PipelineSettings};
use crate::plugin::cache::CompileCache;
use crate::plugin::grants::{Authority, enforcement, resolve_grants};
use crate::plugin::manifest::DEFAULT_PRIORITY;
use crate::plugin::{
    InstanceMode, LoadError, LoadSettings, Loaded, PluginSource, Runtime, RuntimeOptions, builtin,
    loader,
};
use crate::policy::{
    ExecuteAroundHook, Finalizer, Guard, PostExecuteHook, PreExecuteHook, ResultObserver, Role,
};
use crate::registry::{self, Generation, Native, NativePolicies, Placed};
use crate::seams::jobs::JobTable;
use crate::seams::kv::KvStore;
use crate::tool::{ModelTool, ToolBody, ToolDefinition, ToolEntry};
use crate::turn::TurnOptions;
use toolgate_sandbox::Enforcement;

/// Default size of the rolling pool of concurrency-safe calls.
pub const DEFAULT_MAX_PARALLEL: usize = 8;

/// Builds a [`Toolgate`].
pub struct ToolgateBuilder {
    runtime: RuntimeOptions,
    config: HostConfig,
    builtins: bool,
    plugin_dirs: Vec<PathBuf>,
    natives: NativePolicies,
    approver: Option<Arc<dyn Approver>>,
    workdir: Option<PathBuf>,
    policy_timeout: Option<Duration>,
    max_parallel: Option<usize>,
    authority: Vec<(PathBuf, String)>,
}

impl Default for ToolgateBuilder {
    fn default() -> Self {
        ToolgateBuilder {
            runtime: RuntimeOptions::default(),
            config: HostConfig::default(),
            builtins: true,
            plugin_dirs: Vec::new(),
            natives: NativePolicies::default(),
            approver: None,
            workdir: None,
            policy_timeout: None,
            max_parallel: None,
            authority: Vec::new(),
        }
    }
}

impl ToolgateBuilder {
    /// Engine settings (epoch tick, pool size, compile cache).
    pub fn runtime_options(mut self, options: RuntimeOptions) -> Self {
        self.runtime = options;
        self
    }

    /// The operator's configuration.
    pub fn config(mut self, config: HostConfig) -> Self {
        self.config = config;
        self
    }

    /// Load the built-in plugins (default: yes).
    pub fn builtin_plugins(mut self, yes: bool) -> Self {
        self.builtins = yes;
        self
    }

    /// Load every `*.wasm` in `dir` (after the built-ins; a plugin of the same
    /// name replaces a built-in, a tool of the same name overrides one).
    pub fn plugin_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.plugin_dirs.push(dir.into());
        self
    }

    /// The directory the built-in plugins are granted (default: the current
    /// directory).
    pub fn workdir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.workdir = Some(dir.into());
        self
    }

    /// A path the host reads as authority besides those it knows by itself
    /// (the configuration file it was given, the plugin directories and
    /// their files, the compile cache, its executable): no grant may reach
    /// it and the sandbox keeps it read-only — or, while it does not exist,
    /// absent. The CLI names its default `./toolgate.toml` this way even
    /// when there is none, so that no command can plant one for the next
    /// start.
    pub fn authority_path(mut self, path: impl Into<PathBuf>, what: impl Into<String>) -> Self {
        self.authority.push((path.into(), what.into()));
        self
    }

    /// Who answers `ask` (default: nobody, so `ask` denies).
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// Budget of one policy invocation (overrides the configuration).
    pub fn policy_timeout(mut self, timeout: Duration) -> Self {
        self.policy_timeout = Some(timeout);
        self
    }

    /// Code Mode (overrides the configuration's `code_mode`): `run_code` is
    /// registered and is the only tool the model sees; a direct call to
    /// any other tool is refused at materialize.
    pub fn code_mode(mut self, on: bool) -> Self {
        self.config.code_mode = on;
        self
    }

    /// Size of the rolling pool (overrides the configuration).
    pub fn max_parallel(mut self, n: usize) -> Self {
        self.max_parallel = Some(n.max(1));
        self
    }

    /// Register a tool implemented in Rust. Its parameters (and output
    /// schema) go through the same compiler as a component's; an invalid
    /// schema is an error here.
    pub fn tool(
        mut self,
        definition: ToolDefinition,
        body: Arc<dyn ToolBody>,
    ) -> Result<Self, HostError> {
        let bad = |what: &str, e: &dyn std::fmt::Display| HostError::Tool {
            tool: definition.name.clone(),
            message: format!("its {what} schema is not accepted: {e}"),
        };
        if !loader::valid_tool_name(&definition.name) {
            return Err(HostError::Tool {
                tool: definition.name.clone(),
                message: "its name must be 1–64 characters of [A-Za-z0-9_-]".into(),
            });
        }
        let parameters = toolgate_schema::Schema::compile_parameters(&definition.parameters)
            .map_err(|e| bad("parameters", &e))?;
        let output = match &definition.output_schema {
            Some(s) => Some(toolgate_schema::Schema::compile(s).map_err(|e| bad("output", &e))?),
            None => None,
        };
        self.natives.tools.push(Arc::new(ToolEntry {
            def: definition,
            parameters,
            output,
            body,
        }));
        Ok(self)
    }

    /// Register a native pre-execute hook.
    pub fn pre_execute(
        mut self,
        name: &str,
        priority: i32,
        hook: impl PreExecuteHook + 'static,
    ) -> Self {
        self.natives
            .pre_execute
            .push(native(name, priority, Arc::new(hook)));
        self
    }

    /// Register a native execute-around hook.
    pub fn execute_around(
        mut self,
        name: &str,
        priority: i32,
        hook: impl ExecuteAroundHook + 'static,
    ) -> Self {
        self.natives
            .execute_around
            .push(native(name, priority, Arc::new(hook)));
        self
    }

    /// Register a native post-execute hook.
    pub fn post_execute(
        mut self,
        name: &str,
        priority: i32,
        hook: impl PostExecuteHook + 'static,
    ) -> Self {
        self.natives
            .post_execute
            .push(native(name, priority, Arc::new(hook)));
        self
    }

    /// Register a native guard.
    pub fn guard(mut self, name: &str, priority: i32, guard: impl Guard + 'static) -> Self {
        self.natives
            .guards
            .push(native(name, priority, Arc::new(guard)));
        self
    }

    /// Register a native finalizer.
    pub fn finalizer(
        mut self,
        name: &str,
        priority: i32,
        finalizer: impl Finalizer + 'static,
    ) -> Self {
        self.natives
            .finalizers
            .push(native(name, priority, Arc::new(finalizer)));
        self
    }

    /// Register a native result observer.
    pub fn observer(
        mut self,
        name: &str,
        priority: i32,
        observer: impl ResultObserver + 'static,
    ) -> Self {
        self.natives
            .observers
            .push(native(name, priority, Arc::new(observer)));
        self
    }

    /// Create the engine and load every plugin. Plugins that fail to load
    /// are reported in [`Toolgate::problems`]; only host-level failures
    /// (engine, unreadable plugin directory) are errors here.
    pub async fn build(self) -> Result<Toolgate, HostError> {
        let mut budgets = self.config.limits.budgets(self.config.policy_timeout_ms);
        if let Some(t) = self.policy_timeout {
            budgets.policy_timeout = t;
        }
        let mut runtime_options = self.runtime;
        runtime_options.guest_memory_bytes = budgets.guest_memory_bytes;
        let runtime = Runtime::new(runtime_options)?;
        let workdir = match self.workdir {
            Some(d) => d,
            None => std::env::current_dir().map_err(|e| HostError::PluginDir {
                path: PathBuf::from("."),
                message: format!("cannot determine the current directory: {e}"),
            })?,
        };
        for dir in &self.plugin_dirs {
            if !dir.is_dir() {
                return Err(HostError::PluginDir {
                    path: dir.clone(),
                    message: "is not a directory (check --plugins)".into(),
                });
            }
        }
        let mut limits = toolgate_schema::Limits::default();
        if let Some(d) = self.config.limits.max_argument_depth {
            limits.max_depth = d;
        }
        if let Some(b) = self.config.limits.max_argument_bytes {
            limits.max_bytes = b;
        }
        let settings = PipelineSettings {
            budgets,
            limits,
            approver: self.approver,
            code_mode: self.config.code_mode,
        };
        // Code Mode: `run_code`, whose calls come back to this host once it
        // exists (a weak reference: the host owns the tool).
        let mut natives = self.natives;
        let nested_slot = codemode::HostSlot::default();
        if self.config.code_mode {
            let limits = codemode::Limits::from(&self.config.run_code);
            let definition = codemode::RunCode::definition(&limits);
            let parameters = toolgate_schema::Schema::compile_parameters(&definition.parameters)
                .expect("run_code's schema compiles");
            natives.tools.push(Arc::new(ToolEntry {
                def: definition,
                parameters,
                output: None,
                body: Arc::new(codemode::RunCode::new(
                    runtime.clone(),
                    limits,
                    nested_slot.clone(),
                )),
            }));
        }
        let max_parallel = self
            .max_parallel
            .or(self.config.max_parallel_tool_calls)
            .unwrap_or(DEFAULT_MAX_PARALLEL);
        let authority = authority(
            &self.config,
            &self.authority,
            &self.plugin_dirs,
            runtime.options.cache_dir.as_deref(),
        );
        let sources = Sources {
            builtins: self.builtins,
            plugin_dirs: self.plugin_dirs,
            workdir,
            config: self.config,
            authority,
        };
        let inner = Arc::new(Inner {
            enforcement: enforcement(&sources.config)?,
            runtime,
            registry: ArcSwap::from_pointee(placeholder()),
            settings,
            max_parallel,
            sources,
            natives,
            tokens: AtomicU64::new(1),
            generations: AtomicU64::new(0),
            kv: Arc::default(),
            jobs: Arc::default(),
        });
        let _ = nested_slot.set(Arc::new(WeakHost(Arc::downgrade(&inner))));
        let host = Toolgate { inner };
        host.load_generation(true).await?;
        Ok(host)
    }
}

/// Everything the host reads as authority (see [`Authority`]).
fn authority(
    config: &HostConfig,
    extra: &[(PathBuf, String)],
    plugin_dirs: &[PathBuf],
    cache_dir: Option<&std::path::Path>,
) -> Authority {
    let mut a = Authority::default();
    if let Some(path) = &config.source {
        a.add(path, "the host's configuration");
    }
    for (path, what) in extra {
        a.add(path, what.clone());
    }
    for dir in plugin_dirs {
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
    for dir in cache_dir
        .map(std::path::Path::to_path_buf)
        .into_iter()
        .chain(CompileCache::default_dir())
    {
        a.add(dir, "the compile cache (native code the host runs)");
    }
    if let Ok(exe) = std::env::current_exe() {
        a.add(exe, "the host's executable");
    }
    a
}

fn native<P: ?Sized>(name: &str, priority: i32, policy: Arc<P>) -> Native<P> {
    Native {
        name: name.to_string(),
        priority,
        policy,
    }
}

fn placeholder() -> Generation {
    registry::assemble(0, Vec::new(), &NativePolicies::default(), Vec::new())
}

struct Sources {
    builtins: bool,
    plugin_dirs: Vec<PathBuf>,
    workdir: PathBuf,
    config: HostConfig,
    authority: Authority,
}

struct Inner {
    runtime: Arc<Runtime>,
    enforcement: Enforcement,
    registry: ArcSwap<Generation>,
    settings: PipelineSettings,
    max_parallel: usize,
    sources: Sources,
    natives: NativePolicies,
    tokens: AtomicU64,
    generations: AtomicU64,
    /// The `kv` seam's store: outlives generations (keyed by plugin name).
    kv: Arc<KvStore>,
    /// The `jobs` seam's table: every background job; dropping it (with
    /// the host) kills them all.
    jobs: Arc<JobTable>,
}

/// The host as `run_code` sees it: a weak reference (the host owns the
/// tool), through which a program's calls come back as turns of their own.
struct WeakHost(std::sync::Weak<Inner>);

#[async_trait::async_trait]
impl codemode::NestedCalls for WeakHost {
    async fn run_batch(
        &self,
        calls: Vec<ToolCall>,
        turn: &TurnOptions,
    ) -> Result<Vec<CallRecord>, String> {
        let inner = self.0.upgrade().ok_or("the host has shut down")?;
        Toolgate { inner }
            .try_execute_tool_calls(calls, turn)
            .await
            .map_err(|e| e.to_string())
    }
}

/// The host: plugins, policies, pipeline and scheduler.
#[derive(Clone)]
pub struct Toolgate {
    inner: Arc<Inner>,
}

impl Toolgate {
    pub fn builder() -> ToolgateBuilder {
        ToolgateBuilder::default()
    }

    /// The generation new calls run against.
    pub fn generation(&self) -> Arc<Generation> {
        self.inner.registry.load_full()
    }

    /// The model-facing list: every tool's projection, or under Code Mode
    /// `run_code` alone, declaring the others.
    pub fn tools(&self) -> Vec<ModelTool> {
        let all = self.generation().model_tools();
        if self.inner.settings.code_mode {
            codemode::signatures::project(&all)
        } else {
            all
        }
    }

    /// Code Mode is on for every turn.
    pub fn code_mode(&self) -> bool {
        self.inner.settings.code_mode
    }

    /// What failed to load in the current generation.
    pub fn problems(&self) -> Vec<LoadError> {
        self.generation().problems.clone()
    }

    /// The engine and linker.
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.inner.runtime
    }

    /// The compile cache, if one was configured (see
    /// [`CompileCache::refusal`] for whether it is in use).
    pub fn compile_cache(&self) -> Option<&CompileCache> {
        self.inner.runtime.cache.as_ref()
    }

    pub fn settings(&self) -> &PipelineSettings {
        &self.inner.settings
    }

    pub fn max_parallel(&self) -> usize {
        self.inner.max_parallel
    }

    pub fn sandbox_mode(&self) -> SandboxMode {
        self.inner.sources.config.sandbox
    }

    pub(crate) fn next_token(&self) -> u64 {
        self.inner.tokens.fetch_add(1, Ordering::Relaxed)
    }

    /// Run one call through the pipeline and commit it (observers notified).
    pub async fn call(&self, call: ToolCall, turn: &TurnOptions) -> CallRecord {
        let generation = self.generation();
        let finished = pipeline::run_call(
            &generation,
            &self.inner.settings,
            call,
            turn,
            self.next_token(),
        )
        .await;
        pipeline::result::notify(
            &generation.policies.observers,
            finished,
            self.inner.settings.policy_timeout(),
        )
        .await
        .record
    }

    /// Kill every background job (the `jobs` seam) and wait, up to 5 s,
    /// until each has ended. Dropping the host kills them too, without
    /// waiting; an embedder that exits right after should call this first.
    pub async fn shutdown(&self) {
        self.inner.jobs.shutdown(Duration::from_secs(5)).await
    }

    /// Background jobs running now, all plugins and scopes.
    pub fn running_jobs(&self) -> usize {
        self.inner.jobs.running()
    }

    /// Load every plugin again and swap the new generation in atomically.
    /// Calls in flight keep the generation they started with. Plugins load
    /// in parallel (compiling off the runtime's threads), each under its
    /// load budget. A plugin that fails to load is reported; if it might be
    /// a policy and the operator did not mark it `optional`, the new
    /// generation refuses every call (fail closed).
    pub async fn reload(&self) -> Result<Arc<Generation>, HostError> {
        self.load_generation(false).await
    }

    /// Load a generation. At start, configuration that names no plugin is
    /// an error (a typo would silently drop a grant or a setting); on a
    /// reload it is reported, and the plugin the file was is gone.
    async fn load_generation(&self, initial: bool) -> Result<Arc<Generation>, HostError> {
        let inner = &self.inner;
        let config = &inner.sources.config;
        let mut problems = Vec::new();
        let mut sources: Vec<PluginSource> = Vec::new();
        if inner.sources.builtins {
            let (s, p) = builtin::sources();
            sources.extend(s);
            problems.extend(p);
        }
        for dir in &inner.sources.plugin_dirs {
            let (s, p) = loader::scan_dir(dir).map_err(|e| HostError::PluginDir {
                path: dir.clone(),
                message: format!("cannot be read: {e}"),
            })?;
            problems.extend(p);
            for source in s {
                // A plugin of the same name replaces the earlier one.
                sources.retain(|old| old.name != source.name);
                sources.push(source);
            }
        }
        // Configuration for a plugin that does not exist is a mistake the
        // operator must hear about (a typo here would silently drop a grant
        // or a policy's settings).
        let unknown: Vec<String> = config
            .plugins
            .keys()
            .filter(|name| {
                !sources.iter().any(|s| &s.name == *name)
                    && !problems.iter().any(|p: &LoadError| &p.plugin == *name)
            })
            .map(|name| {
                format!(
                    "/plugins/{name}: no plugin is named `{name}` (the plugins are: {})",
                    sources
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
            .collect();
        if !unknown.is_empty() && initial {
            return Err(HostError::Config(crate::config::ConfigError::Invalid {
                path: config.origin(),
                problems: unknown,
            }));
        }
        problems.extend(unknown.into_iter().map(|message| LoadError {
            plugin: "configuration".into(),
            origin: config.origin(),
            message,
            may_be_policy: false,
        }));
        // Every grant first: the compile cache must lie outside all of them
        // before the first component is read from it.
        let mut planned = Vec::new();
        for source in sources {
            let plugin_config = config.plugins.get(&source.name);
            if plugin_config.and_then(|c| c.enabled) == Some(false) {
                continue;
            }
            match self.load_settings(&source) {
                Ok(s) => planned.push((source, s)),
                Err(e) => problems.push(e),
            }
        }
        if let Some(cache) = &inner.runtime.cache {
            let granted: Vec<(PathBuf, String)> = planned
                .iter()
                .flat_map(|(source, settings)| {
                    let g = &settings.grants;
                    let whose = format!("plugin `{}`", source.name);
                    g.fs.iter()
                        .map(|f| f.host.clone())
                        .chain(g.sandbox.read_only.iter().cloned())
                        .chain(g.sandbox.read_write.iter().cloned())
                        .map(move |p| (p, whose.clone()))
                })
                .collect();
            cache.refuse_if_granted(granted.iter().map(|(p, w)| (p.as_path(), w.as_str())));
        }
        let loads = planned.into_iter().map(|(source, settings)| {
            let runtime = inner.runtime.clone();
            let manifest = source.manifest.clone();
            async move {
                loader::load(&runtime, source, &settings)
                    .await
                    .map(|loaded| (loaded, manifest))
            }
        });
        let mut loaded = Vec::new();
        for outcome in futures::future::join_all(loads).await {
            match outcome {
                Ok(l) => loaded.push(l),
                Err(e) => problems.push(e),
            }
        }
        // Places in the chains: the operator's, else what the manifest
        // proposes — within limits for plugin files (see `manifest_floors`).
        let floors = manifest_floors(&loaded);
        let mut placed = Vec::new();
        for (loaded, manifest) in loaded {
            let (priorities, notes) = priorities(
                &loaded.plugin,
                &manifest,
                config.plugins.get(&loaded.plugin.name),
                &floors,
            );
            problems.extend(notes);
            placed.push(Placed { loaded, priorities });
        }
        let blocked: Vec<LoadError> = problems
            .iter()
            .filter(|p| {
                p.may_be_policy && !config.plugins.get(&p.plugin).is_some_and(|c| c.optional)
            })
            .filter(|p| !placed.iter().any(|pl| pl.loaded.plugin.name == p.plugin))
            .cloned()
            .collect();
        for p in &problems {
            tracing::warn!(
                plugin = %crate::plugin::log::escape(&p.plugin),
                origin = %p.origin,
                "{}",
                p.message
            );
        }
        let number = inner.generations.fetch_add(1, Ordering::Relaxed) + 1;
        let mut generation = registry::assemble(number, placed, &inner.natives, problems);
        generation.blocked = blocked;
        let generation = Arc::new(generation);
        inner.registry.store(generation.clone());
        Ok(generation)
    }

    /// Resolve what one plugin is granted and how it runs.
    fn load_settings(&self, source: &PluginSource) -> Result<LoadSettings, LoadError> {
        let inner = &self.inner;
        let config = inner.sources.config.plugins.get(&source.name);
        let origin = inner.sources.config.origin();
        let (grants_config, grant_source) = match config.and_then(|c| c.grants.clone()) {
            Some(g) => (
                Some(g),
                format!("{origin}: [plugins.{}.grants]", source.name),
            ),
            None => match source.origin {
                crate::plugin::Origin::Builtin => (
                    builtin::default_grants(&source.name, &inner.sources.workdir),
                    "built-in default".to_string(),
                ),
                _ => (
                    None,
                    "none (no [plugins.NAME.grants] in the configuration)".to_string(),
                ),
            },
        };
        let mut grants = resolve_grants(
            grants_config,
            grant_source,
            &inner.sources.workdir,
            &inner.enforcement,
            &inner.sources.authority,
        )
        .map_err(|message| LoadError::new(&source.name, &source.origin, message))?;
        if let Some(c) = config {
            grants
                .env
                .extend(c.vars.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        let mode = config
            .and_then(|c| c.instances)
            .or(source.manifest.instances)
            .unwrap_or_default();
        Ok(LoadSettings {
            grants: Arc::new(grants),
            mode,
            limits: inner.settings.limits,
            budgets: inner.settings.budgets,
            kv: inner.kv.clone(),
            jobs: inner.jobs.clone(),
            sha256: config.and_then(|c| c.sha256.clone()),
            max_idle: if mode == InstanceMode::Fresh { 0 } else { 16 },
            tool_timeouts: inner
                .sources
                .config
                .tools
                .iter()
                .filter_map(|(name, t)| t.timeout_ms.map(|ms| (name.clone(), ms)))
                .collect(),
        })
    }
}

/// For each policy role, the lowest priority a plugin *file's own manifest*
/// may propose: just after the built-in policies of that role. A third
/// party's manifest may say where it would like to go, but a place outside
/// the built-in wrappers and guards (before the timeout wrapper, say) is
/// the operator's to give, in `[plugins.NAME]`.
fn manifest_floors(loaded: &[(Loaded, crate::plugin::Manifest)]) -> BTreeMap<Role, i32> {
    let mut floors = BTreeMap::new();
    for (l, manifest) in loaded {
        if l.plugin.origin != crate::plugin::Origin::Builtin {
            continue;
        }
        for role in &l.plugin.roles {
            let p = manifest.priority(*role).unwrap_or(DEFAULT_PRIORITY);
            let floor = floors.entry(*role).or_insert(p + 1);
            *floor = (*floor).max(p + 1);
        }
    }
    floors
}

/// The priority of each role of `plugin`: the operator's, else its
/// manifest's (raised to the floor for plugin files, with a note).
fn priorities(
    plugin: &crate::plugin::ComponentPlugin,
    manifest: &crate::plugin::Manifest,
    config: Option<&crate::config::PluginConfig>,
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
        if plugin.origin != crate::plugin::Origin::Builtin
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
