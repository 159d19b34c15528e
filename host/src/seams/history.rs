//! The `history` seam: the calling client's own calls, read back from the
//! audit record ([`crate::history`]), for a component granted `history =
//! true` (the built-in `history` plugin: `session_list`, `session_read`,
//! `session_search`).
//!
//! Whose history a request reads is decided from the call being served —
//! its validated caller and the client the turn came from — never from an
//! argument: a guest can name a session id, and reads it only if that
//! session is its caller's. Outside a call there is no history. The scan
//! runs on a blocking thread and is bounded (see [`crate::history`]); the
//! call's cancellation ends the wait.
//!
//! The seam as a unit (see [`crate::seams`]): granted by `history = true`
//! ([`seam`]); its state is the record's place, set once when the host
//! keeps an audit record ([`super::HostSeams::history`]); its functions
//! wait (they read files), so a component importing it takes the
//! asynchronous path.

use std::sync::Arc;

use wasmtime::component::HasData;

use super::{Seam, SeamCtx, SeamHost};
use crate::bindings::v0_2::toolgate::plugin::history as wit;
use crate::call::{CallSignal, Client, Misuse};
use crate::grants::Capability;
use crate::history::{History, HistoryError, Page, RecordedCall, Source};
use crate::identity::Caller;

/// The `history` seam: granted by `history = true`.
pub fn seam<T: SeamHost>() -> Seam<T> {
    Seam {
        interface: "history",
        capability: Capability::History,
        sync: false,
        granted: |g| {
            if g.history {
                Ok(())
            } else {
                Err("history = true")
            }
        },
        link: |linker| {
            wit::add_to_linker::<T, HistoryView<'static>>(linker, |t| HistoryView::new(t.seams()))
        },
    }
}

/// What the `history` interface sees of a store: the grant, the record's
/// place, and the call being served (its caller, client and signal).
pub struct HistoryView<'a> {
    plugin: &'a str,
    granted: bool,
    source: Option<&'a Source>,
    in_call: bool,
    caller: Option<Arc<Caller>>,
    client: Option<Arc<Client>>,
    signal: Option<&'a CallSignal>,
}

impl<'a> HistoryView<'a> {
    pub fn new(ctx: SeamCtx<'a>) -> Self {
        HistoryView {
            plugin: ctx.plugin,
            granted: ctx.grants.history,
            source: ctx.shared.history.get(),
            in_call: ctx.call.is_some(),
            caller: ctx.call.and_then(|c| c.caller.clone()),
            client: ctx.extensions.get::<Arc<Client>>().cloned(),
            signal: ctx.signal,
        }
    }

    /// Run `read` on the history of the call being served, on a blocking
    /// thread, until it ends or the call does.
    async fn read<R: Send + 'static>(
        &self,
        read: impl FnOnce(&History<'_>) -> Result<R, HistoryError> + Send + 'static,
    ) -> wasmtime::Result<Result<R, wit::HistoryError>> {
        if !self.granted {
            return Err(Misuse(format!(
                "plugin `{}` is not granted the history seam (`history = true` in its grants)",
                self.plugin
            ))
            .into());
        }
        if !self.in_call {
            return Ok(Err(wit::HistoryError::NoIdentity(
                "history is read for a call, and none is being served (not from list-tools)".into(),
            )));
        }
        let Some(source) = self.source.cloned() else {
            return Ok(Err(to_wit(HistoryError::NoRecord)));
        };
        let (caller, client) = (self.caller.clone(), self.client.clone());
        let work = tokio::task::spawn_blocking(move || {
            let history = History::new(&source, caller.as_deref(), client.as_deref())?;
            read(&history)
        });
        let result = match self.signal {
            Some(signal) => tokio::select! {
                r = work => r,
                _ = signal.wait() => {
                    return Ok(Err(wit::HistoryError::Unreadable(
                        "the call ended before the history was read".into(),
                    )));
                }
            },
            None => work.await,
        };
        match result {
            Ok(r) => Ok(r.map_err(to_wit)),
            Err(e) => Ok(Err(wit::HistoryError::Unreadable(format!(
                "reading the record failed: {e}"
            )))),
        }
    }
}

impl HasData for HistoryView<'static> {
    type Data<'a> = HistoryView<'a>;
}

fn to_wit(e: HistoryError) -> wit::HistoryError {
    let m = e.to_string();
    match e {
        HistoryError::NoRecord => wit::HistoryError::NoRecord(m),
        HistoryError::NoIdentity(_) => wit::HistoryError::NoIdentity(m),
        HistoryError::NotFound(_) => wit::HistoryError::NotFound(m),
        HistoryError::InvalidRequest(_) => wit::HistoryError::InvalidRequest(m),
        HistoryError::Unreadable { .. } => wit::HistoryError::Unreadable(m),
    }
}

fn calls_page(p: Page<RecordedCall>) -> wit::CallsPage {
    wit::CallsPage {
        calls: p
            .items
            .into_iter()
            .map(|c| wit::RecordedCall {
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
        more: p.more,
        partial: p.partial,
    }
}

impl wit::Host for HistoryView<'_> {
    async fn list_sessions(
        &mut self,
        limit: u32,
    ) -> wasmtime::Result<Result<wit::SessionsPage, wit::HistoryError>> {
        let page = self.read(move |h| h.sessions(limit)).await?;
        Ok(page.map(|p| wit::SessionsPage {
            sessions: p
                .items
                .into_iter()
                .map(|s| wit::SessionSummary {
                    id: s.id,
                    first_ms: s.first_ms,
                    last_ms: s.last_ms,
                    calls: s.calls,
                    tools: s.tools,
                    current: s.current,
                })
                .collect(),
            more: p.more,
            partial: p.partial,
        }))
    }

    async fn read_session(
        &mut self,
        id: String,
        offset: u32,
        limit: u32,
    ) -> wasmtime::Result<Result<wit::CallsPage, wit::HistoryError>> {
        let page = self.read(move |h| h.read(&id, offset, limit)).await?;
        Ok(page.map(calls_page))
    }

    async fn search(
        &mut self,
        query: String,
        session: Option<String>,
        limit: u32,
    ) -> wasmtime::Result<Result<wit::CallsPage, wit::HistoryError>> {
        let page = self
            .read(move |h| h.search(&query, session.as_deref(), limit))
            .await?;
        Ok(page.map(calls_page))
    }
}
