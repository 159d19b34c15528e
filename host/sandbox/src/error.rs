//! Why a spawn did not happen.

use std::io;

use crate::policy::Feature;

/// Why a sandboxed spawn was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The kernel cannot enforce part of the policy, and the policy's
    /// [`crate::Enforcement`] does not allow running without it.
    #[error(
        "refusing to spawn: the sandbox cannot enforce {what} (feature `{feature}`): it needs \
         {needs}, but this kernel has {have}. Upgrade the kernel or enable the feature, or let \
         this policy run without it (Enforcement::BestEffort, or Enforcement::Waive with \
         `{feature}`)"
    )]
    Unenforceable {
        /// The missing protection.
        feature: Feature,
        /// What it protects, in words.
        what: String,
        /// What the kernel would need.
        needs: String,
        /// What the kernel has.
        have: String,
    },
    /// The request itself is wrong (a relative path, a grant that does not
    /// exist, a working directory outside the grants…).
    #[error("invalid sandboxed spawn request: {0}")]
    InvalidRequest(String),
    /// The program does not exist in the sandbox's view.
    #[error("program `{program}` not found in the sandbox's view: {detail}")]
    NotFound {
        /// The program as requested.
        program: String,
        /// Where we looked and what to grant.
        detail: String,
    },
    /// A setup step in the child failed (between fork and exec).
    #[error("sandbox setup failed in the child while {step}: {source}")]
    Setup {
        /// The step, in words.
        step: &'static str,
        /// The errno it failed with.
        #[source]
        source: io::Error,
    },
    /// An I/O error in the host while preparing, running or reaping the child.
    #[error("{context}: {source}")]
    Io {
        /// What the host was doing.
        context: String,
        /// The error.
        #[source]
        source: io::Error,
    },
}

impl SpawnError {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        SpawnError::Io {
            context: context.into(),
            source,
        }
    }
}
