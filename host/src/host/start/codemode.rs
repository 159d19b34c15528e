//! Code Mode (`code_mode = true`): the host's own `run_code` tool, whose
//! calls come back to the host once it exists (through a slot the builder
//! fills with a weak reference: the host owns the tool).

use std::sync::Arc;

use futures::future::BoxFuture;

use super::{Feature, StartContext, Wiring};
use crate::codemode::{self, HostSlot, RunCode};
use crate::error::HostError;
use crate::tool::ToolEntry;

/// See the module docs.
pub(crate) struct CodeMode;

impl Feature for CodeMode {
    fn open<'a>(
        &'a self,
        start: &'a StartContext<'a>,
        wiring: &'a mut Wiring,
    ) -> BoxFuture<'a, Result<(), HostError>> {
        Box::pin(async move {
            if !start.config.code_mode {
                return Ok(());
            }
            let limits = codemode::Limits::from(&start.config.run_code);
            let definition = RunCode::definition(&limits);
            let parameters = toolgate_schema::Schema::compile_parameters(&definition.parameters)
                .expect("run_code's schema compiles");
            let slot: HostSlot = wiring.nested.get_or_insert_with(Default::default).clone();
            wiring.tools.push(Arc::new(ToolEntry {
                def: definition,
                parameters,
                output: None,
                body: Arc::new(RunCode::new(start.runtime.clone(), limits, slot.clone())),
            }));
            Ok(())
        })
    }
}
