//! Watching plugin directories and the configuration file.
//!
//! The kernel reports changes (inotify, through `notify`); the watcher
//! waits until the changes have *settled*, then asks for one reload, which
//! loads only what changed ([`super`]). Settling is what keeps a half-written
//! file from being loaded:
//!
//! * **Quiet period** ([`WatchOptions::debounce`], default
//!   [`DEFAULT_DEBOUNCE`]): a reload starts only after no relevant event
//!   for that long, so a burst (an editor's write-temp-then-rename, a
//!   `cp` of many files, a `git checkout`) is one reload.
//! * **Files open for writing**: a file that was written to and not yet
//!   closed (`IN_MODIFY` without its `IN_CLOSE_WRITE`) holds the reload
//!   back, however slowly it is written — up to
//!   [`WatchOptions::write_stall`] (default [`DEFAULT_WRITE_STALL`]) without
//!   any event, after which the writer is taken to be stuck and the file
//!   read as it is (a half-written component does not load: it is refused,
//!   and the previous version keeps serving until the complete file
//!   arrives).
//! * **Read twice**: the reload itself stamps a file before and after
//!   reading it, and leaves a file that changed meanwhile for the next
//!   round ([`super::scan`]).
//!
//! Only what can change a generation counts: `*.wasm` and `*.toml` files
//! directly in a watched directory (hidden ones excluded), the
//! configuration file, and a watched directory itself. Opening and reading
//! files (the reload's own reads among them) and metadata changes do not.
//! The configuration file is watched through its directory, so that an
//! editor replacing it by a rename is seen, as is its creation when it did
//! not exist. A symlinked plugin file is read through its link, but a
//! change to the file it points to is not seen until something in the
//! directory changes (or [`crate::Toolgate::reload`] is called).
//!
//! The watcher holds the host weakly: it stops when the last
//! [`crate::Toolgate`] handle is dropped, or when [`Watcher`] is.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
use notify::{EventKind, RecursiveMode, Watcher as _};
use tokio::sync::mpsc;

use super::scan;

/// Default quiet period before a reload.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(50);
/// Default time a file open for writing may go without any event before
/// its writer is taken to be stuck.
pub const DEFAULT_WRITE_STALL: Duration = Duration::from_secs(10);
/// Events buffered between the kernel's thread and the watcher's task;
/// beyond it they are dropped and a reload is asked for anyway.
pub const EVENT_QUEUE: usize = 1024;

/// How the watcher settles.
#[derive(Clone, Copy, Debug)]
pub struct WatchOptions {
    pub debounce: Duration,
    pub write_stall: Duration,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            debounce: DEFAULT_DEBOUNCE,
            write_stall: DEFAULT_WRITE_STALL,
        }
    }
}

/// What the watcher asks of the host.
pub(crate) trait Reloader: Send + Sync + 'static {
    /// Reload; return what to watch now.
    fn reload(&self) -> futures::future::BoxFuture<'_, WatchTargets>;
}

/// What a reload says to watch.
pub(crate) struct WatchTargets {
    /// Plugin directories: their `.wasm` and `.toml` files.
    pub plugin_dirs: Vec<PathBuf>,
    /// The configuration file, by name.
    pub config: Option<PathBuf>,
    /// Skill directories and each skill's own: any change of a name in
    /// them (a skill added or removed, its `SKILL.md` or a resource).
    pub skill_dirs: Vec<PathBuf>,
}

/// A running watcher; dropping it stops watching.
pub struct Watcher {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What is watched: directories (non-recursively), and the configuration
/// file by name.
struct Targets {
    dirs: BTreeSet<PathBuf>,
    config: Option<PathBuf>,
    skills: BTreeSet<PathBuf>,
}

impl Targets {
    fn new(dirs: Vec<PathBuf>, config: Option<PathBuf>) -> Targets {
        Targets {
            dirs: dirs.into_iter().map(|d| absolute(&d)).collect(),
            config: config.map(|c| absolute(&c)),
            skills: BTreeSet::new(),
        }
    }

    fn of(w: WatchTargets) -> Targets {
        let mut t = Targets::new(w.plugin_dirs, w.config);
        t.skills = w.skill_dirs.iter().map(|d| absolute(d)).collect();
        t
    }

    /// The directories to hand to the kernel.
    fn watch_dirs(&self) -> BTreeSet<PathBuf> {
        let mut all = self.dirs.clone();
        all.extend(self.skills.iter().cloned());
        if let Some(parent) = self.config.as_ref().and_then(|c| c.parent()) {
            all.insert(parent.to_path_buf());
        }
        all
    }

    /// Can a change of `path` change a generation?
    fn relevant(&self, path: &Path) -> bool {
        if self.config.as_deref() == Some(path) || self.dirs.contains(path) {
            return true;
        }
        let in_skills = path.parent().is_some_and(|p| self.skills.contains(p));
        if in_skills && !scan::is_hidden(path) {
            return true;
        }
        let in_dir = path.parent().is_some_and(|p| self.dirs.contains(p));
        in_dir
            && !scan::is_hidden(path)
            && path.extension().is_some_and(|e| e == "wasm" || e == "toml")
    }
}

fn absolute(p: &Path) -> PathBuf {
    let p = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(p)
    };
    // Events name paths under the directory as the kernel resolved it.
    match (p.parent(), p.file_name()) {
        _ if p.is_dir() => p.canonicalize().unwrap_or(p),
        (Some(parent), Some(name)) => parent
            .canonicalize()
            .map(|c| c.join(name))
            .unwrap_or(p.clone()),
        _ => p,
    }
}

/// Start watching. The first targets come from `initial`; after every
/// reload, from what `reloader` returns.
pub(crate) fn start(
    reloader: std::sync::Weak<dyn Reloader>,
    initial: WatchTargets,
    options: WatchOptions,
) -> notify::Result<Watcher> {
    let (tx, rx) = mpsc::channel::<notify::Event>(EVENT_QUEUE);
    let overflow = Arc::new(AtomicBool::new(false));
    let flag = overflow.clone();
    let mut kernel =
        notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
            Ok(e) => {
                if tx.try_send(e).is_err() {
                    flag.store(true, Ordering::Relaxed);
                }
            }
            Err(e) => tracing::warn!(error = %e, "the file watcher reported an error"),
        })?;
    let targets = Targets::of(initial);
    let mut watched = BTreeSet::new();
    sync(&mut kernel, &mut watched, &targets);
    let task = tokio::spawn(run(
        reloader, kernel, watched, targets, rx, overflow, options,
    ));
    Ok(Watcher { task })
}

/// Make the kernel watch exactly the directories of `targets` that exist.
fn sync(
    kernel: &mut notify::RecommendedWatcher,
    watched: &mut BTreeSet<PathBuf>,
    targets: &Targets,
) {
    let want = targets.watch_dirs();
    for gone in watched.difference(&want).cloned().collect::<Vec<_>>() {
        let _ = kernel.unwatch(&gone);
        watched.remove(&gone);
    }
    for dir in want {
        if watched.contains(&dir) {
            continue;
        }
        // An absent directory (a default skills directory nobody made)
        // is not an error: it is looked at again after the next reload.
        if !dir.is_dir() {
            tracing::debug!(dir = %dir.display(), "not watched: no such directory (yet)");
            continue;
        }
        match kernel.watch(&dir, RecursiveMode::NonRecursive) {
            Ok(()) => {
                watched.insert(dir);
            }
            Err(e) => tracing::warn!(
                dir = %dir.display(),
                error = %e,
                "cannot watch this directory; its changes are seen at the next reload"
            ),
        }
    }
}

/// What the events seen so far say.
#[derive(Default)]
struct Pending {
    /// A relevant change was seen.
    changed: bool,
    /// When the last relevant event came.
    last: Option<Instant>,
    /// Files written to and not closed yet, with their last write.
    writing: BTreeMap<PathBuf, Instant>,
}

impl Pending {
    fn note(&mut self, event: &notify::Event, targets: &Targets) {
        let counts = match event.kind {
            EventKind::Create(_) | EventKind::Remove(_) => true,
            EventKind::Modify(ModifyKind::Metadata(_)) => false,
            EventKind::Modify(_) => true,
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
            EventKind::Access(_) => false,
            EventKind::Any | EventKind::Other => true,
        };
        if !counts {
            return;
        }
        let now = Instant::now();
        for path in &event.paths {
            if !targets.relevant(path) {
                continue;
            }
            self.changed = true;
            self.last = Some(now);
            match event.kind {
                EventKind::Modify(ModifyKind::Data(_)) => {
                    self.writing.insert(path.clone(), now);
                }
                EventKind::Access(AccessKind::Close(AccessMode::Write))
                | EventKind::Remove(_)
                | EventKind::Modify(ModifyKind::Name(RenameMode::From)) => {
                    self.writing.remove(path);
                }
                _ => {}
            }
        }
    }

    /// When the changes will have settled (`None`: now).
    fn settles_at(&self, options: &WatchOptions) -> Option<Instant> {
        let quiet = self.last.map(|l| l + options.debounce);
        let written = self
            .writing
            .values()
            .max()
            .map(|w| *w + options.write_stall);
        let at = quiet.into_iter().chain(written).max()?;
        (at > Instant::now()).then_some(at)
    }
}

async fn run(
    reloader: std::sync::Weak<dyn Reloader>,
    mut kernel: notify::RecommendedWatcher,
    mut watched: BTreeSet<PathBuf>,
    mut targets: Targets,
    mut rx: mpsc::Receiver<notify::Event>,
    overflow: Arc<AtomicBool>,
    options: WatchOptions,
) {
    let mut pending = Pending::default();
    loop {
        // Wait for a change.
        while !pending.changed {
            let Some(event) = rx.recv().await else {
                return;
            };
            pending.note(&event, &targets);
            if overflow.swap(false, Ordering::Relaxed) {
                pending.changed = true;
                pending.last = Some(Instant::now());
            }
        }
        // Wait for it to settle.
        while let Some(at) = pending.settles_at(&options) {
            tokio::select! {
                event = rx.recv() => match event {
                    Some(e) => pending.note(&e, &targets),
                    None => return,
                },
                _ = tokio::time::sleep_until(at.into()) => {}
            }
        }
        let stuck: Vec<PathBuf> = pending.writing.keys().cloned().collect();
        if !stuck.is_empty() {
            tracing::warn!(
                files = ?stuck,
                stall_ms = options.write_stall.as_millis() as u64,
                "files open for writing with no change for a while; reading them as they are"
            );
        }
        pending = Pending::default();
        let Some(host) = reloader.upgrade() else {
            return;
        };
        let next = host.reload().await;
        drop(host);
        targets = Targets::of(next);
        sync(&mut kernel, &mut watched, &targets);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plugin_files_and_the_configuration_count() {
        let dir = std::env::temp_dir();
        let dir = dir.canonicalize().unwrap();
        let t = Targets::new(vec![dir.join("plugins")], Some(dir.join("toolgate.toml")));
        let p = dir.join("plugins");
        assert!(t.relevant(&p.join("a.wasm")));
        assert!(t.relevant(&p.join("a.toml")));
        assert!(!t.relevant(&p.join(".a.wasm.swp")));
        assert!(!t.relevant(&p.join(".a.wasm")));
        assert!(!t.relevant(&p.join("a.txt")));
        assert!(!t.relevant(&p.join("sub").join("a.wasm")));
        assert!(t.relevant(&dir.join("toolgate.toml")));
        assert!(!t.relevant(&dir.join("other.toml")));
    }

    #[test]
    fn a_file_open_for_writing_holds_the_reload_back() {
        let dir = std::env::temp_dir().canonicalize().unwrap();
        let t = Targets::new(vec![dir.clone()], None);
        let options = WatchOptions {
            debounce: Duration::from_millis(10),
            write_stall: Duration::from_secs(5),
        };
        let mut p = Pending::default();
        let file = dir.join("x.wasm");
        let ev = |kind| notify::Event::new(kind).add_path(file.clone());
        p.note(
            &ev(EventKind::Modify(ModifyKind::Data(
                notify::event::DataChange::Any,
            ))),
            &t,
        );
        let at = p.settles_at(&options).unwrap();
        assert!(at > Instant::now() + Duration::from_secs(4));
        p.note(
            &ev(EventKind::Access(AccessKind::Close(AccessMode::Write))),
            &t,
        );
        let at = p.settles_at(&options).unwrap();
        assert!(at <= Instant::now() + Duration::from_millis(10));
        // Reading does not count.
        let mut q = Pending::default();
        q.note(
            &ev(EventKind::Access(AccessKind::Open(AccessMode::Any))),
            &t,
        );
        q.note(
            &ev(EventKind::Access(AccessKind::Close(AccessMode::Read))),
            &t,
        );
        assert!(!q.changed);
    }
}
