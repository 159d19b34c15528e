//! One sub-agent's loop: model turn, its tool calls through the pipeline
//! as one batch, their results, the next turn — until it answers or a
//! budget ends it.
//!
//! Each tool call is a call like any other: its own id
//! (`<subagent call id>/<turn>.<n>`), the agent's scope (so the registry's
//! restrictions of the parent's scope and every policy hold), the
//! `subagent` call as its parent, the caller's client, caller and
//! approver, and the agent's cancellation — `interrupt_agent`, the
//! caller's cancel, or the agent's time running out end the batch, and
//! with it the processes its calls started. The calls of one turn go to
//! the scheduler as one batch: concurrency-safe ones overlap, the others
//! are barriers, results come back in the model's order.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};

use super::agents::{Agent, State};
use super::config::{CLIENT_MODEL, Limits};
use crate::call::ClientLink;
use crate::codemode::NestedCalls;
use crate::models::{
    Completion, Message, Model, ModelError, Models, Request, ToolResult, ToolUse, Transport, Usage,
    cut, digest, sampling,
};
use crate::tool::ModelTool;
use crate::turn::TurnOptions;

/// Model requests kept in the `subagent` call's audit note (the turns
/// past it are counted, not listed).
pub const MAX_NOTED_REQUESTS: usize = 50;

/// Each text the record keeps of a turn with `[delegation] record_text`
/// (16 KiB): what was sent new, what was answered; the rest is cut, and
/// the entry says so.
pub const MAX_NOTED_TEXT_BYTES: usize = 16 << 10;

/// The messages a turn sends for the first time, as the record keeps them.
fn sent_text(new: &[Message]) -> Value {
    let v: Vec<Value> = new
        .iter()
        .map(|m| match m {
            Message::User(t) => json!({"user": t}),
            Message::Assistant { text, calls } => json!({"assistant": text, "calls": noted_calls(calls)}),
            Message::ToolResults(r) => json!({
                "results": r.iter().map(|t| json!({"id": t.id, "text": t.text, "isError": t.is_error})).collect::<Vec<_>>(),
            }),
        })
        .collect();
    noted(Value::Array(v).to_string())
}

/// A turn's tool calls as the record keeps them: name and arguments.
fn noted_calls(calls: &[ToolUse]) -> Value {
    calls
        .iter()
        .map(|c| json!({"name": c.name, "arguments": c.arguments}))
        .collect()
}

/// `text`, cut to [`MAX_NOTED_TEXT_BYTES`] with a mark.
fn noted(text: String) -> Value {
    let kept = cut(&text, MAX_NOTED_TEXT_BYTES);
    if kept.len() < text.len() {
        json!({"text": kept, "cutFrom": text.len()})
    } else {
        json!({"text": text})
    }
}

/// What one agent runs with.
pub struct Run {
    pub agent: Arc<Agent>,
    /// The models and each client's tokens.
    pub models: Arc<Models>,
    /// What answers each turn.
    pub brain: Brain,
    pub host: Arc<dyn NestedCalls>,
    /// The tools offered to its model (already narrowed).
    pub tools: Vec<ModelTool>,
    pub prompt: String,
    pub limits: Limits,
    pub deadline: Instant,
    /// The `subagent` call: parent of every call the agent makes.
    pub parent_id: String,
    /// The caller's: approver, client, caller, link.
    pub turn: TurnOptions,
}

/// What answers an agent's turns.
pub enum Brain {
    /// A model of `[models]`, over the host's egress.
    Model {
        model: Arc<Model>,
        transport: Box<dyn Transport>,
    },
    /// The calling client's own model, over MCP sampling (`[delegation]
    /// sampling = true`, `model: "client"`).
    Client {
        link: Arc<dyn ClientLink>,
        max_tokens: u32,
    },
}

impl Brain {
    pub fn name(&self) -> &str {
        match self {
            Brain::Model { model, .. } => &model.name,
            Brain::Client { .. } => CLIENT_MODEL,
        }
    }

    pub fn api(&self) -> &'static str {
        match self {
            Brain::Model { model, .. } => model.config().api.name(),
            Brain::Client { .. } => "mcp-sampling",
        }
    }

    /// One turn's answer, within `deadline`, stopped by `cancel`.
    pub async fn complete(
        &self,
        request: &Request<'_>,
        deadline: Instant,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<Completion, ModelError> {
        let (link, max_tokens) = match self {
            Brain::Model { model, transport } => {
                return model
                    .complete(&**transport, request, deadline, cancel)
                    .await;
            }
            Brain::Client { link, max_tokens } => (link, *max_tokens),
        };
        let started = Instant::now();
        let params = sampling::request(request, max_tokens);
        let prompt_digest = digest(params.to_string().as_bytes());
        let stopped = |why: &str| ModelError::Stopped {
            model: CLIENT_MODEL.into(),
            why: why.into(),
        };
        let answer = tokio::select! {
            a = link.sample(params) => a,
            _ = cancel.cancelled() => return Err(stopped("interrupted")),
            _ = tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)) => {
                return Err(stopped("the agent's time ran out waiting for the client's model"));
            }
        };
        let result = answer.map_err(ModelError::Client)?;
        let reply = sampling::read(&result).map_err(|a| match a {
            crate::models::Attempt::Fail { why, .. }
            | crate::models::Attempt::Retry { why, .. } => ModelError::Client(why),
        })?;
        Ok(Completion {
            reply,
            attempts: 1,
            prompt_digest,
            answer_digest: digest(result.to_string().as_bytes()),
            elapsed: started.elapsed(),
        })
    }
}

/// How an agent ended, and what it cost.
#[derive(Clone, Debug)]
pub struct Ended {
    pub state: State,
    pub answer: String,
    pub turns: u32,
    pub tool_calls: u32,
    pub usage: Usage,
    /// One entry per model request (model, tokens, digests, attempts, ms),
    /// at most [`MAX_NOTED_REQUESTS`].
    pub requests: Vec<Value>,
}

impl Run {
    pub async fn run(self) -> Ended {
        let agent = self.agent.clone();
        let mut messages = vec![Message::User(self.prompt.clone())];
        // What the record has of the conversation (`record_text`).
        let mut noted_upto = 0;
        let mut ended = Ended {
            state: State::Running,
            answer: String::new(),
            turns: 0,
            tool_calls: 0,
            usage: Usage::default(),
            requests: Vec::new(),
        };
        let l = &self.limits;
        let state = loop {
            if agent.cancel.is_cancelled() {
                break State::Interrupted;
            }
            if ended.turns >= l.max_turns {
                break State::Stopped(format!(
                    "it made {} model turns without answering ([delegation] max_turns)",
                    l.max_turns
                ));
            }
            if ended.usage.total() >= l.max_tokens {
                break State::Stopped(format!(
                    "it used {} tokens, its budget is {} ([delegation] max_tokens)",
                    ended.usage.total(),
                    l.max_tokens
                ));
            }
            if Instant::now() >= self.deadline {
                break State::Stopped(format!("its time ({} ms) ran out", l.timeout.as_millis()));
            }
            for text in agent.take_inbox() {
                messages.push(Message::User(text));
            }
            let asked = self
                .brain
                .complete(
                    &Request {
                        system: &l.system_prompt,
                        messages: &messages,
                        tools: &self.tools,
                    },
                    self.deadline,
                    &agent.cancel,
                )
                .await;
            let done = match asked {
                Ok(c) => c,
                Err(ModelError::Stopped { .. }) if agent.cancel.is_cancelled() => {
                    break State::Interrupted;
                }
                Err(ModelError::Stopped { why, .. }) => break State::Stopped(why),
                Err(e) => break State::Failed(e.to_string()),
            };
            ended.turns += 1;
            ended.usage.add(done.reply.usage);
            if ended.requests.len() < MAX_NOTED_REQUESTS {
                ended
                    .requests
                    .push(done.record(self.brain.name(), self.brain.api()));
                if l.record_text
                    && let Some(entry) = ended.requests.last_mut()
                {
                    entry["sent"] = sent_text(&messages[noted_upto..]);
                    entry["answered"] = noted(
                        json!({"text": done.reply.text, "calls": noted_calls(&done.reply.calls)})
                            .to_string(),
                    );
                }
            }
            noted_upto = messages.len();
            let spent = self.models.spend(&agent.owner, done.reply.usage.total());
            agent.update(|p| {
                p.turns = ended.turns;
                p.usage = ended.usage;
            });
            let reply = done.reply;
            ended.answer.clone_from(&reply.text);
            if reply.calls.is_empty() {
                break State::Answered;
            }
            if spent > l.max_session_tokens {
                break State::Stopped(format!(
                    "this client's sub-agents used {spent} tokens, more than {} ([delegation] max_session_tokens)",
                    l.max_session_tokens
                ));
            }
            let results = self.run_calls(ended.turns, &reply.calls).await;
            ended.tool_calls += reply.calls.len() as u32;
            agent.update(|p| p.tool_calls = ended.tool_calls);
            messages.push(Message::Assistant {
                text: reply.text,
                calls: reply.calls,
            });
            messages.push(Message::ToolResults(results));
        };
        ended.state = state;
        ended
    }

    /// One turn's tool calls, through the pipeline as one batch; a call to
    /// a tool not offered is answered without running.
    async fn run_calls(&self, turn: u32, calls: &[ToolUse]) -> Vec<ToolResult> {
        let mut results: Vec<Option<ToolResult>> = vec![None; calls.len()];
        let mut batch = Vec::new();
        let mut slots = Vec::new();
        for (i, c) in calls.iter().enumerate() {
            if !self.tools.iter().any(|t| t.name == c.name) {
                results[i] = Some(ToolResult {
                    id: c.id.clone(),
                    text: format!(
                        "NOT_OFFERED: `{}` is not one of this agent's tools ({})",
                        c.name,
                        self.tools
                            .iter()
                            .map(|t| t.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    is_error: true,
                });
                continue;
            }
            slots.push(i);
            batch.push(crate::call::ToolCall::new(
                format!("{}/{turn}.{}", self.parent_id, i + 1),
                c.name.clone(),
                c.arguments.clone(),
            ));
        }
        if !batch.is_empty() {
            // The batch ends with the agent: interrupted, or out of time.
            let cancel = self.agent.cancel.child_token();
            let timer = {
                let cancel = cancel.clone();
                let deadline = tokio::time::Instant::from_std(self.deadline);
                tokio::spawn(async move {
                    tokio::time::sleep_until(deadline).await;
                    cancel.cancel();
                })
            };
            let turn = TurnOptions {
                agent_scope: self.agent.scope.clone(),
                code_mode: false,
                parent_id: Some(self.parent_id.clone()),
                cancel,
                ..self.turn.clone()
            };
            let ran = self.host.run_batch(batch, &turn).await;
            timer.abort();
            match ran {
                Ok(records) => {
                    for (slot, r) in slots.into_iter().zip(records) {
                        let text = match &r.error {
                            Some(e) => format!("{}: {}", e.code.as_str(), e.message),
                            None => r.text(),
                        };
                        let kept = cut(&text, self.limits.max_result_bytes);
                        let text = if kept.len() < text.len() {
                            format!(
                                "{kept}\n[cut: the result was {} bytes, {} are kept ([delegation] max_result_kb)]",
                                text.len(),
                                kept.len()
                            )
                        } else {
                            text
                        };
                        results[slot] = Some(ToolResult {
                            id: calls[slot].id.clone(),
                            text,
                            is_error: r.is_error,
                        });
                    }
                }
                Err(e) => {
                    for slot in slots {
                        results[slot] = Some(ToolResult {
                            id: calls[slot].id.clone(),
                            text: format!("INTERNAL: the host could not run the call: {e}"),
                            is_error: true,
                        });
                    }
                }
            }
        }
        results
            .into_iter()
            .zip(calls)
            .map(|(r, c)| {
                r.unwrap_or_else(|| ToolResult {
                    id: c.id.clone(),
                    text: "INTERNAL: the call was not run".into(),
                    is_error: true,
                })
            })
            .collect()
    }
}
