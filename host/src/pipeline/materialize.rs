//! Stage A, materialize: everything that happens before any policy runs.
//!
//! In order: Code Mode collapse (a direct call to anything but `run_code` is
//! refused here, deterministically, before any hook, approval or guard could
//! see it; a call a program makes — it has a parent — is let through, unless
//! it is `run_code` again); a generation whose policies did not all load refuses the call
//! (fail closed); a turn already cancelled ends as `ABORTED_BEFORE_DISPATCH`; the
//! tool is looked up; the arguments are snapshotted losslessly, validated
//! against the tool's compiled schema, and frozen (`Arc<Value>`, never
//! mutated again).

use std::sync::Arc;

use serde_json::json;

use super::{Finished, PipelineSettings};
use crate::call::ToolMeta;
use crate::call::{CallInfo, ToolCall};
use crate::outcome::{CallError, CallRecord, ErrorCode, Outcome, Stage};
use crate::registry::Generation;
use crate::tool::ToolEntry;
use crate::turn::TurnOptions;

/// The reserved Code Mode tool.
pub const RUN_CODE: &str = "run_code";

/// Materialize a call; `Err` is the finished early result.
pub fn run(
    generation: &Generation,
    settings: &PipelineSettings,
    call: ToolCall,
    turn: &TurnOptions,
    token: u64,
) -> Result<(Arc<CallInfo>, Arc<ToolEntry>), Box<Finished>> {
    // A tool `[[access]]` keeps from this caller is, to it, no tool at
    // all: the same answer as a name nobody has, and no list or
    // suggestion names it.
    let access = settings.access.load();
    let visible = |tool: &str| access.allows(tool, turn.caller.as_deref());
    let entry = generation
        .tools
        .get(&call.name)
        .filter(|_| visible(&call.name))
        .cloned();
    let meta = entry
        .as_ref()
        .map(|e| e.def.meta.clone())
        .unwrap_or_else(ToolMeta::unknown);
    let ToolCall {
        id,
        name,
        arguments,
    } = call;
    let info = |arguments: serde_json::Value| {
        Arc::new(CallInfo::new(
            token,
            id.clone(),
            name.clone(),
            arguments,
            {
                let mut origin = turn.origin();
                origin.code_mode |= settings.code_mode;
                origin
            },
            meta.clone(),
        ))
    };
    let early = |info: Arc<CallInfo>, error: CallError| {
        tracing::info!(
            stage = "materialize",
            code = %error.code,
            decided_by = error.decided_by.as_deref().unwrap_or(""),
            "refused before any policy"
        );
        Err(Box::new(Finished {
            record: CallRecord::freeze(
                info.call_id.clone(),
                info.tool_name.clone(),
                Outcome::failure(error),
                Vec::new(),
            ),
            info,
            span: tracing::Span::none(),
            decisions: Vec::new(),
            elapsed_us: 0,
            intent: None,
            notes: Vec::new(),
        }))
    };

    let nested = turn.parent_id.is_some();
    if nested && name == RUN_CODE {
        let error = CallError::new(
            ErrorCode::Denied,
            Stage::Materialize,
            format!("`{RUN_CODE}` cannot be called from inside a program: call the tools directly"),
        )
        .decided_by("code-mode");
        return early(info(serde_json::Value::Null), error);
    }
    if (turn.code_mode || settings.code_mode) && !nested && name != RUN_CODE {
        let error = CallError::new(
            ErrorCode::Denied,
            Stage::Materialize,
            format!(
                "Code Mode is on: call `{name}` from inside `{RUN_CODE}`; direct tool calls are refused"
            ),
        )
        .decided_by("code-mode");
        return early(info(serde_json::Value::Null), error);
    }
    if !generation.blocked.is_empty() {
        let error = CallError::new(
            ErrorCode::Denied,
            Stage::Materialize,
            format!(
                "the host runs no calls: {} that might be a policy did not load ({}); fix it, or mark it `optional = true` under [plugins.NAME] to run without it",
                if generation.blocked.len() == 1 { "a plugin" } else { "plugins" },
                generation
                    .blocked
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        )
        .decided_by("host");
        return early(info(serde_json::Value::Null), error);
    }
    if turn.cancel.is_cancelled() {
        let i = info(serde_json::Value::Null);
        let error = aborted_error();
        return early(i, error);
    }
    let Some(entry) = entry else {
        let error = CallError::new(
            ErrorCode::UnknownTool,
            Stage::Materialize,
            unknown_tool_message(generation, &name, &visible),
        )
        .with_details(json!({
            "available": generation.tools.keys().filter(|k| visible(k)).collect::<Vec<_>>()
        }));
        return early(info(serde_json::Value::Null), error);
    };

    // Lossless snapshot: depth, size, integer range, finite numbers.
    if let Err(e) = toolgate_schema::check_value(&arguments, &settings.limits) {
        let error = CallError::new(
            ErrorCode::InvalidArgs,
            Stage::Materialize,
            format!("arguments of `{name}` cannot be accepted: {e}"),
        )
        .with_details(json!({ "violations": [e.to_violation()] }));
        // The arguments are not kept: they may be what broke the limits.
        return early(info(serde_json::Value::Null), error);
    }
    if let Err(violations) = entry.parameters.validate(&arguments) {
        let shown = violations.len().min(5);
        let mut summary = toolgate_schema::summarize(&violations[..shown]);
        if violations.len() > shown {
            summary.push_str(&format!(
                "; and {} more (see details)",
                violations.len() - shown
            ));
        }
        let error = CallError::new(
            ErrorCode::InvalidArgs,
            Stage::Materialize,
            format!("invalid arguments for `{name}`: {summary}"),
        )
        .with_details(json!({ "violations": violations }));
        return early(info(arguments), error);
    }
    let info = info(arguments);
    tracing::debug!(stage = "materialize", "arguments valid and frozen");
    Ok((info, entry))
}

fn aborted_error() -> CallError {
    CallError::new(
        ErrorCode::AbortedBeforeDispatch,
        Stage::Materialize,
        "the turn was cancelled before this call was dispatched",
    )
}

/// The result of a call whose turn was cancelled before its body started.
pub fn aborted_before_dispatch(_info: &CallInfo) -> Outcome {
    Outcome::failure(aborted_error())
}

fn unknown_tool_message(
    generation: &Generation,
    name: &str,
    visible: &dyn Fn(&str) -> bool,
) -> String {
    let mut close: Vec<&str> = generation
        .tools
        .keys()
        .filter(|k| similar(k, name) && visible(k))
        .map(String::as_str)
        .collect();
    close.truncate(3);
    let mut message = if close.is_empty() {
        format!("no tool named `{name}` is available")
    } else {
        format!(
            "no tool named `{name}` is available; did you mean {}?",
            close
                .iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(" or ")
        )
    };
    // A bridged server that is down may be why: the one the name's
    // `mcp__SERVER__` prefix names, else every one that is down.
    let down: Vec<_> = generation
        .problems
        .iter()
        .filter(|p| p.kind == crate::plugin::loader::LoadErrorKind::ServerDown)
        .collect();
    let named: Vec<_> = down
        .iter()
        .filter(|p| name.starts_with(&format!("mcp__{}__", p.plugin)))
        .collect();
    let shown: Vec<String> = if named.is_empty() {
        down.iter().collect::<Vec<_>>()
    } else {
        named.into_iter().collect()
    }
    .iter()
    .take(3)
    .map(|p| format!("`{}`: {}", p.plugin, p.message))
    .collect();
    if !shown.is_empty() {
        message.push_str(&format!(
            " (an MCP server that may provide it is down — {})",
            shown.join("; ")
        ));
    }
    message
}

/// Cheap similarity: same name ignoring case and `-`/`_`, or one contains
/// the other, or edit distance ≤ 2.
fn similar(a: &str, b: &str) -> bool {
    let norm = |s: &str| s.to_ascii_lowercase().replace(['-', '_'], "");
    let (na, nb) = (norm(a), norm(b));
    if na == nb || (nb.len() >= 3 && (na.contains(&nb) || nb.contains(&na))) {
        return true;
    }
    edit_distance(&na, &nb) <= 2
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    #[test]
    fn similarity() {
        assert!(super::similar("read_file", "readfile"));
        assert!(super::similar("read_file", "read_fil"));
        assert!(!super::similar("read_file", "bash"));
    }
}
