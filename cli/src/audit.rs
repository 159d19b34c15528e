//! `toolgate audit`: verify the record, show it; `toolgate keygen audit`:
//! make its signing key.
//!
//! Exit codes of `verify`: 0 only when every file is intact (chain,
//! signatures, the chain's start — record 1, or `--from N` — and a clean
//! end unless `--allow-open`); 1 when a record is broken or missing (the
//! first one is named, and a missing rotated file by its name); 2 when a
//! file cannot be read. Calls started and never finished (a host killed
//! mid-call) are reported, and are not a break.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::Value;

use toolgate::audit::{self, CheckpointKey, verify};

#[derive(Args, Debug)]
pub struct AuditArgs {
    #[command(subcommand)]
    command: AuditCommand,
}

#[derive(Subcommand, Debug)]
enum AuditCommand {
    /// Check the hash chain and the checkpoint signatures of a record (its
    /// rotated files in any order) and name the first broken record. Files
    /// of several replicas: each replica's chain is verified on its own and
    /// reported. Exit status 0 only when every chain is intact.
    Verify(VerifyArgs),
    /// Print records, filtered (by tool, scope, decision, time, kind).
    Show(ShowArgs),
    /// The old spelling of `toolgate keygen audit` (kept for scripts).
    #[command(hide = true)]
    Keygen(KeygenArgs),
}

#[derive(Args, Debug)]
struct VerifyArgs {
    /// The record's files (default: audit.jsonl in the state directory).
    /// A record's live file brings its rotated files beside it
    /// (FILE.<12 digits>); files of several replicas are sorted by the
    /// replica their records name.
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,
    /// The files before record N were pruned on purpose: verify the chain
    /// from record N (the first record of the oldest file kept) instead of
    /// requiring it to start at record 1.
    #[arg(long, value_name = "N")]
    from: Option<u64>,
    /// The public key every checkpoint must be signed with: 64 hex digits
    /// or a file holding them (KEY.pub). Without it, a record rewritten
    /// and re-signed with another key is not detected.
    #[arg(long, value_name = "KEY")]
    key: Option<String>,
    /// Accept a record that does not end with a shutdown checkpoint (the
    /// file of a host still running).
    #[arg(long)]
    allow_open: bool,
    /// Print {"intact", "records", "firstBroken", "reason", …} as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct ShowArgs {
    /// The record's files (default: audit.jsonl in the state directory).
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Only calls of this tool.
    #[arg(long)]
    tool: Option<String>,
    /// Only calls from this agent scope ("" = global).
    #[arg(long)]
    scope: Option<String>,
    /// Only calls with this outcome: `allowed` (ran), `denied` (a policy
    /// refused it), `error` (any failure).
    #[arg(long, value_name = "OUTCOME")]
    decision: Option<String>,
    /// Only records of this kind (call, started, rejected, config, start, plugins, reload,
    /// checkpoint, rotate, shutdown, egress, resource_read).
    #[arg(long)]
    kind: Option<String>,
    /// Only records at or after this time: RFC 3339 UTC
    /// (2026-12-02T13:00:00Z) or milliseconds since the epoch.
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// Only records before this time (as --since).
    #[arg(long, value_name = "TIME")]
    until: Option<String>,
    /// Print the records themselves (JSON Lines).
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
pub struct KeygenArgs {
    /// Where to write the key (refused if it exists).
    #[arg(value_name = "FILE")]
    file: PathBuf,
}

pub fn run(args: AuditArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        AuditCommand::Verify(a) => run_verify(a),
        AuditCommand::Show(a) => match run_show(a) {
            // `audit show | head`: the reader has what it wanted.
            Err(e)
                if e.downcast_ref::<std::io::Error>()
                    .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
            {
                Ok(ExitCode::SUCCESS)
            }
            other => other,
        },
        AuditCommand::Keygen(a) => keygen(a),
    }
}

/// `toolgate keygen audit FILE` (and its old spelling `toolgate audit
/// keygen FILE`): the audit record's signing key and its public key.
pub fn keygen(a: KeygenArgs) -> anyhow::Result<ExitCode> {
    let key = CheckpointKey::generate(&a.file)?;
    println!("{}", key.public_hex());
    eprintln!(
        "wrote {} (secret, mode 0600) and {} (public); set [audit] signing_key = \"{}\", and verify with `toolgate audit verify --key {}`",
        a.file.display(),
        audit::key::public_path(&a.file).display(),
        a.file.display(),
        audit::key::public_path(&a.file).display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The files named (default: the state directory's record), each live
/// file with its rotated files: a record's file stands for the record.
fn default_files(files: Vec<PathBuf>) -> anyhow::Result<Vec<PathBuf>> {
    if !files.is_empty() {
        return Ok(verify::with_rotations(&files));
    }
    let dir = toolgate::state::default_dir().ok_or_else(|| {
        anyhow::anyhow!("name the record's file(s): no state directory (set TOOLGATE_STATE_DIR)")
    })?;
    Ok(verify::with_rotations(&[dir.join(audit::DEFAULT_FILE)]))
}

fn run_verify(a: VerifyArgs) -> anyhow::Result<ExitCode> {
    let files = default_files(a.files)?;
    let key = match &a.key {
        Some(k) => Some(audit::key::parse_public(k).map_err(|e| anyhow::anyhow!("--key: {e}"))?),
        None => None,
    };
    let options = verify::VerifyOptions {
        key,
        allow_open: a.allow_open,
        from: a.from,
    };
    let chains = match verify::verify_replicas(&files, &options) {
        Ok(r) => r,
        Err(e) => {
            if a.json {
                println!(
                    "{}",
                    serde_json::json!({"intact": false, "records": 0, "firstBroken": null, "reason": e.to_string()})
                );
            } else {
                eprintln!("toolgate: {e}");
            }
            return Ok(ExitCode::from(2));
        }
    };
    let intact = chains.iter().all(|c| c.report.intact);
    if let [one] = chains.as_slice() {
        // One replica's record: as it always was.
        if a.json {
            println!("{}", serde_json::to_string(&one.report)?);
        } else {
            print_report(&one.report, "", key.is_none());
        }
    } else if a.json {
        println!(
            "{}",
            serde_json::json!({
                "intact": intact,
                "records": chains.iter().map(|c| c.report.records).sum::<u64>(),
                "chains": chains,
            })
        );
    } else {
        // Files of several replicas: each replica's chain, verified on its
        // own.
        for c in &chains {
            let files: Vec<String> = c
                .report
                .files
                .iter()
                .map(|f| f.display().to_string())
                .collect();
            println!(
                "replica {} ({}):",
                c.replica
                    .as_deref()
                    .unwrap_or("(unnamed: records before replica ids)"),
                files.join(", ")
            );
            print_report(&c.report, "  ", key.is_none());
        }
        println!(
            "{} of {} replica chain(s) intact",
            chains.iter().filter(|c| c.report.intact).count(),
            chains.len()
        );
    }
    Ok(if intact {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// One chain's verdict, each line indented by `indent`.
fn print_report(report: &verify::Report, indent: &str, unpinned: bool) {
    if report.intact {
        println!(
            "{indent}intact: {} record(s), {} signed checkpoint(s){}{}",
            report.records,
            report.checkpoints,
            if report.clean_end {
                ", ends with a shutdown checkpoint".to_string()
            } else {
                format!(", open end ({} record(s) unsigned)", report.unsigned_tail)
            },
            if report.unclean_restarts.is_empty() {
                String::new()
            } else {
                format!(
                    "; the host did not stop cleanly before record(s) {:?}",
                    report.unclean_restarts
                )
            }
        );
        if unpinned {
            println!(
                "{indent}note: signed by {} (pin the key with --key to detect a re-signed record)",
                report.keys.join(", ")
            );
        }
        print_unfinished(report, indent);
    } else {
        println!(
            "{indent}BROKEN at record {}: {}\n{indent}{} record(s) before it verified",
            report.first_broken.unwrap_or(0),
            report.reason.as_deref().unwrap_or(""),
            report.records
        );
    }
}

/// The calls started and never finished: not tampering, but calls whose
/// effects may have happened without a result.
fn print_unfinished(report: &verify::Report, indent: &str) {
    if report.unfinished.is_empty() {
        return;
    }
    println!(
        "{indent}{} call(s) started and never finished (the host was killed or stopped while they ran, \
         or still runs them); their effects, if any, may have happened:",
        report.unfinished.len()
    );
    for u in &report.unfinished {
        println!(
            "{indent}  record {}: {} (call {}) at {}, instance {}",
            u.seq,
            u.tool,
            u.call_id,
            format_time(u.ts),
            u.inst
        );
    }
}

/// Milliseconds since the epoch from RFC 3339 UTC or a number.
fn parse_time(text: &str) -> anyhow::Result<u64> {
    if let Ok(ms) = text.parse::<u64>() {
        return Ok(ms);
    }
    let bad = || {
        anyhow::anyhow!("`{text}`: expected 2026-12-02T13:00:00Z or milliseconds since the epoch")
    };
    let t = text.strip_suffix('Z').ok_or_else(bad)?;
    let (date, time) = t.split_once('T').ok_or_else(bad)?;
    let d: Vec<i64> = date
        .split('-')
        .map(|p| p.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let (time, frac) = time.split_once('.').unwrap_or((time, "0"));
    let h: Vec<i64> = time
        .split(':')
        .map(|p| p.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    if d.len() != 3 || h.len() != 3 {
        return Err(bad());
    }
    let ms: i64 = format!("{frac:0<3}")[..3].parse().map_err(|_| bad())?;
    let days = toolgate::clock::days_from_civil(d[0], d[1], d[2]);
    Ok((((days * 24 + h[0]) * 60 + h[1]) * 60 + h[2]) as u64 * 1000 + ms as u64)
}

/// RFC 3339 UTC with milliseconds.
fn format_time(ms: u64) -> String {
    toolgate::clock::rfc3339_millis(ms)
}

fn run_show(a: ShowArgs) -> anyhow::Result<ExitCode> {
    let mut files = default_files(a.files)?;
    verify::chain_order(&mut files);
    let since = a.since.as_deref().map(parse_time).transpose()?;
    let until = a.until.as_deref().map(parse_time).transpose()?;
    if let Some(d) = &a.decision
        && !matches!(d.as_str(), "allowed" | "denied" | "error")
    {
        anyhow::bail!("--decision: expected allowed, denied or error, got `{d}`");
    }
    let mut out = std::io::stdout().lock();
    for file in &files {
        let text = std::fs::read_to_string(file)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
        for line in text.lines() {
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let kind = v["kind"].as_str().unwrap_or("");
            let ts = v["ts"].as_u64().unwrap_or(0);
            let code = v["result"]["code"].as_str();
            let keep = a.kind.as_deref().is_none_or(|k| k == kind)
                && a.tool.as_deref().is_none_or(|t| v["tool"] == t)
                && a.scope.as_deref().is_none_or(|s| v["scope"] == s)
                && since.is_none_or(|s| ts >= s)
                && until.is_none_or(|u| ts < u)
                && a.decision.as_deref().is_none_or(|d| {
                    kind == "call"
                        && match d {
                            "allowed" => {
                                code.is_none()
                                    || !matches!(
                                        code,
                                        Some(
                                            "DENIED"
                                                | "UNKNOWN_TOOL"
                                                | "INVALID_ARGS"
                                                | "ABORTED_BEFORE_DISPATCH"
                                        )
                                    )
                            }
                            "denied" => code == Some("DENIED"),
                            _ => v["result"]["isError"] == true,
                        }
                });
            if !keep {
                continue;
            }
            use std::io::Write;
            if a.json {
                writeln!(out, "{line}")?;
                continue;
            }
            let seq = v["seq"].as_u64().unwrap_or(0);
            let summary = summary(kind, &v);
            writeln!(out, "{seq:>8}  {}  {kind:<10} {summary}", format_time(ts))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One record's line in `audit show`, after its sequence number, time and
/// kind.
fn summary(kind: &str, v: &Value) -> String {
    let code = v["result"]["code"].as_str();
    match kind {
        "call" => {
            let by = v["result"]["decidedBy"].as_str().unwrap_or("");
            format!(
                "{} [{}] {}{}",
                v["tool"].as_str().unwrap_or("?"),
                scope_of(v),
                code.unwrap_or("ok"),
                if by.is_empty() {
                    String::new()
                } else {
                    format!(" by {by}")
                }
            )
        }
        "started" => format!(
            "{} [{}] call {} started",
            v["tool"].as_str().unwrap_or("?"),
            scope_of(v),
            v["callId"].as_str().unwrap_or("?")
        ),
        "start" => format!(
            "host started (pid {}, instance {})",
            v["pid"],
            v["inst"].as_str().unwrap_or("")
        ),
        "reload" => format!(
            "reload → generation {}: {} change(s), {} refused",
            v["generation"],
            v["changed"].as_array().map_or(0, |c| c.len()),
            v["refused"].as_array().map_or(0, |c| c.len())
        ),
        "config" => format!(
            "configuration changed (generation {}): {} → {}",
            v["generation"],
            short(&v["old"]),
            short(&v["new"])
        ),
        "rejected" => format!(
            "{} refused before the pipeline ({}): {}",
            v["tool"]
                .as_str()
                .map_or_else(|| "input".to_string(), |t| format!("call to {t}")),
            v["input"].as_str().unwrap_or(""),
            v["reason"].as_str().unwrap_or("")
        ),
        "pin" => format!(
            "bridged tool {}/{} {} (sha256 {})",
            v["server"].as_str().unwrap_or("?"),
            v["tool"].as_str().unwrap_or("?"),
            match v["action"].as_str() {
                Some("withheld") => "withheld: its definition changed since it was pinned",
                Some("accepted") => "accepted by the operator: pinned anew",
                _ => "?",
            },
            short(&v["sha256"])
        ),
        "egress" => format!(
            "{} {}:{} for {} (call {}){}",
            if v["allowed"] == true {
                "allowed"
            } else {
                "refused"
            },
            v["name"].as_str().or(v["address"].as_str()).unwrap_or("?"),
            v["port"],
            v["plugin"].as_str().unwrap_or("?"),
            v["callId"].as_str().unwrap_or("-"),
            v["reason"]
                .as_str()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ),
        "resource_read" => match v["error"].as_str() {
            Some(e) => format!("{} not read: {e}", v["uri"].as_str().unwrap_or("?")),
            None => format!(
                "{} from {} ({} bytes)",
                v["uri"].as_str().unwrap_or("?"),
                v["server"].as_str().unwrap_or("?"),
                v["bytes"]
            ),
        },
        "plugins" => format!(
            "generation {}: {} plugin(s)",
            v["generation"],
            v["plugins"].as_object().map_or(0, |p| p.len())
        ),
        // checkpoint, rotate, shutdown: the kind says it all.
        _ => String::new(),
    }
}

/// A record's agent scope, `global` for none.
fn scope_of(v: &Value) -> &str {
    v["scope"]
        .as_str()
        .filter(|s| !s.is_empty())
        .unwrap_or("global")
}

/// The first 12 digits of a digest.
fn short(digest: &Value) -> String {
    digest.as_str().unwrap_or("none").chars().take(12).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip() {
        let ms = parse_time("2026-12-02T13:00:00.250Z").unwrap();
        assert_eq!(format_time(ms), "2026-12-02T13:00:00.250Z");
        assert_eq!(parse_time("1970-01-01T00:00:01Z").unwrap(), 1000);
        assert!(parse_time("yesterday").is_err());
    }

    /// Every kind has its own line (issue 44: an egress record showed as
    /// "egress     egress", its kind twice and nothing of the connection).
    #[test]
    fn each_kind_says_what_happened() {
        let egress = serde_json::json!({"kind": "egress", "callId": "c1", "plugin": "bash",
            "name": "example.com", "port": 443, "allowed": false, "reason": "no rule allows it"});
        assert_eq!(
            summary("egress", &egress),
            "refused example.com:443 for bash (call c1): no rule allows it"
        );
        let read = serde_json::json!({"uri": "file:///a", "server": "fs", "bytes": 12});
        assert_eq!(
            summary("resource_read", &read),
            "file:///a from fs (12 bytes)"
        );
        let plugins = serde_json::json!({"generation": 1, "plugins": {"bash": "ab", "read": "cd"}});
        assert_eq!(summary("plugins", &plugins), "generation 1: 2 plugin(s)");
        for kind in ["checkpoint", "rotate", "shutdown"] {
            assert_eq!(summary(kind, &serde_json::json!({})), "", "{kind}");
        }
    }
}
