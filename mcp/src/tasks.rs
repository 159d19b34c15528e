//! The MCP Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663, as
//! specified for the 2026-07-28 revision in the extension's
//! `specification/2026-07-28/tasks.md`) for calls that meet the approval
//! queue.
//!
//! Without tasks, a stateless (2026-07-28) client's call that meets a
//! queued `ask` ends with an `InputRequiredResult` naming the entry, and
//! the client calls again until it is decided (`super::approval`). A
//! client that declares the extension in its request's capabilities
//! (`_meta` `io.modelcontextprotocol/clientCapabilities.extensions`) gets
//! a task instead (`resultType: "task"`), and polls `tasks/get`:
//!
//! * while the entry is pending the task is `working`, its
//!   `statusMessage` naming the entry. Not `input_required`: in this
//!   revision that status means the *client* must answer the
//!   `inputRequests` it carries (with `tasks/update`), and with the queue
//!   the client is never asked — an operator decides (console, API,
//!   `toolgate approvals`, a grant). A task that asked the client would
//!   let it approve its own call.
//! * once the entry is decided the call goes through the pipeline again,
//!   answered from the entry exactly as a retry is (same call only, an
//!   approval runs it once): approved, it runs and the task is
//!   `completed` with its `CallToolResult` inlined (this revision has no
//!   `tasks/result`; `tasks/get` carries the result); denied, expired or
//!   withdrawn, the task is `completed` with the denial as an `isError`
//!   result carrying the message, as the same call answers without tasks
//!   — the revision reserves `failed` for JSON-RPC errors (a full
//!   scheduler, an internal error), which is what `failed` carries here.
//! * `tasks/cancel` withdraws the pending entry (or cancels the running
//!   call) and the task ends `cancelled`; `tasks/update` is acknowledged
//!   and ignored (these tasks never ask the client anything).
//!
//! Bounded: [`TASKS_MAX`] tasks at once, [`TASKS_MAX_PER_CLIENT`] per
//! client (a local user or a peer address, [`super::peer`]); past either,
//! the call is answered with the `InputRequiredResult` as without tasks.
//! A task lives while its entry waits (at most `[approval] timeout_ms`)
//! and its call runs, then [`TASKS_KEEP_MS`] more; its result is kept up
//! to [`TASKS_MAX_RESULT_BYTES`], all results together up to
//! [`TASKS_MAX_RESULT_TOTAL_BYTES`]. A task id is 128 random bits; an id
//! that is unknown, ended and dropped, or another client's is refused
//! alike with `-32602` (the revision's "task not found").
//!
//! Tasks are kept in this process, not in the queue's store: a task whose
//! host restarted is unknown to the next one; its entry survives and the
//! client can call again (it is asked anew; the old entry expires).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::ErrorData;
use rmcp::model::{
    CallToolResult, CreateTaskResult, DetailedTask, ErrorCode, JsonObject, Task, TaskPayload,
    TaskStatus,
};
use tokio_util::sync::CancellationToken;

use super::approval::RetriedApprover;
use toolgate::approval::queue::{ApprovalQueue, Resumed, now_ms};
use toolgate::budgets::{
    TASKS_KEEP_MS, TASKS_MAX, TASKS_MAX_PER_CLIENT, TASKS_MAX_RESULT_BYTES,
    TASKS_MAX_RESULT_TOTAL_BYTES, TASKS_POLL_INTERVAL_MS,
};
use toolgate::call::ToolCall;
use toolgate::outcome::CallRecord;
use toolgate::scheduler::{Arrivals, ArrivalsError};
use toolgate::turn::TurnOptions;

/// The tasks of one server (every session and stateless request of it).
pub struct Tasks {
    table: Mutex<Table>,
    keep_ms: u64,
}

#[derive(Default)]
struct Table {
    tasks: HashMap<String, Arc<Slot>>,
    /// Bytes of the results kept.
    result_bytes: usize,
}

/// One task.
pub struct Slot {
    id: String,
    /// The client it belongs to (only it sees the task).
    owner: String,
    created_ms: u64,
    /// How long its entry may wait (the queue's timeout), for its `ttlMs`.
    wait_ms: u64,
    /// Fired by `tasks/cancel`.
    cancel: CancellationToken,
    status: Mutex<Status>,
}

struct Status {
    phase: Phase,
    updated_ms: u64,
    message: Option<String>,
}

enum Phase {
    /// The entry is pending.
    Waiting,
    /// Decided; the call goes through the pipeline.
    Running,
    /// The call's result, and its size in bytes.
    Completed(JsonObject, usize),
    Failed(JsonObject),
    Cancelled,
}

impl Phase {
    fn ended(&self) -> bool {
        matches!(
            self,
            Phase::Completed(..) | Phase::Failed(_) | Phase::Cancelled
        )
    }
}

impl Slot {
    pub fn id(&self) -> &str {
        &self.id
    }

    fn status(&self) -> std::sync::MutexGuard<'_, Status> {
        self.status.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A fresh task id: `t-` and 32 hex digits (128 random bits).
fn new_task_id() -> Option<String> {
    toolgate::state::random_hex(16)
        .ok()
        .map(|h| format!("t-{h}"))
}

/// The error for an id this client has no task under.
fn not_found(id: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "Failed to retrieve task: no task `{}` (unknown, another client's, or ended more \
             than {} ms ago and dropped)",
            toolgate::budgets::cut(id.to_string(), 80),
            TASKS_KEEP_MS
        ),
        None,
    )
}

impl Tasks {
    /// Tasks kept `keep` after they end ([`TASKS_KEEP_MS`] when served).
    pub fn new(keep: std::time::Duration) -> Arc<Tasks> {
        Arc::new(Tasks {
            table: Mutex::default(),
            keep_ms: keep.as_millis() as u64,
        })
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drops the tasks that ended more than the keep time ago.
    fn sweep(&self, table: &mut Table, now: u64) {
        let keep = self.keep_ms;
        let mut freed = 0;
        table.tasks.retain(|_, slot| {
            let status = slot.status();
            let gone = status.phase.ended() && status.updated_ms.saturating_add(keep) <= now;
            if gone && let Phase::Completed(_, bytes) = status.phase {
                freed += bytes;
            }
            !gone
        });
        table.result_bytes = table.result_bytes.saturating_sub(freed);
    }

    /// Tasks held now (any state).
    pub fn len(&self) -> usize {
        let mut table = self.table();
        self.sweep(&mut table, now_ms());
        table.tasks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A new task of `owner` for a call waiting up to `wait` in the queue;
    /// `None` when the bounds are reached (or there is no randomness).
    pub fn create(&self, owner: &str, wait: std::time::Duration) -> Option<Arc<Slot>> {
        let now = now_ms();
        let mut table = self.table();
        self.sweep(&mut table, now);
        let mine = table.tasks.values().filter(|s| s.owner == owner).count();
        if table.tasks.len() >= TASKS_MAX || mine >= TASKS_MAX_PER_CLIENT {
            tracing::warn!(
                owner,
                held = table.tasks.len(),
                mine,
                "no task for this call: the bounds are reached (it gets input-required instead)"
            );
            return None;
        }
        let id = new_task_id()?;
        let slot = Arc::new(Slot {
            id: id.clone(),
            owner: owner.to_string(),
            created_ms: now,
            wait_ms: wait.as_millis() as u64,
            cancel: CancellationToken::new(),
            status: Mutex::new(Status {
                phase: Phase::Waiting,
                updated_ms: now,
                message: None,
            }),
        });
        table.tasks.insert(id, slot.clone());
        Some(slot)
    }

    /// `owner`'s task `id`.
    pub fn lookup(&self, id: &str, owner: &str) -> Result<Arc<Slot>, ErrorData> {
        let mut table = self.table();
        self.sweep(&mut table, now_ms());
        table
            .tasks
            .get(id)
            .filter(|s| s.owner == owner)
            .cloned()
            .ok_or_else(|| not_found(id))
    }

    fn task(&self, slot: &Slot, status: &Status) -> Task {
        let ttl = match status.phase.ended() {
            true => {
                (status.updated_ms.saturating_sub(slot.created_ms)).saturating_add(self.keep_ms)
            }
            // Its wait, then the keep time (the run adds to it).
            false => slot.wait_ms.saturating_add(self.keep_ms),
        };
        let mut task = Task::new(
            slot.id.clone(),
            TaskStatus::Working,
            toolgate::clock::rfc3339_millis(slot.created_ms),
            toolgate::clock::rfc3339_millis(status.updated_ms),
        )
        .with_ttl_ms(ttl);
        if !status.phase.ended() {
            task = task.with_poll_interval_ms(TASKS_POLL_INTERVAL_MS);
        }
        if let Some(m) = &status.message {
            task = task.with_status_message(m.clone());
        }
        task
    }

    /// What `tasks/get` answers.
    pub fn detailed(&self, slot: &Slot) -> DetailedTask {
        let status = slot.status();
        let payload = match &status.phase {
            Phase::Waiting | Phase::Running => TaskPayload::Working,
            Phase::Completed(result, _) => TaskPayload::Completed {
                result: result.clone(),
            },
            Phase::Failed(error) => TaskPayload::Failed {
                error: error.clone(),
            },
            Phase::Cancelled => TaskPayload::Cancelled,
        };
        DetailedTask::new(self.task(slot, &status), payload)
    }

    /// The `CreateTaskResult` the call is answered with.
    pub fn seed(&self, slot: &Slot) -> CreateTaskResult {
        let status = slot.status();
        CreateTaskResult::new(self.task(slot, &status))
    }

    /// `tasks/cancel`: withdraws the entry, or cancels the running call.
    pub fn cancel(&self, id: &str, owner: &str) -> Result<(), ErrorData> {
        let slot = self.lookup(id, owner)?;
        slot.cancel.cancel();
        Ok(())
    }

    /// Moves a task on, unless it ended already.
    fn set(&self, slot: &Slot, phase: Phase, message: Option<String>) {
        let mut status = slot.status();
        if status.phase.ended() {
            return;
        }
        status.phase = phase;
        status.updated_ms = now_ms();
        status.message = message;
    }

    /// Waiting on entry `entry` (its status message).
    pub fn waiting(&self, slot: &Slot, entry: &str) {
        self.set(
            slot,
            Phase::Waiting,
            Some(format!(
                "waiting for approval `{entry}` in the approval queue (an operator decides: \
                 the console, `toolgate approvals approve {entry}`, or a grant)"
            )),
        );
    }

    /// Ends the task with the call's result, kept within the bounds.
    pub fn complete(&self, slot: &Slot, result: CallToolResult, message: Option<String>) {
        let (object, bytes) = self.keep(result);
        let mut table = self.table();
        let mut status = slot.status();
        if status.phase.ended() {
            return;
        }
        let (object, bytes) = if table.result_bytes + bytes > TASKS_MAX_RESULT_TOTAL_BYTES {
            too_large(
                bytes,
                &format!(
                    "the {TASKS_MAX_RESULT_TOTAL_BYTES} bytes all kept task results may take \
                     together"
                ),
            )
        } else {
            (object, bytes)
        };
        table.result_bytes += bytes;
        status.phase = Phase::Completed(object, bytes);
        status.updated_ms = now_ms();
        status.message = message;
    }

    /// The result as kept: itself, or a note of its size.
    fn keep(&self, result: CallToolResult) -> (JsonObject, usize) {
        let text = serde_json::to_string(&result).unwrap_or_default();
        if text.len() > TASKS_MAX_RESULT_BYTES {
            return too_large(
                text.len(),
                &format!("the {TASKS_MAX_RESULT_BYTES} bytes a task keeps of a result"),
            );
        }
        match serde_json::from_str::<JsonObject>(&text) {
            Ok(object) => (object, text.len()),
            Err(_) => too_large(text.len(), "what a task can keep"),
        }
    }

    /// Ends the task with a JSON-RPC error.
    pub fn fail(&self, slot: &Slot, code: ErrorCode, message: String) {
        let mut error = JsonObject::new();
        error.insert("code".into(), code.0.into());
        error.insert("message".into(), message.clone().into());
        self.set(slot, Phase::Failed(error), Some(message));
    }

    /// Ends the task as cancelled.
    pub fn cancelled(&self, slot: &Slot, message: &str) {
        self.set(slot, Phase::Cancelled, Some(message.to_string()));
    }
}

/// An `isError` result saying the call's result was too large to keep.
fn too_large(bytes: usize, limit: &str) -> (JsonObject, usize) {
    let note = CallToolResult::error(vec![rmcp::model::ContentBlock::text(format!(
        "the call ran, but its result ({bytes} bytes of JSON) is more than {limit}, so the \
         task does not keep it"
    ))]);
    let text = serde_json::to_string(&note).unwrap_or_default();
    let object = serde_json::from_str(&text).unwrap_or_default();
    (object, text.len())
}

/// Ends a task whose driver stopped without ending it (a panic): failed.
struct Unfinished<'a> {
    tasks: &'a Tasks,
    slot: &'a Slot,
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        self.tasks.fail(
            self.slot,
            ErrorCode::INTERNAL_ERROR,
            "the task stopped without a result (an internal error)".into(),
        );
    }
}

/// What a task runs: the call, its turn, where, and how its record
/// becomes a result (the server's mapping; `busy`: the error code of a
/// full scheduler).
pub struct Run {
    pub arrivals: Arc<Arrivals>,
    pub call: ToolCall,
    pub turn: TurnOptions,
    pub to_result: fn(CallRecord) -> CallToolResult,
    pub busy: ErrorCode,
}

/// Drives one task: waits for its entry's decision (no hold: the client
/// polls `tasks/get` meanwhile), then runs the call through the pipeline,
/// answered from the entry, and keeps its result.
pub async fn drive(
    tasks: Arc<Tasks>,
    slot: Arc<Slot>,
    queue: Arc<ApprovalQueue>,
    entry: String,
    run: Run,
) {
    let Run {
        arrivals,
        call,
        turn,
        to_result,
        busy,
    } = run;
    let _unfinished = Unfinished {
        tasks: &tasks,
        slot: &slot,
    };
    tasks.waiting(&slot, &entry);
    let resumed = loop {
        match queue.resume(&entry, &call.name, &slot.cancel).await {
            Ok(Resumed::Pending(e)) => {
                if slot.cancel.is_cancelled() {
                    break Resumed::Pending(e);
                }
                // The queue expires the entry at `expiresMs`; past that by
                // a minute, something is wrong: do not wait forever.
                if now_ms() > e.expires_ms.saturating_add(60_000) {
                    tasks.fail(
                        &slot,
                        ErrorCode::INTERNAL_ERROR,
                        format!("approval `{entry}` did not end at its expiry"),
                    );
                    return;
                }
            }
            Ok(resumed) => break resumed,
            Err(e) => {
                tasks.fail(&slot, ErrorCode::INTERNAL_ERROR, e.to_string());
                return;
            }
        }
    };
    if slot.cancel.is_cancelled() {
        tasks.cancelled(
            &slot,
            &format!("cancelled (tasks/cancel); approval `{entry}` was withdrawn"),
        );
        return;
    }
    let decided = match &resumed {
        Resumed::Ended(e) => e
            .decided
            .as_ref()
            .map(|d| format!("approval `{entry}` {} by {}", e.state.as_str(), d.by)),
        _ => None,
    };
    tasks.set(&slot, Phase::Running, decided.clone());
    let turn = TurnOptions {
        approver: Some(RetriedApprover::new(queue, resumed)),
        cancel: slot.cancel.clone(),
        ..turn
    };
    // Its own id in the audit record: the task's.
    let call = ToolCall {
        id: slot.id.clone(),
        ..call
    };
    let outcome = arrivals.run(call, &turn).await;
    if slot.cancel.is_cancelled() {
        tasks.cancelled(&slot, "cancelled (tasks/cancel) while the call ran");
        return;
    }
    match outcome {
        Ok(record) => {
            let message = record.error.as_ref().map(|e| e.message.clone()).or(decided);
            tasks.complete(&slot, to_result(record), message);
        }
        Err(e @ ArrivalsError::Busy { .. }) => {
            tasks.fail(&slot, busy, e.to_string());
        }
        Err(e @ ArrivalsError::Failed(_)) => {
            tasks.fail(&slot, ErrorCode::INTERNAL_ERROR, e.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ok(text: &str) -> CallToolResult {
        CallToolResult::success(vec![rmcp::model::ContentBlock::text(text.to_string())])
    }

    /// Bounds: per client, in all; unknown and other clients' ids alike;
    /// ended tasks dropped after the keep time, their bytes freed; a
    /// result over the size kept replaced by a note.
    #[test]
    fn tasks_are_bounded_and_kept_for_a_while() {
        let tasks = Tasks::new(Duration::from_millis(200));
        let wait = Duration::from_secs(60);
        let mine: Vec<_> = (0..TASKS_MAX_PER_CLIENT)
            .map(|_| tasks.create("alice", wait).unwrap())
            .collect();
        assert!(
            tasks.create("alice", wait).is_none(),
            "alice's share is full"
        );
        let bob = tasks.create("bob", wait).unwrap();
        assert!(
            tasks.lookup(bob.id(), "alice").is_err(),
            "bob's task is not alice's"
        );
        let Err(e) = tasks.lookup("t-nope", "alice") else {
            panic!("an unknown id was found")
        };
        assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
        assert!(e.message.contains("no task `t-nope`"), "{}", e.message);
        let v = serde_json::to_value(tasks.detailed(&bob)).unwrap();
        assert_eq!(v["status"], "working", "{v}");
        assert_eq!(v["ttlMs"], 60_200, "{v}");

        let big = "x".repeat(TASKS_MAX_RESULT_BYTES + 1);
        tasks.complete(&mine[0], ok(&big), None);
        tasks.complete(&mine[1], ok("small"), None);
        let v = serde_json::to_value(tasks.detailed(&mine[0])).unwrap();
        assert_eq!(v["status"], "completed");
        assert_eq!(v["result"]["isError"], true);
        let note = v["result"]["content"][0]["text"].as_str().unwrap();
        assert!(
            note.contains("the call ran") && note.contains("1048576"),
            "{note}"
        );
        // A second end does not change an ended task.
        tasks.cancelled(&mine[1], "late");
        let v = serde_json::to_value(tasks.detailed(&mine[1])).unwrap();
        assert_eq!(v["result"]["content"][0]["text"], "small", "{v}");
        assert!(tasks.table().result_bytes > 0);

        std::thread::sleep(Duration::from_millis(250));
        assert!(
            tasks.lookup(mine[1].id(), "alice").is_err(),
            "dropped after the keep time"
        );
        assert_eq!(tasks.table().result_bytes, 0, "their bytes freed");
        assert_eq!(tasks.len(), TASKS_MAX_PER_CLIENT - 2 + 1);
        assert!(tasks.create("alice", wait).is_some(), "room again");
    }
}
