//! What a component instance's store holds.
//!
//! A store belongs to one instance of one plugin. Between calls it holds
//! the WASI context, the limiter and what every instance of the plugin
//! shares ([`PluginContext`]); during a call, [`CallScope`] holds what the
//! imports need: the fused signal (read by the epoch callback too), the
//! call, the rest of a waterfall for `*-chain.next`, the deferred-context
//! sink. The imports themselves are implemented by the contract modules
//! (`plugin::contract`), one per contract version; this module knows none
//! of them.

use std::sync::{Arc, Mutex};

use wasmtime::component::{Resource, ResourceTable};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtxView, WasiHttpView};

use super::log::GuestLog;
use super::memory::{MemoryBudget, MemoryLimiter};
use super::pipe::TailPipe;
use crate::bindings::{CallHandle, ResultHandle};
use crate::budgets::Budgets;
use crate::call::{CallInfo, CallSignal, Interrupt};
use crate::egress::component::ComponentEgress;
use crate::grants::Grants;
use crate::outcome::Outcome;
use crate::policy::{ExecNext, PostDecision, PostNext, PreDecision, PreNext};
use crate::seams::http::HttpState;
use crate::seams::process::Requester;
use crate::seams::{PluginSeams, SeamCtx, SeamHost, StoreSeams};
use crate::tool::DeferredContexts;

/// What every instance of one plugin shares.
pub struct PluginContext {
    pub name: Arc<str>,
    /// What the operator granted (the seams check it).
    pub grants: Arc<Grants>,
    pub budgets: Budgets,
    /// The plugin's log (escaped, rate-limited).
    pub log: GuestLog,
    /// Its share of the host-wide seam state (what it is granted of it).
    pub seams: PluginSeams,
    /// The host-wide budget its instances' memory is drawn from.
    pub memory: Arc<MemoryBudget>,
    /// Its policy budget in epoch ticks (the synchronous path counts ticks
    /// instead of reading the clock on every call).
    pub policy_ticks: u32,
    /// Whether its instances list the sentinel preopen that tells an
    /// ungranted path from a missing one ([`super::ungranted`]).
    pub sentinel: bool,
}

/// A `*-chain.next` continuation: run at most once, then remembered.
pub(crate) enum Slot<N, D> {
    Pending(N),
    Running,
    Done(D),
}

/// The execute chain as a wrapper sees it: the rest of the chain, and what
/// it returned (shared with the adapter, which needs it even when the
/// wrapper's instance is gone).
pub(crate) struct ExecSlot {
    pub next: Option<ExecNext>,
    pub done: Arc<Mutex<Option<Arc<Outcome>>>>,
}

/// What the imports need during one call.
#[derive(Default)]
pub struct CallScope {
    pub(crate) signal: Option<CallSignal>,
    /// The call being served (the kv seam's namespace is its scope).
    pub(crate) call: Option<Arc<CallInfo>>,
    pub(crate) deferred: Option<DeferredContexts>,
    pub(crate) pre_next: Option<Slot<PreNext, PreDecision>>,
    pub(crate) exec_next: Option<ExecSlot>,
    pub(crate) post_next: Option<Slot<PostNext, PostDecision>>,
    /// Epoch ticks left before the call's budget runs out, when it is
    /// counted in ticks (see [`PluginContext::policy_ticks`]).
    pub(crate) ticks_left: Option<u32>,
    /// The paths this call was refused for lacking an fs grant (at most
    /// [`crate::budgets::MAX_UNGRANTED_PATHS`]; see
    /// [`super::ungranted`]).
    pub(crate) ungranted: Vec<String>,
    /// What features attach to the call (a tool body's call only; see
    /// [`crate::call::Extensions`]).
    pub(crate) extensions: crate::call::Extensions,
}

impl CallScope {
    /// A scope for serving `call` under `signal`.
    pub fn new(call: Option<Arc<CallInfo>>, signal: CallSignal) -> Self {
        CallScope {
            signal: Some(signal),
            call,
            ..Default::default()
        }
    }

    /// A scope for a policy deciding about `call`: no deadline of its own
    /// here (its budget is counted in ticks or enforced by the pipeline);
    /// the turn's cancellation is read from the call itself (no token
    /// cloned per invocation).
    pub fn for_policy(call: Arc<CallInfo>) -> Self {
        CallScope {
            call: Some(call),
            ..Default::default()
        }
    }

    /// The signal fired, or (a policy's scope) the call's turn was cancelled.
    fn fired(&self) -> Option<Interrupt> {
        match (&self.signal, &self.call) {
            (Some(s), _) => s.fired(),
            (None, Some(c)) => c.cancel.is_cancelled().then_some(Interrupt::Cancelled),
            (None, None) => None,
        }
    }
}

/// The data of one instance's store.
pub struct StoreData {
    wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) plugin: Arc<PluginContext>,
    pub(crate) scope: CallScope,
    pub(crate) stderr: TailPipe,
    /// `wasi:http`: the context and the egress hook.
    pub(crate) http: HttpState,
    /// This instance's egress (`wasi:http` and `wasi:sockets`), told which
    /// call its connections belong to.
    pub(crate) egress: Arc<ComponentEgress>,
    /// Host handles (calls, results) in the table now.
    handles: usize,
    /// The seams' state of this instance.
    pub(crate) seams: StoreSeams,
    /// The handles this instance lends its guest for each call, refilled
    /// per call (no table entry made and dropped on every call).
    lent_call: Option<u32>,
    lent_result: Option<u32>,
}

/// A guest holds more host handles than [`Budgets::max_handles`].
#[derive(Debug, thiserror::Error)]
#[error(
    "plugin `{plugin}` holds more than {max} host handles (calls, results); it must drop the ones it no longer needs"
)]
pub struct TooManyHandles {
    plugin: Arc<str>,
    max: usize,
}

impl StoreData {
    pub(crate) fn new(
        plugin: Arc<PluginContext>,
        wasi: WasiCtx,
        stderr: TailPipe,
        egress: Arc<ComponentEgress>,
    ) -> Self {
        let limiter = MemoryLimiter::new(
            plugin.name.clone(),
            plugin.grants.memory_bytes,
            plugin.memory.clone(),
        );
        let http = HttpState::new(egress.clone());
        StoreData {
            egress,
            wasi,
            table: ResourceTable::new(),
            limiter,
            http,
            plugin,
            scope: CallScope::default(),
            stderr,
            handles: 0,
            seams: StoreSeams::default(),
            lent_call: None,
            lent_result: None,
        }
    }

    /// The epoch callback's question, asked at every tick: should the
    /// running guest stop?
    pub(crate) fn interrupt(&mut self) -> Option<Interrupt> {
        if let Some(i) = self.scope.fired() {
            return Some(i);
        }
        match &mut self.scope.ticks_left {
            Some(0) => Some(Interrupt::DeadlineExceeded),
            Some(t) => {
                *t -= 1;
                None
            }
            None => None,
        }
    }

    /// Whether the running guest's call was interrupted (without counting
    /// a tick: for the `cancellation` import).
    pub(crate) fn interrupted(&self) -> Option<Interrupt> {
        self.scope
            .fired()
            .or_else(|| (self.scope.ticks_left == Some(0)).then_some(Interrupt::DeadlineExceeded))
    }

    /// Lend `call` to the guest for one export call: the rep of this
    /// instance's call handle, refilled.
    pub(crate) fn lend_call(&mut self, call: Arc<CallInfo>) -> wasmtime::Result<u32> {
        match self.lent_call {
            Some(rep) => {
                self.table.get_mut(&Resource::<CallHandle>::new_own(rep))?.0 = Some(call);
                Ok(rep)
            }
            None => {
                let rep = self.push(CallHandle(Some(call)))?.rep();
                self.lent_call = Some(rep);
                Ok(rep)
            }
        }
    }

    /// Lend `result` to the guest for one export call.
    pub(crate) fn lend_result(&mut self, result: ResultHandle) -> wasmtime::Result<u32> {
        match self.lent_result {
            Some(rep) => {
                *self
                    .table
                    .get_mut(&Resource::<ResultHandle>::new_own(rep))? = result;
                Ok(rep)
            }
            None => {
                let rep = self.push(result)?.rep();
                self.lent_result = Some(rep);
                Ok(rep)
            }
        }
    }

    /// Empty the lent handles after a call (the call and result are not
    /// kept alive by a warm instance).
    pub(crate) fn vacate_lent(&mut self) -> wasmtime::Result<()> {
        if let Some(rep) = self.lent_call {
            self.table.get_mut(&Resource::<CallHandle>::new_own(rep))?.0 = None;
        }
        if let Some(rep) = self.lent_result {
            *self
                .table
                .get_mut(&Resource::<ResultHandle>::new_own(rep))? = ResultHandle::Vacant;
        }
        Ok(())
    }

    /// Lend or give the guest a host value as a resource handle.
    pub(crate) fn push<T: Send + 'static>(&mut self, value: T) -> wasmtime::Result<Resource<T>> {
        if self.handles >= self.plugin.budgets.max_handles {
            return Err(TooManyHandles {
                plugin: self.plugin.name.clone(),
                max: self.plugin.budgets.max_handles,
            }
            .into());
        }
        let handle = self.table.push(value)?;
        self.handles += 1;
        Ok(handle)
    }

    /// Take a handle's value back out of the table (the host's own cleanup,
    /// or the guest dropping a handle it owned).
    pub(crate) fn take<T: 'static>(&mut self, handle: Resource<T>) -> wasmtime::Result<T> {
        let value = self.table.delete(handle)?;
        self.handles -= 1;
        Ok(value)
    }

    /// Who asks the process seams: this plugin, for the call being served.
    pub(crate) fn requester(&self) -> Requester<'_> {
        Requester {
            plugin: &self.plugin.name,
            grants: &self.plugin.grants,
            signal: self.scope.signal.as_ref(),
            call: self.scope.call.as_deref(),
            egress_record: self.plugin.seams.egress_record.get(),
            egress_ask: self.scope.extensions.get(),
        }
    }

    /// Read a handle's value.
    pub(crate) fn get<T: 'static>(&self, handle: &Resource<T>) -> wasmtime::Result<&T> {
        Ok(self.table.get(handle)?)
    }
}

impl SeamHost for StoreData {
    fn seams(&mut self) -> SeamCtx<'_> {
        SeamCtx {
            plugin: &self.plugin.name,
            grants: &self.plugin.grants,
            shared: &self.plugin.seams,
            state: &mut self.seams,
            table: &mut self.table,
            call: self.scope.call.as_deref(),
            signal: self.scope.signal.as_ref(),
            extensions: &self.scope.extensions,
            egress: &self.egress,
        }
    }
}

impl WasiHttpView for StoreData {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http.ctx,
            table: &mut self.table,
            hooks: &mut self.http.hooks,
        }
    }
}

impl WasiView for StoreData {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// The error an epoch interruption traps with, so the host can tell a
/// deadline from a crash.
#[derive(Debug, thiserror::Error)]
#[error("interrupted by the host: {0:?}")]
pub struct Interrupted(pub Interrupt);

/// The egress of one instance of `plugin` (see
/// [`crate::egress::component`]).
pub(crate) fn component_egress(plugin: &PluginContext) -> Arc<ComponentEgress> {
    let g = &plugin.grants;
    Arc::new(ComponentEgress::new(
        plugin.name.clone(),
        g.egress.as_deref(),
        g.egress_global.clone(),
        &g.network_pinned,
        plugin.seams.egress_record.clone(),
    ))
}

impl StoreData {
    /// Installs the scope of a call (or none, between calls): the seams see
    /// its call, and egress attributes connections to it.
    pub(crate) fn set_scope(&mut self, scope: CallScope) {
        self.egress.set_call(
            scope
                .call
                .as_deref()
                .map(|c| (c.call_id.as_str(), c.agent_scope.as_str())),
            scope
                .extensions
                .get::<Arc<crate::egress::ask::CallAsk>>()
                .cloned(),
        );
        self.scope = scope;
    }
}

/// A WASI context giving exactly `grants`: the granted preopens, variables
/// and TCP connects that `egress` allows, nothing else.
pub(crate) fn wasi_ctx(
    grants: &Grants,
    stderr: TailPipe,
    egress: &Arc<ComponentEgress>,
) -> anyhow::Result<WasiCtx> {
    let mut b = WasiCtx::builder();
    b.stdout(TailPipe::sink());
    b.stderr(stderr);
    for g in grants.fs.iter().filter(|g| g.preopen) {
        let perms = if g.writable {
            FsPerms::ReadWrite
        } else {
            FsPerms::ReadOnly
        };
        b.preopened_dir(&g.host, &g.guest, perms).map_err(|e| {
            anyhow::anyhow!("cannot open granted directory {}: {e}", g.host.display())
        })?;
    }
    b.envs(&grants.env);
    if !grants.network.is_empty() || grants.egress.is_some() {
        let egress = egress.clone();
        b.allow_tcp(true);
        b.allow_udp(false);
        b.socket_addr_check(move |addr, usage| {
            use wasmtime_wasi::sockets::SocketAddrUse;
            let ok = match usage {
                // Outgoing connections egress allows (or an approval
                // does: the connect waits for it), recorded.
                SocketAddrUse::TcpConnect => return egress.connect_check(addr),
                // The implicit bind of a client socket (any local
                // address, an ephemeral port) is what a connect needs.
                SocketAddrUse::TcpBind => addr.ip().is_unspecified() && addr.port() == 0,
                // No serving, no UDP.
                _ => false,
            };
            Box::pin(async move { ok })
        });
    }
    Ok(b.build())
}
