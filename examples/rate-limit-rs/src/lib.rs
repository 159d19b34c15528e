//! A guard that limits how often each tool may be called: at most `LIMIT`
//! calls per `WINDOW_SECONDS`, per tool and per agent scope (a token
//! bucket: it refills continuously, so a burst of `LIMIT` is allowed and
//! then one call every `WINDOW_SECONDS / LIMIT`).
//!
//! Where the counters live: in the host's `kv` seam, not in the instance's
//! memory. The host keeps several warm instances of a plugin (parallel
//! calls each lease one), drops an instance that trapped or timed out, and
//! makes a new one per call in `instances = "fresh"` mode; counters in a
//! `static` would be split across instances and lost with them, so the
//! limit would be N times too loose and reset at random. `kv` is one store
//! per plugin and agent scope that outlives instances (and reloads), and
//! it is synchronous: the guard still runs on the host's fast path.
//! The cost is a grant: the operator adds `kv = true` under
//! `[plugins.rate-limit.grants]`.
//!
//! Settings (`vars` of `[plugins.rate-limit]`):
//! * `LIMIT` — calls per window (default 30);
//! * `WINDOW_SECONDS` — the window (default 60);
//! * `TOOLS` — comma-separated tool names to limit (default: every tool).

use serde::{Deserialize, Serialize};
use toolgate_sdk::{Call, Guard, kv, setting};

/// A tool's bucket, as stored in `kv` under `bucket/<tool>`.
#[derive(Serialize, Deserialize)]
struct Bucket {
    /// Calls that may still be made now.
    tokens: f64,
    /// When `tokens` was computed (milliseconds since the Unix epoch).
    at_ms: u64,
}

struct Config {
    limit: f64,
    window_ms: f64,
    tools: Vec<String>,
}

fn config() -> Config {
    let number = |name: &str, default: f64| {
        setting(name, "")
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v > 0.0)
            .unwrap_or(default)
    };
    Config {
        limit: number("LIMIT", 30.0).floor().max(1.0),
        window_ms: number("WINDOW_SECONDS", 60.0) * 1000.0,
        tools: setting("TOOLS", "")
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(String::from)
            .collect(),
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Take one token from `bucket` at `now`; `Err(wait_ms)` when it is empty.
fn take(bucket: &mut Bucket, now: u64, c: &Config) -> Result<(), u64> {
    let rate = c.limit / c.window_ms; // tokens per millisecond
    let elapsed = now.saturating_sub(bucket.at_ms) as f64;
    bucket.tokens = (bucket.tokens + elapsed * rate).min(c.limit);
    bucket.at_ms = now;
    if bucket.tokens >= 1.0 {
        bucket.tokens -= 1.0;
        Ok(())
    } else {
        Err(((1.0 - bucket.tokens) / rate).ceil() as u64)
    }
}

struct RateLimit;

impl Guard for RateLimit {
    fn check(call: &Call) -> Option<String> {
        let c = config();
        let tool = call.tool();
        if !c.tools.is_empty() && !c.tools.iter().any(|t| t == tool) {
            return None;
        }
        let key = format!("bucket/{tool}");
        let now = now_ms();
        let mut bucket = kv::get_json::<Bucket>(&key).unwrap_or(Bucket {
            tokens: c.limit,
            at_ms: now,
        });
        let verdict = take(&mut bucket, now, &c);
        // Fail closed: a bucket that cannot be stored does not count calls.
        if let Err(e) = kv::set_json(&key, &bucket) {
            return Some(format!("rate-limit: cannot record the call ({e})"));
        }
        verdict.err().map(|wait| {
            format!(
                "rate-limit: `{tool}` may be called {} times per {} s; try again in {:.1} s",
                c.limit,
                c.window_ms / 1000.0,
                wait as f64 / 1000.0
            )
        })
    }
}

toolgate_sdk::export! { guard: RateLimit }

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_refill_rate() {
        let c = Config {
            limit: 3.0,
            window_ms: 3000.0,
            tools: Vec::new(),
        };
        let mut b = Bucket {
            tokens: 3.0,
            at_ms: 0,
        };
        assert!(take(&mut b, 0, &c).is_ok());
        assert!(take(&mut b, 0, &c).is_ok());
        assert!(take(&mut b, 0, &c).is_ok());
        assert_eq!(take(&mut b, 0, &c), Err(1000));
        assert_eq!(take(&mut b, 500, &c), Err(500));
        assert!(take(&mut b, 1000, &c).is_ok());
    }
}
