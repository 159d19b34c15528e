//! What callers ask for and what they get back.

use std::path::PathBuf;
use std::time::Duration;

/// What to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Program {
    /// A command line for `/bin/sh -c`.
    Shell(String),
    /// A program and its arguments. A bare name is looked up in the request's
    /// `PATH` (or `/usr/local/bin:/usr/bin:/bin` when the request sets none),
    /// and only where the sandbox may execute; a path with a `/` is taken as
    /// is (relative to the working directory).
    Exec {
        /// Program name or path.
        program: PathBuf,
        /// Arguments (without argv\[0\]).
        args: Vec<String>,
    },
}

/// One sandboxed run, as the `shell` and `subprocess` seams ask for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpawnRequest {
    /// What to run.
    pub program: Program,
    /// Working directory: absolute, existing, and inside the system view or a
    /// grant of the policy.
    pub cwd: PathBuf,
    /// The whole environment of the child. Nothing is inherited from the
    /// host and nothing is added (not even `PATH` or `HOME`).
    pub env: Vec<(String, String)>,
    /// Bytes written to the child's stdin, which is then closed. `None`:
    /// stdin is `/dev/null`.
    pub stdin: Option<Vec<u8>>,
    /// Wall-clock limit; when it passes, the whole process group is killed
    /// and [`Output::timed_out`] is set.
    pub timeout: Option<Duration>,
    /// Bytes of stdout kept: all of it up to the cap; beyond, the first
    /// half and the end, the middle read and dropped
    /// ([`Output::stdout_truncated`]).
    pub stdout_cap: usize,
    /// Bytes of stderr kept, likewise.
    pub stderr_cap: usize,
}

impl SpawnRequest {
    /// A request with no environment, no stdin, no timeout and 1 MiB output caps.
    pub fn new(program: Program, cwd: impl Into<PathBuf>) -> Self {
        SpawnRequest {
            program,
            cwd: cwd.into(),
            env: Vec::new(),
            stdin: None,
            timeout: None,
            stdout_cap: 1 << 20,
            stderr_cap: 1 << 20,
        }
    }
}

/// What a sandboxed run produced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Output {
    /// Exit code, if the process exited.
    pub exit_code: Option<i32>,
    /// The signal that killed the process, if one did.
    pub signal: Option<i32>,
    /// Up to `stdout_cap` bytes of stdout. When more came, its beginning
    /// (half the cap) and its end, joined by a marker line
    /// `[… N bytes cut …]`, `stdout_cap` bytes in all.
    pub stdout: Vec<u8>,
    /// Up to `stderr_cap` bytes of stderr, cut like stdout.
    pub stderr: Vec<u8>,
    /// stdout produced more than `stdout_cap` bytes.
    pub stdout_truncated: bool,
    /// stderr produced more than `stderr_cap` bytes.
    pub stderr_truncated: bool,
    /// The timeout passed and the process group was killed.
    pub timed_out: bool,
    /// The caller's cancellation fired and the process group was killed.
    pub cancelled: bool,
    /// The process group was killed because one stream went past
    /// [`flood_limit`] bytes (64 × its cap, at least 8 MiB).
    pub output_flood: bool,
}

impl Output {
    /// Exited with code 0, not killed.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out && !self.cancelled && !self.output_flood
    }
}

/// Bytes a stream may produce before the sandbox is killed: 64 × the cap,
/// at least 8 MiB. Below that, output beyond the cap is drained and dropped
/// so that the child never blocks on a full pipe.
pub fn flood_limit(cap: usize) -> u64 {
    (cap as u64).saturating_mul(64).max(8 << 20)
}
