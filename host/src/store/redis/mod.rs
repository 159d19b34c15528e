//! The shared engine: Redis or Valkey (standalone, not cluster), for
//! replicas of `toolgate serve` behind a load balancer (`[state] url =
//! "redis://…"`). It keeps the `kv` seam ([`kv`]) and, unless `[approval]
//! store` names a file, the approval queue ([`approvals`]), both under
//! `[state] prefix` (default `toolgate`: deployments sharing one server
//! keep apart).
//!
//! Why one module for both: what makes a server usable from a host that
//! must fail closed is the same for every store on it — the URL parsed
//! once, its password in no message ([`redact`]); one
//! `redis::aio::ConnectionManager` (a single multiplexed connection,
//! requests pipelined on it, no pool to size), created lazily — the host
//! starts, and serves calls that need no state, while the server is down
//! — and reconnected in the background after an error; each connection
//! attempt bounded by [`crate::budgets::STATE_CONNECT_TIMEOUT`], and every
//! operation, retries included, by `[state] timeout_ms`
//! ([`crate::budgets::STATE_OP_TIMEOUT`]): an unreachable server costs a
//! call that much at most, then the call fails closed
//! ([`Failure::Unavailable`]). Written once per store, this had been
//! written twice, and a host keeping both stores in Redis opened two
//! connections to one server; [`crate::store::open`] now hands both stores
//! one [`Redis`]. (The approval queue's change feed subscribes on a
//! connection of its own: a subscribed connection can send nothing else.)
//!
//! Each store keeps its own keys and its atomic Lua scripts, and turns a
//! [`Failure`] into its own error.

pub mod approvals;
pub mod kv;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManager;

pub use approvals::RedisApprovals;
pub use kv::RedisKv;

use super::OpenError;
use crate::budgets::STATE_CONNECT_TIMEOUT;

/// `[state] prefix` unset.
pub const DEFAULT_PREFIX: &str = "toolgate";

/// One server, shared by the stores on it.
pub struct Redis {
    /// The URL without its password, for messages.
    what: String,
    prefix: String,
    timeout: Duration,
    client: redis::Client,
    conn: ConnectionManager,
}

/// Why an operation failed, said by the store that ran it in its own
/// error.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// The server did not answer (down, unreachable, too slow).
    #[error("{store} is unavailable: {message}")]
    Unavailable { store: String, message: String },
    /// The server answered with an error (a script's refusal included).
    #[error("{store} failed: {message}")]
    Refused { store: String, message: String },
}

impl Redis {
    /// The server at `url` (`redis://`, `rediss://`, `valkey://`), keys
    /// under `prefix`, each operation within `timeout`. Not connected yet:
    /// the first operation connects. Needs a Tokio runtime.
    pub fn open(url: &str, prefix: &str, timeout: Duration) -> Result<Arc<Redis>, OpenError> {
        let bad = |message: String| OpenError::Url {
            url: redact(url),
            message,
        };
        // `valkey://` is `redis://`.
        let client = match url.strip_prefix("valkey://") {
            Some(rest) => redis::Client::open(format!("redis://{rest}")),
            None => redis::Client::open(url),
        }
        .map_err(|e| bad(e.to_string()))?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(STATE_CONNECT_TIMEOUT))
            .set_response_timeout(Some(timeout))
            // Reconnection: a few quick tries per failure, then the next
            // operation tries again. Never longer than an operation's
            // timeout, which bounds the wait anyway.
            .set_number_of_retries(2)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(500));
        let conn = ConnectionManager::new_lazy_with_config(client.clone(), config)
            .map_err(|e| bad(e.to_string()))?;
        Ok(Arc::new(Redis {
            what: redact(url),
            prefix: prefix.to_string(),
            timeout,
            client,
            conn,
        }))
    }

    /// What it is, for messages: the URL without its password.
    pub fn describe(&self) -> &str {
        &self.what
    }

    /// What every key starts with (`[state] prefix`).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// How long one operation may take (`[state] timeout_ms`).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The client, for a connection of a caller's own (a subscription).
    pub fn client(&self) -> &redis::Client {
        &self.client
    }

    /// Runs the script `call` prepared, within the timeout.
    pub async fn invoke<T: redis::FromRedisValue>(
        &self,
        call: &redis::ScriptInvocation<'_>,
    ) -> Result<T, Failure> {
        let mut conn = self.conn.clone();
        self.bounded(call.invoke_async(&mut conn)).await
    }

    /// Runs `cmd`, within the timeout.
    pub async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, Failure> {
        let mut conn = self.conn.clone();
        self.bounded(cmd.query_async(&mut conn)).await
    }

    /// `op` within the timeout; an I/O failure or the timeout is
    /// [`Failure::Unavailable`].
    async fn bounded<T>(
        &self,
        op: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, Failure> {
        match tokio::time::timeout(self.timeout, op).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) if is_unavailable(&e) => Err(Failure::Unavailable {
                store: self.what.clone(),
                message: e.to_string(),
            }),
            Ok(Err(e)) => Err(Failure::Refused {
                store: self.what.clone(),
                message: e.to_string(),
            }),
            Err(_) => Err(Failure::Unavailable {
                store: self.what.clone(),
                message: format!(
                    "no answer within {} ms ([state] timeout_ms)",
                    self.timeout.as_millis()
                ),
            }),
        }
    }
}

/// Whether `e` says the server cannot be reached (rather than refused
/// the request).
fn is_unavailable(e: &redis::RedisError) -> bool {
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

    /// A URL that is not one: refused at the start, naming `[state] url`,
    /// without its password.
    #[tokio::test]
    async fn a_bad_url_is_refused_without_its_password() {
        let e = Redis::open(
            "mysql://user:secret@db.example/0",
            DEFAULT_PREFIX,
            Duration::from_secs(1),
        )
        .err()
        .expect("not a Redis URL");
        let text = e.to_string();
        assert!(
            text.contains("[state] url") && text.contains("…@db.example"),
            "{text}"
        );
        assert!(!text.contains("secret"), "{text}");
        // The twin: a Valkey URL is a Redis one.
        assert!(Redis::open("valkey://127.0.0.1:1/0", "p", Duration::from_secs(1)).is_ok());
    }
}
