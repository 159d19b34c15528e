//! Size limits on untrusted JSON, and the integer contract.
//!
//! They live in one small type so that the host can read them from its
//! configuration and hand the same values to every entry point.

/// The largest integer every JSON client carries exactly: 2^53 − 1.
///
/// JavaScript (and so most MCP clients) reads JSON numbers as IEEE-754
/// doubles; beyond this bound two different integers can read as the same
/// number. The snapshot refuses integers outside ±`MAX_SAFE_INTEGER` rather
/// than let a tool and its caller disagree about an ID.
pub const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// Limits applied to untrusted JSON (arguments and tool values).
///
/// ```
/// let limits = toolgate_schema::Limits { max_depth: 16, ..Default::default() };
/// assert_eq!(limits.max_bytes, 1 << 20);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Deepest nesting of arrays and objects: `{}` and `[]` are depth 1,
    /// `{"a": [1]}` is depth 2, a scalar is depth 0. Default 64.
    ///
    /// Our readers never recurse, but `serde_json::Value`'s drop, clone and
    /// serialization do: keep this in the hundreds at most.
    pub max_depth: usize,
    /// Largest JSON text, in bytes. For an in-memory value
    /// ([`check_value`](crate::check_value)) this is the length of its
    /// compact serialization. Default 1 MiB.
    pub max_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 64,
            max_bytes: 1 << 20,
        }
    }
}
