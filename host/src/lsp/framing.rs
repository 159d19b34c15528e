//! The base protocol of LSP: each JSON-RPC message behind a
//! `Content-Length` header, over a language server's stdin and stdout.
//!
//! Written here, at thirty lines, because the crates that frame LSP do not
//! fit a host that must bound what a server makes it hold: `lsp-server`'s
//! reader is blocking and allocates whatever length a header claims;
//! `async-lsp` frames inside its own tower service stack and typed router,
//! while the `lsp` seam forwards a component's query as JSON. Here a header
//! line, the header block and the body each have a cap, and a server that
//! passes one ends (its answers can no longer be told apart).

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The largest message a server may send: 64 MiB (a workspace's symbols or
/// a large file's diagnostics fit many times over).
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;
/// The largest header block: 8 KiB.
pub const MAX_HEADER_BYTES: usize = 8 << 10;

/// Why the stream from a server cannot be read on.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("reading from the server: {0}")]
    Io(#[from] std::io::Error),
    #[error("the server sent a header block past {MAX_HEADER_BYTES} bytes")]
    HeaderTooLong,
    #[error("the server sent a message without `Content-Length`")]
    NoLength,
    #[error("the server sent a message of {0} bytes, more than {MAX_MESSAGE_BYTES}")]
    TooLarge(usize),
    #[error("the server sent a message that is not JSON: {0}")]
    NotJson(serde_json::Error),
}

/// The next message, or `None` at the end of the stream.
pub async fn read_message<R: AsyncBufRead + Unpin>(
    reader: &mut R,
) -> Result<Option<Value>, FrameError> {
    let mut length = None;
    let mut header = 0usize;
    let mut line = Vec::new();
    loop {
        line.clear();
        let budget = (MAX_HEADER_BYTES - header) as u64 + 1;
        let n = (&mut *reader)
            .take(budget)
            .read_until(b'\n', &mut line)
            .await?;
        if n == 0 {
            return if header == 0 {
                Ok(None)
            } else {
                Err(FrameError::Io(std::io::ErrorKind::UnexpectedEof.into()))
            };
        }
        header += n;
        if header > MAX_HEADER_BYTES || !line.ends_with(b"\n") {
            return Err(FrameError::HeaderTooLong);
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            break;
        }
        if let Some((name, value)) = text.split_once(':')
            && name.trim().eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse::<usize>().ok();
        }
    }
    let length = length.ok_or(FrameError::NoLength)?;
    if length > MAX_MESSAGE_BYTES {
        return Err(FrameError::TooLarge(length));
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).await?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(FrameError::NotJson)
}

/// Send one message.
pub async fn write_message<W: AsyncWrite + Unpin>(
    writer: &mut W,
    message: &Value,
) -> std::io::Result<()> {
    let body = serde_json::to_vec(message)?;
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(&body);
    writer.write_all(&out).await?;
    writer.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read_all(bytes: &[u8]) -> Vec<Result<Option<Value>, String>> {
        let mut r = tokio::io::BufReader::new(bytes);
        let mut out = Vec::new();
        loop {
            let m = read_message(&mut r).await.map_err(|e| e.to_string());
            let end = !matches!(m, Ok(Some(_)));
            out.push(m);
            if end {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn reads_what_it_writes_and_ends_cleanly() {
        let mut buf = Vec::new();
        write_message(&mut buf, &serde_json::json!({"id": 1, "result": "é"}))
            .await
            .unwrap();
        write_message(&mut buf, &serde_json::json!({"method": "x"}))
            .await
            .unwrap();
        let got = read_all(&buf).await;
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].as_ref().unwrap().as_ref().unwrap()["result"], "é");
        assert_eq!(got[1].as_ref().unwrap().as_ref().unwrap()["method"], "x");
        assert!(matches!(got[2], Ok(None)));
    }

    #[tokio::test]
    async fn a_lying_or_endless_header_is_refused_before_anything_is_allocated() {
        let huge = format!("Content-Length: {}\r\n\r\n{{}}", MAX_MESSAGE_BYTES + 1);
        let got = read_all(huge.as_bytes()).await;
        assert!(
            got[0].as_ref().unwrap_err().contains("more than"),
            "{got:?}"
        );

        let endless = vec![b'a'; MAX_HEADER_BYTES * 2];
        let got = read_all(&endless).await;
        assert!(
            got[0].as_ref().unwrap_err().contains("header block"),
            "{got:?}"
        );

        let got = read_all(b"Content-Type: x\r\n\r\n{}").await;
        assert!(
            got[0].as_ref().unwrap_err().contains("Content-Length"),
            "{got:?}"
        );

        let got = read_all(b"Content-Length: 10\r\n\r\n{}").await;
        assert!(got[0].is_err(), "a body cut short: {got:?}");

        let got = read_all(b"Content-Length: 3\r\n\r\nabc").await;
        assert!(got[0].as_ref().unwrap_err().contains("not JSON"), "{got:?}");
    }
}
