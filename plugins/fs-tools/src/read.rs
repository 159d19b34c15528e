//! `read`: a window of a text file, with numbered lines (`cat -n` style).
//!
//! The file is streamed, never held whole: a window of lines is kept
//! (at most [`DEFAULT_LIMIT`] lines, [`MAX_LINE_CHARS`] characters each,
//! [`MAX_OUTPUT_BYTES`] in all), the rest is only counted, so a file of
//! any size costs bounded memory.

use std::fs::File;
use std::io::{BufRead, BufReader, Read as _};

use serde::{Deserialize, Serialize};
use toolgate_sdk::{Annotations, Call, Content, ContentBlock, Schema, Tool, ToolError};

use crate::paths::{display, granted, regular_file};

/// Lines returned when the call gives no `limit`.
pub const DEFAULT_LIMIT: u64 = 2000;
/// Characters kept of one line; the rest is cut, with a note.
pub const MAX_LINE_CHARS: usize = 2000;
/// Bytes of numbered text one call returns at most.
pub const MAX_OUTPUT_BYTES: usize = 256 * 1024;

/// Read a text file. Returns its lines numbered from 1 (`cat -n` style:
/// number, tab, line). By default up to 2000 lines from the start; for a
/// longer file give `offset` (the first line to read) and `limit` (how
/// many lines). Lines longer than 2000 characters are cut. Binary files
/// are refused (use `read_image` for images). Paths are relative to the
/// working directory; a skill's files also by the absolute path the
/// `skill` tool gives.
#[derive(Deserialize, Schema)]
pub struct Read {
    /// The file, relative to the working directory (or a skill's file by
    /// its absolute path).
    path: String,
    /// First line to read (1-based). Default: 1.
    offset: Option<u64>,
    /// Most lines to read. Default: 2000.
    limit: Option<u64>,
}

/// A window of a text file.
#[derive(Serialize, Deserialize, Schema)]
pub struct FileText {
    /// The file, relative to the working directory.
    path: String,
    /// The first line returned (1-based).
    first_line: u64,
    /// How many lines are returned.
    lines: u64,
    /// How many lines the file has.
    total_lines: u64,
    /// The lines, numbered (`cat -n` style).
    text: String,
    /// Lines after the window were left out (limit or size).
    truncated: bool,
    /// How many lines of the window were cut to 2000 characters.
    cut_lines: u64,
}

impl Tool for Read {
    const NAME: &'static str = "read";
    type Output = FileText;

    fn execute(self, call: &Call) -> Result<FileText, ToolError> {
        let path = granted(&self.path)?;
        let shown = display(&path);
        regular_file(&path, &shown, "read")?;
        let first = self.offset.unwrap_or(1).max(1);
        let limit = self.limit.unwrap_or(DEFAULT_LIMIT).max(1);
        let mut file = File::open(&path)
            .map_err(|e| ToolError::from(e).with_details(serde_json::json!({"path": shown})))?;
        let mut head = vec![0; crate::kind::SNIFF_BYTES];
        let n = read_full(&mut file, &mut head)?;
        head.truncate(n);
        match crate::kind::binary_kind(&head) {
            Some("binary") => {
                return Err(ToolError::new(
                    "BINARY_FILE",
                    format!(
                        "`{shown}` is a binary file (it holds NUL bytes); read shows text only"
                    ),
                ));
            }
            Some(mime) => {
                return Err(ToolError::new(
                    "BINARY_FILE",
                    format!("`{shown}` is an image ({mime}); use read_image to see it"),
                ));
            }
            None => {}
        }
        let mut reader = BufReader::with_capacity(64 * 1024, (&head[..]).chain(file));
        let mut text = String::new();
        let mut line = Vec::new();
        let (mut number, mut lines, mut cut_lines) = (0u64, 0u64, 0u64);
        let mut truncated = false;
        loop {
            line.clear();
            let read = reader.read_until(b'\n', &mut line)?;
            if read == 0 {
                break;
            }
            number += 1;
            if number < first {
                continue;
            }
            if lines == limit || text.len() >= MAX_OUTPUT_BYTES {
                truncated = true;
                number += count_rest(&mut reader, call)?;
                break;
            }
            let body = line.strip_suffix(b"\n").unwrap_or(&line);
            let body = body.strip_suffix(b"\r").unwrap_or(body);
            let body = String::from_utf8_lossy(body);
            let kept: String = body.chars().take(MAX_LINE_CHARS).collect();
            text.push_str(&format!("{number:>6}\t{kept}"));
            if kept.len() < body.len() {
                cut_lines += 1;
                text.push_str(&format!(
                    " … (line cut at {MAX_LINE_CHARS} of {} characters)",
                    body.chars().count()
                ));
            }
            text.push('\n');
            lines += 1;
            if lines.is_multiple_of(4096) && call.is_cancelled() {
                return Err(ToolError::new("CANCELLED", "the call was cancelled"));
            }
        }
        if first > 1 && first > number {
            return Err(ToolError::invalid_input(format!(
                "offset {first} is past the end: `{shown}` has {number} line{}",
                if number == 1 { "" } else { "s" }
            )));
        }
        Ok(FileText {
            path: shown,
            first_line: first,
            lines,
            total_lines: number,
            text,
            truncated,
            cut_lines,
        })
    }

    fn render(v: FileText) -> Vec<ContentBlock> {
        let mut s = v.text;
        if v.total_lines == 0 {
            s.push_str(&format!("(`{}` is empty)\n", v.path));
        }
        if v.truncated {
            let last = v.first_line + v.lines.saturating_sub(1);
            s.push_str(&format!(
                "… (lines {}–{last} of {} shown; read on with offset={})\n",
                v.first_line,
                v.total_lines,
                last + 1
            ));
        }
        vec![Content::text(s)]
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(FileText::schema())
    }

    fn annotations() -> Annotations {
        Annotations::READ_ONLY | Annotations::IDEMPOTENT
    }

    fn is_concurrency_safe(&self) -> bool {
        true
    }
}

/// Fill `buf` as far as the file goes.
fn read_full(file: &mut File, buf: &mut [u8]) -> Result<usize, ToolError> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// The lines left in `reader` (a last line without a newline counts).
fn count_rest(reader: &mut impl BufRead, call: &Call) -> Result<u64, ToolError> {
    let (mut count, mut last) = (0u64, b'\n');
    let mut chunks = 0u32;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        count += buf.iter().filter(|&&b| b == b'\n').count() as u64;
        last = buf[buf.len() - 1];
        let n = buf.len();
        reader.consume(n);
        chunks += 1;
        if chunks.is_multiple_of(256) && call.is_cancelled() {
            return Err(ToolError::new("CANCELLED", "the call was cancelled"));
        }
    }
    Ok(count + u64::from(last != b'\n'))
}
