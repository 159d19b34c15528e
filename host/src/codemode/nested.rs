//! The host side of `tool-calls`: the calls a program makes, each a call
//! of its own through the whole pipeline.
//!
//! A batch (what the program queued between two rounds of its event loop:
//! one call after an `await`, several under `Promise.all`) is run as a
//! turn of its own through the scheduler, so its calls follow the
//! scheduler's rules — concurrency-safe calls overlap, the others are
//! ordered barriers, results come back in order, and each is committed
//! (observers notified) like a direct call. Every nested call carries:
//!
//! * `code-mode` set and the program's call id as `parent-id`, its agent
//!   scope, its approver (an `ask` reaches whoever the program's call
//!   would have been asked about; for a stateless request with the
//!   approval queue, a bounded wait in the queue instead of ending the
//!   request: see `approval::hold`, which says why);
//! * the program's signal: the batch's turn is cancelled when the program's
//!   caller cancels or its deadline passes, so no nested call outlives the
//!   program;
//! * an id of its own, `<parent id>/<n>` (n from 1, in the order made).
//!
//! The limit on nested calls is counted here: a call past it never reaches
//! the pipeline and fails with `NESTED_CALL_LIMIT`.

use std::sync::Arc;

use serde_json::Value;

use super::NestedCalls;
use crate::approval::Approver;
use crate::bindings::code_mode::toolgate::plugin::tool_calls::{Failure, Request};
use crate::call::{CallInfo, CallSignal, ToolCall};
use crate::content::Content;
use crate::outcome::CallRecord;
use crate::turn::TurnOptions;

/// The nested calls of one program.
pub struct Nested {
    host: Arc<dyn NestedCalls>,
    parent: Arc<CallInfo>,
    /// The program's client (the turn's), if it came from one.
    client: Option<Arc<crate::call::Client>>,
    signal: CallSignal,
    approver: Option<Arc<dyn Approver>>,
    max: usize,
    made: usize,
}

impl Nested {
    pub fn new(
        host: Arc<dyn NestedCalls>,
        parent: Arc<CallInfo>,
        client: Option<Arc<crate::call::Client>>,
        signal: CallSignal,
        approver: Option<Arc<dyn Approver>>,
        max: usize,
    ) -> Self {
        Nested {
            host,
            parent,
            client,
            signal,
            approver,
            max,
            made: 0,
        }
    }

    /// Calls the program made (including those refused by the limit).
    pub fn used(&self) -> usize {
        self.made
    }

    /// Run one batch; one answer per request, in order.
    pub async fn run(&mut self, requests: Vec<Request>) -> Vec<Result<String, Failure>> {
        let mut answers: Vec<Option<Result<String, Failure>>> = Vec::with_capacity(requests.len());
        let mut calls = Vec::new();
        let mut slots = Vec::new();
        for request in requests {
            self.made += 1;
            let id = format!("{}/{}", self.parent.call_id, self.made);
            if self.made > self.max {
                answers.push(Some(Err(Failure {
                    code: "NESTED_CALL_LIMIT".into(),
                    name: "LimitExceeded".into(),
                    message: format!(
                        "the program made more than {} tool calls ([run_code] max_nested_calls); call `{}` was not made",
                        self.max, request.name
                    ),
                    details: None,
                })));
                continue;
            }
            let arguments = match serde_json::from_str::<Value>(&request.arguments) {
                Ok(v) => v,
                Err(e) => {
                    answers.push(Some(Err(Failure {
                        code: "INVALID_ARGS".into(),
                        name: "InvalidArgs".into(),
                        message: format!("the arguments of `{}` are not JSON: {e}", request.name),
                        details: None,
                    })));
                    continue;
                }
            };
            slots.push(answers.len());
            answers.push(None);
            calls.push(ToolCall::new(id, request.name, arguments));
        }
        if !calls.is_empty() {
            let records = self.run_turn(calls).await;
            for (slot, answer) in slots.into_iter().zip(records) {
                answers[slot] = Some(answer);
            }
        }
        answers
            .into_iter()
            .map(|a| a.unwrap_or_else(|| Err(internal("the call was not run"))))
            .collect()
    }

    async fn run_turn(&self, calls: Vec<ToolCall>) -> Vec<Result<String, Failure>> {
        let n = calls.len();
        // The batch is cancelled with the program: its caller's
        // cancellation, or its deadline.
        let cancel = self.signal.token().child_token();
        let watch = {
            let signal = self.signal.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move {
                signal.wait().await;
                cancel.cancel();
            })
        };
        let turn = TurnOptions {
            agent_scope: self.parent.agent_scope.clone(),
            code_mode: true,
            parent_id: Some(self.parent.call_id.clone()),
            cancel,
            approver: self.approver.clone(),
            // The program's client: its calls' records name it (and their
            // `parent`, the program's call), and what answers by the
            // client (the `history` seam) answers them as it answers the
            // program — never as a call with no client.
            client: self.client.clone(),
            // Who runs the program runs its calls.
            caller: self.parent.caller.clone(),
            // Its client is theirs.
            link: self.parent.link.clone(),
        };
        let ran = self.host.run_batch(calls, &turn).await;
        watch.abort();
        match ran {
            Ok(records) => records.iter().map(answer).collect(),
            Err(e) => (0..n).map(|_| Err(internal(&e))).collect(),
        }
    }
}

fn internal(message: &str) -> Failure {
    Failure {
        code: "INTERNAL".into(),
        name: "Internal".into(),
        message: format!("the host could not run the call: {message}"),
        details: None,
    }
}

/// A committed record as the program sees it: a failure throws; a success
/// is its structured content if the tool has an output schema, else its
/// text when all of it is text, else its content blocks.
fn answer(record: &CallRecord) -> Result<String, Failure> {
    if let Some(e) = &record.error {
        return Err(Failure {
            code: e.code.as_str().to_string(),
            name: e.name.clone(),
            message: e.message.clone(),
            details: e.details.as_ref().map(Value::to_string),
        });
    }
    let value = if let Some(v) = &record.structured_content {
        v.clone()
    } else if record.content.iter().all(|c| matches!(c, Content::Text(_))) {
        Value::String(record.text())
    } else {
        serde_json::to_value(&record.content).unwrap_or(Value::Null)
    };
    Ok(value.to_string())
}
