//! Grants: "approve this call and every later one like it", bounded.
//!
//! A grant names the tool exactly and may narrow further: one top-level
//! argument whose string value matches a glob (bash's `command` against
//! `cargo test*`), the agent scope, the client (its `clientInfo` name or
//! its session). It lasts for a time, a number of calls, or both —
//! never open-ended. A grant only answers the approval: the guards run
//! after it as after any approval, so a grant cannot let through what a
//! guard denies.
//!
//! An *egress grant* (`destination`, and optionally `port`) answers the
//! approvals `[egress] ask = true` makes for connections no egress rule
//! allows: a glob over the destination's name (`*.example.org`) instead
//! of an argument, narrowed by tool (`*`: any), scope and client like the
//! others, and bounded the same way (its count counts calls: a call asks
//! once per destination). It never answers a call's own `ask`, and a tool
//! grant never answers an egress approval. It is asked only after the
//! egress rules: it cannot open what `[egress] deny` refuses, nor a
//! private address `[egress] allow_private` does not name.
//!
//! A glob over a shell command matches the *text*: `cargo test*` also
//! matches `cargo test; rm -rf ~`. Grant narrowly, with a count or a short
//! time, and keep the guards that judge what a command does.

use globset::GlobBuilder;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::store::Grant;
use crate::budgets::{APPROVAL_MAX_GRANT_MS, APPROVAL_MAX_PATTERN_BYTES};

/// What a person asks for when granting (the API's and the CLI's `grant`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrantSpec {
    /// The tool (default: the tool of the call being approved).
    #[serde(default)]
    pub tool: Option<String>,
    /// A top-level argument whose value must match `pattern`.
    #[serde(default)]
    pub argument: Option<String>,
    #[serde(default)]
    pub pattern: Option<String>,
    #[serde(default)]
    pub scope: Option<String>,
    #[serde(default)]
    pub client: Option<String>,
    /// How long it lasts, in milliseconds.
    #[serde(default)]
    pub duration_ms: Option<u64>,
    /// How many calls it approves.
    #[serde(default)]
    pub count: Option<u64>,
    /// An egress grant: a glob over the destination's name.
    #[serde(default)]
    pub destination: Option<String>,
    /// An egress grant's port (none: any).
    #[serde(default)]
    pub port: Option<u16>,
}

/// A grant that cannot be made as asked.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GrantError {
    #[error("a grant needs a tool")]
    NoTool,
    #[error(
        "a grant needs a duration (duration_ms) or a count, or both: grants are never open-ended"
    )]
    Unbounded,
    #[error("`argument` and `pattern` go together: name the argument the pattern matches")]
    HalfPattern,
    #[error("the pattern `{pattern}` is not a glob: {message}")]
    BadPattern { pattern: String, message: String },
    #[error("{what} is longer than {APPROVAL_MAX_PATTERN_BYTES} bytes")]
    TooLong { what: &'static str },
    #[error("a grant lasts at most {APPROVAL_MAX_GRANT_MS} ms; ask for less")]
    TooLongLived,
    #[error("a count of 0 approves nothing")]
    ZeroCount,
    #[error("a port belongs to an egress grant: name its destination too")]
    PortWithoutDestination,
    #[error("an egress grant's destination and port must be a name glob and 1–65535")]
    BadDestination,
}

/// The tool of an egress grant that holds for any tool.
pub const ANY_TOOL: &str = "*";

impl GrantSpec {
    /// Checks the spec and makes the grant (`tool`: the default tool).
    pub fn grant(
        &self,
        id: String,
        default_tool: Option<&str>,
        by: &str,
        now_ms: u64,
    ) -> Result<Grant, GrantError> {
        let egress = self.destination.is_some();
        let tool = self
            .tool
            .clone()
            .or(default_tool.map(str::to_string))
            .or(egress.then(|| ANY_TOOL.to_string()))
            .filter(|t| !t.is_empty())
            .ok_or(GrantError::NoTool)?;
        if self.port.is_some() && !egress {
            return Err(GrantError::PortWithoutDestination);
        }
        if self.port == Some(0)
            || self
                .destination
                .as_ref()
                .is_some_and(|d| d.trim().is_empty() || d.contains(['/', ':', ' ']))
        {
            return Err(GrantError::BadDestination);
        }
        if self.duration_ms.is_none() && self.count.is_none() {
            return Err(GrantError::Unbounded);
        }
        if self.count == Some(0) {
            return Err(GrantError::ZeroCount);
        }
        if self.duration_ms.is_some_and(|d| d > APPROVAL_MAX_GRANT_MS) {
            return Err(GrantError::TooLongLived);
        }
        if self.argument.is_some() != self.pattern.is_some() {
            return Err(GrantError::HalfPattern);
        }
        for (what, value) in [
            ("the tool", Some(&tool)),
            ("the argument", self.argument.as_ref()),
            ("the pattern", self.pattern.as_ref()),
            ("the scope", self.scope.as_ref()),
            ("the client", self.client.as_ref()),
            ("the destination", self.destination.as_ref()),
        ] {
            if value.is_some_and(|v| v.len() > APPROVAL_MAX_PATTERN_BYTES) {
                return Err(GrantError::TooLong { what });
            }
        }
        if let Some(p) = &self.pattern {
            compile(p)?;
        }
        let destination = self
            .destination
            .as_ref()
            .map(|d| d.trim().trim_end_matches('.').to_ascii_lowercase());
        if let Some(d) = &destination {
            compile(d)?;
        }
        Ok(Grant {
            id,
            tool,
            argument: self.argument.clone(),
            pattern: self.pattern.clone(),
            scope: self.scope.clone(),
            client: self.client.clone(),
            created_ms: now_ms,
            created_by: by.to_string(),
            expires_ms: self.duration_ms.map(|d| now_ms.saturating_add(d)),
            remaining: self.count,
            used: 0,
            revoked: None,
            destination,
            port: self.port,
        })
    }
}

fn compile(pattern: &str) -> Result<globset::GlobMatcher, GrantError> {
    GlobBuilder::new(pattern)
        .literal_separator(false)
        .backslash_escape(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| GrantError::BadPattern {
            pattern: pattern.to_string(),
            message: e.kind().to_string(),
        })
}

/// What a grant is matched against.
pub struct Asked<'a> {
    pub tool: &'a str,
    pub arguments: &'a Value,
    pub scope: &'a str,
    pub client: Option<&'a str>,
    pub session: Option<&'a str>,
}

impl Grant {
    /// Whether this grant covers the call (time and count aside: see
    /// [`Grant::active`]). A pattern that no longer compiles, or an
    /// argument that is absent or not a string, does not match.
    pub fn matches(&self, asked: &Asked<'_>) -> bool {
        self.destination.is_none() && self.tool == asked.tool && self.matches_call(asked)
    }

    /// Whether this egress grant covers a connection of the call `asked`
    /// to `name` (normalised) on `port` (time and count aside). A tool
    /// grant never does.
    pub fn matches_egress(&self, asked: &Asked<'_>, name: &str, port: u16) -> bool {
        let Some(destination) = &self.destination else {
            return false;
        };
        (self.tool == ANY_TOOL || self.tool == asked.tool)
            && self.port.is_none_or(|p| p == port)
            && compile(destination).is_ok_and(|m| m.is_match(name.to_ascii_lowercase()))
            && self.matches_call(asked)
    }

    /// Scope, client and argument pattern (the tool is checked by the
    /// caller).
    fn matches_call(&self, asked: &Asked<'_>) -> bool {
        if let Some(scope) = &self.scope
            && scope != asked.scope
        {
            return false;
        }
        if let Some(client) = &self.client
            && Some(client.as_str()) != asked.client
            && Some(client.as_str()) != asked.session
        {
            return false;
        }
        match (&self.argument, &self.pattern) {
            (None, None) => true,
            (Some(argument), Some(pattern)) => {
                let Some(value) = asked.arguments.get(argument).and_then(Value::as_str) else {
                    return false;
                };
                compile(pattern).is_ok_and(|m| m.is_match(value))
            }
            _ => false,
        }
    }

    /// One line saying what it covers (messages, the audit record).
    pub fn describe(&self) -> String {
        let mut s = match &self.destination {
            Some(d) => {
                let port = self.port.map(|p| format!(":{p}")).unwrap_or_default();
                let tool = if self.tool == ANY_TOOL {
                    "any tool".to_string()
                } else {
                    format!("`{}`", self.tool)
                };
                format!("grant {}: egress to `{d}{port}` for {tool}", self.id)
            }
            None => format!("grant {}: `{}`", self.id, self.tool),
        };
        if let (Some(a), Some(p)) = (&self.argument, &self.pattern) {
            s.push_str(&format!(" with {a} matching `{p}`"));
        }
        if let Some(scope) = &self.scope {
            s.push_str(&format!(" in scope `{scope}`"));
        }
        if let Some(c) = &self.client {
            s.push_str(&format!(" from client `{c}`"));
        }
        s.push_str(&format!(", granted by {}", self.created_by));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(pattern: &str) -> GrantSpec {
        GrantSpec {
            argument: Some("command".into()),
            pattern: Some(pattern.into()),
            count: Some(2),
            ..GrantSpec::default()
        }
    }

    fn asked<'a>(tool: &'a str, args: &'a Value) -> Asked<'a> {
        Asked {
            tool,
            arguments: args,
            scope: "",
            client: Some("agent"),
            session: None,
        }
    }

    #[test]
    fn a_pattern_matches_the_named_argument_only() {
        let g = spec("cargo test*")
            .grant("g1".into(), Some("bash"), "t", 0)
            .unwrap();
        assert!(g.matches(&asked("bash", &json!({"command": "cargo test --all"}))));
        assert!(g.matches(&asked("bash", &json!({"command": "cargo test"}))));
        assert!(!g.matches(&asked("bash", &json!({"command": "cargo build"}))));
        assert!(!g.matches(&asked("bash", &json!({"cmd": "cargo test"}))));
        assert!(!g.matches(&asked("bash", &json!({"command": ["cargo test"]}))));
        assert!(!g.matches(&asked("edit", &json!({"command": "cargo test"}))));
    }

    #[test]
    fn scope_and_client_narrow() {
        let mut s = spec("*");
        s.scope = Some("team/a".into());
        s.client = Some("agent".into());
        let g = s.grant("g".into(), Some("bash"), "t", 0).unwrap();
        let args = json!({"command": "ls"});
        let mut a = asked("bash", &args);
        assert!(!g.matches(&a), "scope differs");
        a.scope = "team/a";
        assert!(g.matches(&a));
        a.client = Some("other");
        assert!(!g.matches(&a), "client differs");
    }

    #[test]
    fn grants_are_bounded_and_checked() {
        let open = GrantSpec::default();
        assert_eq!(
            open.grant("g".into(), Some("bash"), "t", 0),
            Err(GrantError::Unbounded)
        );
        let mut half = spec("x");
        half.argument = None;
        assert_eq!(
            half.grant("g".into(), Some("bash"), "t", 0),
            Err(GrantError::HalfPattern)
        );
        assert!(matches!(
            spec("[").grant("g".into(), Some("bash"), "t", 0),
            Err(GrantError::BadPattern { .. })
        ));
        let mut long = spec("x");
        long.count = None;
        long.duration_ms = Some(APPROVAL_MAX_GRANT_MS + 1);
        assert_eq!(
            long.grant("g".into(), Some("bash"), "t", 0),
            Err(GrantError::TooLongLived)
        );
        assert_eq!(
            spec("x").grant("g".into(), None, "t", 0),
            Err(GrantError::NoTool)
        );
    }

    #[test]
    fn egress_grants_match_destinations_only_and_tool_grants_never_do() {
        let spec = GrantSpec {
            destination: Some("*.Example.org.".into()),
            port: Some(443),
            scope: Some("team".into()),
            count: Some(3),
            ..GrantSpec::default()
        };
        // Made from a bash approval: the tool defaults to bash.
        let g = spec.grant("g".into(), Some("bash"), "t", 0).unwrap();
        assert_eq!(g.destination.as_deref(), Some("*.example.org"));
        let args = json!({"command": "curl"});
        let mut a = asked("bash", &args);
        a.scope = "team";
        assert!(g.matches_egress(&a, "pypi.example.org", 443));
        assert!(g.matches_egress(&a, "A.B.EXAMPLE.ORG", 443));
        assert!(!g.matches_egress(&a, "example.org", 443));
        assert!(!g.matches_egress(&a, "example.org.evil.com", 443));
        assert!(!g.matches_egress(&a, "a.example.org", 80), "port");
        assert!(!g.matches(&a), "never a call's own ask");
        a.scope = "other";
        assert!(!g.matches_egress(&a, "a.example.org", 443), "scope");
        let mut edit = asked("edit", &args);
        edit.scope = "team";
        assert!(!g.matches_egress(&edit, "a.example.org", 443), "tool");
        // Standalone: any tool.
        let any = GrantSpec {
            destination: Some("localhost".into()),
            duration_ms: Some(1000),
            ..GrantSpec::default()
        }
        .grant("g2".into(), None, "t", 0)
        .unwrap();
        assert_eq!(any.tool, ANY_TOOL);
        assert!(any.matches_egress(&asked("web_fetch", &args), "localhost", 8080));
        assert!(
            any.describe()
                .contains("egress to `localhost` for any tool")
        );
        // A tool grant never answers an egress approval.
        let tool = spec_of_tool();
        assert!(!tool.matches_egress(&asked("bash", &args), "localhost", 80));
        // Checked.
        let bad = |destination: &str, port: Option<u16>| {
            GrantSpec {
                destination: Some(destination.into()),
                port,
                count: Some(1),
                ..GrantSpec::default()
            }
            .grant("g".into(), None, "t", 0)
        };
        assert_eq!(bad("", None), Err(GrantError::BadDestination));
        assert_eq!(bad("a.org:443", None), Err(GrantError::BadDestination));
        assert_eq!(bad("a.org", Some(0)), Err(GrantError::BadDestination));
        assert!(matches!(
            bad("[a", None),
            Err(GrantError::BadPattern { .. })
        ));
        let port_only = GrantSpec {
            port: Some(443),
            count: Some(1),
            ..GrantSpec::default()
        };
        assert_eq!(
            port_only.grant("g".into(), Some("bash"), "t", 0),
            Err(GrantError::PortWithoutDestination)
        );
    }

    fn spec_of_tool() -> Grant {
        GrantSpec {
            count: Some(1),
            ..GrantSpec::default()
        }
        .grant("g".into(), Some("bash"), "t", 0)
        .unwrap()
    }

    #[test]
    fn time_and_count_end_a_grant() {
        let mut s = spec("*");
        s.duration_ms = Some(1000);
        let mut g = s.grant("g".into(), Some("bash"), "t", 5000).unwrap();
        assert!(g.active(5999));
        assert!(!g.active(6000));
        g.remaining = Some(0);
        assert!(!g.active(5001));
    }
}
