//! An observer that logs one line per finished call: id, tool, outcome and
//! error code. Read it with `RUST_LOG=toolgate::guest=info` (add
//! `--log-format json` for machine-readable lines).

use toolgate_sdk::{Call, Outcome, ResultObserver};

struct AuditLog;

impl ResultObserver for AuditLog {
    fn on_result(call: &Call, result: &Outcome) {
        let (outcome, code) = match result.error() {
            None => ("ok", String::new()),
            Some(e) => ("error", e.code.clone()),
        };
        let line = serde_json::json!({
            "audit": "tool-call",
            "id": call.id(),
            "tool": call.tool(),
            "scope": call.agent_scope(),
            "outcome": outcome,
            "code": code,
        });
        toolgate_sdk::log::info(line.to_string());
    }
}

toolgate_sdk::export! { observer: AuditLog }
