//! [`Toolgate`]: the host an embedder (or the CLI) builds and calls.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use toolgate::{Toolgate, ToolCall, TurnOptions};
//! let host = Toolgate::builder().plugin_dir("plugins").build().await?;
//! let records = host
//!     .execute_tool_calls(
//!         vec![ToolCall::new("1", "read", serde_json::json!({"path": "README.md"}))],
//!         &TurnOptions::default(),
//!     )
//!     .await?;
//! println!("{}", serde_json::to_string_pretty(&records).unwrap());
//! # Ok(()) }
//! ```

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::broadcast;

use crate::HostConfig;
use crate::call::ToolCall;
use crate::codemode;
use crate::error::HostError;
use crate::grants::SandboxMode;
use crate::lifecycle::watch::{self, Reloader, WatchOptions, Watcher};
use crate::lifecycle::{ConfigFile, Key, Lifecycle, ReloadEvent, Sources};
use crate::outcome::CallRecord;
use crate::pipeline::{self, Approver, PipelineSettings};
use crate::plugin::cache::CompileCache;
use crate::plugin::{LoadError, Runtime, RuntimeOptions, loader};
use crate::policy::{
    ExecuteAroundHook, Finalizer, Guard, PostExecuteHook, PreExecuteHook, ResultObserver,
};
use crate::registry::{Generation, Native, NativePolicies, PluginState, PluginStatus, Registry};
use crate::scheduler::{self, SchedulerError};
use crate::tool::{ModelTool, ToolBody, ToolDefinition, ToolEntry};
use crate::turn::TurnOptions;
use start::{Asked, FEATURES, StartContext, Wiring};

mod start;

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
    secrets: Vec<(PathBuf, String)>,
    code_mode: Option<bool>,
    replica_id: Option<String>,
    config_file: Option<ConfigFile>,
    watch: bool,
    watch_options: WatchOptions,
    background: bool,
    audit_by_default: bool,
    without_audit: bool,
    approval_queue: bool,
    default_approver: Option<Arc<dyn Approver>>,
    state_store: Option<Arc<dyn crate::store::KvBackend>>,
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
            secrets: Vec::new(),
            code_mode: None,
            replica_id: None,
            config_file: None,
            watch: false,
            watch_options: WatchOptions::default(),
            background: false,
            audit_by_default: false,
            without_audit: false,
            approval_queue: false,
            default_approver: None,
            state_store: None,
        }
    }
}

impl ToolgateBuilder {
    /// Keep the audit record unless `[audit] enabled = false` (the
    /// `toolgate` binary does; an embedder's host keeps one only when its
    /// configuration has an `[audit]` table). See [`crate::audit`].
    pub fn audit_by_default(mut self, yes: bool) -> Self {
        self.audit_by_default = yes;
        self
    }

    /// Keep no audit record, whatever the configuration says (`toolgate
    /// replay`: re-deciding recorded calls is not a call).
    pub fn without_audit(mut self) -> Self {
        self.without_audit = true;
        self
    }

    /// Engine settings (epoch tick, pool size, compile cache).
    pub fn runtime_options(mut self, options: RuntimeOptions) -> Self {
        self.runtime = options;
        self
    }

    /// The operator's configuration.
    pub fn config(mut self, config: HostConfig) -> Self {
        self.config = config;
        // A configuration given as a value is not read from a file again.
        self.config_file = None;
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

    /// A path the host treats as authority (as
    /// [`authority_path`](Self::authority_path)) that also holds secrets —
    /// a configuration, a token or key file: besides, nothing the host runs
    /// may *read* it (the sandbox masks it, component preopens and
    /// `bulk-read` refuse it; see
    /// [`Authority::add_secret`](crate::grants::Authority::add_secret)).
    /// The configuration file the host reads, the compile cache's key and
    /// the MCP servers' `bearer_token_file`s are secret without this.
    pub fn secret_path(mut self, path: impl Into<PathBuf>, what: impl Into<String>) -> Self {
        self.secrets.push((path.into(), what.into()));
        self
    }

    /// The host's approval queue answers `ask` (`--approve queue`; also
    /// `[approval] mode = "queue"`), instead of [`approver`](Self::approver).
    /// See [`crate::approval::queue`].
    pub fn approval_queue(mut self, yes: bool) -> Self {
        self.approval_queue = yes;
        self
    }

    /// Keep host state (the `kv` seam) in `store` instead of the one
    /// `[state]` names (tests: an in-memory store,
    /// `store::sqlite::SqliteKv::memory()`).
    pub fn state_store(mut self, store: Arc<dyn crate::store::KvBackend>) -> Self {
        self.state_store = Some(store);
        self
    }

    /// This replica's id (`--replica-id`; wins over `[state]
    /// replica_id`): see [`crate::state::replica_id`].
    pub fn replica_id(mut self, id: impl Into<String>) -> Self {
        self.replica_id = Some(id.into());
        self
    }

    /// Who answers `ask` (the operator's explicit choice, `--approve`: it
    /// wins over `[approval] mode = "allow"|"deny"`). Default: what
    /// `[approval] mode` says, else [`default_approver`](Self::default_approver),
    /// else nobody, so `ask` denies.
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// Who answers `ask` when neither [`approver`](Self::approver) nor
    /// `[approval] mode` (`"allow"`, `"deny"`, `"queue"`) names anyone (the
    /// terminal of an interactive `toolgate run`).
    pub fn default_approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.default_approver = Some(approver);
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
    ///
    /// It wins over the configuration whether the configuration is a value
    /// or a file, at start and at every reload (a file that does not
    /// mention `code_mode` does not turn it off).
    pub fn code_mode(mut self, on: bool) -> Self {
        self.code_mode = Some(on);
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

    /// Read the configuration from `path` now and again at every reload
    /// (replaces [`config`](Self::config)). `required`: the file must
    /// exist; else, while it does not, the default configuration applies
    /// (and its creation is a change the watcher sees). A file that does
    /// not parse is an error at start; at a reload it is reported and the
    /// configuration in force stays.
    pub fn config_file(mut self, path: impl Into<PathBuf>, required: bool) -> Self {
        self.config_file = Some(ConfigFile {
            path: path.into(),
            required,
        });
        self
    }

    /// Build without waiting for plugin files that must be compiled (not in
    /// the compile cache): they load in the background, and calls wait for
    /// those that may be policies (default: no, `build` loads everything;
    /// see [`crate::lifecycle`], "Start").
    pub fn background_loading(mut self, yes: bool) -> Self {
        self.background = yes;
        self
    }

    /// Watch the plugin directories and the configuration file, and reload
    /// when they change (default: no; see [`Toolgate::watch`]).
    pub fn watch(mut self, yes: bool) -> Self {
        self.watch = yes;
        self
    }

    /// How the watcher waits for changes to settle.
    pub fn watch_options(mut self, options: WatchOptions) -> Self {
        self.watch_options = options;
        self
    }

    /// Create the engine and load every plugin. Plugins that fail to load
    /// are reported in [`Toolgate::problems`]; only host-level failures
    /// (engine, unreadable plugin directory, configuration) are errors here.
    pub async fn build(mut self) -> Result<Toolgate, HostError> {
        // The state directory, opened and checked (owner-only, not a
        // symlink) once, here, for every part that keeps something there
        // (the engine holds it; the features read its path).
        let state = match &self.runtime.state_dir {
            Some(d) => Some(crate::state::StateDir::open(d)?),
            None => None,
        };
        if let Some(file) = &self.config_file {
            // Through the journal of the state directory: what a host that
            // died mid-run left planted is moved aside first, and a file a
            // live sandboxed run could have created is refused.
            let journal = state.as_ref().map(|s| s.journal());
            if let Some(c) = crate::lifecycle::read_config(file, journal.as_deref())? {
                self.config = c;
            }
            self.authority
                .push((file.path.clone(), "the host's configuration".into()));
        }
        // The builder's own settings win over the configuration, whether
        // it came as a value or from the file just read.
        if let Some(on) = self.code_mode {
            self.config.code_mode = on;
        }
        let mut budgets = self.config.limits.budgets(self.config.policy_timeout_ms);
        if let Some(t) = self.policy_timeout {
            budgets.policy_timeout = t;
        }
        // Who this replica is: in its job ids and its audit records.
        let replica_id: Arc<str> = {
            let configured = self
                .replica_id
                .as_deref()
                .or(self.config.state.replica_id.as_deref());
            let state_path = state.as_ref().map(|s| s.path());
            crate::state::replica_id(configured, state_path)?.into()
        };
        let workdir = match self.workdir.take() {
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
        let mut runtime_options = std::mem::take(&mut self.runtime);
        runtime_options.guest_memory_bytes = budgets.guest_memory_bytes;
        let runtime = Runtime::with_state(runtime_options, state)?;
        // Every optional feature opens what it needs (see `start`).
        let asked = Asked {
            audit_by_default: self.audit_by_default,
            without_audit: self.without_audit,
            approval_queue: self.approval_queue,
            explicit_approver: self.approver.is_some(),
        };
        let start = StartContext {
            config: &self.config,
            runtime: &runtime,
            state: runtime.state.as_ref().map(|s| s.path()),
            replica_id: &replica_id,
            budgets,
            workdir: &workdir,
            asked: &asked,
        };
        // Who answers `ask`: the operator's explicit choice, else the
        // configuration's, else the default (the approval queue, when one
        // is kept, takes its place: see `start::approval`).
        let approver = self.approver.take().or_else(|| {
            use crate::approval::{AllowAll, ApprovalMode, DenyAll};
            match self.config.approval.mode {
                Some(ApprovalMode::Allow) => Some(Arc::new(AllowAll) as Arc<dyn Approver>),
                Some(ApprovalMode::Deny) => Some(Arc::new(DenyAll)),
                Some(ApprovalMode::Queue | ApprovalMode::Client) | None => {
                    self.default_approver.take()
                }
            }
        });
        let mut wiring = Wiring {
            kv: self.state_store.take(),
            approver,
            ..Wiring::default()
        };
        for feature in FEATURES {
            feature.open(&start, &mut wiring).await?;
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
            approver: wiring.approver.clone(),
            code_mode: self.config.code_mode,
            // A call is declared started in the record before its body
            // runs (see `pipeline::intent`).
            intents: wiring
                .audit
                .clone()
                .map(|a| Arc::new(a) as Arc<dyn crate::pipeline::Intents>),
            access: Arc::new(arc_swap::ArcSwap::from_pointee(
                crate::identity::Access::new(&self.config.access),
            )),
        };
        let mut natives = std::mem::take(&mut self.natives);
        natives.tools.append(&mut wiring.tools);
        let max_parallel = self
            .max_parallel
            .or(self.config.max_parallel_tool_calls)
            .unwrap_or(DEFAULT_MAX_PARALLEL);
        let lifecycle = Lifecycle::new(
            runtime.clone(),
            self.config.enforcement()?,
            settings,
            Sources {
                builtins: self.builtins,
                plugin_dirs: std::mem::take(&mut self.plugin_dirs),
                workdir: workdir.clone(),
                config_file: self.config_file.take(),
                extra_authority: std::mem::take(&mut self.authority),
                extra_secrets: std::mem::take(&mut self.secrets),
                code_mode: self.code_mode,
                natives,
                background: self.background,
            },
            self.config.clone(),
            crate::seams::kv::KvStore::new(
                wiring.kv.clone().expect("the stores opened the kv seam's"),
            ),
            replica_id.clone(),
        );
        for feature in FEATURES {
            feature.attach(&start, &wiring, &lifecycle)?;
        }
        let inner = Arc::new(Inner {
            lifecycle,
            max_parallel,
            sandbox: self.config.sandbox,
            tokens: AtomicU64::new(1),
            watcher: Mutex::new(None),
            watch_options: self.watch_options,
            audit: wiring.audit.clone(),
            approvals: wiring.approvals.clone(),
            replica_id: replica_id.clone(),
            metrics: crate::metrics::Metrics::default(),
            delegation: wiring.delegation.clone(),
        });
        if let Some(slot) = &wiring.nested {
            let _ = slot.set(Arc::new(WeakHost(Arc::downgrade(&inner))));
        }
        let host = Toolgate { inner };
        let deferred = host.inner.lifecycle.start().await?;
        for feature in FEATURES {
            feature.started(&wiring, &host).await;
        }
        if self.watch {
            host.watch().await?;
        }
        if deferred {
            // Plugin files left out to compile: loaded now, in the
            // background (after the watcher read what to watch: the second
            // pass holds the lifecycle's state while it compiles).
            let weak = Arc::downgrade(&host.inner);
            tokio::spawn(async move {
                if let Some(inner) = weak.upgrade() {
                    inner.lifecycle.finish_start().await;
                }
            });
        }
        Ok(host)
    }
}

fn native<P: ?Sized>(name: &str, priority: i32, policy: Arc<P>) -> Native<P> {
    Native {
        name: name.to_string(),
        priority,
        policy,
    }
}

struct Inner {
    lifecycle: Lifecycle,
    max_parallel: usize,
    sandbox: SandboxMode,
    tokens: AtomicU64,
    watcher: Mutex<Option<Watcher>>,
    watch_options: WatchOptions,
    audit: Option<crate::audit::Audit>,
    approvals: Option<Arc<crate::approval::queue::ApprovalQueue>>,
    replica_id: Arc<str>,
    /// Counted at every call's end, encoded at each scrape.
    metrics: crate::metrics::Metrics,
    /// The sub-agent tools, when offered: their background agents end
    /// before the record closes.
    delegation: Option<Arc<crate::delegation::Delegation>>,
}

impl Reloader for Inner {
    fn reload(&self) -> BoxFuture<'_, watch::WatchTargets> {
        Box::pin(async move {
            if let Err(e) = self.lifecycle.reload(false).await {
                tracing::warn!(error = %e, "reload failed; the generation in force stays");
            }
            self.lifecycle.watched().await
        })
    }
}

/// See [`Toolgate::downgrade`].
pub(crate) struct WeakToolgate(std::sync::Weak<Inner>);

impl WeakToolgate {
    /// The host, while it lives.
    pub(crate) fn upgrade(&self) -> Option<Toolgate> {
        self.0.upgrade().map(|inner| Toolgate { inner })
    }
}

/// A call with no audit record to wait for.
struct Recorded;

impl std::future::Future for Recorded {
    type Output = ();
    fn poll(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        std::task::Poll::Ready(())
    }
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
            .execute_tool_calls(calls, turn)
            .await
            .map_err(|e| e.to_string())
    }

    fn model_tools(&self, scope: &str) -> Vec<ModelTool> {
        match self.0.upgrade() {
            Some(inner) => inner.lifecycle.generation_for(scope).model_tools(),
            None => Vec::new(),
        }
    }
}

/// The scheduler's view of the host (see [`scheduler::Dispatch`]).
impl scheduler::Dispatch for Toolgate {
    fn generation_for(&self, scope: &str) -> Arc<Generation> {
        self.inner.lifecycle.generation_for(scope)
    }

    fn settings(&self) -> &PipelineSettings {
        self.inner.lifecycle.settings()
    }

    fn next_token(&self) -> u64 {
        self.inner.tokens.fetch_add(1, Ordering::Relaxed)
    }

    fn max_parallel(&self) -> usize {
        self.inner.max_parallel
    }

    fn settled(&self) -> tokio::sync::watch::Receiver<bool> {
        self.inner.lifecycle.settled()
    }

    fn record<'a>(
        &'a self,
        finished: &'a mut pipeline::Finished,
        generation: &'a Generation,
        turn: &'a TurnOptions,
    ) -> futures::future::BoxFuture<'a, ()> {
        let record = &finished.record;
        self.inner.metrics.call(
            &record.name,
            record.error.as_ref().map(|e| &e.code),
            finished
                .decisions
                .iter()
                .filter(|d| d.verdict == "deny")
                .map(|d| (d.stage.as_str(), d.decided_by.as_str())),
            finished.elapsed_us,
        );
        match &self.inner.audit {
            Some(audit) => {
                Box::pin(
                    audit.commit(finished, generation, turn.client.as_deref(), &|| {
                        self.plugin_status()
                            .into_iter()
                            .map(|s| (s.name, s.sha256))
                            .collect()
                    }),
                )
            }
            // No record: a zero-sized future, no allocation.
            None => Box::pin(Recorded),
        }
    }
}

/// The host: plugins, policies, pipeline and scheduler.
#[derive(Clone)]
pub struct Toolgate {
    inner: Arc<Inner>,
}

impl Toolgate {
    /// A reference that does not keep the host alive (for what watches
    /// it: the record's reload events, the bridge's listings).
    pub(crate) fn downgrade(&self) -> WeakToolgate {
        WeakToolgate(Arc::downgrade(&self.inner))
    }

    pub fn builder() -> ToolgateBuilder {
        ToolgateBuilder::default()
    }

    /// The generation new calls with no agent scope run against (the
    /// global layer).
    pub fn generation(&self) -> Arc<Generation> {
        self.inner.lifecycle.global()
    }

    /// The generation new calls from `scope` run against: the view of the
    /// deepest configured scope that contains it, else the global layer
    /// (see [`crate::registry::scopes`]).
    pub fn generation_for(&self, scope: &str) -> Arc<Generation> {
        self.inner.lifecycle.generation_for(scope)
    }

    /// Every layer, resolved, as of now.
    pub fn registry(&self) -> Arc<Registry> {
        self.inner.lifecycle.registry()
    }

    /// The MCP servers and where each stands.
    pub fn mcp_servers(&self) -> Vec<crate::bridge::ServerStatus> {
        self.inner
            .lifecycle
            .bridge()
            .map(|b| b.status())
            .unwrap_or_default()
    }

    /// The MCP bridge, when servers are configured (their resources and
    /// prompts: [`crate::bridge::passthrough`]).
    pub fn bridge(&self) -> Option<&crate::bridge::Bridge> {
        self.inner.lifecycle.bridge()
    }

    /// Wait until every MCP server's first connection attempt has ended,
    /// at most `timeout` (servers connect in the background; a one-shot
    /// command wants their tools).
    pub async fn wait_for_mcp(&self, timeout: Duration) {
        if let Some(b) = self.inner.lifecycle.bridge() {
            b.wait_ready(timeout).await;
            // A listing is published by a reload in the background; make
            // sure the generation in force has what the servers listed.
            // While a start's second pass loads plugin files, a reload
            // would wait for it: publish in the global layer now (the
            // second pass brings them to every scope).
            if !*self.inner.lifecycle.settled().borrow() {
                self.inner.lifecycle.publish_bridged();
            } else if let Err(e) = self.inner.lifecycle.reload(false).await {
                tracing::warn!(error = %e, "the bridged tools could not be published");
            }
        }
    }

    /// The longest `connect_timeout_ms` of the MCP servers (zero without any).
    pub fn mcp_connect_timeout(&self) -> Duration {
        self.inner
            .lifecycle
            .bridge()
            .map(|b| b.connect_timeout())
            .unwrap_or_default()
    }

    /// Swap in a generation with the bridge's current tools (after an MCP
    /// server's listing changed): a reload, which keeps every unchanged
    /// plugin as it is. Calls in flight keep theirs.
    pub(crate) fn publish_bridged(&self) {
        self.inner.lifecycle.publish_bridged();
        // Scope views are recomposed by a reload.
        if self.registry().scopes().is_empty() {
            return;
        }
        let inner = self.inner.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                if let Err(e) = inner.lifecycle.reload(false).await {
                    tracing::warn!(error = %e, "a bridged listing could not reach the scopes");
                }
            });
        }
    }

    /// The model-facing list: every tool's projection, or under Code Mode
    /// `run_code` alone, declaring the others.
    pub fn tools(&self) -> Vec<ModelTool> {
        let all = self.generation().model_tools();
        if self.inner.lifecycle.settings().code_mode {
            codemode::signatures::project(&all)
        } else {
            all
        }
    }

    /// Code Mode is on for every turn.
    pub fn code_mode(&self) -> bool {
        self.inner.lifecycle.settings().code_mode
    }

    /// The model-facing projection of every tool a call from `scope` may use.
    pub fn tools_for(&self, scope: &str) -> Vec<ModelTool> {
        let all = self.generation_for(scope).model_tools();
        if self.code_mode() {
            codemode::signatures::project(&all)
        } else {
            all
        }
    }

    /// What failed to load (or was adjusted) in the current generation.
    pub fn problems(&self) -> Vec<LoadError> {
        let registry = self.registry();
        let mut all = registry.global.problems.clone();
        for s in registry.scopes() {
            for p in &s.view.problems {
                if !all.contains(p) {
                    all.push(p.clone());
                }
            }
        }
        all
    }

    /// Every plugin of every layer: its state (serving, refused, loading),
    /// the generation its serving version was loaded in, its digest, why
    /// its latest update was refused, and its cost.
    pub fn plugin_status(&self) -> Vec<PluginStatus> {
        let loading = self.inner.lifecycle.loading();
        let mut out = self.registry().plugins.clone();
        for s in &mut out {
            if loading.contains(&Key {
                scope: s.scope.clone(),
                name: s.name.clone(),
            }) {
                s.state = PluginState::Loading;
            }
            if let Some(p) = &s.plugin {
                s.cost.idle_instances = p.idle_instances();
            }
        }
        for key in loading {
            if !out
                .iter()
                .any(|s| s.scope == key.scope && s.name == key.name)
            {
                out.push(PluginStatus {
                    scope: key.scope,
                    name: key.name,
                    origin: String::new(),
                    state: PluginState::Loading,
                    generation: None,
                    sha256: None,
                    signer: None,
                    refused: None,
                    refused_sha256: None,
                    cost: Default::default(),
                    plugin: None,
                });
            }
        }
        out
    }

    /// Reload events: one per generation (what loaded, what was removed,
    /// which updates were refused).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<ReloadEvent>> {
        self.inner.lifecycle.subscribe()
    }

    /// The configuration in force.
    pub async fn config(&self) -> Arc<HostConfig> {
        self.inner.lifecycle.config().await
    }

    /// The engine and linker.
    pub fn runtime(&self) -> &Arc<Runtime> {
        self.inner.lifecycle.runtime()
    }

    /// The compile cache, if one was configured (see
    /// [`CompileCache::refusal`] for whether it is in use).
    pub fn compile_cache(&self) -> Option<&CompileCache> {
        self.inner.lifecycle.runtime().cache.as_ref()
    }

    pub fn settings(&self) -> &PipelineSettings {
        self.inner.lifecycle.settings()
    }

    pub fn max_parallel(&self) -> usize {
        self.inner.max_parallel
    }

    pub fn sandbox_mode(&self) -> SandboxMode {
        self.inner.sandbox
    }

    /// A token unique to one call of this host (it keys the call's
    /// instances): for code that drives [`pipeline::prepare`] itself, as
    /// `toolgate replay` does.
    pub fn next_token(&self) -> u64 {
        self.inner.tokens.fetch_add(1, Ordering::Relaxed)
    }

    /// Run one call through the pipeline and commit it (observers notified).
    pub async fn call(&self, call: ToolCall, turn: &TurnOptions) -> CallRecord {
        scheduler::until_loaded(self, turn, [call.name.as_str()]).await;
        let generation = self.generation_for(&turn.agent_scope);
        self.call_on(&generation, call, turn).await
    }

    /// Run the calls of one model turn: one record per call, in model
    /// order (see [`crate::scheduler`]) — a call that fails is a record
    /// with its error, not an `Err`.
    ///
    /// `Err` only when the scheduler itself fails (a bug in the host or in a
    /// native tool or policy: a task that panicked): the error says which
    /// call, and carries the records committed before it.
    pub async fn execute_tool_calls(
        &self,
        calls: Vec<ToolCall>,
        turn: &TurnOptions,
    ) -> Result<Vec<CallRecord>, SchedulerError> {
        scheduler::run_turn(self, calls, turn).await
    }

    /// Run one call against `generation` — one the caller holds, from
    /// [`generation_for`](Self::generation_for) or [`registry`](Self::registry)
    /// — however many reloads happened since, and commit it. [`call`](Self::call)
    /// takes the generation current when it starts.
    pub async fn call_on(
        &self,
        generation: &Arc<Generation>,
        call: ToolCall,
        turn: &TurnOptions,
    ) -> CallRecord {
        let settings = self.settings();
        let mut finished =
            pipeline::run_call(generation, settings, call, turn, self.next_token()).await;
        scheduler::Dispatch::record(self, &mut finished, generation, turn).await;
        pipeline::result::notify(
            &generation.policies.observers,
            finished,
            settings.policy_timeout(),
        )
        .await
        .record
    }

    /// Kill every background job and terminal (the `jobs` and
    /// `terminals` seams) and wait, up to 5 s, until each has ended; stop
    /// the language servers (the `lsp` seam) and wait for them as long;
    /// interrupt the background sub-agents and wait as long for each to
    /// record its end.
    /// Dropping the host kills them too, without waiting; an embedder that
    /// exits right after should call this first.
    pub async fn shutdown(&self) {
        let seams = self.inner.lifecycle.seams();
        let lsp = async {
            if let Some(lsp) = seams.lsp.get() {
                lsp.shutdown(Duration::from_secs(5)).await;
            }
        };
        let agents = async {
            if let Some(d) = &self.inner.delegation {
                d.shutdown(Duration::from_secs(5)).await;
            }
        };
        tokio::join!(
            seams.jobs.shutdown(Duration::from_secs(5)),
            seams.terminals.shutdown(Duration::from_secs(5)),
            lsp,
            agents,
        );
        if let Some(audit) = &self.inner.audit
            && let Err(e) = audit.close()
        {
            tracing::error!(error = %e, "the audit record's shutdown checkpoint could not be written");
        }
    }

    /// The audit record, when one is kept.
    pub fn audit(&self) -> Option<&crate::audit::Audit> {
        self.inner.audit.as_ref()
    }

    /// This replica's id ([`crate::state::replica_id`]).
    pub fn replica_id(&self) -> &str {
        &self.inner.replica_id
    }

    /// The host's metrics as OpenMetrics text (`serve --http`'s
    /// `/metrics`; see [`crate::metrics`]), the gauges read now. A store
    /// that cannot say how many approvals are pending leaves that gauge
    /// at its last value.
    pub async fn metrics_text(&self) -> String {
        let pending = match self.approvals() {
            Some(queue) => match queue.pending().await {
                Ok(p) => Some(p.len()),
                Err(e) => {
                    tracing::debug!(error = %e, "metrics: the pending approvals could not be counted");
                    None
                }
            },
            None => Some(0),
        };
        self.inner.metrics.encode(self.generation().number, pending)
    }

    /// The approval queue, when it answers `ask` (`--approve queue`).
    pub fn approvals(&self) -> Option<&Arc<crate::approval::queue::ApprovalQueue>> {
        self.inner.approvals.as_ref()
    }

    /// Background jobs running now, all plugins and scopes.
    pub fn running_jobs(&self) -> usize {
        self.inner.lifecycle.seams().jobs.running()
    }

    /// The language servers the `lsp` seam may start, each with the
    /// program it would run or why it cannot (see
    /// [`crate::lsp::LspService::availability`]).
    pub fn language_servers(&self) -> Vec<(Arc<str>, Result<PathBuf, String>)> {
        self.inner
            .lifecycle
            .seams()
            .lsp
            .get()
            .map(|l| l.availability())
            .unwrap_or_default()
    }

    /// The host's state store (`[state]`): what the `kv` seam keeps, each
    /// plugin in a namespace of its own (`toolgate goals` reads and writes
    /// the `goals` plugin's).
    pub fn state_store(&self) -> Arc<dyn crate::store::KvBackend> {
        self.inner.lifecycle.seams().kv.backend().clone()
    }

    /// The skills of the last reload (`[skills]`; see [`crate::skills`]):
    /// what the `skills` seam serves and `serve` offers as prompts.
    pub fn skills(&self) -> Arc<crate::skills::Catalog> {
        self.inner.lifecycle.skills()
    }

    /// Language servers running now.
    pub fn running_language_servers(&self) -> usize {
        self.inner
            .lifecycle
            .seams()
            .lsp
            .get()
            .map_or(0, |l| l.running().len())
    }

    /// Terminals open now, all plugins and scopes.
    pub fn running_terminals(&self) -> usize {
        self.inner.lifecycle.seams().terminals.running()
    }

    /// Load what changed and swap the new generation in atomically (see
    /// [`crate::lifecycle`]): the configuration file is read again, only
    /// changed plugins are loaded (in parallel, through the compile
    /// cache), a bad update is refused while the previous version keeps
    /// serving, and calls in flight keep the generation they started with.
    /// Returns the global layer's new generation (every layer:
    /// [`registry`](Self::registry)).
    pub async fn reload(&self) -> Result<Arc<Generation>, HostError> {
        Ok(self.inner.lifecycle.reload(false).await?.global.clone())
    }

    /// Watch the plugin directories (every layer's) and the configuration
    /// file, and reload when they change; idempotent. The watcher stops
    /// with [`unwatch`](Self::unwatch) or when the last handle of this host
    /// is dropped.
    pub async fn watch(&self) -> Result<(), HostError> {
        if self.is_watching() {
            return Ok(());
        }
        let targets = self.inner.lifecycle.watched().await;
        let weak = Arc::downgrade(&self.inner);
        let weak: std::sync::Weak<dyn Reloader> = weak;
        let watcher =
            watch::start(weak, targets, self.inner.watch_options).map_err(HostError::Watch)?;
        *self.inner.watcher.lock().unwrap_or_else(|p| p.into_inner()) = Some(watcher);
        Ok(())
    }

    /// Stop watching.
    pub fn unwatch(&self) {
        self.inner
            .watcher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
    }

    /// Is a watcher running?
    pub fn is_watching(&self) -> bool {
        self.inner
            .watcher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }
}
