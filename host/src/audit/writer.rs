//! The writer: group commit, checkpoints, rotation, continuing the chain.
//!
//! Every caller serialises its record's body itself (in parallel, outside
//! any lock), then queues it and waits until it is in the file. Whoever
//! finds no write in progress becomes the *leader*: it takes the bodies
//! queued so far (at most [`AUDIT_BATCH_RECORDS`]), numbers and links them
//! (see [`super::chain`]), adds a checkpoint where one is due, and writes
//! them with one `write(2)` (and, with `sync = "always"`, one
//! `fdatasync`) — so a burst of calls costs one system call, not one each.
//! With `sync = "batch"` a flusher thread runs `fdatasync` every
//! `sync_interval_ms`.
//!
//! Why a leader and not a writer thread: a call alone (the common case on
//! one connection) then costs no thread hand-off — no wake-up of another
//! thread and no wait for it to be scheduled — only its own `write(2)`;
//! under load the callers that queue while a write is in progress form the
//! next batch by themselves. A call's commit waits *asynchronously*
//! ([`Writer::append_async`]): a caller that is not the leader gives its
//! executor thread back until its batch is written, so one write in
//! progress never holds a second worker (on two cores, blocking there halved
//! `serve`'s throughput). With `sync = "always"` the leader's
//! `fdatasync` (milliseconds) runs on the blocking pool, not on an executor
//! thread. The queue holds at most [`AUDIT_QUEUE_RECORDS`] records: a
//! caller that finds it full waits for room — records are never dropped.
//!
//! Several hosts may share one file (the default path is per user): the
//! leader holds an exclusive `flock` on the file while it writes, and
//! first reads the file's last line again when another host appended
//! since (or reopens the path when another host rotated it), so every
//! host extends the same chain.
//!
//! A failed write (a full disk, a removed directory) is sticky: every
//! later call fails (closed, unless the operator chose `on_failure =
//! "continue"`) until the host restarts; the next start cuts a partial last
//! line off and says so in its `start` record.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use serde_json::json;

use super::chain::{self, GENESIS};
use super::key::CheckpointKey;
use super::{AuditError, AuditSettings, SyncMode};
use crate::budgets::{AUDIT_BATCH_RECORDS, AUDIT_MAX_TAIL_READ, AUDIT_QUEUE_RECORDS};

/// A queued body that asks for a checkpoint (a body is JSON: never this).
const CHECKPOINT_MARKER: &str = "\u{0}checkpoint:";

/// A queued body, and where the leader puts the sequence number it gets
/// (for a caller that names the record later: an intent).
struct Queued {
    body: String,
    seq: Option<Arc<AtomicU64>>,
}

/// What callers share.
struct Queue {
    pending: Vec<Queued>,
    /// Tickets handed out / written / synced to the disk.
    queued: u64,
    written: u64,
    synced: u64,
    writing: bool,
    failed: Option<String>,
    closed: bool,
}

/// What only the leader touches.
struct Io {
    file: File,
    /// Where the file ends, as far as this host knows.
    end: u64,
    /// The last record's seq and hash.
    seq: u64,
    prev: [u8; 32],
    since_checkpoint: u64,
}

pub(crate) struct Writer {
    queue: Mutex<Queue>,
    /// Wakes blocking waiters ([`Writer::append`]) when a batch is written.
    done: Condvar,
    /// Wakes asynchronous waiters ([`Writer::append_async`]) likewise.
    progress: tokio::sync::Notify,
    io: Mutex<Io>,
    settings: AuditSettings,
    key: CheckpointKey,
    instance: String,
    /// The replica this host is ([`crate::state::replica_id`]).
    replica: String,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn io_error(path: &Path, what: &str, e: std::io::Error) -> AuditError {
    AuditError::Io {
        path: path.to_path_buf(),
        what: what.to_string(),
        source: e,
    }
}

/// Holds `flock(LOCK_EX)` on a file (a descriptor of it) until dropped.
struct Flock(File);

impl Flock {
    fn take(file: File) -> std::io::Result<Self> {
        loop {
            // SAFETY: a valid open file descriptor.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
                return Ok(Flock(file));
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// Holds `flock(LOCK_EX)` on the writer's own descriptor until dropped.
struct RawFlock(std::os::fd::RawFd);

impl RawFlock {
    fn take(file: &File) -> std::io::Result<Self> {
        let fd = file.as_raw_fd();
        loop {
            // SAFETY: a valid open file descriptor, kept open by the caller
            // for as long as this value lives.
            if unsafe { libc::flock(fd, libc::LOCK_EX) } == 0 {
                return Ok(RawFlock(fd));
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

impl Drop for RawFlock {
    fn drop(&mut self) {
        // SAFETY: see `take`.
        unsafe { libc::flock(self.0, libc::LOCK_UN) };
    }
}

impl Drop for Flock {
    fn drop(&mut self) {
        // SAFETY: a valid open file descriptor.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

fn open_append(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// A file's last record: its seq, hash and kind.
type Last = Option<(u64, [u8; 32], String)>;

/// The file's last complete line and the length of a partial line after it.
fn read_tail(file: &mut File, len: u64) -> std::io::Result<(Last, u64)> {
    if len == 0 {
        return Ok((None, 0));
    }
    let start = len.saturating_sub(AUDIT_MAX_TAIL_READ);
    file.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::with_capacity((len - start) as usize);
    Read::by_ref(file).take(len - start).read_to_end(&mut buf)?;
    let complete = match buf.iter().rposition(|&b| b == b'\n') {
        Some(i) => i + 1,
        None => 0,
    };
    let partial = (buf.len() - complete) as u64;
    let body = &buf[..complete.saturating_sub(1)];
    let line = match body.iter().rposition(|&b| b == b'\n') {
        Some(i) => &body[i + 1..],
        None => body,
    };
    if line.is_empty() {
        return Ok((None, partial));
    }
    let parsed: serde_json::Value = serde_json::from_slice(line).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("its last record is not JSON ({e}); run `toolgate audit verify` on it"),
        )
    })?;
    let seq = parsed["seq"].as_u64().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "its last record has no seq; run `toolgate audit verify` on it",
        )
    })?;
    let kind = parsed["kind"].as_str().unwrap_or("").to_string();
    Ok((Some((seq, chain::sha256(line), kind)), partial))
}

impl Writer {
    /// Open (or create) the file, continue its chain, and write the
    /// `start` record.
    pub(crate) fn open(
        settings: AuditSettings,
        key: CheckpointKey,
        instance: String,
        replica: String,
        start: serde_json::Value,
    ) -> Result<Arc<Writer>, AuditError> {
        let path = settings.path.clone();
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir)
                .map_err(|e| io_error(dir, "create the directory of", e))?;
        }
        let mut file = open_append(&path).map_err(|e| io_error(&path, "open", e))?;
        let (last, partial) = {
            let clone = file.try_clone().map_err(|e| io_error(&path, "lock", e))?;
            let _lock = Flock::take(clone).map_err(|e| io_error(&path, "lock", e))?;
            let len = file
                .metadata()
                .map_err(|e| io_error(&path, "stat", e))?
                .len();
            let (last, partial) =
                read_tail(&mut file, len).map_err(|e| io_error(&path, "read the end of", e))?;
            if partial > 0 {
                // A line cut short by a crash or a full disk: not a record.
                file.set_len(len - partial)
                    .map_err(|e| io_error(&path, "cut the partial last line of", e))?;
            }
            (last, partial)
        };
        let end = file
            .metadata()
            .map_err(|e| io_error(&path, "stat", e))?
            .len();
        let (seq, prev, last_kind) = last.unwrap_or((0, GENESIS, String::new()));
        let writer = Arc::new(Writer {
            queue: Mutex::new(Queue {
                pending: Vec::new(),
                queued: 0,
                written: 0,
                synced: 0,
                writing: false,
                failed: None,
                closed: false,
            }),
            done: Condvar::new(),
            progress: tokio::sync::Notify::new(),
            io: Mutex::new(Io {
                file,
                end,
                seq,
                prev,
                since_checkpoint: 0,
            }),
            settings,
            key,
            instance,
            replica,
        });
        let mut start = start;
        if let Some(o) = start.as_object_mut() {
            o.insert(
                "previous".into(),
                if seq == 0 {
                    json!(null)
                } else {
                    json!({
                        "seq": seq,
                        "kind": last_kind,
                        // Anything but a shutdown checkpoint last: a host
                        // was killed (or is still running, sharing the file).
                        "clean": last_kind == "shutdown",
                    })
                },
            );
            o.insert("discardedPartialBytes".into(), json!(partial));
        }
        writer.append(start.to_string(), true)?;
        if writer.settings.sync == SyncMode::Batch {
            let weak = Arc::downgrade(&writer);
            let interval = writer.settings.sync_interval;
            std::thread::Builder::new()
                .name("audit-flush".into())
                .spawn(move || flusher(weak, interval))
                .map_err(|e| io_error(&writer.settings.path, "start the flusher of", e))?;
        }
        Ok(writer)
    }

    pub(crate) fn public_key(&self) -> String {
        self.key.public_hex()
    }

    pub(crate) fn instance(&self) -> &str {
        &self.instance
    }

    pub(crate) fn replica(&self) -> &str {
        &self.replica
    }

    /// Queue `body` (a JSON object) and wait, blocking this thread, until
    /// it is written (and synced, when `sync_now` or `sync = "always"`).
    /// For host events, the start and the shutdown; a call's record goes
    /// through [`Writer::append_async`].
    pub(crate) fn append(&self, body: String, sync_now: bool) -> Result<(), AuditError> {
        self.append_then(body, sync_now, false)
    }

    /// [`append`](Self::append); with `close`, the record is closed in the
    /// same step as `body` is queued, so that nothing queued by another
    /// thread while `body` is written can follow it.
    fn append_then(&self, body: String, sync_now: bool, close: bool) -> Result<(), AuditError> {
        let always = sync_now || self.settings.sync == SyncMode::Always;
        let mut body = Some(Queued { body, seq: None });
        let mut q = lock(&self.queue);
        let ticket = loop {
            if let Some(ticket) = enqueue(&mut q, &mut body)? {
                q.closed |= close;
                break ticket;
            }
            q = self.done.wait(q).unwrap_or_else(|p| p.into_inner());
        };
        loop {
            if let Some(done) = reached(&q, ticket, always) {
                return done;
            }
            if !q.writing {
                q.writing = true;
                drop(q);
                self.lead(always);
                q = lock(&self.queue);
            } else {
                q = self.done.wait(q).unwrap_or_else(|p| p.into_inner());
            }
        }
    }

    /// Queue `body` and wait until it is written (and synced, with `sync =
    /// "always"`), without holding the executor thread while another
    /// caller's write is in progress. Cancelling the future does not
    /// withdraw the record: once queued it is written.
    pub(crate) async fn append_async(self: &Arc<Self>, body: String) -> Result<(), AuditError> {
        self.append_queued(Queued { body, seq: None }).await
    }

    /// [`append_async`](Self::append_async), and the sequence number the
    /// record got (a call's intent: its final record names it).
    pub(crate) async fn append_async_seq(
        self: &Arc<Self>,
        body: String,
    ) -> Result<u64, AuditError> {
        let seq = Arc::new(AtomicU64::new(0));
        self.append_queued(Queued {
            body,
            seq: Some(seq.clone()),
        })
        .await?;
        // Stored by the leader before it marked the batch written, under
        // the queue's lock, which this caller took since.
        Ok(seq.load(Ordering::Relaxed))
    }

    async fn append_queued(self: &Arc<Self>, body: Queued) -> Result<(), AuditError> {
        let always = self.settings.sync == SyncMode::Always;
        let mut body = Some(body);
        let mut ticket = None;
        loop {
            // Registered before the state is read: a batch written in
            // between still wakes this waiter.
            let notified = self.progress.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            match self.step(&mut ticket, &mut body, always)? {
                Step::Done => return Ok(()),
                Step::Wait => notified.await,
                Step::Lead if always => {
                    // fdatasync takes milliseconds: not on an executor
                    // thread. The task owns the leadership (`writing`)
                    // from here, so dropping this future cannot leave it
                    // taken.
                    let writer = self.clone();
                    if let Err(e) = tokio::task::spawn_blocking(move || writer.lead(true)).await {
                        self.fail(&format!("the audit writer's task failed: {e}"));
                    }
                }
                Step::Lead => self.lead(false),
            }
        }
    }

    /// One look at the queue for [`Writer::append_async`] (under its
    /// lock, which is never held across an `await`): queue the body if not
    /// yet queued and there is room; then whether its ticket is done, or
    /// this caller is to lead (`writing` taken), or to wait.
    fn step(
        &self,
        ticket: &mut Option<u64>,
        body: &mut Option<Queued>,
        always: bool,
    ) -> Result<Step, AuditError> {
        let mut q = lock(&self.queue);
        let t = match *ticket {
            Some(t) => t,
            None => match enqueue(&mut q, body)? {
                Some(t) => {
                    *ticket = Some(t);
                    t
                }
                // Full: wait for the batch in progress to take it.
                None => return Ok(Step::Wait),
            },
        };
        if let Some(done) = reached(&q, t, always) {
            return done.map(|()| Step::Done);
        }
        if q.writing {
            return Ok(Step::Wait);
        }
        q.writing = true;
        Ok(Step::Lead)
    }

    /// As the leader (`writing` set by the caller): take a batch, write it
    /// and record the outcome; give the leadership back and wake every
    /// waiter.
    fn lead(&self, always: bool) {
        let (batch, before) = {
            let mut q = lock(&self.queue);
            let n = q.pending.len().min(AUDIT_BATCH_RECORDS);
            let batch: Vec<Queued> = q.pending.drain(..n).collect();
            (batch, q.written)
        };
        let n = batch.len() as u64;
        let result = self.write_batch(batch, always);
        let mut q = lock(&self.queue);
        q.writing = false;
        match result {
            Ok(()) => {
                q.written = before + n;
                if always {
                    q.synced = q.written;
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "the audit record could not be written");
                q.failed = Some(e.to_string());
            }
        }
        drop(q);
        self.wake();
    }

    /// Mark the record failed (sticky) and wake every waiter.
    fn fail(&self, why: &str) {
        let mut q = lock(&self.queue);
        q.writing = false;
        q.failed.get_or_insert_with(|| why.to_string());
        drop(q);
        self.wake();
    }

    fn wake(&self) {
        self.done.notify_all();
        self.progress.notify_waiters();
    }

    /// Number, link, write (and sync) a batch; checkpoint and rotate where
    /// due. Runs in the leader only.
    fn write_batch(&self, batch: Vec<Queued>, sync: bool) -> Result<(), AuditError> {
        let path = &self.settings.path;
        let mut io = lock(&self.io);
        // Under the lock, the file's length tells whether another host
        // wrote since: if not, this file is still the current one (another
        // host rotates only after appending its rotate checkpoint here), and
        // this host's last record is the last one — one fstat, no path
        // lookup, on the common path.
        let flock = loop {
            let flock = RawFlock::take(&io.file).map_err(|e| io_error(path, "lock", e))?;
            let len = io
                .file
                .metadata()
                .map_err(|e| io_error(path, "stat", e))?
                .len();
            if len == io.end {
                break flock;
            }
            if self.is_current(&io)? {
                self.catch_up(&mut io)?;
                break flock;
            }
            drop(flock);
            self.reopen_if_moved(&mut io)?;
        };
        let mut buf = String::with_capacity(batch.iter().map(|b| b.body.len() + 80).sum());
        for queued in &batch {
            if let Some(kind) = queued.body.strip_prefix(CHECKPOINT_MARKER) {
                self.push_checkpoint(&mut io, &mut buf, kind);
                continue;
            }
            self.push(&mut io, &mut buf, &queued.body);
            if let Some(seq) = &queued.seq {
                seq.store(io.seq, Ordering::Relaxed);
            }
            io.since_checkpoint += 1;
            if io.since_checkpoint >= self.settings.checkpoint_every {
                self.push_checkpoint(&mut io, &mut buf, "checkpoint");
            }
        }
        let rotate = io.end + buf.len() as u64 >= self.settings.rotate_bytes;
        if rotate {
            self.push_checkpoint(&mut io, &mut buf, "rotate");
        }
        (&io.file)
            .write_all(buf.as_bytes())
            .map_err(|e| io_error(path, "write to", e))?;
        if sync || rotate {
            io.file.sync_data().map_err(|e| io_error(path, "sync", e))?;
        }
        io.end += buf.len() as u64;
        if rotate {
            // Closing the rotated file's descriptor releases the lock.
            std::mem::forget(flock);
            self.rotate(&mut io)?;
        } else {
            drop(flock);
        }
        Ok(())
    }

    fn push(&self, io: &mut Io, buf: &mut String, body: &str) {
        let start = buf.len();
        chain::splice_into(buf, io.seq + 1, &io.prev, body);
        io.seq += 1;
        io.prev = chain::sha256(&buf.as_bytes()[start..]);
        buf.push('\n');
    }

    /// A signed checkpoint: `kind` is `checkpoint`, `rotate` or `shutdown`.
    fn push_checkpoint(&self, io: &mut Io, buf: &mut String, kind: &str) {
        let body = json!({
            "v": super::SCHEMA_VERSION,
            "kind": kind,
            "ts": super::now_ms(),
            "inst": self.instance,
            "replica": self.replica,
            "key": self.key.public_hex(),
        })
        .to_string();
        let unsigned = chain::splice(io.seq + 1, &io.prev, &body);
        let line = chain::append_sig(&unsigned, &self.key.sign(unsigned.as_bytes()));
        io.seq += 1;
        io.prev = chain::sha256(line.as_bytes());
        io.since_checkpoint = 0;
        buf.push_str(&line);
        buf.push('\n');
    }

    /// Whether the file this host holds is still the one at the path.
    fn is_current(&self, io: &Io) -> Result<bool, AuditError> {
        let path = &self.settings.path;
        let ours = io.file.metadata().map_err(|e| io_error(path, "stat", e))?;
        Ok(std::fs::symlink_metadata(path)
            .is_ok_and(|m| m.ino() == ours.ino() && m.dev() == ours.dev()))
    }

    /// Reopen the path if another host rotated the file away.
    fn reopen_if_moved(&self, io: &mut Io) -> Result<(), AuditError> {
        if self.is_current(io)? {
            return Ok(());
        }
        let path = &self.settings.path;
        if std::fs::symlink_metadata(path).is_err() {
            return Err(AuditError::Failed(format!(
                "{} was removed while the host was writing it; restart the host to start a new file",
                path.display()
            )));
        }
        io.file = open_append(path).map_err(|e| io_error(path, "reopen", e))?;
        io.end = u64::MAX; // read its tail under the lock
        Ok(())
    }

    /// Under the lock: read the last record again if another host
    /// appended since this one last wrote.
    fn catch_up(&self, io: &mut Io) -> Result<(), AuditError> {
        let path = &self.settings.path;
        let len = io
            .file
            .metadata()
            .map_err(|e| io_error(path, "stat", e))?
            .len();
        if len == io.end {
            return Ok(());
        }
        let (last, partial) =
            read_tail(&mut io.file, len).map_err(|e| io_error(path, "read the end of", e))?;
        if partial > 0 {
            return Err(AuditError::Failed(format!(
                "{} ends with a partial line (another host failed mid-write); restart to repair it",
                path.display()
            )));
        }
        let (seq, prev, _) = last.unwrap_or((0, GENESIS, String::new()));
        io.seq = seq;
        io.prev = prev;
        io.end = len;
        Ok(())
    }

    /// Move the full file aside as `PATH.<last seq, 12 digits>` and start
    /// a new one at `PATH` (its first record links to the last one here).
    fn rotate(&self, io: &mut Io) -> Result<(), AuditError> {
        let path = &self.settings.path;
        let aside = rotated_name(path, io.seq);
        std::fs::rename(path, &aside).map_err(|e| io_error(path, "rotate", e))?;
        io.file = open_append(path).map_err(|e| io_error(path, "create", e))?;
        io.end = 0;
        if let Some(dir) = path.parent() {
            let _ = File::open(dir).and_then(|d| d.sync_all());
        }
        tracing::info!(file = %aside.display(), "audit record rotated");
        Ok(())
    }

    /// Sync what was written so far (the flusher, and the shutdown).
    fn sync_written(&self) {
        let upto = lock(&self.queue).written;
        let synced = {
            let io = lock(&self.io);
            // A clone of the descriptor: fdatasync without holding up the
            // leader for long.
            io.file.try_clone()
        };
        if let Ok(f) = synced
            && f.sync_data().is_ok()
        {
            let mut q = lock(&self.queue);
            if q.synced < upto {
                q.synced = upto;
            }
        }
    }

    /// Write the signed `shutdown` checkpoint and sync. Later appends fail.
    pub(crate) fn close(&self) -> Result<(), AuditError> {
        {
            let q = lock(&self.queue);
            if q.closed || q.failed.is_some() {
                return Ok(());
            }
        }
        // Through the queue, so that it comes after every record queued
        // before; closed as it is queued, so that no record comes after.
        self.append_then(format!("{CHECKPOINT_MARKER}shutdown"), true, true)
    }
}

/// What a caller of [`Writer::append_async`] does next.
enum Step {
    Done,
    Wait,
    Lead,
}

/// Queue `body` (taken out of it) and return its ticket; `None` when the
/// queue is full (wait for room and try again). Fails when the record failed or is closed.
fn enqueue(q: &mut Queue, body: &mut Option<Queued>) -> Result<Option<u64>, AuditError> {
    if let Some(e) = &q.failed {
        return Err(AuditError::Failed(e.clone()));
    }
    if q.closed {
        return Err(AuditError::Failed("the audit record is closed".into()));
    }
    // Full only while a write is in progress: otherwise this caller leads
    // and takes the queue.
    if q.pending.len() >= AUDIT_QUEUE_RECORDS && q.writing {
        return Ok(None);
    }
    q.pending.extend(body.take());
    q.queued += 1;
    Ok(Some(q.queued))
}

/// Whether ticket `ticket` is done: written (or synced, when `synced`),
/// or failed.
fn reached(q: &Queue, ticket: u64, synced: bool) -> Option<Result<(), AuditError>> {
    let upto = if synced { q.synced } else { q.written };
    if upto >= ticket {
        return Some(Ok(()));
    }
    q.failed
        .as_ref()
        .map(|e| Err(AuditError::Failed(e.clone())))
}

/// The name a rotated file gets.
pub(crate) fn rotated_name(path: &Path, last_seq: u64) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".{last_seq:012}"));
    PathBuf::from(s)
}

fn flusher(writer: Weak<Writer>, interval: Duration) {
    let mut last = Instant::now();
    loop {
        std::thread::sleep(interval.saturating_sub(last.elapsed()));
        last = Instant::now();
        let Some(w) = writer.upgrade() else { return };
        {
            let q = lock(&w.queue);
            if q.closed || q.failed.is_some() {
                return;
            }
            if q.synced >= q.written {
                continue;
            }
        }
        w.sync_written();
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.close();
    }
}
