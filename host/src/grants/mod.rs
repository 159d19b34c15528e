//! What the operator grants one plugin: no ambient authority.
//!
//! A top-level module: the seams ([`crate::seams`]) read a grant, the
//! plugin loader ([`crate::plugin`]) hands one to each plugin, and neither
//! is imported from here.
//!
//! A component's imports say what it would like; the grant says what it
//! gets. By default: no preopened directories, no environment variables, no
//! network, no shell or subprocess seam, a memory cap. Grants come from the
//! operator's configuration (or the defaults of the built-in plugins),
//! never from the plugin.
//!
//! A grant never reaches what the host itself treats as authority (the
//! [`Authority`]: its configuration, plugin directories and manifests, the
//! compile cache, its executable) nor, by default, the `.git` of a
//! read-write directory (whose config and hooks run outside any sandbox on
//! the operator's next `git` command):
//!
//! * for the processes a plugin spawns, these paths become the sandbox
//!   policy's protected paths, which stay read-only even beneath a
//!   read-write grant (read-only mounts in the sandbox's view);
//! * a WASI preopen cannot leave out a path beneath it, so a read-write
//!   preopen that holds (or lies inside) one of them is refused at load,
//!   naming the path, why it matters and what to do. A grant marked
//!   `spawn_only` is not preopened at all: the component gets no file
//!   access from it, its spawned processes do (that is how the built-in
//!   `bash` tool is granted the working directory).
//!
//! Some authority is also *secret* ([`Authority::add_secret`]: the
//! configuration, with every MCP server's `env`; token and key files):
//! nothing the host runs may even read it. Spawned processes find it
//! masked ([`SandboxPolicy::hidden`]); a component's opens through its
//! preopens and `bulk-read` are checked against where the opened file
//! really is ([`check_hidden`]) and refused.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use toolgate_sandbox::{Enforcement, ResourceLimits, SandboxPolicy};

pub mod config;

pub use config::{
    FsAccess, FsGrantConfig, GrantsConfig, MAX_INSTANCE_MEMORY_MB, SandboxMode, SpawnLimitsConfig,
};

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
    /// Preopened for the component itself (WASI). `false`: granted to the
    /// processes it spawns only (`spawn_only = true`).
    pub preopen: bool,
}

/// One path the host treats as authority, and what it is (for messages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthorityPath {
    /// Absolute; canonical where it exists (else its canonical parent joined
    /// with its name).
    pub path: PathBuf,
    /// What it is, e.g. "the host's configuration".
    pub what: String,
}

/// Everything the host reads as authority: no grant may reach it.
///
/// ```
/// use toolgate::grants::Authority;
/// let mut a = Authority::default();
/// a.add("/etc/toolgate/toolgate.toml", "the host's configuration");
/// assert_eq!(a.paths()[0].what, "the host's configuration");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Authority {
    paths: Vec<AuthorityPath>,
    /// The state directory's journal, where every sandboxed spawn records
    /// the absent authority paths it could create (see [`crate::state`]).
    journal: Option<PathBuf>,
    /// The subset that must not even be read (see [`Authority::add_secret`]).
    secrets: Vec<AuthorityPath>,
    /// The subset the host writes files beside (see [`Authority::add_data`]).
    data: Vec<AuthorityPath>,
}

impl Authority {
    /// Adds `path` (made absolute against the current directory; it need
    /// not exist: an absent configuration file must stay absent).
    pub fn add(&mut self, path: impl AsRef<Path>, what: impl Into<String>) {
        let path = Self::absolute(path.as_ref());
        if !self.paths.iter().any(|a| a.path == path) {
            self.paths.push(AuthorityPath {
                path,
                what: what.into(),
            });
        }
    }

    /// `path` made absolute against the current directory, canonical where
    /// it exists (else its canonical parent joined with its name).
    fn absolute(path: &Path) -> PathBuf {
        let path = if path.is_absolute() {
            path.to_path_buf()
        } else {
            std::env::current_dir().unwrap_or_default().join(path)
        };
        path.canonicalize().unwrap_or_else(|_| {
            match (
                path.parent().and_then(|p| p.canonicalize().ok()),
                path.file_name(),
            ) {
                (Some(parent), Some(name)) => parent.join(name),
                _ => path.clone(),
            }
        })
    }

    /// The paths, in the order added.
    pub fn paths(&self) -> &[AuthorityPath] {
        &self.paths
    }

    /// Sets the journal every sandboxed spawn records its exposed absent
    /// authority paths in ([`toolgate_sandbox::SandboxPolicy::watch_journal`]).
    pub fn set_journal(&mut self, journal: Option<PathBuf>) {
        self.journal = journal;
    }

    /// The journal, if any.
    pub fn journal(&self) -> Option<&Path> {
        self.journal.as_deref()
    }

    /// Adds `path` as authority that is also *secret*: a file (or
    /// directory) holding credentials — the host's configuration, with
    /// every MCP server's `env`; a bearer-token file; a key. Like
    /// [`add`](Self::add) (it is protected: nothing the host runs may
    /// create or change it), and besides nothing the host runs may read
    /// it: the sandbox masks it ([`SandboxPolicy::hidden`]) and a
    /// component's preopens and `bulk-read` refuse it
    /// ([`Grants::hides`]), whatever grant covers it.
    ///
    /// ```
    /// use toolgate::grants::Authority;
    /// let mut a = Authority::default();
    /// a.add_secret("/etc/toolgate/toolgate.toml", "the host's configuration");
    /// assert_eq!(a.paths().len(), 1);
    /// assert_eq!(a.secrets()[0].path, a.paths()[0].path);
    /// ```
    pub fn add_secret(&mut self, path: impl AsRef<Path>, what: impl Into<String>) {
        let path = Self::absolute(path.as_ref());
        let what = what.into();
        self.add(&path, what.clone());
        if !self.secrets.iter().any(|a| a.path == path) {
            self.secrets.push(AuthorityPath { path, what });
        }
    }

    /// The secret paths (see [`add_secret`](Self::add_secret)), in the
    /// order added; each is among [`paths`](Self::paths) too.
    pub fn secrets(&self) -> &[AuthorityPath] {
        &self.secrets
    }

    /// Adds `path` as a file the host writes *and makes files beside*:
    /// the audit record (its rotations), an SQLite store (its journals).
    /// Secret, like [`add_secret`](Self::add_secret), and besides no grant
    /// may reach its directory at all ([`data_within`](Self::data_within)):
    /// a mask is made when a process starts, so a file the host makes
    /// beside it later would be open to a process already running.
    ///
    /// ```
    /// use toolgate::grants::Authority;
    /// let mut a = Authority::default();
    /// a.add_data("/srv/work/audit.jsonl", "the audit record");
    /// assert_eq!(a.secrets().len(), 1);
    /// assert!(a.data_within(std::path::Path::new("/srv")).is_some());
    /// assert!(a.data_within(std::path::Path::new("/srv/work/sub")).is_none());
    /// ```
    pub fn add_data(&mut self, path: impl AsRef<Path>, what: impl Into<String>) {
        let path = Self::absolute(path.as_ref());
        let what = what.into();
        self.add_secret(&path, what.clone());
        if !self.data.iter().any(|a| a.path == path) {
            self.data.push(AuthorityPath { path, what });
        }
    }

    /// The same authority without its host-written data (what a grant may
    /// coexist with, protected and hidden like the rest).
    pub fn without_data(&self) -> Authority {
        let data: Vec<&PathBuf> = self.data.iter().map(|d| &d.path).collect();
        Authority {
            paths: self
                .paths
                .iter()
                .filter(|p| !data.contains(&&p.path))
                .cloned()
                .collect(),
            secrets: self
                .secrets
                .iter()
                .filter(|p| !data.contains(&&p.path))
                .cloned()
                .collect(),
            data: Vec::new(),
            journal: self.journal.clone(),
        }
    }

    /// Only the host-written file at `path`, if this authority holds it.
    pub fn data_only(&self, path: &Path) -> Authority {
        let mut a = Authority::default();
        for d in self.data.iter().filter(|d| d.path == Self::absolute(path)) {
            a.add_data(&d.path, d.what.clone());
        }
        a
    }

    /// The host-written file whose directory lies within `dir`, if any:
    /// a grant of `dir` would reach the files the host makes beside it.
    pub fn data_within(&self, dir: &Path) -> Option<&AuthorityPath> {
        self.data
            .iter()
            .find(|d| d.path.parent().is_some_and(|p| p.starts_with(dir)))
    }
}

/// The `.git` of `root` and, when it is a pointer file (a worktree or a
/// submodule), the git directory it names and that directory's common
/// directory (where config and hooks live). Only what exists.
pub fn git_paths(root: &Path) -> Vec<AuthorityPath> {
    let dot_git = root.join(".git");
    let Ok(meta) = std::fs::symlink_metadata(&dot_git) else {
        return Vec::new();
    };
    let what = |p: &Path| AuthorityPath {
        path: p.canonicalize().unwrap_or(p.to_path_buf()),
        what: format!("the git metadata of {}", root.display()),
    };
    let mut out = vec![AuthorityPath {
        path: dot_git.clone(),
        what: format!("the git metadata of {}", root.display()),
    }];
    if meta.file_type().is_symlink() {
        if dot_git.is_dir() {
            out.push(what(&dot_git));
        }
        return out;
    }
    if meta.is_file() {
        let gitdir = std::fs::read_to_string(&dot_git).ok().and_then(|text| {
            let line = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?;
            Some(root.join(line.trim()))
        });
        if let Some(gitdir) = gitdir.filter(|d| d.is_dir()) {
            out.push(what(&gitdir));
            let common = std::fs::read_to_string(gitdir.join("commondir"))
                .ok()
                .map(|c| gitdir.join(c.trim()))
                .filter(|d| d.is_dir());
            if let Some(common) = common {
                out.push(what(&common));
            }
        }
    }
    out
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
    /// Each `network` entry as written and the addresses it resolved to at
    /// load (a component's connections to it go to those: see
    /// [`crate::egress::component`]).
    pub network_pinned: Vec<(String, Vec<SocketAddr>)>,
    /// The `shell` seam.
    pub shell: bool,
    /// The `subprocess` seam: programs it may run (empty: none).
    pub subprocess: Vec<String>,
    /// The `kv` seam: a key-value store per agent scope.
    pub kv: bool,
    /// `kv_read = "PLUGIN"`: the `kv` seam is that plugin's namespace,
    /// read-only (`kv` is then set too).
    pub kv_read: Option<std::sync::Arc<str>>,
    /// The `skills` seam (`skills = true`): the catalog of the reload
    /// that resolved this grant (empty until the lifecycle sets it; a
    /// changed catalog is a changed grant, so the plugin loads again).
    pub skills: Option<std::sync::Arc<crate::skills::Catalog>>,
    /// The `questions` seam (`questions = true`).
    pub questions: bool,
    /// The `history` seam (`history = true`).
    pub history: bool,
    /// The `model` seam (`models = ["NAME"]`): the models it may ask.
    pub models: Vec<String>,
    /// `skill_files = true`: the lifecycle adds every skill's directory
    /// to `fs` ([`Grants::add_skill_dirs`]).
    pub skill_files: bool,
    /// Linear memory cap per instance, in bytes.
    pub memory_bytes: usize,
    /// The sandbox every process spawned for this plugin runs in: the file
    /// system grants, the spawn TCP ports, the limits, the host's
    /// enforcement mode.
    pub sandbox: toolgate_sandbox::SandboxPolicy,
    /// Bytes of stdout and of stderr kept from a spawned process.
    pub output_cap: usize,
    /// `egress = [...]`: spawned processes reach the network only through
    /// a proxy of their own that allows these destinations (see
    /// [`crate::egress`]); `None`: no egress grant (`spawn_tcp_ports`, the
    /// weaker grant by port, applies as written).
    pub egress: Option<std::sync::Arc<crate::egress::Policy>>,
    /// `[egress]` (`deny`, `allow_private`): applies to every connection,
    /// with or without an `egress` grant (a component's `network` too).
    pub egress_global: std::sync::Arc<crate::egress::Global>,
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
            network_pinned: Vec::new(),
            shell: false,
            subprocess: Vec::new(),
            kv: false,
            kv_read: None,
            skills: None,
            questions: false,
            history: false,
            models: Vec::new(),
            skill_files: false,
            memory_bytes: DEFAULT_MEMORY_BYTES,
            sandbox: toolgate_sandbox::SandboxPolicy::default(),
            output_cap: DEFAULT_OUTPUT_CAP,
            egress: None,
            egress_global: Default::default(),
            source: "no grant (default: nothing)".into(),
        }
    }
}

/// Something an import reaches for that a grant has to give.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Capability {
    /// `wasi:sockets/*`, `wasi:http/*`.
    Network,
    /// `wasi:filesystem/*`.
    FileSystem,
    /// `wasi:cli/environment`.
    Environment,
    /// The `shell` seam.
    Shell,
    /// The `subprocess` seam.
    Subprocess,
    /// The `kv` seam.
    Kv,
    /// The `files` seam (writes through a read-write grant).
    Files,
    /// The `skills` seam.
    Skills,
    /// The `questions` seam.
    Questions,
    /// The `history` seam.
    History,
    /// The `model` seam.
    Models,
}

impl Capability {
    /// Does `grants` give it?
    pub fn granted(self, grants: &Grants) -> bool {
        match self {
            Capability::Network => !grants.network.is_empty() || grants.egress.is_some(),
            Capability::FileSystem => grants.fs.iter().any(|g| g.preopen),
            Capability::Environment => !grants.env.is_empty(),
            Capability::Shell => grants.shell,
            Capability::Subprocess => !grants.subprocess.is_empty(),
            Capability::Kv => grants.kv,
            Capability::Files => grants.fs.iter().any(|g| g.writable),
            Capability::Skills => grants.skills.is_some(),
            Capability::Questions => grants.questions,
            Capability::History => grants.history,
            Capability::Models => !grants.models.is_empty(),
        }
    }

    /// What to write in `[plugins.NAME.grants]` to grant it.
    pub fn grant_line(self) -> &'static str {
        match self {
            Capability::Network => "egress = [\"host\"] (or network = [\"host:port\"])",
            Capability::FileSystem => "fs = [{ path = \"DIR\", access = \"read-only\" }]",
            Capability::Environment => "env = [\"NAME\"] (or vars = { NAME = \"value\" })",
            Capability::Shell => "shell = true",
            Capability::Subprocess => "subprocess = [\"PROGRAM\"]",
            Capability::Kv => "kv = true",
            Capability::Files => "fs = [{ path = \"DIR\", access = \"read-write\" }]",
            Capability::Skills => "skills = true",
            Capability::Questions => "questions = true",
            Capability::History => "history = true",
            Capability::Models => "models = [\"NAME\"]",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Network => "network",
            Capability::FileSystem => "file system",
            Capability::Environment => "environment",
            Capability::Shell => "shell",
            Capability::Subprocess => "subprocess",
            Capability::Kv => "kv",
            Capability::Files => "files",
            Capability::Skills => "skills",
            Capability::Questions => "questions",
            Capability::History => "history",
            Capability::Models => "models",
        }
    }
}

/// How long a hidden path's identity (device, inode) is trusted before it
/// is looked up again: the window in which a secret the *operator*
/// replaced (a new inode) could still be opened through a link of another
/// name. Nothing the host runs can replace one (they are protected).
pub const HIDDEN_IDENTITY_TTL: std::time::Duration = std::time::Duration::from_millis(100);

/// What a hidden path is now: its identity and whether it is a directory
/// (`None` while it does not exist).
type Identity = Option<((u64, u64), bool)>;

/// Calls `f` with the identities of the hidden paths, looked up at most
/// every [`HIDDEN_IDENTITY_TTL`] (one cache for the last list asked about:
/// every plugin of a generation has the same).
fn with_identities<R>(hidden: &[PathBuf], f: impl FnOnce(&[Identity]) -> R) -> R {
    use std::os::unix::fs::MetadataExt;
    use std::sync::Mutex;
    use std::time::Instant;
    struct Cache {
        paths: Vec<PathBuf>,
        ids: Vec<Identity>,
        at: Instant,
    }
    static CACHE: Mutex<Option<Cache>> = Mutex::new(None);
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    let now = Instant::now();
    let fresh = cache
        .as_ref()
        .is_some_and(|c| c.paths == hidden && now.duration_since(c.at) < HIDDEN_IDENTITY_TTL);
    if !fresh {
        let ids = hidden
            .iter()
            .map(|h| {
                std::fs::metadata(h)
                    .ok()
                    .map(|m| ((m.dev(), m.ino()), m.is_dir()))
            })
            .collect();
        *cache = Some(Cache {
            paths: hidden.to_vec(),
            ids,
            at: now,
        });
    }
    f(&cache.as_ref().expect("filled above").ids)
}

/// Whether the open file `fd`, opened as `requested` (the path the guest
/// gave), is, or lies inside, one of the `hidden` paths (see
/// [`Authority::add_secret`]): `Err` names it. Free when nothing is hidden.
///
/// * The file is a hidden file when its identity (device, inode) is one's
///   — however the path led there (a symlink, `..`, another hard link).
/// * Where the identity cannot tell — `requested` ends in a hidden path's
///   name (the file may have been replaced since its identity was looked
///   up), or a hidden path is a directory (the file may lie beneath it) —
///   where the open file really is is read back from `/proc/self/fd` and
///   compared; when that cannot be read, the file is refused (fail closed).
pub fn check_hidden(
    hidden: &[PathBuf],
    fd: std::os::fd::BorrowedFd<'_>,
    requested: &Path,
) -> Result<(), PathBuf> {
    use std::os::fd::AsRawFd;
    if hidden.is_empty() {
        return Ok(());
    }
    // SAFETY: `fd` is open for the duration of the borrow; fstat fills
    // `st` and reads nothing else.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(PathBuf::from("(a file that cannot be looked at)"));
    }
    let this = (st.st_dev, st.st_ino);
    let name = requested.file_name();
    let unsure = with_identities(hidden, |ids| {
        if let Some((h, _)) = hidden
            .iter()
            .zip(ids)
            .find(|(_, id)| id.is_some_and(|(id, _)| id == this))
        {
            return Err(h.clone());
        }
        Ok(hidden.iter().zip(ids).any(|(h, id)| {
            id.is_some_and(|(_, dir)| dir) || (name.is_some() && h.file_name() == name)
        }))
    })?;
    if !unsure {
        return Ok(());
    }
    let real = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map_err(|_| PathBuf::from("(a file whose place cannot be read back)"))?;
    match hidden.iter().find(|h| real.starts_with(h)) {
        Some(h) => Err(h.clone()),
        None => Ok(()),
    }
}

/// Turn a grant as written into a grant as enforced. Paths are resolved
/// against `workdir` and must exist; network names are resolved now. The
/// `authority` paths (and the `.git` of every read-write directory, unless
/// `protect_git = false`) become the sandbox's protected paths; a
/// read-write preopen that would reach one is an error.
pub fn resolve_grants(
    config: Option<GrantsConfig>,
    source: String,
    workdir: &Path,
    enforcement: &Enforcement,
    authority: &Authority,
) -> Result<Grants, String> {
    let Some(config) = config else {
        return Ok(Grants {
            source,
            sandbox: SandboxPolicy {
                enforcement: enforcement.clone(),
                protected: authority.paths().iter().map(|a| a.path.clone()).collect(),
                watch_journal: authority.journal.clone(),
                hidden: authority.secrets().iter().map(|a| a.path.clone()).collect(),
                ..SandboxPolicy::default()
            },
            ..Grants::default()
        });
    };
    if let Some(name) = &config.kv_read {
        if config.kv {
            return Err(format!(
                "`kv = true` and `kv_read = \"{name}\"` ({source}): a plugin has one kv namespace — its own (`kv`) or another plugin's, read-only (`kv_read`); keep one"
            ));
        }
        if name.is_empty()
            || name.len() > 64
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        {
            return Err(format!(
                "`kv_read = \"{name}\"` ({source}): name a plugin (1 to 64 of A-Z a-z 0-9 - _ .)"
            ));
        }
    }
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
        if let Some(d) = authority.data_within(&host) {
            return Err(data_in_grant(d, &host, &source));
        }
        fs.push(FsGrant {
            host,
            guest: g.guest.clone().unwrap_or_else(|| ".".into()),
            writable: g.access == FsAccess::ReadWrite,
            preopen: !g.spawn_only,
        });
    }
    let protect_git = config.protect_git.unwrap_or(true);
    let mut reserved: Vec<AuthorityPath> = authority.paths().to_vec();
    if protect_git {
        for g in fs.iter().filter(|g| g.writable) {
            reserved.extend(git_paths(&g.host));
        }
    }
    check_preopens(&fs, &reserved, &source, protect_git)?;
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
    let mut network_pinned = Vec::new();
    for name in &config.network {
        use std::net::ToSocketAddrs;
        let addrs: Vec<SocketAddr> = name
            .to_socket_addrs()
            .map_err(|e| format!("network grant {name:?} ({source}) cannot be resolved: {e}"))?
            .collect();
        network.extend(addrs.iter().copied());
        network_pinned.push((name.clone(), addrs));
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
        protected: reserved.iter().map(|a| a.path.clone()).collect(),
        hidden: authority.secrets().iter().map(|a| a.path.clone()).collect(),
        tcp_connect_ports: config.spawn_tcp_ports.clone(),
        limits: ResourceLimits {
            max_processes: l.max_processes.or(defaults.max_processes),
            address_space_bytes: mb(l.address_space_mb, defaults.address_space_bytes),
            file_size_bytes: mb(l.file_size_mb, defaults.file_size_bytes),
            cpu_seconds: l.cpu_seconds.or(defaults.cpu_seconds),
            open_files: l.open_files.or(defaults.open_files),
        },
        enforcement: enforcement.clone(),
        watch_journal: authority.journal.clone(),
        ..SandboxPolicy::default()
    };
    Ok(Grants {
        fs,
        env,
        network,
        network_names: config.network.clone(),
        network_pinned,
        shell: config.shell,
        subprocess: config.subprocess.clone(),
        kv: config.kv || config.kv_read.is_some(),
        kv_read: config.kv_read.as_deref().map(std::sync::Arc::from),
        skills: config.skills.then(Default::default),
        questions: config.questions,
        history: config.history,
        models: config.models.clone(),
        skill_files: config.skill_files,
        memory_bytes: config
            .memory_mb
            .map(|mb| mb << 20)
            .unwrap_or(DEFAULT_MEMORY_BYTES),
        sandbox,
        output_cap: l.output_kb.map(|kb| kb << 10).unwrap_or(DEFAULT_OUTPUT_CAP),
        egress: egress_policy(&config.egress, &source)?,
        egress_global: Default::default(),
        source,
    })
}

/// A grant's `egress` rules under the default `[egress]` (see
/// [`Grants::set_egress_global`]); `None` without rules.
fn egress_policy(
    rules: &[String],
    source: &str,
) -> Result<Option<std::sync::Arc<crate::egress::Policy>>, String> {
    if rules.is_empty() {
        return Ok(None);
    }
    // The table to add a rule to: the bracketed part of the source.
    let table = match (source.rfind('['), source.rfind(']')) {
        (Some(a), Some(b)) if a < b => source[a..=b].to_string(),
        _ => source.to_string(),
    };
    let policy = crate::egress::Policy::parse(rules, Default::default(), table)
        .map_err(|e| format!("{e} ({source})"))?;
    Ok(Some(std::sync::Arc::new(policy)))
}

impl Grants {
    /// `skill_files = true`: each skill's directory of `catalog`,
    /// read-only, preopened at its own absolute path (the guest opens
    /// `DIR/FILE`), unless a grant already preopens that path or the
    /// directory holds the host's data (logged). Read-only: a skill
    /// directory is authority, and nothing here can write it.
    pub fn add_skill_dirs(&mut self, catalog: &crate::skills::Catalog, authority: &Authority) {
        for skill in catalog.skills() {
            let Ok(host) = skill.dir.canonicalize() else {
                continue;
            };
            let Some(guest) = host.to_str().map(str::to_string) else {
                continue;
            };
            if self.fs.iter().any(|g| g.preopen && g.guest == guest) {
                continue;
            }
            if let Some(d) = authority.data_within(&host) {
                tracing::warn!(skill = %skill.name, dir = %host.display(), holds = %d.path.display(),
                    "the skill's directory holds the host's data: not granted to `read` (its files stay readable through `skill`)");
                continue;
            }
            self.fs.push(FsGrant {
                host,
                guest,
                writable: false,
                preopen: true,
            });
        }
    }

    /// Whether a plugin holding this grant could change anything outside
    /// the host: write a file, spawn a process, reach the network, keep
    /// state. Derived from what the operator granted, never from what the
    /// plugin says of itself; a plugin that could not is read-only (its
    /// calls need no intent in the audit record: nothing of them can have
    /// happened if the host dies mid-call).
    pub fn may_have_effects(&self) -> bool {
        self.fs.iter().any(|g| g.writable)
            || self.shell
            || !self.subprocess.is_empty()
            || (self.kv && self.kv_read.is_none())
            || !self.network.is_empty()
            || self.egress.is_some()
            || !self.sandbox.tcp_connect_ports.is_empty()
            || !self.sandbox.read_write.is_empty()
    }

    /// Puts this grant's egress rules under the configuration's
    /// `[egress]` (its `deny` and `allow_private`).
    pub fn set_egress_global(&mut self, global: &std::sync::Arc<crate::egress::Global>) {
        self.egress_global = global.clone();
        if let Some(p) = &mut self.egress {
            std::sync::Arc::make_mut(p).global = global.clone();
        }
    }
}

/// Why a grant of `dir` is refused: it reaches the directory of a file the
/// host writes files beside (see [`Authority::add_data`]).
pub fn data_in_grant(d: &AuthorityPath, dir: &Path, source: &str) -> String {
    format!(
        "the grant of {} ({source}) reaches {} ({}), a file the host writes and makes files beside (rotations, journals) while processes run; a process that starts before such a file exists could read it, so no grant may reach that directory. Move it out of {} (by default it is in the state directory) or grant a narrower directory",
        dir.display(),
        d.path.display(),
        d.what,
        dir.display()
    )
}

/// A read-write preopen gives the component itself every path beneath it;
/// WASI cannot leave one out. Refuse one that reaches authority.
fn check_preopens(
    fs: &[FsGrant],
    reserved: &[AuthorityPath],
    source: &str,
    protect_git: bool,
) -> Result<(), String> {
    for (i, g) in fs.iter().enumerate() {
        if !(g.writable && g.preopen) {
            continue;
        }
        let Some(a) = reserved
            .iter()
            .find(|a| a.path.starts_with(&g.host) || g.host.starts_with(&a.path))
        else {
            continue;
        };
        let git = protect_git && a.what.starts_with("the git metadata");
        return Err(format!(
            "grant fs[{i}] ({source}: {}, read-write) would let the component itself write {}              ({}), and a WASI preopen cannot leave out a path beneath it. Grant the directory              read-only, grant a narrower directory that does not hold it, or — if the plugin              needs the directory only for the processes it spawns — set `spawn_only = true` on              that grant (the sandbox keeps {} read-only for them){}",
            g.host.display(),
            a.path.display(),
            a.what,
            a.path.display(),
            if git {
                "; or set `protect_git = false` in the grant to let the plugin write .git"
            } else {
                ""
            }
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgate_sandbox::Feature;

    #[test]
    fn the_sandbox_mode_comes_from_the_configuration() {
        let config = |text: &str| crate::HostConfig::parse(text, "t.toml").unwrap();
        assert_eq!(config("").enforcement().unwrap(), Enforcement::Strict);
        assert_eq!(
            config("sandbox = \"best-effort\"").enforcement().unwrap(),
            Enforcement::BestEffort
        );
        assert_eq!(
            config("sandbox_waive = [\"mount_isolation\"]")
                .enforcement()
                .unwrap(),
            Enforcement::Waive([Feature::MountIsolation].into_iter().collect())
        );
        assert!(crate::HostConfig::parse("sandbox_waive = [\"everything\"]", "t.toml").is_err());
    }

    #[test]
    fn grants_become_the_sandbox_policy() {
        let dir = std::env::temp_dir().join(format!("toolgate-grants-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("ro")).unwrap();
        std::fs::create_dir_all(dir.join("rw")).unwrap();
        let config = crate::HostConfig::parse(
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
            &Authority::default(),
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
        let e = resolve_grants(
            Some(missing),
            "test".into(),
            &dir,
            &Enforcement::Strict,
            &Authority::default(),
        )
        .unwrap_err();
        assert!(e.contains("nope"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[cfg(test)]
mod authority_tests {
    use super::*;

    fn grants_for(dir: &Path, text: &str, authority: &Authority) -> Result<Grants, String> {
        let config = crate::HostConfig::parse(text, "t.toml").unwrap();
        resolve_grants(
            config.plugins["p"].grants.clone(),
            "t.toml: [plugins.p.grants]".into(),
            dir,
            &Enforcement::Strict,
            authority,
        )
    }

    #[test]
    fn a_read_write_preopen_holding_authority_is_refused_a_spawn_only_one_protects_it() {
        let dir = std::env::temp_dir().join(format!("toolgate-authority-{}", std::process::id()));
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        std::fs::write(dir.join("toolgate.toml"), "").unwrap();
        let dir = dir.canonicalize().unwrap();
        let mut authority = Authority::default();
        authority.add(dir.join("toolgate.toml"), "the host's configuration");
        let rw = "[plugins.p.grants]\nfs = [{ path = \".\", access = \"read-write\" }]\n";
        let e = grants_for(&dir, rw, &authority).unwrap_err();
        assert!(
            e.contains("toolgate.toml")
                && e.contains("the host's configuration")
                && e.contains("spawn_only = true")
                && e.contains("fs[0]"),
            "{e}"
        );
        // Read-only is fine; so is spawn-only, and then both paths are protected.
        let ro = rw.replace("read-write", "read-only");
        assert!(grants_for(&dir, &ro, &authority).is_ok());
        let spawn = "[plugins.p.grants]\nfs = [{ path = \".\", access = \"read-write\", spawn_only = true }]\n";
        let g = grants_for(&dir, spawn, &authority).unwrap();
        assert!(!g.fs[0].preopen);
        assert!(g.sandbox.protected.contains(&dir.join("toolgate.toml")));
        assert!(g.sandbox.protected.contains(&dir.join(".git")));
        // .git alone refuses a read-write preopen, unless protect_git = false.
        let none = Authority::default();
        let e = grants_for(&dir, rw, &none).unwrap_err();
        assert!(
            e.contains(".git") && e.contains("protect_git = false"),
            "{e}"
        );
        let opted_out = format!("{rw}protect_git = false\n");
        let g = grants_for(&dir, &opted_out, &none).unwrap();
        assert!(g.sandbox.protected.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A secret is authority (protected) and hidden from every grant's
    /// spawns, with a grant or without one; plain authority is not hidden.
    #[test]
    fn secrets_are_protected_and_hidden_from_spawns() {
        let dir = std::env::temp_dir().join(format!("toolgate-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dir = dir.canonicalize().unwrap();
        let mut authority = Authority::default();
        authority.add(dir.join("plugins"), "a plugin directory");
        authority.add_secret(dir.join("toolgate.toml"), "the host's configuration");
        authority.add_secret("toolgate.toml", "the default configuration");
        assert_eq!(authority.secrets().len(), 2);
        let spawn = "[plugins.p.grants]\nfs = [{ path = \".\", access = \"read-only\" }]\n";
        for g in [
            grants_for(&dir, spawn, &authority).unwrap(),
            resolve_grants(None, "t".into(), &dir, &Enforcement::Strict, &authority).unwrap(),
        ] {
            assert!(g.sandbox.protected.contains(&dir.join("toolgate.toml")));
            assert!(g.sandbox.hidden.contains(&dir.join("toolgate.toml")));
            assert!(!g.sandbox.hidden.contains(&dir.join("plugins")));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_worktree_pointer_protects_its_git_and_common_directories() {
        let base = std::env::temp_dir().join(format!("toolgate-worktree-{}", std::process::id()));
        let main_git = base.join("main/.git");
        std::fs::create_dir_all(main_git.join("worktrees/wt")).unwrap();
        std::fs::write(main_git.join("worktrees/wt/commondir"), "../..\n").unwrap();
        std::fs::create_dir_all(base.join("wt")).unwrap();
        std::fs::write(
            base.join("wt/.git"),
            format!("gitdir: {}\n", main_git.join("worktrees/wt").display()),
        )
        .unwrap();
        let paths: Vec<PathBuf> = git_paths(&base.join("wt"))
            .into_iter()
            .map(|a| a.path)
            .collect();
        let main_git = main_git.canonicalize().unwrap();
        assert!(paths.contains(&base.join("wt/.git")), "{paths:?}");
        assert!(paths.contains(&main_git.join("worktrees/wt")), "{paths:?}");
        assert!(paths.contains(&main_git), "{paths:?}");
        let _ = std::fs::remove_dir_all(&base);
    }
}
