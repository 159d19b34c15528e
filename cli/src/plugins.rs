//! `toolgate plugins`: what is loaded, and the order of every chain; per
//! plugin of every layer its lifecycle state (serving / refused, with the
//! error / loading), the generation that loaded the version serving, its
//! SHA-256, load time and cost; the skills of `[skills]`, each with the
//! digest of its `SKILL.md`, and those not loaded with why.

use std::fmt::Write as _;
use std::process::ExitCode;

use clap::Args;
use serde_json::json;

use super::GlobalArgs;
use toolgate::policy::PolicySource;

#[derive(Args, Debug)]
pub struct PluginsArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub async fn run(global: &GlobalArgs, args: PluginsArgs) -> anyhow::Result<ExitCode> {
    let host = global.host().await?;
    let g = host.generation();
    let chains = g.chain_order();
    let skills = host.skills();
    let mut out = String::new();
    if args.json {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&json!({
                "plugins": g.plugins,
                "chains": chains.iter().map(|(role, name, prio, source)| json!({
                    "role": role, "name": name, "priority": prio,
                    "source": match source { PolicySource::Native => "native".to_string(), PolicySource::Component { plugin } => plugin.clone() },
                })).collect::<Vec<_>>(),
                "problems": g.problems,
                "status": host.plugin_status(),
                "mcpServers": host.mcp_servers(),
                "skills": skills.skills().map(|s| json!({
                    "name": s.name, "digest": s.digest, "dir": s.dir,
                    "writable": s.writable, "resources": s.resources.len(),
                })).collect::<Vec<_>>(),
                "skillProblems": skills.problems(),
            }))?
        )?;
        super::print_out(out.trim_end())?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(out, "plugins (generation {}):", g.number)?;
    for p in &g.plugins {
        writeln!(
            out,
            "  {:<18} {:<28} {}",
            p.name,
            p.roles
                .iter()
                .map(|r| r.as_str())
                .collect::<Vec<_>>()
                .join(","),
            p.origin
        )?;
        if !p.tools.is_empty() {
            writeln!(out, "  {:<18} tools: {}", "", p.tools.join(", "))?;
        }
    }
    writeln!(
        out,
        "\nlifecycle (generation, state, sha256, load time, cost):"
    )?;
    for s in host.plugin_status() {
        let name = if s.scope.is_empty() {
            s.name.clone()
        } else {
            format!("{}@{}", s.name, s.scope)
        };
        let state = match s.state {
            toolgate::registry::PluginState::Serving => "serving",
            toolgate::registry::PluginState::Refused => "refused",
            toolgate::registry::PluginState::Loading => "loading",
        };
        writeln!(
            out,
            "  {:<18} {:<8} gen {:<4} sha256 {}  load {:.1} ms  {} KiB, {} idle instance(s) of up to {} MiB",
            name,
            state,
            s.generation
                .map(|g| g.to_string())
                .unwrap_or_else(|| "-".into()),
            s.sha256.as_deref().unwrap_or("-"),
            s.cost.load_us as f64 / 1000.0,
            s.cost.component_bytes / 1024,
            s.cost.idle_instances,
            s.cost.memory_mb,
        )?;
        if let Some(why) = &s.refused {
            writeln!(out, "  {:<18} refused: {why}", "")?;
        }
    }
    let servers = host.mcp_servers();
    if !servers.is_empty() {
        writeln!(out, "\nMCP servers:")?;
        for s in &servers {
            let state = serde_json::to_value(s.state).unwrap_or_default();
            writeln!(
                out,
                "  {:<18} {:<6} {:<13} {} tool(s){}",
                s.name,
                s.transport,
                state.as_str().unwrap_or(""),
                s.tools,
                s.last_error
                    .as_ref()
                    .map(|e| format!("; last error: {e}"))
                    .unwrap_or_default()
            )?;
            if !s.auto_granted.is_empty() {
                let dirs: Vec<String> = s
                    .auto_granted
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect();
                writeln!(
                    out,
                    "  {:<18} granted read-only automatically: {}",
                    "",
                    dirs.join(", ")
                )?;
            }
        }
    }
    if !skills.is_empty() || !skills.problems().is_empty() {
        writeln!(out, "\nskills (digest of SKILL.md, directory):")?;
        for s in skills.skills() {
            writeln!(
                out,
                "  {:<18} {}  {}{}",
                s.name,
                s.digest,
                s.dir.display(),
                if s.writable {
                    " (writable_dirs: not protected)"
                } else {
                    ""
                }
            )?;
        }
        for p in skills.problems() {
            writeln!(out, "  - {p}")?;
        }
    }
    writeln!(
        out,
        "\nchains (in order; lower priority runs first / outermost):"
    )?;
    let mut last = None;
    for (role, name, prio, source) in &chains {
        if last != Some(*role) {
            writeln!(out, "  {role}:")?;
            last = Some(*role);
        }
        let src = match source {
            PolicySource::Native => "native".to_string(),
            PolicySource::Component { .. } => "component".to_string(),
        };
        writeln!(out, "    {prio:>5}  {name} ({src})")?;
    }
    if !g.problems.is_empty() {
        writeln!(out, "\nproblems:")?;
        for p in &g.problems {
            writeln!(out, "  - {p}")?;
        }
    }
    super::print_out(out.trim_end())?;
    Ok(ExitCode::SUCCESS)
}
