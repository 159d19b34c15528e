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
    /// An OCI artifact of the local store: its manifest's SHA-256.
    Oci([u8; 32]),
}

impl Stamp {
    /// The stamp of the OCI artifact whose manifest digest is `digest`
    /// (`sha256:HEX`); `None` if it is not one.
    pub fn oci(digest: &str) -> Option<Stamp> {
        let hex = digest.strip_prefix("sha256:")?;
        if hex.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Stamp::Oci(out))
    }
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
    let entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    let mut paths: Vec<PathBuf> = entries
        .iter()
        .filter(|p| is_plugin_file(p))
        .cloned()
        .collect();
    paths.sort();
    let mut found = Vec::new();
    let mut problems = unclaimed_manifests(&entries);
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

/// A plugin's manifest a newcomer might have misnamed: a `.toml` that no
/// `.wasm` beside it claims (its stem is no plugin's), which either parses
/// as a manifest or is named `plugin.toml` / `manifest.toml`. Other `.toml`
/// files (`Cargo.toml`, `pyproject.toml`, a `toolgate.toml`) are not
/// manifests and are not mentioned. It is never read: a note says so, and
/// which name it needs.
pub fn unclaimed_manifests(entries: &[PathBuf]) -> Vec<LoadError> {
    let stem = |p: &Path| {
        p.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let plugins: Vec<String> = entries
        .iter()
        .filter(|p| is_plugin_file(p))
        .map(|p| stem(p))
        .collect();
    // The plugins that have no manifest of their own: what it may be for.
    let bare: Vec<&String> = plugins
        .iter()
        .filter(|n| {
            !entries
                .iter()
                .any(|p| is_manifest_file(p) && &stem(p) == *n)
        })
        .collect();
    let mut out = Vec::new();
    let mut tomls: Vec<&PathBuf> = entries.iter().filter(|p| is_manifest_file(p)).collect();
    tomls.sort();
    for toml in tomls {
        let name = stem(toml);
        if plugins.contains(&name) {
            continue;
        }
        // An empty file parses as a manifest too: only one that says
        // something counts; the host's configuration never does.
        let says_something = |m: crate::plugin::manifest::Manifest| {
            m.description.is_some()
                || m.priority.is_some()
                || !m.priorities.is_empty()
                || m.instances.is_some()
        };
        let looks_like_one = matches!(name.as_str(), "plugin" | "manifest")
            || (name != "toolgate"
                && std::fs::read_to_string(toml).is_ok_and(|t| {
                    crate::plugin::manifest::Manifest::parse(&t, &toml.display().to_string())
                        .is_ok_and(says_something)
                }));
        if !looks_like_one {
            continue;
        }
        let what = match bare.as_slice() {
            [one] => format!("rename it to {one}.toml"),
            [] => "no plugin here lacks one: remove it, or rename it to PLUGIN.toml beside PLUGIN.wasm".into(),
            many => format!(
                "rename it to NAME.toml for the plugin it is for ({})",
                many.iter()
                    .map(|n| format!("{n}.toml"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        out.push(LoadError::note(
            "plugin directory",
            &crate::plugin::Origin::File(toml.clone()),
            format!(
                "{} is not read: no plugin is named `{name}` (a plugin's manifest is NAME.toml beside NAME.wasm); {what}",
                toml.display()
            ),
        ));
    }
    out
}

fn is_manifest_file(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "toml") && !is_hidden(path) && path.is_file()
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
        Stamp::Builtin | Stamp::Oci(_) => 0,
    }
}
