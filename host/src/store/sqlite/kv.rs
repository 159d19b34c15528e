//! The `kv` seam on the embedded engine: one SQLite file (`kv.sqlite` in
//! the state directory), so the seam survives a restart of a single host.
//!
//! Each operation is one short statement or one `BEGIN IMMEDIATE`
//! transaction (the quota is read and written in the same one), run
//! inline on the calling thread: a local transaction takes microseconds,
//! and running it inline keeps the seam synchronous (see
//! [`crate::store::wait_here`]). How the file is opened, and why, is the
//! engine's ([`super`]).
//!
//! The file is made owner-only (`0600`): counters and todo lists are not
//! authority, but they are the plugins' and nobody else's.

use std::path::Path;

use async_trait::async_trait;
use rusqlite::{OptionalExtension, TransactionBehavior, params};

use super::Sqlite;
use crate::budgets::KV_QUOTA_BYTES;
use crate::store::{KvBackend, KvError, OpenError, entry_bytes, parse_counter};

/// The store's file name in the state directory (`[state] path` unset).
pub const DEFAULT_FILE: &str = "kv.sqlite";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS kv (
    plugin TEXT NOT NULL,
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    value BLOB NOT NULL,
    PRIMARY KEY (plugin, scope, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS kv_bytes (
    plugin TEXT PRIMARY KEY,
    bytes INTEGER NOT NULL
) WITHOUT ROWID;
";

/// The `kv` seam's state in a SQLite file (or in memory).
pub struct SqliteKv {
    db: Sqlite,
}

impl SqliteKv {
    /// Opens (creating, owner-only) the store at `path`.
    pub fn open(path: &Path) -> Result<SqliteKv, OpenError> {
        let db = Sqlite::open(path, SCHEMA).map_err(|e| OpenError::File {
            path: e.path,
            message: e.message,
        })?;
        Ok(SqliteKv { db })
    }

    /// A store in memory, for the host's lifetime only (a host with no
    /// state directory; tests).
    pub fn memory() -> SqliteKv {
        SqliteKv {
            db: Sqlite::memory(SCHEMA).expect("SQLite opens an in-memory database"),
        }
    }

    fn backend(&self, e: impl std::fmt::Display) -> KvError {
        KvError::Backend {
            store: self.db.describe().to_string(),
            message: e.to_string(),
        }
    }

    /// Runs `f` in one immediate (writing) transaction, committed when it
    /// returns `Ok`.
    fn write<T>(
        &self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T, KvError>,
    ) -> Result<T, KvError> {
        let mut conn = self.db.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.backend(e))?;
        let out = f(&tx)?;
        tx.commit().map_err(|e| self.backend(e))?;
        Ok(out)
    }

    /// Replace `key`'s value (`old_len`: the bytes of the value there, if
    /// any) with `value`, within the quota.
    fn put(
        &self,
        tx: &rusqlite::Transaction<'_>,
        plugin: &str,
        scope: &str,
        key: &str,
        old_len: Option<usize>,
        value: &[u8],
    ) -> Result<(), KvError> {
        let bytes: i64 = tx
            .query_row(
                "SELECT bytes FROM kv_bytes WHERE plugin = ?1",
                params![plugin],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.backend(e))?
            .unwrap_or(0);
        let old = old_len.map_or(0, |l| entry_bytes(scope, key, l));
        let total =
            (bytes.max(0) as usize).saturating_sub(old) + entry_bytes(scope, key, value.len());
        if total > KV_QUOTA_BYTES {
            return Err(KvError::Quota { total });
        }
        tx.execute(
            "INSERT INTO kv (plugin, scope, key, value) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (plugin, scope, key) DO UPDATE SET value = excluded.value",
            params![plugin, scope, key, value],
        )
        .map_err(|e| self.backend(e))?;
        tx.execute(
            "INSERT INTO kv_bytes (plugin, bytes) VALUES (?1, ?2)
             ON CONFLICT (plugin) DO UPDATE SET bytes = excluded.bytes",
            params![plugin, total as i64],
        )
        .map_err(|e| self.backend(e))?;
        Ok(())
    }

    /// The value under `key` now (in a transaction, or alone).
    fn current(
        &self,
        conn: &rusqlite::Connection,
        plugin: &str,
        scope: &str,
        key: &str,
    ) -> Result<Option<Vec<u8>>, KvError> {
        conn.query_row(
            "SELECT value FROM kv WHERE plugin = ?1 AND scope = ?2 AND key = ?3",
            params![plugin, scope, key],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| self.backend(e))
    }
}

#[async_trait]
impl KvBackend for SqliteKv {
    fn describe(&self) -> String {
        self.db.describe().to_string()
    }

    async fn get(&self, plugin: &str, scope: &str, key: &str) -> Result<Option<Vec<u8>>, KvError> {
        self.current(&self.db.lock(), plugin, scope, key)
    }

    async fn set(&self, plugin: &str, scope: &str, key: &str, value: &[u8]) -> Result<(), KvError> {
        self.write(|tx| {
            let old = self.current(tx, plugin, scope, key)?;
            self.put(tx, plugin, scope, key, old.map(|v| v.len()), value)
        })
    }

    async fn delete(&self, plugin: &str, scope: &str, key: &str) -> Result<(), KvError> {
        self.write(|tx| {
            let Some(old) = self.current(tx, plugin, scope, key)? else {
                return Ok(());
            };
            tx.execute(
                "DELETE FROM kv WHERE plugin = ?1 AND scope = ?2 AND key = ?3",
                params![plugin, scope, key],
            )
            .map_err(|e| self.backend(e))?;
            tx.execute(
                "UPDATE kv_bytes SET bytes = max(bytes - ?2, 0) WHERE plugin = ?1",
                params![plugin, entry_bytes(scope, key, old.len()) as i64],
            )
            .map_err(|e| self.backend(e))?;
            Ok(())
        })
    }

    async fn keys(&self, plugin: &str, scope: &str, prefix: &str) -> Result<Vec<String>, KvError> {
        let conn = self.db.lock();
        let mut stmt = conn
            .prepare_cached(
                "SELECT key FROM kv WHERE plugin = ?1 AND scope = ?2 AND key >= ?3 ORDER BY key",
            )
            .map_err(|e| self.backend(e))?;
        let rows = stmt
            .query_map(params![plugin, scope, prefix], |r| r.get::<_, String>(0))
            .map_err(|e| self.backend(e))?;
        let mut out = Vec::new();
        for row in rows {
            let key = row.map_err(|e| self.backend(e))?;
            if !key.starts_with(prefix) {
                break;
            }
            out.push(key);
        }
        Ok(out)
    }

    async fn increment(
        &self,
        plugin: &str,
        scope: &str,
        key: &str,
        delta: i64,
    ) -> Result<i64, KvError> {
        self.write(|tx| {
            let old = self.current(tx, plugin, scope, key)?;
            let n = match &old {
                Some(v) => parse_counter(key, v)?,
                None => 0,
            };
            let n = n
                .checked_add(delta)
                .ok_or_else(|| KvError::Overflow { key: key.into() })?;
            self.put(
                tx,
                plugin,
                scope,
                key,
                old.map(|v| v.len()),
                n.to_string().as_bytes(),
            )?;
            Ok(n)
        })
    }

    async fn compare_and_swap(
        &self,
        plugin: &str,
        scope: &str,
        key: &str,
        expected: Option<&[u8]>,
        value: &[u8],
    ) -> Result<bool, KvError> {
        self.write(|tx| {
            let old = self.current(tx, plugin, scope, key)?;
            if old.as_deref() != expected {
                return Ok(false);
            }
            self.put(tx, plugin, scope, key, old.map(|v| v.len()), value)?;
            Ok(true)
        })
    }

    async fn ping(&self) -> Result<(), KvError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::wait_here;

    fn run<T>(
        s: &SqliteKv,
        f: impl std::future::Future<Output = Result<T, KvError>>,
    ) -> Result<T, KvError> {
        wait_here(s, f)
    }

    /// The embedded store answers at the first poll (so the seam stays
    /// synchronous) and its state survives reopening the file.
    #[test]
    fn state_survives_a_restart_and_counts_exactly() {
        let dir = super::super::scratch("kv");
        let path = dir.join("kv.sqlite");
        {
            let s = SqliteKv::open(&path).unwrap();
            run(&s, s.set("p", "a", "k", b"v")).unwrap();
            assert_eq!(run(&s, s.increment("p", "a", "n", 5)), Ok(5));
            assert_eq!(run(&s, s.increment("p", "a", "n", -2)), Ok(3));
            assert_eq!(
                run(&s, s.increment("p", "a", "k", 1)),
                Err(KvError::NotInteger { key: "k".into() })
            );
            assert_eq!(
                run(&s, s.increment("p", "a", "n", i64::MAX)),
                Err(KvError::Overflow { key: "n".into() })
            );
            assert_eq!(
                run(&s, s.compare_and_swap("p", "a", "c", None, b"1")),
                Ok(true)
            );
            assert_eq!(
                run(&s, s.compare_and_swap("p", "a", "c", None, b"2")),
                Ok(false)
            );
            assert_eq!(
                run(&s, s.compare_and_swap("p", "a", "c", Some(b"1"), b"2")),
                Ok(true)
            );
        }
        let s = SqliteKv::open(&path).unwrap();
        assert_eq!(run(&s, s.get("p", "a", "k")), Ok(Some(b"v".to_vec())));
        assert_eq!(run(&s, s.get("p", "a", "n")), Ok(Some(b"3".to_vec())));
        assert_eq!(run(&s, s.get("p", "b", "n")), Ok(None));
        assert_eq!(run(&s, s.get("q", "a", "n")), Ok(None));
        assert_eq!(
            run(&s, s.keys("p", "a", "")),
            Ok(vec!["c".into(), "k".into(), "n".into()])
        );
        assert_eq!(run(&s, s.keys("p", "a", "k")), Ok(vec!["k".into()]));
        run(&s, s.delete("p", "a", "k")).unwrap();
        assert_eq!(run(&s, s.get("p", "a", "k")), Ok(None));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_quota_holds_for_every_writing_operation() {
        let s = SqliteKv::memory();
        let big = vec![0u8; KV_QUOTA_BYTES / 2];
        run(&s, s.set("p", "s", "a", &big)).unwrap();
        let e = run(&s, s.set("p", "s", "b", &big)).unwrap_err();
        assert!(matches!(e, KvError::Quota { .. }), "{e}");
        let e = run(&s, s.compare_and_swap("p", "s", "b", None, &big)).unwrap_err();
        assert!(matches!(e, KvError::Quota { .. }), "{e}");
        // Replacing frees the old bytes; deleting frees them all.
        run(&s, s.set("p", "s", "a", b"")).unwrap();
        run(&s, s.set("p", "s", "b", &big)).unwrap();
        run(&s, s.delete("p", "s", "b")).unwrap();
        run(&s, s.set("p", "s", "c", &big)).unwrap();
        // Another plugin has its own quota.
        run(&s, s.set("q", "s", "a", &big)).unwrap();
    }
}
