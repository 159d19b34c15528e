//! `ralph(prompt, goal?)`: the same prompt in fresh sub-agents, one after
//! another, until the session's goal is `complete` — the loop people run
//! by hand ("Ralph Wiggum"), under the gate.
//!
//! The goal is the built-in `goals` plugin's, in the caller's scope (set
//! from `goal` when none is open). Each round is a fork: a sub-agent whose
//! scope starts with a copy of the goal and the todo list, so the model
//! marks the goal with `update_goal` as it would its own; after the round
//! the host reads that copy and, when it says `complete` or `blocked`,
//! writes it back to the caller's goal (compare-and-swap: a person's pause
//! meanwhile wins) and stops. Otherwise the next round starts, until
//! `max_rounds` (at most `[delegation] max_rounds`), the client's tokens
//! or the call's time end it.

use std::sync::Arc;

use serde_json::{Value, json};

use super::agents::State;
use super::spawn::{Spec, note, summary};
use super::{Delegation, failure};
use crate::call::{CallInfo, Interrupt};
use crate::goals::{KEY, PLUGIN};
use crate::history::Viewer;
use crate::store::KvBackend;
use crate::tool::{BodyContext, BodyError};

/// The goal's text, at most (the `goals` plugin's own limit).
pub const MAX_GOAL_CHARS: usize = 2000;

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn state_error(e: impl std::fmt::Display) -> BodyError {
    failure(
        "STATE_ERROR",
        format!("the goal could not be read or written: {e}"),
    )
}

async fn read(kv: &dyn KvBackend, scope: &str) -> Result<Option<(Vec<u8>, Value)>, BodyError> {
    let Some(bytes) = kv.get(PLUGIN, scope, KEY).await.map_err(state_error)? else {
        return Ok(None);
    };
    let v = serde_json::from_slice(&bytes).map_err(|_| {
        failure(
            "STATE_ERROR",
            "the stored goal is not JSON; `toolgate goals clear` removes it",
        )
    })?;
    Ok(Some((bytes, v)))
}

fn status(goal: &Value) -> &str {
    goal.get("status").and_then(Value::as_str).unwrap_or("")
}

impl Delegation {
    pub(super) async fn ralph(
        &self,
        call: &Arc<CallInfo>,
        ctx: &BodyContext,
        owner: &Viewer,
    ) -> Result<Value, BodyError> {
        let kv = self.kv.clone().ok_or_else(|| {
            failure(
                "NO_STATE",
                "ralph keeps the goal in the host's state store, and this host has none",
            )
        })?;
        let prompt = call
            .arguments
            .get("prompt")
            .and_then(Value::as_str)
            .ok_or_else(|| failure("INVALID_ARGS", "`prompt` must be a string"))?;
        let asked_rounds = call.arguments.get("max_rounds").and_then(Value::as_u64);
        let rounds = asked_rounds
            .map_or(self.limits.max_rounds, |n| {
                n.min(u64::from(self.limits.max_rounds)) as u32
            })
            .max(1);
        let host =
            self.host.get().cloned().ok_or_else(|| {
                BodyError::Internal("the host is not ready for sub-agents".into())
            })?;
        if !host
            .model_tools(&call.agent_scope)
            .iter()
            .any(|t| t.name == "update_goal")
        {
            return Err(failure(
                "NO_GOALS",
                "ralph's sub-agents mark the goal with `update_goal`, which is not offered here: enable the built-in `goals` plugin",
            ));
        }
        let scope = call.agent_scope.as_str();
        // The goal: the open one, or a new one from `goal`.
        let asked_goal = call.arguments.get("goal").and_then(Value::as_str);
        let current = read(&*kv, scope).await?;
        let objective = match (current, asked_goal) {
            (Some((_, g)), asked) if status(&g) != "complete" => {
                let objective = g["objective"].as_str().unwrap_or("").to_string();
                if let Some(a) = asked
                    && a.trim() != objective.trim()
                {
                    return Err(failure(
                        "GOAL_EXISTS",
                        format!(
                            "a goal is already set for this session ({}): {objective}. Omit `goal` to work towards it, or finish or clear it first",
                            status(&g)
                        ),
                    ));
                }
                if status(&g) == "paused" {
                    return Err(failure(
                        "PAUSED",
                        "the user paused this goal; ralph waits until they resume it",
                    ));
                }
                objective
            }
            (current, Some(a)) => {
                if a.trim().is_empty() || a.chars().count() > MAX_GOAL_CHARS {
                    return Err(failure(
                        "INVALID_ARGS",
                        format!("`goal`: 1 to {MAX_GOAL_CHARS} characters"),
                    ));
                }
                let t = now();
                let goal = json!({
                    "objective": a, "status": "active", "tokenBudget": null,
                    "createdAt": t, "updatedAt": t, "note": null, "pausedFrom": null,
                });
                let expected = current.as_ref().map(|(b, _)| b.as_slice());
                let bytes = serde_json::to_vec(&goal).unwrap_or_default();
                if !kv
                    .compare_and_swap(PLUGIN, scope, KEY, expected, &bytes)
                    .await
                    .map_err(state_error)?
                {
                    return Err(failure(
                        "CONFLICT",
                        "the goal changed while ralph set it; try again",
                    ));
                }
                a.to_string()
            }
            (_, None) => {
                return Err(failure(
                    "INVALID_ARGS",
                    "no goal is open for this session: pass `goal`, or set one with create_goal",
                ));
            }
        };
        let mut rounds_run = Vec::new();
        let mut ended_agents = Vec::new();
        let mut result = "rounds";
        for round in 1..=rounds {
            let spec = Spec {
                description: "ralph",
                prompt: format!(
                    "{prompt}\n\n[Round {round} of at most {rounds}. The session's goal: {objective}\nWhen it is achieved, call update_goal with status `complete`; if it cannot be achieved, `blocked` with why. Earlier rounds' work is in the files and the todo list.]"
                ),
                tools: None,
                model: call.arguments.get("model").and_then(Value::as_str),
                background: false,
                fork: true,
            };
            let (agent, run) = match self.spawn(call, ctx, owner, spec).await {
                Ok(x) => x,
                // The client's tokens ran out: the loop ends there.
                Err(BodyError::Failure(f)) if f.code == "AGENT_BUDGET" && round > 1 => {
                    result = "budget";
                    break;
                }
                Err(e) => return Err(e),
            };
            let ended = self.run_foreground(&agent, run).await;
            rounds_run.push(summary(&agent, &ended));
            let child = read(&*kv, &agent.scope).await?;
            let interrupted = ended.state == State::Interrupted;
            ended_agents.push((agent, ended));
            if interrupted {
                note(
                    call,
                    &ended_agents
                        .iter()
                        .map(|(a, e)| (&**a, e))
                        .collect::<Vec<_>>(),
                );
                return Err(BodyError::Interrupted(Interrupt::Cancelled));
            }
            let Some((_, child)) = child else { continue };
            let s = status(&child).to_string();
            if s == "complete" || s == "blocked" {
                // Back to the caller's goal, unless a person changed it.
                let now_there = read(&*kv, scope).await?;
                match now_there {
                    Some((bytes, g)) if status(&g) == "active" || status(&g) == "blocked" => {
                        let new = serde_json::to_vec(&child).unwrap_or_default();
                        kv.compare_and_swap(PLUGIN, scope, KEY, Some(&bytes), &new)
                            .await
                            .map_err(state_error)?;
                        result = if s == "complete" {
                            "complete"
                        } else {
                            "blocked"
                        };
                    }
                    _ => result = "changed",
                }
                break;
            }
            if read(&*kv, scope)
                .await?
                .is_some_and(|(_, g)| status(&g) == "paused")
            {
                result = "paused";
                break;
            }
        }
        note(
            call,
            &ended_agents
                .iter()
                .map(|(a, e)| (&**a, e))
                .collect::<Vec<_>>(),
        );
        let goal = read(&*kv, scope).await?.map(|(_, g)| g);
        Ok(json!({
            "result": result,
            "rounds": rounds_run,
            "goal": goal,
        }))
    }
}
