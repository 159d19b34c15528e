//! Host-level errors: the ones that stop the host (or a command), as
//! opposed to a call's result or a single plugin's load problem.
//!
//! A leaf: it names no feature. A feature whose start can fail (the audit
//! record, the approval queue and its webhook, the state store) converts
//! its own error into [`HostError::Feature`] where it is defined, keeping
//! it whole as the `source`.

use std::path::PathBuf;

use crate::config::ConfigError;

/// Why the host (or a command) cannot go on.
///
/// Where a variant keeps the error it was made from as its `source()`,
/// its message does not repeat it: the command line prints the whole chain
/// (`{:#}`), once.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// wasmtime refused the engine's configuration, or the linker could
    /// not be built.
    #[error("the WebAssembly engine could not be set up")]
    Engine(#[source] wasmtime::Error),
    #[error("plugin directory {path}: {message}")]
    PluginDir { path: PathBuf, message: String },
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    State(#[from] crate::state::StateError),
    #[error(transparent)]
    ReplicaId(#[from] crate::state::ReplicaIdError),
    /// A feature could not start: the audit record, the approval queue
    /// or its webhook, the state store. Its own error (which names the key
    /// to fix), boxed so that this module names no feature.
    #[error(transparent)]
    Feature(Box<dyn std::error::Error + Send + Sync + 'static>),
    #[error("the configuration is not obeyed: {0}")]
    Authority(#[from] crate::state::AuthorityError),
    #[error("tool `{tool}`: {message}")]
    Tool { tool: String, message: String },
    #[error("grant for plugin `{plugin}`: {message}")]
    Grant { plugin: String, message: String },
    #[error(
        "cannot watch the plugin directories and the configuration (run without watching, e.g. `toolgate serve --no-watch`, and reload by restarting)"
    )]
    Watch(#[source] notify::Error),
}
