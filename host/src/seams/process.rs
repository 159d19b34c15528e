//! The `shell` and `subprocess` seams.

use crate::bindings::toolgate::plugin::process::{Options, Output, SpawnError};
use crate::plugin::store::StoreData;

/// `shell.run`: `/bin/sh -c COMMAND` in the sandbox.
pub async fn shell(
    data: &mut StoreData,
    command: String,
    options: Options,
) -> anyhow::Result<Result<Output, SpawnError>> {
    let _ = (command, options);
    Ok(Err(SpawnError::NotGranted(format!(
        "plugin `{}`: the shell seam is not available in this build",
        data.plugin
    ))))
}

/// `subprocess.run`: PROGRAM ARGS… in the sandbox, no shell.
pub async fn subprocess(
    data: &mut StoreData,
    program: String,
    args: Vec<String>,
    options: Options,
) -> anyhow::Result<Result<Output, SpawnError>> {
    let _ = (program, args, options);
    Ok(Err(SpawnError::NotGranted(format!(
        "plugin `{}`: the subprocess seam is not available in this build",
        data.plugin
    ))))
}
