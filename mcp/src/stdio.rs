//! MCP over stdin/stdout, bounded: one JSON-RPC message per line.
//!
//! Why not the SDK's line transport: it drops an oversized or unparsable
//! line without a word (the client waits forever for an answer), reads as
//! many requests as the client sends (one task each), and buffers answers
//! for a client that does not read without limit. Here:
//!
//! * a line longer than [`Limits::max_message_bytes`] is never buffered
//!   whole: it is discarded as it is read and answered with an
//!   `Invalid Request` error (`id: null`, since the id is somewhere in the
//!   part not kept);
//! * a line that is not JSON is answered `Parse error` (-32700), JSON that
//!   is not a JSON-RPC message `Invalid Request` (-32600), with its id
//!   when it has one; the connection stays open;
//! * at most [`Limits::max_in_flight`] requests are read and not yet
//!   answered; one more is answered at once with a "busy" error (-32000)
//!   and never dispatched;
//! * answers go through a queue of [`Limits::max_output_queue`] messages
//!   to a writer task; while it is full, nothing more is read — a client
//!   that does not read stops being read, and its requests wait in its
//!   pipe, not in our memory;
//! * end of input (or a read or write error) cancels `closed` at once, so
//!   every call of this client is cancelled without waiting for the SDK's
//!   drain.
//!
//! stdout carries protocol frames only; logs go to stderr.
//!
//! [`stdio`] gives the two ends as non-blocking handles driven by the
//! runtime's epoll when they are pipes or sockets — what MCP clients give a
//! server. tokio's own `stdin()`/`stdout()` do every read and write on a
//! blocking thread, a thread hand-off per message each way (measured: about
//! a tenth of the server's time per call); they remain the fallback for a
//! file or a terminal.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use rmcp::model::{ClientNotification, ErrorData, JsonRpcMessage, RequestId};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::Limits;
use super::server::BUSY;

/// Something to read the client from.
pub type Input = Box<dyn AsyncRead + Unpin + Send>;
/// Something to write to the client.
pub type Output = Box<dyn AsyncWrite + Unpin + Send>;

/// This process's stdin and stdout, non-blocking when they are pipes or
/// sockets (see the module docs).
pub fn stdio() -> (Input, Output) {
    use std::os::fd::AsFd;
    let input: Input = match std::io::stdin().as_fd().try_clone_to_owned() {
        Ok(fd) => match nonblocking_reader(fd) {
            Ok(r) => r,
            Err(_) => Box::new(tokio::io::stdin()),
        },
        Err(_) => Box::new(tokio::io::stdin()),
    };
    let output: Output = match std::io::stdout().as_fd().try_clone_to_owned() {
        Ok(fd) => match nonblocking_writer(fd) {
            Ok(w) => w,
            Err(_) => Box::new(tokio::io::stdout()),
        },
        Err(_) => Box::new(tokio::io::stdout()),
    };
    (input, output)
}

fn is_socket(fd: &std::os::fd::OwnedFd) -> bool {
    use std::os::unix::fs::FileTypeExt;
    let file = std::fs::File::from(match fd.try_clone() {
        Ok(f) => f,
        Err(_) => return false,
    });
    file.metadata().is_ok_and(|m| m.file_type().is_socket())
}

fn nonblocking_reader(fd: std::os::fd::OwnedFd) -> std::io::Result<Input> {
    if is_socket(&fd) {
        let stream = std::os::unix::net::UnixStream::from(fd);
        stream.set_nonblocking(true)?;
        return Ok(Box::new(tokio::net::UnixStream::from_std(stream)?));
    }
    Ok(Box::new(tokio::net::unix::pipe::Receiver::from_owned_fd(
        fd,
    )?))
}

fn nonblocking_writer(fd: std::os::fd::OwnedFd) -> std::io::Result<Output> {
    if is_socket(&fd) {
        let stream = std::os::unix::net::UnixStream::from(fd);
        stream.set_nonblocking(true)?;
        return Ok(Box::new(tokio::net::UnixStream::from_std(stream)?));
    }
    Ok(Box::new(tokio::net::unix::pipe::Sender::from_owned_fd(fd)?))
}

/// The transport: see the module docs.
pub struct StdioTransport<R> {
    reader: BufReader<R>,
    line: Vec<u8>,
    /// Dropping the rest of an oversized line.
    discarding: bool,
    limits: Limits,
    out: Option<mpsc::Sender<Vec<u8>>>,
    writer: Option<JoinHandle<()>>,
    /// An error answer waiting for room in the output queue.
    pending: Option<Vec<u8>>,
    in_flight: Arc<Mutex<HashSet<RequestId>>>,
    closed: CancellationToken,
    /// Requests refused as busy since the last warning logged.
    refused: u64,
    last_warning: std::time::Instant,
}

/// The transport's write failure.
#[derive(Debug, thiserror::Error)]
#[error("the client's input is closed (it stopped reading or went away)")]
pub struct Closed;

impl<R: AsyncRead + Unpin + Send> StdioTransport<R> {
    /// A transport reading `input` and writing `output`; `closed` is
    /// cancelled when the client goes away.
    pub fn new<W: AsyncWrite + Unpin + Send + 'static>(
        input: R,
        output: W,
        limits: Limits,
        closed: CancellationToken,
    ) -> Self {
        let (tx, rx) = mpsc::channel(limits.max_output_queue.max(1));
        let writer = tokio::spawn(write_frames(rx, output, closed.clone()));
        StdioTransport {
            reader: BufReader::with_capacity(64 * 1024, input),
            line: Vec::new(),
            discarding: false,
            limits,
            out: Some(tx),
            writer: Some(writer),
            pending: None,
            in_flight: Arc::default(),
            closed,
            refused: 0,
            last_warning: std::time::Instant::now() - std::time::Duration::from_secs(60),
        }
    }

    /// Read one line into `self.line`, never past the limit. Cancel-safe:
    /// a partial line stays in `self.line` for the next call.
    async fn read_line(&mut self) -> Read {
        loop {
            let (consumed, step) = {
                let available = match self.reader.fill_buf().await {
                    Ok(a) => a,
                    Err(e) => return Read::Failed(e),
                };
                if available.is_empty() {
                    return Read::Eof;
                }
                let newline = available.iter().position(|b| *b == b'\n');
                let take = newline.map_or(available.len(), |i| i + 1);
                if self.discarding {
                    if newline.is_some() {
                        self.discarding = false;
                    }
                    (take, None)
                } else if self.line.len() + take > self.limits.max_message_bytes + 1 {
                    // +1: the newline is not part of the message.
                    self.line = Vec::new();
                    self.discarding = newline.is_none();
                    (take, Some(Read::Oversized))
                } else {
                    self.line.extend_from_slice(&available[..take]);
                    (take, newline.map(|_| Read::Line))
                }
            };
            self.reader.consume(consumed);
            if let Some(step) = step {
                return step;
            }
        }
    }

    /// Queue an answer of our own (an error for a bad frame).
    fn answer(&mut self, id: Option<RequestId>, error: ErrorData) {
        let frame = json!({"jsonrpc": "2.0", "id": id, "error": error});
        let mut bytes = frame.to_string().into_bytes();
        bytes.push(b'\n');
        self.pending = Some(bytes);
    }
}

enum Read {
    Line,
    Oversized,
    Eof,
    Failed(std::io::Error),
}

/// The id of something that looked like a request, for an error answer.
fn id_of(value: &Value) -> Option<RequestId> {
    match value.get("id")? {
        Value::String(s) => Some(RequestId::String(s.as_str().into())),
        Value::Number(n) => n.as_i64().map(RequestId::Number),
        _ => None,
    }
}

impl<R: AsyncRead + Unpin + Send + 'static> Transport<RoleServer> for StdioTransport<R> {
    type Error = Closed;

    fn send(
        &mut self,
        mut item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let JsonRpcMessage::Error(e) = &mut item {
            super::exact::exact(&mut e.error);
        }
        // The request counts as in flight until its answer is in the
        // output queue: answers waiting for room count too, so a client
        // that does not read cannot make answers pile up.
        let answered = match &item {
            JsonRpcMessage::Response(r) => Some(r.id.clone()),
            JsonRpcMessage::Error(e) => e.id.clone(),
            _ => None,
        };
        let in_flight = self.in_flight.clone();
        // Serialized here, so the queue holds bytes and the future owns
        // nothing of the transport.
        let frame = serde_json::to_vec(&item).map(|mut bytes| {
            bytes.push(b'\n');
            bytes
        });
        let out = self.out.clone();
        async move {
            let sent = match (frame, out) {
                (Ok(frame), Some(out)) => out.send(frame).await.map_err(|_| Closed),
                (Ok(_), None) => Err(Closed),
                (Err(e), _) => {
                    tracing::error!(error = %e, "an answer could not be serialized; dropped");
                    Ok(())
                }
            };
            if let Some(id) = answered {
                in_flight
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&id);
            }
            sent
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            // Nothing is read while the output queue is full: a client that
            // does not read stops being read.
            let permit = self.out.as_ref()?.reserve().await.ok()?;
            if let Some(frame) = self.pending.take() {
                permit.send(frame);
                continue;
            }
            drop(permit);
            match self.read_line().await {
                Read::Line => {}
                Read::Oversized => {
                    tracing::warn!(
                        limit = self.limits.max_message_bytes,
                        "a message larger than the limit was discarded"
                    );
                    let message = format!(
                        "message too large: more than {} bytes (the server's --max-message-bytes); \
                         it was discarded",
                        self.limits.max_message_bytes
                    );
                    self.answer(None, ErrorData::invalid_request(message, None));
                    continue;
                }
                Read::Eof => {
                    tracing::info!("the client closed its input; cancelling its calls");
                    self.closed.cancel();
                    return None;
                }
                Read::Failed(e) => {
                    tracing::warn!(error = %e, "cannot read from the client; cancelling its calls");
                    self.closed.cancel();
                    return None;
                }
            }
            let mut line = std::mem::take(&mut self.line);
            while matches!(line.last(), Some(b'\n' | b'\r')) {
                line.pop();
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let parsed = serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(&line);
            let message = match parsed {
                Ok(m) => m,
                Err(e) => {
                    let (id, error) = match serde_json::from_slice::<Value>(&line) {
                        Err(_) => (None, ErrorData::parse_error(format!("not JSON: {e}"), None)),
                        Ok(Value::Array(_)) => (
                            None,
                            ErrorData::invalid_request(
                                "JSON-RPC batches are not accepted over stdio (only the \
                                 2025-03-26 revision has them, and only its HTTP sessions \
                                 take them here); send one message per line",
                                None,
                            ),
                        ),
                        Ok(v) => (id_of(&v), super::exact::invalid_message(&v)),
                    };
                    tracing::debug!(error = %error.message, "bad frame");
                    // A notification (no id) that is malformed is dropped
                    // silently, as JSON-RPC requires; everything else gets
                    // an answer.
                    let is_notification = id.is_none()
                        && serde_json::from_slice::<Value>(&line)
                            .is_ok_and(|v| v.get("method").is_some() && v.get("id").is_none());
                    if !is_notification {
                        self.answer(id, error);
                    }
                    continue;
                }
            };
            match &message {
                JsonRpcMessage::Request(request) => {
                    let mut in_flight = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
                    if in_flight.len() >= self.limits.max_in_flight {
                        let id = request.id.clone();
                        drop(in_flight);
                        self.refused += 1;
                        if self.last_warning.elapsed() >= std::time::Duration::from_secs(1) {
                            // Rate-limited: a flood must not flood the log.
                            tracing::warn!(
                                %id,
                                refused = self.refused,
                                "too many requests in flight; refusing (counted since the last warning)"
                            );
                            self.refused = 0;
                            self.last_warning = std::time::Instant::now();
                        }
                        let message = format!(
                            "server busy: {} requests of this client are in flight; retry later",
                            self.limits.max_in_flight
                        );
                        self.answer(Some(id), ErrorData::new(BUSY, message, None));
                        continue;
                    }
                    in_flight.insert(request.id.clone());
                }
                JsonRpcMessage::Notification(n) => {
                    // A cancelled request is never answered (the SDK drops
                    // its response): it no longer counts.
                    if let ClientNotification::CancelledNotification(c) = &n.notification
                        && let Some(id) = &c.params.request_id
                    {
                        self.in_flight
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .remove(id);
                    }
                }
                _ => {}
            }
            return Some(message);
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        drop(self.out.take());
        if let Some(writer) = self.writer.take() {
            // Let queued answers reach the client, briefly.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), writer).await;
        }
        Ok(())
    }
}

/// Write queued frames, flushing when the queue is empty. A write error
/// means the client went away: cancel its calls.
async fn write_frames<W: AsyncWrite + Unpin>(
    mut rx: mpsc::Receiver<Vec<u8>>,
    mut output: W,
    closed: CancellationToken,
) {
    while let Some(frame) = rx.recv().await {
        let mut ok = output.write_all(&frame).await.is_ok();
        while ok && let Ok(more) = rx.try_recv() {
            ok = output.write_all(&more).await.is_ok();
        }
        if !ok || output.flush().await.is_err() {
            tracing::info!("cannot write to the client; cancelling its calls");
            closed.cancel();
            return;
        }
    }
    let _ = output.flush().await;
}
