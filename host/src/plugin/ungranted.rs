//! A file access no grant covers, seen by the host: "not granted", not
//! "No such file".
//!
//! A component sees its granted directories as WASI preopens, and
//! wasi-libc (under Rust's std, CPython, C) picks the preopen for a path
//! *inside the guest*. With only the granted directories preopened, a path
//! outside them fails there with `ENOENT` before the host hears of it: an
//! author who forgot the grant reads "No such file or directory" about a
//! file that is right there.
//!
//! So a plugin-directory component gets one more preopen, listed first:
//! `/`, the *sentinel*. wasi-libc strips the leading `/` and `./` of both
//! the preopens' names and the path, takes the longest matching name, and
//! among equals the one listed last: a path that a grant covers still goes
//! to that grant (a `.` grant keeps the relative paths), and only what no
//! grant covers reaches the sentinel. (So a grant seen as `.` takes every
//! path — `.` and `/` are the same empty prefix to wasi-libc — and such a
//! component's sentinel is never reached: its misses are told apart from
//! the failure's text, [`super::fs_hint`].) There the shadowed `open-at`,
//! `stat-at` and `metadata-hash-at` ([`super::inline_fs`]) answer `access`
//! — the guest reads "Permission denied" — and [`refuse`] records the path
//! in the call's scope (at most [`MAX_UNGRANTED_PATHS`], each cut to
//! [`MAX_UNGRANTED_PATH_BYTES`]) and logs the grant line to add (the first
//! of a call at `info`, the rest at `debug`: CPython printing a traceback
//! looks for its source files, which no grant covers either). A call that
//! then fails gets the same line in its error and a `warn` log line
//! ([`super::fs_hint`]), which is what `toolgate check --call` prints.
//!
//! The sentinel itself is a directory made for this host, opened, and
//! removed at once: nothing is in it, nothing can be created in it
//! (`openat` with `O_CREAT` in a removed directory fails), it is opened
//! read-only, and it names no place on the host. The operations not
//! shadowed (listing it, reading a link in it) find it empty.
//!
//! Not given one: the built-ins (their SDK words a missing path itself,
//! and their reads are measured), a component none of whose imports is
//! `wasi:filesystem` (it would never ask: [`wants_sentinel`]), and one
//! granted a directory seen as `/` or `.` (every path goes there). The cost is
//! one more table entry when the guest first lists its preopens (wasi-libc
//! does so once per instance, on its first path operation); a call that
//! touches no file pays nothing.

use std::sync::{Arc, OnceLock};

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::filesystem::{Descriptor, Dir, WasiFilesystemCtxView};
use wasmtime_wasi::p2::bindings::filesystem::preopens;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;
use wasmtime_wasi::{FsPerms, OpenMode, WasiView};

pub use crate::budgets::{MAX_UNGRANTED_PATH_BYTES, MAX_UNGRANTED_PATHS};
use crate::grants::Grants;

use super::store::StoreData;

/// The interface wasmtime-wasi defines for the preopens (a unit test checks
/// the name, as [`super::inline_fs::FILESYSTEM_TYPES`]'s).
pub const FILESYSTEM_PREOPENS: &str = "wasi:filesystem/preopens@0.2.12";
const GET_DIRECTORIES: &str = "get-directories";

/// Whether a component with these imports and grants, loaded from a
/// plugin directory (not a built-in), is given the sentinel.
pub fn wants_sentinel<'a>(
    builtin: bool,
    mut imports: impl Iterator<Item = &'a String>,
    grants: &Grants,
) -> bool {
    !builtin
        && imports.any(|i| i.starts_with("wasi:filesystem/"))
        && !grants.fs.iter().any(|g| {
            // A grant seen as `/` or `.`: wasi-libc sends every path there.
            g.preopen && g.guest.trim_matches(['/', '.']).is_empty()
        })
}

static SENTINEL: OnceLock<Option<Dir>> = OnceLock::new();

/// The host's sentinel directory, made on first use; `None` (and a
/// warning, once) when the temporary directory cannot hold one — then
/// components see only their grants, as before.
fn sentinel() -> Option<&'static Dir> {
    SENTINEL
        .get_or_init(|| match make_sentinel() {
            Ok(dir) => Some(dir),
            Err(e) => {
                tracing::warn!(
                    "cannot make the empty directory that tells an ungranted file access from a missing file ({e}); such accesses read as \"No such file\""
                );
                None
            }
        })
        .as_ref()
}

/// A new, private directory in the temporary directory, opened and
/// removed: an open, empty, read-only directory that is nowhere.
fn make_sentinel() -> std::io::Result<Dir> {
    use std::os::unix::fs::DirBuilderExt;
    let base = std::env::temp_dir();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut last = None;
    for attempt in 0..16u32 {
        let path = base.join(format!(
            "toolgate-sentinel-{}-{nanos}-{attempt}",
            std::process::id()
        ));
        // Exclusive: a directory someone else made there is never used.
        match std::fs::DirBuilder::new().mode(0o500).create(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                last = Some(e);
                continue;
            }
            Err(e) => return Err(e),
        }
        let opened = std::fs::File::open(&path);
        std::fs::remove_dir(&path)?;
        return Ok(Dir::new(opened?, FsPerms::ReadOnly, OpenMode::READ, false));
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free name")))
}

/// Is `dir` the sentinel? (Never makes one.)
pub fn is_sentinel(dir: &Dir) -> bool {
    SENTINEL
        .get()
        .and_then(Option::as_ref)
        .is_some_and(|s| Arc::ptr_eq(&s.dir, &dir.dir))
}

/// Shadow `get-directories` in `linker` (after wasmtime-wasi's
/// `add_to_linker_async`): wasmtime-wasi's list, after the sentinel when
/// the plugin is given one.
pub fn add_to_linker(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let defined = linker
        .instance(FILESYSTEM_PREOPENS)
        .and_then(|mut preopens| define_get_directories(&mut preopens));
    linker.allow_shadowing(false);
    defined
}

type Directories = Vec<(Resource<Descriptor>, String)>;

fn define_get_directories(
    preopens: &mut wasmtime::component::LinkerInstance<'_, StoreData>,
) -> wasmtime::Result<()> {
    preopens.func_wrap(
        GET_DIRECTORIES,
        |mut store: StoreContextMut<'_, StoreData>, (): ()| -> wasmtime::Result<(Directories,)> {
            let data = store.data_mut();
            let given = data.plugin.sentinel;
            let view = data.ctx();
            let mut fs = WasiFilesystemCtxView {
                ctx: view.ctx.filesystem(),
                table: view.table,
            };
            let mut dirs = Vec::new();
            if given && let Some(dir) = sentinel() {
                dirs.push((fs.table.push(Descriptor::Dir(dir.clone()))?, "/".into()));
            }
            dirs.extend(preopens::Host::get_directories(&mut fs)?);
            Ok((dirs,))
        },
    )
}

/// The guest reached the sentinel with `path` (what wasi-libc passes: the
/// path with its leading `/` taken off): record it, log the grant to add
/// (once per path and call), and answer `access`.
pub fn refuse(data: &mut StoreData, path: &str) -> ErrorCode {
    let path = guest_path(path, &data.plugin.grants);
    let seen = &mut data.scope.ungranted;
    if seen.len() < MAX_UNGRANTED_PATHS && !seen.contains(&path) {
        let hint = super::fs_hint::for_path(&data.plugin.name, &data.plugin.grants, &path)
            .unwrap_or_else(|| format!("{path} is outside every fs grant"));
        // The first of a call at `info`; the rest (a runtime printing a
        // traceback looks for its source files) at `debug`. A call that
        // fails because of it is logged at `warn`, with the same line.
        if seen.is_empty() {
            tracing::info!(plugin = %data.plugin.name, path = %path, "a file access was refused: {hint}");
        } else {
            tracing::debug!(plugin = %data.plugin.name, path = %path, "a file access was refused: {hint}");
        }
        seen.push(path);
    }
    ErrorCode::Access
}

/// The path as the guest most likely wrote it. wasi-libc took off the
/// leading `/`, so `etc/passwd` may have been `/etc/passwd` or a relative
/// path: with a `.` grant a relative path would have gone there, so it was
/// absolute; without one, it was absolute if its first component exists at
/// the host's root (`etc`, `home`, `tmp`), else relative. Cut to
/// [`MAX_UNGRANTED_PATH_BYTES`].
fn guest_path(path: &str, grants: &Grants) -> String {
    let path = path.trim_start_matches('/');
    let mut cut = path.len().min(MAX_UNGRANTED_PATH_BYTES);
    while !path.is_char_boundary(cut) {
        cut -= 1;
    }
    let path = &path[..cut];
    let dot = grants
        .fs
        .iter()
        .any(|g| g.preopen && matches!(g.guest.as_str(), "." | "./"));
    let first = path.split('/').next().unwrap_or("");
    let absolute = path.is_empty()
        || path == "."
        || dot
        || (path.contains('/')
            && !first.is_empty()
            && first != "."
            && first != ".."
            && std::path::Path::new("/").join(first).is_dir());
    if absolute {
        let path = path.trim_start_matches("./").trim_end_matches("/.");
        format!("/{}", if path == "." { "" } else { path })
    } else {
        path.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grants::FsGrant;

    fn grants(guests: &[&str]) -> Grants {
        Grants {
            fs: guests
                .iter()
                .map(|g| FsGrant {
                    host: "/srv".into(),
                    guest: (*g).into(),
                    writable: false,
                    preopen: true,
                })
                .collect(),
            ..Grants::default()
        }
    }

    /// The name wasmtime-wasi registers `get-directories` under is the one
    /// shadowed (were it stale, the shadow would define a function nobody
    /// imports, and no component would get the sentinel, silently).
    #[test]
    fn the_shadowed_name_is_the_one_wasmtime_wasi_defines() {
        let engine = wasmtime::Engine::default();
        let mut linker = Linker::<StoreData>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
        let mut preopens = linker.instance(FILESYSTEM_PREOPENS).unwrap();
        assert!(
            define_get_directories(&mut preopens).is_err(),
            "wasmtime-wasi no longer defines `{GET_DIRECTORIES}` in `{FILESYSTEM_PREOPENS}`"
        );
        add_to_linker(&mut linker).unwrap();
    }

    /// The sentinel is an open directory that is nowhere: empty, and
    /// nothing can be made in it.
    #[test]
    fn the_sentinel_is_empty_removed_and_read_only() {
        let dir = sentinel().expect("a sentinel in the temporary directory");
        assert!(is_sentinel(dir));
        assert_eq!(dir.perms, FsPerms::ReadOnly);
        let fd = dir.dir.as_ref();
        let entries = cap_primitives::fs::read_dir(fd, std::path::Path::new("."))
            .map(|d| d.count())
            .unwrap_or(0);
        assert_eq!(entries, 0);
        let mut create = cap_primitives::fs::OpenOptions::new();
        create.write(true).create(true);
        assert!(cap_primitives::fs::open(fd, std::path::Path::new("planted"), &create).is_err());
        // Another directory is not the sentinel.
        let other = std::fs::File::open(std::env::temp_dir()).unwrap();
        assert!(!is_sentinel(&Dir::new(
            other,
            FsPerms::ReadOnly,
            OpenMode::READ,
            false
        )));
    }

    #[test]
    fn who_gets_a_sentinel() {
        let fs = ["wasi:filesystem/types@0.2.0".to_string()];
        let cli = ["wasi:cli/environment@0.2.0".to_string()];
        assert!(wants_sentinel(false, fs.iter(), &grants(&[])));
        assert!(wants_sentinel(false, fs.iter(), &grants(&["/data"])));
        assert!(!wants_sentinel(false, fs.iter(), &grants(&[".", "/data"])));
        assert!(!wants_sentinel(true, fs.iter(), &grants(&[])));
        assert!(!wants_sentinel(false, cli.iter(), &grants(&[])));
        assert!(!wants_sentinel(false, fs.iter(), &grants(&["/"])));
    }

    #[test]
    fn the_path_as_the_guest_wrote_it() {
        let none = grants(&[]);
        assert_eq!(guest_path("notes.txt", &none), "notes.txt");
        assert_eq!(guest_path("etc/passwd", &none), "/etc/passwd");
        assert_eq!(guest_path("sub/notes.txt", &none), "sub/notes.txt");
        assert_eq!(guest_path(".", &none), "/");
        // With a `.` grant, a relative path never reaches the sentinel.
        assert_eq!(guest_path("notes.txt", &grants(&["."])), "/notes.txt");
        let long = "a".repeat(MAX_UNGRANTED_PATH_BYTES * 2);
        assert_eq!(guest_path(&long, &none).len(), MAX_UNGRANTED_PATH_BYTES);
    }
}
