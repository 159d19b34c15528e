//! The `bulk-read` seam (since contract 0.2.2): many whole files read by
//! the host in one call, from the directories preopened for the component.
//! It reads nothing `std::fs` could not; it is faster when a tool reads
//! many small files (a search over a tree), because each file read through
//! WASI costs several host round trips and a batch costs one. A component
//! that imports it loads only with a preopened `fs` grant.

use crate::bindings::toolgate::plugin::bulk_read as raw;

/// The host's caps: one call returns at most this many results…
pub const MAX_PATHS: usize = 4096;
/// …no file larger than this (16 MiB)…
pub const MAX_FILE_BYTES: u64 = 16 << 20;
/// …and at most this many bytes in all (32 MiB).
pub const MAX_TOTAL_BYTES: u64 = 32 << 20;

/// Read `paths` in order: one result per path, the file's bytes or why
/// not (missing, not a regular file, larger than `max_file_bytes`, outside
/// the preopened grants). The answer may be shorter than `paths` — it stops
/// before the file that would take the total past `max_total_bytes`, and
/// after [`MAX_PATHS`] — but holds at least one result when `paths` is not
/// empty: ask again for the rest (or use [`read_all`]).
pub fn read(
    paths: &[String],
    max_file_bytes: u64,
    max_total_bytes: u64,
) -> Vec<Result<Vec<u8>, String>> {
    raw::read(
        paths,
        raw::ReadLimits {
            max_file_bytes,
            max_total_bytes,
        },
    )
}

/// A [`read`] running on a host thread while the component goes on: start
/// the next batch, then search the previous one, and the two overlap. At
/// most two may be pending at once (starting a third traps); drop a batch
/// (or let it go out of scope) once waited for. One dropped before its read
/// ended keeps its place until it ends (the next `start` waits for it).
pub struct Batch(raw::Batch);

impl Batch {
    /// Start reading `paths`, as [`read`] would.
    pub fn start(paths: &[String], max_file_bytes: u64, max_total_bytes: u64) -> Batch {
        Batch(raw::Batch::start(
            paths,
            raw::ReadLimits {
                max_file_bytes,
                max_total_bytes,
            },
        ))
    }

    /// The results: what [`read`] would have returned (possibly fewer than
    /// the paths; read the rest with [`read_all`]).
    pub fn wait(self) -> Vec<Result<Vec<u8>, String>> {
        self.0.wait()
    }
}

/// Read all of `paths`, in as many calls as the limits need, handing each
/// result to `each` in order (with its index in `paths`) until it returns
/// false. At most `max_total_bytes` are held at once.
pub fn read_all(
    paths: &[String],
    max_file_bytes: u64,
    max_total_bytes: u64,
    mut each: impl FnMut(usize, Result<Vec<u8>, String>) -> bool,
) {
    let mut done = 0;
    while done < paths.len() {
        let batch = read(&paths[done..], max_file_bytes, max_total_bytes);
        if batch.is_empty() {
            // A host that returns nothing for a non-empty list breaks the
            // contract; stop rather than loop.
            return;
        }
        for result in batch {
            if !each(done, result) {
                return;
            }
            done += 1;
        }
    }
}
