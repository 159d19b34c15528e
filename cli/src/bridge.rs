//! `toolgate bridge accept SERVER [TOOL…]`: the operator accepts a bridged
//! server's changed tool definitions (see `toolgate::bridge::pins`). Their
//! pins are removed from the state store (`[state]`: the embedded file in
//! the state directory, or the shared server), so every host using that
//! store — a running `serve` included, within a few seconds — pins and
//! serves what the server lists now. A tool pinned in the configuration
//! is not the store's to accept: that pin is changed where it is written.
//!
//! `toolgate bridge pins SERVER`: the server's pins in the store, as the
//! `[mcp.servers.SERVER.pins]` table that writes them in the
//! configuration (reviewed once, kept with the deployment).

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
    /// Print SERVER's pinned definitions (from the state store) as the
    /// `[mcp.servers.SERVER.pins]` table that pins them in the
    /// configuration: paste it there to serve only these definitions.
    Pins {
        /// The server, as `[mcp.servers.SERVER]` names it.
        server: String,
    },
}

/// `server`'s configuration, or an error naming the servers there are.
fn configured<'c>(
    config: &'c toolgate::HostConfig,
    server: &str,
) -> anyhow::Result<&'c toolgate::bridge::config::McpServerConfig> {
    config.mcp.servers.get(server).ok_or_else(|| {
        let known: Vec<&str> = config.mcp.servers.keys().map(String::as_str).collect();
        anyhow::anyhow!(
            "no [mcp.servers.{server}] in the configuration{}",
            if known.is_empty() {
                String::new()
            } else {
                format!(" (its servers: {})", known.join(", "))
            }
        )
    })
}

pub async fn run(global: &GlobalArgs, args: BridgeArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        BridgeCommand::Pins { server } => {
            let host = global.builder()?.build().await?;
            let config = host.config().await;
            let written = &configured(&config, &server)?.pins;
            let store = host.state_store();
            let stored = pins::pinned(store.as_ref(), &server)
                .await
                .with_context(|| format!("reading the pins from {}", store.describe()))?;
            let mut out = format!("[mcp.servers.{server}.pins]");
            for (tool, digest) in written
                .iter()
                .chain(stored.iter().filter(|(t, _)| !written.contains_key(*t)))
            {
                out.push_str(&format!("\n{} = \"{digest}\"", toml_key(tool)));
            }
            if written.is_empty() && stored.is_empty() {
                out = format!(
                    "# no pinned definitions of {server} yet: they are pinned when it is first listed"
                );
            }
            super::print_out(&out)?;
            Ok(ExitCode::SUCCESS)
        }
        BridgeCommand::Accept { server, tools } => {
            let host = global.builder()?.build().await?;
            let config = host.config().await;
            let written = &configured(&config, &server)?.pins;
            let in_config: Vec<&String> =
                tools.iter().filter(|t| written.contains_key(*t)).collect();
            if !in_config.is_empty() {
                bail!(
                    "pinned in the configuration, not the store's to accept: {} — put the new digest in [mcp.servers.{server}.pins] (and restart)",
                    in_config
                        .iter()
                        .map(|t| t.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
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

/// A TOML key: bare when it can be, else quoted.
fn toml_key(key: &str) -> String {
    if !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        key.to_string()
    } else {
        format!("{key:?}")
    }
}
