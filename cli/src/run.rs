//! `toolgate run FILE|-`: one model turn from a file.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use serde_json::json;

use super::GlobalArgs;
use serde_json::Value;
use toolgate::call::ToolCall;
use toolgate::content::Content;
use toolgate::outcome::{CallError, CallRecord, ErrorCode, Outcome, Stage};
use toolgate::turn::TurnOptions;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// A JSON array of calls: [{"id": "...", "name": "...", "arguments": {...},
    /// "scope": "..."}] (`arguments` may also be a string holding the JSON
    /// object, as OpenAI's API sends it; `scope`, optional, is the agent scope
    /// of that call, default `--scope`). `-` reads standard input. A malformed
    /// call is answered with an INVALID_ARGS record at its place; the others
    /// run.
    #[arg(value_name = "FILE|-")]
    input: PathBuf,

    /// The agent scope of the calls that name none (a call's own `scope`
    /// wins; consecutive calls of one scope run as one turn).
    #[arg(long, default_value = "")]
    scope: String,

    /// Most concurrency-safe calls running at once.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    max_parallel: Option<u16>,

    /// Print one compact JSON document instead of pretty-printing it.
    #[arg(long)]
    compact: bool,
}

/// A call of a batch that could not be run, and why (it becomes an
/// `INVALID_ARGS` record at its place; the other calls run).
#[derive(Clone, Debug)]
pub struct Rejected {
    pub id: String,
    pub name: String,
    pub message: String,
    /// The call as it was given (JSON): its digest goes in the audit record.
    pub raw: String,
}

impl Rejected {
    /// The record the model gets for it.
    pub fn record(&self) -> CallRecord {
        let error = CallError::new(ErrorCode::InvalidArgs, Stage::Materialize, &self.message);
        CallRecord::freeze(
            self.id.clone(),
            self.name.clone(),
            Outcome::Failure {
                content: vec![Content::text(self.message.clone())],
                error,
            },
            Vec::new(),
        )
    }
}

/// One call of a batch, with the agent scope it comes from (absent: the
/// turn's, `--scope`).
#[derive(Clone, Debug)]
pub struct ScopedCall {
    pub call: ToolCall,
    pub scope: Option<String>,
}

/// Read and check a batch of calls. The batch must be a JSON array (else
/// the whole input is refused, naming it); each call is checked on its
/// own: `{"id", "name", "arguments", "scope"?}` with `arguments` an object
/// or — as OpenAI's API sends it — a string holding a JSON object. A
/// malformed call is rejected alone, with a message naming its index and
/// what is wrong.
pub fn parse_batch(
    text: &str,
    origin: &str,
    limits: &toolgate_schema::Limits,
) -> anyhow::Result<Vec<Result<ScopedCall, Rejected>>> {
    // Two levels for the array and the call object.
    let batch_limits = toolgate_schema::Limits {
        max_depth: limits.max_depth + 2,
        max_bytes: usize::MAX,
    };
    let value = toolgate_schema::parse(text, &batch_limits)
        .with_context(|| format!("{origin} is not an acceptable batch"))?;
    let Value::Array(items) = value else {
        bail!(
            "{origin} is not a batch of tool calls: expected a JSON array [{{\"id\", \"name\", \"arguments\"}}, ...]"
        );
    };
    let schema = toolgate_schema::Schema::compile(&json!({
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "name": {"type": "string"},
            "arguments": {"oneOf": [{"type": "object"}, {"type": "string"}]},
            "scope": {"type": "string"}
        },
        "required": ["id", "name"],
        "additionalProperties": false
    }))
    .expect("the call schema compiles");
    Ok(items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let id = item
                .get("id")
                .and_then(Value::as_str)
                .map(String::from)
                .unwrap_or_else(|| format!("#{i}"));
            let name = item
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let reject = |message: String| Rejected {
                id: id.clone(),
                name: name.clone(),
                message: format!("call {i} of {origin} was not run: {message}"),
                raw: item.to_string(),
            };
            if let Err(violations) = schema.validate(&item) {
                return Err(reject(format!(
                    "it is not a tool call {{\"id\", \"name\", \"arguments\"}}: {}",
                    violations
                        .iter()
                        .map(|v| v.to_string())
                        .collect::<Vec<_>>()
                        .join("; ")
                )));
            }
            let arguments = match item.get("arguments") {
                None => Value::Object(Default::default()),
                Some(Value::String(text)) => match toolgate_schema::parse(text, limits) {
                    Ok(v @ Value::Object(_)) => v,
                    Ok(_) => {
                        return Err(reject(
                            "its `arguments` string does not hold a JSON object".into(),
                        ));
                    }
                    Err(e) => {
                        return Err(reject(format!(
                            "its `arguments` string is not acceptable JSON: {e}"
                        )));
                    }
                },
                Some(v) => v.clone(),
            };
            Ok(ScopedCall {
                call: ToolCall::new(id.clone(), name.clone(), arguments),
                scope: item.get("scope").and_then(Value::as_str).map(String::from),
            })
        })
        .collect())
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
    // The calls are recorded unless `[audit] enabled = false`.
    let mut builder = global.builder()?.audit_by_default(true);
    if let Some(n) = args.max_parallel {
        builder = builder.max_parallel(n.into());
    }
    let host = builder.build().await?;
    // The batch may call bridged tools: wait for the MCP servers' first
    // attempts (each bounded by its `connect_timeout_ms`); one that fails
    // is reported below, and only its calls fail.
    host.wait_for_mcp(host.mcp_connect_timeout()).await;
    super::report_problems(&host);
    super::refuse_if_blocked(&host)?;
    let parsed = match parse_batch(&text, &origin, &host.settings().limits) {
        Ok(parsed) => parsed,
        Err(e) => {
            // Refused before the pipeline: recorded all the same.
            record_rejected(&host, None, &args.scope, &origin, text.as_bytes(), &e)?;
            host.shutdown().await;
            return Err(e);
        }
    };
    for c in &parsed {
        if let Err(r) = c {
            record_rejected(
                &host,
                Some(r),
                &args.scope,
                &origin,
                r.raw.as_bytes(),
                &anyhow::anyhow!("{}", r.message),
            )?;
        }
    }
    let turn = TurnOptions {
        agent_scope: args.scope,
        ..Default::default()
    };
    // Consecutive calls of one scope are one turn; turns run in the
    // batch's order (a change of scope is a barrier), results in model order.
    let mut turns: Vec<(String, Vec<ToolCall>)> = Vec::new();
    for c in parsed.iter().filter_map(|c| c.as_ref().ok()) {
        let scope = c.scope.clone().unwrap_or_else(|| turn.agent_scope.clone());
        match turns.last_mut() {
            Some((s, batch)) if *s == scope => batch.push(c.call.clone()),
            _ => turns.push((scope, vec![c.call.clone()])),
        }
    }
    let cancel = turn.cancel.clone();
    let ctrl_c = tokio::spawn(async move {
        let signal = super::serve::stop_signal().await;
        eprintln!(
            "toolgate: {signal}; cancelling the turn (running calls are stopped, the rest are not started)"
        );
        cancel.cancel();
    });
    let mut outcome = Ok(Vec::new());
    for (scope, batch) in turns {
        let turn = TurnOptions {
            agent_scope: scope,
            ..turn.clone()
        };
        match host.execute_tool_calls(batch, &turn).await {
            Ok(records) => {
                if let Ok(all) = &mut outcome {
                    all.extend(records);
                }
            }
            Err(e) => {
                outcome = Err(e);
                break;
            }
        }
    }
    ctrl_c.abort();
    // The turn is over, and so is this host: no background job it started
    // may outlive it.
    host.shutdown().await;
    // A scheduler failure is a host bug, not a result: report it and print
    // no records (none is fabricated, and a partial batch would pass for a
    // whole one).
    let records = match outcome {
        // Put each rejected call's record back at its place.
        Ok(records) => {
            let mut ran = records.into_iter();
            parsed
                .iter()
                .filter_map(|c| match c {
                    Ok(_) => ran.next(),
                    Err(rejected) => Some(rejected.record()),
                })
                .collect::<Vec<_>>()
        }
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
    super::print_out(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// The audit record of input refused before the pipeline: one call of the
/// batch (`call`), or the whole input. A record that cannot be written ends
/// the run (fail closed) unless `[audit] on_failure = "continue"`.
fn record_rejected(
    host: &toolgate::Toolgate,
    call: Option<&Rejected>,
    scope: &str,
    origin: &str,
    raw: &[u8],
    why: &anyhow::Error,
) -> anyhow::Result<()> {
    let Some(audit) = host.audit() else {
        return Ok(());
    };
    let written = audit.rejected(
        call.map(|c| c.id.as_str()),
        call.map(|c| c.name.as_str()),
        scope,
        origin,
        raw,
        &format!("{why:#}"),
    );
    match written {
        Err(e) if !audit.continues_on_failure() => Err(anyhow::anyhow!(
            "{e}: the input refused was not recorded, so nothing is run"
        )),
        Err(e) => {
            tracing::error!(error = %e, "a refused call was not recorded (on_failure = \"continue\")");
            Ok(())
        }
        Ok(()) => Ok(()),
    }
}
