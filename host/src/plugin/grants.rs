//! What the operator grants one plugin: no ambient authority.
//!
//! A component's imports say what it would like; the grant says what it
//! gets. By default: no preopened directories, no environment variables, no
//! network, no shell or subprocess seam, a memory cap. Grants come from the
//! operator's configuration (or the defaults of the built-in plugins),
//! never from the plugin.

use std::net::SocketAddr;
use std::path::PathBuf;

use wasmtime_wasi::{FsPerms, WasiCtx};

use super::store::TailPipe;

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
