//! Logs go to stderr (stdout is for results and MCP frames). `RUST_LOG`
//! filters them (default `warn,rmcp=error,toolgate::progress=info`: warnings, and the start and
//! end of slow steps); `--log-format json` makes one JSON object per line,
//! with the call span's fields (token, id, tool) on every stage event.
//! Colours only when stderr is a terminal. Guest strings in log lines are
//! escaped where they are logged (`plugin::log`).

use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use super::LogFormat;
use super::demo::Transcript;

pub fn init(format: LogFormat, transcript: Option<Transcript>) {
    // The MCP SDK logs every error answer (a client's unknown method, a
    // refused flood) as a warning: a client's mistakes are not the
    // operator's, and must not flood the log. Its errors still show.
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("warn,rmcp=error,{}=info", toolgate::PROGRESS)));
    let fmt = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_target(false)
            .with_filter(filter)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .with_writer(std::io::stderr)
            .with_filter(filter)
            .boxed(),
    };
    let transcript = transcript
        .map(|t| t.with_filter(Targets::new().with_target("toolgate", tracing::Level::DEBUG)));
    let _ = tracing_subscriber::registry()
        // Expected events the MCP SDK logs as errors, at debug instead.
        .with(crate::quiet::layer())
        .with(fmt)
        .with(transcript)
        .try_init();
}
