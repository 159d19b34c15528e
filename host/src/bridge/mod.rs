//! The MCP bridge: external MCP servers' tools as tools of the host.
//!
//! Each `[mcp.servers.NAME]` is one MCP client (the official Rust SDK,
//! `rmcp`), over stdio — the server spawned in the sandbox like every
//! process the host starts ([`launch`]) — or streamable HTTP. Its tools
//! become tools named `mcp__NAME__TOOL` ([`names`]) whose provider is the
//! server, so every hook, guard, wrapper, finalizer and observer sees them
//! like any other tool, and `toolgate serve` re-exports them.
//!
//! Why a third source of tools beside components and native tools: a
//! server's tools change on the server's schedule, not the host's. So:
//!
//! * **Servers connect in parallel, in the background.** A slow or dead
//!   server holds no one back: its tools appear when it connects. The host
//!   can wait a bounded time for the first attempts ([`Bridge::wait_ready`]),
//!   which the one-shot CLI commands do.
//! * **A listing is a generation.** Each listing (at connect, on
//!   `notifications/tools/list_changed`, after a reconnect) replaces that
//!   server's tools in a new host [`Generation`], atomically ([`merge`]);
//!   a call in flight keeps the generation, and so the listing and the
//!   connection, it started with.
//! * **A dead server is reconnected with backoff** (0.5 s doubling to 30 s,
//!   reset once a connection has lasted a minute). Meanwhile its tools stay
//!   listed and fail at once with `MCP_UNAVAILABLE`, naming the server and
//!   why it went away.
//! * **A stdio server dies with the host.** Its process group is killed
//!   when the host drops it (its connection ends, the host stops or its
//!   runtime shuts down), and the process carries a parent-death signal, so
//!   even a host killed with SIGKILL leaves no server behind.
//!
//! [`body`] makes the calls (deadline and cancellation forwarded as
//! `notifications/cancelled`, errors as failures with the server's message,
//! `structuredContent` as the canonical value); [`convert`] checks what a
//! server lists and returns.

pub mod ask;
pub mod body;
pub mod config;
pub mod convert;
pub mod launch;
pub mod names;
pub mod passthrough;
pub mod pins;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::ErrorData;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, Implementation,
    ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ClientHandler, ServiceExt};
use serde::Serialize;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::budgets::Budgets;
use crate::grants::Authority;
use crate::plugin::{LoadError, log::escape};
use crate::registry::Generation;
use crate::tool::ToolEntry;
use body::{BridgedTools, Session};
pub use config::{McpConfig, McpServerConfig};
use launch::Launch;

/// Time to connect, initialize and list a server's tools (each), unless
/// `connect_timeout_ms` says otherwise.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// First wait before a reconnect; doubles up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// Longest wait between reconnects.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A connection that lasted this long resets the backoff.
pub const STABLE_AFTER: Duration = Duration::from_secs(60);
/// Longest line (JSON-RPC message) read from a stdio server: 16 MiB.
pub const MAX_STDIO_MESSAGE: usize = 16 << 20;
/// Bytes of a stdio server's stderr kept for its status (the tail).
const STDERR_TAIL: usize = 1024;

/// Problems of bridged servers carry this origin prefix (`[mcp.servers.NAME]`).
pub const ORIGIN_PREFIX: &str = "[mcp.servers.";

/// Where a server stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// The first attempt is under way.
    Connecting,
    /// Connected; its tools are served.
    Connected,
    /// Not connected; the next attempt comes after a backoff.
    Reconnecting,
    /// Cannot be started as configured (not retried until the host restarts).
    Failed,
}

/// What `toolgate plugins` shows about a server.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerStatus {
    pub name: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    pub state: State,
    /// Tools registered from its latest listing.
    pub tools: usize,
    pub last_error: Option<String>,
    /// Connections made so far.
    pub connects: u64,
    /// Listings made so far (each one a generation of its tools).
    pub listings: u64,
    /// The stdio server's process id while it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Directories granted read-only automatically (stdio).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub auto_granted: Vec<PathBuf>,
    /// Tools not registered or adjusted, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// What every server's supervisor needs from the host.
#[derive(Clone)]
pub struct Context {
    pub workdir: PathBuf,
    /// Where tools' definitions are pinned ([`pins`]): the state store.
    pub pins: Arc<dyn crate::store::KvBackend>,
    pub enforcement: toolgate_sandbox::Enforcement,
    pub authority: Authority,
    pub budgets: Budgets,
    /// `[tools.NAME] timeout_ms`.
    pub tool_timeouts: BTreeMap<String, u32>,
    /// The configuration's origin, for messages.
    pub origin: String,
    /// `[egress]`, for servers with an `egress` grant.
    pub egress: Arc<crate::egress::Global>,
    /// Where servers' egress connections are recorded besides the log
    /// (the audit record's sink, set when the host keeps one).
    pub egress_record: Arc<std::sync::OnceLock<crate::egress::proxy::RecordSink>>,
    /// Where a tool withheld or accepted ([`pins`]) is recorded (the audit
    /// record's sink, set when the host keeps one).
    pub events: Arc<std::sync::OnceLock<crate::seams::HostEventSink>>,
    /// Who is asked about a stdio server's connections no egress rule
    /// allows (`[egress] ask = true`): the host's approver (the queue
    /// with `[approval] mode = "queue"`), on the server's behalf.
    pub approver: Option<Arc<dyn crate::approval::Approver>>,
    /// `[approval] timeout_ms`: the longest such a connection waits.
    pub approval_timeout: Duration,
}

/// Called after a server's tools changed: the host swaps in a generation.
pub type Publish = Arc<dyn Fn() + Send + Sync>;

struct Server {
    name: String,
    config: McpServerConfig,
    context: Arc<Context>,
    status: Mutex<ServerStatus>,
    tools: Mutex<Arc<Vec<Arc<ToolEntry>>>>,
    /// The connection while it is up (resources and prompts are asked on it).
    live: Mutex<Option<Arc<Session>>>,
    /// What it listed last besides tools ([`passthrough`]).
    offers: Mutex<passthrough::Offers>,
    /// `true` once the first attempt has ended (connected or not).
    ready: watch::Sender<bool>,
    /// Bumped after each listing of any server is published.
    listed: Arc<watch::Sender<u64>>,
    /// Its egress asking (`[egress] ask = true`, an approver, a stdio
    /// server with an `egress` grant), for as long as the host runs.
    egress_ask: Option<Arc<crate::egress::ask::ServerAsk>>,
    /// Tools its last listing withheld ([`pins`]): while any are, their
    /// pins are looked at every [`pins::RECHECK`], and the server listed
    /// again once one is accepted.
    withheld: Mutex<Vec<String>>,
}

impl Server {
    /// Whether its last listing withheld tools.
    fn withholds(&self) -> bool {
        !self
            .withheld
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }

    /// Whether a withheld tool's pin is gone (accepted): then it is listed
    /// again. A store that cannot say is asked again later. A tool pinned
    /// in the configuration is accepted there (at the next start), not here.
    async fn accepted(&self) -> bool {
        let names = self
            .withheld
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for name in names {
            if self.config.pins.contains_key(&name) {
                continue;
            }
            if let Ok(None) = self
                .context
                .pins
                .get(pins::NAMESPACE, &self.name, &name)
                .await
            {
                return true;
            }
        }
        false
    }

    fn status(&self) -> std::sync::MutexGuard<'_, ServerStatus> {
        self.status.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn connect_timeout(&self) -> Duration {
        self.config
            .connect_timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_CONNECT_TIMEOUT)
    }
}

/// Every configured server, and their supervisors.
pub struct Bridge {
    servers: Vec<Arc<Server>>,
    shutdown: CancellationToken,
    listed: Arc<watch::Sender<u64>>,
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Bridge {
    /// The enabled servers of `config` (nothing starts until [`Self::start`]).
    pub fn new(config: &McpConfig, context: Context) -> Bridge {
        let context = Arc::new(context);
        let listed = Arc::new(watch::channel(0u64).0);
        let servers = config
            .servers
            .iter()
            .filter(|(_, c)| c.is_enabled())
            .map(|(name, c)| {
                Arc::new(Server {
                    name: name.clone(),
                    config: c.clone(),
                    context: context.clone(),
                    status: Mutex::new(ServerStatus {
                        name: name.clone(),
                        transport: if c.url.is_some() { "http" } else { "stdio" },
                        state: State::Connecting,
                        tools: 0,
                        last_error: None,
                        connects: 0,
                        listings: 0,
                        pid: None,
                        auto_granted: Vec::new(),
                        notes: Vec::new(),
                    }),
                    tools: Mutex::default(),
                    live: Mutex::default(),
                    offers: Mutex::default(),
                    ready: watch::channel(false).0,
                    withheld: Default::default(),
                    listed: listed.clone(),
                    egress_ask: match &context.approver {
                        Some(a)
                            if context.egress.ask
                                && c.command.is_some()
                                && c.grants.as_ref().is_some_and(|g| !g.egress.is_empty()) =>
                        {
                            Some(crate::egress::ask::ServerAsk::new(
                                a.clone(),
                                name,
                                context.approval_timeout,
                            ))
                        }
                        _ => None,
                    },
                })
            })
            .collect();
        Bridge {
            servers,
            shutdown: CancellationToken::new(),
            listed,
        }
    }

    /// Changes after each published listing of any server: what a client
    /// that is told of tool list changes waits on, besides reloads (a
    /// listing swaps in a generation without one).
    pub fn listings(&self) -> watch::Receiver<u64> {
        self.listed.subscribe()
    }

    /// No server is configured.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Start every server's supervisor (in parallel, in the background).
    pub fn start(&self, publish: Publish) {
        for server in &self.servers {
            tokio::spawn(supervise(
                server.clone(),
                publish.clone(),
                self.shutdown.child_token(),
            ));
        }
    }

    /// Wait until every server's first attempt has ended, or `timeout`.
    pub async fn wait_ready(&self, timeout: Duration) {
        let all = self.servers.iter().map(|s| {
            let mut rx = s.ready.subscribe();
            async move {
                let _ = rx.wait_for(|r| *r).await;
            }
        });
        let _ = tokio::time::timeout(timeout, futures::future::join_all(all)).await;
    }

    /// The longest connect timeout of any server.
    pub fn connect_timeout(&self) -> Duration {
        self.servers
            .iter()
            .map(|s| s.connect_timeout())
            .max()
            .unwrap_or_default()
    }

    /// Every server's status, by name.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.servers.iter().map(|s| s.status().clone()).collect()
    }

    /// The tools of every server's latest listing.
    pub fn tools(&self) -> Vec<Arc<ToolEntry>> {
        self.servers
            .iter()
            .flat_map(|s| {
                let tools = s.tools.lock().unwrap_or_else(|p| p.into_inner()).clone();
                tools.iter().cloned().collect::<Vec<_>>()
            })
            .collect()
    }

    /// One note per tool not registered (or adjusted), and per server that
    /// cannot be started.
    pub fn problems(&self) -> Vec<LoadError> {
        let mut out = Vec::new();
        for s in &self.servers {
            let st = s.status();
            let origin = format!("{ORIGIN_PREFIX}{}]", s.name);
            let mut note = |message: String| {
                out.push(LoadError {
                    plugin: s.name.clone(),
                    origin: origin.clone(),
                    message,
                    may_be_policy: false,
                    ..LoadError::default()
                })
            };
            for n in &st.notes {
                note(n.clone());
            }
            let down = match (st.state, &st.last_error) {
                (State::Failed, Some(e)) => format!("the MCP server cannot be started: {e}"),
                (State::Reconnecting, Some(e)) => {
                    format!("the MCP server is not connected (trying again): {e}")
                }
                _ => continue,
            };
            out.push(LoadError {
                plugin: s.name.clone(),
                origin: origin.clone(),
                message: down,
                may_be_policy: false,
                kind: crate::plugin::loader::LoadErrorKind::ServerDown,
                ..LoadError::default()
            });
        }
        out
    }
}

/// Put the bridge's current tools into `generation` in place of the ones
/// it had: tools of plugins and native tools keep their names (a bridged
/// tool whose name is taken is not registered, with a note).
pub fn merge(generation: &mut Generation, bridge: &Bridge) {
    generation
        .tools
        .retain(|_, e| e.body.mcp_server().is_none());
    generation
        .problems
        .retain(|p| !p.origin.starts_with(ORIGIN_PREFIX));
    for entry in bridge.tools() {
        let name = &entry.def.name;
        if let Some(taken) = generation.tools.get(name) {
            generation.problems.push(LoadError {
                plugin: entry.def.meta.provider.clone(),
                origin: format!("{ORIGIN_PREFIX}{}]", entry.def.meta.provider),
                message: format!(
                    "tool `{name}` is not registered: the name is taken by `{}`",
                    taken.def.meta.provider
                ),
                may_be_policy: false,
                ..LoadError::default()
            });
            continue;
        }
        generation.tools.insert(name.clone(), entry);
    }
    generation.problems.extend(bridge.problems());
    generation.tools_digest = Generation::digest_tools(&generation.tools);
}

/// Tells the supervisor about `notifications/tools/list_changed`, and
/// passes on what the server asks of its client during a call ([`ask`]).
struct Handler {
    changed: mpsc::Sender<()>,
    asks: Arc<ask::Asks>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        // One pending re-list covers any number of notifications.
        let _ = self.changed.try_send(());
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let params = serde_json::to_value(request)
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        let answer = self
            .asks
            .forward(ask::Kind::Elicitation, params, context.ct)
            .await?;
        serde_json::from_value(answer).map_err(|e| {
            ErrorData::internal_error(
                format!("the client's answer is not an ElicitResult: {e}"),
                None,
            )
        })
    }

    #[allow(deprecated)]
    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, ErrorData> {
        let params = serde_json::to_value(params)
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        let answer = self
            .asks
            .forward(ask::Kind::Sampling, params, context.ct)
            .await?;
        serde_json::from_value(answer).map_err(|e| {
            ErrorData::internal_error(
                format!("the client's answer is not a CreateMessageResult: {e}"),
                None,
            )
        })
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let token = body::token_text(&params.progress_token);
        self.asks
            .progress(&token, params.progress, params.total, params.message)
            .await;
    }

    fn get_info(&self) -> ClientConfig {
        // What the operator lets this server ask is what toolgate declares.
        let mut capabilities = ClientCapabilities::default();
        if self.asks.elicitation {
            let mut elicitation = rmcp::model::ElicitationCapability::new();
            elicitation.form = Some(Default::default());
            capabilities.elicitation = Some(elicitation);
        }
        if self.asks.sampling {
            capabilities.sampling = Some(Default::default());
        }
        ClientConfig::new(
            capabilities,
            Implementation::new("toolgate", env!("CARGO_PKG_VERSION")),
        )
    }
}

async fn supervise(server: Arc<Server>, publish: Publish, shutdown: CancellationToken) {
    let launch = match &server.config.command {
        None => None,
        Some(_) => {
            let c = &server.context;
            match launch::resolve(
                &server.name,
                &server.config,
                &c.workdir,
                &c.enforcement,
                &c.authority,
                &c.origin,
                launch::Egress {
                    global: &c.egress,
                    record: c.egress_record.get().cloned(),
                    ask: server.egress_ask.clone(),
                },
            ) {
                Ok(l) => {
                    if !l.auto_granted.is_empty() {
                        tracing::info!(
                            server = %server.name,
                            dirs = ?l.auto_granted,
                            "MCP server: its install directories are granted read-only"
                        );
                    }
                    server.status().auto_granted = l.auto_granted.clone();
                    Some(l)
                }
                Err(e) => {
                    tracing::error!(server = %server.name, "MCP server cannot be started: {e}");
                    {
                        let mut st = server.status();
                        st.state = State::Failed;
                        st.last_error = Some(e);
                    }
                    server.ready.send_replace(true);
                    publish();
                    return;
                }
            }
        }
    };
    let mut backoff = FIRST_BACKOFF;
    loop {
        let started = Instant::now();
        let why = connection(&server, launch.as_ref(), &publish, &shutdown).await;
        if shutdown.is_cancelled() {
            return;
        }
        tracing::warn!(server = %server.name, "MCP server disconnected: {}", escape(&why));
        let newly_down = {
            let mut st = server.status();
            let newly_down = st.state != State::Reconnecting;
            st.state = State::Reconnecting;
            st.last_error = Some(why);
            st.pid = None;
            newly_down
        };
        server.ready.send_replace(true);
        // The generation's problems name it (a call to one of its tools is
        // told why it is missing); once per outage, not per attempt.
        if newly_down {
            publish();
        }
        if started.elapsed() >= STABLE_AFTER {
            backoff = FIRST_BACKOFF;
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// A stdio server's process: owned by a task of its own, so that it is
/// killed (its whole group) however the connection ends.
struct Process {
    exited: tokio::sync::oneshot::Receiver<String>,
    kill: CancellationToken,
    stderr: Arc<Mutex<String>>,
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill.cancel();
    }
}

fn spawn_process(
    server: &Server,
    launch: &Launch,
) -> Result<
    (
        Process,
        tokio::process::ChildStdout,
        tokio::process::ChildStdin,
    ),
    String,
> {
    let mut child = toolgate_sandbox::spawn_piped(
        launch.program.clone(),
        &launch.cwd,
        &launch.env,
        &launch.policy,
    )
    .map_err(|e| format!("cannot start it: {e}"))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let stdin = child.stdin.take().ok_or("no stdin")?;
    let stderr_pipe = child.stderr.take();
    server.status().pid = Some(child.id());
    let stderr = Arc::new(Mutex::new(String::new()));
    if let Some(pipe) = stderr_pipe {
        tokio::spawn(drain_stderr(server.name.clone(), pipe, stderr.clone()));
    }
    let kill = CancellationToken::new();
    let (tx, exited) = tokio::sync::oneshot::channel();
    let stop = kill.clone();
    tokio::spawn(async move {
        let status = tokio::select! {
            s = child.wait() => s,
            _ = stop.cancelled() => {
                child.kill();
                child.wait().await
            }
        };
        let _ = tx.send(match status {
            Ok(s) => format!("the server process exited ({s})"),
            Err(e) => format!("the server process could not be waited for: {e}"),
        });
    });
    Ok((
        Process {
            exited,
            kill,
            stderr,
        },
        stdout,
        stdin,
    ))
}

/// Log a stdio server's stderr (escaped, at debug level) and keep its tail.
async fn drain_stderr(
    server: String,
    mut pipe: tokio::process::ChildStderr,
    tail: Arc<Mutex<String>>,
) {
    use tokio::io::AsyncReadExt;
    let mut buf = vec![0u8; 4096];
    loop {
        let n = match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let text = String::from_utf8_lossy(&buf[..n]);
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            tracing::debug!(server = %server, "MCP server stderr: {}", escape(line));
        }
        let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
        t.push_str(&text);
        if t.len() > STDERR_TAIL {
            let mut cut = t.len() - STDERR_TAIL;
            while !t.is_char_boundary(cut) {
                cut += 1;
            }
            t.drain(..cut);
        }
    }
}

/// `why`, with the tail of the server's stderr when it wrote any.
fn with_stderr_tail(why: String, process: Option<&Process>) -> String {
    let Some(p) = process else { return why };
    let tail = p.stderr.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let tail = tail.trim();
    if tail.is_empty() {
        why
    } else {
        format!("{why}; its stderr ends with: {}", escape(tail))
    }
}

/// Commands that fetch a package before they start the server.
const FETCHERS: &[&str] = &["npx", "uvx", "bunx", "pnpx", "pipx"];

/// For a server that stayed silent past its connect deadline and whose
/// command fetches a package first (`npx`, `uvx`, …): what it most likely
/// waits for, as a hint to the operator. A fetcher without egress to its
/// registry retries its lookups for minutes and prints nothing meanwhile.
fn fetcher_hint(server: &Server, process: Option<&Process>) -> Option<String> {
    let wrote = process.is_some_and(|p| {
        !p.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .trim()
            .is_empty()
    });
    let command = server.config.command.as_ref()?;
    let name = command.as_written().file_name()?.to_str()?;
    if wrote || !FETCHERS.contains(&name) {
        return None;
    }
    Some(format!(
        " and wrote nothing: `{name}` fetches its package first, so it needs its cache \
         directory granted read-write and `egress` to its registry \
         (docs/operators/bridging.md, \"`npx` and `uvx` servers\")"
    ))
}

/// One connection, from connect to its end; returns why it ended.
async fn connection(
    server: &Arc<Server>,
    launch: Option<&Launch>,
    publish: &Publish,
    shutdown: &CancellationToken,
) -> String {
    let (changed_tx, mut changed) = mpsc::channel(1);
    let in_flight = Arc::new(body::InFlight::default());
    let handler = Handler {
        changed: changed_tx,
        asks: Arc::new(ask::Asks {
            server: server.name.clone(),
            in_flight: in_flight.clone(),
            elicitation: server.config.elicitation == Some(true),
            sampling: server.config.sampling == Some(true),
        }),
    };
    let ct = shutdown.child_token();
    let timeout = server.connect_timeout();
    // The start of a step that can take seconds (`npx` fetching a
    // package); "MCP server connected" or the failure ends it.
    tracing::info!(
        target: crate::PROGRESS,
        server = %server.name,
        transport = if launch.is_some() { "stdio" } else { "http" },
        timeout_ms = timeout.as_millis() as u64,
        "connecting to the MCP server"
    );
    let mut process = None;
    let started = match launch {
        Some(launch) => {
            let (p, stdout, stdin) = match spawn_process(server, launch) {
                Ok(x) => x,
                Err(e) => return e,
            };
            process = Some(p);
            let transport =
                AsyncRwTransport::new_client(stdout, stdin).with_max_line_length(MAX_STDIO_MESSAGE);
            tokio::time::timeout(timeout, handler.serve_with_ct(transport, ct.clone()))
                .await
                .map(|r| r.map_err(|e| e.to_string()))
        }
        None => match http_transport(&server.config, &server.context.workdir) {
            Ok(transport) => {
                tokio::time::timeout(timeout, handler.serve_with_ct(transport, ct.clone()))
                    .await
                    .map(|r| r.map_err(|e| e.to_string()))
            }
            Err(e) => Ok(Err(e)),
        },
    };
    let with_stderr =
        |why: String, process: &Option<Process>| with_stderr_tail(why, process.as_ref());
    let running = match started {
        Err(_) => {
            let why = format!("it did not initialize within {} ms", timeout.as_millis());
            let why = match fetcher_hint(server, process.as_ref()) {
                Some(hint) => format!("{why}{hint}"),
                None => why,
            };
            return with_stderr(why, &process);
        }
        Ok(Err(e)) => {
            // Give a dying process a moment so its stderr explains why.
            tokio::time::sleep(Duration::from_millis(100)).await;
            return with_stderr(format!("the MCP handshake failed: {e}"), &process);
        }
        Ok(Ok(r)) => r,
    };
    let peer = running.peer().clone();
    let session = Arc::new(Session {
        server: server.name.clone(),
        peer: peer.clone(),
        closed: CancellationToken::new(),
        why: Mutex::new(None),
        egress_ask: server.egress_ask.clone(),
        in_flight,
    });
    let mut waiting = Box::pin(running.waiting());
    let why = 'connected: {
        if let Err(e) = list(server, &session, timeout, publish).await {
            break 'connected e;
        }
        {
            let mut st = server.status();
            st.state = State::Connected;
            st.connects += 1;
            st.last_error = None;
        }
        *server.live.lock().unwrap_or_else(|p| p.into_inner()) = Some(session.clone());
        server.ready.send_replace(true);
        tracing::info!(target: crate::PROGRESS, server = %server.name, "MCP server connected");
        let mut exited = process.as_mut().map(|p| &mut p.exited);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break 'connected "the host is stopping".to_string(),
                Some(()) = changed.recv() => {
                    if let Err(e) = list(server, &session, timeout, publish).await {
                        break 'connected e;
                    }
                }
                // Withheld tools: listed again once the operator accepts.
                _ = tokio::time::sleep(pins::RECHECK), if server.withholds() => {
                    if server.accepted().await
                        && let Err(e) = list(server, &session, timeout, publish).await
                    {
                        break 'connected e;
                    }
                }
                why = async {
                    match exited.as_mut() {
                        Some(rx) => rx.await.unwrap_or_else(|_| "the server process ended".into()),
                        None => std::future::pending().await,
                    }
                } => break 'connected why,
                quit = &mut waiting => {
                    break 'connected format!("the connection closed ({quit:?})");
                }
            }
        }
    };
    let why = with_stderr(why, &process);
    *server.live.lock().unwrap_or_else(|p| p.into_inner()) = None;
    *session.why.lock().unwrap_or_else(|p| p.into_inner()) = Some(why.clone());
    session.closed.cancel();
    ct.cancel();
    drop(process);
    why
}

/// List the server's tools and publish them as a new generation of its tools.
async fn list(
    server: &Arc<Server>,
    session: &Arc<Session>,
    timeout: Duration,
    publish: &Publish,
) -> Result<(), String> {
    let c = &server.context;
    let listing = list_bounded(&session.peer, &c.budgets);
    let tools = match tokio::time::timeout(timeout, listing).await {
        Err(_) => {
            return Err(format!(
                "tools/list did not answer within {} ms",
                timeout.as_millis()
            ));
        }
        Ok(Err(e)) => return Err(e),
        Ok(Ok(t)) => t,
    };
    let filter = convert::Filter {
        allow: server.config.tools_allow.as_deref(),
        deny: &server.config.tools_deny,
        tool_timeouts: &c.tool_timeouts,
        timeout_ms: server.config.timeout_ms,
        namespaced: server.config.is_namespaced(),
    };
    let digests: BTreeMap<String, String> = if server.config.is_pinned() {
        tools
            .iter()
            .map(|t| (t.name.to_string(), pins::digest(t)))
            .collect()
    } else {
        BTreeMap::new()
    };
    let (mut listed, mut notes) = convert::listing(&server.name, tools, &filter, &c.budgets);
    // Pinned definitions: a changed one is withheld (see `pins`). A store
    // that cannot say fails the listing (closed), to be tried again.
    let before = server
        .withheld
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let record = |action: &str, tool: &str, pinned: Option<&str>, now: &str| {
        if let Some(sink) = c.events.get() {
            sink(
                "pin",
                serde_json::json!({
                    "server": server.name, "tool": tool, "action": action,
                    "pinned": pinned, "sha256": now,
                }),
            );
        }
    };
    let mut withheld = Vec::new();
    if !digests.is_empty() {
        let mut kept = Vec::with_capacity(listed.len());
        for l in listed {
            let Some(now) = digests.get(&l.raw) else {
                kept.push(l);
                continue;
            };
            let configured = server.config.pins.get(&l.raw);
            let verdict = match configured {
                Some(pinned) => Ok(pins::check_configured(pinned, now)),
                None => pins::check(c.pins.as_ref(), &server.name, &l.raw, now).await,
            };
            match verdict {
                Ok(pins::Verdict::Same) => kept.push(l),
                Ok(pins::Verdict::Pinned) => {
                    tracing::debug!(server = %server.name, tool = %l.raw, digest = %now, "tool definition pinned on first use");
                    // A tool withheld until now: the operator accepted it.
                    if before.contains(&l.raw) {
                        record("accepted", &l.raw, None, now);
                    }
                    kept.push(l);
                }
                Ok(pins::Verdict::Changed { pinned }) => {
                    if !before.contains(&l.raw) {
                        record("withheld", &l.raw, Some(&pinned), now);
                    }
                    withheld.push(l.raw.clone());
                    let accept = match configured {
                        Some(_) => format!(
                            "it is pinned in the configuration: after reviewing it, put its new \
                             digest in `[mcp.servers.{}.pins] {}` (and restart)",
                            server.name, l.raw
                        ),
                        None => format!(
                            "after reviewing it, accept it with `toolgate bridge accept {} {}`",
                            server.name, l.raw
                        ),
                    };
                    notes.push(format!(
                        "tool `{}` is withheld: its definition changed since it was pinned \
                         (sha256 {} → {}); {accept}",
                        l.raw,
                        &pinned[..pinned.len().min(12)],
                        &now[..12],
                    ));
                }
                Err(e) => {
                    return Err(format!(
                        "the pins of its tools could not be checked in the state store: {e}"
                    ));
                }
            }
        }
        listed = kept;
    }
    *server.withheld.lock().unwrap_or_else(|p| p.into_inner()) = withheld;
    for n in &notes {
        tracing::warn!(server = %server.name, "{n}");
    }
    let raw = listed
        .iter()
        .map(|l| (l.def.name.clone(), l.raw.clone()))
        .collect();
    let body = Arc::new(BridgedTools::new(
        session.clone(),
        raw,
        server.config.parallel,
        c.budgets,
    ));
    let entries: Vec<Arc<ToolEntry>> = listed
        .into_iter()
        .map(|l| {
            Arc::new(ToolEntry {
                def: l.def,
                parameters: l.parameters,
                output: l.output,
                body: body.clone(),
            })
        })
        .collect();
    {
        let mut st = server.status();
        st.tools = entries.len();
        st.listings += 1;
        st.notes = notes;
    }
    *server.tools.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(entries);
    publish();
    server.listed.send_modify(|n| *n += 1);
    Ok(())
}

/// Every page of the server's `tools/list`, bounded while it is read: at
/// most [`Budgets::max_listing_pages`] pages, [`Budgets::max_listing_tools`]
/// tools and [`Budgets::max_listing_bytes`] bytes (each tool as JSON).
/// Past a limit the listing is cut off with an error naming it; what was
/// read is dropped.
async fn list_bounded(
    peer: &rmcp::Peer<RoleClient>,
    budgets: &Budgets,
) -> Result<Vec<rmcp::model::Tool>, String> {
    let mut tools = Vec::new();
    let mut bytes = 0usize;
    let mut cursor = None;
    for page in 1.. {
        if page > budgets.max_listing_pages {
            return Err(format!(
                "tools/list was cut off: the server kept paging past {} pages (the host's \
                 limit `max_listing_pages`, docs/operators/bridging.md); fix or drop the server",
                budgets.max_listing_pages
            ));
        }
        let params = rmcp::model::PaginatedRequestParams::default().with_cursor(cursor);
        let listed = peer
            .list_tools(Some(params))
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?;
        for tool in listed.tools {
            bytes = bytes.saturating_add(serde_json::to_vec(&tool).map_or(usize::MAX, |v| v.len()));
            if bytes > budgets.max_listing_bytes {
                return Err(format!(
                    "tools/list was cut off: its tools took more than {} bytes by page {page} \
                     (the host's limit `max_listing_bytes`, docs/operators/bridging.md)",
                    budgets.max_listing_bytes
                ));
            }
            if tools.len() >= budgets.max_listing_tools {
                return Err(format!(
                    "tools/list was cut off: it listed more than {} tools by page {page} (the \
                     host's limit `max_listing_tools`, docs/operators/bridging.md)",
                    budgets.max_listing_tools
                ));
            }
            tools.push(tool);
        }
        match listed.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    Ok(tools)
}

fn http_transport(
    config: &McpServerConfig,
    workdir: &std::path::Path,
) -> Result<rmcp::transport::StreamableHttpClientTransport<reqwest::Client>, String> {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let url = config.url.as_deref().unwrap_or_default();
    let mut c = StreamableHttpClientTransportConfig::with_uri(url);
    let token = match (&config.bearer_token_env, &config.bearer_token_file) {
        (Some(var), _) => Some(
            std::env::var(var)
                .map_err(|_| format!("the bearer token variable `{var}` is not set"))?,
        ),
        // Relative to the host's working directory, as the protected set
        // has it.
        (None, Some(file)) => Some(read_token(&workdir.join(file).to_string_lossy())?),
        (None, None) => None,
    };
    if let Some(t) = token {
        c = c.auth_header(t.trim().to_string());
    }
    let mut headers = std::collections::HashMap::new();
    for (k, v) in &config.headers {
        let name =
            http::HeaderName::from_bytes(k.as_bytes()).map_err(|e| format!("header {k:?}: {e}"))?;
        let value = http::HeaderValue::from_str(v).map_err(|e| format!("header {k:?}: {e}"))?;
        headers.insert(name, value);
    }
    c = c.custom_headers(headers);
    crate::tls::ensure();
    Ok(rmcp::transport::StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        c,
    ))
}

/// A bearer token file: one line, not readable by other users.
fn read_token(path: &str) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|e| format!("bearer token file {path}: {e}"))?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "bearer token file {path} is readable by other users; `chmod 600` it"
        ));
    }
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("bearer token file {path}: {e}"))?;
    let token = text.trim();
    if token.is_empty() || token.contains(char::is_whitespace) {
        return Err(format!(
            "bearer token file {path} must hold one token on one line"
        ));
    }
    Ok(token.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_token_file_must_be_private_and_hold_one_token() {
        let dir = std::env::temp_dir().join(format!("toolgate-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        let path = file.to_str().unwrap();
        std::fs::write(&file, "s3cret\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(read_token(path).unwrap_err().contains("chmod 600"));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_token(path).unwrap(), "s3cret");
        std::fs::write(&file, "one\ntwo\n").unwrap();
        assert!(read_token(path).unwrap_err().contains("one token"));
        std::fs::write(&file, "\n").unwrap();
        assert!(read_token(path).unwrap_err().contains("one token"));
        assert!(read_token(dir.join("missing").to_str().unwrap()).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_missing_token_variable_is_named() {
        let config = McpServerConfig {
            url: Some("http://127.0.0.1:1/mcp".into()),
            bearer_token_env: Some("TOOLGATE_TEST_NO_SUCH_TOKEN_VAR".into()),
            ..McpServerConfig::default()
        };
        let err = http_transport(&config, std::path::Path::new("."))
            .err()
            .unwrap();
        assert!(err.contains("TOOLGATE_TEST_NO_SUCH_TOKEN_VAR"), "{err}");
    }

    #[test]
    fn bad_headers_and_both_tokens_are_refused() {
        let config = McpServerConfig {
            url: Some("http://127.0.0.1:1/mcp".into()),
            bearer_token_env: Some("A".into()),
            bearer_token_file: Some("/x".into()),
            headers: [("bad header".to_string(), "v".to_string())].into(),
            ..McpServerConfig::default()
        };
        let problems = config::check_mcp_server("s", &config).join("\n");
        assert!(problems.contains("not both"), "{problems}");
        assert!(
            problems.contains("/mcp/servers/s/headers/bad header: not a valid HTTP header"),
            "{problems}"
        );
    }
}
