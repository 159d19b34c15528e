//! `toolgate goals`: the user's and operator's hand on the goal the model
//! set with `create_goal` (the built-in `goals` plugin): see it, pause it,
//! resume it, clear it (the logic is `toolgate::goals`, which the approval
//! console shares). The goal is read from and written to the host's state
//! store (`[state]`: the embedded file in the state directory, or the
//! shared server), one per agent scope.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::json;
use toolgate::goals::{self, GoalAction};

use super::GlobalArgs;

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
    let command = args.command.unwrap_or(GoalsCommand::Show);
    let action = match command {
        GoalsCommand::Show => None,
        GoalsCommand::Pause => Some(GoalAction::Pause),
        GoalsCommand::Resume => Some(GoalAction::Resume),
        GoalsCommand::Clear => Some(GoalAction::Clear),
    };
    let goal = match action {
        None => goals::read(store.as_ref(), scope)
            .await
            .with_context(|| format!("reading the goal from {}", store.describe()))?,
        Some(action) => goals::change(store.as_ref(), scope, action).await?,
    };
    let whose = goals::whose(scope);
    let Some(goal) = goal else {
        if args.json {
            println!("{}", json!({ "scope": scope, "goal": null }));
        } else if action == Some(GoalAction::Clear) {
            println!("cleared the goal of {whose}");
        } else {
            println!("no goal is set for {whose}");
        }
        return Ok(ExitCode::SUCCESS);
    };
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
