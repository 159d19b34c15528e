//! The sandbox's view of the file system, in the parent: grants made
//! canonical, the working directory and the program checked against them,
//! and the same view expressed as Landlock rules and as the mount plan.
//!
//! Paths are canonicalized once, here, so that a symlink in a grant (or in
//! `PATH`) is judged by where it leads — which is also what Landlock and the
//! mount view enforce.
//!
//! The policy's protected paths are sorted here too (see
//! [`SandboxPolicy::protected`]): existing ones that overlap a read-write
//! grant become read-only mounts, the directories between such a grant and
//! a protected path become pins, and absent ones (or symlinks, whose link a
//! mount cannot cover) go to the post-run [`Watch`].
//!
//! Hidden paths (see [`SandboxPolicy::hidden`]) that exist where the view
//! could read them become masks: mounts, last in the plan, that leave
//! nothing of them readable.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::child::{self, MountPlan};
use crate::error::SpawnError;
use crate::landlock::{PathRule, RulesetSpec, fs};
use crate::policy::SandboxPolicy;
use crate::protect::{Expect, Watch, Watched};
use crate::system_paths::SystemEntry;

/// `PATH` used to resolve a bare program name when the request sets none.
pub(crate) const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A grant, canonicalized.
pub(crate) struct Grant {
    pub path: PathBuf,
    pub writable: bool,
}

/// The system view plus one policy's grants.
pub(crate) struct View<'a> {
    pub system: &'a [SystemEntry],
    pub grants: Vec<Grant>,
    /// Existing protected paths (canonical) that overlap a read-write grant.
    pub protected: Vec<PathBuf>,
    /// Directories strictly between a read-write grant and a protected path
    /// (or the parent of a watched one), to be pinned.
    pub pins: Vec<PathBuf>,
    /// Absent or symlinked protected paths inside a read-write grant.
    pub watch: Watch,
    /// Existing hidden paths (canonical) the view could otherwise read, and
    /// whether each is a directory.
    pub hidden: Vec<(PathBuf, bool)>,
}

impl<'a> View<'a> {
    /// Canonicalizes the policy's grants; each must be absolute and exist.
    pub fn new(system: &'a [SystemEntry], policy: &SandboxPolicy) -> Result<Self, SpawnError> {
        let mut grants = Vec::new();
        for (list, writable) in [(&policy.read_only, false), (&policy.read_write, true)] {
            for p in list {
                if !p.is_absolute() {
                    return Err(SpawnError::InvalidRequest(format!(
                        "granted path {} must be absolute",
                        p.display()
                    )));
                }
                let path = p.canonicalize().map_err(|e| {
                    SpawnError::InvalidRequest(format!(
                        "granted path {}: {e} (create it before spawning, or remove it from the \
                         policy)",
                        p.display()
                    ))
                })?;
                grants.push(Grant { path, writable });
            }
        }
        let mut view = View {
            system,
            grants,
            protected: Vec::new(),
            pins: Vec::new(),
            watch: Watch::default(),
            hidden: Vec::new(),
        };
        for p in &policy.protected {
            view.add_protected(p)?;
        }
        for p in &policy.hidden {
            view.add_hidden(p)?;
        }
        view.hidden.sort_by_key(|(p, _)| p.components().count());
        view.hidden.dedup();
        // A path beneath a hidden directory is hidden by that directory's
        // mask already — and no longer there to mount over once it is in
        // place (the mask is an empty file system): drop it.
        let dirs: Vec<PathBuf> = view
            .hidden
            .iter()
            .filter(|(_, dir)| *dir)
            .map(|(p, _)| p.clone())
            .collect();
        view.hidden
            .retain(|(p, _)| !dirs.iter().any(|d| p != d && p.starts_with(d)));
        let depth = |p: &PathBuf| p.components().count();
        for v in [&mut view.protected, &mut view.pins] {
            v.sort_by_key(depth);
            v.dedup();
        }
        Ok(view)
    }

    /// The innermost read-write grant containing `path`.
    fn writable_root(&self, path: &Path) -> Option<&Path> {
        self.grants
            .iter()
            .filter(|g| g.writable && path.starts_with(&g.path))
            .map(|g| g.path.as_path())
            .max_by_key(|p| p.components().count())
    }

    /// Pins every directory strictly between the grant containing `path`
    /// and `path` itself.
    fn pin_between(&mut self, path: &Path) {
        let Some(root) = self.writable_root(path).map(Path::to_path_buf) else {
            return;
        };
        let mut dir = path.parent();
        while let Some(d) = dir {
            if d == root || !d.starts_with(&root) {
                break;
            }
            self.pins.push(d.to_path_buf());
            dir = d.parent();
        }
    }

    fn add_protected(&mut self, p: &Path) -> Result<(), SpawnError> {
        if !p.is_absolute() {
            return Err(SpawnError::InvalidRequest(format!(
                "protected path {} must be absolute",
                p.display()
            )));
        }
        let (Some(parent), Some(name)) = (p.parent(), p.file_name()) else {
            return Err(SpawnError::InvalidRequest(format!(
                "protected path {} names no file or directory",
                p.display()
            )));
        };
        let Some(parent) = parent.canonicalize().ok().filter(|p| p.is_dir()) else {
            // Its directory does not exist either (`.agents/skills` where
            // there is no `.agents`): a run could create both. Watched from
            // the nearest directory that exists, the components below it
            // checked one by one after the run (see `protect::repair`).
            return self.add_absent_below(p);
        };
        let at = parent.join(name);
        let expect = match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&at).map_err(|e| {
                    SpawnError::io(format!("reading protected symlink {}", at.display()), e)
                })?;
                // What it leads to is protected like any existing path.
                if let Ok(real) = at.canonicalize() {
                    self.add_existing(real);
                }
                Expect::Symlink(target)
            }
            Ok(_) => {
                self.add_existing(at);
                return Ok(());
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Expect::Absent,
            Err(e) => {
                return Err(SpawnError::io(
                    format!("checking protected path {}", at.display()),
                    e,
                ));
            }
        };
        if self.writable_root(&at).is_some() {
            self.pin_between(&at);
            self.watch.entries.push(Watched {
                path: at,
                parent,
                expect,
            });
        }
        Ok(())
    }

    /// A protected path whose directory does not exist: watched as absent
    /// from its nearest existing ancestor (when a read-write grant reaches
    /// it), the directories between the grant and that ancestor pinned.
    fn add_absent_below(&mut self, p: &Path) -> Result<(), SpawnError> {
        let mut existing = p;
        let mut rest = Vec::new();
        loop {
            match (existing.parent(), existing.file_name()) {
                (Some(up), Some(name)) => {
                    rest.push(name.to_os_string());
                    existing = up;
                }
                _ => return Ok(()),
            }
            match std::fs::symlink_metadata(existing) {
                Ok(m) if m.is_dir() => break,
                // A file or a symlink where a directory would be: nothing
                // can be created below it by this path.
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    return Err(SpawnError::io(
                        format!("checking protected path {}", p.display()),
                        e,
                    ));
                }
            }
        }
        let Ok(parent) = existing.canonicalize() else {
            return Ok(());
        };
        let first = parent.join(rest.last().expect("one component at least"));
        let at = rest.iter().rev().fold(parent.clone(), |at, c| at.join(c));
        if self.writable_root(&at).is_some() {
            self.pin_between(&first);
            self.watch.entries.push(Watched {
                path: at,
                parent,
                expect: Expect::Absent,
            });
        }
        Ok(())
    }

    /// An existing protected path (canonical): mounted read-only when it
    /// overlaps a read-write grant.
    fn add_existing(&mut self, path: PathBuf) {
        let overlaps = self
            .grants
            .iter()
            .any(|g| g.writable && (path.starts_with(&g.path) || g.path.starts_with(&path)));
        if overlaps {
            self.pin_between(&path);
            self.protected.push(path);
        }
    }

    /// A hidden path: masked when it exists and the view could read it (or
    /// a grant lies beneath it).
    fn add_hidden(&mut self, p: &Path) -> Result<(), SpawnError> {
        if !p.is_absolute() {
            return Err(SpawnError::InvalidRequest(format!(
                "hidden path {} must be absolute",
                p.display()
            )));
        }
        let real = match p.canonicalize() {
            Ok(real) => real,
            // Nothing to read (a dangling symlink has no target to read
            // either); the protected paths keep it from being created.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => {
                return Err(SpawnError::io(
                    format!("checking hidden path {}", p.display()),
                    e,
                ));
            }
        };
        let meta = std::fs::metadata(&real)
            .map_err(|e| SpawnError::io(format!("checking hidden path {}", p.display()), e))?;
        let reachable =
            self.readable(&real) || self.grants.iter().any(|g| g.path.starts_with(&real));
        if reachable {
            self.hidden.push((real, meta.is_dir()));
        }
        Ok(())
    }

    /// Whether hiding the hidden paths takes mounts (so the mount view):
    /// some hidden path exists where the view could read it.
    pub fn needs_masks(&self) -> bool {
        !self.hidden.is_empty()
    }

    /// Whether keeping the protected paths read-only takes mounts (so the
    /// mount view): some protected path overlaps a read-write grant.
    pub fn needs_protection(&self) -> bool {
        !self.protected.is_empty() || !self.pins.is_empty()
    }

    /// Whether `path` (canonical) lies in a readable part of the view.
    pub fn readable(&self, path: &Path) -> bool {
        self.grants.iter().any(|g| path.starts_with(&g.path))
            || self
                .system
                .iter()
                .any(|e| e.access & fs::READ_DIR != 0 && path.starts_with(&e.path))
    }

    /// Whether programs at `path` (canonical) may be executed.
    pub fn executable(&self, path: &Path) -> bool {
        self.grants.iter().any(|g| path.starts_with(&g.path))
            || self
                .system
                .iter()
                .any(|e| e.executable && path.starts_with(&e.path))
    }

    /// The working directory, canonical, checked to be inside the view.
    pub fn working_directory(&self, cwd: &Path) -> Result<PathBuf, SpawnError> {
        if !cwd.is_absolute() {
            return Err(SpawnError::InvalidRequest(format!(
                "working directory {} must be absolute",
                cwd.display()
            )));
        }
        let real = cwd.canonicalize().map_err(|e| {
            SpawnError::InvalidRequest(format!("working directory {}: {e}", cwd.display()))
        })?;
        if !real.is_dir() {
            return Err(SpawnError::InvalidRequest(format!(
                "working directory {} is not a directory",
                cwd.display()
            )));
        }
        if !self.readable(&real) {
            return Err(SpawnError::InvalidRequest(format!(
                "working directory {} is not inside any path the policy grants (nor the system \
                 view); grant it read-only or read-write, or run somewhere else",
                real.display()
            )));
        }
        Ok(real)
    }

    /// Finds the program to execute: a path with a `/` as is (relative to
    /// `cwd`), a bare name in the request's `PATH`; either way only where the
    /// sandbox may execute.
    pub fn resolve(
        &self,
        program: &Path,
        cwd: &Path,
        env: &[(String, String)],
    ) -> Result<PathBuf, SpawnError> {
        let shown = program.display().to_string();
        let is_exec_file = |p: &Path| -> bool {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        };
        if program.as_os_str().as_bytes().contains(&b'/') {
            let path = cwd.join(program);
            let real = path.canonicalize().map_err(|e| SpawnError::NotFound {
                program: shown.clone(),
                detail: format!("{}: {e}", path.display()),
            })?;
            if !is_exec_file(&real) {
                return Err(SpawnError::NotFound {
                    program: shown,
                    detail: format!("{} is not an executable file", real.display()),
                });
            }
            if !self.executable(&real) {
                return Err(SpawnError::NotFound {
                    program: shown,
                    detail: format!(
                        "{} exists but is outside the system view and the policy's grants; \
                         grant it (read_only) to run it",
                        real.display()
                    ),
                });
            }
            return Ok(path);
        }
        let search = env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.as_str())
            .unwrap_or(DEFAULT_PATH);
        let mut outside = None;
        for dir in search.split(':').filter(|d| d.starts_with('/')) {
            let candidate = Path::new(dir).join(program);
            let Ok(real) = candidate.canonicalize() else {
                continue;
            };
            if !is_exec_file(&real) {
                continue;
            }
            if self.executable(&real) {
                return Ok(candidate);
            }
            outside.get_or_insert(real);
        }
        Err(SpawnError::NotFound {
            program: shown,
            detail: match outside {
                Some(p) => format!(
                    "searched PATH={search}; found {} but it is outside the system view and the \
                     policy's grants",
                    p.display()
                ),
                None => format!("searched PATH={search}"),
            },
        })
    }

    /// The Landlock path rules of this view.
    pub fn landlock_rules(&self, spec: &mut RulesetSpec) {
        for e in self.system {
            spec.paths.push(PathRule {
                path: e.path.clone(),
                access: e.access,
            });
        }
        for g in &self.grants {
            spec.paths.push(PathRule {
                path: g.path.clone(),
                access: if g.writable { fs::ALL } else { fs::READ },
            });
        }
    }

    /// The mount plan: read-write grants mounted back (parents first) over a
    /// read-only tree, read-only grants nested in them made read-only again
    /// (a path granted both ways stays read-write), the directories above
    /// protected paths pinned, the protected paths made read-only (they
    /// win over any grant), and the hidden paths masked (last: they win
    /// over everything).
    pub fn mount_plan(&self) -> Result<MountPlan, SpawnError> {
        let depth = |p: &Path| p.components().count();
        let mut rw: Vec<&Path> = self
            .grants
            .iter()
            .filter(|g| g.writable)
            .map(|g| g.path.as_path())
            .collect();
        rw.sort_by_key(|p| depth(p));
        rw.dedup();
        let mut ro_nested: Vec<&Path> = self
            .grants
            .iter()
            .filter(|g| {
                !g.writable
                    && rw.iter().any(|w| g.path.starts_with(w))
                    && !rw.contains(&g.path.as_path())
            })
            .map(|g| g.path.as_path())
            .collect();
        ro_nested.sort_by_key(|p| depth(p));
        ro_nested.dedup();
        let cstrings = |v: Vec<&Path>| -> Result<Vec<CString>, SpawnError> {
            v.into_iter()
                .map(|p| cstring(p.as_os_str().as_bytes(), "a granted path"))
                .collect()
        };
        let (uid_map, gid_map) = child::id_maps();
        Ok(MountPlan {
            uid_map,
            gid_map,
            fds: vec![-1; rw.len()],
            read_write: cstrings(rw)?,
            read_only_nested: cstrings(ro_nested)?,
            pins: cstrings(self.pins.iter().map(PathBuf::as_path).collect())?,
            protected: cstrings(self.protected.iter().map(PathBuf::as_path).collect())?,
            hidden_files: cstrings(
                self.hidden
                    .iter()
                    .filter(|(_, dir)| !dir)
                    .map(|(p, _)| p.as_path())
                    .collect(),
            )?,
            hidden_dirs: cstrings(
                self.hidden
                    .iter()
                    .filter(|(_, dir)| *dir)
                    .map(|(p, _)| p.as_path())
                    .collect(),
            )?,
        })
    }
}

/// A C string for the child, or a clear refusal.
pub(crate) fn cstring(bytes: &[u8], what: &str) -> Result<CString, SpawnError> {
    CString::new(bytes)
        .map_err(|_| SpawnError::InvalidRequest(format!("{what} contains a NUL byte")))
}

/// Environment names must be non-empty without `=` or NUL; values without NUL.
pub(crate) fn check_env(env: &[(String, String)]) -> Result<(), SpawnError> {
    for (k, v) in env {
        if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
            return Err(SpawnError::InvalidRequest(format!(
                "environment variable {k:?}: names must be non-empty without `=` or NUL, values \
                 without NUL"
            )));
        }
    }
    Ok(())
}
