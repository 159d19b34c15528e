//! The MCP handler: `tools/list`, `tools/call`, `logging/setLevel`,
//! `subscriptions/listen`; bridged servers' resources and prompts
//! ([`super::passthrough`]).
//!
//! The protocol itself (handshake, version negotiation — every revision the
//! SDK knows, the newest included —, request dispatch, cancellation tokens,
//! unknown methods) is the SDK's; what is ours is what a call means:
//!
//! * `tools/call` → a [`ToolCall`] whose id is the JSON-RPC request id, run
//!   through [`Arrivals`] (the scheduler's rules, the whole pipeline), with a
//!   turn of its own: the request's cancellation token (fired by
//!   `notifications/cancelled`, and by the client going away) and, when the
//!   client can answer elicitations, an approver that asks it
//!   ([`super::approval`]).
//! * the [`CallRecord`] → a `CallToolResult`: its content blocks, `isError`,
//!   `structuredContent` (the value of a tool with an output schema, which
//!   the record keeps: see [`toolgate::outcome`]), and in `_meta` under
//!   `toolgate/error` the closed-set code, stage, decider and details — the
//!   same error object `toolgate run` prints.
//! * progress: a request that carries a progress token gets
//!   `notifications/progress` when the call starts; none when it ends,
//!   since the result follows at once (a final progress just before it made
//!   Claude Code log "unknown token" and drop the connection).
//! * logging: nothing is sent to the client until it asks for a level
//!   (`logging/setLevel` in a session, `_meta` `io.modelcontextprotocol/logLevel`
//!   on a stateless request); then each call's end (info; a refusal is a
//!   warning, a crash an error) and start (debug) at or above that level. The operator's log (stderr,
//!   `RUST_LOG`) is separate and never goes to stdout.
//!
//! * reloads: when a reload changes the tools the session's scope sees,
//!   the client gets `notifications/tools/list_changed`; an update the
//!   reload refused (the previous version keeps serving) is sent as a log
//!   message (`warning`, logger `toolgate/lifecycle`) when the client asked
//!   for that level.
//!
//! * `subscriptions/listen` (2026-07-28, where the session-less client has
//!   no other channel): tool list changes, the same ones, on the stream of
//!   the listen request, until the client cancels it.
//! * a method the SDK does not know, or a known one whose params do not
//!   decode: "method not found: X", or `-32602` naming what is wrong
//!   ([`super::exact`]).
//!
//! MCP logging is deprecated by the newest revision (SEP-2577) but is what
//! clients of the older ones use; it is served until the SDK drops it.
#![allow(deprecated)]

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use rmcp::ErrorData;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
    ContentBlock, CustomRequest, CustomResult, ErrorCode, GetPromptRequestParams,
    GetPromptResponse, GetTaskParams, GetTaskResult, Implementation, InputRequiredResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    LoggingLevel, LoggingMessageNotificationParam, MetaObject, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ResourceContents, ServerCapabilities, ServerConfig, ServerNotification,
    SetLevelRequestParams, SubscriptionFilter, TASKS_EXTENSION_ID, Tool, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer, SubscriptionContext};
use serde_json::{Map, Value, json};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::approval::{ElicitingApprover, ParkingApprover, RetriedApprover, RoundTripApprover};
use super::session::SessionGone;
use super::{passthrough, projection};
use toolgate::approval::queue::Resumed;
use toolgate::call::ToolCall;
use toolgate::content::{Content, JSON_RESOURCE_URI, ResourceContents as Contents};
use toolgate::host::Toolgate;
use toolgate::outcome::CallRecord;
use toolgate::pipeline::Approver;
use toolgate::scheduler::{Arrivals, ArrivalsError};
use toolgate::turn::TurnOptions;

/// JSON-RPC error code of a call refused because the scheduler is full
/// (the implementation-defined server-error range).
pub const BUSY: ErrorCode = ErrorCode(-32000);

/// Something a session holds until it ends (its share of the HTTP
/// session slots), released when the session's handler is dropped.
pub struct Slot(#[allow(dead_code)] Box<dyn Send + Sync>);

impl Slot {
    pub fn new(guard: impl Send + Sync + 'static) -> Self {
        Slot(Box::new(guard))
    }
}

/// The tools of one generation as MCP shows them, built once per generation.
type ToolCache = Mutex<Option<(u64, Arc<Vec<Tool>>)>>;

/// toolgate's MCP server handler. One per client session (stdio: one per
/// process).
///
/// Which scheduler a call goes through: a session's calls go through the
/// session's own (its exclusive calls are barriers for its own calls, and
/// an approval it waits for holds up nobody else); stateless requests (the
/// 2026-07-28 revision) belong to no session, so they share one — there an
/// exclusive call runs alone among all of them. Approvals never wait in the
/// shared one: a stateless request's `ask` ends the request with an
/// `InputRequiredResult` at once — with the approval queue too, whose
/// entry the client's retry names; that retry waits for the decision
/// before it enters the scheduler (see [`super::approval`]).
pub struct ToolgateServer {
    host: Toolgate,
    /// This session's scheduler.
    arrivals: Arc<Arrivals>,
    /// The scheduler of stateless requests.
    shared: Arc<Arrivals>,
    tools: Arc<ToolCache>,
    /// The agent scope every call of this server comes from (`--scope`).
    scope: Arc<str>,
    /// The client's `logging/setLevel`; `NO_LOGS` until it sends one.
    level: Arc<AtomicU8>,
    /// Whether a client that declared elicitation answers `ask` itself
    /// (`--no-elicitation`: never; the operator's approver answers).
    elicitation: bool,
    /// The arguments of the harnesses the operator accepts
    /// (`--accept-harness-arguments`): stripped before validation
    /// ([`super::harness`]).
    harness_arguments: Arc<[&'static str]>,
    /// Whether tools declare their `outputSchema` and results carry
    /// `structuredContent` (`--structured-content`; off by default, see
    /// [`Self::with_structured_content`]).
    structured: bool,
    /// How long a 2026-07-28 client may treat a list as fresh (`ttlMs`,
    /// SEP-2549; `[serve] list_ttl_ms`).
    list_ttl_ms: u64,
    /// The tasks of calls that met the approval queue (the Tasks
    /// extension), shared by every session and stateless request.
    tasks: Arc<super::tasks::Tasks>,
    /// Stops this session's reload notifier when the handler is dropped
    /// (the session ended).
    closed: CancellationToken,
    _closed: DropGuard,
    _slot: Option<Slot>,
}

const NO_LOGS: u8 = u8::MAX;

impl ToolgateServer {
    /// A handler for one session of `host`'s tools, scheduling its calls in
    /// `arrivals`.
    pub fn new(host: Toolgate, arrivals: Arc<Arrivals>) -> Self {
        let closed = CancellationToken::new();
        ToolgateServer {
            host,
            shared: arrivals.clone(),
            arrivals,
            tools: Arc::default(),
            scope: Arc::from(""),
            level: Arc::new(AtomicU8::new(NO_LOGS)),
            elicitation: true,
            harness_arguments: Arc::from([]),
            structured: false,
            list_ttl_ms: 0,
            tasks: super::tasks::Tasks::new(std::time::Duration::from_millis(
                toolgate::budgets::TASKS_KEEP_MS,
            )),
            _closed: closed.clone().drop_guard(),
            closed,
            _slot: None,
        }
    }

    /// The host this server serves.
    pub fn host(&self) -> &Toolgate {
        &self.host
    }

    /// Whether the host takes calls now (`/readyz`): the generation, its
    /// loading settled, its blocked plugins.
    pub fn readiness_probe(&self) -> impl Fn() -> super::health::Readiness + Send + Sync + 'static {
        use toolgate::scheduler::Dispatch;
        let (host, scope) = (self.host.clone(), self.scope.clone());
        move || {
            let generation = host.generation_for(&scope);
            super::health::Readiness {
                generation: generation.number,
                loaded: *host.settled().borrow(),
                blocked: generation.blocked.len(),
            }
        }
    }

    /// `false`: never ask the client (elicitation), even when it can
    /// answer; every `ask` goes to the host's approver (`--approve`).
    pub fn with_elicitation(mut self, elicitation: bool) -> Self {
        self.elicitation = elicitation;
        self
    }

    /// Accept the arguments these harnesses add to every call
    /// ([`super::harness`]): removed before validation where the tool does
    /// not declare them, and recorded as stripped.
    pub fn with_harness_arguments(mut self, harnesses: &[&super::harness::Harness]) -> Self {
        let mut names: Vec<&'static str> = harnesses
            .iter()
            .flat_map(|h| h.arguments.iter().copied())
            .collect();
        names.sort_unstable();
        names.dedup();
        self.harness_arguments = Arc::from(names);
        self
    }

    /// `true`: tools with an output schema declare it (`outputSchema`) and
    /// their results carry the value (`structuredContent`) beside the
    /// rendered content. Off by default, because the harnesses people run
    /// (Claude Code, Codex) then hand the model the JSON value instead of
    /// the text the tool rendered for it: what the model sees would
    /// depend on the client. Off, every client gives the model the same
    /// rendered content, the result whose digest the audit record keeps.
    pub fn with_structured_content(mut self, structured: bool) -> Self {
        self.structured = structured;
        self
    }

    /// How long a 2026-07-28 client may treat a list result as fresh
    /// (`ttlMs`); 0 (the default): not at all, as any reload may change it.
    pub fn with_list_ttl_ms(mut self, ttl_ms: u64) -> Self {
        self.list_ttl_ms = ttl_ms;
        self
    }

    /// SEP-2549's cache hints for a list result of a 2026-07-28 request
    /// (earlier revisions have no such fields): `ttlMs` from
    /// [`Self::with_list_ttl_ms`], and `cacheScope` `private` when what a
    /// list holds may depend on who asks — a caller `[auth]` validated, or
    /// `[[access]]` rules — so no shared cache hands one caller's list (or
    /// a list behind a token) to another; `public` otherwise.
    fn cache_hints(&self, context: &RequestContext<RoleServer>) -> Option<(u64, CacheScope)> {
        if !stateless(context) {
            return None;
        }
        let authenticated = context
            .extensions
            .get::<http::request::Parts>()
            .is_some_and(|p| {
                p.extensions
                    .get::<Arc<toolgate::identity::Caller>>()
                    .is_some()
            });
        let scope = if authenticated || !self.host.settings().access.load().is_empty() {
            CacheScope::Private
        } else {
            CacheScope::Public
        };
        Some((self.list_ttl_ms, scope))
    }

    /// The record as this server answers it: without the structured
    /// value unless [`Self::with_structured_content`].
    fn answer(&self) -> fn(CallRecord) -> CallToolResult {
        if self.structured {
            to_result
        } else {
            |mut record| {
                record.structured_content = None;
                to_result(record)
            }
        }
    }

    /// Serve the tools, and run the calls, of agent scope `scope` (see
    /// [`toolgate::registry::scopes`]).
    pub fn with_scope(mut self, scope: &str) -> Self {
        self.scope = Arc::from(scope);
        self
    }

    /// The same server for another session: shares the host, the
    /// stateless scheduler and the tool cache, has a scheduler of its own
    /// (as large as the shared one), and holds `slot` until the session
    /// ends.
    pub fn for_session(&self, slot: Option<Slot>) -> Self {
        let closed = CancellationToken::new();
        ToolgateServer {
            host: self.host.clone(),
            arrivals: Arc::new(Arrivals::new(self.host.clone(), self.shared.max_queued())),
            shared: self.shared.clone(),
            tools: self.tools.clone(),
            scope: self.scope.clone(),
            level: Arc::new(AtomicU8::new(NO_LOGS)),
            elicitation: self.elicitation,
            harness_arguments: self.harness_arguments.clone(),
            structured: self.structured,
            list_ttl_ms: self.list_ttl_ms,
            tasks: self.tasks.clone(),
            _closed: closed.clone().drop_guard(),
            closed,
            _slot: slot,
        }
    }

    /// The tools `caller` may see (`[[access]]`): every tool when no rule
    /// names any; else the list without the tools kept from it — and under
    /// Code Mode a `run_code` whose description declares only the tools it
    /// may call.
    fn tools_for(&self, caller: Option<&toolgate::identity::Caller>) -> Vec<Tool> {
        let access = self.host.settings().access.load_full();
        let all = self.mcp_tools();
        if access.is_empty() {
            return all.as_ref().clone();
        }
        if !self.host.code_mode() {
            return all
                .iter()
                .filter(|t| access.allows(&t.name, caller))
                .cloned()
                .collect();
        }
        if !access.allows(toolgate::codemode::RUN_CODE, caller) {
            return Vec::new();
        }
        let generation = self.host.generation_for(&self.scope);
        let visible: Vec<_> = generation
            .model_tools()
            .into_iter()
            .filter(|t| access.allows(&t.name, caller))
            .collect();
        let projected = toolgate::codemode::signatures::project(&visible);
        all.iter()
            .cloned()
            .zip(projected.first())
            .map(|(mut t, p)| {
                t.description = Some(p.description.clone().into());
                t
            })
            .collect()
    }

    fn mcp_tools(&self) -> Arc<Vec<Tool>> {
        let generation = self.host.generation_for(&self.scope);
        let mut cache = self.tools.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((number, tools)) = cache.as_ref()
            && *number == generation.number
        {
            return tools.clone();
        }
        // Code Mode: `run_code` alone, its description declaring the rest.
        let tools: Arc<Vec<Tool>> = Arc::new(if self.host.code_mode() {
            let projected = toolgate::codemode::signatures::project(&generation.model_tools());
            generation
                .tools
                .get(toolgate::codemode::RUN_CODE)
                .zip(projected.first())
                .map(|(t, p)| {
                    let mut def = t.def.clone();
                    def.description = p.description.clone();
                    projection::mcp_tool(&def)
                })
                .into_iter()
                .collect()
        } else {
            generation
                .tools
                .values()
                .map(|t| projection::mcp_tool(&t.def))
                .collect()
        });
        let tools = if self.structured {
            tools
        } else {
            Arc::new(
                tools
                    .iter()
                    .cloned()
                    .map(|mut t| {
                        t.output_schema = None;
                        t
                    })
                    .collect(),
            )
        };
        *cache = Some((generation.number, tools.clone()));
        tools
    }

    /// Send a log message if the client asked for this level: in the
    /// request's `_meta` (the stateless revision) or with
    /// `logging/setLevel` (a session).
    async fn log(
        &self,
        context: &RequestContext<RoleServer>,
        level: LoggingLevel,
        data: impl FnOnce() -> Value,
    ) {
        let wanted = match context.meta.log_level() {
            Some(l) => l as u8,
            None => self.level.load(Ordering::Relaxed),
        };
        if (level as u8) < wanted {
            return;
        }
        let peer = &context.peer;
        let mut param = LoggingMessageNotificationParam::new(level, data());
        param.logger = Some("toolgate".into());
        if let Err(e) = peer.notify_logging_message(param).await {
            tracing::debug!(error = %e, "could not send a log message to the client");
        }
    }
}

/// What one session's caller sees of its scope's tools: the tools' digest
/// and, under `[[access]]`, which of them the caller may see — so that a
/// change of the rules (a configuration reload) that shows or hides a tool
/// for this caller is a change of its list, and one that does not is not.
fn visible_tools(
    host: &Toolgate,
    scope: &str,
    caller: Option<&toolgate::identity::Caller>,
) -> (u64, Vec<bool>) {
    let generation = host.generation_for(scope);
    let access = host.settings().access.load_full();
    let shown = generation
        .tools
        .keys()
        .map(|name| access.allows(name, caller))
        .chain([access.allows(toolgate::codemode::RUN_CODE, caller)])
        .collect();
    (generation.tools_digest, shown)
}

/// Tell one session's client what reloads change: its tool list (a
/// `notifications/tools/list_changed` when the tools its scope shows its
/// caller differ), and updates that were refused (a log message). Ends with
/// the session.
async fn notify_reloads(
    host: Toolgate,
    scope: Arc<str>,
    caller: Option<Arc<toolgate::identity::Caller>>,
    peer: Peer<RoleServer>,
    level: Arc<AtomicU8>,
    closed: CancellationToken,
) {
    use tokio::sync::broadcast::error::RecvError;
    let mut events = host.subscribe();
    let mut listings = host.bridge().map(|b| b.listings());
    let mut seen = visible_tools(&host, &scope, caller.as_deref());
    let mut skills = host.skills();
    loop {
        let event = tokio::select! {
            _ = closed.cancelled() => return,
            _ = bridged_listing(&mut listings) => None,
            e = events.recv() => match e {
                Ok(e) => Some(e),
                // Fell behind: the current state says what matters.
                Err(RecvError::Lagged(_)) => None,
                Err(RecvError::Closed) => return,
            },
        };
        if peer.is_transport_closed() {
            return;
        }
        let now = visible_tools(&host, &scope, caller.as_deref());
        if now != seen {
            seen = now;
            if let Err(e) = peer.notify_tool_list_changed().await {
                tracing::debug!(error = %e, "could not send tools/list_changed");
                return;
            }
        }
        // The skills are prompts too (`super::skills`).
        let catalog = host.skills();
        if *catalog != *skills {
            skills = catalog;
            if super::skills::offered(&host, &scope).is_some()
                && let Err(e) = peer.notify_prompt_list_changed().await
            {
                tracing::debug!(error = %e, "could not send prompts/list_changed");
                return;
            }
        }
        let Some(event) = event else { continue };
        if (LoggingLevel::Warning as u8) < level.load(Ordering::Relaxed) {
            continue;
        }
        let messages = event
            .refused
            .iter()
            .map(|r| json!({"event": "update refused", "plugin": r.plugin, "origin": r.origin, "error": r.message, "generation": event.generation}))
            .chain(event.config_problem.iter().map(|m| {
                json!({"event": "configuration refused", "error": m, "generation": event.generation})
            }));
        for data in messages {
            let mut param = LoggingMessageNotificationParam::new(LoggingLevel::Warning, data);
            param.logger = Some("toolgate/lifecycle".into());
            if peer.notify_logging_message(param).await.is_err() {
                return;
            }
        }
    }
}

/// Returns after a bridged server's listing was published (a generation
/// swapped in without a reload event); never without a bridge.
async fn bridged_listing(listings: &mut Option<tokio::sync::watch::Receiver<u64>>) {
    let Some(rx) = listings else {
        return std::future::pending().await;
    };
    if rx.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Is this request on the stateless revision (no server → client requests)?
fn stateless(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

async fn progress(
    peer: &Peer<RoleServer>,
    token: &Option<ProgressToken>,
    done: f64,
    message: &str,
) {
    if let Some(token) = token {
        let mut param = ProgressNotificationParam::new(token.clone(), done);
        param.total = Some(1.0);
        param.message = Some(message.to_string());
        if let Err(e) = peer.notify_progress(param).await {
            tracing::debug!(error = %e, "could not send a progress notification");
        }
    }
}

impl ServerHandler for ToolgateServer {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_logging()
            .build();
        // The approval queue's waiting calls as tasks (`super::tasks`).
        if self.host.approvals().is_some() {
            capabilities
                .extensions
                .get_or_insert_with(Default::default)
                .insert(TASKS_EXTENSION_ID.to_string(), Default::default());
        }
        // Bridged servers' resources and prompts are passed through.
        if self.host.bridge().is_some_and(|b| b.passes_through()) {
            capabilities.resources = Some(Default::default());
            capabilities.prompts = Some(Default::default());
        }
        // The host's skills are prompts too; a changed catalog is said.
        if super::skills::offered(&self.host, &self.scope).is_some() {
            let mut prompts = rmcp::model::PromptsCapability::default();
            prompts.list_changed = Some(true);
            capabilities.prompts = Some(prompts);
        }
        let mut info = ServerConfig::new(capabilities);
        info.server_info = Implementation::new("toolgate", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(
            "Every tool call passes toolgate's policy pipeline (hooks, approvals, guards). \
             A refused call is an error result whose _meta[\"toolgate/error\"] names the \
             code, the stage and who decided."
                .into(),
        );
        info
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // The session's caller (`[auth]`): sessions are bound to who opened
        // them, so it is the caller of every request of the session.
        let caller = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<Arc<toolgate::identity::Caller>>())
            .cloned();
        tokio::spawn(notify_reloads(
            self.host.clone(),
            self.scope.clone(),
            caller,
            context.peer,
            self.level.clone(),
            self.closed.clone(),
        ));
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<Arc<toolgate::identity::Caller>>());
        let mut list = ListToolsResult::with_all_items(self.tools_for(caller.map(|c| &**c)));
        if let Some((ttl, scope)) = self.cache_hints(&context) {
            list = list.with_ttl_ms(ttl).with_cache_scope(scope);
        }
        Ok(list)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let resources = match self.host.bridge() {
            Some(b) => {
                b.resources(&passthrough::visible(&self.host, &self.scope))
                    .await
            }
            None => Vec::new(),
        };
        let mut list = ListResourcesResult::with_all_items(resources);
        if let Some((ttl, scope)) = self.cache_hints(&context) {
            list = list.with_ttl_ms(ttl).with_cache_scope(scope);
        }
        Ok(list)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let templates = match self.host.bridge() {
            Some(b) => {
                b.resource_templates(&passthrough::visible(&self.host, &self.scope))
                    .await
            }
            None => Vec::new(),
        };
        let mut list = ListResourceTemplatesResult::with_all_items(templates);
        if let Some((ttl, scope)) = self.cache_hints(&context) {
            list = list.with_ttl_ms(ttl).with_cache_scope(scope);
        }
        Ok(list)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        passthrough::read(&self.host, &self.scope, &request.uri)
            .await
            .map(ReadResourceResponse::Complete)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let mut prompts = super::skills::offered(&self.host, &self.scope)
            .map(|c| super::skills::prompts(&c))
            .unwrap_or_default();
        if let Some(b) = self.host.bridge() {
            let bridged = b
                .prompts(&passthrough::visible(&self.host, &self.scope))
                .await;
            // A skill's name wins over a bridged prompt's.
            let skills: std::collections::HashSet<String> =
                prompts.iter().map(|p| p.name.clone()).collect();
            prompts.extend(bridged.into_iter().filter(|p| !skills.contains(&p.name)));
        }
        let mut list = ListPromptsResult::with_all_items(prompts);
        if let Some((ttl, scope)) = self.cache_hints(&context) {
            list = list.with_ttl_ms(ttl).with_cache_scope(scope);
        }
        Ok(list)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if let Some(found) = super::skills::offered(&self.host, &self.scope)
            .and_then(|c| super::skills::get(&c, &request.name))
        {
            return Ok(GetPromptResponse::Complete(found));
        }
        passthrough::get_prompt(&self.host, &self.scope, &request.name, request.arguments)
            .await
            .map(GetPromptResponse::Complete)
    }

    /// A method the SDK does not know, or one it knows whose params did not
    /// decode (it then arrives here): `-32602` saying what is wrong for the
    /// latter, "method not found: X" for the former.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Err(
            super::exact::invalid_params(&request.method, request.params.as_ref()).unwrap_or_else(
                || {
                    ErrorData::new(
                        ErrorCode::METHOD_NOT_FOUND,
                        format!("method not found: {}", request.method),
                        None,
                    )
                },
            ),
        )
    }

    /// `subscriptions/listen` (2026-07-28): tool list changes only (this
    /// server has neither prompts nor resources of its own).
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed.filter(|wanted| *wanted);
        Some(accepted)
    }

    /// One `subscriptions/listen` stream: a `notifications/tools/list_changed`
    /// on it whenever the tools this scope shows its caller change (a
    /// reload, a bridged server's new listing, a change of `[[access]]`),
    /// until the client cancels it (closes the stream, or
    /// `notifications/cancelled`) or the session ends.
    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        use tokio::sync::broadcast::error::RecvError;
        if subscription.accepted().tools_list_changed != Some(true) {
            subscription.cancelled().await;
            return Ok(());
        }
        let mut events = self.host.subscribe();
        let mut listings = self.host.bridge().map(|b| b.listings());
        // The caller of the request that opened the stream (`[auth]`): the
        // tools it sees are what may change for it.
        let caller = subscription
            .request_context()
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<Arc<toolgate::identity::Caller>>())
            .cloned();
        let mut seen = visible_tools(&self.host, &self.scope, caller.as_deref());
        loop {
            tokio::select! {
                _ = subscription.cancelled() => return Ok(()),
                _ = self.closed.cancelled() => return Ok(()),
                _ = bridged_listing(&mut listings) => {}
                event = events.recv() => {
                    if let Err(RecvError::Closed) = event {
                        return Ok(());
                    }
                }
            }
            let now = visible_tools(&self.host, &self.scope, caller.as_deref());
            if now == seen {
                continue;
            }
            seen = now;
            let changed = ServerNotification::ToolListChangedNotification(Default::default());
            if let Err(e) = subscription.sink().send(changed).await {
                tracing::debug!(error = %e, "a subscription's client is gone");
                return Ok(());
            }
        }
    }

    /// `tasks/get` (the Tasks extension): the task's state, its result
    /// inlined once it ended.
    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let slot = self.tasks.lookup(&request.task_id, &owner(&context))?;
        Ok(GetTaskResult::new(self.tasks.detailed(&slot)))
    }

    /// `tasks/update`: these tasks never ask the client anything, so there
    /// is no outstanding input to answer; acknowledged (the revision says
    /// to ignore responses to keys that are not outstanding).
    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks.lookup(&request.task_id, &owner(&context))?;
        Ok(())
    }

    /// `tasks/cancel`: withdraws the task's pending entry, or cancels its
    /// running call.
    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks.cancel(&request.task_id, &owner(&context))
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.level.store(request.level as u8, Ordering::Relaxed);
        Ok(())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let CallToolRequestParams {
            name,
            arguments,
            mut input_responses,
            request_state,
            ..
        } = request;
        let elicits = self.elicitation
            && context
                .client_capabilities()
                .is_some_and(|c| c.elicitation.is_some());
        let stateless = stateless(&context);
        // A task instead of the input-required answer (`super::tasks`)?
        let tasks_declared = context
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks());
        let mut round_trip = None;
        let mut parking = None;
        // The host's queue and a stateless request: the call cannot wait
        // (see `super::approval`); its retry names the entry.
        let queue = self.host.approvals().filter(|_| stateless).cloned();
        let approver: Option<Arc<dyn Approver>> = if let Some(queue) = queue {
            match request_state.as_deref() {
                None => {
                    let approver = ParkingApprover::new(queue);
                    parking = Some(approver.clone());
                    Some(approver)
                }
                Some(state) => {
                    let Some(id) = super::approval::queued_entry(state) else {
                        return Err(ErrorData::invalid_params(
                            "`requestState` is not one this server gave: call again without it",
                            None,
                        ));
                    };
                    // Held outside the scheduler: a pending approval holds
                    // up no other stateless client.
                    let resumed = queue
                        .resume(id, &name, &context.ct)
                        .await
                        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                    if let Resumed::Pending(_) = resumed {
                        return Ok(CallToolResponse::InputRequired(
                            InputRequiredResult::from_request_state(state),
                        ));
                    }
                    Some(RetriedApprover::new(queue, resumed))
                }
            }
        } else if !elicits {
            None
        } else if stateless {
            // The answers of earlier rounds (carried in the state), and
            // this round's, which win.
            let mut responses = super::approval::carried_answers(request_state.as_deref())
                .map_err(|why| ErrorData::invalid_params(why, None))?;
            responses.extend(input_responses.take().unwrap_or_default());
            let approver = RoundTripApprover::new(responses);
            round_trip = Some(approver.clone());
            Some(approver)
        } else {
            Some(Arc::new(ElicitingApprover::new(context.peer.clone())))
        };
        let mut arguments = arguments.unwrap_or_default();
        let stripped = if self.harness_arguments.is_empty() {
            serde_json::Map::new()
        } else {
            let tools = self.mcp_tools();
            let declared = tools
                .iter()
                .find(|t| t.name == name)
                .and_then(|t| t.input_schema.get("properties"))
                .and_then(Value::as_object);
            super::harness::strip(&self.harness_arguments, declared, &mut arguments)
        };
        if !stripped.is_empty() {
            tracing::debug!(
                tool = %name,
                stripped = ?stripped.keys().collect::<Vec<_>>(),
                "harness-added arguments stripped before validation"
            );
        }
        let call = ToolCall {
            id: context.id.to_string(),
            name: name.into_owned(),
            arguments: Value::Object(arguments),
        };
        // The request's own token (notifications/cancelled; a stdio client
        // going away), fused with its HTTP session's end, if it has one.
        let gone = context.extensions.get::<SessionGone>().map(|g| g.0.clone());
        let cancel = match &gone {
            Some(gone) => gone.child_token(),
            None => context.ct.clone(),
        };
        let client = toolgate::turn::Client {
            stripped,
            ..audit_client(&context)
        };
        let token = context.meta.get_progress_token();
        // What a bridged server asks of the client during the call goes
        // to this client (`super::link`); without a bridge nothing asks.
        let link = self.host.bridge().is_some().then(|| {
            Arc::new(super::link::SessionLink::new(
                context.peer.clone(),
                token.clone(),
                stateless,
            )) as Arc<dyn toolgate::call::ClientLink>
        });
        let turn = TurnOptions {
            agent_scope: self.scope.to_string(),
            cancel,
            approver,
            caller: client.caller.clone(),
            client: Some(Arc::new(client)),
            link,
            ..TurnOptions::default()
        };
        let peer = &context.peer;
        progress(peer, &token, 0.0, "started").await;
        self.log(
            &context,
            LoggingLevel::Debug,
            || json!({"event": "call started", "id": call.id, "tool": call.name}),
        )
        .await;
        let arrivals = if stateless {
            &self.shared
        } else {
            &self.arrivals
        };
        // What a task would run again once its entry is decided.
        let again = (parking.is_some() && tasks_declared).then(|| (call.clone(), turn.clone()));
        // Boxed: the pipeline's future is large, and the SDK moves the
        // handler's future into a task of its own per request (a memmove of
        // all of it, measured at ~5% of a call).
        let mut run = Box::pin(arrivals.run(call, &turn));
        let outcome = if gone.is_some() {
            tokio::select! {
                biased;
                outcome = &mut run => outcome,
                _ = context.ct.cancelled() => {
                    turn.cancel.cancel();
                    run.await
                }
            }
        } else {
            run.await
        };
        // No final progress: the result is the end (see the module docs).
        let record = match outcome {
            Ok(record) => record,
            Err(e @ ArrivalsError::Busy { .. }) => {
                return Err(ErrorData::new(BUSY, e.to_string(), None));
            }
            Err(e @ ArrivalsError::Failed(_)) => {
                tracing::error!(error = %e, "tools/call failed in the scheduler");
                return Err(ErrorData::internal_error(e.to_string(), None));
            }
        };
        // Parked, and denied for it (not a call a body made in turn):
        // the client calls again with the entry's id.
        if let Some(id) = parking.and_then(|a| a.take_parked())
            && record.error.as_ref().is_some_and(|e| {
                e.stage == toolgate::outcome::Stage::Approval
                    && e.decided_by.as_deref() == Some(toolgate::approval::queue::QUEUE)
            })
        {
            // A client that follows tasks gets one (within the bounds).
            if let Some((call, turn)) = again
                && let Some(queue) = self.host.approvals().cloned()
                && let Some(task) = self.tasks.create(&owner(&context), queue.timeout())
            {
                let seed = self.tasks.seed(&task);
                tracing::info!(
                    task = task.id(),
                    entry = id,
                    "the call waits for approval as a task"
                );
                tokio::spawn(super::tasks::drive(
                    self.tasks.clone(),
                    task,
                    queue,
                    id,
                    super::tasks::Run {
                        arrivals: self.shared.clone(),
                        call,
                        turn,
                        to_result: self.answer(),
                        busy: BUSY,
                    },
                ));
                return Ok(CallToolResponse::Task(seed));
            }
            return Ok(CallToolResponse::InputRequired(
                InputRequiredResult::from_request_state(super::approval::request_state(&id)),
            ));
        }
        if let Some((needed, state)) = round_trip.and_then(|a| a.take_needed()) {
            return Ok(CallToolResponse::InputRequired(InputRequiredResult::new(
                Some(needed),
                state,
            )));
        }
        let level = match record.error.as_ref().map(|e| e.code.as_str()) {
            None => LoggingLevel::Info,
            Some("DENIED" | "BLOCKED" | "INVALID_ARGS" | "UNKNOWN_TOOL") => LoggingLevel::Warning,
            Some("INTERNAL" | "TRAPPED") => LoggingLevel::Error,
            Some(_) => LoggingLevel::Info,
        };
        self.log(&context, level, || {
            json!({
                "event": "call finished",
                "id": record.id,
                "tool": record.name,
                "isError": record.is_error,
                "error": record.error,
            })
        })
        .await;
        Ok(CallToolResponse::Complete(self.answer()(record)))
    }
}

/// A frozen record as an MCP `CallToolResult`.
pub fn to_result(record: CallRecord) -> CallToolResult {
    let mut meta = Map::new();
    if let Some(error) = &record.error {
        meta.insert(
            "toolgate/error".into(),
            serde_json::to_value(error).unwrap_or(Value::Null),
        );
    }
    if let Some(m) = record.meta {
        meta.insert("toolgate/meta".into(), m);
    }
    if !record.additional_contexts.is_empty() {
        meta.insert(
            "toolgate/additionalContexts".into(),
            Value::from(record.additional_contexts),
        );
    }
    let content = record.content.into_iter().map(block).collect();
    let mut result = if record.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.structured_content = record.structured_content;
    if !meta.is_empty() {
        result.meta = Some(MetaObject(meta));
    }
    result
}

/// A content block in its MCP shape (the same shape [`Content`] serializes
/// to for `toolgate run`).
pub fn block(content: Content) -> ContentBlock {
    match content {
        Content::Text(text) => ContentBlock::text(text),
        Content::Image { data, mime_type } => ContentBlock::image(BASE64.encode(data), mime_type),
        Content::Audio { data, mime_type } => ContentBlock::audio(BASE64.encode(data), mime_type),
        Content::Link(l) => {
            let mut link = rmcp::model::Resource::new(l.uri, l.name);
            link.title = l.title;
            link.description = l.description;
            link.mime_type = l.mime_type;
            ContentBlock::resource_link(link)
        }
        Content::Json(value) => ContentBlock::resource(ResourceContents::TextResourceContents {
            uri: JSON_RESOURCE_URI.into(),
            mime_type: Some("application/json".into()),
            text: value.to_string(),
            meta: None,
        }),
        Content::Resource {
            uri,
            mime_type,
            contents,
        } => ContentBlock::resource(match contents {
            Contents::Text(text) => ResourceContents::TextResourceContents {
                uri,
                mime_type,
                text,
                meta: None,
            },
            Contents::Blob(bytes) => ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob: BASE64.encode(bytes),
                meta: None,
            },
        }),
    }
}

/// Whose a task is: over HTTP the client ([`super::peer`]: a local user
/// or a peer address) and its session, if any; over stdio the one client
/// of the process.
fn owner(context: &RequestContext<RoleServer>) -> String {
    let Some(http) = context.extensions.get::<http::request::Parts>() else {
        return "stdio".into();
    };
    let client = http
        .extensions
        .get::<super::peer::Client>()
        .map(|c| c.to_string())
        .unwrap_or_else(|| "http".into());
    match http
        .headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
    {
        Some(session) => format!("{client} session {session}"),
        None => client,
    }
}

/// The client of a request as the audit record names it: over HTTP its
/// `Mcp-Session-Id` (none: a stateless request), over stdio none (one
/// process, one client); and its `clientInfo`: the request's `_meta`
/// (2026-07-28), else its session's `initialize`.
fn audit_client(context: &RequestContext<RoleServer>) -> toolgate::turn::Client {
    use toolgate::budgets::AUDIT_MAX_CLIENT_FIELD_BYTES;
    let http = context.extensions.get::<http::request::Parts>();
    // The request's own `_meta` clientInfo (2026-07-28: a stateless
    // request says who sends it; the peer there is the SDK's own
    // stand-in, "rmcp x.y"), else the session's `initialize`.
    let info = context.client_info();
    toolgate::turn::Client {
        transport: if http.is_some() { "http" } else { "stdio" }.into(),
        session: http
            .and_then(|p| p.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
            .map(|s| toolgate::budgets::cut(s.to_string(), AUDIT_MAX_CLIENT_FIELD_BYTES)),
        name: info
            .as_ref()
            .map(|i| toolgate::budgets::cut(i.name.clone(), AUDIT_MAX_CLIENT_FIELD_BYTES)),
        version: info
            .as_ref()
            .map(|i| toolgate::budgets::cut(i.version.clone(), AUDIT_MAX_CLIENT_FIELD_BYTES)),
        // The caller `[auth]` validated (`oauth`), put there by the HTTP
        // route: a name no client can choose for itself.
        caller: http.and_then(|p| {
            p.extensions
                .get::<Arc<toolgate::identity::Caller>>()
                .cloned()
        }),
        // The W3C trace context of the request's `_meta` (SEP-414), if
        // well-formed: in the record, and passed on to bridged servers.
        trace: context
            .meta
            .get_traceparent()
            .and_then(|t| toolgate::call::TraceContext::parse(t, context.meta.get_tracestate()))
            .map(Arc::new),
        stripped: serde_json::Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgate::outcome::{CallError, ErrorCode as Code, Outcome, Stage};

    #[test]
    fn records_map_to_mcp_results() {
        let denied = CallRecord::freeze(
            "7".into(),
            "bash".into(),
            Outcome::failure(
                CallError::new(Code::Denied, Stage::Guard, "no").decided_by("secrets-guard"),
            ),
            vec![],
        );
        let v = serde_json::to_value(to_result(denied)).unwrap();
        assert_eq!(v["isError"], true);
        assert_eq!(v["content"][0], json!({"type": "text", "text": "no"}));
        assert_eq!(v["_meta"]["toolgate/error"]["code"], "DENIED");
        assert_eq!(v["_meta"]["toolgate/error"]["stage"], "guard");
        assert_eq!(v["_meta"]["toolgate/error"]["decidedBy"], "secrets-guard");

        let ok = CallRecord::freeze_keeping(
            "8".into(),
            "echo".into(),
            Outcome::Success {
                value: json!({"text": "hi"}),
                content: vec![Content::text("hi"), Content::Json(json!({"a": 1}))],
                meta: None,
            },
            vec![],
            true,
        );
        let v = serde_json::to_value(to_result(ok)).unwrap();
        assert_eq!(v["isError"], false);
        assert_eq!(v["structuredContent"], json!({"text": "hi"}));
        assert_eq!(v["content"][1]["resource"]["mimeType"], "application/json");
        assert_eq!(v.get("_meta"), None);
        // The same shapes as `toolgate run` prints.
        let run = serde_json::to_value(Content::Json(json!({"a": 1}))).unwrap();
        assert_eq!(v["content"][1]["resource"]["text"], run["resource"]["text"]);
    }
}
