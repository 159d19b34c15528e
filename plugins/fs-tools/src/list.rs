//! `list_dir`: one directory's entries (no walk, nothing opened).

use std::fs;

use serde::{Deserialize, Serialize};
use toolgate_sdk::{Annotations, Call, Content, ContentBlock, Schema, Tool, ToolError};

use crate::paths::{display, metadata, relative};

/// Entries returned when the call gives no `max_entries`.
pub const DEFAULT_MAX_ENTRIES: u32 = 500;

/// List one directory (names, kinds, sizes), hidden entries included.
/// Paths are relative to the working directory.
#[derive(Deserialize, Schema)]
pub struct ListDir {
    /// Directory relative to the working directory. Default: `.`.
    path: Option<String>,
    /// Most entries to return. Default: 500.
    max_entries: Option<u32>,
}

/// One directory entry.
#[derive(Serialize, Deserialize, Schema)]
pub struct Entry {
    /// The entry's name.
    name: String,
    /// `file`, `dir`, `symlink`, or `other` (a FIFO, socket or device).
    kind: String,
    /// Size in bytes (files).
    size: Option<u64>,
}

/// A directory listing.
#[derive(Serialize, Deserialize, Schema)]
pub struct Listing {
    path: String,
    entries: Vec<Entry>,
    truncated: bool,
}

fn kind_of(t: fs::FileType) -> &'static str {
    if t.is_file() {
        "file"
    } else if t.is_dir() {
        "dir"
    } else if t.is_symlink() {
        "symlink"
    } else {
        "other"
    }
}

impl Tool for ListDir {
    const NAME: &'static str = "list_dir";
    type Output = Listing;

    fn execute(self, _call: &Call) -> Result<Listing, ToolError> {
        let path = relative(self.path.as_deref().unwrap_or("."))?;
        let shown = display(&path);
        if !metadata(&path, &shown)?.is_dir() {
            return Err(ToolError::invalid_input(format!(
                "`{shown}` is not a directory; use read for a file"
            )));
        }
        let max = self.max_entries.unwrap_or(DEFAULT_MAX_ENTRIES) as usize;
        let mut read: Vec<_> = fs::read_dir(&path)?.filter_map(Result::ok).collect();
        read.sort_by_key(|e| e.file_name());
        let truncated = read.len() > max;
        let entries = read
            .into_iter()
            .take(max)
            .map(|e| {
                let kind = e.file_type().map(kind_of).unwrap_or("other");
                Entry {
                    name: e.file_name().to_string_lossy().into_owned(),
                    kind: kind.into(),
                    // The entry's own metadata (a symlink is not followed).
                    size: (kind == "file")
                        .then(|| e.metadata().ok().map(|m| m.len()))
                        .flatten(),
                }
            })
            .collect();
        Ok(Listing {
            path: shown,
            entries,
            truncated,
        })
    }

    fn render(v: Listing) -> Vec<ContentBlock> {
        let mut s = String::new();
        for e in &v.entries {
            match (e.kind.as_str(), e.size) {
                ("dir", _) => s.push_str(&format!("{}/\n", e.name)),
                ("symlink", _) => s.push_str(&format!("{}@\n", e.name)),
                ("other", _) => s.push_str(&format!("{}  (not a regular file)\n", e.name)),
                (_, Some(size)) => s.push_str(&format!("{}  ({size} bytes)\n", e.name)),
                _ => s.push_str(&format!("{}\n", e.name)),
            }
        }
        if v.entries.is_empty() {
            s.push_str("(empty directory)\n");
        }
        if v.truncated {
            s.push_str("… (more entries; raise max_entries)\n");
        }
        vec![Content::text(s)]
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(Listing::schema())
    }

    fn annotations() -> Annotations {
        Annotations::READ_ONLY | Annotations::IDEMPOTENT
    }

    fn is_concurrency_safe(&self) -> bool {
        true
    }
}
