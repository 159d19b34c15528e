//! `toolgate tools`: the model-facing projection (built by
//! [`crate::mcp::projection`], which MCP `tools/list` uses too).

use std::process::ExitCode;

use clap::Args;

use super::GlobalArgs;
pub use crate::mcp::projection::{ToolsFormat, project};

#[derive(Args, Debug)]
pub struct ToolsArgs {
    /// `json`: [{name, description, parameters}]; `anthropic`: the Messages
    /// API `tools` array; `openai`: the Chat Completions `tools` array.
    #[arg(long, value_enum, default_value_t = ToolsFormat::Json)]
    format: ToolsFormat,

    /// The tools a call from this agent scope may use (see `[scopes]` in
    /// the configuration); default: the global layer.
    #[arg(long, default_value = "")]
    scope: String,
}

pub async fn run(global: &GlobalArgs, args: ToolsArgs) -> anyhow::Result<ExitCode> {
    let host = global.host().await?;
    let out = project(&host.tools_for(&args.scope), args.format);
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(ExitCode::SUCCESS)
}
