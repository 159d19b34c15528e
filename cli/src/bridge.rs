//! `toolgate bridge accept SERVER [TOOL…]`: the operator accepts a bridged
//! server's changed tool definitions (see `toolgate::bridge::pins`). Their
//! pins are removed from the state store (`[state]`: the embedded file in
//! the state directory, or the shared server), so every host using that
//! store — a running `serve` included, within a few seconds — pins and
//! serves what the server lists now.

use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use toolgate::bridge::pins;

use super::GlobalArgs;

#[derive(Args, Debug)]
pub struct BridgeArgs {
    #[command(subcommand)]
    command: BridgeCommand,
}

#[derive(Subcommand, Debug)]
enum BridgeCommand {
    /// Accept the current definitions of SERVER's tools (all of them, or
    /// the TOOLs named, as the server names them): a tool withheld because
    /// its definition changed since it was pinned is served again. Review
    /// the change first (`toolgate plugins` says which tools are withheld).
    Accept {
        /// The server, as `[mcp.servers.SERVER]` names it.
        server: String,
        /// Its tools to accept, by the server's own names (default: all).
        tools: Vec<String>,
    },
}

pub async fn run(global: &GlobalArgs, args: BridgeArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        BridgeCommand::Accept { server, tools } => {
            let host = global.builder()?.build().await?;
            let config = host.config().await;
            if !config.mcp.servers.contains_key(&server) {
                let known: Vec<&str> = config.mcp.servers.keys().map(String::as_str).collect();
                bail!(
                    "no [mcp.servers.{server}] in the configuration{}",
                    if known.is_empty() {
                        String::new()
                    } else {
                        format!(" (its servers: {})", known.join(", "))
                    }
                );
            }
            let store = host.state_store();
            let removed = pins::accept(store.as_ref(), &server, &tools)
                .await
                .with_context(|| format!("removing the pins from {}", store.describe()))?;
            if removed == 0 {
                println!(
                    "no pinned definitions of {server}{} to accept",
                    if tools.is_empty() {
                        String::new()
                    } else {
                        format!(" named {}", tools.join(", "))
                    }
                );
            } else {
                println!(
                    "accepted: {removed} pinned definition(s) of {server} removed; what it lists now is pinned and served (a running host: within {} s)",
                    pins::RECHECK.as_secs()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
