//! The grant sections of the configuration: `[plugins.NAME.grants]` (and
//! a scope's), and the top-level `sandbox`/`sandbox_waive` keys.
//!
//! Resolved by [`super::resolve_grants`]; every path a grant names is a
//! [`GrantDir`] (granted, not protected: the grant says what the plugin may
//! do there).

use serde::{Deserialize, Serialize};
use toolgate_schema::derive::Schema;

use crate::config::path::GrantDir;

/// The largest `memory_mb` a grant may give one instance: the size of the
/// instance pool's slots (`RuntimeOptions::max_memory_bytes`).
pub const MAX_INSTANCE_MEMORY_MB: usize = 1024;

/// How strictly spawned processes are sandboxed (`sandbox`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, Schema)]
#[serde(rename_all = "kebab-case")]
#[schema(crate = "toolgate_schema::derive")]
pub enum SandboxMode {
    /// Refuse to spawn when the kernel cannot enforce the grant.
    #[default]
    Strict,
    /// Spawn anyway with what the kernel can enforce; logged on every spawn.
    BestEffort,
}

/// A protection a spawn may run without when the kernel lacks it
/// (`sandbox_waive`), by its name in `toolgate sandbox check`.
pub struct WaivableFeature;

impl Schema for WaivableFeature {
    fn schema() -> serde_json::Value {
        let names: Vec<&str> = toolgate_sandbox::Feature::ALL
            .iter()
            .map(|f| f.name())
            .collect();
        serde_json::json!({"type": "string", "enum": names})
    }
}

/// A plugin's grants, as written.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct GrantsConfig {
    /// Directories: `{ path, access = "read-only" | "read-write", guest, spawn_only }`.
    #[serde(default)]
    pub fs: Vec<FsGrantConfig>,
    /// Host environment variables passed through.
    #[serde(default)]
    pub env: Vec<String>,
    /// Exact `host:port` destinations of the component's own connections
    /// (`wasi:http`, `wasi:sockets`), resolved at load; the older grant,
    /// kept beside `egress` (see `crate::egress::component`).
    #[serde(default)]
    pub network: Vec<String>,
    /// The `shell` seam.
    #[serde(default)]
    pub shell: bool,
    /// Programs the `subprocess` seam may start.
    #[serde(default)]
    pub subprocess: Vec<String>,
    /// The `kv` seam (a key-value store per agent scope).
    #[serde(default)]
    pub kv: bool,
    /// The `kv` seam over another plugin's namespace, read-only, instead
    /// of a namespace of its own: `kv_read = "goals"` lets a policy read
    /// the agent scope's goal. Not with `kv = true`.
    pub kv_read: Option<String>,
    /// The `skills` seam: the skills of `[skills]`, read-only.
    #[serde(default)]
    pub skills: bool,
    /// The `questions` seam: questions for the user, through the call's
    /// approver.
    #[serde(default)]
    pub questions: bool,
    /// The `history` seam: the calling client's own calls, read from the
    /// audit record.
    #[serde(default)]
    pub history: bool,
    /// The `model` seam: the models of `[models]` it may ask, by name.
    #[serde(default)]
    pub models: Vec<String>,
    /// Every skill's directory (`[skills]`), read-only, preopened at its
    /// own absolute path: how `read` opens a skill's resources outside the
    /// working directory. Follows the catalog (a changed catalog is a
    /// changed grant).
    #[serde(default)]
    pub skill_files: bool,
    /// The memory of one instance, in MiB.
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
    /// Resource limits of the processes it spawns.
    #[serde(default)]
    pub spawn_limits: SpawnLimitsConfig,
    /// Keep the `.git` of every read-write directory read-only (default
    /// `true`): its config and hooks run outside any sandbox on the
    /// operator's next `git` command.
    pub protect_git: Option<bool>,
    /// `true`: this table *adds to* the built-in plugin's default grant
    /// (lists appended, switches and limits set) instead of replacing it —
    /// `egress = ["pypi.org"]` with `extend = true` is all `bash` needs.
    /// Only for a built-in plugin (others have no default). Default `false`.
    #[serde(default)]
    pub extend: bool,
}

impl GrantsConfig {
    /// `base` (a built-in default grant) with this table added to it: every
    /// list appended (duplicates dropped), a switch on if either is, a
    /// limit or setting of this table replacing the default's.
    pub fn extending(self, base: GrantsConfig) -> GrantsConfig {
        fn union<T: PartialEq>(mut a: Vec<T>, b: Vec<T>) -> Vec<T> {
            for x in b {
                if !a.contains(&x) {
                    a.push(x);
                }
            }
            a
        }
        let l = self.spawn_limits;
        let d = base.spawn_limits;
        GrantsConfig {
            fs: union(base.fs, self.fs),
            env: union(base.env, self.env),
            network: union(base.network, self.network),
            shell: base.shell || self.shell,
            subprocess: union(base.subprocess, self.subprocess),
            kv: base.kv || self.kv,
            kv_read: self.kv_read.or(base.kv_read),
            skills: base.skills || self.skills,
            questions: base.questions || self.questions,
            history: base.history || self.history,
            models: union(base.models, self.models),
            skill_files: base.skill_files || self.skill_files,
            memory_mb: self.memory_mb.or(base.memory_mb),
            spawn_tcp_ports: union(base.spawn_tcp_ports, self.spawn_tcp_ports),
            egress: union(base.egress, self.egress),
            spawn_limits: SpawnLimitsConfig {
                max_processes: l.max_processes.or(d.max_processes),
                address_space_mb: l.address_space_mb.or(d.address_space_mb),
                file_size_mb: l.file_size_mb.or(d.file_size_mb),
                cpu_seconds: l.cpu_seconds.or(d.cpu_seconds),
                open_files: l.open_files.or(d.open_files),
                output_kb: l.output_kb.or(d.output_kb),
            },
            protect_git: self.protect_git.or(base.protect_git),
            extend: false,
        }
    }

    /// The problems of a grant table at `at` (`/plugins/NAME/grants`).
    pub fn check(&self, at: &str, problems: &mut Vec<String>) {
        for (i, n) in self.network.iter().enumerate() {
            if n.rsplit_once(':')
                .and_then(|(_, port)| port.parse::<u16>().ok())
                .is_none()
            {
                problems.push(format!("{at}/network/{i}: expected host:port, got {n:?}"));
            }
        }
        for (i, rule) in self.egress.iter().enumerate() {
            if let Err(e) = crate::egress::Rule::parse(rule, false) {
                problems.push(format!("{at}/egress/{i}: {e}"));
            }
        }
        if self.memory_mb == Some(0) {
            problems.push(format!("{at}/memory_mb: expected 1 or more, got 0"));
        }
        if let Some(mb) = self.memory_mb
            && mb > MAX_INSTANCE_MEMORY_MB
        {
            problems.push(format!(
                "{at}/memory_mb: {mb} is more than one instance can have ({MAX_INSTANCE_MEMORY_MB} MiB, the size of the instance pool's slots)"
            ));
        }
    }
}

/// Resource limits of processes spawned through the shell and subprocess
/// seams (the whole process tree of one spawn).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct SpawnLimitsConfig {
    /// Processes (and threads) at once.
    pub max_processes: Option<u32>,
    /// Address space of each process, in MiB.
    pub address_space_mb: Option<u64>,
    /// The largest file a process may write, in MiB.
    pub file_size_mb: Option<u64>,
    /// CPU time of each process, in seconds.
    pub cpu_seconds: Option<u64>,
    /// Open files of each process.
    pub open_files: Option<u64>,
    /// Bytes of stdout (and of stderr) kept, in KiB.
    pub output_kb: Option<usize>,
}

/// One directory a grant gives.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct FsGrantConfig {
    /// The directory (relative to the host's working directory).
    pub path: GrantDir,
    /// `read-only` or `read-write`.
    pub access: FsAccess,
    /// Where the component sees it (default `.`).
    pub guest: Option<String>,
    /// Granted to the processes the plugin spawns (shell, subprocess) but
    /// not preopened for the component itself.
    #[serde(default)]
    pub spawn_only: bool,
}

/// Read-only or read-write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, Schema)]
#[serde(rename_all = "kebab-case")]
#[schema(crate = "toolgate_schema::derive")]
pub enum FsAccess {
    ReadOnly,
    ReadWrite,
}
