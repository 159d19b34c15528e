//! `toolgate pull` and `toolgate push`: components in OCI registries (see
//! `toolgate::oci` and docs/operators.md, "Plugins from OCI registries").

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use super::GlobalArgs;
use toolgate::oci::{Client, OciRef, Store};

#[derive(Args, Debug)]
pub struct PullArgs {
    /// oci://REGISTRY/REPOSITORY:TAG or …@sha256:HEX (the oci:// may be left
    /// out). The tag is resolved to a digest now; the component goes into the
    /// local store (STATE/oci), from which `[plugins.NAME] source = "…"`
    /// starts without the network.
    #[arg(value_name = "REF")]
    reference: String,
}

#[derive(Args, Debug)]
pub struct PushArgs {
    /// oci://REGISTRY/REPOSITORY:TAG to push to (the oci:// may be left out).
    #[arg(value_name = "REF")]
    reference: String,
    /// The component (.wasm) to push, as the one application/wasm layer of a
    /// Wasm OCI artifact (the layout `wkg oci push` writes).
    #[arg(value_name = "FILE")]
    file: PathBuf,
}

/// `toolgate pull REF`: prints the digest the reference resolved to.
pub async fn pull(global: &GlobalArgs, args: PullArgs) -> anyhow::Result<ExitCode> {
    let config = global.load_config()?;
    let reference = OciRef::parse(&args.reference)?;
    let dir = toolgate::state::default_dir()
        .context("no state directory to keep pulled components in (set TOOLGATE_STATE_DIR)")?;
    let store = Store::open(&toolgate::state::StateDir::open(dir)?)?;
    let stored = Client::new(&config.oci).pull(&reference, &store).await?;
    println!(
        "{reference}: {} ({} bytes, component {})",
        stored.digest,
        stored.bytes.len(),
        stored.layer_digest
    );
    Ok(ExitCode::SUCCESS)
}

/// `toolgate push REF FILE`: prints the digest of what was pushed.
pub async fn push(global: &GlobalArgs, args: PushArgs) -> anyhow::Result<ExitCode> {
    let config = global.load_config()?;
    let reference = OciRef::parse(&args.reference)?;
    let bytes = std::fs::read(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    if !toolgate::oci::layout::is_component(&bytes) {
        anyhow::bail!(
            "{} is not a WebAssembly component (build it for wasm32-wasip2, or `wasm-tools component new` a module)",
            args.file.display()
        );
    }
    let digest = Client::new(&config.oci).push(&reference, &bytes).await?;
    println!("{reference}: pushed {digest} ({} bytes)", bytes.len());
    Ok(ExitCode::SUCCESS)
}
