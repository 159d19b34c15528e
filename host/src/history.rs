//! The calling client's own history: its sessions and calls, read back
//! from the audit record (see [`crate::audit`]) for the `history` seam
//! (`session_list`, `session_read`, `session_search`).
//!
//! Why from the record and not a store of its own: the record is already
//! written for every call before its result returns, with the sensitive
//! values as digests; a second copy would be a second thing to secure and
//! to keep in step.
//!
//! **Whose history** is decided here, from what the host validated, never
//! from what the guest or the model says ([`Viewer::of`]):
//!
//! * a call whose access token the host validated (`[auth]`): every
//!   session of that caller — the same issuer and subject;
//! * a call over HTTP without one (no `[auth]`, the static token): its own
//!   MCP session only (two clients sharing a token are told apart by
//!   nothing else); a stateless request without a session has none;
//! * a call on the host's own terminal or over stdio (`run`, `serve` over
//!   stdio): the calls that came the same local way without a caller —
//!   the operator's own, on the operator's machine.
//!
//! A session is the record's `client.session` (the MCP session), or, where
//! there is none (stdio, `run`, a stateless request), the host process
//! that served it (the record's `inst`). Its id here is a digest of that,
//! so the MCP session id itself — a credential on the HTTP transport — is
//! never handed out.
//!
//! **Bounded**: the scan reads the newest [`HISTORY_MAX_SCAN_MB`] MiB of
//! the record (the live file, then the rotated ones, newest first) and says
//! when it stopped short; a page is at most [`HISTORY_MAX_PAGE`] items and
//! [`HISTORY_MAX_PAGE_BYTES`] bytes.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

pub use crate::budgets::{
    HISTORY_MAX_PAGE, HISTORY_MAX_PAGE_BYTES, HISTORY_MAX_QUERY_BYTES, HISTORY_MAX_SCAN_MB,
};
use crate::call::Client;
use crate::identity::Caller;

/// Bytes of a session id (`read-session`'s argument).
const MAX_ID_BYTES: usize = 64;
/// Tools named per session in a summary.
const MAX_TOOLS_PER_SESSION: usize = 16;

/// Why the history cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error(
        "this host keeps no audit record, so it has no history of calls (the operator turns it on with [audit])"
    )]
    NoRecord,
    #[error("{0}")]
    NoIdentity(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    InvalidRequest(String),
    #[error("the audit record {path} could not be read: {source}")]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Whose history a call may read: decided by the host from the call's
/// validated caller and its transport.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Viewer {
    /// A validated caller: every session of the same issuer and subject.
    Caller { issuer: String, subject: String },
    /// No caller, over HTTP: this MCP session only.
    Session(String),
    /// No caller, on the host's terminal or over stdio: the local calls
    /// without a caller.
    Local,
}

impl Viewer {
    /// The viewer of a call made by `client` (the turn's; `None` for
    /// `run`) with the validated `caller`.
    pub fn of(caller: Option<&Caller>, client: Option<&Client>) -> Result<Viewer, HistoryError> {
        if let Some(c) = caller {
            return Ok(Viewer::Caller {
                issuer: c.issuer.clone(),
                subject: c.subject.clone(),
            });
        }
        match client {
            None => Ok(Viewer::Local),
            Some(c) if c.transport == "stdio" => Ok(Viewer::Local),
            Some(c) => match &c.session {
                Some(s) => Ok(Viewer::Session(s.clone())),
                None => Err(HistoryError::NoIdentity(format!(
                    "this call came over {} without a session and without a validated caller, so \
                     nothing tells whose history it may read: use a session (initialize first), \
                     or have the operator turn on [auth] so calls carry who is calling",
                    c.transport
                ))),
            },
        }
    }

    /// Whether a recorded call's client is this viewer's.
    fn sees(&self, client: Option<&ClientLine>) -> bool {
        let caller = client.and_then(|c| c.caller.as_ref());
        match self {
            Viewer::Caller { issuer, subject } => {
                caller.is_some_and(|c| &c.issuer == issuer && &c.subject == subject)
            }
            Viewer::Session(s) => {
                caller.is_none() && client.and_then(|c| c.session.as_ref()) == Some(s)
            }
            Viewer::Local => {
                caller.is_none() && client.is_none_or(|c| c.transport.as_deref() == Some("stdio"))
            }
        }
    }

    /// Text every line this viewer sees contains (compact JSON, as the
    /// record writes it): lines without it are skipped unparsed.
    fn needle(&self) -> Option<String> {
        match self {
            Viewer::Caller { subject, .. } => Some(format!(
                "\"subject\":{}",
                serde_json::to_string(subject).ok()?
            )),
            Viewer::Session(s) => Some(format!("\"session\":{}", serde_json::to_string(s).ok()?)),
            Viewer::Local => None,
        }
    }
}

/// The id of the session a record (or a call) belongs to: a digest of its
/// MCP session, else of the host process that served it.
fn session_id(session: Option<&str>, inst: &str) -> String {
    let key = match session {
        Some(s) => format!("session:{s}"),
        None => format!("process:{inst}"),
    };
    let digest = <sha2::Sha256 as sha2::Digest>::digest(key.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("s-{hex}")
}

/// The record's files: the live file first, then the rotated ones, oldest
/// first (as the writer names them: see `audit::verify::with_rotations`).
pub type RecordFiles = std::sync::Arc<dyn Fn() -> Vec<PathBuf> + Send + Sync>;

/// The record to read: its files and which process this host is. Given by
/// whoever opened the record, so that reading it back does not depend on
/// the writer.
#[derive(Clone)]
pub struct Source {
    pub files: RecordFiles,
    /// This process's `inst` in the record.
    pub instance: String,
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source")
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

impl Source {
    /// A record of one file, with no rotations.
    pub fn file(path: PathBuf, instance: impl Into<String>) -> Source {
        Source {
            files: std::sync::Arc::new(move || vec![path.clone()]),
            instance: instance.into(),
        }
    }
}

/// One session of the viewer's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionSummary {
    pub id: String,
    pub first_ms: u64,
    pub last_ms: u64,
    pub calls: u32,
    /// Most used first.
    pub tools: Vec<String>,
    pub current: bool,
}

/// One call as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedCall {
    pub session: String,
    pub at_ms: u64,
    pub call_id: String,
    pub tool: String,
    pub arguments: Option<String>,
    pub is_error: bool,
    pub code: Option<String>,
    pub decided_by: Option<String>,
    pub reasons: Vec<String>,
    pub notes: Option<String>,
    pub content_sha256: String,
}

impl RecordedCall {
    fn bytes(&self) -> usize {
        self.call_id.len()
            + self.tool.len()
            + self.arguments.as_ref().map_or(0, String::len)
            + self.reasons.iter().map(String::len).sum::<usize>()
            + self.notes.as_ref().map_or(0, String::len)
            + 128
    }

    /// Whether `needle` (lowercase) is in its tool, arguments, reasons or
    /// notes, ignoring case.
    fn contains(&self, needle: &str) -> bool {
        let has = |s: &str| s.to_lowercase().contains(needle);
        has(&self.tool)
            || self.arguments.as_deref().is_some_and(has)
            || self.reasons.iter().any(|r| has(r))
            || self.notes.as_deref().is_some_and(has)
    }
}

/// A page of items: whether more matched, whether the scan stopped short.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub more: bool,
    pub partial: bool,
}

#[derive(Deserialize)]
struct CallerLine {
    #[serde(default)]
    issuer: String,
    #[serde(default)]
    subject: String,
}

#[derive(Deserialize)]
struct ClientLine {
    transport: Option<String>,
    session: Option<String>,
    caller: Option<CallerLine>,
}

#[derive(Deserialize)]
struct DecisionLine {
    reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResultLine {
    #[serde(default)]
    is_error: bool,
    code: Option<String>,
    decided_by: Option<String>,
    #[serde(default)]
    content_sha256: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CallLine {
    kind: String,
    #[serde(default)]
    ts: u64,
    #[serde(default)]
    inst: String,
    #[serde(default)]
    call_id: String,
    #[serde(default)]
    tool: String,
    client: Option<ClientLine>,
    arguments: Option<Value>,
    #[serde(default)]
    decisions: Vec<DecisionLine>,
    #[serde(default)]
    notes: Vec<Value>,
    result: Option<ResultLine>,
}

impl CallLine {
    fn session(&self) -> String {
        session_id(
            self.client.as_ref().and_then(|c| c.session.as_deref()),
            &self.inst,
        )
    }

    fn into_call(self) -> RecordedCall {
        let session = self.session();
        let result = self.result.unwrap_or(ResultLine {
            is_error: false,
            code: None,
            decided_by: None,
            content_sha256: String::new(),
        });
        RecordedCall {
            session,
            at_ms: self.ts,
            call_id: self.call_id,
            tool: self.tool,
            arguments: self.arguments.map(|a| a.to_string()),
            is_error: result.is_error,
            code: result.code,
            decided_by: result.decided_by,
            reasons: self
                .decisions
                .into_iter()
                .filter_map(|d| d.reason)
                .collect(),
            notes: (!self.notes.is_empty()).then(|| Value::Array(self.notes).to_string()),
            content_sha256: result.content_sha256,
        }
    }
}

/// The history of one call's viewer.
pub struct History<'a> {
    source: &'a Source,
    viewer: Viewer,
    /// The session of the call asking.
    current: String,
}

impl<'a> History<'a> {
    /// The history `caller` and `client` (the asking call's) may read.
    pub fn new(
        source: &'a Source,
        caller: Option<&Caller>,
        client: Option<&Client>,
    ) -> Result<History<'a>, HistoryError> {
        let viewer = Viewer::of(caller, client)?;
        let current = session_id(client.and_then(|c| c.session.as_deref()), &source.instance);
        Ok(History {
            source,
            viewer,
            current,
        })
    }

    /// The viewer's calls, newest first, each given to `visit` until it
    /// returns `false`. Returns whether the scan stopped short of the
    /// oldest record (at [`HISTORY_MAX_SCAN_MB`]).
    fn scan(&self, mut visit: impl FnMut(CallLine) -> bool) -> Result<bool, HistoryError> {
        let files = (self.source.files)();
        // The live file, then the rotated ones, newest first.
        let newest_first = files
            .first()
            .into_iter()
            .chain(files[1.min(files.len())..].iter().rev());
        let needle = self.viewer.needle();
        let mut budget = HISTORY_MAX_SCAN_MB << 20;
        for path in newest_first {
            let (text, cut) = match read_tail(path, budget) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => {
                    return Err(HistoryError::Unreadable {
                        path: path.clone(),
                        source,
                    });
                }
            };
            budget = budget.saturating_sub(text.len() as u64);
            for line in text.lines().rev() {
                if !line.contains("\"kind\":\"call\"")
                    || needle.as_deref().is_some_and(|n| !line.contains(n))
                {
                    continue;
                }
                let Ok(call) = serde_json::from_str::<CallLine>(line) else {
                    continue;
                };
                if call.kind != "call" || !self.viewer.sees(call.client.as_ref()) {
                    continue;
                }
                if !visit(call) {
                    return Ok(false);
                }
            }
            if cut {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The viewer's sessions, newest first.
    pub fn sessions(&self, limit: u32) -> Result<Page<SessionSummary>, HistoryError> {
        let limit = page_limit(limit)?;
        let mut order: Vec<String> = Vec::new();
        let mut by_id: HashMap<String, (SessionSummary, HashMap<String, u32>)> = HashMap::new();
        let partial = self.scan(|call| {
            let id = call.session();
            let (s, tools) = by_id.entry(id.clone()).or_insert_with(|| {
                order.push(id.clone());
                (
                    SessionSummary {
                        current: id == self.current,
                        id,
                        first_ms: call.ts,
                        last_ms: call.ts,
                        calls: 0,
                        tools: Vec::new(),
                    },
                    HashMap::new(),
                )
            });
            s.calls = s.calls.saturating_add(1);
            s.first_ms = s.first_ms.min(call.ts);
            s.last_ms = s.last_ms.max(call.ts);
            if tools.len() < 256 || tools.contains_key(&call.tool) {
                *tools.entry(call.tool).or_default() += 1;
            }
            true
        })?;
        let more = order.len() > limit;
        let items = order
            .into_iter()
            .take(limit)
            .filter_map(|id| by_id.remove(&id))
            .map(|(mut s, tools)| {
                let mut tools: Vec<(String, u32)> = tools.into_iter().collect();
                tools.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                s.tools = tools
                    .into_iter()
                    .take(MAX_TOOLS_PER_SESSION)
                    .map(|(t, _)| t)
                    .collect();
                s
            })
            .collect();
        Ok(Page {
            items,
            more,
            partial,
        })
    }

    /// The calls of session `id`, oldest first, from the `offset`-th.
    pub fn read(
        &self,
        id: &str,
        offset: u32,
        limit: u32,
    ) -> Result<Page<RecordedCall>, HistoryError> {
        let limit = page_limit(limit)?;
        check_id(id)?;
        let mut calls = Vec::new();
        let partial = self.scan(|call| {
            if call.session() == id {
                calls.push(call.into_call());
            }
            true
        })?;
        if calls.is_empty() {
            return Err(HistoryError::NotFound(format!(
                "no session `{id}` among yours{}: session_list shows the ids",
                if partial {
                    " (in the newest records read)"
                } else {
                    ""
                }
            )));
        }
        calls.reverse();
        let rest: Vec<RecordedCall> = calls.into_iter().skip(offset as usize).collect();
        Ok(bounded(rest, limit, partial))
    }

    /// The viewer's calls containing `query`, newest first.
    pub fn search(
        &self,
        query: &str,
        session: Option<&str>,
        limit: u32,
    ) -> Result<Page<RecordedCall>, HistoryError> {
        let limit = page_limit(limit)?;
        if query.trim().is_empty() || query.len() > HISTORY_MAX_QUERY_BYTES {
            return Err(HistoryError::InvalidRequest(format!(
                "`query` is 1 to {HISTORY_MAX_QUERY_BYTES} bytes of text, got {}",
                query.len()
            )));
        }
        if let Some(id) = session {
            check_id(id)?;
        }
        let needle = query.to_lowercase();
        let mut found = Vec::new();
        let partial = self.scan(|call| {
            if session.is_some_and(|id| call.session() != id) {
                return true;
            }
            let call = call.into_call();
            if call.contains(&needle) {
                found.push(call);
            }
            // One past the page says whether there is more.
            found.len() <= limit
        })?;
        Ok(bounded(found, limit, partial))
    }
}

/// `limit` checked: 0 is the default (20), at most [`HISTORY_MAX_PAGE`].
fn page_limit(limit: u32) -> Result<usize, HistoryError> {
    match limit as usize {
        0 => Ok(20),
        n if n <= HISTORY_MAX_PAGE => Ok(n),
        n => Err(HistoryError::InvalidRequest(format!(
            "`limit` is at most {HISTORY_MAX_PAGE}, got {n}: page with `offset`"
        ))),
    }
}

fn check_id(id: &str) -> Result<(), HistoryError> {
    if id.is_empty() || id.len() > MAX_ID_BYTES {
        return Err(HistoryError::InvalidRequest(format!(
            "a session id is 1 to {MAX_ID_BYTES} bytes (as session_list gives it), got {}",
            id.len()
        )));
    }
    Ok(())
}

/// At most `limit` calls and [`HISTORY_MAX_PAGE_BYTES`] of them.
fn bounded(calls: Vec<RecordedCall>, limit: usize, partial: bool) -> Page<RecordedCall> {
    let total = calls.len();
    let mut bytes = 0;
    let mut items = Vec::new();
    for c in calls.into_iter().take(limit) {
        bytes += c.bytes();
        if bytes > HISTORY_MAX_PAGE_BYTES && !items.is_empty() {
            break;
        }
        items.push(c);
    }
    Page {
        more: items.len() < total,
        items,
        partial,
    }
}

/// At most the last `budget` bytes of `path`, from a line's start; and
/// whether that left out the file's start.
fn read_tail(path: &Path, budget: u64) -> std::io::Result<(String, bool)> {
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    let cut = len > budget;
    if cut {
        f.seek(SeekFrom::Start(len - budget))?;
    }
    let mut bytes = Vec::with_capacity(len.min(budget) as usize);
    f.take(budget).read_to_end(&mut bytes)?;
    if cut {
        // The first line is a part of one: drop it.
        let start = bytes
            .iter()
            .position(|b| *b == b'\n')
            .map_or(bytes.len(), |i| i + 1);
        bytes.drain(..start);
    }
    // A record is one line of UTF-8; a torn last line is skipped as unparsable.
    Ok((String::from_utf8_lossy(&bytes).into_owned(), cut))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(ts: u64, inst: &str, client: Value, tool: &str, args: Value) -> String {
        serde_json::json!({
            "v": 1, "kind": "call", "ts": ts, "inst": inst, "callId": format!("c{ts}"),
            "tool": tool, "client": client, "arguments": args, "decisions": [{"reason": "ok"}],
            "result": {"isError": false, "code": null, "sha256": "x", "contentSha256": "y"}
        })
        .to_string()
    }

    /// A directory of its own, removed when dropped.
    struct Scratch(PathBuf);
    impl Scratch {
        fn new(tag: &str) -> Scratch {
            let d =
                std::env::temp_dir().join(format!("toolgate-history-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            Scratch(d)
        }
        fn path(&self) -> &Path {
            &self.0
        }
    }
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn caller(sub: &str) -> Caller {
        Caller {
            subject: sub.into(),
            issuer: "https://idp".into(),
            ..Default::default()
        }
    }

    fn http(session: Option<&str>) -> Client {
        Client {
            transport: "http".into(),
            session: session.map(str::to_string),
            ..Default::default()
        }
    }

    /// Each viewer sees only its own: alice never bob's, a session never
    /// another's, local never a remote one; a stateless request without a
    /// caller has no history.
    #[test]
    fn each_viewer_reads_only_its_own_calls() {
        let dir = Scratch::new("viewers");
        let path = dir.path().join("audit.jsonl");
        let alice = serde_json::json!({"transport": "http", "session": "S1", "caller": {"subject": "alice", "issuer": "https://idp"}});
        let bob = serde_json::json!({"transport": "http", "session": "S2", "caller": {"subject": "bob", "issuer": "https://idp"}});
        let anon = serde_json::json!({"transport": "http", "session": "S3"});
        let stdio = serde_json::json!({"transport": "stdio"});
        let lines = [
            line(
                1,
                "p1",
                alice.clone(),
                "read",
                serde_json::json!({"path": "alice-secret.txt"}),
            ),
            line(
                2,
                "p1",
                bob,
                "read",
                serde_json::json!({"path": "bob-secret.txt"}),
            ),
            line(
                3,
                "p1",
                anon,
                "read",
                serde_json::json!({"path": "anon.txt"}),
            ),
            line(4, "p2", stdio, "bash", serde_json::json!({"command": "ls"})),
            line(
                5,
                "p3",
                Value::Null,
                "read",
                serde_json::json!({"path": "run.txt"}),
            ),
            line(
                6,
                "p1",
                alice,
                "write",
                serde_json::json!({"path": "alice-secret.txt"}),
            ),
            "{\"kind\":\"call\", torn".into(),
        ];
        std::fs::write(&path, lines.join("\n")).unwrap();
        let source = Source::file(path, "p3");
        let a = History::new(&source, Some(&caller("alice")), Some(&http(Some("S1")))).unwrap();
        let found = a.search("SECRET", None, 0).unwrap();
        assert_eq!(found.items.len(), 2);
        assert!(
            found
                .items
                .iter()
                .all(|c| !c.arguments.as_ref().unwrap().contains("bob"))
        );
        assert_eq!(found.items[0].tool, "write", "newest first");
        let sessions = a.sessions(0).unwrap();
        assert_eq!(sessions.items.len(), 1);
        assert!(sessions.items[0].current);
        assert_eq!(sessions.items[0].calls, 2);
        assert_eq!(sessions.items[0].tools, ["read", "write"]);
        let read = a.read(&sessions.items[0].id, 0, 0).unwrap();
        assert_eq!(read.items[0].tool, "read", "oldest first");
        assert_eq!(read.items[0].reasons, ["ok"]);

        let b = History::new(&source, Some(&caller("bob")), Some(&http(Some("S1")))).unwrap();
        assert!(b.search("alice", None, 0).unwrap().items.is_empty());
        // Bob cannot read alice's session by its id.
        assert!(matches!(
            b.read(&sessions.items[0].id, 0, 0),
            Err(HistoryError::NotFound(_))
        ));

        let anon = History::new(&source, None, Some(&http(Some("S3")))).unwrap();
        let mine = anon.search(".txt", None, 0).unwrap();
        assert_eq!(mine.items.len(), 1);
        assert!(mine.items[0].arguments.as_ref().unwrap().contains("anon"));
        // Another session without a caller: nothing of S3's.
        let other = History::new(&source, None, Some(&http(Some("S9")))).unwrap();
        assert!(other.search(".txt", None, 0).unwrap().items.is_empty());
        assert!(matches!(
            History::new(&source, None, Some(&http(None))),
            Err(HistoryError::NoIdentity(_))
        ));

        let local = History::new(&source, None, None).unwrap();
        let seen: Vec<String> = local
            .search("a", None, 0)
            .unwrap()
            .items
            .into_iter()
            .map(|c| c.tool)
            .collect();
        assert_eq!(seen, ["read", "bash"], "run's and stdio's, newest first");
        let sessions = local.sessions(0).unwrap();
        assert_eq!(sessions.items.len(), 2);
        assert!(sessions.items[0].current, "the process p3 is this one");
    }

    /// Limits are checked and said; a page stops at its limit and says
    /// there is more; the scan reads only the newest bytes and says so.
    #[test]
    fn pages_and_scans_are_bounded() {
        let dir = Scratch::new("bounds");
        let path = dir.path().join("audit.jsonl");
        let lines: Vec<String> = (0..50)
            .map(|i| line(i, "p", Value::Null, "read", serde_json::json!({"n": i})))
            .collect();
        std::fs::write(&path, lines.join("\n")).unwrap();
        let source = Source::file(path.clone(), "p");
        let h = History::new(&source, None, None).unwrap();
        let page = h.search("read", None, 10).unwrap();
        assert_eq!(page.items.len(), 10);
        assert!(page.more && !page.partial);
        assert!(
            matches!(h.search("read", None, 101), Err(HistoryError::InvalidRequest(m)) if m.contains("100"))
        );
        assert!(matches!(
            h.search("", None, 1),
            Err(HistoryError::InvalidRequest(_))
        ));
        assert!(matches!(
            h.search(&"x".repeat(HISTORY_MAX_QUERY_BYTES + 1), None, 1),
            Err(HistoryError::InvalidRequest(_))
        ));
        let id = h.sessions(1).unwrap().items[0].id.clone();
        let tail = h.read(&id, 45, 0).unwrap();
        assert_eq!(tail.items.len(), 5);
        assert!(!tail.more);
        let (text, cut) = read_tail(&path, 300).unwrap();
        assert!(cut && text.len() <= 300);
        assert!(text.starts_with("{\"v\""), "from a line's start: {text}");
        assert!(matches!(
            History::new(&Source::file(dir.path().join("none"), "p"), None, None)
                .unwrap()
                .sessions(0),
            Ok(p) if p.items.is_empty()
        ));
    }
}
