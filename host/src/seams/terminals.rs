//! The `terminals` seam: interactive programs on a pseudo-terminal of
//! their own, kept in a host-wide table between the calls that type into
//! them and read them.
//!
//! Why in the host: like a background job, a terminal outlives the call
//! that opened it and must die with the host. Unlike a job it has a
//! *terminal*: the program's stdin, stdout and stderr are a pseudo-terminal
//! device that is its session's controlling terminal
//! ([`toolgate_sandbox::spawn_terminal`]), so a shell prompts, a REPL edits
//! lines, a full-screen program draws, and Ctrl-C written to it interrupts
//! the foreground program as it would at a keyboard. The host holds the
//! controlling side: it keeps the last output-cap bytes of what the
//! program wrote (as jobs do) and feeds the same bytes to a terminal
//! emulator (`vt100`), so that [`TerminalSpace::screen`] shows what a
//! person would see — the emulator also answers a program's cursor
//! position query (`ESC [ 6 n`), which some line editors wait for.
//!
//! Each terminal is spawned exactly like a `shell.run`: the same grant
//! check, working directory, clean environment (plus
//! `TERM=xterm-256color`), egress proxy and sandbox policy. It ends when
//! its program exits (its whole process group is killed then, as for every
//! spawn), at its timeout (default [`DEFAULT_TIMEOUT`], at most
//! [`MAX_TIMEOUT`]), after [`IDLE_TIMEOUT`] without a seam call naming it,
//! by `close`, when the table is dropped with the host, or — the host
//! killed outright — by each sandbox's watcher.
//!
//! Limits, all named here: [`MAX_RUNNING`] terminals per plugin and agent
//! scope and [`MAX_HOST_RUNNING`] in the whole host; [`MAX_KEPT`]
//! remembered per scope; [`MAX_INPUT`] bytes per `write`, which must be
//! taken within [`WRITE_PATIENCE`]; [`MAX_WAIT`] for a `read`; rows within
//! [`ROWS`] and columns within [`COLS`]; the last `output_kb` bytes of
//! output kept (the plugin's `spawn_limits.output_kb`).
//!
//! The seam as a unit (see [`crate::seams`]): granted by the shell grant
//! (`shell = true`: a terminal runs shell commands; [`seam`]); host-wide
//! state [`TerminalTable`], per plugin [`TerminalSpace`]; the 0.2
//! `terminals` interface implemented on [`TerminalsView`].

use std::collections::HashMap;
use std::io;
use std::ops::RangeInclusive;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use toolgate_sandbox::Program;
use wasmtime::component::HasData;

use super::jobs::{Tail, not_here};
use super::process::{Options, Requester, SpawnError, request, spawn_error};
use super::{Seam, SeamCtx, SeamHost};
use crate::bindings::v0_2::toolgate::plugin::terminals as wit;
use crate::call::{CallSignal, Misuse};
use crate::grants::Capability;

/// The `terminals` seam: a terminal runs shell commands, so the shell
/// grant covers it.
pub fn seam<T: SeamHost>() -> Seam<T> {
    Seam {
        interface: "terminals",
        capability: Capability::Shell,
        sync: false,
        granted: |g| if g.shell { Ok(()) } else { Err("shell = true") },
        link: |linker| {
            wit::add_to_linker::<T, TerminalsView<'static>>(linker, |t| {
                TerminalsView::new(t.seams())
            })
        },
    }
}

/// A terminal's life when the request gives no timeout: 4 hours.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(4 * 60 * 60);
/// The longest life a terminal may ask for: 24 hours.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);
/// A terminal no seam call named for this long is closed: 30 minutes.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Terminals running at once per plugin and agent scope.
pub const MAX_RUNNING: usize = 8;
/// Terminals running at once in the whole host (all plugins and scopes).
pub const MAX_HOST_RUNNING: usize = 64;
/// Terminals remembered per plugin and agent scope (running and ended).
pub const MAX_KEPT: usize = 16;
/// Bytes one `write` may type: 64 KiB.
pub const MAX_INPUT: usize = 64 * 1024;
/// How long a `write` waits for the program to take its input.
pub const WRITE_PATIENCE: Duration = Duration::from_secs(5);
/// The longest a `read` waits: 30 s.
pub const MAX_WAIT: Duration = Duration::from_secs(30);
/// Rows a terminal may have.
pub const ROWS: RangeInclusive<u16> = 2..=200;
/// Columns a terminal may have.
pub const COLS: RangeInclusive<u16> = 10..=500;
/// The `TERM` a terminal's program sees.
pub const TERM: &str = "xterm-256color";

/// What a terminal is doing (the WIT `terminal-info`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TerminalInfo {
    pub id: String,
    pub command: String,
    pub running: bool,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// Its timeout, idleness, `close` or the host's exit ended it.
    pub killed: bool,
    pub elapsed: Duration,
    pub output_bytes: u64,
    pub rows: u16,
    pub cols: u16,
}

/// Output since an offset (the WIT `terminal-output`).
#[derive(Clone, Debug)]
pub struct TerminalOutput {
    pub info: TerminalInfo,
    pub data: Vec<u8>,
    pub next: u64,
    /// Bytes after the asked offset that are not in `data`.
    pub skipped: u64,
}

/// The rendered screen (the WIT `terminal-screen`).
#[derive(Clone, Debug)]
pub struct TerminalScreen {
    pub info: TerminalInfo,
    /// One string per row, trailing blanks removed.
    pub lines: Vec<String>,
    pub cursor: (u16, u16),
    pub cursor_hidden: bool,
    pub alternate_screen: bool,
    pub title: String,
}

/// What a `read` asks for (the WIT `read`'s arguments).
#[derive(Clone, Copy, Debug)]
pub struct ReadAsk {
    /// From this offset (`None`: from where the last read ended).
    pub since: Option<u64>,
    /// Wait this long for output there (at most [`MAX_WAIT`]).
    pub wait: Duration,
    /// Once some came, return after this long without more (`None`: wait
    /// all of `wait`).
    pub quiet: Option<Duration>,
    /// Bytes one answer returns at most.
    pub max: usize,
}

/// What a terminal asks for besides the command (the WIT
/// `terminal-options`).
#[derive(Clone, Debug, Default)]
pub struct TerminalOptions {
    pub workdir: Option<String>,
    pub env: Vec<(String, String)>,
    pub rows: u16,
    pub cols: u16,
    pub timeout_ms: Option<u32>,
}

/// The emulator's side channel: the title a program sets, and the answers
/// to its queries, written back to it after each chunk of output.
#[derive(Default)]
struct Replies {
    title: String,
    pending: Vec<u8>,
}

impl vt100::Callbacks for Replies {
    fn set_window_title(&mut self, _: &mut vt100::Screen, title: &[u8]) {
        // A title is a line, not a document.
        let title = String::from_utf8_lossy(&title[..title.len().min(256)]);
        self.title = title.chars().filter(|c| !c.is_control()).collect();
    }

    fn unhandled_csi(
        &mut self,
        screen: &mut vt100::Screen,
        i1: Option<u8>,
        _i2: Option<u8>,
        params: &[&[u16]],
        c: char,
    ) {
        // Device status reports: `ESC [ 5 n` (are you there) and
        // `ESC [ 6 n` (where is the cursor). Line editors (prompt_toolkit,
        // some shells) wait for the second.
        if c != 'n' || i1.is_some() || self.pending.len() > 1024 {
            return;
        }
        match params.first().and_then(|p| p.first()) {
            Some(5) => self.pending.extend_from_slice(b"\x1b[0n"),
            Some(6) => {
                let (row, col) = screen.cursor_position();
                self.pending
                    .extend_from_slice(format!("\x1b[{};{}R", row + 1, col + 1).as_bytes());
            }
            _ => {}
        }
    }
}

struct State {
    /// The controlling side of the pseudo-terminal: output is read from
    /// it, input written to it. Dropped when the terminal ends (an ended
    /// terminal holds no descriptor while it is remembered).
    master: Option<Arc<AsyncFd<OwnedFd>>>,
    output: Tail,
    screen: vt100::Parser<Replies>,
    /// Where the next `read` without an offset starts.
    delivered: u64,
    /// When a seam call last named this terminal.
    touched: Instant,
    rows: u16,
    cols: u16,
    ended: Option<Instant>,
    exit_code: Option<i32>,
    signal: Option<i32>,
    killed: bool,
}

struct Terminal {
    id: String,
    command: String,
    started: Instant,
    state: Mutex<State>,
    /// Bytes of output so far, bumped at each chunk (and at the end):
    /// what a waiting `read` watches.
    progress: watch::Sender<u64>,
    /// One `write` at a time: the input of two calls never interleaves.
    typing: tokio::sync::Mutex<()>,
    stop: CancellationToken,
    /// Notified when the terminal has ended (and its group was reaped).
    ended: watch::Receiver<bool>,
}

impl Terminal {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn info(&self) -> TerminalInfo {
        let s = self.lock();
        TerminalInfo {
            id: self.id.clone(),
            command: self.command.clone(),
            running: s.ended.is_none(),
            exit_code: s.exit_code,
            signal: s.signal,
            killed: s.killed,
            elapsed: s.ended.unwrap_or_else(Instant::now) - self.started,
            output_bytes: s.output.total,
            rows: s.rows,
            cols: s.cols,
        }
    }

    fn touch(&self) {
        self.lock().touched = Instant::now();
    }

    fn running(&self) -> bool {
        self.lock().ended.is_none()
    }
}

/// Whose terminals: (plugin, agent scope).
type Owner = (Arc<str>, String);

/// The host-wide terminal table (one per [`crate::Toolgate`]).
#[derive(Default)]
pub struct TerminalTable {
    /// Each owner's terminals, oldest first.
    terminals: Mutex<HashMap<Owner, Vec<Arc<Terminal>>>>,
    /// Held by an `open` from its count to its insertion, so that opens
    /// at once cannot pass the limits together (the map itself stays free
    /// for reads meanwhile).
    opening: Mutex<()>,
    next_id: AtomicU64,
    /// The replica the terminals run on: their ids end `@REPLICA`.
    replica: Option<Arc<str>>,
}

impl Drop for TerminalTable {
    fn drop(&mut self) {
        let all = self.terminals.get_mut().unwrap_or_else(|p| p.into_inner());
        for t in all.values().flatten() {
            t.stop.cancel();
        }
    }
}

impl TerminalTable {
    /// The table of replica `replica` (ids `term-N@REPLICA`).
    pub fn for_replica(replica: Arc<str>) -> TerminalTable {
        TerminalTable {
            terminals: Mutex::default(),
            opening: Mutex::default(),
            next_id: AtomicU64::new(0),
            replica: Some(replica),
        }
    }

    /// The view of `plugin`.
    pub fn space(self: &Arc<Self>, plugin: Arc<str>) -> TerminalSpace {
        TerminalSpace {
            table: self.clone(),
            plugin,
        }
    }

    fn all(&self) -> Vec<Arc<Terminal>> {
        let all = self.terminals.lock().unwrap_or_else(|p| p.into_inner());
        all.values().flatten().cloned().collect()
    }

    /// Terminals running now, all plugins and scopes.
    pub fn running(&self) -> usize {
        self.all().iter().filter(|t| t.running()).count()
    }

    /// Close every terminal (the host is going away). Returns once each
    /// has ended, or after `patience`.
    pub async fn shutdown(&self, patience: Duration) {
        let all = self.all();
        for t in &all {
            t.stop.cancel();
        }
        let _ = tokio::time::timeout(patience, async {
            for t in &all {
                let mut ended = t.ended.clone();
                let _ = ended.wait_for(|e| *e).await;
            }
        })
        .await;
    }
}

/// One plugin's view of the table.
#[derive(Clone)]
pub struct TerminalSpace {
    table: Arc<TerminalTable>,
    plugin: Arc<str>,
}

/// The program a terminal runs when the request names none: the host
/// user's shell (`$SHELL`, if it is an absolute path to a file), else
/// `/bin/bash`, else `/bin/sh`; interactive.
fn default_shell() -> (PathBuf, String) {
    let shell = std::env::var_os("SHELL")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && p.is_file())
        .or_else(|| Some(PathBuf::from("/bin/bash")).filter(|p| p.is_file()))
        .unwrap_or_else(|| PathBuf::from("/bin/sh"));
    let shown = format!("{} -i", shell.display());
    (shell, shown)
}

impl TerminalSpace {
    fn key(&self, scope: &str) -> Owner {
        (self.plugin.clone(), scope.to_string())
    }

    fn find(&self, scope: &str, id: &str) -> Result<Arc<Terminal>, String> {
        let all = self
            .table
            .terminals
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let found = all
            .get(&self.key(scope))
            .and_then(|l| l.iter().find(|t| t.id == id).cloned());
        drop(all);
        let t = found.ok_or_else(|| {
            not_here(
                "terminal",
                id,
                self.table.replica.as_deref(),
                "terminal_list",
            )
        })?;
        t.touch();
        Ok(t)
    }

    /// Open a terminal running `command` (or the user's shell) for the call
    /// of `who` in `scope`.
    pub fn open(
        &self,
        who: Requester<'_>,
        scope: &str,
        command: Option<String>,
        options: TerminalOptions,
    ) -> Result<TerminalInfo, SpawnError> {
        if !who.grants.shell {
            return Err(SpawnError::NotGranted(format!(
                "plugin `{}` is not granted the shell seam, which terminals need; add `shell = true` under [plugins.{}.grants] in toolgate.toml",
                who.plugin, who.plugin
            )));
        }
        let (rows, cols) = (options.rows, options.cols);
        if !ROWS.contains(&rows) || !COLS.contains(&cols) {
            return Err(SpawnError::InvalidRequest(format!(
                "a terminal of {rows} rows and {cols} columns: rows must be {} to {}, columns {} to {}",
                ROWS.start(),
                ROWS.end(),
                COLS.start(),
                COLS.end()
            )));
        }
        let (program, shown) = match command {
            Some(c) if c.trim().is_empty() => {
                return Err(SpawnError::InvalidRequest(
                    "the command is empty (leave it out for the user's shell)".into(),
                ));
            }
            Some(c) => (Program::Shell(c.clone()), c),
            None => {
                let (shell, shown) = default_shell();
                (
                    Program::Exec {
                        program: shell,
                        args: vec!["-i".into()],
                    },
                    shown,
                )
            }
        };
        let life = options
            .timeout_ms
            .map(|ms| Duration::from_millis(ms.into()))
            .unwrap_or(DEFAULT_TIMEOUT)
            .min(MAX_TIMEOUT);
        let spawn_options = Options {
            workdir: options.workdir,
            stdin: None,
            env: options.env,
            timeout_ms: None,
        };
        // The call's deadline does not bound a terminal: no `remaining`.
        let mut req = request(who.grants, program, spawn_options, None)?;
        if !req.env.iter().any(|(k, _)| k == "TERM") {
            req.env.push(("TERM".into(), TERM.into()));
        }
        let policy = super::process::sandbox_policy(who, &mut req.env, None);
        let key = self.key(scope);
        // Counted and inserted under one lock: the limits are exact.
        let _opening = self.table.opening.lock().unwrap_or_else(|p| p.into_inner());
        {
            let all = self
                .table
                .terminals
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let mine = all
                .get(&key)
                .map_or(0, |l| l.iter().filter(|t| t.running()).count());
            if mine >= MAX_RUNNING {
                return Err(SpawnError::InvalidRequest(format!(
                    "{mine} terminals are open already, the most one agent may have ({MAX_RUNNING}); close one with terminal_close"
                )));
            }
            let everyone = all.values().flatten().filter(|t| t.running()).count();
            if everyone >= MAX_HOST_RUNNING {
                return Err(SpawnError::InvalidRequest(format!(
                    "{everyone} terminals are open in this host, the most it runs at once ({MAX_HOST_RUNNING}); close one with terminal_close, or try again later"
                )));
            }
        }
        let (mut child, master) = toolgate_sandbox::spawn_terminal(
            req.program,
            &req.cwd,
            &req.env,
            &policy,
            (rows, cols),
        )
        .map_err(spawn_error)?;
        let master = nonblocking(master)
            .and_then(|fd| {
                // SAFETY: we own the descriptor and neither replace nor
                // close it while the AsyncFd holds it.
                unsafe { AsyncFd::register(fd) }.map_err(|e| e.to_string())
            })
            .map_err(|e| SpawnError::Failed(format!("watching the terminal: {e}")))?;
        let n = self.table.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let id = match &self.table.replica {
            Some(replica) => format!("term-{n}@{replica}"),
            None => format!("term-{n}"),
        };
        tracing::info!(plugin = who.plugin, terminal = %id, pid = child.id(), "terminal opened");
        let (ended_tx, ended_rx) = watch::channel(false);
        let now = Instant::now();
        let term = Arc::new(Terminal {
            id,
            command: shown,
            started: now,
            state: Mutex::new(State {
                master: Some(Arc::new(master)),
                output: Tail::new(who.grants.output_cap),
                screen: vt100::Parser::new_with_callbacks(
                    rows.try_into().expect("rows checked above"),
                    cols.try_into().expect("columns checked above"),
                    0,
                    Replies::default(),
                ),
                delivered: 0,
                touched: now,
                rows,
                cols,
                ended: None,
                exit_code: None,
                signal: None,
                killed: false,
            }),
            progress: watch::Sender::new(0),
            typing: tokio::sync::Mutex::new(()),
            stop: CancellationToken::new(),
            ended: ended_rx,
        });
        let watched = term.clone();
        tokio::spawn(async move {
            use std::os::unix::process::ExitStatusExt;
            let reading = pump(&watched);
            let killer = child.kill_handle();
            let waiting = child.wait();
            let deadline = tokio::time::sleep(life);
            tokio::pin!(reading, waiting, deadline);
            let (mut read, mut stopped) = (false, false);
            let status = loop {
                let idle_at = watched.lock().touched + IDLE_TIMEOUT;
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
                    _ = tokio::time::sleep_until(idle_at.into()), if !stopped => {
                        if watched.lock().touched + IDLE_TIMEOUT <= Instant::now() {
                            tracing::info!(terminal = %watched.id, "terminal closed: idle");
                            stopped = true;
                            killer.kill();
                        }
                    }
                }
            };
            if !read {
                // The group is gone, and with it every holder of the
                // terminal's device: what is left is read now.
                let _ = tokio::time::timeout(Duration::from_secs(2), reading).await;
            }
            {
                let mut s = watched.lock();
                s.master = None;
                s.ended = Some(Instant::now());
                s.killed = stopped;
                if let Ok(status) = status {
                    s.exit_code = status.code();
                    s.signal = status.signal();
                }
            }
            // Wake the reads waiting on it.
            watched.progress.send_modify(|_| {});
            let _ = ended_tx.send(true);
        });
        let info = term.info();
        let mut all = self
            .table
            .terminals
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let list = all.entry(key).or_default();
        list.push(term);
        // Forget the oldest ended terminals beyond the limit.
        while list.len() > MAX_KEPT {
            match list.iter().position(|t| !t.running()) {
                Some(i) => {
                    list.remove(i);
                }
                None => break,
            }
        }
        Ok(info)
    }

    /// The terminals of `scope`, oldest first.
    pub fn list(&self, scope: &str) -> Vec<TerminalInfo> {
        let all = self
            .table
            .terminals
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        all.get(&self.key(scope))
            .map(|l| l.iter().map(|t| t.info()).collect())
            .unwrap_or_default()
    }

    /// Type `input` into terminal `id`.
    pub async fn write(&self, scope: &str, id: &str, input: &[u8]) -> Result<TerminalInfo, String> {
        let t = self.find(scope, id)?;
        if input.len() > MAX_INPUT {
            return Err(format!(
                "{} bytes of input, more than one write may type ({MAX_INPUT}); send it in parts",
                input.len()
            ));
        }
        let master = t.lock().master.clone();
        let Some(master) = master else {
            return Err(ended(&t.info()));
        };
        let _typing = t.typing.lock().await;
        match tokio::time::timeout(WRITE_PATIENCE, write_all(&master, input)).await {
            Ok(Ok(())) => Ok(t.info()),
            Ok(Err(_)) if !t.running() => Err(ended(&t.info())),
            Ok(Err(e)) => Err(format!("typing into terminal `{id}` failed: {e}")),
            Err(_) => Err(format!(
                "terminal `{id}` did not take the input within {} s (its program is not reading it); read its screen, or interrupt it with \\u0003",
                WRITE_PATIENCE.as_secs()
            )),
        }
    }

    /// Output of terminal `id` as `ask` says, within `signal`'s deadline.
    pub async fn read(
        &self,
        scope: &str,
        id: &str,
        ask: ReadAsk,
        signal: Option<&CallSignal>,
    ) -> Result<TerminalOutput, String> {
        let ReadAsk {
            since,
            wait,
            quiet,
            max,
        } = ask;
        let t = self.find(scope, id)?;
        let since = since.unwrap_or_else(|| t.lock().delivered);
        let mut wait = wait.min(MAX_WAIT);
        if let Some(left) = signal.and_then(|s| s.remaining()) {
            // Leave the call time to answer.
            wait = wait.min(left.saturating_sub(Duration::from_millis(50)));
        }
        let until = tokio::time::Instant::now() + wait;
        let mut progress = t.progress.subscribe();
        let fired = async {
            match signal {
                Some(s) => {
                    s.wait().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::pin!(fired);
        loop {
            // Seen before looking, so a chunk that lands between the two
            // still wakes the wait below.
            progress.mark_unchanged();
            let (total, over) = {
                let s = t.lock();
                (s.output.total, s.ended.is_some())
            };
            if over {
                break;
            }
            // Once output is there, wait only for the quiet that ends it.
            let until = match quiet {
                Some(q) if total > since => until.min(tokio::time::Instant::now() + q),
                _ => until,
            };
            tokio::select! {
                changed = progress.changed() => if changed.is_err() { break },
                _ = tokio::time::sleep_until(until) => break,
                _ = &mut fired => break,
            }
        }
        let info = t.info();
        let mut s = t.lock();
        let (mut data, skipped) = s.output.since(since);
        let start = since + skipped;
        let mut next = start + data.len() as u64;
        if data.len() > max.max(1) {
            data.truncate(max.max(1));
            next = start + data.len() as u64;
        }
        s.delivered = s.delivered.max(next);
        Ok(TerminalOutput {
            info,
            data,
            next,
            skipped,
        })
    }

    /// The screen of terminal `id` as it stands.
    pub fn screen(&self, scope: &str, id: &str) -> Result<TerminalScreen, String> {
        let t = self.find(scope, id)?;
        let info = t.info();
        let s = t.lock();
        let screen = s.screen.screen();
        let lines = screen
            .rows(0, s.cols)
            .map(|l| l.trim_end().to_string())
            .collect();
        Ok(TerminalScreen {
            info,
            lines,
            cursor: screen.cursor_position(),
            cursor_hidden: screen.hide_cursor(),
            alternate_screen: screen.alternate_screen(),
            title: s.screen.callbacks().title.clone(),
        })
    }

    /// Resize terminal `id`: the kernel tells the program (SIGWINCH), the
    /// emulator reflows.
    pub fn resize(
        &self,
        scope: &str,
        id: &str,
        rows: u16,
        cols: u16,
    ) -> Result<TerminalInfo, String> {
        let t = self.find(scope, id)?;
        if !ROWS.contains(&rows) || !COLS.contains(&cols) {
            return Err(format!(
                "{rows} rows and {cols} columns: rows must be {} to {}, columns {} to {}",
                ROWS.start(),
                ROWS.end(),
                COLS.start(),
                COLS.end()
            ));
        }
        let size = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        {
            let mut s = t.lock();
            let Some(fd) = s.master.as_ref().map(|m| m.as_raw_fd()) else {
                drop(s);
                return Err(ended(&t.info()));
            };
            // SAFETY: TIOCSWINSZ reads one `winsize` from the pointer; the
            // descriptor stays open while the state is locked.
            let r = unsafe { libc::ioctl(fd, libc::TIOCSWINSZ, &size) };
            if r != 0 {
                return Err(format!(
                    "resizing terminal `{id}`: {}",
                    io::Error::last_os_error()
                ));
            }
            s.rows = rows;
            s.cols = cols;
            s.screen.set_size(
                rows.try_into().expect("rows checked above"),
                cols.try_into().expect("columns checked above"),
            );
        }
        Ok(t.info())
    }

    /// Close terminal `id` and wait (up to 5 s) until it has ended.
    pub async fn close(&self, scope: &str, id: &str) -> Result<TerminalInfo, String> {
        let t = self.find(scope, id)?;
        t.stop.cancel();
        let mut ended = t.ended.clone();
        let _ = tokio::time::timeout(Duration::from_secs(5), ended.wait_for(|e| *e)).await;
        Ok(t.info())
    }
}

/// Why a terminal takes no more input.
fn ended(info: &TerminalInfo) -> String {
    let how = match (info.exit_code, info.signal, info.killed) {
        (_, _, true) => "was closed".to_string(),
        (Some(code), _, _) => format!("exited with status {code}"),
        (_, Some(sig), _) => format!("was ended by signal {sig}"),
        _ => "has ended".to_string(),
    };
    format!(
        "terminal `{}` {how}: its program is gone (read what it wrote with terminal_read, or open another)",
        info.id
    )
}

/// The descriptor, non-blocking (for the runtime's reactor).
fn nonblocking(fd: OwnedFd) -> Result<OwnedFd, String> {
    // SAFETY: plain fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error().to_string());
        }
    }
    Ok(fd)
}

/// Write all of `data` to the terminal.
async fn write_all(master: &AsyncFd<OwnedFd>, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        let mut ready = master.writable().await?;
        match ready.try_io(|fd| {
            // SAFETY: writes from a live slice to a descriptor we own.
            let n = unsafe { libc::write(fd.as_raw_fd(), data.as_ptr().cast(), data.len()) };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        }) {
            Ok(Ok(n)) => data = &data[n..],
            Ok(Err(e)) => return Err(e),
            Err(_would_block) => continue,
        }
    }
    Ok(())
}

/// Read the terminal's output until its device is closed everywhere (the
/// program's group is gone: `EIO`), into the tail and the emulator,
/// answering the emulator's replies.
async fn pump(t: &Terminal) {
    let master = t.lock().master.clone();
    let Some(master) = master else {
        return;
    };
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let Ok(mut ready) = master.readable().await else {
            return;
        };
        let n = match ready.try_io(|fd| {
            // SAFETY: reads into a live buffer from a descriptor we own.
            let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        }) {
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(n)) => n,
            Err(_would_block) => continue,
        };
        let (total, replies) = {
            let mut s = t.lock();
            s.output.push(&buf[..n]);
            s.screen.process(&buf[..n]);
            let replies = std::mem::take(&mut s.screen.callbacks_mut().pending);
            (s.output.total, replies)
        };
        t.progress.send_replace(total);
        if !replies.is_empty() {
            // Best effort: a program that asked is reading.
            let _ =
                tokio::time::timeout(Duration::from_secs(1), write_all(&master, &replies)).await;
        }
    }
}

/// What the `terminals` interface sees of a store.
pub struct TerminalsView<'a> {
    space: Option<&'a TerminalSpace>,
    scope: &'a str,
    who: Requester<'a>,
}

impl<'a> TerminalsView<'a> {
    pub fn new(ctx: SeamCtx<'a>) -> Self {
        TerminalsView {
            space: ctx.shared.terminals.as_ref(),
            scope: ctx.call.map_or("", |c| c.agent_scope.as_str()),
            who: Requester::new(ctx),
        }
    }

    fn space(&self) -> wasmtime::Result<&'a TerminalSpace> {
        self.space.ok_or_else(|| {
            Misuse(format!(
                "plugin `{}` is not granted the shell, which the terminals seam needs (`shell = true` in its grants)",
                self.who.plugin
            ))
            .into()
        })
    }
}

impl HasData for TerminalsView<'static> {
    type Data<'a> = TerminalsView<'a>;
}

impl From<TerminalInfo> for wit::TerminalInfo {
    fn from(i: TerminalInfo) -> Self {
        wit::TerminalInfo {
            id: i.id,
            command: i.command,
            running: i.running,
            exit_code: i.exit_code,
            signal: i.signal,
            killed: i.killed,
            elapsed_ms: i.elapsed.as_millis() as u64,
            output_bytes: i.output_bytes,
            rows: i.rows,
            cols: i.cols,
        }
    }
}

impl wit::Host for TerminalsView<'_> {
    async fn open(
        &mut self,
        command: Option<String>,
        options: wit::TerminalOptions,
    ) -> wasmtime::Result<Result<wit::TerminalInfo, wit::SpawnError>> {
        let options = TerminalOptions {
            workdir: options.workdir,
            env: options.env,
            rows: options.rows,
            cols: options.cols,
            timeout_ms: options.timeout_ms,
        };
        let opened = self.space()?.open(self.who, self.scope, command, options);
        Ok(opened.map(Into::into).map_err(Into::into))
    }

    async fn write(
        &mut self,
        id: String,
        input: Vec<u8>,
    ) -> wasmtime::Result<Result<wit::TerminalInfo, String>> {
        let space = self.space()?;
        Ok(space.write(self.scope, &id, &input).await.map(Into::into))
    }

    async fn read(
        &mut self,
        id: String,
        since: Option<u64>,
        wait_ms: u32,
        quiet_ms: Option<u32>,
    ) -> wasmtime::Result<Result<wit::TerminalOutput, String>> {
        let space = self.space()?;
        let max = self.who.grants.output_cap.max(1);
        let read = space
            .read(
                self.scope,
                &id,
                ReadAsk {
                    since,
                    wait: Duration::from_millis(wait_ms.into()),
                    quiet: quiet_ms.map(|ms| Duration::from_millis(ms.into())),
                    max,
                },
                self.who.signal,
            )
            .await;
        Ok(read.map(|o| wit::TerminalOutput {
            info: o.info.into(),
            data: o.data,
            next: o.next,
            skipped: o.skipped,
        }))
    }

    fn screen(&mut self, id: String) -> wasmtime::Result<Result<wit::TerminalScreen, String>> {
        let space = self.space()?;
        Ok(space.screen(self.scope, &id).map(|s| wit::TerminalScreen {
            info: s.info.into(),
            lines: s.lines,
            cursor_row: s.cursor.0,
            cursor_col: s.cursor.1,
            cursor_hidden: s.cursor_hidden,
            alternate_screen: s.alternate_screen,
            title: s.title,
        }))
    }

    fn resize(
        &mut self,
        id: String,
        rows: u16,
        cols: u16,
    ) -> wasmtime::Result<Result<wit::TerminalInfo, String>> {
        let space = self.space()?;
        Ok(space.resize(self.scope, &id, rows, cols).map(Into::into))
    }

    async fn close(&mut self, id: String) -> wasmtime::Result<Result<wit::TerminalInfo, String>> {
        let space = self.space()?;
        Ok(space.close(self.scope, &id).await.map(Into::into))
    }

    fn list(&mut self) -> wasmtime::Result<Vec<wit::TerminalInfo>> {
        let space = self.space()?;
        Ok(space.list(self.scope).into_iter().map(Into::into).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The emulator answers where the cursor is (a line editor waits for
    /// it) and keeps the title on one line; it answers nothing else.
    #[test]
    fn the_emulator_answers_cursor_queries_and_keeps_the_title() {
        let mut p = vt100::Parser::new_with_callbacks(
            24.try_into().unwrap(),
            80.try_into().unwrap(),
            0,
            Replies::default(),
        );
        p.process(b"ab\r\ncd\x1b[6n\x1b[5n\x1b]2;my\ntitle\x07\x1b[?6n");
        assert_eq!(p.callbacks().pending, b"\x1b[2;3R\x1b[0n");
        assert_eq!(p.callbacks().title, "mytitle");
        assert_eq!(p.screen().contents(), "ab\ncd");
    }
}
