//! Read-only file tools over the working directory: `read_file`,
//! `list_dir`, `find_files`, `grep`.
//!
//! The component sees only what the operator granted (by default the
//! working directory, read-only, as `.`); paths are relative to it. Paths
//! that are absolute or climb out with `..` are refused with a clear error
//! before any file system call — WASI would refuse them anyway, less
//! helpfully.
//!
//! Only regular files are ever opened. Opening a FIFO blocks until someone
//! writes to it — a thread of the host stuck for good — and a device or a
//! socket is no text to read: `read_file` and `grep` check what a path is
//! before they open it and say what they found instead; the walks of
//! `grep` and `find_files` visit regular files only and do not follow
//! symlinks. The walks also skip files and directories that usually hold
//! secrets (the secrets guard's list, shared with it): a search of the
//! whole tree does not return the contents of `.env`.

use std::fs;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use toolgate_sdk::{Annotations, Call, Content, ContentBlock, Schema, Tool, ToolError};

/// The secrets guard's list of secret names (one list for both).
#[path = "../../secrets-guard/src/names.rs"]
#[allow(dead_code)] // the guard uses all of it, the walks a part
mod secret_names;

/// Largest amount of text `read_file` returns in one call.
const MAX_READ_BYTES: usize = 256 * 1024;

fn relative(path: &str) -> Result<PathBuf, ToolError> {
    let p = Path::new(path);
    if p.is_absolute() {
        return Err(ToolError::invalid_input(format!(
            "`{path}` is absolute; use a path relative to the working directory"
        )));
    }
    let mut out = PathBuf::from(".");
    for c in p.components() {
        match c {
            Component::Normal(s) => out.push(s),
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(ToolError::permission_denied(format!(
                    "`{path}` leaves the working directory (`..`); only paths inside it are readable"
                )));
            }
            Component::RootDir | Component::Prefix(_) => unreachable!("not absolute"),
        }
    }
    Ok(out)
}

fn display(path: &Path) -> String {
    let s = path.to_string_lossy();
    s.strip_prefix("./").unwrap_or(&s).to_string()
}

/// What kind of file this is, in words (for errors and listings).
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

/// Checks (following symlinks, within the grant) that `path` is a regular
/// file, before anything opens it.
fn regular_file(path: &Path, shown: &str, tool: &str) -> Result<(), ToolError> {
    let meta = fs::metadata(path)
        .map_err(|e| ToolError::from(e).with_details(serde_json::json!({"path": shown})))?;
    if meta.is_file() {
        return Ok(());
    }
    Err(ToolError::invalid_input(if meta.is_dir() {
        format!(
            "`{shown}` is a directory; {tool} reads regular files (use list_dir or grep on a directory)"
        )
    } else {
        format!(
            "`{shown}` is not a regular file (a FIFO, socket or device); {tool} reads regular \
             files only, since opening anything else can block or never end"
        )
    }))
}

/// Read a UTF-8 text file under the working directory, optionally a range of
/// lines. Lines are numbered from 1.
#[derive(Deserialize, Schema)]
pub struct ReadFile {
    /// Path relative to the working directory.
    path: String,
    /// First line to return (1-based). Default: 1.
    offset: Option<u64>,
    /// Most lines to return. Default: 2000.
    limit: Option<u64>,
}

/// A range of lines of a file.
#[derive(Serialize, Deserialize, Schema)]
pub struct FileText {
    /// The file, relative to the working directory.
    path: String,
    /// The first line returned (1-based).
    first_line: u64,
    /// How many lines are returned.
    lines: u64,
    /// How many lines the file has.
    total_lines: u64,
    /// The text.
    text: String,
    /// The range was cut short (limit or size).
    truncated: bool,
}

impl Tool for ReadFile {
    const NAME: &'static str = "read_file";
    type Output = FileText;

    fn execute(self, _call: &Call) -> Result<FileText, ToolError> {
        let path = relative(&self.path)?;
        regular_file(&path, &self.path, "read_file")?;
        let bytes = fs::read(&path)
            .map_err(|e| ToolError::from(e).with_details(serde_json::json!({"path": self.path})))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| ToolError::invalid_input(format!("`{}` is not UTF-8 text", self.path)))?;
        let first = self.offset.unwrap_or(1).max(1);
        let limit = self.limit.unwrap_or(2000).max(1);
        let total = text.lines().count() as u64;
        let mut out = String::new();
        let mut lines = 0;
        let mut truncated = false;
        for line in text.lines().skip((first - 1) as usize) {
            if lines == limit || out.len() + line.len() > MAX_READ_BYTES {
                truncated = true;
                break;
            }
            out.push_str(line);
            out.push('\n');
            lines += 1;
        }
        Ok(FileText {
            path: display(&path),
            first_line: first,
            lines,
            total_lines: total,
            text: out,
            truncated,
        })
    }

    fn render(v: FileText) -> Vec<ContentBlock> {
        let mut s = v.text;
        if v.truncated {
            s.push_str(&format!(
                "… ({} of {} lines shown from line {}; use offset/limit for more)\n",
                v.lines, v.total_lines, v.first_line
            ));
        }
        vec![Content::text(s)]
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(FileText::schema())
    }

    fn annotations() -> Annotations {
        Annotations::READ_ONLY | Annotations::IDEMPOTENT
    }

    fn is_concurrency_safe(&self) -> bool {
        true
    }
}

/// List a directory under the working directory.
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

impl Tool for ListDir {
    const NAME: &'static str = "list_dir";
    type Output = Listing;

    fn execute(self, _call: &Call) -> Result<Listing, ToolError> {
        let path = relative(self.path.as_deref().unwrap_or("."))?;
        let max = self.max_entries.unwrap_or(500) as usize;
        let mut entries = Vec::new();
        let mut truncated = false;
        let mut read: Vec<_> = fs::read_dir(&path)?.filter_map(Result::ok).collect();
        read.sort_by_key(|e| e.file_name());
        for e in read {
            if entries.len() == max {
                truncated = true;
                break;
            }
            let meta = e.metadata().ok();
            let kind = e.file_type().map(kind_of).unwrap_or("other");
            entries.push(Entry {
                name: e.file_name().to_string_lossy().into_owned(),
                kind: kind.into(),
                size: meta.filter(|m| m.is_file()).map(|m| m.len()),
            });
        }
        Ok(Listing {
            path: display(&path),
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

    fn annotations() -> Annotations {
        Annotations::READ_ONLY | Annotations::IDEMPOTENT
    }

    fn is_concurrency_safe(&self) -> bool {
        true
    }
}

/// Find files whose path matches a glob pattern (`*`, `?`, `**` for any
/// number of directories), under the working directory. Regular files only;
/// symlinks are not followed, and `.git`, `target` and secret stores
/// (`.ssh`, `.aws`, …) are not entered.
#[derive(Deserialize, Schema)]
pub struct FindFiles {
    /// The pattern, e.g. `src/**/*.rs`.
    pattern: String,
    /// Most paths to return. Default: 500.
    max_results: Option<u32>,
}

impl Tool for FindFiles {
    const NAME: &'static str = "find_files";
    type Output = Vec<String>;

    fn execute(self, call: &Call) -> Result<Vec<String>, ToolError> {
        let max = self.max_results.unwrap_or(500) as usize;
        let pattern: Vec<&str> = self
            .pattern
            .split('/')
            .filter(|s| !s.is_empty() && *s != ".")
            .collect();
        if pattern.contains(&"..") || self.pattern.starts_with('/') {
            return Err(ToolError::invalid_input(
                "the pattern must stay inside the working directory",
            ));
        }
        let mut found = Vec::new();
        walk(Path::new("."), &mut |rel, is_dir| {
            if !is_dir && glob_match_path(&pattern, rel) {
                found.push(rel.join("/"));
            }
            found.len() < max && !call.is_cancelled()
        })?;
        found.sort();
        Ok(found)
    }

    fn render(v: Vec<String>) -> Vec<ContentBlock> {
        if v.is_empty() {
            return vec![Content::text("no files match")];
        }
        vec![Content::text(v.join("\n"))]
    }

    fn annotations() -> Annotations {
        Annotations::READ_ONLY | Annotations::IDEMPOTENT
    }

    fn is_concurrency_safe(&self) -> bool {
        true
    }
}

/// Search text files under a directory for lines containing a string.
/// Regular files only: symlinks are not followed, and files that usually
/// hold secrets (`.env`, keys, credential stores) are skipped.
#[derive(Deserialize, Schema)]
pub struct Grep {
    /// The text to look for (not a regular expression).
    pattern: String,
    /// Directory or file to search, relative to the working directory. Default: `.`.
    path: Option<String>,
    /// Match regardless of case.
    ignore_case: Option<bool>,
    /// Most matching lines to return. Default: 200.
    max_matches: Option<u32>,
}

/// A matching line.
#[derive(Serialize, Deserialize, Schema)]
pub struct Match {
    path: String,
    line: u64,
    text: String,
}

impl Tool for Grep {
    const NAME: &'static str = "grep";
    type Output = Vec<Match>;

    fn execute(self, call: &Call) -> Result<Vec<Match>, ToolError> {
        if self.pattern.is_empty() {
            return Err(ToolError::invalid_input("the pattern is empty"));
        }
        let root = relative(self.path.as_deref().unwrap_or("."))?;
        let ignore_case = self.ignore_case.unwrap_or(false);
        let needle = if ignore_case {
            self.pattern.to_lowercase()
        } else {
            self.pattern.clone()
        };
        let max = self.max_matches.unwrap_or(200) as usize;
        let mut matches = Vec::new();
        let mut search = |file: &Path, shown: String| -> bool {
            let Ok(text) = fs::read_to_string(file) else {
                return true;
            };
            for (i, line) in text.lines().enumerate() {
                let hay = if ignore_case {
                    line.to_lowercase()
                } else {
                    line.to_string()
                };
                if hay.contains(&needle) {
                    matches.push(Match {
                        path: shown.clone(),
                        line: i as u64 + 1,
                        text: line.chars().take(300).collect(),
                    });
                    if matches.len() == max {
                        return false;
                    }
                }
            }
            !call.is_cancelled()
        };
        let shown_root = self.path.as_deref().unwrap_or(".");
        let root_is_dir = fs::metadata(&root)
            .map_err(|e| ToolError::from(e).with_details(serde_json::json!({"path": shown_root})))?
            .is_dir();
        if !root_is_dir {
            // One file, named by the caller (the guard judges that name).
            regular_file(&root, shown_root, "grep")?;
            search(&root, display(&root));
        } else {
            walk(&root, &mut |rel, is_dir| {
                // Secret files are skipped in a walk; naming one explicitly
                // is for the secrets guard to judge.
                let name = rel.last().map(String::as_str).unwrap_or("");
                if is_dir || secret_names::secret_file_name(name).is_some() {
                    return true;
                }
                let mut p = root.clone();
                p.extend(rel);
                let shown = display(&p);
                search(&p, shown)
            })?;
        }
        Ok(matches)
    }

    fn render(v: Vec<Match>) -> Vec<ContentBlock> {
        if v.is_empty() {
            return vec![Content::text("no matches")];
        }
        vec![Content::text(
            v.iter()
                .map(|m| format!("{}:{}: {}", m.path, m.line, m.text))
                .collect::<Vec<_>>()
                .join("\n"),
        )]
    }

    fn annotations() -> Annotations {
        Annotations::READ_ONLY | Annotations::IDEMPOTENT
    }

    fn is_concurrency_safe(&self) -> bool {
        true
    }
}

/// Walk `root` depth-first, calling `visit(relative components, is_dir)`
/// until it returns false. Visits directories and regular files only: no
/// symlink is followed, no FIFO, socket or device is handed out (a FIFO
/// would block whoever opens it). `.git`, `target` and secret stores are
/// not entered.
fn walk(root: &Path, visit: &mut dyn FnMut(&[String], bool) -> bool) -> Result<(), ToolError> {
    let mut stack: Vec<Vec<String>> = vec![Vec::new()];
    while let Some(rel) = stack.pop() {
        let mut dir = root.to_path_buf();
        dir.extend(&rel);
        let Ok(read) = fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = read.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| std::cmp::Reverse(e.file_name()));
        for e in entries {
            let name = e.file_name().to_string_lossy().into_owned();
            if name == ".git" || name == "target" {
                continue;
            }
            let Ok(ft) = e.file_type() else { continue };
            if !(ft.is_file() || ft.is_dir()) {
                continue;
            }
            if ft.is_dir() && secret_names::secret_dir_name(&name).is_some() {
                continue;
            }
            let mut child = rel.clone();
            child.push(name);
            if !visit(&child, ft.is_dir()) {
                return Ok(());
            }
            if ft.is_dir() {
                stack.push(child);
            }
        }
    }
    Ok(())
}

/// Match path components against pattern segments (`**` spans any number).
fn glob_match_path(pattern: &[&str], path: &[String]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((&"**", rest)) => (0..=path.len()).any(|i| glob_match_path(rest, &path[i..])),
        Some((seg, rest)) => {
            !path.is_empty()
                && glob_match(seg.as_bytes(), path[0].as_bytes())
                && glob_match_path(rest, &path[1..])
        }
    }
}

/// `*` and `?` within one component.
fn glob_match(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si, mut star, mut mark) = (0, 0, None, 0);
    while si < s.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            mark = si;
            pi += 1;
        } else if let Some(st) = star {
            pi = st + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

toolgate_sdk::export! { tools: [ReadFile, ListDir, FindFiles, Grep] }
