//! Which plugin files a directory holds, and which of them changed.
//!
//! A reload must not read, let alone compile, what did not change: each
//! file is first identified by a [`Stamp`] — device, inode, size,
//! modification and status-change times of the `.wasm` and of its
//! manifest. The status-change time moves on every write, rename and
//! link, and no unprivileged process can set it back, so an equal stamp
//! means the same bytes. Only a file whose stamp differs from the version
//! serving is read, and it is read whole into memory, then stamped again:
//! a file that changed while it was read is being written, and is left for
//! the next reload (the previous version keeps serving).
//!
//! Hidden files (a name starting with `.`) are skipped: editors and copy
//! tools write their temporary files that way (`.name.wasm.swp`, rsync's
//! `.name.wasm.XXXXXX`).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::plugin::{LoadError, PluginSource, loader};

/// The identity of one file's contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl FileStamp {
    /// Stamp `path` (following symlinks: a linked plugin is its target).
    pub fn of(path: &Path) -> std::io::Result<FileStamp> {
        let m = std::fs::metadata(path)?;
        Ok(FileStamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            ctime_ns: i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
        })
    }

    /// The file's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }
}

/// The identity of a plugin's bytes and manifest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stamp {
    /// Embedded in the binary: never changes.
    Builtin,
    /// A `.wasm` file and its manifest (if it has one).
    File {
        wasm: FileStamp,
        manifest: Option<FileStamp>,
    },
}

impl Stamp {
    fn of_file(wasm: &Path) -> std::io::Result<Stamp> {
        let manifest = match FileStamp::of(&wasm.with_extension("toml")) {
            Ok(s) => Some(s),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        Ok(Stamp::File {
            wasm: FileStamp::of(wasm)?,
            manifest,
        })
    }
}

/// One plugin file found in a directory.
pub struct Found {
    /// The plugin's name (the file stem).
    pub name: String,
    pub path: PathBuf,
    pub stamp: Stamp,
}

/// The plugin files of `dir`, sorted by name, stamped but not read.
/// Problems with single entries are reported, not fatal.
pub fn list(dir: &Path) -> std::io::Result<(Vec<Found>, Vec<LoadError>)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| is_plugin_file(p))
        .collect();
    paths.sort();
    let mut found = Vec::new();
    let mut problems = Vec::new();
    for path in paths {
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        match Stamp::of_file(&path) {
            Ok(stamp) => found.push(Found { name, path, stamp }),
            // Gone between the listing and the stat: removed.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => problems.push(LoadError::new(
                &name,
                &crate::plugin::Origin::File(path.clone()),
                format!("cannot be read: {e}"),
            )),
        }
    }
    Ok((found, problems))
}

/// A `.wasm` file that is not hidden.
pub fn is_plugin_file(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "wasm") && !is_hidden(path)
}

/// A name starting with `.`.
pub fn is_hidden(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.as_encoded_bytes().first() == Some(&b'.'))
}

/// What reading a changed file gave.
// One per changed file per reload, moved once: not worth a box.
#[allow(clippy::large_enum_variant)]
pub enum Read {
    /// The bytes and manifest, unchanged while they were read.
    Source(PluginSource, Stamp),
    /// It changed while it was read (or vanished): still being written.
    Busy,
    /// It cannot be a plugin (a bad name, unreadable).
    Failed(LoadError),
}

/// Read a found file whole, and check it did not change meanwhile.
pub fn read(found: &Found) -> Read {
    match loader::read_source(&found.path) {
        Err(e) => match Stamp::of_file(&found.path) {
            Err(_) => Read::Busy,
            Ok(now) if now != found.stamp => Read::Busy,
            Ok(_) => Read::Failed(e),
        },
        Ok(source) => match Stamp::of_file(&found.path) {
            Ok(now) if now == found.stamp && source.bytes.len() as u64 == wasm_size(&now) => {
                Read::Source(source, now)
            }
            _ => Read::Busy,
        },
    }
}

fn wasm_size(stamp: &Stamp) -> u64 {
    match stamp {
        Stamp::File { wasm, .. } => wasm.size(),
        Stamp::Builtin => 0,
    }
}
