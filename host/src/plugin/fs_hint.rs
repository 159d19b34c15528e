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
//! Since [`super::ungranted`], a component loaded from a plugin directory
//! that calls through the asynchronous path reaches the host with such a
//! path: the host refuses it (the guest reads "Permission denied"), records
//! it, and the failure's hint rests on that record, not on the text alone —
//! the text only says how the guest wrote the path. The text alone still
//! serves the built-ins and the synchronous path (policies with no grant,
//! whose file-system imports the host stubs).

use crate::grants::Grants;

/// Does `text` report a missing file (`ENOENT`, WASI errno 44)?
pub fn mentions_enoent(text: &str) -> bool {
    text.contains("No such file or directory")
        || text.contains("Errno 44")
        || text.contains("os error 44")
        || text.contains("ENOENT")
}

/// Does `text` report a refused access (`EACCES`, WASI errno 2)?
fn mentions_refusal(text: &str) -> bool {
    text.contains("Permission denied") || text.contains("EACCES")
}

/// The words of a failed file access that a path follows or precedes.
const MARKERS: [&str; 2] = ["No such file or directory", "Permission denied"];

/// The path a failure names: Python's `…: 'PATH'`, or `PATH: No such
/// file…` (a Rust or C author's `format!("{path}: {e}")`).
fn named_path(text: &str) -> Option<String> {
    let (at, marker) = MARKERS
        .iter()
        .filter_map(|m| text.find(m).map(|at| (at, *m)))
        .min()?;
    let after = &text[at + marker.len()..];
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

/// The hint for a failure `text` of plugin `plugin`, given its `grants`
/// and the paths the host refused it during the call (`ungranted`, see
/// [`super::ungranted`]), or `None` when the failure is not a file access
/// outside its grants.
pub fn hint(plugin: &str, grants: &Grants, text: &str, ungranted: &[String]) -> Option<String> {
    let refused = !ungranted.is_empty()
        && (mentions_refusal(text)
            || mentions_enoent(text)
            || ungranted.iter().any(|p| text.contains(p.as_str())));
    if !refused && !mentions_enoent(text) {
        return None;
    }
    let path = named_path(text).or_else(|| {
        if refused {
            ungranted
                .iter()
                .find(|p| text.contains(p.as_str()))
                .or(ungranted.first())
                .cloned()
        } else {
            None
        }
    });
    hint_for(plugin, grants, path)
}

/// The hint for `path`, which plugin `plugin` could not reach, given its
/// `grants`: the grant line to add, or `None` when a grant covers it (a
/// file that is really absent).
pub fn for_path(plugin: &str, grants: &Grants, path: &str) -> Option<String> {
    hint_for(plugin, grants, Some(path.to_string()))
}

fn hint_for(plugin: &str, grants: &Grants, path: Option<String>) -> Option<String> {
    let preopens: Vec<_> = grants.fs.iter().filter(|g| g.preopen).collect();
    if preopens.is_empty() && !grants.fs.is_empty() {
        // Its grants are for the processes it spawns (`spawn_only`, as
        // `bash`'s): the failure is a process's, which sees those
        // directories as they are — a missing file there is really absent.
        return None;
    }
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
        let h = hint("reader", &Grants::default(), PY, &[]).unwrap();
        assert!(h.starts_with("not granted"), "{h}");
        assert!(h.contains("[plugins.reader.grants]"), "{h}");
        assert!(h.contains("fs = [{ path = "), "{h}");
        // Rust's message names no path: still certain with no grant.
        let rust = "No such file or directory (os error 44)";
        assert!(hint("reader", &Grants::default(), rust, &[]).is_some());
        assert!(hint("reader", &granted("/srv", "."), rust, &[]).is_none());
    }

    /// Issue 44: `bash` (its grant `spawn_only`: for the processes it
    /// runs, no preopen) running `cat missing.txt` was told it "has no fs
    /// grant, so it sees no file at all".
    #[test]
    fn a_process_missing_a_file_is_not_told_it_has_no_grant() {
        let mut spawn_only = granted("/srv/work", ".");
        spawn_only.fs[0].preopen = false;
        let cat = "cat: missing.txt: No such file or directory";
        assert!(hint("bash", &spawn_only, cat, &[]).is_none());
        assert!(hint("bash", &spawn_only, PY, &[]).is_none());
        // The twin: nothing granted at all still gets the line to add.
        assert!(hint("bash", &Grants::default(), cat, &[]).is_some());
    }

    #[test]
    fn absent_inside_a_grant_gets_no_hint() {
        assert!(hint("reader", &granted("/srv/data", "."), PY, &[]).is_none());
        let abs = "[Errno 44] No such file or directory: '/data/x.txt'";
        assert!(hint("reader", &granted("/srv/data", "/data"), abs, &[]).is_none());
    }

    #[test]
    fn an_absolute_path_outside_every_grant() {
        let abs = "[Errno 44] No such file or directory: '/etc/app/conf.toml'";
        let h = hint("reader", &granted("/srv/data", "/data"), abs, &[]).unwrap();
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
        let h = hint("reader", &granted("/srv/data", "."), abs, &[]).unwrap();
        assert!(h.contains("sees it as `.`"), "{h}");
        assert!(h.contains("open `notes.txt`"), "{h}");
    }

    #[test]
    fn other_failures_get_nothing() {
        assert!(hint("reader", &Grants::default(), "ValueError: bad", &[]).is_none());
        assert!(
            hint(
                "reader",
                &Grants::default(),
                "notes.txt: Permission denied",
                &[]
            )
            .is_none()
        );
    }

    /// A path the host refused (the sentinel of [`super::super::ungranted`]):
    /// the guest's "Permission denied" gets the grant line, with the path
    /// as the text names it, or as recorded when the text names none.
    #[test]
    fn a_refused_path_names_the_line_to_add() {
        let py = "PermissionError: [Errno 2] Permission denied: 'notes.txt'";
        let refused = ["notes.txt".to_string()];
        let h = hint("reader", &Grants::default(), py, &refused).unwrap();
        assert!(h.starts_with("not granted"), "{h}");
        assert!(h.contains("notes.txt included"), "{h}");
        assert!(h.contains("[plugins.reader.grants]"), "{h}");
        let c = "cannot open notes.txt";
        let h = hint("reader", &granted("/srv", "/data"), c, &refused).unwrap();
        assert!(h.contains("relative path notes.txt"), "{h}");
        // Refused, but the failure is about something else.
        assert!(hint("reader", &Grants::default(), "ValueError: bad", &refused).is_none());
        // A "Permission denied" the host did not cause gets nothing.
        assert!(hint("reader", &Grants::default(), py, &[]).is_none());
    }

    #[test]
    fn a_path_before_the_message() {
        let rust = "cannot read /etc/x/notes.txt: No such file or directory (os error 44)";
        let h = hint("reader", &granted("/srv", "."), rust, &[]).unwrap();
        assert!(h.contains("/etc/x/notes.txt is outside"), "{h}");
    }
}
