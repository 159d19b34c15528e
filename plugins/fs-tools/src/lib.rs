//! Read-only file tools over the granted directory: `read`, `read_image`,
//! `glob`, `grep` and `list_dir`.
//!
//! The component sees only what the operator granted (by default the
//! working directory, read-only, as `.`, and each skill's directory,
//! read-only, at its own absolute path); paths are relative to the
//! working directory. Paths that climb out with `..` are refused with a
//! clear error before any file system call; so are absolute paths, except
//! in `read` (a skill's files), where one no grant covers is refused when
//! WASI finds no directory for it, with a message that says to use a
//! relative path.
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
