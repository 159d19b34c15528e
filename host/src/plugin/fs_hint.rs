//! "No such file" that means "not granted": the hint a failed file access
//! gets when it lies outside every directory the component was granted.
//!
//! A component sees only its preopened directories, and wasi-libc (under
//! Rust's std, CPython, C) resolves every path against them *inside the
//! guest*: a path outside every preopen fails there with `ENOENT` (errno
//! 44 in WASI) before the host hears of it, so the host cannot refuse it
//! with a better error at the point of access. What the host can do is read
//! the failure the guest reports — a trap's stderr (`FileNotFoundError:
//! [Errno 44] No such file or directory: 'notes.txt'`) or a tool's own
//! error message — and, knowing the preopens, tell "not granted" from
//! "absent": the path named is outside every grant (or the component has
//! none), so the message gets the grant line to add. A path inside a grant
//! (a file that is really absent) gets nothing.
//!
//! (A read-only shadow preopen of `/` that answers every open with an
//! access error would see the path itself, but it changes what every guest
//! sees — `/` listed among its directories, relative paths of a component
//! without a `.` grant landing in it — and a refusal reads as
//! `PermissionError`, no clearer to the author; the text hint needs no
//! change to what a component sees.)

use crate::grants::Grants;

/// Does `text` report a missing file (`ENOENT`, WASI errno 44)?
pub fn mentions_enoent(text: &str) -> bool {
    text.contains("No such file or directory")
        || text.contains("Errno 44")
        || text.contains("os error 44")
        || text.contains("ENOENT")
}

/// The path a failure names: Python's `…: 'PATH'`, or `PATH: No such
/// file…` (a Rust or C author's `format!("{path}: {e}")`).
fn named_path(text: &str) -> Option<String> {
    let at = text.find("No such file or directory")?;
    let after = &text[at + "No such file or directory".len()..];
    if let Some(rest) = after.strip_prefix(": ") {
        let quote = rest.chars().next().filter(|c| *c == '\'' || *c == '"')?;
        let inner = &rest[1..];
        return inner.find(quote).map(|end| inner[..end].to_string());
    }
    // `PATH: No such file…`: the word before the colon.
    let before = text[..at].trim_end().strip_suffix(':')?;
    let word = before
        .rsplit(|c: char| c.is_whitespace() || c == '`' || c == '\'' || c == '"')
        .next()?;
    (!word.is_empty() && (word.contains('/') || word.contains('.'))).then(|| word.to_string())
}

/// The hint for a failure `text` of plugin `plugin`, given its `grants`,
/// or `None` when the failure is not a missing file outside its grants.
pub fn hint(plugin: &str, grants: &Grants, text: &str) -> Option<String> {
    if !mentions_enoent(text) {
        return None;
    }
    let preopens: Vec<_> = grants.fs.iter().filter(|g| g.preopen).collect();
    let path = named_path(text);
    let seen = |g: &crate::grants::FsGrant| {
        format!(
            "{} as `{}`{}",
            g.host.display(),
            g.guest,
            if g.writable { " (read-write)" } else { "" }
        )
    };
    let section = format!("[plugins.{plugin}.grants] in toolgate.toml");
    let line_for = |p: &str| -> String {
        if p.starts_with('/') {
            let dir = std::path::Path::new(p)
                .parent()
                .map(|d| d.display().to_string())
                .filter(|d| !d.is_empty())
                .unwrap_or_else(|| "/".into());
            format!("fs = [{{ path = \"{dir}\", guest = \"{dir}\", access = \"read-only\" }}]")
        } else {
            "fs = [{ path = \"DIR\", access = \"read-only\" }] (DIR: the directory its relative paths are in; the guest sees it as `.`)".into()
        }
    };
    let Some(path) = path else {
        // No path named: only "nothing at all is granted" is certain.
        return preopens.is_empty().then(|| {
            format!(
                "not granted: `{plugin}` has no fs grant, so it sees no file at all; to let it read files add {} under {section}",
                line_for("notes.txt")
            )
        });
    };
    if preopens.is_empty() {
        return Some(format!(
            "not granted: `{plugin}` has no fs grant, so it sees no file at all ({path} included); to let it read it add {} under {section}",
            line_for(&path)
        ));
    }
    let within = |guest: &str, p: &str| {
        let guest = guest.trim_end_matches('/');
        guest.is_empty() || p == guest || p.starts_with(&format!("{guest}/"))
    };
    if path.starts_with('/') {
        if preopens
            .iter()
            .any(|g| g.guest.starts_with('/') && within(&g.guest, &path))
        {
            return None; // inside a grant: really absent
        }
        // The host directory is granted, but the guest sees it elsewhere.
        if let Some(g) = preopens
            .iter()
            .find(|g| within(&g.host.display().to_string(), &path))
        {
            let rel = path
                .strip_prefix(&g.host.display().to_string())
                .unwrap_or("")
                .trim_start_matches('/');
            let inside = if g.guest == "." {
                rel.to_string()
            } else {
                format!("{}/{rel}", g.guest.trim_end_matches('/'))
            };
            return Some(format!(
                "not visible at that path: `{plugin}` is granted {} and sees it as `{}`, not at its host path; open `{inside}`, or set guest = \"{}\" on that grant under {section}",
                g.host.display(),
                g.guest,
                g.host.display()
            ));
        }
        let granted: Vec<String> = preopens.iter().map(|g| seen(g)).collect();
        return Some(format!(
            "not granted: {path} is outside every fs grant of `{plugin}` ({}); to let it read there add {} under {section}",
            granted.join(", "),
            line_for(&path)
        ));
    }
    // A relative path resolves against the grant the guest sees as `.`.
    if preopens.iter().any(|g| g.guest == "." || g.guest == "./") {
        return None;
    }
    let granted: Vec<String> = preopens.iter().map(|g| seen(g)).collect();
    Some(format!(
        "not granted: the relative path {path} resolves against a grant the guest sees as `.`, and `{plugin}` has none ({}); add {} under {section}, or open it by its path under a grant",
        granted.join(", "),
        line_for(&path)
    ))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::hint;
    use crate::grants::{FsGrant, Grants};

    fn granted(host: &str, guest: &str) -> Grants {
        Grants {
            fs: vec![FsGrant {
                host: PathBuf::from(host),
                guest: guest.into(),
                writable: false,
                preopen: true,
            }],
            ..Grants::default()
        }
    }

    const PY: &str = "FileNotFoundError: [Errno 44] No such file or directory: 'notes.txt'";

    #[test]
    fn no_grant_at_all_names_the_line_to_add() {
        let h = hint("reader", &Grants::default(), PY).unwrap();
        assert!(h.starts_with("not granted"), "{h}");
        assert!(h.contains("[plugins.reader.grants]"), "{h}");
        assert!(h.contains("fs = [{ path = "), "{h}");
        // Rust's message names no path: still certain with no grant.
        let rust = "No such file or directory (os error 44)";
        assert!(hint("reader", &Grants::default(), rust).is_some());
        assert!(hint("reader", &granted("/srv", "."), rust).is_none());
    }

    #[test]
    fn absent_inside_a_grant_gets_no_hint() {
        assert!(hint("reader", &granted("/srv/data", "."), PY).is_none());
        let abs = "[Errno 44] No such file or directory: '/data/x.txt'";
        assert!(hint("reader", &granted("/srv/data", "/data"), abs).is_none());
    }

    #[test]
    fn an_absolute_path_outside_every_grant() {
        let abs = "[Errno 44] No such file or directory: '/etc/app/conf.toml'";
        let h = hint("reader", &granted("/srv/data", "/data"), abs).unwrap();
        assert!(
            h.contains("/etc/app/conf.toml is outside every fs grant"),
            "{h}"
        );
        assert!(
            h.contains("fs = [{ path = \"/etc/app\", guest = \"/etc/app\""),
            "{h}"
        );
    }

    #[test]
    fn a_granted_directory_by_its_host_path() {
        let abs = "[Errno 44] No such file or directory: '/srv/data/notes.txt'";
        let h = hint("reader", &granted("/srv/data", "."), abs).unwrap();
        assert!(h.contains("sees it as `.`"), "{h}");
        assert!(h.contains("open `notes.txt`"), "{h}");
    }

    #[test]
    fn other_failures_get_nothing() {
        assert!(hint("reader", &Grants::default(), "ValueError: bad").is_none());
        assert!(hint("reader", &Grants::default(), "notes.txt: Permission denied").is_none());
    }

    #[test]
    fn a_path_before_the_message() {
        let rust = "cannot read /etc/x/notes.txt: No such file or directory (os error 44)";
        let h = hint("reader", &granted("/srv", "."), rust).unwrap();
        assert!(h.contains("/etc/x/notes.txt is outside"), "{h}");
    }
}
