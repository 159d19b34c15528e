//! The sandbox's view of the file system, in the parent: grants made
//! canonical, the working directory and the program checked against them,
//! and the same view expressed as Landlock rules and as the mount plan.
//!
//! Paths are canonicalized once, here, so that a symlink in a grant (or in
//! `PATH`) is judged by where it leads — which is also what Landlock and the
//! mount view enforce.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::child::{self, MountPlan};
use crate::error::SpawnError;
use crate::landlock::{PathRule, RulesetSpec, fs};
use crate::policy::SandboxPolicy;
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
        Ok(View { system, grants })
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
    /// read-only tree, and read-only grants nested in them made read-only
    /// again (a path granted both ways stays read-write).
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
