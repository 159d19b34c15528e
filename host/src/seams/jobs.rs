//! The `jobs` seam: shell commands that outlive the call that started
//! them, in a host-wide job table.
//!
//! Why in the host: a component instance lives for one call (or is
//! recycled), a process must not. The table owns every job's sandboxed
//! process group; a job ends when its command exits, at its timeout, by
//! `kill`, or when the table is dropped — that is, when the host
//! ([`crate::Toolgate`]) goes away, or its tokio runtime shuts down (the
//! task that owns a child is dropped, and dropping a
//! [`toolgate_sandbox::SandboxedChild`] kills its whole group) — or when
//! the host process dies outright, when each sandbox's watcher kills its
//! group (see `toolgate_sandbox`). No job survives the host that started
//! it. The timeout and `kill` act on the process group, never wait on the
//! job's pipes: a job that closes its stdout and stderr is still killed.
//!
//! Each job is spawned exactly like a `shell.run` (the same grant check,
//! working directory, clean environment and sandbox policy); only its life
//! differs: the call's deadline does not apply, its own timeout does
//! (default [`DEFAULT_TIMEOUT`], at most [`MAX_TIMEOUT`]).
//!
//! A job's id names the replica that runs it (`job-3@r1`: see
//! [`crate::state::replica_id`]): jobs stay on their replica — a process
//! cannot move — so behind a load balancer a `job_output` or `job_kill`
//! that lands on another replica is answered with an error naming the
//! one that holds the job, never a bare "no such job".
//!
//! Jobs belong to a plugin and an agent scope; another scope sees none of
//! them. Limits: [`MAX_RUNNING`] running jobs per plugin and scope,
//! [`MAX_KEPT`] jobs remembered (the oldest finished ones are forgotten
//! first), and the last `output_kb` bytes of output kept per job (the
//! plugin's `spawn_limits.output_kb`, 1 MiB by default).
//!
//! The seam as a unit (see [`crate::seams`]): granted by the shell grant
//! (`shell = true`: a job is a shell command; [`seam`]); host-wide state
//! [`JobTable`], per plugin [`JobSpace`]; the 0.2 `jobs` interface
//! implemented on [`JobsView`].

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::sync::CancellationToken;
use toolgate_sandbox::Program;
use wasmtime::component::HasData;

use super::process::{Options, Requester, SpawnError, request, spawn_error};
use super::{Seam, SeamCtx, SeamHost};
use crate::bindings::v0_2::toolgate::plugin::jobs as wit;
use crate::call::Misuse;
use crate::grants::Capability;

/// The `jobs` seam: background jobs are shell commands, so the shell grant
/// covers them.
pub fn seam<T: SeamHost>() -> Seam<T> {
    Seam {
        interface: "jobs",
        // Background jobs are shell commands.
        capability: Capability::Shell,
        sync: false,
        granted: |g| if g.shell { Ok(()) } else { Err("shell = true") },
        link: |linker| {
            wit::add_to_linker::<T, JobsView<'static>>(linker, |t| JobsView::new(t.seams()))
        },
    }
}

/// What the `jobs` interface sees of a store: the plugin's view of the
/// table (if granted), the scope of the call, who asks.
pub struct JobsView<'a> {
    space: Option<&'a JobSpace>,
    scope: &'a str,
    who: Requester<'a>,
}

impl<'a> JobsView<'a> {
    pub fn new(ctx: SeamCtx<'a>) -> Self {
        JobsView {
            space: ctx.shared.jobs.as_ref(),
            scope: ctx.call.map_or("", |c| c.agent_scope.as_str()),
            who: Requester::new(ctx),
        }
    }

    fn space(&self) -> wasmtime::Result<&'a JobSpace> {
        self.space.ok_or_else(|| {
            Misuse(format!(
                "plugin `{}` is not granted the shell, which the jobs seam needs (`shell = true` in its grants)",
                self.who.plugin
            ))
            .into()
        })
    }
}

impl HasData for JobsView<'static> {
    type Data<'a> = JobsView<'a>;
}

impl From<JobInfo> for wit::JobInfo {
    fn from(i: JobInfo) -> Self {
        wit::JobInfo {
            id: i.id,
            command: i.command,
            running: i.running,
            exit_code: i.exit_code,
            signal: i.signal,
            killed: i.killed,
            elapsed_ms: i.elapsed.as_millis() as u64,
            output_bytes: i.output_bytes,
        }
    }
}

impl wit::Host for JobsView<'_> {
    fn start(
        &mut self,
        command: String,
        options: wit::Options,
    ) -> wasmtime::Result<Result<wit::JobInfo, wit::SpawnError>> {
        let started = self
            .space()?
            .start(self.who, self.scope, command, options.into());
        Ok(started.map(Into::into).map_err(Into::into))
    }

    fn list(&mut self) -> wasmtime::Result<Vec<wit::JobInfo>> {
        let space = self.space()?;
        Ok(space.list(self.scope).into_iter().map(Into::into).collect())
    }

    fn output(
        &mut self,
        id: String,
        since: u64,
    ) -> wasmtime::Result<Result<wit::JobOutput, String>> {
        let space = self.space()?;
        let max = self.who.grants.output_cap.max(1);
        Ok(space
            .output(self.scope, &id, since, max)
            .map(|o| wit::JobOutput {
                info: o.info.into(),
                data: o.data,
                next: o.next,
                skipped: o.skipped,
            }))
    }

    async fn kill(&mut self, id: String) -> wasmtime::Result<Result<wit::JobInfo, String>> {
        let space = self.space()?;
        Ok(space.kill(self.scope, &id).await.map(Into::into))
    }
}

/// A job's life when the request gives no timeout: 30 minutes.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// The longest life a job may ask for: 24 hours.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);
/// Jobs running at once per plugin and agent scope.
pub const MAX_RUNNING: usize = 8;
/// Jobs remembered per plugin and agent scope (running and finished).
pub const MAX_KEPT: usize = 32;

/// What a job is doing (the WIT `job-info`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobInfo {
    pub id: String,
    pub command: String,
    pub running: bool,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// Its timeout, `kill` or the host's exit ended it.
    pub killed: bool,
    pub elapsed: Duration,
    pub output_bytes: u64,
}

/// Output since an offset (the WIT `job-output`).
#[derive(Clone, Debug)]
pub struct JobOutput {
    pub info: JobInfo,
    pub data: Vec<u8>,
    pub next: u64,
    /// Bytes after `since` that are not in `data` (no longer kept).
    pub skipped: u64,
}

/// The last `cap` bytes of a stream, and how many came in all (a job's
/// output, a terminal's).
pub(super) struct Tail {
    buf: VecDeque<u8>,
    cap: usize,
    pub(super) total: u64,
}

impl Tail {
    /// An empty tail keeping at most `cap` bytes (at least one).
    pub(super) fn new(cap: usize) -> Tail {
        Tail {
            buf: VecDeque::new(),
            cap: cap.max(1),
            total: 0,
        }
    }

    pub(super) fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let bytes = &bytes[bytes.len().saturating_sub(self.cap)..];
        let over = (self.buf.len() + bytes.len()).saturating_sub(self.cap);
        self.buf.drain(..over);
        self.buf.extend(bytes);
    }

    /// The kept bytes from absolute offset `since` on, and how many bytes
    /// after `since` are gone.
    pub(super) fn since(&self, since: u64) -> (Vec<u8>, u64) {
        let first_kept = self.total - self.buf.len() as u64;
        let from = since.max(first_kept).min(self.total);
        let skip = (from - first_kept) as usize;
        (
            self.buf.iter().skip(skip).copied().collect(),
            from.saturating_sub(since),
        )
    }
}

struct State {
    output: Tail,
    ended: Option<Instant>,
    exit_code: Option<i32>,
    signal: Option<i32>,
    killed: bool,
}

struct Job {
    id: String,
    command: String,
    started: Instant,
    state: Mutex<State>,
    stop: CancellationToken,
    /// Notified when the job has ended (and was reaped).
    ended: tokio::sync::watch::Receiver<bool>,
}

impl Job {
    fn info(&self) -> JobInfo {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        JobInfo {
            id: self.id.clone(),
            command: self.command.clone(),
            running: s.ended.is_none(),
            exit_code: s.exit_code,
            signal: s.signal,
            killed: s.killed,
            elapsed: s.ended.unwrap_or_else(Instant::now) - self.started,
            output_bytes: s.output.total,
        }
    }
}

/// Whose jobs: (plugin, agent scope).
type Owner = (Arc<str>, String);

/// The host-wide job table (one per [`crate::Toolgate`]).
#[derive(Default)]
pub struct JobTable {
    /// Each owner's jobs, oldest first.
    jobs: Mutex<HashMap<Owner, Vec<Arc<Job>>>>,
    next_id: AtomicU64,
    /// The replica this table's jobs run on: their ids end `@REPLICA`
    /// ([`crate::state::replica_id`]); `None` (a table of its own, in
    /// tests): plain `job-N`.
    replica: Option<Arc<str>>,
}

impl Drop for JobTable {
    fn drop(&mut self) {
        let jobs = self.jobs.get_mut().unwrap_or_else(|p| p.into_inner());
        for job in jobs.values().flatten() {
            job.stop.cancel();
        }
    }
}

impl JobTable {
    /// The table of replica `replica`: its jobs' ids say so (`job-3@r1`),
    /// so that an id seen through a load balancer names the replica that
    /// holds the job, and another replica asked about it says where it is.
    pub fn for_replica(replica: Arc<str>) -> JobTable {
        JobTable {
            jobs: Mutex::default(),
            next_id: AtomicU64::new(0),
            replica: Some(replica),
        }
    }

    /// The view of `plugin`.
    pub fn space(self: &Arc<Self>, plugin: Arc<str>) -> JobSpace {
        JobSpace {
            table: self.clone(),
            plugin,
        }
    }

    /// Kill every job (the host is going away). Returns once each has
    /// ended, or after `patience`.
    pub async fn shutdown(&self, patience: Duration) {
        let all: Vec<Arc<Job>> = {
            let jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
            jobs.values().flatten().cloned().collect()
        };
        for job in &all {
            job.stop.cancel();
        }
        let _ = tokio::time::timeout(patience, async {
            for job in &all {
                let mut ended = job.ended.clone();
                let _ = ended.wait_for(|e| *e).await;
            }
        })
        .await;
    }

    /// Jobs running now, all plugins and scopes.
    pub fn running(&self) -> usize {
        let jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        jobs.values().flatten().filter(|j| j.info().running).count()
    }
}

/// One plugin's view of the table.
#[derive(Clone)]
pub struct JobSpace {
    table: Arc<JobTable>,
    plugin: Arc<str>,
}

/// The replica a job id names (`job-3@r1` → `r1`), if any.
pub fn replica_of(id: &str) -> Option<&str> {
    id.rsplit_once('@')
        .map(|(_, r)| r)
        .filter(|r| !r.is_empty())
}

/// Why `id` is not found here: it names another replica (a balancer sent
/// the call elsewhere than the call that started it), or none of this
/// agent's jobs.
fn no_job(id: &str, here: Option<&str>) -> String {
    not_here("job", id, here, "job_list")
}

/// Why the `what` (a job, a terminal) `id` is not found here: it names
/// another replica — a process cannot move, so it stays on the replica that
/// started it — or none of this agent's (`list_tool` lists those).
pub(super) fn not_here(what: &str, id: &str, here: Option<&str>, list_tool: &str) -> String {
    match (replica_of(id), here) {
        (Some(there), Some(here)) if there != here => format!(
            "{what} `{id}` runs on replica `{there}`, not on this one (`{here}`): a {what} stays on the replica that started it; send this call to replica `{there}` (behind a load balancer: with the session affinity, or to that replica's own address)"
        ),
        _ => format!("there is no {what} `{id}` ({list_tool} shows the {what}s of this agent)"),
    }
}

impl JobSpace {
    fn key(&self, scope: &str) -> Owner {
        (self.plugin.clone(), scope.to_string())
    }

    fn find(&self, scope: &str, id: &str) -> Option<Arc<Job>> {
        let jobs = self.table.jobs.lock().unwrap_or_else(|p| p.into_inner());
        jobs.get(&self.key(scope))?
            .iter()
            .find(|j| j.id == id)
            .cloned()
    }

    /// Start `command` for the call of `who` in `scope`.
    pub fn start(
        &self,
        who: Requester<'_>,
        scope: &str,
        command: String,
        mut options: Options,
    ) -> Result<JobInfo, SpawnError> {
        if !who.grants.shell {
            return Err(SpawnError::NotGranted(format!(
                "plugin `{}` is not granted the shell seam, which background jobs need; add `shell = true` under [plugins.{}.grants] in toolgate.toml",
                who.plugin, who.plugin
            )));
        }
        if command.trim().is_empty() {
            return Err(SpawnError::InvalidRequest("the command is empty".into()));
        }
        let timeout = options
            .timeout_ms
            .map(|ms| Duration::from_millis(ms.into()))
            .unwrap_or(DEFAULT_TIMEOUT)
            .min(MAX_TIMEOUT);
        options.timeout_ms = None;
        let stdin = options.stdin.take();
        // The call's deadline does not bound a job: no `remaining`.
        let mut req = request(who.grants, Program::Shell(command.clone()), options, None)?;
        let policy = super::process::sandbox_policy(who, &mut req.env, None);
        let key = self.key(scope);
        {
            let mut jobs = self.table.jobs.lock().unwrap_or_else(|p| p.into_inner());
            let list = jobs.entry(key.clone()).or_default();
            let running = list.iter().filter(|j| j.info().running).count();
            if running >= MAX_RUNNING {
                return Err(SpawnError::InvalidRequest(format!(
                    "{running} jobs are running already, the most one agent may have ({MAX_RUNNING}); wait for one or kill one with job_kill"
                )));
            }
        }
        let mut child = toolgate_sandbox::spawn_piped(req.program, &req.cwd, &req.env, &policy)
            .map_err(spawn_error)?;
        let n = self.table.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let id = match &self.table.replica {
            Some(replica) => format!("job-{n}@{replica}"),
            None => format!("job-{n}"),
        };
        tracing::info!(plugin = who.plugin, job = %id, pid = child.id(), "background job started");
        let (ended_tx, ended_rx) = tokio::sync::watch::channel(false);
        let job = Arc::new(Job {
            id,
            command,
            started: Instant::now(),
            state: Mutex::new(State {
                output: Tail::new(who.grants.output_cap),
                ended: None,
                exit_code: None,
                signal: None,
                killed: false,
            }),
            stop: CancellationToken::new(),
            ended: ended_rx,
        });
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let stdin_pipe = child.stdin.take();
        let watched = job.clone();
        tokio::spawn(async move {
            use std::os::unix::process::ExitStatusExt;
            use tokio::io::AsyncWriteExt;
            if let (Some(mut pipe), Some(bytes)) = (stdin_pipe, stdin) {
                // Fed in the background; closed when written (or when the
                // job ends).
                tokio::spawn(async move {
                    let _ = pipe.write_all(&bytes).await;
                });
            }
            let reading = async {
                tokio::join!(pump(stdout, &watched.state), pump(stderr, &watched.state));
            };
            // The process is watched, not its pipes: a job that closes its
            // stdout and stderr still ends at its timeout or by `kill`.
            let killer = child.kill_handle();
            let waiting = child.wait();
            let deadline = tokio::time::sleep(timeout);
            tokio::pin!(reading, waiting, deadline);
            let (mut read, mut stopped) = (false, false);
            let status = loop {
                tokio::select! {
                    status = &mut waiting => break status,
                    _ = &mut reading, if !read => read = true,
                    _ = watched.stop.cancelled(), if !stopped => {
                        stopped = true;
                        killer.kill();
                    }
                    _ = &mut deadline, if !stopped => {
                        stopped = true;
                        killer.kill();
                    }
                }
            };
            if !read {
                // The group is gone, so are the pipes' writers: what is left
                // in them is read now.
                let _ = tokio::time::timeout(Duration::from_secs(2), reading).await;
            }
            {
                let mut s = watched.state.lock().unwrap_or_else(|p| p.into_inner());
                s.ended = Some(Instant::now());
                s.killed = stopped;
                if let Ok(status) = status {
                    s.exit_code = status.code();
                    s.signal = status.signal();
                }
            }
            let _ = ended_tx.send(true);
        });
        let info = job.info();
        let mut jobs = self.table.jobs.lock().unwrap_or_else(|p| p.into_inner());
        let list = jobs.entry(key).or_default();
        list.push(job);
        // Forget the oldest finished jobs beyond the limit.
        while list.len() > MAX_KEPT {
            match list.iter().position(|j| !j.info().running) {
                Some(i) => {
                    list.remove(i);
                }
                None => break,
            }
        }
        Ok(info)
    }

    /// The jobs of `scope`, oldest first.
    pub fn list(&self, scope: &str) -> Vec<JobInfo> {
        let jobs = self.table.jobs.lock().unwrap_or_else(|p| p.into_inner());
        jobs.get(&self.key(scope))
            .map(|l| l.iter().map(|j| j.info()).collect())
            .unwrap_or_default()
    }

    /// Output of job `id` from byte `since` on, at most `max` bytes (the
    /// rest is counted as skipped and can be asked for next).
    pub fn output(
        &self,
        scope: &str,
        id: &str,
        since: u64,
        max: usize,
    ) -> Result<JobOutput, String> {
        let job = self
            .find(scope, id)
            .ok_or_else(|| no_job(id, self.table.replica.as_deref()))?;
        let info = job.info();
        let s = job.state.lock().unwrap_or_else(|p| p.into_inner());
        let (mut data, skipped) = s.output.since(since);
        let start = since + skipped;
        let mut next = start + data.len() as u64;
        if data.len() > max {
            data.truncate(max);
            next = start + max as u64;
        }
        Ok(JobOutput {
            info,
            data,
            next,
            skipped,
        })
    }

    /// Kill job `id` and wait (up to 5 s) until it has ended.
    pub async fn kill(&self, scope: &str, id: &str) -> Result<JobInfo, String> {
        let job = self
            .find(scope, id)
            .ok_or_else(|| no_job(id, self.table.replica.as_deref()))?;
        job.stop.cancel();
        let mut ended = job.ended.clone();
        let _ = tokio::time::timeout(Duration::from_secs(5), ended.wait_for(|e| *e)).await;
        Ok(job.info())
    }
}

/// Read `pipe` to its end into the job's output.
async fn pump(pipe: Option<impl AsyncRead + Unpin>, state: &Mutex<State>) {
    let Some(mut pipe) = pipe else { return };
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => state
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .output
                .push(&buf[..n]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_bytes_and_counts_the_rest() {
        let mut t = Tail::new(4);
        t.push(b"ab");
        assert_eq!(t.since(0), (b"ab".to_vec(), 0));
        t.push(b"cdef");
        assert_eq!(t.total, 6);
        assert_eq!(t.since(0), (b"cdef".to_vec(), 2));
        assert_eq!(t.since(3), (b"def".to_vec(), 0));
        assert_eq!(t.since(6), (Vec::new(), 0));
        assert_eq!(t.since(99), (Vec::new(), 0));
        t.push(b"0123456789");
        assert_eq!(t.since(0), (b"6789".to_vec(), 12));
    }
}
