//! `[plugins.NAME]` and `[tools.NAME]` in the configuration: how a plugin
//! is loaded, placed and granted, and per-tool settings.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use toolgate_schema::derive::Schema;

use super::component::InstanceMode;
use crate::grants::GrantsConfig;
#[cfg(feature = "oci")]
use crate::oci::trust::TrustRule;
/// A plugin's `trust` in a build without the cargo feature `oci`.
#[cfg(not(feature = "oci"))]
type TrustRule = crate::config::NotBuilt;

/// Per-plugin settings.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct PluginConfig {
    /// `false`: not loaded.
    pub enabled: Option<bool>,
    /// The host may run without this plugin when it fails to load (by
    /// default a plugin that fails to load stops the host from running
    /// calls: it might be a policy).
    #[serde(default)]
    pub optional: bool,
    /// The plugin file's expected SHA-256 (hex); a file whose digest
    /// differs is refused.
    pub sha256: Option<String>,
    /// `oci://REGISTRY/REPOSITORY:TAG` (or `@sha256:…`): the plugin is the
    /// component of that OCI artifact, from the local store (pulled there
    /// at the first start, or by `toolgate pull`), not a file of a plugin
    /// directory. Global `[plugins.NAME]` only.
    pub source: Option<String>,
    /// The trust rule of an OCI source (see [`crate::oci::trust`]):
    /// `trust = { keys = [...], require_signature = true }`.
    pub trust: Option<TrustRule>,
    /// Its place in every chain of its roles (lower = outer/first).
    pub priority: Option<i32>,
    /// Its place per role: `{ guard = 10 }`.
    #[serde(default)]
    #[schema(with = "crate::policy::RolePriorities")]
    pub priorities: BTreeMap<String, i32>,
    /// `pooled` (default) or `fresh`: a new instance per call.
    pub instances: Option<InstanceMode>,
    /// What the plugin may touch (none by default).
    pub grants: Option<GrantsConfig>,
    /// Settings for the plugin, visible to it as environment variables.
    /// They carry no authority (unlike `grants.env`, which passes the host's
    /// own variables through).
    #[serde(default)]
    pub vars: BTreeMap<String, String>,
}

impl PluginConfig {
    /// The problems of one `[plugins.NAME]` table (`at` is its path).
    pub fn check(&self, at: &str, problems: &mut Vec<String>) {
        if let Some(d) = &self.sha256
            && (d.len() != 64 || !d.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            problems.push(format!(
                "{at}/sha256: expected 64 hexadecimal digits (`sha256sum FILE`), got {d:?}"
            ));
        }
        if self.trust.is_some() && self.source.is_none() {
            problems.push(format!(
                "{at}/trust: a trust rule applies to a plugin from an OCI registry (`source = \"oci://…\"`); a plugin file is pinned by `sha256`"
            ));
        }
        #[cfg(feature = "oci")]
        if let Some(source) = &self.source
            && let Err(e) = crate::oci::OciRef::parse(source)
        {
            problems.push(format!("{at}/source: {e}"));
        }
        #[cfg(not(feature = "oci"))]
        if self.source.is_some() {
            problems.push(format!(
                "{at}/source: this toolgate was built without the cargo feature `oci`, so it cannot load plugins from OCI registries; rebuild it with `--features oci`"
            ));
        }
        if let Some(g) = &self.grants {
            g.check(&format!("{at}/grants"), problems);
        }
    }
}

/// Per-tool settings (`[tools.NAME]`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct ToolConfig {
    /// The tool's deadline in ms; overrides its own `timeout-ms`.
    pub timeout_ms: Option<u32>,
}
