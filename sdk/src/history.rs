//! The `history` seam (since contract 0.2.7): the calling client's own
//! calls, as the host's audit record keeps them. Granted by `history =
//! true`. Whose history a request reads is the host's decision (the
//! call's validated caller, else its MCP session, else the local calls);
//! a tool names a session only among those. See `plugins/history`.

use crate::bindings::toolgate::plugin::history as raw;
pub use crate::bindings::toolgate::plugin::history::{
    CallsPage, HistoryError, RecordedCall, SessionSummary, SessionsPage,
};

/// The caller's sessions, newest first (`limit` 0: 20; at most 100).
pub fn list_sessions(limit: u32) -> Result<SessionsPage, HistoryError> {
    raw::list_sessions(limit)
}

/// The calls of session `id`, oldest first, from the `offset`-th.
pub fn read_session(id: &str, offset: u32, limit: u32) -> Result<CallsPage, HistoryError> {
    raw::read_session(id, offset, limit)
}

/// The caller's calls containing `query` (case-insensitive), newest first.
pub fn search(query: &str, session: Option<&str>, limit: u32) -> Result<CallsPage, HistoryError> {
    raw::search(query, session, limit)
}

/// What an error says (each case carries a sentence for the model).
pub fn message(e: &HistoryError) -> &str {
    match e {
        HistoryError::NoRecord(m)
        | HistoryError::NoIdentity(m)
        | HistoryError::NotFound(m)
        | HistoryError::InvalidRequest(m)
        | HistoryError::Unreadable(m) => m,
    }
}
