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

    /// The approval queue over `store` (see [`crate::store::open`]); over
    /// a shared one, `replica` is this replica's id in it.
    async fn open_approvals(
        &self,
        store: Arc<dyn crate::approval::store::ApprovalStore>,
        replica: &str,
        state: Option<&std::path::Path>,
    ) -> Result<Arc<crate::approval::queue::ApprovalQueue>, HostError> {
        let timeout = Duration::from_millis(
            self.config
                .approval
                .timeout_ms
                .unwrap_or(crate::budgets::APPROVAL_TIMEOUT_MS)
                .max(1),
        );
        let replica = store.shared().then(|| {
            tracing::info!(replica = %replica, "approvals in the shared store; this replica's id");
            replica.to_string()
        });
        let queue = crate::approval::queue::ApprovalQueue::open_as(store, timeout, replica).await?;
        if let Some(ms) = self.config.approval.retry_hold_ms {
            queue.set_retry_hold(Duration::from_millis(ms));
        }
        if let Some(url) = &self.config.approval.webhook {
            use crate::approval::webhook::{DEFAULT_KEY_FILE, Webhook, WebhookError};
            let key = match (&self.config.approval.webhook_key_file, state) {
                (Some(p), _) => p.to_path_buf(),
                (None, Some(dir)) => dir.join(DEFAULT_KEY_FILE),
                (None, None) => return Err(WebhookError::NoKeyFile.into()),
            };
            Webhook::new(url, &key)?.start(&queue);
        }
        Ok(queue)
    }

    /// Create the engine and load every plugin. Plugins that fail to load
    /// are reported in [`Toolgate::problems`]; only host-level failures
    /// (engine, unreadable plugin directory, configuration) are errors here.
    pub async fn build(mut self) -> Result<Toolgate, HostError> {
        // The state directory, opened and checked (owner-only, not a
        // symlink) once, here, for every part that keeps something there:
        // the journal, the replica id, the record, the stores, the
        // webhook's key, the compile cache's key.
        let state = match &self.runtime.state_dir {
            Some(d) => Some(crate::state::StateDir::open(d)?),
            None => None,
        };
        let state_path = state.as_ref().map(|s| s.path().to_path_buf());
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
            crate::state::replica_id(configured, state_path.as_deref())?.into()
        };
        let audit = match self
            .config
            .audit
            .resolve(self.audit_by_default, state_path.as_deref())?
        {
            Some(settings) if !self.without_audit => {
                Some(crate::audit::Audit::open(settings, &replica_id)?)
            }
            _ => None,
        };
        // The state stores, on one engine (`[state]`), before anything is
        // loaded: a plugin's first call may read its counters.
        let stores = {
            let queue = self.approval_queue
                || self.config.approval.mode == Some(crate::approval::ApprovalMode::Queue);
            let approvals = queue.then(|| match &self.config.approval.store {
                Some(file) => crate::store::ApprovalsAt::File(file),
                None => crate::store::ApprovalsAt::State,
            });
            crate::store::open(
                &self.config.state,
                state_path.as_deref(),
                self.state_store.take(),
                approvals,
            )?
        };
        let approvals = match stores.approvals {
            Some(store) => Some(
                self.open_approvals(store, &replica_id, state_path.as_deref())
                    .await?,
            ),
            None => None,
        };
        let approver = match &approvals {
            Some(q) => Some(Arc::new(q.clone()) as Arc<dyn Approver>),
            // The operator's explicit choice, else the configuration's,
            // else the default.
            None => self.approver.or_else(|| {
                use crate::approval::ApprovalMode;
                match self.config.approval.mode {
                    Some(ApprovalMode::Allow) => {
                        Some(Arc::new(crate::approval::AllowAll) as Arc<dyn Approver>)
                    }
                    Some(ApprovalMode::Deny) => Some(Arc::new(crate::approval::DenyAll)),
                    Some(ApprovalMode::Queue | ApprovalMode::Client) | None => {
                        self.default_approver.take()
                    }
                }
            }),
        };
        let kv = stores.kv;
        let mut runtime_options = self.runtime;
        runtime_options.guest_memory_bytes = budgets.guest_memory_bytes;
        let runtime = Runtime::with_state(runtime_options, state)?;
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
        let bridge_approver = approver.clone();
        let settings = PipelineSettings {
            budgets,
            limits,
            approver,
            code_mode: self.config.code_mode,
            // A call is declared started in the record before its body
            // runs (see `pipeline::intent`).
            intents: audit
                .clone()
                .map(|a| Arc::new(a) as Arc<dyn crate::pipeline::Intents>),
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
        let tool_timeouts = self
            .config
            .tools
            .iter()
            .filter_map(|(name, t)| t.timeout_ms.map(|ms| (name.clone(), ms)))
            .collect();
        let bridge_workdir = workdir.clone();
        let sources = Sources {
            builtins: self.builtins,
            plugin_dirs: self.plugin_dirs,
            workdir,
            config_file: self.config_file,
            extra_authority: self.authority,
            extra_secrets: self.secrets,
            code_mode: self.code_mode,
            natives,
            background: self.background,
        };
        let sandbox = self.config.sandbox;
        let bridge_config = self.config.clone();
        let lifecycle = Lifecycle::new(
            runtime,
            self.config.enforcement()?,
            settings,
            sources,
            self.config,
            crate::seams::kv::KvStore::new(kv),
            replica_id.clone(),
        );
        // External MCP servers: their processes are confined like any spawn,
        // away from everything the host reads as authority.
        let bridge = crate::bridge::Bridge::new(
            &bridge_config.mcp,
            crate::bridge::Context {
                workdir: bridge_workdir,
                enforcement: bridge_config.enforcement()?,
                authority: lifecycle.authority(&bridge_config),
                budgets,
                tool_timeouts,
                origin: bridge_config.origin(),
                egress: Arc::new(bridge_config.egress_global()?),
                egress_record: lifecycle.seams().egress_record.clone(),
                approver: bridge_approver,
                approval_timeout: Duration::from_millis(
                    bridge_config
                        .approval
                        .timeout_ms
                        .unwrap_or(crate::budgets::APPROVAL_TIMEOUT_MS)
                        .max(1),
                ),
            },
        );
        lifecycle.set_bridge(bridge);
        // Egress connections go into the audit record too.
        if let Some(audit) = &audit {
            let audit = audit.clone();
            let sink: crate::egress::proxy::RecordSink = Arc::new(move |who, record| {
                let _ = audit.event("egress", record.audit_fields(who));
            });
            let _ = lifecycle.seams().egress_record.set(sink);
        }
        let inner = Arc::new(Inner {
            lifecycle,
            max_parallel,
            sandbox,
            tokens: AtomicU64::new(1),
            watcher: Mutex::new(None),
            watch_options: self.watch_options,
            audit,
            approvals,
            replica_id,
        });
        let _ = nested_slot.set(Arc::new(WeakHost(Arc::downgrade(&inner))));
        let host = Toolgate { inner };
        let deferred = host.inner.lifecycle.start().await?;
        if let Some(audit) = &host.inner.audit {
            record_reloads(&host, audit.clone()).await;
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
        // MCP servers connect in the background; each listing brings a new
        // generation (the host is held weakly: the bridge stops with it).
        let weak = Arc::downgrade(&host.inner);
        if let Some(bridge) = host.inner.lifecycle.bridge() {
            bridge.start(Arc::new(move || {
                if let Some(inner) = weak.upgrade() {
                    Toolgate { inner }.publish_bridged();
                }
            }));
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
}

/// Record the plugins (and the configuration's digest) of the first
/// generation, then every reload (old → new digests, refusals, a
/// configuration not obeyed) and every change of the configuration in
/// force (old → new digest) as host events.
async fn record_reloads(host: &Toolgate, audit: crate::audit::Audit) {
    use std::collections::BTreeMap;
    let digests = |host: &Toolgate| -> BTreeMap<String, Option<String>> {
        host.plugin_status()
            .into_iter()
            .map(|s| {
                let name = if s.scope.is_empty() {
                    s.name
                } else {
                    format!("{}@{}", s.name, s.scope)
                };
                (name, s.sha256)
            })
            .collect()
    };
    // Who signed each plugin that a `[trust]` key verified.
    let signers = |host: &Toolgate| -> BTreeMap<String, String> {
        host.plugin_status()
            .into_iter()
            .filter_map(|s| {
                let name = if s.scope.is_empty() {
                    s.name
                } else {
                    format!("{}@{}", s.name, s.scope)
                };
                Some((name, s.signer?))
            })
            .collect()
    };
    let mut before = digests(host);
    let mut config_before = host.config().await.digest();
    let _ = audit.event(
        "plugins",
        serde_json::json!({
            "generation": host.generation().number,
            "plugins": before,
            "signers": signers(host),
            "config": config_before,
        }),
    );
    let mut events = host.subscribe();
    let weak = Arc::downgrade(&host.inner);
    tokio::spawn(async move {
        loop {
            let event = match events.recv().await {
                Ok(e) => e,
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    let _ = audit.event("reload", serde_json::json!({ "missedEvents": n }));
                    continue;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            };
            let Some(inner) = weak.upgrade() else { return };
            let host = Toolgate { inner };
            let after = digests(&host);
            let now_signed = signers(&host);
            let config_after = host.config().await.digest();
            drop(host);
            if config_after != config_before {
                let _ = audit.event(
                    "config",
                    serde_json::json!({
                        "generation": event.generation,
                        "old": config_before,
                        "new": config_after,
                    }),
                );
                config_before = config_after;
            }
            let changed: Vec<_> = after
                .iter()
                .filter(|(name, new)| before.get(*name) != Some(*new))
                .map(|(name, new)| {
                    serde_json::json!({ "plugin": name, "old": before.get(name).cloned().flatten(), "new": new, "signer": now_signed.get(name) })
                })
                .chain(before.keys().filter(|n| !after.contains_key(*n)).map(|name| {
                    serde_json::json!({ "plugin": name, "old": before[name], "new": null })
                }))
                .collect();
            let refused: Vec<_> = event
                .refused
                .iter()
                .map(|e| serde_json::json!({ "plugin": e.plugin, "reason": e.to_string() }))
                .collect();
            let _ = audit.event(
                "reload",
                serde_json::json!({
                    "generation": event.generation,
                    "changed": changed,
                    "refused": refused,
                    "configProblem": event.config_problem,
                }),
            );
            before = after;
        }
    });
}

impl Reloader for Inner {
    fn reload(&self) -> BoxFuture<'_, (Vec<PathBuf>, Option<PathBuf>)> {
        Box::pin(async move {
            if let Err(e) = self.lifecycle.reload(false).await {
                tracing::warn!(error = %e, "reload failed; the generation in force stays");
            }
            self.lifecycle.watched().await
        })
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
    fn publish_bridged(&self) {
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

    /// Kill every background job (the `jobs` seam) and wait, up to 5 s,
    /// until each has ended. Dropping the host kills them too, without
    /// waiting; an embedder that exits right after should call this first.
    pub async fn shutdown(&self) {
        self.inner
            .lifecycle
            .seams()
            .jobs
            .shutdown(Duration::from_secs(5))
            .await;
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

    /// The approval queue, when it answers `ask` (`--approve queue`).
    pub fn approvals(&self) -> Option<&Arc<crate::approval::queue::ApprovalQueue>> {
        self.inner.approvals.as_ref()
    }

    /// Background jobs running now, all plugins and scopes.
    pub fn running_jobs(&self) -> usize {
        self.inner.lifecycle.seams().jobs.running()
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
