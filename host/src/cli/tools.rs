//! `toolgate tools`: the model-facing projection.

use std::process::ExitCode;

use clap::{Args, ValueEnum};
use serde_json::{Value, json};

use super::GlobalArgs;
use crate::tool::ModelTool;

#[derive(Args, Debug)]
pub struct ToolsArgs {
    /// `json`: [{name, description, parameters}]; `anthropic`: the Messages
    /// API `tools` array; `openai`: the Chat Completions `tools` array.
    #[arg(long, value_enum, default_value_t = ToolsFormat::Json)]
    format: ToolsFormat,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum ToolsFormat {
    Json,
    Anthropic,
    Openai,
}

/// The tools in the shape an API expects. Only name, description and
/// parameters are ever included.
pub fn project(tools: &[ModelTool], format: ToolsFormat) -> Value {
    Value::Array(
        tools
            .iter()
            .map(|t| match format {
                ToolsFormat::Json => json!({"name": t.name, "description": t.description, "parameters": t.parameters}),
                ToolsFormat::Anthropic => {
                    json!({"name": t.name, "description": t.description, "input_schema": t.parameters})
                }
                ToolsFormat::Openai => json!({
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters}
                }),
            })
            .collect(),
    )
}

pub async fn run(global: &GlobalArgs, args: ToolsArgs) -> anyhow::Result<ExitCode> {
    let host = global.host().await?;
    let out = project(&host.tools(), args.format);
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(ExitCode::SUCCESS)
}
