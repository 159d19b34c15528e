//! What `toolgate plugins` (and [`crate::Toolgate::plugin_status`]) shows of
//! every plugin of every layer: which version serves, since which
//! generation, its digest, whether its last update was refused and why,
//! what loading it cost and what keeping it costs.

use std::sync::Arc;

use serde::Serialize;

use crate::plugin::ComponentPlugin;

/// Where a plugin is in its lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PluginState {
    /// A version of it serves calls (perhaps an older one, when its latest
    /// update was refused: see [`PluginStatus::refused`]).
    Serving,
    /// No version of it serves: it did not load (see
    /// [`PluginStatus::refused`]).
    Refused,
    /// A reload is reading, compiling or checking it right now.
    Loading,
}

/// What a plugin costs: to load, and to keep.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    /// Size of the component file.
    pub component_bytes: u64,
    /// Compile (or cache read), instantiate and `list-tools`, in µs; 0 for
    /// a version kept from an earlier generation without reading it again.
    pub load_us: u64,
    /// Warm instances it holds now (each up to `memory_mb` of linear memory).
    pub idle_instances: usize,
    /// The linear-memory cap of one of its instances, in MiB.
    pub memory_mb: usize,
}

/// One plugin of one layer.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginStatus {
    /// The layer: `""` for the global one, else the configured scope.
    pub scope: String,
    pub name: String,
    /// `built-in` or the file's path.
    pub origin: String,
    pub state: PluginState,
    /// The generation whose reload loaded the version that serves.
    pub generation: Option<u64>,
    /// SHA-256 of the version that serves (hex).
    pub sha256: Option<String>,
    /// Who signed the version that serves (an OCI source whose signature a
    /// `[trust]` key verified): the key's `sha256:` fingerprint, its file
    /// and algorithm.
    pub signer: Option<String>,
    /// Why its latest update (or, when nothing serves, the plugin) was
    /// refused; `None` when the file on disk is the version that serves.
    pub refused: Option<String>,
    /// SHA-256 of the refused file, when there was one to read.
    pub refused_sha256: Option<String>,
    pub cost: Cost,
    /// The version that serves.
    #[serde(skip)]
    pub plugin: Option<Arc<ComponentPlugin>>,
}
