//! The approval queue on the embedded engine: one SQLite file
//! (`approvals.sqlite` in the state directory, or `[approval] store`).
//!
//! The file is authority: whoever writes it can approve any call. So it is
//! owner-only like every store file ([`super`]), and, as host-written data
//! (`config::path::HostData`), hidden from every grant, no grant reaching
//! its directory (see `crate::authority`).
//!
//! Each entry and grant is a row: its id, its state, and the whole value
//! as JSON. Every operation runs on the blocking pool, one at a time:
//! each is a single short statement or transaction; a change reads the
//! row, changes its value and writes it back in one (`change`), so of
//! two racing decisions the second finds the entry decided.

use std::path::Path;

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Transaction, params};

use super::Sqlite;
use crate::approval::store::{
    ApprovalStore, ConsoleSession, Decided, Entry, EntryState, Grant, Listing, StoreError,
};

/// The store's file name in the state directory (`[approval] store`
/// unset).
pub const DEFAULT_FILE: &str = "approvals.sqlite";

/// The approval store in a SQLite file.
pub struct SqliteApprovals {
    db: Sqlite,
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
CREATE TABLE IF NOT EXISTS console_sessions (
    id_sha256 TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    csrf TEXT NOT NULL,
    expires_ms INTEGER NOT NULL
);
";

fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

impl SqliteApprovals {
    /// Opens (creating, owner-only) the store at `path`.
    pub fn open(path: &Path) -> Result<SqliteApprovals, StoreError> {
        let db = Sqlite::open(path, SCHEMA).map_err(|e| StoreError::Open {
            path: e.path,
            message: e.message,
        })?;
        Ok(SqliteApprovals { db })
    }

    /// Where it is.
    pub fn path(&self) -> Option<&Path> {
        self.db.path()
    }

    /// Runs `f` on the connection, on the blocking pool.
    async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.db.blocking(f).await.map_err(backend)?
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

/// One change to one row, atomically: in one transaction, the body that
/// `select` (its `?1` the id) finds is read with `parse`, changed by
/// `change` (`false`: nothing to do, `None`), and handed as JSON to
/// `write`, which stores it (and may trim the history). `None` when no
/// row matches.
fn change<T: serde::Serialize>(
    c: &mut Connection,
    select: &str,
    id: &str,
    parse: fn(String) -> Result<T, StoreError>,
    change: impl FnOnce(&mut T) -> bool,
    write: impl FnOnce(&Transaction<'_>, String) -> rusqlite::Result<()>,
) -> Result<Option<T>, StoreError> {
    let tx = c.transaction().map_err(backend)?;
    let body: Option<String> = tx
        .query_row(select, params![id], |r| r.get(0))
        .optional()
        .map_err(backend)?;
    let Some(body) = body else {
        return Ok(None);
    };
    let mut value = parse(body)?;
    if !change(&mut value) {
        return Ok(None);
    }
    write(&tx, json(&value)?).map_err(backend)?;
    tx.commit().map_err(backend)?;
    Ok(Some(value))
}

#[async_trait]
impl ApprovalStore for SqliteApprovals {
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
            let at_ms = decided.at_ms as i64;
            change(
                c,
                "SELECT body FROM entries WHERE id = ?1 AND state = 'pending'",
                &id,
                entry_of,
                |entry| {
                    entry.state = state;
                    entry.decided = Some(decided);
                    true
                },
                |tx, body| {
                    tx.execute(
                        "UPDATE entries SET state = ?2, decided_ms = ?3, body = ?4 WHERE id = ?1",
                        params![id, state.as_str(), at_ms, body],
                    )?;
                    // The history keeps the last decisions only.
                    tx.execute(
                        "DELETE FROM entries WHERE state != 'pending' AND id NOT IN \
                         (SELECT id FROM entries WHERE state != 'pending' ORDER BY decided_ms DESC LIMIT ?1)",
                        params![crate::budgets::APPROVAL_KEEP_DECIDED as i64],
                    )?;
                    Ok(())
                },
            )
        })
        .await
    }

    async fn run_once(&self, id: &str, at_ms: u64) -> Result<Option<Entry>, StoreError> {
        let id = id.to_string();
        self.with(move |c| {
            change(
                c,
                "SELECT body FROM entries WHERE id = ?1 AND state = 'approved'",
                &id,
                entry_of,
                |entry| match &mut entry.retry {
                    Some(retry) if retry.ran_ms.is_none() => {
                        retry.ran_ms = Some(at_ms);
                        true
                    }
                    _ => false,
                },
                |tx, body| {
                    tx.execute(
                        "UPDATE entries SET body = ?2 WHERE id = ?1",
                        params![id, body],
                    )
                    .map(drop)
                },
            )
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
            change(
                c,
                "SELECT body FROM grants WHERE id = ?1 AND revoked = 0",
                &id,
                grant_of,
                |grant| {
                    if !grant.active(now_ms) {
                        return false;
                    }
                    if let Some(n) = grant.remaining.as_mut() {
                        *n -= 1;
                    }
                    grant.used += 1;
                    true
                },
                |tx, body| {
                    tx.execute(
                        "UPDATE grants SET body = ?2 WHERE id = ?1",
                        params![id, body],
                    )
                    .map(drop)
                },
            )
        })
        .await
    }

    async fn revoke_grant(&self, id: &str, revoked: &Decided) -> Result<Option<Grant>, StoreError> {
        let id = id.to_string();
        let revoked = revoked.clone();
        self.with(move |c| {
            change(
                c,
                "SELECT body FROM grants WHERE id = ?1 AND revoked = 0",
                &id,
                grant_of,
                |grant| {
                    grant.revoked = Some(revoked);
                    true
                },
                |tx, body| {
                    tx.execute(
                        "UPDATE grants SET revoked = 1, body = ?2 WHERE id = ?1",
                        params![id, body],
                    )?;
                    // Revoked grants are history: keep the last ones only.
                    tx.execute(
                        "DELETE FROM grants WHERE revoked = 1 AND rowid NOT IN \
                         (SELECT rowid FROM grants WHERE revoked = 1 ORDER BY rowid DESC LIMIT ?1)",
                        params![crate::budgets::APPROVAL_MAX_GRANTS as i64],
                    )?;
                    Ok(())
                },
            )
        })
        .await
    }

    async fn put_session(&self, session: &ConsoleSession, max: usize) -> Result<(), StoreError> {
        let ConsoleSession {
            id_sha256,
            name,
            csrf,
            expires_ms,
        } = session.clone();
        self.with(move |c| {
            let tx = c.transaction().map_err(backend)?;
            tx.execute(
                "INSERT OR REPLACE INTO console_sessions (id_sha256, name, csrf, expires_ms) \
                 VALUES (?1, ?2, ?3, ?4)",
                params![id_sha256, name, csrf, expires_ms as i64],
            )
            .map_err(backend)?;
            // Expired ones, then the ones that end first beyond `max`.
            tx.execute(
                "DELETE FROM console_sessions WHERE expires_ms <= ?1",
                params![crate::approval::queue::now_ms() as i64],
            )
            .map_err(backend)?;
            tx.execute(
                "DELETE FROM console_sessions WHERE id_sha256 NOT IN \
                 (SELECT id_sha256 FROM console_sessions ORDER BY expires_ms DESC LIMIT ?1)",
                params![max as i64],
            )
            .map_err(backend)?;
            tx.commit().map_err(backend)
        })
        .await
    }

    async fn session(
        &self,
        id_sha256: &str,
        now_ms: u64,
    ) -> Result<Option<ConsoleSession>, StoreError> {
        let id = id_sha256.to_string();
        self.with(move |c| {
            c.query_row(
                "SELECT name, csrf, expires_ms FROM console_sessions \
                 WHERE id_sha256 = ?1 AND expires_ms > ?2",
                params![id, now_ms as i64],
                |r| {
                    Ok(ConsoleSession {
                        id_sha256: id.clone(),
                        name: r.get(0)?,
                        csrf: r.get(1)?,
                        expires_ms: r.get::<_, i64>(2)? as u64,
                    })
                },
            )
            .optional()
            .map_err(backend)
        })
        .await
    }

    async fn end_session(&self, id_sha256: &str) -> Result<(), StoreError> {
        let id = id_sha256.to_string();
        self.with(move |c| {
            c.execute(
                "DELETE FROM console_sessions WHERE id_sha256 = ?1",
                params![id],
            )
            .map(drop)
            .map_err(backend)
        })
        .await
    }
}
