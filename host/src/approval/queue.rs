//! The approval queue (`--approve queue`, `[approval] mode = "queue"`): a
//! hook's `ask` becomes a pending entry in a durable store owned by the
//! host, and the call waits until someone decides — from the console, the
//! API, `toolgate approvals`, or a grant made earlier.
//!
//! * A grant that matches the call (see [`super::grant`]) approves it at
//!   once, with no entry; the grant's id and who made it are what the
//!   audit record's `decisions` show as `decidedBy`.
//! * Otherwise the entry is stored and the call waits, at most
//!   `[approval] timeout_ms`; then it is denied, saying so, and the entry
//!   is `expired`.
//! * A call that goes away while it waits (cancelled, its client gone, the
//!   host stopping) withdraws its entry.
//! * Entries still pending when the host starts belonged to calls of a
//!   previous run of the host: their clients' requests died with it, so
//!   they are marked `expired` with a message saying so, and kept in the
//!   history (a reconnecting client calls again, and is asked again).
//!
//! The waiting is in this process: a decision made through this queue
//! wakes the call at once. The store is the durable record of what waits
//! and what was decided.
//!
//! # Calls that do not wait
//!
//! A client of the stateless revision (2026-07-28) cannot be held for
//! minutes inside one request, and its requests share one scheduler: a
//! call waiting there would hold up every other stateless client. So its
//! `ask` is [`ApprovalQueue::park`]ed: a grant still approves at once;
//! otherwise the entry is stored with a [`Retry`] (the SHA-256 of the
//! call's tool and arguments), the client is answered at once (an
//! `InputRequiredResult` whose `requestState` names the entry; see
//! `mcp::approval`), and the entry expires by itself at `expiresMs`.
//! The client's retry [`resume`](ApprovalQueue::resume)s: it waits for
//! the decision (at most `[approval] retry_hold_ms`, outside any
//! scheduler, then it is answered "input required" again), and the
//! approval it finds runs the call only if the retry is the same call
//! (same digest), and only once ([`ApprovalStore::run_once`]). A denied,
//! expired or withdrawn entry answers the retry with a denial saying so.
//! Such entries survive a restart pending — the client still holds the
//! entry's id and calls again — and a decision made after the restart
//! reaches the client's next retry. (A client of the Tasks extension
//! follows the same entry as a task, `mcp::tasks`; a Code Mode program's
//! nested call waits on it instead, bounded, `super::hold`.)

use std::collections::HashMap;
use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::oneshot;

use super::grant::{Asked, GrantError, GrantSpec};
use super::store::{ApprovalStore, Decided, Entry, EntryState, Grant, Listing, Retry, StoreError};
use super::{ApprovalAnswer, ApprovalRequest, Approver};
use crate::budgets::{
    APPROVAL_MAX_ARGUMENT_BYTES, APPROVAL_MAX_GRANTS, APPROVAL_MAX_MESSAGE_BYTES,
    APPROVAL_MAX_PENDING, APPROVAL_RETRY_HOLD_MS,
};
use crate::call::CallInfo;

/// The name the queue decides under when nobody did (timeouts, restarts).
pub const QUEUE: &str = "approval-queue";

/// A decision on one entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Approve,
    /// With the message that reaches the model.
    Deny(Option<String>),
    /// Approve, and every later call that matches the spec.
    Grant(GrantSpec),
}

/// Why a decision was not made.
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    #[error("no pending approval `{0}` (decided already, withdrawn, expired, or unknown)")]
    NotPending(String),
    #[error(transparent)]
    Grant(#[from] GrantError),
    #[error("{APPROVAL_MAX_GRANTS} grants are active already; revoke some first")]
    TooManyGrants,
    #[error("no active grant `{0}`")]
    NoGrant(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What the queue tells its watchers (the console's live list).
#[derive(Clone, Debug)]
pub enum Event {
    /// A new pending entry.
    Pending(Entry),
    /// An entry's wait ended (decided, withdrawn, expired).
    Ended(Entry),
}

/// Events a slow watcher may fall behind by before it is told to reload.
const EVENTS: usize = 1024;

/// What a call that does not wait got from [`ApprovalQueue::park`].
#[derive(Debug)]
pub enum Parked {
    /// Answered at once (a grant, a full queue, a failing store).
    Answered(ApprovalAnswer),
    /// Stored, pending: the client calls again with this entry's id.
    Pending(Box<Entry>),
}

/// What a retry found after [`ApprovalQueue::resume`].
#[derive(Clone, Debug)]
pub enum Resumed {
    /// Nobody decided within the hold: ask the client to call again.
    Pending(Entry),
    /// Decided: approved (not run yet, as far as this read goes), denied,
    /// withdrawn or expired. [`ApprovalQueue::answer_retry`] says what it
    /// means for the retried call.
    Ended(Entry),
    /// No such entry waiting for a retry (unknown, deleted from the
    /// history, or another tool's).
    Unknown(String),
}

/// The queue: a store, and the calls of this process waiting on it.
pub struct ApprovalQueue {
    store: Arc<dyn ApprovalStore>,
    timeout: Duration,
    /// Milliseconds (`[approval] retry_hold_ms`).
    retry_hold_ms: std::sync::atomic::AtomicU64,
    waiting: Mutex<HashMap<String, oneshot::Sender<Entry>>>,
    events: tokio::sync::broadcast::Sender<Event>,
}

/// Unix time in milliseconds.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A fresh id: `prefix` and 12 random hex digits.
fn new_id(prefix: &str) -> String {
    let mut bytes = [0u8; 6];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_err()
    {
        // No randomness: time and a counter still make ids unique here.
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed) ^ now_ms();
        bytes.copy_from_slice(&n.to_le_bytes()[..6]);
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}{hex}")
}

fn cut(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

impl ApprovalQueue {
    /// The queue over `store`; calls wait at most `timeout`. Entries left
    /// pending by a previous run are expired now (see the module docs).
    pub async fn open(
        store: Arc<dyn ApprovalStore>,
        timeout: Duration,
    ) -> Result<Arc<ApprovalQueue>, StoreError> {
        let leftover = store.list(Listing::Pending).await?;
        let mut parked = Vec::new();
        for entry in leftover {
            // A stateless client's entry: its client still holds the id
            // and calls again; it stays pending until its own expiry.
            if entry.retry.is_some() && entry.expires_ms > now_ms() {
                parked.push(entry);
                continue;
            }
            let message = if entry.retry.is_some() {
                // Its expiry passed while the host was down.
                format!(
                    "nobody decided within {} ms (`[approval] timeout_ms`), so the call is denied",
                    entry.expires_ms.saturating_sub(entry.since_ms)
                )
            } else {
                "the host restarted while this call waited for approval; the call ended with \
                 the host, so this approval can no longer run it (the client must call again)"
                    .into()
            };
            let decided = Decided {
                by: QUEUE.into(),
                at_ms: now_ms(),
                message: Some(message),
                grant: None,
            };
            store
                .decide(&entry.id, EntryState::Expired, &decided)
                .await?;
            tracing::info!(id = %entry.id, tool = %entry.tool, "a pending approval of a previous run expired");
        }
        let queue = Arc::new(ApprovalQueue {
            store,
            timeout,
            retry_hold_ms: APPROVAL_RETRY_HOLD_MS.into(),
            waiting: Mutex::new(HashMap::new()),
            events: tokio::sync::broadcast::channel(EVENTS).0,
        });
        for entry in parked {
            tracing::info!(id = %entry.id, tool = %entry.tool, "a pending approval of a previous run still waits for its client's retry");
            queue.expire_at(&entry);
        }
        Ok(queue)
    }

    /// Holds a retry at most `hold` for a decision (`[approval]
    /// retry_hold_ms`; see the module docs).
    pub fn set_retry_hold(&self, hold: Duration) {
        let ms = (hold.as_millis() as u64).max(1);
        self.retry_hold_ms
            .store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// How long a retry waits for a decision before it is answered "input
    /// required" again.
    pub fn retry_hold(&self) -> Duration {
        Duration::from_millis(
            self.retry_hold_ms
                .load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// Expires a parked entry (one no call waits on) at its `expiresMs`.
    fn expire_at(self: &Arc<Self>, entry: &Entry) {
        let queue = Arc::downgrade(self);
        let id = entry.id.clone();
        let left = Duration::from_millis(entry.expires_ms.saturating_sub(now_ms()));
        let timeout = self.timeout;
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        rt.spawn(async move {
            tokio::time::sleep(left).await;
            let Some(queue) = queue.upgrade() else {
                return;
            };
            let why = format!(
                "nobody decided within {} ms (`[approval] timeout_ms`), so the call is denied",
                timeout.as_millis()
            );
            if queue.end(&id, EntryState::Expired, &why).await.is_some() {
                tracing::info!(id, "a pending approval expired before its client's retry");
            }
        });
    }

    /// New pending entries and ended waits, from now on.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// How long a call waits.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Every pending entry, oldest first.
    pub async fn pending(&self) -> Result<Vec<Entry>, StoreError> {
        self.store.list(Listing::Pending).await
    }

    /// The last `n` ended entries, newest first.
    pub async fn decided(&self, n: usize) -> Result<Vec<Entry>, StoreError> {
        self.store.list(Listing::Decided(n)).await
    }

    /// One entry.
    pub async fn get(&self, id: &str) -> Result<Option<Entry>, StoreError> {
        self.store.get(id).await
    }

    /// Active grants (not revoked, not expired, not used up).
    pub async fn grants(&self) -> Result<Vec<Grant>, StoreError> {
        let now = now_ms();
        Ok(self
            .store
            .grants()
            .await?
            .into_iter()
            .filter(|g| g.active(now))
            .collect())
    }

    /// Makes a grant without a pending call to approve.
    pub async fn grant(&self, spec: &GrantSpec, by: &str) -> Result<Grant, DecideError> {
        self.make_grant(spec, None, by).await
    }

    async fn make_grant(
        &self,
        spec: &GrantSpec,
        default_tool: Option<&str>,
        by: &str,
    ) -> Result<Grant, DecideError> {
        let now = now_ms();
        let grant = spec.grant(new_id("g-"), default_tool, by, now)?;
        // Grants that ended (time, count) are history: revoke them, so
        // the count below is of live ones and the store stays small.
        let mut live = 0;
        for g in self.store.grants().await? {
            if g.active(now) {
                live += 1;
            } else {
                let ended = Decided {
                    by: QUEUE.into(),
                    at_ms: now,
                    message: Some("ended (time or count)".into()),
                    grant: None,
                };
                self.store.revoke_grant(&g.id, &ended).await?;
            }
        }
        if live >= APPROVAL_MAX_GRANTS {
            return Err(DecideError::TooManyGrants);
        }
        self.store.put_grant(&grant).await?;
        tracing::info!(grant = %grant.describe(), "grant made");
        Ok(grant)
    }

    /// Revokes a grant.
    pub async fn revoke(&self, id: &str, by: &str) -> Result<Grant, DecideError> {
        let revoked = Decided {
            by: by.to_string(),
            at_ms: now_ms(),
            message: None,
            grant: None,
        };
        self.store
            .revoke_grant(id, &revoked)
            .await?
            .ok_or_else(|| DecideError::NoGrant(id.to_string()))
    }

    /// Decides one pending entry as `by`; the waiting call goes on at once.
    pub async fn decide(&self, id: &str, verdict: Verdict, by: &str) -> Result<Entry, DecideError> {
        let (state, message, grant) = match verdict {
            Verdict::Approve => (EntryState::Approved, None, None),
            Verdict::Deny(message) => (
                EntryState::Denied,
                message.map(|m| cut(m, APPROVAL_MAX_MESSAGE_BYTES)),
                None,
            ),
            Verdict::Grant(spec) => {
                let entry = self
                    .store
                    .get(id)
                    .await?
                    .filter(|e| e.state == EntryState::Pending)
                    .ok_or_else(|| DecideError::NotPending(id.to_string()))?;
                let grant = self.make_grant(&spec, Some(&entry.tool), by).await?;
                (EntryState::Approved, None, Some(grant.id))
            }
        };
        let decided = Decided {
            by: by.to_string(),
            at_ms: now_ms(),
            message,
            grant,
        };
        let entry = self
            .store
            .decide(id, state, &decided)
            .await?
            .ok_or_else(|| DecideError::NotPending(id.to_string()))?;
        tracing::info!(id, by, state = entry.state.as_str(), "approval decided");
        let _ = self.events.send(Event::Ended(entry.clone()));
        let waiter = self
            .waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        if let Some(tx) = waiter {
            let _ = tx.send(entry.clone());
        }
        Ok(entry)
    }

    /// A grant that covers the call, used once; `None` if none does.
    async fn granted(&self, asked: &Asked<'_>) -> Result<Option<Grant>, StoreError> {
        let now = now_ms();
        for g in self.store.grants().await? {
            if g.active(now)
                && g.matches(asked)
                && let Some(used) = self.store.use_grant(&g.id, now).await?
            {
                return Ok(Some(used));
            }
        }
        Ok(None)
    }

    /// Ends `id`'s wait by the queue itself (`Withdrawn`, `Expired`).
    async fn end(&self, id: &str, state: EntryState, why: &str) -> Option<Entry> {
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        let decided = Decided {
            by: QUEUE.into(),
            at_ms: now_ms(),
            message: Some(why.to_string()),
            grant: None,
        };
        match self.store.decide(id, state, &decided).await {
            Ok(e) => {
                if let Some(e) = &e {
                    let _ = self.events.send(Event::Ended(e.clone()));
                }
                e
            }
            Err(e) => {
                tracing::warn!(id, error = %e, "cannot end a pending approval");
                None
            }
        }
    }

    /// A grant's answer, or the entry to keep for `request` (not stored
    /// yet), or why there can be none.
    async fn entry_for(&self, request: &ApprovalRequest) -> Result<Entry, ApprovalAnswer> {
        let call = &request.call;
        let client = request.client.as_deref();
        let asked = Asked {
            tool: &call.tool_name,
            arguments: &call.arguments,
            scope: &call.agent_scope,
            client: client.and_then(|c| c.name.as_deref()),
            session: client.and_then(|c| c.session.as_deref()),
        };
        match self.granted(&asked).await {
            Ok(Some(grant)) => return Err(ApprovalAnswer::ApprovedBy(grant.describe())),
            Ok(None) => {}
            Err(e) => return Err(ApprovalAnswer::Unavailable(format!("{e}"))),
        }
        match self.store.count_pending().await {
            Ok(n) if n >= APPROVAL_MAX_PENDING => {
                return Err(ApprovalAnswer::Unavailable(format!(
                    "the approval queue is full ({n} pending; at most {APPROVAL_MAX_PENDING})"
                )));
            }
            Ok(_) => {}
            Err(e) => return Err(ApprovalAnswer::Unavailable(format!("{e}"))),
        }
        let arguments = if call.arguments_json().len() > APPROVAL_MAX_ARGUMENT_BYTES {
            Value::String(format!(
                "(arguments of {} bytes, more than the {APPROVAL_MAX_ARGUMENT_BYTES} an approval shows)",
                call.arguments_json().len()
            ))
        } else {
            (*call.arguments).clone()
        };
        let since = now_ms();
        Ok(Entry {
            id: new_id("a-"),
            since_ms: since,
            expires_ms: since.saturating_add(self.timeout.as_millis() as u64),
            scope: call.agent_scope.clone(),
            client: asked.client.map(str::to_string),
            session: asked.session.map(str::to_string),
            tool: call.tool_name.clone(),
            arguments,
            card: request.card.clone(),
            asked_by: request.asked_by.clone(),
            reason: cut(request.prompt.clone(), APPROVAL_MAX_MESSAGE_BYTES),
            state: EntryState::Pending,
            decided: None,
            retry: None,
        })
    }

    /// A call that does not wait (see the module docs): a grant answers at
    /// once; otherwise its entry is stored, pending, and expires by itself.
    pub async fn park(self: &Arc<Self>, request: &ApprovalRequest) -> Parked {
        let mut entry = match self.entry_for(request).await {
            Ok(entry) => entry,
            Err(answer) => return Parked::Answered(answer),
        };
        entry.retry = Some(Retry {
            digest: call_digest(&request.call),
            ran_ms: None,
        });
        if let Err(e) = self.store.put_pending(&entry).await {
            return Parked::Answered(ApprovalAnswer::Unavailable(format!("{e}")));
        }
        tracing::info!(id = %entry.id, tool = %entry.tool, "pending approval; the client calls again");
        let _ = self.events.send(Event::Pending(entry.clone()));
        self.expire_at(&entry);
        Parked::Pending(Box::new(entry))
    }

    /// A client's retry of the parked call of entry `id` (to tool `tool`):
    /// waits until the entry is decided, at most the retry hold. A retry
    /// cancelled while it waits (`cancel`) withdraws the entry.
    pub async fn resume(
        &self,
        id: &str,
        tool: &str,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<Resumed, StoreError> {
        // Subscribed before the first look: a decision in between is seen.
        let mut events = self.events.subscribe();
        let deadline = tokio::time::Instant::now() + self.retry_hold();
        let mut cancelled = false;
        loop {
            let entry = match self.store.get(id).await? {
                Some(e) if e.retry.is_some() && e.tool == tool => e,
                _ => return Ok(Resumed::Unknown(id.to_string())),
            };
            if entry.state != EntryState::Pending {
                return Ok(Resumed::Ended(entry));
            }
            if cancelled {
                // Withdrawn meanwhile by someone else, or the store failed:
                // either way this retry is over.
                return Ok(Resumed::Pending(entry));
            }
            tokio::select! {
                () = cancel.cancelled() => {
                    cancelled = true;
                    if let Some(e) = self
                        .end(id, EntryState::Withdrawn, "the call was cancelled while it waited")
                        .await
                    {
                        tracing::info!(id, "pending approval withdrawn: its retry was cancelled");
                        return Ok(Resumed::Ended(e));
                    }
                }
                () = tokio::time::sleep_until(deadline) => return Ok(Resumed::Pending(entry)),
                event = events.recv() => match event {
                    Ok(Event::Ended(e)) if e.id == id => return Ok(Resumed::Ended(e)),
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                        return Ok(Resumed::Pending(entry));
                    }
                },
            }
        }
    }

    /// What an entry a retry found means for the retried call `call`: an
    /// approval runs it if it is the same call and the approval has not
    /// run one yet; anything else denies, saying why.
    pub async fn answer_retry(&self, resumed: &Resumed, call: &CallInfo) -> ApprovalAnswer {
        let entry = match resumed {
            Resumed::Unknown(id) => {
                return ApprovalAnswer::DeniedBy {
                    by: QUEUE.into(),
                    reason: format!(
                        "no approval `{id}` waits for this call (unknown, another tool's, or \
                         dropped from the history); call again without the request state to \
                         be asked again"
                    ),
                };
            }
            Resumed::Pending(e) | Resumed::Ended(e) => e,
        };
        if entry.state != EntryState::Approved {
            return answer(entry);
        }
        if entry.retry.as_ref().map(|r| r.digest.as_str()) != Some(call_digest(call).as_str()) {
            return ApprovalAnswer::DeniedBy {
                by: QUEUE.into(),
                reason: format!(
                    "approval `{}` was for another call: this retry's tool or arguments differ \
                     from the approved ones; call again without the request state to be asked",
                    entry.id
                ),
            };
        }
        match self.store.run_once(&entry.id, now_ms()).await {
            Ok(Some(_)) => answer(entry),
            Ok(None) => ApprovalAnswer::DeniedBy {
                by: QUEUE.into(),
                reason: format!(
                    "approval `{}` ran its call already (an approval runs one call, once); call \
                     again without the request state to be asked again",
                    entry.id
                ),
            },
            Err(e) => ApprovalAnswer::Unavailable(format!("{e}")),
        }
    }

    async fn ask(self: &Arc<Self>, request: &ApprovalRequest) -> ApprovalAnswer {
        let entry = match self.entry_for(request).await {
            Ok(entry) => entry,
            Err(answer) => return answer,
        };
        let (tx, rx) = oneshot::channel();
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(entry.id.clone(), tx);
        // From here on, a wait that is dropped (the call cancelled, its
        // client gone) withdraws the entry.
        let guard = Withdraw {
            queue: self.clone(),
            id: Some(entry.id.clone()),
        };
        if let Err(e) = self.store.put_pending(&entry).await {
            self.waiting
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&entry.id);
            guard.disarm();
            return ApprovalAnswer::Unavailable(format!("{e}"));
        }
        tracing::info!(id = %entry.id, tool = %entry.tool, "waiting for approval");
        let _ = self.events.send(Event::Pending(entry.clone()));
        let decided = tokio::select! {
            decided = rx => decided.ok(),
            () = tokio::time::sleep(self.timeout) => None,
        };
        guard.disarm();
        let decided = match decided {
            Some(d) => d,
            None => {
                let why = format!(
                    "nobody decided within {} ms (`[approval] timeout_ms`), so the call is denied",
                    self.timeout.as_millis()
                );
                match self.end(&entry.id, EntryState::Expired, &why).await {
                    Some(_) => {
                        return ApprovalAnswer::DeniedBy {
                            by: QUEUE.into(),
                            reason: why,
                        };
                    }
                    // Decided just as the time ran out: that decision holds.
                    None => match self.store.get(&entry.id).await {
                        Ok(Some(e)) if e.state != EntryState::Pending => e,
                        _ => {
                            return ApprovalAnswer::DeniedBy {
                                by: QUEUE.into(),
                                reason: why,
                            };
                        }
                    },
                }
            }
        };
        answer(&decided)
    }
}

/// SHA-256 (hex) of a call's tool and arguments (compact JSON): what
/// ties a retry to the entry it asked about.
pub fn call_digest(call: &CallInfo) -> String {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update(call.tool_name.as_bytes());
    h.update([0u8]);
    h.update(call.arguments_json().as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// What a decided entry means for its call.
fn answer(entry: &Entry) -> ApprovalAnswer {
    let by = entry
        .decided
        .as_ref()
        .map(|d| d.by.clone())
        .unwrap_or_else(|| QUEUE.into());
    let message = entry.decided.as_ref().and_then(|d| d.message.clone());
    match entry.state {
        EntryState::Approved => ApprovalAnswer::ApprovedBy(by),
        EntryState::Denied => ApprovalAnswer::DeniedBy {
            reason: message.unwrap_or_else(|| format!("denied by {by}")),
            by,
        },
        EntryState::Pending | EntryState::Withdrawn | EntryState::Expired => {
            ApprovalAnswer::DeniedBy {
                reason: message.unwrap_or_else(|| format!("the approval {}", entry.state.as_str())),
                by,
            }
        }
    }
}

/// Withdraws a pending entry whose wait is dropped.
struct Withdraw {
    queue: Arc<ApprovalQueue>,
    id: Option<String>,
}

impl Withdraw {
    fn disarm(mut self) {
        self.id = None;
    }
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let queue = self.queue.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move {
                    if queue
                        .end(
                            &id,
                            EntryState::Withdrawn,
                            "the call was cancelled while it waited",
                        )
                        .await
                        .is_some()
                    {
                        tracing::info!(id, "pending approval withdrawn: its call went away");
                    }
                });
            }
            // No runtime (the host is going away): the next start expires it.
            Err(_) => {
                queue
                    .waiting
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&id);
            }
        }
    }
}

/// `Arc<ApprovalQueue>` is the approver `--approve queue` installs.
#[async_trait]
impl Approver for Arc<ApprovalQueue> {
    fn name(&self) -> &str {
        QUEUE
    }

    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        self.ask(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::sqlite::SqliteStore;
    use crate::call::{CallOrigin, ToolMeta};

    /// A fresh store file under the temporary directory.
    fn store(name: &str) -> Arc<dyn ApprovalStore> {
        let dir = std::env::temp_dir().join(format!(
            "toolgate-queue-{name}-{}-{}",
            std::process::id(),
            now_ms()
        ));
        Arc::new(SqliteStore::open(&dir.join("approvals.sqlite")).unwrap())
    }

    fn request(command: &str) -> ApprovalRequest {
        ApprovalRequest {
            call: Arc::new(CallInfo::new(
                1,
                "c".into(),
                "bash".into(),
                serde_json::json!({ "command": command }),
                CallOrigin::default(),
                ToolMeta::unknown(),
            )),
            prompt: "may change data".into(),
            asked_by: "ask-destructive".into(),
            card: None,
            client: None,
        }
    }

    async fn parked(queue: &Arc<ApprovalQueue>, command: &str) -> Entry {
        match queue.park(&request(command)).await {
            Parked::Pending(e) => *e,
            Parked::Answered(a) => panic!("answered at once: {a}"),
        }
    }

    #[tokio::test]
    async fn a_cancelled_retry_withdraws_its_parked_entry() {
        let queue = ApprovalQueue::open(store("cancel"), Duration::from_secs(60))
            .await
            .unwrap();
        let entry = parked(&queue, "echo x").await;
        let cancel = tokio_util::sync::CancellationToken::new();
        cancel.cancel();
        let resumed = queue.resume(&entry.id, "bash", &cancel).await.unwrap();
        let Resumed::Ended(ended) = &resumed else {
            panic!("{resumed:?}");
        };
        assert_eq!(ended.state, EntryState::Withdrawn);
        let answer = queue.answer_retry(&resumed, &request("echo x").call).await;
        assert!(
            matches!(&answer, ApprovalAnswer::DeniedBy { reason, .. } if reason.contains("cancelled")),
            "{answer}"
        );
    }

    #[tokio::test]
    async fn a_parked_entry_expires_by_itself_and_the_retry_is_told_why() {
        let queue = ApprovalQueue::open(store("expire"), Duration::from_millis(200))
            .await
            .unwrap();
        let entry = parked(&queue, "echo x").await;
        // Held past the expiry: the expiry ends the hold.
        let resumed = queue
            .resume(&entry.id, "bash", &Default::default())
            .await
            .unwrap();
        let answer = queue.answer_retry(&resumed, &request("echo x").call).await;
        assert!(
            matches!(&answer, ApprovalAnswer::DeniedBy { reason, .. }
                if reason.contains("nobody decided within 200 ms")),
            "{answer}"
        );
        let e = queue.get(&entry.id).await.unwrap().unwrap();
        assert_eq!(e.state, EntryState::Expired);
    }

    /// Across a restart, a parked entry stays pending (its client calls
    /// again) unless its expiry passed while the host was down; a waiting
    /// call's entry expires, as before.
    #[tokio::test]
    async fn parked_entries_stay_pending_across_a_restart_until_their_expiry() {
        let store = store("restart");
        let short = ApprovalQueue::open(store.clone(), Duration::from_millis(100))
            .await
            .unwrap();
        let gone = parked(&short, "echo short").await;
        drop(short);
        let long = ApprovalQueue::open(store.clone(), Duration::from_secs(60))
            .await
            .unwrap();
        let kept = parked(&long, "echo long").await;
        drop(long);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let queue = ApprovalQueue::open(store, Duration::from_secs(60))
            .await
            .unwrap();
        let pending: Vec<String> = queue
            .pending()
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(pending, std::slice::from_ref(&kept.id));
        let expired = queue.get(&gone.id).await.unwrap().unwrap();
        assert_eq!(expired.state, EntryState::Expired, "{expired:?}");
        let why = expired.decided.unwrap().message.unwrap();
        assert!(why.contains("nobody decided within 100 ms"), "{why}");
        // Approved after the restart: the retry of the same call runs,
        // once; another call's retry does not.
        queue
            .decide(&kept.id, Verdict::Approve, "alice")
            .await
            .unwrap();
        let resumed = queue
            .resume(&kept.id, "bash", &Default::default())
            .await
            .unwrap();
        let other = queue
            .answer_retry(&resumed, &request("echo other").call)
            .await;
        assert!(
            matches!(&other, ApprovalAnswer::DeniedBy { reason, .. } if reason.contains("another call")),
            "{other}"
        );
        let same = queue
            .answer_retry(&resumed, &request("echo long").call)
            .await;
        assert_eq!(same, ApprovalAnswer::ApprovedBy("alice".into()));
        let again = queue
            .answer_retry(&resumed, &request("echo long").call)
            .await;
        assert!(
            matches!(&again, ApprovalAnswer::DeniedBy { reason, .. } if reason.contains("ran its call already")),
            "{again}"
        );
    }
}
