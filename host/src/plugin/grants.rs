//! What the operator grants one plugin: no ambient authority.
//!
//! A component's imports say what it would like; the grant says what it
//! gets. By default: no preopened directories, no environment variables, no
//! network, no shell or subprocess seam, a memory cap. Grants come from the
//! operator's configuration (or the defaults of the built-in plugins),
//! never from the plugin.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use toolgate_sandbox::{Enforcement, Feature, ResourceLimits, SandboxPolicy};
use wasmtime_wasi::{FsPerms, WasiCtx};

use super::pipe::TailPipe;
use crate::config::{FsAccess, GrantsConfig, HostConfig, SandboxMode};
use crate::error::HostError;

/// Default memory cap of one instance.
pub const DEFAULT_MEMORY_BYTES: usize = 256 << 20;
/// Default bytes of stdout (and of stderr) kept from a spawned process.
pub const DEFAULT_OUTPUT_CAP: usize = 1 << 20;

/// One directory made visible to the guest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsGrant {
    /// The directory on the host (canonical).
    pub host: PathBuf,
    /// Where the guest sees it (`.` makes relative paths resolve there).
    pub guest: String,
    /// Read-write, or read-only.
    pub writable: bool,
}

/// The seams a plugin may use, and with what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grants {
    pub fs: Vec<FsGrant>,
    /// Environment variables the guest sees (name, value).
    pub env: Vec<(String, String)>,
    /// TCP destinations the guest may connect to (resolved at load).
    pub network: Vec<SocketAddr>,
    /// The network grant as the operator wrote it (`host:port`), for messages.
    pub network_names: Vec<String>,
    /// The `shell` seam.
    pub shell: bool,
    /// The `subprocess` seam: programs it may run (empty: none).
    pub subprocess: Vec<String>,
    /// The `kv` seam: a key-value store per agent scope.
    pub kv: bool,
    /// Linear memory cap per instance, in bytes.
    pub memory_bytes: usize,
    /// The sandbox every process spawned for this plugin runs in: the file
    /// system grants, the spawn TCP ports, the limits, the host's
    /// enforcement mode.
    pub sandbox: toolgate_sandbox::SandboxPolicy,
    /// Bytes of stdout and of stderr kept from a spawned process.
    pub output_cap: usize,
    /// Where this grant was written (`toolgate.toml: [plugins.x.grants]`,
    /// or "built-in default"), for error messages.
    pub source: String,
}

impl Default for Grants {
    fn default() -> Self {
        Grants {
            fs: Vec::new(),
            env: Vec::new(),
            network: Vec::new(),
            network_names: Vec::new(),
            shell: false,
            subprocess: Vec::new(),
            kv: false,
            memory_bytes: DEFAULT_MEMORY_BYTES,
            sandbox: toolgate_sandbox::SandboxPolicy::default(),
            output_cap: DEFAULT_OUTPUT_CAP,
            source: "no grant (default: nothing)".into(),
        }
    }
}

impl Grants {
    /// A WASI context giving exactly this grant.
    pub fn wasi_ctx(&self, stderr: TailPipe) -> anyhow::Result<WasiCtx> {
        let mut b = WasiCtx::builder();
        b.stdout(TailPipe::sink());
        b.stderr(stderr);
        for g in &self.fs {
            let perms = if g.writable {
                FsPerms::ReadWrite
            } else {
                FsPerms::ReadOnly
            };
            b.preopened_dir(&g.host, &g.guest, perms).map_err(|e| {
                anyhow::anyhow!("cannot open granted directory {}: {e}", g.host.display())
            })?;
        }
        b.envs(&self.env);
        if !self.network.is_empty() {
            let allowed = self.network.clone();
            b.allow_tcp(true);
            b.allow_udp(false);
            b.socket_addr_check(move |addr, usage| {
                use wasmtime_wasi::sockets::SocketAddrUse;
                let ok = match usage {
                    // Outgoing connections to granted destinations only.
                    SocketAddrUse::TcpConnect => allowed.contains(&addr),
                    // The implicit bind of a client socket (any local
                    // address, an ephemeral port) is what a connect needs.
                    SocketAddrUse::TcpBind => addr.ip().is_unspecified() && addr.port() == 0,
                    // No serving, no UDP.
                    _ => false,
                };
                Box::pin(async move { ok })
            });
        }
        Ok(b.build())
    }
}

/// How strictly the host sandboxes spawns, from the configuration.
pub fn enforcement(config: &HostConfig) -> Result<Enforcement, HostError> {
    if config.sandbox == SandboxMode::BestEffort {
        return Ok(Enforcement::BestEffort);
    }
    if config.sandbox_waive.is_empty() {
        return Ok(Enforcement::Strict);
    }
    let mut waived = std::collections::BTreeSet::new();
    for name in &config.sandbox_waive {
        waived.insert(Feature::from_name(name).ok_or_else(|| {
            HostError::Config(crate::config::ConfigError::Invalid {
                path: config.origin(),
                problems: vec![format!("/sandbox_waive: unknown protection {name:?}")],
            })
        })?);
    }
    Ok(Enforcement::Waive(waived))
}

/// Turn a grant as written into a grant as enforced. Paths are resolved
/// against `workdir` and must exist; network names are resolved now.
pub fn resolve_grants(
    config: Option<GrantsConfig>,
    source: String,
    workdir: &Path,
    enforcement: &Enforcement,
) -> Result<Grants, String> {
    let Some(config) = config else {
        return Ok(Grants {
            source,
            sandbox: SandboxPolicy {
                enforcement: enforcement.clone(),
                ..SandboxPolicy::default()
            },
            ..Grants::default()
        });
    };
    let mut fs = Vec::new();
    for g in &config.fs {
        let path = workdir.join(&g.path);
        let host = path
            .canonicalize()
            .map_err(|e| format!("granted directory {} ({source}): {e}", path.display()))?;
        if !host.is_dir() {
            return Err(format!(
                "granted path {} ({source}) is not a directory",
                host.display()
            ));
        }
        fs.push(FsGrant {
            host,
            guest: g.guest.clone().unwrap_or_else(|| ".".into()),
            writable: g.access == FsAccess::ReadWrite,
        });
    }
    let env = config
        .env
        .iter()
        .filter_map(|name| match std::env::var(name) {
            Ok(v) => Some((name.clone(), v)),
            Err(_) => {
                tracing::warn!(variable = %name, "granted environment variable is not set; skipped");
                None
            }
        })
        .collect();
    let mut network = Vec::new();
    for name in &config.network {
        use std::net::ToSocketAddrs;
        let addrs = name
            .to_socket_addrs()
            .map_err(|e| format!("network grant {name:?} ({source}) cannot be resolved: {e}"))?;
        network.extend(addrs);
    }
    let l = &config.spawn_limits;
    let defaults = ResourceLimits::default();
    let mb = |v: Option<u64>, d: Option<u64>| v.map(|mb| mb << 20).or(d);
    let sandbox = SandboxPolicy {
        read_only: fs
            .iter()
            .filter(|g| !g.writable)
            .map(|g| g.host.clone())
            .collect(),
        read_write: fs
            .iter()
            .filter(|g| g.writable)
            .map(|g| g.host.clone())
            .collect(),
        tcp_connect_ports: config.spawn_tcp_ports.clone(),
        limits: ResourceLimits {
            max_processes: l.max_processes.or(defaults.max_processes),
            address_space_bytes: mb(l.address_space_mb, defaults.address_space_bytes),
            file_size_bytes: mb(l.file_size_mb, defaults.file_size_bytes),
            cpu_seconds: l.cpu_seconds.or(defaults.cpu_seconds),
            open_files: l.open_files.or(defaults.open_files),
        },
        enforcement: enforcement.clone(),
        ..SandboxPolicy::default()
    };
    Ok(Grants {
        fs,
        env,
        network,
        network_names: config.network.clone(),
        shell: config.shell,
        subprocess: config.subprocess.clone(),
        kv: config.kv,
        memory_bytes: config
            .memory_mb
            .map(|mb| mb << 20)
            .unwrap_or(DEFAULT_MEMORY_BYTES),
        sandbox,
        output_cap: l.output_kb.map(|kb| kb << 10).unwrap_or(DEFAULT_OUTPUT_CAP),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_mode_comes_from_the_configuration() {
        let config = |text: &str| HostConfig::parse(text, "t.toml").unwrap();
        assert_eq!(enforcement(&config("")).unwrap(), Enforcement::Strict);
        assert_eq!(
            enforcement(&config("sandbox = \"best-effort\"")).unwrap(),
            Enforcement::BestEffort
        );
        assert_eq!(
            enforcement(&config("sandbox_waive = [\"mount_isolation\"]")).unwrap(),
            Enforcement::Waive([Feature::MountIsolation].into_iter().collect())
        );
        assert!(HostConfig::parse("sandbox_waive = [\"everything\"]", "t.toml").is_err());
    }

    #[test]
    fn grants_become_the_sandbox_policy() {
        let dir = std::env::temp_dir().join(format!("toolgate-grants-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("ro")).unwrap();
        std::fs::create_dir_all(dir.join("rw")).unwrap();
        let config = HostConfig::parse(
            r#"
            [plugins.p.grants]
            fs = [{ path = "ro", access = "read-only" }, { path = "rw", access = "read-write", guest = "/data" }]
            shell = true
            spawn_tcp_ports = [443]
            spawn_limits = { max_processes = 7, file_size_mb = 2, output_kb = 4 }
            "#,
            "t.toml",
        )
        .unwrap();
        let g = resolve_grants(
            config.plugins["p"].grants.clone(),
            "test".into(),
            &dir,
            &Enforcement::BestEffort,
        )
        .unwrap();
        let ro = dir.join("ro").canonicalize().unwrap();
        let rw = dir.join("rw").canonicalize().unwrap();
        assert_eq!(g.sandbox.read_only, vec![ro.clone()]);
        assert_eq!(g.sandbox.read_write, vec![rw.clone()]);
        assert_eq!(g.fs[1].guest, "/data");
        assert_eq!(g.sandbox.tcp_connect_ports, vec![443]);
        assert_eq!(g.sandbox.limits.max_processes, Some(7));
        assert_eq!(g.sandbox.limits.file_size_bytes, Some(2 << 20));
        assert_eq!(g.output_cap, 4 << 10);
        assert_eq!(g.sandbox.enforcement, Enforcement::BestEffort);
        // A granted path that does not exist is an error naming it.
        let mut missing = config.plugins["p"].grants.clone().unwrap();
        missing.fs[0].path = "nope".into();
        let e =
            resolve_grants(Some(missing), "test".into(), &dir, &Enforcement::Strict).unwrap_err();
        assert!(e.contains("nope"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
