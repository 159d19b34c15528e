//! `[lsp]` in the configuration: the language servers the `lsp` seam
//! starts, each from a preset (rust-analyzer, pyright,
//! typescript-language-server, clangd, gopls) or written out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use toolgate_schema::derive::Schema;

use crate::config::path::Program;

/// `[lsp]`: which language servers answer the `lsp` seam.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct LspConfig {
    /// Offer the presets whose command is found in the host's `PATH`
    /// (default `true`). `false`: only the servers under `[lsp.servers]`.
    pub presets: Option<bool>,
    /// A server unused this long is stopped, in seconds (default 600, at
    /// most 86400); the next question starts it again.
    pub idle_timeout_s: Option<u64>,
    /// `[lsp.servers.NAME]`: a server. A NAME that is a preset's
    /// (`rust-analyzer`, `pyright`, `typescript-language-server`, `clangd`,
    /// `gopls`) starts from it, and the keys given replace the preset's.
    #[serde(default)]
    pub servers: BTreeMap<String, LspServerConfig>,
}

/// `[lsp.servers.NAME]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct LspServerConfig {
    /// The preset it starts from (default: the one named NAME, if any).
    pub preset: Option<String>,
    /// `false`: not used (e.g. to turn a preset off).
    pub enabled: Option<bool>,
    /// The program: a name looked up in `PATH` (the host's, unless `env`
    /// sets one), or a path.
    pub command: Option<Program>,
    pub args: Option<Vec<String>>,
    /// The file extensions it serves, without the dot (`["rs"]`).
    pub extensions: Option<Vec<String>>,
    /// Names whose presence marks a project's root (`["Cargo.toml"]`):
    /// the nearest directory above a file holding one, never above the
    /// asking plugin's grant; none found: the grant's directory.
    pub root_markers: Option<Vec<String>>,
    /// Environment variables set for the server (`HOME` and
    /// `XDG_CACHE_HOME` are its cache directory unless set here).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// `initializationOptions` of its `initialize` request.
    pub initialization_options: Option<serde_json::Value>,
    /// What `workspace/configuration` answers, looked up by section
    /// (`{ python = { analysis = { typeCheckingMode = "strict" } } }`).
    pub settings: Option<serde_json::Value>,
}

/// One preset.
pub struct Preset {
    pub name: &'static str,
    pub command: &'static str,
    pub args: &'static [&'static str],
    pub extensions: &'static [&'static str],
    pub root_markers: &'static [&'static str],
    /// JSON of its `initializationOptions`.
    pub initialization_options: &'static str,
}

/// The presets, by name.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "rust-analyzer",
        command: "rust-analyzer",
        args: &[],
        extensions: &["rs"],
        root_markers: &["Cargo.toml", "rust-project.json"],
        // The project is read-only to the server: no `cargo check` on save,
        // no build scripts or proc macros (they would build into `target/`).
        initialization_options: r#"{"checkOnSave": false, "cargo": {"buildScripts": {"enable": false}}, "procMacro": {"enable": false}}"#,
    },
    Preset {
        name: "pyright",
        command: "pyright-langserver",
        args: &["--stdio"],
        extensions: &["py", "pyi"],
        root_markers: &[
            "pyrightconfig.json",
            "pyproject.toml",
            "setup.py",
            "setup.cfg",
            "requirements.txt",
        ],
        initialization_options: "{}",
    },
    Preset {
        name: "typescript-language-server",
        command: "typescript-language-server",
        args: &["--stdio"],
        extensions: &["ts", "tsx", "js", "jsx", "mts", "cts", "mjs", "cjs"],
        root_markers: &["tsconfig.json", "jsconfig.json", "package.json"],
        initialization_options: "{}",
    },
    Preset {
        name: "clangd",
        command: "clangd",
        args: &["--background-index=false"],
        extensions: &["c", "h", "cc", "cpp", "cxx", "hpp", "hh", "hxx"],
        root_markers: &["compile_commands.json", "compile_flags.txt", ".clangd"],
        initialization_options: "{}",
    },
    Preset {
        name: "gopls",
        command: "gopls",
        args: &[],
        extensions: &["go"],
        root_markers: &["go.work", "go.mod"],
        initialization_options: "{}",
    },
];

/// The preset named `name`.
pub fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

/// Default idle timeout: 10 minutes.
pub const DEFAULT_IDLE_TIMEOUT_S: u64 = 600;
/// Longest idle timeout: a day.
pub const MAX_IDLE_TIMEOUT_S: u64 = 86_400;

impl LspConfig {
    /// What the schema cannot say, each problem with its path.
    pub fn check(&self, problems: &mut Vec<String>) {
        if let Some(s) = self.idle_timeout_s
            && !(1..=MAX_IDLE_TIMEOUT_S).contains(&s)
        {
            problems.push(format!(
                "/lsp/idle_timeout_s: expected 1 to {MAX_IDLE_TIMEOUT_S}, got {s}"
            ));
        }
        for (name, s) in &self.servers {
            let at = format!("/lsp/servers/{name}");
            let base = match &s.preset {
                Some(p) => match preset(p) {
                    Some(p) => Some(p),
                    None => {
                        problems.push(format!(
                            "{at}/preset: no preset `{p}` (there are {})",
                            PRESETS
                                .iter()
                                .map(|p| p.name)
                                .collect::<Vec<_>>()
                                .join(", ")
                        ));
                        continue;
                    }
                },
                None => preset(name),
            };
            if base.is_none() {
                if s.command.is_none() {
                    problems.push(format!(
                        "{at}/command: missing; `{name}` is no preset ({}), so it needs a command",
                        PRESETS
                            .iter()
                            .map(|p| p.name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
                if s.extensions.as_ref().is_none_or(Vec::is_empty) {
                    problems.push(format!(
                        "{at}/extensions: missing; say which files it serves (e.g. [\"rs\"])"
                    ));
                }
            }
            for ext in s.extensions.iter().flatten() {
                if ext.is_empty() || ext.contains(['.', '/']) {
                    problems.push(format!(
                        "{at}/extensions: `{ext}` is not an extension (without the dot, e.g. \"rs\")"
                    ));
                }
            }
            for (key, v) in [
                ("initialization_options", &s.initialization_options),
                ("settings", &s.settings),
            ] {
                if v.as_ref().is_some_and(|v| !v.is_object()) {
                    problems.push(format!("{at}/{key}: expected a table"));
                }
            }
        }
    }
}
