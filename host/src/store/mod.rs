//! The state store: where the host keeps state that must outlive its
//! process, and that replicas behind a load balancer must share.
//!
//! Why a store and not memory: one `toolgate serve` used to keep the `kv`
//! seam in a map in its process, so a restart (every deploy) lost every
//! rate-limit counter and todo list, and two replicas each counted on
//! their own — a limit of 100 per minute became 100 per replica. The
//! store puts that state in an existing engine instead of a home-made
//! cluster:
//!
//! * [`sqlite`] — **embedded**, the default: one SQLite file per store in
//!   the state directory (`kv.sqlite`, `approvals.sqlite`). State
//!   survives a restart of a single host. The `kv` seam's operations run
//!   inline (a short local transaction each), so the seam stays
//!   synchronous and a guard using it keeps the synchronous path.
//! * `redis` — **shared**, with `[state] url = "redis://…"`: Redis or
//!   Valkey (standalone, not cluster), through one connection manager
//!   (one multiplexed connection, reconnected in the background), every
//!   operation bounded by a timeout
//!   ([`crate::budgets::STATE_OP_TIMEOUT`]). Every replica pointed at the
//!   same server sees the same state; every operation that reads and then
//!   writes is one Lua script, so it is atomic across replicas. The cargo
//!   feature `redis` (on by default) builds it; a host built without it
//!   refuses `[state] url` at its start, saying so.
//!
//! One module per engine (Spin's `key-value-spin` and `key-value-redis`
//! are the model), each serving every store kept in it: opening, timeouts,
//! reconnecting and keeping a password out of messages are the engine's,
//! written once; the stores' tables, keys and scripts are theirs
//! (`sqlite::kv`, `sqlite::approvals`, `redis::kv`, `redis::approvals`).
//! The traits stay with their users: [`KvBackend`] here, for the `kv`
//! seam; [`crate::approval::store::ApprovalStore`] in the approval queue.
//! [`open`] opens what `[state]` names for both, on one engine: with
//! `[state] url`, one connection to the server, not one per store.
//!
//! Named `store`, not `state`: [`crate::state`] is the state *directory*
//! (the cache key, the serve token, the journal), which this module keeps
//! its embedded files in.
//!
//! What is in it today: the `kv` seam ([`KvBackend`]: per plugin, per
//! agent scope, with the seam's limits and quota enforced atomically by
//! the backend) and pending approvals (in the same server with `[state]
//! url`, unless `[approval] store` names a file); jobs stay on the replica
//! that runs them. [`crate::state::replica_id`] gives each replica its id.
//!
//! **Fail closed**: when the store cannot be reached, every operation
//! returns [`KvError::Unavailable`] — quickly, within the timeout — and the
//! seam hands that to the guest (an error, or a trap where the WIT has no
//! error case), so a guard that cannot read its counter denies. Nothing
//! else waits for the store, and the next operation after it is back
//! succeeds: no restart.

pub mod config;
#[cfg(feature = "redis")]
pub mod redis;
pub mod sqlite;

pub use config::StateConfig;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;

use crate::approval::store::{ApprovalStore, StoreError};
use crate::budgets::{KV_MAX_KEY_BYTES, KV_MAX_VALUE_BYTES, KV_QUOTA_BYTES};
use crate::error::HostError;

/// Why a `kv` operation failed: a limit (with the numbers), a value that
/// is not what the operation needs, or the store itself.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KvError {
    #[error("a key must be 1 to {KV_MAX_KEY_BYTES} bytes (this one is {len})")]
    KeySize { len: usize },
    #[error("a value may be at most {KV_MAX_VALUE_BYTES} bytes (this one is {len})")]
    ValueSize { len: usize },
    #[error(
        "the plugin's store would hold {total} bytes, more than its quota of {KV_QUOTA_BYTES}; delete keys first"
    )]
    Quota { total: usize },
    #[error(
        "the value under `{key}` is not a decimal integer; `increment` counts only such values"
    )]
    NotInteger { key: String },
    #[error("incrementing `{key}` would overflow a 64-bit integer")]
    Overflow { key: String },
    /// A write to another plugin's namespace, granted read-only
    /// (`kv_read`).
    #[error(
        "this plugin reads plugin `{namespace}`'s store read-only (`kv_read = \"{namespace}\"` in its grants): it cannot change it"
    )]
    ReadOnly { namespace: String },
    /// The store did not answer (down, unreachable, too slow).
    #[error(
        "the host's state store ({store}) is unavailable: {message}; the call fails closed until it answers again (the host reconnects by itself)"
    )]
    Unavailable { store: String, message: String },
    /// The store answered with an error it should not have.
    #[error("the host's state store ({store}) failed: {message}")]
    Backend { store: String, message: String },
}

impl KvError {
    /// Whether the store, not the request, is at fault.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, KvError::Unavailable { .. } | KvError::Backend { .. })
    }
}

impl From<OpenError> for crate::error::HostError {
    fn from(e: OpenError) -> Self {
        crate::error::HostError::Feature(Box::new(e))
    }
}

/// Why the store could not be opened (at the host's start).
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot open the state store at {path}: {message}")]
    File { path: String, message: String },
    #[error(
        "`[state] url` = `{url}` is not a store toolgate can use: {message} (write `redis://HOST:PORT/DB`, `rediss://…` or `valkey://…`)"
    )]
    Url { url: String, message: String },
    #[error(
        "`[state] url` names a shared store, but this toolgate was built without its engine (the cargo feature `{feature}`): rebuild with `--features {feature}`, or remove `[state] url` to keep state in the state directory"
    )]
    NotBuilt { feature: &'static str },
}

/// The shared server of `[state] url`: one connection manager for every
/// store kept there.
#[cfg(feature = "redis")]
type Server = Arc<redis::Redis>;
/// No shared engine in this build: never made.
#[cfg(not(feature = "redis"))]
enum Server {}

#[cfg(feature = "redis")]
fn connect(config: &StateConfig, url: &str) -> Result<Server, OpenError> {
    let timeout = config
        .timeout_ms
        .map(|ms| std::time::Duration::from_millis(ms.max(1)))
        .unwrap_or(crate::budgets::STATE_OP_TIMEOUT);
    let prefix = config.prefix.as_deref().unwrap_or(redis::DEFAULT_PREFIX);
    redis::Redis::open(url, prefix, timeout)
}

#[cfg(not(feature = "redis"))]
fn connect(_: &StateConfig, _: &str) -> Result<Server, OpenError> {
    Err(OpenError::NotBuilt { feature: "redis" })
}

#[cfg(feature = "redis")]
fn shared_approvals(server: &Server) -> Result<Arc<dyn ApprovalStore>, HostError> {
    Ok(Arc::new(redis::RedisApprovals::new(server.clone())?))
}

#[cfg(not(feature = "redis"))]
fn shared_approvals(server: &Server) -> Result<Arc<dyn ApprovalStore>, HostError> {
    match *server {}
}

#[cfg(feature = "redis")]
fn shared_kv(server: Server) -> Arc<dyn KvBackend> {
    Arc::new(redis::RedisKv::new(server))
}

#[cfg(not(feature = "redis"))]
fn shared_kv(server: Server) -> Arc<dyn KvBackend> {
    match server {}
}

/// Where [`open`] puts the approval queue's store.
#[derive(Clone, Copy, Debug)]
pub enum ApprovalsAt<'a> {
    /// Where `[state]` keeps state: the server of `[state] url` (replicas
    /// share the queue), else `approvals.sqlite` in the state directory.
    State,
    /// This SQLite file (`[approval] store`): it wins over `[state] url`,
    /// and this host keeps its own queue.
    File(&'a Path),
}

/// The stores [`open`] opened.
pub struct Stores {
    /// The `kv` seam's.
    pub kv: Arc<dyn KvBackend>,
    /// The approval queue's, when asked for.
    pub approvals: Option<Arc<dyn ApprovalStore>>,
}

/// Opens the stores `config` (`[state]`) names, at the host's start: the
/// `kv` seam's (`kv`, when the embedder brings one, is kept instead) and,
/// when `approvals` says where, the approval queue's — on one engine:
/// with `[state] url`, both on one connection manager. `state_dir` is the
/// state directory, opened (`None`: the host has none; the `kv` seam then
/// lives in memory unless `[state]` says otherwise).
pub fn open(
    config: &StateConfig,
    state_dir: Option<&Path>,
    workdir: &Path,
    kv: Option<Arc<dyn KvBackend>>,
    approvals: Option<ApprovalsAt<'_>>,
) -> Result<Stores, HostError> {
    // The server, if a store is to be kept there (a bad URL is no error
    // to a host that keeps nothing in it).
    let in_server = kv.is_none() || matches!(approvals, Some(ApprovalsAt::State));
    let server = match &config.url {
        Some(url) if in_server => Some(connect(config, url)?),
        _ => None,
    };
    let in_state_dir = |file: &str| state_dir.map(|d| d.join(file));
    let approvals: Option<Arc<dyn ApprovalStore>> = match approvals {
        None => None,
        Some(ApprovalsAt::File(path)) => Some(Arc::new(sqlite::SqliteApprovals::open(
            &workdir.join(path),
        )?)),
        Some(ApprovalsAt::State) => Some(
            match (&server, in_state_dir(sqlite::approvals::DEFAULT_FILE)) {
                (Some(server), _) => shared_approvals(server)?,
                (None, Some(path)) => Arc::new(sqlite::SqliteApprovals::open(&path)?),
                (None, None) => {
                    return Err(StoreError::Open {
                        path: sqlite::approvals::DEFAULT_FILE.into(),
                        message:
                            "there is no state directory to keep it in; set `[approval] store` \
                              or TOOLGATE_STATE_DIR"
                                .into(),
                    }
                    .into());
                }
            },
        ),
    };
    let kv: Arc<dyn KvBackend> = match (kv, server, &config.path) {
        (Some(kv), _, _) => kv,
        (None, Some(server), _) => shared_kv(server),
        (None, None, Some(path)) => Arc::new(sqlite::SqliteKv::open(&workdir.join(path))?),
        (None, None, None) => match in_state_dir(sqlite::kv::DEFAULT_FILE) {
            Some(path) => Arc::new(sqlite::SqliteKv::open(&path)?),
            // No state directory and nothing configured: memory, for the
            // host's lifetime.
            None => Arc::new(sqlite::SqliteKv::memory()),
        },
    };
    Ok(Stores { kv, approvals })
}

/// The `kv` seam's storage: one namespace per plugin, one per agent scope
/// within it. Each operation is atomic; `set`, `increment` and
/// `compare_and_swap` enforce [`KV_QUOTA_BYTES`] for the plugin (keys and
/// values of all its scopes) in the same atomic step. Keys and values are
/// checked against their size limits by the caller ([`check_key`],
/// [`check_value`]).
#[async_trait]
pub trait KvBackend: Send + Sync + 'static {
    /// What it is, for messages (`sqlite:/path`, `redis://host:port/0`).
    fn describe(&self) -> String;
    async fn get(&self, plugin: &str, scope: &str, key: &str) -> Result<Option<Vec<u8>>, KvError>;
    async fn set(&self, plugin: &str, scope: &str, key: &str, value: &[u8]) -> Result<(), KvError>;
    async fn delete(&self, plugin: &str, scope: &str, key: &str) -> Result<(), KvError>;
    /// The keys of `scope` starting with `prefix`, sorted.
    async fn keys(&self, plugin: &str, scope: &str, prefix: &str) -> Result<Vec<String>, KvError>;
    /// Add `delta` to the decimal integer under `key` (absent: 0); the new
    /// value.
    async fn increment(
        &self,
        plugin: &str,
        scope: &str,
        key: &str,
        delta: i64,
    ) -> Result<i64, KvError>;
    /// Store `value` if the value now is `expected` (`None`: absent).
    async fn compare_and_swap(
        &self,
        plugin: &str,
        scope: &str,
        key: &str,
        expected: Option<&[u8]>,
        value: &[u8],
    ) -> Result<bool, KvError>;
    /// Whether the store answers now (readiness).
    async fn ping(&self) -> Result<(), KvError>;
}

/// A key the seam accepts: 1 to [`KV_MAX_KEY_BYTES`] bytes.
pub fn check_key(key: &str) -> Result<(), KvError> {
    if key.is_empty() || key.len() > KV_MAX_KEY_BYTES {
        return Err(KvError::KeySize { len: key.len() });
    }
    Ok(())
}

/// A value the seam accepts: at most [`KV_MAX_VALUE_BYTES`].
pub fn check_value(value: &[u8]) -> Result<(), KvError> {
    if value.len() > KV_MAX_VALUE_BYTES {
        return Err(KvError::ValueSize { len: value.len() });
    }
    Ok(())
}

/// What an entry counts against its plugin's quota: its scope, key and
/// value.
pub fn entry_bytes(scope: &str, key: &str, value_len: usize) -> usize {
    scope.len() + key.len() + value_len
}

/// The integer in `value` as `increment` reads it: decimal text exactly
/// as `increment` writes it (an optional `-`, digits, no leading zeros).
pub fn parse_counter(key: &str, value: &[u8]) -> Result<i64, KvError> {
    std::str::from_utf8(value)
        .ok()
        .and_then(|s| s.parse::<i64>().ok().filter(|n| n.to_string() == s))
        .ok_or_else(|| KvError::NotInteger { key: key.into() })
}

/// Drive `fut` to its end from inside a synchronous host call (the `kv`
/// seam is synchronous, so a guard using it keeps the synchronous path).
/// The embedded store's futures are ready at the first poll. The shared
/// store's wait on the network: a multi-threaded runtime lets this thread
/// block for them (`block_in_place`: the runtime moves its other work
/// elsewhere); a single-threaded one cannot, and the operation fails
/// (closed). The same rule as a waterfall hook's `next` on the synchronous
/// path.
pub fn wait_here<F, T>(store: &dyn KvBackend, fut: F) -> Result<T, KvError>
where
    F: Future<Output = Result<T, KvError>>,
{
    use std::task::{Context, Poll};
    let mut fut = std::pin::pin!(fut);
    let waker = futures::task::noop_waker();
    if let Poll::Ready(v) = fut.as_mut().poll(&mut Context::from_waker(&waker)) {
        return v;
    }
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(|| h.block_on(fut))
        }
        _ => Err(KvError::Unavailable {
            store: store.describe(),
            message: "it must be waited for, which a synchronous host call can do only on a multi-threaded runtime".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Built without the `redis` feature (`cargo test -p toolgate
    /// --no-default-features --lib store::`, a step of `.ci/run`): `[state]
    /// url` is refused at the start naming the feature, never replaced by
    /// the embedded store; a host that keeps nothing in the server (the
    /// embedder brought its `kv`, no queue) does not care; the embedded
    /// store opens as in every build.
    #[cfg(not(feature = "redis"))]
    #[test]
    fn without_the_redis_feature_a_shared_store_is_refused_by_name() {
        let dir = sqlite::scratch("no-redis");
        let server = StateConfig {
            url: Some("redis://127.0.0.1:6379/0".into()),
            ..StateConfig::default()
        };
        let e = open(&server, Some(&dir), &dir, None, Some(ApprovalsAt::State))
            .err()
            .expect("refused");
        let text = e.to_string();
        assert!(
            text.contains("cargo feature `redis`") && text.contains("[state] url"),
            "{text}"
        );
        assert!(!dir.join(sqlite::kv::DEFAULT_FILE).exists(), "no fallback");
        let memory: Arc<dyn KvBackend> = Arc::new(sqlite::SqliteKv::memory());
        assert!(open(&server, Some(&dir), &dir, Some(memory), None).is_ok());
        let s = open(&StateConfig::default(), Some(&dir), &dir, None, None).unwrap();
        assert!(s.kv.describe().starts_with("sqlite:"));
    }

    #[test]
    fn counters_are_exactly_the_text_increment_writes() {
        assert_eq!(parse_counter("k", b"42"), Ok(42));
        assert_eq!(parse_counter("k", b"-7"), Ok(-7));
        for bad in [&b"042"[..], b"+1", b" 1", b"1.0", b"", b"x", b"\xff"] {
            assert_eq!(
                parse_counter("k", bad),
                Err(KvError::NotInteger { key: "k".into() }),
                "{bad:?}"
            );
        }
    }

    /// Where [`open`] puts each store: the file `[approval] store` names
    /// wins over `[state] url`; with the URL alone both stores are in the
    /// server; without either, both are files in the state directory, and
    /// with no state directory the `kv` seam is in memory while the queue
    /// has nowhere to go.
    #[cfg(feature = "redis")]
    #[tokio::test]
    async fn each_store_goes_where_state_says() {
        let dir = sqlite::scratch("open");
        let server = StateConfig {
            url: Some("redis://user:secret@127.0.0.1:1/0".into()),
            ..StateConfig::default()
        };
        let s = open(&server, Some(&dir), &dir, None, Some(ApprovalsAt::State)).unwrap();
        assert_eq!(s.kv.describe(), "redis://…@127.0.0.1:1/0");
        assert!(s.approvals.as_ref().is_some_and(|a| a.shared()));
        assert!(!dir.join(sqlite::approvals::DEFAULT_FILE).exists());
        let own = dir.join("own.sqlite");
        let s = open(
            &server,
            Some(&dir),
            &dir,
            None,
            Some(ApprovalsAt::File(&own)),
        )
        .unwrap();
        assert!(s.kv.describe().starts_with("redis://"));
        assert!(s.approvals.is_some_and(|a| !a.shared()) && own.exists());
        // Files in the state directory.
        let files = StateConfig::default();
        let s = open(&files, Some(&dir), &dir, None, Some(ApprovalsAt::State)).unwrap();
        let kv_file = dir.join(sqlite::kv::DEFAULT_FILE);
        assert_eq!(s.kv.describe(), format!("sqlite:{}", kv_file.display()));
        assert!(dir.join(sqlite::approvals::DEFAULT_FILE).exists());
        assert!(s.approvals.is_some_and(|a| !a.shared()));
        // No state directory.
        let s = open(&files, None, Path::new("."), None, None).unwrap();
        assert_eq!(s.kv.describe(), "sqlite::memory:");
        let e = open(&files, None, Path::new("."), None, Some(ApprovalsAt::State))
            .err()
            .expect("the queue needs a place");
        assert!(e.to_string().contains("no state directory"), "{e}");
        // A store the embedder brings is kept, and a server nothing is
        // kept in is not opened (its URL is not even read).
        let bad = StateConfig {
            url: Some("not a url".into()),
            ..StateConfig::default()
        };
        let memory: Arc<dyn KvBackend> = Arc::new(sqlite::SqliteKv::memory());
        let s = open(&bad, None, Path::new("."), Some(memory), None).unwrap();
        assert_eq!(s.kv.describe(), "sqlite::memory:");
        let e = open(&bad, None, Path::new("."), None, None)
            .err()
            .expect("a bad URL");
        assert!(e.to_string().contains("[state] url"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_unavailable_store_says_it_fails_closed_and_recovers() {
        let e = KvError::Unavailable {
            store: "redis://127.0.0.1:1/0".into(),
            message: "connection refused".into(),
        };
        assert!(e.is_unavailable());
        let text = e.to_string();
        assert!(
            text.contains("fails closed") && text.contains("reconnects"),
            "{text}"
        );
    }
}
