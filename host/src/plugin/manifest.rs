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
use toolgate_schema::derive::Schema;

use super::component::InstanceMode;
use crate::config::{ConfigError, parse_checked};
use crate::policy::Role;

/// The priority of a policy nobody placed.
pub const DEFAULT_PRIORITY: i32 = 100;

/// `NAME.toml`.
#[derive(Clone, Debug, Default, Deserialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct Manifest {
    /// What the plugin is, for people.
    pub description: Option<String>,
    /// Its place in every chain of its roles (lower = outer/first).
    pub priority: Option<i32>,
    /// Its place per role.
    #[serde(default)]
    #[schema(with = "crate::policy::RolePriorities")]
    pub priorities: BTreeMap<String, i32>,
    /// `pooled` (default) or `fresh`: a new instance per call.
    pub instances: Option<InstanceMode>,
}

impl Manifest {
    pub fn parse(text: &str, origin: &str) -> Result<Manifest, ConfigError> {
        parse_checked(text, origin)
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
