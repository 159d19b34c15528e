//! A guard that reads the agent scope's goal (the built-in `goals`
//! plugin's: `create_goal`, `toolgate goals pause`) and stops the work
//! while the user has paused it or once it is complete: every tool that
//! is not read-only is refused, saying why, until the user resumes the
//! goal (`toolgate goals resume`) or a new one is set.
//!
//! How it reads another plugin's state: the goal is in the `goals`
//! plugin's namespace of the host's `kv` store (key `goal`, JSON, per
//! agent scope), and a plugin's `kv` is its own namespace. The operator
//! grants this guard that namespace instead, read-only:
//!
//! ```toml
//! [plugins.goal-guard.grants]
//! kv_read = "goals"
//! ```
//!
//! so `kv::get("goal")` here is the goal the model set in the same scope,
//! and a write would be refused. The guard never changes the goal: only
//! the user (or the model, through the goals tools) does.
//!
//! Fails closed: a store that cannot be read denies (the host traps the
//! read, and a guard that traps denies). A goal it cannot parse is no
//! goal (nothing to stop).
//!
//! Settings (`vars` of `[plugins.goal-guard]`):
//! * `STOP_WHEN` — the statuses that stop the work, comma-separated
//!   (default `paused,complete`; `blocked` may be added);
//! * `ALLOW_TOOLS` — tools that run anyway (the goals tools always do).

use toolgate_sdk::{Annotations, Call, Guard, kv, setting};

/// The tools of the `goals` plugin: the model may still read the goal,
/// report on it, or set a new one once it is complete.
const GOAL_TOOLS: [&str; 3] = ["get_goal", "update_goal", "create_goal"];

/// The status of the goal as the `goals` plugin keeps it (`None`: no goal,
/// or not one this guard can read).
fn status(stored: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(stored).ok()?;
    v.get("status")?.as_str().map(str::to_string)
}

/// Why `tool` may not run under a goal in `status` (`None`: it may).
fn verdict(tool: &str, status: &str, stop_when: &str) -> Option<String> {
    if !stop_when.split(',').any(|s| s.trim() == status) {
        return None;
    }
    let what = match status {
        "paused" => "the user paused the goal",
        "complete" => "the goal is complete",
        _ => "the goal is not active",
    };
    Some(format!(
        "goal-guard: {what}, so `{tool}` does not run; stop here and report to the user (the user resumes it with `toolgate goals resume`, or a new goal is set with create_goal)"
    ))
}

struct GoalGuard;

impl Guard for GoalGuard {
    fn check(call: &Call) -> Option<String> {
        let tool = call.tool();
        if GOAL_TOOLS.contains(&tool) || call.annotations().contains(Annotations::READ_ONLY) {
            return None;
        }
        if setting("ALLOW_TOOLS", "")
            .split(',')
            .any(|t| t.trim() == tool)
        {
            return None;
        }
        let status = status(&kv::get("goal")?)?;
        verdict(tool, &status, setting("STOP_WHEN", "paused,complete"))
    }
}

toolgate_sdk::export! { guard: GoalGuard }

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paused_and_complete_goals_stop_the_work_others_do_not() {
        let goal = |s: &str| format!(r#"{{"objective":"o","status":"{s}"}}"#).into_bytes();
        assert_eq!(status(&goal("paused")).as_deref(), Some("paused"));
        assert_eq!(status(b"not json"), None);
        let stop = "paused,complete";
        assert!(verdict("bash", "paused", stop).unwrap().contains("paused"));
        assert!(
            verdict("bash", "complete", stop)
                .unwrap()
                .contains("complete")
        );
        assert_eq!(verdict("bash", "active", stop), None);
        assert_eq!(verdict("bash", "blocked", stop), None);
        assert!(verdict("bash", "blocked", "blocked").is_some());
    }
}
