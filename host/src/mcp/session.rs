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

use std::sync::Arc;

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, GetExtensions, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{EventStore, ServerSseMessage};
use rmcp::transport::streamable_http_server::{RestoreOutcome, SessionId, SessionManager};
use tokio_util::sync::CancellationToken;

/// Fires when the session a request belongs to has ended.
#[derive(Clone, Debug)]
pub struct SessionGone(pub CancellationToken);

/// The SDK's in-memory session manager, whose transports announce their end.
#[derive(Default)]
pub struct Sessions(pub LocalSessionManager);

/// A session's transport, which stamps [`SessionGone`] on every request.
pub struct Watched<T> {
    inner: T,
    gone: CancellationToken,
}

impl<T> Watched<T> {
    fn new(inner: T) -> Self {
        Watched {
            inner,
            gone: CancellationToken::new(),
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
        let (id, transport) = self.0.create_session().await?;
        Ok((id, Watched::new(transport)))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.0.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.0.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.0.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.0.create_stream(id, message).await
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.0.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.0.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.0.resume(id, last_event_id).await
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        Ok(match self.0.restore_session(id).await? {
            RestoreOutcome::Restored(t) => RestoreOutcome::Restored(Watched::new(t)),
            RestoreOutcome::AlreadyPresent => RestoreOutcome::AlreadyPresent,
            _ => RestoreOutcome::NotSupported,
        })
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.0.event_store()
    }
}
