//! The `bash` tool, the background job tools (`job_list`, `job_output`,
//! `job_kill`) and the interactive terminal tools (`terminal_open`,
//! `terminal_write`, `terminal_read`, `terminal_screen`,
//! `terminal_resize`, `terminal_close`, `terminal_list`: see [`terminal`]).
//!
//! A command runs through the `shell` seam: `/bin/sh -c` on the host,
//! inside Landlock (only the granted directories writable), seccomp,
//! resource limits and a process group killed as a whole on timeout. With
//! `run_in_background` it runs through the `jobs` seam instead: the host
//! keeps it in its job table after the call returns, sandboxed the same
//! way, until it exits, times out, is killed, or the host exits. The
//! component imports both seams, so it loads only where the operator
//! granted the shell (the built-in default: the working directory,
//! read-write, for the spawned processes only). The host keeps its own
//! files (configuration, plugins, compile cache) and `.git` read-only
//! inside that directory.
//!
//! A command that exits non-zero, dies of a signal or is killed at its
//! timeout is a *failure* (`EXIT_STATUS`, `SIGNAL`, `TIMEOUT`) whose
//! message still carries its output and status — the way agents' shells
//! report them. Output beyond [`MAX_OUTPUT_BYTES`] keeps its head and its
//! tail, with a marker in between.

use serde::{Deserialize, Serialize};
use toolgate_sdk::process::{self, Options};
use toolgate_sdk::{Annotations, Call, Content, ContentBlock, Schema, Tool, ToolError, jobs};

pub mod terminal;
use terminal::{
    TerminalClose, TerminalList, TerminalOpen, TerminalRead, TerminalResize, TerminalScreen,
    TerminalWrite,
};

/// Default wall-clock limit of one foreground command.
pub const DEFAULT_TIMEOUT_MS: u32 = 120_000;
/// Longest `timeoutMs` of a foreground command (10 minutes).
pub const MAX_TIMEOUT_MS: u32 = 600_000;
/// Bytes of output (stdout and stderr together) the model sees of one
/// command or one `job_output`: the first and the last halves beyond this.
/// It stays below the host's 16 KiB budget of a failure message, so a
/// failing command's output is never cut a second time.
pub const MAX_OUTPUT_BYTES: usize = 12_000;

/// `text` cut to `max` bytes: its first and last halves, with a marker.
fn head_tail(text: &str, max: usize) -> (String, bool) {
    if text.len() <= max {
        return (text.to_string(), false);
    }
    let mut head = max / 2;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - (max - max / 2);
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    (
        format!(
            "{}\n[… {} bytes cut …]\n{}",
            &text[..head],
            tail - head,
            &text[tail..]
        ),
        true,
    )
}

/// stdout and stderr within [`MAX_OUTPUT_BYTES`] together: stderr keeps at
/// least a third of the budget when both are long.
fn fit(stdout: &str, stderr: &str) -> (String, String, bool) {
    if stdout.len() + stderr.len() <= MAX_OUTPUT_BYTES {
        return (stdout.into(), stderr.into(), false);
    }
    let err_budget = stderr
        .len()
        .min((MAX_OUTPUT_BYTES / 3).max(MAX_OUTPUT_BYTES.saturating_sub(stdout.len())));
    let out_budget = MAX_OUTPUT_BYTES - err_budget;
    let (o, _) = head_tail(stdout, out_budget);
    let (e, _) = head_tail(stderr, err_budget);
    (o, e, true)
}

/// The text the model sees: stdout, then stderr under a `[stderr]` line.
fn show(stdout: &str, stderr: &str) -> String {
    let mut s = String::new();
    if !stdout.is_empty() {
        s.push_str(stdout);
        if !stdout.ends_with('\n') {
            s.push('\n');
        }
    }
    if !stderr.is_empty() {
        s.push_str("[stderr]\n");
        s.push_str(stderr);
        if !stderr.ends_with('\n') {
            s.push('\n');
        }
    }
    s
}

/// Run a shell command (`/bin/sh -c`) in the working directory. A command
/// that exits non-zero, is killed by a signal or reaches its timeout is
/// reported as an error, with its output. Runs in a sandbox: only the
/// working directory is writable (but not its `.git` or the host's own
/// configuration: `git log` and `git status` work, `git commit` does not),
/// the network and other users' files are out of reach, and the command is
/// killed (with everything it started) at its timeout (`timeoutMs`, default 120000, at most 600000). Output
/// beyond 12000 bytes keeps its beginning and end. With
/// `run_in_background: true` the command keeps running after this call
/// (a server, a long build): you get a job id at once; read its output
/// with `job_output`, stop it with `job_kill`.
#[derive(Deserialize, Schema)]
pub struct Bash {
    /// The command line.
    command: String,
    /// Kill the command after this many milliseconds. Default: 120000 (in
    /// the background: 1800000).
    #[serde(rename = "timeoutMs")]
    timeout_ms: Option<u32>,
    /// Directory to run in, relative to the working directory. Default: `.`.
    workdir: Option<String>,
    /// Start the command as a background job and return its id at once.
    run_in_background: Option<bool>,
}

/// What the command did.
#[derive(Serialize, Deserialize, Schema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Ran {
    /// The command ran and exited with status 0.
    Completed {
        /// Exit status (0).
        exit_code: i32,
        /// Its standard output (head and tail, when long).
        stdout: String,
        /// Its standard error (head and tail, when long).
        stderr: String,
        /// Output was cut (here or at the host's capture cap).
        truncated: bool,
    },
    /// The command was started as a background job.
    Background {
        /// The job's id, for `job_output` and `job_kill`.
        job: String,
        /// The command line.
        command: String,
    },
}

impl Tool for Bash {
    const NAME: &'static str = "bash";
    type Output = Ran;

    fn execute(self, _call: &Call) -> Result<Ran, ToolError> {
        if self.run_in_background.unwrap_or(false) {
            let options = Options {
                workdir: self.workdir,
                timeout_ms: self.timeout_ms,
                ..Options::default()
            };
            let info = jobs::start(&self.command, &options)?;
            return Ok(Ran::Background {
                job: info.id,
                command: info.command,
            });
        }
        let timeout = self.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
        if timeout > MAX_TIMEOUT_MS {
            return Err(ToolError::invalid_input(format!(
                "`timeoutMs` is {timeout}; a foreground command may run at most {MAX_TIMEOUT_MS} ms — use `run_in_background: true` for longer ones"
            )));
        }
        let options = Options {
            workdir: self.workdir,
            timeout_ms: Some(timeout),
            ..Options::default()
        };
        let out = process::shell(&self.command, &options)?;
        let (stdout, stderr, cut) = fit(
            &String::from_utf8_lossy(&out.stdout),
            &String::from_utf8_lossy(&out.stderr),
        );
        let truncated = cut || out.stdout_truncated || out.stderr_truncated;
        let shown = show(&stdout, &stderr);
        let details = serde_json::json!({
            "exit_code": out.exit_code,
            "signal": out.signal,
            "timed_out": out.timed_out,
            "truncated": truncated,
        });
        match (out.timed_out, out.exit_code, out.signal) {
            (false, Some(0), _) => Ok(Ran::Completed {
                exit_code: 0,
                stdout,
                stderr,
                truncated,
            }),
            (true, _, _) => Err(ToolError::new(
                "TIMEOUT",
                format!("{shown}[killed: timed out after {timeout} ms]"),
            )
            .with_details(details)),
            (_, Some(code), _) => Err(ToolError::new(
                "EXIT_STATUS",
                format!("{shown}[exit code {code}]"),
            )
            .with_details(details)),
            (_, None, Some(sig)) => Err(ToolError::new(
                "SIGNAL",
                format!("{shown}[killed by signal {sig}]"),
            )
            .with_details(details)),
            _ => Err(
                ToolError::new("EXIT_STATUS", format!("{shown}[no exit status]"))
                    .with_details(details),
            ),
        }
    }

    fn render(r: Ran) -> Vec<ContentBlock> {
        match r {
            Ran::Completed {
                exit_code,
                stdout,
                stderr,
                ..
            } => vec![Content::text(format!(
                "{}[exit code {exit_code}]",
                show(&stdout, &stderr)
            ))],
            Ran::Background { job, command } => vec![Content::text(format!(
                "Started `{command}` in the background as {job}. Read its output with job_output {{\"id\": \"{job}\"}}; stop it with job_kill."
            ))],
        }
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(Ran::schema())
    }

    fn timeout_ms() -> Option<u32> {
        // Above the longest foreground command, so that the command's own
        // kill (with its output) comes first.
        Some(MAX_TIMEOUT_MS + 5_000)
    }

    fn annotations() -> Annotations {
        Annotations::DESTRUCTIVE | Annotations::OPEN_WORLD
    }
}

/// A job as the job tools show it.
#[derive(Serialize, Deserialize, Schema)]
pub struct Job {
    /// The job's id.
    id: String,
    /// The command line.
    command: String,
    /// `running`, `exited`, `killed` or `signalled`.
    status: String,
    /// Exit status, once it exited.
    exit_code: Option<i32>,
    /// Milliseconds it has run (until it ended).
    elapsed_ms: u64,
    /// Bytes of output it wrote.
    output_bytes: u64,
}

/// A job's or terminal's status word: `running`, `ended_by` (what its
/// timeout, a kill or a close is called), `exited` or `signalled`.
fn status(running: bool, killed: bool, exit_code: Option<i32>, ended_by: &str) -> String {
    if running {
        "running"
    } else if killed {
        ended_by
    } else if exit_code.is_some() {
        "exited"
    } else {
        "signalled"
    }
    .to_string()
}

/// The status as a list line shows it (`exited 3`).
fn shown_status(status: &str, exit_code: Option<i32>) -> String {
    match (status, exit_code) {
        ("exited", Some(c)) => format!("exited {c}"),
        (s, _) => s.to_string(),
    }
}

impl From<jobs::JobInfo> for Job {
    fn from(i: jobs::JobInfo) -> Job {
        Job {
            status: status(i.running, i.killed, i.exit_code, "killed"),
            id: i.id,
            command: i.command,
            exit_code: i.exit_code,
            elapsed_ms: i.elapsed_ms,
            output_bytes: i.output_bytes,
        }
    }
}

fn job_line(j: &Job) -> String {
    let status = shown_status(&j.status, j.exit_code);
    format!(
        "{}  {status}  {:.1}s  {} bytes  {}",
        j.id,
        j.elapsed_ms as f64 / 1000.0,
        j.output_bytes,
        j.command
    )
}

/// List the background jobs started with `bash` `run_in_background`
/// (this agent's), with their status.
#[derive(Deserialize, Schema)]
pub struct JobList {}

impl Tool for JobList {
    const NAME: &'static str = "job_list";
    type Output = Vec<Job>;

    fn execute(self, _call: &Call) -> Result<Vec<Job>, ToolError> {
        Ok(jobs::list().into_iter().map(Job::from).collect())
    }

    fn render(v: Vec<Job>) -> Vec<ContentBlock> {
        if v.is_empty() {
            return vec![Content::text("no background jobs")];
        }
        vec![Content::text(
            v.iter().map(job_line).collect::<Vec<_>>().join("\n"),
        )]
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(<Vec<Job>>::schema())
    }

    fn annotations() -> Annotations {
        Annotations::READ_ONLY
    }

    fn is_concurrency_safe(&self) -> bool {
        true
    }
}

/// Read a background job's output (stdout and stderr as they came) and
/// status. Pass `since` = the `next` offset of the previous answer to get
/// only what is new; without it you get all the output still kept.
#[derive(Deserialize, Schema)]
pub struct JobOutput {
    /// The job's id as `bash` gave it, e.g. `job-1@web-1` (`job-N@REPLICA`).
    id: String,
    /// Byte offset to read from (the previous answer's `next`). Default: 0.
    since: Option<u64>,
}

/// A job's output.
#[derive(Serialize, Deserialize, Schema)]
pub struct Output {
    /// The job.
    job: Job,
    /// The output from `since` on (head and tail, when long).
    output: String,
    /// The offset to pass as `since` next time.
    next: u64,
    /// Bytes after `since` that are not shown (no longer kept, or cut here).
    skipped: u64,
}

impl Tool for JobOutput {
    const NAME: &'static str = "job_output";
    type Output = Output;

    fn execute(self, _call: &Call) -> Result<Output, ToolError> {
        let since = self.since.unwrap_or(0);
        let o = jobs::output(&self.id, since).map_err(ToolError::not_found)?;
        let text = String::from_utf8_lossy(&o.data);
        let (output, _) = head_tail(&text, MAX_OUTPUT_BYTES);
        let shown_cut = (text.len() - output.len().min(text.len())) as u64;
        Ok(Output {
            job: o.info.into(),
            output,
            next: o.next,
            skipped: o.skipped + shown_cut,
        })
    }

    fn render(v: Output) -> Vec<ContentBlock> {
        let mut s = String::new();
        if v.skipped > 0 {
            s.push_str(&format!("[… {} earlier bytes not shown …]\n", v.skipped));
        }
        s.push_str(&v.output);
        if !v.output.is_empty() && !v.output.ends_with('\n') {
            s.push('\n');
        }
        s.push_str(&format!("[{}; next offset {}]", job_line(&v.job), v.next));
        vec![Content::text(s)]
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(Output::schema())
    }

    fn annotations() -> Annotations {
        Annotations::READ_ONLY
    }

    fn is_concurrency_safe(&self) -> bool {
        true
    }
}

/// Stop a background job (and everything it started) and report how it
/// ended.
#[derive(Deserialize, Schema)]
pub struct JobKill {
    /// The job's id as `bash` gave it, e.g. `job-1@web-1` (`job-N@REPLICA`).
    id: String,
}

impl Tool for JobKill {
    const NAME: &'static str = "job_kill";
    type Output = Job;

    fn execute(self, _call: &Call) -> Result<Job, ToolError> {
        jobs::kill(&self.id)
            .map(Job::from)
            .map_err(ToolError::not_found)
    }

    fn render(v: Job) -> Vec<ContentBlock> {
        vec![Content::text(job_line(&v))]
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(Job::schema())
    }

    fn annotations() -> Annotations {
        Annotations::DESTRUCTIVE | Annotations::IDEMPOTENT
    }
}

toolgate_sdk::export! {
    tools: [
        Bash,
        JobList,
        JobOutput,
        JobKill,
        TerminalOpen,
        TerminalWrite,
        TerminalRead,
        TerminalScreen,
        TerminalResize,
        TerminalClose,
        TerminalList,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_and_tail_are_kept() {
        let text: String = (0..5000).map(|i| format!("{i}\n")).collect();
        let (cut, was) = head_tail(&text, 1000);
        assert!(was);
        assert!(cut.starts_with("0\n1\n"));
        assert!(cut.ends_with("4998\n4999\n"));
        assert!(cut.contains("bytes cut"));
        assert!(cut.len() < 1100);
        let (o, e, cut) = fit(&"o".repeat(20_000), &"e".repeat(20_000));
        assert!(cut && o.len() + e.len() < MAX_OUTPUT_BYTES + 100);
        assert!(e.len() >= MAX_OUTPUT_BYTES / 3);
    }
}
