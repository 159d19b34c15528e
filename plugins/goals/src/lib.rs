//! `create_goal`, `get_goal`, `update_goal`: the goal an agent works
//! towards, with Codex's semantics (`goal_spec`) — one goal at a time per
//! agent scope, created by the model, marked `complete` or `blocked` by it
//! with a note; paused, resumed and cleared only by the user or operator
//! (`toolgate goals`), never by the model.
//!
//! Kept in the host's `kv` seam under the call's agent scope, not in the
//! instance's memory: it survives instance recycling, reloads and a restart
//! (the embedded store), and replicas sharing `[state] url` share it. Every
//! change is a compare-and-swap on the stored goal, so a user's pause that
//! lands between the model's read and write is never overwritten.

use serde::{Deserialize, Serialize};
use toolgate_sdk::{Annotations, Call, Content, ContentBlock, Schema, Tool, ToolError, kv};

/// Characters of an objective.
pub const MAX_OBJECTIVE_CHARS: usize = 4000;
/// Characters of a note.
pub const MAX_NOTE_CHARS: usize = 4000;
/// The key of the goal in the scope's store (`toolgate goals` reads it too).
const KEY: &str = "goal";

/// Where a goal stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Schema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Being worked on.
    Active,
    /// Paused by the user: nothing changes until they resume it.
    Paused,
    /// The model cannot go on without help (its note says why).
    Blocked,
    /// Done.
    Complete,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Active => "active",
            Status::Paused => "paused",
            Status::Blocked => "blocked",
            Status::Complete => "complete",
        }
    }
}

/// A goal as it is kept.
#[derive(Clone, Debug, Serialize, Deserialize, Schema)]
#[serde(rename_all = "camelCase")]
pub struct Goal {
    /// What is to be achieved.
    objective: String,
    status: Status,
    /// The tokens the model means to spend on it, as it said (toolgate
    /// does not see the model's tokens).
    token_budget: Option<u64>,
    /// Seconds since the Unix epoch.
    created_at: u64,
    updated_at: u64,
    /// The last `update_goal` note.
    note: Option<String>,
    /// The status a pause interrupted (a resume restores it).
    paused_from: Option<Status>,
}

/// Set the goal you will work towards in this session, once you know what
/// the user wants achieved: one clear objective, checkable when done. Only
/// one goal at a time: this fails while a goal is set and not complete.
/// Report progress with `update_goal`; read it back with `get_goal`.
#[derive(Deserialize, Schema)]
pub struct CreateGoal {
    /// The objective, as one or a few sentences.
    objective: String,
    /// The tokens you mean to spend on it, if you have a budget.
    token_budget: Option<u64>,
}

/// The goal of this session: its objective, status, when it was set and
/// how long ago, its budget and last note.
#[derive(Deserialize, Schema)]
pub struct GetGoal {}

/// Mark this session's goal `complete` (when the objective is achieved) or
/// `blocked` (when you cannot go on without the user), with a note saying
/// what was done or what is needed. A goal the user paused cannot change.
#[derive(Deserialize, Schema)]
pub struct UpdateGoal {
    /// `complete` or `blocked`.
    status: Update,
    /// What was achieved, or what blocks it.
    note: String,
}

/// What the model may set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Schema)]
#[serde(rename_all = "snake_case")]
pub enum Update {
    /// The objective is achieved.
    Complete,
    /// It cannot go on without help.
    Blocked,
}

/// What every goal tool returns.
#[derive(Serialize, Deserialize, Schema)]
#[serde(rename_all = "camelCase")]
pub struct GoalView {
    /// The goal, if one is set.
    goal: Option<Goal>,
    /// Seconds since it was set.
    elapsed_seconds: Option<u64>,
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The stored goal, with its bytes (for the compare-and-swap).
fn load() -> Result<Option<(Vec<u8>, Goal)>, ToolError> {
    let Some(bytes) = kv::get(KEY) else {
        return Ok(None);
    };
    let goal = serde_json::from_slice(&bytes).map_err(|e| {
        ToolError::new(
            "STORE_CORRUPT",
            format!("the stored goal cannot be read ({e}); ask the user to clear it (`toolgate goals clear`)"),
        )
    })?;
    Ok(Some((bytes, goal)))
}

/// Replace the goal stored as `expected` by `goal`.
fn store(expected: Option<&[u8]>, goal: &Goal) -> Result<(), ToolError> {
    let bytes = serde_json::to_vec(goal).map_err(|e| ToolError::new("STORE", e.to_string()))?;
    match kv::compare_and_swap(KEY, expected, &bytes) {
        Ok(true) => Ok(()),
        Ok(false) => Err(ToolError::new(
            "CONFLICT",
            "the goal changed while this call ran (the user may have paused or cleared it); read it with get_goal and try again",
        )),
        Err(e) => Err(ToolError::new(
            "STORE",
            format!("the goal could not be kept: {e}"),
        )),
    }
}

fn view(goal: Option<Goal>) -> GoalView {
    let elapsed_seconds = goal.as_ref().map(|g| now().saturating_sub(g.created_at));
    GoalView {
        goal,
        elapsed_seconds,
    }
}

fn check_text(what: &str, text: &str, max: usize) -> Result<(), ToolError> {
    if text.trim().is_empty() {
        return Err(ToolError::invalid_input(format!("`{what}` is empty")));
    }
    let n = text.chars().count();
    if n > max {
        return Err(ToolError::invalid_input(format!(
            "`{what}` has {n} characters; keep it to {max}"
        )));
    }
    Ok(())
}

fn render(v: GoalView) -> Vec<ContentBlock> {
    let Some(g) = v.goal else {
        return vec![Content::text("No goal is set for this session.")];
    };
    let minutes = v.elapsed_seconds.unwrap_or(0) / 60;
    let mut s = format!(
        "Goal ({}, set {minutes} min ago): {}\n",
        g.status.as_str(),
        g.objective
    );
    if let Some(b) = g.token_budget {
        s.push_str(&format!(
            "Token budget: {b} (toolgate does not count the model's tokens; keep your own count)\n"
        ));
    }
    if let Some(n) = &g.note {
        s.push_str(&format!("Note: {n}\n"));
    }
    match g.status {
        Status::Paused => s.push_str("The user paused this goal: wait for them to resume it.\n"),
        Status::Complete => s.push_str("It is complete; a new goal may be set.\n"),
        _ => {}
    }
    vec![Content::text(s)]
}

impl Tool for CreateGoal {
    const NAME: &'static str = "create_goal";
    type Output = GoalView;

    fn execute(self, _call: &Call) -> Result<GoalView, ToolError> {
        check_text("objective", &self.objective, MAX_OBJECTIVE_CHARS)?;
        if self.token_budget == Some(0) {
            return Err(ToolError::invalid_input("`token_budget` must be 1 or more"));
        }
        let current = load()?;
        if let Some((_, g)) = &current
            && g.status != Status::Complete
        {
            return Err(ToolError::new(
                "GOAL_EXISTS",
                format!(
                    "a goal is already set for this session ({}): {}. Finish it with update_goal(status: complete), or ask the user to clear it",
                    g.status.as_str(),
                    g.objective
                ),
            ));
        }
        let at = now();
        let goal = Goal {
            objective: self.objective,
            status: Status::Active,
            token_budget: self.token_budget,
            created_at: at,
            updated_at: at,
            note: None,
            paused_from: None,
        };
        store(current.as_ref().map(|(b, _)| b.as_slice()), &goal)?;
        Ok(view(Some(goal)))
    }

    fn render(v: GoalView) -> Vec<ContentBlock> {
        render(v)
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(GoalView::schema())
    }
}

impl Tool for GetGoal {
    const NAME: &'static str = "get_goal";
    type Output = GoalView;

    fn execute(self, _call: &Call) -> Result<GoalView, ToolError> {
        Ok(view(load()?.map(|(_, g)| g)))
    }

    fn render(v: GoalView) -> Vec<ContentBlock> {
        render(v)
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(GoalView::schema())
    }

    fn annotations() -> Annotations {
        Annotations::READ_ONLY | Annotations::IDEMPOTENT
    }

    fn is_concurrency_safe(&self) -> bool {
        true
    }
}

impl Tool for UpdateGoal {
    const NAME: &'static str = "update_goal";
    type Output = GoalView;

    fn execute(self, _call: &Call) -> Result<GoalView, ToolError> {
        check_text("note", &self.note, MAX_NOTE_CHARS)?;
        let Some((bytes, mut goal)) = load()? else {
            return Err(ToolError::new(
                "NO_GOAL",
                "no goal is set for this session; set one with create_goal",
            ));
        };
        match goal.status {
            Status::Paused => {
                return Err(ToolError::new(
                    "PAUSED",
                    "the user paused this goal; it does not change until they resume it",
                ));
            }
            Status::Complete => {
                return Err(ToolError::new(
                    "GOAL_COMPLETE",
                    "this goal is already complete; set the next one with create_goal",
                ));
            }
            Status::Active | Status::Blocked => {}
        }
        goal.status = match self.status {
            Update::Complete => Status::Complete,
            Update::Blocked => Status::Blocked,
        };
        goal.note = Some(self.note);
        goal.updated_at = now();
        store(Some(&bytes), &goal)?;
        Ok(view(Some(goal)))
    }

    fn render(v: GoalView) -> Vec<ContentBlock> {
        render(v)
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(GoalView::schema())
    }
}

toolgate_sdk::export! { tools: [CreateGoal, GetGoal, UpdateGoal] }
