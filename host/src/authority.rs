//! The host's authority as the configuration names it: derived from the
//! configuration's typed paths, and tried from inside the sandbox.
//!
//! [`configured`] is the part of the protected set that comes from
//! `toolgate.toml`: the walk of its typed paths (see
//! [`crate::config::path`]), each protected as its class says — no list of
//! keys is kept here. [`try_from_sandbox`] proves it the way an attacker
//! would test it: under the grant the built-in `bash` tool gets (the
//! working directory, read-write, for its processes), a sandboxed shell
//! tries to change every authority path, to read every secret, and a grant
//! that reaches host-written data must be refused; each attempt is paired
//! with its twin (a file beside it in the same directory, which the grant
//! does let it write), so that "blocked" means protected, not merely out
//! of reach. `toolgate sandbox check` runs it on the configuration in
//! force, and on [`sample_config`] — a configuration generated from the
//! schema with every path-valued key set — so that a key added tomorrow is
//! tried the day it exists.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use toolgate_sandbox::{Program, SpawnRequest};

use crate::HostConfig;
use crate::config::path::{Class, ConfigPath};
use crate::grants::{Authority, resolve_grants};

/// Adds what `config` names to `a`, each path by its class: authority
/// (read-only to what the host runs), secret (hidden too), host-written
/// data (hidden, and no grant may reach its directory). `workdir` is what
/// relative paths of the host's working directory start from.
pub fn configured(config: &HostConfig, workdir: &Path, a: &mut Authority) {
    let origin = config.origin();
    for p in config.paths(workdir) {
        let what = format!("{} in {origin}", p.key());
        match p.class {
            Class::Authority => a.add(&p.path, what),
            Class::Secret => a.add_secret(&p.path, what),
            Class::HostData => a.add_data(&p.path, what),
            Class::Granted | Class::WorkDir => {}
        }
    }
}

/// What became of one attempt on one configured path.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "verdict", content = "detail")]
pub enum Verdict {
    /// The attempt failed and its twin beside it succeeded.
    Contained,
    /// The host refused the grant that would reach it (host-written data).
    Refused(String),
    /// Outside the grant: unreachable anyway (the twin failed too).
    OutOfReach,
    /// Nothing there to try (an absent path is kept absent by the post-run
    /// watch; see `toolgate_sandbox::protect`).
    Absent,
    /// The attempt succeeded: the sandbox reached what the host trusts.
    Escaped(String),
    /// The attempt could not be made (the spawn was refused, …).
    Inconclusive(String),
}

/// One attempt on one path the configuration names.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Case {
    /// The key, `[trust] keys[0]`-like.
    pub key: String,
    pub class: Class,
    pub path: PathBuf,
    /// What was tried: `write`, `rename`, `read`, `grant`.
    pub attempt: &'static str,
    pub verdict: Verdict,
}

impl Case {
    /// Whether the host held (or the path is out of reach or absent).
    pub fn held(&self) -> bool {
        !matches!(self.verdict, Verdict::Escaped(_) | Verdict::Inconclusive(_))
    }
}

/// Tries every path `config` names from inside the sandbox `bash` would
/// get in `workdir` (its default grant: the directory, read-write, for its
/// processes), under the configuration's `sandbox` mode. Writes nothing
/// that stays: a write is an append-open of nothing, a rename is undone at
/// once, and an absent path is not tried.
pub async fn try_from_sandbox(
    config: &HostConfig,
    workdir: &Path,
) -> Result<Vec<Case>, crate::config::ConfigError> {
    let enforcement = &config.enforcement()?;
    let paths = config.paths(workdir);
    // The protected set exactly as the host derives it (what the lifecycle
    // uses): were a class dropped there, the attempts below would get
    // through.
    let mut derived = Authority::default();
    configured(config, workdir, &mut derived);
    let bash = || crate::plugin::builtin::default_grants("bash", workdir);
    let source = || "the built-in default of bash".to_string();
    let mut cases = Vec::new();
    // Host-written data: each one alone must make the grant refused.
    for p in paths.iter().filter(|p| p.class == Class::HostData) {
        let verdict = match resolve_grants(
            bash(),
            source(),
            workdir,
            enforcement,
            &derived.data_only(&p.path),
        ) {
            Err(why) => Verdict::Refused(why),
            Ok(_) if !absolute(&p.path).starts_with(workdir) => Verdict::OutOfReach,
            Ok(_) => Verdict::Escaped("a grant of the directory that holds it was accepted".into()),
        };
        cases.push(Case {
            key: p.key(),
            class: p.class,
            path: p.path.clone(),
            attempt: "grant",
            verdict,
        });
    }
    let tried = |p: &&ConfigPath| matches!(p.class, Class::Authority | Class::Secret);
    let grants = match resolve_grants(
        bash(),
        source(),
        workdir,
        enforcement,
        &derived.without_data(),
    ) {
        Ok(g) => g,
        Err(why) => {
            for p in paths.iter().filter(tried) {
                cases.push(Case {
                    key: p.key(),
                    class: p.class,
                    path: p.path.clone(),
                    attempt: "write",
                    verdict: Verdict::Inconclusive(format!("bash's grant: {why}")),
                });
            }
            return Ok(cases);
        }
    };
    for p in paths.iter().filter(tried) {
        let path = absolute(&p.path);
        let mut attempts = vec!["write", "rename"];
        if p.class.hidden() {
            attempts.push("read");
        }
        for attempt in attempts {
            let verdict = if !path.exists() {
                Verdict::Absent
            } else {
                attempt_from_sandbox(&path, attempt, workdir, &grants.sandbox).await
            };
            cases.push(Case {
                key: p.key(),
                class: p.class,
                path: path.clone(),
                attempt,
                verdict,
            });
        }
    }
    Ok(cases)
}

/// `path` absolute (against the current directory), canonical where it
/// exists: what the sandbox's view is made of.
fn absolute(path: &Path) -> PathBuf {
    let p = std::env::current_dir().unwrap_or_default().join(path);
    p.canonicalize().unwrap_or(p)
}

/// One attempt on `path` and its twin beside it, in one sandboxed shell.
async fn attempt_from_sandbox(
    path: &Path,
    attempt: &str,
    workdir: &Path,
    policy: &toolgate_sandbox::SandboxPolicy,
) -> Verdict {
    let dir = if path.is_dir() {
        path
    } else {
        path.parent().unwrap_or(path)
    };
    let quoted = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', "'\\''"));
    let (target, twin) = (quoted(path), quoted(dir));
    // Exit 10: the attempt succeeded; 0: it failed and the twin
    // succeeded; 20: both failed (out of reach).
    // Each step in a subshell: a failed redirection ends only that (in
    // `sh`, one on a special builtin would end the whole script).
    let try_it = match attempt {
        "write" if path.is_dir() => format!(
            "( : > {target}/.toolgate-probe ) 2>/dev/null && {{ rm -f {target}/.toolgate-probe; exit 10; }}"
        ),
        "write" => format!("( : >> {target} ) 2>/dev/null && exit 10"),
        "rename" => format!(
            "mv {target} {target}.toolgate-probe 2>/dev/null && {{ mv {target}.toolgate-probe {target}; exit 10; }}"
        ),
        _ if path.is_dir() => format!("ls -A {target} >/dev/null 2>&1 && exit 10"),
        _ => format!("( : < {target} ) 2>/dev/null && exit 10"),
    };
    let twin_file = format!("{twin}/.toolgate-twin-$$");
    let script = format!(
        "{try_it}; ( : > {twin_file} ) 2>/dev/null && {{ rm -f {twin_file}; exit 0; }}; exit 20"
    );
    let mut req = SpawnRequest::new(Program::Shell(script), workdir);
    req.env = vec![("PATH".into(), "/usr/bin:/bin".into())];
    req.timeout = Some(std::time::Duration::from_secs(10));
    match toolgate_sandbox::run(req, policy, std::future::pending()).await {
        Ok(out) => match out.exit_code {
            Some(10) => Verdict::Escaped(format!("the sandbox could {attempt} it")),
            Some(0) => Verdict::Contained,
            Some(20) => Verdict::OutOfReach,
            other => Verdict::Inconclusive(format!(
                "the probe ended with {other:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )),
        },
        Err(e) => Verdict::Inconclusive(format!("the sandbox refused to spawn: {e}")),
    }
}

/// A configuration generated from the schema: every key whose schema
/// names a path class set to a file (or directory) of its own in `dir`,
/// made there, with the least around it that the schema requires — the
/// configuration a test, or `toolgate sandbox check`, tries when a key is
/// new. Maps get one entry named `x`, arrays one item. Not checked beyond
/// the schema (the files are placeholders, not keys or roots).
pub fn sample_config(dir: &Path) -> Result<HostConfig, String> {
    let mut n = 0usize;
    let value = sample(&HostConfig::schema(), dir, &mut n)
        .ok_or("the configuration's schema names no path")?;
    let mut config: HostConfig = serde_json::from_value(value)
        .map_err(|e| format!("the generated configuration does not read: {e}"))?;
    config.source = Some(dir.join("toolgate.toml"));
    Ok(config)
}

/// The value of `schema` that reaches every classified path below it, or
/// `None` when none is below it.
fn sample(schema: &Value, dir: &Path, n: &mut usize) -> Option<Value> {
    if let Some(class) = schema
        .get("title")
        .and_then(Value::as_str)
        .and_then(Class::from_title)
    {
        *n += 1;
        let name = format!("{}-{n}", class_slug(class));
        let path = dir.join(&name);
        let made = match class {
            Class::Granted | Class::WorkDir => std::fs::create_dir_all(&path),
            _ => std::fs::write(&path, format!("a {name} placeholder\n")),
        };
        if let Err(e) = made {
            tracing::warn!(path = %path.display(), error = %e, "cannot make a sample path");
        }
        // A program is a path when it has a `/`.
        return Some(json!(format!("./{name}")));
    }
    let types = types_of(schema);
    if types.contains(&"object") {
        if let Some(Value::Object(props)) = schema.get("properties") {
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let mut out = Map::new();
            for (k, s) in props {
                if let Some(v) = sample(s, dir, n) {
                    out.insert(k.clone(), v);
                }
            }
            if out.is_empty() {
                return None;
            }
            for k in required {
                if !out.contains_key(k)
                    && let Some(s) = props.get(k)
                {
                    out.insert(k.to_string(), least(s));
                }
            }
            return Some(Value::Object(out));
        }
        if let Some(s) = schema.get("additionalProperties").filter(|s| s.is_object()) {
            return sample(s, dir, n).map(|v| json!({ "x": v }));
        }
        return None;
    }
    if types.contains(&"array") {
        return schema
            .get("items")
            .and_then(|s| sample(s, dir, n))
            .map(|v| json!([v]));
    }
    None
}

/// The least value of `schema`: its first enum value, else by type.
fn least(schema: &Value) -> Value {
    if let Some(v) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.iter().find(|v| !v.is_null()))
    {
        return v.clone();
    }
    match types_of(schema).first().copied() {
        Some("boolean") => json!(false),
        Some("integer") | Some("number") => json!(1),
        Some("array") => json!([]),
        Some("object") => json!({}),
        _ => json!("x"),
    }
}

/// The names in `type` (one or a list), `null` left out.
fn types_of(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect(),
        _ => Vec::new(),
    }
}

fn class_slug(class: Class) -> &'static str {
    match class {
        Class::Authority => "authority",
        Class::Secret => "secret",
        Class::HostData => "host-data",
        Class::Granted => "granted",
        Class::WorkDir => "workdir",
    }
}
