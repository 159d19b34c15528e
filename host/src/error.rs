//! Host-level errors: the ones that stop the host (or a command), as
//! opposed to a call's result or a single plugin's load problem.

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
    /// The audit record could not be opened (a `crate::audit::AuditError`;
    /// boxed so that this module names nothing of the audit).
    #[error(transparent)]
    Audit(Box<dyn std::error::Error + Send + Sync + 'static>),
    /// The approval queue's store could not be opened.
    #[error("{0} (`[approval] store`; or run without --approve queue)")]
    Approvals(#[from] crate::approval::store::StoreError),
    /// `[approval] webhook` cannot be set up.
    #[error(transparent)]
    ApprovalWebhook(#[from] crate::approval::webhook::WebhookError),
    /// The state store (`[state]`) could not be opened.
    #[error(transparent)]
    Store(#[from] crate::store::OpenError),
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

/// A guest called a host function where the contract does not allow it
/// (a chain's `next` outside its hook, a handle outside its call), or a
/// seam it was not granted: the call traps with this message.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Misuse(pub String);
