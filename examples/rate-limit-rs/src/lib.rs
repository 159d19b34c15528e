//! A guard that limits how often each tool may be called: at most `LIMIT`
//! calls per `WINDOW_SECONDS`, per tool, per agent scope and per caller, in
//! fixed windows (aligned to the Unix epoch: with 60 s, each minute of the
//! clock).
//!
//! Per caller: under `serve --http` with `[auth]` each call carries the
//! subject its access token names (`call.caller()`, contract 0.2.6), and
//! each subject has its own counters — one user's burst does not spend
//! another's — shared by every replica on one store. A call without a
//! caller (stdio, `run`, the static token) counts as the caller `-`.
//!
//! Where the counters live: in the host's `kv` seam, not in the instance's
//! memory. The host keeps several warm instances of a plugin (parallel
//! calls each lease one), drops an instance that trapped or timed out, and
//! makes a new one per call in `instances = "fresh"` mode; counters in a
//! `static` would be split across instances and lost with them, so the
//! limit would be N times too loose and reset at random. `kv` is one store
//! per plugin and agent scope that outlives instances, reloads and
//! restarts, and with `[state] url` it is shared by every replica of the
//! host. It is synchronous: the guard still runs on the host's fast path.
//! The cost is a grant: the operator adds `kv = true` under
//! `[plugins.rate-limit.grants]`.
//!
//! Why `increment` (contract 0.2.3) and not `get` then `set`: two calls at
//! once — two instances, or two replicas behind a load balancer — would
//! both read the same count, both write count + 1, and one call would go
//! uncounted (the old token bucket here could be beaten that way). One
//! atomic `increment` per call makes the count exact: with `LIMIT` 100,
//! the 100th call of a window is allowed and the 101st denied, however
//! the calls are spread. The price of one store operation per call is a
//! fixed window: a client may use its `LIMIT` at the end of one window and
//! again at the start of the next.
//!
//! Fails closed: when the host cannot reach its store, the call cannot be
//! counted and is denied, saying so.
//!
//! Settings (`vars` of `[plugins.rate-limit]`):
//! * `LIMIT` — calls per window (default 30);
//! * `WINDOW_SECONDS` — the window (default 60);
//! * `TOOLS` — comma-separated tool names to limit (default: every tool).

use toolgate_sdk::{Call, Guard, kv, setting};

struct Config {
    limit: i64,
    window_ms: u64,
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
        limit: number("LIMIT", 30.0).floor().max(1.0) as i64,
        window_ms: ((number("WINDOW_SECONDS", 60.0) * 1000.0) as u64).max(1),
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

/// The window `now` falls in, and the milliseconds left in it.
fn window(now: u64, c: &Config) -> (u64, u64) {
    (now / c.window_ms, c.window_ms - now % c.window_ms)
}

/// The counter of `caller`'s calls of `tool` in window `w`: `/` in the
/// subject is escaped, so no subject can name another's counters.
fn key(caller: &str, tool: &str, w: u64) -> String {
    format!("{}{w}", prefix(caller, tool))
}

/// What every window's counter of `caller` and `tool` starts with.
fn prefix(caller: &str, tool: &str) -> String {
    let caller = caller.replace('%', "%25").replace('/', "%2F");
    format!("count/{caller}/{tool}/")
}

/// The verdict for the `n`th call of a window: `None` allows.
fn verdict(n: i64, tool: &str, left_ms: u64, c: &Config) -> Option<String> {
    (n > c.limit).then(|| {
        format!(
            "rate-limit: `{tool}` may be called {} times per {} s; try again in {:.1} s",
            c.limit,
            c.window_ms as f64 / 1000.0,
            left_ms as f64 / 1000.0
        )
    })
}

struct RateLimit;

impl Guard for RateLimit {
    fn check(call: &Call) -> Option<String> {
        let c = config();
        let tool = call.tool();
        if !c.tools.is_empty() && !c.tools.iter().any(|t| t == tool) {
            return None;
        }
        let caller = call
            .caller()
            .map(|c| c.subject)
            .unwrap_or_else(|| "-".into());
        // A key is at most 256 bytes: a subject too long to count by is
        // refused (fail closed), not cut (which could merge two callers).
        if caller.len() > 128 {
            return Some("rate-limit: the caller's subject is too long to count by".into());
        }
        let (w, left) = window(now_ms(), &c);
        let n = match kv::increment(&key(&caller, tool, w), 1) {
            Ok(n) => n,
            // Fail closed: a call that cannot be counted could exceed the
            // limit.
            Err(e) => {
                return Some(format!(
                    "rate-limit: cannot count the call, so it is denied ({e})"
                ));
            }
        };
        if n == 1 {
            // The first call of a window drops the counters of the earlier
            // ones (they count against the plugin's quota). Best effort:
            // another replica may do the same at once.
            let current = key(&caller, tool, w);
            for old in kv::keys(&prefix(&caller, tool)) {
                if old != current {
                    kv::delete(&old);
                }
            }
        }
        verdict(n, tool, left, &c)
    }
}

toolgate_sdk::export! { guard: RateLimit }

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_limit_calls_per_fixed_window() {
        let c = Config {
            limit: 3,
            window_ms: 60_000,
            tools: Vec::new(),
        };
        assert_eq!(window(120_000, &c), (2, 60_000));
        assert_eq!(window(179_999, &c), (2, 1));
        for n in 1..=3 {
            assert_eq!(verdict(n, "t", 1000, &c), None);
        }
        assert_eq!(
            verdict(4, "t", 1500, &c).as_deref(),
            Some("rate-limit: `t` may be called 3 times per 60 s; try again in 1.5 s")
        );
        assert_ne!(key("a", "t", 1), key("a", "t", 2));
        assert_ne!(key("a", "t", 1), key("b", "t", 1));
        // A subject cannot reach into another's counters.
        assert_ne!(prefix("a/t", "x"), prefix("a", "t/x"));
    }
}
