//! The user's and operator's hand on the goal the model set with
//! `create_goal` (the built-in `goals` plugin): see it, pause it, resume
//! it, clear it — from `toolgate goals` and the approval console. The
//! model cannot do these (its tools only create, read and report).
//!
//! The goal is the `goals` plugin's value under [`KEY`] in the host's
//! state store ([`crate::store`]), one per agent scope, as JSON with its
//! `status` (`active`, `paused`, `blocked`, `complete`). Each change is a
//! compare-and-swap against the value read, so a change the model makes
//! meanwhile is never overwritten: the person is told to look again.

use serde_json::{Value, json};

use crate::store::{KvBackend, KvError};

/// The plugin whose store namespace holds the goals.
pub const PLUGIN: &str = "goals";
/// The key of a scope's goal.
pub const KEY: &str = "goal";

/// What a person does to a goal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GoalAction {
    /// The model's `update_goal` is refused until it is resumed.
    Pause,
    /// Back to the status the pause interrupted.
    Resume,
    /// Removed: the model may set a new one.
    Clear,
}

impl GoalAction {
    /// `pause`, `resume` or `clear`.
    pub fn parse(text: &str) -> Option<GoalAction> {
        match text {
            "pause" => Some(GoalAction::Pause),
            "resume" => Some(GoalAction::Resume),
            "clear" => Some(GoalAction::Clear),
            _ => None,
        }
    }
}

/// Why a goal could not be read or changed.
#[derive(Debug, thiserror::Error)]
pub enum GoalError {
    #[error("no goal is set for {0} (the model sets one with create_goal)")]
    NoGoal(String),
    #[error("the stored goal of {0} is not JSON; clearing it removes it")]
    NotJson(String),
    #[error("the goal of {0} is already paused")]
    AlreadyPaused(String),
    #[error("the goal of {0} is complete; nothing to pause")]
    Complete(String),
    #[error("the goal of {whose} is not paused (it is {status})")]
    NotPaused { whose: String, status: String },
    #[error("the goal of {0} changed meanwhile (the model updated it); look again")]
    Changed(String),
    #[error("{whose}: {source}")]
    Store {
        whose: String,
        #[source]
        source: KvError,
    },
}

/// How messages name `scope`.
pub fn whose(scope: &str) -> String {
    if scope.is_empty() {
        "the global scope".to_string()
    } else {
        format!("scope `{scope}`")
    }
}

fn store_error(scope: &str) -> impl Fn(KvError) -> GoalError + '_ {
    move |source| GoalError::Store {
        whose: whose(scope),
        source,
    }
}

/// The goal of `scope` as stored (bytes, for the compare-and-swap) and
/// parsed; `None` when there is none.
async fn load(store: &dyn KvBackend, scope: &str) -> Result<Option<(Vec<u8>, Value)>, GoalError> {
    let Some(bytes) = store
        .get(PLUGIN, scope, KEY)
        .await
        .map_err(store_error(scope))?
    else {
        return Ok(None);
    };
    let goal = serde_json::from_slice(&bytes).map_err(|_| GoalError::NotJson(whose(scope)))?;
    Ok(Some((bytes, goal)))
}

/// The goal of `scope`, if one is set.
pub async fn read(store: &dyn KvBackend, scope: &str) -> Result<Option<Value>, GoalError> {
    Ok(load(store, scope).await?.map(|(_, goal)| goal))
}

/// Do `action` to the goal of `scope`; the goal after it (`None` once
/// cleared). Clearing removes even a goal that is not JSON.
pub async fn change(
    store: &dyn KvBackend,
    scope: &str,
    action: GoalAction,
) -> Result<Option<Value>, GoalError> {
    if action == GoalAction::Clear {
        if store
            .get(PLUGIN, scope, KEY)
            .await
            .map_err(store_error(scope))?
            .is_none()
        {
            return Err(GoalError::NoGoal(whose(scope)));
        }
        store
            .delete(PLUGIN, scope, KEY)
            .await
            .map_err(store_error(scope))?;
        return Ok(None);
    }
    let Some((current, mut goal)) = load(store, scope).await? else {
        return Err(GoalError::NoGoal(whose(scope)));
    };
    let status = goal["status"].as_str().unwrap_or("").to_string();
    match action {
        GoalAction::Pause if status == "paused" => {
            return Err(GoalError::AlreadyPaused(whose(scope)));
        }
        GoalAction::Pause if status == "complete" => {
            return Err(GoalError::Complete(whose(scope)));
        }
        GoalAction::Pause => {
            goal["pausedFrom"] = json!(status);
            goal["status"] = json!("paused");
        }
        GoalAction::Resume if status != "paused" => {
            return Err(GoalError::NotPaused {
                whose: whose(scope),
                status,
            });
        }
        GoalAction::Resume => {
            let back = goal["pausedFrom"].as_str().unwrap_or("active").to_string();
            goal["status"] = json!(back);
            goal["pausedFrom"] = Value::Null;
        }
        GoalAction::Clear => unreachable!("handled above"),
    }
    goal["updatedAt"] = json!(now());
    let bytes = serde_json::to_vec(&goal).expect("a JSON value serializes");
    let swapped = store
        .compare_and_swap(PLUGIN, scope, KEY, Some(&current), &bytes)
        .await
        .map_err(store_error(scope))?;
    if !swapped {
        return Err(GoalError::Changed(whose(scope)));
    }
    Ok(Some(goal))
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::SqliteKv;

    /// Pause, resume and clear as the CLI and the console do them; a
    /// change the model made meanwhile is never overwritten.
    #[tokio::test]
    async fn pause_resume_clear_and_never_over_a_change_of_the_model() {
        let store = SqliteKv::memory();
        let goal = json!({"objective": "o", "status": "blocked"});
        store
            .set(PLUGIN, "s", KEY, &serde_json::to_vec(&goal).unwrap())
            .await
            .unwrap();
        let paused = change(&store, "s", GoalAction::Pause)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (paused["status"].as_str(), paused["pausedFrom"].as_str()),
            (Some("paused"), Some("blocked"))
        );
        let e = change(&store, "s", GoalAction::Pause).await.unwrap_err();
        assert!(e.to_string().contains("already paused"), "{e}");
        let back = change(&store, "s", GoalAction::Resume)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(back["status"], "blocked");
        let e = change(&store, "s", GoalAction::Resume).await.unwrap_err();
        assert!(e.to_string().contains("not paused (it is blocked)"), "{e}");
        assert!(read(&store, "other").await.unwrap().is_none());
        let e = change(&store, "other", GoalAction::Pause)
            .await
            .unwrap_err();
        assert!(
            e.to_string().contains("no goal is set for scope `other`"),
            "{e}"
        );
        assert_eq!(change(&store, "s", GoalAction::Clear).await.unwrap(), None);
        assert!(read(&store, "s").await.unwrap().is_none());
    }
}
