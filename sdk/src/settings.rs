//! The plugin's settings: the `vars` of its `[plugins.NAME]` table in the
//! operator's config, which the host passes as environment variables (they
//! carry no authority). Read once per instance, as a policy reads its
//! configuration; after that a lookup is a scan of a few entries, with no
//! allocation (a policy runs on every call).

use std::sync::OnceLock;

/// The setting `name`, or `default` when the operator did not set it.
pub fn setting(name: &str, default: &'static str) -> &'static str {
    static VARS: OnceLock<Vec<(&'static str, &'static str)>> = OnceLock::new();
    VARS.get_or_init(|| {
        // The environment is fixed for the instance's life: keep it for good.
        std::env::vars()
            .map(|(k, v)| {
                let k: &'static str = Box::leak(k.into_boxed_str());
                let v: &'static str = Box::leak(v.into_boxed_str());
                (k, v)
            })
            .collect()
    })
    .iter()
    .find(|(k, _)| *k == name)
    .map(|(_, v)| *v)
    .unwrap_or(default)
}
