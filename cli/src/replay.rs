//! `toolgate replay FILE`: the calls of an audit record against a policy
//! set — materialize, pre-execute, approval (answered as recorded), guards
//! — without running any tool body, observer or other hook with effects;
//! reports every call whose outcome changes.
//!
//! Exit status: 0 when no outcome changed, 1 when one did, 2 on error (a
//! file that cannot be read, a host that cannot be built). A call is
//! *changed* when it was let through and now is not, or the reverse;
//! *redecided* when its outcome is the same but another policy or stage
//! decided it. A call recorded with `arguments = "digest"` (or arguments
//! over the record's cap) cannot be replayed (`notReplayable`); a call with
//! sensitive arguments (`[audit] sensitive`: kept as digests) is not re-run
//! and is listed in `notComparable`, as is a call whose replay asks for an
//! approval it was never asked for (answered "unavailable", a deny), and a
//! call to a bridged MCP server's tool that the replay's host does not
//! have (its server is not configured, or did not connect within its
//! timeout: replay waits for the configured servers first). An approval
//! asked again is answered as recorded and by whom it was recorded, so it
//! is no redecision. A policy that reads state (kv, time) the record does
//! not hold cannot be told apart: policies are assumed deterministic given
//! the call.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use clap::Args;
use serde_json::{Value, json};

use super::GlobalArgs;
use toolgate::approval::{ApprovalAnswer, ApprovalRequest, Approver};
use toolgate::call::ToolCall;
use toolgate::pipeline::{self, Decision};
use toolgate::turn::TurnOptions;

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The audit record's file(s), rotated ones in any order. The policy
    /// set is the one the global options name (--plugins, --config,
    /// --no-default-plugins).
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
    /// Print {"calls", "changed", "redecided", "changes": [...]} as JSON.
    #[arg(long)]
    json: bool,
}

/// Answers an approval as the record says it was answered, under the
/// name of whoever answered it then.
struct AsRecorded {
    answer: Option<bool>,
    by: String,
    unrecorded: AtomicBool,
}

#[async_trait]
impl Approver for AsRecorded {
    fn name(&self) -> &str {
        &self.by
    }
    async fn approve(&self, _request: &ApprovalRequest) -> ApprovalAnswer {
        match self.answer {
            Some(true) => ApprovalAnswer::Approve,
            Some(false) => ApprovalAnswer::Deny("denied when recorded".into()),
            None => {
                self.unrecorded.store(true, Ordering::Relaxed);
                ApprovalAnswer::Unavailable("this call was not asked about when recorded".into())
            }
        }
    }
}

/// Whether a recorded call got through stage B (its body ran).
fn recorded_allowed(call: &Value) -> bool {
    !matches!(
        call["result"]["stage"].as_str(),
        Some("materialize" | "pre_execute" | "approval" | "guard")
    ) && call["result"]["code"] != "ABORTED_BEFORE_DISPATCH"
}

/// Who decided: the denial's stage and decider, or the pre-execute decider
/// of an allowed call.
fn decider(allowed: bool, decisions: &[Decision], stage: Option<&str>, by: Option<&str>) -> String {
    if allowed {
        decisions
            .iter()
            .find(|d| d.stage == "pre_execute")
            .map(|d| format!("pre_execute:{}", d.decided_by))
            .unwrap_or_default()
    } else {
        format!("{}:{}", stage.unwrap_or(""), by.unwrap_or(""))
    }
}

pub async fn run(global: &GlobalArgs, args: ReplayArgs) -> anyhow::Result<ExitCode> {
    match replay(global, args).await {
        Ok(code) => Ok(code),
        Err(e) => {
            eprintln!("toolgate: {e:#}");
            Ok(ExitCode::from(2))
        }
    }
}

async fn replay(global: &GlobalArgs, args: ReplayArgs) -> anyhow::Result<ExitCode> {
    let mut files = args.files.clone();
    toolgate::audit::verify::chain_order(&mut files);
    let mut calls = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", f.display()))?;
        for (i, line) in text.lines().enumerate() {
            let v: Value = serde_json::from_str(line).map_err(|e| {
                anyhow::anyhow!(
                    "{} line {}: not a record ({e}); run `toolgate audit verify`",
                    f.display(),
                    i + 1
                )
            })?;
            // A call's final record only: its intent (`started`) is the
            // same call, and a call never finished has no decision to
            // compare.
            if v["kind"] == "call" && v["parent"].is_null() {
                calls.push(v);
            }
        }
    }
    // The policy set under test; replay itself is not recorded.
    let host = global.builder()?.without_audit().build().await?;
    // Bridged tools: the configured servers first (each within its
    // connect timeout), or their calls are not comparable.
    if !host.mcp_servers().is_empty() {
        host.wait_for_mcp(host.mcp_connect_timeout()).await;
    }
    super::report_problems(&host);
    let mut changes = Vec::new();
    let mut redecided = Vec::new();
    let mut not_replayable = Vec::new();
    let mut not_comparable = Vec::new();
    for call in &calls {
        let seq = call["seq"].as_u64().unwrap_or(0);
        let tool = call["tool"].as_str().unwrap_or("").to_string();
        // Arguments kept in part (`[audit] sensitive`): a policy may read
        // exactly what is missing, so its decision cannot be compared.
        if call["sensitive"].as_array().is_some_and(|s| !s.is_empty()) {
            not_comparable.push(seq);
            continue;
        }
        if call["replayable"] != true {
            not_replayable.push(seq);
            continue;
        }
        let recorded: Vec<Decision> =
            serde_json::from_value(call["decisions"].clone()).unwrap_or_default();
        let approval = recorded.iter().find(|d| d.stage == "approval");
        let approver = Arc::new(AsRecorded {
            answer: approval.map(|d| d.verdict == "approve"),
            by: approval.map_or_else(|| "as-recorded".into(), |d| d.decided_by.clone()),
            unrecorded: AtomicBool::new(false),
        });
        // The caller `[auth]` validated, as recorded (and its session): a
        // policy that decides by caller decides for the same one.
        let caller = match &call["client"]["caller"] {
            Value::Null => None,
            recorded => {
                match serde_json::from_value::<toolgate::identity::Caller>(recorded.clone()) {
                    Ok(mut c) => {
                        c.session = call["client"]["session"].as_str().map(str::to_owned);
                        Some(Arc::new(c))
                    }
                    // Not the caller the call had: its decisions cannot be
                    // compared.
                    Err(_) => {
                        not_comparable.push(seq);
                        continue;
                    }
                }
            }
        };
        let turn = TurnOptions {
            agent_scope: call["scope"].as_str().unwrap_or("").to_string(),
            code_mode: call["codeMode"] == true,
            approver: Some(approver.clone()),
            caller,
            ..Default::default()
        };
        let generation = host.generation_for(&turn.agent_scope);
        // A bridged server's tool the replay's host does not have: its
        // policies cannot be asked about a tool that is not there.
        let bridged = tool.starts_with("mcp__")
            || host
                .mcp_servers()
                .iter()
                .any(|s| call["provider"] == s.name.as_str());
        if bridged && !generation.tools.contains_key(&tool) {
            not_comparable.push(seq);
            continue;
        }
        let settings = host.settings();
        let tc = ToolCall::new(
            call["callId"].as_str().unwrap_or(""),
            tool.clone(),
            call["arguments"].clone(),
        );
        // Stage A and B only: an admitted call is dropped, its body never runs.
        let (now_allowed, decisions, stage, by) =
            match pipeline::prepare(&generation, settings, tc, &turn, host.next_token()) {
                Err(early) => {
                    let e = early.record.error.clone();
                    (
                        false,
                        early.decisions,
                        e.as_ref().map(|e| e.stage.as_str().to_string()),
                        e.and_then(|e| e.decided_by),
                    )
                }
                Ok(prepared) => match pipeline::admit(prepared, settings, &turn).await {
                    Ok(admitted) => (true, admitted.decisions().to_vec(), None, None),
                    Err(denied) => {
                        let e = denied.record.error.clone();
                        (
                            false,
                            denied.decisions,
                            e.as_ref().map(|e| e.stage.as_str().to_string()),
                            e.and_then(|e| e.decided_by),
                        )
                    }
                },
            };
        if approver.unrecorded.load(Ordering::Relaxed) {
            not_comparable.push(seq);
        }
        let was_allowed = recorded_allowed(call);
        let label = |a: bool| if a { "allowed" } else { "denied" };
        let before_by = decider(
            was_allowed,
            &recorded,
            call["result"]["stage"].as_str(),
            call["result"]["decidedBy"].as_str(),
        );
        let after_by = decider(now_allowed, &decisions, stage.as_deref(), by.as_deref());
        if was_allowed != now_allowed {
            changes.push(json!({
                "seq": seq, "tool": tool,
                "before": label(was_allowed), "after": label(now_allowed),
                "decidedBy": if now_allowed { before_by } else { after_by },
            }));
        } else if before_by != after_by {
            redecided
                .push(json!({"seq": seq, "tool": tool, "before": before_by, "after": after_by}));
        }
    }
    let report = json!({
        "calls": calls.len(),
        "changed": changes.len(),
        "redecided": redecided.len(),
        "changes": changes,
        "redecisions": redecided,
        "notReplayable": not_replayable,
        "notComparable": not_comparable,
    });
    if args.json {
        println!("{report}");
    } else {
        for c in report["changes"].as_array().into_iter().flatten() {
            println!(
                "changed   #{:<8} {:<24} {} → {} ({})",
                c["seq"],
                c["tool"].as_str().unwrap_or(""),
                c["before"].as_str().unwrap_or(""),
                c["after"].as_str().unwrap_or(""),
                c["decidedBy"].as_str().unwrap_or("")
            );
        }
        for c in report["redecisions"].as_array().into_iter().flatten() {
            println!(
                "redecided #{:<8} {:<24} {} → {}",
                c["seq"],
                c["tool"].as_str().unwrap_or(""),
                c["before"].as_str().unwrap_or(""),
                c["after"].as_str().unwrap_or("")
            );
        }
        println!(
            "{} call(s) replayed: {} changed, {} redecided, {} not replayable, {} not comparable",
            calls.len() - not_replayable.len(),
            changes.len(),
            redecided.len(),
            not_replayable.len(),
            not_comparable.len()
        );
    }
    Ok(if changes.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
