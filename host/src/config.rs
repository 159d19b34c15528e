//! The operator's configuration (`toolgate.toml`).
//!
//! The file is an untrusted boundary like any other: it is parsed, checked
//! against a schema with the same compiler and validator that check tool
//! arguments, and every problem is reported with its path — then, and only
//! then, deserialized.
//!
//! ```toml
//! max_parallel_tool_calls = 8      # rolling pool of concurrency-safe calls
//! policy_timeout_ms = 2000         # budget of one hook/guard invocation
//! sandbox = "strict"               # or "best-effort" (logged on every spawn)
//! sandbox_waive = []               # or run without named protections, e.g. ["mount_isolation"]
//! code_mode = false                # true: the model sees only `run_code`; direct calls are refused
//!
//! [limits]                         # every limit, its threat and default: docs/operators.md
//! max_argument_depth = 64
//! max_argument_bytes = 1048576
//! guest_memory_mb = 2048           # linear memory of all instances together
//! default_tool_timeout_ms = 600000 # the deadline of a call whose tool declares none
//! load_timeout_ms = 5000           # instantiate + list-tools of one plugin
//! max_content_blocks = 1024        # per result
//! max_content_bytes = 8388608      # per result
//! max_message_bytes = 16384        # a reason, prompt, feedback or failure message
//! max_description_bytes = 32768    # a tool's description (longer ones are cut)
//! max_schema_bytes = 262144        # a tool's parameters or output schema
//! max_tools_per_plugin = 256
//! log_lines_per_second = 50        # per plugin; the rest is dropped and counted
//!
//! [plugins.fs-tools]               # by plugin name (file stem)
//! priority = 50                    # order in every chain (lower = outer/first)
//! priorities = { guard = 10 }      # per role
//! instances = "pooled"             # or "fresh": a new instance per call
//! enabled = true
//! optional = false                 # true: the host runs without it if it fails to load
//! sha256 = "…"                     # refuse the file unless its digest matches
//! # source = "oci://ghcr.io/acme/fs-tools:1.2"  # from an OCI registry instead of a file (docs/operators.md)
//! # trust = { keys = ["fs.pub"], require_signature = true }  # its own trust rule (an OCI source only)
//! vars = { MODE = "strict" }       # settings the plugin reads as env vars
//!
//! [plugins.fs-tools.grants]
//! fs = [{ path = ".", access = "read-only" }]   # guest path defaults to "."
//! # spawn_only = true on an fs entry: granted to the plugin's spawned processes only, not preopened
//! protect_git = true               # .git of read-write directories stays read-only (default)
//! env = ["LANG"]                   # passed through from the host environment
//! network = ["example.com:443"]
//! shell = false
//! subprocess = ["git"]
//! kv = true                        # a key-value store per agent scope
//! spawn_tcp_ports = [443]          # spawned processes may connect to these ports
//! memory_mb = 256
//! spawn_limits = { max_processes = 64, address_space_mb = 4096, file_size_mb = 1024, cpu_seconds = 300 }
//!
//! [tools.bash]
//! timeout_ms = 120000              # overrides the tool's own timeout-ms
//!
//! [scopes."agents/researcher"]     # an agent scope (a `/`-separated tree)
//! plugin_dirs = ["researcher-plugins"]  # its own tools and policies (never restricted)
//! allow = ["read_*", "grep"]       # what it may use of what it inherits (absent: all)
//! deny = ["bash"]                  # ... and may not (wins over allow)
//! [scopes."agents/researcher".plugins.report]   # its own plugins' settings, as [plugins.NAME]
//!
//! [mcp.servers.time]               # an MCP server's tools as mcp__time__<tool>
//! command = "mcp-server-time"      # stdio: spawned in the sandbox (or `url` for streamable HTTP)
//! args = []
//! env = { TZ = "UTC" }
//! timeout_ms = 60000               # the deadline of each call
//! tools_deny = ["convert_time"]
//! namespace = true                 # false: its tools, prompts, resources keep the server's names
//! [mcp.servers.time.grants]        # default: the working directory read-only, no network
//! fs = [{ path = ".", access = "read-only" }]
//!
//! [oci]                            # plugins from OCI registries (docs/operators.md)
//! insecure_registries = []         # plain HTTP to these (loopback registries always may)
//! timeout_ms = 120000              # one pull or push in all
//!
//! [trust]                          # signatures of OCI plugins (docs/operators.md, "Signatures and trust")
//! keys = ["publisher.pub"]         # PEM public keys (P-256, Ed25519), relative to this file
//! require_signature = true         # default once [trust] exists: policies yes, tools no
//! [trust.registries."ghcr.io/acme"]  # a REGISTRY/REPOSITORY prefix: its own keys, requirement
//!
//! [run_code]                       # the Code Mode interpreter's limits (see docs/operators.md)
//! max_nested_calls = 100           # tool calls one program may make
//! max_output_kb = 64               # printed output kept (the rest is cut, and said so)
//! memory_mb = 64                   # the interpreter's heap
//! timeout_ms = 30000               # wall time of one program (a call's `timeoutMs` may shorten it)
//!
//! [audit]                          # the audit record (docs/audit.md); on by default for `toolgate`
//! enabled = true
//! path = "audit.jsonl"             # default: in the state directory
//! sync = "batch"                   # or "always" | "none": when records reach the disk
//! sync_interval_ms = 200           # "batch": the longest a written record waits for fdatasync
//! checkpoint_every = 1000          # records between signed checkpoints
//! rotate_mb = 64                   # the file moves aside at this size; the chain goes on
//! signing_key = "audit.key"        # Ed25519 seed, 64 hex digits, mode 0600 (`toolgate audit keygen`)
//! on_failure = "fail-closed"       # or "continue": a call whose record cannot be written still returns
//! arguments = "full"               # or "digest": only the arguments' SHA-256 (not replayable)
//! sensitive = { login = ["/password"], "*" = ["/api_key"] }  # tool → JSON pointers kept as digests
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::json;

/// The largest `memory_mb` a grant may give one instance: the size of the
/// instance pool's slots (`RuntimeOptions::max_memory_bytes`).
pub const MAX_INSTANCE_MEMORY_MB: usize = 1024;

/// How a plugin's instances are managed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstanceMode {
    /// Reuse warm instances (state may carry over between calls).
    #[default]
    Pooled,
    /// A new instance for every call.
    Fresh,
}

/// A problem with the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not valid TOML: {message}")]
    Syntax { path: String, message: String },
    #[error("{path} has {} problem(s):\n{}", .problems.len(), .problems.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid { path: String, problems: Vec<String> },
}

/// How strictly spawned processes are sandboxed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Refuse to spawn when the kernel cannot enforce the grant.
    #[default]
    Strict,
    /// Spawn anyway with what the kernel can enforce; logged on every spawn.
    BestEffort,
}

/// `toolgate.toml`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    pub max_parallel_tool_calls: Option<usize>,
    pub policy_timeout_ms: Option<u64>,
    #[serde(default)]
    pub sandbox: SandboxMode,
    /// Protections a spawn may run without, by name, when the kernel lacks them.
    #[serde(default)]
    pub sandbox_waive: Vec<String>,
    #[serde(default)]
    pub limits: LimitsConfig,
    #[serde(default)]
    pub plugins: BTreeMap<String, PluginConfig>,
    #[serde(default)]
    pub tools: BTreeMap<String, ToolConfig>,
    /// Agent scopes (`/`-separated paths): their own plugins, and what they
    /// may use of what they inherit (see [`crate::registry::scopes`]).
    #[serde(default)]
    pub scopes: BTreeMap<String, ScopeConfig>,
    /// External MCP servers whose tools the host bridges (see [`crate::bridge`]).
    #[serde(default)]
    pub mcp: McpConfig,
    /// Code Mode: the model-facing list holds only `run_code`, and direct
    /// calls to any other tool are refused at materialize.
    #[serde(default)]
    pub code_mode: bool,
    /// The `run_code` interpreter's limits.
    #[serde(default)]
    pub run_code: RunCodeConfig,
    /// The audit record (see [`crate::audit`]).
    #[serde(default)]
    pub audit: AuditConfig,
    /// OCI registries as plugin sources (see [`crate::oci`]).
    #[serde(default)]
    pub oci: OciConfig,
    /// `[trust]`: who may sign plugins from OCI registries (see
    /// [`crate::oci::trust`]).
    pub trust: Option<crate::oci::trust::TrustConfig>,
    /// `[egress]`: the rules every egress grant shares.
    #[serde(default)]
    pub egress: EgressConfig,
    /// The approval queue (see [`crate::approval::queue`]).
    #[serde(default)]
    pub approval: ApprovalConfig,
    /// The approval console on `serve --http` (see [`crate::mcp::console`]).
    #[serde(default)]
    pub console: ConsoleConfig,
    /// `[state]`: where host-kept state lives (see [`crate::store`]).
    #[serde(default)]
    pub state: StateConfig,
    /// The file this came from (for messages).
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    pub max_argument_depth: Option<usize>,
    pub max_argument_bytes: Option<usize>,
    pub guest_memory_mb: Option<usize>,
    pub default_tool_timeout_ms: Option<u64>,
    pub load_timeout_ms: Option<u64>,
    pub max_content_blocks: Option<usize>,
    pub max_content_bytes: Option<usize>,
    pub max_message_bytes: Option<usize>,
    pub max_description_bytes: Option<usize>,
    pub max_schema_bytes: Option<usize>,
    pub max_tools_per_plugin: Option<usize>,
    pub log_lines_per_second: Option<u32>,
}

impl LimitsConfig {
    /// The guest budgets: the defaults, with what this table sets.
    pub fn budgets(&self, policy_timeout_ms: Option<u64>) -> crate::budgets::Budgets {
        use std::time::Duration;
        let mut b = crate::budgets::Budgets::default();
        if let Some(ms) = policy_timeout_ms {
            b.policy_timeout = Duration::from_millis(ms);
        }
        if let Some(ms) = self.default_tool_timeout_ms {
            b.default_tool_timeout = Duration::from_millis(ms);
        }
        if let Some(ms) = self.load_timeout_ms {
            b.load_timeout = Duration::from_millis(ms);
        }
        if let Some(mb) = self.guest_memory_mb {
            b.guest_memory_bytes = mb << 20;
        }
        macro_rules! set {
            ($($f:ident),*) => { $(if let Some(v) = self.$f { b.$f = v; })* };
        }
        set!(
            max_content_blocks,
            max_content_bytes,
            max_message_bytes,
            max_description_bytes,
            max_schema_bytes,
            max_tools_per_plugin,
            log_lines_per_second
        );
        b
    }
}

/// One agent scope's layer (`[scopes."agents/researcher"]`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScopeConfig {
    /// Directories of the scope's own plugins (relative paths are relative
    /// to the configuration file's directory). Its own tools are never
    /// restricted by `allow`/`deny`.
    #[serde(default)]
    pub plugin_dirs: Vec<PathBuf>,
    /// Inherited tools (global layer and ancestors) the scope may use, by
    /// name or glob; absent: all of them.
    pub allow: Option<Vec<String>>,
    /// Inherited tools the scope may not use, by name or glob (wins over
    /// `allow`).
    #[serde(default)]
    pub deny: Vec<String>,
    /// Settings of the scope's own plugins, as under `[plugins.NAME]`.
    #[serde(default)]
    pub plugins: BTreeMap<String, PluginConfig>,
}

/// `[run_code]`: the Code Mode interpreter's limits; every field defaults
/// to the constant of the same name in `codemode`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunCodeConfig {
    /// Tool calls one program may make.
    pub max_nested_calls: Option<usize>,
    /// Printed output kept, in KiB.
    pub max_output_kb: Option<usize>,
    /// The interpreter instance's memory, in MiB.
    pub memory_mb: Option<usize>,
    /// Wall time of one program, in milliseconds.
    pub timeout_ms: Option<u32>,
}

/// Per-plugin settings.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginConfig {
    pub enabled: Option<bool>,
    /// The host may run without this plugin when it fails to load (by
    /// default a plugin that fails to load stops the host from running
    /// calls: it might be a policy).
    #[serde(default)]
    pub optional: bool,
    /// The plugin file's expected SHA-256 (hex); a file whose digest
    /// differs is refused.
    pub sha256: Option<String>,
    /// `oci://REGISTRY/REPOSITORY:TAG` (or `@sha256:…`): the plugin is the
    /// component of that OCI artifact, from the local store (pulled there
    /// at the first start, or by `toolgate pull`), not a file of a plugin
    /// directory. Global `[plugins.NAME]` only.
    pub source: Option<String>,
    /// The trust rule of an OCI source (see [`crate::oci::trust`]):
    /// `trust = { keys = [...], require_signature = true }`.
    pub trust: Option<crate::oci::trust::TrustRule>,
    pub priority: Option<i32>,
    #[serde(default)]
    pub priorities: BTreeMap<String, i32>,
    pub instances: Option<InstanceMode>,
    pub grants: Option<GrantsConfig>,
    /// Settings for the plugin, visible to it as environment variables.
    /// They carry no authority (unlike `grants.env`, which passes the host's
    /// own variables through).
    #[serde(default)]
    pub vars: BTreeMap<String, String>,
}

pub use crate::oci::OciConfig;

/// `[egress]`: checked for every connection egress decides (see
/// `crate::egress` and docs/operators.md, "Egress").
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressConfig {
    /// Destinations refused before any grant's `egress` rules: names,
    /// `*.domains`, `host:port`, addresses and CIDR blocks.
    #[serde(default)]
    pub deny: Vec<String>,
    /// CIDR blocks whose addresses may be reached although they are
    /// private, loopback, link-local, CGNAT… (refused by default).
    #[serde(default)]
    pub allow_private: Vec<String>,
    /// A destination no rule allows (and no deny rule names, at an
    /// address no class refuses) is asked about — the call's approver,
    /// the approval queue — instead of refused. Default `false`.
    #[serde(default)]
    pub ask: bool,
}

/// A plugin's grants, as written.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantsConfig {
    #[serde(default)]
    pub fs: Vec<FsGrantConfig>,
    #[serde(default)]
    pub env: Vec<String>,
    /// Exact `host:port` destinations of the component's own connections
    /// (`wasi:http`, `wasi:sockets`), resolved at load; the older grant,
    /// kept beside `egress` (see `crate::egress::component`).
    #[serde(default)]
    pub network: Vec<String>,
    #[serde(default)]
    pub shell: bool,
    #[serde(default)]
    pub subprocess: Vec<String>,
    /// The `kv` seam (a key-value store per agent scope).
    #[serde(default)]
    pub kv: bool,
    pub memory_mb: Option<usize>,
    /// TCP ports spawned processes may connect to (on any host: Landlock
    /// filters TCP by port only). The weaker grant: prefer `egress`.
    #[serde(default)]
    pub spawn_tcp_ports: Vec<u16>,
    /// Destinations by name spawned processes may reach through the host's
    /// egress proxy (`*.example.org`, `example.com:443`,
    /// `GET pypi.org/simple/*`); with it, a spawn has no other network.
    /// The component's own `wasi:http` and `wasi:sockets` connections are
    /// decided by the same rules.
    #[serde(default)]
    pub egress: Vec<String>,
    #[serde(default)]
    pub spawn_limits: SpawnLimitsConfig,
    /// Keep the `.git` of every read-write directory read-only (default
    /// `true`): its config and hooks run outside any sandbox on the
    /// operator's next `git` command.
    pub protect_git: Option<bool>,
}

/// Resource limits of processes spawned through the shell and subprocess
/// seams (the whole process tree of one spawn).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpawnLimitsConfig {
    pub max_processes: Option<u32>,
    pub address_space_mb: Option<u64>,
    pub file_size_mb: Option<u64>,
    pub cpu_seconds: Option<u64>,
    pub open_files: Option<u64>,
    /// Bytes of stdout (and of stderr) kept, in KiB.
    pub output_kb: Option<usize>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsGrantConfig {
    pub path: String,
    pub access: FsAccess,
    pub guest: Option<String>,
    /// Granted to the processes the plugin spawns (shell, subprocess) but
    /// not preopened for the component itself.
    #[serde(default)]
    pub spawn_only: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FsAccess {
    ReadOnly,
    ReadWrite,
}

/// Per-tool settings.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolConfig {
    pub timeout_ms: Option<u32>,
}

/// `[mcp]`: the MCP servers whose tools are bridged.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    #[serde(default)]
    pub servers: BTreeMap<String, McpServerConfig>,
}

/// `[mcp.servers.NAME]`: one MCP server, over stdio (`command`) or
/// streamable HTTP (`url`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// Default `true`.
    pub enabled: Option<bool>,
    /// stdio: the program (a path, or a name looked up in the server's `PATH`).
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// stdio: environment variables set for the server (values, not
    /// passed through: see `grants.env` for that).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// stdio: the server's working directory (default: the host's).
    pub cwd: Option<String>,
    /// streamable HTTP: the endpoint (`http://host:port/mcp`).
    pub url: Option<String>,
    /// streamable HTTP: headers sent with every request.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// streamable HTTP: a bearer token read from this environment variable.
    pub bearer_token_env: Option<String>,
    /// streamable HTTP: a bearer token read from this file (one line, mode 600).
    pub bearer_token_file: Option<String>,
    /// The deadline of each call of this server's tools, in ms (default:
    /// the host's `default_tool_timeout_ms`); `[tools.NAME]` overrides it.
    pub timeout_ms: Option<u32>,
    /// Time to connect, initialize and list the tools, in ms (default 30000).
    pub connect_timeout_ms: Option<u64>,
    /// Only these tools (raw names, as the server lists them).
    pub tools_allow: Option<Vec<String>>,
    /// Not these tools (raw names).
    #[serde(default)]
    pub tools_deny: Vec<String>,
    /// Calls of this server's tools may overlap (default `false`: each call
    /// is exclusive).
    #[serde(default)]
    pub parallel: bool,
    /// stdio: grant the server's install directory and interpreter
    /// read-only (default `true`; see docs/operators.md).
    pub auto_grant: Option<bool>,
    /// stdio: what the server process may touch.
    pub grants: Option<McpGrantsConfig>,
    /// `false`: its tools and prompts keep the server's names and its
    /// resources their URIs (default `true`: `mcp__NAME__TOOL`,
    /// `toolgate-mcp://NAME/URI`; see docs/operators.md).
    pub namespace: Option<bool>,
}

/// `[mcp.servers.NAME.grants]`: the sandbox of a stdio server.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpGrantsConfig {
    #[serde(default)]
    pub fs: Vec<FsGrantConfig>,
    /// Host environment variables passed through.
    #[serde(default)]
    pub env: Vec<String>,
    /// TCP ports the server may connect to (the weaker grant: prefer
    /// `egress`).
    #[serde(default)]
    pub spawn_tcp_ports: Vec<u16>,
    /// Destinations by name the server may reach through the egress proxy.
    #[serde(default)]
    pub egress: Vec<String>,
    #[serde(default)]
    pub limits: SpawnLimitsConfig,
    pub protect_git: Option<bool>,
}

impl McpServerConfig {
    /// Whether the server is used.
    pub fn is_enabled(&self) -> bool {
        self.enabled != Some(false)
    }

    /// Whether its names are namespaced (`namespace`, default `true`).
    pub fn is_namespaced(&self) -> bool {
        self.namespace != Some(false)
    }
}

fn roles_schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "pre-execute": {"type": "integer"}, "execute-around": {"type": "integer"},
            "post-execute": {"type": "integer"}, "guard": {"type": "integer"},
            "finalizer": {"type": "integer"}, "observer": {"type": "integer"}
        },
        "additionalProperties": false
    })
}

/// `[trust]` (with `registries`) or a rule under it.
fn trust_rule_schema(top: bool) -> serde_json::Value {
    let mut properties = json!({
        "keys": {"type": "array", "items": {"type": "string"}},
        "require_signature": {"type": "boolean"},
        // Keyless: accepted by the schema, refused by the check (not built).
        "identities": {},
        "trusted_root": {}
    });
    if top {
        properties["registries"] =
            json!({"type": "object", "additionalProperties": trust_rule_schema(false)});
    }
    json!({"type": "object", "properties": properties, "additionalProperties": false})
}

fn plugin_schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "enabled": {"type": "boolean"},
            "optional": {"type": "boolean"},
            "sha256": {"type": "string"},
            "source": {"type": "string"},
            "trust": trust_rule_schema(false),
            "priority": {"type": "integer"},
            "priorities": roles_schema(),
            "instances": {"enum": ["pooled", "fresh"]},
            "vars": {"type": "object", "additionalProperties": {"type": "string"}},
            "grants": {
                "type": "object",
                "properties": {
                    "fs": {"type": "array", "items": {
                        "type": "object",
                        "properties": {
                            "path": {"type": "string"},
                            "access": {"enum": ["read-only", "read-write"]},
                            "guest": {"type": "string"},
                            "spawn_only": {"type": "boolean"}
                        },
                        "required": ["path", "access"],
                        "additionalProperties": false
                    }},
                    "env": {"type": "array", "items": {"type": "string"}},
                    "network": {"type": "array", "items": {"type": "string"}},
                    "shell": {"type": "boolean"},
                    "subprocess": {"type": "array", "items": {"type": "string"}},
                    "kv": {"type": "boolean"},
                    "memory_mb": {"type": "integer"},
                    "protect_git": {"type": "boolean"},
                    "spawn_tcp_ports": {"type": "array", "items": {"type": "integer"}},
                    "egress": strings(),
                    "spawn_limits": spawn_limits_schema(true)
                },
                "additionalProperties": false
            }
        },
        "additionalProperties": false
    })
}

fn scope_schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "plugin_dirs": {"type": "array", "items": {"type": "string"}},
            "allow": {"type": "array", "items": {"type": "string"}},
            "deny": {"type": "array", "items": {"type": "string"}},
            "plugins": {"type": "object", "additionalProperties": plugin_schema()}
        },
        "additionalProperties": false
    })
}

/// `SpawnLimitsConfig`'s keys; `output_kb` only where the host captures
/// the process's output (not an MCP server's protocol stream).
fn spawn_limits_schema(output_kb: bool) -> serde_json::Value {
    let mut properties = serde_json::Map::new();
    for key in [
        "max_processes",
        "address_space_mb",
        "file_size_mb",
        "cpu_seconds",
        "open_files",
    ]
    .into_iter()
    .chain(output_kb.then_some("output_kb"))
    {
        properties.insert(key.into(), json!({"type": "integer"}));
    }
    json!({"type": "object", "properties": properties, "additionalProperties": false})
}

fn strings() -> serde_json::Value {
    json!({"type": "array", "items": {"type": "string"}})
}

fn string_map() -> serde_json::Value {
    json!({"type": "object", "additionalProperties": {"type": "string"}})
}

fn mcp_server_schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "enabled": {"type": "boolean"},
            "command": {"type": "string"},
            "args": strings(),
            "env": string_map(),
            "cwd": {"type": "string"},
            "url": {"type": "string"},
            "headers": string_map(),
            "bearer_token_env": {"type": "string"},
            "bearer_token_file": {"type": "string"},
            "timeout_ms": {"type": "integer"},
            "connect_timeout_ms": {"type": "integer"},
            "tools_allow": strings(),
            "tools_deny": strings(),
            "parallel": {"type": "boolean"},
            "auto_grant": {"type": "boolean"},
            "namespace": {"type": "boolean"},
            "grants": {
                "type": "object",
                "properties": {
                    "fs": {"type": "array", "items": {
                        "type": "object",
                        "properties": {
                            "path": {"type": "string"},
                            "access": {"enum": ["read-only", "read-write"]}
                        },
                        "required": ["path", "access"],
                        "additionalProperties": false
                    }},
                    "env": strings(),
                    "spawn_tcp_ports": {"type": "array", "items": {"type": "integer"}},
                    "egress": strings(),
                    "protect_git": {"type": "boolean"},
                    "limits": spawn_limits_schema(false)
                },
                "additionalProperties": false
            }
        },
        "additionalProperties": false
    })
}

fn schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "max_parallel_tool_calls": {"type": "integer", "description": "1 or more"},
            "policy_timeout_ms": {"type": "integer"},
            "sandbox": {"enum": ["strict", "best-effort"]},
            "sandbox_waive": {"type": "array", "items": {"enum": toolgate_sandbox::Feature::ALL
                .iter()
                .map(|f| f.name())
                .collect::<Vec<_>>()}},
            "limits": {
                "type": "object",
                "properties": {
                    "max_argument_depth": {"type": "integer"},
                    "max_argument_bytes": {"type": "integer"},
                    "guest_memory_mb": {"type": "integer"},
                    "default_tool_timeout_ms": {"type": "integer"},
                    "load_timeout_ms": {"type": "integer"},
                    "max_content_blocks": {"type": "integer"},
                    "max_content_bytes": {"type": "integer"},
                    "max_message_bytes": {"type": "integer"},
                    "max_description_bytes": {"type": "integer"},
                    "max_schema_bytes": {"type": "integer"},
                    "max_tools_per_plugin": {"type": "integer"},
                    "log_lines_per_second": {"type": "integer"}
                },
                "additionalProperties": false
            },
            "plugins": {"type": "object", "additionalProperties": plugin_schema()},
            "tools": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "properties": {"timeout_ms": {"type": "integer"}},
                    "additionalProperties": false
                }
            },
            "scopes": {"type": "object", "additionalProperties": scope_schema()},
            "mcp": {
                "type": "object",
                "properties": {"servers": {"type": "object", "additionalProperties": mcp_server_schema()}},
                "additionalProperties": false
            },
            "code_mode": {"type": "boolean"},
            "trust": trust_rule_schema(true),
            "oci": {
                "type": "object",
                "properties": {
                    "insecure_registries": {"type": "array", "items": {"type": "string"}},
                    "timeout_ms": {"type": "integer"}
                },
                "additionalProperties": false
            },
            "run_code": {
                "type": "object",
                "properties": {
                    "max_nested_calls": {"type": "integer"},
                    "max_output_kb": {"type": "integer"},
                    "memory_mb": {"type": "integer"},
                    "timeout_ms": {"type": "integer"}
                },
                "additionalProperties": false
            },
            "egress": {
                "type": "object",
                "properties": {
                    "deny": strings(),
                    "allow_private": strings(),
                    "ask": {"type": "boolean"}
                },
                "additionalProperties": false
            },
            "console": {
                "type": "object",
                "properties": {
                    "token_file": {"type": "string"}
                },
                "additionalProperties": false
            },
            "state": {
                "type": "object",
                "properties": {
                    "url": {"type": "string"},
                    "path": {"type": "string"},
                    "prefix": {"type": "string"},
                    "timeout_ms": {"type": "integer"}
                },
                "additionalProperties": false
            },
            "approval": {
                "type": "object",
                "properties": {
                    "mode": {"enum": ["queue"]},
                    "timeout_ms": {"type": "integer"},
                    "retry_hold_ms": {"type": "integer"},
                    "store": {"type": "string"},
                    "webhook": {"type": "string"},
                    "webhook_key_file": {"type": "string"}
                },
                "additionalProperties": false
            },
            "audit": {
                "type": "object",
                "properties": {
                    "enabled": {"type": "boolean"},
                    "path": {"type": "string"},
                    "sync": {"enum": ["always", "batch", "none"]},
                    "sync_interval_ms": {"type": "integer"},
                    "checkpoint_every": {"type": "integer"},
                    "rotate_mb": {"type": "integer"},
                    "signing_key": {"type": "string"},
                    "on_failure": {"enum": ["fail-closed", "continue"]},
                    "arguments": {"enum": ["full", "digest"]},
                    "sensitive": {
                        "type": "object",
                        "additionalProperties": {"type": "array", "items": {"type": "string"}}
                    }
                },
                "additionalProperties": false
            }
        },
        "additionalProperties": false
    })
}

/// Parse TOML text and check it against `schema`, reporting every problem
/// with its path; used for the host configuration and plugin manifests.
pub(crate) fn parse_checked<T: serde::de::DeserializeOwned>(
    text: &str,
    path: &str,
    schema: &serde_json::Value,
) -> Result<T, ConfigError> {
    let table: toml::Table = toml::from_str(text).map_err(|e| ConfigError::Syntax {
        path: path.to_string(),
        message: e.to_string().trim().to_string(),
    })?;
    let value = serde_json::to_value(&table).map_err(|e| ConfigError::Syntax {
        path: path.to_string(),
        message: e.to_string(),
    })?;
    let compiled = toolgate_schema::Schema::compile(schema).expect("built-in schemas compile");
    if let Err(violations) = compiled.validate(&value) {
        return Err(ConfigError::Invalid {
            path: path.to_string(),
            problems: violations.iter().map(|v| v.to_string()).collect(),
        });
    }
    serde_json::from_value(value).map_err(|e| ConfigError::Invalid {
        path: path.to_string(),
        problems: vec![e.to_string()],
    })
}

/// The checks of one `[plugins.NAME]` table (`at` is its path, for messages).
fn check_plugin(at: &str, p: &PluginConfig, problems: &mut Vec<String>) {
    if let Some(d) = &p.sha256
        && (d.len() != 64 || !d.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        problems.push(format!(
            "{at}/sha256: expected 64 hexadecimal digits (`sha256sum FILE`), got {d:?}"
        ));
    }
    if p.trust.is_some() && p.source.is_none() {
        problems.push(format!(
            "{at}/trust: a trust rule applies to a plugin from an OCI registry (`source = \"oci://…\"`); a plugin file is pinned by `sha256`"
        ));
    }
    if let Some(source) = &p.source
        && let Err(e) = crate::oci::OciRef::parse(source)
    {
        problems.push(format!("{at}/source: {e}"));
    }
    if let Some(g) = &p.grants {
        for (i, fs) in g.fs.iter().enumerate() {
            if fs.path.is_empty() {
                problems.push(format!(
                    "{at}/grants/fs/{i}/path: expected a directory, got an empty string"
                ));
            }
        }
        for (i, n) in g.network.iter().enumerate() {
            if n.rsplit_once(':')
                .and_then(|(_, port)| port.parse::<u16>().ok())
                .is_none()
            {
                problems.push(format!(
                    "{at}/grants/network/{i}: expected host:port, got {n:?}"
                ));
            }
        }
        for (i, rule) in g.egress.iter().enumerate() {
            if let Err(e) = crate::egress::Rule::parse(rule, false) {
                problems.push(format!("{at}/grants/egress/{i}: {e}"));
            }
        }
        if g.memory_mb == Some(0) {
            problems.push(format!("{at}/grants/memory_mb: expected 1 or more, got 0"));
        }
        if let Some(mb) = g.memory_mb
            && mb > MAX_INSTANCE_MEMORY_MB
        {
            problems.push(format!(
                    "{at}/grants/memory_mb: {mb} is more than one instance can have ({MAX_INSTANCE_MEMORY_MB} MiB, the size of the instance pool's slots)"
                ));
        }
    }
}

impl HostConfig {
    /// Read and check a configuration file.
    pub fn load(path: &Path) -> Result<HostConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut config = HostConfig::parse(&text, &path.display().to_string())?;
        config.source = Some(path.to_path_buf());
        Ok(config)
    }

    /// Check configuration text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<HostConfig, ConfigError> {
        let config: HostConfig = parse_checked(text, origin, &schema())?;
        let mut problems = Vec::new();
        if config.max_parallel_tool_calls == Some(0) {
            problems.push("/max_parallel_tool_calls: expected 1 or more, got 0".to_string());
        }
        let r = &config.run_code;
        for (key, value) in [
            ("max_output_kb", r.max_output_kb),
            ("memory_mb", r.memory_mb),
            ("timeout_ms", r.timeout_ms.map(|v| v as usize)),
        ] {
            if value == Some(0) {
                problems.push(format!("/run_code/{key}: expected 1 or more, got 0"));
            }
        }
        if r.memory_mb.is_some_and(|mb| mb > MAX_INSTANCE_MEMORY_MB) {
            problems.push(format!(
                "/run_code/memory_mb: {} is more than one instance can have ({MAX_INSTANCE_MEMORY_MB} MiB)",
                r.memory_mb.unwrap_or_default()
            ));
        }
        let a = &config.audit;
        for (key, value) in [
            ("sync_interval_ms", a.sync_interval_ms),
            ("checkpoint_every", a.checkpoint_every),
            ("rotate_mb", a.rotate_mb),
        ] {
            if value == Some(0) {
                problems.push(format!("/audit/{key}: expected 1 or more, got 0"));
            }
        }
        for (tool, pointers) in &a.sensitive {
            for p in pointers
                .iter()
                .filter(|p| !p.is_empty() && !p.starts_with('/'))
            {
                problems.push(format!(
                    "/audit/sensitive/{tool}: {p:?} is not a JSON pointer (write \"/{p}\", or \"\" for all the arguments)"
                ));
            }
        }
        let l = &config.limits;
        for (key, value) in [
            ("guest_memory_mb", l.guest_memory_mb.map(|v| v as u64)),
            ("default_tool_timeout_ms", l.default_tool_timeout_ms),
            ("load_timeout_ms", l.load_timeout_ms),
            ("max_content_blocks", l.max_content_blocks.map(|v| v as u64)),
            ("max_content_bytes", l.max_content_bytes.map(|v| v as u64)),
            ("max_message_bytes", l.max_message_bytes.map(|v| v as u64)),
            (
                "max_description_bytes",
                l.max_description_bytes.map(|v| v as u64),
            ),
            ("max_schema_bytes", l.max_schema_bytes.map(|v| v as u64)),
            (
                "max_tools_per_plugin",
                l.max_tools_per_plugin.map(|v| v as u64),
            ),
            (
                "log_lines_per_second",
                l.log_lines_per_second.map(u64::from),
            ),
            ("max_argument_depth", l.max_argument_depth.map(|v| v as u64)),
            ("max_argument_bytes", l.max_argument_bytes.map(|v| v as u64)),
        ] {
            if value == Some(0) {
                problems.push(format!("/limits/{key}: expected 1 or more, got 0"));
            }
        }
        if config.oci.timeout_ms == Some(0) {
            problems.push("/oci/timeout_ms: expected 1 or more, got 0".to_string());
        }
        if config.policy_timeout_ms == Some(0) {
            problems.push("/policy_timeout_ms: expected 1 or more, got 0".to_string());
        }
        if let Err(e) =
            crate::egress::Global::parse(&config.egress.deny, &config.egress.allow_private)
        {
            problems.push(format!("/egress: {e}"));
        }
        for (name, server) in &config.mcp.servers {
            for (i, rule) in server
                .grants
                .iter()
                .flat_map(|g| g.egress.iter())
                .enumerate()
            {
                if let Err(e) = crate::egress::Rule::parse(rule, false) {
                    problems.push(format!("/mcp/servers/{name}/grants/egress/{i}: {e}"));
                }
            }
        }
        for (name, p) in &config.plugins {
            check_plugin(&format!("/plugins/{name}"), p, &mut problems);
        }
        {
            use crate::oci::trust::check_rule;
            let base = Path::new(origin).parent().unwrap_or(Path::new(""));
            if let Some(t) = &config.trust {
                check_rule("/trust", &t.rule(), base, &mut problems);
                for (prefix, rule) in &t.registries {
                    check_rule(
                        &format!("/trust/registries/{prefix}"),
                        rule,
                        base,
                        &mut problems,
                    );
                }
            }
            for (name, p) in &config.plugins {
                if let Some(rule) = &p.trust {
                    check_rule(&format!("/plugins/{name}/trust"), rule, base, &mut problems);
                }
            }
        }
        for (scope, c) in &config.scopes {
            let at = format!("/scopes/{scope}");
            if let Err(why) = scope_names::check_name(scope) {
                problems.push(format!("{at}: {why}"));
            }
            for (key, globs) in [
                ("allow", c.allow.as_deref().unwrap_or_default()),
                ("deny", &c.deny[..]),
            ] {
                for (i, g) in globs.iter().enumerate() {
                    if let Err(e) = scope_names::glob(g) {
                        problems.push(format!("{at}/{key}/{i}: {e}"));
                    }
                }
            }
            for (i, d) in c.plugin_dirs.iter().enumerate() {
                if d.as_os_str().is_empty() {
                    problems.push(format!(
                        "{at}/plugin_dirs/{i}: expected a directory, got an empty string"
                    ));
                }
            }
            for (name, p) in &c.plugins {
                check_plugin(&format!("{at}/plugins/{name}"), p, &mut problems);
                if p.source.is_some() {
                    problems.push(format!(
                        "{at}/plugins/{name}/source: a scope's plugins are files of its plugin_dirs; an OCI source goes in the global [plugins.{name}]"
                    ));
                }
            }
        }
        for (name, server) in &config.mcp.servers {
            problems.extend(check_mcp_server(name, server));
        }
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError::Invalid {
                path: origin.to_string(),
                problems,
            })
        }
    }

    /// The directory relative paths of `[trust]` are read from: the
    /// configuration file's.
    pub fn trust_base(&self) -> PathBuf {
        self.source
            .as_ref()
            .and_then(|p| p.parent())
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    /// Where the configuration came from, for messages.
    pub fn origin(&self) -> String {
        self.source
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "toolgate.toml".into())
    }
}

/// Longest MCP server name (its tools are named `mcp__<server>__<tool>`).
pub const MAX_SERVER_NAME: usize = 20;

/// A server name usable in `mcp__<server>__<tool>`: 1–20 characters of
/// `[A-Za-z0-9_-]`, no `__`, not starting or ending with `_`.
pub fn valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_SERVER_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !name.contains("__")
        && !name.starts_with('_')
        && !name.ends_with('_')
}

/// Check one `[mcp.servers.NAME]`; every problem, with its path.
pub fn check_mcp_server(name: &str, c: &McpServerConfig) -> Vec<String> {
    let at = |key: &str| format!("/mcp/servers/{name}{key}");
    let mut problems = Vec::new();
    if !valid_server_name(name) {
        problems.push(format!(
            "{}: a server name must be 1–{} characters of [A-Za-z0-9_-], without `__` and not starting or ending with `_` (its tools are named mcp__{name}__TOOL)",
            at(""),
            MAX_SERVER_NAME
        ));
    }
    match (&c.command, &c.url) {
        (None, None) => problems.push(format!(
            "{}: set `command` (a stdio server) or `url` (streamable HTTP)",
            at("")
        )),
        (Some(_), Some(_)) => problems.push(format!(
            "{}: set either `command` or `url`, not both",
            at("")
        )),
        (Some(cmd), None) => {
            if cmd.is_empty() {
                problems.push(format!("{}: empty", at("/command")));
            }
            for (key, set) in [
                ("headers", !c.headers.is_empty()),
                ("bearer_token_env", c.bearer_token_env.is_some()),
                ("bearer_token_file", c.bearer_token_file.is_some()),
            ] {
                if set {
                    problems.push(format!(
                        "{}: only for a streamable HTTP server (`url`)",
                        at(&format!("/{key}"))
                    ));
                }
            }
        }
        (None, Some(url)) => {
            if !url.starts_with("http://") {
                problems.push(format!(
                    "{}: expected an http:// URL, got {url:?} (this build's HTTP client has no TLS: reach an https server through a local TLS proxy)",
                    at("/url")
                ));
            }
            for (key, set) in [
                ("args", !c.args.is_empty()),
                ("env", !c.env.is_empty()),
                ("cwd", c.cwd.is_some()),
                ("grants", c.grants.is_some()),
                ("auto_grant", c.auto_grant.is_some()),
            ] {
                if set {
                    problems.push(format!(
                        "{}: only for a stdio server (`command`)",
                        at(&format!("/{key}"))
                    ));
                }
            }
            if c.bearer_token_env.is_some() && c.bearer_token_file.is_some() {
                problems.push(format!(
                    "{}: set `bearer_token_env` or `bearer_token_file`, not both",
                    at("")
                ));
            }
            for (k, v) in &c.headers {
                if http::HeaderName::from_bytes(k.as_bytes()).is_err()
                    || http::HeaderValue::from_str(v).is_err()
                {
                    problems.push(format!(
                        "{}: not a valid HTTP header",
                        at(&format!("/headers/{k}"))
                    ));
                }
            }
        }
    }
    for (key, zero) in [
        ("timeout_ms", c.timeout_ms == Some(0)),
        ("connect_timeout_ms", c.connect_timeout_ms == Some(0)),
    ] {
        if zero {
            problems.push(format!(
                "{}: expected 1 or more, got 0",
                at(&format!("/{key}"))
            ));
        }
    }
    if let Some(g) = &c.grants {
        for (i, f) in g.fs.iter().enumerate() {
            if f.path.is_empty() {
                problems.push(format!(
                    "{}: expected a directory, got an empty string",
                    at(&format!("/grants/fs/{i}/path"))
                ));
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spawn limits: `output_kb` where the host captures a process's
    /// output, not for an MCP server (its stdout is the protocol).
    #[test]
    fn spawn_limits_take_output_kb_only_where_output_is_captured() {
        let ok = HostConfig::parse(
            "[plugins.bash.grants]\nshell = true\nspawn_limits = { max_processes = 8, output_kb = 64 }\n\
             [mcp.servers.t]\ncommand = \"t\"\n[mcp.servers.t.grants]\nlimits = { open_files = 64 }\n",
            "t.toml",
        );
        assert!(ok.is_ok(), "{:?}", ok.err());
        let err = HostConfig::parse(
            "[mcp.servers.t]\ncommand = \"t\"\n[mcp.servers.t.grants]\nlimits = { output_kb = 64 }\n",
            "t.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("/mcp/servers/t/grants/limits"), "{err}");
    }

    #[test]
    fn reports_every_problem_with_its_path() {
        let err = HostConfig::parse(
            r#"
            max_parallel_tool_calls = "eight"
            [plugins.x]
            priorty = 3
            [plugins.x.grants]
            fs = [{ path = ".", access = "rw" }]
            "#,
            "t.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("/max_parallel_tool_calls"), "{err}");
        assert!(err.contains("/plugins/x/priorty"), "{err}");
        assert!(err.contains("/plugins/x/grants/fs/0/access"), "{err}");
    }

    #[test]
    fn accepts_a_full_config() {
        let c = HostConfig::parse(
            r#"
            max_parallel_tool_calls = 4
            sandbox = "best-effort"
            [plugins.fs-tools]
            priority = 5
            priorities = { guard = 1 }
            instances = "fresh"
            [plugins.fs-tools.grants]
            fs = [{ path = ".", access = "read-only" }]
            network = ["example.com:443"]
            [tools.bash]
            timeout_ms = 10
            "#,
            "t.toml",
        )
        .unwrap();
        assert_eq!(c.max_parallel_tool_calls, Some(4));
        assert_eq!(c.sandbox, SandboxMode::BestEffort);
        assert_eq!(c.plugins["fs-tools"].instances, Some(InstanceMode::Fresh));
        assert_eq!(c.tools["bash"].timeout_ms, Some(10));
    }
}

/// Agent scope names and `allow`/`deny` patterns, checked when the
/// configuration is read (the registry resolves them: see
/// [`crate::registry::scopes`]).
pub mod scope_names {
    use globset::{Glob, GlobMatcher};

    /// The longest scope name accepted, in bytes.
    pub const MAX_SCOPE_BYTES: usize = 256;

    /// Why `name` is not an acceptable configured scope name, if it is not:
    /// 1–[`MAX_SCOPE_BYTES`] bytes of `/`-separated segments of
    /// `[A-Za-z0-9_.-]`, no empty segment, no `.` or `..` segment.
    ///
    /// ```
    /// use toolgate::config::scope_names::check_name;
    /// assert!(check_name("agents/researcher").is_ok());
    /// assert!(check_name("agents//researcher").is_err());
    /// assert!(check_name("").is_err());
    /// ```
    pub fn check_name(name: &str) -> Result<(), String> {
        if name.is_empty() {
            return Err(
                "a scope needs a name (the global layer is the top level of the file)".into(),
            );
        }
        if name.len() > MAX_SCOPE_BYTES {
            return Err(format!(
                "a scope name has at most {MAX_SCOPE_BYTES} bytes, this one {}",
                name.len()
            ));
        }
        for segment in name.split('/') {
            if segment.is_empty() || segment == "." || segment == ".." {
                return Err(format!(
                    "`{name}` is not a scope name: segments are separated by single `/` and are neither empty, `.` nor `..`"
                ));
            }
            if !segment
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
            {
                return Err(format!(
                    "`{name}` is not a scope name: use letters, digits, `_`, `-` and `.` between the `/`"
                ));
            }
        }
        Ok(())
    }

    /// Compile one `allow`/`deny` pattern (a tool name or a glob).
    pub fn glob(pattern: &str) -> Result<GlobMatcher, String> {
        if pattern.is_empty() {
            return Err("an empty pattern matches no tool; remove it".into());
        }
        Glob::new(pattern)
            .map(|g| g.compile_matcher())
            .map_err(|e| format!("`{pattern}` is not a glob: {e}"))
    }
}

/// When records reach the disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SyncMode {
    /// Synced before the result returns.
    Always,
    /// Written before the result returns, synced every interval.
    #[default]
    Batch,
    /// Written before the result returns, synced by the kernel.
    None,
}

/// What a call does when its record cannot be written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnFailure {
    /// The call fails (`INTERNAL`), and every later one.
    #[default]
    FailClosed,
    /// The call's result is returned; the failure is logged.
    Continue,
}

/// How a call's arguments are kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ArgumentsMode {
    /// The arguments themselves.
    #[default]
    Full,
    /// Only their SHA-256 (the record says the call is not replayable).
    Digest,
}

/// `[approval]` in the configuration: who answers a hook's `ask`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalConfig {
    /// `"queue"`: the host's approval queue answers (as `--approve queue`).
    pub mode: Option<ApprovalMode>,
    /// How long a queued call waits for a decision, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// How long a stateless client's retry is held for a decision, in
    /// milliseconds (see [`crate::budgets::APPROVAL_RETRY_HOLD_MS`]).
    pub retry_hold_ms: Option<u64>,
    /// The queue's SQLite file (default: `approvals.sqlite` in the state
    /// directory; with `[state] url` and this unset, the queue is in that
    /// shared store instead: see [`crate::approval::redis`]).
    pub store: Option<PathBuf>,
    /// POST each new pending approval there (see
    /// [`crate::approval::webhook`]).
    pub webhook: Option<String>,
    /// The webhook's HMAC key (default: `approval-webhook-key` in the
    /// state directory; made, owner-only, when absent).
    pub webhook_key_file: Option<PathBuf>,
}

/// `[state]` in the configuration: the state store behind the `kv` seam
/// (see [`crate::store`]). Read when the host starts; a change takes a
/// restart.
///
/// ```
/// use toolgate::config::HostConfig;
/// let c = HostConfig::parse(
///     "[state]\nurl = \"redis://127.0.0.1:6379/0\"\ntimeout_ms = 500\n",
///     "toolgate.toml",
/// )
/// .unwrap();
/// assert_eq!(c.state.url.as_deref(), Some("redis://127.0.0.1:6379/0"));
/// assert!(HostConfig::parse("[state]\nurl = 1\n", "toolgate.toml").is_err());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateConfig {
    /// The shared store, for replicas: `redis://[user:password@]HOST:PORT/DB`,
    /// `rediss://…` (TLS) or `valkey://…`. Unset: the embedded store.
    pub url: Option<String>,
    /// The embedded store's SQLite file (default: `kv.sqlite` in the state
    /// directory). Ignored with `url`.
    pub path: Option<PathBuf>,
    /// What every key in the shared store starts with (default
    /// `toolgate`): deployments sharing one server keep apart.
    pub prefix: Option<String>,
    /// How long one operation on the shared store may take, reconnecting
    /// included, before it fails closed (default 1000 ms:
    /// [`crate::budgets::STATE_OP_TIMEOUT`]).
    pub timeout_ms: Option<u64>,
    /// This replica's id among those sharing the store (`--replica-id`
    /// wins): in its approval entries, its background jobs' ids and its
    /// audit records. Default: made once and kept in the state directory.
    pub replica_id: Option<String>,
}

/// `[console]` in the configuration.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsoleConfig {
    /// The file holding the console's token (default: `console-token` in
    /// the state directory); made, owner-only, when absent.
    pub token_file: Option<PathBuf>,
}

/// `[approval] mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalMode {
    /// The durable approval queue.
    Queue,
}

/// `[audit]` in the configuration (resolved by [`crate::audit`]).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// `false`: no record. Default: on for the `toolgate` binary.
    pub enabled: Option<bool>,
    /// The file (default: `audit.jsonl` in the state directory).
    pub path: Option<PathBuf>,
    pub sync: Option<SyncMode>,
    pub sync_interval_ms: Option<u64>,
    pub checkpoint_every: Option<u64>,
    pub rotate_mb: Option<u64>,
    /// The Ed25519 key file (default: `audit.key` in the state directory).
    pub signing_key: Option<PathBuf>,
    pub on_failure: Option<OnFailure>,
    pub arguments: Option<ArgumentsMode>,
    /// Sensitive arguments: tool name (`"*"`: every tool) → JSON pointers
    /// (RFC 6901) whose values the record keeps as their SHA-256 only
    /// (such a call is not replayable).
    #[serde(default)]
    pub sensitive: BTreeMap<String, Vec<String>>,
}
