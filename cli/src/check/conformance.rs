//! `toolgate check FILE.wasm --conformance`: every role and export of one
//! component, exercised with generated inputs, against the contract.
//!
//! What counts as a violation (each one a thing the host would hold
//! against the component in production, named with the input that showed
//! it):
//! * it does not load: a schema the host rejects, a seam it imports but
//!   cannot be granted, an export of the wrong type (the load report);
//! * a policy export traps, answers something unacceptable, or overruns
//!   its budget (`policy_timeout_ms`) on any input — unusual arguments
//!   included (empty, deep, large, non-ASCII, every JSON type);
//! * a policy's message (a denial reason, a question) is longer than the
//!   host keeps (`max_message_bytes`), or a finalizer's or hook's content
//!   exceeds the result budgets (`max_content_blocks`, `max_content_bytes`);
//! * a tool's classifier traps or answers slower than its budget (250 ms);
//! * a tool's body traps on arguments its own schema accepts, returns a
//!   value its output schema rejects, or its `render` fails.
//!
//! Invalid inputs: arguments that break a tool's schema must be refused by
//! the host before the tool runs (`INVALID_ARGS`); a tool whose schema
//! accepts them is reported (a note, not a violation: a permissive schema
//! is legal, but then its body must cope).
//!
//! Every check is timed; the report gives the time per call.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Report, human, stats};
use toolgate::call::ToolCall;
use toolgate::host::Toolgate;
use toolgate::turn::TurnOptions;
use toolgate::{CallInfo, CallRecord};

/// The name of the stand-in tool policies are exercised on.
pub const STAND_IN: &str = "conformance_probe";

/// One check and what it found.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// The export exercised (`guard`, `tool/read execute`, …).
    pub export: String,
    /// The input, in a few words.
    pub input: String,
    /// `ok`, `violation` or `note`.
    pub status: &'static str,
    /// What happened.
    pub detail: String,
    /// Time of the call, microseconds.
    pub us: u64,
}

/// Policy inputs: a label and the stand-in tool's arguments.
fn policy_inputs() -> Vec<(&'static str, Value)> {
    let mut deep = json!("bottom");
    for _ in 0..48 {
        deep = json!([deep]);
    }
    let many: serde_json::Map<String, Value> =
        (0..1000).map(|i| (format!("k{i}"), json!(i))).collect();
    vec![
        ("no arguments", json!({})),
        (
            "a path and a command",
            json!({"path": "src/main.rs", "command": "ls -la"}),
        ),
        (
            "every JSON type",
            json!({"s": "x", "n": -1.5e300, "i": 9007199254740991_i64, "b": true, "z": null, "a": [1, "two", {"three": 3}], "o": {"p": {}}}),
        ),
        (
            "non-ASCII and escapes",
            json!({"text": "naïve \"quoted\" \\ back\u{0000}slash\n\ttab 🎉 \u{202e}rtl", "путь": "/tmp/文件"}),
        ),
        ("48 nested arrays", json!({ "deep": deep })),
        ("1000 keys", Value::Object(many)),
        ("a 256 KiB string", json!({"blob": "x".repeat(256 << 10)})),
        ("a text reply", json!({"reply": "hello from the tool"})),
        ("an empty reply", json!({"reply": ""})),
        (
            "a 280 KiB reply with key-like text",
            json!({"reply": "token sk-abcdefghijklmnopqrstuvwxyz ".repeat(1 << 13)}),
        ),
        (
            "a JSON reply",
            json!({"reply": {"rows": [1, 2, 3], "ok": true}}),
        ),
        (
            "a failing tool",
            json!({"fail": "the stand-in tool failed on purpose"}),
        ),
    ]
}

/// Run every check.
pub async fn run(host: &Toolgate, plugin: &str) -> Vec<Finding> {
    let generation = host.generation();
    let mut findings = Vec::new();
    let Some(info) = generation.plugins.iter().find(|p| p.name == plugin) else {
        return findings;
    };
    let roles: Vec<&str> = info.roles.iter().map(|r| r.as_str()).collect();
    let policy_roles: Vec<&str> = roles.iter().copied().filter(|r| *r != "tool").collect();
    if !policy_roles.is_empty() {
        let export = policy_roles.join(", ");
        for (label, args) in policy_inputs() {
            let (record, took) = call(host, STAND_IN, args.clone()).await;
            findings.push(judge_policy(&export, label, &record, plugin, took));
            // A failing finalizer or observer leaves no trace in the
            // record (the content is kept, the failure logged): call them
            // directly on what the pipeline produced.
            if let Some(f) = direct(host, plugin, label, args, &record).await {
                findings.push(f);
            }
        }
    }
    for tool in &info.tools {
        let Some(entry) = generation.tools.get(tool) else {
            continue;
        };
        let params = &entry.def.parameters;
        let valid = generate(params, 0);
        // The classifier, directly (it is asked before every call).
        if entry
            .def
            .meta
            .features
            .contains(toolgate::tool::Features::CLASSIFIER)
        {
            let info = Arc::new(CallInfo::new(
                0,
                "conformance".into(),
                tool.clone(),
                valid.clone(),
                TurnOptions::default().origin(),
                entry.def.meta.clone(),
            ));
            let started = Instant::now();
            let answer = entry.body.is_concurrency_safe(&info).await;
            let took = started.elapsed();
            let budget = toolgate::budgets::Budgets::default().classify_timeout;
            findings.push(Finding {
                export: format!("tool/{tool} is-concurrency-safe"),
                input: "generated valid arguments".into(),
                status: if answer.is_none() || took > budget {
                    "violation"
                } else {
                    "ok"
                },
                detail: match answer {
                    Some(a) if took <= budget => format!("answered {a}"),
                    Some(_) => format!(
                        "answered after {}, over its budget of {} ms: the call is made exclusive",
                        human(took),
                        budget.as_millis()
                    ),
                    None => "trapped or did not answer: the call is made exclusive".into(),
                },
                us: took.as_micros() as u64,
            });
        }
        let (record, took) = call(host, tool, valid.clone()).await;
        findings.push(judge_tool(tool, "generated valid arguments", &record, took));
        for (label, args) in invalid(params) {
            let (record, took) = call(host, tool, args).await;
            let refused = record
                .error
                .as_ref()
                .is_some_and(|e| e.code.as_str() == "INVALID_ARGS");
            findings.push(if refused {
                Finding {
                    export: format!("tool/{tool} parameters"),
                    input: label,
                    status: "ok",
                    detail: "refused by the host before the tool ran (INVALID_ARGS)".into(),
                    us: took.as_micros() as u64,
                }
            } else {
                let mut f = judge_tool(tool, &label, &record, took);
                if f.status == "ok" {
                    f.status = "note";
                    f.detail = format!("its schema accepts this, so the body ran: {}", f.detail);
                }
                f
            });
        }
    }
    findings
}

/// Call this plugin's finalizer and observer directly on `record`; a
/// finding only when one fails.
async fn direct(
    host: &Toolgate,
    plugin: &str,
    label: &str,
    args: Value,
    record: &CallRecord,
) -> Option<Finding> {
    let generation = host.generation();
    let meta = generation.tools.get(STAND_IN)?.def.meta.clone();
    let value = args.get("reply").cloned().unwrap_or_else(|| args.clone());
    let info = Arc::new(CallInfo::new(
        0,
        "conformance".into(),
        STAND_IN.into(),
        args,
        TurnOptions::default().origin(),
        meta,
    ));
    let outcome = Arc::new(match &record.error {
        None => toolgate::Outcome::Success {
            value,
            content: record.content.clone(),
            meta: None,
        },
        Some(e) => toolgate::Outcome::Failure {
            error: e.clone(),
            content: record.content.clone(),
        },
    });
    let record = Arc::new(record.clone());
    let policies = &generation.policies;
    for l in policies.finalizers.iter().filter(|l| l.name == plugin) {
        let started = Instant::now();
        if let Err(e) = l.policy.finalize_content(&info, &outcome).await {
            return Some(Finding {
                export: "finalizer (called directly)".into(),
                input: label.into(),
                status: "violation",
                detail: format!("finalize-content {}", short(&e.to_string())),
                us: started.elapsed().as_micros() as u64,
            });
        }
    }
    for l in policies.observers.iter().filter(|l| l.name == plugin) {
        let started = Instant::now();
        if let Err(e) = l.policy.on_result(&info, &record).await {
            return Some(Finding {
                export: "observer (called directly)".into(),
                input: label.into(),
                status: "violation",
                detail: format!("on-result {}", short(&e.to_string())),
                us: started.elapsed().as_micros() as u64,
            });
        }
    }
    None
}

async fn call(host: &Toolgate, tool: &str, arguments: Value) -> (CallRecord, Duration) {
    let started = Instant::now();
    let record = host
        .call(
            ToolCall::new("conformance", tool, arguments),
            &TurnOptions::default(),
        )
        .await;
    (record, started.elapsed())
}

/// Whether the record shows `plugin` misbehaving as a policy.
fn judge_policy(
    export: &str,
    label: &str,
    record: &CallRecord,
    plugin: &str,
    took: Duration,
) -> Finding {
    let budgets = toolgate::budgets::Budgets::default();
    let mut status = "ok";
    let detail = match &record.error {
        Some(e)
            if e.decided_by.as_deref() == Some(plugin)
                || e.message.contains(&format!("`{plugin}`")) =>
        {
            let m = &e.message;
            // A trap, an overrun, an unacceptable answer, or a message the
            // host had to cut.
            if m.contains("failed (")
                || m.contains("did not answer within")
                || m.contains("unacceptable answer")
                || m.contains("[cut by the host")
            {
                status = "violation";
            }
            format!("{} at {}: {}", e.code.as_str(), e.stage.as_str(), short(m))
        }
        Some(e) if e.stage.as_str() == "approval" => {
            format!("asked: {}", short(&e.message))
        }
        Some(e) => format!(
            "{} at {} (by {})",
            e.code.as_str(),
            e.stage.as_str(),
            e.decided_by.as_deref().unwrap_or("the host")
        ),
        None => {
            let bytes: usize = record
                .content
                .iter()
                .map(|c| serde_json::to_string(c).map(|s| s.len()).unwrap_or(0))
                .sum();
            if record.content.len() > budgets.max_content_blocks {
                status = "violation";
            }
            format!(
                "allowed; the model sees {} block(s), {bytes} bytes",
                record.content.len()
            )
        }
    };
    Finding {
        export: export.into(),
        input: label.into(),
        status,
        detail,
        us: took.as_micros() as u64,
    }
}

fn judge_tool(tool: &str, label: &str, record: &CallRecord, took: Duration) -> Finding {
    let (status, detail) = match &record.error {
        None => (
            "ok",
            format!("succeeded with {} content block(s)", record.content.len()),
        ),
        Some(e) => match e.code.as_str() {
            "TRAPPED" | "INVALID_RESULT" | "TIMEOUT" | "INTERNAL" => (
                "violation",
                format!("{}: {}", e.code.as_str(), short(&e.message)),
            ),
            code => (
                "ok",
                format!("failed with its own error {code}: {}", short(&e.message)),
            ),
        },
    };
    Finding {
        export: format!("tool/{tool} execute + render"),
        input: label.into(),
        status,
        detail,
        us: took.as_micros() as u64,
    }
}

fn short(s: &str) -> String {
    toolgate::budgets::cut(s.replace('\n', " "), 300)
}

/// A value the schema accepts (the first choice of every alternative).
pub fn generate(schema: &Value, depth: usize) -> Value {
    if depth > 16 {
        return Value::Null;
    }
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    if let Some(first) = schema
        .get("oneOf")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return generate(first, depth + 1);
    }
    let ty = match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts.first().and_then(Value::as_str).unwrap_or("null"),
        _ if schema.get("properties").is_some() => "object",
        _ => "string",
    };
    match ty {
        "object" => {
            let mut out = serde_json::Map::new();
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, v) in props {
                    // Required properties, and optional ones a model would
                    // usually fill in too.
                    if required.contains(&k.as_str()) || depth == 0 {
                        out.insert(k.clone(), generate(v, depth + 1));
                    }
                }
            }
            Value::Object(out)
        }
        "array" => match schema.get("items") {
            Some(items) => json!([generate(items, depth + 1)]),
            None => json!([]),
        },
        "string" => json!("example"),
        "integer" => json!(1),
        "number" => json!(1.5),
        "boolean" => json!(true),
        _ => Value::Null,
    }
}

/// Arguments the schema should refuse: a missing required property, a
/// property of the wrong type, an unknown property.
fn invalid(schema: &Value) -> Vec<(String, Value)> {
    let valid = generate(schema, 0);
    let mut out = Vec::new();
    let Some(obj) = valid.as_object() else {
        return out;
    };
    let required: Vec<String> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    if let Some(first) = required.first() {
        let mut a = obj.clone();
        a.remove(first);
        out.push((format!("without the required `{first}`"), Value::Object(a)));
    }
    if let Some((k, v)) = obj.iter().next() {
        let wrong = match v {
            Value::String(_) => json!(12345),
            _ => json!("not the right type"),
        };
        let mut a = obj.clone();
        a.insert(k.clone(), wrong);
        out.push((format!("`{k}` of the wrong type"), Value::Object(a)));
    }
    if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
        let mut a = obj.clone();
        a.insert("unexpected_property".into(), json!(1));
        out.push(("an unknown property".into(), Value::Object(a)));
    }
    out
}

/// Print the report; exit 1 when any violation was found.
pub fn print(
    file: &std::path::Path,
    report: &Report,
    findings: &[Finding],
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    let violations =
        findings.iter().filter(|f| f.status == "violation").count() + report.problems.len();
    let times = stats(
        findings
            .iter()
            .map(|f| Duration::from_micros(f.us))
            .collect(),
    );
    if as_json {
        let mut out = report.json().clone();
        out["conformance"] = json!({
            "checks": findings,
            "violations": violations,
            "medianUs": times.median.as_micros() as u64,
            "p99Us": times.p99.as_micros() as u64,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "{}: conformance of `{}` ({}; {} path)",
            file.display(),
            report.plugin_name(),
            report.roles().join(", "),
            report.call_path()
        );
        for p in &report.problems {
            println!("  VIOLATION  load: {p}");
        }
        for f in findings {
            println!(
                "  {:<10} {} on {}: {} ({})",
                match f.status {
                    "ok" => "ok",
                    "note" => "note",
                    _ => "VIOLATION",
                },
                f.export,
                f.input,
                f.detail,
                human(Duration::from_micros(f.us))
            );
        }
        println!(
            "{} checks, {violations} violation(s); time per call: median {}, p99 {}",
            findings.len(),
            human(times.median),
            human(times.p99)
        );
    }
    Ok(if violations == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_arguments_fit_their_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "mode": {"enum": ["a", "b"]},
                "n": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "opt": {"oneOf": [{"type": "boolean"}, {"type": "null"}]}
            },
            "required": ["path", "mode"],
            "additionalProperties": false
        });
        let compiled = toolgate_schema::Schema::compile(&schema).unwrap();
        let valid = generate(&schema, 0);
        assert!(compiled.validate(&valid).is_ok(), "{valid}");
        for (label, bad) in invalid(&schema) {
            assert!(compiled.validate(&bad).is_err(), "{label}: {bad}");
        }
    }
}
