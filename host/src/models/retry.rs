//! When a failed attempt is tried again, and after how long.
//!
//! Retried: 429 (after its `retry-after`), 408, 409, 5xx and Anthropic's
//! 529 (overloaded), a connection that failed or was cut, a stream cut
//! before its end, an answer not in the format. Not retried: any other
//! 4xx (the request itself is wrong: another attempt would be the same),
//! and egress refusals. The pause doubles from [`FIRST_PAUSE`] up to
//! [`MAX_PAUSE`], or is the provider's `retry-after` when it asks for
//! longer, up to [`MAX_RETRY_AFTER`]; it never runs past the caller's
//! deadline (see [`super::Model::complete`]).

use std::time::Duration;

use super::{Attempt, ModelConfig, WireResponse};

/// The pause after the first failed attempt (500 ms).
pub const FIRST_PAUSE: Duration = Duration::from_millis(500);
/// The longest pause of the backoff (8 s).
pub const MAX_PAUSE: Duration = Duration::from_secs(8);
/// The longest `retry-after` honoured (60 s); a longer one is waited for
/// this long.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// How many attempts, each how long.
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    pub attempts: u32,
    pub timeout: Duration,
}

impl From<&ModelConfig> for Policy {
    fn from(c: &ModelConfig) -> Self {
        Policy {
            attempts: 1 + c.retries(),
            timeout: c.timeout(),
        }
    }
}

impl Policy {
    /// The pause after failed attempt `n` (from 1), at least `asked`.
    pub fn pause(&self, n: u32, asked: Option<Duration>) -> Duration {
        let backoff = FIRST_PAUSE
            .saturating_mul(1 << (n.saturating_sub(1)).min(16))
            .min(MAX_PAUSE);
        match asked {
            Some(a) => a.min(MAX_RETRY_AFTER).max(backoff),
            None => backoff,
        }
    }
}

/// `None` for a 2xx; otherwise whether to try again (the reason is filled
/// in by the caller, from the body).
pub fn judge_status(answer: &WireResponse) -> Option<Attempt> {
    let status = answer.status;
    if (200..300).contains(&status) {
        return None;
    }
    if matches!(status, 408 | 409 | 429) || status >= 500 {
        return Some(Attempt::Retry {
            why: String::new(),
            wait: answer.retry_after.as_deref().and_then(retry_after),
        });
    }
    Some(Attempt::Fail {
        status,
        why: String::new(),
    })
}

/// `retry-after` in seconds (a date is not read: the backoff applies).
pub fn retry_after(value: &str) -> Option<Duration> {
    let v = value.trim();
    v.parse::<u64>().ok().map(Duration::from_secs).or_else(|| {
        v.parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| Duration::from_secs_f64(s.min(MAX_RETRY_AFTER.as_secs_f64())))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, retry_after: Option<&str>) -> WireResponse {
        WireResponse {
            status,
            retry_after: retry_after.map(str::to_string),
            body: Vec::new(),
        }
    }

    #[test]
    fn what_is_tried_again() {
        assert_eq!(judge_status(&answer(200, None)), None);
        for s in [408, 409, 429, 500, 502, 503, 529] {
            assert!(
                matches!(judge_status(&answer(s, None)), Some(Attempt::Retry { .. })),
                "{s}"
            );
        }
        for s in [400, 401, 403, 404, 413, 422] {
            assert!(
                matches!(judge_status(&answer(s, None)), Some(Attempt::Fail { .. })),
                "{s}"
            );
        }
        assert_eq!(
            judge_status(&answer(429, Some("2"))),
            Some(Attempt::Retry {
                why: String::new(),
                wait: Some(Duration::from_secs(2))
            })
        );
        assert_eq!(retry_after("0.25"), Some(Duration::from_millis(250)));
        assert_eq!(retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(retry_after("-1"), None);
    }

    #[test]
    fn the_backoff_doubles_to_its_cap_and_yields_to_a_longer_retry_after() {
        let p = Policy {
            attempts: 20,
            timeout: Duration::from_secs(1),
        };
        assert_eq!(p.pause(1, None), Duration::from_millis(500));
        assert_eq!(p.pause(2, None), Duration::from_secs(1));
        assert_eq!(p.pause(5, None), Duration::from_secs(8));
        assert_eq!(p.pause(40, None), MAX_PAUSE);
        assert_eq!(
            p.pause(1, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(p.pause(1, Some(Duration::from_millis(10))), FIRST_PAUSE);
        assert_eq!(p.pause(1, Some(Duration::from_secs(3600))), MAX_RETRY_AFTER);
    }
}
