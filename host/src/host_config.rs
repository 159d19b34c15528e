//! The operator's configuration (`toolgate.toml`): the sections of the
//! features, composed.
//!
//! Each section is its feature's (`[audit]` is `audit::config`, `[egress]`
//! `egress::config`, …): its type derives the parsing and the schema and
//! checks itself; this module only composes them, checks what spans
//! sections, and says where relative paths start. What the file is made of
//! (the checked parse, typed paths) is [`crate::config`], which names no
//! feature.
//!
//! ```toml
//! max_parallel_tool_calls = 8      # rolling pool of concurrency-safe calls
//! policy_timeout_ms = 2000         # budget of one hook/guard invocation
//! sandbox = "strict"               # or "best-effort" (logged on every spawn)
//! sandbox_waive = []               # or run without named protections, e.g. ["mount_isolation"]
//! code_mode = false                # true: the model sees only `run_code`; direct calls are refused
//!
//! [limits]                         # every limit, its threat and default: docs/operators/configuration.md
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
//! # source = "oci://ghcr.io/acme/fs-tools:1.2"  # from an OCI registry instead of a file (docs/operators/oci.md)
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
//! [oci]                            # plugins from OCI registries (docs/operators/oci.md)
//! insecure_registries = []         # plain HTTP to these (loopback registries always may)
//! timeout_ms = 120000              # one pull or push in all
//!
//! [trust]                          # signatures of OCI plugins (docs/operators/oci.md, "Signatures and trust")
//! keys = ["publisher.pub"]         # PEM public keys (P-256, Ed25519), relative to this file
//! require_signature = true         # default once [trust] exists: policies yes, tools no
//! [trust.registries."ghcr.io/acme"]  # a REGISTRY/REPOSITORY prefix: its own keys, requirement
//!
//! [run_code]                       # the Code Mode interpreter's limits (see docs/operators/tools.md)
//! max_nested_calls = 100           # tool calls one program may make
//! max_output_kb = 64               # printed output kept (the rest is cut, and said so)
//! memory_mb = 64                   # the interpreter's heap
//! timeout_ms = 30000               # wall time of one program (a call's `timeoutMs` may shorten it)
//!
//! [audit]                          # the audit record (docs/operators/audit.md); on by default for `toolgate`
//! enabled = true
//! path = "audit.jsonl"             # default: in the state directory
//! sync = "batch"                   # or "always" | "none": when records reach the disk
//! sync_interval_ms = 200           # "batch": the longest a written record waits for fdatasync
//! checkpoint_every = 1000          # records between signed checkpoints
//! rotate_mb = 64                   # the file moves aside at this size; the chain goes on
//! signing_key = "audit.key"        # Ed25519 seed, 64 hex digits, mode 0600 (`toolgate keygen audit`)
//! on_failure = "fail-closed"       # or "continue": a call whose record cannot be written still returns
//! arguments = "full"               # or "digest": only the arguments' SHA-256 (not replayable)
//! sensitive = { login = ["/password"], "*" = ["/api_key"] }  # tool → JSON pointers kept as digests
//!
//! [models.local]                   # a model sub-agents may run on (docs/operators/tools.md, "Sub-agents")
//! api = "chat-completions"         # or "messages" (Anthropic)
//! base_url = "http://127.0.0.1:8080/v1"
//! model = "qwen2.5-7b-instruct"
//! api_key_file = "model.key"       # a secret: hidden from everything the host runs
//!
//! [delegation]                     # subagent, list_agents, send_message, interrupt_agent
//! max_depth = 2                    # sub-agents of sub-agents, no deeper
//! max_turns = 20                   # model turns of one sub-agent
//! max_tokens = 200000              # tokens of one sub-agent
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toolgate_sandbox::{Enforcement, Feature};
use toolgate_schema::derive::Schema;

use crate::approval::{ApprovalConfig, ConsoleConfig};
use crate::audit::AuditConfig;
use crate::bridge::McpConfig;
use crate::budgets::LimitsConfig;
use crate::codemode::RunCodeConfig;
use crate::config::path::{Bases, ConfigPath, classified};
use crate::config::{ConfigError, parse_checked};
use crate::egress::EgressConfig;
use crate::grants::SandboxMode;
use crate::grants::config::WaivableFeature;
#[cfg(feature = "oci")]
use crate::oci::OciConfig;
#[cfg(feature = "oci")]
use crate::oci::trust::TrustConfig;
use crate::search::WebSearchConfig;
/// `[oci]` in a build without the cargo feature `oci`: refused when set.
#[cfg(not(feature = "oci"))]
type OciConfig = crate::config::NotBuilt;
/// `[trust]` in a build without the cargo feature `oci`: refused when set.
#[cfg(not(feature = "oci"))]
type TrustConfig = crate::config::NotBuilt;
use crate::plugin::{PluginConfig, ToolConfig};
use crate::registry::scopes::ScopeConfig;
use crate::store::StateConfig;

/// `[serve]` in the configuration: the same choices as `serve`'s flags
/// of those names (a flag adds to it; see `toolgate_mcp`'s `harness`).
/// Read when `serve` starts.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct ServeConfig {
    /// Agent harnesses whose added arguments are accepted (stripped
    /// before validation, kept in the record): `["gemini-cli"]`.
    #[serde(default)]
    pub accept_harness_arguments: Vec<String>,
    /// Declare output schemas and send `structuredContent`.
    #[serde(default)]
    pub structured_content: bool,
    /// How long a 2026-07-28 client may treat a list result as fresh
    /// (`ttlMs`, SEP-2549); default 0.
    pub list_ttl_ms: Option<u64>,
}

/// `toolgate.toml`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct HostConfig {
    /// The rolling pool of concurrency-safe calls (1 or more).
    pub max_parallel_tool_calls: Option<usize>,
    /// The budget of one hook or guard invocation, in ms.
    pub policy_timeout_ms: Option<u64>,
    /// `strict` (default): refuse to spawn when the kernel cannot enforce
    /// a grant; `best-effort`: spawn with what it can (logged).
    #[serde(default)]
    pub sandbox: SandboxMode,
    /// Protections a spawn may run without, by name, when the kernel lacks them.
    #[serde(default)]
    #[schema(with = "Vec<WaivableFeature>")]
    pub sandbox_waive: Vec<String>,
    /// Every guest budget (docs/operators/configuration.md lists them).
    #[serde(default)]
    pub limits: LimitsConfig,
    /// Plugins by name (file stem).
    #[serde(default)]
    pub plugins: BTreeMap<String, PluginConfig>,
    /// Tools by name.
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
    pub trust: Option<TrustConfig>,
    /// `[egress]`: the rules every egress grant shares.
    #[serde(default)]
    pub egress: EgressConfig,
    /// The approval queue (see [`crate::approval::queue`]).
    #[serde(default)]
    pub approval: ApprovalConfig,
    /// `[questions]`: how long a question for the user waits (see
    /// [`crate::approval::questions`]).
    #[serde(default)]
    pub questions: crate::approval::config::QuestionsConfig,
    /// `[serve]`: what `toolgate serve` tells its MCP clients (the flags of
    /// the same names add to it).
    #[serde(default)]
    pub serve: ServeConfig,
    /// The approval console on `serve --http` (see `toolgate_mcp::console`).
    #[serde(default)]
    pub console: ConsoleConfig,
    /// `[state]`: where host-kept state lives (see [`crate::store`]).
    #[serde(default)]
    pub state: StateConfig,
    /// `[web_search]`: the provider of the `web-search` seam (see
    /// [`crate::search`]).
    #[serde(default)]
    pub web_search: WebSearchConfig,
    /// `[lsp]`: the language servers of the `lsp` seam (see
    /// [`crate::lsp`]).
    #[serde(default)]
    pub lsp: crate::lsp::LspConfig,
    /// `[skills]`: the skill directories of the `skills` seam and of
    /// `serve`'s prompts (see [`crate::skills`]).
    #[serde(default)]
    pub skills: crate::skills::SkillsConfig,
    /// `[models.NAME]`: models a sub-agent may run on (see
    /// [`crate::models`]).
    #[serde(default)]
    pub models: BTreeMap<String, crate::models::ModelConfig>,
    /// `[delegation]`: the sub-agent tools' budgets (see
    /// [`crate::delegation`]).
    #[serde(default)]
    pub delegation: crate::delegation::DelegationConfig,
    /// `[auth]`: OAuth 2.1 access tokens for `serve --http` (see
    /// [`crate::identity`]).
    pub auth: Option<crate::identity::AuthConfig>,
    /// `[[access]]`: which callers may see and call which tools (see
    /// [`crate::identity::Access`]).
    #[serde(default)]
    pub access: Vec<crate::identity::AccessRule>,
    /// The file this came from (for messages).
    #[serde(skip)]
    pub source: Option<PathBuf>,
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
        let config: HostConfig = parse_checked(text, origin)?;
        let mut problems = Vec::new();
        crate::config::positive(
            "/max_parallel_tool_calls",
            config.max_parallel_tool_calls.map(|v| v as u64),
            &mut problems,
        );
        crate::config::positive(
            "/policy_timeout_ms",
            config.policy_timeout_ms,
            &mut problems,
        );
        config.limits.check(&mut problems);
        config.run_code.check(&mut problems);
        config.audit.check(&mut problems);
        #[cfg(feature = "oci")]
        config.oci.check(&mut problems);
        #[cfg(not(feature = "oci"))]
        config.oci.check("/oci", "oci", &mut problems);
        config.egress.check(&mut problems);
        if let Some(auth) = &config.auth {
            auth.check(&mut problems);
        }
        crate::identity::check_access(&config.access, config.auth.as_ref(), &mut problems);
        config.web_search.check(&mut problems);
        config.lsp.check(&mut problems);
        for (name, m) in &config.models {
            m.check(name, &mut problems);
        }
        config
            .delegation
            .check(&config.models.keys().collect::<Vec<_>>(), &mut problems);
        crate::config::positive(
            "/questions/timeout_ms",
            config.questions.timeout_ms,
            &mut problems,
        );
        config.mcp.check(&mut problems);
        for (name, p) in &config.plugins {
            p.check(&format!("/plugins/{name}"), &mut problems);
        }
        for (scope, c) in &config.scopes {
            c.check(scope, &mut problems);
        }
        // A `models` grant names configured models only.
        let scoped = config.scopes.iter().flat_map(|(scope, c)| {
            c.plugins
                .iter()
                .map(move |(name, p)| (format!("/scopes/{scope}/plugins/{name}"), p))
        });
        let top = config
            .plugins
            .iter()
            .map(|(name, p)| (format!("/plugins/{name}"), p));
        for (at, p) in top.chain(scoped) {
            for (i, m) in p.grants.iter().flat_map(|g| g.models.iter()).enumerate() {
                if !config.models.contains_key(m) {
                    problems.push(format!(
                        "{at}/grants/models/{i}: no model {m:?} is configured; add [models.{m}] or grant one of: {}",
                        if config.models.is_empty() {
                            "(none configured)".to_string()
                        } else {
                            config.models.keys().cloned().collect::<Vec<_>>().join(", ")
                        }
                    ));
                }
            }
        }
        // Trust rules read their files relative to the configuration's
        // directory, which `origin` names.
        #[cfg(feature = "oci")]
        {
            let base = Path::new(origin).parent().unwrap_or(Path::new(""));
            if let Some(t) = &config.trust {
                t.check(base, &mut problems);
            }
            for (name, p) in &config.plugins {
                if let Some(rule) = &p.trust {
                    crate::oci::trust::check_rule(
                        &format!("/plugins/{name}/trust"),
                        rule,
                        base,
                        &mut problems,
                    );
                }
            }
        }
        #[cfg(not(feature = "oci"))]
        {
            if let Some(t) = &config.trust {
                t.check("/trust", "oci", &mut problems);
            }
            for (name, p) in &config.plugins {
                if let Some(rule) = &p.trust {
                    rule.check(&format!("/plugins/{name}/trust"), "oci", &mut problems);
                }
            }
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

    /// The schema of `toolgate.toml`, derived from its types: what the
    /// file is checked against, with each path's class in its `title`.
    pub fn schema() -> serde_json::Value {
        <HostConfig as Schema>::schema()
    }

    /// Every path this configuration names, with its class (see
    /// [`crate::config::path`]), resolved against the configuration file's
    /// directory and `workdir`: the walk the protected set is computed
    /// from.
    pub fn paths(&self, workdir: &Path) -> Vec<ConfigPath> {
        classified(
            self,
            &Bases {
                config: self.trust_base(),
                work: workdir.to_path_buf(),
            },
        )
    }

    /// How strictly the host sandboxes spawns (`sandbox`, `sandbox_waive`).
    pub fn enforcement(&self) -> Result<Enforcement, ConfigError> {
        if self.sandbox == SandboxMode::BestEffort {
            return Ok(Enforcement::BestEffort);
        }
        if self.sandbox_waive.is_empty() {
            return Ok(Enforcement::Strict);
        }
        let mut waived = std::collections::BTreeSet::new();
        for name in &self.sandbox_waive {
            waived.insert(
                Feature::from_name(name).ok_or_else(|| ConfigError::Invalid {
                    path: self.origin(),
                    problems: vec![format!("/sandbox_waive: unknown protection {name:?}")],
                })?,
            );
        }
        Ok(Enforcement::Waive(waived))
    }

    /// `[egress]`'s shared rules.
    pub fn egress_global(&self) -> Result<crate::egress::Global, ConfigError> {
        self.egress.global().map_err(|e| ConfigError::Invalid {
            path: self.origin(),
            problems: vec![format!("/egress: {e}")],
        })
    }

    /// The directory relative paths of `[trust]` and scopes' `plugin_dirs`
    /// are read from: the configuration file's.
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

    /// The SHA-256 (hex) of the configuration as the host parsed it — what
    /// is in force, not the file's bytes: comments and layout do not change
    /// it, any value does. The audit record's `plugins` record holds the
    /// first; a `config` record each change (old → new).
    pub fn digest(&self) -> String {
        // Its maps are ordered (BTreeMap): the text is deterministic.
        crate::audit::chain::hex(&crate::audit::chain::sha256(format!("{self:?}").as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::InstanceMode;

    /// Built without the cargo feature `oci` (`.ci/run` builds the host
    /// so): `[oci]`, `[trust]`, a plugin's `source` and `trust` are refused
    /// at start, each by its path and the feature — never ignored; a file
    /// without them parses as in every build.
    #[cfg(not(feature = "oci"))]
    #[test]
    fn without_the_oci_feature_its_sections_are_refused_by_name() {
        let text = "[oci]\ninsecure_registries = [\"localhost:5000\"]\n\
                    [trust]\nkeys = [\"k.pub\"]\n\
                    [plugins.guard]\nsource = \"oci://localhost:5000/guard:1\"\n\
                    trust = { require_signature = true }\n";
        let problems = match HostConfig::parse(text, "toolgate.toml") {
            Err(ConfigError::Invalid { problems, .. }) => problems,
            other => panic!("{other:?}"),
        };
        for at in [
            "/oci",
            "/trust",
            "/plugins/guard/source",
            "/plugins/guard/trust",
        ] {
            assert!(
                problems
                    .iter()
                    .any(|p| p.starts_with(at) && p.contains("cargo feature `oci`")),
                "{at}: {problems:?}"
            );
        }
        assert!(HostConfig::parse("max_parallel_tool_calls = 4\n", "toolgate.toml").is_ok());
    }

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
