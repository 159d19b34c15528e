//! `toolgate goals`: the user's and operator's hand on the goal the model
//! set with `create_goal` (the built-in `goals` plugin): see it, pause it,
//! resume it, clear it. The model cannot do these; the goal is read from
//! and written to the host's state store (`[state]`: the embedded file in
//! the state directory, or the shared server), one per agent scope, each
//! change a compare-and-swap so a change the model makes meanwhile is
//! never lost.

use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::GlobalArgs;

/// The plugin whose store namespace holds the goals, and the key.
const PLUGIN: &str = "goals";
const KEY: &str = "goal";

#[derive(Args, Debug)]
pub struct GoalsArgs {
    #[command(subcommand)]
    command: Option<GoalsCommand>,

    /// The agent scope whose goal (default: the global scope, as `run`
    /// and `serve` use it).
    #[arg(long, default_value = "", global = true)]
    scope: String,

    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Subcommand, Debug, Clone, Copy)]
enum GoalsCommand {
    /// Show the goal (the default).
    Show,
    /// Pause it: the model's `update_goal` is refused until it is resumed.
    Pause,
    /// Resume a paused goal (it returns to where the pause found it).
    Resume,
    /// Remove it: the model may set a new one.
    Clear,
}

pub async fn run(global: &GlobalArgs, args: GoalsArgs) -> anyhow::Result<ExitCode> {
    let host = global.host().await?;
    let store = host.state_store();
    let scope = args.scope.as_str();
    let whose = if scope.is_empty() {
        "the global scope".to_string()
    } else {
        format!("scope `{scope}`")
    };
    let current = store
        .get(PLUGIN, scope, KEY)
        .await
        .with_context(|| format!("reading the goal of {whose} from {}", store.describe()))?;
    let goal: Option<Value> = match &current {
        Some(bytes) => Some(serde_json::from_slice(bytes).with_context(|| {
            format!("the stored goal of {whose} is not JSON; `toolgate goals clear` removes it")
        })?),
        None => None,
    };
    let command = args.command.unwrap_or(GoalsCommand::Show);
    let Some(mut goal) = goal else {
        if matches!(command, GoalsCommand::Show) {
            if args.json {
                println!("{}", json!({ "scope": scope, "goal": null }));
            } else {
                println!("no goal is set for {whose}");
            }
            return Ok(ExitCode::SUCCESS);
        }
        bail!("no goal is set for {whose} (the model sets one with create_goal)");
    };
    let status = goal["status"].as_str().unwrap_or("").to_string();
    match command {
        GoalsCommand::Show => {}
        GoalsCommand::Clear => {
            store
                .delete(PLUGIN, scope, KEY)
                .await
                .with_context(|| format!("clearing the goal of {whose}"))?;
            println!("cleared the goal of {whose}");
            return Ok(ExitCode::SUCCESS);
        }
        GoalsCommand::Pause => {
            if status == "paused" {
                bail!("the goal of {whose} is already paused");
            }
            if status == "complete" {
                bail!("the goal of {whose} is complete; nothing to pause");
            }
            goal["pausedFrom"] = json!(status);
            goal["status"] = json!("paused");
        }
        GoalsCommand::Resume => {
            if status != "paused" {
                bail!("the goal of {whose} is not paused (it is {status})");
            }
            let back = goal["pausedFrom"].as_str().unwrap_or("active").to_string();
            goal["status"] = json!(back);
            goal["pausedFrom"] = Value::Null;
        }
    }
    if !matches!(command, GoalsCommand::Show) {
        goal["updatedAt"] = json!(now());
        let bytes = serde_json::to_vec(&goal)?;
        let swapped = store
            .compare_and_swap(PLUGIN, scope, KEY, current.as_deref(), &bytes)
            .await
            .with_context(|| format!("changing the goal of {whose}"))?;
        if !swapped {
            bail!(
                "the goal of {whose} changed meanwhile (the model updated it); look again with `toolgate goals show`"
            );
        }
    }
    if args.json {
        println!("{}", json!({ "scope": scope, "goal": goal }));
    } else {
        let elapsed = now().saturating_sub(goal["createdAt"].as_u64().unwrap_or(0));
        println!(
            "{whose}: {} ({}, set {} min ago)",
            goal["objective"].as_str().unwrap_or(""),
            goal["status"].as_str().unwrap_or(""),
            elapsed / 60
        );
        if let Some(note) = goal["note"].as_str() {
            println!("  note: {note}");
        }
        if let Some(budget) = goal["tokenBudget"].as_u64() {
            println!("  token budget: {budget}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
