//! The `shell` and `subprocess` seams: run processes in the host's sandbox.
//! A component that uses them imports them, and loads only if the operator
//! granted them.

pub use crate::bindings::toolgate::plugin::process::{Options, Output, SpawnError};
use crate::bindings::toolgate::plugin::{shell, subprocess};

impl Default for Options {
    fn default() -> Self {
        Options {
            workdir: None,
            stdin: None,
            env: Vec::new(),
            timeout_ms: None,
        }
    }
}

/// Run a shell command line (`/bin/sh -c`).
pub fn shell(command: &str, options: &Options) -> Result<Output, SpawnError> {
    shell::run(command, options)
}

/// Run a program with arguments (no shell).
pub fn run(program: &str, args: &[String], options: &Options) -> Result<Output, SpawnError> {
    subprocess::run(program, args, options)
}
