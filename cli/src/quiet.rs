//! Expected events the SDK logs as errors, logged at debug instead.
//!
//! When a client closes the stream of a request it no longer wants (the
//! 2026-07-28 way to cancel: it closes its POST's response stream), the
//! SDK's serve loop ends and tries to deliver the handler's last answer to
//! a receiver that is gone; it logs that as `ERROR failed to send pending
//! response during drain`. That is the normal end of a cancelled request,
//! not an error an operator must look into, so [`layer`] drops the SDK's
//! event and logs it at debug (target `toolgate_mcp`). Every other event
//! passes untouched.

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// The SDK's messages that are expected events, not errors.
const EXPECTED: [&str; 1] = ["failed to send pending response during drain"];

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
        let mut message = Message(None);
        event.record(&mut message);
        match message.0 {
            Some(m) if EXPECTED.contains(&m.as_str()) => {
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

struct Message(Option<String>);

impl tracing::field::Visit for Message {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = Some(format!("{value:?}"));
        }
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "message" {
            self.0 = Some(value.to_string());
        }
    }
}
