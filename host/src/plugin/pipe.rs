//! The pipes a guest's stdout and stderr go to.
//!
//! A guest speaks through its results, not its stdout (a sink); its stderr
//! is kept — the last few KiB — so a trap can be reported with its cause
//! (a panic message, usually). Both never block and never fail: a guest
//! that prints a lot must not crash or stall because of it, and a guest on
//! the synchronous path must never wait for the host.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// Keeps the last few KiB a guest wrote to stderr (a panic message, say),
/// so a trap can be reported with its cause. Never fails a write and never
/// blocks: a guest that logs a lot must not crash or stall because of it,
/// and a guest on the synchronous path must never wait for the host.
#[derive(Clone)]
pub struct TailPipe {
    buf: Arc<Mutex<VecDeque<u8>>>,
    /// Something was written since the last `clear` (so a warm instance
    /// that printed nothing is recycled without taking the lock).
    dirty: Arc<AtomicBool>,
    keep: usize,
}

impl TailPipe {
    /// A pipe keeping the last `keep` bytes.
    pub fn new(keep: usize) -> Self {
        TailPipe {
            buf: Arc::default(),
            dirty: Arc::default(),
            keep,
        }
    }

    /// A pipe keeping nothing (stdout: guests speak through their results).
    pub fn sink() -> Self {
        TailPipe::new(0)
    }

    /// What was kept, lossily decoded.
    pub fn tail(&self) -> String {
        let buf = self.buf.lock().unwrap_or_else(|p| p.into_inner());
        let (a, b) = buf.as_slices();
        let mut bytes = a.to_vec();
        bytes.extend_from_slice(b);
        String::from_utf8_lossy(&bytes).trim().to_string()
    }

    pub fn clear(&self) {
        if self.dirty.swap(false, Ordering::Relaxed) {
            self.buf.lock().unwrap_or_else(|p| p.into_inner()).clear();
        }
    }

    fn push(&self, data: &[u8]) {
        if self.keep == 0 {
            return;
        }
        self.dirty.store(true, Ordering::Relaxed);
        let mut buf = self.buf.lock().unwrap_or_else(|p| p.into_inner());
        buf.extend(data.iter().rev().take(self.keep).rev());
        let excess = buf.len().saturating_sub(self.keep);
        buf.drain(..excess);
    }
}

impl wasmtime_wasi::cli::IsTerminal for TailPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl wasmtime_wasi::cli::StdoutStream for TailPipe {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    /// Always ready, never blocks: writes land in the tail at once.
    fn p2_stream(&self) -> Box<dyn wasmtime_wasi::p2::OutputStream> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl wasmtime_wasi::p2::Pollable for TailPipe {
    async fn ready(&mut self) {}
}

impl wasmtime_wasi::p2::OutputStream for TailPipe {
    fn write(&mut self, bytes: bytes::Bytes) -> wasmtime_wasi::p2::StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> wasmtime_wasi::p2::StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> wasmtime_wasi::p2::StreamResult<usize> {
        Ok(64 * 1024)
    }
}

impl tokio::io::AsyncWrite for TailPipe {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.push(data);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
