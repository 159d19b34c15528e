//! `toolgate tools`: the model-facing projection (built by
//! [`toolgate_mcp::projection`], which MCP `tools/list` uses too).

use std::process::ExitCode;

use clap::{Args, ValueEnum};

use super::GlobalArgs;
pub use toolgate_mcp::projection::{ToolsFormat, project};

#[derive(Args, Debug)]
pub struct ToolsArgs {
    /// `json`: [{name, description, parameters}]; `anthropic`: the Messages
    /// API `tools` array; `openai`: the Chat Completions `tools` array.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    format: Format,

    /// The tools a call from this agent scope may use (see `[scopes]` in
    /// the configuration); default: the global layer.
    #[arg(long, default_value = "")]
    scope: String,
}

/// The shapes of `toolgate tools` as the command line names them: the
/// library's [`ToolsFormat`] has no clap in it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// `[{name, description, parameters}]`.
    Json,
    /// The Anthropic Messages API `tools` array.
    Anthropic,
    /// The OpenAI Chat Completions `tools` array.
    Openai,
}

impl From<Format> for ToolsFormat {
    fn from(f: Format) -> ToolsFormat {
        match f {
            Format::Json => ToolsFormat::Json,
            Format::Anthropic => ToolsFormat::Anthropic,
            Format::Openai => ToolsFormat::Openai,
        }
    }
}

pub async fn run(global: &GlobalArgs, args: ToolsArgs) -> anyhow::Result<ExitCode> {
    let host = global.host().await?;
    let tools = host.tools_for(&args.scope);
    let out = project(&tools, args.format.into());
    super::print_out(&serde_json::to_string_pretty(&out)?)?;
    if tools.iter().any(|t| t.name == "lsp") {
        let (found, missing): (Vec<_>, Vec<_>) = host
            .language_servers()
            .into_iter()
            .partition(|(_, p)| p.is_ok());
        let named = |l: &[(std::sync::Arc<str>, Result<std::path::PathBuf, String>)]| {
            l.iter()
                .map(|(n, p)| match p {
                    Ok(p) => format!("{n} ({})", p.display()),
                    Err(e) => format!("{n} ({e})"),
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !found.is_empty() {
            eprintln!("note: `lsp` asks these language servers: {}", named(&found));
        }
        if !missing.is_empty() {
            eprintln!(
                "note: `lsp` answers NOT_CONFIGURED for the files of: {} (install it, or set `[lsp.servers.NAME] command`)",
                named(&missing)
            );
        }
    }
    eprintln!(
        "note: no `pwsh` tool: no registry this project installs from ships a PowerShell that runs, so none is offered or tested (docs/operators/tools.md, \"The built-in tools\")"
    );
    Ok(ExitCode::SUCCESS)
}
