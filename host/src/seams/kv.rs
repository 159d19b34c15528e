//! The `kv` seam: a small key-value store the host keeps for each plugin,
//! one namespace per agent scope.
//!
//! Why in the host: a warm instance's memory is not a place for state that
//! matters — instances are recycled, dropped after a trap, created fresh per
//! call in `fresh` mode, and replaced on reload. A todo list or a rate
//! limiter's counters must outlive all of that. The host keeps them in its
//! state store ([`crate::store`]): an embedded SQLite file by default (it
//! survives a restart), or Redis/Valkey shared by every replica
//! (`[state] url`). It survives reloads: it is keyed by plugin *name*. A
//! plugin sees only its own keys, and only those of the scope of the call
//! it is serving, so one agent's state never leaks to a sibling.
//!
//! Every size is capped: a key ≤ [`MAX_KEY_BYTES`], a value ≤
//! [`MAX_VALUE_BYTES`], a plugin's keys and values together ≤
//! [`QUOTA_BYTES`] (the store enforces it atomically, so replicas sharing
//! a store share the quota). Since contract 0.2.3, `increment` and
//! `compare-and-swap` are atomic read-modify-writes: a rate limiter counts
//! exactly however many instances or replicas count at once.
//!
//! Fail closed: when the store cannot be reached, the functions with a
//! `result` return the store's error, and `get`, `delete` and `keys` (whose
//! WIT has no error case) trap with it — a guard that traps denies.
//!
//! The seam as a unit (see [`crate::seams`]): granted by `kv = true`
//! ([`seam`]); host-wide state [`KvStore`], per plugin [`KvSpace`]; the
//! 0.2 `kv` interface implemented on [`KvView`]. Its host functions are
//! synchronous (the embedded store answers inline; the shared one is
//! waited for in place: [`crate::store::wait_here`]), so a component
//! importing it may take the synchronous path.

use std::sync::Arc;

use wasmtime::component::HasData;

use super::{Seam, SeamCtx, SeamHost};
use crate::bindings::v0_2::toolgate::plugin::kv as wit;
use crate::call::Misuse;
use crate::grants::Capability;
use crate::store::{KvBackend, check_key, check_value, wait_here};

pub use crate::store::KvError;

/// The `kv` seam: granted by `kv = true`; never waits on the async
/// runtime (see the module's doc).
pub fn seam<T: SeamHost>() -> Seam<T> {
    Seam {
        interface: "kv",
        capability: Capability::Kv,
        sync: true,
        granted: |g| if g.kv { Ok(()) } else { Err("kv = true") },
        link: |linker| wit::add_to_linker::<T, KvView<'static>>(linker, |t| KvView::new(t.seams())),
    }
}

/// What the `kv` interface sees of a store: the plugin's namespace (if
/// granted) and the scope of the call being served.
pub struct KvView<'a> {
    plugin: &'a str,
    space: Option<&'a KvSpace>,
    scope: &'a str,
}

impl<'a> KvView<'a> {
    pub fn new(ctx: SeamCtx<'a>) -> Self {
        KvView {
            plugin: ctx.plugin,
            space: ctx.shared.kv.as_ref(),
            scope: ctx.call.map_or("", |c| c.agent_scope.as_str()),
        }
    }

    fn space(&self) -> wasmtime::Result<&'a KvSpace> {
        self.space.ok_or_else(|| {
            Misuse(format!(
                "plugin `{}` is not granted the kv seam (`kv = true` in its grants)",
                self.plugin
            ))
            .into()
        })
    }
}

impl HasData for KvView<'static> {
    type Data<'a> = KvView<'a>;
}

/// A store error where the WIT has no error case: a trap, with the
/// store's sentence (a guard that traps denies).
fn trap(e: KvError) -> wasmtime::Error {
    wasmtime::Error::msg(format!("kv: {e}"))
}

impl wit::Host for KvView<'_> {
    fn get(&mut self, key: String) -> wasmtime::Result<Option<Vec<u8>>> {
        self.space()?.get(self.scope, &key).map_err(trap)
    }

    /// A refusal is the guest's to handle: the WIT gives it the sentence.
    fn set(&mut self, key: String, value: Vec<u8>) -> wasmtime::Result<Result<(), String>> {
        Ok(self
            .space()?
            .set(self.scope, &key, &value)
            .map_err(|e| e.to_string()))
    }

    fn delete(&mut self, key: String) -> wasmtime::Result<()> {
        self.space()?.delete(self.scope, &key).map_err(trap)
    }

    fn keys(&mut self, prefix: String) -> wasmtime::Result<Vec<String>> {
        self.space()?.keys(self.scope, &prefix).map_err(trap)
    }

    fn increment(&mut self, key: String, delta: i64) -> wasmtime::Result<Result<i64, String>> {
        Ok(self
            .space()?
            .increment(self.scope, &key, delta)
            .map_err(|e| e.to_string()))
    }

    fn compare_and_swap(
        &mut self,
        key: String,
        expected: Option<Vec<u8>>,
        value: Vec<u8>,
    ) -> wasmtime::Result<Result<bool, String>> {
        Ok(self
            .space()?
            .compare_and_swap(self.scope, &key, expected.as_deref(), &value)
            .map_err(|e| e.to_string()))
    }
}

/// The host-wide store (one per [`crate::Toolgate`]): the state store's
/// `kv` part.
#[derive(Clone)]
pub struct KvStore {
    backend: Arc<dyn KvBackend>,
}

impl Default for KvStore {
    /// In memory, for the host's lifetime (a host built with no state
    /// directory and no `[state]`; tests).
    fn default() -> Self {
        KvStore::new(Arc::new(crate::store::sqlite::SqliteKv::memory()))
    }
}

impl KvStore {
    pub fn new(backend: Arc<dyn KvBackend>) -> KvStore {
        KvStore { backend }
    }

    /// The store behind it.
    pub fn backend(&self) -> &Arc<dyn KvBackend> {
        &self.backend
    }

    /// The namespace of `plugin`.
    pub fn space(&self, plugin: Arc<str>) -> KvSpace {
        KvSpace {
            backend: self.backend.clone(),
            plugin,
            read_only: false,
        }
    }

    /// The namespace of `plugin`, read-only (another plugin's
    /// `kv_read`): `get` and `keys` answer, every change is refused.
    pub fn read_only(&self, plugin: Arc<str>) -> KvSpace {
        KvSpace {
            read_only: true,
            ..self.space(plugin)
        }
    }
}

/// One plugin's view of the store.
#[derive(Clone)]
pub struct KvSpace {
    backend: Arc<dyn KvBackend>,
    plugin: Arc<str>,
    /// Another plugin's namespace, granted `kv_read`.
    read_only: bool,
}

impl KvSpace {
    fn wait<T>(
        &self,
        fut: impl std::future::Future<Output = Result<T, KvError>>,
    ) -> Result<T, KvError> {
        wait_here(self.backend.as_ref(), fut)
    }

    /// The value of `key` in `scope`.
    pub fn get(&self, scope: &str, key: &str) -> Result<Option<Vec<u8>>, KvError> {
        if check_key(key).is_err() {
            return Ok(None);
        }
        self.wait(self.backend.get(&self.plugin, scope, key))
    }

    /// `Err` for a read-only namespace.
    fn writable(&self) -> Result<(), KvError> {
        if self.read_only {
            return Err(KvError::ReadOnly {
                namespace: self.plugin.to_string(),
            });
        }
        Ok(())
    }

    /// Store `value` under `key` in `scope`; `Err` says which limit it
    /// broke, or that the store is unavailable.
    pub fn set(&self, scope: &str, key: &str, value: &[u8]) -> Result<(), KvError> {
        self.writable()?;
        check_key(key)?;
        check_value(value)?;
        self.wait(self.backend.set(&self.plugin, scope, key, value))
    }

    /// Remove `key` from `scope`.
    pub fn delete(&self, scope: &str, key: &str) -> Result<(), KvError> {
        self.writable()?;
        if check_key(key).is_err() {
            return Ok(());
        }
        self.wait(self.backend.delete(&self.plugin, scope, key))
    }

    /// The keys of `scope` starting with `prefix`, sorted.
    pub fn keys(&self, scope: &str, prefix: &str) -> Result<Vec<String>, KvError> {
        self.wait(self.backend.keys(&self.plugin, scope, prefix))
    }

    /// Add `delta` to the integer under `key`, atomically; the new value.
    pub fn increment(&self, scope: &str, key: &str, delta: i64) -> Result<i64, KvError> {
        self.writable()?;
        check_key(key)?;
        self.wait(self.backend.increment(&self.plugin, scope, key, delta))
    }

    /// Store `value` if the value under `key` is `expected` now.
    pub fn compare_and_swap(
        &self,
        scope: &str,
        key: &str,
        expected: Option<&[u8]>,
        value: &[u8],
    ) -> Result<bool, KvError> {
        self.writable()?;
        check_key(key)?;
        check_value(value)?;
        self.wait(
            self.backend
                .compare_and_swap(&self.plugin, scope, key, expected, value),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budgets::{KV_MAX_VALUE_BYTES as MAX_VALUE_BYTES, KV_QUOTA_BYTES as QUOTA_BYTES};

    /// `kv_read`: another plugin's namespace, every read answered and
    /// every change refused, naming the grant.
    #[test]
    fn a_read_only_namespace_reads_and_refuses_every_change() {
        let store = KvStore::default();
        let goals = store.space("goals".into());
        goals.set("s", "goal", b"{}").unwrap();
        let reader = store.read_only("goals".into());
        assert_eq!(
            reader.get("s", "goal").unwrap().as_deref(),
            Some(&b"{}"[..])
        );
        assert_eq!(reader.keys("s", "").unwrap(), ["goal"]);
        let refused = [
            reader.set("s", "goal", b"x").unwrap_err(),
            reader.delete("s", "goal").unwrap_err(),
            reader.increment("s", "n", 1).unwrap_err(),
            reader
                .compare_and_swap("s", "goal", Some(b"{}"), b"x")
                .unwrap_err(),
        ];
        for e in refused {
            assert!(e.to_string().contains("`kv_read = \"goals\"`"), "{e}");
        }
        assert_eq!(goals.get("s", "goal").unwrap().as_deref(), Some(&b"{}"[..]));
    }

    #[test]
    fn scopes_and_plugins_are_separate_and_quotas_hold() {
        let store = KvStore::default();
        let a = store.space("a".into());
        let b = store.space("b".into());
        a.set("agent/1", "k", b"v1").unwrap();
        a.set("agent/2", "k", b"v2").unwrap();
        assert_eq!(a.get("agent/1", "k").unwrap().as_deref(), Some(&b"v1"[..]));
        assert_eq!(a.get("agent/2", "k").unwrap().as_deref(), Some(&b"v2"[..]));
        assert_eq!(b.get("agent/1", "k").unwrap(), None);
        a.set("agent/1", "k2", &[]).unwrap();
        assert_eq!(a.keys("agent/1", "k").unwrap(), vec!["k", "k2"]);
        assert_eq!(a.keys("agent/1", "k2").unwrap(), vec!["k2"]);
        a.delete("agent/1", "k").unwrap();
        assert_eq!(a.keys("agent/1", "").unwrap(), vec!["k2"]);
        assert_eq!(
            a.set("s", &"x".repeat(300), &[]),
            Err(KvError::KeySize { len: 300 })
        );
        assert_eq!(a.increment("s", "", 1), Err(KvError::KeySize { len: 0 }));
        assert_eq!(
            a.set("s", "big", &vec![0; MAX_VALUE_BYTES + 1]),
            Err(KvError::ValueSize {
                len: MAX_VALUE_BYTES + 1
            })
        );
        for i in 0..3 {
            a.set("s", &format!("v{i}"), &vec![0; MAX_VALUE_BYTES])
                .unwrap();
        }
        let e = a.set("s", "v5", &vec![0; MAX_VALUE_BYTES]).unwrap_err();
        assert!(
            matches!(e, KvError::Quota { total } if total > QUOTA_BYTES),
            "{e}"
        );
        // The guest reads the limit and what to do.
        assert!(
            e.to_string().contains("quota of 4194304; delete keys"),
            "{e}"
        );
        // Replacing a value frees its old bytes.
        a.set("s", "v0", &[]).unwrap();
        a.set("s", "v5", &vec![0; 1000]).unwrap();
    }

    /// Increments from many threads at once are neither lost nor counted
    /// twice, and compare-and-swap lets exactly one writer win each round.
    #[test]
    fn atomic_operations_hold_under_concurrency() {
        let store = KvStore::default();
        let a = store.space("a".into());
        std::thread::scope(|s| {
            for _ in 0..8 {
                let a = a.clone();
                s.spawn(move || {
                    for _ in 0..100 {
                        a.increment("", "n", 1).unwrap();
                    }
                });
            }
        });
        assert_eq!(a.get("", "n").unwrap().as_deref(), Some(&b"800"[..]));
        let wins: usize = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|i| {
                    let a = a.clone();
                    s.spawn(move || {
                        a.compare_and_swap("", "owner", None, format!("{i}").as_bytes())
                            .unwrap() as usize
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(wins, 1);
    }
}
