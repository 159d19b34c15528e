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
//! # Replicas sharing a store
//!
//! With a shared store ([`ApprovalStore::shared`]: `[state] url`), every
//! replica sees every entry, and a person may decide on any of them. What
//! differs:
//!
//! * Each entry records the replica that asked ([`Entry::replica`],
//!   `[state] replica_id`). At its start, a replica ends only the waits of
//!   its own previous run (entries with its id, asked before it started),
//!   not those of the replicas still running.
//! * The store's change feed ([`ApprovalStore::changes`]) brings what
//!   other replicas changed: a decision made on replica B wakes the call
//!   waiting on replica A, and a retry held there; new and ended entries
//!   reach this replica's console. When the feed may have dropped
//!   something (a reconnection), and every
//!   [`APPROVAL_SHARED_RECHECK`](crate::budgets::APPROVAL_SHARED_RECHECK)
//!   anyway, the queue reads again the entries its calls wait on.
//! * Every replica ends the entries overdue by more than
//!   [`APPROVAL_SHARED_GRACE_MS`](crate::budgets::APPROVAL_SHARED_GRACE_MS)
//!   (looking every
//!   [`APPROVAL_SHARED_SWEEP`](crate::budgets::APPROVAL_SHARED_SWEEP)):
//!   those of a replica killed while its calls waited, which would
//!   otherwise stay pending for ever. Two replicas ending one entry race
//!   like two decisions: the store lets one win.
//! * The store down: asking fails closed (the call is denied, saying the
//!   store is unreachable), deciding reports the error; both work again
//!   once it answers, without a restart.
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
//! `toolgate_mcp::approval`), and the entry expires by itself at `expiresMs`.
//! The client's retry [`resume`](ApprovalQueue::resume)s: it waits for
//! the decision (at most `[approval] retry_hold_ms`, outside any
//! scheduler, then it is answered "input required" again), and the
//! approval it finds runs the call only if the retry is the same call
//! (same digest), and only once ([`ApprovalStore::run_once`]). A denied,
//! expired or withdrawn entry answers the retry with a denial saying so.
//! Such entries survive a restart pending — the client still holds the
//! entry's id and calls again — and a decision made after the restart
//! reaches the client's next retry. (A client of the Tasks extension
//! follows the same entry as a task, `toolgate_mcp::tasks`; a Code Mode program's
//! nested call waits on it instead, bounded, `super::hold`.)
//!
//! # Egress approvals
//!
//! With `[egress] ask = true` a connection no egress rule allows asks the
//! call's approver ([`Approver::approve_egress`]; see `crate::egress::ask`).
//! Here that is an entry like any other — the call's tool, arguments and
//! scope — with the destination in [`Entry::egress`], answered first by an
//! *egress grant* ([`Grant::destination`]: a name glob, a port) and never
//! by a tool grant. Deciding it with a grant makes an egress grant (its
//! destination and port default to the entry's). The connection waits as
//! a call does, at most `[approval] timeout_ms`. Only calls that wait can
//! ask: a stateless client's call is answered from the egress grants or
//! refused ([`ApprovalQueue::egress_granted`]), never parked — an entry
//! about a connection must never become the approval a retry runs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::oneshot;

use super::grant::{Asked, GrantError, GrantSpec};
use super::questions::{Given, QuestionAnswer, QuestionRequest};
use super::store::{
    ApprovalStore, Change, Decided, Entry, EntryState, Grant, Listing, Retry, StoreError,
};
use super::{ApprovalAnswer, ApprovalRequest, Approver, EgressAsk};
use crate::budgets::{
    APPROVAL_MAX_ARGUMENT_BYTES, APPROVAL_MAX_GRANTS, APPROVAL_MAX_MESSAGE_BYTES,
    APPROVAL_MAX_PENDING, APPROVAL_RETRY_HOLD_MS, APPROVAL_SHARED_GRACE_MS,
    APPROVAL_SHARED_RECHECK, APPROVAL_SHARED_SWEEP,
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
    /// Answer a question's entry ([`Entry::questions`]): one answer per
    /// question, by its header, checked against its options.
    Answer(Vec<Given>),
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
    #[error(
        "approval `{0}` is a call's own: a grant made from it is a tool grant (no destination); make an egress grant from an egress approval, or on its own"
    )]
    NotEgress(String),
    #[error(
        "approval `{0}` holds questions for the user: answer them (the `answer` verdict: `toolgate approvals answer {0} --answer HEADER=LABEL`), or deny it to decline"
    )]
    Question(String),
    #[error("approval `{0}` is a call's, not questions for the user: approve or deny it")]
    NotQuestion(String),
    #[error("approval `{id}`: {why}")]
    Answer { id: String, why: String },
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
    /// This replica's id, recorded in its entries.
    replica: Option<String>,
    /// When this queue opened (unix ms): a shared store's entries of this
    /// replica asked before are of its previous run.
    started_ms: u64,
}

/// Unix time in milliseconds.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `2 * n` random hex digits (at most 16).
pub fn random_hex(n: usize) -> String {
    let n = n.min(8);
    crate::state::random_hex(n).unwrap_or_else(|_| {
        // No randomness: time and a counter still make ids unique here.
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let v = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed) ^ now_ms();
        v.to_le_bytes()[..n]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    })
}

/// A fresh id: `prefix` and 12 random hex digits.
fn new_id(prefix: &str) -> String {
    format!("{prefix}{}", random_hex(6))
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
        ApprovalQueue::open_as(store, timeout, None).await
    }

    /// This replica's id when the queue is shared (`None`: a queue of its
    /// own).
    pub fn replica(&self) -> Option<&str> {
        self.replica.as_deref()
    }

    /// Whether this replica asked `entry` (always, for a queue of its own):
    /// what only one replica should do for an entry — post it to the
    /// webhook — is done by the one that asked.
    pub fn asked_here(&self, entry: &Entry) -> bool {
        self.replica.is_none() || entry.replica.is_none() || entry.replica == self.replica
    }

    /// module docs, "Replicas sharing a store"). Over a shared store it
    /// opens while the store is down: what it does at the start (ending
    /// the waits of this replica's previous run) it does once the store
    /// answers.
    pub async fn open_as(
        store: Arc<dyn ApprovalStore>,
        timeout: Duration,
        replica: Option<String>,
    ) -> Result<Arc<ApprovalQueue>, StoreError> {
        let queue = Arc::new(ApprovalQueue {
            store: store.clone(),
            timeout,
            retry_hold_ms: APPROVAL_RETRY_HOLD_MS.into(),
            waiting: Mutex::new(HashMap::new()),
            events: tokio::sync::broadcast::channel(EVENTS).0,
            replica,
            started_ms: now_ms(),
        });
        if store.shared() {
            queue.maintain();
        } else {
            queue.end_leftovers().await?;
        }
        Ok(queue)
    }

    /// Ends the waits of a previous run (see the module docs): every
    /// pending entry of a store of one host; over a shared store, those of
    /// this replica asked before it started, whose calls ended with it (a
    /// stateless client's entry stays pending: its client calls again).
    async fn end_leftovers(self: &Arc<Self>) -> Result<(), StoreError> {
        let store = &self.store;
        let shared = store.shared();
        let mut leftover = store.list(Listing::Pending).await?;
        if shared {
            leftover.retain(|e| {
                self.replica.is_some()
                    && e.replica == self.replica
                    && e.since_ms < self.started_ms
                    && e.retry.is_none()
            });
        }
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
                answers: None,
            };
            if let Some(e) = store
                .decide(&entry.id, EntryState::Expired, &decided)
                .await?
            {
                let _ = self.events.send(Event::Ended(e));
            }
            tracing::info!(id = %entry.id, tool = %entry.tool, "a pending approval of a previous run expired");
        }
        for entry in parked {
            tracing::info!(id = %entry.id, tool = %entry.tool, "a pending approval of a previous run still waits for its client's retry");
            self.expire_at(&entry);
        }
        Ok(())
    }

    /// Over a shared store: follows the other replicas' changes, ends
    /// this replica's leftovers once the store answers, and ends every
    /// replica's overdue entries (see the module docs). Stops when the
    /// queue goes.
    fn maintain(self: &Arc<Self>) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak = Arc::downgrade(self);
        let mut changes = self.store.changes();
        rt.spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            let mut sweep = tokio::time::interval(APPROVAL_SHARED_SWEEP);
            sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut recheck = tokio::time::interval(APPROVAL_SHARED_RECHECK);
            recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut leftovers_ended = false;
            loop {
                // One value per turn of the loop, matched at once: boxing
                // the change would only add an allocation.
                #[allow(clippy::large_enum_variant)]
                enum Next {
                    Change(Result<Change, RecvError>),
                    Sweep,
                    Recheck,
                }
                let next = tokio::select! {
                    c = async {
                        match changes.as_mut() {
                            Some(rx) => rx.recv().await,
                            None => std::future::pending().await,
                        }
                    } => Next::Change(c),
                    _ = sweep.tick() => Next::Sweep,
                    _ = recheck.tick() => Next::Recheck,
                };
                let Some(queue) = weak.upgrade() else {
                    return;
                };
                match next {
                    Next::Change(Ok(Change::Pending(e))) => {
                        let _ = queue.events.send(Event::Pending(e));
                    }
                    Next::Change(Ok(Change::Ended(e))) => {
                        let _ = queue.events.send(Event::Ended(e.clone()));
                        queue.wake_from_store(&e.id).await;
                    }
                    Next::Change(Ok(Change::Missed) | Err(RecvError::Lagged(_))) => {
                        queue.recheck().await;
                    }
                    Next::Change(Err(RecvError::Closed)) => changes = None,
                    Next::Sweep => {
                        if !leftovers_ended {
                            match queue.end_leftovers().await {
                                Ok(()) => leftovers_ended = true,
                                Err(e) => tracing::warn!(error = %e, "cannot end this replica's approvals of its previous run yet"),
                            }
                        }
                        queue.sweep().await;
                    }
                    Next::Recheck => queue.recheck().await,
                }
            }
        });
    }

    /// Hands `entry`, ended, to the call of this process waiting on it.
    fn wake(&self, entry: Entry) {
        let waiter = self
            .waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&entry.id);
        if let Some(tx) = waiter {
            let _ = tx.send(entry);
        }
    }

    /// Wakes the call of this process waiting on `id`, if one does and
    /// the store says the entry ended: what a waiting call goes on with
    /// is read from the store, never taken from the feed's message.
    async fn wake_from_store(&self, id: &str) {
        let waits = self
            .waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(id);
        if !waits {
            return;
        }
        match self.store.get(id).await {
            Ok(Some(e)) if e.state != EntryState::Pending => self.wake(e),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(id, error = %e, "cannot read an approval another replica ended")
            }
        }
    }

    /// Reads again the entries this process's calls wait on, and wakes
    /// those ended meanwhile (by a change the feed did not bring).
    async fn recheck(&self) {
        let ids: Vec<String> = self
            .waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect();
        for id in ids {
            match self.store.get(&id).await {
                Ok(Some(e)) if e.state != EntryState::Pending => {
                    let _ = self.events.send(Event::Ended(e.clone()));
                    self.wake(e);
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the approvals this replica waits on");
                    return;
                }
            }
        }
    }

    /// Ends the entries overdue by more than the grace, whichever replica
    /// asked.
    async fn sweep(&self) {
        let due = now_ms().saturating_sub(APPROVAL_SHARED_GRACE_MS);
        let overdue = match self.store.overdue(due, 100).await {
            Ok(o) => o,
            Err(e) => {
                tracing::debug!(error = %e, "cannot look for overdue approvals");
                return;
            }
        };
        for entry in overdue {
            let why = format!(
                "nobody decided within {} ms (`[approval] timeout_ms`), so the call is denied",
                entry.expires_ms.saturating_sub(entry.since_ms)
            );
            if self
                .end(&entry.id, EntryState::Expired, &why)
                .await
                .is_some()
            {
                tracing::info!(
                    id = %entry.id,
                    replica = entry.replica.as_deref().unwrap_or("-"),
                    "ended an overdue approval (the replica that asked did not: it may have stopped)"
                );
            }
        }
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

    /// Keep a console login where the queue is (every replica sharing the
    /// queue knows it); at most [`crate::budgets::CONSOLE_MAX_SESSIONS`].
    pub async fn log_in(&self, session: &super::store::ConsoleSession) -> Result<(), StoreError> {
        self.store
            .put_session(session, crate::budgets::CONSOLE_MAX_SESSIONS)
            .await
    }

    /// The console login whose cookie hashes to `id_sha256`, while it lasts.
    pub async fn console_session(
        &self,
        id_sha256: &str,
    ) -> Result<Option<super::store::ConsoleSession>, StoreError> {
        self.store.session(id_sha256, now_ms()).await
    }

    /// End a console login, on every replica.
    pub async fn log_out(&self, id_sha256: &str) -> Result<(), StoreError> {
        self.store.end_session(id_sha256).await
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
                    answers: None,
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
            answers: None,
        };
        self.store
            .revoke_grant(id, &revoked)
            .await?
            .ok_or_else(|| DecideError::NoGrant(id.to_string()))
    }

    /// Decides one pending entry as `by`; the waiting call goes on at once.
    pub async fn decide(&self, id: &str, verdict: Verdict, by: &str) -> Result<Entry, DecideError> {
        let pending = || async {
            self.store
                .get(id)
                .await?
                .filter(|e| e.state == EntryState::Pending)
                .ok_or_else(|| DecideError::NotPending(id.to_string()))
        };
        let (state, message, grant, answers) = match verdict {
            Verdict::Approve => {
                // Questions are answered, never approved plainly.
                if pending().await?.questions.is_some() {
                    return Err(DecideError::Question(id.to_string()));
                }
                (EntryState::Approved, None, None, None)
            }
            Verdict::Deny(message) => (
                EntryState::Denied,
                message.map(|m| cut(m, APPROVAL_MAX_MESSAGE_BYTES)),
                None,
                None,
            ),
            Verdict::Answer(given) => {
                let entry = pending().await?;
                let Some(questions) = &entry.questions else {
                    return Err(DecideError::NotQuestion(id.to_string()));
                };
                let answers = questions.take(&given).map_err(|why| DecideError::Answer {
                    id: id.to_string(),
                    why,
                })?;
                (EntryState::Approved, None, None, Some(answers))
            }
            Verdict::Grant(mut spec) => {
                let entry = pending().await?;
                if entry.questions.is_some() {
                    return Err(DecideError::Question(id.to_string()));
                }
                match &entry.egress {
                    // An egress approval makes an egress grant: by default
                    // for the destination and port asked about.
                    Some(asked) if spec.destination.is_none() => {
                        spec.destination = Some(asked.name.clone());
                        spec.port = spec.port.or(Some(asked.port));
                    }
                    Some(_) => {}
                    None if spec.destination.is_some() || spec.port.is_some() => {
                        return Err(DecideError::NotEgress(id.to_string()));
                    }
                    None => {}
                }
                let grant = self.make_grant(&spec, Some(&entry.tool), by).await?;
                (EntryState::Approved, None, Some(grant.id), None)
            }
        };
        let decided = Decided {
            by: by.to_string(),
            at_ms: now_ms(),
            message,
            grant,
            answers,
        };
        let entry = self
            .store
            .decide(id, state, &decided)
            .await?
            .ok_or_else(|| DecideError::NotPending(id.to_string()))?;
        tracing::info!(id, by, state = entry.state.as_str(), "approval decided");
        let _ = self.events.send(Event::Ended(entry.clone()));
        self.wake(entry.clone());
        Ok(entry)
    }

    /// A grant that covers the call (with `egress`: an egress grant that
    /// covers that connection of it), used once; `None` if none does.
    async fn granted(
        &self,
        asked: &Asked<'_>,
        egress: Option<&EgressAsk>,
    ) -> Result<Option<Grant>, StoreError> {
        let now = now_ms();
        for g in self.store.grants().await? {
            let covers = match egress {
                None => g.matches(asked),
                Some(e) => g.matches_egress(asked, &e.name, e.port),
            };
            if g.active(now)
                && covers
                && let Some(used) = self.store.use_grant(&g.id, now).await?
            {
                return Ok(Some(used));
            }
        }
        Ok(None)
    }

    /// An egress approval of a call that cannot wait (a stateless
    /// client's): answered by an egress grant, or refused saying what
    /// would allow it. Never stored: see the module docs.
    pub async fn egress_granted(
        &self,
        request: &ApprovalRequest,
        egress: &EgressAsk,
    ) -> ApprovalAnswer {
        let client = request.client.as_deref();
        let asked = Asked {
            tool: &request.call.tool_name,
            arguments: &request.call.arguments,
            scope: &request.call.agent_scope,
            client: client.and_then(|c| c.name.as_deref()),
            session: client.and_then(|c| c.session.as_deref()),
        };
        match self.granted(&asked, Some(egress)).await {
            Ok(Some(grant)) => ApprovalAnswer::ApprovedBy(grant.describe()),
            Ok(None) => ApprovalAnswer::Unavailable(format!(
                "this client's calls cannot wait for an egress approval (stateless requests); \
                 no egress grant covers {}:{} (make one: `toolgate approvals grant \
                 --destination {} --minutes N`)",
                egress.name, egress.port, egress.name
            )),
            Err(e) => ApprovalAnswer::Unavailable(format!("{e}")),
        }
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
            answers: None,
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
    async fn entry_for(
        &self,
        request: &ApprovalRequest,
        egress: Option<&EgressAsk>,
    ) -> Result<Entry, ApprovalAnswer> {
        let call = &request.call;
        let client = request.client.as_deref();
        let asked = Asked {
            tool: &call.tool_name,
            arguments: &call.arguments,
            scope: &call.agent_scope,
            client: client.and_then(|c| c.name.as_deref()),
            session: client.and_then(|c| c.session.as_deref()),
        };
        match self.granted(&asked, egress).await {
            Ok(Some(grant)) => return Err(ApprovalAnswer::ApprovedBy(grant.describe())),
            Ok(None) => {}
            Err(e) => return Err(ApprovalAnswer::Unavailable(format!("{e}"))),
        }
        let mut entry = self
            .new_entry(call, client, &request.asked_by, &request.prompt)
            .await
            .map_err(ApprovalAnswer::Unavailable)?;
        entry.card = request.card.clone();
        entry.egress = egress.cloned();
        Ok(entry)
    }

    /// A new pending entry about `call` (not stored yet), or why there can
    /// be none (the queue is full, the store fails).
    async fn new_entry(
        &self,
        call: &CallInfo,
        client: Option<&crate::call::Client>,
        asked_by: &str,
        reason: &str,
    ) -> Result<Entry, String> {
        match self.store.count_pending().await {
            Ok(n) if n >= APPROVAL_MAX_PENDING => {
                return Err(format!(
                    "the approval queue is full ({n} pending; at most {APPROVAL_MAX_PENDING})"
                ));
            }
            Ok(_) => {}
            Err(e) => return Err(format!("{e}")),
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
            client: client.and_then(|c| c.name.clone()),
            session: client.and_then(|c| c.session.clone()),
            caller: call.caller.as_ref().map(|c| c.subject.clone()),
            tool: call.tool_name.clone(),
            arguments,
            card: None,
            asked_by: asked_by.to_string(),
            reason: cut(reason.to_string(), APPROVAL_MAX_MESSAGE_BYTES),
            state: EntryState::Pending,
            decided: None,
            replica: self.replica.clone(),
            retry: None,
            egress: None,
            questions: None,
        })
    }

    /// A call that does not wait (see the module docs): a grant answers at
    /// once; otherwise its entry is stored, pending, and expires by itself.
    pub async fn park(self: &Arc<Self>, request: &ApprovalRequest) -> Parked {
        let mut entry = match self.entry_for(request, None).await {
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
        let shared = self.store.shared();
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
                // A shared store: read it again now and then, in case the
                // change feed dropped the decision (see the module docs).
                () = tokio::time::sleep(APPROVAL_SHARED_RECHECK), if shared => {}
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

    async fn ask(
        self: &Arc<Self>,
        request: &ApprovalRequest,
        egress: Option<&EgressAsk>,
    ) -> ApprovalAnswer {
        let entry = match self.entry_for(request, egress).await {
            Ok(entry) => entry,
            Err(answer) => return answer,
        };
        let why = format!(
            "nobody decided within {} ms (`[approval] timeout_ms`), so the call is denied",
            self.timeout.as_millis()
        );
        match self.wait_for(entry, &why).await {
            Waited::Ended(decided) => answer(&decided),
            Waited::Failed(e) => ApprovalAnswer::Unavailable(e),
            Waited::Expired => ApprovalAnswer::DeniedBy {
                by: QUEUE.into(),
                reason: why,
            },
        }
    }

    /// Questions for the user (`ask_user_question`; see
    /// [`super::questions`]) as an entry of their own: shown with their
    /// options in the console, `toolgate approvals list` and the webhook;
    /// answered there with the `answer` verdict, declined by a denial.
    /// No grant answers a question. Waits at most `[approval] timeout_ms`
    /// (the seam's `[questions] timeout_ms` and the call bound it too: a
    /// wait dropped withdraws the entry).
    pub async fn ask_user(self: &Arc<Self>, request: &QuestionRequest) -> QuestionAnswer {
        let summary = request
            .questions
            .questions
            .iter()
            .map(|q| format!("{}: {}", q.header, q.question))
            .collect::<Vec<_>>()
            .join("; ");
        let mut entry = match self
            .new_entry(
                &request.call,
                request.client.as_deref(),
                &request.call.tool_name,
                &format!("questions for the user: {summary}"),
            )
            .await
        {
            Ok(e) => e,
            Err(why) => return QuestionAnswer::Unavailable(why),
        };
        entry.questions = Some(request.questions.clone());
        let why = format!(
            "nobody answered within {} ms (`[approval] timeout_ms`)",
            self.timeout.as_millis()
        );
        let decided = match self.wait_for(entry, &why).await {
            Waited::Ended(decided) => decided,
            Waited::Failed(e) => return QuestionAnswer::Unavailable(e),
            Waited::Expired => return QuestionAnswer::TimedOut(why),
        };
        let by = decided
            .decided
            .as_ref()
            .map_or_else(|| QUEUE.to_string(), |d| d.by.clone());
        let message = decided.decided.as_ref().and_then(|d| d.message.clone());
        match (decided.state, decided.decided.and_then(|d| d.answers)) {
            (EntryState::Approved, Some(answers)) => QuestionAnswer::Answered { answers, by },
            (EntryState::Denied, _) => QuestionAnswer::Declined {
                by,
                reason: message.unwrap_or_else(|| "declined in the approval queue".into()),
            },
            (state, _) => QuestionAnswer::TimedOut(
                message.unwrap_or_else(|| format!("the questions were {}", state.as_str())),
            ),
        }
    }

    /// Stores `entry`, pending, and waits for its decision, at most the
    /// queue's timeout (then it is expired with `why`). Dropping the wait
    /// withdraws the entry.
    async fn wait_for(self: &Arc<Self>, entry: Entry, why: &str) -> Waited {
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
            return Waited::Failed(format!("{e}"));
        }
        tracing::info!(id = %entry.id, tool = %entry.tool, "waiting for approval");
        let _ = self.events.send(Event::Pending(entry.clone()));
        let decided = tokio::select! {
            decided = rx => decided.ok(),
            () = tokio::time::sleep(self.timeout) => None,
        };
        guard.disarm();
        match decided {
            Some(d) => Waited::Ended(d),
            None => match self.end(&entry.id, EntryState::Expired, why).await {
                Some(_) => Waited::Expired,
                // Decided just as the time ran out: that decision holds.
                None => match self.store.get(&entry.id).await {
                    Ok(Some(e)) if e.state != EntryState::Pending => Waited::Ended(e),
                    _ => Waited::Expired,
                },
            },
        }
    }
}

/// How a wait in the queue ended (one per wait, matched at once: boxing
/// the entry would only add an allocation).
#[allow(clippy::large_enum_variant)]
enum Waited {
    /// Decided (or ended by the queue: withdrawn, expired elsewhere).
    Ended(Entry),
    /// The entry could not be stored: why.
    Failed(String),
    /// Nobody decided in time.
    Expired,
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
        // A connection's record names the entry (and the grant made with
        // it) besides who decided.
        EntryState::Approved if entry.egress.is_some() => {
            let grant = entry
                .decided
                .as_ref()
                .and_then(|d| d.grant.as_ref())
                .map(|g| format!(", grant {g}"))
                .unwrap_or_default();
            ApprovalAnswer::ApprovedBy(format!("approval {} by {by}{grant}", entry.id))
        }
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
        self.ask(request, None).await
    }

    /// An entry with the destination (answered first by an egress grant);
    /// an approval names its entry, so the connection's record says which.
    async fn approve_egress(
        &self,
        request: &ApprovalRequest,
        egress: &EgressAsk,
    ) -> ApprovalAnswer {
        self.ask(request, Some(egress)).await
    }

    async fn ask_questions(&self, request: &QuestionRequest) -> QuestionAnswer {
        self.ask_user(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::{CallOrigin, ToolMeta};
    use crate::store::sqlite::SqliteApprovals;

    /// A fresh store file under the temporary directory.
    fn store(name: &str) -> Arc<dyn ApprovalStore> {
        let dir = std::env::temp_dir().join(format!(
            "toolgate-queue-{name}-{}-{}",
            std::process::id(),
            now_ms()
        ));
        Arc::new(SqliteApprovals::open(&dir.join("approvals.sqlite")).unwrap())
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

    /// Replicas sharing a queue all hear of every entry; what only one
    /// should do (post it to the webhook) is done by the one that asked.
    #[tokio::test]
    async fn only_the_replica_that_asked_counts_an_entry_as_its_own() {
        let shared = ApprovalQueue::open_as(
            store("asked-ra"),
            Duration::from_secs(60),
            Some("ra".into()),
        )
        .await
        .unwrap();
        let own = ApprovalQueue::open(store("asked-own"), Duration::from_secs(60))
            .await
            .unwrap();
        let mut entry = parked(&shared, "echo x").await;
        assert_eq!(entry.replica.as_deref(), Some("ra"));
        assert!(shared.asked_here(&entry));
        entry.replica = Some("rb".into());
        assert!(!shared.asked_here(&entry), "another replica's entry");
        assert!(
            own.asked_here(&entry),
            "a queue of its own posts everything"
        );
        entry.replica = None;
        assert!(
            shared.asked_here(&entry),
            "an entry of no replica (before sharing)"
        );
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

    fn egress(name: &str, port: u16) -> EgressAsk {
        EgressAsk {
            name: name.into(),
            port,
            address: "93.184.215.14".into(),
            plugin: "bash".into(),
            via: "connect".into(),
        }
    }

    /// Waits until `n` entries are pending.
    async fn until_pending(queue: &Arc<ApprovalQueue>, n: usize) -> Vec<Entry> {
        for _ in 0..500 {
            let p = queue.pending().await.unwrap();
            if p.len() == n {
                return p;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("not {n} pending");
    }

    #[tokio::test]
    async fn egress_approvals_are_entries_and_egress_grants_answer_only_them() {
        let queue = ApprovalQueue::open(store("egress"), Duration::from_millis(300))
            .await
            .unwrap();
        // A tool grant for bash never answers a connection's question.
        queue
            .grant(
                &GrantSpec {
                    tool: Some("bash".into()),
                    count: Some(10),
                    ..GrantSpec::default()
                },
                "alice",
            )
            .await
            .unwrap();
        let q = queue.clone();
        let waiting = tokio::spawn(async move {
            q.approve_egress(&request("curl x"), &egress("pypi.org", 443))
                .await
        });
        let pending = until_pending(&queue, 1).await;
        let e = &pending[0];
        assert_eq!(e.egress.as_ref(), Some(&egress("pypi.org", 443)));
        assert_eq!((e.tool.as_str(), e.scope.as_str()), ("bash", ""));
        assert_eq!(e.to_json()["egress"]["name"], "pypi.org");
        // A grant from it is an egress grant for its destination and port.
        let decided = queue
            .decide(
                &e.id,
                Verdict::Grant(GrantSpec {
                    duration_ms: Some(60_000),
                    ..GrantSpec::default()
                }),
                "bob",
            )
            .await
            .unwrap();
        let grant_id = decided.decided.unwrap().grant.unwrap();
        let answer = waiting.await.unwrap();
        assert_eq!(
            answer,
            ApprovalAnswer::ApprovedBy(format!("approval {} by bob, grant {grant_id}", e.id))
        );
        let grants = queue.grants().await.unwrap();
        let g = grants.iter().find(|g| g.id == grant_id).unwrap();
        assert_eq!(
            (g.destination.as_deref(), g.port, g.tool.as_str()),
            (Some("pypi.org"), Some(443), "bash")
        );
        // It answers the next call's question at once, with no entry...
        let again = queue
            .approve_egress(&request("curl y"), &egress("pypi.org", 443))
            .await;
        assert!(
            matches!(&again, ApprovalAnswer::ApprovedBy(by) if by.starts_with(&format!("grant {grant_id}: egress to `pypi.org:443`"))),
            "{again}"
        );
        assert!(queue.pending().await.unwrap().is_empty());
        // ...but not another port, and never a call's own `ask` (the tool
        // grant does that).
        let other = queue
            .approve_egress(&request("curl z"), &egress("pypi.org", 8443))
            .await;
        assert!(
            matches!(&other, ApprovalAnswer::DeniedBy { reason, .. } if reason.contains("nobody decided")),
            "{other}"
        );
        let own = queue.approve(&request("ls")).await;
        assert!(
            matches!(&own, ApprovalAnswer::ApprovedBy(by) if by.contains("`bash`") && !by.contains("egress")),
            "{own}"
        );
        // A call's own entry cannot make an egress grant.
        let q = queue.clone();
        let own = tokio::spawn(async move {
            q.approve(&ApprovalRequest {
                call: Arc::new(CallInfo::new(
                    2,
                    "c2".into(),
                    "edit".into(),
                    serde_json::json!({}),
                    CallOrigin::default(),
                    ToolMeta::unknown(),
                )),
                prompt: "p".into(),
                asked_by: "h".into(),
                card: None,
                client: None,
            })
            .await
        });
        let e = until_pending(&queue, 1).await.remove(0);
        let spec = GrantSpec {
            destination: Some("*".into()),
            count: Some(1),
            ..GrantSpec::default()
        };
        assert!(matches!(
            queue.decide(&e.id, Verdict::Grant(spec), "eve").await,
            Err(DecideError::NotEgress(_))
        ));
        let _ = own.await;
        // A stateless call's question is answered by grants only, never
        // stored.
        let none = queue
            .egress_granted(&request("curl"), &egress("crates.io", 443))
            .await;
        assert!(matches!(none, ApprovalAnswer::Unavailable(_)), "{none}");
        let yes = queue
            .egress_granted(&request("curl"), &egress("pypi.org", 443))
            .await;
        assert!(matches!(yes, ApprovalAnswer::ApprovedBy(_)), "{yes}");
        assert!(queue.pending().await.unwrap().is_empty());
    }

    fn questions_request() -> QuestionRequest {
        QuestionRequest {
            call: request("x").call,
            questions: serde_json::from_value(serde_json::json!({"questions": [
                {"header": "Stack", "question": "Which?", "options": [
                    {"label": "Rust", "description": ""}, {"label": "Go", "description": ""}]},
            ]}))
            .unwrap(),
            client: None,
        }
    }

    /// Questions are an entry of their own: shown with their options,
    /// answered (checked against them), declined by a denial, never
    /// approved plainly nor by a grant; nobody answering ends the wait.
    #[tokio::test]
    async fn questions_are_answered_in_the_queue_and_only_answered() {
        let queue = ApprovalQueue::open(store("questions"), Duration::from_secs(60))
            .await
            .unwrap();
        // A grant for the tool answers no question.
        let grant = queue
            .grant(
                &GrantSpec {
                    tool: Some("bash".into()),
                    count: Some(10),
                    ..GrantSpec::default()
                },
                "alice",
            )
            .await
            .unwrap();
        let q = queue.clone();
        let waiting = tokio::spawn(async move { q.ask_questions(&questions_request()).await });
        let e = until_pending(&queue, 1).await.remove(0);
        assert_eq!(e.to_json()["questions"][0]["options"][1]["label"], "Go");
        assert!(e.reason.contains("Stack: Which?"), "{}", e.reason);
        for verdict in [Verdict::Approve, Verdict::Grant(GrantSpec::default())] {
            let err = queue.decide(&e.id, verdict, "bob").await.unwrap_err();
            assert!(matches!(err, DecideError::Question(_)), "{err}");
        }
        let given = |label: &str| {
            vec![Given {
                header: "Stack".into(),
                selected: vec![label.into()],
                other: None,
            }]
        };
        let err = queue
            .decide(&e.id, Verdict::Answer(given("Java")), "bob")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("`Java` is not an option"), "{err}");
        queue
            .decide(&e.id, Verdict::Answer(given("Rust")), "bob")
            .await
            .unwrap();
        match waiting.await.unwrap() {
            QuestionAnswer::Answered { answers, by } => {
                assert_eq!(
                    (answers[0].selected.as_slice(), by.as_str()),
                    (&["Rust".to_string()][..], "bob")
                );
            }
            other => panic!("{other:?}"),
        }
        // An answer to a call's approval is refused.
        queue.revoke(&grant.id, "alice").await.unwrap();
        let q = queue.clone();
        let call = tokio::spawn(async move { q.approve(&request("rm x")).await });
        let e = until_pending(&queue, 1).await.remove(0);
        let err = queue
            .decide(&e.id, Verdict::Answer(given("Rust")), "bob")
            .await
            .unwrap_err();
        assert!(matches!(err, DecideError::NotQuestion(_)), "{err}");
        queue
            .decide(&e.id, Verdict::Deny(None), "bob")
            .await
            .unwrap();
        call.await.unwrap();
        // Denied: declined, with the message.
        let q = queue.clone();
        let waiting = tokio::spawn(async move { q.ask_questions(&questions_request()).await });
        let e = until_pending(&queue, 1).await.remove(0);
        queue
            .decide(&e.id, Verdict::Deny(Some("not now".into())), "carol")
            .await
            .unwrap();
        assert_eq!(
            waiting.await.unwrap(),
            QuestionAnswer::Declined {
                by: "carol".into(),
                reason: "not now".into()
            }
        );
        // Nobody answering: timed out, the entry expired.
        let short = ApprovalQueue::open(store("questions-short"), Duration::from_millis(100))
            .await
            .unwrap();
        let answer = short.ask_questions(&questions_request()).await;
        assert!(
            matches!(&answer, QuestionAnswer::TimedOut(why) if why.contains("nobody answered within 100 ms")),
            "{answer:?}"
        );
        assert_eq!(
            short.decided(1).await.unwrap()[0].state,
            EntryState::Expired
        );
    }
}
