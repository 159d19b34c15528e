//! [`Violation`]: one way the arguments fail their schema — what the
//! validator reports and what a snapshot error becomes (both name it; it
//! names neither).

use std::fmt;

use serde::{Deserialize, Serialize};

/// One way the arguments fail their schema.
///
/// ```
/// # use toolgate_schema::Violation;
/// let v = Violation { path: "/limit".into(), expected: "integer".into(), got: "string \"ten\"".into() };
/// assert_eq!(v.to_string(), "/limit: expected integer, got string \"ten\"");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Violation {
    /// JSON pointer to the offending value (`""` is the arguments object).
    pub path: String,
    /// What the schema wants there.
    pub expected: String,
    /// What the call sent, shortened.
    pub got: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() {
            "(arguments)"
        } else {
            &self.path
        };
        write!(f, "{path}: expected {}, got {}", self.expected, self.got)
    }
}

/// One line for a log or an error text: `"/a: expected …; /b: expected …"`.
pub fn summarize(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(Violation::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
