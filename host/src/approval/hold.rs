//! A Code Mode program's nested call that meets a queued `ask` while the
//! program answers a stateless (2026-07-28) request.
//!
//! Such a request is never held for minutes: its `ask` ends it with an
//! `InputRequiredResult`, and the client's retry runs the call once the
//! entry is approved (`queue`, "Calls that do not wait"). That cannot
//! work for a call a *program* made: the retry would run the whole
//! program again, and with it every call the program made before the one
//! that asked — a `write` twice, a deployment twice. So a nested call does
//! not end the request; it waits in the queue, briefly:
//!
//! * **Bounded.** At most `[approval] retry_hold_ms` (the operator's
//!   bound on how long a stateless request is held for a decision), and
//!   never past the program's own deadline less [`MARGIN`] (so that the
//!   program still has time to go on, or to report the denial, after the
//!   wait). The program already holds its scheduler slot for as long as
//!   its deadline; this wait adds no new kind of hold.
//! * **Decided in time**: approved, the call runs (once: an approval runs
//!   one call) and the program goes on; denied, the call fails with the
//!   denial's message, which the program can catch.
//! * **Not decided in time**: the call fails (`DENIED`) with a message that
//!   names the entry and says what to do — approve it (or make a grant
//!   that covers the call), then run the program again. The entry stays
//!   pending until its own expiry (`[approval] timeout_ms`), so a person
//!   can still decide it. The program's earlier calls are not undone and
//!   are not repeated by this: it is the client that runs the program
//!   again, knowing which calls ran.
//! * **The program run again**: its identical call (same tool, same
//!   arguments, same agent scope — the entry keeps the SHA-256 of the tool
//!   and arguments) finds the entry: approved and not yet used, the call
//!   runs at once (once: [`ApprovalQueue::answer_retry`] marks it run);
//!   still pending, the call waits on that entry again instead of queueing
//!   a second one. Any other call asks anew.
//!
//! Why not an `InputRequiredResult` for the whole program: its retry
//! re-runs the earlier calls' side effects. Why not wait the whole
//! `timeout_ms`: the program's deadline (30 s by default) ends it first,
//! and a stateless request must not hold its shared scheduler for minutes.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::queue::{ApprovalQueue, Parked, QUEUE, Resumed, call_digest};
use super::store::{Entry, EntryState};
use super::{ApprovalAnswer, ApprovalRequest, Approver};
use crate::call::CallSignal;

/// What the program keeps of its deadline after the wait: 1 s.
pub const MARGIN: Duration = Duration::from_secs(1);

/// Ended entries searched for an approval an earlier run of the program
/// left unused: the newest 200.
pub const LOOKBACK: usize = 200;

/// Answers a nested call's `ask` by waiting, bounded, in the queue (see
/// the module docs).
pub struct HoldingApprover {
    queue: Arc<ApprovalQueue>,
    signal: CallSignal,
}

impl HoldingApprover {
    /// For the nested calls of a program whose call has `signal`.
    pub fn new(queue: Arc<ApprovalQueue>, signal: CallSignal) -> Arc<Self> {
        Arc::new(HoldingApprover { queue, signal })
    }

    /// How long a nested call waits now.
    fn hold(&self) -> Duration {
        let hold = self.queue.retry_hold();
        match self.signal.remaining() {
            Some(left) => hold.min(left.saturating_sub(MARGIN)),
            None => hold,
        }
    }
}

/// Whether `entry` was asked for this very call (see the module docs).
fn same_call(entry: &Entry, request: &ApprovalRequest, digest: &str) -> bool {
    let client = request.client.as_deref();
    entry.tool == request.call.tool_name
        && entry.scope == request.call.agent_scope
        && entry.client.as_deref() == client.and_then(|c| c.name.as_deref())
        && entry.session.as_deref() == client.and_then(|c| c.session.as_deref())
        && entry
            .retry
            .as_ref()
            .is_some_and(|r| r.digest == digest && r.ran_ms.is_none())
}

#[async_trait]
impl Approver for HoldingApprover {
    fn name(&self) -> &str {
        QUEUE
    }

    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        let call = &request.call;
        let digest = call_digest(call);
        // An approval an earlier run of the program left for this call.
        match self.queue.decided(LOOKBACK).await {
            Ok(ended) => {
                for entry in ended {
                    if entry.state == EntryState::Approved && same_call(&entry, request, &digest) {
                        let answer = self.queue.answer_retry(&Resumed::Ended(entry), call).await;
                        if matches!(
                            answer,
                            ApprovalAnswer::Approve | ApprovalAnswer::ApprovedBy(_)
                        ) {
                            return answer;
                        }
                    }
                }
            }
            Err(e) => return ApprovalAnswer::Unavailable(format!("{e}")),
        }
        // Its entry, still pending, or a new one.
        let pending = match self.queue.pending().await {
            Ok(pending) => pending.into_iter().find(|e| same_call(e, request, &digest)),
            Err(e) => return ApprovalAnswer::Unavailable(format!("{e}")),
        };
        let id = match pending {
            Some(entry) => entry.id,
            None => match self.queue.park(request).await {
                Parked::Answered(answer) => return answer,
                Parked::Pending(entry) => entry.id,
            },
        };
        let hold = self.hold();
        // Not cancelled from here: a program that goes away leaves the
        // entry pending for its next run (dropping this wait withdraws
        // nothing).
        let never = tokio_util::sync::CancellationToken::new();
        let waited =
            tokio::time::timeout(hold, self.queue.resume(&id, &call.tool_name, &never)).await;
        match waited {
            Ok(Ok(resumed @ Resumed::Ended(_))) => self.queue.answer_retry(&resumed, call).await,
            Ok(Ok(resumed @ Resumed::Unknown(_))) => self.queue.answer_retry(&resumed, call).await,
            Ok(Err(e)) => ApprovalAnswer::Unavailable(format!("{e}")),
            Ok(Ok(Resumed::Pending(_))) | Err(_) => ApprovalAnswer::DeniedBy {
                by: QUEUE.into(),
                reason: format!(
                    "approval `{id}` is pending in the approval queue: nobody decided within \
                     {} ms while the program ran (the shorter of `[approval] retry_hold_ms` and \
                     the program's time left), so this call did not run; the program's earlier \
                     calls did. Once `{id}` is approved (or a grant covers this call), run the \
                     program again: this same call then runs, once, without asking again",
                    hold.as_millis()
                ),
            },
        }
    }

    /// A nested call's connection to a destination no egress rule allows:
    /// answered from the queue's egress grants or refused, never parked —
    /// as for any stateless request, an entry about a connection must
    /// never become the approval a re-run of the program runs.
    async fn approve_egress(
        &self,
        request: &ApprovalRequest,
        egress: &crate::approval::EgressAsk,
    ) -> ApprovalAnswer {
        self.queue.egress_granted(request, egress).await
    }

    /// A stateless request's program cannot wait for an answer either.
    async fn ask_questions(
        &self,
        _request: &super::questions::QuestionRequest,
    ) -> super::questions::QuestionAnswer {
        super::questions::QuestionAnswer::Unavailable(super::questions::not_stateless())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::queue::{Verdict, now_ms};
    use crate::call::{CallInfo, CallOrigin, ToolMeta};
    use crate::store::sqlite::SqliteApprovals;

    fn request(command: &str) -> ApprovalRequest {
        ApprovalRequest {
            call: Arc::new(CallInfo::new(
                1,
                "p/1".into(),
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

    async fn queue(name: &str) -> Arc<ApprovalQueue> {
        let dir = std::env::temp_dir().join(format!(
            "toolgate-hold-{name}-{}-{}",
            std::process::id(),
            now_ms()
        ));
        let store = Arc::new(SqliteApprovals::open(&dir.join("approvals.sqlite")).unwrap());
        let queue = ApprovalQueue::open(store, Duration::from_secs(60))
            .await
            .unwrap();
        queue.set_retry_hold(Duration::from_millis(300));
        queue
    }

    fn signal(left: Duration) -> CallSignal {
        CallSignal::new(Default::default(), Some(std::time::Instant::now() + left))
    }

    /// Not decided in time: denied naming the entry, which stays pending;
    /// approved then, the same call (a re-run) runs once without a new
    /// entry; the next one asks anew. A deadline shorter than the hold
    /// bounds the wait.
    #[tokio::test]
    async fn a_late_approval_runs_the_rerun_s_call_once() {
        let queue = queue("late").await;
        let holding = HoldingApprover::new(queue.clone(), signal(Duration::from_secs(30)));
        let first = holding.approve(&request("echo x")).await;
        let pending = queue.pending().await.unwrap();
        assert_eq!(pending.len(), 1);
        let id = pending[0].id.clone();
        assert!(
            matches!(&first, ApprovalAnswer::DeniedBy { reason, .. }
                if reason.contains(&format!("approval `{id}` is pending"))
                    && reason.contains("within 300 ms")),
            "{first}"
        );
        queue.decide(&id, Verdict::Approve, "alice").await.unwrap();
        let other = holding.approve(&request("echo other")).await;
        assert!(matches!(other, ApprovalAnswer::DeniedBy { .. }), "{other}");
        assert_eq!(
            queue.pending().await.unwrap().len(),
            1,
            "another call asks anew"
        );
        let rerun = holding.approve(&request("echo x")).await;
        assert_eq!(rerun, ApprovalAnswer::ApprovedBy("alice".into()));
        assert_eq!(
            queue.pending().await.unwrap().len(),
            1,
            "no new entry for it"
        );
        let third = holding.approve(&request("echo x")).await;
        assert!(matches!(third, ApprovalAnswer::DeniedBy { .. }), "{third}");
        assert_eq!(
            queue.pending().await.unwrap().len(),
            2,
            "used up: asked anew"
        );

        // 1.2 s left: the wait is 0.2 s (the margin is kept).
        let short = HoldingApprover::new(queue.clone(), signal(Duration::from_millis(1200)));
        let started = std::time::Instant::now();
        let answer = short.approve(&request("echo short")).await;
        assert!(
            started.elapsed() < Duration::from_millis(290),
            "{:?}",
            started.elapsed()
        );
        assert!(
            matches!(answer, ApprovalAnswer::DeniedBy { .. }),
            "{answer}"
        );
    }

    /// Decided while the call waits: the answer is the decision.
    #[tokio::test]
    async fn a_decision_in_time_answers_the_waiting_call() {
        let queue = queue("in-time").await;
        queue.set_retry_hold(Duration::from_secs(10));
        let holding = HoldingApprover::new(queue.clone(), signal(Duration::from_secs(30)));
        let deciding = {
            let queue = queue.clone();
            tokio::spawn(async move {
                loop {
                    if let Some(e) = queue.pending().await.unwrap().first() {
                        queue
                            .decide(&e.id, Verdict::Deny(Some("not now".into())), "bob")
                            .await
                            .unwrap();
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
        };
        let answer = holding.approve(&request("echo y")).await;
        deciding.await.unwrap();
        assert_eq!(
            answer,
            ApprovalAnswer::DeniedBy {
                by: "bob".into(),
                reason: "not now".into()
            }
        );
    }
}
