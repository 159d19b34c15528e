//! Guest paths: relative to the granted directory, never out of it, and
//! only regular files opened.

use std::fs;
use std::path::{Component, Path, PathBuf};

use toolgate_sdk::ToolError;

/// `path` as a path under the working directory (`./…`), or why not:
/// absolute paths and `..` are refused (what `fs-write` takes).
pub fn relative(path: &str) -> Result<PathBuf, ToolError> {
    if Path::new(path).is_absolute() {
        return Err(ToolError::invalid_input(format!(
            "`{path}` is absolute; use a path relative to the working directory (e.g. `src/main.rs`)"
        )));
    }
    granted(path)
}

/// `path` as a path under a granted directory, or why not (what the
/// read-only tools take): a relative path resolves in the working
/// directory (`./…`); an absolute one only in a directory granted at that
/// path (a skill's directory, with `skill_files = true`), which WASI
/// decides when it is opened. Never `..`.
pub fn granted(path: &str) -> Result<PathBuf, ToolError> {
    let p = Path::new(path);
    let mut out = PathBuf::from(if p.is_absolute() { "/" } else { "." });
    for c in p.components() {
        match c {
            Component::Normal(s) => out.push(s),
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir => {
                return Err(ToolError::permission_denied(format!(
                    "`{path}` climbs out with `..`; only paths inside the granted directories are reachable"
                )));
            }
            Component::Prefix(_) => {
                return Err(ToolError::invalid_input(format!(
                    "`{path}` is not a path here; use a path relative to the working directory"
                )));
            }
        }
    }
    Ok(out)
}

/// An absolute path no grant covers: what to use instead.
fn outside(shown: &str) -> ToolError {
    ToolError::permission_denied(format!(
        "`{shown}` is outside the directories granted to this tool: an absolute path reaches only a \
         skill's directory (as the `skill` tool names it); use a path relative to the working \
         directory (e.g. `src/main.rs`)"
    ))
}

/// Whether a directory above absolute `path` (not `/`) is visible: the
/// path lies in a directory granted at its own path.
fn granted_above(path: &Path) -> bool {
    path.ancestors()
        .skip(1)
        .filter(|a| a.parent().is_some())
        .any(|a| fs::metadata(a).is_ok_and(|m| m.is_dir()))
}

/// `./a/b` → `a/b`; `.` stays `.`.
pub fn display(path: &Path) -> String {
    let s = path.to_string_lossy();
    match s.strip_prefix("./") {
        Some(rest) => rest.to_string(),
        None => s.into_owned(),
    }
}

/// The metadata of `path` (following symlinks, within the grant), with an
/// error that says what to do when it does not exist.
pub fn metadata(path: &Path, shown: &str) -> Result<fs::Metadata, ToolError> {
    fs::metadata(path).map_err(|e| {
        // An absolute path under no preopen: WASI answers "not found" for
        // it and for every directory above it.
        if path.is_absolute() && !granted_above(path) {
            outside(shown)
        } else if e.kind() == std::io::ErrorKind::NotFound {
            not_found(path, shown)
        } else {
            ToolError::from(e).with_details(serde_json::json!({ "path": shown }))
        }
    })
}

/// Checks that `path` is a regular file before anything opens it: a FIFO
/// would block the opener, a device or socket is no file to read.
pub fn regular_file(path: &Path, shown: &str, tool: &str) -> Result<fs::Metadata, ToolError> {
    let meta = metadata(path, shown)?;
    if meta.is_file() {
        return Ok(meta);
    }
    Err(ToolError::invalid_input(if meta.is_dir() {
        format!(
            "`{shown}` is a directory; {tool} reads regular files (use list_dir, glob or grep on a directory)"
        )
    } else {
        format!(
            "`{shown}` is not a regular file (a FIFO, socket or device); {tool} reads regular \
             files only, since opening anything else can block or never end"
        )
    }))
}

/// A `NOT_FOUND` error naming the entries of the parent directory that look
/// like what was asked for (a typo, another extension, another case).
pub fn not_found(path: &Path, shown: &str) -> ToolError {
    let near = near_names(path);
    let mut message = format!("`{shown}` does not exist");
    if near.is_empty() {
        let parent = path.parent().map(display).unwrap_or_else(|| ".".into());
        if path.parent().is_some_and(|p| !p.exists()) {
            message.push_str(&format!(" (nor does its directory `{parent}`)"));
        }
        message.push_str("; use glob to find the file");
    } else {
        message.push_str(&format!(
            "; did you mean {}?",
            near.iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    ToolError::not_found(message)
        .with_details(serde_json::json!({ "path": shown, "similar": near }))
}

/// Up to 5 entries next to `path` whose names are close to its name.
fn near_names(path: &Path) -> Vec<String> {
    let Some(name) = path.file_name().map(|n| n.to_string_lossy().to_lowercase()) else {
        return Vec::new();
    };
    let parent = path.parent().unwrap_or(Path::new("."));
    let Ok(entries) = fs::read_dir(parent) else {
        return Vec::new();
    };
    let stem = |s: &str| s.split('.').next().unwrap_or(s).to_string();
    let mut scored: Vec<(usize, String)> = entries
        .filter_map(Result::ok)
        .take(10_000)
        .filter_map(|e| {
            let candidate = e.file_name().to_string_lossy().into_owned();
            let lower = candidate.to_lowercase();
            let distance = if lower == name {
                0
            } else if stem(&lower) == stem(&name) {
                1
            } else {
                let d = edit_distance(&lower, &name);
                if d > 2.max(name.len() / 4) {
                    return None;
                }
                d + 1
            };
            Some((distance, display(&parent.join(&candidate))))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(5).map(|(_, n)| n).collect()
}

/// Levenshtein distance (names are short; cut at 64 characters).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().take(64).collect();
    let b: Vec<char> = b.chars().take(64).collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(edit_distance("main.rs", "mian.rs"), 2);
        assert_eq!(edit_distance("lib.rs", "lib.rs"), 0);
        assert_eq!(edit_distance("a", ""), 1);
    }

    #[test]
    fn paths_stay_inside() {
        assert!(relative("/etc/passwd").is_err());
        // Absolute, for `read`: kept (WASI decides whether a grant is
        // there); never `..`.
        assert_eq!(
            granted("/skills/x/./a.md").unwrap(),
            PathBuf::from("/skills/x/a.md")
        );
        assert!(granted("/skills/x/../../etc/passwd").is_err());
        assert_eq!(granted("a/./b").unwrap(), PathBuf::from("./a/b"));
        assert!(relative("a/../../b").is_err());
        assert_eq!(relative("a/./b").unwrap(), PathBuf::from("./a/b"));
        assert_eq!(display(Path::new("./a/b")), "a/b");
        assert_eq!(display(Path::new(".")), ".");
    }
}
