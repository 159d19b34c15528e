//! The `files` and `bulk-read` seams: whole files written and read by the
//! host, inside the plugin's grants.
//!
//! **Writes** (`files`) go into the plugin's read-write grants and never
//! into the paths the host protects. Why a seam and not a read-write
//! preopen: a WASI preopen cannot leave out a path beneath it, so a
//! read-write preopen of a working directory would hand a component the
//! host's configuration (`./toolgate.toml`, even when absent), its plugin
//! directories and `.git` — which is why such a grant is refused at load
//! (see [`crate::grants`]). A grant marked `spawn_only = true` is
//! not preopened; this seam writes beneath it the way the sandbox lets
//! spawned processes write: everywhere except the protected paths.
//!
//! How a write stays inside: the path is walked one directory at a time
//! with cap-std (no `..`, no symlink leaving the grant); before anything is
//! created in or opened beneath a directory, where that open directory
//! really is is read back from `/proc/self/fd` — the answer no later rename
//! or symlink swap can change — and a step that is, or lies beneath, a
//! protected path is refused (so not even an empty directory appears in
//! `.git`). The file is opened relative
//! to that directory without following a symlink and without blocking (a
//! FIFO is refused, not waited on), and must be a regular file.
//!
//! **Reads** (`bulk-read`) give nothing a preopen does not: they serve the
//! preopened grants only, resolved beneath the grant by cap-std as WASI
//! resolves them. They exist for speed: through `wasi:filesystem`, each
//! file costs an open, a stat and two reads, each handed to a blocking
//! thread and awaited; a search of 5,000 small files spends most of its
//! time in those hand-offs. Here a batch of files is one host call, read
//! on one blocking thread. Every open is non-blocking (a file swapped for a
//! FIFO is refused, never waited on) and only regular files are read.
//!
//! The seams as units (see [`crate::seams`]): `files` granted by a
//! read-write grant ([`files`]), `bulk-read` by a preopened one
//! ([`bulk_read`]); per instance, the batches in [`ReadSlots`]; the 0.2
//! interfaces implemented on [`FilesView`].

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, FromRawFd};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use wasmtime::component::{HasData, Resource, ResourceTable};

use super::{Seam, SeamCtx, SeamHost};
use crate::bindings::v0_2::toolgate::plugin as wit;
use crate::call::Misuse;
use crate::grants::Capability;
use crate::grants::{FsGrant, Grants};

pub use crate::bindings::{PendingRead, ReadResults};

/// The `files` seam: whole-file writes, granted by a read-write grant.
pub fn files<T: SeamHost>() -> Seam<T> {
    Seam {
        interface: "files",
        capability: Capability::Files,
        sync: false,
        granted: |g| {
            if g.fs.iter().any(|g| g.writable) {
                Ok(())
            } else {
                Err("fs = [{ path = \".\", access = \"read-write\", spawn_only = true }]")
            }
        },
        link: |linker| {
            wit::files::add_to_linker::<T, FilesView<'static>>(linker, |t| {
                FilesView::new(t.seams())
            })
        },
    }
}

/// The `bulk-read` seam: it reads what the preopens give anyway, in
/// batches, so a preopened grant covers it.
pub fn bulk_read<T: SeamHost>() -> Seam<T> {
    Seam {
        interface: "bulk-read",
        // Batched reads of the preopened grants: the file system.
        capability: Capability::FileSystem,
        sync: false,
        granted: preopen_granted,
        link: |linker| {
            wit::bulk_read::add_to_linker::<T, FilesView<'static>>(linker, |t| {
                FilesView::new(t.seams())
            })
        },
    }
}

/// The grant of a seam that reads what the preopens give (`bulk-read`,
/// `lsp`): a preopened `fs` grant; else the line that would give one.
pub fn preopen_granted(g: &Grants) -> Result<(), &'static str> {
    if Capability::FileSystem.granted(g) {
        Ok(())
    } else {
        Err("fs = [{ path = \".\", access = \"read-only\" }]")
    }
}

/// What the `files` and `bulk-read` interfaces see of a store: the
/// plugin's grant, its batches, the table the batches' handles live in.
pub struct FilesView<'a> {
    plugin: &'a str,
    grants: &'a Grants,
    reads: &'a mut ReadSlots,
    table: &'a mut ResourceTable,
}

impl<'a> FilesView<'a> {
    pub fn new(ctx: SeamCtx<'a>) -> Self {
        FilesView {
            plugin: ctx.plugin,
            grants: ctx.grants,
            reads: &mut ctx.state.reads,
            table: ctx.table,
        }
    }
}

impl HasData for FilesView<'static> {
    type Data<'a> = FilesView<'a>;
}

impl wit::files::Host for FilesView<'_> {
    fn write(&mut self, path: String, contents: Vec<u8>) -> wasmtime::Result<Result<u64, String>> {
        let written = write(self.grants, &path, &contents);
        match &written {
            Ok(n) => {
                tracing::info!(plugin = %self.plugin, path = %path, bytes = n, "file written")
            }
            Err(why) => {
                tracing::info!(plugin = %self.plugin, path = %path, "file write refused: {why}")
            }
        }
        Ok(written)
    }
}

impl wit::bulk_read::Host for FilesView<'_> {
    async fn read(
        &mut self,
        paths: Vec<String>,
        limits: wit::bulk_read::ReadLimits,
    ) -> wasmtime::Result<Vec<Result<Vec<u8>, String>>> {
        let fs = self.grants.fs.clone();
        let hidden = self.grants.sandbox.hidden.clone();
        let asked = paths.len();
        // One hand-off to a blocking thread for the whole batch.
        let read = tokio::task::spawn_blocking(move || {
            read(
                &fs,
                &hidden,
                &paths,
                limits.max_file_bytes,
                limits.max_total_bytes,
            )
        })
        .await?;
        tracing::debug!(plugin = %self.plugin, asked, read = read.len(), "bulk read");
        Ok(read)
    }
}

impl wit::bulk_read::HostBatch for FilesView<'_> {
    async fn start(
        &mut self,
        paths: Vec<String>,
        limits: wit::bulk_read::ReadLimits,
    ) -> wasmtime::Result<Resource<PendingRead>> {
        let pending = self
            .reads
            .start(
                self.grants.fs.clone(),
                self.grants.sandbox.hidden.clone(),
                paths,
                limits.max_file_bytes,
                limits.max_total_bytes,
            )
            .await
            .map_err(|e| Misuse(format!("plugin `{}` misused `bulk-read`: {e}", self.plugin)))?;
        Ok(self.table.push(pending)?)
    }

    async fn wait(
        &mut self,
        batch: Resource<PendingRead>,
    ) -> wasmtime::Result<Vec<Result<Vec<u8>, String>>> {
        Ok(self.table.get_mut(&batch)?.wait().await?)
    }

    fn drop(&mut self, batch: Resource<PendingRead>) -> wasmtime::Result<()> {
        let batch = self.table.delete(batch)?;
        self.reads.release(batch);
        Ok(())
    }
}

/// Largest write: 16 MiB.
pub const MAX_WRITE_BYTES: usize = 16 << 20;

/// The grant among `candidates` a guest path falls under, and the path's
/// components beneath it. `kind` names the grants for messages.
fn locate_in<'g>(
    candidates: impl Iterator<Item = &'g FsGrant> + Clone,
    kind: &str,
    path: &str,
) -> Result<(&'g FsGrant, Vec<String>), String> {
    if path.ends_with('/') {
        // As POSIX reads it: a directory (the components would drop it).
        return Err(format!("`{path}` ends in `/`: a directory, not a file"));
    }
    let p = Path::new(path);
    let (grant, rest) = candidates
        .clone()
        .find_map(|g| {
            if p.is_relative() && (g.guest == "." || g.guest.is_empty()) {
                Some((g, p.to_path_buf()))
            } else {
                p.strip_prefix(&g.guest).ok().map(|r| (g, r.to_path_buf()))
            }
        })
        .ok_or_else(|| {
            format!(
                "`{path}` is not inside a {kind} grant ({kind}: {})",
                candidates
                    .map(|g| format!("`{}`", g.guest))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
    let mut parts = Vec::new();
    for c in rest.components() {
        match c {
            Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
            Component::CurDir => {}
            _ => return Err(format!("`{path}` leaves the granted directory (`..`)")),
        }
    }
    if parts.is_empty() {
        return Err(format!("`{path}` names a directory, not a file"));
    }
    Ok((grant, parts))
}

/// The preopened grant a guest path falls under, and the path on the host
/// (its components joined to the grant's directory; whether it exists, or
/// leads out through a symlink, is for the open to find).
pub(crate) fn readable_host_path<'g>(
    grants: &'g [FsGrant],
    path: &str,
) -> Result<(&'g FsGrant, PathBuf), String> {
    let (grant, parts) = locate_in(grants.iter().filter(|g| g.preopen), "preopened", path)?;
    Ok((
        grant,
        parts.iter().fold(grant.host.clone(), |p, c| p.join(c)),
    ))
}

/// The read-write grant a guest path falls under, and the path's
/// components beneath it.
fn locate<'g>(grants: &'g Grants, path: &str) -> Result<(&'g FsGrant, Vec<String>), String> {
    if !grants.fs.iter().any(|g| g.writable) {
        return Err("this plugin has no read-write grant to write into; grant one with `fs = [{ path = \".\", access = \"read-write\", spawn_only = true }]`".to_string());
    }
    locate_in(grants.fs.iter().filter(|g| g.writable), "read-write", path)
}

/// `files.write`: replace (or create) the file at the guest path `path`
/// with `contents`, creating its parent directories. Returns the bytes
/// written; `Err` is a sentence for the guest.
pub fn write(grants: &Grants, path: &str, contents: &[u8]) -> Result<u64, String> {
    if contents.len() > MAX_WRITE_BYTES {
        return Err(format!(
            "{} bytes is more than one write may hold ({MAX_WRITE_BYTES})",
            contents.len()
        ));
    }
    let (grant, mut parts) = locate(grants, path)?;
    let name = parts.pop().expect("at least one component");
    let protected = |target: &Path| -> Result<(), String> {
        match grants
            .sandbox
            .protected
            .iter()
            .find(|p| target.starts_with(p))
        {
            Some(p) => Err(format!(
                "`{path}` is (or lies inside) `{}`, which the host protects (its configuration, plugins, compile cache, executable or git metadata); no plugin may write it",
                p.display()
            )),
            None => Ok(()),
        }
    };
    // Where an open directory really is: fixed once it is open, whatever
    // is renamed or swapped for a symlink afterwards.
    let real = |dir: &cap_std::fs::Dir| -> Result<PathBuf, String> {
        let real = std::fs::read_link(format!("/proc/self/fd/{}", dir.as_fd().as_raw_fd()))
            .map_err(|e| format!("cannot tell where `{path}` lies: {e}"))?;
        if !real.starts_with(&grant.host) {
            return Err(format!("`{path}` resolves outside the granted directory"));
        }
        Ok(real)
    };
    let mut dir = cap_std::fs::Dir::open_ambient_dir(&grant.host, cap_std::ambient_authority())
        .map_err(|e| format!("the granted directory cannot be opened: {e}"))?;
    // Down to the file's directory, one component at a time, each checked
    // before anything is created in it.
    for part in &parts {
        protected(&real(&dir)?.join(part))?;
        let next = match dir.open_dir(part) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                dir.create_dir(part)
                    .map_err(|e| format!("cannot create the directories of `{path}`: {e}"))?;
                dir.open_dir(part)
                    .map_err(|e| format!("cannot open the directory of `{path}`: {e}"))?
            }
            Err(e) => return Err(format!("cannot open the directory of `{path}`: {e}")),
        };
        dir = next;
    }
    let fd = dir.as_fd().as_raw_fd();
    protected(&real(&dir)?.join(&name))?;
    let cname = std::ffi::CString::new(name.as_bytes())
        .map_err(|_| format!("`{path}` holds a NUL byte"))?;
    // SAFETY: `fd` is the open directory `dir` owns (alive until the end
    // of this function); `cname` is a valid C string.
    let raw = unsafe {
        libc::openat(
            fd,
            cname.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
            0o644 as libc::c_uint,
        )
    };
    if raw < 0 {
        let e = std::io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ELOOP) => {
                format!("`{path}` is a symlink; write replaces regular files only")
            }
            Some(libc::EISDIR) => format!("`{path}` is a directory"),
            Some(libc::ENXIO) => format!("`{path}` is not a regular file (a FIFO or socket)"),
            _ => format!("cannot open `{path}` for writing: {e}"),
        });
    }
    // SAFETY: `raw` is a new descriptor that nothing else owns.
    let mut file = unsafe { File::from_raw_fd(raw) };
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot look at `{path}`: {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "`{path}` is not a regular file (a FIFO, socket or device); write replaces regular files only"
        ));
    }
    file.set_len(0)
        .and_then(|_| file.write_all(contents))
        .map_err(|e| format!("writing `{path}` failed: {e}"))?;
    Ok(contents.len() as u64)
}

/// Paths one `bulk-read.read` call reads at most.
pub const MAX_READ_PATHS: usize = 4096;
/// The largest file one `bulk-read.read` returns: 16 MiB.
pub const MAX_READ_FILE_BYTES: u64 = 16 << 20;
/// Bytes one `bulk-read.read` call returns at most: 32 MiB.
pub const MAX_READ_TOTAL_BYTES: u64 = 32 << 20;

/// Batches one instance may have reading or held at once
/// (`bulk-read.batch`).
pub const MAX_PENDING_READS: usize = 2;

/// A third batch was started while two are held.
#[derive(Debug, thiserror::Error)]
#[error(
    "a third `bulk-read` batch was started while {MAX_PENDING_READS} are pending; drop one first"
)]
pub struct TooManyBatches;

/// One instance's `bulk-read` batches: at most [`MAX_PENDING_READS`] held
/// by the guest, and at most as many reading on host threads — counting
/// those the guest dropped before they finished. A guest that starts and
/// drops batches in a loop waits for its earlier reads instead of piling
/// up threads and buffers (each read may hold 32 MiB).
#[derive(Default)]
pub struct ReadSlots {
    /// Batches started and not dropped.
    held: usize,
    /// Reads of dropped batches that may still be running.
    abandoned: Vec<tokio::task::JoinHandle<ReadResults>>,
    /// Reads running now, counted by the reads themselves.
    running: Arc<AtomicUsize>,
}

impl ReadSlots {
    /// Start [`read`] on a blocking thread, first waiting for abandoned
    /// reads to make room. Refused when the guest holds
    /// [`MAX_PENDING_READS`] batches already.
    pub async fn start(
        &mut self,
        grants: Vec<FsGrant>,
        hidden: Vec<PathBuf>,
        paths: Vec<String>,
        max_file: u64,
        max_total: u64,
    ) -> Result<PendingRead, TooManyBatches> {
        if self.held >= MAX_PENDING_READS {
            return Err(TooManyBatches);
        }
        self.abandoned.retain(|h| !h.is_finished());
        while self.held + self.abandoned.len() >= MAX_PENDING_READS {
            // Its results were dropped with the batch; only its end matters.
            let _ = self.abandoned.remove(0).await;
        }
        self.held += 1;
        let running = Running::count(&self.running);
        Ok(PendingRead(Some(tokio::task::spawn_blocking(move || {
            let _running = running;
            read(&grants, &hidden, &paths, max_file, max_total)
        }))))
    }

    /// The guest dropped `batch`: a read still running keeps its slot
    /// until it ends.
    pub fn release(&mut self, batch: PendingRead) {
        self.held = self.held.saturating_sub(1);
        if let Some(handle) = batch.0
            && !handle.is_finished()
        {
            self.abandoned.push(handle);
        }
    }

    /// Reads running on host threads now.
    pub fn running(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }
}

/// One read counted in [`ReadSlots::running`] while it lives.
struct Running(Arc<AtomicUsize>);

impl Running {
    fn count(counter: &Arc<AtomicUsize>) -> Running {
        counter.fetch_add(1, Ordering::SeqCst);
        Running(counter.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The preopened grants, opened once per batch.
struct Roots<'g> {
    grants: &'g [FsGrant],
    open: Vec<Option<std::io::Result<cap_std::fs::Dir>>>,
}

impl<'g> Roots<'g> {
    fn new(grants: &'g [FsGrant]) -> Self {
        Roots {
            grants,
            open: grants.iter().map(|_| None).collect(),
        }
    }

    fn dir(&mut self, grant: &FsGrant) -> Result<&cap_std::fs::Dir, String> {
        let i = self
            .grants
            .iter()
            .position(|g| std::ptr::eq(g, grant))
            .expect("the grant is one of ours");
        let slot = self.open[i].get_or_insert_with(|| {
            cap_std::fs::Dir::open_ambient_dir(&grant.host, cap_std::ambient_authority())
        });
        slot.as_ref().map_err(|e| {
            format!(
                "the granted directory `{}` cannot be opened: {e}",
                grant.guest
            )
        })
    }
}

/// `bulk-read.read`: the files at the guest paths `paths`, in order, read
/// from the preopened grants. Stops before the file that would take the
/// total past `max_total` (the host caps it at [`MAX_READ_TOTAL_BYTES`]) and
/// after [`MAX_READ_PATHS`] paths, but always returns at least one result
/// for a non-empty `paths`. Each result is the file's bytes or a sentence
/// for the guest. A file that is (or lies inside) one of the `hidden` paths
/// (the host's secrets, see [`crate::grants::Authority::add_secret`])
/// is refused, however the path leads there. Blocks (reads files): call it
/// off the async runtime.
pub fn read(
    grants: &[FsGrant],
    hidden: &[PathBuf],
    paths: &[String],
    max_file: u64,
    max_total: u64,
) -> ReadResults {
    let readable: Vec<FsGrant> = grants.iter().filter(|g| g.preopen).cloned().collect();
    let max_total = max_total.clamp(1, MAX_READ_TOTAL_BYTES);
    let max_file = max_file.clamp(1, MAX_READ_FILE_BYTES).min(max_total);
    let mut roots = Roots::new(&readable);
    let mut out = Vec::new();
    let mut total = 0u64;
    for path in paths.iter().take(MAX_READ_PATHS) {
        let result = read_one(&readable, hidden, &mut roots, path, max_file);
        if let Ok(bytes) = &result {
            let len = bytes.len() as u64;
            if total + len > max_total && !out.is_empty() {
                break;
            }
            total += len;
        }
        out.push(result);
    }
    out
}

fn read_one(
    readable: &[FsGrant],
    hidden: &[PathBuf],
    roots: &mut Roots<'_>,
    path: &str,
    max_file: u64,
) -> Result<Vec<u8>, String> {
    use cap_std::fs::OpenOptionsExt;
    use std::io::Read;
    if readable.is_empty() {
        return Err(
            "this plugin has no preopened `fs` grant to read from; grant one with `fs = [{ path = \".\", access = \"read-only\" }]`"
                .into(),
        );
    }
    let (grant, parts) = locate_in(readable.iter(), "preopened", path)?;
    let dir = roots.dir(grant)?;
    let rel: PathBuf = parts.iter().collect();
    let mut options = cap_std::fs::OpenOptions::new();
    options
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    let mut file = dir.open_with(&rel, &options).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("`{path}` does not exist"),
        std::io::ErrorKind::PermissionDenied => {
            format!("`{path}` cannot be read (permission denied, or it leads out of the grant)")
        }
        _ => format!("cannot open `{path}`: {e}"),
    })?;
    crate::grants::check_hidden(hidden, file.as_fd(), &rel).map_err(|_| {
        format!(
            "`{path}` cannot be read: it holds the host's secrets (its configuration or a credential file), which no plugin may read"
        )
    })?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot look at `{path}`: {e}"))?;
    if meta.is_dir() {
        return Err(format!("`{path}` is a directory"));
    }
    if !meta.is_file() {
        return Err(format!(
            "`{path}` is not a regular file (a FIFO, socket or device); only regular files are read"
        ));
    }
    if meta.len() > max_file {
        return Err(format!(
            "`{path}` holds {} bytes, more than one read returns ({max_file})",
            meta.len()
        ));
    }
    // Read into a buffer one byte longer than the file: a file that has not
    // changed fills it in one `read` and the next returns 0 (two syscalls,
    // where `read_to_end`'s adaptive sizing and probe make three or more).
    // Growth is followed up to one byte past the limit, which tells a file
    // that grew past it.
    let mut bytes = vec![0u8; meta.len() as usize + 1];
    let mut filled = 0;
    loop {
        if filled == bytes.len() {
            if bytes.len() as u64 > max_file {
                break;
            }
            let grown = (bytes.len() * 2).min(max_file as usize + 1);
            bytes.resize(grown, 0);
        }
        match file.read(&mut bytes[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("reading `{path}` failed: {e}")),
        }
    }
    bytes.truncate(filled);
    if bytes.len() as u64 > max_file {
        return Err(format!(
            "`{path}` grew past {max_file} bytes while it was read"
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants(dir: &Path, protected: Vec<PathBuf>) -> Grants {
        let mut g = Grants::default();
        g.fs.push(FsGrant {
            host: dir.canonicalize().unwrap(),
            guest: ".".into(),
            writable: true,
            preopen: false,
        });
        g.sandbox.protected = protected;
        g
    }

    #[test]
    fn writes_inside_and_never_into_protected_paths() {
        let dir = std::env::temp_dir().join(format!("toolgate-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        let outside =
            std::env::temp_dir().join(format!("toolgate-files-out-{}", std::process::id()));
        std::fs::create_dir_all(&outside).unwrap();
        let root = dir.canonicalize().unwrap();
        let g = grants(&dir, vec![root.join(".git"), root.join("toolgate.toml")]);
        assert_eq!(write(&g, "a/b/c.txt", b"hi").unwrap(), 2);
        assert_eq!(std::fs::read(dir.join("a/b/c.txt")).unwrap(), b"hi");
        assert_eq!(write(&g, "a/b/c.txt", b"x").unwrap(), 1);
        assert_eq!(std::fs::read(dir.join("a/b/c.txt")).unwrap(), b"x");
        assert!(
            write(&g, ".git/config", b"x")
                .unwrap_err()
                .contains("protects")
        );
        assert!(
            write(&g, "toolgate.toml", b"x")
                .unwrap_err()
                .contains("protects")
        );
        assert!(!dir.join("toolgate.toml").exists());
        // A symlink to the protected directory, or out of the grant.
        std::os::unix::fs::symlink(".git", dir.join("g")).unwrap();
        assert!(write(&g, "g/hooks/pre-commit", b"x").is_err());
        assert!(!dir.join(".git/hooks").exists());
        std::os::unix::fs::symlink(&outside, dir.join("out")).unwrap();
        assert!(write(&g, "out/x", b"x").is_err());
        assert!(!outside.join("x").exists());
        std::os::unix::fs::symlink(outside.join("f"), dir.join("link")).unwrap();
        assert!(write(&g, "link", b"x").unwrap_err().contains("symlink"));
        assert!(write(&g, "../x", b"x").is_err());
        assert!(
            write(&g, "a/b/c.txt/", b"x")
                .unwrap_err()
                .contains("directory")
        );
        assert!(write(&g, "/etc/x", b"x").is_err());
        let ro = Grants::default();
        assert!(
            write(&ro, "x", b"x")
                .unwrap_err()
                .contains("read-write grant")
        );
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&outside);
    }

    /// Batches dropped while reading keep their slots until their reads
    /// end: a start-and-drop loop never has more than two reads going.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropped_batches_hold_their_slots_until_their_reads_end() {
        let dir = std::env::temp_dir().join(format!("toolgate-slots-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("big"), vec![7u8; 8 << 20]).unwrap();
        let g = read_grants(&dir, true);
        let paths = vec!["big".to_string(); 4];
        let mut slots = ReadSlots::default();
        for _ in 0..20 {
            let batch = slots
                .start(g.clone(), Vec::new(), paths.clone(), 16 << 20, 32 << 20)
                .await
                .unwrap();
            assert!(slots.running() <= MAX_PENDING_READS, "{}", slots.running());
            slots.release(batch);
        }
        let mut a = slots
            .start(g.clone(), Vec::new(), paths.clone(), 16 << 20, 32 << 20)
            .await
            .unwrap();
        let _b = slots
            .start(g.clone(), Vec::new(), paths.clone(), 16 << 20, 32 << 20)
            .await
            .unwrap();
        assert!(
            slots
                .start(g.clone(), Vec::new(), paths.clone(), 1, 1)
                .await
                .is_err()
        );
        assert_eq!(a.wait().await.unwrap().len(), 4);
        assert!(a.wait().await.unwrap().is_empty());
        slots.release(a);
        assert!(slots.start(g, Vec::new(), paths, 1, 1).await.is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn read_grants(dir: &Path, preopen: bool) -> Vec<FsGrant> {
        vec![FsGrant {
            host: dir.canonicalize().unwrap(),
            guest: ".".into(),
            writable: false,
            preopen,
        }]
    }

    #[test]
    fn reads_regular_files_beneath_a_preopen_and_nothing_else() {
        let dir = std::env::temp_dir().join(format!("toolgate-reads-{}", std::process::id()));
        let outside =
            std::env::temp_dir().join(format!("toolgate-reads-out-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(dir.join("a.txt"), "aaaa").unwrap();
        std::fs::write(dir.join("sub/b.txt"), "bb").unwrap();
        std::fs::write(outside.join("secret"), "secret").unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), dir.join("abs")).unwrap();
        std::os::unix::fs::symlink("../../", dir.join("sub/up")).unwrap();
        std::os::unix::fs::symlink("a.txt", dir.join("inside")).unwrap();
        let fifo = std::ffi::CString::new(dir.join("fifo").to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        let g = read_grants(&dir, true);
        let paths: Vec<String> = [
            "a.txt",
            "./sub/b.txt",
            "inside",
            "abs",
            "sub/up/etc/passwd",
            "../x",
            "/etc/passwd",
            "fifo",
            "sub",
            "missing",
            ".",
            "a.txt/",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let started = std::time::Instant::now();
        let r = read(&g, &[], &paths, 1 << 20, 1 << 20);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "a FIFO was waited on"
        );
        assert_eq!(r.len(), paths.len());
        assert_eq!(r[0].as_deref().unwrap(), b"aaaa");
        assert_eq!(r[1].as_deref().unwrap(), b"bb");
        // A symlink that stays inside is followed, as WASI follows it.
        assert_eq!(r[2].as_deref().unwrap(), b"aaaa");
        for (i, path) in paths.iter().enumerate().skip(3) {
            assert!(r[i].is_err(), "`{path}` was read: {:?}", r[i]);
        }
        assert!(
            r[7].as_ref().unwrap_err().contains("not a regular file"),
            "{:?}",
            r[7]
        );
        assert!(
            r[8].as_ref().unwrap_err().contains("directory"),
            "{:?}",
            r[8]
        );
        assert!(
            r[9].as_ref().unwrap_err().contains("does not exist"),
            "{:?}",
            r[9]
        );
        // Limits: a file over the per-file limit is an error, not a stop;
        // the total stops the list, after at least one result.
        let two: Vec<String> = vec!["a.txt".into(), "sub/b.txt".into(), "a.txt".into()];
        let r = read(&g, &[], &two, 3, 100);
        assert!(
            r[0].as_ref()
                .unwrap_err()
                .contains("more than one read returns (3)")
        );
        assert_eq!(r[1].as_deref().unwrap(), b"bb");
        let r = read(&g, &[], &two, 100, 6);
        assert_eq!(r.len(), 2, "4 + 2 bytes fit in 6, the next 4 do not");
        let r = read(&g, &[], &two, 100, 1);
        assert_eq!(r.len(), 3, "errors take no budget");
        let many: Vec<String> = vec!["sub/b.txt".to_string(); MAX_READ_PATHS + 10];
        assert_eq!(
            read(&g, &[], &many, u64::MAX, u64::MAX).len(),
            MAX_READ_PATHS
        );
        // A grant that is not preopened is not read through this seam.
        let spawn_only = read_grants(&dir, false);
        assert!(
            read(&spawn_only, &[], &two, 100, 100)[0]
                .as_ref()
                .unwrap_err()
                .contains("no preopened")
        );
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&outside);
    }

    /// A hidden path (the host's secrets) is refused however the guest path
    /// leads to it: by name, through a symlink, through `.`, beneath a
    /// hidden directory; the file beside it reads.
    #[test]
    fn hidden_paths_are_never_read() {
        let dir = std::env::temp_dir().join(format!("toolgate-hidden-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("keys")).unwrap();
        std::fs::write(dir.join("toolgate.toml"), "secret").unwrap();
        std::fs::write(dir.join("keys/k"), "secret").unwrap();
        std::fs::write(dir.join("notes.txt"), "notes").unwrap();
        std::os::unix::fs::symlink("toolgate.toml", dir.join("link")).unwrap();
        let root = dir.canonicalize().unwrap();
        let g = read_grants(&dir, true);
        let hidden = vec![root.join("toolgate.toml"), root.join("keys")];
        let paths: Vec<String> = [
            "toolgate.toml",
            "link",
            "./toolgate.toml",
            "keys/k",
            "notes.txt",
        ]
        .iter()
        .map(|p| p.to_string())
        .collect();
        let r = read(&g, &hidden, &paths, 1 << 20, 1 << 20);
        for (p, r) in paths.iter().zip(&r).take(4) {
            let e = r.as_ref().unwrap_err();
            assert!(e.contains("secrets"), "{p}: {e}");
        }
        assert_eq!(r[4].as_deref().unwrap(), b"notes");
        // Nothing hidden: the same file reads.
        assert!(read(&g, &[], &paths[..1], 1 << 20, 1 << 20)[0].is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
