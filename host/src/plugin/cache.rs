//! On-disk cache of compiled components: machine code the host runs, so
//! trusted only after checks.
//!
//! Cranelift takes ~40 ms for a small Rust component and seconds for a
//! Python or JavaScript one; the cache makes every start after the first
//! cost a read and a check. Entries are keyed by the engine's compatibility
//! hash and the component's SHA-256, written to a temporary file and renamed
//! into place (never overwritten in place).
//!
//! A cache entry is native code the host executes, so whoever can write
//! one owns the host. Hence:
//!
//! * **The directory.** Every component of its path, from `/`, is opened
//!   with `O_NOFOLLOW` and checked with `fstat`: no symlinks; every ancestor
//!   owned by root or by us and not writable by group or others unless it is
//!   sticky (`/tmp`); the directory itself owned by us and not writable by
//!   group or others (it is created `0700`). All later access goes through
//!   the descriptor of that directory, never through the path again.
//! * **Out of reach of what the host runs.** [`CompileCache::refuse_if_granted`]
//!   refuses a directory that overlaps any file system grant of any plugin
//!   (a WASI preopen or a sandbox grant, read-only ones included). The
//!   sandbox also keeps it read-only (a protected path) — and every other
//!   place a cache could be on another start too (`$TOOLGATE_CACHE_DIR`,
//!   `$XDG_CACHE_HOME/toolgate`, `~/.cache/toolgate`), in use or not.
//! * **The key is not in the cache.** Entries are verified with an
//!   HMAC-SHA256 under a per-user random key, `cache.key` (`0600`) in the
//!   host's *state* directory ([`crate::state`]), never in a cache
//!   directory: a cache directory some start does not use, and so does not
//!   check against the grants, may be reachable by what another start runs,
//!   and whoever reads the key can sign native code. The key's directory
//!   passes the same checks as the cache's and is *hidden* from everything
//!   the host runs (masked in every sandbox, refused to components' opens);
//!   where a plugin may run without that mask (`hidden_paths` waived), it
//!   must lie outside that plugin's grants, else the cache is refused.
//! * **Each entry is verified before it is deserialised**: the HMAC over
//!   the entry's name and its code. The bytes are read into memory first and
//!   verified there, then handed to [`Component::deserialize`], which copies
//!   them into fresh executable memory: nothing is mapped from a file that
//!   could change under the host. A tampered entry is not executed: it is
//!   logged, recompiled and replaced.
//!
//! A cache that fails a check is not used: the host warns once and compiles
//! every component itself. This fails *open to no cache* rather than failing
//! the start on purpose: the cache only saves time, so refusing it costs
//! seconds and never safety, while refusing to start would turn a shared
//! `HOME` or a working directory at `$HOME` into an outage.

use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component as PathComponent, Path, PathBuf};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Largest cache entry read back, in bytes (a compiled 18 MB Python
/// component is well below this); a larger file is treated as corrupt.
pub const MAX_ENTRY_BYTES: u64 = 512 << 20;

/// The first bytes of every entry (format version 1).
const MAGIC: &[u8; 8] = b"TGCACHE1";
/// File name of the MAC key in the state directory.
pub(crate) const KEY_FILE: &str = "cache.key";
/// Length of the MAC key and of the tag.
const KEY_LEN: usize = 32;

/// The compile cache. Cheap to clone (clones share the state).
#[derive(Clone, Debug)]
pub struct CompileCache {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    /// Where the key is (the state directory).
    key_dir: Option<PathBuf>,
    state: Mutex<State>,
}

enum State {
    Ready { dir: OwnedFd, key: [u8; KEY_LEN] },
    Refused(String),
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            State::Ready { dir, .. } => write!(f, "Ready(fd {})", dir.as_raw_fd()),
            State::Refused(why) => write!(f, "Refused({why})"),
        }
    }
}

impl CompileCache {
    /// Opens (creating it `0700` if needed) and checks the cache directory,
    /// with its key in `key_dir` (the state directory; created and checked
    /// the same way). A directory that fails the checks, or no `key_dir`,
    /// or a `key_dir` inside the cache, is refused with a warning, once:
    /// the cache then compiles every component and stores nothing.
    pub fn new(dir: PathBuf, key_dir: Option<PathBuf>) -> Self {
        let absolute = |d: PathBuf| {
            if d.is_absolute() {
                d
            } else {
                std::env::current_dir().unwrap_or_default().join(d)
            }
        };
        let dir = absolute(dir);
        let key_dir = key_dir.map(absolute);
        let state = match open_checked(&dir).and_then(|fd| {
            let Some(key_dir) = &key_dir else {
                return Err(format!(
                    "there is no state directory to keep its key in (set {})",
                    crate::state::STATE_DIR_ENV
                ));
            };
            if key_dir.starts_with(&dir) {
                return Err(format!(
                    "its key's directory {} lies inside it: whatever can write the cache \
                     could read the key; keep the state directory apart",
                    key_dir.display()
                ));
            }
            let key_fd = open_checked(key_dir)?;
            let key = load_or_create_key(&key_fd, key_dir)?;
            Ok(State::Ready { dir: fd, key })
        }) {
            Ok(s) => s,
            Err(why) => {
                warn_refused(&dir, &why);
                State::Refused(why)
            }
        };
        CompileCache {
            inner: Arc::new(Inner {
                dir,
                key_dir,
                state: Mutex::new(state),
            }),
        }
    }

    /// Every place a start of this user's host could put its cache (the
    /// variable's, the XDG one, the home one): all of them are authority,
    /// whichever this run uses.
    pub fn candidate_dirs() -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = Vec::new();
        let env = std::env::var_os("TOOLGATE_CACHE_DIR")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
        let xdg = std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(|d| Path::new(&d).join("toolgate"));
        let home = std::env::var_os("HOME")
            .filter(|v| !v.is_empty())
            .map(|h| Path::new(&h).join(".cache/toolgate"));
        for d in [env, xdg, home].into_iter().flatten() {
            if !out.contains(&d) {
                out.push(d);
            }
        }
        out
    }

    /// `$TOOLGATE_CACHE_DIR`, else `$XDG_CACHE_HOME/toolgate`, else
    /// `~/.cache/toolgate`.
    pub fn default_dir() -> Option<PathBuf> {
        if let Some(d) = std::env::var_os("TOOLGATE_CACHE_DIR") {
            return Some(PathBuf::from(d));
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?;
        Some(base.join("toolgate"))
    }

    /// The directory (absolute).
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Why the cache is not used, if it is not.
    pub fn refusal(&self) -> Option<String> {
        match &*self.lock() {
            State::Refused(why) => Some(why.clone()),
            State::Ready { .. } => None,
        }
    }

    /// Stops using the cache for the rest of this process (warns once).
    pub fn refuse(&self, why: String) {
        let mut state = self.lock();
        if matches!(*state, State::Ready { .. }) {
            warn_refused(&self.inner.dir, &why);
            *state = State::Refused(why);
        }
    }

    /// Refuses the cache when its directory overlaps a file system grant,
    /// or its key's directory overlaps one of `key_grants`: both are
    /// (granted path, whose grant) pairs. A plugin that can write the cache
    /// could fill it with garbage (entries it cannot sign fail
    /// verification); one that can read the key can sign native code for
    /// the host. The key lives in the state directory, which is hidden from
    /// every sandbox and from components' opens, so `key_grants` are the
    /// grants where that hiding may not hold (a plugin allowed to run
    /// without hidden paths).
    pub fn refuse_if_granted<'a>(
        &self,
        grants: impl IntoIterator<Item = (&'a Path, &'a str)>,
        key_grants: impl IntoIterator<Item = (&'a Path, &'a str)>,
    ) {
        if self.refusal().is_some() {
            return;
        }
        let canonical = |d: &PathBuf| d.canonicalize().unwrap_or(d.clone());
        let dir = canonical(&self.inner.dir);
        let overlaps = |d: &Path, granted: &Path| d.starts_with(granted) || granted.starts_with(d);
        for (granted, whose) in grants {
            let granted = granted.canonicalize().unwrap_or(granted.to_path_buf());
            if overlaps(&dir, &granted) {
                self.refuse(format!(
                    "it lies inside {} which {whose} is granted: what runs there could fill it \
                     with entries the host has to reject. Set TOOLGATE_CACHE_DIR to a \
                     directory outside every grant (or pass --no-compile-cache to silence this)",
                    granted.display()
                ));
                return;
            }
        }
        let Some(key_dir) = self.inner.key_dir.as_ref().map(canonical) else {
            return;
        };
        for (granted, whose) in key_grants {
            let granted = granted.canonicalize().unwrap_or(granted.to_path_buf());
            if overlaps(&key_dir, &granted) {
                self.refuse(format!(
                    "its key's directory {} lies inside {} which {whose} is granted and may be \
                     run without hidden paths: what runs there could read the key and sign \
                     native code for the host. Set {} to a directory outside every grant (or \
                     pass --no-compile-cache to silence this)",
                    key_dir.display(),
                    granted.display(),
                    crate::state::STATE_DIR_ENV
                ));
                return;
            }
        }
    }

    /// Whether the cache holds an entry for `bytes` that verifies under this
    /// host's key — whether loading them will not compile. The entry is read
    /// and its MAC checked (milliseconds, once per plugin file at start); the
    /// load checks it again, and nothing is trusted on this answer alone. An entry that
    /// exists but fails (tampered with, or written under another key: another
    /// state directory sharing the cache) answers `false`, so a start that
    /// loads compiled plugins first defers it like any uncompiled one instead
    /// of compiling it before it serves.
    pub fn has_verified_entry(&self, engine: &Engine, bytes: &[u8]) -> bool {
        let Some((dir, mac_key)) = self.ready() else {
            return false;
        };
        let name = format!("{}.tgc", key(engine, bytes));
        matches!(read_entry(&dir, &name, &mac_key), Ok(Some(_)))
    }

    /// The compiled component for `bytes`: from a verified cache entry, or
    /// freshly compiled (and then stored; a failure to store is only logged).
    pub fn load_or_compile(&self, engine: &Engine, bytes: &[u8]) -> wasmtime::Result<Component> {
        self.lookup_or_compile(engine, bytes).map(|(c, _)| c)
    }

    /// [`load_or_compile`](Self::load_or_compile), saying where the code
    /// came from (and how long compiling took).
    pub fn lookup_or_compile(
        &self,
        engine: &Engine,
        bytes: &[u8],
    ) -> wasmtime::Result<(Component, Provenance)> {
        let name = format!("{}.tgc", key(engine, bytes));
        let Some((dir, mac_key)) = self.ready() else {
            return compile(engine, bytes);
        };
        match read_entry(&dir, &name, &mac_key) {
            Ok(Some(code)) => {
                // SAFETY: `code` is in memory the host owns, and carries a
                // valid MAC under a key only this user can read: this host
                // wrote it, with this engine's configuration (the name binds
                // the compatibility hash and the component's bytes, and the
                // MAC binds the name). `deserialize` copies it into fresh
                // executable memory and checks the engine compatibility.
                match unsafe { Component::deserialize(engine, &code) } {
                    Ok(component) => return Ok((component, Provenance::Cache)),
                    Err(e) => tracing::warn!(
                        entry = %self.inner.dir.join(&name).display(),
                        error = %e,
                        "unusable compile cache entry; recompiling"
                    ),
                }
            }
            Ok(None) => {}
            Err(why) => tracing::warn!(
                entry = %self.inner.dir.join(&name).display(),
                "compile cache entry not used: {why}; recompiling and replacing it"
            ),
        }
        let (component, provenance) = compile(engine, bytes)?;
        if let Err(e) = store_entry(&dir, &name, &mac_key, &component) {
            tracing::warn!(dir = %self.inner.dir.display(), error = %e, "could not write the compile cache");
        }
        Ok((component, provenance))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A duplicate of the directory descriptor and the key, if in use.
    fn ready(&self) -> Option<(OwnedFd, [u8; KEY_LEN])> {
        match &*self.lock() {
            State::Ready { dir, key } => dir.try_clone().ok().map(|d| (d, *key)),
            State::Refused(_) => None,
        }
    }
}

/// Where the code of a loaded component came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provenance {
    /// Compiled into the binary by the build script (a built-in plugin).
    Embedded,
    /// A verified entry of the compile cache.
    Cache,
    /// Compiled now, in this long.
    Compiled(std::time::Duration),
}

/// Compile `bytes` now, timed.
pub fn compile(engine: &Engine, bytes: &[u8]) -> wasmtime::Result<(Component, Provenance)> {
    let started = std::time::Instant::now();
    let component = Component::new(engine, bytes)?;
    Ok((component, Provenance::Compiled(started.elapsed())))
}

fn warn_refused(dir: &Path, why: &str) {
    tracing::warn!(
        "compile cache {} is not used: {why}. Components are compiled at every start instead",
        dir.display()
    );
}

// ---------------------------------------------------------------------------
// The directory.

fn errno_text(what: &str, path: &Path) -> String {
    format!(
        "{what} {}: {}",
        path.display(),
        std::io::Error::last_os_error()
    )
}

fn fstat(fd: RawFd) -> Option<libc::stat> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(st)
}

/// Opens `dir` component by component from `/` without following symlinks,
/// creating missing components `0700`, and checks owners and modes. Returns
/// the directory's descriptor.
fn open_checked(dir: &Path) -> Result<OwnedFd, String> {
    let me = unsafe { libc::geteuid() };
    let open_path = |at: RawFd, name: &CString| -> RawFd {
        unsafe {
            libc::openat(
                at,
                name.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        }
    };
    let root = unsafe {
        libc::open(
            c"/".as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if root < 0 {
        return Err(errno_text("cannot open", Path::new("/")));
    }
    let mut fd = unsafe { OwnedFd::from_raw_fd(root) };
    let mut here = PathBuf::from("/");
    let names: Vec<&std::ffi::OsStr> = dir
        .components()
        .filter_map(|c| match c {
            PathComponent::Normal(n) => Some(Ok(n)),
            PathComponent::RootDir | PathComponent::CurDir => None,
            _ => Some(Err(())),
        })
        .collect::<Result<_, _>>()
        .map_err(|()| format!("{} contains `..`; give it as a plain path", dir.display()))?;
    if names.is_empty() {
        return Err("`/` cannot be the cache directory".into());
    }
    for (i, name) in names.iter().enumerate() {
        let last = i + 1 == names.len();
        let parent = fstat(fd.as_raw_fd()).ok_or_else(|| errno_text("cannot stat", &here))?;
        check_ancestor(&here, &parent, me)?;
        here.push(name);
        let cname = CString::new(name.as_bytes())
            .map_err(|_| format!("{} contains a NUL byte", dir.display()))?;
        let mut next = open_path(fd.as_raw_fd(), &cname);
        if next < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOENT) {
            // Create what is missing, private to this user (losing a race
            // to another process is fine: it is checked like any other).
            if unsafe { libc::mkdirat(fd.as_raw_fd(), cname.as_ptr(), 0o700) } != 0
                && std::io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST)
            {
                return Err(errno_text("cannot create", &here));
            }
            next = open_path(fd.as_raw_fd(), &cname);
        }
        if next < 0 {
            let e = std::io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ELOOP) | Some(libc::ENOTDIR) if is_symlink(fd.as_raw_fd(), &cname) => {
                    format!(
                        "{} is a symlink (whoever can change it can redirect the cache); give \
                         the directory without symlinks{}",
                        here.display(),
                        dir.canonicalize()
                            .map(|p| format!(", e.g. {}", p.display()))
                            .unwrap_or_default()
                    )
                }
                _ => format!("cannot open {}: {e}", here.display()),
            });
        }
        fd = unsafe { OwnedFd::from_raw_fd(next) };
        if last {
            let st = fstat(fd.as_raw_fd()).ok_or_else(|| errno_text("cannot stat", &here))?;
            if st.st_uid != me {
                return Err(format!(
                    "it is owned by uid {}, not by this user (uid {me}): its owner could plant \
                     native code for the host",
                    st.st_uid
                ));
            }
            if st.st_mode & 0o022 != 0 {
                return Err(format!(
                    "it is writable by {} (mode {:o}): they could plant native code for the \
                     host; `chmod go-w {}` or choose another directory",
                    if st.st_mode & 0o002 != 0 {
                        "every user"
                    } else {
                        "its group"
                    },
                    st.st_mode & 0o7777,
                    here.display()
                ));
            }
        }
    }
    Ok(fd)
}

fn is_symlink(at: RawFd, name: &CString) -> bool {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::fstatat(at, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
    r == 0 && st.st_mode & libc::S_IFMT == libc::S_IFLNK
}

/// An ancestor of the cache must be owned by root or by us, and not
/// writable by others unless sticky (then others cannot rename or remove
/// what is ours in it).
fn check_ancestor(path: &Path, st: &libc::stat, me: libc::uid_t) -> Result<(), String> {
    if st.st_uid != 0 && st.st_uid != me {
        return Err(format!(
            "its ancestor {} is owned by uid {} (neither root nor this user), who could swap \
             the cache directory",
            path.display(),
            st.st_uid
        ));
    }
    if st.st_mode & 0o022 != 0 && st.st_mode & libc::S_ISVTX == 0 {
        return Err(format!(
            "its ancestor {} is writable by others (mode {:o}) and not sticky: they could swap \
             the cache directory",
            path.display(),
            st.st_mode & 0o7777
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Files in the directory.

/// Opens a regular file in `dir` that belongs to us and is not writable by
/// others; `Ok(None)` when there is none. Never follows a symlink, never
/// blocks on a FIFO.
fn open_own_file(dir: &OwnedFd, name: &str, max: u64) -> Result<Option<(File, u64)>, String> {
    let cname = CString::new(name).expect("cache names have no NUL");
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            cname.as_ptr(),
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOENT) => Ok(None),
            Some(libc::ELOOP) => Err(format!("{name} is a symlink")),
            _ => Err(format!("cannot open {name}: {e}")),
        };
    }
    let file = unsafe { File::from_raw_fd(fd) };
    let st = fstat(file.as_raw_fd()).ok_or_else(|| format!("cannot stat {name}"))?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(format!("{name} is not a regular file"));
    }
    if st.st_uid != unsafe { libc::geteuid() } {
        return Err(format!(
            "{name} is owned by uid {}, not by this user",
            st.st_uid
        ));
    }
    if st.st_mode & 0o022 != 0 {
        return Err(format!(
            "{name} is writable by others (mode {:o})",
            st.st_mode & 0o7777
        ));
    }
    let size = st.st_size as u64;
    if size > max {
        return Err(format!(
            "{name} is {size} bytes, more than the {max} accepted"
        ));
    }
    Ok(Some((file, size)))
}

/// Writes `parts` to a fresh `0600` file and renames it to `name`
/// (`replace`: over an existing one; else never replacing, and then
/// `Ok(false)` when `name` already exists).
fn write_new_file(
    dir: &OwnedFd,
    name: &str,
    parts: &[&[u8]],
    replace: bool,
) -> std::io::Result<bool> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let tmp = format!(
        ".tmp-{}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
    );
    let ctmp = CString::new(tmp).expect("no NUL");
    let cname = CString::new(name).expect("no NUL");
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            ctmp.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut file = unsafe { File::from_raw_fd(fd) };
    let written = parts
        .iter()
        .try_for_each(|p| file.write_all(p))
        .and_then(|()| file.sync_all());
    let renamed = written.and_then(|()| {
        let flags = if replace { 0 } else { libc::RENAME_NOREPLACE };
        let r = unsafe {
            libc::renameat2(
                dir.as_raw_fd(),
                ctmp.as_ptr(),
                dir.as_raw_fd(),
                cname.as_ptr(),
                flags,
            )
        };
        if r == 0 {
            Ok(true)
        } else {
            let e = std::io::Error::last_os_error();
            if !replace && e.raw_os_error() == Some(libc::EEXIST) {
                Ok(false)
            } else {
                Err(e)
            }
        }
    });
    if !matches!(renamed, Ok(true)) {
        unsafe { libc::unlinkat(dir.as_raw_fd(), ctmp.as_ptr(), 0) };
    }
    renamed
}

/// The per-user MAC key: read from `key` (which must be ours, `0600`, 32
/// bytes), or created with 32 random bytes.
fn load_or_create_key(dir: &OwnedFd, path: &Path) -> Result<[u8; KEY_LEN], String> {
    let read = |dir: &OwnedFd| -> Result<Option<[u8; KEY_LEN]>, String> {
        let Some((mut file, size)) = open_own_file(dir, KEY_FILE, KEY_LEN as u64)? else {
            return Ok(None);
        };
        let st = fstat(file.as_raw_fd()).ok_or("cannot stat the key")?;
        if st.st_mode & 0o077 != 0 {
            return Err(format!(
                "its key {} is readable by others (mode {:o}); remove it and a new one is made",
                path.join(KEY_FILE).display(),
                st.st_mode & 0o7777
            ));
        }
        let mut key = [0u8; KEY_LEN];
        if size != KEY_LEN as u64 || file.read_exact(&mut key).is_err() {
            return Err(format!(
                "its key {} is not {KEY_LEN} bytes; remove it and a new one is made",
                path.join(KEY_FILE).display()
            ));
        }
        Ok(Some(key))
    };
    if let Some(key) = read(dir)? {
        return Ok(key);
    }
    let mut key = [0u8; KEY_LEN];
    let n = unsafe { libc::getrandom(key.as_mut_ptr() as *mut libc::c_void, KEY_LEN, 0) };
    if n != KEY_LEN as isize {
        return Err(format!(
            "no randomness for its key: {}",
            std::io::Error::last_os_error()
        ));
    }
    match write_new_file(dir, KEY_FILE, &[&key], false) {
        Ok(true) => Ok(key),
        // Another process made one first: use theirs.
        Ok(false) => read(dir)?.ok_or_else(|| "its key vanished while it was made".into()),
        Err(e) => Err(format!("cannot create its key: {e}")),
    }
}

/// HMAC-SHA256 (RFC 2104) of the concatenation of `parts`.
fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(block.map(|b| b ^ 0x36));
    for p in parts {
        inner.update(p);
    }
    let mut outer = Sha256::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// The tag of an entry: binds its name (engine hash + component hash) to
/// its code.
fn tag(key: &[u8; KEY_LEN], name: &str, code: &[u8]) -> [u8; 32] {
    hmac_sha256(
        key,
        &[
            MAGIC.as_slice(),
            &(name.len() as u64).to_le_bytes(),
            name.as_bytes(),
            code,
        ],
    )
}

fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Reads and verifies entry `name`: `Ok(None)` when there is none,
/// `Err(why)` when there is one that must not be used.
fn read_entry(dir: &OwnedFd, name: &str, key: &[u8; KEY_LEN]) -> Result<Option<Vec<u8>>, String> {
    let Some((mut file, size)) = open_own_file(dir, name, MAX_ENTRY_BYTES)? else {
        return Ok(None);
    };
    let mut bytes = Vec::with_capacity(size as usize);
    file.read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {e}"))?;
    let header = MAGIC.len() + 32;
    if bytes.len() < header || &bytes[..MAGIC.len()] != MAGIC {
        return Err("it is not a toolgate cache entry".into());
    }
    let (stored, code) = bytes[MAGIC.len()..].split_at(32);
    if !same(stored, &tag(key, name, code)) {
        return Err(
            "it failed verification (it changed after this host wrote it, or another key \
             wrote it)"
                .into(),
        );
    }
    bytes.drain(..header);
    Ok(Some(bytes))
}

fn store_entry(
    dir: &OwnedFd,
    name: &str,
    key: &[u8; KEY_LEN],
    component: &Component,
) -> anyhow::Result<()> {
    let code = component.serialize()?;
    let t = tag(key, name, &code);
    write_new_file(dir, name, &[MAGIC.as_slice(), &t, &code], true)?;
    Ok(())
}

/// Hex SHA-256 over the engine's compatibility hash and the bytes.
fn key(engine: &Engine, bytes: &[u8]) -> String {
    super::codegen::key(engine, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test case 2.
        let mac = hmac_sha256(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("toolgate-cache-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_fresh_directory_is_created_private_with_a_private_key() {
        use std::os::unix::fs::PermissionsExt;
        let d = scratch("fresh");
        let cache = CompileCache::new(d.join("a/b"), Some(d.join("state")));
        assert_eq!(cache.refusal(), None);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&d.join("a/b")), 0o700);
        assert_eq!(mode(&d.join("state/cache.key")), 0o600);
        // Never in the cache directory.
        assert_eq!(std::fs::read_dir(d.join("a/b")).unwrap().count(), 0);
        // A second opening reads the same key.
        let again = CompileCache::new(d.join("a/b"), Some(d.join("state")));
        assert_eq!(again.ready().unwrap().1, cache.ready().unwrap().1);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn unsafe_directories_are_refused_with_the_reason() {
        use std::os::unix::fs::PermissionsExt;
        let d = scratch("unsafe");
        let why = CompileCache::new(d.join("nokey"), None).refusal().unwrap();
        assert!(why.contains("no state directory"), "{why}");
        let why = CompileCache::new(d.join("inside"), Some(d.join("inside/state")))
            .refusal()
            .unwrap();
        assert!(why.contains("lies inside it"), "{why}");
        std::fs::create_dir_all(d.join("open")).unwrap();
        std::fs::set_permissions(d.join("open"), std::fs::Permissions::from_mode(0o777)).unwrap();
        let why = CompileCache::new(d.join("open"), Some(d.join("state")))
            .refusal()
            .unwrap();
        assert!(why.contains("writable by every user"), "{why}");
        // Beneath a world-writable, non-sticky ancestor.
        let why = CompileCache::new(d.join("open/inner"), Some(d.join("state")))
            .refusal()
            .unwrap();
        assert!(why.contains("not sticky"), "{why}");
        std::fs::create_dir_all(d.join("real")).unwrap();
        std::os::unix::fs::symlink(d.join("real"), d.join("link")).unwrap();
        let why = CompileCache::new(d.join("link"), Some(d.join("state")))
            .refusal()
            .unwrap();
        assert!(why.contains("is a symlink"), "{why}");
        let why = CompileCache::new(d.join("link/sub"), Some(d.join("state")))
            .refusal()
            .unwrap();
        assert!(why.contains("is a symlink"), "{why}");
        // Owned by someone else (only root can hand a directory over).
        std::fs::create_dir_all(d.join("theirs")).unwrap();
        let theirs = CString::new(d.join("theirs").as_os_str().as_bytes()).unwrap();
        if unsafe { libc::chown(theirs.as_ptr(), 65534, 65534) } == 0 {
            let why = CompileCache::new(d.join("theirs"), Some(d.join("state")))
                .refusal()
                .unwrap();
            assert!(why.contains("owned by uid 65534"), "{why}");
        } else {
            println!("not root: the foreign owner case is not checked here");
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}
