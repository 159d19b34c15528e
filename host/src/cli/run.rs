//! `toolgate run FILE|-`: one model turn from a file.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use serde_json::json;

use super::GlobalArgs;
use crate::call::ToolCall;
use crate::turn::TurnOptions;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// A JSON array of calls: [{"id": "...", "name": "...", "arguments": {...}}].
    /// `-` reads standard input.
    #[arg(value_name = "FILE|-")]
    input: PathBuf,

    /// The agent scope the calls come from.
    #[arg(long, default_value = "")]
    scope: String,

    /// Most concurrency-safe calls running at once.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    max_parallel: Option<u16>,

    /// Print one compact JSON document instead of pretty-printing it.
    #[arg(long)]
    compact: bool,
}

/// Read and check a batch of calls; errors name the input and the call.
pub fn parse_batch(
    text: &str,
    origin: &str,
    limits: &toolgate_schema::Limits,
) -> anyhow::Result<Vec<ToolCall>> {
    // Two levels for the array and the call object.
    let batch_limits = toolgate_schema::Limits {
        max_depth: limits.max_depth + 2,
        max_bytes: usize::MAX,
    };
    let value = toolgate_schema::parse(text, &batch_limits)
        .with_context(|| format!("{origin} is not an acceptable batch"))?;
    let schema = toolgate_schema::Schema::compile(&json!({
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "name": {"type": "string"},
                "arguments": {"type": "object"}
            },
            "required": ["id", "name"],
            "additionalProperties": false
        }
    }))
    .expect("the batch schema compiles");
    if let Err(violations) = schema.validate(&value) {
        bail!(
            "{origin} is not a batch of tool calls ([{{\"id\", \"name\", \"arguments\"}}, ...]):\n{}",
            violations
                .iter()
                .map(|v| format!("  - {v}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    Ok(serde_json::from_value(value)?)
}

pub async fn run(global: &GlobalArgs, args: RunArgs) -> anyhow::Result<ExitCode> {
    let (text, origin) = if args.input.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("cannot read standard input")?;
        (s, "standard input".to_string())
    } else {
        let s = std::fs::read_to_string(&args.input)
            .with_context(|| format!("cannot read {}", args.input.display()))?;
        (s, args.input.display().to_string())
    };
    let mut builder = global.builder()?;
    if let Some(n) = args.max_parallel {
        builder = builder.max_parallel(n.into());
    }
    let host = builder.build().await?;
    super::report_problems(&host);
    super::refuse_if_blocked(&host)?;
    let calls = parse_batch(&text, &origin, &host.settings().limits)?;
    let turn = TurnOptions {
        agent_scope: args.scope,
        ..Default::default()
    };
    let cancel = turn.cancel.clone();
    let ctrl_c = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!(
                "toolgate: interrupted; cancelling the turn (running calls are stopped, the rest are not started)"
            );
            cancel.cancel();
        }
    });
    let outcome = host.try_execute_tool_calls(calls, &turn).await;
    ctrl_c.abort();
    // The turn is over, and so is this host: no background job it started
    // may outlive it.
    host.shutdown().await;
    // A scheduler failure is a host bug, not a result: report it and print
    // no records (none is fabricated, and a partial batch would pass for a
    // whole one).
    let records = match outcome {
        Ok(records) => records,
        Err(error) => {
            eprintln!("toolgate: {error}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let out = if args.compact {
        serde_json::to_string(&records)?
    } else {
        serde_json::to_string_pretty(&records)?
    };
    println!("{out}");
    Ok(ExitCode::SUCCESS)
}
