//! The pids cgroup: the kernel's own per-sandbox task limit.
//!
//! Each sandbox with a process limit gets a cgroup of its own in the pids
//! hierarchy, `<host's cgroup>/toolgate/<host pid>-<n>`, with `pids.max` set to
//! the limit. The parent creates it and opens its join file; the child joins
//! it first thing between `fork` and `exec` (one `write` of `"0"`, i.e. "the
//! calling task", on that descriptor: async-signal-safe, nothing to format).
//! From then on every `fork`, `vfork`, `clone` and new thread of the sandbox
//! is charged to that cgroup by the kernel and fails with `EAGAIN` at the
//! limit. Nothing waits for the host, so a signal can never interrupt a fork
//! halfway (which is what the seccomp-notification fallback in
//! [`crate::supervisor`] cannot fully rule out).
//!
//! The sandbox cannot leave its cgroup or raise its limit: `/sys` is outside
//! its view (Landlock), every mount is read-only in its mount namespace, and
//! it holds no capability.
//!
//! The cgroup is removed (`rmdir`) when the sandbox's handle is dropped, which
//! happens after the group was killed and reaped. A cgroup whose last tasks are
//! still exiting refuses removal (`EBUSY`) for a moment; it is then handed to a
//! background thread that retries for a minute. Cgroups left behind by a host
//! that died are removed the next time a host starts (only empty cgroups can be
//! removed at all, so this never disturbs a running sandbox).
//!
//! Where the hierarchy is:
//!
//! * **cgroup v1** with the `pids` controller mounted (`/sys/fs/cgroup/pids`
//!   on most systems): the `toolgate` directory goes beneath the host's own
//!   pids cgroup, so whatever limits the host also limits its sandboxes. The
//!   child joins through the `tasks` file, which moves just the calling thread
//!   (the only one a freshly forked child has) without taking the kernel's
//!   global thread-group lock that `cgroup.procs` needs.
//! * **cgroup v2**, used only where the kernel allows it without moving the
//!   host: the v2 "no internal processes" rule forbids enabling `pids` for the
//!   children of a cgroup that holds processes, so `toolgate` goes either
//!   beneath the host's own cgroup when that already has `pids` in its
//!   `cgroup.subtree_control` (the root cgroup), or beside it when the parent
//!   is a delegated cgroup (systemd marks those with the `trusted.delegate` /
//!   `user.delegate` extended attribute, e.g. a unit with `Delegate=pids` and
//!   `DelegateSubgroup=`) that has `pids` enabled for its children. The child
//!   joins through `cgroup.procs`.
//!
//! Whether any of this works is probed for real ([`probe`]): create a cgroup,
//! limit it to one task, move a throwaway child into it and check that its
//! `fork` fails with `EAGAIN`.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{OnceLock, mpsc};
use std::time::{Duration, Instant};

/// The directory created beneath (or beside) the host's cgroup.
const BASE_NAME: &str = "toolgate";

/// How long the background thread keeps trying to remove a busy cgroup.
const REMOVAL_PATIENCE: Duration = Duration::from_secs(60);

/// A usable pids hierarchy.
#[derive(Debug)]
pub(crate) struct Hierarchy {
    /// cgroup v2 (join through `cgroup.procs`) rather than v1 (`tasks`).
    v2: bool,
    /// `.../toolgate`: every sandbox gets a child directory here.
    base: PathBuf,
}

impl Hierarchy {
    fn join_file(&self) -> &'static str {
        if self.v2 { "cgroup.procs" } else { "tasks" }
    }
}

/// The pids hierarchy of this host, located (and its `toolgate` directory
/// created) once per process.
pub(crate) fn hierarchy() -> Option<&'static Hierarchy> {
    static H: OnceLock<Option<Hierarchy>> = OnceLock::new();
    H.get_or_init(|| {
        let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let h = locate(&cgroups, &mounts)?;
        sweep_stale(&h.base);
        Some(h)
    })
    .as_ref()
}

fn locate(cgroups: &str, mounts: &str) -> Option<Hierarchy> {
    let mounts = parse_mountinfo(mounts);
    // v1: a hierarchy with the pids controller.
    if let Some(own) = cgroups.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_id, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        ctrls.split(',').any(|c| c == "pids").then_some(path)
    }) && let Some(m) = mounts
        .iter()
        .find(|m| m.fstype == "cgroup" && m.super_options.split(',').any(|o| o == "pids"))
        && let Some(dir) = m.dir_of(own)
    {
        let base = dir.join(BASE_NAME);
        return ensure_dir(&base).then_some(Hierarchy { v2: false, base });
    }
    // v2: only where pids can be enabled for the sandboxes without moving the host.
    let own = cgroups.lines().find_map(|l| l.strip_prefix("0::"))?;
    let m = mounts.iter().find(|m| m.fstype == "cgroup2")?;
    let dir = m.dir_of(own)?;
    let parent = if enables_pids(&dir) {
        dir
    } else {
        let parent = dir.parent()?.to_path_buf();
        if !parent.starts_with(&m.mount_point) || !delegated(&parent) || !enables_pids(&parent) {
            return None;
        }
        parent
    };
    let base = parent.join(BASE_NAME);
    if !ensure_dir(&base) {
        return None;
    }
    // The sandboxes' cgroups below `base` need pids.max.
    if !enables_pids(&base) && std::fs::write(base.join("cgroup.subtree_control"), "+pids").is_err()
    {
        return None;
    }
    Some(Hierarchy { v2: true, base })
}

/// Whether v2 cgroup `dir` enables the pids controller for its children.
fn enables_pids(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.subtree_control"))
        .is_ok_and(|s| s.split_whitespace().any(|c| c == "pids"))
}

/// Whether v2 cgroup `dir` was delegated (systemd's marker attribute).
fn delegated(dir: &Path) -> bool {
    let Ok(path) = CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    [c"trusted.delegate", c"user.delegate"].iter().any(|name| {
        let mut v = [0u8; 8];
        let n = unsafe {
            libc::getxattr(
                path.as_ptr(),
                name.as_ptr(),
                v.as_mut_ptr() as *mut libc::c_void,
                v.len(),
            )
        };
        n > 0 && v[0] == b'1'
    })
}

fn ensure_dir(dir: &Path) -> bool {
    match std::fs::create_dir(dir) {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => dir.is_dir(),
        Err(_) => false,
    }
}

/// Removes the (empty) cgroups of hosts that are gone.
fn sweep_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    let me = std::process::id();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != me && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

/// One line of /proc/self/mountinfo, the fields we need.
#[derive(Debug)]
struct Mount {
    /// The path of the mount's root inside its file system (the hierarchy).
    root: String,
    mount_point: PathBuf,
    fstype: String,
    super_options: String,
}

impl Mount {
    /// Where cgroup `path` (as /proc/self/cgroup names it) is in this mount.
    fn dir_of(&self, path: &str) -> Option<PathBuf> {
        let rel = if self.root == "/" {
            path
        } else {
            let rest = path.strip_prefix(self.root.as_str())?;
            if !rest.is_empty() && !rest.starts_with('/') {
                return None;
            }
            rest
        };
        let rel = rel.trim_start_matches('/');
        if rel.split('/').any(|c| c == "..") {
            return None;
        }
        Some(if rel.is_empty() {
            self.mount_point.clone()
        } else {
            self.mount_point.join(rel)
        })
    }
}

fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let pre: Vec<&str> = pre.split(' ').collect();
            let mut post = post.split(' ');
            Some(Mount {
                root: unescape(pre.get(3)?),
                mount_point: PathBuf::from(unescape(pre.get(4)?)),
                fstype: post.next()?.to_string(),
                super_options: post.nth(1).unwrap_or("").to_string(),
            })
        })
        .collect()
}

/// Undoes mountinfo's octal escapes (`\040` for a space…).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A sandbox's own pids cgroup. Removed on drop.
#[derive(Debug)]
pub(crate) struct SandboxCgroup {
    path: PathBuf,
    /// The join file, open for the child to write to; closed once spawned.
    join: Option<OwnedFd>,
}

impl SandboxCgroup {
    /// Creates a cgroup limited to `max` tasks, ready to be joined.
    pub(crate) fn create(max: u32) -> io::Result<SandboxCgroup> {
        static N: AtomicU64 = AtomicU64::new(0);
        let h = hierarchy().ok_or_else(|| io::Error::other("no usable pids cgroup hierarchy"))?;
        Self::create_in(
            h,
            &format!(
                "{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ),
            max,
        )
    }

    fn create_in(h: &Hierarchy, name: &str, max: u32) -> io::Result<SandboxCgroup> {
        let path = h.base.join(name);
        std::fs::create_dir(&path)?;
        let mut cg = SandboxCgroup { path, join: None };
        std::fs::write(cg.path.join("pids.max"), max.to_string())?;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(cg.path.join(h.join_file()))?;
        cg.join = Some(file.into());
        Ok(cg)
    }

    /// The descriptor the child writes `"0"` to (see [`join`]).
    pub(crate) fn join_fd(&self) -> Option<RawFd> {
        self.join.as_ref().map(|f| f.as_raw_fd())
    }

    /// Closes the join descriptor (the child has joined, or failed to).
    pub(crate) fn joined(&mut self) {
        self.join = None;
    }

    /// The cgroup's directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SandboxCgroup {
    fn drop(&mut self) {
        self.join = None;
        match std::fs::remove_dir(&self.path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(_) => remove_later(std::mem::take(&mut self.path)),
        }
    }
}

/// In the child: moves the calling task into the cgroup whose join file is
/// open on `fd`. Async-signal-safe.
pub(crate) fn join(fd: RawFd) -> Result<(), i32> {
    let n = unsafe { libc::write(fd, b"0".as_ptr() as *const libc::c_void, 1) };
    if n == 1 {
        Ok(())
    } else if n < 0 {
        Err(crate::sys::errno())
    } else {
        Err(libc::EIO)
    }
}

/// Hands a cgroup that is still busy (its last tasks exiting) to a
/// background thread that retries its removal.
fn remove_later(path: PathBuf) {
    static QUEUE: OnceLock<Option<mpsc::Sender<PathBuf>>> = OnceLock::new();
    let queue = QUEUE.get_or_init(|| {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("toolgate-cgroup-reaper".into())
            .spawn(move || remover(rx))
            .ok()
            .map(|_| tx)
    });
    let sent = match queue {
        Some(tx) => tx.send(path).map_err(|e| e.0),
        None => Err(path),
    };
    if let Err(path) = sent {
        tracing::warn!(cgroup = %path.display(), "could not remove a sandbox's pids cgroup");
    }
}

fn remover(rx: mpsc::Receiver<PathBuf>) {
    let mut pending: Vec<(PathBuf, Instant)> = Vec::new();
    let mut pause = Duration::from_millis(5);
    loop {
        let next = if pending.is_empty() {
            rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected)
        } else {
            rx.recv_timeout(pause)
        };
        match next {
            Ok(p) => {
                pending.push((p, Instant::now()));
                pause = Duration::from_millis(5);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => pause = (pause * 2).min(Duration::from_secs(1)),
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
        pending.retain(|(path, since)| match std::fs::remove_dir(path) {
            Ok(()) => false,
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) if since.elapsed() > REMOVAL_PATIENCE => {
                tracing::warn!(cgroup = %path.display(), error = %e, "giving up removing a sandbox's pids cgroup");
                false
            }
            Err(_) => true,
        });
    }
}

/// Whether a pids cgroup can be created, limited and joined here, and
/// limits `fork` (tried for real with a throwaway child).
pub(crate) fn probe() -> bool {
    let Some(h) = hierarchy() else {
        return false;
    };
    let Ok(mut cg) = SandboxCgroup::create_in(h, &format!("{}-probe", std::process::id()), 1)
    else {
        return false;
    };
    let Some(fd) = cg.join_fd() else {
        return false;
    };
    let ok = unsafe {
        let pid = libc::fork();
        if pid < 0 {
            return false;
        }
        if pid == 0 {
            // Joined and limited to itself: a fork must fail with EAGAIN.
            if join(fd).is_err() {
                libc::_exit(2);
            }
            let r = libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_long, 0, 0, 0, 0);
            if r == 0 {
                libc::_exit(0);
            }
            libc::_exit(if r < 0 && crate::sys::errno() == libc::EAGAIN {
                0
            } else {
                1
            });
        }
        crate::sys::wait_exit_ok(pid)
    };
    cg.joined();
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
42 31 0:39 /ns /mnt/odd\\040place rw - cgroup cgroup rw,cpu,pids
";

    #[test]
    fn parses_mountinfo() {
        let m = parse_mountinfo(MOUNTINFO);
        assert_eq!(m.len(), 5);
        assert_eq!(m[2].mount_point, PathBuf::from("/sys/fs/cgroup/pids"));
        assert_eq!(
            (m[2].fstype.as_str(), m[2].super_options.as_str()),
            ("cgroup", "rw,pids")
        );
        assert_eq!(m[3].fstype, "cgroup2");
        assert_eq!(m[4].mount_point, PathBuf::from("/mnt/odd place"));
        assert_eq!(m[4].root, "/ns");
    }

    #[test]
    fn maps_cgroup_paths_into_mounts() {
        let m = parse_mountinfo(MOUNTINFO);
        assert_eq!(m[2].dir_of("/"), Some(PathBuf::from("/sys/fs/cgroup/pids")));
        assert_eq!(
            m[2].dir_of("/a/b"),
            Some(PathBuf::from("/sys/fs/cgroup/pids/a/b"))
        );
        assert_eq!(
            m[4].dir_of("/ns/x"),
            Some(PathBuf::from("/mnt/odd place/x"))
        );
        assert_eq!(m[4].dir_of("/ns"), Some(PathBuf::from("/mnt/odd place")));
        // Outside the mount's root, or a sibling sharing a prefix.
        assert_eq!(m[4].dir_of("/other"), None);
        assert_eq!(m[4].dir_of("/nsx"), None);
        assert_eq!(m[2].dir_of("/a/../../etc"), None);
    }

    #[test]
    fn unescapes_octal() {
        assert_eq!(unescape(r"a\040b\\c"), r"a b\\c");
        assert_eq!(unescape(r"end\04"), r"end\04");
    }
}
