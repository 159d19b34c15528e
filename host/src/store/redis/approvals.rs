//! The approval queue on the shared engine: its entries and grants in the
//! Redis (or Valkey) server of `[state] url` (see [`super`] for the
//! connection, shared with the `kv` seam, and the timeout), so that
//! replicas of `toolgate serve` behind a load balancer share one queue — a
//! call asked on one replica is approved through the console or CLI of
//! another.
//!
//! **Authority.** Whoever can write these keys can approve any call, as
//! with the embedded file: protect the server (a password or an ACL user
//! in the URL, a private network, `rediss://`). `[state] prefix` keeps
//! deployments sharing one server apart.
//!
//! **Layout** (`P` = `[state] prefix`, default `toolgate`):
//! * `P:approvals:e:ID` — a hash per entry: `body` (the entry as asked,
//!   JSON, never rewritten), `state`, `decided` (JSON), `ran` (a retry
//!   ran it: unix ms), `retry` (`1`: it waits for a client's retry).
//!   Keeping what changes apart from the body means no script parses or
//!   re-encodes JSON (Lua's `cjson` would turn `[]` into `{}` and large
//!   integers into floats).
//! * `P:approvals:pending` (by `since`), `P:approvals:expiry` (by
//!   `expires`), `P:approvals:decided` (by decision time) — sorted sets of
//!   ids. The history keeps the last
//!   [`APPROVAL_KEEP_DECIDED`](crate::budgets::APPROVAL_KEEP_DECIDED)
//!   ended entries; pending ones are capped at
//!   [`APPROVAL_MAX_PENDING`](crate::budgets::APPROVAL_MAX_PENDING), both
//!   in the same script as the change, so the caps hold across replicas.
//! * `P:approvals:g:ID` — a hash per grant: `body`, `remaining`, `used`,
//!   `expires`, `revoked`; `P:approvals:grants` (active, by creation) and
//!   `P:approvals:revoked` (the last
//!   [`APPROVAL_MAX_GRANTS`](crate::budgets::APPROVAL_MAX_GRANTS) revoked
//!   ones) sorted by `P:approvals:seq`. Active grants are capped at the
//!   same number, atomically.
//!
//! * `P:console:s:SHA256` — a console login (`name`, `csrf`, `expires`),
//!   expired by Redis itself; `P:console:sessions` its ids by expiry, cut
//!   to [`CONSOLE_MAX_SESSIONS`](crate::budgets::CONSOLE_MAX_SESSIONS) —
//!   so a login made on one replica is known to every other.
//!
//! **Atomicity.** Every change is one Lua script (Redis runs a script
//! alone): the first of two racing decisions finds the entry pending and
//! ends it, the second finds it ended (`None`); a grant's count is taken
//! one use at a time; a retry runs an approval once.
//!
//! **Changes.** The scripts that add or end an entry also `PUBLISH` it on
//! `P:approvals:changes`, in the same atomic step: a change is announced
//! exactly when it is made, never lost between the two. Every replica
//! subscribes on a connection of its own (reconnected after a failure,
//! pinged every [`FEED_PING`] so that a dead connection is noticed) and
//! hands what other replicas changed to its queue
//! ([`ApprovalStore::changes`]). Pub/sub delivers to connected subscribers
//! only, so each (re)subscription is followed by [`Change::Missed`], and
//! the queue looks again at what waits on it.
//!
//! **Failure.** Every operation is bounded by `[state] timeout_ms`; a
//! server that does not answer is [`StoreError::Unavailable`]: asking
//! fails closed (the call is denied saying so), deciding reports it; the
//! connection is re-established by itself (the engine's, [`super`]).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::{Failure, Redis};
use crate::approval::store::{
    ApprovalStore, Change, ConsoleSession, Decided, Entry, EntryState, Grant, Listing, StoreError,
};
use crate::budgets::{
    APPROVAL_KEEP_DECIDED, APPROVAL_MAX_GRANTS, APPROVAL_MAX_PENDING, STATE_CONNECT_TIMEOUT,
};

/// How often the change feed's connection is pinged; a ping unanswered
/// within the operation timeout drops it, and it is made again.
pub const FEED_PING: Duration = Duration::from_secs(5);

/// Changes the feed holds for a slow queue before it says
/// [`Change::Missed`].
const FEED_BACKLOG: usize = 1024;

/// Lua: `announce(origin, id)` publishes the entry `id` as it is now.
/// The message: origin, id, state, decided, ran, body — one per line
/// (compact JSON has no raw newline).
macro_rules! lua {
    ($body:literal) => {
        concat!(
            r"
local p = ARGV[1]
local function ekey(id) return p .. ':approvals:e:' .. id end
local function gkey(id) return p .. ':approvals:g:' .. id end
local function announce(origin, id)
  local f = redis.call('HMGET', ekey(id), 'body', 'state', 'decided', 'ran')
  redis.call('PUBLISH', p .. ':approvals:changes',
    origin .. '\n' .. id .. '\n' .. (f[2] or '') .. '\n' .. (f[3] or '') .. '\n' .. (f[4] or '') .. '\n' .. (f[1] or ''))
end
",
            $body
        )
    };
}

/// ARGV: prefix, id, body, since, expires, retry (`1`/`0`), max pending,
/// origin. `1` kept, `0` the queue is full.
const PUT_PENDING: &str = lua!(
    r"
if redis.call('ZCARD', p .. ':approvals:pending') >= tonumber(ARGV[7]) then return 0 end
if redis.call('EXISTS', ekey(ARGV[2])) == 1 then return redis.error_reply('an entry with this id exists') end
redis.call('HSET', ekey(ARGV[2]), 'body', ARGV[3], 'state', 'pending', 'retry', ARGV[6])
redis.call('ZADD', p .. ':approvals:pending', ARGV[4], ARGV[2])
redis.call('ZADD', p .. ':approvals:expiry', ARGV[5], ARGV[2])
announce(ARGV[8], ARGV[2])
return 1
"
);

/// ARGV: prefix, id, state, decided (JSON), decided ms, history kept,
/// origin. The entry's fields, or nil when it is not pending.
const DECIDE: &str = lua!(
    r"
local id = ARGV[2]
if redis.call('HGET', ekey(id), 'state') ~= 'pending' then return false end
redis.call('HSET', ekey(id), 'state', ARGV[3], 'decided', ARGV[4])
redis.call('ZREM', p .. ':approvals:pending', id)
redis.call('ZREM', p .. ':approvals:expiry', id)
redis.call('ZADD', p .. ':approvals:decided', ARGV[5], id)
announce(ARGV[7], id)
local f = redis.call('HMGET', ekey(id), 'body', 'state', 'decided', 'ran')
local over = redis.call('ZCARD', p .. ':approvals:decided') - tonumber(ARGV[6])
if over > 0 then
  for _, old in ipairs(redis.call('ZRANGE', p .. ':approvals:decided', 0, over - 1)) do
    redis.call('DEL', ekey(old))
  end
  redis.call('ZREMRANGEBYRANK', p .. ':approvals:decided', 0, over - 1)
end
return f
"
);

/// ARGV: prefix, session id digest, name, csrf, expires ms, now ms, max.
/// A console login: a hash that Redis expires itself, and a sorted set
/// (by expiry) that caps how many there are.
const PUT_SESSION: &str = r"
local p = ARGV[1]
local k = p .. ':console:s:' .. ARGV[2]
local z = p .. ':console:sessions'
redis.call('HSET', k, 'name', ARGV[3], 'csrf', ARGV[4], 'expires', ARGV[5])
redis.call('PEXPIREAT', k, ARGV[5])
redis.call('ZREMRANGEBYSCORE', z, '-inf', ARGV[6])
redis.call('ZADD', z, ARGV[5], ARGV[2])
local over = redis.call('ZCARD', z) - tonumber(ARGV[7])
if over > 0 then
  for _, old in ipairs(redis.call('ZRANGE', z, 0, over - 1)) do
    redis.call('DEL', p .. ':console:s:' .. old)
  end
  redis.call('ZREMRANGEBYRANK', z, 0, over - 1)
end
return 1
";

/// ARGV: prefix, id, at ms. The entry's fields once marked run, or nil.
const RUN_ONCE: &str = lua!(
    r"
local s = redis.call('HMGET', ekey(ARGV[2]), 'state', 'retry', 'ran')
if s[1] ~= 'approved' or s[2] ~= '1' or s[3] then return false end
redis.call('HSET', ekey(ARGV[2]), 'ran', ARGV[3])
return redis.call('HMGET', ekey(ARGV[2]), 'body', 'state', 'decided', 'ran')
"
);

/// ARGV: prefix, `pending` | `decided` | `overdue`, n (-1: all), at ms
/// (`overdue`). Each listed entry's fields.
const LIST: &str = lua!(
    r"
local ids
if ARGV[2] == 'pending' then
  ids = redis.call('ZRANGE', p .. ':approvals:pending', 0, -1)
elseif ARGV[2] == 'decided' then
  ids = redis.call('ZREVRANGE', p .. ':approvals:decided', 0, tonumber(ARGV[3]) - 1)
else
  ids = redis.call('ZRANGEBYSCORE', p .. ':approvals:expiry', '-inf', ARGV[4], 'LIMIT', 0, tonumber(ARGV[3]))
end
local out = {}
for _, id in ipairs(ids) do
  local f = redis.call('HMGET', ekey(id), 'body', 'state', 'decided', 'ran')
  if f[1] then table.insert(out, f) end
end
return out
"
);

/// ARGV: prefix, id, body, remaining (`''`: none), expires (`''`: none),
/// max active. `1` kept, `0` too many.
const PUT_GRANT: &str = lua!(
    r"
if redis.call('ZCARD', p .. ':approvals:grants') >= tonumber(ARGV[6]) then return 0 end
local seq = redis.call('INCR', p .. ':approvals:seq')
redis.call('HSET', gkey(ARGV[2]), 'body', ARGV[3], 'used', 0)
if ARGV[4] ~= '' then redis.call('HSET', gkey(ARGV[2]), 'remaining', ARGV[4]) end
if ARGV[5] ~= '' then redis.call('HSET', gkey(ARGV[2]), 'expires', ARGV[5]) end
redis.call('ZADD', p .. ':approvals:grants', seq, ARGV[2])
return 1
"
);

/// ARGV: prefix. Every active grant's fields, oldest first.
const GRANTS: &str = lua!(
    r"
local out = {}
for _, id in ipairs(redis.call('ZRANGE', p .. ':approvals:grants', 0, -1)) do
  local f = redis.call('HMGET', gkey(id), 'body', 'remaining', 'used', 'revoked')
  if f[1] then table.insert(out, f) end
end
return out
"
);

/// ARGV: prefix, id, now ms. The grant's fields after one use, or nil
/// when it is not active.
const USE_GRANT: &str = lua!(
    r"
if not redis.call('ZSCORE', p .. ':approvals:grants', ARGV[2]) then return false end
local g = redis.call('HMGET', gkey(ARGV[2]), 'remaining', 'expires', 'revoked')
if g[3] then return false end
if g[2] and tonumber(ARGV[3]) >= tonumber(g[2]) then return false end
if g[1] and tonumber(g[1]) <= 0 then return false end
if g[1] then redis.call('HINCRBY', gkey(ARGV[2]), 'remaining', -1) end
redis.call('HINCRBY', gkey(ARGV[2]), 'used', 1)
return redis.call('HMGET', gkey(ARGV[2]), 'body', 'remaining', 'used', 'revoked')
"
);

/// ARGV: prefix, id, revoked (JSON), revoked kept. The grant's fields, or
/// nil when it is not active.
const REVOKE_GRANT: &str = lua!(
    r"
if not redis.call('ZSCORE', p .. ':approvals:grants', ARGV[2]) then return false end
redis.call('HSET', gkey(ARGV[2]), 'revoked', ARGV[3])
redis.call('ZREM', p .. ':approvals:grants', ARGV[2])
redis.call('ZADD', p .. ':approvals:revoked', redis.call('INCR', p .. ':approvals:seq'), ARGV[2])
local f = redis.call('HMGET', gkey(ARGV[2]), 'body', 'remaining', 'used', 'revoked')
local over = redis.call('ZCARD', p .. ':approvals:revoked') - tonumber(ARGV[4])
if over > 0 then
  for _, old in ipairs(redis.call('ZRANGE', p .. ':approvals:revoked', 0, over - 1)) do
    redis.call('DEL', gkey(old))
  end
  redis.call('ZREMRANGEBYRANK', p .. ':approvals:revoked', 0, over - 1)
end
return f
"
);

/// An entry's or a grant's fields as a script returns them.
type Fields = Vec<Option<String>>;

/// The approval queue's store in Redis or Valkey.
pub struct RedisApprovals {
    redis: Arc<Redis>,
    /// This process's mark on what it publishes: its own changes are not
    /// handed back to it.
    origin: String,
    changes: tokio::sync::broadcast::Sender<Change>,
    /// Stops the feed when the store goes.
    _feed: tokio_util::sync::DropGuard,
    scripts: Scripts,
}

struct Scripts {
    put_pending: redis::Script,
    decide: redis::Script,
    run_once: redis::Script,
    list: redis::Script,
    put_grant: redis::Script,
    grants: redis::Script,
    use_grant: redis::Script,
    revoke_grant: redis::Script,
    put_session: redis::Script,
}

fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

fn json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(backend)
}

impl From<Failure> for StoreError {
    fn from(f: Failure) -> StoreError {
        match f {
            Failure::Unavailable { store, message } => StoreError::Unavailable { store, message },
            Failure::Refused { store, message } => {
                StoreError::Backend(format!("{store}: {message}"))
            }
        }
    }
}

impl RedisApprovals {
    /// The store on `redis`, its keys under the server's prefix. Starts
    /// the change feed (on a connection of its own), so it needs a Tokio
    /// runtime; neither connects before it is used: the host starts while
    /// the server is down.
    pub fn new(redis: Arc<Redis>) -> Result<RedisApprovals, StoreError> {
        let origin = crate::approval::queue::random_hex(8);
        let (changes, _) = tokio::sync::broadcast::channel(FEED_BACKLOG);
        let stop = tokio_util::sync::CancellationToken::new();
        let rt = tokio::runtime::Handle::try_current().map_err(|_| StoreError::Open {
            path: redis.describe().to_string(),
            message: "the change feed needs a Tokio runtime".into(),
        })?;
        rt.spawn(feed(Feed {
            client: redis.client().clone(),
            channel: format!("{}:approvals:changes", redis.prefix()),
            origin: origin.clone(),
            timeout: redis.timeout(),
            changes: changes.clone(),
            stop: stop.clone(),
            what: redis.describe().to_string(),
        }));
        Ok(RedisApprovals {
            redis,
            origin,
            changes,
            _feed: stop.drop_guard(),
            scripts: Scripts {
                put_pending: redis::Script::new(PUT_PENDING),
                decide: redis::Script::new(DECIDE),
                run_once: redis::Script::new(RUN_ONCE),
                list: redis::Script::new(LIST),
                put_grant: redis::Script::new(PUT_GRANT),
                grants: redis::Script::new(GRANTS),
                use_grant: redis::Script::new(USE_GRANT),
                revoke_grant: redis::Script::new(REVOKE_GRANT),
                put_session: redis::Script::new(PUT_SESSION),
            },
        })
    }

    /// What it is, for messages (the URL without a password).
    pub fn describe(&self) -> &str {
        self.redis.describe()
    }

    /// Runs `script` with the prefix and `args` as ARGV, within the
    /// timeout.
    async fn script<T: redis::FromRedisValue>(
        &self,
        script: &redis::Script,
        args: &[&str],
    ) -> Result<T, StoreError> {
        let mut call = script.prepare_invoke();
        call.arg(self.redis.prefix());
        for a in args {
            call.arg(*a);
        }
        Ok(self.redis.invoke(&call).await?)
    }

    fn key(&self, id: &str) -> String {
        format!("{}:approvals:e:{id}", self.redis.prefix())
    }

    fn session_key(&self, id_sha256: &str) -> String {
        format!("{}:console:s:{id_sha256}", self.redis.prefix())
    }
}

/// An entry from its fields: body, state, decided, ran.
fn entry_of(f: &[Option<String>]) -> Result<Entry, StoreError> {
    let body = f
        .first()
        .cloned()
        .flatten()
        .ok_or_else(|| backend("an entry has no body"))?;
    let mut entry: Entry = serde_json::from_str(&body)
        .map_err(|e| backend(format!("an entry does not parse: {e}")))?;
    if let Some(state) = f.get(1).cloned().flatten() {
        entry.state = serde_json::from_value(serde_json::Value::String(state))
            .map_err(|e| backend(format!("an entry's state does not parse: {e}")))?;
    }
    if let Some(decided) = f.get(2).cloned().flatten().filter(|d| !d.is_empty()) {
        entry.decided = Some(
            serde_json::from_str(&decided)
                .map_err(|e| backend(format!("an entry's decision does not parse: {e}")))?,
        );
    }
    if let Some(ran) = f.get(3).cloned().flatten().filter(|r| !r.is_empty())
        && let Some(retry) = entry.retry.as_mut()
    {
        retry.ran_ms = Some(ran.parse().map_err(backend)?);
    }
    Ok(entry)
}

/// A grant from its fields: body, remaining, used, revoked.
fn grant_of(f: &[Option<String>]) -> Result<Grant, StoreError> {
    let body = f
        .first()
        .cloned()
        .flatten()
        .ok_or_else(|| backend("a grant has no body"))?;
    let mut grant: Grant =
        serde_json::from_str(&body).map_err(|e| backend(format!("a grant does not parse: {e}")))?;
    grant.remaining = match f.get(1).cloned().flatten() {
        Some(n) => Some(n.parse::<i64>().map_err(backend)?.max(0) as u64),
        None => None,
    };
    if let Some(used) = f.get(2).cloned().flatten() {
        grant.used = used.parse().map_err(backend)?;
    }
    grant.revoked = match f.get(3).cloned().flatten() {
        Some(r) => Some(
            serde_json::from_str(&r)
                .map_err(|e| backend(format!("a grant's revocation does not parse: {e}")))?,
        ),
        None => None,
    };
    Ok(grant)
}

#[async_trait]
impl ApprovalStore for RedisApprovals {
    async fn put_pending(&self, entry: &Entry) -> Result<(), StoreError> {
        // The body is the entry as asked: what changes is kept beside it.
        let mut asked = entry.clone();
        asked.state = EntryState::Pending;
        asked.decided = None;
        let body = json(&asked)?;
        let retry = if entry.retry.is_some() { "1" } else { "0" };
        let kept: i64 = self
            .script(
                &self.scripts.put_pending,
                &[
                    &entry.id,
                    &body,
                    &entry.since_ms.to_string(),
                    &entry.expires_ms.to_string(),
                    retry,
                    &APPROVAL_MAX_PENDING.to_string(),
                    &self.origin,
                ],
            )
            .await?;
        if kept == 1 {
            Ok(())
        } else {
            Err(StoreError::Full(format!(
                "the approval queue is full (at most {APPROVAL_MAX_PENDING} pending, across replicas)"
            )))
        }
    }

    async fn decide(
        &self,
        id: &str,
        state: EntryState,
        decided: &Decided,
    ) -> Result<Option<Entry>, StoreError> {
        let f: Option<Fields> = self
            .script(
                &self.scripts.decide,
                &[
                    id,
                    state.as_str(),
                    &json(decided)?,
                    &decided.at_ms.to_string(),
                    &APPROVAL_KEEP_DECIDED.to_string(),
                    &self.origin,
                ],
            )
            .await?;
        f.map(|f| entry_of(&f)).transpose()
    }

    async fn run_once(&self, id: &str, at_ms: u64) -> Result<Option<Entry>, StoreError> {
        let f: Option<Fields> = self
            .script(&self.scripts.run_once, &[id, &at_ms.to_string()])
            .await?;
        f.map(|f| entry_of(&f)).transpose()
    }

    async fn list(&self, listing: Listing) -> Result<Vec<Entry>, StoreError> {
        let (which, n) = match listing {
            Listing::Pending => ("pending", -1),
            // Lua's numbers are doubles: keep the count exact.
            Listing::Decided(n) => ("decided", n.min(1 << 20) as i64),
        };
        if n == 0 {
            return Ok(Vec::new());
        }
        let rows: Vec<Fields> = self
            .script(&self.scripts.list, &[which, &n.to_string(), "0"])
            .await?;
        rows.iter().map(|f| entry_of(f)).collect()
    }

    async fn get(&self, id: &str) -> Result<Option<Entry>, StoreError> {
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(self.key(id))
            .arg(&["body", "state", "decided", "ran"][..]);
        let f: Fields = self.redis.query(&cmd).await?;
        if f.first().is_none_or(Option::is_none) {
            return Ok(None);
        }
        entry_of(&f).map(Some)
    }

    async fn count_pending(&self) -> Result<usize, StoreError> {
        let mut cmd = redis::cmd("ZCARD");
        cmd.arg(format!("{}:approvals:pending", self.redis.prefix()));
        Ok(self.redis.query(&cmd).await?)
    }

    async fn put_grant(&self, grant: &Grant) -> Result<(), StoreError> {
        let mut made = grant.clone();
        made.revoked = None;
        let kept: i64 = self
            .script(
                &self.scripts.put_grant,
                &[
                    &grant.id,
                    &json(&made)?,
                    &grant.remaining.map(|n| n.to_string()).unwrap_or_default(),
                    &grant.expires_ms.map(|n| n.to_string()).unwrap_or_default(),
                    &APPROVAL_MAX_GRANTS.to_string(),
                ],
            )
            .await?;
        if kept == 1 {
            Ok(())
        } else {
            Err(StoreError::Full(format!(
                "{APPROVAL_MAX_GRANTS} grants are active already; revoke some first"
            )))
        }
    }

    async fn grants(&self) -> Result<Vec<Grant>, StoreError> {
        let rows: Vec<Fields> = self.script(&self.scripts.grants, &[]).await?;
        rows.iter().map(|f| grant_of(f)).collect()
    }

    async fn use_grant(&self, id: &str, now_ms: u64) -> Result<Option<Grant>, StoreError> {
        let f: Option<Fields> = self
            .script(&self.scripts.use_grant, &[id, &now_ms.to_string()])
            .await?;
        f.map(|f| grant_of(&f)).transpose()
    }

    async fn revoke_grant(&self, id: &str, revoked: &Decided) -> Result<Option<Grant>, StoreError> {
        let f: Option<Fields> = self
            .script(
                &self.scripts.revoke_grant,
                &[id, &json(revoked)?, &APPROVAL_MAX_GRANTS.to_string()],
            )
            .await?;
        f.map(|f| grant_of(&f)).transpose()
    }

    async fn overdue(&self, at_ms: u64, limit: usize) -> Result<Vec<Entry>, StoreError> {
        let limit = limit.min(1 << 20);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let rows: Vec<Fields> = self
            .script(
                &self.scripts.list,
                &["overdue", &limit.to_string(), &at_ms.to_string()],
            )
            .await?;
        // Ended meanwhile (the sorted set and the hash are changed in one
        // script, so this is belt and braces).
        Ok(rows
            .iter()
            .map(|f| entry_of(f))
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .filter(|e| e.state == EntryState::Pending)
            .collect())
    }

    async fn put_session(&self, session: &ConsoleSession, max: usize) -> Result<(), StoreError> {
        let _: i64 = self
            .script(
                &self.scripts.put_session,
                &[
                    &session.id_sha256,
                    &session.name,
                    &session.csrf,
                    &session.expires_ms.to_string(),
                    &crate::approval::queue::now_ms().to_string(),
                    &max.min(1 << 20).to_string(),
                ],
            )
            .await?;
        Ok(())
    }

    async fn session(
        &self,
        id_sha256: &str,
        now_ms: u64,
    ) -> Result<Option<ConsoleSession>, StoreError> {
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(self.session_key(id_sha256))
            .arg(&["name", "csrf", "expires"][..]);
        let f: Fields = self.redis.query(&cmd).await?;
        let (Some(Some(name)), Some(Some(csrf)), Some(Some(expires))) =
            (f.first(), f.get(1), f.get(2))
        else {
            return Ok(None);
        };
        let expires_ms: u64 = expires
            .parse()
            .map_err(|_| backend("a console session's expiry is not a number"))?;
        Ok((expires_ms > now_ms).then(|| ConsoleSession {
            id_sha256: id_sha256.to_string(),
            name: name.clone(),
            csrf: csrf.clone(),
            expires_ms,
        }))
    }

    async fn end_session(&self, id_sha256: &str) -> Result<(), StoreError> {
        let mut del = redis::cmd("DEL");
        del.arg(self.session_key(id_sha256));
        let _: i64 = self.redis.query(&del).await?;
        let mut zrem = redis::cmd("ZREM");
        zrem.arg(format!("{}:console:sessions", self.redis.prefix()))
            .arg(id_sha256);
        let _: i64 = self.redis.query(&zrem).await?;
        Ok(())
    }

    fn shared(&self) -> bool {
        true
    }

    fn changes(&self) -> Option<tokio::sync::broadcast::Receiver<Change>> {
        Some(self.changes.subscribe())
    }
}

/// What the change feed needs.
struct Feed {
    client: redis::Client,
    channel: String,
    origin: String,
    timeout: Duration,
    changes: tokio::sync::broadcast::Sender<Change>,
    stop: tokio_util::sync::CancellationToken,
    what: String,
}

/// Subscribes to the changes channel and hands other replicas' changes
/// on, until the store is dropped; after any failure, subscribes again
/// (after a pause) and says [`Change::Missed`].
async fn feed(f: Feed) {
    use futures::StreamExt;
    let mut failures = 0u32;
    loop {
        let connect = async {
            let pubsub = tokio::time::timeout(STATE_CONNECT_TIMEOUT, f.client.get_async_pubsub())
                .await
                .map_err(|_| "no connection within the connect timeout".to_string())?
                .map_err(|e| e.to_string())?;
            let (mut sink, stream) = pubsub.split();
            tokio::time::timeout(f.timeout, sink.subscribe(&f.channel))
                .await
                .map_err(|_| "no answer to SUBSCRIBE".to_string())?
                .map_err(|e| e.to_string())?;
            Ok::<_, String>((sink, stream))
        };
        let connected = tokio::select! {
            () = f.stop.cancelled() => return,
            c = connect => c,
        };
        match connected {
            Ok((mut sink, mut stream)) => {
                if failures > 0 {
                    tracing::info!(store = %f.what, "the approval change feed is back");
                }
                failures = 0;
                // Whatever was published while not subscribed is missed.
                let _ = f.changes.send(Change::Missed);
                let mut ping = tokio::time::interval(FEED_PING);
                ping.tick().await;
                loop {
                    tokio::select! {
                        () = f.stop.cancelled() => return,
                        msg = stream.next() => match msg {
                            Some(msg) => {
                                if let Some(change) = parse(msg.get_payload_bytes(), &f.origin) {
                                    let _ = f.changes.send(change);
                                }
                            }
                            None => break,
                        },
                        _ = ping.tick() => {
                            let pong = tokio::time::timeout(f.timeout, sink.ping::<::redis::Value>()).await;
                            if !matches!(pong, Ok(Ok(_))) {
                                break;
                            }
                        }
                    }
                }
                tracing::warn!(store = %f.what, "the approval change feed was cut; subscribing again");
            }
            Err(e) => {
                if failures == 0 {
                    tracing::warn!(store = %f.what, error = %e, "the approval change feed cannot subscribe; trying again");
                }
            }
        }
        failures = failures.saturating_add(1);
        let pause = Duration::from_millis(100 * u64::from(failures.min(10)));
        tokio::select! {
            () = f.stop.cancelled() => return,
            () = tokio::time::sleep(pause) => {}
        }
    }
}

/// One published change, unless it is this process's own (or does not
/// parse: logged, and the queue looks again).
fn parse(payload: &[u8], origin: &str) -> Option<Change> {
    let text = std::str::from_utf8(payload).ok()?;
    let mut parts = text.splitn(6, '\n');
    let from = parts.next()?;
    if from == origin {
        return None;
    }
    let _id = parts.next()?;
    let fields: Fields = parts
        .map(|s| (!s.is_empty()).then(|| s.to_string()))
        .collect();
    // Published as origin, id, state, decided, ran, body; read as body,
    // state, decided, ran.
    let [state, decided, ran, body] = <[Option<String>; 4]>::try_from(fields).ok()?;
    match entry_of(&[body, state, decided, ran]) {
        Ok(e) if e.state == EntryState::Pending => Some(Change::Pending(e)),
        Ok(e) => Some(Change::Ended(e)),
        Err(e) => {
            tracing::warn!(error = %e, "an approval change does not parse");
            Some(Change::Missed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_published_change_parses_and_its_own_are_dropped() {
        let body = r#"{"id":"a-1","sinceMs":1,"expiresMs":2,"scope":"","tool":"bash","arguments":{"xs":[]},"askedBy":"h","reason":"r","state":"pending"}"#;
        let pending = format!("them\na-1\npending\n\n\n{body}");
        let Some(Change::Pending(e)) = parse(pending.as_bytes(), "me") else {
            panic!("not a pending change");
        };
        assert_eq!(e.arguments, serde_json::json!({"xs": []}));
        assert!(parse(pending.as_bytes(), "them").is_none());
        let ended = format!("them\na-1\ndenied\n{{\"by\":\"bob\",\"atMs\":3}}\n\n{body}");
        let Some(Change::Ended(e)) = parse(ended.as_bytes(), "me") else {
            panic!("not an ended change");
        };
        assert_eq!(e.state, EntryState::Denied);
        assert_eq!(e.decided.unwrap().by, "bob");
        assert!(matches!(
            parse(b"them\na-1\nno\n\n\n{", "me"),
            Some(Change::Missed)
        ));
    }
}
