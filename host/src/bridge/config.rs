//! `[mcp]` in the configuration: the MCP servers whose tools are bridged.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use toolgate_schema::derive::Schema;

use crate::config::path::{GrantDir, Program, Secret, WorkDir};
use crate::grants::{FsAccess, FsGrantConfig, SpawnLimitsConfig};

/// `[mcp]`: the MCP servers whose tools are bridged.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct McpConfig {
    /// The servers, by name (their tools are `mcp__NAME__TOOL`).
    #[serde(default)]
    pub servers: BTreeMap<String, McpServerConfig>,
}

/// `[mcp.servers.NAME]`: one MCP server, over stdio (`command`) or
/// streamable HTTP (`url`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct McpServerConfig {
    /// Default `true`.
    pub enabled: Option<bool>,
    /// stdio: the program (a path, or a name looked up in the server's `PATH`).
    pub command: Option<Program>,
    #[serde(default)]
    pub args: Vec<String>,
    /// stdio: environment variables set for the server (values, not
    /// passed through: see `grants.env` for that).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// stdio: the server's working directory (default: the host's).
    pub cwd: Option<WorkDir>,
    /// streamable HTTP: the endpoint (`http://host:port/mcp`).
    pub url: Option<String>,
    /// streamable HTTP: headers sent with every request.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// streamable HTTP: a bearer token read from this environment variable.
    pub bearer_token_env: Option<String>,
    /// streamable HTTP: a bearer token read from this file (one line, mode 600).
    pub bearer_token_file: Option<Secret>,
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
    /// Pin each tool's definition the first time it is seen and withhold
    /// a changed one until `toolgate bridge accept` (default `true`; see
    /// [`super::pins`]).
    pub pin: Option<bool>,
    /// Pins written by the operator: tool (the server's name) → the
    /// SHA-256 of its definition (`toolgate bridge pins SERVER` prints
    /// them). A tool named here is served only with that definition; the
    /// state store's pins (trust on first use) cover the others.
    #[serde(default)]
    pub pins: BTreeMap<String, String>,
    /// Pass the server's elicitation requests (`elicitation/create`) made
    /// during a call on to that call's MCP client, and its answer back
    /// (default `false`: the server is told the client declared none; see
    /// docs/operators/bridging.md).
    pub elicitation: Option<bool>,
    /// Pass its sampling requests (`sampling/createMessage`) on the same
    /// way (default `false`).
    pub sampling: Option<bool>,
    /// stdio: grant the server's install directory and interpreter
    /// read-only (default `true`; see docs/operators/bridging.md).
    pub auto_grant: Option<bool>,
    /// stdio: what the server process may touch.
    pub grants: Option<McpGrantsConfig>,
    /// `false`: its tools and prompts keep the server's names and its
    /// resources their URIs (default `true`: `mcp__NAME__TOOL`,
    /// `toolgate-mcp://NAME/URI`; see docs/operators/bridging.md).
    pub namespace: Option<bool>,
}

/// `[mcp.servers.NAME.grants]`: the sandbox of a stdio server.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct McpGrantsConfig {
    /// Directories the server may read or write: `{ path, access }`.
    #[serde(default)]
    pub fs: Vec<ServerFsGrant>,
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
    /// Resource limits of the server's processes (without `output_kb`:
    /// its output is the protocol, not kept).
    #[serde(default)]
    pub limits: SpawnLimitsConfig,
    pub protect_git: Option<bool>,
}

impl McpServerConfig {
    /// Whether the server is used.
    pub fn is_enabled(&self) -> bool {
        self.enabled != Some(false)
    }

    /// Whether its tools' definitions are pinned (`pin`, default `true`).
    pub fn is_pinned(&self) -> bool {
        self.pin != Some(false)
    }

    /// Whether its names are namespaced (`namespace`, default `true`).
    pub fn is_namespaced(&self) -> bool {
        self.namespace != Some(false)
    }
}

/// One directory a stdio server's grant gives (a server has no preopens:
/// every grant is for its process).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct ServerFsGrant {
    /// The directory (relative to the server's working directory).
    pub path: GrantDir,
    /// `read-only` or `read-write`.
    pub access: FsAccess,
}

impl From<&ServerFsGrant> for FsGrantConfig {
    fn from(g: &ServerFsGrant) -> Self {
        FsGrantConfig {
            path: g.path.clone(),
            access: g.access,
            guest: None,
            spawn_only: true,
        }
    }
}

impl McpConfig {
    /// The problems of `[mcp]`.
    pub fn check(&self, problems: &mut Vec<String>) {
        for (name, server) in &self.servers {
            problems.extend(check_mcp_server(name, server));
        }
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
        (Some(command), None) => {
            if command.is_path()
                && command.is_relative()
                && c.cwd
                    .as_ref()
                    .is_some_and(|d| d.as_written() != std::path::Path::new("."))
            {
                problems.push(format!(
                    "{}: a relative path with `cwd` set; write the program's absolute path (it is protected as the host's authority, named from the host's working directory, while the server starts in `cwd`)",
                    at("/command")
                ));
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
    if c.pin == Some(false) && !c.pins.is_empty() {
        problems.push(format!(
            "{}: `pins` are given and `pin = false` turns pinning off; drop one of them",
            at("/pins")
        ));
    }
    for (tool, digest) in &c.pins {
        if digest.len() != 64
            || !digest
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            problems.push(format!(
                "{}: expected a SHA-256 as 64 lowercase hex digits (`toolgate bridge pins {name}` prints them), got {digest:?}",
                at(&format!("/pins/{tool}"))
            ));
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
        if g.limits.output_kb.is_some() {
            problems.push(format!(
                "{}: only where the host keeps a process's output; a server's output is its protocol stream",
                at("/grants/limits/output_kb")
            ));
        }
        for (i, rule) in g.egress.iter().enumerate() {
            if let Err(e) = crate::egress::Rule::parse(rule, false) {
                problems.push(format!("{}: {e}", at(&format!("/grants/egress/{i}"))));
            }
        }
    }
    problems
}
