//! The `jobs` seam (since contract 0.2.1): shell commands that keep running
//! after the call that started them, in the host's job table. Each runs in
//! the sandbox like every spawn; its output is kept in a bounded buffer;
//! it is killed at its timeout, by [`kill`], or when the host exits. A
//! component that uses the seam imports it and loads only where the
//! operator granted the shell (`shell = true`).

use crate::bindings::toolgate::plugin::jobs as raw;
pub use crate::bindings::toolgate::plugin::jobs::{JobInfo, JobOutput};
use crate::process::{Options, SpawnError};

/// Start `command` (`/bin/sh -c`) as a background job.
pub fn start(command: &str, options: &Options) -> Result<JobInfo, SpawnError> {
    raw::start(command, options)
}

/// The jobs of the current agent scope, oldest first.
pub fn list() -> Vec<JobInfo> {
    raw::list()
}

/// Output of job `id` from byte `since` on; `Err` says why not (no such job).
pub fn output(id: &str, since: u64) -> Result<JobOutput, String> {
    raw::output(id, since)
}

/// Kill job `id` and wait for it to end.
pub fn kill(id: &str) -> Result<JobInfo, String> {
    raw::kill(id)
}
