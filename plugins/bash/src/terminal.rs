//! The terminal tools: `terminal_open`, `terminal_write`, `terminal_read`,
//! `terminal_screen`, `terminal_resize`, `terminal_close`, `terminal_list`.
//!
//! Anchored on Codex's unified exec (`exec_command` / `write_stdin`): a
//! program is opened on a terminal of its own, and each call types into it
//! and returns what it wrote meanwhile. They go through the `terminals`
//! seam: the host keeps each terminal between calls, runs its program in
//! the same sandbox as `bash` (this component's grants), keeps the last
//! output and renders the screen. What the model reads of the stream is
//! plain text: escape sequences removed, a carriage return's overwrite
//! applied, the head and tail of long output kept; a full-screen program
//! is read with `terminal_screen` instead.

use serde::{Deserialize, Serialize};
use toolgate_sdk::terminals::{self, TerminalInfo, TerminalOptions};
use toolgate_sdk::{Annotations, Call, Content, ContentBlock, Schema, Tool, ToolError};

use crate::{MAX_OUTPUT_BYTES, head_tail, shown_status, status};

/// How long `terminal_open` waits for the program's first output.
pub const OPEN_YIELD_MS: u32 = 500;
/// How long `terminal_write` waits for output after typing.
pub const WRITE_YIELD_MS: u32 = 250;
/// How long `terminal_read` waits for new output.
pub const READ_WAIT_MS: u32 = 1_000;
/// The longest wait any terminal tool takes (the host's bound too).
pub const MAX_WAIT_MS: u32 = 30_000;
/// `terminal_read` returns once output came and this long passed without more.
pub const READ_QUIET_MS: u32 = 100;
/// The size of a new terminal when none is asked for.
pub const DEFAULT_ROWS: u16 = 24;
pub const DEFAULT_COLS: u16 = 80;

/// A terminal as the tools show it.
#[derive(Serialize, Deserialize, Schema)]
pub struct Term {
    /// The terminal's id, e.g. `term-1@web-1` (`term-N@REPLICA`).
    id: String,
    /// The command it runs.
    command: String,
    /// `running`, `exited`, `closed` or `signalled`.
    status: String,
    /// Exit status, once the program exited.
    exit_code: Option<i32>,
    /// Milliseconds since it was opened (until it ended).
    elapsed_ms: u64,
    /// Bytes of output the program wrote.
    output_bytes: u64,
    /// Its size.
    rows: u16,
    cols: u16,
}

impl From<TerminalInfo> for Term {
    fn from(i: TerminalInfo) -> Term {
        Term {
            status: status(i.running, i.killed, i.exit_code, "closed"),
            id: i.id,
            command: i.command,
            exit_code: i.exit_code,
            elapsed_ms: i.elapsed_ms,
            output_bytes: i.output_bytes,
            rows: i.rows,
            cols: i.cols,
        }
    }
}

fn term_line(t: &Term) -> String {
    let status = shown_status(&t.status, t.exit_code);
    format!(
        "{}  {status}  {}×{}  {:.1}s  {} bytes  {}",
        t.id,
        t.rows,
        t.cols,
        t.elapsed_ms as f64 / 1000.0,
        t.output_bytes,
        t.command
    )
}

/// A host error as the model should see it: an unknown id is `NOT_FOUND`.
fn term_error(message: String) -> ToolError {
    if message.starts_with("there is no terminal") || message.contains("runs on replica") {
        ToolError::not_found(message)
    } else if message.contains("more than one write") || message.contains("rows must be") {
        ToolError::invalid_input(message)
    } else {
        ToolError::new("TERMINAL", message)
    }
}

/// What a person would read of a stretch of terminal output: escape
/// sequences gone, `\r\n` a line end, and a line that a lone `\r` took
/// back to its start (a progress bar) shown as it was last drawn.
pub fn plain(raw: &[u8]) -> String {
    let mut out = String::with_capacity(raw.len());
    for (i, line) in raw.split(|b| *b == b'\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        // What a lone `\r` went back over is drawn over.
        let drawn = line
            .rsplit(|b| *b == b'\r')
            .find(|s| !s.is_empty())
            .unwrap_or_default();
        // The stripper drops tabs too: they are kept, the pieces between
        // them stripped. Other control characters (a bell, a backspace)
        // are not text.
        for (j, piece) in drawn.split(|b| *b == b'\t').enumerate() {
            if j > 0 {
                out.push('\t');
            }
            let stripped = strip_ansi_escapes::strip(piece);
            out.extend(
                String::from_utf8_lossy(&stripped)
                    .chars()
                    .filter(|c| !c.is_control()),
            );
        }
    }
    out
}

/// Output read from a terminal.
#[derive(Serialize, Deserialize, Schema)]
pub struct Read {
    /// The terminal.
    terminal: Term,
    /// What it wrote, as plain text (head and tail, when long).
    output: String,
    /// Bytes not shown: no longer kept, or cut here.
    skipped: u64,
}

impl Read {
    fn take(id: &str, wait_ms: u32, quiet_ms: Option<u32>) -> Result<Read, ToolError> {
        let o = terminals::read(id, None, wait_ms, quiet_ms).map_err(term_error)?;
        let text = plain(&o.data);
        let (output, _) = head_tail(&text, MAX_OUTPUT_BYTES);
        let shown_cut = (text.len() - output.len().min(text.len())) as u64;
        Ok(Read {
            terminal: o.info.into(),
            output,
            skipped: o.skipped + shown_cut,
        })
    }

    fn show(self, head: Option<String>) -> Vec<ContentBlock> {
        let mut s = head.map(|h| h + "\n").unwrap_or_default();
        if self.skipped > 0 {
            s.push_str(&format!("[… {} bytes not shown …]\n", self.skipped));
        }
        s.push_str(&self.output);
        if !self.output.is_empty() && !self.output.ends_with('\n') {
            s.push('\n');
        }
        s.push_str(&format!("[{}]", term_line(&self.terminal)));
        vec![Content::text(s)]
    }
}

fn check_wait(name: &str, ms: Option<u32>, default: u32) -> Result<u32, ToolError> {
    match ms.unwrap_or(default) {
        ms if ms > MAX_WAIT_MS => Err(ToolError::invalid_input(format!(
            "`{name}` is {ms}; at most {MAX_WAIT_MS} ms — call terminal_read again to wait longer"
        ))),
        ms => Ok(ms),
    }
}

/// Open an interactive terminal: run a program on a pseudo-terminal of its
/// own (a shell by default; or a REPL, an editor, `top`…), in the same
/// sandbox as `bash`, and return what it wrote in its first `yield_ms`
/// (default 500). It keeps running after this call: type into it with
/// `terminal_write`, read new output with `terminal_read`, see a
/// full-screen program's screen with `terminal_screen`, end it with
/// `terminal_close`. At most 8 terminals are open at once; one untouched
/// for 30 minutes is closed.
#[derive(Deserialize, Schema)]
pub struct TerminalOpen {
    /// The command line to run (`/bin/sh -c`), e.g. `python3 -q`. Default:
    /// an interactive shell.
    command: Option<String>,
    /// Directory to run in, relative to the working directory. Default: `.`.
    workdir: Option<String>,
    /// Rows (2 to 200). Default: 24.
    rows: Option<u16>,
    /// Columns (10 to 500). Default: 80.
    cols: Option<u16>,
    /// Milliseconds to wait for the first output (at most 30000). Default: 500.
    yield_ms: Option<u32>,
}

impl Tool for TerminalOpen {
    const NAME: &'static str = "terminal_open";
    type Output = Read;

    fn execute(self, _call: &Call) -> Result<Read, ToolError> {
        let wait = check_wait("yield_ms", self.yield_ms, OPEN_YIELD_MS)?;
        let options = TerminalOptions {
            workdir: self.workdir,
            env: Vec::new(),
            rows: self.rows.unwrap_or(DEFAULT_ROWS),
            cols: self.cols.unwrap_or(DEFAULT_COLS),
            timeout_ms: None,
        };
        let info = terminals::open(self.command.as_deref(), &options)?;
        Read::take(&info.id, wait, None)
    }

    fn render(r: Read) -> Vec<ContentBlock> {
        let head = format!(
            "Opened terminal {} (`{}`, {}×{}). Type with terminal_write {{\"id\": \"{}\", \"input\": \"…\\n\"}}.",
            r.terminal.id, r.terminal.command, r.terminal.rows, r.terminal.cols, r.terminal.id
        );
        r.show(Some(head))
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(Read::schema())
    }

    fn timeout_ms() -> Option<u32> {
        Some(MAX_WAIT_MS + 10_000)
    }

    fn annotations() -> Annotations {
        Annotations::DESTRUCTIVE | Annotations::OPEN_WORLD
    }
}

/// Type into a terminal and return what it wrote in the next `yield_ms`
/// (default 250). `input` is sent as typed: end a line with `\n` (full-
/// screen programs want `\r`, the Enter key); control characters work —
/// `\u0003` is Ctrl-C (interrupts the running program), `\u0004` Ctrl-D
/// (end of input), `\u001b` Escape, `\u001b[A` the Up arrow.
#[derive(Deserialize, Schema)]
pub struct TerminalWrite {
    /// The terminal's id, as terminal_open gave it.
    id: String,
    /// What to type (at most 64 KiB).
    input: String,
    /// Milliseconds to wait for output after typing (at most 30000). Default: 250.
    yield_ms: Option<u32>,
}

impl Tool for TerminalWrite {
    const NAME: &'static str = "terminal_write";
    type Output = Read;

    fn execute(self, _call: &Call) -> Result<Read, ToolError> {
        let wait = check_wait("yield_ms", self.yield_ms, WRITE_YIELD_MS)?;
        terminals::write(&self.id, self.input.as_bytes()).map_err(term_error)?;
        Read::take(&self.id, wait, None)
    }

    fn render(r: Read) -> Vec<ContentBlock> {
        r.show(None)
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(Read::schema())
    }

    fn timeout_ms() -> Option<u32> {
        Some(MAX_WAIT_MS + 10_000)
    }

    fn annotations() -> Annotations {
        Annotations::DESTRUCTIVE | Annotations::OPEN_WORLD
    }
}

/// Read what a terminal wrote since the last read (or open/write). Waits
/// up to `wait_ms` (default 1000) for new output, and returns soon after it
/// stops coming.
#[derive(Deserialize, Schema)]
pub struct TerminalRead {
    /// The terminal's id, as terminal_open gave it.
    id: String,
    /// Milliseconds to wait for new output (at most 30000). Default: 1000.
    wait_ms: Option<u32>,
}

impl Tool for TerminalRead {
    const NAME: &'static str = "terminal_read";
    type Output = Read;

    fn execute(self, _call: &Call) -> Result<Read, ToolError> {
        let wait = check_wait("wait_ms", self.wait_ms, READ_WAIT_MS)?;
        Read::take(&self.id, wait, Some(READ_QUIET_MS))
    }

    fn render(r: Read) -> Vec<ContentBlock> {
        r.show(None)
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(Read::schema())
    }

    fn timeout_ms() -> Option<u32> {
        Some(MAX_WAIT_MS + 10_000)
    }

    fn annotations() -> Annotations {
        Annotations::READ_ONLY
    }
}

/// A terminal's screen as a person would see it now: what a full-screen
/// program (an editor, `top`, `less`, a REPL's prompt line) has drawn, row
/// by row, with the cursor's position.
#[derive(Deserialize, Schema)]
pub struct TerminalScreen {
    /// The terminal's id, as terminal_open gave it.
    id: String,
}

/// A rendered screen.
#[derive(Serialize, Deserialize, Schema)]
pub struct Screen {
    /// The terminal.
    terminal: Term,
    /// The rows, top to bottom, trailing blanks removed.
    lines: Vec<String>,
    /// The cursor's row and column, from 1.
    cursor_row: u16,
    cursor_col: u16,
    /// A full-screen program's alternate screen is shown.
    alternate_screen: bool,
    /// The window title the program set, if any.
    title: String,
}

impl Tool for TerminalScreen {
    const NAME: &'static str = "terminal_screen";
    type Output = Screen;

    fn execute(self, _call: &Call) -> Result<Screen, ToolError> {
        let s = terminals::screen(&self.id).map_err(term_error)?;
        Ok(Screen {
            terminal: s.info.into(),
            lines: s.lines,
            cursor_row: s.cursor_row + 1,
            cursor_col: s.cursor_col + 1,
            alternate_screen: s.alternate_screen,
            title: s.title,
        })
    }

    fn render(s: Screen) -> Vec<ContentBlock> {
        let used = s
            .lines
            .iter()
            .rposition(|l| !l.is_empty())
            .map_or(0, |i| i + 1);
        let mut text = format!(
            "[{}; cursor at row {}, column {}{}{}]\n",
            term_line(&s.terminal),
            s.cursor_row,
            s.cursor_col,
            if s.alternate_screen {
                "; full-screen program"
            } else {
                ""
            },
            if s.title.is_empty() {
                String::new()
            } else {
                format!("; title `{}`", s.title)
            }
        );
        for line in &s.lines[..used] {
            text.push_str(line);
            text.push('\n');
        }
        if used < s.lines.len() {
            text.push_str(&format!("[rows {}–{} empty]", used + 1, s.lines.len()));
        }
        vec![Content::text(text)]
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(Screen::schema())
    }

    fn annotations() -> Annotations {
        Annotations::READ_ONLY
    }

    fn is_concurrency_safe(&self) -> bool {
        true
    }
}

/// Resize a terminal (the program is told, as when a window is resized).
#[derive(Deserialize, Schema)]
pub struct TerminalResize {
    /// The terminal's id, as terminal_open gave it.
    id: String,
    /// Rows (2 to 200).
    rows: u16,
    /// Columns (10 to 500).
    cols: u16,
}

impl Tool for TerminalResize {
    const NAME: &'static str = "terminal_resize";
    type Output = Term;

    fn execute(self, _call: &Call) -> Result<Term, ToolError> {
        terminals::resize(&self.id, self.rows, self.cols)
            .map(Term::from)
            .map_err(term_error)
    }

    fn render(t: Term) -> Vec<ContentBlock> {
        vec![Content::text(term_line(&t))]
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(Term::schema())
    }

    fn annotations() -> Annotations {
        Annotations::IDEMPOTENT
    }
}

/// Close a terminal: end its program and everything it started.
#[derive(Deserialize, Schema)]
pub struct TerminalClose {
    /// The terminal's id, as terminal_open gave it.
    id: String,
}

impl Tool for TerminalClose {
    const NAME: &'static str = "terminal_close";
    type Output = Term;

    fn execute(self, _call: &Call) -> Result<Term, ToolError> {
        terminals::close(&self.id)
            .map(Term::from)
            .map_err(term_error)
    }

    fn render(t: Term) -> Vec<ContentBlock> {
        vec![Content::text(term_line(&t))]
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(Term::schema())
    }

    fn annotations() -> Annotations {
        Annotations::DESTRUCTIVE | Annotations::IDEMPOTENT
    }
}

/// List this agent's terminals (open and recently ended), with their status.
#[derive(Deserialize, Schema)]
pub struct TerminalList {}

impl Tool for TerminalList {
    const NAME: &'static str = "terminal_list";
    type Output = Vec<Term>;

    fn execute(self, _call: &Call) -> Result<Vec<Term>, ToolError> {
        Ok(terminals::list().into_iter().map(Term::from).collect())
    }

    fn render(v: Vec<Term>) -> Vec<ContentBlock> {
        if v.is_empty() {
            return vec![Content::text("no terminals")];
        }
        vec![Content::text(
            v.iter().map(term_line).collect::<Vec<_>>().join("\n"),
        )]
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(<Vec<Term>>::schema())
    }

    fn annotations() -> Annotations {
        Annotations::READ_ONLY
    }

    fn is_concurrency_safe(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_what_a_person_reads() {
        assert_eq!(plain(b"\x1b[1;32mok\x1b[0m\r\n>>> "), "ok\n>>> ");
        assert_eq!(plain(b"10%\r50%\r100%\r\ndone"), "100%\ndone");
        assert_eq!(plain(b"a\x07b\tc"), "ab\tc");
        assert_eq!(plain(b"\x1b]0;title\x07text"), "text");
    }
}
