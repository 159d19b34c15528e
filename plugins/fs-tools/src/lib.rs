//! Read-only file tools over the granted directory: `read`, `read_image`,
//! `glob`, `grep` and `list_dir`.
//!
//! The component sees only what the operator granted (by default the
//! working directory, read-only, as `.`); paths are relative to it. Paths
//! that are absolute or climb out with `..` are refused with a clear error
//! before any file system call — WASI would refuse them anyway, less
//! helpfully.
//!
//! Only regular files are ever opened. Opening a FIFO blocks until someone
//! writes to it — a thread of the host stuck for good — and a device or a
//! socket is no text to read: `read`, `read_image` and `grep` on one file
//! check what a path is before they open it and say what they found; the
//! walks of `grep` and `glob` visit regular files only and follow no
//! symlink.
//!
//! The walks and searches are ripgrep's own crates compiled to wasm:
//! `ignore` (`.gitignore`, `.ignore`, hidden files, file types), `globset`,
//! `grep-regex` and `grep-searcher` (binary files skipped at the first NUL
//! byte, as ripgrep does).

mod glob;
mod grep;
mod image;
mod kind;
mod list;
mod paths;
mod read;
mod walk;

pub use glob::Glob;
pub use grep::Grep;
pub use image::ReadImage;
pub use list::ListDir;
pub use read::Read;

toolgate_sdk::export! { tools: [Read, ReadImage, Glob, Grep, ListDir] }
