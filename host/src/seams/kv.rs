//! The `kv` seam: a small key-value store the host keeps for each plugin,
//! one namespace per agent scope.
//!
//! Why in the host: a warm instance's memory is not a place for state that
//! matters — instances are recycled, dropped after a trap, created fresh per
//! call in `fresh` mode, and replaced on reload. A todo list or a rate
//! limiter's counters must outlive all of that. The store lives as long as
//! the host (it survives reloads: it is keyed by plugin *name*), in memory
//! only. A plugin sees only its own keys, and only those of the scope of the
//! call it is serving, so one agent's state never leaks to a sibling.
//!
//! Every size is capped: a key ≤ [`MAX_KEY_BYTES`], a value ≤
//! [`MAX_VALUE_BYTES`], a plugin's keys and values together ≤
//! [`QUOTA_BYTES`].
//!
//! The seam as a unit (see [`crate::seams`]): granted by `kv = true`
//! ([`seam`]); host-wide state [`KvStore`], per plugin [`KvSpace`]; the
//! 0.2 `kv` interface implemented on [`KvView`]. It never waits, so a
//! component importing it may take the synchronous path.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use wasmtime::component::HasData;

use super::{Seam, SeamCtx, SeamHost};
use crate::bindings::v0_2::toolgate::plugin::kv as wit;
use crate::error::Misuse;
use crate::grants::Capability;

/// The `kv` seam: granted by `kv = true`; never waits.
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

impl wit::Host for KvView<'_> {
    fn get(&mut self, key: String) -> wasmtime::Result<Option<Vec<u8>>> {
        Ok(self.space()?.get(self.scope, &key))
    }

    /// A refusal is the guest's to handle: the WIT gives it the sentence.
    fn set(&mut self, key: String, value: Vec<u8>) -> wasmtime::Result<Result<(), String>> {
        Ok(self
            .space()?
            .set(self.scope, key, value)
            .map_err(|e| e.to_string()))
    }

    fn delete(&mut self, key: String) -> wasmtime::Result<()> {
        self.space()?.delete(self.scope, &key);
        Ok(())
    }

    fn keys(&mut self, prefix: String) -> wasmtime::Result<Vec<String>> {
        Ok(self.space()?.keys(self.scope, &prefix))
    }
}

/// Longest key.
pub const MAX_KEY_BYTES: usize = 256;
/// Largest value.
pub const MAX_VALUE_BYTES: usize = 1 << 20;
/// Bytes of keys and values one plugin may hold, all scopes together.
pub const QUOTA_BYTES: usize = 4 << 20;

/// Why `set` refused: which limit, with the numbers.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KvError {
    #[error("a key must be 1 to {MAX_KEY_BYTES} bytes (this one is {len})")]
    KeySize { len: usize },
    #[error("a value may be at most {MAX_VALUE_BYTES} bytes (this one is {len})")]
    ValueSize { len: usize },
    #[error(
        "the plugin's store would hold {total} bytes, more than its quota of {QUOTA_BYTES}; delete keys first"
    )]
    Quota { total: usize },
}

#[derive(Default)]
struct Space {
    /// (scope, key) → value.
    entries: BTreeMap<(String, String), Vec<u8>>,
    bytes: usize,
}

/// The host-wide store (one per [`crate::Toolgate`]).
#[derive(Default)]
pub struct KvStore {
    spaces: Mutex<HashMap<Arc<str>, Space>>,
}

impl KvStore {
    /// The namespace of `plugin`.
    pub fn space(self: &Arc<Self>, plugin: Arc<str>) -> KvSpace {
        KvSpace {
            store: self.clone(),
            plugin,
        }
    }
}

/// One plugin's view of the store.
#[derive(Clone)]
pub struct KvSpace {
    store: Arc<KvStore>,
    plugin: Arc<str>,
}

impl KvSpace {
    fn with<R>(&self, f: impl FnOnce(&mut Space) -> R) -> R {
        let mut spaces = self.store.spaces.lock().unwrap_or_else(|p| p.into_inner());
        f(spaces.entry(self.plugin.clone()).or_default())
    }

    /// The value of `key` in `scope`.
    pub fn get(&self, scope: &str, key: &str) -> Option<Vec<u8>> {
        self.with(|s| {
            s.entries
                .get(&(scope.to_string(), key.to_string()))
                .cloned()
        })
    }

    /// Store `value` under `key` in `scope`; `Err` says which limit it broke.
    pub fn set(&self, scope: &str, key: String, value: Vec<u8>) -> Result<(), KvError> {
        if key.is_empty() || key.len() > MAX_KEY_BYTES {
            return Err(KvError::KeySize { len: key.len() });
        }
        if value.len() > MAX_VALUE_BYTES {
            return Err(KvError::ValueSize { len: value.len() });
        }
        self.with(|s| {
            let k = (scope.to_string(), key);
            let old = s
                .entries
                .get(&k)
                .map_or(0, |v| k.0.len() + k.1.len() + v.len());
            let new = k.0.len() + k.1.len() + value.len();
            let total = s.bytes - old + new;
            if total > QUOTA_BYTES {
                return Err(KvError::Quota { total });
            }
            s.bytes = total;
            s.entries.insert(k, value);
            Ok(())
        })
    }

    /// Remove `key` from `scope`.
    pub fn delete(&self, scope: &str, key: &str) {
        self.with(|s| {
            let k = (scope.to_string(), key.to_string());
            if let Some(v) = s.entries.remove(&k) {
                s.bytes -= k.0.len() + k.1.len() + v.len();
            }
        })
    }

    /// The keys of `scope` starting with `prefix`, sorted.
    pub fn keys(&self, scope: &str, prefix: &str) -> Vec<String> {
        self.with(|s| {
            s.entries
                .range((scope.to_string(), prefix.to_string())..)
                .take_while(|((sc, k), _)| sc == scope && k.starts_with(prefix))
                .map(|((_, k), _)| k.clone())
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_and_plugins_are_separate_and_quotas_hold() {
        let store = Arc::new(KvStore::default());
        let a = store.space("a".into());
        let b = store.space("b".into());
        a.set("agent/1", "k".into(), b"v1".to_vec()).unwrap();
        a.set("agent/2", "k".into(), b"v2".to_vec()).unwrap();
        assert_eq!(a.get("agent/1", "k").as_deref(), Some(&b"v1"[..]));
        assert_eq!(a.get("agent/2", "k").as_deref(), Some(&b"v2"[..]));
        assert_eq!(b.get("agent/1", "k"), None);
        a.set("agent/1", "k2".into(), vec![]).unwrap();
        assert_eq!(a.keys("agent/1", "k"), vec!["k", "k2"]);
        assert_eq!(a.keys("agent/1", "k2"), vec!["k2"]);
        a.delete("agent/1", "k");
        assert_eq!(a.keys("agent/1", ""), vec!["k2"]);
        assert_eq!(
            a.set("s", "x".repeat(300), vec![]),
            Err(KvError::KeySize { len: 300 })
        );
        assert_eq!(
            a.set("s", "big".into(), vec![0; MAX_VALUE_BYTES + 1]),
            Err(KvError::ValueSize {
                len: MAX_VALUE_BYTES + 1
            })
        );
        for i in 0..3 {
            a.set("s", format!("v{i}"), vec![0; MAX_VALUE_BYTES])
                .unwrap();
        }
        let e = a
            .set("s", "v5".into(), vec![0; MAX_VALUE_BYTES])
            .unwrap_err();
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
        a.set("s", "v0".into(), vec![]).unwrap();
        a.set("s", "v5".into(), vec![0; 1000]).unwrap();
    }
}
