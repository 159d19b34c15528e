//! `[audit]`: the record. Opened first among what a call touches (a call's
//! intent is recorded before its body runs, see `pipeline::intent`); the
//! egress proxy's connections go into it, and so do the bridge's pins (a
//! changed tool withheld, then accepted); once the host answers, the first
//! generation's plugins and every reload are recorded as events. The
//! `history` seam reads it back (see `crate::history`).

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use tokio::sync::broadcast;

use super::{Feature, StartContext, Wiring};
use crate::Toolgate;
use crate::audit::Audit;
use crate::error::HostError;
use crate::lifecycle::Lifecycle;

/// See the module docs.
pub(crate) struct Record;

impl Feature for Record {
    fn open<'a>(
        &'a self,
        start: &'a StartContext<'a>,
        wiring: &'a mut Wiring,
    ) -> BoxFuture<'a, Result<(), HostError>> {
        Box::pin(async move {
            if start.asked.without_audit {
                return Ok(());
            }
            if let Some(settings) = start.config.audit.resolve(
                start.asked.audit_by_default,
                start.state,
                start.workdir,
            )? {
                wiring.audit = Some(Audit::open(settings, start.replica_id)?);
            }
            Ok(())
        })
    }

    fn attach(
        &self,
        _start: &StartContext<'_>,
        wiring: &Wiring,
        lifecycle: &Lifecycle,
    ) -> Result<(), HostError> {
        if let Some(audit) = &wiring.audit {
            let egress = audit.clone();
            let sink: crate::egress::proxy::RecordSink = std::sync::Arc::new(move |who, record| {
                let _ = egress.event("egress", record.audit_fields(who));
            });
            let _ = lifecycle.seams().egress_record.set(sink);
            let live = audit.path().to_path_buf();
            let _ = lifecycle.seams().history.set(crate::history::Source {
                files: std::sync::Arc::new(move || {
                    crate::audit::verify::with_rotations(std::slice::from_ref(&live))
                }),
                instance: audit.instance().to_string(),
            });
            let audit = audit.clone();
            let events: crate::seams::HostEventSink = std::sync::Arc::new(move |kind, fields| {
                let _ = audit.event(kind, fields);
            });
            let _ = lifecycle.seams().host_events.set(events);
        }
        Ok(())
    }

    fn started<'a>(&'a self, wiring: &'a Wiring, host: &'a Toolgate) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Some(audit) = &wiring.audit {
                record_reloads(host, audit.clone()).await;
            }
        })
    }
}

/// Each plugin's name (`NAME@SCOPE` in a scope) and what `pick` reads.
fn by_plugin<T>(
    host: &Toolgate,
    pick: impl Fn(crate::PluginStatus) -> Option<T>,
) -> BTreeMap<String, T> {
    host.plugin_status()
        .into_iter()
        .filter_map(|s| {
            let name = if s.scope.is_empty() {
                s.name.clone()
            } else {
                format!("{}@{}", s.name, s.scope)
            };
            Some((name, pick(s)?))
        })
        .collect()
}

/// Record the plugins (and the configuration's digest) of the first
/// generation, then every reload (old → new digests, refusals, a
/// configuration not obeyed) and every change of the configuration in
/// force (old → new digest) as host events.
async fn record_reloads(host: &Toolgate, audit: Audit) {
    let digests = |host: &Toolgate| by_plugin(host, |s| Some(s.sha256));
    // Who signed each plugin that a `[trust]` key verified.
    let signers = |host: &Toolgate| by_plugin(host, |s| s.signer);
    let mut before = digests(host);
    let mut config_before = host.config().await.digest();
    let _ = audit.event(
        "plugins",
        serde_json::json!({
            "generation": host.generation().number,
            "plugins": before,
            "signers": signers(host),
            "config": config_before,
        }),
    );
    let mut events = host.subscribe();
    let weak = host.downgrade();
    tokio::spawn(async move {
        loop {
            let event = match events.recv().await {
                Ok(e) => e,
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    let _ = audit.event("reload", serde_json::json!({ "missedEvents": n }));
                    continue;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            };
            let Some(host) = weak.upgrade() else { return };
            let after = digests(&host);
            let now_signed = signers(&host);
            let config_after = host.config().await.digest();
            drop(host);
            if config_after != config_before {
                let _ = audit.event(
                    "config",
                    serde_json::json!({
                        "generation": event.generation,
                        "old": config_before,
                        "new": config_after,
                    }),
                );
                config_before = config_after;
            }
            let changed: Vec<_> = after
                .iter()
                .filter(|(name, new)| before.get(*name) != Some(*new))
                .map(|(name, new)| {
                    serde_json::json!({ "plugin": name, "old": before.get(name).cloned().flatten(), "new": new, "signer": now_signed.get(name) })
                })
                .chain(before.keys().filter(|n| !after.contains_key(*n)).map(|name| {
                    serde_json::json!({ "plugin": name, "old": before[name], "new": null })
                }))
                .collect();
            let refused: Vec<_> = event
                .refused
                .iter()
                .map(|e| serde_json::json!({ "plugin": e.plugin, "reason": e.to_string() }))
                .collect();
            let _ = audit.event(
                "reload",
                serde_json::json!({
                    "generation": event.generation,
                    "changed": changed,
                    "refused": refused,
                    "configProblem": event.config_problem,
                }),
            );
            before = after;
        }
    });
}
