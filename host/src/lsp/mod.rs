//! Language servers for the `lsp` seam: which server serves a file, where
//! its project's root is, starting it (sandboxed), keeping it warm and
//! stopping it when idle.
//!
//! A server is started per (server, project root) on the first question
//! about a file there, under [`toolgate_sandbox`] as a stdio MCP server is
//! — the [`Launcher`] the host gives at start resolves it with the
//! bridge's launch (the same grant resolution, so the host's authority
//! stays out of reach, its install directory granted read-only), and this
//! module imports nothing of the bridge —: the project *read-only*, a
//! cache directory of its own read-write (its `HOME`), no network. It is stopped after `[lsp] idle_timeout_s` unused,
//! with the host, or to make room past [`MAX_SERVERS`]; a server that
//! crashed is started again at the next question.
//!
//! What a component may ask, and how its paths become the server's URIs
//! and back, is the seam's ([`crate::seams::lsp`]); the conversation with
//! one server is [`server`]; the base protocol [`framing`].

pub mod config;
pub mod framing;
pub mod server;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

pub use config::{LspConfig, LspServerConfig, PRESETS};
pub use server::{Server, ServerError};

/// Language servers running at once in one host: 8. Starting one more
/// stops the one unused longest.
pub const MAX_SERVERS: usize = 8;

/// Why a question could not be answered.
#[derive(Clone, Debug, thiserror::Error)]
pub enum LspError {
    #[error("{0}")]
    NotConfigured(String),
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Server(String),
    #[error("{0}")]
    Timeout(String),
    #[error("{0}")]
    InvalidRequest(String),
}

/// A server as configured (a preset with the operator's keys applied).
#[derive(Clone, Debug)]
pub struct ServerSpec {
    pub name: Arc<str>,
    pub command: String,
    pub args: Vec<String>,
    pub extensions: Vec<String>,
    pub root_markers: Vec<String>,
    pub env: Vec<(String, String)>,
    pub initialization_options: Value,
    pub settings: Value,
    /// Named in `[lsp.servers]` (not only a preset found in `PATH`).
    pub configured: bool,
}

/// One server to launch: its program, and what it is granted.
pub struct LaunchAsk<'a> {
    /// `lsp:NAME`: who it is in logs and the egress record.
    pub who: String,
    /// Its program: a path, or a name looked up in `env`'s `PATH`.
    pub command: &'a str,
    pub args: &'a [String],
    /// Its whole environment.
    pub env: std::collections::BTreeMap<String, String>,
    /// The project: its working directory, granted read-only.
    pub root: &'a Path,
    /// Its own cache directory, granted read-write.
    pub cache: &'a Path,
    /// CPU seconds it may use over its life.
    pub cpu_seconds: u64,
}

/// A server process ready to spawn: what the host's launcher made of a
/// [`LaunchAsk`].
pub struct Launch {
    pub program: toolgate_sandbox::Program,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    pub policy: toolgate_sandbox::SandboxPolicy,
}

/// How the host turns a [`LaunchAsk`] into a confined [`Launch`] (`Err`:
/// what to fix): given at start, as stdio MCP servers are launched
/// (`host/start/lsp.rs`), so that this module needs nothing of the bridge.
pub type Launcher = Box<dyn Fn(&LaunchAsk<'_>) -> Result<Launch, String> + Send + Sync>;

/// What starting a server needs from the host.
pub struct LaunchContext {
    /// The host's working directory (a relative `command` is found there).
    pub workdir: PathBuf,
    pub launcher: Launcher,
}

/// CPU seconds a server may use: 24 hours (a server lives for hours; the
/// 10 CPU minutes of a command would end a busy one).
pub const SERVER_CPU_SECONDS: u64 = 24 * 3600;

type Slot = Arc<tokio::sync::Mutex<Option<Arc<Server>>>>;

/// The language servers of one host.
pub struct LspService {
    specs: Vec<ServerSpec>,
    idle: Duration,
    launch: LaunchContext,
    slots: Mutex<HashMap<(Arc<str>, PathBuf), Slot>>,
    /// Every server started, for the count and the shutdown; ended ones
    /// are dropped from it when a server starts.
    live: Mutex<Vec<std::sync::Weak<Server>>>,
    /// Where each server gets a cache directory; removed with the service.
    cache: PathBuf,
    started: std::sync::atomic::AtomicU64,
}

impl Drop for LspService {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.cache);
    }
}

/// The language id LSP expects for a file extension.
pub fn language_id(extension: &str) -> &str {
    match extension {
        "rs" => "rust",
        "py" | "pyi" => "python",
        "ts" | "mts" | "cts" => "typescript",
        "tsx" => "typescriptreact",
        "js" | "mjs" | "cjs" => "javascript",
        "jsx" => "javascriptreact",
        "c" | "h" => "c",
        "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => "cpp",
        other => other,
    }
}

impl LspService {
    /// The servers `config` names, and (unless `presets = false`) the
    /// presets it does not.
    pub fn new(config: &LspConfig, launch: LaunchContext) -> LspService {
        let mut specs = Vec::new();
        for (name, s) in &config.servers {
            if s.enabled == Some(false) {
                continue;
            }
            let base = s
                .preset
                .as_deref()
                .and_then(config::preset)
                .or_else(|| config::preset(name));
            let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
            specs.push(ServerSpec {
                name: name.as_str().into(),
                command: s
                    .command
                    .as_ref()
                    .map(|c| c.as_written().to_string_lossy().into_owned())
                    .or_else(|| base.map(|b| b.command.to_string()))
                    .unwrap_or_default(),
                args: s
                    .args
                    .clone()
                    .unwrap_or_else(|| base.map(|b| strings(b.args)).unwrap_or_default()),
                extensions: s
                    .extensions
                    .clone()
                    .unwrap_or_else(|| base.map(|b| strings(b.extensions)).unwrap_or_default()),
                root_markers: s
                    .root_markers
                    .clone()
                    .unwrap_or_else(|| base.map(|b| strings(b.root_markers)).unwrap_or_default()),
                env: s.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                initialization_options: s.initialization_options.clone().unwrap_or_else(|| {
                    base.map(|b| {
                        serde_json::from_str(b.initialization_options).expect("preset JSON")
                    })
                    .unwrap_or(Value::Object(Default::default()))
                }),
                settings: s
                    .settings
                    .clone()
                    .unwrap_or(Value::Object(Default::default())),
                configured: true,
            });
        }
        if config.presets != Some(false) {
            for p in PRESETS {
                let named = config
                    .servers
                    .iter()
                    .any(|(name, s)| name == p.name || s.preset.as_deref() == Some(p.name));
                if !named {
                    specs.push(ServerSpec {
                        name: p.name.into(),
                        command: p.command.into(),
                        args: p.args.iter().map(|s| s.to_string()).collect(),
                        extensions: p.extensions.iter().map(|s| s.to_string()).collect(),
                        root_markers: p.root_markers.iter().map(|s| s.to_string()).collect(),
                        env: Vec::new(),
                        initialization_options: serde_json::from_str(p.initialization_options)
                            .expect("preset JSON"),
                        settings: Value::Object(Default::default()),
                        configured: false,
                    });
                }
            }
        }
        LspService {
            specs,
            idle: Duration::from_secs(
                config
                    .idle_timeout_s
                    .unwrap_or(config::DEFAULT_IDLE_TIMEOUT_S),
            ),
            launch,
            slots: Mutex::new(HashMap::new()),
            live: Mutex::new(Vec::new()),
            cache: {
                // One per service: a process may run several hosts.
                static SERVICES: std::sync::atomic::AtomicU64 =
                    std::sync::atomic::AtomicU64::new(0);
                let n = SERVICES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                std::env::temp_dir().join(format!("toolgate-lsp-{}-{n}", std::process::id()))
            },
            started: Default::default(),
        }
    }

    /// Each server, and the program it would start (`Err`: why none —
    /// its command is not found).
    pub fn availability(&self) -> Vec<(Arc<str>, Result<PathBuf, String>)> {
        let host_path = std::env::var("PATH").unwrap_or_default();
        self.specs
            .iter()
            .map(|s| {
                let path = s
                    .env
                    .iter()
                    .find(|(k, _)| k == "PATH")
                    .map_or(host_path.as_str(), |(_, v)| v.as_str());
                let found = if s.command.contains('/') {
                    let p = self.launch.workdir.join(&s.command);
                    p.is_file().then_some(p)
                } else {
                    path.split(':')
                        .filter(|d| !d.is_empty())
                        .map(|d| Path::new(d).join(&s.command))
                        .find(|p| p.is_file())
                };
                let found = found.ok_or_else(|| format!("`{}` is not found", s.command));
                (s.name.clone(), found)
            })
            .collect()
    }

    /// The server for `file` (by its extension), and its language id.
    pub fn spec_for(&self, file: &Path) -> Result<(&ServerSpec, String), LspError> {
        let ext = file
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or_default();
        let spec = self
            .specs
            .iter()
            .find(|s| s.extensions.iter().any(|e| e == ext))
            .ok_or_else(|| {
                LspError::NotConfigured(format!(
                    "no language server serves `.{ext}` files: configure one under [lsp.servers.NAME] (`command`, `extensions`) in toolgate.toml; presets: {}",
                    PRESETS.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
                ))
            })?;
        let id = language_id(ext).to_string();
        Ok((spec, id))
    }

    /// The running server of `spec` for the project at `root`, started
    /// (and initialized) if none is, within `deadline`.
    pub async fn server(
        &self,
        spec: &ServerSpec,
        root: &Path,
        deadline: Instant,
    ) -> Result<Arc<Server>, LspError> {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            // A slot in use, or holding a running server, stays; the rest
            // (one per project root ever asked about) go.
            slots.retain(|_, s| {
                s.try_lock()
                    .map_or(true, |s| s.as_ref().is_some_and(|s| s.ended().is_none()))
            });
            slots
                .entry((spec.name.clone(), root.to_path_buf()))
                .or_default()
                .clone()
        };
        let mut slot = slot.lock().await;
        if let Some(s) = slot.as_ref()
            && s.ended().is_none()
        {
            return Ok(s.clone());
        }
        let launch = self.launch_of(spec, root).await?;
        let server = self.start(spec, root, launch)?;
        let started = Instant::now();
        match tokio::time::timeout_at(
            deadline.into(),
            server.initialize(spec.initialization_options.clone(), deadline),
        )
        .await
        {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                server.stop();
                return Err(LspError::Server(format!(
                    "the language server `{}` did not start: {e}",
                    spec.name
                )));
            }
            Err(_) => {
                server.stop();
                return Err(LspError::Timeout(format!(
                    "the language server `{}` did not answer `initialize` within {} ms",
                    spec.name,
                    started.elapsed().as_millis()
                )));
            }
        }
        tracing::info!(server = %spec.name, root = %root.display(), ms = started.elapsed().as_millis() as u64, "language server started");
        let weak = Arc::downgrade(&server);
        let idle = self.idle;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(idle.min(Duration::from_secs(30))).await;
                let Some(s) = weak.upgrade() else { return };
                if s.ended().is_some() {
                    return;
                }
                if s.idle_for() >= idle {
                    tracing::info!(server = %s.name, root = %s.root.display(), "language server idle: stopped");
                    s.stop();
                    return;
                }
            }
        });
        *slot = Some(server.clone());
        Ok(server)
    }

    /// Every server running now.
    pub fn running(&self) -> Vec<Arc<Server>> {
        Self::alive(&self.live.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn alive(live: &[std::sync::Weak<Server>]) -> Vec<Arc<Server>> {
        live.iter()
            .filter_map(std::sync::Weak::upgrade)
            .filter(|s| s.ended().is_none())
            .collect()
    }

    /// Stop every server (the host is stopping) and wait, up to
    /// `patience`, until each has ended.
    pub async fn shutdown(&self, patience: Duration) {
        let running = self.running();
        for s in &running {
            s.stop();
        }
        let _ = tokio::time::timeout(
            patience,
            futures::future::join_all(running.iter().map(|s| s.wait_ended())),
        )
        .await;
    }

    /// Spawn the server process for `root` (sandboxed), first stopping
    /// the one unused longest while [`MAX_SERVERS`] run: counted and
    /// started under one lock, so starts at once cannot pass the limit.
    fn start(
        &self,
        spec: &ServerSpec,
        root: &Path,
        launch: Launch,
    ) -> Result<Arc<Server>, LspError> {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.retain(|w| w.upgrade().is_some_and(|s| s.ended().is_none()));
        let mut running = Self::alive(&live);
        while running.len() >= MAX_SERVERS {
            running.sort_by_key(|s| std::cmp::Reverse(s.idle_for()));
            let s = running.remove(0);
            tracing::info!(server = %s.name, root = %s.root.display(), "language server stopped to make room for another ({MAX_SERVERS} at most)");
            s.stop();
            live.retain(|w| !std::ptr::eq(w.as_ptr(), Arc::as_ptr(&s)));
        }
        let child = toolgate_sandbox::spawn_piped(
            launch.program.clone(),
            &launch.cwd,
            &launch.env,
            &launch.policy,
        )
        .map_err(|e| {
            LspError::Server(format!(
                "cannot start the language server `{}`: {e}",
                spec.name
            ))
        })?;
        let server = Server::attach(
            spec.name.clone(),
            root.to_path_buf(),
            child,
            spec.settings.clone(),
        )
        .map_err(LspError::Server)?;
        live.push(Arc::downgrade(&server));
        Ok(server)
    }

    /// How `spec` is launched for `root`: as a stdio MCP server would be,
    /// granted the project read-only and a new cache directory read-write.
    async fn launch_of(&self, spec: &ServerSpec, root: &Path) -> Result<Launch, LspError> {
        let n = self
            .started
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cache = &self.cache.join(format!("{}-{n}", spec.name));
        std::fs::create_dir_all(cache)
            .and_then(|_| {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&self.cache, std::fs::Permissions::from_mode(0o700))
            })
            .map_err(|e| {
                LspError::Server(format!(
                    "cannot create the cache directory {} of language server `{}`: {e}",
                    cache.display(),
                    spec.name
                ))
            })?;
        let host_path = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
        let mut env: std::collections::BTreeMap<String, String> = [
            ("HOME", cache.to_string_lossy().into_owned()),
            ("XDG_CACHE_HOME", cache.to_string_lossy().into_owned()),
            ("TMPDIR", cache.to_string_lossy().into_owned()),
            (
                "CARGO_HOME",
                cache.join("cargo").to_string_lossy().into_owned(),
            ),
            ("PATH", host_path),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        env.extend(spec.env.iter().cloned());
        let path_var = env["PATH"].clone();
        let mut command = spec.command.clone();
        if let Some(real) = through_rustup(&command, root, &path_var).await {
            // A rustup proxy: run the toolchain's binary, with the
            // toolchain's `bin` first in `PATH` (its cargo, its rustc).
            if let Some(bin) = real.parent() {
                env.insert("PATH".into(), format!("{}:{path_var}", bin.display()));
            }
            command = real.to_string_lossy().into_owned();
        }
        (self.launch.launcher)(&LaunchAsk {
            who: format!("lsp:{}", spec.name),
            command: &command,
            args: &spec.args,
            env,
            root,
            cache,
            cpu_seconds: SERVER_CPU_SECONDS,
        })
        .map_err(|e| {
            let what = if spec.configured {
                format!("[lsp.servers.{}]", spec.name)
            } else {
                format!("the `{}` preset", spec.name)
            };
            LspError::NotConfigured(format!("the language server of {what} cannot start: {e}"))
        })
    }
}

/// When `command` (looked up in `path`) is a rustup proxy: the binary it
/// would run for `root` (`rustup which`, honouring a `rust-toolchain.toml`
/// there).
async fn through_rustup(command: &str, root: &Path, path: &str) -> Option<PathBuf> {
    let found = if command.contains('/') {
        PathBuf::from(command)
    } else {
        path.split(':')
            .map(|d| Path::new(d).join(command))
            .find(|p| p.is_file())?
    };
    let real = found.canonicalize().ok()?;
    if real.file_name()? != "rustup" {
        return None;
    }
    let out = tokio::process::Command::new(&real)
        .arg("which")
        .arg(found.file_name()?)
        .current_dir(root)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    // `rustup which` may install the toolchain a `rust-toolchain.toml`
    // names: bounded.
    let out = tokio::time::timeout(Duration::from_secs(30), out)
        .await
        .ok()?
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let p = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    p.is_file().then_some(p)
}

/// The project root of `file`: the nearest directory from its own up to
/// `top` holding one of `markers`; none: `top`.
pub fn find_root(file: &Path, top: &Path, markers: &[String]) -> PathBuf {
    let mut dir = file.parent();
    while let Some(d) = dir {
        if !d.starts_with(top) {
            break;
        }
        if markers.iter().any(|m| d.join(m).exists()) {
            return d.to_path_buf();
        }
        if d == top {
            break;
        }
        dir = d.parent();
    }
    top.to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_is_the_nearest_marked_directory_never_above_the_grant() {
        let tmp = std::env::temp_dir().join(format!("lsp-root-{}", std::process::id()));
        let top = tmp.join("grant");
        std::fs::create_dir_all(top.join("a/b/c")).unwrap();
        std::fs::write(tmp.join("Cargo.toml"), "").unwrap();
        std::fs::write(top.join("a/Cargo.toml"), "").unwrap();
        let m = vec!["Cargo.toml".to_string()];
        assert_eq!(find_root(&top.join("a/b/c/x.rs"), &top, &m), top.join("a"));
        // A marker above the grant is not looked at.
        assert_eq!(find_root(&top.join("y.rs"), &top, &m), top);
        std::fs::remove_file(top.join("a/Cargo.toml")).unwrap();
        assert_eq!(find_root(&top.join("a/b/c/x.rs"), &top, &m), top);
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn presets_and_configured_servers_are_chosen_by_extension() {
        let config: LspConfig = toml::from_str(
            "[servers.pyright]\nargs = [\"--stdio\", \"-v\"]\n[servers.mine]\ncommand = \"my-ls\"\nextensions = [\"foo\"]\n[servers.gopls]\nenabled = false\n",
        )
        .unwrap();
        let s = LspService::new(
            &config,
            LaunchContext {
                workdir: "/".into(),
                launcher: Box::new(|_| Err("not in this test".into())),
            },
        );
        let (py, id) = s.spec_for(Path::new("/x/a.py")).unwrap();
        assert_eq!((&*py.name, id.as_str()), ("pyright", "python"));
        assert_eq!(py.command, "pyright-langserver");
        assert_eq!(py.args, ["--stdio", "-v"]);
        assert!(py.configured);
        let (mine, id) = s.spec_for(Path::new("a.foo")).unwrap();
        assert_eq!(
            (&*mine.name, id.as_str(), mine.command.as_str()),
            ("mine", "foo", "my-ls")
        );
        let (ra, _) = s.spec_for(Path::new("src/lib.rs")).unwrap();
        assert!(!ra.configured, "a preset nobody named");
        let e = s.spec_for(Path::new("main.go")).unwrap_err();
        assert!(e.to_string().contains("[lsp.servers.NAME]"), "{e}");
    }
}
