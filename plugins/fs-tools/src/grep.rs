//! `grep`: ripgrep's matcher and searcher over the walk.
//!
//! Binary content: a file is searched up to the line that holds its first
//! NUL byte, as ripgrep does — the matches before the binary content are
//! reported (in `content` mode followed by a note that the rest was not
//! searched), a file that starts binary has none. (grep-searcher's own
//! binary detection looks at a whole buffer, 64 KiB, before searching any
//! of it: a match followed by binary bytes in the same buffer was lost.)

use std::path::{Path, PathBuf};

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use std::io::Read;

use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::overrides::OverrideBuilder;
use ignore::types::TypesBuilder;
use serde::{Deserialize, Serialize};
use toolgate_sdk::{Annotations, Call, Content, ContentBlock, Schema, Tool, ToolError, bulk_read};

use crate::paths::{display, metadata, regular_file, relative};
use crate::walk::{Filters, MAX_VISITED, walk};

/// Entries (lines, files or counts) returned when the call gives no
/// `head_limit`.
pub const DEFAULT_HEAD_LIMIT: u32 = 500;
/// Characters kept of one matching or context line.
pub const MAX_LINE_CHARS: usize = 500;
/// Bytes of output one call returns at most.
pub const MAX_OUTPUT_BYTES: usize = 128 * 1024;
/// Files the walk hands to one `bulk-read` call.
const READ_BATCH_FILES: usize = 256;
/// Bytes one `bulk-read` call returns at most (the guest holds a batch at
/// a time).
const READ_BATCH_BYTES: u64 = 16 << 20;
/// Files larger than this are streamed through WASI instead of read whole.
const READ_FILE_BYTES: u64 = 8 << 20;

/// What `grep` returns.
#[derive(Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, Schema)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    /// Matching lines, as `path:line:text` (context lines as `path-line-text`).
    Content,
    /// The paths of the files that match.
    #[default]
    FilesWithMatches,
    /// `path:count` of matching lines per file.
    Count,
}

/// Search file contents with a regular expression (the Rust `regex`
/// syntax, as ripgrep: `fn \w+\(`, `(?i)todo`, `foo|bar`; escape
/// `{`, `(`, `.` etc. to match them literally). Searches the working
/// directory, or `path` (a directory or one file). Files ignored by
/// `.gitignore`, hidden files and binary files are skipped. Narrow the
/// files with `glob` (`*.rs`, `**/*.{ts,tsx}`) or `type` (`rust`, `py`,
/// `js`, … ripgrep's type names). `output_mode`: `files_with_matches`
/// (default), `content` (matching lines with numbers; `context` adds lines
/// around them) or `count`. At most `head_limit` entries (default 500).
#[derive(Deserialize, Schema)]
pub struct Grep {
    /// The regular expression.
    pattern: String,
    /// File or directory to search, relative to the working directory. Default: `.`.
    path: Option<String>,
    /// Only files matching this glob, e.g. `*.rs` or `src/**/*.{ts,tsx}`.
    glob: Option<String>,
    /// Only files of this type, e.g. `rust`, `py`, `js`, `go`, `md`.
    #[serde(rename = "type")]
    file_type: Option<String>,
    /// Match regardless of case.
    case_insensitive: Option<bool>,
    /// Let the pattern span lines; `.` then matches newlines too.
    multiline: Option<bool>,
    /// Lines of context before and after each match (content mode).
    context: Option<u32>,
    /// `files_with_matches` (default), `content` or `count`.
    output_mode: Option<OutputMode>,
    /// Most entries to return. Default: 500.
    head_limit: Option<u32>,
}

/// What matched.
#[derive(Serialize, Deserialize, Schema)]
pub struct Found {
    /// The mode the lines are in.
    mode: OutputMode,
    /// The entries, formatted for the mode.
    lines: Vec<String>,
    /// Files with at least one match (among those searched).
    files: u64,
    /// The search stopped at `head_limit` or the size limit.
    truncated: bool,
    /// The walk stopped at its limit of visited entries.
    walk_cut: bool,
}

/// Collects entries up to the limits.
struct Out {
    lines: Vec<String>,
    bytes: usize,
    limit: usize,
    truncated: bool,
}

impl Out {
    /// Add an entry; false once the limits are reached.
    fn push(&mut self, line: String) -> bool {
        if self.lines.len() >= self.limit || self.bytes + line.len() > MAX_OUTPUT_BYTES {
            self.truncated = true;
            return false;
        }
        self.bytes += line.len() + 1;
        self.lines.push(line);
        true
    }
}

fn cut_line(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_end_matches(['\n', '\r']);
    if text.chars().count() > MAX_LINE_CHARS {
        let kept: String = text.chars().take(MAX_LINE_CHARS).collect();
        format!("{kept} … (line cut)")
    } else {
        text.to_string()
    }
}

/// The sink of one file, in content mode.
struct ContentSink<'a> {
    path: &'a str,
    out: &'a mut Out,
    matched: bool,
    first: bool,
    context: bool,
}

impl Sink for ContentSink<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        self.matched = true;
        if self.first && self.context && !self.out.lines.is_empty() {
            self.out.push("--".into());
        }
        self.first = false;
        let start = m.line_number().unwrap_or(0);
        for (i, line) in m.lines().enumerate() {
            let entry = format!("{}:{}:{}", self.path, start + i as u64, cut_line(line));
            if !self.out.push(entry) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, std::io::Error> {
        if self.first && !self.out.lines.is_empty() {
            self.out.push("--".into());
        }
        self.first = false;
        let entry = format!(
            "{}-{}-{}",
            self.path,
            c.line_number().unwrap_or(0),
            cut_line(c.bytes())
        );
        Ok(self.out.push(entry))
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, std::io::Error> {
        Ok(self.out.push("--".into()))
    }
}

/// The sink of one file, in the other modes: counts matching lines (stops
/// at the first for `files_with_matches`).
struct CountSink {
    count: u64,
    stop_at_first: bool,
}

impl Sink for CountSink {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        self.count += m.lines().count() as u64;
        Ok(!self.stop_at_first)
    }
}

/// Search one file's text (see [`text_part`]): its bytes when the host
/// read them, else streamed from `path`. A file that cannot be read is
/// skipped (as ripgrep does). Returns the offset of its first NUL byte, if
/// it has binary content.
fn search_one(
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    path: &Path,
    bytes: Option<&[u8]>,
    sink: impl Sink<Error = std::io::Error>,
) -> Option<u64> {
    match bytes {
        Some(b) => {
            let (text, nul) = text_part(b);
            let _ = searcher.search_slice(matcher, text, sink);
            nul.map(|n| n as u64)
        }
        None => {
            let Ok(file) = std::fs::File::open(path) else {
                return None;
            };
            let mut text = TextOnly::new(file);
            let _ = searcher.search_reader(matcher, &mut text, sink);
            text.nul
        }
    }
}

/// The text of `bytes` before its binary content — up to the start of the
/// line holding the first NUL byte — and that NUL's offset.
fn text_part(bytes: &[u8]) -> (&[u8], Option<usize>) {
    match memchr::memchr(0, bytes) {
        None => (bytes, None),
        Some(nul) => {
            let start = memchr::memrchr(b'\n', &bytes[..nul]).map_or(0, |i| i + 1);
            (&bytes[..start], Some(nul))
        }
    }
}

/// Bytes read from a streamed file at a time.
const STREAM_CHUNK: usize = 64 << 10;
/// A partial line held back longer than this is passed on anyway.
const STREAM_HOLD: usize = 1 << 20;

/// A reader that ends where [`text_part`] would: complete lines are passed
/// on, the line being read is held back until its end shows it holds no
/// NUL byte.
struct TextOnly<R> {
    inner: R,
    buf: Vec<u8>,
    /// `buf[start..ready]` may be passed on.
    start: usize,
    ready: usize,
    /// Bytes of the file before `buf[0]`.
    offset: u64,
    done: bool,
    /// The offset of the first NUL byte, once seen.
    nul: Option<u64>,
}

impl<R: Read> TextOnly<R> {
    fn new(inner: R) -> Self {
        TextOnly {
            inner,
            buf: Vec::new(),
            start: 0,
            ready: 0,
            offset: 0,
            done: false,
            nul: None,
        }
    }
}

impl<R: Read> Read for TextOnly<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if self.start < self.ready {
                let n = (self.ready - self.start).min(out.len());
                out[..n].copy_from_slice(&self.buf[self.start..self.start + n]);
                self.start += n;
                return Ok(n);
            }
            if self.done {
                return Ok(0);
            }
            self.buf.drain(..self.start);
            self.offset += self.start as u64;
            self.start = 0;
            let old = self.buf.len();
            self.buf.resize(old + STREAM_CHUNK, 0);
            let n = loop {
                match self.inner.read(&mut self.buf[old..]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        self.buf.truncate(old);
                        return Err(e);
                    }
                }
            };
            self.buf.truncate(old + n);
            if n == 0 {
                self.done = true;
                self.ready = self.buf.len();
                continue;
            }
            if let Some(i) = memchr::memchr(0, &self.buf[old..]) {
                let nul = old + i;
                self.nul = Some(self.offset + nul as u64);
                let cut = memchr::memrchr(b'\n', &self.buf[..nul]).map_or(0, |j| j + 1);
                self.buf.truncate(cut);
                self.ready = cut;
                self.done = true;
                continue;
            }
            self.ready = match memchr::memrchr(b'\n', &self.buf) {
                Some(j) => j + 1,
                None if self.buf.len() > STREAM_HOLD => self.buf.len(),
                None => 0,
            };
        }
    }
}

/// A regular file too large for one bulk read (checked again: it may have
/// changed since the walk saw it).
fn is_large_file(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.len() > READ_FILE_BYTES)
}

impl Grep {
    fn matcher(&self) -> Result<RegexMatcher, ToolError> {
        let mut b = RegexMatcherBuilder::new();
        b.case_insensitive(self.case_insensitive.unwrap_or(false))
            .multi_line(true);
        if self.multiline.unwrap_or(false) {
            b.dot_matches_new_line(true);
        } else {
            b.line_terminator(Some(b'\n'));
        }
        b.build(&self.pattern).map_err(|e| {
            ToolError::invalid_input(format!(
                "the pattern is not a valid regular expression (Rust `regex` syntax; escape `(`, `{{`, `.` etc. to match them literally): {e}"
            ))
        })
    }

    fn filters(&self, root: &Path) -> Result<Filters, ToolError> {
        let mut filters = Filters::default();
        if let Some(g) = &self.glob {
            let mut o = OverrideBuilder::new(root);
            o.add(g).map_err(|e| {
                ToolError::invalid_input(format!("`glob` `{g}` is not a glob: {e}"))
            })?;
            filters.overrides = Some(o.build().map_err(|e| {
                ToolError::invalid_input(format!("`glob` `{g}` is not a glob: {e}"))
            })?);
        }
        if let Some(t) = &self.file_type {
            let mut types = TypesBuilder::new();
            types.add_defaults();
            if !types.definitions().iter().any(|d| d.name() == t) {
                let mut names: Vec<String> = types
                    .definitions()
                    .iter()
                    .map(|d| d.name().to_string())
                    .collect();
                names.sort();
                return Err(ToolError::invalid_input(format!(
                    "`type` `{t}` is not a known file type; known types include {} (or use `glob`)",
                    names
                        .iter()
                        .filter(|n| {
                            [
                                "rust", "py", "js", "ts", "go", "java", "c", "cpp", "md", "json",
                                "toml", "yaml", "sh", "html", "css",
                            ]
                            .contains(&n.as_str())
                        })
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            types.select(t);
            filters.types = Some(
                types
                    .build()
                    .map_err(|e| ToolError::invalid_input(format!("`type` `{t}`: {e}")))?,
            );
        }
        Ok(filters)
    }
}

impl Tool for Grep {
    const NAME: &'static str = "grep";
    type Output = Found;

    fn execute(self, call: &Call) -> Result<Found, ToolError> {
        let root = relative(self.path.as_deref().unwrap_or("."))?;
        let shown_root = display(&root);
        let matcher = self.matcher()?;
        let mode = self.output_mode.unwrap_or_default();
        let context = if mode == OutputMode::Content {
            self.context.unwrap_or(0).min(100) as usize
        } else {
            0
        };
        let mut searcher = SearcherBuilder::new()
            // Line numbers cost a count of every newline; only content
            // shows them.
            .line_number(mode == OutputMode::Content)
            // Binary content is cut off before the search (`text_part`).
            .binary_detection(BinaryDetection::none())
            .multi_line(self.multiline.unwrap_or(false))
            .before_context(context)
            .after_context(context)
            .build();
        let mut out = Out {
            lines: Vec::new(),
            bytes: 0,
            limit: self.head_limit.unwrap_or(DEFAULT_HEAD_LIMIT).max(1) as usize,
            truncated: false,
        };
        let mut files = 0u64;
        // One file: from the bytes the host read (`bytes`), or streamed
        // through WASI (`None`: the file named alone, or one too large to
        // read whole). False once the output is full.
        let mut search = |path: &Path, bytes: Option<&[u8]>, out: &mut Out| -> bool {
            let shown = display(path);
            match mode {
                OutputMode::Content => {
                    let mut sink = ContentSink {
                        path: &shown,
                        out,
                        matched: false,
                        first: true,
                        context: context > 0,
                    };
                    let nul = search_one(&mut searcher, &matcher, path, bytes, &mut sink);
                    files += u64::from(sink.matched);
                    if let Some(at) = nul.filter(|_| sink.matched && !out.truncated) {
                        out.push(format!(
                            "{shown}: (binary content from byte {at} on was not searched)"
                        ));
                    }
                    !out.truncated
                }
                OutputMode::FilesWithMatches | OutputMode::Count => {
                    let mut sink = CountSink {
                        count: 0,
                        stop_at_first: mode == OutputMode::FilesWithMatches,
                    };
                    search_one(&mut searcher, &matcher, path, bytes, &mut sink);
                    if sink.count == 0 {
                        return true;
                    }
                    files += 1;
                    out.push(if mode == OutputMode::Count {
                        format!("{shown}:{}", sink.count)
                    } else {
                        shown
                    })
                }
            }
        };
        let meta = metadata(&root, &shown_root)?;
        let walk_cut = if meta.is_dir() {
            let filters = self.filters(&root)?;
            // The walk hands out paths; the host reads them a batch at a
            // time (one host call per batch instead of several per file),
            // the next batch on its thread while this one is searched.
            let mut batch: Vec<PathBuf> = Vec::new();
            let mut pending: Option<(Vec<PathBuf>, bulk_read::Batch)> = None;
            let mut full = false;
            // Search one batch's files in order; false once output is full.
            let mut finish =
                |paths: Vec<PathBuf>, read: Vec<Result<Vec<u8>, String>>, out: &mut Out| -> bool {
                    let done = read.len();
                    let mut one =
                        |path: &Path, read: Result<Vec<u8>, String>, out: &mut Out| match read {
                            Ok(bytes) => search(path, Some(&bytes), out),
                            // Too large to read whole: streamed. Anything else
                            // (gone, no longer a regular file) is skipped.
                            Err(_) if is_large_file(path) => search(path, None, out),
                            Err(_) => true,
                        };
                    for (path, r) in paths.iter().zip(read) {
                        if !one(path, r, out) {
                            return false;
                        }
                    }
                    // The host stops a batch at its byte limit: the rest now.
                    let rest = &paths[done.min(paths.len())..];
                    let names: Vec<String> = rest
                        .iter()
                        .map(|p| p.to_string_lossy().into_owned())
                        .collect();
                    let mut more = true;
                    bulk_read::read_all(&names, READ_FILE_BYTES, READ_BATCH_BYTES, |i, r| {
                        more = one(&rest[i], r, out);
                        more
                    });
                    more
                };
            let start = |paths: &[PathBuf]| {
                let names: Vec<String> = paths
                    .iter()
                    .map(|p| p.to_string_lossy().into_owned())
                    .collect();
                bulk_read::Batch::start(&names, READ_FILE_BYTES, READ_BATCH_BYTES)
            };
            let cut = walk(&root, filters, false, call, |f| {
                batch.push(f.path);
                if batch.len() >= READ_BATCH_FILES {
                    let paths = std::mem::take(&mut batch);
                    let started = start(&paths);
                    if let Some((prev, reading)) = pending.replace((paths, started)) {
                        full = !finish(prev, reading.wait(), &mut out);
                    }
                }
                !full
            })?;
            // Once the output is full, a batch still reading is dropped.
            if let Some((prev, reading)) = pending.take()
                && !full
            {
                full = !finish(prev, reading.wait(), &mut out);
            }
            if !full && !batch.is_empty() {
                let read = start(&batch).wait();
                finish(batch, read, &mut out);
            }
            cut
        } else {
            // One file, named by the caller.
            regular_file(&root, &shown_root, "grep")?;
            search(&root, None, &mut out);
            false
        };
        Ok(Found {
            mode,
            lines: out.lines,
            files,
            truncated: out.truncated,
            walk_cut,
        })
    }

    fn render(v: Found) -> Vec<ContentBlock> {
        if v.lines.is_empty() {
            return vec![Content::text("no matches")];
        }
        let mut s = v.lines.join("\n");
        if v.truncated {
            s.push_str(&format!(
                "\n… (stopped after {} entries; more matches exist — narrow the search or raise head_limit)",
                v.lines.len()
            ));
        }
        if v.walk_cut {
            s.push_str(&format!(
                "\n… (the walk stopped after {MAX_VISITED} entries; give a narrower path)"
            ));
        }
        vec![Content::text(s)]
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(Found::schema())
    }

    fn annotations() -> Annotations {
        Annotations::READ_ONLY | Annotations::IDEMPOTENT
    }

    fn is_concurrency_safe(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_before_binary_content_is_kept_whole_lines_only() {
        assert_eq!(text_part(b"a\nb\n"), (&b"a\nb\n"[..], None));
        assert_eq!(text_part(b"match\nbin\0ary\n"), (&b"match\n"[..], Some(9)));
        assert_eq!(text_part(b"\0x"), (&b""[..], Some(0)));
    }

    #[test]
    fn a_stream_stops_at_the_line_before_its_first_nul_byte() {
        let mut data = b"needle\n".repeat(20_000);
        data.extend(b"half a line \0 binary needle\n");
        data.extend(vec![0u8; 100_000]);
        let mut text = TextOnly::new(&data[..]);
        let mut got = Vec::new();
        text.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"needle\n".repeat(20_000));
        assert_eq!(text.nul, Some(20_000 * 7 + 12));
        let mut plain = TextOnly::new(&b"no newline at the end"[..]);
        let mut got = Vec::new();
        plain.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"no newline at the end");
        assert_eq!(plain.nul, None);
    }
}
