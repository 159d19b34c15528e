//! The embedded engine: SQLite, compiled in (nothing to install or run),
//! one file per store — `kv.sqlite` for the `kv` seam ([`kv`]),
//! `approvals.sqlite` for the approval queue ([`approvals`]), both in the
//! state directory by default.
//!
//! Why one module for both: a store's file must be opened one way —
//! owner-only (`0600`, refusing a file others can read or write, a
//! symlink, or someone else's file: [`crate::state::private_file`]),
//! write-ahead logging with `synchronous = NORMAL` (a change is on disk
//! before the call that made it returns as far as a crash of the host
//! goes; a power cut may lose the last ones), and a busy timeout, so that
//! two hosts on one file (a `toolgate run` beside a `serve`) wait for
//! SQLite's lock rather than fail. Opened twice by hand, the two stores had
//! drifted (one set the timeout after switching the journal, one before).
//! Here each store brings only its tables and its statements.
//!
//! Why two files and not one: each is placed on its own (`[state] path`,
//! `[approval] store`: a host may keep its own queue beside a shared
//! `kv`), and neither store's lock holds up the other.
//!
//! One connection per file, behind a mutex: every operation is a single
//! short statement or transaction. The `kv` seam runs them inline on the
//! calling thread (so the seam stays synchronous: see
//! [`super::wait_here`]); the approval queue on the blocking pool
//! ([`Sqlite::blocking`]).

pub mod approvals;
pub mod kv;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::Connection;

pub use approvals::SqliteApprovals;
pub use kv::SqliteKv;

/// How long a statement waits for another process's lock on the file
/// before it fails.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// `op`, again while another process holds the file's lock, for at most
/// [`BUSY_TIMEOUT`]: opening a store switches its journal and creates its
/// tables, and SQLite answers `SQLITE_BUSY` there at once (without its
/// busy handler) while another process opens, recovers or checkpoints the
/// same file — two `toolgate run` started together failed with "database
/// is locked".
fn while_busy<T>(mut op: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        match op() {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            r => return r,
        }
    }
}

/// A file that could not be opened as a store: where, and why (the
/// owner-only check's words, or SQLite's). Each store says it in its own
/// terms ([`super::OpenError::File`], `StoreError::Open`).
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct OpenFailed {
    pub path: String,
    pub message: String,
}

/// One SQLite database with a store's tables.
pub struct Sqlite {
    /// What it is, for messages: `sqlite:/path` or `sqlite::memory:`.
    what: String,
    path: Option<PathBuf>,
    conn: Arc<Mutex<Connection>>,
}

impl Sqlite {
    /// Opens (creating, owner-only) the database at `path`, with the
    /// tables of `schema`.
    pub fn open(path: &Path, schema: &str) -> Result<Sqlite, OpenFailed> {
        let fail = |message: String| OpenFailed {
            path: path.display().to_string(),
            message,
        };
        crate::state::private_file(path).map_err(fail)?;
        let conn = Connection::open(path).map_err(|e| fail(e.to_string()))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| fail(e.to_string()))?;
        while_busy(|| conn.pragma_update(None, "journal_mode", "WAL"))
            .map_err(|e| fail(e.to_string()))?;
        Self::with_tables(conn, schema, format!("sqlite:{}", path.display()))
            .map(|db| Sqlite {
                path: Some(path.to_path_buf()),
                ..db
            })
            .map_err(fail)
    }

    /// A database in memory, for the host's lifetime only (a host with no
    /// state directory; tests).
    pub fn memory(schema: &str) -> Result<Sqlite, OpenFailed> {
        let fail = |message: String| OpenFailed {
            path: ":memory:".into(),
            message,
        };
        let conn = Connection::open_in_memory().map_err(|e| fail(e.to_string()))?;
        Self::with_tables(conn, schema, "sqlite::memory:".into()).map_err(fail)
    }

    fn with_tables(conn: Connection, schema: &str, what: String) -> Result<Sqlite, String> {
        while_busy(|| conn.pragma_update(None, "synchronous", "NORMAL"))
            .map_err(|e| e.to_string())?;
        while_busy(|| conn.execute_batch(schema))
            .map_err(|e| format!("cannot create its tables: {e}"))?;
        Ok(Sqlite {
            what,
            path: None,
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// What it is, for messages (`sqlite:/path`).
    pub fn describe(&self) -> &str {
        &self.what
    }

    /// Its file (`None` in memory).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The connection, for an operation run inline on this thread.
    pub fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the connection on the blocking pool (an async caller
    /// that must not hold its thread while SQLite waits for a lock).
    pub async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> T + Send + 'static,
    ) -> Result<T, tokio::task::JoinError> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let mut conn = conn.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut conn)
        })
        .await
    }
}

/// SQLite's own files beside the database at `path` (`-wal`, `-shm`,
/// `-journal`): they hold what the database holds.
pub fn companion_files(path: &Path) -> Vec<PathBuf> {
    ["-wal", "-shm", "-journal"]
        .iter()
        .map(|s| {
            let mut p = path.as_os_str().to_owned();
            p.push(s);
            PathBuf::from(p)
        })
        .collect()
}

/// A fresh directory for a test's files (removed by the test).
#[cfg(test)]
pub(crate) fn scratch(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "toolgate-{tag}-test-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_others_could_write_or_a_symlink_is_refused_saying_where() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch("sqlite");
        let path = dir.join("s.sqlite");
        let db = Sqlite::open(&path, "CREATE TABLE t (x);").unwrap();
        assert_eq!(db.path(), Some(path.as_path()));
        assert_eq!(db.describe(), format!("sqlite:{}", path.display()));
        drop(db);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Sqlite::open(&path, "").err().expect("readable by others");
        assert_eq!(e.path, path.display().to_string());
        assert!(e.message.contains("owner-only"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.join("link.sqlite");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let e = Sqlite::open(&link, "").err().expect("a symlink");
        assert!(e.message.contains("symlink"), "{e}");
        // A schema that does not apply is an open error, not a panic later.
        let e = Sqlite::open(&path, "CREATE TABLE")
            .err()
            .expect("bad schema");
        assert!(e.message.contains("cannot create its tables"), "{e}");
        assert_eq!(
            companion_files(&path)[0],
            PathBuf::from(format!("{}-wal", path.display()))
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Many hosts opening one fresh file at once (each `toolgate run` of
    /// a script started together) all open it: none fails with "database
    /// is locked" while another switches the journal or makes the tables.
    #[test]
    fn many_opening_one_file_at_once_all_open_it() {
        let dir = scratch("sqlite-race");
        std::fs::create_dir_all(&dir).unwrap();
        for round in 0..5 {
            let path = dir.join(format!("s{round}.sqlite"));
            let start = Arc::new(std::sync::Barrier::new(12));
            let opened: Vec<_> = (0..12)
                .map(|_| {
                    let (path, start) = (path.clone(), start.clone());
                    std::thread::spawn(move || {
                        start.wait();
                        Sqlite::open(
                            &path,
                            "CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v);",
                        )
                        .map(drop)
                    })
                })
                .collect();
            for o in opened {
                o.join().unwrap().expect("opened");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
