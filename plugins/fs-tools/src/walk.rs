//! The walk `glob` and `grep` share: ripgrep's `ignore` walker, with the
//! rules an agent expects.
//!
//! * `.gitignore` (also outside a git repository), `.ignore` and
//!   `.git/info/exclude` are obeyed; the user's global git excludes are
//!   not (they are outside the grant);
//! * hidden files and directories are skipped, and `.git` always;
//! * no symlink is followed, and only regular files are handed out: a FIFO
//!   would block whoever opens it, a device or socket is no file to search;
//! * secret stores (`.ssh`, `.aws`, …) are not entered and files that
//!   usually hold secrets (`.env`, `*.pem`, `id_rsa`, …) are neither listed
//!   nor searched: the list is the secrets guard's (`names.rs`, shared), so
//!   a search of the whole tree never returns what the guard would refuse
//!   to read. A file named explicitly is for the guard to judge.

use std::path::{Path, PathBuf};

use ignore::{WalkBuilder, overrides::Override, types::Types};
use toolgate_sdk::{Call, ToolError};

/// The secrets guard's list of secret names (one list for both).
#[path = "../../secrets-guard/src/names.rs"]
#[allow(dead_code)] // the guard uses all of it, the walks a part
mod secret_names;

/// Entries one walk visits at most (files and directories), so a huge
/// tree cannot hold a call until its deadline for nothing.
pub const MAX_VISITED: usize = 200_000;

/// How a walk is filtered besides the standard rules.
#[derive(Default)]
pub struct Filters {
    /// ripgrep `--glob` overrides.
    pub overrides: Option<Override>,
    /// ripgrep `--type` selection.
    pub types: Option<Types>,
}

/// A regular file the walk found, relative to the granted directory.
pub struct Found {
    pub path: PathBuf,
    pub modified: Option<std::time::SystemTime>,
}

/// Walk `root` (a directory under `.`), calling `visit` on each regular
/// file (sorted by name, directory by directory) until it returns false.
/// Returns whether the walk stopped early at [`MAX_VISITED`].
pub fn walk(
    root: &Path,
    filters: Filters,
    want_mtime: bool,
    call: &Call,
    mut visit: impl FnMut(Found) -> bool,
) -> Result<bool, ToolError> {
    let mut builder = WalkBuilder::new(root);
    builder
        .hidden(true)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .ignore(true)
        .parents(true)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|e| {
            let name = e.file_name().to_string_lossy();
            let dir = e.file_type().is_some_and(|t| t.is_dir());
            name != ".git"
                && if dir {
                    secret_names::secret_dir_name(&name).is_none()
                } else {
                    secret_names::secret_file_name(&name).is_none()
                }
        });
    if let Some(o) = filters.overrides {
        builder.overrides(o);
    }
    if let Some(t) = filters.types {
        builder.types(t);
    }
    let mut visited = 0usize;
    for entry in builder.build() {
        visited += 1;
        if visited > MAX_VISITED {
            return Ok(true);
        }
        if visited.is_multiple_of(1024) && call.is_cancelled() {
            return Err(ToolError::new("CANCELLED", "the call was cancelled"));
        }
        let Ok(entry) = entry else { continue };
        let Some(ft) = entry.file_type() else {
            continue;
        };
        if !ft.is_file() {
            continue;
        }
        let modified = if want_mtime {
            entry.metadata().ok().and_then(|m| m.modified().ok())
        } else {
            None
        };
        if !visit(Found {
            path: entry.into_path(),
            modified,
        }) {
            break;
        }
    }
    Ok(false)
}
