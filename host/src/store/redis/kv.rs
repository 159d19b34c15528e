//! The `kv` seam on the shared engine (`[state] url`; see [`super`] for
//! the connection, the timeout and why a server fails closed).
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

use std::sync::Arc;

use async_trait::async_trait;

use super::{Failure, Redis};
use crate::budgets::KV_QUOTA_BYTES;
use crate::store::{KvBackend, KvError, entry_bytes};

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
pub struct RedisKv {
    redis: Arc<Redis>,
    set: redis::Script,
    delete: redis::Script,
    increment: redis::Script,
    cas: redis::Script,
}

impl RedisKv {
    /// The store on `redis`, its keys under the server's prefix.
    pub fn new(redis: Arc<Redis>) -> RedisKv {
        RedisKv {
            redis,
            set: redis::Script::new(SET),
            delete: redis::Script::new(DELETE),
            increment: redis::Script::new(INCREMENT),
            cas: redis::Script::new(CAS),
        }
    }

    fn hash(&self, plugin: &str, scope: &str) -> String {
        format!(
            "{}:kv:{}:{plugin}:{scope}",
            self.redis.prefix(),
            plugin.len()
        )
    }

    fn bytes(&self, plugin: &str) -> String {
        format!("{}:kvbytes:{plugin}", self.redis.prefix())
    }

    /// `script` on the plugin's hash and byte count (its KEYS), with
    /// `args`.
    async fn invoke<T: redis::FromRedisValue>(
        &self,
        script: &redis::Script,
        plugin: &str,
        scope: &str,
        args: impl FnOnce(&mut redis::ScriptInvocation<'_>),
    ) -> Result<T, KvError> {
        let mut call = script.prepare_invoke();
        call.key(self.hash(plugin, scope)).key(self.bytes(plugin));
        args(&mut call);
        Ok(self.redis.invoke(&call).await?)
    }
}

impl From<Failure> for KvError {
    fn from(f: Failure) -> KvError {
        match f {
            Failure::Unavailable { store, message } => KvError::Unavailable { store, message },
            Failure::Refused { store, message } => KvError::Backend { store, message },
        }
    }
}

fn quota(total: i64) -> KvError {
    KvError::Quota {
        total: total.max(0) as usize,
    }
}

#[async_trait]
impl KvBackend for RedisKv {
    fn describe(&self) -> String {
        self.redis.describe().to_string()
    }

    async fn get(&self, plugin: &str, scope: &str, key: &str) -> Result<Option<Vec<u8>>, KvError> {
        let mut cmd = redis::cmd("HGET");
        cmd.arg(self.hash(plugin, scope)).arg(key);
        Ok(self.redis.query(&cmd).await?)
    }

    async fn set(&self, plugin: &str, scope: &str, key: &str, value: &[u8]) -> Result<(), KvError> {
        let overhead = entry_bytes(scope, key, 0);
        let (ok, total): (i64, i64) = self
            .invoke(&self.set, plugin, scope, |c| {
                c.arg(key).arg(value).arg(overhead).arg(KV_QUOTA_BYTES);
            })
            .await?;
        if ok == 1 { Ok(()) } else { Err(quota(total)) }
    }

    async fn delete(&self, plugin: &str, scope: &str, key: &str) -> Result<(), KvError> {
        let overhead = entry_bytes(scope, key, 0);
        let _: i64 = self
            .invoke(&self.delete, plugin, scope, |c| {
                c.arg(key).arg(overhead);
            })
            .await?;
        Ok(())
    }

    async fn keys(&self, plugin: &str, scope: &str, prefix: &str) -> Result<Vec<String>, KvError> {
        let mut cmd = redis::cmd("HKEYS");
        cmd.arg(self.hash(plugin, scope));
        let mut keys: Vec<String> = self.redis.query(&cmd).await?;
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
        let overhead = entry_bytes(scope, key, 0);
        let answer: Result<(i64, i64), KvError> = self
            .invoke(&self.increment, plugin, scope, |c| {
                c.arg(key).arg(delta).arg(overhead).arg(KV_QUOTA_BYTES);
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
        let overhead = entry_bytes(scope, key, 0);
        let (has, exp) = match expected {
            Some(e) => ("1", e),
            None => ("0", &[][..]),
        };
        let (ok, total): (i64, i64) = self
            .invoke(&self.cas, plugin, scope, |c| {
                c.arg(key)
                    .arg(has)
                    .arg(exp)
                    .arg(value)
                    .arg(overhead)
                    .arg(KV_QUOTA_BYTES);
            })
            .await?;
        match ok {
            1 => Ok(true),
            0 => Ok(false),
            _ => Err(quota(total)),
        }
    }

    async fn ping(&self) -> Result<(), KvError> {
        let _: String = self.redis.query(&redis::cmd("PING")).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

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
        let s = RedisKv::new(
            Redis::open(
                &format!("redis://127.0.0.1:{port}/0"),
                super::super::DEFAULT_PREFIX,
                Duration::from_millis(300),
            )
            .unwrap(),
        );
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
            tokio::task::spawn_blocking(move || crate::store::wait_here(&s, s.get("p", "", "n")))
                .await
                .unwrap()
                .unwrap_err();
        assert!(e.is_unavailable(), "{e}");
    }
}
