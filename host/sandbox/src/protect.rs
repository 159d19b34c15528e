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
//!
//! # The journal: a check that survives the host
//!
//! A check that runs "after the run" is only as good as the host that runs
//! it: a host killed mid-run never checks, and the file a sandboxed command
//! planted would be obeyed at the next start. And while the run lasts, the
//! planted file is already there for anyone who reads it (the host's own
//! hot reload, another toolgate starting in the same directory). So when
//! the policy names a journal directory
//! ([`SandboxPolicy::watch_journal`](crate::SandboxPolicy::watch_journal)),
//! the watched paths are written to a file there *before the child is
//! spawned* (written under a temporary name, `fsync`ed, then renamed into
//! place), and that file stays `flock`ed by the host until the post-run
//! check has repaired what it found; only then is it removed. The kernel
//! drops the lock when its holder dies, however it dies. [`recover`] reads
//! the journal:
//!
//! * a journal file whose lock can be taken belongs to a host that died
//!   before its check: the check runs now (planted files are moved aside)
//!   and the file is removed;
//! * a journal file still locked belongs to a live run: its absent paths
//!   are *exposed* — whatever stands there now may have been put there by
//!   a sandboxed program, and must not be read as authority.
//!
//! Why this cannot be raced, for a reader of authority that calls
//! [`recover`] *after* reading a file and then checks that the path still
//! names the file it read: a spawn that could create the file recorded its
//! journal before its child existed, and the journal disappears only after
//! the check moved the planted file aside. So either the reader sees the
//! journal (exposed: refuse), or the check already ran — and then the path
//! no longer names what was planted (the reader sees the change: refuse),
//! or nothing was planted.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
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
#[derive(Debug, Default)]
pub(crate) struct Watch {
    pub entries: Vec<Watched>,
    /// The journal file recording `entries`, locked while the run lasts.
    journal: Option<(PathBuf, File)>,
}

impl Watch {
    /// Records the watched paths in a new journal file under `dir` (see the
    /// module docs), locked until [`check_and_repair`](Self::check_and_repair).
    /// Nothing is written when nothing is watched.
    pub fn record(&mut self, dir: &Path) -> std::io::Result<()> {
        if self.entries.is_empty() || self.journal.is_some() {
            return Ok(());
        }
        let name = unique_name();
        let tmp = dir.join(format!(".{name}.tmp"));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        // Locked before it is visible under its final name: a reader never
        // takes the lock of a live run's journal.
        lock(&file, true)?;
        let written = (|| {
            file.write_all(&encode(&self.entries))?;
            file.sync_all()?;
            let path = dir.join(format!("{name}.{JOURNAL_EXT}"));
            std::fs::rename(&tmp, &path)?;
            File::open(dir)?.sync_all()?;
            Ok(path)
        })();
        match written {
            Ok(path) => {
                self.journal = Some((path, file));
                Ok(())
            }
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
        }
    }

    /// Checks every watched path and repairs what changed, then retires the
    /// journal file. Call only when no process of the sandbox is alive.
    /// Returns a line per repair.
    pub fn check_and_repair(&mut self) -> Vec<String> {
        let mut done = Vec::new();
        for w in &self.entries {
            if let Some(line) = repair(w) {
                tracing::error!(path = %w.path.display(), "{line}");
                done.push(line);
            }
        }
        if let Some((path, file)) = self.journal.take() {
            // Removed before the lock goes (with `file`): a reader that
            // takes the lock afterwards finds the file unlinked.
            let _ = std::fs::remove_file(&path);
            drop(file);
        }
        done
    }
}

/// The extension of a journal file.
const JOURNAL_EXT: &str = "watch";

/// What [`recover`] found in a journal directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// One line per repair made for a run whose host died before its own
    /// post-run check (already logged as errors).
    pub repaired: Vec<String>,
    /// Absent protected paths that a live sandboxed run can create right
    /// now: whatever stands at one of them must not be read as authority.
    pub exposed: Vec<PathBuf>,
}

/// Reads the journal directory `dir` (see the module docs): finishes the
/// post-run check of every run whose host is gone, and lists the paths
/// live runs expose. A missing directory is an empty journal.
pub fn recover(dir: &Path) -> std::io::Result<Recovery> {
    let mut out = Recovery::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let path = entry?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let temporary = name.starts_with('.') && name.ends_with(".tmp");
        if !temporary && path.extension() != Some(OsStr::new(JOURNAL_EXT)) {
            continue;
        }
        let mut file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let watched = decode(&bytes);
        if !lock(&file, false)? {
            // A live run (or one being recorded: not yet in force).
            if !temporary {
                out.exposed.extend(
                    watched
                        .iter()
                        .flatten()
                        .filter(|w| w.expect == Expect::Absent)
                        .map(|w| w.path.clone()),
                );
            }
            continue;
        }
        // The owner is gone. Retired in the meantime (unlinked before
        // unlocking)? Then there is nothing left to do.
        if file.metadata()?.nlink() == 0 {
            continue;
        }
        if !temporary {
            match watched {
                Some(entries) => {
                    let mut w = Watch {
                        entries,
                        journal: None,
                    };
                    out.repaired.extend(w.check_and_repair());
                }
                None => tracing::error!(
                    journal = %path.display(),
                    "a journal of protected paths cannot be read; removed — check the \
                     host's configuration and plugin directories by hand"
                ),
            }
        }
        std::fs::remove_file(&path)?;
    }
    Ok(out)
}

/// `flock` exclusively; `wait = false`: `Ok(false)` when another holds it.
fn lock(file: &File, wait: bool) -> std::io::Result<bool> {
    let op = libc::LOCK_EX | if wait { 0 } else { libc::LOCK_NB };
    loop {
        // SAFETY: a valid descriptor owned by `file`.
        if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) if !wait => return Ok(false),
            _ => return Err(e),
        }
    }
}

/// A name no other journal file has: pid, time, a counter.
fn unique_name() -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{}-{nanos}-{n}", std::process::id())
}

/// Journal encoding: per entry a kind byte (`A` absent, `S` symlink) and
/// length-prefixed (u32 LE) path, parent and, for `S`, link target.
fn encode(entries: &[Watched]) -> Vec<u8> {
    let mut out = Vec::new();
    let field = |out: &mut Vec<u8>, p: &Path| {
        let b = p.as_os_str().as_bytes();
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        out.extend_from_slice(b);
    };
    for w in entries {
        match &w.expect {
            Expect::Absent => out.push(b'A'),
            Expect::Symlink(_) => out.push(b'S'),
        }
        field(&mut out, &w.path);
        field(&mut out, &w.parent);
        if let Expect::Symlink(t) = &w.expect {
            field(&mut out, t);
        }
    }
    out
}

/// The inverse of [`encode`]; `None` for a damaged journal.
fn decode(mut bytes: &[u8]) -> Option<Vec<Watched>> {
    fn field(bytes: &mut &[u8]) -> Option<PathBuf> {
        let len = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
        let b = bytes.get(4..4 + len)?;
        *bytes = &bytes[4 + len..];
        Some(PathBuf::from(OsStr::from_bytes(b)))
    }
    let mut out = Vec::new();
    while let Some((&kind, rest)) = bytes.split_first() {
        bytes = rest;
        let path = field(&mut bytes)?;
        let parent = field(&mut bytes)?;
        let expect = match kind {
            b'A' => Expect::Absent,
            b'S' => Expect::Symlink(field(&mut bytes)?),
            _ => return None,
        };
        out.push(Watched {
            path,
            parent,
            expect,
        });
    }
    Some(out)
}

fn repair(w: &Watched) -> Option<String> {
    if w.expect == Expect::Absent
        && w.path.parent() != Some(w.parent.as_path())
        && let Some(line) = repair_below(w)
    {
        return line;
    }
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

/// An absent path several components below its watched directory
/// (`.agents/skills` under a working directory with no `.agents`): the
/// components are walked from that directory without following a symlink.
/// `Some(None)`: intact (a component is still absent). `Some(Some(line))`:
/// a symlink (or a file) where a directory was to be made was moved aside —
/// through it the path could lead anywhere. `None`: every directory above
/// the path is a real one; the path itself is checked as usual.
fn repair_below(w: &Watched) -> Option<Option<String>> {
    let Ok(rest) = w.path.strip_prefix(&w.parent) else {
        return None;
    };
    let parts: Vec<_> = rest.components().collect();
    let mut at = w.parent.clone();
    for part in &parts[..parts.len().saturating_sub(1)] {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Err(_) => return Some(None),
            Ok(m) if m.is_dir() => continue,
            Ok(_) => {}
        }
        if w.parent.canonicalize().ok().as_ref() != Some(&w.parent) {
            return Some(Some(format!(
                "protected path {} changed during a sandboxed run, but its directory no longer \
                 resolves to {}; left as it is — check it before the host reads it again",
                w.path.display(),
                w.parent.display()
            )));
        }
        return Some(Some(match quarantine(&at) {
            Ok(aside) => format!(
                "a sandboxed program put a symlink or file at {} (on the way to protected path {}); moved aside to {}",
                at.display(),
                w.path.display(),
                aside.display()
            ),
            Err(e) => format!(
                "a sandboxed program put a symlink or file at {} (on the way to protected path {}) and moving it aside failed ({e}); remove it before the host reads it again",
                at.display(),
                w.path.display()
            ),
        }));
    }
    None
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
        let mut w = Watch {
            entries: vec![Watched {
                path: d.join("toolgate.toml"),
                parent: d.clone(),
                expect: Expect::Absent,
            }],
            journal: None,
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

    /// `.agents/skills` watched where there is no `.agents`: an intact run,
    /// one that made `.agents` for something else (kept), one that planted
    /// the path (moved aside, `.agents` kept), one that made `.agents` a
    /// symlink out (the symlink moved aside, its target untouched).
    #[test]
    fn a_path_below_missing_directories_is_walked_without_following_links() {
        let d = scratch("below");
        let outside = scratch("below-outside");
        std::fs::create_dir_all(outside.join("skills/x")).unwrap();
        let mut w = Watch {
            entries: vec![Watched {
                path: d.join(".agents/skills"),
                parent: d.clone(),
                expect: Expect::Absent,
            }],
            journal: None,
        };
        assert!(w.check_and_repair().is_empty());
        std::fs::create_dir_all(d.join(".agents/other")).unwrap();
        assert!(w.check_and_repair().is_empty());
        std::fs::create_dir_all(d.join(".agents/skills/evil")).unwrap();
        assert_eq!(w.check_and_repair().len(), 1);
        assert!(!d.join(".agents/skills").exists());
        assert!(d.join(".agents/other").is_dir());
        std::fs::remove_dir_all(d.join(".agents")).unwrap();
        std::os::unix::fs::symlink(&outside, d.join(".agents")).unwrap();
        let done = w.check_and_repair();
        assert!(
            done.len() == 1 && done[0].contains("symlink or file"),
            "{done:?}"
        );
        assert!(std::fs::symlink_metadata(d.join(".agents")).is_err());
        assert!(
            outside.join("skills/x").is_dir(),
            "the link's target is left alone"
        );
        let _ = std::fs::remove_dir_all(&d);
        let _ = std::fs::remove_dir_all(&outside);
    }

    #[test]
    fn a_replaced_symlink_is_restored() {
        let d = scratch("link");
        std::fs::write(d.join("real.toml"), "real").unwrap();
        std::os::unix::fs::symlink("real.toml", d.join("cfg.toml")).unwrap();
        let mut w = Watch {
            entries: vec![Watched {
                path: d.join("cfg.toml"),
                parent: d.clone(),
                expect: Expect::Symlink("real.toml".into()),
            }],
            journal: None,
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

    fn watch_of(d: &Path) -> Watch {
        let _ = std::os::unix::fs::symlink("target", d.join("link\n\twith tabs"));
        Watch {
            entries: vec![
                Watched {
                    path: d.join("toolgate.toml"),
                    parent: d.to_path_buf(),
                    expect: Expect::Absent,
                },
                Watched {
                    path: d.join("link\n\twith tabs"),
                    parent: d.to_path_buf(),
                    expect: Expect::Symlink("target".into()),
                },
            ],
            journal: None,
        }
    }

    #[test]
    fn the_journal_round_trips_and_rejects_damage() {
        let d = scratch("codec");
        let w = watch_of(&d);
        let bytes = encode(&w.entries);
        let back = decode(&bytes).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[1].path, d.join("link\n\twith tabs"));
        assert_eq!(back[1].expect, Expect::Symlink("target".into()));
        assert!(decode(&bytes[..bytes.len() - 1]).is_none());
        assert!(decode(b"X").is_none());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_live_runs_absent_paths_are_exposed_and_its_journal_kept() {
        let d = scratch("live");
        let journal = d.join("journal");
        std::fs::create_dir(&journal).unwrap();
        let mut w = watch_of(&d);
        w.record(&journal).unwrap();
        // Another open file description cannot take the lock: live.
        let r = recover(&journal).unwrap();
        assert_eq!(r.exposed, vec![d.join("toolgate.toml")]);
        assert!(r.repaired.is_empty());
        std::fs::write(d.join("toolgate.toml"), "planted").unwrap();
        // Still exposed, still untouched while the run lives.
        assert_eq!(recover(&journal).unwrap().exposed.len(), 1);
        assert!(d.join("toolgate.toml").exists());
        // The run's own check repairs and retires the journal.
        assert_eq!(w.check_and_repair().len(), 1);
        assert!(!d.join("toolgate.toml").exists());
        assert_eq!(std::fs::read_dir(&journal).unwrap().count(), 0);
        assert_eq!(recover(&journal).unwrap(), Recovery::default());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_dead_hosts_journal_is_checked_by_the_next_reader() {
        let d = scratch("dead");
        let journal = d.join("journal");
        std::fs::create_dir(&journal).unwrap();
        let mut w = watch_of(&d);
        w.record(&journal).unwrap();
        std::fs::write(d.join("toolgate.toml"), "planted").unwrap();
        // The host "dies": its lock goes with its descriptor, its check
        // never runs.
        let (_, file) = w.journal.take().unwrap();
        drop(file);
        let r = recover(&journal).unwrap();
        assert!(r.exposed.is_empty());
        assert_eq!(r.repaired.len(), 1, "{r:?}");
        assert!(!d.join("toolgate.toml").exists());
        assert_eq!(std::fs::read_dir(&journal).unwrap().count(), 0);
        let _ = std::fs::remove_dir_all(&d);
    }
}
