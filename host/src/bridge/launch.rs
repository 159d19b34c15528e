//! How a stdio server is started: its program, environment, working
//! directory and sandbox.
//!
//! A stdio server is a process like any other the host spawns: it runs
//! under [`toolgate_sandbox`] with its own grant (`[mcp.servers.NAME.grants]`,
//! resolved like a plugin's grant, so the host's authority paths stay out of
//! reach), a clean environment and no network unless granted.
//!
//! Node and Python servers live outside the system view the sandbox always
//! grants (`/usr`, `/bin`, …): in an npm prefix, a virtualenv, a pyenv
//! install. So, unless `auto_grant = false`, the host grants *read-only*:
//!
//! * the install directory of the command: the directory holding it, or the
//!   one above when that is a `bin` (or `.bin`) directory — a venv, an npm
//!   prefix's `node_modules` —, for the command as found and for the file
//!   its symlinks lead to;
//! * when the command is a script, the install directory of its interpreter
//!   (`#!/path/python`, or `#!/usr/bin/env NAME` looked up in the server's
//!   `PATH`), symlinks followed: e.g. a pyenv version directory.
//!
//! Never `/`, a home directory or one of its ancestors: such a command needs
//! an explicit grant. What was granted is logged and shown by `toolgate
//! plugins`.

use std::path::{Path, PathBuf};

use toolgate_sandbox::{Program, SandboxPolicy};

use super::config::McpServerConfig;
use crate::grants::{Authority, resolve_grants};
use crate::grants::{FsAccess, FsGrantConfig, GrantsConfig};

/// The `PATH` a server gets when its configuration sets none.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Everything needed to spawn one stdio server.
#[derive(Clone, Debug)]
pub struct Launch {
    pub program: Program,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    pub policy: SandboxPolicy,
    /// Directories granted read-only automatically (for status and logs).
    pub auto_granted: Vec<PathBuf>,
}

/// What a server's egress is decided and recorded with.
pub struct Egress<'a> {
    /// `[egress]`.
    pub global: &'a std::sync::Arc<crate::egress::Global>,
    /// Where its connections are recorded besides the log (the audit
    /// record's sink, if the host keeps one).
    pub record: Option<crate::egress::proxy::RecordSink>,
    /// Who is asked about a destination its rules leave open (`[egress]
    /// ask = true`): the server's asking; `None`: refused.
    pub ask: Option<std::sync::Arc<crate::egress::ask::ServerAsk>>,
}

/// Resolve a stdio server's launch. `Err` says what to fix.
pub fn resolve(
    name: &str,
    config: &McpServerConfig,
    workdir: &Path,
    enforcement: &toolgate_sandbox::Enforcement,
    authority: &Authority,
    origin: &str,
    egress: Egress<'_>,
) -> Result<Launch, String> {
    let Egress {
        global: egress,
        record,
        ask,
    } = egress;
    let command = config
        .command
        .as_ref()
        .map(|c| c.as_written().to_string_lossy().into_owned())
        .ok_or("no `command` (a stdio server needs one)")?;
    let command = command.as_str();
    let cwd = match &config.cwd {
        Some(c) => workdir.join(c),
        None => workdir.to_path_buf(),
    };
    let cwd = cwd
        .canonicalize()
        .map_err(|e| format!("its working directory {}: {e}", cwd.display()))?;
    let g = config.grants.clone().unwrap_or_default();
    let default_fs = config.grants.is_none();
    let grants = GrantsConfig {
        fs: if default_fs {
            vec![FsGrantConfig {
                path: ".".into(),
                access: FsAccess::ReadOnly,
                guest: None,
                spawn_only: true,
            }]
        } else {
            // A server has no preopens: every grant is for the process.
            g.fs.iter().map(FsGrantConfig::from).collect()
        },
        env: g.env.clone(),
        spawn_tcp_ports: g.spawn_tcp_ports.clone(),
        egress: g.egress.clone(),
        spawn_limits: g.limits.clone(),
        protect_git: g.protect_git,
        ..GrantsConfig::default()
    };
    let source = if default_fs {
        format!(
            "default for MCP servers (the working directory read-only; no [mcp.servers.{name}.grants] in {origin})"
        )
    } else {
        format!("{origin}: [mcp.servers.{name}.grants]")
    };
    let mut resolved = resolve_grants(Some(grants), source, &cwd, enforcement, authority)?;
    resolved.set_egress_global(egress);
    let mut env: Vec<(String, String)> = resolved.env.clone();
    for (k, v) in &config.env {
        env.retain(|(name, _)| name != k);
        env.push((k.clone(), v.clone()));
    }
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.push(("PATH".into(), DEFAULT_PATH.into()));
    }
    let path_var = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    // With an egress grant the server reaches the network only through a
    // proxy of its own, for as long as it runs (its connections are
    // attributed to `mcp:NAME`, not to a call: one server serves many),
    // logged and recorded (`record`: the audit record's sink, if kept).
    // With `[egress] ask = true`, what its rules leave open is asked about
    // on the server's behalf (`crate::egress::ask::ServerAsk`).
    let mut policy = match &resolved.egress {
        Some(rules) => {
            env.retain(|(k, _)| {
                !crate::egress::PROXY_VARIABLES.contains(&k.to_ascii_uppercase().as_str())
            });
            env.extend(crate::egress::proxy_env(rules));
            crate::egress::sandbox_policy(
                &resolved.sandbox,
                rules,
                crate::egress::proxy::Attribution {
                    call_id: String::new(),
                    plugin: format!("mcp:{name}"),
                    scope: String::new(),
                },
                record,
                ask.filter(|_| egress.ask)
                    .map(|a| a as std::sync::Arc<dyn crate::egress::ask::Asker>),
            )
        }
        None => resolved.sandbox.clone(),
    };
    let mut auto_granted = Vec::new();
    let found = find_program(command, &cwd, &path_var).ok_or_else(|| {
        format!(
            "its command `{command}` was not found (PATH={path_var}, working directory {})",
            cwd.display()
        )
    })?;
    if config.auto_grant != Some(false) {
        for dir in install_dirs(&found, &path_var) {
            if policy.read_only.iter().any(|p| dir.starts_with(p)) || in_system_view(&dir) {
                continue;
            }
            if too_broad(&dir) {
                return Err(format!(
                    "its command {} lives in {}, too broad to grant automatically (`/`, a home directory or above); grant what it needs in [mcp.servers.{name}.grants] fs and set `auto_grant = false`",
                    found.display(),
                    dir.display()
                ));
            }
            if let Some(d) = authority.data_within(&dir) {
                return Err(crate::grants::data_in_grant(
                    d,
                    &dir,
                    &format!("the automatic grant of MCP server `{name}`'s install directory"),
                ));
            }
            policy.read_only.push(dir.clone());
            auto_granted.push(dir);
        }
    }
    let granted = |p: &Path| {
        policy
            .read_only
            .iter()
            .chain(&policy.read_write)
            .any(|g| p.starts_with(g))
    };
    if !granted(&cwd) && !in_system_view(&cwd) {
        return Err(format!(
            "its working directory {} is not granted: add {{ path = \".\", access = \"read-only\" }} to [mcp.servers.{name}.grants] fs (or set `cwd` to a granted directory)",
            cwd.display()
        ));
    }
    Ok(Launch {
        program: Program::Exec {
            program: found,
            args: config.args.clone(),
        },
        cwd,
        env,
        policy,
        auto_granted,
    })
}

/// The program as the sandbox will run it: a path (relative to `cwd`) or a
/// name looked up in `path`.
fn find_program(command: &str, cwd: &Path, path: &str) -> Option<PathBuf> {
    if command.contains('/') {
        let p = cwd.join(command);
        return p.is_file().then_some(p);
    }
    path.split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(command))
        .find(|p| p.is_file())
}

fn in_system_view(dir: &Path) -> bool {
    toolgate_sandbox::system_paths::SYSTEM_DIRS
        .iter()
        .any(|s| dir.starts_with(s))
}

fn too_broad(dir: &Path) -> bool {
    if dir.components().count() < 3 {
        return true;
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    home.is_some_and(|h| h.starts_with(dir))
}

/// The directory a program is installed in: its directory, or the one
/// above a `bin`/`.bin` directory.
fn install_dir(program: &Path) -> Option<PathBuf> {
    let dir = program.parent()?;
    // A program of the system view (`/bin/sh`) needs nothing granted: not
    // the directory above its `bin` (`/`).
    if in_system_view(dir) {
        return Some(dir.to_path_buf());
    }
    let name = dir.file_name()?.to_str()?;
    if name == "bin" || name == ".bin" {
        dir.parent().map(Path::to_path_buf)
    } else {
        Some(dir.to_path_buf())
    }
}

/// Every directory `program` needs to be readable to start: its install
/// directories (as found and symlinks followed) and its interpreter's.
pub fn install_dirs(program: &Path, path: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut add = |d: Option<PathBuf>| {
        if let Some(d) = d.and_then(|d| d.canonicalize().ok())
            && !out.iter().any(|o| d.starts_with(o))
        {
            out.retain(|o| !o.starts_with(&d));
            out.push(d);
        }
    };
    add(install_dir(program));
    let real = program.canonicalize().ok();
    if let Some(real) = &real {
        add(install_dir(real));
    }
    if let Some(interp) = real.as_deref().and_then(|r| interpreter(r, path)) {
        add(install_dir(&interp));
        if let Ok(real) = interp.canonicalize() {
            add(install_dir(&real));
        }
    }
    out
}

/// The interpreter named by a script's `#!` line (through `env`).
fn interpreter(script: &Path, path: &str) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = std::str::from_utf8(line.split(|b| *b == b'\n').next()?).ok()?;
    let mut words = line.split_whitespace();
    let first = PathBuf::from(words.next()?);
    if first.file_name().is_some_and(|n| n == "env") {
        let name = words.find(|w| !w.starts_with('-'))?;
        return find_program(name, Path::new("/"), path);
    }
    Some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stdio server with an `egress` grant runs behind a proxy of its
    /// own: the granted name passes (here to a local server, the loopback
    /// named in `allow_private`), anything else gets the proxy's refusal,
    /// and nothing is reachable around it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_server_with_an_egress_grant_reaches_only_its_names() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let origin = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = origin.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = origin.accept().await {
                let mut b = [0u8; 1024];
                let _ = s.read(&mut b).await;
                let _ = s
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nserved")
                    .await;
            }
        });
        let work =
            std::env::temp_dir().join(format!("toolgate-launch-egress-{}", std::process::id()));
        std::fs::create_dir_all(&work).unwrap();
        let script = format!(
            "curl -sS -m 5 --noproxy '' http://localhost:{port}/; echo; \
             curl -sS -m 5 -v https://example.com/ 2>&1 | grep -o 'toolgate egress: [^(]*' | head -1; \
             curl -sS -m 5 --noproxy '*' http://127.0.0.1:{port}/; echo direct=$?"
        );
        let config: McpServerConfig = toml::from_str(&format!(
            "command = \"/bin/sh\"\nargs = [\"-c\", {script:?}]\nauto_grant = false\n\
             [grants]\nfs = [{{ path = \".\", access = \"read-write\" }}]\n\
             egress = [\"localhost:{port}\"]\n"
        ))
        .unwrap();
        let global = std::sync::Arc::new(
            crate::egress::Global::parse(&[], &["127.0.0.1/32".to_string()]).unwrap(),
        );
        let records = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = records.clone();
        let sink: crate::egress::proxy::RecordSink = std::sync::Arc::new(move |who, r| {
            kept.lock().unwrap().push(r.audit_fields(who));
        });
        let launch = resolve(
            "fetcher",
            &config,
            &work,
            &toolgate_sandbox::Enforcement::Strict,
            &Authority::default(),
            "test",
            Egress {
                global: &global,
                record: Some(sink),
                ask: None,
            },
        )
        .unwrap();
        assert!(launch.policy.egress_proxy.is_some());
        assert!(
            launch
                .env
                .iter()
                .any(|(k, v)| k == "https_proxy" && v.ends_with(":3128"))
        );
        let mut child = toolgate_sandbox::spawn_piped(
            launch.program.clone(),
            &launch.cwd,
            &launch.env,
            &launch.policy,
        )
        .unwrap();
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .await
            .unwrap();
        let _ = child.wait().await;
        let _ = std::fs::remove_dir_all(&work);
        assert!(out.contains("served"), "{out}");
        assert!(
            out.contains("toolgate egress: example.com:443 is not allowed")
                && out.contains("[mcp.servers.fetcher.grants]"),
            "{out}"
        );
        assert!(
            out.contains("direct=") && !out.contains("direct=0"),
            "{out}"
        );
        // Its connections reach the sink (the audit record's, in a host),
        // attributed to the server.
        drop(launch);
        let records = records.lock().unwrap().clone();
        assert!(
            records.iter().any(|r| r["plugin"] == "mcp:fetcher"
                && r["name"] == "localhost"
                && r["allowed"] == true
                && r["bytesDown"].as_u64().unwrap_or(0) > 0),
            "{records:#?}"
        );
        assert!(
            records.iter().any(|r| r["plugin"] == "mcp:fetcher"
                && r["name"] == "example.com"
                && r["allowed"] == false),
            "{records:#?}"
        );
    }

    #[test]
    fn install_dirs_follow_bin_symlinks_and_shebangs() {
        let base = std::env::temp_dir().join(format!("toolgate-launch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let interp = base.join("py/versions/3/bin");
        std::fs::create_dir_all(&interp).unwrap();
        std::fs::write(interp.join("python3"), "").unwrap();
        let venv = base.join("venv/bin");
        std::fs::create_dir_all(&venv).unwrap();
        std::os::unix::fs::symlink(interp.join("python3"), venv.join("python")).unwrap();
        std::fs::write(
            venv.join("server"),
            format!("#!{}\nimport x\n", venv.join("python").display()),
        )
        .unwrap();
        let dirs = install_dirs(&venv.join("server"), DEFAULT_PATH);
        let canon = |p: PathBuf| p.canonicalize().unwrap();
        assert_eq!(
            dirs,
            vec![canon(base.join("venv")), canon(base.join("py/versions/3"))]
        );
        // npm: node_modules/.bin/x -> ../pkg/dist/index.js, `#!/usr/bin/env node`.
        let nm = base.join("npm/node_modules");
        std::fs::create_dir_all(nm.join(".bin")).unwrap();
        std::fs::create_dir_all(nm.join("pkg/dist")).unwrap();
        std::fs::write(nm.join("pkg/dist/index.js"), "#!/usr/bin/env node\n").unwrap();
        std::os::unix::fs::symlink("../pkg/dist/index.js", nm.join(".bin/x")).unwrap();
        let dirs = install_dirs(&nm.join(".bin/x"), DEFAULT_PATH);
        assert_eq!(dirs[0], canon(nm.clone()), "{dirs:?}");
        assert!(
            dirs.iter()
                .all(|d| !d.starts_with(&base) || d == &canon(nm.clone()))
        );
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn broad_directories_are_never_granted_automatically() {
        assert!(too_broad(Path::new("/")));
        assert!(too_broad(Path::new("/opt")));
        if let Some(home) = std::env::var_os("HOME") {
            assert!(too_broad(Path::new(&home)));
        }
        assert!(!too_broad(Path::new("/opt/tools/venv")));
        // A program of the system view is readable already: its own
        // directory (skipped), never the `/` above `/bin`.
        assert_eq!(
            install_dir(Path::new("/bin/sh")),
            Some(PathBuf::from("/bin"))
        );
        assert!(
            install_dirs(Path::new("/bin/sh"), DEFAULT_PATH)
                .iter()
                .all(|d| in_system_view(d))
        );
    }
}
