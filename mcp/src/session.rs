//! HTTP sessions that cancel their calls the moment they end.
//!
//! Why: when a client ends its session (`DELETE`), or the session idles
//! out, the SDK closes the session's transport and then waits up to 5
//! seconds for the requests still being handled before it cancels them —
//! a call would go on running (a process too) after its client is gone.
//! Over stdio our own transport cancels the session's token at once; here
//! the SDK's session manager is wrapped so that its transport does the
//! same: every request of a session carries the session's [`SessionGone`]
//! token in its extensions, and the token fires when the transport sees
//! the end. [`super::server`] fuses it into each call's cancellation.
//!
//! Each session's negotiated protocol version is kept while it lives
//! ([`Sessions::negotiated`]): what its SSE streams may carry depends on it
//! (priming events: [`super::exact::primes`]).
//!
//! And a session that is opened and never used (no request besides
//! `initialize` and `ping`) is closed after
//! [`Limits::session_unused_idle`](super::Limits::session_unused_idle),
//! not the full idle time: a client cannot park sessions it does not use.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::Stream;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, GetExtensions, JsonRpcMessage, ServerJsonRpcMessage,
};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{EventStore, ServerSseMessage};
use rmcp::transport::streamable_http_server::{RestoreOutcome, SessionId, SessionManager};
use tokio_util::sync::CancellationToken;

/// Fires when the session a request belongs to has ended.
#[derive(Clone, Debug)]
pub struct SessionGone(pub CancellationToken);

/// The SDK's in-memory session manager, whose transports announce their end
/// and whose unused sessions end early. Clones share the sessions.
#[derive(Clone)]
pub struct Sessions {
    inner: Arc<LocalSessionManager>,
    unused_idle: Duration,
    /// The protocol version each live session negotiated.
    negotiated: Arc<Mutex<HashMap<SessionId, Arc<str>>>>,
}

impl Sessions {
    /// Sessions closed after `idle` without a request, or after
    /// `unused_idle` when they never made one besides `initialize`/`ping`.
    pub fn new(idle: Duration, unused_idle: Duration) -> Self {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(idle);
        Sessions {
            inner: Arc::new(inner),
            unused_idle,
            negotiated: Arc::default(),
        }
    }

    /// The protocol version session `id` negotiated (its `initialize`
    /// answer), while it lives on this server.
    pub fn negotiated(&self, id: &SessionId) -> Option<Arc<str>> {
        self.negotiated
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
    }
}

/// A session's transport, which stamps [`SessionGone`] on every request.
pub struct Watched<T> {
    inner: T,
    gone: CancellationToken,
    used: Arc<AtomicBool>,
}

impl<T> Watched<T> {
    fn new(inner: T) -> Self {
        Watched {
            inner,
            gone: CancellationToken::new(),
            used: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Watched<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        match self.inner.receive().await {
            None => {
                self.gone.cancel();
                None
            }
            Some(mut message) => {
                if let JsonRpcMessage::Request(request) = &mut message {
                    if !matches!(
                        request.request,
                        ClientRequest::InitializeRequest(_) | ClientRequest::PingRequest(_)
                    ) {
                        self.used.store(true, Ordering::Relaxed);
                    }
                    request
                        .request
                        .extensions_mut()
                        .insert(SessionGone(self.gone.clone()));
                }
                Some(message)
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.gone.cancel();
        self.inner.close().await
    }
}

impl<T> Drop for Watched<T> {
    fn drop(&mut self) {
        self.gone.cancel();
    }
}

impl SessionManager for Sessions {
    type Error = <LocalSessionManager as SessionManager>::Error;
    type Transport = Watched<<LocalSessionManager as SessionManager>::Transport>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (id, transport) = self.inner.create_session().await?;
        let watched = Watched::new(transport);
        let (inner, used, gone) = (
            self.inner.clone(),
            watched.used.clone(),
            watched.gone.clone(),
        );
        let (unused_idle, session) = (self.unused_idle, id.clone());
        {
            // Its negotiated version is forgotten when it ends.
            let (negotiated, gone, session) =
                (self.negotiated.clone(), gone.clone(), session.clone());
            tokio::spawn(async move {
                gone.cancelled().await;
                negotiated
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&session);
            });
        }
        tokio::spawn(async move {
            tokio::select! {
                _ = gone.cancelled() => {}
                _ = tokio::time::sleep(unused_idle) => {
                    if !used.load(Ordering::Relaxed) {
                        tracing::debug!(%session, "session never used; closed");
                        let _ = inner.close_session(&session).await;
                    }
                }
            }
        });
        Ok((id, watched))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        let response = self.inner.initialize_session(id, message).await?;
        let version = serde_json::to_value(&response).ok().and_then(|v| {
            v.pointer("/result/protocolVersion")?
                .as_str()
                .map(Arc::<str>::from)
        });
        if let Some(version) = version {
            self.negotiated
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id.clone(), version);
        }
        Ok(response)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_stream(id, message).await
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.resume(id, last_event_id).await
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        Ok(match self.inner.restore_session(id).await? {
            RestoreOutcome::Restored(t) => RestoreOutcome::Restored(Watched::new(t)),
            RestoreOutcome::AlreadyPresent => RestoreOutcome::AlreadyPresent,
            _ => RestoreOutcome::NotSupported,
        })
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}
