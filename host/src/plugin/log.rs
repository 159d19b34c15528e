//! What guests write into the host's log, made safe to read.
//!
//! A log is an output too: a guest string can carry newlines that forge host
//! log lines, terminal escape sequences that rewrite the operator's screen,
//! bidirectional-text overrides that hide what a line says, or simply a
//! million lines a second. So every guest string that reaches a log is
//! [escaped](escape), cut to [`Budgets::max_log_line_bytes`], and counted
//! against a per-plugin rate ([`Budgets::log_lines_per_second`]); lines over
//! the rate are dropped and the next line that gets through (or the plugin's
//! unloading) reports how many were.
//!
//! [`Budgets::max_log_line_bytes`]: crate::budgets::Budgets::max_log_line_bytes
//! [`Budgets::log_lines_per_second`]: crate::budgets::Budgets::log_lines_per_second

use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Escape control characters (newlines, escape sequences, …) and Unicode
/// direction overrides, so that a guest string stays on one line and shows
/// what it contains.
pub fn escape(s: &str) -> std::borrow::Cow<'_, str> {
    let risky =
        |c: char| c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    if !s.chars().any(risky) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if risky(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Levels a guest may log at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

struct Bucket {
    tokens: f64,
    last: Instant,
    dropped: u64,
}

/// One plugin's log: escaping, cutting and rate limiting.
pub struct GuestLog {
    plugin: Arc<str>,
    rate: f64,
    max_bytes: usize,
    bucket: Mutex<Bucket>,
}

impl GuestLog {
    pub fn new(plugin: Arc<str>, lines_per_second: u32, max_bytes: usize) -> Self {
        let rate = f64::from(lines_per_second.max(1));
        GuestLog {
            plugin,
            rate,
            max_bytes,
            bucket: Mutex::new(Bucket {
                tokens: rate,
                last: Instant::now(),
                dropped: 0,
            }),
        }
    }

    /// Whether a line may be written now; `Some(n)` with the number of
    /// lines dropped before it.
    fn admit(&self) -> Option<u64> {
        let mut b = self.bucket.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let refill = now.duration_since(b.last).as_secs_f64() * self.rate;
        b.tokens = (b.tokens + refill).min(self.rate);
        b.last = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Some(std::mem::take(&mut b.dropped))
        } else {
            b.dropped += 1;
            None
        }
    }

    /// Write a guest's line at `level`, escaped and cut; dropped when the
    /// plugin is over its rate.
    pub fn line(&self, level: Level, message: &str) {
        let Some(dropped) = self.admit() else { return };
        let plugin = &*self.plugin;
        if dropped > 0 {
            tracing::warn!(
                target: "toolgate::guest",
                plugin,
                dropped,
                "{dropped} log line(s) of this plugin were dropped (over {} lines per second)",
                self.rate
            );
        }
        let cut = if message.len() > self.max_bytes {
            let mut end = self.max_bytes;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            &message[..end]
        } else {
            message
        };
        let text = escape(cut);
        let more = if cut.len() < message.len() {
            format!(" … [{} more bytes cut]", message.len() - cut.len())
        } else {
            String::new()
        };
        match level {
            Level::Trace => tracing::trace!(target: "toolgate::guest", plugin, "{text}{more}"),
            Level::Debug => tracing::debug!(target: "toolgate::guest", plugin, "{text}{more}"),
            Level::Info => tracing::info!(target: "toolgate::guest", plugin, "{text}{more}"),
            Level::Warn => tracing::warn!(target: "toolgate::guest", plugin, "{text}{more}"),
            Level::Error => tracing::error!(target: "toolgate::guest", plugin, "{text}{more}"),
        }
    }

    /// A host warning about this plugin's behaviour (a dropped deferred
    /// context, say), under the same rate limit as its own lines.
    pub fn host_warning(&self, message: &str) {
        if let Some(dropped) = self.admit() {
            let plugin = &*self.plugin;
            if dropped > 0 {
                tracing::warn!(
                    plugin,
                    dropped,
                    "{dropped} log line(s) of this plugin were dropped"
                );
            }
            tracing::warn!(plugin, "{message}");
        }
    }
}

impl Drop for GuestLog {
    fn drop(&mut self) {
        let b = self.bucket.get_mut().unwrap_or_else(|p| p.into_inner());
        if b.dropped > 0 {
            let plugin = &*self.plugin;
            tracing::warn!(
                target: "toolgate::guest",
                plugin,
                dropped = b.dropped,
                "{} log line(s) of this plugin were dropped (over {} lines per second)",
                b.dropped,
                self.rate
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_could_forge_or_hide_a_line() {
        assert_eq!(escape("plain ünïcode"), "plain ünïcode");
        assert_eq!(
            escape("a\nINFO forged\x1b[31m"),
            "a\\nINFO forged\\u{1b}[31m"
        );
        assert_eq!(escape("\u{202e}txt"), "\\u{202e}txt");
    }

    #[test]
    fn a_flood_is_cut_to_the_rate() {
        let log = GuestLog::new("p".into(), 10, 100);
        let admitted = (0..1000).filter(|_| log.admit().is_some()).count();
        assert!(admitted <= 11, "{admitted}");
        std::thread::sleep(std::time::Duration::from_millis(250));
        assert_eq!(log.admit(), Some(1000 - admitted as u64));
    }
}
