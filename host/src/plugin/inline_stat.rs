//! `wasi:filesystem`'s `metadata-hash-at`, answered on the calling thread.
//!
//! wasmtime-wasi runs every file-system operation on tokio's blocking pool
//! and awaits it: two thread hand-offs per operation. For most operations
//! that is the price of safety — an `open` of a file swapped for a FIFO
//! would block its thread until a writer comes, and the runtime's threads
//! must never block. But wasi-libc's `readdir` (behind Rust's
//! `std::fs::read_dir`, and so behind every directory walk a component
//! makes) calls `metadata-hash-at` on **each entry** to fill in `d_ino`:
//! a walk of 5,000 files paid 5,000 round trips through the pool, most of
//! the time `grep` took over a tree.
//!
//! `metadata-hash-at` is a `stat`: it resolves a path and reads an inode,
//! never opens the file, so a FIFO cannot block it. This module shadows
//! wasmtime-wasi's definition with one that does the same thing in place:
//! the path resolved beneath the descriptor's directory by cap-primitives
//! (what wasmtime-wasi's own copy of it does: no `..` or symlink out of
//! the preopen), the same hash of the same identity (device, inode), the
//! same error codes. Every other operation stays on the pool.
//!
//! The trade-off: a `stat` on a hung network or FUSE mount inside a grant
//! blocks a runtime thread rather than a pool thread. Sandboxed spawns
//! cannot mount one (no new privileges, so no setuid `fusermount`); an
//! operator who grants such a mount accepts what any `stat` of it does.

use std::hash::{Hash, Hasher};
use std::path::Path;

use cap_primitives::fs::{FollowSymlinks, MetadataExt};
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::WasiView;
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::bindings::filesystem::types::{ErrorCode, MetadataHashValue, PathFlags};

use super::store::StoreData;

/// The interface wasmtime-wasi defines (guests' `0.2.x` imports reach it by
/// semver matching); a unit test checks that the name is still the one
/// wasmtime-wasi registers, so the shadow cannot silently miss.
pub const FILESYSTEM_TYPES: &str = "wasi:filesystem/types@0.2.12";
const METADATA_HASH_AT: &str = "[method]descriptor.metadata-hash-at";

/// Shadow `metadata-hash-at` in `linker` (after wasmtime-wasi's
/// `add_to_linker_async`).
pub fn add_to_linker(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let defined = define(linker);
    linker.allow_shadowing(false);
    defined
}

fn define(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    linker.instance(FILESYSTEM_TYPES)?.func_wrap(
        METADATA_HASH_AT,
        |mut store: wasmtime::StoreContextMut<'_, StoreData>,
         (fd, flags, path): (Resource<Descriptor>, PathFlags, String)| {
            let view = store.data_mut().ctx();
            let answer = match view.table.get(&fd)? {
                Descriptor::Dir(d) => metadata_hash_at(&d.dir, &path, flags),
                Descriptor::File(_) => Err(ErrorCode::NotDirectory),
            };
            Ok((answer,))
        },
    )
}

/// What wasmtime-wasi answers, without leaving the thread.
fn metadata_hash_at(
    dir: &std::fs::File,
    path: &str,
    flags: PathFlags,
) -> Result<MetadataHashValue, ErrorCode> {
    let follow = if flags.contains(PathFlags::SYMLINK_FOLLOW) {
        FollowSymlinks::Yes
    } else {
        FollowSymlinks::No
    };
    let meta = cap_primitives::fs::stat(dir, Path::new(path), follow).map_err(ErrorCode::from)?;
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

    /// The shadow replaces a function wasmtime-wasi defines: defining it
    /// again without shadowing fails. (Were the name stale, the definition
    /// would succeed, the shadow would define an interface nobody imports,
    /// and walks would be slow again without any error.)
    #[test]
    fn the_shadowed_name_is_the_one_wasmtime_wasi_defines() {
        let engine = wasmtime::Engine::default();
        let mut linker = Linker::<StoreData>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
        assert!(
            define(&mut linker).is_err(),
            "wasmtime-wasi no longer defines `{METADATA_HASH_AT}` in `{FILESYSTEM_TYPES}`"
        );
        add_to_linker(&mut linker).unwrap();
    }

    #[test]
    fn stats_stay_beneath_the_directory() {
        let dir = std::env::temp_dir().join(format!("toolgate-stat-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("a"), "a").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("out")).unwrap();
        let d = std::fs::File::open(&dir).unwrap();
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
        let _ = std::fs::remove_dir_all(&dir);
    }
}
