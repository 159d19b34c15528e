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
    let out = project(&host.tools_for(&args.scope), args.format.into());
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(ExitCode::SUCCESS)
}
