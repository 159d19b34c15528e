//! Starting a sub-agent: what every tool of the family that starts one
//! shares — its model, its depth, its scope and tools, its budgets, what a
//! fork copies — and how an agent's end becomes a call's result.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};

use super::agents::{Agent, NewAgent, State};
use super::{Delegation, TOOLS, failure, failure_with, run};
use crate::call::{CallInfo, Interrupt};
use crate::history::Viewer;
use crate::tool::{BodyContext, BodyError, ModelTool};
use crate::turn::TurnOptions;

/// What the caller's state a fork starts from: `(plugin, key)` of the
/// `kv` store, copied from the caller's scope into the child's (the goal
/// of the built-in `goals` plugin, the list of `todo`).
pub const FORKED_STATE: [(&str, &str); 2] =
    [(crate::goals::PLUGIN, crate::goals::KEY), ("todo", "todos")];

/// The model a sub-agent runs on.
enum Which {
    Model(Arc<crate::models::Model>),
    Client(Arc<dyn crate::call::ClientLink>),
}

/// One sub-agent to start.
pub struct Spec<'a> {
    pub description: &'a str,
    pub prompt: String,
    /// Tool names it is limited to (`None`: what its scope sees).
    pub tools: Option<&'a Value>,
    pub model: Option<&'a str>,
    pub background: bool,
    /// Copy the caller's [`FORKED_STATE`] into its scope.
    pub fork: bool,
}

impl Delegation {
    /// Registers a sub-agent of `call` and makes its loop (not started).
    pub(super) async fn spawn(
        &self,
        call: &Arc<CallInfo>,
        ctx: &BodyContext,
        owner: &Viewer,
        spec: Spec<'_>,
    ) -> Result<(Arc<Agent>, run::Run), BodyError> {
        let l = &self.limits;
        if spec.prompt.trim().is_empty() || spec.prompt.len() > super::config::MAX_PROMPT_BYTES {
            return Err(failure(
                "INVALID_ARGS",
                format!(
                    "a sub-agent's prompt must hold the task: 1 to {} bytes",
                    super::config::MAX_PROMPT_BYTES
                ),
            ));
        }
        let model_name = spec.model.unwrap_or(&self.default_model);
        let model = if self.sampling && model_name == super::config::CLIENT_MODEL {
            // The client's own model: only a client that can be asked.
            let link = call.link.clone().ok_or_else(|| {
                failure(
                    "NO_CLIENT_MODEL",
                    "`model: \"client\"` asks the calling MCP client's model, and this call came from no MCP client",
                )
            })?;
            Which::Client(link)
        } else {
            Which::Model(self.models.get(model_name).cloned().ok_or_else(|| {
                failure(
                    "INVALID_ARGS",
                    format!(
                        "no model {model_name:?} (there: {})",
                        self.model_names().join(", ")
                    ),
                )
            })?)
        };
        // The caller's own depth: a sub-agent's calls come from its scope.
        let parent_depth = self
            .agents
            .by_scope(&call.agent_scope)
            .map_or(0, |a| a.depth);
        if parent_depth + 1 > l.max_depth {
            return Err(failure(
                "DEPTH_LIMIT",
                format!(
                    "a sub-agent at depth {parent_depth} may not start another: [delegation] max_depth is {}",
                    l.max_depth
                ),
            ));
        }
        if spec.background && self.agents.running_in_background(owner) >= l.max_background {
            return Err(failure(
                "AGENT_LIMIT",
                format!(
                    "{} background agents of yours are running ([delegation] max_background): wait for one, or interrupt_agent",
                    l.max_background
                ),
            ));
        }
        let spent = self.models.spent(owner);
        if spent >= l.max_session_tokens {
            return Err(failure(
                "AGENT_BUDGET",
                format!(
                    "your sub-agents have used {spent} tokens, the budget is {} ([delegation] max_session_tokens)",
                    l.max_session_tokens
                ),
            ));
        }
        let host =
            self.host.get().cloned().ok_or_else(|| {
                BodyError::Internal("the host is not ready for sub-agents".into())
            })?;
        let connect = self
            .models
            .connect()
            .cloned()
            .ok_or_else(|| BodyError::Internal("the models' egress is not ready".into()))?;
        let cancel = if spec.background {
            self.shutdown.child_token()
        } else {
            ctx.signal.token().child_token()
        };
        let agent = self.agents.start(NewAgent {
            owner: owner.clone(),
            description: crate::models::cut(spec.description, super::MAX_DESCRIPTION_BYTES)
                .to_string(),
            parent_scope: call.agent_scope.clone(),
            depth: parent_depth + 1,
            model: model_name.to_string(),
            background: spec.background,
            cancel,
        });
        let refuse = |agent: &Agent, e: BodyError| {
            agent.finish(State::Failed(e.to_string()), None);
            self.agents.retire(agent);
            e
        };
        let tools = match offered(
            host.model_tools(&agent.scope),
            spec.tools,
            agent.depth < l.max_depth,
        ) {
            Ok(t) => t,
            Err(e) => return Err(refuse(&agent, e)),
        };
        if spec.fork
            && let Err(e) = self.copy_state(&call.agent_scope, &agent.scope).await
        {
            return Err(refuse(&agent, e));
        }
        let mut deadline = Instant::now() + l.timeout;
        if !spec.background
            && let Some(d) = ctx.signal.deadline()
        {
            deadline = deadline.min(d);
        }
        let run = run::Run {
            agent: agent.clone(),
            models: self.models.clone(),
            brain: match model {
                Which::Model(model) => run::Brain::Model {
                    model,
                    transport: connect.transport(&call.call_id, &agent.scope),
                },
                Which::Client(link) => run::Brain::Client {
                    link,
                    max_tokens: crate::models::config::MAX_TOKENS,
                },
            },
            host,
            tools,
            prompt: spec.prompt,
            limits: l.clone(),
            deadline,
            parent_id: call.call_id.clone(),
            turn: TurnOptions {
                approver: ctx
                    .approver
                    .as_ref()
                    .map(|a| a.nested(&ctx.signal).unwrap_or_else(|| a.clone())),
                client: ctx.extensions.get::<Arc<crate::call::Client>>().cloned(),
                caller: call.caller.clone(),
                link: call.link.clone(),
                ..TurnOptions::default()
            },
        };
        Ok((agent, run))
    }

    /// Copies [`FORKED_STATE`] from scope `from` to scope `to`.
    async fn copy_state(&self, from: &str, to: &str) -> Result<(), BodyError> {
        let Some(kv) = &self.kv else {
            return Ok(());
        };
        for (plugin, key) in FORKED_STATE {
            let value = kv.get(plugin, from, key).await.map_err(|e| {
                failure(
                    "STATE_ERROR",
                    format!("the caller's {plugin} state could not be read: {e}"),
                )
            })?;
            if let Some(v) = value {
                kv.set(plugin, to, key, &v).await.map_err(|e| {
                    failure(
                        "STATE_ERROR",
                        format!("the fork's {plugin} state could not be written: {e}"),
                    )
                })?;
            }
        }
        Ok(())
    }

    /// Runs a foreground agent to its end and records it.
    pub(super) async fn run_foreground(&self, agent: &Arc<Agent>, run: run::Run) -> run::Ended {
        let ended = run.run().await;
        finish(agent, &ended);
        self.agents.retire(agent);
        ended
    }

    /// Starts a background agent; it records its own end: in the audit
    /// record, an `agent` record with its model requests (the call that
    /// started it has ended, and its record with it).
    pub(super) fn run_background(&self, agent: &Arc<Agent>, run: run::Run) {
        let agents = self.agents.clone();
        let agent = agent.clone();
        let record = self.record.get().cloned();
        let parent = run.parent_id.clone();
        tokio::spawn(async move {
            let ended = run.run().await;
            finish(&agent, &ended);
            agents.retire(&agent);
            if let Some(record) = record {
                let mut v = summary(&agent, &ended);
                if let Some(o) = v.as_object_mut() {
                    // The answer's text is not kept: its digest is.
                    o.remove("answer");
                    o.insert("agent".into(), json!(agent.id));
                    o.remove("agentId");
                    o.insert("scope".into(), json!(agent.scope));
                    o.insert("parent".into(), json!(parent));
                    o.insert("requests".into(), json!(ended.requests));
                }
                record(v);
            }
        });
    }
}

/// Records how `ended` ended on its agent.
pub(super) fn finish(agent: &Agent, ended: &run::Ended) {
    agent.update(|p| {
        p.turns = ended.turns;
        p.tool_calls = ended.tool_calls;
        p.usage = ended.usage;
    });
    let answer = (!ended.answer.is_empty()).then(|| ended.answer.clone());
    agent.finish(ended.state.clone(), answer);
}

/// What the record keeps of the model requests of `agents` (one note per
/// call: a call keeps at most 16).
pub(super) fn note(call: &CallInfo, agents: &[(&Agent, &run::Ended)]) {
    call.notes.push(json!({
        "kind": "model-requests",
        "agents": agents.iter().map(|(a, e)| json!({
            "agent": a.id,
            "scope": a.scope,
            "turns": e.turns,
            "usage": e.usage,
            "requests": e.requests,
        })).collect::<Vec<_>>(),
    }));
}

/// An agent's end as a summary (every tool of the family that waits for
/// one shows this).
pub(super) fn summary(agent: &Agent, ended: &run::Ended) -> Value {
    let mut v = json!({
        "agentId": agent.id,
        "state": ended.state.name(),
        "turns": ended.turns,
        "toolCalls": ended.tool_calls,
        "usage": ended.usage,
    });
    match &ended.state {
        State::Answered => v["answer"] = json!(ended.answer),
        State::Stopped(why) | State::Failed(why) => v["reason"] = json!(why),
        _ => {}
    }
    v
}

/// A foreground agent's end as the call's result: its answer, or why not.
pub(super) fn outcome(
    ctx: &BodyContext,
    agent: &Agent,
    ended: &run::Ended,
) -> Result<Value, BodyError> {
    let summary = summary(agent, ended);
    match &ended.state {
        State::Answered => Ok(summary),
        State::Interrupted => Err(BodyError::Interrupted(
            if ctx.signal.token().is_cancelled() {
                Interrupt::Cancelled
            } else {
                Interrupt::DeadlineExceeded
            },
        )),
        State::Stopped(why) => Err(failure_with(
            "AGENT_BUDGET",
            format!("sub-agent {} stopped before answering: {why}", agent.id),
            Some(summary),
        )),
        State::Failed(why) => Err(failure_with(
            "MODEL_ERROR",
            format!("sub-agent {} failed: {why}", agent.id),
            Some(summary),
        )),
        State::Running => Err(BodyError::Internal("the agent ended running".into())),
    }
}

/// The tools offered to a sub-agent: what its scope sees, narrowed to
/// `asked` (names), without the family itself when it may not delegate.
pub(super) fn offered(
    visible: Vec<ModelTool>,
    asked: Option<&Value>,
    may_delegate: bool,
) -> Result<Vec<ModelTool>, BodyError> {
    let mut tools: Vec<ModelTool> = visible
        .into_iter()
        // A nested call cannot run a program.
        .filter(|t| t.name != crate::codemode::RUN_CODE)
        .filter(|t| may_delegate || !TOOLS.contains(&t.name.as_str()))
        .collect();
    let Some(asked) = asked else {
        return Ok(tools);
    };
    let names: Vec<&str> = asked
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let missing: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| !tools.iter().any(|t| t.name == *n))
        .collect();
    if !missing.is_empty() {
        return Err(failure(
            "INVALID_ARGS",
            format!(
                "`tools` names what this sub-agent may not use: {} (it may: {})",
                missing.join(", "),
                tools
                    .iter()
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    tools.retain(|t| names.contains(&t.name.as_str()));
    Ok(tools)
}
