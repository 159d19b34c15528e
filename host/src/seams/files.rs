//! The `files` seam: whole-file writes made by the host, inside the
//! plugin's read-write grants and never into the paths the host protects.
//!
//! Why a seam and not a read-write preopen: a WASI preopen cannot leave out
//! a path beneath it, so a read-write preopen of a working directory would
//! hand a component the host's configuration (`./toolgate.toml`, even when
//! absent), its plugin directories and `.git` — which is why such a grant is
//! refused at load (see [`crate::plugin::grants`]). A grant marked
//! `spawn_only = true` is not preopened; this seam writes beneath it the
//! way the sandbox lets spawned processes write: everywhere except the
//! protected paths.
//!
//! How a write stays inside: the path is walked one directory at a time
//! with cap-std (no `..`, no symlink leaving the grant); before anything is
//! created in or opened beneath a directory, where that open directory
//! really is is read back from `/proc/self/fd` — the answer no later rename
//! or symlink swap can change — and a step that is, or lies beneath, a
//! protected path is refused (so not even an empty directory appears in
//! `.git`). The file is opened relative
//! to that directory without following a symlink and without blocking (a
//! FIFO is refused, not waited on), and must be a regular file.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, FromRawFd};
use std::path::{Component, Path, PathBuf};

use crate::plugin::grants::{FsGrant, Grants};

/// Largest write: 16 MiB.
pub const MAX_WRITE_BYTES: usize = 16 << 20;

/// The grant a guest path falls under (read-write ones only), and the
/// path's components beneath it.
fn locate<'g>(grants: &'g Grants, path: &str) -> Result<(&'g FsGrant, Vec<String>), String> {
    let p = Path::new(path);
    let writable = || grants.fs.iter().filter(|g| g.writable);
    let (grant, rest) = writable()
        .find_map(|g| {
            if p.is_relative() && (g.guest == "." || g.guest.is_empty()) {
                Some((g, p.to_path_buf()))
            } else {
                p.strip_prefix(&g.guest).ok().map(|r| (g, r.to_path_buf()))
            }
        })
        .ok_or_else(|| {
            if writable().next().is_none() {
                "this plugin has no read-write grant to write into; grant one with `fs = [{ path = \".\", access = \"read-write\", spawn_only = true }]`".to_string()
            } else {
                format!(
                    "`{path}` is not inside a read-write grant (writable: {})",
                    writable()
                        .map(|g| format!("`{}`", g.guest))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        })?;
    let mut parts = Vec::new();
    for c in rest.components() {
        match c {
            Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
            Component::CurDir => {}
            _ => return Err(format!("`{path}` leaves the granted directory (`..`)")),
        }
    }
    if parts.is_empty() {
        return Err(format!("`{path}` names a directory, not a file"));
    }
    Ok((grant, parts))
}

/// `files.write`: replace (or create) the file at the guest path `path`
/// with `contents`, creating its parent directories. Returns the bytes
/// written; `Err` is a sentence for the guest.
pub fn write(grants: &Grants, path: &str, contents: &[u8]) -> Result<u64, String> {
    if contents.len() > MAX_WRITE_BYTES {
        return Err(format!(
            "{} bytes is more than one write may hold ({MAX_WRITE_BYTES})",
            contents.len()
        ));
    }
    let (grant, mut parts) = locate(grants, path)?;
    let name = parts.pop().expect("at least one component");
    let protected = |target: &Path| -> Result<(), String> {
        match grants
            .sandbox
            .protected
            .iter()
            .find(|p| target.starts_with(p))
        {
            Some(p) => Err(format!(
                "`{path}` is (or lies inside) `{}`, which the host protects (its configuration, plugins, compile cache, executable or git metadata); no plugin may write it",
                p.display()
            )),
            None => Ok(()),
        }
    };
    // Where an open directory really is: fixed once it is open, whatever
    // is renamed or swapped for a symlink afterwards.
    let real = |dir: &cap_std::fs::Dir| -> Result<PathBuf, String> {
        let real = std::fs::read_link(format!("/proc/self/fd/{}", dir.as_fd().as_raw_fd()))
            .map_err(|e| format!("cannot tell where `{path}` lies: {e}"))?;
        if !real.starts_with(&grant.host) {
            return Err(format!("`{path}` resolves outside the granted directory"));
        }
        Ok(real)
    };
    let mut dir = cap_std::fs::Dir::open_ambient_dir(&grant.host, cap_std::ambient_authority())
        .map_err(|e| format!("the granted directory cannot be opened: {e}"))?;
    // Down to the file's directory, one component at a time, each checked
    // before anything is created in it.
    for part in &parts {
        protected(&real(&dir)?.join(part))?;
        let next = match dir.open_dir(part) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                dir.create_dir(part)
                    .map_err(|e| format!("cannot create the directories of `{path}`: {e}"))?;
                dir.open_dir(part)
                    .map_err(|e| format!("cannot open the directory of `{path}`: {e}"))?
            }
            Err(e) => return Err(format!("cannot open the directory of `{path}`: {e}")),
        };
        dir = next;
    }
    let fd = dir.as_fd().as_raw_fd();
    protected(&real(&dir)?.join(&name))?;
    let cname = std::ffi::CString::new(name.as_bytes())
        .map_err(|_| format!("`{path}` holds a NUL byte"))?;
    // SAFETY: `fd` is the open directory `dir` owns (alive until the end
    // of this function); `cname` is a valid C string.
    let raw = unsafe {
        libc::openat(
            fd,
            cname.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
            0o644 as libc::c_uint,
        )
    };
    if raw < 0 {
        let e = std::io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ELOOP) => {
                format!("`{path}` is a symlink; write replaces regular files only")
            }
            Some(libc::EISDIR) => format!("`{path}` is a directory"),
            Some(libc::ENXIO) => format!("`{path}` is not a regular file (a FIFO or socket)"),
            _ => format!("cannot open `{path}` for writing: {e}"),
        });
    }
    // SAFETY: `raw` is a new descriptor that nothing else owns.
    let mut file = unsafe { File::from_raw_fd(raw) };
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot look at `{path}`: {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "`{path}` is not a regular file (a FIFO, socket or device); write replaces regular files only"
        ));
    }
    file.set_len(0)
        .and_then(|_| file.write_all(contents))
        .map_err(|e| format!("writing `{path}` failed: {e}"))?;
    Ok(contents.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants(dir: &Path, protected: Vec<PathBuf>) -> Grants {
        let mut g = Grants::default();
        g.fs.push(FsGrant {
            host: dir.canonicalize().unwrap(),
            guest: ".".into(),
            writable: true,
            preopen: false,
        });
        g.sandbox.protected = protected;
        g
    }

    #[test]
    fn writes_inside_and_never_into_protected_paths() {
        let dir = std::env::temp_dir().join(format!("toolgate-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        let outside =
            std::env::temp_dir().join(format!("toolgate-files-out-{}", std::process::id()));
        std::fs::create_dir_all(&outside).unwrap();
        let root = dir.canonicalize().unwrap();
        let g = grants(&dir, vec![root.join(".git"), root.join("toolgate.toml")]);
        assert_eq!(write(&g, "a/b/c.txt", b"hi").unwrap(), 2);
        assert_eq!(std::fs::read(dir.join("a/b/c.txt")).unwrap(), b"hi");
        assert_eq!(write(&g, "a/b/c.txt", b"x").unwrap(), 1);
        assert_eq!(std::fs::read(dir.join("a/b/c.txt")).unwrap(), b"x");
        assert!(
            write(&g, ".git/config", b"x")
                .unwrap_err()
                .contains("protects")
        );
        assert!(
            write(&g, "toolgate.toml", b"x")
                .unwrap_err()
                .contains("protects")
        );
        assert!(!dir.join("toolgate.toml").exists());
        // A symlink to the protected directory, or out of the grant.
        std::os::unix::fs::symlink(".git", dir.join("g")).unwrap();
        assert!(write(&g, "g/hooks/pre-commit", b"x").is_err());
        assert!(!dir.join(".git/hooks").exists());
        std::os::unix::fs::symlink(&outside, dir.join("out")).unwrap();
        assert!(write(&g, "out/x", b"x").is_err());
        assert!(!outside.join("x").exists());
        std::os::unix::fs::symlink(outside.join("f"), dir.join("link")).unwrap();
        assert!(write(&g, "link", b"x").unwrap_err().contains("symlink"));
        assert!(write(&g, "../x", b"x").is_err());
        assert!(write(&g, "/etc/x", b"x").is_err());
        let ro = Grants::default();
        assert!(
            write(&ro, "x", b"x")
                .unwrap_err()
                .contains("read-write grant")
        );
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&outside);
    }
}
