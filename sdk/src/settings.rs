//! The plugin's settings: the `vars` of its `[plugins.NAME]` table in the
//! operator's config, which the host passes as environment variables (they
//! carry no authority). Read once per instance, as a policy reads its
//! configuration.

use std::collections::HashMap;
use std::sync::OnceLock;

/// The setting `name`, or `default` when the operator did not set it.
pub fn setting(name: &str, default: &str) -> String {
    static VARS: OnceLock<HashMap<String, String>> = OnceLock::new();
    VARS.get_or_init(|| std::env::vars().collect())
        .get(name)
        .cloned()
        .unwrap_or_else(|| default.to_string())
}
