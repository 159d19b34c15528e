//! `glob`: files whose path matches a pattern, newest first.

use globset::GlobBuilder;
use serde::{Deserialize, Serialize};
use toolgate_sdk::{Annotations, Call, Content, ContentBlock, Schema, Tool, ToolError};

use crate::paths::{display, metadata, relative};
use crate::walk::{Filters, MAX_VISITED, walk};

/// Paths returned at most; the rest are counted.
pub const MAX_RESULTS: usize = 100;

/// Find files by name pattern. `*` matches within one directory level,
/// `**` any number of levels, `?` one character, `{a,b}` alternatives,
/// `[ab]` a class: `**/*.rs`, `src/**/test_*.py`, `*.{json,toml}`. The
/// pattern is matched against paths relative to `path` (default: the
/// working directory). Files ignored by `.gitignore` and hidden files are
/// left out. Returns at most 100 paths, most recently modified first.
#[derive(Deserialize, Schema)]
pub struct Glob {
    /// The glob pattern, e.g. `**/*.rs`.
    pattern: String,
    /// Directory to search in, relative to the working directory. Default: `.`.
    path: Option<String>,
}

/// The files that matched.
#[derive(Serialize, Deserialize, Schema)]
pub struct Matches {
    /// Paths relative to the working directory, newest first.
    paths: Vec<String>,
    /// How many files matched in all.
    total: u64,
    /// More files matched than are listed.
    truncated: bool,
    /// The walk stopped at its limit of visited entries.
    walk_cut: bool,
}

impl Tool for Glob {
    const NAME: &'static str = "glob";
    type Output = Matches;

    fn execute(self, call: &Call) -> Result<Matches, ToolError> {
        let root = relative(self.path.as_deref().unwrap_or("."))?;
        let shown = display(&root);
        if !metadata(&root, &shown)?.is_dir() {
            return Err(ToolError::invalid_input(format!(
                "`{shown}` is not a directory; glob searches a directory (give it as `path`)"
            )));
        }
        let pattern = self.pattern.trim_start_matches("./");
        if pattern.starts_with('/') || pattern.split('/').any(|s| s == "..") {
            return Err(ToolError::invalid_input(format!(
                "the pattern `{}` must be relative and stay inside `{shown}` (no leading `/`, no `..`)",
                self.pattern
            )));
        }
        let glob = GlobBuilder::new(pattern)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| {
                ToolError::invalid_input(format!(
                    "the pattern `{}` is not a glob: {e}",
                    self.pattern
                ))
            })?
            .compile_matcher();
        let mut found = Vec::new();
        let walk_cut = walk(&root, Filters::default(), true, call, |f| {
            if let Ok(rel) = f.path.strip_prefix(&root)
                && glob.is_match(rel)
            {
                found.push((f.modified, display(&f.path)));
            }
            true
        })?;
        // Newest first; equal times by path, for a stable answer.
        found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let total = found.len() as u64;
        let truncated = found.len() > MAX_RESULTS;
        found.truncate(MAX_RESULTS);
        Ok(Matches {
            paths: found.into_iter().map(|(_, p)| p).collect(),
            total,
            truncated,
            walk_cut,
        })
    }

    fn render(v: Matches) -> Vec<ContentBlock> {
        if v.paths.is_empty() {
            return vec![Content::text("no files match")];
        }
        let mut s = v.paths.join("\n");
        if v.truncated {
            s.push_str(&format!(
                "\n… ({} of {} matches shown, newest first; narrow the pattern or the path)",
                v.paths.len(),
                v.total
            ));
        }
        if v.walk_cut {
            s.push_str(&format!(
                "\n… (the walk stopped after {MAX_VISITED} entries; give a narrower path)"
            ));
        }
        vec![Content::text(s)]
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(Matches::schema())
    }

    fn annotations() -> Annotations {
        Annotations::READ_ONLY | Annotations::IDEMPOTENT
    }

    fn is_concurrency_safe(&self) -> bool {
        true
    }
}
