//! `toolgate approvals`: the approval queue of a running `toolgate serve
//! --http --approve queue`, from a terminal or a script, through the
//! console's API (`/console/api/…`, bearer token; see
//! `toolgate_mcp::console`).
//!
//! Plain HTTP/1.1 over TCP (the console is served on loopback, or behind a
//! TLS proxy): one request per connection, bounded answer.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

/// Largest answer read from the server.
const MAX_ANSWER_BYTES: u64 = 64 << 20;
/// How long one request may take.
const TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Args, Debug)]
pub struct ApprovalsArgs {
    #[command(subcommand)]
    command: ApprovalsCommand,

    /// The server: `http://127.0.0.1:8765` (as `serve --http` printed it).
    #[arg(long, value_name = "URL", global = true)]
    server: Option<String>,

    /// The file holding the console's token (`[console] token_file`;
    /// default: console-token in the state directory). Not `serve`'s
    /// `--token-file` (the MCP token): `--token-file` is kept here as an
    /// alias.
    #[arg(
        long = "console-token-file",
        alias = "token-file",
        value_name = "FILE",
        global = true
    )]
    token_file: Option<PathBuf>,

    /// The name your decisions are recorded under (`api:NAME` in the
    /// entry and the audit record). Default: $USER.
    #[arg(long = "as", value_name = "NAME", global = true)]
    identity: Option<String>,
}

#[derive(Subcommand, Debug)]
enum ApprovalsCommand {
    /// The pending approvals, oldest first.
    List {
        /// Print `[{"id", "tool", "arguments", "scope", "reason", "since"}]`
        /// (`since`: unix milliseconds), for a connection's approval
        /// `"egress": {"name", "port", "address", "plugin", "via"}`, and
        /// for questions for the user `"questions": [{"header",
        /// "question", "options": [{"label", "description"}],
        /// "multiSelect"}]`.
        #[arg(long)]
        json: bool,
    },
    /// Approve pending calls: each runs at once.
    Approve {
        /// The entries (as `list` shows them).
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
    },
    /// Answer questions for the user (`ask_user_question`; `list` shows
    /// them with their options). Every question is answered, by its
    /// header: `--answer HEADER=LABEL` (repeat for a question that takes
    /// several), `--other HEADER=TEXT` in your own words. `deny` declines.
    Answer {
        /// The entry (as `list` shows it).
        #[arg(value_name = "ID")]
        id: String,
        /// An option chosen: `HEADER=LABEL`, exactly as listed.
        #[arg(long = "answer", value_name = "HEADER=LABEL")]
        answers: Vec<String>,
        /// An answer in your own words: `HEADER=TEXT`.
        #[arg(long = "other", value_name = "HEADER=TEXT")]
        others: Vec<String>,
    },
    /// Deny pending calls; the message reaches the model.
    Deny {
        /// The entries (as `list` shows them).
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
        /// What the model is told.
        #[arg(long, value_name = "TEXT")]
        message: Option<String>,
    },
    /// Approve pending calls (if IDs are given) and every later call that
    /// matches, for a time and/or a number of calls. With --destination
    /// (or from an egress approval) an egress grant: connections to
    /// destinations no egress rule allows (`[egress] ask = true`).
    Grant {
        /// Pending entries to approve now (none: only the grant is made).
        #[arg(value_name = "ID")]
        ids: Vec<String>,
        /// The tool (default: the first ID's tool).
        #[arg(long)]
        tool: Option<String>,
        /// The top-level argument the pattern matches (`command` for bash).
        #[arg(long, requires = "pattern")]
        argument: Option<String>,
        /// A glob over that argument (`cargo test*`).
        #[arg(long, requires = "argument")]
        pattern: Option<String>,
        /// The agent scope the calls must come from.
        #[arg(long)]
        scope: Option<String>,
        /// A client's name (`clientInfo`) or session.
        #[arg(long)]
        client: Option<String>,
        /// How long, in minutes.
        #[arg(long, value_name = "MINUTES")]
        minutes: Option<u64>,
        /// How many calls.
        #[arg(long)]
        count: Option<u64>,
        /// An egress grant: a glob over the destination's name
        /// (`*.example.org`). Default from an egress approval: the
        /// destination it asked about. Without --tool it holds for any
        /// tool (from an approval: that approval's tool).
        #[arg(long, value_name = "GLOB")]
        destination: Option<String>,
        /// An egress grant's port (default from an egress approval: its
        /// port; otherwise any).
        #[arg(long, requires = "destination")]
        port: Option<u16>,
    },
    /// The active grants.
    Grants {
        /// Print the grants as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Revoke grants.
    Revoke {
        /// The grants' ids (`g-…`, as `grants` shows them).
        #[arg(required = true, value_name = "GRANT")]
        ids: Vec<String>,
    },
}

/// Where to connect, and the token.
struct Server {
    addr: String,
    host: String,
    token: String,
    identity: String,
}

impl Server {
    fn new(args: &ApprovalsArgs) -> anyhow::Result<Server> {
        let Some(url) = &args.server else {
            bail!(
                "--server URL is required (e.g. --server http://127.0.0.1:8765, as `serve --http` printed it)"
            );
        };
        let Some(rest) = url.strip_prefix("http://") else {
            bail!(
                "--server {url}: only http:// is spoken (the console is served on loopback; reach a remote one through a tunnel)"
            );
        };
        let host = rest.split('/').next().unwrap_or("").to_string();
        if host.is_empty() {
            bail!("--server {url}: no host");
        }
        let addr = if host.contains(':') && !host.ends_with(']') {
            host.clone()
        } else {
            format!("{host}:80")
        };
        let path = match &args.token_file {
            Some(p) => p.clone(),
            None => toolgate_mcp::http::default_token_path()?.with_file_name("console-token"),
        };
        let token = std::fs::read_to_string(&path)
            .with_context(|| {
                format!(
                    "--console-token-file {}: cannot read the console's token",
                    path.display()
                )
            })?
            .trim()
            .to_string();
        let identity = args
            .identity
            .clone()
            .or_else(|| std::env::var("USER").ok())
            .unwrap_or_else(|| "cli".into());
        Ok(Server {
            addr,
            host,
            token,
            identity,
        })
    }

    /// One request; the answer's JSON (an error status is an error).
    fn request(&self, method: &str, path: &str, body: Option<&Value>) -> anyhow::Result<Value> {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let mut stream = TcpStream::connect(&self.addr)
            .with_context(|| format!("cannot connect to {}", self.addr))?;
        stream.set_read_timeout(Some(TIMEOUT))?;
        stream.set_write_timeout(Some(TIMEOUT))?;
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nX-Toolgate-Identity: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.host,
            self.token,
            self.identity,
            body.len()
        );
        stream.write_all(head.as_bytes())?;
        stream.write_all(body.as_bytes())?;
        let mut answer = Vec::new();
        stream.take(MAX_ANSWER_BYTES).read_to_end(&mut answer)?;
        let text = String::from_utf8_lossy(&answer);
        let (head, body) = text
            .split_once("\r\n\r\n")
            .context("the server's answer is not HTTP")?;
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .context("the server's answer has no status")?;
        let chunked = head.lines().any(|l| {
            l.to_ascii_lowercase()
                .starts_with("transfer-encoding: chunked")
        });
        let body = if chunked {
            dechunk(body)
        } else {
            body.to_string()
        };
        let value: Value = serde_json::from_str(&body)
            .with_context(|| format!("the server answered {status} with no JSON: {body}"))?;
        if status != 200 {
            let why = value["error"].as_str().unwrap_or("(no reason given)");
            bail!("the server refused ({status}): {why}");
        }
        Ok(value)
    }
}

/// The body of a chunked answer.
fn dechunk(mut text: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = text.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        text = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// Questions as `list` shows them: each header and question, and the
/// options to give as `--answer HEADER=LABEL`.
fn print_questions(questions: &[Value]) {
    for q in questions {
        let several = if q["multiSelect"] == true {
            " (one or more)"
        } else {
            ""
        };
        println!(
            "    [{}] {}{several}",
            q["header"].as_str().unwrap_or("?"),
            q["question"]
                .as_str()
                .unwrap_or("")
                .replace('\n', "\n        ")
        );
        for o in q["options"].as_array().into_iter().flatten() {
            println!(
                "        --answer '{}={}'  {}",
                q["header"].as_str().unwrap_or("?"),
                o["label"].as_str().unwrap_or("?"),
                o["description"].as_str().unwrap_or("")
            );
        }
    }
}

/// `--answer HEADER=LABEL` and `--other HEADER=TEXT` as the answers the
/// console's API takes: one per header, in the order first named.
fn given(answers: &[String], others: &[String]) -> anyhow::Result<Value> {
    type Answer = (String, Vec<String>, Option<String>);
    fn slot<'a>(all: &'a mut Vec<Answer>, header: &str) -> &'a mut Answer {
        let i = match all.iter().position(|(h, _, _)| h == header) {
            Some(i) => i,
            None => {
                all.push((header.to_string(), Vec::new(), None));
                all.len() - 1
            }
        };
        &mut all[i]
    }
    let mut by_header: Vec<Answer> = Vec::new();
    for a in answers {
        let Some((h, label)) = a.split_once('=') else {
            bail!("--answer {a}: give HEADER=LABEL (as `toolgate approvals list` shows)");
        };
        slot(&mut by_header, h).1.push(label.to_string());
    }
    for o in others {
        let Some((h, text)) = o.split_once('=') else {
            bail!("--other {o}: give HEADER=TEXT");
        };
        if slot(&mut by_header, h)
            .2
            .replace(text.to_string())
            .is_some()
        {
            bail!("--other {o}: `{h}` has an own-words answer already");
        }
    }
    if by_header.is_empty() {
        bail!(
            "answer every question: --answer HEADER=LABEL or --other HEADER=TEXT (`toolgate approvals list` shows them)"
        );
    }
    Ok(Value::Array(
        by_header
            .into_iter()
            .map(|(header, selected, other)| json!({"header": header, "selected": selected, "other": other}))
            .collect(),
    ))
}

/// Prints each result of a decision; fails if one failed.
fn report(answer: &Value) -> anyhow::Result<ExitCode> {
    let mut failed = false;
    for r in answer["results"].as_array().into_iter().flatten() {
        if r["ok"] == true {
            println!(
                "{}: {}",
                r["id"].as_str().unwrap_or("?"),
                r["state"].as_str().unwrap_or("done")
            );
        } else {
            failed = true;
            eprintln!(
                "toolgate: {}: {}",
                r["id"].as_str().unwrap_or("?"),
                r["error"].as_str().unwrap_or("failed")
            );
        }
    }
    if let Some(g) = answer["grant"].as_str() {
        println!("grant {g}");
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

pub fn run(args: ApprovalsArgs) -> anyhow::Result<ExitCode> {
    let server = Server::new(&args)?;
    match args.command {
        ApprovalsCommand::List { json } => {
            let list = server.request("GET", "/console/api/pending", None)?;
            let entries = list.as_array().cloned().unwrap_or_default();
            if json {
                let short: Vec<Value> = entries
                    .iter()
                    .map(|e| {
                        let mut short = json!({
                            "id": e["id"], "tool": e["tool"], "arguments": e["arguments"],
                            "scope": e["scope"], "reason": e["reason"], "since": e["since"],
                        });
                        // An egress approval: the connection it is about.
                        if e["egress"].is_object() {
                            short["egress"] = e["egress"].clone();
                        }
                        if e["questions"].is_array() {
                            short["questions"] = e["questions"].clone();
                        }
                        // Under `[auth]`: who is calling, authenticated.
                        if e["caller"].is_string() {
                            short["caller"] = e["caller"].clone();
                        }
                        short
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&short)?);
            } else if entries.is_empty() {
                println!("no pending approvals");
            } else {
                for e in &entries {
                    let egress = &e["egress"];
                    let what = if egress.is_object() {
                        format!(
                            "egress {}:{} ({}) ",
                            egress["name"].as_str().unwrap_or("?"),
                            egress["port"],
                            egress["address"].as_str().unwrap_or("?")
                        )
                    } else {
                        String::new()
                    };
                    if let Some(questions) = e["questions"].as_array() {
                        println!(
                            "{}  questions from {}",
                            e["id"].as_str().unwrap_or("?"),
                            e["tool"].as_str().unwrap_or("?")
                        );
                        print_questions(questions);
                        continue;
                    }
                    let caller = e["caller"]
                        .as_str()
                        .map(|c| format!("  (caller {c})"))
                        .unwrap_or_default();
                    println!(
                        "{}  {what}{}  {}{caller}\n    {}",
                        e["id"].as_str().unwrap_or("?"),
                        e["tool"].as_str().unwrap_or("?"),
                        e["arguments"],
                        e["reason"].as_str().unwrap_or("")
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        ApprovalsCommand::Approve { ids } => report(&server.request(
            "POST",
            "/console/api/decide",
            Some(&json!({"ids": ids, "verdict": "approve"})),
        )?),
        ApprovalsCommand::Answer {
            id,
            answers,
            others,
        } => report(&server.request(
            "POST",
            "/console/api/decide",
            Some(&json!({"ids": [id], "verdict": "answer", "answers": given(&answers, &others)?})),
        )?),
        ApprovalsCommand::Deny { ids, message } => report(&server.request(
            "POST",
            "/console/api/decide",
            Some(&json!({"ids": ids, "verdict": "deny", "message": message})),
        )?),
        ApprovalsCommand::Grant {
            ids,
            tool,
            argument,
            pattern,
            scope,
            client,
            minutes,
            count,
            destination,
            port,
        } => {
            let spec = json!({
                "tool": tool, "argument": argument, "pattern": pattern, "scope": scope,
                "client": client, "durationMs": minutes.map(|m| m * 60_000), "count": count,
                "destination": destination, "port": port,
            });
            if ids.is_empty() {
                let g = server.request("POST", "/console/api/grants", Some(&spec))?;
                println!("grant {}", g["id"].as_str().unwrap_or("?"));
                Ok(ExitCode::SUCCESS)
            } else {
                report(&server.request(
                    "POST",
                    "/console/api/decide",
                    Some(&json!({"ids": ids, "verdict": "grant", "grant": spec})),
                )?)
            }
        }
        ApprovalsCommand::Grants { json } => {
            let grants = server.request("GET", "/console/api/grants", None)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&grants)?);
            } else {
                for g in grants.as_array().into_iter().flatten() {
                    let egress = match g["destination"].as_str() {
                        Some(d) => match g["port"].as_u64() {
                            Some(p) => format!("egress {d}:{p}  "),
                            None => format!("egress {d}  "),
                        },
                        None => String::new(),
                    };
                    println!(
                        "{}  {egress}{}  {}={}  used {}  by {}",
                        g["id"].as_str().unwrap_or("?"),
                        g["tool"].as_str().unwrap_or("?"),
                        g["argument"].as_str().unwrap_or("*"),
                        g["pattern"].as_str().unwrap_or("*"),
                        g["used"],
                        g["createdBy"].as_str().unwrap_or("?"),
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        ApprovalsCommand::Revoke { ids } => report(&server.request(
            "POST",
            "/console/api/grants/revoke",
            Some(&json!({ "ids": ids })),
        )?),
    }
}
