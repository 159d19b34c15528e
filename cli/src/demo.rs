//! `toolgate demo`: a short scripted turn on the built-in plugins, with a
//! transcript of what every stage decided.
//!
//! The transcript is read from the pipeline's own tracing events (the same
//! ones `RUST_LOG=toolgate=info` prints), so the demo shows what really
//! happened, not a narration of what should have.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use clap::Args;
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use super::GlobalArgs;
use toolgate::call::ToolCall;
use toolgate::outcome::CallRecord;
use toolgate::pipeline::{ApprovalAnswer, ApprovalRequest, Approver};
use toolgate::turn::TurnOptions;

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Also print the full JSON results.
    #[arg(long)]
    json: bool,
}

/// One stage event of one call.
#[derive(Clone, Debug)]
struct Entry {
    call_id: String,
    fields: BTreeMap<String, String>,
}

/// Collects the pipeline's stage events, per call.
#[derive(Clone, Default)]
pub struct Transcript {
    entries: Arc<Mutex<Vec<Entry>>>,
}

struct CallId(String);

#[derive(Default)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Transcript {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().name() != "call" {
            return;
        }
        let mut f = Fields::default();
        attrs.record(&mut f);
        if let (Some(span), Some(call_id)) = (ctx.span(id), f.0.remove("id")) {
            span.extensions_mut().insert(CallId(call_id));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if !event.metadata().target().starts_with("toolgate") {
            return;
        }
        let Some(call_id) = ctx.event_scope(event).and_then(|scope| {
            scope
                .from_root()
                .find_map(|s| s.extensions().get::<CallId>().map(|c| c.0.clone()))
        }) else {
            return;
        };
        let mut f = Fields::default();
        event.record(&mut f);
        if let Ok(mut entries) = self.entries.lock() {
            entries.push(Entry {
                call_id,
                fields: f.0,
            });
        }
    }
}

impl Transcript {
    fn take(&self, call_id: &str) -> Vec<BTreeMap<String, String>> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let (mine, rest): (Vec<Entry>, Vec<Entry>) =
            entries.drain(..).partition(|e| e.call_id == call_id);
        *entries = rest;
        mine.into_iter().map(|e| e.fields).collect()
    }
}

/// The scripted turn: every call shows a different stage at work.
fn script() -> Vec<(&'static str, ToolCall)> {
    vec![
        (
            "a read-only listing: every stage allows",
            ToolCall::new("1", "list_dir", json!({"path": ".", "max_entries": 8})),
        ),
        (
            "reading a file, a window of numbered lines",
            ToolCall::new("2", "read", json!({"path": "notes.md", "limit": 4})),
        ),
        (
            "a secret: the secrets guard denies, whatever the hooks said",
            ToolCall::new("3", "read", json!({"path": ".env"})),
        ),
        (
            "arguments that do not match the schema: refused before any policy",
            ToolCall::new("4", "read", json!({"path": 42, "limt": 3})),
        ),
        (
            "a tool that does not exist",
            ToolCall::new("5", "raed", json!({"path": "notes.md"})),
        ),
        (
            "searching a WIT file (ripgrep's searcher, compiled to wasm)",
            ToolCall::new(
                "6",
                "grep",
                json!({"pattern": "variant pre-decision", "path": "wit", "output_mode": "content"}),
            ),
        ),
        (
            "a destructive tool: the ask-destructive hook asks, the approver says no",
            ToolCall::new("7", "bash", json!({"command": "rm -rf notes.md"})),
        ),
        (
            "approved this time, but the command outlives bash's time budget (300 ms in this demo): the timeout policy's deadline stops it",
            ToolCall::new(
                "8",
                "bash",
                json!({"command": "echo started; sleep 5; echo finished"}),
            ),
        ),
        (
            "approved, and sandboxed: the command cannot write outside the working directory",
            ToolCall::new(
                "9",
                "bash",
                json!({"command": "touch ../outside-the-grant; echo exit=$?"}),
            ),
        ),
    ]
}

/// The demo's working directory: a few files in a fresh temporary
/// directory, removed when the demo ends.
struct Workspace(std::path::PathBuf);

impl Workspace {
    fn make() -> anyhow::Result<Workspace> {
        let dir = std::env::temp_dir().join(format!("toolgate-demo-{}", std::process::id()));
        let files = [
            (
                "notes.md",
                "# Notes\n\nThe demo's workspace: toolgate's tools see this directory.\n\
                 Reads are windows of numbered lines.\nSecrets stay behind the guard.\n",
            ),
            (".env", "API_KEY=demo-secret-not-for-the-model\n"),
            (
                "wit/policy.wit",
                "package demo:policy;\n\ninterface decisions {\n    variant pre-decision {\n        allow,\n        deny(string),\n        ask(string),\n    }\n}\n",
            ),
        ];
        let made = (|| {
            std::fs::create_dir_all(dir.join("wit"))?;
            for (name, text) in files {
                std::fs::write(dir.join(name), text)?;
            }
            Ok::<_, std::io::Error>(())
        })();
        made.map_err(|e| {
            anyhow::anyhow!("cannot make the demo's workspace {}: {e}", dir.display())
        })?;
        Ok(Workspace(dir))
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The demo's approver: it answers from the script (no to call 7, yes to
/// the others), so the demo shows both answers without a terminal.
struct ScriptedApprover;

#[async_trait::async_trait]
impl Approver for ScriptedApprover {
    fn name(&self) -> &str {
        "scripted-approver"
    }
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        if request.call.call_id == "7" {
            ApprovalAnswer::Deny("the demo's scripted approver says no to deleting files".into())
        } else {
            ApprovalAnswer::Approve
        }
    }
}

fn stage_line(f: &BTreeMap<String, String>) -> Option<String> {
    let stage = f.get("stage")?;
    let get = |k: &str| f.get(k).map(String::as_str).unwrap_or("");
    let ms = f
        .get("elapsed_us")
        .and_then(|us| us.parse::<f64>().ok())
        .map(|us| format!(" ({:.2} ms)", us / 1000.0))
        .unwrap_or_default();
    let line = match stage.as_str() {
        "materialize" if f.contains_key("code") => {
            format!(
                "refused: {} (decided by {})",
                get("code"),
                if get("decided_by").is_empty() {
                    "the host"
                } else {
                    get("decided_by")
                }
            )
        }
        "materialize" => "arguments snapshotted, validated and frozen".to_string(),
        "pre_execute" if get("decided_by") == get("hook") => {
            format!("{} → {}{ms}", get("hook"), get("decision"))
        }
        "pre_execute" => format!(
            "{} → {} (passed on what {} decided){ms}",
            get("hook"),
            get("decision"),
            get("decided_by")
        ),
        "approval" => match f.get("answer") {
            None => format!("{} asked; no approval service, so: deny", get("asked_by")),
            Some(answer) => format!(
                "{} asked; {} answered {answer}",
                get("asked_by"),
                get("approver")
            ),
        },
        "guard" if get("denied") == "true" => {
            format!("{} → DENY: {}{ms}", get("guard"), get("reason"))
        }
        "guard" => format!("{} → pass{ms}", get("guard")),
        "execute" => format!(
            "{} wrapped the body (deadline from the tool's timeout-ms){ms}",
            get("wrapper")
        ),
        "body" => format!(
            "{} → {}{ms}",
            get("provider"),
            if get("is_error") == "true" {
                format!("error {}", get("code"))
            } else {
                "ok".to_string()
            }
        ),
        "post_execute" => format!("{} → {}{ms}", get("hook"), get("decision")),
        "finalize" => format!("{} ran{ms}", get("finalizer")),
        "result" if f.contains_key("observer") => format!("observer {} notified", get("observer")),
        "result" => return None,
        other => format!("{other}: {}", get("message")),
    };
    Some(format!("    {:<13} {line}", stage.replace('_', "-")))
}

fn summary(r: &CallRecord) -> String {
    // Up to three lines of what the model sees, each cut at 100 characters.
    let lines = |s: &str| -> String {
        let mut out: Vec<String> = s
            .lines()
            .filter(|l| !l.trim().is_empty())
            .take(3)
            .map(|l| {
                if l.chars().count() > 100 {
                    format!("{}…", l.chars().take(100).collect::<String>())
                } else {
                    l.to_string()
                }
            })
            .collect();
        if s.lines().filter(|l| !l.trim().is_empty()).count() > 3 {
            out.push("…".into());
        }
        out.join(" ⏎ ")
    };
    match &r.error {
        None => format!("ok: {}", lines(&r.text())),
        Some(e) => format!(
            "{} at {}{}: {}",
            e.code,
            e.stage,
            e.decided_by
                .as_ref()
                .map(|b| format!(" by {b}"))
                .unwrap_or_default(),
            lines(&e.message)
        ),
    }
}

pub async fn run(
    global: &GlobalArgs,
    args: DemoArgs,
    transcript: Transcript,
) -> anyhow::Result<ExitCode> {
    let mut config = global.load_config()?;
    // A short budget for bash, so the demo shows a deadline at work.
    config
        .tools
        .entry("bash".into())
        .or_default()
        .timeout_ms
        .get_or_insert(300);
    // A workspace of its own: the demo reads, searches and tries to
    // delete files there, wherever it is run from.
    let workspace = Workspace::make()?;
    let mut builder = global
        .builder()?
        .config(config)
        .workdir(workspace.0.clone());
    if global.approve.is_none() {
        builder = builder.approver(Arc::new(ScriptedApprover));
    }
    let host = builder.build().await?;
    super::report_problems(&host);
    let g = host.generation();
    println!("toolgate demo: one model turn through the nine-point pipeline\n");
    println!(
        "plugins: {}",
        g.plugins
            .iter()
            .map(|p| format!(
                "{} ({})",
                p.name,
                p.roles
                    .iter()
                    .map(|r| r.as_str())
                    .collect::<Vec<_>>()
                    .join("+")
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut last = None;
    let mut chains = String::new();
    for (role, name, prio, _) in g.chain_order() {
        if last != Some(role) {
            chains.push_str(&format!("\n  {role:<15}"));
            last = Some(role);
        }
        chains.push_str(&format!(" {name}[{prio}]"));
    }
    println!("chains (outermost first):{chains}\n");
    let turn = TurnOptions::default();
    for (what, call) in script() {
        let shown = format!("{} {}", call.name, call.arguments);
        let id = call.id.clone();
        let record = host.call(call, &turn).await;
        println!("[{id}] {shown}\n    — {what}");
        for f in transcript.take(&id) {
            if let Some(line) = stage_line(&f) {
                println!("{line}");
            }
        }
        println!("    => {}\n", summary(&record));
        if args.json {
            println!("{}\n", serde_json::to_string_pretty(&record)?);
        }
    }
    println!("Try it yourself: `toolgate tools`, `toolgate plugins`, `toolgate run calls.json`.");
    Ok(ExitCode::SUCCESS)
}
