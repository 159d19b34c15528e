//! Expected events the SDK logs as errors, logged at debug instead.
//!
//! When a client closes the stream of a request it no longer wants (the
//! 2026-07-28 way to cancel: it closes its POST's response stream), the
//! SDK's serve loop ends and tries to deliver the handler's last answer to
//! a receiver that is gone; it logs that as `ERROR failed to send pending
//! response during drain` — or, when the answer comes before the loop
//! ends, `ERROR fail to response message error=channel closed`. That is
//! the normal end of a cancelled request, not an error an operator must
//! look into, so [`layer`] drops the SDK's event and logs it at debug
//! (target `toolgate_mcp`). Every other event passes untouched (the
//! second message with any other error included).

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// The SDK's messages that are expected events, not errors, each with
/// the error it must carry (`None`: any).
const EXPECTED: [(&str, Option<&str>); 2] = [
    ("failed to send pending response during drain", None),
    ("fail to response message", Some("channel closed")),
];

/// The layer; add it to the subscriber (`toolgate`'s logging does).
pub fn layer() -> Quiet {
    Quiet
}

/// See the module docs.
pub struct Quiet;

impl<S: Subscriber> Layer<S> for Quiet {
    fn event_enabled(&self, event: &Event<'_>, _ctx: Context<'_, S>) -> bool {
        let meta = event.metadata();
        if *meta.level() != Level::ERROR || !meta.target().starts_with("rmcp") {
            return true;
        }
        let mut message = Message::default();
        event.record(&mut message);
        let expected = |m: &str| {
            EXPECTED.iter().any(|(text, error)| {
                *text == m
                    && error.is_none_or(|e| message.error.as_deref().is_some_and(|got| got == e))
            })
        };
        match message.message.clone() {
            Some(m) if expected(&m) => {
                tracing::debug!(
                    target: "toolgate_mcp",
                    sdk = %m,
                    "a response could not be delivered: its client had closed the stream (a cancel)"
                );
                false
            }
            _ => true,
        }
    }
}

/// An event's message and its `error` field.
#[derive(Default)]
struct Message {
    message: Option<String>,
    error: Option<String>,
}

impl Message {
    fn set(&mut self, field: &tracing::field::Field, value: String) {
        match field.name() {
            "message" => self.message = Some(value),
            "error" => self.error = Some(value),
            _ => {}
        }
    }
}

impl tracing::field::Visit for Message {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.set(field, format!("{value:?}"));
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.set(field, value.to_string());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tracing_subscriber::layer::SubscriberExt;

    /// Counts the ERROR events that reach it.
    struct Errors(Arc<AtomicUsize>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Errors {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            if *event.metadata().level() == tracing::Level::ERROR {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    /// The SDK's two ways of saying "the client closed the stream" are
    /// quieted; the same message with another error is not.
    #[test]
    fn a_closed_stream_is_no_error_and_other_failures_still_are() {
        let count = Arc::new(AtomicUsize::new(0));
        let subscriber = tracing_subscriber::registry()
            .with(super::layer())
            .with(Errors(count.clone()));
        tracing::subscriber::with_default(subscriber, || {
            tracing::error!(target: "rmcp::service", error = %"channel closed", "fail to response message");
            tracing::error!(target: "rmcp::service", "failed to send pending response during drain");
            assert_eq!(count.load(Ordering::SeqCst), 0);
            tracing::error!(target: "rmcp::service", error = %"broken pipe", "fail to response message");
            tracing::error!(target: "toolgate", "failed to send pending response during drain");
            assert_eq!(count.load(Ordering::SeqCst), 2);
        });
    }
}
