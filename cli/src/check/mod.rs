//! `toolgate check FILE.wasm`: everything the host thinks of one component,
//! and the author's way to try it.
//!
//! * plain: loads the component exactly as a plugin directory would (its
//!   manifest beside it, the operator's configuration) and reports its
//!   roles, contract version, call path, instance mode, the grants its
//!   imports need, each tool's features, where each policy priority came
//!   from, and every problem found;
//! * `--call CALL.json`: runs one model call through this component alone
//!   (no other plugin; a stand-in tool when the component is a policy) and
//!   prints what it decided — the way to unit-test a guard or a hook;
//!   `--repeat N` also times it on a warm and on fresh instances;
//! * `--conformance`: see [`conformance`].

mod conformance;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use async_trait::async_trait;
use clap::Args;
use serde_json::{Value, json};

use super::GlobalArgs;
use toolgate::approval::{ApprovalAnswer, ApprovalRequest, Approver};
use toolgate::call::{ToolCall, ToolMeta};
use toolgate::host::{Toolgate, ToolgateBuilder};
use toolgate::plugin::InstanceMode;
use toolgate::plugin::contract;
use toolgate::plugin::manifest::{DEFAULT_PRIORITY, Manifest};
use toolgate::policy::Role;
use toolgate::tool::{Annotations, BodyContext, BodyError, Features, ToolBody, ToolDefinition};
use toolgate::turn::TurnOptions;
use toolgate::{CallInfo, CallRecord, Content};

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The component to check.
    #[arg(value_name = "FILE.wasm")]
    file: PathBuf,

    /// Print a JSON report instead of text (camelCase keys, as `plugins --json`).
    #[arg(long)]
    json: bool,

    /// Run one call through this component alone and print what it decided.
    /// CALL.json is `{"name": TOOL, "arguments": {...}}` (`id` optional;
    /// `arguments` may be an object or a JSON string); `-` reads stdin. A
    /// policy is tried on a stand-in tool of that name that returns its
    /// `reply` argument (or the arguments).
    #[arg(long, value_name = "CALL.json")]
    call: Option<PathBuf>,

    /// With --call: run it N more times on a warm instance and N times on
    /// fresh instances, and print the time per call.
    #[arg(long, value_name = "N", requires = "call")]
    repeat: Option<u32>,

    /// Exercise every role and export with generated valid and invalid
    /// inputs; report contract violations (traps, slow answers, rejected
    /// schemas, render failures, oversized outputs) and the time per call.
    #[arg(long, conflicts_with = "call")]
    conformance: bool,
}

pub async fn run(global: &GlobalArgs, args: CheckArgs) -> anyhow::Result<ExitCode> {
    use tracing::instrument::WithSubscriber;
    if !args.file.is_file() {
        anyhow::bail!("{} is not a file", args.file.display());
    }
    let dir = tempdir_with(&args.file)?;
    // The host's log lines name the author's directory, not the private one.
    let logs = author_logs(global, dir.path(), &author_dir(&args.file));
    check(global, args, dir).with_subscriber(logs).await
}

async fn check(global: &GlobalArgs, args: CheckArgs, dir: TempDir) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let (host, recorder) = one_component(global, dir.path(), None, None).await?;
    let load_time = started.elapsed();
    let report = Report::new(global, &args.file, dir.path(), &host, load_time)?;
    if let Some(call) = &args.call {
        let call = read_call(call)?;
        return try_call(global, &args, dir.path(), &report, (host, recorder), call).await;
    }
    if args.conformance {
        if !report.loaded() {
            report.print(args.json)?;
            return Ok(ExitCode::FAILURE);
        }
        let stand_in = conformance::STAND_IN;
        let host = if report.tool_names().iter().any(|t| t == stand_in) {
            host
        } else {
            one_component(global, dir.path(), Some(stand_in), None)
                .await?
                .0
        };
        let findings = conformance::run(&host, &report.plugin_name()).await;
        return conformance::print(&args.file, &report, &findings, args.json);
    }
    report.print(args.json)?;
    Ok(if report.loaded() && report.problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// A host with this one component (no built-ins), plus a stand-in tool
/// named `stand_in` for a policy to be tried on, with `mode` overriding its
/// instance mode; and the approver that records what its hooks asked.
async fn one_component(
    global: &GlobalArgs,
    dir: &Path,
    stand_in: Option<&str>,
    mode: Option<(String, InstanceMode)>,
) -> anyhow::Result<(Toolgate, Arc<Recorder>)> {
    let mut config = global.load_config()?;
    if let Some((plugin, mode)) = mode {
        config.plugins.entry(plugin).or_default().instances = Some(mode);
    }
    // Never a terminal prompt: an ask is recorded and denied (or allowed
    // with --approve allow).
    let recorder = Arc::new(Recorder {
        asked: Mutex::new(Vec::new()),
        answer: global.approve,
    });
    let mut b: ToolgateBuilder = global
        .builder()?
        .config(config)
        .builtin_plugins(false)
        .plugin_dir(dir)
        .approver(recorder.clone());
    if let Some(name) = stand_in {
        b = b.tool(stand_in_tool(name), Arc::new(StandIn))?;
    }
    Ok((b.build().await?, recorder))
}

/// The definition of the stand-in tool a policy is tried on.
pub(super) fn stand_in_tool(name: &str) -> ToolDefinition {
    ToolDefinition {
        name: name.into(),
        description: "A stand-in tool of `toolgate check`: returns its `reply` argument, or fails with its `fail` argument, or returns its arguments.".into(),
        parameters: json!({"type": "object"}),
        output_schema: None,
        meta: ToolMeta {
            provider: "toolgate-check".into(),
            timeout_ms: None,
            annotations: Annotations::empty(),
            features: Features::empty(),
            effects: true,
        },
    }
}

/// A tool body that answers what its arguments say.
pub(super) struct StandIn;

#[async_trait]
impl ToolBody for StandIn {
    async fn is_concurrency_safe(&self, _call: &Arc<CallInfo>) -> Option<bool> {
        None
    }
    async fn execute(&self, call: &Arc<CallInfo>, _ctx: BodyContext) -> Result<Value, BodyError> {
        if let Some(message) = call.arguments.get("fail").and_then(Value::as_str) {
            return Err(BodyError::Failure(toolgate::tool::ToolFailure {
                name: "StandInFailure".into(),
                code: "STAND_IN_FAILURE".into(),
                message: message.into(),
                details: None,
            }));
        }
        Ok(call
            .arguments
            .get("reply")
            .cloned()
            .unwrap_or_else(|| (*call.arguments).clone()))
    }
    async fn render(
        &self,
        _call: &Arc<CallInfo>,
        value: &Value,
    ) -> Result<Vec<Content>, BodyError> {
        Ok(vec![Content::text(match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })])
    }
}

/// Records what a hook asked, and answers as `--approve` says (default:
/// deny, as a non-interactive host would).
pub(super) struct Recorder {
    pub asked: Mutex<Vec<(String, String)>>,
    answer: Option<crate::ApproveMode>,
}

#[async_trait]
impl Approver for Recorder {
    fn name(&self) -> &str {
        "toolgate-check"
    }
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        self.asked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((request.asked_by.clone(), request.prompt.clone()));
        match self.answer {
            Some(crate::ApproveMode::Allow) => ApprovalAnswer::Approve,
            _ => ApprovalAnswer::Deny("`toolgate check` approves only with --approve allow".into()),
        }
    }
}

/// Read CALL.json: one call; `arguments` an object or a JSON string.
fn read_call(path: &Path) -> anyhow::Result<ToolCall> {
    let text = if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
            .context("cannot read standard input")?;
        s
    } else {
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?
    };
    let mut value: Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    if let Some(obj) = value.as_object_mut() {
        obj.entry("id").or_insert_with(|| json!("check-1"));
    }
    let calls = super::run::parse_batch(
        &Value::Array(vec![value]).to_string(),
        &path.display().to_string(),
        &toolgate_schema::Limits::default(),
    )?;
    match calls.into_iter().next() {
        Some(Ok(c)) => Ok(c.call),
        Some(Err(rejected)) => anyhow::bail!("{}", rejected.message),
        None => anyhow::bail!("{} holds no call", path.display()),
    }
}

async fn try_call(
    global: &GlobalArgs,
    args: &CheckArgs,
    dir: &Path,
    report: &Report,
    loaded: (Toolgate, Arc<Recorder>),
    call: ToolCall,
) -> anyhow::Result<ExitCode> {
    if !report.loaded() {
        report.print(args.json)?;
        return Ok(ExitCode::FAILURE);
    }
    let stand_in = (!report.tool_names().contains(&call.name)).then_some(call.name.as_str());
    let plugin = report.plugin_name();
    // The call runs on the host the report was made from (one load, so the
    // report and the call see the same component); a policy's call needs
    // a host with a stand-in tool added.
    let (host, recorder) = match stand_in {
        None => loaded,
        Some(name) => {
            drop(loaded);
            one_component(global, dir, Some(name), None).await?
        }
    };
    if host.generation().plugins.is_empty() {
        anyhow::bail!(
            "{} loaded for the report but not for the call (see the log above for why)",
            args.file.display()
        );
    }
    let turn = TurnOptions::default();
    let started = Instant::now();
    let record = host.call(call.clone(), &turn).await;
    let first = started.elapsed();
    let asked = recorder
        .asked
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let mut timing = None;
    if let Some(n) = args.repeat.filter(|n| *n > 0) {
        let warm = time_calls(&host, &call, n).await;
        let fresh_host = one_component(
            global,
            dir,
            stand_in,
            Some((plugin.clone(), InstanceMode::Fresh)),
        )
        .await?
        .0;
        let fresh = time_calls(&fresh_host, &call, n).await;
        timing = Some((n, warm, fresh));
    }
    let decision = describe(&record, &asked, stand_in.is_some());
    // A check that found a problem fails: a result the host cannot accept,
    // a trap, a deadline, a host failure — or a problem of the component.
    let mut failed: Vec<String> = report.problems.clone();
    if let Some(e) = &record.error
        && is_violation(e.code.as_str())
    {
        failed.push(format!(
            "the call ended in {} ({}), which a correct {} never causes",
            e.code.as_str(),
            e.message,
            if stand_in.is_some() { "policy" } else { "tool" }
        ));
    }
    if args.json {
        let mut out = json!({
            "file": args.file.display().to_string(),
            "plugin": report.plugin_name(),
            "callPath": report.call_path(),
            "call": {"id": call.id, "name": call.name, "arguments": call.arguments},
            "standIn": stand_in.is_some(),
            "decision": decision,
            "asked": asked.iter().map(|(by, q)| json!({"askedBy": by, "question": q})).collect::<Vec<_>>(),
            "record": record,
            "firstCallUs": first.as_micros() as u64,
            "problems": failed,
        });
        if let Some((n, warm, fresh)) = &timing {
            out["repeat"] = json!({
                "calls": n,
                "warm": stats_json(warm),
                "fresh": stats_json(fresh),
            });
        }
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("{} ({} path)", args.file.display(), report.call_path());
        println!(
            "  call:      {} {}",
            call.name,
            serde_json::to_string(&call.arguments)?
        );
        if stand_in.is_some() {
            println!(
                "             (on a stand-in tool `{}`: it returns its `reply` argument, or the arguments)",
                call.name
            );
        }
        for (by, q) in &asked {
            println!("  asked:     `{by}` asked \"{q}\"");
        }
        println!("  decision:  {decision}");
        if !record.is_error || stand_in.is_none() {
            for c in &record.content {
                println!("  content:   {}", serde_json::to_string(c)?);
            }
        }
        println!(
            "  time:      {} (first call, instance included)",
            human(first)
        );
        for p in &failed {
            println!("  problem:   {p}");
        }
        if let Some((n, warm, fresh)) = &timing {
            println!(
                "  warm:      median {}, p99 {} per call ({n} calls, a pooled instance)",
                human(warm.median),
                human(warm.p99)
            );
            println!(
                "  fresh:     median {}, p99 {} per call ({n} calls, a new instance each)",
                human(fresh.median),
                human(fresh.p99)
            );
        }
    }
    Ok(if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Failure codes no correct component causes on a call it was given: the
/// host could not accept what it answered, it trapped, it overran its
/// deadline, or the host failed running it. (A denial, a block, a tool's
/// own error are answers.) The same list `--conformance` counts as
/// violations.
pub(super) fn is_violation(code: &str) -> bool {
    matches!(code, "TRAPPED" | "INVALID_RESULT" | "TIMEOUT" | "INTERNAL")
}

/// What the pipeline decided, in one sentence.
fn describe(record: &CallRecord, asked: &[(String, String)], stand_in: bool) -> String {
    match &record.error {
        None if stand_in => {
            if asked.is_empty() {
                "allowed (the call reached the tool)".into()
            } else {
                "asked, approved, then allowed (the call reached the tool)".into()
            }
        }
        None => "succeeded".into(),
        Some(e) => format!(
            "{} at {} by `{}`: {}",
            e.code.as_str().to_lowercase().replace('_', " "),
            e.stage.as_str(),
            e.decided_by.as_deref().unwrap_or("the host"),
            e.message
        ),
    }
}

/// Times of repeated calls.
pub(super) struct Stats {
    pub median: Duration,
    pub p99: Duration,
}

pub(super) fn stats(mut times: Vec<Duration>) -> Stats {
    times.sort();
    let at = |q: f64| {
        times
            .get(((times.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or_default()
    };
    Stats {
        median: at(0.5),
        p99: at(0.99),
    }
}

fn stats_json(s: &Stats) -> Value {
    json!({"medianUs": s.median.as_secs_f64() * 1e6, "p99Us": s.p99.as_secs_f64() * 1e6})
}

async fn time_calls(host: &Toolgate, call: &ToolCall, n: u32) -> Stats {
    let turn = TurnOptions::default();
    // One call first: the instance, lazily built views, caches.
    host.call(call.clone(), &turn).await;
    let mut times = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let started = Instant::now();
        host.call(call.clone(), &turn).await;
        times.push(started.elapsed());
    }
    stats(times)
}

pub(super) fn human(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.1} µs")
    } else if us < 1e6 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

/// What the host thinks of the component.
pub(super) struct Report {
    file: PathBuf,
    json: Value,
    pub problems: Vec<String>,
}

impl Report {
    /// `tmp` is the private directory the component was loaded from (see
    /// [`tempdir_with`]): messages name the author's directory instead.
    fn new(
        global: &GlobalArgs,
        file: &Path,
        tmp: &Path,
        host: &Toolgate,
        load_time: Duration,
    ) -> anyhow::Result<Report> {
        let generation = host.generation();
        let info = generation.plugins.first();
        let authors = author_dir(file);
        let mut problems: Vec<String> = generation
            .problems
            .iter()
            .map(|p| author_paths(&p.message, tmp, &authors))
            .collect();
        // A manifest misnamed beside the component is not linked into the
        // private directory: look for it where the author put it.
        if !file.with_extension("toml").exists()
            && let Ok(entries) = std::fs::read_dir(&authors)
        {
            let entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
            problems.extend(
                toolgate::lifecycle::scan::unclaimed_manifests(&entries)
                    .into_iter()
                    .map(|p| p.message),
            );
        }
        let config = global.load_config()?;
        let name = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let manifest_path = file.with_extension("toml");
        let manifest = std::fs::read_to_string(&manifest_path)
            .ok()
            .and_then(|t| Manifest::parse(&t, &manifest_path.display().to_string()).ok());
        let priorities: Vec<Value> = info
            .map(|i| {
                i.priorities
                    .iter()
                    .map(|(role, prio)| {
                        json!({
                            "role": role.as_str(),
                            "priority": prio,
                            "from": priority_source(*role, &name, &config, manifest.as_ref()),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let cache = if global.no_compile_cache {
            "off (--no-compile-cache)"
        } else {
            "on"
        };
        let json = json!({
            "file": file.display().to_string(),
            "plugin": name,
            "loaded": info.is_some(),
            "loadUs": load_time.as_micros() as u64,
            "compileCache": cache,
            "sizeBytes": std::fs::metadata(file).map(|m| m.len()).unwrap_or(0),
            "roles": info.map(|i| i.roles.clone()).unwrap_or_default(),
            "witVersion": info.map(|i| i.wit_version.clone()),
            "callPath": info.map(|i| i.path),
            "instances": info.map(|i| i.instances),
            "imports": info.map(|i| i.imports.clone()).unwrap_or_default(),
            "grantsNeeded": info.map(|i| grants_needed(&i.imports, &name)).unwrap_or_default(),
            "priorities": priorities,
            "tools": generation.tools.values().map(|t| json!({
                "name": t.def.name,
                "description": t.def.description,
                "parameters": t.def.parameters,
                "outputSchema": t.def.output_schema,
                "timeoutMs": t.def.meta.timeout_ms,
                "annotations": t.def.meta.annotations.names(),
                "features": t.def.meta.features.names(),
            })).collect::<Vec<_>>(),
            "problems": problems,
        });
        Ok(Report {
            file: file.to_path_buf(),
            json,
            problems,
        })
    }

    pub fn loaded(&self) -> bool {
        self.json["loaded"] == true
    }

    pub fn plugin_name(&self) -> String {
        self.json["plugin"].as_str().unwrap_or_default().to_string()
    }

    pub fn call_path(&self) -> String {
        self.json["callPath"].as_str().unwrap_or("?").to_string()
    }

    pub fn roles(&self) -> Vec<String> {
        self.json["roles"]
            .as_array()
            .map(|r| {
                r.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn tool_names(&self) -> Vec<String> {
        self.json["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|v| v["name"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn json(&self) -> &Value {
        &self.json
    }

    fn print(&self, as_json: bool) -> anyhow::Result<()> {
        let j = &self.json;
        if as_json {
            println!("{}", serde_json::to_string_pretty(j)?);
            return Ok(());
        }
        println!("{}", self.file.display());
        let list = |v: &Value| {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .map(|x| {
                            x.as_str()
                                .map(String::from)
                                .unwrap_or_else(|| x.to_string())
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default()
        };
        if self.loaded() {
            println!(
                "  loaded:       yes, in {} (compile cache {})",
                human(Duration::from_micros(j["loadUs"].as_u64().unwrap_or(0))),
                j["compileCache"].as_str().unwrap_or("")
            );
            println!("  size:         {} bytes", j["sizeBytes"]);
            println!(
                "  wit version:  toolgate:plugin@{}",
                j["witVersion"].as_str().unwrap_or("")
            );
            println!("  roles:        {}", list(&j["roles"]));
            println!(
                "  call path:    {}",
                match j["callPath"].as_str() {
                    Some("sync") =>
                        "synchronous (no fiber: it imports nothing that can wait)".to_string(),
                    _ => format!(
                        "asynchronous (on a fiber){}",
                        async_reason(&j["imports"], &self.roles())
                    ),
                }
            );
            println!("  instances:    {}", j["instances"].as_str().unwrap_or(""));
            println!("  imports:      {}", list(&j["imports"]));
            let needed = list(&j["grantsNeeded"]);
            println!(
                "  grants:       {}",
                if needed.is_empty() {
                    "none needed".to_string()
                } else {
                    needed
                }
            );
            for p in j["priorities"].as_array().into_iter().flatten() {
                println!(
                    "  priority:     {} {} (from {})",
                    p["role"].as_str().unwrap_or(""),
                    p["priority"],
                    p["from"].as_str().unwrap_or("")
                );
            }
        } else {
            println!("  loaded:       no");
        }
        for t in j["tools"].as_array().into_iter().flatten() {
            println!(
                "  tool {}: {}",
                t["name"].as_str().unwrap_or(""),
                t["description"]
                    .as_str()
                    .unwrap_or("")
                    .lines()
                    .next()
                    .unwrap_or("")
            );
            if let Some(ms) = t["timeoutMs"].as_u64() {
                println!("    timeout-ms:  {ms}");
            }
            let a = list(&t["annotations"]);
            if !a.is_empty() {
                println!("    annotations: {a}");
            }
            let f = list(&t["features"]);
            println!(
                "    features:    {}",
                if f.is_empty() { "none".into() } else { f }
            );
        }
        if self.problems.is_empty() {
            println!("  problems:     none");
        } else {
            println!("  problems:");
            for p in &self.problems {
                println!("    - {p}");
            }
        }
        Ok(())
    }
}

/// Why a component is on the async path, from its imports and roles.
fn async_reason(imports: &Value, roles: &[String]) -> String {
    let imports: Vec<&str> = imports
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut why = Vec::new();
    if roles.iter().any(|r| r == "tool") {
        why.push("it provides tools".to_string());
    }
    for i in &imports {
        if let Some((pkg, iface, _)) = contract::split_name(i)
            && pkg == contract::PACKAGE
            && !toolgate::plugin::contract::v0_2::imports::SYNC_INTERFACES.contains(&iface)
        {
            why.push(format!("it imports `{iface}`"));
        }
        if i.starts_with("wasi:http") && !why.iter().any(|w| w.contains("wasi:http")) {
            why.push("it imports `wasi:http`".into());
        }
    }
    if why.is_empty() {
        ": it is granted file-system or network access, or is built against 0.1".into()
    } else {
        format!(": {}", why.join(", "))
    }
}

/// The grants a component's imports ask for, as configuration lines.
fn grants_needed(imports: &[String], plugin: &str) -> Vec<String> {
    let mut out = Vec::new();
    for i in imports {
        let Some((pkg, iface, _)) = contract::split_name(i) else {
            continue;
        };
        let line = match (pkg, iface) {
            (contract::PACKAGE, "kv") => "kv = true".to_string(),
            (contract::PACKAGE, "shell") => "shell = true".to_string(),
            (contract::PACKAGE, "subprocess") => "subprocess = [\"<program>\", ...]".to_string(),
            _ => continue,
        };
        out.push(format!(
            "{line} under [plugins.{plugin}.grants] (required to load)"
        ));
    }
    let any = |p: &str| imports.iter().any(|i| i.starts_with(p));
    if any("wasi:filesystem/preopens") {
        out.push(format!(
            "fs = [...] under [plugins.{plugin}.grants] if it reads or writes files (it imports wasi:filesystem; without a grant it sees no directory)"
        ));
    }
    if any("wasi:sockets/tcp") {
        out.push(format!(
            "egress = [\"HOST\"] (or network = [\"host:port\"]) under [plugins.{plugin}.grants] if it connects out (without a grant every connection is refused)"
        ));
    }
    out
}

/// Where the priority of `role` came from.
fn priority_source(
    role: Role,
    plugin: &str,
    config: &toolgate::HostConfig,
    manifest: Option<&Manifest>,
) -> String {
    if let Some(p) = config.plugins.get(plugin) {
        if p.priorities.contains_key(role.as_str()) {
            return format!(
                "the configuration: [plugins.{plugin}] priorities.{}",
                role.as_str()
            );
        }
        if p.priority.is_some() {
            return format!("the configuration: [plugins.{plugin}] priority");
        }
    }
    if let Some(m) = manifest {
        if m.priorities.contains_key(role.as_str()) {
            return format!("the manifest {plugin}.toml: priorities.{}", role.as_str());
        }
        if m.priority.is_some() {
            return format!("the manifest {plugin}.toml: priority");
        }
    }
    format!("the default ({DEFAULT_PRIORITY}): neither the configuration nor a manifest sets it")
}

/// The directory the author's file is in, as they named it (`.` for a bare
/// file name).
fn author_dir(file: &Path) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `message` with the private directory `tmp` replaced by the author's.
fn author_paths(message: &str, tmp: &Path, authors: &Path) -> String {
    let tmp = tmp.display().to_string();
    let authors = authors.display().to_string();
    message.replace(&tmp, &authors)
}

/// The process's log, as `cli::logging` sets it up, with `tmp` replaced by
/// `authors` in every line.
fn author_logs(global: &GlobalArgs, tmp: &Path, authors: &Path) -> tracing::Dispatch {
    use tracing_subscriber::EnvFilter;
    let filter =
        || EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn,rmcp=error"));
    let writer = Renaming {
        from: tmp.display().to_string().into(),
        to: authors.display().to_string().into(),
    };
    let fmt = tracing_subscriber::fmt()
        .with_writer(writer)
        .with_env_filter(filter());
    match global.log_format {
        super::LogFormat::Json => fmt.json().with_current_span(true).finish().into(),
        super::LogFormat::Text => fmt
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_target(false)
            .finish()
            .into(),
    }
}

/// Writes log lines to stderr with one path replaced by another.
#[derive(Clone)]
struct Renaming {
    from: Arc<str>,
    to: Arc<str>,
}

/// One log line being written (the formatter writes it whole, then drops
/// the writer).
struct RenamingLine {
    names: Renaming,
    line: Vec<u8>,
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Renaming {
    type Writer = RenamingLine;
    fn make_writer(&'a self) -> RenamingLine {
        RenamingLine {
            names: self.clone(),
            line: Vec::new(),
        }
    }
}

impl std::io::Write for RenamingLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.line.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for RenamingLine {
    fn drop(&mut self) {
        let line = String::from_utf8_lossy(&self.line).replace(&*self.names.from, &self.names.to);
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    }
}

/// A private directory holding a link to the one file, so the directory
/// loader (and its manifest handling) checks it exactly as it would load it.
fn tempdir_with(file: &Path) -> anyhow::Result<TempDir> {
    let dir =
        std::env::temp_dir().join(format!("toolgate-check-{}-{}", std::process::id(), nanos()));
    std::fs::create_dir_all(&dir)?;
    let file = file.canonicalize()?;
    let name = file
        .file_name()
        .ok_or_else(|| anyhow::anyhow!("{} has no file name", file.display()))?;
    std::os::unix::fs::symlink(&file, dir.join(name))?;
    let manifest = file.with_extension("toml");
    if manifest.exists() {
        std::os::unix::fs::symlink(&manifest, dir.join(name).with_extension("toml"))?;
    }
    Ok(TempDir(dir))
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

struct TempDir(PathBuf);

impl TempDir {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    /// A componentize-js component built without `-d http -d fetch-event`
    /// imports two `wasi:http` interfaces; `check` says so once.
    #[test]
    fn the_wasi_http_import_is_named_once() {
        let imports = json!([
            "wasi:http/types@0.2.3",
            "wasi:http/outgoing-handler@0.2.3",
            "wasi:io/poll@0.2.3"
        ]);
        let why = super::async_reason(&imports, &["guard".to_string()]);
        assert_eq!(why.matches("wasi:http").count(), 1, "{why}");
    }
}
