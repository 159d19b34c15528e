//! `[lsp]`: the language servers of the `lsp` seam. Nothing starts here:
//! a server starts at the first question about a file it serves, confined
//! like a stdio MCP server (the same authority kept out of its reach).

use std::sync::Arc;

use super::{Feature, StartContext, Wiring};
use crate::error::HostError;
use crate::lifecycle::Lifecycle;
use crate::lsp::{LaunchContext, LspService};

/// See the module docs.
pub(crate) struct LanguageServers;

impl Feature for LanguageServers {
    fn attach(
        &self,
        start: &StartContext<'_>,
        _wiring: &Wiring,
        lifecycle: &Lifecycle,
    ) -> Result<(), HostError> {
        let config = start.config;
        let service = LspService::new(
            &config.lsp,
            LaunchContext {
                workdir: start.workdir.to_path_buf(),
                enforcement: config.enforcement()?,
                authority: lifecycle.authority(config),
                origin: config.origin(),
                egress: Arc::new(config.egress_global()?),
            },
        );
        let _ = lifecycle.seams().lsp.set(Arc::new(service));
        Ok(())
    }
}
