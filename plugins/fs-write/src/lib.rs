//! The file tools that change files: `write` (create or replace) and
//! `edit` (exact string replacement).
//!
//! They live apart from the read-only `fs-tools` so that the operator can
//! grant reading without writing. They read through a read-only preopen
//! and write through the host's `files` seam, which writes inside the
//! read-write grants but never into the paths the host protects (its
//! configuration, plugins, compile cache, `.git`) — a read-write preopen
//! could not leave those out. The built-in default grant: the working
//! directory, read-only as `.`, and read-write with `spawn_only = true`.
//! Paths are relative to it; absolute paths and `..` are refused. Only
//! regular files are opened or replaced (a FIFO would block the opener).
//! `edit` changes exactly the bytes of the replaced text: line endings,
//! encoding of the rest and a missing final newline are kept.
//!
//! With the setting `LSP_DIAGNOSTICS = "true"` (`[plugins.fs-write] vars`),
//! each write and edit ends by asking the language server of the file's
//! kind (the host's `lsp` seam, `[lsp]`) for the file's diagnostics, and
//! the result lists them: the model sees the error it just made without
//! another call. No server for the file: nothing is added.

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};
use toolgate_sdk::{
    Annotations, Call, CallView, Content, ContentBlock, Schema, Tool, ToolError, files,
};

/// The path rules of the file tools (one copy for both plugins).
#[path = "../../fs-tools/src/paths.rs"]
#[allow(dead_code)] // fs-tools uses all of it, this plugin a part
mod paths;

use paths::{display, not_found, relative};

/// Largest file `write` writes or `edit` edits.
pub const MAX_FILE_BYTES: usize = 16 * 1024 * 1024;
/// Bytes of diff an approval card shows.
pub const MAX_DIFF_BYTES: usize = 16 * 1024;
/// Lines of the edited file shown around the first change.
const SNIPPET_LINES: usize = 4;
/// Diagnostics listed after a write or edit, at most.
pub const MAX_DIAGNOSTICS: usize = 20;
/// How long a write or edit waits for the server's diagnostics
/// (`LSP_DIAGNOSTICS_WAIT_MS`, default).
pub const DIAGNOSTICS_WAIT_MS: &str = "5000";

/// The file's diagnostics now, when the operator asked for them
/// (`LSP_DIAGNOSTICS = "true"`) and a language server serves the file.
fn diagnostics_after(shown: &str, text: &str) -> Option<Vec<String>> {
    if toolgate_sdk::setting("LSP_DIAGNOSTICS", "false") != "true" {
        return None;
    }
    let wait = toolgate_sdk::setting("LSP_DIAGNOSTICS_WAIT_MS", DIAGNOSTICS_WAIT_MS)
        .parse()
        .unwrap_or(5000);
    use toolgate_sdk::lsp::{self, LspError};
    match lsp::diagnostics(shown, wait) {
        Ok(found) => {
            let all = found.as_array().cloned().unwrap_or_default();
            let mut lines: Vec<String> = all
                .iter()
                .take(MAX_DIAGNOSTICS)
                .map(|d| {
                    let at = d["range"]["start"]["line"].as_u64().unwrap_or(0) as usize;
                    lsp::diagnostic_line(shown, d, text.lines().nth(at))
                })
                .collect();
            if all.len() > MAX_DIAGNOSTICS {
                lines.push(format!("… and {} more", all.len() - MAX_DIAGNOSTICS));
            }
            Some(lines)
        }
        Err(LspError::NotConfigured(_)) => None,
        Err(e) => Some(vec![format!("(no diagnostics: {})", lsp::message(&e))]),
    }
}

/// `text` followed by the diagnostics, if any were asked for.
fn with_diagnostics(mut text: String, diagnostics: &Option<Vec<String>>) -> String {
    match diagnostics {
        Some(d) if d.is_empty() => {
            text.push_str("\nThe language server reports no problems in it.")
        }
        Some(d) => {
            text.push_str("\nThe language server reports now:\n");
            text.push_str(&d.join("\n"));
        }
        None => {}
    }
    text
}

/// What is at `path` now: nothing, or a regular file (anything else is an
/// error that says what it is).
fn existing(path: &Path, shown: &str, tool: &str) -> Result<Option<fs::Metadata>, ToolError> {
    match fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(Some(m)),
        Ok(m) if m.is_dir() => Err(ToolError::invalid_input(format!(
            "`{shown}` is a directory; {tool} works on files"
        ))),
        Ok(_) => Err(ToolError::invalid_input(format!(
            "`{shown}` is not a regular file (a FIFO, socket or device); {tool} touches regular files only"
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ToolError::from(e).with_details(serde_json::json!({"path": shown}))),
    }
}

/// The host refused a write (outside the grant, a protected path, not a
/// regular file).
fn refused(why: String) -> ToolError {
    ToolError::permission_denied(why)
}

fn too_large(shown: &str, bytes: usize) -> ToolError {
    ToolError::new(
        "TOO_LARGE",
        format!(
            "`{shown}` would be {bytes} bytes; the file tools write at most {MAX_FILE_BYTES} bytes (16 MiB)"
        ),
    )
}

/// A unified diff of `old` → `new`, cut to [`MAX_DIFF_BYTES`].
fn diff(shown: &str, old: &str, new: &str) -> String {
    let text = similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{shown}"), &format!("b/{shown}"))
        .to_string();
    if text.len() > MAX_DIFF_BYTES {
        let mut end = MAX_DIFF_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}\n… (diff cut at {MAX_DIFF_BYTES} bytes)\n", &text[..end])
    } else {
        text
    }
}

/// Create a file, or replace the whole content of one, with `content`.
/// Parent directories are created. Prefer `edit` to change part of an
/// existing file. The path is relative to the working directory.
#[derive(Deserialize, Schema)]
pub struct Write {
    /// The file, relative to the working directory.
    path: String,
    /// The complete new content.
    content: String,
}

/// What `write` did.
#[derive(Serialize, Deserialize, Schema)]
pub struct Written {
    /// The file, relative to the working directory.
    path: String,
    /// Bytes written.
    bytes: u64,
    /// The file did not exist before.
    created: bool,
    /// The language server's diagnostics of the file now (with
    /// `LSP_DIAGNOSTICS = "true"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    diagnostics: Option<Vec<String>>,
}

impl Tool for Write {
    const NAME: &'static str = "write";
    type Output = Written;

    fn execute(self, _call: &Call) -> Result<Written, ToolError> {
        let path = relative(&self.path)?;
        let shown = display(&path);
        if shown == "." || self.path.ends_with('/') {
            return Err(ToolError::invalid_input(format!(
                "`{}` names a directory; give the path of a file",
                self.path
            )));
        }
        if self.content.len() > MAX_FILE_BYTES {
            return Err(too_large(&shown, self.content.len()));
        }
        let created = existing(&path, &shown, "write")?.is_none();
        files::write(&shown, self.content.as_bytes()).map_err(refused)?;
        let diagnostics = diagnostics_after(&shown, &self.content);
        Ok(Written {
            path: shown,
            bytes: self.content.len() as u64,
            created,
            diagnostics,
        })
    }

    fn render(v: Written) -> Vec<ContentBlock> {
        vec![Content::text(with_diagnostics(
            format!(
                "{} `{}` ({} bytes written)",
                if v.created { "Created" } else { "Replaced" },
                v.path,
                v.bytes
            ),
            &v.diagnostics,
        ))]
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(Written::schema())
    }

    fn annotations() -> Annotations {
        Annotations::DESTRUCTIVE | Annotations::IDEMPOTENT
    }

    fn present_call(&self) -> Option<CallView> {
        let path = relative(&self.path).ok()?;
        let shown = display(&path);
        let old = fs::metadata(&path)
            .ok()
            .filter(|m| m.is_file() && m.len() as usize <= MAX_FILE_BYTES)
            .and_then(|_| fs::read_to_string(&path).ok());
        Some(CallView {
            title: format!(
                "{} {shown} ({} bytes)",
                if old.is_some() { "Replace" } else { "Create" },
                self.content.len()
            ),
            detail: Some(diff(&shown, old.as_deref().unwrap_or(""), &self.content)),
        })
    }
}

/// Replace text in a file: `old_string` must occur exactly once (give
/// enough surrounding lines to make it unique) unless `replace_all` is
/// true, and must differ from `new_string`. The match is exact, whitespace
/// and indentation included; everything else in the file is kept byte for
/// byte. To create a file use `write`.
#[derive(Deserialize, Schema)]
pub struct Edit {
    /// The file, relative to the working directory.
    path: String,
    /// The exact text to replace.
    old_string: String,
    /// The text to put in its place.
    new_string: String,
    /// Replace every occurrence instead of requiring exactly one. Default: false.
    replace_all: Option<bool>,
}

/// What `edit` did.
#[derive(Serialize, Deserialize, Schema)]
pub struct Edited {
    /// The file, relative to the working directory.
    path: String,
    /// How many occurrences were replaced.
    replacements: u64,
    /// Line numbers (1-based, in the file before the edit) of the replaced occurrences.
    lines: Vec<u64>,
    /// The edited region, numbered (`cat -n` style).
    snippet: String,
    /// The language server's diagnostics of the file now (with
    /// `LSP_DIAGNOSTICS = "true"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    diagnostics: Option<Vec<String>>,
}

/// The 1-based line number of byte `at`.
fn line_of(text: &str, at: usize) -> u64 {
    text.as_bytes()[..at]
        .iter()
        .filter(|&&b| b == b'\n')
        .count() as u64
        + 1
}

/// `text`'s lines `from..=to` (1-based), numbered.
fn numbered(text: &str, from: u64, to: u64) -> String {
    text.split('\n')
        .enumerate()
        .map(|(i, l)| (i as u64 + 1, l))
        .filter(|(n, _)| *n >= from && *n <= to)
        .map(|(n, l)| format!("{n:>6}\t{}\n", l.trim_end_matches('\r')))
        .collect()
}

/// The plan of an edit: the new text and where the replacements were.
struct Plan {
    old: String,
    new: String,
    at: Vec<usize>,
    replacement: String,
}

impl Edit {
    fn plan(&self) -> Result<(String, Plan), ToolError> {
        let path = relative(&self.path)?;
        let shown = display(&path);
        if self.old_string.is_empty() {
            return Err(ToolError::invalid_input(
                "`old_string` is empty; give the exact text to replace (to create a file, use write)",
            ));
        }
        if self.old_string == self.new_string {
            return Err(ToolError::invalid_input(
                "`old_string` and `new_string` are the same; there is nothing to change",
            ));
        }
        let Some(meta) = existing(&path, &shown, "edit")? else {
            return Err(not_found(&path, &shown));
        };
        if meta.len() as usize > MAX_FILE_BYTES {
            return Err(too_large(&shown, meta.len() as usize));
        }
        let bytes = fs::read(&path)?;
        let old = String::from_utf8(bytes).map_err(|_| {
            ToolError::new(
                "BINARY_FILE",
                format!("`{shown}` is not UTF-8 text; edit changes text files only"),
            )
        })?;
        // The file's line endings win: a `\n` in the strings stands for the
        // file's `\r\n` when the file uses them and the strings do not.
        let crlf = old.contains("\r\n") && !self.old_string.contains("\r\n");
        let (needle, replacement) = if crlf && !old.contains(&self.old_string) {
            (
                self.old_string.replace('\n', "\r\n"),
                self.new_string.replace('\n', "\r\n"),
            )
        } else {
            (self.old_string.clone(), self.new_string.clone())
        };
        let at: Vec<usize> = old.match_indices(&needle).map(|(i, _)| i).collect();
        if at.is_empty() {
            return Err(missing(&shown, &old, &self.old_string));
        }
        if at.len() > 1 && !self.replace_all.unwrap_or(false) {
            let lines: Vec<u64> = at.iter().map(|&i| line_of(&old, i)).collect();
            return Err(ToolError::new(
                "NOT_UNIQUE",
                format!(
                    "`old_string` occurs {} times in `{shown}` (at lines {}); include more surrounding lines in `old_string` to pick one, or set `replace_all: true` to replace every occurrence",
                    at.len(),
                    lines.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
                ),
            )
            .with_details(serde_json::json!({"count": at.len(), "lines": lines})));
        }
        let new = old.replace(&needle, &replacement);
        if new.len() > MAX_FILE_BYTES {
            return Err(too_large(&shown, new.len()));
        }
        Ok((
            shown,
            Plan {
                old,
                new,
                at,
                replacement,
            },
        ))
    }
}

/// `old_string` is not in the file: say so, and what is nearly it.
fn missing(shown: &str, text: &str, wanted: &str) -> ToolError {
    let mut hint = String::new();
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let first = wanted.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    if let Some(n) = text
        .lines()
        .position(|l| !first.trim().is_empty() && l.trim() == first.trim())
    {
        hint = format!(
            " Its first line appears (trimmed) at line {} — check indentation, tabs versus spaces and the lines after it; read the file to copy the text exactly.",
            n + 1
        );
    } else if squash(text).contains(&squash(wanted)) {
        hint = " The same words appear with different whitespace or line breaks; read the file and copy the text exactly.".into();
    } else if text.to_lowercase().contains(&wanted.to_lowercase()) {
        hint = " It appears with different upper/lower case.".into();
    }
    ToolError::new(
        "NO_MATCH",
        format!(
            "`old_string` was not found in `{shown}` (the match is exact, whitespace included).{hint}"
        ),
    )
}

impl Tool for Edit {
    const NAME: &'static str = "edit";
    type Output = Edited;

    fn execute(self, _call: &Call) -> Result<Edited, ToolError> {
        let (shown, plan) = self.plan()?;
        files::write(&shown, plan.new.as_bytes()).map_err(refused)?;
        let lines: Vec<u64> = plan.at.iter().map(|&i| line_of(&plan.old, i)).collect();
        // The region of the first replacement, in the new text.
        let start = plan.at[0];
        let first = line_of(&plan.new, start);
        let last = line_of(&plan.new, start + plan.replacement.len());
        let snippet = numbered(
            &plan.new,
            first.saturating_sub(SNIPPET_LINES as u64).max(1),
            last + SNIPPET_LINES as u64,
        );
        let diagnostics = diagnostics_after(&shown, &plan.new);
        Ok(Edited {
            path: shown,
            replacements: plan.at.len() as u64,
            lines,
            snippet,
            diagnostics,
        })
    }

    fn render(v: Edited) -> Vec<ContentBlock> {
        let diagnostics = v.diagnostics.clone();
        vec![Content::text(with_diagnostics(
            format!(
                "Edited `{}`: {} replacement{} (line{} {}). The region now reads:\n{}",
                v.path,
                v.replacements,
                if v.replacements == 1 { "" } else { "s" },
                if v.lines.len() == 1 { "" } else { "s" },
                v.lines
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                v.snippet
            ),
            &diagnostics,
        ))]
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(Edited::schema())
    }

    fn annotations() -> Annotations {
        Annotations::DESTRUCTIVE
    }

    fn present_call(&self) -> Option<CallView> {
        let (shown, plan) = match self.plan() {
            Ok(p) => p,
            Err(e) => {
                return Some(CallView {
                    title: format!("Edit {} (will fail)", self.path),
                    detail: Some(e.message().to_string()),
                });
            }
        };
        Some(CallView {
            title: format!(
                "Edit {shown} ({} replacement{})",
                plan.at.len(),
                if plan.at.len() == 1 { "" } else { "s" }
            ),
            detail: Some(diff(&shown, &plan.old, &plan.new)),
        })
    }
}

toolgate_sdk::export! { tools: [Write, Edit] }
