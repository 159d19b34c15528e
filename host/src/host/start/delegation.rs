//! Models and sub-agents (`[models]`, `[delegation]`): the models' keys
//! read at start — a missing or empty key file stops the start, naming it
//! — the family's tools registered, and, once the lifecycle exists, the
//! models reached through the host's egress and given to the `model` seam
//! (for components granted `models = ["NAME"]`).
//!
//! Egress: a model's `base_url` is the operator's own choice, so its
//! `host:port` is what the models' egress allows; `[egress] deny` is
//! checked first and the address classes hold (a server on the loopback
//! or a private network needs `[egress] allow_private`). Each connection
//! is recorded against the `subagent` call that made it, in the agent's
//! scope, as plugin `models`.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use futures::future::BoxFuture;

use super::{Feature, StartContext, Wiring};
use crate::delegation;
use crate::egress::component::ComponentEgress;
use crate::egress::proxy::RecordSink;
use crate::egress::{Policy, Rule};
use crate::error::HostError;
use crate::lifecycle::Lifecycle;
use crate::models::{Connect, Model, Models, Transport, TransportError, WireRequest, WireResponse};
use crate::seams::http::{HostRequest, HostRequestError, host_request};
use crate::tool::ToolEntry;

/// See the module docs.
pub(crate) struct Delegation;

impl Feature for Delegation {
    fn open<'a>(
        &'a self,
        start: &'a StartContext<'a>,
        wiring: &'a mut Wiring,
    ) -> BoxFuture<'a, Result<(), HostError>> {
        Box::pin(async move {
            let config = start.config;
            let sampling = config.delegation.sampling == Some(true);
            if config.models.is_empty() && !sampling {
                return Ok(());
            }
            let mut by_name = BTreeMap::new();
            for (name, m) in &config.models {
                let key = m
                    .read_key(name, start.workdir)
                    .map_err(|e| HostError::Feature(Box::new(e)))?;
                by_name.insert(name.clone(), Arc::new(Model::new(name, m.clone(), key)));
            }
            let models = Arc::new(Models::new(
                by_name,
                config.delegation.limits().max_session_tokens,
            ));
            wiring.models = Some(models.clone());
            if config.delegation.enabled == Some(false) {
                return Ok(());
            }
            let slot = wiring.nested.get_or_insert_with(Default::default).clone();
            let service = Arc::new(delegation::Delegation::new(
                &config.delegation,
                models,
                slot,
                wiring.kv.clone(),
            ));
            for (def, body) in service.tools() {
                let parameters = toolgate_schema::Schema::compile_parameters(&def.parameters)
                    .expect("the sub-agent tools' schemas compile");
                wiring.tools.push(Arc::new(ToolEntry {
                    def,
                    parameters,
                    output: None,
                    body,
                }));
            }
            tracing::info!(
                models = ?config.models.keys().collect::<Vec<_>>(),
                "sub-agents configured"
            );
            wiring.delegation = Some(service);
            Ok(())
        })
    }

    fn attach(
        &self,
        start: &StartContext<'_>,
        wiring: &Wiring,
        lifecycle: &Lifecycle,
    ) -> Result<(), HostError> {
        let Some(models) = &wiring.models else {
            return Ok(());
        };
        let global = start
            .config
            .egress
            .global()
            .map_err(|e| HostError::Feature(e.into()))?;
        let mut allow = Vec::new();
        for (name, m) in &start.config.models {
            let Some(dest) = m.destination() else {
                continue;
            };
            allow.push(Rule::parse(&dest, false).map_err(|e| {
                HostError::Feature(format!("[models.{name}] base_url: {e}").into())
            })?);
        }
        if let Some(service) = &wiring.delegation
            && let Some(audit) = wiring.audit.clone()
        {
            service.set_record(Arc::new(move |fields| {
                if let Err(e) = audit.event("agent", fields) {
                    tracing::warn!(error = %e, "a background agent's end could not be recorded");
                }
            }));
        }
        models.set_connect(Arc::new(EgressConnect {
            policy: Policy {
                allow,
                global: Arc::new(global),
                grant_table: "[models.NAME] base_url".into(),
            },
            sink: lifecycle.seams().egress_record.clone(),
        }));
        if !models.is_empty() {
            let _ = lifecycle.seams().models.set(models.clone());
        }
        Ok(())
    }
}

/// The models' egress.
struct EgressConnect {
    policy: Policy,
    sink: Arc<OnceLock<RecordSink>>,
}

impl Connect for EgressConnect {
    fn transport(&self, call_id: &str, scope: &str) -> Box<dyn Transport> {
        let egress = Arc::new(ComponentEgress::new(
            "models".into(),
            Some(&self.policy),
            self.policy.global.clone(),
            &[],
            self.sink.clone(),
        ));
        egress.set_call(Some((call_id, scope)), None);
        Box::new(EgressTransport(egress))
    }
}

/// One agent's connections to its model, attributed to its call.
struct EgressTransport(Arc<ComponentEgress>);

#[async_trait]
impl Transport for EgressTransport {
    async fn send(&self, r: WireRequest) -> Result<WireResponse, TransportError> {
        let answer = host_request(
            self.0.clone(),
            HostRequest {
                method: "POST",
                url: &r.url,
                headers: &r.headers,
                body: Some(r.body),
                timeout: r.timeout,
                max_body: r.max_body,
            },
        )
        .await
        .map_err(|e| match e {
            HostRequestError::Refused(m) => TransportError::Refused(m),
            HostRequestError::Failed(m) => TransportError::Failed(m),
        })?;
        Ok(WireResponse {
            status: answer.status,
            retry_after: answer.retry_after,
            body: answer.body,
        })
    }
}
