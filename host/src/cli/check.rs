//! `toolgate check FILE.wasm`: everything the host thinks of one component.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde_json::json;

use super::GlobalArgs;

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The component to check.
    #[arg(value_name = "FILE.wasm")]
    file: PathBuf,

    /// Print a JSON report instead of text.
    #[arg(long)]
    json: bool,
}

pub async fn run(global: &GlobalArgs, args: CheckArgs) -> anyhow::Result<ExitCode> {
    if !args.file.is_file() {
        anyhow::bail!("{} is not a file", args.file.display());
    }
    let dir = tempdir_with(&args.file)?;
    let host = global
        .builder()?
        .builtin_plugins(false)
        .plugin_dir(dir.path())
        .build()
        .await?;
    let generation = host.generation();
    let info = generation.plugins.first();
    let problems: Vec<String> = generation
        .problems
        .iter()
        .map(|p| p.message.clone())
        .collect();
    if args.json {
        let report = json!({
            "file": args.file.display().to_string(),
            "loaded": info.is_some(),
            "roles": info.map(|i| i.roles.clone()).unwrap_or_default(),
            "witVersion": info.map(|i| i.wit_version.clone()),
            "callPath": info.map(|i| i.path),
            "imports": info.map(|i| i.imports.clone()).unwrap_or_default(),
            "tools": generation.tools.values().map(|t| json!({
                "name": t.def.name,
                "description": t.def.description,
                "parameters": t.def.parameters,
                "outputSchema": t.def.output_schema,
                "timeoutMs": t.def.meta.timeout_ms,
                "annotations": annotations(t.def.meta.annotations),
            })).collect::<Vec<_>>(),
            "problems": problems,
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{}", args.file.display());
        match info {
            Some(i) => {
                println!("  loaded:       yes");
                println!("  wit version:  toolgate:plugin@{}", i.wit_version);
                println!(
                    "  call path:    {}",
                    match i.path {
                        crate::plugin::CallPath::Sync =>
                            "synchronous (no fiber: it imports nothing that can wait)",
                        crate::plugin::CallPath::Async => "asynchronous (on a fiber)",
                    }
                );
                println!(
                    "  roles:        {}",
                    i.roles
                        .iter()
                        .map(|r| r.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                println!("  imports:      {}", i.imports.join(", "));
            }
            None => println!("  loaded:       no"),
        }
        for t in generation.tools.values() {
            println!(
                "  tool {}: {}",
                t.def.name,
                t.def.description.lines().next().unwrap_or("")
            );
            if let Some(ms) = t.def.meta.timeout_ms {
                println!("    timeout-ms: {ms}");
            }
            let a = annotations(t.def.meta.annotations);
            if !a.is_empty() {
                println!("    annotations: {}", a.join(", "));
            }
        }
        if problems.is_empty() {
            println!("  problems:     none");
        } else {
            println!("  problems:");
            for p in &problems {
                println!("    - {p}");
            }
        }
    }
    Ok(if info.is_some() && problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

pub fn annotations(a: crate::call::Annotations) -> Vec<&'static str> {
    a.names()
}

/// A private directory holding a link to the one file, so the directory
/// loader (and its manifest handling) checks it exactly as it would load it.
fn tempdir_with(file: &std::path::Path) -> anyhow::Result<TempDir> {
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
    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
