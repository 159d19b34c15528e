//! The shared state store: Redis or Valkey (standalone), for replicas of
//! `toolgate serve` behind a load balancer (`[state] url = "redis://…"`).
//!
//! **Connection.** One `redis::aio::ConnectionManager` per host: a single
//! multiplexed connection (requests pipelined on it, no pool to size),
//! created lazily — the host starts, and serves calls that need no state,
//! while the server is down — and reconnected in the background after an
//! error. Each connection attempt is bounded by
//! [`crate::budgets::STATE_CONNECT_TIMEOUT`], and every operation, retries
//! included, by the store's timeout ([`crate::budgets::STATE_OP_TIMEOUT`],
//! `[state] timeout_ms`): an unreachable server costs a call that much at
//! most, then the call fails closed ([`KvError::Unavailable`]).
//!
//! **Layout.** One hash per plugin and agent scope,
//! `PREFIX:kv:LEN:PLUGIN:SCOPE` (`LEN` the plugin name's length, so no
//! plugin and scope pair can spell another's), field = the key; and one
//! integer per plugin, `PREFIX:kvbytes:PLUGIN`, the bytes it holds (its
//! quota). `PREFIX` is `[state] prefix` (default `toolgate`): several
//! deployments may share one server.
//!
//! **Atomicity.** Every operation that reads then writes — `set` and
//! `delete` (they move the quota counter), `increment`, `compare-and-swap`
//! — is one Lua script: Redis runs a script alone, so replicas never
//! interleave inside one, and a rate limiter's count is exact however the
//! balancer spreads the calls. `increment` is `HINCRBY` (exact 64-bit
//! integers, refusing a value that is not one or an overflow).

use std::time::Duration;

use async_trait::async_trait;
use redis::aio::ConnectionManager;

use super::{KvBackend, KvError, OpenError, entry_bytes};
use crate::budgets::{KV_QUOTA_BYTES, STATE_CONNECT_TIMEOUT};

/// `[state] prefix` unset.
pub const DEFAULT_PREFIX: &str = "toolgate";

/// Store `ARGV[2]` under field `ARGV[1]` within the quota `ARGV[4]`
/// (`ARGV[3]`: the bytes the scope and key count). `{1, total}` stored,
/// `{0, total}` over quota.
const SET: &str = r"
local overhead = tonumber(ARGV[3])
local old = 0
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  old = overhead + redis.call('HSTRLEN', KEYS[1], ARGV[1])
end
local total = tonumber(redis.call('GET', KEYS[2]) or '0') - old + overhead + string.len(ARGV[2])
if total > tonumber(ARGV[4]) then return {0, total} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SET', KEYS[2], total)
return {1, total}
";

/// Remove field `ARGV[1]` and its bytes (`ARGV[2]`: the scope and key's).
const DELETE: &str = r"
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
local old = tonumber(ARGV[2]) + redis.call('HSTRLEN', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[1], ARGV[1])
local total = tonumber(redis.call('GET', KEYS[2]) or '0') - old
if total < 0 then total = 0 end
redis.call('SET', KEYS[2], total)
return 1
";

/// `HINCRBY` field `ARGV[1]` by `ARGV[2]` within the quota `ARGV[4]`,
/// undone when over it. `{1, value}` or `{0, total}`. A value that is not
/// an integer, or an overflow, is `HINCRBY`'s error (nothing changed).
const INCREMENT: &str = r"
local overhead = tonumber(ARGV[3])
local before = redis.call('HGET', KEYS[1], ARGV[1])
local old = 0
if before then old = overhead + string.len(before) end
local n = redis.call('HINCRBY', KEYS[1], ARGV[1], ARGV[2])
local total = tonumber(redis.call('GET', KEYS[2]) or '0') - old + overhead + redis.call('HSTRLEN', KEYS[1], ARGV[1])
if total > tonumber(ARGV[4]) then
  if before then redis.call('HSET', KEYS[1], ARGV[1], before) else redis.call('HDEL', KEYS[1], ARGV[1]) end
  return {0, total}
end
redis.call('SET', KEYS[2], total)
return {1, n}
";

/// Store `ARGV[4]` under `ARGV[1]` if the value there is `ARGV[3]`
/// (`ARGV[2]` = `1`) or there is none (`ARGV[2]` = `0`). `{1, total}`
/// stored, `{0, 0}` not the expected value, `{2, total}` over quota.
const CAS: &str = r"
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if ARGV[2] == '1' then
  if (not cur) or cur ~= ARGV[3] then return {0, 0} end
elseif cur then
  return {0, 0}
end
local overhead = tonumber(ARGV[5])
local old = 0
if cur then old = overhead + string.len(cur) end
local total = tonumber(redis.call('GET', KEYS[2]) or '0') - old + overhead + string.len(ARGV[4])
if total > tonumber(ARGV[6]) then return {2, total} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[4])
redis.call('SET', KEYS[2], total)
return {1, total}
";

/// The `kv` seam's state in Redis or Valkey.
pub struct RedisStore {
    /// The URL without its password, for messages.
    what: String,
    prefix: String,
    timeout: Duration,
    conn: ConnectionManager,
    set: redis::Script,
    delete: redis::Script,
    increment: redis::Script,
    cas: redis::Script,
}

impl RedisStore {
    /// A store at `url` (not connected yet: the first operation connects).
    /// Needs a Tokio runtime.
    pub fn open(url: &str, prefix: &str, timeout: Duration) -> Result<RedisStore, OpenError> {
        let bad = |message: String| OpenError::Url {
            url: redact(url),
            message,
        };
        let client = client(url).map_err(|e| bad(e.to_string()))?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(STATE_CONNECT_TIMEOUT))
            .set_response_timeout(Some(timeout))
            // Reconnection: a few quick tries per failure, then the next
            // operation tries again. Never longer than an operation's
            // timeout, which bounds the wait anyway.
            .set_number_of_retries(2)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(500));
        let conn = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|e| bad(e.to_string()))?;
        Ok(RedisStore {
            what: redact(url),
            prefix: prefix.to_string(),
            timeout,
            conn,
            set: redis::Script::new(SET),
            delete: redis::Script::new(DELETE),
            increment: redis::Script::new(INCREMENT),
            cas: redis::Script::new(CAS),
        })
    }

    fn hash(&self, plugin: &str, scope: &str) -> String {
        format!("{}:kv:{}:{plugin}:{scope}", self.prefix, plugin.len())
    }

    fn bytes(&self, plugin: &str) -> String {
        format!("{}:kvbytes:{plugin}", self.prefix)
    }

    /// Run `op` on the connection within the timeout; an I/O failure or
    /// the timeout is [`KvError::Unavailable`].
    async fn run<T, F>(&self, op: impl FnOnce(ConnectionManager) -> F) -> Result<T, KvError>
    where
        F: std::future::Future<Output = redis::RedisResult<T>>,
    {
        match tokio::time::timeout(self.timeout, op(self.conn.clone())).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(self.error(e)),
            Err(_) => Err(KvError::Unavailable {
                store: self.what.clone(),
                message: format!(
                    "no answer within {} ms ([state] timeout_ms)",
                    self.timeout.as_millis()
                ),
            }),
        }
    }

    fn error(&self, e: redis::RedisError) -> KvError {
        if is_unavailable(&e) {
            KvError::Unavailable {
                store: self.what.clone(),
                message: e.to_string(),
            }
        } else {
            KvError::Backend {
                store: self.what.clone(),
                message: e.to_string(),
            }
        }
    }
}

/// A client for `url` (`valkey://` is `redis://`); it connects later.
/// The approval queue's shared store makes its own from the same URL.
pub fn client(url: &str) -> redis::RedisResult<redis::Client> {
    match url.strip_prefix("valkey://") {
        Some(rest) => redis::Client::open(format!("redis://{rest}")),
        None => redis::Client::open(url),
    }
}

/// Whether `e` says the server cannot be reached (rather than refused
/// the request).
pub fn is_unavailable(e: &redis::RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || e.is_unrecoverable_error()
}

/// `url` without a password.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}://…@{}", &url[..s], &url[at + 1..]),
        _ => url.to_string(),
    }
}

fn quota(total: i64) -> KvError {
    KvError::Quota {
        total: total.max(0) as usize,
    }
}

#[async_trait]
impl KvBackend for RedisStore {
    fn describe(&self) -> String {
        self.what.clone()
    }

    async fn get(&self, plugin: &str, scope: &str, key: &str) -> Result<Option<Vec<u8>>, KvError> {
        let hash = self.hash(plugin, scope);
        self.run(|mut c| async move {
            redis::cmd("HGET")
                .arg(&hash)
                .arg(key)
                .query_async::<Option<Vec<u8>>>(&mut c)
                .await
        })
        .await
    }

    async fn set(&self, plugin: &str, scope: &str, key: &str, value: &[u8]) -> Result<(), KvError> {
        let (hash, bytes) = (self.hash(plugin, scope), self.bytes(plugin));
        let overhead = entry_bytes(scope, key, 0);
        let (ok, total): (i64, i64) = self
            .run(|mut c| async move {
                self.set
                    .key(&hash)
                    .key(&bytes)
                    .arg(key)
                    .arg(value)
                    .arg(overhead)
                    .arg(KV_QUOTA_BYTES)
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        if ok == 1 { Ok(()) } else { Err(quota(total)) }
    }

    async fn delete(&self, plugin: &str, scope: &str, key: &str) -> Result<(), KvError> {
        let (hash, bytes) = (self.hash(plugin, scope), self.bytes(plugin));
        let overhead = entry_bytes(scope, key, 0);
        let _: i64 = self
            .run(|mut c| async move {
                self.delete
                    .key(&hash)
                    .key(&bytes)
                    .arg(key)
                    .arg(overhead)
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        Ok(())
    }

    async fn keys(&self, plugin: &str, scope: &str, prefix: &str) -> Result<Vec<String>, KvError> {
        let hash = self.hash(plugin, scope);
        let mut keys: Vec<String> = self
            .run(|mut c| async move {
                redis::cmd("HKEYS")
                    .arg(&hash)
                    .query_async::<Vec<String>>(&mut c)
                    .await
            })
            .await?;
        keys.retain(|k| k.starts_with(prefix));
        keys.sort();
        Ok(keys)
    }

    async fn increment(
        &self,
        plugin: &str,
        scope: &str,
        key: &str,
        delta: i64,
    ) -> Result<i64, KvError> {
        let (hash, bytes) = (self.hash(plugin, scope), self.bytes(plugin));
        let overhead = entry_bytes(scope, key, 0);
        let answer: Result<(i64, i64), KvError> = self
            .run(|mut c| async move {
                self.increment
                    .key(&hash)
                    .key(&bytes)
                    .arg(key)
                    .arg(delta)
                    .arg(overhead)
                    .arg(KV_QUOTA_BYTES)
                    .invoke_async(&mut c)
                    .await
            })
            .await;
        match answer {
            Ok((1, n)) => Ok(n),
            Ok((_, total)) => Err(quota(total)),
            // HINCRBY's own refusals, raised inside the script.
            Err(KvError::Backend { message, .. }) if message.contains("not an integer") => {
                Err(KvError::NotInteger { key: key.into() })
            }
            Err(KvError::Backend { message, .. }) if message.contains("overflow") => {
                Err(KvError::Overflow { key: key.into() })
            }
            Err(e) => Err(e),
        }
    }

    async fn compare_and_swap(
        &self,
        plugin: &str,
        scope: &str,
        key: &str,
        expected: Option<&[u8]>,
        value: &[u8],
    ) -> Result<bool, KvError> {
        let (hash, bytes) = (self.hash(plugin, scope), self.bytes(plugin));
        let overhead = entry_bytes(scope, key, 0);
        let (has, exp) = match expected {
            Some(e) => ("1", e),
            None => ("0", &[][..]),
        };
        let (ok, total): (i64, i64) = self
            .run(|mut c| async move {
                self.cas
                    .key(&hash)
                    .key(&bytes)
                    .arg(key)
                    .arg(has)
                    .arg(exp)
                    .arg(value)
                    .arg(overhead)
                    .arg(KV_QUOTA_BYTES)
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        match ok {
            1 => Ok(true),
            0 => Ok(false),
            _ => Err(quota(total)),
        }
    }

    async fn ping(&self) -> Result<(), KvError> {
        let _: String = self
            .run(|mut c| async move { redis::cmd("PING").query_async(&mut c).await })
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_never_reaches_a_message() {
        assert_eq!(
            redact("redis://user:secret@db.example:6379/0"),
            "redis://…@db.example:6379/0"
        );
        assert_eq!(redact("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
    }

    /// A store nobody listens on: the host starts (the connection is
    /// lazy), and each operation fails closed within its timeout, saying
    /// which store and that it recovers by itself.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unreachable_server_fails_closed_within_the_timeout() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let s = RedisStore::open(
            &format!("redis://127.0.0.1:{port}/0"),
            DEFAULT_PREFIX,
            Duration::from_millis(300),
        )
        .unwrap();
        let started = std::time::Instant::now();
        let e = s.increment("p", "", "n", 1).await.unwrap_err();
        assert!(e.is_unavailable(), "{e}");
        assert!(e.to_string().contains(&format!("127.0.0.1:{port}")), "{e}");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        // From a synchronous host call, the same answer.
        let e =
            tokio::task::spawn_blocking(move || super::super::wait_here(&s, s.get("p", "", "n")))
                .await
                .unwrap()
                .unwrap_err();
        assert!(e.is_unavailable(), "{e}");
    }
}
