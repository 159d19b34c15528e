//! The `kv` seam: a small key-value store the host keeps for this plugin,
//! one namespace per agent scope (the scope of the call being served).
//! State kept here survives instance recycling, traps and reloads; state
//! kept in a static does not. The operator grants it with `kv = true`.
//!
//! Limits: keys up to 256 bytes, values up to 1 MiB, 4 MiB per plugin.
//!
//! `get` then `set` is not atomic: two calls at once both read the old
//! value and one update is lost. Count with [`increment`], or update with
//! [`compare_and_swap`] in a retry loop.

use crate::bindings::toolgate::plugin::kv;

/// The value under `key`.
pub fn get(key: &str) -> Option<Vec<u8>> {
    kv::get(key)
}

/// Store `value` under `key`; `Err` says which limit it broke.
pub fn set(key: &str, value: &[u8]) -> Result<(), String> {
    kv::set(key, value)
}

/// Remove `key`.
pub fn delete(key: &str) {
    kv::delete(key)
}

/// The keys starting with `prefix`, sorted.
pub fn keys(prefix: &str) -> Vec<String> {
    kv::keys(prefix)
}

/// A JSON value under `key`.
pub fn get_json<T: serde::de::DeserializeOwned>(key: &str) -> Option<T> {
    get(key).and_then(|bytes| serde_json::from_slice(&bytes).ok())
}

/// Store a value as JSON under `key`.
pub fn set_json<T: serde::Serialize>(key: &str, value: &T) -> Result<(), String> {
    let bytes = serde_json::to_vec(value).map_err(|e| e.to_string())?;
    set(key, &bytes)
}

/// Add `delta` to the integer under `key` (absent counts as 0) and return
/// the new value, atomically (since contract 0.2.3): concurrent increments —
/// other instances, other replicas sharing the host's store — are never
/// lost or counted twice. The value is kept as decimal text. `Err` says why
/// not (not an integer, overflow, a limit, the store unreachable).
pub fn increment(key: &str, delta: i64) -> Result<i64, String> {
    kv::increment(key, delta)
}

/// Store `value` under `key` only if the value there is `expected` now
/// (`None`: only if absent), atomically (since contract 0.2.3).
/// `Ok(false)`: it was something else; read it again and retry.
pub fn compare_and_swap(key: &str, expected: Option<&[u8]>, value: &[u8]) -> Result<bool, String> {
    kv::compare_and_swap(key, expected, value)
}
