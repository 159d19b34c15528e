//! `[delegation]` in the configuration: the budgets of sub-agents.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use toolgate_schema::derive::Schema;

/// How deep sub-agents nest unless `max_depth` says otherwise: an agent
/// may start sub-agents, and they may start their own; theirs may not.
pub const MAX_DEPTH: u32 = 2;
/// Model turns of one sub-agent (20).
pub const MAX_TURNS: u32 = 20;
/// Tokens (input and output, every turn) of one sub-agent (200,000).
pub const MAX_TOKENS: u64 = 200_000;
/// Tokens of every sub-agent one client started, together (2,000,000).
pub const MAX_SESSION_TOKENS: u64 = 2_000_000;
/// Wall time of one sub-agent (600 s).
pub const TIMEOUT_MS: u64 = 600_000;
/// Background agents of one client running at once (8).
pub const MAX_BACKGROUND: usize = 8;
/// A tool result handed back to the model, in KiB (64); the rest is cut
/// and the model told so.
pub const MAX_RESULT_KB: usize = 64;
/// Steps of one `workflow` (16).
pub const MAX_STEPS: usize = 16;
/// Steps of one `workflow` running at once (4).
pub const MAX_PARALLEL: usize = 4;
/// Rounds of one `ralph` (10).
pub const MAX_ROUNDS: u32 = 10;
/// A prompt, or a message sent to a running agent (64 KiB).
pub const MAX_PROMPT_BYTES: usize = 64 << 10;
/// Messages waiting for an agent's next turn (16).
pub const MAX_INBOX: usize = 16;
/// Finished agents `list_agents` still shows, host-wide (64): older ones
/// are forgotten.
pub const KEEP_FINISHED: usize = 64;

/// `[delegation]`: the sub-agent tools (`subagent`, `subagent_fork`,
/// `list_agents`, `send_message`, `interrupt_agent`, `workflow`,
/// `ralph`), offered when `[models]` names a model.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct DelegationConfig {
    /// `false`: no sub-agent tools even with `[models]` (default true).
    pub enabled: Option<bool>,
    /// The model a `subagent` call runs on unless it names one (a name
    /// of `[models]`); required when there are several.
    pub model: Option<String>,
    /// How deep sub-agents nest (default 2): `subagent` is offered to an
    /// agent only when its children would be no deeper.
    pub max_depth: Option<u32>,
    /// Model turns of one sub-agent (default 20).
    pub max_turns: Option<u32>,
    /// Tokens of one sub-agent, every turn's input and output (default
    /// 200000).
    pub max_tokens: Option<u64>,
    /// Tokens of all the sub-agents one client started (a validated caller,
    /// an MCP session, or the local user), together (default 2000000).
    pub max_session_tokens: Option<u64>,
    /// Wall time of one sub-agent in ms (default 600000).
    pub timeout_ms: Option<u64>,
    /// Background agents one client may have running at once (default 8).
    pub max_background: Option<usize>,
    /// A tool result handed back to the model, in KiB (default 64).
    pub max_result_kb: Option<usize>,
    /// Steps of one `workflow` (default 16).
    pub max_steps: Option<usize>,
    /// Steps of one `workflow` running at once (default 4).
    pub max_parallel: Option<usize>,
    /// Rounds of one `ralph` (default 10).
    pub max_rounds: Option<u32>,
    /// `true`: the record keeps, per model request, the text sent for the
    /// first time (the prompt, then each turn's tool results and
    /// messages) and the model's answer, each cut at 16 KiB. Default
    /// false: digests only.
    pub record_text: Option<bool>,
    /// `true`: `model: "client"` runs a sub-agent on the calling client's
    /// own model, each turn a `sampling/createMessage` request with the
    /// tools (MCP 2025-11-25; only a client that declared `sampling` with
    /// `tools`). Default false: sampling is deprecated in 2026-07-28. With
    /// it and no `[models]`, the family is offered with that model alone.
    pub sampling: Option<bool>,
    /// What a sub-agent is told before its prompt (default: a short text
    /// saying it is a sub-agent whose final message is its answer).
    pub system_prompt: Option<String>,
}

/// The budgets in force.
#[derive(Clone, Debug)]
pub struct Limits {
    pub max_depth: u32,
    pub max_turns: u32,
    pub max_tokens: u64,
    pub max_session_tokens: u64,
    pub timeout: Duration,
    pub max_background: usize,
    pub max_result_bytes: usize,
    pub max_steps: usize,
    pub max_parallel: usize,
    pub max_rounds: u32,
    pub record_text: bool,
    pub system_prompt: String,
}

/// The name `model: "client"` gives the calling client's model
/// (`sampling = true`).
pub const CLIENT_MODEL: &str = "client";

/// What a sub-agent is told unless `system_prompt` says otherwise.
pub const SYSTEM_PROMPT: &str = "You are a sub-agent: another agent gave you the task below. Use the tools to do it, then answer with a final message that holds everything the other agent needs — it sees nothing else of your work. Be concise.";

impl DelegationConfig {
    pub fn limits(&self) -> Limits {
        Limits {
            max_depth: self.max_depth.unwrap_or(MAX_DEPTH),
            max_turns: self.max_turns.unwrap_or(MAX_TURNS),
            max_tokens: self.max_tokens.unwrap_or(MAX_TOKENS),
            max_session_tokens: self.max_session_tokens.unwrap_or(MAX_SESSION_TOKENS),
            timeout: Duration::from_millis(self.timeout_ms.unwrap_or(TIMEOUT_MS)),
            max_background: self.max_background.unwrap_or(MAX_BACKGROUND),
            max_result_bytes: self.max_result_kb.unwrap_or(MAX_RESULT_KB) << 10,
            max_steps: self.max_steps.unwrap_or(MAX_STEPS),
            max_parallel: self.max_parallel.unwrap_or(MAX_PARALLEL),
            max_rounds: self.max_rounds.unwrap_or(MAX_ROUNDS),
            record_text: self.record_text == Some(true),
            system_prompt: self
                .system_prompt
                .clone()
                .unwrap_or_else(|| SYSTEM_PROMPT.to_string()),
        }
    }

    /// The problems of `[delegation]`, knowing the models configured.
    pub fn check(&self, models: &[&String], problems: &mut Vec<String>) {
        for (key, v) in [
            ("max_depth", self.max_depth.map(u64::from)),
            ("max_turns", self.max_turns.map(u64::from)),
            ("max_tokens", self.max_tokens),
            ("max_session_tokens", self.max_session_tokens),
            ("timeout_ms", self.timeout_ms),
            ("max_background", self.max_background.map(|v| v as u64)),
            ("max_result_kb", self.max_result_kb.map(|v| v as u64)),
            ("max_steps", self.max_steps.map(|v| v as u64)),
            ("max_parallel", self.max_parallel.map(|v| v as u64)),
            ("max_rounds", self.max_rounds.map(u64::from)),
        ] {
            crate::config::positive(&format!("/delegation/{key}"), v, problems);
        }
        let sampling = self.sampling == Some(true);
        if sampling && models.iter().any(|m| m.as_str() == CLIENT_MODEL) {
            problems.push(format!(
                "/models/{}: the name is taken by the client's model with [delegation] sampling = true; rename it",
                CLIENT_MODEL
            ));
        }
        match &self.model {
            Some(m) if sampling && m == CLIENT_MODEL => {}
            Some(m) if !models.contains(&m) => problems.push(format!(
                "/delegation/model: {m:?} is not a model of [models] (there: {})",
                if models.is_empty() {
                    "none".to_string()
                } else {
                    models.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(", ")
                }
            )),
            None if models.len() + usize::from(sampling) > 1 && self.enabled != Some(false) => problems.push(format!(
                "/delegation/model: missing; with several models ({}) say which one a `subagent` call runs on unless it names one",
                models.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(", ")
            )),
            _ => {}
        }
    }
}
