//! Delegation (seed §3, the agent family): `subagent`, `subagent_fork`,
//! `list_agents`, `send_message`, `interrupt_agent`, `workflow` and
//! `ralph` — an agent hands work to sub-agents whose every tool call
//! passes the same pipeline, under a narrower scope.
//!
//! Why the host runs the loop: a sub-agent's tool calls must be governed
//! like the caller's own, and only the host can make that so by
//! construction. Each call carries the sub-agent's scope — its parent's
//! with its id appended (`agents/a-1`, `agents/a-1/a-2`) — so:
//!
//! * the registry's restrictions of every ancestor scope hold for it (a
//!   scope sees its parent's view, filtered again: `[scopes.agents] deny
//!   = ["bash"]` takes `bash` from every sub-agent of a top-level agent),
//!   and a `subagent` call's `tools` list only narrows what its scope
//!   sees — a name outside it is refused, never added;
//! * every policy of the global layer runs for it, and reads the agent
//!   (its scope: id and depth; its `parent-id`: the `subagent` call);
//! * `subagent` is offered to a sub-agent only while its own children
//!   would be no deeper than `[delegation] max_depth`, and refused past
//!   it whatever the model asks;
//! * the loop is bounded by turns, tokens (per agent and per client) and
//!   wall time, and ends — with its processes — on `interrupt_agent` or
//!   the caller's cancellation ([`run`]).
//!
//! [`spawn`] starts an agent (what every tool that starts one shares,
//! `subagent_fork`'s copy of the caller's goal and todo list included);
//! [`workflow`] runs a graph of them, [`ralph`] a loop of them until the
//! session's goal is complete.
//!
//! A model is asked through [`crate::models`], over a
//! [`crate::models::Connect`] the host gives (its egress,
//! `host/start/delegation.rs`); the tokens a client spends are counted in
//! [`crate::models::Models`], one count with the `model` seam's requests.
//! What a client sees of agents is its own ([`agents`]): another client's
//! agent is not found, whatever its id.
//!
//! The module depends on the pipeline's types and on
//! [`crate::codemode::NestedCalls`], which the host implements: it never
//! names `Toolgate` (no import cycle).

// A body's error is `BodyError`, as for every tool: its helpers return it
// unboxed, as the pipeline's do.
#![allow(clippy::result_large_err)]

pub mod agents;
pub mod config;
pub mod ralph;
pub mod run;
pub mod spawn;
pub mod workflow;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use tokio_util::sync::CancellationToken;

use crate::call::{Annotations, CallInfo, Features, ToolMeta};
use crate::codemode::HostSlot;
use crate::content::Content;
use crate::history::Viewer;
use crate::models::Models;
use crate::store::KvBackend;
use crate::tool::{BodyContext, BodyError, ToolBody, ToolDefinition, ToolFailure};
use agents::{Agent, Agents};
pub use config::{DelegationConfig, Limits};
use spawn::{Spec, note, outcome};

/// The tools of the family.
pub const SUBAGENT: &str = "subagent";
pub const LIST_AGENTS: &str = "list_agents";
pub const SEND_MESSAGE: &str = "send_message";
pub const INTERRUPT_AGENT: &str = "interrupt_agent";
pub const SUBAGENT_FORK: &str = "subagent_fork";
pub const WORKFLOW: &str = "workflow";
pub const RALPH: &str = "ralph";
pub const TOOLS: [&str; 7] = [
    SUBAGENT,
    SUBAGENT_FORK,
    LIST_AGENTS,
    SEND_MESSAGE,
    INTERRUPT_AGENT,
    WORKFLOW,
    RALPH,
];

/// A `subagent` call's `description`, at most (200 bytes).
pub const MAX_DESCRIPTION_BYTES: usize = 200;
/// How long `interrupt_agent` waits for the agent to end (5 s).
pub const INTERRUPT_WAIT: Duration = Duration::from_secs(5);

/// Where a background agent's end is recorded (the host: an `agent`
/// record in the audit record).
pub type RecordAgent = Arc<dyn Fn(Value) + Send + Sync>;

/// The family's shared state.
pub struct Delegation {
    limits: Limits,
    /// The models, how they are reached and each client's tokens (shared
    /// with the `model` seam).
    models: Arc<Models>,
    default_model: String,
    host: HostSlot,
    agents: Arc<Agents>,
    /// Where a background agent's model requests go when it ends (its
    /// call has ended: its record cannot hold them).
    record: OnceLock<RecordAgent>,
    /// `[delegation] sampling`: `model: "client"` is the client's model.
    sampling: bool,
    /// The state store (`subagent_fork`'s copy, `ralph`'s goal).
    kv: Option<Arc<dyn KvBackend>>,
    /// Cancelled when the family is dropped (the host shut down): no
    /// background agent outlives it.
    shutdown: CancellationToken,
}

impl Drop for Delegation {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Delegation {
    /// `models` is not empty unless `[delegation] sampling` offers the
    /// client's model.
    pub fn new(
        config: &DelegationConfig,
        models: Arc<Models>,
        host: HostSlot,
        kv: Option<Arc<dyn KvBackend>>,
    ) -> Delegation {
        let default_model = config
            .model
            .clone()
            .or_else(|| models.names().next().cloned())
            .unwrap_or_else(|| config::CLIENT_MODEL.to_string());
        Delegation {
            limits: config.limits(),
            models,
            default_model,
            record: OnceLock::new(),
            host,
            agents: Arc::new(Agents::default()),
            sampling: config.sampling == Some(true),
            kv,
            shutdown: CancellationToken::new(),
        }
    }

    /// The names `model` may take.
    fn model_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.models.names().cloned().collect();
        if self.sampling {
            names.push(config::CLIENT_MODEL.to_string());
        }
        names
    }

    /// Interrupts every background agent and waits, up to `wait`, until
    /// each has ended (and recorded its end).
    pub async fn shutdown(&self, wait: Duration) {
        self.shutdown.cancel();
        let running = self.agents.running();
        let _ = tokio::time::timeout(
            wait,
            futures::future::join_all(running.iter().map(|a| a.ended())),
        )
        .await;
    }

    /// Where background agents' ends are recorded (set once the record
    /// exists).
    pub fn set_record(&self, record: RecordAgent) {
        let _ = self.record.set(record);
    }

    pub fn agents(&self) -> &Arc<Agents> {
        &self.agents
    }

    /// The family's tools.
    pub fn tools(self: &Arc<Self>) -> Vec<(ToolDefinition, Arc<dyn ToolBody>)> {
        Kind::ALL
            .into_iter()
            .map(|kind| {
                (
                    kind.definition(&self.limits, &self.model_names()),
                    Arc::new(AgentTool {
                        kind,
                        service: self.clone(),
                    }) as Arc<dyn ToolBody>,
                )
            })
            .collect()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Subagent,
    SubagentFork,
    ListAgents,
    SendMessage,
    InterruptAgent,
    Workflow,
    Ralph,
}

impl Kind {
    const ALL: [Kind; 7] = [
        Kind::Subagent,
        Kind::SubagentFork,
        Kind::ListAgents,
        Kind::SendMessage,
        Kind::InterruptAgent,
        Kind::Workflow,
        Kind::Ralph,
    ];
}

fn meta(timeout_ms: Option<u32>, annotations: Annotations, effects: bool) -> ToolMeta {
    ToolMeta {
        provider: "delegation".into(),
        timeout_ms,
        annotations,
        features: Features::empty(),
        effects,
    }
}

/// The metadata of a tool that runs agents: its deadline is an agent's
/// time (plus the grace).
fn agent_meta(limits: &Limits) -> ToolMeta {
    meta(
        Some(u32::try_from(limits.timeout.as_millis()).unwrap_or(u32::MAX)),
        Annotations::OPEN_WORLD,
        true,
    )
}

/// `subagent`'s parameters; a fork's take a `context` too.
fn subagent_parameters(names: &[String], fork: bool) -> Value {
    let mut p = json!({
        "type": "object",
        "properties": {
            "description": {"type": "string", "maxLength": MAX_DESCRIPTION_BYTES, "description": "A few words on the task (shown by list_agents)."},
            "prompt": {"type": "string", "description": "The task, complete."},
            "tools": {"type": "array", "items": {"type": "string"}, "description": "Only these tools (names); default: every tool you may use."},
            "model": {"type": "string", "enum": names, "description": "The model it runs on (default: the operator's)."},
            "run_in_background": {"type": "boolean", "description": "Return its id at once instead of waiting for its answer."}
        },
        "required": ["description", "prompt"],
        "additionalProperties": false
    });
    if fork {
        p["properties"]["context"] = json!({"type": "string", "description": "What it should know of your work so far (it sees nothing else of this conversation)."});
    }
    p
}

impl Kind {
    fn definition(self, limits: &Limits, names: &[String]) -> ToolDefinition {
        let (name, description, parameters, meta) = match self {
            Kind::Subagent => (
                SUBAGENT,
                "Hand a task to a sub-agent: a model that works with tools (each call governed like yours) until it answers. Foreground: returns its final answer. `run_in_background`: returns its id at once (see list_agents, send_message, interrupt_agent). The prompt must hold everything it needs: it sees nothing of this conversation.".to_string(),
                subagent_parameters(names, false),
                // Its deadline is the agent's time (plus the grace).
                agent_meta(limits),
            ),
            Kind::SubagentFork => (
                SUBAGENT_FORK,
                "Like subagent, but the sub-agent starts from your state: a copy of your goal and todo list, and the context you pass. For exploring an alternative without disturbing your own state.".to_string(),
                subagent_parameters(names, true),
                agent_meta(limits),
            ),
            Kind::Workflow => (
                WORKFLOW,
                format!("Run a graph of sub-agent steps: each step is a prompt (with its tools) that may read the answers of earlier steps (`inputs`). Independent steps run at the same time; a step runs once its inputs answered; a failed step fails the steps that read it. At most {} steps. Returns each step's answer.", limits.max_steps),
                json!({
                    "type": "object",
                    "properties": {
                        "steps": {
                            "type": "array",
                            "minItems": 1,
                            "maxItems": limits.max_steps,
                            "items": {
                                "type": "object",
                                "properties": {
                                    "id": {"type": "string", "description": "Its name, which `inputs` of other steps use (letters, digits, - and _)."},
                                    "prompt": {"type": "string"},
                                    "description": {"type": "string"},
                                    "tools": {"type": "array", "items": {"type": "string"}},
                                    "inputs": {"type": "array", "items": {"type": "string"}, "description": "Steps whose answers this one reads (appended to its prompt)."},
                                    "model": {"type": "string", "enum": names}
                                },
                                "required": ["id", "prompt"],
                                "additionalProperties": false
                            }
                        }
                    },
                    "required": ["steps"],
                    "additionalProperties": false
                }),
                agent_meta(limits),
            ),
            Kind::Ralph => (
                RALPH,
                format!("Run the same prompt in fresh sub-agents, one after another, until the session's goal is complete (each one marks it with update_goal), or it is blocked, or {} rounds have run. Sets the goal from `goal` when none is open.", limits.max_rounds),
                json!({
                    "type": "object",
                    "properties": {
                        "prompt": {"type": "string", "description": "What every round is told to do."},
                        "goal": {"type": "string", "description": "The goal, when none is set yet."},
                        "max_rounds": {"type": "integer", "minimum": 1, "maximum": limits.max_rounds},
                        "model": {"type": "string", "enum": names}
                    },
                    "required": ["prompt"],
                    "additionalProperties": false
                }),
                agent_meta(limits),
            ),
            Kind::ListAgents => (

                LIST_AGENTS,
                "List the sub-agents you started: each one's id, state, turns, tool calls and tokens, and its answer once it has one.".to_string(),
                json!({"type": "object", "properties": {}, "additionalProperties": false}),
                meta(None, Annotations::READ_ONLY, false),
            ),
            Kind::SendMessage => (
                SEND_MESSAGE,
                "Send a message to a running background sub-agent: it reads it before its next model turn.".to_string(),
                json!({
                    "type": "object",
                    "properties": {
                        "agent_id": {"type": "string"},
                        "text": {"type": "string"}
                    },
                    "required": ["agent_id", "text"],
                    "additionalProperties": false
                }),
                meta(None, Annotations::empty(), false),
            ),
            Kind::InterruptAgent => (
                INTERRUPT_AGENT,
                "Stop a running sub-agent: its running tool calls are cancelled and their processes end.".to_string(),
                json!({
                    "type": "object",
                    "properties": {"agent_id": {"type": "string"}},
                    "required": ["agent_id"],
                    "additionalProperties": false
                }),
                meta(None, Annotations::DESTRUCTIVE, true),
            ),
        };
        ToolDefinition {
            name: name.to_string(),
            description,
            parameters,
            output_schema: None,
            meta,
        }
    }
}

/// One tool of the family.
struct AgentTool {
    kind: Kind,
    service: Arc<Delegation>,
}

fn failure(code: &str, message: impl Into<String>) -> BodyError {
    failure_with(code, message, None)
}

fn failure_with(code: &str, message: impl Into<String>, details: Option<Value>) -> BodyError {
    BodyError::Failure(ToolFailure {
        name: "DelegationError".into(),
        code: code.into(),
        message: message.into(),
        details,
    })
}

fn text_arg<'a>(call: &'a CallInfo, key: &str) -> Result<&'a str, BodyError> {
    call.arguments
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| failure("INVALID_ARGS", format!("`{key}` must be a string")))
}

/// Who the call's agents belong to.
fn owner(call: &CallInfo, ctx: &BodyContext) -> Result<Viewer, BodyError> {
    let client = ctx.extensions.get::<Arc<crate::call::Client>>().cloned();
    Viewer::of(call.caller.as_deref(), client.as_deref())
        .map_err(|e| failure("NO_IDENTITY", e.to_string()))
}

#[async_trait]
impl ToolBody for AgentTool {
    async fn is_concurrency_safe(&self, call: &Arc<CallInfo>) -> Option<bool> {
        Some(match self.kind {
            // A foreground agent's calls may write: it is a barrier.
            Kind::Subagent | Kind::SubagentFork => {
                call.arguments.get("run_in_background") == Some(&Value::Bool(true))
            }
            Kind::Workflow | Kind::Ralph => false,
            _ => true,
        })
    }

    async fn execute(&self, call: &Arc<CallInfo>, ctx: BodyContext) -> Result<Value, BodyError> {
        let owner = owner(call, &ctx)?;
        let agents = &self.service.agents;
        match self.kind {
            Kind::Subagent | Kind::SubagentFork => self.subagent(call, ctx, owner).await,
            Kind::Workflow => self.service.workflow(call, &ctx, &owner).await,
            Kind::Ralph => self.service.ralph(call, &ctx, &owner).await,
            Kind::ListAgents => Ok(json!({
                "agents": agents.of(&owner).iter().map(|a| a.summary()).collect::<Vec<_>>(),
                "tokensUsed": self.service.models.spent(&owner),
                "maxSessionTokens": self.service.limits.max_session_tokens,
            })),
            Kind::SendMessage => {
                let agent = find(agents, &owner, text_arg(call, "agent_id")?)?;
                let text = text_arg(call, "text")?;
                if text.len() > config::MAX_PROMPT_BYTES {
                    return Err(failure(
                        "INVALID_ARGS",
                        format!(
                            "`text` is {} bytes, at most {}",
                            text.len(),
                            config::MAX_PROMPT_BYTES
                        ),
                    ));
                }
                if !agent.is_running() {
                    return Err(failure(
                        "NOT_RUNNING",
                        format!(
                            "agent {} has ended ({}): nothing reads messages now",
                            agent.id,
                            agent.progress().state.name()
                        ),
                    ));
                }
                let waiting = agent
                    .send(text.to_string())
                    .map_err(|e| failure("INBOX_FULL", e))?;
                Ok(json!({"agentId": agent.id, "waiting": waiting}))
            }
            Kind::InterruptAgent => {
                let agent = find(agents, &owner, text_arg(call, "agent_id")?)?;
                let was = agent.progress().state.name();
                agent.cancel.cancel();
                let ended = tokio::time::timeout(INTERRUPT_WAIT, agent.ended())
                    .await
                    .is_ok();
                let mut v = agent.summary();
                v["wasState"] = json!(was);
                v["ended"] = json!(ended);
                Ok(v)
            }
        }
    }

    async fn render(
        &self,
        _call: &Arc<CallInfo>,
        value: &Value,
    ) -> Result<Vec<Content>, BodyError> {
        Ok(vec![Content::text(match self.kind {
            Kind::Subagent | Kind::SubagentFork if value.get("answer").is_some() => format!(
                "{}\n\n[sub-agent {}: {} model turns, {} tool calls, {} tokens]",
                value["answer"].as_str().unwrap_or(""),
                value["agentId"].as_str().unwrap_or(""),
                value["turns"],
                value["toolCalls"],
                value["usage"]["inputTokens"].as_u64().unwrap_or(0)
                    + value["usage"]["outputTokens"].as_u64().unwrap_or(0),
            ),
            _ => serde_json::to_string_pretty(value).unwrap_or_default(),
        })])
    }
}

fn find(agents: &Agents, owner: &Viewer, id: &str) -> Result<Arc<Agent>, BodyError> {
    agents.get(owner, id).ok_or_else(|| {
        failure(
            "NOT_FOUND",
            format!("no agent {id:?} of yours (list_agents shows them; finished ones are forgotten in time)"),
        )
    })
}

impl AgentTool {
    /// `subagent` and `subagent_fork`.
    async fn subagent(
        &self,
        call: &Arc<CallInfo>,
        ctx: BodyContext,
        owner: Viewer,
    ) -> Result<Value, BodyError> {
        let s = &self.service;
        let fork = self.kind == Kind::SubagentFork;
        let mut prompt = text_arg(call, "prompt")?.to_string();
        if fork && let Some(c) = call.arguments.get("context").and_then(Value::as_str) {
            prompt =
                format!("[Context from the agent that forked you]\n{c}\n\n[Your task]\n{prompt}");
        }
        let background = call.arguments.get("run_in_background") == Some(&Value::Bool(true));
        let spec = Spec {
            description: text_arg(call, "description")?,
            prompt,
            tools: call.arguments.get("tools"),
            model: call.arguments.get("model").and_then(Value::as_str),
            background,
            fork,
        };
        let (agent, run) = s.spawn(call, &ctx, &owner, spec).await?;
        if background {
            s.run_background(&agent, run);
            return Ok(json!({
                "agentId": agent.id,
                "state": "running",
                "scope": agent.scope,
                "depth": agent.depth,
            }));
        }
        let ended = s.run_foreground(&agent, run).await;
        note(call, &[(&agent, &ended)]);
        outcome(&ctx, &agent, &ended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::ModelTool;
    use spawn::offered;

    fn tool(name: &str) -> ModelTool {
        ModelTool {
            name: name.into(),
            description: String::new(),
            parameters: json!({}),
        }
    }

    #[test]
    fn tools_narrow_never_widen() {
        let visible = || vec![tool("read"), tool("edit"), tool(SUBAGENT)];
        let all = offered(visible(), None, true).unwrap();
        assert_eq!(all.len(), 3);
        let leaf = offered(visible(), None, false).unwrap();
        assert!(leaf.iter().all(|t| t.name != SUBAGENT));
        let one = offered(visible(), Some(&json!(["read"])), true).unwrap();
        assert_eq!(one.len(), 1);
        // A tool the scope does not see is refused, not added.
        let e = offered(visible(), Some(&json!(["read", "bash"])), true).unwrap_err();
        assert!(e.to_string().contains("bash"), "{e}");
        // Nor the family at the deepest level.
        assert!(offered(visible(), Some(&json!([SUBAGENT])), false).is_err());
    }
}
