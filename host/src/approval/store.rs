//! What the approval queue keeps, and the trait of the place it keeps it.
//!
//! The queue (`approval::queue`) owns the logic — who waits, what a grant
//! matches, when an entry expires; a store only keeps entries and grants
//! and makes each change atomic: a pending entry is decided once (the
//! first of two racing decisions wins, the other is told it was too
//! late), a grant's count is taken one use at a time. That is the whole
//! contract, so that a shared database backs it as well as the embedded
//! file: [`crate::store::sqlite::SqliteApprovals`] (one host per file) and
//! [`crate::store::redis::RedisApprovals`] (replicas sharing `[state]
//! url`). The trait is here, beside its one user, and the stores
//! implement it where their engines are (`store` names `approval`, never
//! the reverse).
//!
//! A shared store also tells each replica what the others changed
//! ([`ApprovalStore::changes`]): a call waiting on one replica goes on
//! when a person decides on another.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{CallCard, EgressAsk};

/// Where an entry is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EntryState {
    /// Waiting for a decision.
    Pending,
    Approved,
    Denied,
    /// The call went away first (cancelled, its client gone).
    Withdrawn,
    /// Nobody decided in time, or the host restarted while it waited.
    Expired,
}

impl EntryState {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryState::Pending => "pending",
            EntryState::Approved => "approved",
            EntryState::Denied => "denied",
            EntryState::Withdrawn => "withdrawn",
            EntryState::Expired => "expired",
        }
    }
}

/// Who ended an entry's wait, when, and what they said.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decided {
    /// The identity of whoever decided (`console`, `cli`, an API caller's
    /// name), or `approval-queue` for the queue's own endings.
    pub by: String,
    /// Unix time, milliseconds.
    pub at_ms: u64,
    /// For a denial: the message that reaches the model. For the queue's
    /// endings: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The grant this decision made, if it made one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<String>,
    /// For a question's entry ([`Entry::questions`]) answered: the
    /// answers, checked against its options, in its questions' order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers: Option<Vec<super::questions::Answer>>,
}

/// One call waiting for (or having had) a decision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub id: String,
    /// When it was asked (unix ms).
    pub since_ms: u64,
    /// When the wait ends without a decision (unix ms).
    pub expires_ms: u64,
    /// The agent scope of the call.
    pub scope: String,
    /// The client's name (`clientInfo`), when the call came over MCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// The client's session, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Who is calling, authenticated (`[auth]`): the access token's
    /// subject — unlike `client`, not a name the client chose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
    pub tool: String,
    /// The call's arguments (or, beyond
    /// [`APPROVAL_MAX_ARGUMENT_BYTES`](crate::budgets::APPROVAL_MAX_ARGUMENT_BYTES),
    /// a note saying they were too large to show).
    pub arguments: Value,
    /// The tool's card for the call (its call view), if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card: Option<CallCard>,
    /// The hook that asked.
    pub asked_by: String,
    /// Its question.
    pub reason: String,
    pub state: EntryState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided: Option<Decided>,
    /// The replica that asked (`[state] replica_id`): after a restart, a
    /// replica ends only the waits that were its own (see
    /// [`super::queue`]). `None` in entries of a host without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    /// Set for a call of the stateless revision (2026-07-28), which does
    /// not wait: its client is answered at once and calls again once the
    /// entry is decided (see [`super::queue`], "Calls that do not wait").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Retry>,
    /// Set for an egress approval (`[egress] ask = true`): the connection
    /// of the call that waits, not the call itself. Approving it lets the
    /// call connect there; a grant made from it is an egress grant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<EgressAsk>,
    /// Set for questions for the user (`ask_user_question` under
    /// `--approve queue`): answered with the `answer` verdict (the answers
    /// in [`Decided::answers`]); denying it declines them. Never approved
    /// plainly, never by a grant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub questions: Option<super::questions::Questions>,
}

/// What ties a client's retry to the entry it asked about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Retry {
    /// SHA-256 (hex) of the call's tool and arguments: a retry with other
    /// arguments is not what was approved.
    pub digest: String,
    /// When a retry ran the approved call (unix ms): an approval runs one
    /// call, once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ran_ms: Option<u64>,
}

impl Entry {
    /// The entry as the console's API lists it and the webhook posts it
    /// (`toolgate approvals list --json` prints these keys first).
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "id": self.id,
            "tool": self.tool,
            "arguments": self.arguments,
            "scope": self.scope,
            "reason": self.reason,
            "since": self.since_ms,
            "expires": self.expires_ms,
            "askedBy": self.asked_by,
            "client": self.client,
            "session": self.session,
            "card": self.card,
            "state": self.state.as_str(),
            "decided": self.decided,
            "egress": self.egress,
        });
        if let Some(q) = &self.questions {
            v["questions"] = json!(q.questions);
        }
        // Only under `[auth]`: who is calling, authenticated.
        if let Some(c) = &self.caller {
            v["caller"] = Value::String(c.clone());
        }
        // Only with a shared store: which replica asked.
        if let Some(r) = &self.replica {
            v["replica"] = Value::String(r.clone());
        }
        v
    }
}

/// Approve this call and every later one that matches, for a time or a
/// number of calls. Every field that is set must match; see
/// [`super::grant`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    pub id: String,
    /// The tool's name, exactly.
    pub tool: String,
    /// A top-level argument of the call, whose value (a string) must
    /// match `pattern`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument: Option<String>,
    /// A glob (`*`, `?`, `[…]`; `*` also matches `/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The client's name or session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    pub created_ms: u64,
    pub created_by: String,
    /// Unix ms after which it no longer applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_ms: Option<u64>,
    /// Uses left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining: Option<u64>,
    /// Calls it approved.
    #[serde(default)]
    pub used: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked: Option<Decided>,
    /// Set for an egress grant: a glob over the destination's name
    /// (`*.example.org`; `*` also matches `.`), matched against egress
    /// approvals only — never against a call's own `ask`; and a tool
    /// grant never answers an egress approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
    /// An egress grant's port (none: any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
}

impl Grant {
    /// Not revoked, not expired, not used up.
    pub fn active(&self, now_ms: u64) -> bool {
        self.revoked.is_none()
            && self.expires_ms.is_none_or(|t| now_ms < t)
            && self.remaining.is_none_or(|n| n > 0)
    }
}

/// Which entries to list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listing {
    /// Every pending entry, oldest first.
    Pending,
    /// The last `n` decided (or ended) entries, newest first.
    Decided(usize),
}

/// The approval queue's store could not be opened at the host's start:
/// the store's error, with the key to fix.
#[derive(Debug, thiserror::Error)]
#[error("{0} (`[approval] store`; or run without --approve queue)")]
pub struct QueueUnavailable(pub StoreError);

impl From<StoreError> for crate::error::HostError {
    fn from(e: StoreError) -> Self {
        crate::error::HostError::Feature(Box::new(QueueUnavailable(e)))
    }
}

/// A store that could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the approval store {path} cannot be used: {message}")]
    Open { path: String, message: String },
    #[error("the approval store failed: {0}")]
    Backend(String),
    /// The shared store did not answer (down, unreachable, too slow).
    #[error(
        "the shared approval store ({store}) is unreachable: {message}; asking fails closed (the call is denied) until it answers again (the host reconnects by itself)"
    )]
    Unavailable { store: String, message: String },
    /// A limit the store enforces atomically across replicas.
    #[error("{0}")]
    Full(String),
}

/// What another replica sharing the store changed
/// ([`ApprovalStore::changes`]).
#[derive(Clone, Debug)]
pub enum Change {
    /// A new pending entry.
    Pending(Entry),
    /// An entry's wait ended (decided, withdrawn, expired), or an approved
    /// entry's retry ran.
    Ended(Entry),
    /// Changes may have been missed (the store's feed reconnected, or
    /// this replica fell behind): look again at what waits here.
    Missed,
}

/// A login to the approval console (`toolgate_mcp::console`), kept where
/// the queue is: replicas sharing the queue share their logins, so a
/// balancer may send each request of the console's page to any of them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsoleSession {
    /// The SHA-256 (hex) of the session cookie's value: the store never
    /// holds what logs in.
    pub id_sha256: String,
    /// The name given at login (`console:NAME` decides).
    pub name: String,
    /// The session's CSRF token (every change it makes must carry it).
    pub csrf: String,
    /// When it ends, unix ms.
    pub expires_ms: u64,
}

/// The approval queue's durable state. Every method is one atomic change
/// (or one consistent read).
#[async_trait]
pub trait ApprovalStore: Send + Sync + 'static {
    /// Keep a new pending entry.
    async fn put_pending(&self, entry: &Entry) -> Result<(), StoreError>;
    /// End a pending entry's wait (`state` is not `Pending`): a decision,
    /// a withdrawal, an expiry. `None` when the entry is not pending
    /// (decided meanwhile, or unknown): nothing changed.
    async fn decide(
        &self,
        id: &str,
        state: EntryState,
        decided: &Decided,
    ) -> Result<Option<Entry>, StoreError>;
    /// Mark an approved entry that waits for a retry ([`Entry::retry`]) as
    /// run by it, at `at_ms`. `None` when it is not approved, waits for no
    /// retry, or ran already (the first of two racing retries wins).
    async fn run_once(&self, id: &str, at_ms: u64) -> Result<Option<Entry>, StoreError>;
    /// Entries as `listing` says.
    async fn list(&self, listing: Listing) -> Result<Vec<Entry>, StoreError>;
    /// One entry, whatever its state.
    async fn get(&self, id: &str) -> Result<Option<Entry>, StoreError>;
    /// How many entries are pending.
    async fn count_pending(&self) -> Result<usize, StoreError>;
    /// Keep a new grant.
    async fn put_grant(&self, grant: &Grant) -> Result<(), StoreError>;
    /// Every grant not revoked (active or not: the caller checks time and
    /// count with [`Grant::active`]).
    async fn grants(&self) -> Result<Vec<Grant>, StoreError>;
    /// Use a grant once, if it is still active at `now_ms`: its count
    /// (if it has one) goes down by one. `None`: not active any more.
    async fn use_grant(&self, id: &str, now_ms: u64) -> Result<Option<Grant>, StoreError>;
    /// Revoke a grant. `None`: no such active grant.
    async fn revoke_grant(&self, id: &str, revoked: &Decided) -> Result<Option<Grant>, StoreError>;
    /// Keep a console login; beyond `max` logins the ones that end first
    /// go (expired ones first of all).
    async fn put_session(&self, session: &ConsoleSession, max: usize) -> Result<(), StoreError>;
    /// The login whose cookie hashes to `id_sha256`, if it lasts past
    /// `now_ms`.
    async fn session(
        &self,
        id_sha256: &str,
        now_ms: u64,
    ) -> Result<Option<ConsoleSession>, StoreError>;
    /// End a login (a logout), on every replica sharing the store.
    async fn end_session(&self, id_sha256: &str) -> Result<(), StoreError>;
    /// Pending entries whose expiry is at or before `at_ms`, soonest
    /// first, at most `limit`: what a replica ends for a replica that
    /// went away without ending its own.
    async fn overdue(&self, at_ms: u64, limit: usize) -> Result<Vec<Entry>, StoreError> {
        let mut due: Vec<Entry> = self
            .list(Listing::Pending)
            .await?
            .into_iter()
            .filter(|e| e.expires_ms <= at_ms)
            .collect();
        due.sort_by_key(|e| e.expires_ms);
        due.truncate(limit);
        Ok(due)
    }
    /// Whether other processes share this store (replicas): then a
    /// replica ends only its own waits after a restart, and ends the
    /// overdue entries of any replica.
    fn shared(&self) -> bool {
        false
    }
    /// What other processes sharing the store change, from now on (`None`
    /// for a store of one host). A feed that may have dropped some sends
    /// [`Change::Missed`].
    fn changes(&self) -> Option<tokio::sync::broadcast::Receiver<Change>> {
        None
    }
}
