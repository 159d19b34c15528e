//! `[mcp.servers]`: the bridge to external MCP servers. Attached once the
//! lifecycle exists: its processes are confined like any spawn, away from
//! everything the host reads as authority, and its connections go through
//! the same egress record. The servers connect in the background once the
//! host answers (each listing brings a new generation).

use std::sync::Arc;

use futures::future::BoxFuture;

use super::{Feature, StartContext, Wiring};
use crate::Toolgate;
use crate::bridge::{Bridge, Context};
use crate::error::HostError;
use crate::lifecycle::Lifecycle;

/// See the module docs.
pub(crate) struct McpBridge;

impl Feature for McpBridge {
    fn attach(
        &self,
        start: &StartContext<'_>,
        wiring: &Wiring,
        lifecycle: &Lifecycle,
    ) -> Result<(), HostError> {
        let config = start.config;
        let tool_timeouts = config
            .tools
            .iter()
            .filter_map(|(name, t)| t.timeout_ms.map(|ms| (name.clone(), ms)))
            .collect();
        let bridge = Bridge::new(
            &config.mcp,
            Context {
                workdir: start.workdir.to_path_buf(),
                pins: lifecycle.seams().kv.backend().clone(),
                enforcement: config.enforcement()?,
                authority: lifecycle.authority(config),
                budgets: start.budgets,
                tool_timeouts,
                origin: config.origin(),
                egress: Arc::new(config.egress_global()?),
                egress_record: lifecycle.seams().egress_record.clone(),
                events: lifecycle.seams().host_events.clone(),
                approver: wiring.approver.clone(),
                approval_timeout: config.approval.timeout(),
            },
        );
        lifecycle.set_bridge(bridge);
        Ok(())
    }

    fn started<'a>(&'a self, _wiring: &'a Wiring, host: &'a Toolgate) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            // The host is held weakly: the bridge stops with it.
            let weak = host.downgrade();
            if let Some(bridge) = host.bridge() {
                bridge.start(Arc::new(move || {
                    if let Some(host) = weak.upgrade() {
                        host.publish_bridged();
                    }
                }));
            }
        })
    }
}
