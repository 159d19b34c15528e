//! `session_list`, `session_read`, `session_search`: the calling client's
//! own sessions and calls, as the host's audit record keeps them.
//!
//! Whose history it is, the host decides (the `history` seam): the call's
//! validated caller, else its MCP session, else the local calls — never an
//! argument. A session id the model passes is looked up among those only,
//! so another client's session is "not found" whatever its id. The record
//! keeps a result's digest, not its text, and the operator's sensitive
//! values as digests; the tools show what it keeps.

use serde::{Deserialize, Serialize};
use toolgate_sdk::{Annotations, Call, Content, ContentBlock, Schema, Tool, ToolError, history};

/// A tool's answer, for the model (pages of sessions or calls).
#[derive(Serialize, Deserialize, Schema)]
pub struct Answer {
    /// Sessions (`session_list`), newest first.
    sessions: Vec<Session>,
    /// Calls (`session_read`: oldest first; `session_search`: newest first).
    calls: Vec<RecordedCall>,
    /// More matched than were returned (page with `offset`, or a `limit`).
    more: bool,
    /// The scan stopped before the oldest record (it reads the newest 64 MiB).
    partial: bool,
}

/// One session.
#[derive(Serialize, Deserialize, Schema)]
pub struct Session {
    id: String,
    /// Its first and last call, milliseconds since the Unix epoch.
    first_ms: u64,
    last_ms: u64,
    calls: u32,
    /// The tools it called, most used first.
    tools: Vec<String>,
    /// This is the session asking.
    current: bool,
}

/// One call, as recorded.
#[derive(Serialize, Deserialize, Schema)]
pub struct RecordedCall {
    session: String,
    at_ms: u64,
    call_id: String,
    tool: String,
    /// The arguments' JSON as recorded (sensitive values as digests).
    arguments: Option<String>,
    is_error: bool,
    code: Option<String>,
    decided_by: Option<String>,
    /// What the policies said.
    reasons: Vec<String>,
    /// Questions asked and answers heard, as JSON.
    notes: Option<String>,
    /// The SHA-256 of the result the model was given (its text is not kept).
    content_sha256: String,
}

/// List your own earlier sessions with this tool host, newest first: when
/// each ran, how many calls it made, which tools. Only your sessions are
/// listed.
#[derive(Deserialize, Schema)]
pub struct SessionList {
    /// How many sessions (default 20, at most 100).
    limit: Option<u32>,
}

/// Read the calls of one of your sessions (an id from session_list),
/// oldest first: each call's tool, arguments, outcome and the policies'
/// reasons. Results are kept as digests, not text.
#[derive(Deserialize, Schema)]
pub struct SessionRead {
    /// The session's id, as session_list gives it.
    session: String,
    /// Skip this many calls (default 0).
    offset: Option<u32>,
    /// How many calls (default 20, at most 100).
    limit: Option<u32>,
}

/// Search your own earlier calls by text (in the tool name, the arguments,
/// the policies' reasons, the questions and answers), newest first.
#[derive(Deserialize, Schema)]
pub struct SessionSearch {
    /// The text to find (case-insensitive, 1 to 200 bytes).
    query: String,
    /// Search only this session (an id from session_list).
    session: Option<String>,
    /// How many calls (default 20, at most 100).
    limit: Option<u32>,
}

fn failure(e: history::HistoryError) -> ToolError {
    let code = match e {
        history::HistoryError::NoRecord(_) => "NO_RECORD",
        history::HistoryError::NoIdentity(_) => "NO_IDENTITY",
        history::HistoryError::NotFound(_) => "NOT_FOUND",
        history::HistoryError::InvalidRequest(_) => "INVALID_INPUT",
        history::HistoryError::Unreadable(_) => "UNREADABLE",
    };
    ToolError::new(code, history::message(&e).to_string())
}

fn calls(page: history::CallsPage) -> Answer {
    Answer {
        sessions: Vec::new(),
        calls: page
            .calls
            .into_iter()
            .map(|c| RecordedCall {
                session: c.session,
                at_ms: c.at_ms,
                call_id: c.call_id,
                tool: c.tool,
                arguments: c.arguments,
                is_error: c.is_error,
                code: c.code,
                decided_by: c.decided_by,
                reasons: c.reasons,
                notes: c.notes,
                content_sha256: c.content_sha256,
            })
            .collect(),
        more: page.more,
        partial: page.partial,
    }
}

/// Milliseconds since the epoch as `YYYY-MM-DD hh:mm:ss UTC`.
fn when(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

fn render(a: Answer) -> Vec<ContentBlock> {
    let mut s = String::new();
    for x in &a.sessions {
        s.push_str(&format!(
            "- {}{}: {} call(s), {} to {}; tools: {}\n",
            x.id,
            if x.current { " (this session)" } else { "" },
            x.calls,
            when(x.first_ms),
            when(x.last_ms),
            x.tools.join(", ")
        ));
    }
    for c in &a.calls {
        let outcome = match (&c.code, c.is_error) {
            (Some(code), _) => format!(
                "{code}{}",
                c.decided_by
                    .as_deref()
                    .map(|d| format!(" by {d}"))
                    .unwrap_or_default()
            ),
            (None, true) => "error".into(),
            (None, false) => "ok".into(),
        };
        s.push_str(&format!(
            "- {} [{}] {} {} → {outcome}\n",
            when(c.at_ms),
            c.session,
            c.tool,
            c.arguments
                .as_deref()
                .unwrap_or("(arguments kept as a digest)")
        ));
        for r in &c.reasons {
            s.push_str(&format!("    reason: {r}\n"));
        }
        if let Some(n) = &c.notes {
            s.push_str(&format!("    notes: {n}\n"));
        }
    }
    if s.is_empty() {
        s.push_str("Nothing found.\n");
    }
    if a.more {
        s.push_str("(more: page with `offset`, or raise `limit`)\n");
    }
    if a.partial {
        s.push_str("(only the newest 64 MiB of the record were read)\n");
    }
    vec![Content::text(s)]
}

macro_rules! read_only_tool {
    () => {
        type Output = Answer;

        fn render(v: Answer) -> Vec<ContentBlock> {
            render(v)
        }

        fn output_schema() -> Option<serde_json::Value> {
            Some(Answer::schema())
        }

        fn annotations() -> Annotations {
            Annotations::READ_ONLY
        }

        fn is_concurrency_safe(&self) -> bool {
            true
        }
    };
}

impl Tool for SessionList {
    const NAME: &'static str = "session_list";
    read_only_tool!();

    fn execute(self, _call: &Call) -> Result<Answer, ToolError> {
        let page = history::list_sessions(self.limit.unwrap_or(0)).map_err(failure)?;
        Ok(Answer {
            sessions: page
                .sessions
                .into_iter()
                .map(|s| Session {
                    id: s.id,
                    first_ms: s.first_ms,
                    last_ms: s.last_ms,
                    calls: s.calls,
                    tools: s.tools,
                    current: s.current,
                })
                .collect(),
            calls: Vec::new(),
            more: page.more,
            partial: page.partial,
        })
    }
}

impl Tool for SessionRead {
    const NAME: &'static str = "session_read";
    read_only_tool!();

    fn execute(self, _call: &Call) -> Result<Answer, ToolError> {
        history::read_session(
            &self.session,
            self.offset.unwrap_or(0),
            self.limit.unwrap_or(0),
        )
        .map(calls)
        .map_err(failure)
    }
}

impl Tool for SessionSearch {
    const NAME: &'static str = "session_search";
    read_only_tool!();

    fn execute(self, _call: &Call) -> Result<Answer, ToolError> {
        history::search(
            &self.query,
            self.session.as_deref(),
            self.limit.unwrap_or(0),
        )
        .map(calls)
        .map_err(failure)
    }
}

toolgate_sdk::export! { tools: [SessionList, SessionRead, SessionSearch] }

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_dates() {
        assert_eq!(when(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(when(1_796_601_600_000), "2026-12-07 00:00:00 UTC");
        assert_eq!(when(951_782_400_000 + 3_723_000), "2000-02-29 01:02:03 UTC");
    }
}
