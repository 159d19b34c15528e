//! Protected paths that a mount cannot cover: the post-run watch.
//!
//! A read-only mount keeps an *existing* file or directory from being
//! changed, moved or removed (see [`crate::child`]). It cannot forbid
//! creating a *new* name in a writable directory, and it cannot sit on a
//! symlink. So for a protected path that is absent when the spawn starts —
//! the configuration file the host would read on its next start, say — or
//! that is a symlink, the host looks again once no process of the sandbox is
//! alive: whatever now stands at an absent path is moved aside to
//! `NAME.quarantined-SECONDS-PID` (never deleted: the operator may want to
//! see it), a replaced symlink is moved aside the same way and the original
//! link put back. Every repair is logged with `tracing::error!`: it means a
//! sandboxed program reached for something the host treats as authority.
//!
//! The directories between the grant and a watched path are pinned in the
//! sandbox's view, so the parent the host checks is the parent it recorded;
//! the repair also re-checks that the parent still resolves to the same
//! place before it touches anything.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What a watched path must look like after the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Expect {
    /// Nothing there.
    Absent,
    /// A symlink with exactly this target.
    Symlink(PathBuf),
}

/// One watched path.
#[derive(Clone, Debug)]
pub(crate) struct Watched {
    /// The path (its parent canonical).
    pub path: PathBuf,
    /// The canonical parent when the spawn was prepared.
    pub parent: PathBuf,
    pub expect: Expect,
}

/// The watched paths of one spawn.
#[derive(Clone, Debug, Default)]
pub(crate) struct Watch {
    pub entries: Vec<Watched>,
}

impl Watch {
    /// Checks every watched path and repairs what changed. Call only when
    /// no process of the sandbox is alive. Returns a line per repair.
    pub fn check_and_repair(&self) -> Vec<String> {
        let mut done = Vec::new();
        for w in &self.entries {
            if let Some(line) = repair(w) {
                tracing::error!(path = %w.path.display(), "{line}");
                done.push(line);
            }
        }
        done
    }
}

fn repair(w: &Watched) -> Option<String> {
    let now = std::fs::symlink_metadata(&w.path);
    let intact = match (&w.expect, &now) {
        (Expect::Absent, Err(e)) => e.kind() == std::io::ErrorKind::NotFound,
        (Expect::Symlink(target), Ok(m)) => {
            m.file_type().is_symlink() && std::fs::read_link(&w.path).ok().as_ref() == Some(target)
        }
        _ => false,
    };
    if intact {
        return None;
    }
    if w.parent.canonicalize().ok().as_ref() != Some(&w.parent) {
        return Some(format!(
            "protected path {} changed during a sandboxed run, but its directory no longer \
             resolves to {}; left as it is — check it before the host reads it again",
            w.path.display(),
            w.parent.display()
        ));
    }
    let mut what = Vec::new();
    if now.is_ok() {
        match quarantine(&w.path) {
            Ok(aside) => what.push(format!(
                "what a sandboxed program put at protected path {} was moved aside to {}",
                w.path.display(),
                aside.display()
            )),
            Err(e) => {
                return Some(format!(
                    "a sandboxed program put something at protected path {} and moving it \
                     aside failed ({e}); remove it before the host reads it again",
                    w.path.display()
                ));
            }
        }
    }
    if let Expect::Symlink(target) = &w.expect {
        match std::os::unix::fs::symlink(target, &w.path) {
            Ok(()) => what.push(format!(
                "the protected symlink {} → {} was restored",
                w.path.display(),
                target.display()
            )),
            Err(e) => what.push(format!(
                "restoring the protected symlink {} → {} failed: {e}",
                w.path.display(),
                target.display()
            )),
        }
    }
    Some(what.join("; "))
}

/// Renames `path` to a fresh `NAME.quarantined-SECONDS-PID[-N]` beside it,
/// never replacing anything.
fn quarantine(path: &Path) -> std::io::Result<PathBuf> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let from = CString::new(path.as_os_str().as_bytes())?;
    for n in 0..100u32 {
        let suffix = if n == 0 {
            String::new()
        } else {
            format!("-{n}")
        };
        let aside = path.with_file_name(format!(
            "{name}.quarantined-{secs}-{}{suffix}",
            std::process::id()
        ));
        let to = CString::new(aside.as_os_str().as_bytes())?;
        let r = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                from.as_ptr(),
                libc::AT_FDCWD,
                to.as_ptr(),
                libc::RENAME_NOREPLACE,
            )
        };
        if r == 0 {
            return Ok(aside);
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EEXIST) {
            return Err(e);
        }
    }
    Err(std::io::Error::other("no free quarantine name"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("toolgate-watch-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d.canonicalize().unwrap()
    }

    #[test]
    fn a_planted_file_is_moved_aside_and_an_intact_path_left_alone() {
        let d = scratch("plant");
        let w = Watch {
            entries: vec![Watched {
                path: d.join("toolgate.toml"),
                parent: d.clone(),
                expect: Expect::Absent,
            }],
        };
        assert!(w.check_and_repair().is_empty());
        std::fs::write(d.join("toolgate.toml"), "planted").unwrap();
        let done = w.check_and_repair();
        assert_eq!(done.len(), 1, "{done:?}");
        assert!(!d.join("toolgate.toml").exists());
        let aside: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            aside.len() == 1 && aside[0].starts_with("toolgate.toml.quarantined-"),
            "{aside:?}"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_replaced_symlink_is_restored() {
        let d = scratch("link");
        std::fs::write(d.join("real.toml"), "real").unwrap();
        std::os::unix::fs::symlink("real.toml", d.join("cfg.toml")).unwrap();
        let w = Watch {
            entries: vec![Watched {
                path: d.join("cfg.toml"),
                parent: d.clone(),
                expect: Expect::Symlink("real.toml".into()),
            }],
        };
        assert!(w.check_and_repair().is_empty());
        std::fs::remove_file(d.join("cfg.toml")).unwrap();
        std::fs::write(d.join("cfg.toml"), "planted").unwrap();
        assert_eq!(w.check_and_repair().len(), 1);
        assert_eq!(
            std::fs::read_link(d.join("cfg.toml")).unwrap(),
            PathBuf::from("real.toml")
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
