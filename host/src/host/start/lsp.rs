//! `[lsp]`: the language servers of the `lsp` seam. Nothing starts here:
//! a server starts at the first question about a file it serves, launched
//! as a stdio MCP server is ([`crate::bridge::launch`]: the same grant
//! resolution, the same authority kept out of its reach), with the grant
//! of a language server — its project read-only, its cache read-write, no
//! network.

use std::sync::Arc;

use super::{Feature, StartContext, Wiring};
use crate::bridge::config::{McpGrantsConfig, McpServerConfig, ServerFsGrant};
use crate::bridge::launch;
use crate::config::path::{GrantDir, Program, WorkDir};
use crate::error::HostError;
use crate::grants::{FsAccess, SpawnLimitsConfig};
use crate::lifecycle::Lifecycle;
use crate::lsp::{Launch, LaunchAsk, LaunchContext, LspService};

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
        let workdir = start.workdir.to_path_buf();
        let enforcement = config.enforcement()?;
        let authority = lifecycle.authority(config);
        let origin = config.origin();
        let egress = Arc::new(config.egress_global()?);
        let home = workdir.clone();
        let launcher = move |ask: &LaunchAsk<'_>| -> Result<Launch, String> {
            let server = McpServerConfig {
                command: Some(Program::from(ask.command)),
                args: ask.args.to_vec(),
                env: ask.env.clone(),
                cwd: Some(WorkDir::from(ask.root.to_path_buf())),
                grants: Some(McpGrantsConfig {
                    fs: vec![
                        ServerFsGrant {
                            path: GrantDir::from(ask.root.to_path_buf()),
                            access: FsAccess::ReadOnly,
                        },
                        ServerFsGrant {
                            path: GrantDir::from(ask.cache.to_path_buf()),
                            access: FsAccess::ReadWrite,
                        },
                    ],
                    limits: SpawnLimitsConfig {
                        cpu_seconds: Some(ask.cpu_seconds),
                        ..Default::default()
                    },
                    ..Default::default()
                }),
                ..Default::default()
            };
            let l = launch::resolve(
                &ask.who,
                &server,
                &home,
                &enforcement,
                &authority,
                &origin,
                launch::Egress {
                    global: &egress,
                    record: None,
                    ask: None,
                },
            )
            // The launch's advice names an MCP server's table, which a
            // language server does not have.
            .map_err(|e| {
                e.replace(
                    &format!("grant what it needs in [mcp.servers.{}.grants] fs and set `auto_grant = false`", ask.who),
                    "install it in a directory of its own (not a home directory) and name it by its path in `command`",
                )
            })?;
            Ok(Launch {
                program: l.program,
                cwd: l.cwd,
                env: l.env,
                policy: l.policy,
            })
        };
        let service = LspService::new(
            &config.lsp,
            LaunchContext {
                workdir,
                launcher: Box::new(launcher),
            },
        );
        let _ = lifecycle.seams().lsp.set(Arc::new(service));
        Ok(())
    }
}
