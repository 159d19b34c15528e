//! A plugin's own manifest: `NAME.toml` beside `NAME.wasm`.
//!
//! It says how the plugin would like to be placed (priority per role) and
//! run (pooled or fresh instances). It never grants anything: grants are
//! the operator's (see [`crate::config`]), and the operator's configuration
//! overrides the manifest.
//!
//! ```toml
//! description = "Denies reads of secrets"
//! priority = 10                 # every role of this plugin
//! priorities = { guard = 5 }    # per role
//! instances = "fresh"           # default "pooled"
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::json;

use super::component::InstanceMode;
use crate::config::{ConfigError, parse_checked};
use crate::policy::Role;

/// The priority of a policy nobody placed.
pub const DEFAULT_PRIORITY: i32 = 100;

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub description: Option<String>,
    pub priority: Option<i32>,
    #[serde(default)]
    pub priorities: BTreeMap<String, i32>,
    pub instances: Option<InstanceMode>,
}

impl Manifest {
    pub fn parse(text: &str, origin: &str) -> Result<Manifest, ConfigError> {
        let schema = json!({
            "type": "object",
            "properties": {
                "description": {"type": "string"},
                "priority": {"type": "integer"},
                "priorities": {
                    "type": "object",
                    "properties": {
                        "pre-execute": {"type": "integer"}, "execute-around": {"type": "integer"},
                        "post-execute": {"type": "integer"}, "guard": {"type": "integer"},
                        "finalizer": {"type": "integer"}, "observer": {"type": "integer"}
                    },
                    "additionalProperties": false
                },
                "instances": {"enum": ["pooled", "fresh"]}
            },
            "additionalProperties": false
        });
        parse_checked(text, origin, &schema)
    }

    /// The priority of `role`: per-role, else plugin-wide, else default.
    pub fn priority(&self, role: Role) -> Option<i32> {
        self.priorities
            .get(role.as_str())
            .copied()
            .or(self.priority)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities() {
        let m = Manifest::parse("priority = 7\npriorities = { guard = 3 }", "m.toml").unwrap();
        assert_eq!(m.priority(Role::Guard), Some(3));
        assert_eq!(m.priority(Role::PreExecute), Some(7));
        let e = Manifest::parse("priorities = { gaurd = 3 }", "m.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("/priorities/gaurd"), "{e}");
    }
}
