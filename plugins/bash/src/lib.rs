//! The `bash` tool: run a shell command line in the host's sandbox.
//!
//! The command runs through the `shell` seam: `/bin/sh -c` on the host,
//! inside Landlock (only the granted directories writable), seccomp, resource
//! limits and a process group that is killed as a whole on timeout. The
//! component imports the seam, so it loads only where the operator granted
//! it (the built-in default: the working directory, read-write, for the
//! spawned processes only). The host keeps its own files (configuration,
//! plugins, compile cache) and `.git` read-only inside that directory.

use serde::{Deserialize, Serialize};
use toolgate_sdk::process::{self, Options};
use toolgate_sdk::{Annotations, Call, Content, ContentBlock, Schema, Tool, ToolError};

/// Default wall-clock limit of one command.
const DEFAULT_TIMEOUT_MS: u32 = 120_000;

/// Run a shell command (`/bin/sh -c`) in the working directory and return its
/// exit code and output. Runs in a sandbox: only the working directory is
/// writable (but not its `.git` or the host's own configuration: `git log`
/// and `git status` work, `git commit` does not), the network and other
/// users' files are out of reach, and the command is killed (with
/// everything it started) at its timeout.
#[derive(Deserialize, Schema)]
pub struct Bash {
    /// The command line.
    command: String,
    /// Kill the command after this many milliseconds. Default: 120000.
    #[serde(rename = "timeoutMs")]
    timeout_ms: Option<u32>,
    /// Directory to run in, relative to the working directory. Default: `.`.
    workdir: Option<String>,
}

/// What the command did.
#[derive(Serialize, Deserialize, Schema)]
pub struct Ran {
    /// Exit status, if it exited.
    exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    signal: Option<i32>,
    stdout: String,
    stderr: String,
    /// Output beyond the cap was dropped.
    truncated: bool,
    /// The timeout (or a cancellation) killed it.
    timed_out: bool,
}

impl Tool for Bash {
    const NAME: &'static str = "bash";
    type Output = Ran;

    fn execute(self, _call: &Call) -> Result<Ran, ToolError> {
        let timeout = self.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
        let options = Options {
            workdir: self.workdir,
            timeout_ms: Some(timeout),
            ..Options::default()
        };
        let out = process::shell(&self.command, &options)?;
        Ok(Ran {
            exit_code: out.exit_code,
            signal: out.signal,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            truncated: out.stdout_truncated || out.stderr_truncated,
            timed_out: out.timed_out,
        })
    }

    fn render(r: Ran) -> Vec<ContentBlock> {
        let mut s = String::new();
        if !r.stdout.is_empty() {
            s.push_str(&r.stdout);
            if !r.stdout.ends_with('\n') {
                s.push('\n');
            }
        }
        if !r.stderr.is_empty() {
            s.push_str("[stderr]\n");
            s.push_str(&r.stderr);
            if !r.stderr.ends_with('\n') {
                s.push('\n');
            }
        }
        if r.truncated {
            s.push_str("[output truncated]\n");
        }
        match (r.timed_out, r.exit_code, r.signal) {
            (true, _, _) => s.push_str("[killed: timed out]"),
            (_, Some(code), _) => s.push_str(&format!("[exit code {code}]")),
            (_, None, Some(sig)) => s.push_str(&format!("[killed by signal {sig}]")),
            _ => s.push_str("[no exit status]"),
        }
        vec![Content::text(s)]
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(Ran::schema())
    }

    fn timeout_ms() -> Option<u32> {
        // A little above the command's own default, so the command's kill
        // (with its output) normally comes first.
        Some(DEFAULT_TIMEOUT_MS + 5_000)
    }

    fn annotations() -> Annotations {
        Annotations::DESTRUCTIVE | Annotations::OPEN_WORLD
    }
}

toolgate_sdk::export! { tools: [Bash] }
