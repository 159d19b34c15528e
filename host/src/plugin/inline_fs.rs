//! `wasi:filesystem` operations answered on the calling thread:
//! `metadata-hash-at`, and `open-at` of anything that cannot block.
//!
//! wasmtime-wasi runs every file-system operation on tokio's blocking pool
//! and awaits it: two thread hand-offs per operation. For some operations
//! that is the price of safety — an `open` of a FIFO blocks its thread
//! until a writer comes, and the runtime's threads must never block. For
//! the rest it is only a price: on a loaded two-core machine a hand-off
//! costs tens of microseconds, and walks pay it thousands of times.
//!
//! * `metadata-hash-at` is a `stat`: it resolves a path and reads an inode,
//!   never opens the file, so a FIFO cannot block it. wasi-libc's `readdir`
//!   (behind Rust's `std::fs::read_dir`, and so behind every directory walk
//!   a component makes) calls it on **each entry** to fill in `d_ino`: a
//!   walk of 5,000 files paid 5,000 round trips through the pool.
//! * `open-at` is answered here unless its target is a FIFO, socket or
//!   device: those keep wasmtime-wasi's way (the pool, and every later
//!   operation on them too). The open here adds `O_NONBLOCK` — so a path
//!   swapped for a FIFO between the check and the open, or a file under
//!   another process's lease, fails at once instead of blocking, and goes
//!   to the pool as well — and `O_DIRECTORY` when the guest asks for a
//!   directory (the kernel refuses a FIFO before opening it). A regular
//!   file or directory opened here is marked to run its own operations
//!   (reads, writes, `read-directory`, `stat`) in place too; none of them
//!   can wait for another process.
//!
//! `open-at`, `stat-at` and `metadata-hash-at` on the sentinel preopen of
//! [`super::ungranted`] (a path no grant covers) are refused with `access`
//! and recorded there; `stat-at` is otherwise wasmtime-wasi's own.
//!
//! Paths are resolved beneath the descriptor's directory by cap-primitives
//! (what wasmtime-wasi's own copy of it does: no `..` or symlink out of the
//! preopen); the permission checks, the flags and the error codes are
//! wasmtime-wasi's. Every other operation stays on the pool.
//!
//! The trade-off: a `stat` or `read` on a hung network or FUSE mount inside
//! a grant blocks a runtime thread rather than a pool thread. Sandboxed
//! spawns cannot mount one (no new privileges, so no setuid `fusermount`);
//! an operator who grants such a mount accepts what any `stat` of it does.
//! And one listing of a huge directory holds a runtime thread for as long
//! as the listing takes: bounded, like every single operation here, and
//! the call's deadline applies between them.

use std::hash::{Hash, Hasher};
use std::os::fd::AsRawFd;
use std::path::Path;

use cap_primitives::fs::{FollowSymlinks, Metadata, MetadataExt, OpenOptions, OpenOptionsExt};
use wasmtime::component::{Linker, LinkerInstance, Resource};
use wasmtime_wasi::filesystem::{Descriptor, Dir, File, WasiFilesystemCtxView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    DescriptorFlags, DescriptorStat, ErrorCode, HostDescriptor, MetadataHashValue, OpenFlags,
    PathFlags,
};
use wasmtime_wasi::{OpenMode, WasiView};

use super::store::StoreData;
use super::ungranted;

/// The interface wasmtime-wasi defines (guests' `0.2.x` imports reach it by
/// semver matching); a unit test checks that the names are still the ones
/// wasmtime-wasi registers, so a shadow cannot silently miss.
pub const FILESYSTEM_TYPES: &str = "wasi:filesystem/types@0.2.12";
const METADATA_HASH_AT: &str = "[method]descriptor.metadata-hash-at";
const OPEN_AT: &str = "[method]descriptor.open-at";
const STAT_AT: &str = "[method]descriptor.stat-at";

/// Shadow `metadata-hash-at`, `open-at` and `stat-at` in `linker` (after
/// wasmtime-wasi's `add_to_linker_async`).
pub fn add_to_linker(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let defined = linker.instance(FILESYSTEM_TYPES).and_then(|mut types| {
        define_metadata_hash_at(&mut types)?;
        define_open_at(&mut types)?;
        define_stat_at(&mut types)
    });
    linker.allow_shadowing(false);
    defined
}

fn define_metadata_hash_at(types: &mut LinkerInstance<'_, StoreData>) -> wasmtime::Result<()> {
    types.func_wrap(
        METADATA_HASH_AT,
        |mut store: wasmtime::StoreContextMut<'_, StoreData>,
         (fd, flags, path): (Resource<Descriptor>, PathFlags, String)| {
            if on_sentinel(store.data_mut(), &fd)? {
                return Ok((Err(ungranted::refuse(store.data_mut(), &path)),));
            }
            let view = store.data_mut().ctx();
            let answer = match view.table.get(&fd)? {
                Descriptor::Dir(d) => metadata_hash_at(&d.dir, &path, flags),
                Descriptor::File(_) => Err(ErrorCode::NotDirectory),
            };
            Ok((answer,))
        },
    )
}

/// Is `fd` the sentinel preopen ([`super::ungranted`])?
fn on_sentinel(data: &mut StoreData, fd: &Resource<Descriptor>) -> wasmtime::Result<bool> {
    Ok(matches!(data.ctx().table.get(fd)?, Descriptor::Dir(d) if ungranted::is_sentinel(d)))
}

fn define_stat_at(types: &mut LinkerInstance<'_, StoreData>) -> wasmtime::Result<()> {
    types.func_wrap_async(
        STAT_AT,
        |mut store: wasmtime::StoreContextMut<'_, StoreData>,
         (fd, flags, path): (Resource<Descriptor>, PathFlags, String)| {
            Box::new(async move {
                if on_sentinel(store.data_mut(), &fd)? {
                    return Ok((Err(ungranted::refuse(store.data_mut(), &path)),));
                }
                let view = store.data_mut().ctx();
                let mut fs = WasiFilesystemCtxView {
                    ctx: view.ctx.filesystem(),
                    table: view.table,
                };
                let answer: Result<DescriptorStat, ErrorCode> =
                    match HostDescriptor::stat_at(&mut fs, fd, flags, path).await {
                        Ok(stat) => Ok(stat),
                        Err(e) => Err(e.downcast()?),
                    };
                Ok((answer,))
            })
        },
    )
}

type OpenAtParams = (
    Resource<Descriptor>,
    PathFlags,
    String,
    OpenFlags,
    DescriptorFlags,
);

fn define_open_at(types: &mut LinkerInstance<'_, StoreData>) -> wasmtime::Result<()> {
    types.func_wrap_async(
        OPEN_AT,
        |mut store: wasmtime::StoreContextMut<'_, StoreData>,
         (fd, path_flags, path, oflags, flags): OpenAtParams| {
            Box::new(async move {
                if on_sentinel(store.data_mut(), &fd)? {
                    return Ok((Err(ungranted::refuse(store.data_mut(), &path)),));
                }
                let dir = match store.data_mut().ctx().table.get(&fd)? {
                    Descriptor::Dir(d) => d.clone(),
                    Descriptor::File(_) => return Ok((Err(ErrorCode::NotDirectory),)),
                };
                let grants = store.data().plugin.grants.clone();
                let hidden = &grants.sandbox.hidden;
                let answer = match open_at(&dir, path_flags, path, oflags, flags, hidden).await {
                    Ok(opened) => Ok(store.data_mut().ctx().table.push(opened)?),
                    Err(e) => Err(e),
                };
                Ok((answer,))
            })
        },
    )
}

/// What the guest asked for, as the OS options and the mode to record.
struct Request {
    options: OpenOptions,
    mode: OpenMode,
    directory: bool,
}

/// wasmtime-wasi's translation of `open-at`'s flags and its permission
/// checks, in the same order (so the same error for the same request).
fn request(
    dir: &Dir,
    path_flags: PathFlags,
    oflags: OpenFlags,
    flags: DescriptorFlags,
) -> Result<Request, ErrorCode> {
    let mut create = false;
    let mut mode = OpenMode::empty();
    let mut options = OpenOptions::new();
    if oflags.contains(OpenFlags::CREATE) {
        if oflags.contains(OpenFlags::EXCLUSIVE) {
            options.create_new(true);
        } else {
            options.create(true);
        }
        create = true;
        options.write(true);
        mode |= OpenMode::WRITE;
    }
    if oflags.contains(OpenFlags::TRUNCATE) {
        options.truncate(true).write(true);
        mode |= OpenMode::WRITE;
    }
    if flags.contains(DescriptorFlags::READ) {
        options.read(true);
        mode |= OpenMode::READ;
    }
    if flags.contains(DescriptorFlags::WRITE) {
        options.write(true);
        mode |= OpenMode::WRITE;
    } else {
        // Opened for reading when not for writing (as wasmtime-wasi does):
        // the OS lets the open through, the permissions judge later use.
        options.read(true);
        mode |= OpenMode::READ;
    }
    // `cap_fs_ext::OpenOptionsFollowExt::follow` is this call.
    options._cap_fs_ext_follow(follow(path_flags));
    if flags.intersects(
        DescriptorFlags::FILE_INTEGRITY_SYNC
            | DescriptorFlags::DATA_INTEGRITY_SYNC
            | DescriptorFlags::REQUESTED_WRITE_SYNC,
    ) {
        return Err(ErrorCode::Unsupported);
    }
    let directory = oflags.contains(OpenFlags::DIRECTORY);
    if directory
        && oflags.intersects(OpenFlags::CREATE | OpenFlags::EXCLUSIVE | OpenFlags::TRUNCATE)
    {
        return Err(ErrorCode::Invalid);
    }
    if dir.perms.write_not_permitted() && (create || mode.contains(OpenMode::WRITE)) {
        return Err(ErrorCode::NotPermitted);
    }
    Ok(Request {
        options,
        mode,
        directory,
    })
}

/// Open `path` beneath `dir`: in place when nothing can block, on the pool
/// (wasmtime-wasi's way) when the target is a FIFO, socket or device.
///
/// Whatever opens, a file or directory that is (or lies inside) one of the
/// `hidden` paths — the host's secrets, see
/// [`crate::grants::Authority::add_secret`] — is closed again and
/// refused with `access`, however the path led there.
async fn open_at(
    dir: &Dir,
    path_flags: PathFlags,
    path: String,
    oflags: OpenFlags,
    flags: DescriptorFlags,
    hidden: &[std::path::PathBuf],
) -> Result<Descriptor, ErrorCode> {
    let requested = std::path::PathBuf::from(&path);
    let secret = |file: &std::fs::File| {
        crate::grants::check_hidden(hidden, std::os::fd::AsFd::as_fd(file), &requested)
            .map_err(|_| ErrorCode::Access)
    };
    let Request {
        options,
        mode,
        directory,
    } = request(dir, path_flags, oflags, flags)?;
    let wait_free = directory || {
        // Look first, so that a FIFO is not even opened for an instant (a
        // writer waiting for a reader would be let through).
        !matches!(
            cap_primitives::fs::stat(&dir.dir, Path::new(&path), follow(path_flags)),
            Ok(meta) if !(meta.is_file() || meta.is_dir() || meta.file_type().is_symlink())
        )
    };
    if wait_free {
        let mut custom = libc::O_NONBLOCK;
        if directory {
            custom |= libc::O_DIRECTORY;
        }
        let mut in_place = options.clone();
        in_place.custom_flags(custom);
        match cap_primitives::fs::open(&dir.dir, Path::new(&path), &in_place) {
            Ok(file) => {
                secret(&file)?;
                let meta = Metadata::from_file(&file).map_err(ErrorCode::from)?;
                if meta.is_dir() {
                    return Ok(Descriptor::Dir(Dir::new(file, dir.perms, mode, true)));
                }
                if meta.is_file() {
                    clear_nonblocking(&file)?;
                    return Ok(Descriptor::File(File::new(file, dir.perms, mode, true)));
                }
                // Swapped for something else after the look: the pool.
            }
            // A FIFO without a reader (opened for writing), or a lease
            // another process holds: the pool, where waiting is allowed.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENXIO | libc::EWOULDBLOCK)) => {}
            Err(e) => return Err(ErrorCode::from(e)),
        }
    }
    // wasmtime-wasi's way: the open, and all that follows, on the pool.
    let at = dir.dir.clone();
    let opened = tokio::task::spawn_blocking(move || {
        let file = cap_primitives::fs::open(&at, Path::new(&path), &options)?;
        let is_dir = Metadata::from_file(&file)?.is_dir();
        Ok::<_, std::io::Error>((file, is_dir))
    })
    .await
    .map_err(|_| ErrorCode::Io)?;
    let opened = opened.map_err(ErrorCode::from)?;
    secret(&opened.0)?;
    match opened {
        (file, true) => Ok(Descriptor::Dir(Dir::new(file, dir.perms, mode, false))),
        (_, false) if directory => Err(ErrorCode::NotDirectory),
        (file, false) => Ok(Descriptor::File(File::new(file, dir.perms, mode, false))),
    }
}

fn follow(flags: PathFlags) -> FollowSymlinks {
    if flags.contains(PathFlags::SYMLINK_FOLLOW) {
        FollowSymlinks::Yes
    } else {
        FollowSymlinks::No
    }
}

/// The guest asked for a blocking descriptor: take back the `O_NONBLOCK`
/// the open here added (on a regular file it changes nothing the guest
/// could see, but the descriptor should be what was asked for).
fn clear_nonblocking(file: &std::fs::File) -> Result<(), ErrorCode> {
    let fd = file.as_raw_fd();
    // SAFETY: `fd` is open for the life of `file`; F_GETFL/F_SETFL only
    // read and set its status flags.
    let cleared = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) == 0
    };
    if cleared {
        Ok(())
    } else {
        Err(ErrorCode::from(std::io::Error::last_os_error()))
    }
}

/// What wasmtime-wasi answers, without leaving the thread.
fn metadata_hash_at(
    dir: &std::fs::File,
    path: &str,
    flags: PathFlags,
) -> Result<MetadataHashValue, ErrorCode> {
    let meta =
        cap_primitives::fs::stat(dir, Path::new(path), follow(flags)).map_err(ErrorCode::from)?;
    Ok(hash((meta.dev(), meta.ino())))
}

/// wasmtime-wasi's hash of a file's identity: std's 64-bit hasher, the
/// upper half the lower one xor a constant (π's bits).
fn hash(identity: (u64, u64)) -> MetadataHashValue {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    identity.hash(&mut hasher);
    let lower = hasher.finish();
    MetadataHashValue {
        lower,
        upper: lower ^ 4614256656552045848u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each shadow replaces a function wasmtime-wasi defines: defining it
    /// again without shadowing fails. (Were a name stale, the definition
    /// would succeed, the shadow would define a function nobody imports,
    /// and walks would be slow again without any error.)
    #[test]
    fn the_shadowed_names_are_the_ones_wasmtime_wasi_defines() {
        let engine = wasmtime::Engine::default();
        let mut linker = Linker::<StoreData>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
        let mut types = linker.instance(FILESYSTEM_TYPES).unwrap();
        assert!(
            define_metadata_hash_at(&mut types).is_err(),
            "wasmtime-wasi no longer defines `{METADATA_HASH_AT}` in `{FILESYSTEM_TYPES}`"
        );
        assert!(
            define_open_at(&mut types).is_err(),
            "wasmtime-wasi no longer defines `{OPEN_AT}` in `{FILESYSTEM_TYPES}`"
        );
        assert!(
            define_stat_at(&mut types).is_err(),
            "wasmtime-wasi no longer defines `{STAT_AT}` in `{FILESYSTEM_TYPES}`"
        );
        add_to_linker(&mut linker).unwrap();
    }

    struct Tree(std::path::PathBuf);

    impl Tree {
        fn new(name: &str) -> Tree {
            let dir = std::env::temp_dir().join(format!("toolgate-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(dir.join("sub")).unwrap();
            std::fs::write(dir.join("a"), "a").unwrap();
            std::os::unix::fs::symlink("/etc/passwd", dir.join("out")).unwrap();
            let fifo = std::ffi::CString::new(dir.join("pipe").to_str().unwrap()).unwrap();
            // SAFETY: a valid C string; mkfifo only creates the node.
            assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
            Tree(dir)
        }

        fn dir(&self, perms: wasmtime_wasi::FsPerms) -> Dir {
            let d = std::fs::File::open(&self.0).unwrap();
            Dir::new(d, perms, OpenMode::READ | OpenMode::WRITE, false)
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Open the FIFO for writing, which lets every reader waiting in
    /// `open` through; false while no reader is there.
    fn write_end_opens(fifo: &Path) -> bool {
        use std::os::unix::fs::OpenOptionsExt as _;
        std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(fifo)
            .is_ok()
    }

    fn read() -> DescriptorFlags {
        DescriptorFlags::READ
    }

    async fn open(
        dir: &Dir,
        path: &str,
        oflags: OpenFlags,
        flags: DescriptorFlags,
    ) -> Result<Descriptor, ErrorCode> {
        open_at(dir, PathFlags::empty(), path.into(), oflags, flags, &[]).await
    }

    /// Regular files and directories open in place, marked to stay in
    /// place, without the `O_NONBLOCK` the open used; the checks are
    /// wasmtime-wasi's.
    #[tokio::test(flavor = "current_thread")]
    async fn files_and_directories_open_in_place_with_wasmtime_wasis_checks() {
        let t = Tree::new("open-at");
        let rw = t.dir(wasmtime_wasi::FsPerms::ReadWrite);
        let Ok(Descriptor::File(f)) = open(&rw, "a", OpenFlags::empty(), read()).await else {
            panic!("a regular file opens as a file");
        };
        // SAFETY: F_GETFL on an open descriptor.
        let status = unsafe { libc::fcntl(f.file.as_raw_fd(), libc::F_GETFL) };
        assert_eq!(status & libc::O_NONBLOCK, 0, "O_NONBLOCK is taken back");
        assert!(matches!(
            open(&rw, "sub", OpenFlags::DIRECTORY, read()).await,
            Ok(Descriptor::Dir(_))
        ));
        assert!(matches!(
            open(&rw, "a", OpenFlags::DIRECTORY, read()).await,
            Err(ErrorCode::NotDirectory)
        ));
        assert!(matches!(
            open(&rw, "missing", OpenFlags::empty(), read()).await,
            Err(ErrorCode::NoEntry)
        ));
        assert!(matches!(
            open(&rw, "sub", OpenFlags::DIRECTORY | OpenFlags::CREATE, read()).await,
            Err(ErrorCode::Invalid)
        ));
        // Beneath the directory only; a symlink is not followed unless asked,
        // and never out.
        assert!(
            open(&rw, "../", OpenFlags::DIRECTORY, read())
                .await
                .is_err()
        );
        assert!(
            open(&rw, "/etc/passwd", OpenFlags::empty(), read())
                .await
                .is_err()
        );
        assert!(matches!(
            open(&rw, "out", OpenFlags::empty(), read()).await,
            Err(ErrorCode::Loop)
        ));
        let followed = open_at(
            &rw,
            PathFlags::SYMLINK_FOLLOW,
            "out".into(),
            OpenFlags::empty(),
            read(),
            &[],
        )
        .await;
        assert!(followed.is_err());
        // Created in place; refused under a read-only grant.
        let created = open(&rw, "new", OpenFlags::CREATE, DescriptorFlags::WRITE).await;
        assert!(matches!(created, Ok(Descriptor::File(_))));
        assert!(t.0.join("new").is_file());
        let ro = t.dir(wasmtime_wasi::FsPerms::ReadOnly);
        assert!(matches!(
            open(&ro, "b", OpenFlags::CREATE, DescriptorFlags::WRITE).await,
            Err(ErrorCode::NotPermitted)
        ));
        assert!(matches!(
            open(&ro, "a", OpenFlags::empty(), DescriptorFlags::WRITE).await,
            Err(ErrorCode::NotPermitted)
        ));
        assert!(!t.0.join("b").exists());
    }

    /// A FIFO asked for as a directory is refused by the kernel before it
    /// is opened: at once, on the calling thread. (Were it opened as a
    /// file, this single-threaded runtime would block for good: the test
    /// would hang, not pass.)
    #[tokio::test(flavor = "current_thread")]
    async fn a_fifo_asked_for_as_a_directory_is_refused_at_once() {
        let t = Tree::new("open-at-fifo-dir");
        let rw = t.dir(wasmtime_wasi::FsPerms::ReadWrite);
        let started = std::time::Instant::now();
        assert!(matches!(
            open(&rw, "pipe", OpenFlags::DIRECTORY, read()).await,
            Err(ErrorCode::NotDirectory)
        ));
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }

    /// A FIFO opened as a file goes to the pool: the open waits there for
    /// a writer, and the calling thread stays free (this runtime has one
    /// thread: the timer could not fire otherwise).
    #[tokio::test(flavor = "current_thread")]
    async fn a_fifo_opened_as_a_file_waits_on_the_pool_not_here() {
        let t = Tree::new("open-at-fifo");
        let rw = t.dir(wasmtime_wasi::FsPerms::ReadWrite);
        let waited = tokio::time::timeout(
            std::time::Duration::from_millis(300),
            open(&rw, "pipe", OpenFlags::empty(), read()),
        )
        .await;
        assert!(waited.is_err(), "the open waits for a writer");
        // Once a writer comes, an open completes, as a pool-bound file
        // (the writer also lets the abandoned first open go).
        let opening = tokio::spawn({
            let rw = rw.clone();
            async move { open(&rw, "pipe", OpenFlags::empty(), read()).await }
        });
        let started = std::time::Instant::now();
        while !opening.is_finished() {
            assert!(started.elapsed() < std::time::Duration::from_secs(5));
            write_end_opens(&t.0.join("pipe"));
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(matches!(opening.await.unwrap(), Ok(Descriptor::File(_))));
    }

    #[test]
    fn stats_stay_beneath_the_directory() {
        let t = Tree::new("stat");
        let dir = &t.0;
        let d = std::fs::File::open(dir).unwrap();
        let nofollow = PathFlags::empty();
        let a = metadata_hash_at(&d, "a", nofollow).unwrap();
        let meta = std::fs::metadata(dir.join("a")).unwrap();
        use std::os::unix::fs::MetadataExt as _;
        let expected = hash((meta.dev(), meta.ino()));
        assert_eq!((a.lower, a.upper), (expected.lower, expected.upper));
        assert!(matches!(
            metadata_hash_at(&d, "missing", nofollow),
            Err(ErrorCode::NoEntry)
        ));
        assert!(metadata_hash_at(&d, "../", nofollow).is_err());
        assert!(metadata_hash_at(&d, "/etc/passwd", nofollow).is_err());
        // The link itself may be looked at; following it out may not.
        assert!(metadata_hash_at(&d, "out", nofollow).is_ok());
        assert!(metadata_hash_at(&d, "out", PathFlags::SYMLINK_FOLLOW).is_err());
    }

    /// An open that ends at a hidden path (the host's secrets) is refused
    /// with `access`, through a symlink too; the tree's other files open.
    #[tokio::test(flavor = "current_thread")]
    async fn hidden_paths_do_not_open() {
        let t = Tree::new("open-at-hidden");
        std::fs::write(t.0.join("secret"), "s").unwrap();
        std::os::unix::fs::symlink("secret", t.0.join("to-secret")).unwrap();
        let ro = t.dir(wasmtime_wasi::FsPerms::ReadOnly);
        let hidden = vec![
            t.0.canonicalize().unwrap().join("secret"),
            t.0.canonicalize().unwrap().join("sub"),
        ];
        let open_hiding = |path: &'static str, oflags| {
            open_at(
                &ro,
                PathFlags::SYMLINK_FOLLOW,
                path.into(),
                oflags,
                read(),
                &hidden,
            )
        };
        for (path, oflags) in [
            ("secret", OpenFlags::empty()),
            ("to-secret", OpenFlags::empty()),
            ("sub/../secret", OpenFlags::empty()),
            ("sub", OpenFlags::DIRECTORY),
        ] {
            assert!(
                matches!(open_hiding(path, oflags).await, Err(ErrorCode::Access)),
                "{path} opened"
            );
        }
        assert!(matches!(
            open_hiding("a", OpenFlags::empty()).await,
            Ok(Descriptor::File(_))
        ));
        // Replaced by its owner (a new inode): refused by its name at once.
        std::fs::remove_file(t.0.join("secret")).unwrap();
        std::fs::write(t.0.join("secret"), "new").unwrap();
        assert!(matches!(
            open_hiding("secret", OpenFlags::empty()).await,
            Err(ErrorCode::Access)
        ));
    }
}
