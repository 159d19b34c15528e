//! The `toolgate` command line.
//!
//! Exit codes: 0 when the command did its job (a batch that ran is a
//! success even if calls in it failed — their failures are in the output);
//! 1 when a host-level problem stopped it (unreadable file, malformed
//! batch, a plugin that does not load in `check`); 2 for usage errors
//! (clap's own code).

mod approvals;
mod approve;
mod audit;
mod bridge;
mod check;
mod demo;
mod goals;
mod logging;
mod new;
mod oci;
mod plugins;
mod quiet;
mod replay;
mod run;
mod sandbox;
mod serve;
pub mod tools;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

use toolgate::HostConfig;
use toolgate::host::{Toolgate, ToolgateBuilder};
use toolgate::plugin::RuntimeOptions;

/// How long the process waits, after a command is done, for work still
/// running on the runtime's blocking threads (a WASI file operation stuck on
/// a FIFO, say): then it exits anyway. Calls have their own deadlines; this
/// only keeps a thread the host can no longer interrupt from keeping the
/// process alive.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// The configuration file read when `--config` is not given.
pub const DEFAULT_CONFIG: &str = "toolgate.toml";

/// A WebAssembly host for AI-agent tool calls: every tool and every policy
/// is a component, every call passes a nine-point pipeline.
#[derive(Parser, Debug)]
#[command(name = "toolgate", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

/// Options every command accepts.
#[derive(Args, Debug, Clone)]
pub struct GlobalArgs {
    /// Load every *.wasm in DIR (after the built-ins; same plugin name replaces
    /// a built-in). Repeatable.
    #[arg(long = "plugins", value_name = "DIR", global = true)]
    plugin_dirs: Vec<PathBuf>,

    /// Do not load the built-in plugins.
    #[arg(long, global = true)]
    no_default_plugins: bool,

    /// Operator configuration (grants, priorities, limits). Default:
    /// ./toolgate.toml if it exists. Either way, and even while it does not
    /// exist, ./toolgate.toml is out of reach of what the host runs.
    #[arg(long, value_name = "FILE", global = true)]
    config: Option<PathBuf>,

    /// Who answers a hook's `ask` (wins over `[approval] mode`): prompt on
    /// the terminal (default when stdin is a terminal), or always allow/deny
    /// (default deny when not interactive). `serve`: `client` (the default)
    /// asks an MCP client that declared elicitation and denies for one that
    /// did not; `allow` or `deny` answer every `ask` and the client is never
    /// asked (a headless agent declines every elicitation). `queue`: the host's durable
    /// approval queue (as `[approval] mode = "queue"`; the client is never
    /// asked), where calls wait, at most `[approval] timeout_ms`, for a
    /// decision: in the browser at `serve --http`'s /console, with
    /// `toolgate approvals`, or from `[approval] webhook`'s receiver (see
    /// docs/operators/approvals.md#approval-queue-and-console).
    #[arg(long, value_enum, value_name = "MODE", global = true)]
    approve: Option<ApproveMode>,

    /// Log format on stderr. Filter with RUST_LOG (default: warn,rmcp=error).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    log_format: LogFormat,

    /// Do not read or write the compiled-component cache.
    #[arg(long, global = true)]
    no_compile_cache: bool,

    /// This replica's id among replicas of one deployment (as `[state]
    /// replica_id`, which it overrides): in the approval entries it asks
    /// (a shared queue), its background jobs' ids (`job-3@ID`) and its
    /// audit records. 1 to 64 of A-Z a-z 0-9 . _ -.
    /// Default: made at the first start (`HOSTNAME-RANDOM`) and kept in
    /// `replica-id` in the state directory.
    #[arg(long, value_name = "ID", global = true)]
    replica_id: Option<String>,

    /// Code Mode (as `code_mode = true` in the configuration): the model
    /// sees only `run_code`, a JavaScript program whose tool calls each pass
    /// the pipeline; direct calls to other tools are refused.
    #[arg(long, global = true)]
    code_mode: bool,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum ApproveMode {
    /// Ask on the terminal (not with `serve`).
    Prompt,
    /// Approve every `ask`; `serve` never asks its client.
    Allow,
    /// Refuse every `ask`; `serve` never asks its client.
    Deny,
    /// The host's durable approval queue; `serve` never asks its client.
    Queue,
    /// `serve` only (its default): ask the MCP client when it declared
    /// elicitation, else deny.
    Client,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the tools as the model sees them (name, description, parameters).
    Tools(tools::ToolsArgs),
    /// Run a batch of tool calls from a JSON file (or - for stdin) and print
    /// the results in the same order.
    Run(run::RunArgs),
    /// Load one component and report its roles, tools, WIT version and every
    /// problem found.
    Check(check::CheckArgs),
    /// List the loaded plugins, their roles and the order of every policy chain.
    Plugins(plugins::PluginsArgs),
    /// Run a short scripted batch on the built-in plugins and show what each
    /// stage decided.
    Demo(demo::DemoArgs),
    /// The process sandbox: `toolgate sandbox check` reports what this kernel
    /// enforces and runs the escape probes.
    Sandbox(sandbox::SandboxArgs),
    /// Serve the tools over MCP (stdio, or streamable HTTP with --http):
    /// every call of the client passes the pipeline.
    Serve(serve::ServeArgs),
    /// Create a project for a tool or policy (Rust, Python, JavaScript or C)
    /// that builds to a component on the first try.
    New(new::NewArgs),
    /// The audit record: `verify` its chain and signatures, `show` records
    /// (its signing key: `toolgate keygen audit`).
    Audit(audit::AuditArgs),
    /// Re-decide the calls of an audit record under the policy set given
    /// (--plugins, --config, --no-default-plugins), without running any
    /// tool: report the calls whose outcome changes. Exit 0 none, 1 some,
    /// 2 on error.
    Replay(replay::ReplayArgs),
    /// Fetch a component from an OCI registry into the local store: the tag
    /// is resolved to a digest, every blob checked against its digest.
    Pull(oci::PullArgs),
    /// Publish a component to an OCI registry (the Wasm OCI layout `wkg`
    /// uses); prints the digest to pin. --sign-key signs it (cosign format).
    Push(oci::PushArgs),
    /// Say who signed a component in an OCI registry: exit 0 when a trusted
    /// key or keyless identity (--key, --trusted-root and the identity
    /// flags, or the configuration's [trust]) signed the digest the
    /// reference resolves to, 1 when none did, 2 when it cannot be told.
    /// With --bundle, REF is a local file and its Sigstore bundle is checked.
    Verify(oci::VerifyArgs),
    /// Make a key pair: `keygen audit` signs the audit record's checkpoints,
    /// `keygen sign` signs components pushed to an OCI registry.
    Keygen(KeygenArgs),
    /// The old spelling of `toolgate keygen sign` (kept for scripts).
    #[command(hide = true)]
    SignKeygen(oci::KeygenArgs),
    /// The approval queue of a running `serve --http --approve queue`:
    /// list, approve, deny, answer, grant, revoke (--server URL --console-token-file FILE).
    Approvals(approvals::ApprovalsArgs),
    /// The goal the model set (`create_goal`): show it, or pause, resume or
    /// clear it — the user's and operator's, never the model's (--scope S).
    Goals(goals::GoalsArgs),
    /// Bridged MCP servers: `bridge accept SERVER [TOOL…]` serves tools
    /// withheld because their definitions changed since they were pinned.
    Bridge(bridge::BridgeArgs),
}

/// `toolgate keygen audit|sign KEY`.
#[derive(Args, Debug)]
struct KeygenArgs {
    #[command(subcommand)]
    command: KeygenCommand,
}

#[derive(Subcommand, Debug)]
enum KeygenCommand {
    /// Make the Ed25519 key that signs the audit record's checkpoints: FILE
    /// (secret, mode 0600) and its public half FILE.pub; prints the public key.
    ///
    /// Name FILE in the configuration as `[audit] signing_key = "FILE"`.
    /// The public half (FILE.pub, or the 64 hex digits printed) goes to
    /// whoever verifies the record: `toolgate audit verify --key FILE.pub`.
    Audit(audit::KeygenArgs),
    /// Make a key pair to sign components with (`toolgate push --sign-key
    /// KEY.pem`): KEY.pem (private, mode 0600) and its public half KEY.pub.
    ///
    /// The public half (KEY.pub) goes to every host that should trust what
    /// the key signs: name it in their configuration's `[trust] keys`, or
    /// give it to `toolgate verify --key KEY.pub`.
    Sign(oci::KeygenArgs),
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    // `toolgate __probe NAME ARGS…`: one escape probe, run inside the sandbox
    // by `toolgate sandbox check`. Nothing else (no runtime, no logging).
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("__probe") {
        let code = toolgate_sandbox::probes::probe_main(args.into_iter().skip(2));
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    let matches = hide_ignored_options(Cli::command()).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    warn_ignored_options(&matches);
    let transcript = matches!(cli.command, Command::Demo(_)).then(demo::Transcript::default);
    logging::init(cli.global.log_format, transcript.clone());
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("toolgate: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Tools(a) => tools::run(&cli.global, a).await,
            Command::Run(a) => run::run(&cli.global, a).await,
            Command::Check(a) => check::run(&cli.global, a).await,
            Command::Plugins(a) => plugins::run(&cli.global, a).await,
            Command::Goals(a) => goals::run(&cli.global, a).await,
            Command::Bridge(a) => bridge::run(&cli.global, a).await,
            Command::Demo(a) => demo::run(&cli.global, a, transcript.unwrap_or_default()).await,
            Command::Sandbox(a) => sandbox::run(&cli.global, a).await,
            Command::Serve(a) => serve::run(&cli.global, a).await,
            Command::New(a) => new::run(a),
            Command::Audit(a) => audit::run(a),
            Command::Replay(a) => replay::run(&cli.global, a).await,
            Command::Pull(a) => oci::pull(&cli.global, a).await,
            Command::Push(a) => oci::push(&cli.global, a).await,
            Command::Verify(a) => oci::verify(&cli.global, a).await,
            Command::Keygen(a) => match a.command {
                KeygenCommand::Audit(a) => audit::keygen(a),
                KeygenCommand::Sign(a) => oci::keygen(a),
            },
            Command::SignKeygen(a) => oci::keygen(a),
            Command::Approvals(a) => tokio::task::spawn_blocking(move || approvals::run(a))
                .await
                .map_err(anyhow::Error::from)
                .and_then(|r| r),
        }
    });
    // Not `drop(runtime)`, which waits for every blocking thread forever.
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    match result {
        Ok(code) => code,
        // `toolgate run … | grep -m1`, `audit show | head`: the reader has
        // what it wanted, and the work was done and recorded before the
        // output was written.
        Err(e) if e.is::<StdoutClosed>() => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("toolgate: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Write `text` and a newline to stdout. Unlike `println!`, a reader that
/// has gone (a closed pipe) is [`StdoutClosed`], not a panic: `main` ends
/// quietly on it.
pub(crate) fn print_out(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush())
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::BrokenPipe => anyhow::Error::new(StdoutClosed),
            _ => anyhow::Error::new(e).context("cannot write to stdout"),
        })
}

/// Stdout's reader went away before the output was written.
#[derive(Debug)]
pub(crate) struct StdoutClosed;

impl std::fmt::Display for StdoutClosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stdout was closed before the output was written")
    }
}

impl std::error::Error for StdoutClosed {}

/// The global options that build a host, by their ids, and the commands
/// that build none (or always the same one) and so ignore them. Their help
/// does not show those options; given anyway, they draw a warning.
const IGNORED_OPTIONS: &[(&str, &[&str])] = &[
    ("new", HOST_OPTIONS),
    ("audit", HOST_OPTIONS),
    ("approvals", HOST_OPTIONS),
    ("sandbox", SANDBOX_IGNORES),
    // `check` loads the one component it is given, never the built-ins.
    ("check", &["no_default_plugins"]),
    // `pull` and `push` read only `--config` (its `[oci]` table).
    ("pull", OCI_IGNORED),
    ("push", OCI_IGNORED),
    ("verify", OCI_IGNORED),
    ("keygen", HOST_OPTIONS),
    // The old spelling of `keygen sign`.
    ("sign-keygen", HOST_OPTIONS),
];

const OCI_IGNORED: &[&str] = &[
    "plugin_dirs",
    "no_default_plugins",
    "approve",
    "no_compile_cache",
    "code_mode",
    "replica_id",
];

const HOST_OPTIONS: &[&str] = &[
    "plugin_dirs",
    "no_default_plugins",
    "config",
    "approve",
    "no_compile_cache",
    "code_mode",
    "replica_id",
];

/// What `toolgate sandbox` ignores: every host option but `--config` (its
/// authority cases try the paths the configuration names).
const SANDBOX_IGNORES: &[&str] = &[
    "plugin_dirs",
    "no_default_plugins",
    "approve",
    "no_compile_cache",
    "code_mode",
    "replica_id",
];

/// `cmd` with [`IGNORED_OPTIONS`] hidden from the help of the commands
/// that ignore them (and of their subcommands).
fn hide_ignored_options(mut cmd: clap::Command) -> clap::Command {
    // Global options reach the subcommands when the command is built.
    cmd.build();
    for (name, ids) in IGNORED_OPTIONS {
        cmd = cmd.mut_subcommand(name, |sub| hide_options(sub, ids));
    }
    cmd
}

fn hide_options(cmd: clap::Command, ids: &[&str]) -> clap::Command {
    // `mut_args` keeps every argument in its place: a built command's keys
    // point at places (`mut_arg` would move the argument to the end).
    let mut cmd = cmd.mut_args(|a| {
        let hide = a.is_hide_set() || ids.iter().any(|id| a.get_id() == id);
        a.hide(hide)
    });
    let subs: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for sub in subs {
        cmd = cmd.mut_subcommand(sub, |s| hide_options(s, ids));
    }
    cmd
}

/// Warn about an option given to a command that ignores it.
fn warn_ignored_options(matches: &clap::ArgMatches) {
    let Some((name, sub)) = matches.subcommand() else {
        return;
    };
    let Some((_, ids)) = IGNORED_OPTIONS.iter().find(|(n, _)| *n == name) else {
        return;
    };
    for id in *ids {
        // Global options are parsed wherever they appear, and found in the
        // innermost matches.
        let mut m = sub;
        while let Some((_, inner)) = m.subcommand() {
            m = inner;
        }
        let given = [matches, sub, m]
            .iter()
            .any(|m| m.value_source(id) == Some(clap::parser::ValueSource::CommandLine));
        if given {
            let flag = format!("--{}", id.replace('_', "-")).replace("--plugin-dirs", "--plugins");
            eprintln!("toolgate: warning: {flag} does nothing for `toolgate {name}` (ignored)");
        }
    }
}

impl GlobalArgs {
    /// The configuration: `--config`, else `./toolgate.toml` if present.
    /// Read as the host reads it (`lifecycle::read_config`, through
    /// [`toolgate::state::read_authority`]): a file a live sandboxed run could
    /// have created is refused.
    fn load_config(&self) -> anyhow::Result<HostConfig> {
        let (path, required) = match &self.config {
            Some(path) => (path.clone(), true),
            None => (PathBuf::from(DEFAULT_CONFIG), false),
        };
        let journal = match toolgate::state::default_dir() {
            Some(d) => Some(toolgate::state::StateDir::open(d)?.journal()),
            None => None,
        };
        let file = toolgate::lifecycle::ConfigFile { path, required };
        Ok(toolgate::lifecycle::read_config(&file, journal.as_deref())?.unwrap_or_default())
    }

    fn runtime_options(&self) -> RuntimeOptions {
        let mut options = RuntimeOptions::default();
        if self.no_compile_cache {
            options.cache_dir = None;
        }
        options
    }

    /// A builder with everything the global options say.
    fn builder(&self) -> anyhow::Result<ToolgateBuilder> {
        if self.approve == Some(ApproveMode::Client) {
            anyhow::bail!(
                "--approve client is for `serve` (it asks the MCP client); \
                 use --approve prompt, allow, deny or queue"
            );
        }
        let b = self.host_builder()?;
        Ok(match approve::default_approver() {
            Some(approver) => b.default_approver(approver),
            None => b,
        })
    }

    /// [`builder`](Self::builder) without the terminal as the default
    /// approver (`serve`: stdin is the protocol).
    fn host_builder(&self) -> anyhow::Result<ToolgateBuilder> {
        // `./toolgate.toml` is what a start without `--config` obeys, so it
        // is authority even when absent (or when this start reads another),
        // and secret (a configuration holds MCP servers' credentials).
        // The file is read by the host itself (at start, and again at every
        // reload): `--config` must exist, ./toolgate.toml may not.
        let (path, required) = match &self.config {
            Some(path) => (path.clone(), true),
            None => (PathBuf::from(DEFAULT_CONFIG), false),
        };
        let mut b = Toolgate::builder()
            .config_file(path, required)
            .runtime_options(self.runtime_options())
            .builtin_plugins(!self.no_default_plugins)
            .secret_path(
                DEFAULT_CONFIG,
                "the host's default configuration (./toolgate.toml)",
            );
        for dir in &self.plugin_dirs {
            b = b.plugin_dir(dir);
        }
        if let Some(approver) = approve::approver(self.approve) {
            b = b.approver(approver);
        }
        if self.approve == Some(ApproveMode::Queue) {
            b = b.approval_queue(true);
        }
        if self.code_mode {
            b = b.code_mode(true);
        }
        if let Some(id) = &self.replica_id {
            b = b.replica_id(id);
        }
        Ok(b)
    }

    /// Build the host and report (on stderr) plugins that did not load.
    async fn host(&self) -> anyhow::Result<Toolgate> {
        let host = self.builder()?.build().await?;
        // A one-shot command wants the MCP servers' tools: wait for their
        // first attempts (each bounded by its connect timeout).
        host.wait_for_mcp(host.mcp_connect_timeout()).await;
        report_problems(&host);
        Ok(host)
    }
}

fn report_problems(host: &Toolgate) {
    for p in host.problems() {
        eprintln!("toolgate: warning: {p}");
    }
}

/// Stop a command that would run calls when a plugin that might be a policy
/// did not load (the generation would refuse every call anyway).
fn refuse_if_blocked(host: &Toolgate) -> anyhow::Result<()> {
    let blocked = &host.generation().blocked;
    if blocked.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "no calls are run: {} did not load and might be a policy ({}); fix it, or mark it `optional = true` under [plugins.NAME] in the configuration to run without it",
        blocked
            .iter()
            .map(|p| format!("`{}`", p.plugin))
            .collect::<Vec<_>>()
            .join(", "),
        blocked
            .iter()
            .map(|p| p.origin.clone())
            .collect::<Vec<_>>()
            .join(", ")
    )
}
