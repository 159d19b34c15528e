//! The `files` seam (since contract 0.2.1): whole-file writes made by the
//! host inside the plugin's read-write grants, never into the paths the
//! host protects (its configuration, plugins, compile cache, `.git`). A
//! read-write WASI preopen cannot leave those out, so a tool that writes
//! into a working directory writes through this seam; a component that
//! imports it loads only with a read-write `fs` grant (`spawn_only = true`
//! is enough).

use crate::bindings::toolgate::plugin::files as raw;

/// Replace (or create) the file at `path` with `contents`, creating its
/// parent directories. Returns the bytes written; `Err` says why not.
pub fn write(path: &str, contents: &[u8]) -> Result<u64, String> {
    raw::write(path, contents)
}
