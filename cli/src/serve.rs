//! `toolgate serve`: the host as an MCP server, over stdio (default) or
//! streamable HTTP (`--http ADDR`). See [`toolgate_mcp`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;
use rmcp::service::serve_server_with_ct;
use tokio_util::sync::CancellationToken;

use super::{ApproveMode, GlobalArgs};
use toolgate::approval::ApprovalMode;
use toolgate::pipeline::approval::DenyAll;
use toolgate::scheduler::Arrivals;
use toolgate_mcp::console::Console;
use toolgate_mcp::health::Stop;
use toolgate_mcp::http::{self, HttpOptions};
use toolgate_mcp::stdio::StdioTransport;
use toolgate_mcp::{Limits, ToolgateServer};

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Serve streamable HTTP at ADDR (`127.0.0.1:8080`; a bare port binds
    /// 127.0.0.1) on the path /mcp, instead of stdio; with /healthz and
    /// /readyz for a balancer, and /metrics (behind the bearer token) for
    /// Prometheus.
    #[arg(long, value_name = "ADDR", value_parser = parse_addr)]
    http: Option<SocketAddr>,

    /// The file holding the bearer token HTTP clients must send
    /// (`Authorization: Bearer <token>`); made, with a new token, when it
    /// does not exist. Default: serve-token in the state directory
    /// ($TOOLGATE_STATE_DIR, else $XDG_STATE_HOME/toolgate, else
    /// ~/.local/state/toolgate). Hidden from everything the host runs.
    /// With `[auth]` in the configuration, /mcp takes OAuth access tokens
    /// instead and this token guards /metrics alone.
    #[arg(long, value_name = "FILE", requires = "http")]
    token_file: Option<PathBuf>,

    /// Serve HTTP without a bearer token: any local user can then call the
    /// tools as you. Loopback only; warned at every start.
    #[arg(long, requires = "http", conflicts_with = "token_file")]
    no_auth: bool,

    /// Serve the approval console (with --approve queue) on this address
    /// (`127.0.0.1:8766`, or a port: on 127.0.0.1) instead of under
    /// `/console` of the --http listener; `/mcp` is not served there.
    #[arg(long, value_name = "ADDR", requires = "http", value_parser = parse_addr)]
    console: Option<SocketAddr>,

    /// Serve the approval console (`/console`, with --approve queue) on a
    /// non-loopback address (--http, or --console) although `serve` speaks plain HTTP:
    /// its token and session cookie then cross the network in clear text.
    /// Without it, such a bind serves no console (put a TLS proxy on
    /// loopback in front instead).
    #[arg(long, requires = "http")]
    console_insecure: bool,

    /// Never ask the client to approve (MCP elicitation): every `ask` is
    /// answered by --approve. Use it when the client is not trusted to
    /// approve its own calls.
    #[arg(long)]
    no_elicitation: bool,

    /// Accept the arguments this agent harness adds to every tool call
    /// (`gemini-cli`: `wait_for_previous`), which a tool's schema refuses:
    /// removed before validation unless the tool declares them, and kept
    /// in the call's audit record (`client.stripped`). Repeatable; off by
    /// default.
    #[arg(long, value_name = "HARNESS",
          value_parser = clap::builder::PossibleValuesParser::new(toolgate_mcp::harness::names()))]
    accept_harness_arguments: Vec<String>,

    /// Declare tools' output schemas and send each result's value as
    /// `structuredContent` besides the rendered text. Off by default:
    /// Claude Code and Codex give the model that JSON instead of the text
    /// the tool rendered for it, so what the model sees would depend on
    /// the client.
    #[arg(long)]
    structured_content: bool,

    /// How long a 2026-07-28 client may treat a list result (tools,
    /// prompts, resources) as fresh, in ms: its `ttlMs` (SEP-2549; its
    /// `cacheScope` is `private` under `[auth]` or `[[access]]`). Default:
    /// `[serve] list_ttl_ms`, else 0, as any reload may change a list.
    #[arg(long, value_name = "MS")]
    list_ttl_ms: Option<u64>,

    /// Also accept this `Host` header over HTTP (e.g. the name clients use
    /// for a non-loopback bind). Repeatable.
    #[arg(long, value_name = "HOST", requires = "http")]
    allow_host: Vec<String>,

    /// Accept requests carrying this `Origin` header over HTTP (e.g.
    /// `http://localhost:3000`). None by default: browser pages are refused.
    /// Repeatable.
    #[arg(long, value_name = "ORIGIN", requires = "http")]
    allow_origin: Vec<String>,

    /// Largest JSON-RPC message accepted, in bytes (a stdio line, an HTTP
    /// body).
    #[arg(long, value_name = "BYTES", default_value_t = toolgate_mcp::DEFAULT_MAX_MESSAGE_BYTES)]
    max_message_bytes: usize,

    /// Tool calls waiting or running at once, per scheduler (each session
    /// has one; stateless requests share one); beyond, a call is refused
    /// with an error.
    #[arg(long, value_name = "N", default_value_t = toolgate::scheduler::arrivals::DEFAULT_MAX_QUEUED)]
    max_queued_calls: usize,

    /// HTTP sessions alive at once.
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_sessions)]
    max_sessions: usize,

    /// HTTP connections open at once.
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_connections)]
    max_connections: usize,

    /// HTTP connections one client (a local user; a remote address) may
    /// hold at once. Default: a quarter of --max-connections.
    #[arg(long, value_name = "N")]
    max_connections_per_client: Option<usize>,

    /// HTTP sessions one client may hold at once. Default: a quarter of
    /// --max-sessions.
    #[arg(long, value_name = "N")]
    max_sessions_per_client: Option<usize>,

    /// Time an HTTP client may take to send a request body, in
    /// milliseconds (408 after).
    #[arg(long, value_name = "MS", default_value_t = toolgate_mcp::DEFAULT_BODY_TIMEOUT.as_millis() as u64)]
    body_timeout_ms: u64,

    /// An HTTP session that sends no request besides `initialize` and
    /// `ping` is closed after this many milliseconds.
    #[arg(long, value_name = "MS", default_value_t = toolgate_mcp::DEFAULT_SESSION_UNUSED_IDLE.as_millis() as u64)]
    unused_session_idle_ms: u64,

    /// On SIGTERM or Ctrl-C (after --drain-grace-ms), `--http` stops
    /// accepting, answers 503 on `/readyz`, and waits this many milliseconds at most for the MCP
    /// requests in flight to be answered; then it cancels what is left
    /// and exits. A second signal exits at once. (stdio: calls are
    /// cancelled at once.)
    #[arg(long, value_name = "MS", default_value_t = toolgate_mcp::DEFAULT_DRAIN_TIMEOUT.as_millis() as u64)]
    drain_timeout_ms: u64,

    /// On SIGTERM or Ctrl-C, `--http` first answers 503 on `/readyz` for
    /// this many milliseconds while still accepting and serving, so a
    /// load balancer's health check takes the replica out before its
    /// listener closes; then it drains (--drain-timeout-ms). Set it above
    /// the balancer's check interval × the failures that mark a server
    /// down. At most 60000.
    #[arg(long, value_name = "MS", default_value_t = toolgate_mcp::DEFAULT_DRAIN_GRACE.as_millis() as u64,
          value_parser = clap::value_parser!(u64).range(..=toolgate_mcp::MAX_DRAIN_GRACE.as_millis() as u64))]
    drain_grace_ms: u64,

    /// Most concurrency-safe calls running at once.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    max_parallel: Option<u16>,

    /// Do not watch the plugin directories and the configuration file
    /// (by default a change is loaded while serving: see
    /// docs/operators/plugins.md#hot-reload).
    #[arg(long)]
    no_watch: bool,

    /// Quiet period of the watcher, in milliseconds: a reload starts after
    /// no change for this long.
    #[arg(long, value_name = "MS", default_value_t = toolgate::lifecycle::watch::DEFAULT_DEBOUNCE.as_millis() as u64)]
    watch_debounce_ms: u64,

    /// The agent scope of this server's client: it sees, and calls, what
    /// that scope may use (see `[scopes]` in the configuration).
    #[arg(long, value_name = "SCOPE", default_value = "")]
    scope: String,

    /// The directory the built-in tools are granted (default: the current
    /// directory, i.e. wherever the client starts the server).
    #[arg(long, value_name = "DIR")]
    workdir: Option<PathBuf>,
}

/// Waits for Ctrl-C (SIGINT) or SIGTERM, the signals that stop `serve` and
/// `run` gracefully: calls in flight are cancelled, process groups killed,
/// then the process exits (see docs/operators/sandbox.md#stopping-the-host-what-dies-when). Returns the
/// signal's name.
pub(super) async fn stop_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())
        .map_err(|e| tracing::warn!(error = %e, "cannot watch SIGTERM"))
        .ok();
    let term = async {
        match term.as_mut() {
            Some(t) => {
                t.recv().await;
            }
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        r = tokio::signal::ctrl_c() => match r {
            Ok(()) => "SIGINT",
            Err(_) => std::future::pending().await,
        },
        _ = term => "SIGTERM",
    }
}

/// Whether a client that declared elicitation is asked: only when the
/// operator chose `client` (`--approve`, which wins, else `[approval]
/// mode`), or chose nothing. An explicit `allow` or `deny` wins over the
/// client (Claude Code and Codex, headless, decline every elicitation).
fn ask_client(flag: Option<ApproveMode>, config: Option<ApprovalMode>) -> bool {
    match flag {
        Some(ApproveMode::Client) => true,
        Some(ApproveMode::Allow | ApproveMode::Deny | ApproveMode::Prompt) => false,
        // `queue`: the queue answers (the client is never asked either way).
        Some(ApproveMode::Queue) => false,
        None => matches!(config, None | Some(ApprovalMode::Client)),
    }
}

fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    text.parse()
        .map_err(|e| format!("`{text}` is not an address such as 127.0.0.1:8080 or a port: {e}"))
}

pub async fn run(global: &GlobalArgs, args: ServeArgs) -> anyhow::Result<ExitCode> {
    // stdin carries the protocol (stdio) and nobody watches a terminal
    // (HTTP). The operator's explicit choice wins (`--approve`, else
    // `[approval] mode`): `allow`/`deny` answer every `ask` and the client
    // is never asked; `client`, or no choice, asks a client that declared
    // elicitation, and denies for one that did not.
    if global.approve == Some(ApproveMode::Prompt) {
        bail!(
            "--approve prompt cannot be used with `serve`: stdin carries the protocol; \
             use --approve client|allow|deny|queue"
        );
    }
    // Before anything starts: a bad token file stops here.
    let token = match (args.http, args.no_auth) {
        (None, _) | (Some(_), true) => None,
        (Some(_), false) => {
            let path = match &args.token_file {
                Some(path) => path.clone(),
                None => http::default_token_path()?,
            };
            let (token, made) = http::load_or_create_token(&path)?;
            Some((token, path, made))
        }
    };
    let mut builder = global
        .host_builder()?
        .audit_by_default(true)
        // Nobody set: a client that cannot be asked is denied.
        .default_approver(Arc::new(DenyAll))
        // Plugin files that must compile load after the built-ins serve:
        // `initialize` is answered at once (see `lifecycle`, "Start").
        .background_loading(true)
        .watch(!args.no_watch)
        .watch_options(toolgate::lifecycle::watch::WatchOptions {
            debounce: std::time::Duration::from_millis(args.watch_debounce_ms),
            ..Default::default()
        });
    if global.approve == Some(ApproveMode::Client) {
        // Chosen explicitly: a client that cannot be asked is denied,
        // whatever `[approval] mode` says.
        builder = builder.approver(Arc::new(DenyAll));
    }
    if let Some((_, path, _)) = &token {
        // Whoever reads it can call every tool: nothing the host runs may.
        builder = builder.secret_path(path, "the HTTP bearer token of `serve`");
    }
    if let Some(n) = args.max_parallel {
        builder = builder.max_parallel(n.into());
    }
    if let Some(dir) = &args.workdir {
        let dir = dir
            .canonicalize()
            .with_context(|| format!("--workdir {}: not a directory", dir.display()))?;
        builder = builder.workdir(dir);
    }
    let host = builder.build().await?;
    let oauth = match (&args.http, &host.config().await.auth) {
        (Some(_), Some(auth)) => Some(oauth(auth, args.workdir.as_deref()).await?),
        _ => None,
    };
    let queued = host.approvals().is_some();
    let asks_client = ask_client(global.approve, host.config().await.approval.mode);
    // `[serve]`, and the flags of the same names on top.
    let configured = host.config().await.serve.clone();
    let mut harnesses = Vec::new();
    for name in configured
        .accept_harness_arguments
        .iter()
        .chain(&args.accept_harness_arguments)
    {
        let Some(h) = toolgate_mcp::harness::find(name) else {
            anyhow::bail!(
                "[serve] accept_harness_arguments: no harness `{name}` (known: {})",
                toolgate_mcp::harness::names()
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        };
        harnesses.push(h);
    }
    let structured = args.structured_content || configured.structured_content;
    let console = match (host.approvals(), args.console.or(args.http)) {
        (Some(queue), Some(addr)) => {
            if !addr.ip().is_loopback() && !args.console_insecure {
                eprintln!(
                    "toolgate: no approval console on {addr}: `serve` speaks plain HTTP, and the \
                     console's token would cross the network in clear text (serve on loopback \
                     behind a TLS proxy, or pass --console-insecure)"
                );
                None
            } else {
                let path = match host.config().await.console.token_file.clone() {
                    // Relative to the host's working directory, as the
                    // protected set has it.
                    Some(p) => match &args.workdir {
                        Some(w) => w.join(p),
                        None => p.to_path_buf(),
                    },
                    None => {
                        let own = http::default_token_path()?.with_file_name("console-token");
                        if queue.replica().is_some() {
                            eprintln!(
                                "toolgate: the approval queue is shared with other replicas, but \
                                 this replica's console token is its own ({}): give every replica \
                                 the same `[console] token_file`, so that a balancer may send the \
                                 console's requests to any of them",
                                own.display()
                            );
                        }
                        own
                    }
                };
                let (token, made) = http::load_or_create_token(&path).with_context(|| {
                    format!(
                        "the console's token file ([console] token_file) {}",
                        path.display()
                    )
                })?;
                Some((
                    Console::new(queue.clone(), &token, Some(host.state_store())),
                    path,
                    made,
                ))
            }
        }
        _ => None,
    };
    if let Some(queue) = host.approvals() {
        eprintln!(
            "toolgate: approvals wait in the queue (at most {} ms each)",
            queue.timeout().as_millis()
        );
    }
    // Clients list tools right after connecting: give the MCP servers
    // their first attempt (each bounded by its connect timeout).
    host.wait_for_mcp(host.mcp_connect_timeout()).await;
    super::report_problems(&host);
    let limits = Limits {
        max_message_bytes: args.max_message_bytes.max(1024),
        max_queued_calls: args.max_queued_calls.max(1),
        max_in_flight: args.max_queued_calls.max(1) + 16,
        max_sessions: args.max_sessions.max(1),
        max_connections: args.max_connections.max(1),
        max_sessions_per_client: args
            .max_sessions_per_client
            .unwrap_or(toolgate_mcp::client_share(args.max_sessions))
            .max(1),
        max_connections_per_client: args
            .max_connections_per_client
            .unwrap_or(toolgate_mcp::client_share(args.max_connections))
            .max(1),
        body_timeout: std::time::Duration::from_millis(args.body_timeout_ms.max(1)),
        session_unused_idle: std::time::Duration::from_millis(args.unused_session_idle_ms.max(1)),
        ..Limits::default()
    };
    if args.http.is_none() && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        // A person started it by hand: say what is served, and where (over
        // HTTP the address lines say it).
        eprintln!(
            "toolgate: serving {} tools over MCP on stdin/stdout (an MCP client starts \
             `toolgate serve` itself: see docs/operators/serving.md#adding-toolgate-to-an-mcp-client)",
            host.generation_for(&args.scope).model_tools().len()
        );
    }
    // Closed (its shutdown checkpoint signed) when serving ends.
    let audit = host.audit().cloned();
    let arrivals = Arc::new(Arrivals::new(host.clone(), limits.max_queued_calls));
    let server = ToolgateServer::new(host, arrivals)
        .with_scope(&args.scope)
        .with_structured_content(structured)
        .with_list_ttl_ms(args.list_ttl_ms.or(configured.list_ttl_ms).unwrap_or(0))
        .with_harness_arguments(&harnesses)
        // The queue keeps approval in the gateway: the client, which may
        // not be trusted to ask a person, is never asked itself.
        .with_elicitation(!args.no_elicitation && !queued && asks_client);
    if args.no_elicitation {
        tracing::info!("--no-elicitation: every `ask` is answered by --approve, never the client");
    } else if !asks_client && !queued {
        tracing::info!(
            "--approve (or [approval] mode) allow|deny answers every `ask`, never the client"
        );
    }
    let stop = Stop::default();
    {
        let (leaving, drain) = (stop.leaving.clone(), stop.drain.clone());
        let http = args.http.is_some();
        let grace = std::time::Duration::from_millis(args.drain_grace_ms);
        tokio::spawn(async move {
            let signal = stop_signal().await;
            if http && !grace.is_zero() {
                // The balancer's grace: `/readyz` says 503, all else goes
                // on until its health check has taken this replica out.
                leaving.cancel();
                tracing::info!(
                    signal,
                    grace_ms = grace.as_millis() as u64,
                    "leaving: /readyz answers 503, requests are still served until the grace ends"
                );
                tokio::select! {
                    _ = tokio::time::sleep(grace) => {}
                    signal = stop_signal() => {
                        eprintln!("toolgate: {signal} again; exiting now");
                        std::process::exit(1);
                    }
                }
            }
            if http {
                tracing::info!(
                    signal,
                    "draining: no new connection; the requests in flight finish, then the rest is cancelled"
                );
            } else {
                tracing::info!(signal, "cancelling every call and stopping");
            }
            drain.cancel();
            // A second signal does not wait for the graceful stop.
            let signal = stop_signal().await;
            eprintln!("toolgate: {signal} again; exiting now");
            std::process::exit(1);
        });
    }
    let served = serve_until_stopped(args, server, limits, stop, token, console, oauth).await;
    if let Some(audit) = audit
        && let Err(e) = audit.close()
    {
        eprintln!("toolgate: {e}");
    }
    served
}

/// `[auth]`'s resource server, its keys fetched once now: a wrong issuer
/// or key set shows at start (a warning: requests fetch again, and fail
/// closed until the keys are had).
async fn oauth(
    auth: &toolgate::identity::AuthConfig,
    workdir: Option<&std::path::Path>,
) -> anyhow::Result<Arc<toolgate_mcp::oauth::OAuth>> {
    let workdir = match workdir {
        Some(dir) => dir.to_path_buf(),
        None => std::env::current_dir().context("the current directory")?,
    };
    let oauth = toolgate_mcp::oauth::OAuth::new(auth, &workdir)?;
    match oauth.warm().await {
        Ok(keys) => {
            tracing::info!(issuer = %auth.issuer, keys, "[auth]: the issuer's keys fetched")
        }
        Err(e) if auth.introspection.is_some() => {
            tracing::info!(issuer = %auth.issuer, error = %e, "[auth]: no signing keys; tokens are introspected")
        }
        Err(e) => {
            eprintln!(
                "toolgate: WARNING: [auth]: the issuer's signing keys could not be fetched ({e}); every request is refused (503) until they are"
            );
            tracing::warn!(issuer = %auth.issuer, error = %e, "[auth]: the issuer's keys could not be fetched");
        }
    }
    Ok(Arc::new(oauth))
}

async fn serve_until_stopped(
    args: ServeArgs,
    server: ToolgateServer,
    limits: Limits,
    stop: Stop,
    token: Option<(String, PathBuf, bool)>,
    console: Option<(Arc<Console>, PathBuf, bool)>,
    oauth: Option<Arc<toolgate_mcp::oauth::OAuth>>,
) -> anyhow::Result<ExitCode> {
    match args.http {
        None => {
            // One client: a signal cancels its calls at once.
            let shutdown = stop.shutdown.clone();
            tokio::spawn(async move {
                stop.drain_begun().await;
                stop.shutdown.cancel();
            });
            serve_stdio(server, limits, shutdown).await
        }
        Some(addr) => {
            let options = HttpOptions {
                token: token.as_ref().map(|(t, _, _)| t.clone()),
                allow_hosts: args.allow_host.clone(),
                allow_origins: args.allow_origin.clone(),
                // On the MCP listener unless it has an address of its own.
                console: console
                    .as_ref()
                    .filter(|_| args.console.is_none())
                    .map(|(c, _, _)| c.clone()),
                oauth: oauth.clone(),
            };
            let listener = http::bind(addr, options).await?;
            let bound = listener.local_addr()?;
            let console_bound = match (&console, args.console) {
                (Some((c, _, _)), Some(at)) => {
                    let own = http::bind_console(
                        at,
                        c.clone(),
                        args.allow_host.clone(),
                        args.allow_origin.clone(),
                    )
                    .await?;
                    let at = own.local_addr()?;
                    tokio::spawn(own.serve(limits, stop.clone()));
                    Some(at)
                }
                _ => Some(bound),
            };
            // The lines an operator (or a test) needs: where to connect, and
            // where the token is (never the token: stderr may be a log).
            eprintln!("toolgate: serving MCP at http://{bound}{}", http::PATH);
            if let (Some((_, path, made)), Some(at)) = (&console, console_bound) {
                eprintln!(
                    "toolgate: approval console at http://{at}/console (its token is in {}{})",
                    path.display(),
                    if *made { ", made now" } else { "" }
                );
            }
            match (&token, &oauth) {
                (_, Some(oauth)) => {
                    eprintln!(
                        "toolgate: clients send OAuth access tokens (`[auth]`); the metadata is at {}",
                        oauth.metadata_url()
                    );
                    if let Some((_, path, made)) = &token {
                        eprintln!(
                            "toolgate: /metrics takes the bearer token in {}{}",
                            path.display(),
                            if *made { " (made now)" } else { "" }
                        );
                    }
                }
                (Some((_, path, made)), None) => eprintln!(
                    "toolgate: clients send `Authorization: Bearer <token>`; the token is in {}{}",
                    path.display(),
                    if *made { " (made now)" } else { "" }
                ),
                (None, None) => {
                    eprintln!(
                        "toolgate: WARNING: --no-auth: no bearer token; every local user can call these tools as you"
                    );
                    tracing::warn!(
                        "--no-auth: no bearer token; every local user can call these tools as you"
                    );
                }
            }
            let in_flight = listener.in_flight();
            let within = std::time::Duration::from_millis(args.drain_timeout_ms);
            {
                let stop = stop.clone();
                tokio::spawn(async move {
                    stop.drain_begun().await;
                    let left = in_flight.settle(within).await;
                    if left > 0 {
                        tracing::warn!(
                            left,
                            "--drain-timeout-ms passed with requests in flight; cancelling them"
                        );
                    } else {
                        tracing::info!("drained: every request in flight was answered");
                    }
                    stop.shutdown.cancel();
                });
            }
            listener.serve(server, limits, stop).await;
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn serve_stdio(
    server: ToolgateServer,
    limits: Limits,
    shutdown: CancellationToken,
) -> anyhow::Result<ExitCode> {
    // `closed` fires when the client goes away; it is the parent of every
    // request's cancellation token, so all its calls stop at once.
    let closed = shutdown.child_token();
    let (input, output) = toolgate_mcp::stdio::stdio();
    let transport = StdioTransport::new(input, output, limits, closed.clone());
    let running = match serve_server_with_ct(server, transport, closed.clone()).await {
        Ok(r) => r,
        Err(e) => {
            // The client left or spoke nonsense before the handshake.
            tracing::warn!(error = %e, "the MCP session did not start");
            return Ok(ExitCode::SUCCESS);
        }
    };
    let reason = running.waiting().await;
    tracing::info!(?reason, "the MCP session ended");
    Ok(ExitCode::SUCCESS)
}
