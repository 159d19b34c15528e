//! The embedded approval store: one SQLite file (the library compiled in,
//! nothing to install or run).
//!
//! The file is authority: whoever writes it can approve any call. So it is
//! made owner-only (`0600`, refusing a file others can write, a symlink, or
//! someone else's file), by default in the state directory, and the host
//! hides it (and SQLite's `-wal`/`-shm`/`-journal` files beside it) from
//! every grant (`lifecycle::authority`).
//!
//! Each entry and grant is a row: its id, its state, and the whole value
//! as JSON. Write-ahead logging with `synchronous = NORMAL`: a change is
//! on disk before the call that made it returns as far as a crash of the
//! host goes (a power cut may lose the last ones). Every operation runs on
//! the blocking pool, one at a time (the connection is behind a mutex):
//! each is a single short statement or transaction.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::store::{ApprovalStore, Decided, Entry, EntryState, Grant, Listing, StoreError};

/// The store's file name in the state directory (`[approval] store`
/// unset).
pub const DEFAULT_FILE: &str = "approvals.sqlite";

/// The approval store in a SQLite file.
pub struct SqliteStore {
    path: PathBuf,
    conn: Arc<Mutex<Connection>>,
}

/// SQLite's own files beside the database: as secret as the database.
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

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS entries (
    id TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    since_ms INTEGER NOT NULL,
    decided_ms INTEGER,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_state ON entries (state, since_ms);
CREATE INDEX IF NOT EXISTS entries_decided ON entries (decided_ms);
CREATE TABLE IF NOT EXISTS grants (
    id TEXT PRIMARY KEY,
    revoked INTEGER NOT NULL DEFAULT 0,
    body TEXT NOT NULL
);
";

fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

impl SqliteStore {
    /// Opens (creating, owner-only) the store at `path`.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let fail = |message: String| StoreError::Open {
            path: path.display().to_string(),
            message,
        };
        crate::state::private_file(path).map_err(fail)?;
        let conn = Connection::open(path).map_err(|e| fail(e.to_string()))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(|e| fail(e.to_string()))?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(|e| fail(e.to_string()))?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(|e| fail(e.to_string()))?;
        conn.execute_batch(SCHEMA)
            .map_err(|e| fail(format!("cannot create its tables: {e}")))?;
        Ok(SqliteStore {
            path: path.to_path_buf(),
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on the connection, on the blocking pool.
    async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let mut conn = conn.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut conn)
        })
        .await
        .map_err(backend)?
    }
}

fn entry_of(body: String) -> Result<Entry, StoreError> {
    serde_json::from_str(&body).map_err(|e| backend(format!("an entry does not parse: {e}")))
}

fn grant_of(body: String) -> Result<Grant, StoreError> {
    serde_json::from_str(&body).map_err(|e| backend(format!("a grant does not parse: {e}")))
}

fn json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(backend)
}

#[async_trait]
impl ApprovalStore for SqliteStore {
    async fn put_pending(&self, entry: &Entry) -> Result<(), StoreError> {
        let id = entry.id.clone();
        let since = entry.since_ms as i64;
        let body = json(entry)?;
        self.with(move |c| {
            c.execute(
                "INSERT INTO entries (id, state, since_ms, body) VALUES (?1, 'pending', ?2, ?3)",
                params![id, since, body],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn decide(
        &self,
        id: &str,
        state: EntryState,
        decided: &Decided,
    ) -> Result<Option<Entry>, StoreError> {
        let id = id.to_string();
        let decided = decided.clone();
        self.with(move |c| {
            let tx = c.transaction().map_err(backend)?;
            let body: Option<String> = tx
                .query_row(
                    "SELECT body FROM entries WHERE id = ?1 AND state = 'pending'",
                    params![id],
                    |r| r.get(0),
                )
                .optional()
                .map_err(backend)?;
            let Some(body) = body else {
                return Ok(None);
            };
            let mut entry = entry_of(body)?;
            entry.state = state;
            entry.decided = Some(decided.clone());
            tx.execute(
                "UPDATE entries SET state = ?2, decided_ms = ?3, body = ?4 WHERE id = ?1",
                params![id, state.as_str(), decided.at_ms as i64, json(&entry)?],
            )
            .map_err(backend)?;
            // The history keeps the last decisions only.
            tx.execute(
                "DELETE FROM entries WHERE state != 'pending' AND id NOT IN \
                 (SELECT id FROM entries WHERE state != 'pending' ORDER BY decided_ms DESC LIMIT ?1)",
                params![crate::budgets::APPROVAL_KEEP_DECIDED as i64],
            )
            .map_err(backend)?;
            tx.commit().map_err(backend)?;
            Ok(Some(entry))
        })
        .await
    }

    async fn run_once(&self, id: &str, at_ms: u64) -> Result<Option<Entry>, StoreError> {
        let id = id.to_string();
        self.with(move |c| {
            let tx = c.transaction().map_err(backend)?;
            let body: Option<String> = tx
                .query_row(
                    "SELECT body FROM entries WHERE id = ?1 AND state = 'approved'",
                    params![id],
                    |r| r.get(0),
                )
                .optional()
                .map_err(backend)?;
            let Some(body) = body else {
                return Ok(None);
            };
            let mut entry = entry_of(body)?;
            match &mut entry.retry {
                Some(retry) if retry.ran_ms.is_none() => retry.ran_ms = Some(at_ms),
                _ => return Ok(None),
            }
            tx.execute(
                "UPDATE entries SET body = ?2 WHERE id = ?1",
                params![id, json(&entry)?],
            )
            .map_err(backend)?;
            tx.commit().map_err(backend)?;
            Ok(Some(entry))
        })
        .await
    }

    async fn list(&self, listing: Listing) -> Result<Vec<Entry>, StoreError> {
        self.with(move |c| {
            let (sql, limit) = match listing {
                Listing::Pending => (
                    "SELECT body FROM entries WHERE state = 'pending' ORDER BY since_ms, id LIMIT ?1",
                    i64::MAX,
                ),
                Listing::Decided(n) => (
                    "SELECT body FROM entries WHERE state != 'pending' ORDER BY decided_ms DESC LIMIT ?1",
                    n as i64,
                ),
            };
            let mut stmt = c.prepare_cached(sql).map_err(backend)?;
            let rows = stmt
                .query_map(params![limit], |r| r.get::<_, String>(0))
                .map_err(backend)?;
            rows.map(|r| r.map_err(backend).and_then(entry_of)).collect()
        })
        .await
    }

    async fn get(&self, id: &str) -> Result<Option<Entry>, StoreError> {
        let id = id.to_string();
        self.with(move |c| {
            c.query_row("SELECT body FROM entries WHERE id = ?1", params![id], |r| {
                r.get::<_, String>(0)
            })
            .optional()
            .map_err(backend)?
            .map(entry_of)
            .transpose()
        })
        .await
    }

    async fn count_pending(&self) -> Result<usize, StoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT count(*) FROM entries WHERE state = 'pending'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n as usize)
            .map_err(backend)
        })
        .await
    }

    async fn put_grant(&self, grant: &Grant) -> Result<(), StoreError> {
        let id = grant.id.clone();
        let body = json(grant)?;
        self.with(move |c| {
            c.execute(
                "INSERT INTO grants (id, revoked, body) VALUES (?1, 0, ?2)",
                params![id, body],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn grants(&self) -> Result<Vec<Grant>, StoreError> {
        self.with(|c| {
            let mut stmt = c
                .prepare_cached("SELECT body FROM grants WHERE revoked = 0 ORDER BY rowid")
                .map_err(backend)?;
            let rows = stmt
                .query_map([], |r| r.get::<_, String>(0))
                .map_err(backend)?;
            rows.map(|r| r.map_err(backend).and_then(grant_of))
                .collect()
        })
        .await
    }

    async fn use_grant(&self, id: &str, now_ms: u64) -> Result<Option<Grant>, StoreError> {
        let id = id.to_string();
        self.with(move |c| {
            let tx = c.transaction().map_err(backend)?;
            let body: Option<String> = tx
                .query_row(
                    "SELECT body FROM grants WHERE id = ?1 AND revoked = 0",
                    params![id],
                    |r| r.get(0),
                )
                .optional()
                .map_err(backend)?;
            let Some(body) = body else {
                return Ok(None);
            };
            let mut grant = grant_of(body)?;
            if !grant.active(now_ms) {
                return Ok(None);
            }
            if let Some(n) = grant.remaining.as_mut() {
                *n -= 1;
            }
            grant.used += 1;
            tx.execute(
                "UPDATE grants SET body = ?2 WHERE id = ?1",
                params![id, json(&grant)?],
            )
            .map_err(backend)?;
            tx.commit().map_err(backend)?;
            Ok(Some(grant))
        })
        .await
    }

    async fn revoke_grant(&self, id: &str, revoked: &Decided) -> Result<Option<Grant>, StoreError> {
        let id = id.to_string();
        let revoked = revoked.clone();
        self.with(move |c| {
            let tx = c.transaction().map_err(backend)?;
            let body: Option<String> = tx
                .query_row(
                    "SELECT body FROM grants WHERE id = ?1 AND revoked = 0",
                    params![id],
                    |r| r.get(0),
                )
                .optional()
                .map_err(backend)?;
            let Some(body) = body else {
                return Ok(None);
            };
            let mut grant = grant_of(body)?;
            grant.revoked = Some(revoked);
            tx.execute(
                "UPDATE grants SET revoked = 1, body = ?2 WHERE id = ?1",
                params![id, json(&grant)?],
            )
            .map_err(backend)?;
            // Revoked grants are history: keep the last ones only.
            tx.execute(
                "DELETE FROM grants WHERE revoked = 1 AND rowid NOT IN \
                 (SELECT rowid FROM grants WHERE revoked = 1 ORDER BY rowid DESC LIMIT ?1)",
                params![crate::budgets::APPROVAL_MAX_GRANTS as i64],
            )
            .map_err(backend)?;
            tx.commit().map_err(backend)?;
            Ok(Some(grant))
        })
        .await
    }
}
