//! A loaded plugin component: its compiled code, its roles, and its
//! instances.
//!
//! Instances come from a small idle pool ("pooled", the default: a warm
//! instance is reused by the next call) or are created for every call
//! ("fresh", for plugins that want isolation between calls). Creating one is
//! cheap (`InstancePre` is built once per generation; the pooling allocator
//! maps memory copy-on-write). An instance that trapped, or whose call was
//! abandoned (deadline, cancellation), is dropped — never reused.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use wasmtime::component::InstancePre;
use wasmtime::{Store, StoreLimitsBuilder, UpdateDeadline};

use super::grants::Grants;
use super::runtime::Runtime;
use super::store::{CallScope, Interrupted, StoreData, TailPipe};
use crate::bindings::exports::toolgate::plugin::{
    execute_around_hook, finalizer, guard, post_execute_hook, pre_execute_hook, result_observer,
    tool,
};
use crate::call::Interrupt;
use crate::policy::Role;
use crate::tool::ToolDefinition;

/// How a plugin's instances are managed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstanceMode {
    /// Reuse warm instances (state may carry over between calls).
    #[default]
    Pooled,
    /// A new instance for every call.
    Fresh,
}

/// Where a plugin came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Compiled into the `toolgate` binary.
    Builtin,
    /// A `.wasm` file.
    File(std::path::PathBuf),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Builtin => f.write_str("built-in"),
            Origin::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// Export lookups, resolved once per component.
#[derive(Default)]
pub(crate) struct Indices {
    pub tool: Option<tool::GuestIndices>,
    pub pre_execute: Option<pre_execute_hook::GuestIndices>,
    pub execute_around: Option<execute_around_hook::GuestIndices>,
    pub post_execute: Option<post_execute_hook::GuestIndices>,
    pub guard: Option<guard::GuestIndices>,
    pub finalizer: Option<finalizer::GuestIndices>,
    pub observer: Option<result_observer::GuestIndices>,
}

/// The exports of one instance.
pub struct Exports {
    tool: Option<tool::Guest>,
    pre_execute: Option<pre_execute_hook::Guest>,
    execute_around: Option<execute_around_hook::Guest>,
    post_execute: Option<post_execute_hook::Guest>,
    guard: Option<guard::Guest>,
    finalizer: Option<finalizer::Guest>,
    observer: Option<result_observer::Guest>,
}

fn missing(role: &str) -> wasmtime::Error {
    wasmtime::Error::msg(format!("the component does not export the {role} role"))
}

impl Exports {
    pub fn tool(&self) -> wasmtime::Result<&tool::Guest> {
        self.tool.as_ref().ok_or_else(|| missing("tool"))
    }
    pub fn pre_execute(&self) -> wasmtime::Result<&pre_execute_hook::Guest> {
        self.pre_execute
            .as_ref()
            .ok_or_else(|| missing("pre-execute"))
    }
    pub fn execute_around(&self) -> wasmtime::Result<&execute_around_hook::Guest> {
        self.execute_around
            .as_ref()
            .ok_or_else(|| missing("execute-around"))
    }
    pub fn post_execute(&self) -> wasmtime::Result<&post_execute_hook::Guest> {
        self.post_execute
            .as_ref()
            .ok_or_else(|| missing("post-execute"))
    }
    pub fn guard(&self) -> wasmtime::Result<&guard::Guest> {
        self.guard.as_ref().ok_or_else(|| missing("guard"))
    }
    pub fn finalizer(&self) -> wasmtime::Result<&finalizer::Guest> {
        self.finalizer.as_ref().ok_or_else(|| missing("finalizer"))
    }
    pub fn observer(&self) -> wasmtime::Result<&result_observer::Guest> {
        self.observer.as_ref().ok_or_else(|| missing("observer"))
    }
}

struct Instance {
    store: Store<StoreData>,
    exports: Exports,
}

/// Why a call into a component did not return normally.
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    /// The guest trapped; `stderr` is the tail of what it printed.
    #[error("{message}{}", if stderr.is_empty() { String::new() } else { format!(" (guest stderr: {stderr})") })]
    Trap { message: String, stderr: String },
    /// The epoch callback stopped it: its signal fired.
    #[error("interrupted: {0:?}")]
    Interrupted(Interrupt),
    /// The host could not provide an instance.
    #[error("{0}")]
    Host(String),
}

/// A plugin, loaded and ready.
pub struct ComponentPlugin {
    pub name: String,
    pub origin: Origin,
    pub roles: Vec<Role>,
    /// The `toolgate:plugin` version the component was built against.
    pub wit_version: String,
    /// Every interface the component imports.
    pub imports: Vec<String>,
    /// Tools it provides (from `list-tools`, checked).
    pub tools: Vec<ToolDefinition>,
    pub mode: InstanceMode,
    pub grants: Arc<Grants>,
    pub(crate) limits: toolgate_schema::Limits,
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) pre: InstancePre<StoreData>,
    pub(crate) indices: Indices,
    pub(crate) max_idle: usize,
    idle: Mutex<Vec<Instance>>,
}

impl std::fmt::Debug for ComponentPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComponentPlugin")
            .field("name", &self.name)
            .field("origin", &self.origin)
            .field("roles", &self.roles)
            .finish()
    }
}

/// Everything needed to make a [`ComponentPlugin`].
pub(crate) struct Parts {
    pub name: String,
    pub origin: Origin,
    pub roles: Vec<Role>,
    pub wit_version: String,
    pub imports: Vec<String>,
    pub mode: InstanceMode,
    pub grants: Arc<Grants>,
    pub limits: toolgate_schema::Limits,
    pub runtime: Arc<Runtime>,
    pub pre: InstancePre<StoreData>,
    pub indices: Indices,
    pub max_idle: usize,
}

impl ComponentPlugin {
    pub(crate) fn new(parts: Parts) -> Self {
        ComponentPlugin {
            name: parts.name,
            origin: parts.origin,
            roles: parts.roles,
            wit_version: parts.wit_version,
            imports: parts.imports,
            tools: Vec::new(),
            mode: parts.mode,
            grants: parts.grants,
            limits: parts.limits,
            runtime: parts.runtime,
            pre: parts.pre,
            indices: parts.indices,
            max_idle: parts.max_idle,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Warm instances waiting for a call.
    pub fn idle_instances(&self) -> usize {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Call into an instance: take a warm one (or make one), install the
    /// call's scope, run `f`, and give the instance back if it is still
    /// sound. Dropping the returned future drops the instance with it.
    pub async fn invoke<R, F>(&self, scope: CallScope, f: F) -> Result<R, InvokeError>
    where
        R: Send,
        F: for<'a> FnOnce(
                &'a mut Store<StoreData>,
                &'a Exports,
            ) -> BoxFuture<'a, wasmtime::Result<R>>
            + Send,
    {
        let mut instance = match self.take_idle() {
            Some(i) => i,
            None => self.instantiate().await?,
        };
        instance.store.data_mut().scope = scope;
        instance.store.set_epoch_deadline(1);
        let answer = f(&mut instance.store, &instance.exports).await;
        match answer {
            Ok(value) => {
                instance.store.data_mut().scope = CallScope::default();
                self.give_back(instance);
                Ok(value)
            }
            Err(error) => Err(classify(error, &instance.store.data().stderr)),
        }
    }

    fn take_idle(&self) -> Option<Instance> {
        if self.mode == InstanceMode::Fresh {
            return None;
        }
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop()
    }

    fn give_back(&self, instance: Instance) {
        if self.mode == InstanceMode::Fresh {
            return;
        }
        instance.store.data().stderr.clear();
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < self.max_idle {
            idle.push(instance);
        }
    }

    async fn instantiate(&self) -> Result<Instance, InvokeError> {
        let stderr = TailPipe::default();
        let wasi = self.grants.wasi_ctx(stderr.clone()).map_err(|e| {
            InvokeError::Host(format!("cannot apply the grants of `{}`: {e}", self.name))
        })?;
        let limits = StoreLimitsBuilder::new()
            .memory_size(self.grants.memory_bytes)
            .instances(64)
            .tables(64)
            .memories(16)
            .build();
        let mut store = Store::new(
            &self.runtime.engine,
            StoreData::new(
                self.name.as_str().into(),
                wasi,
                limits,
                stderr,
                self.grants.clone(),
            ),
        );
        store.limiter(|d| &mut d.limits);
        store.epoch_deadline_callback(|ctx| match ctx.data().interrupt() {
            Some(i) => Err(Interrupted(i).into()),
            None => Ok(UpdateDeadline::Yield(1)),
        });
        store.set_epoch_deadline(1);
        let host = |e: wasmtime::Error| {
            InvokeError::Host(format!("cannot instantiate `{}`: {e:#}", self.name))
        };
        let instance = self.pre.instantiate_async(&mut store).await.map_err(host)?;
        let ix = &self.indices;
        let exports = Exports {
            tool: ix
                .tool
                .as_ref()
                .map(|i| i.load(&mut store, &instance))
                .transpose()
                .map_err(host)?,
            pre_execute: ix
                .pre_execute
                .as_ref()
                .map(|i| i.load(&mut store, &instance))
                .transpose()
                .map_err(host)?,
            execute_around: ix
                .execute_around
                .as_ref()
                .map(|i| i.load(&mut store, &instance))
                .transpose()
                .map_err(host)?,
            post_execute: ix
                .post_execute
                .as_ref()
                .map(|i| i.load(&mut store, &instance))
                .transpose()
                .map_err(host)?,
            guard: ix
                .guard
                .as_ref()
                .map(|i| i.load(&mut store, &instance))
                .transpose()
                .map_err(host)?,
            finalizer: ix
                .finalizer
                .as_ref()
                .map(|i| i.load(&mut store, &instance))
                .transpose()
                .map_err(host)?,
            observer: ix
                .observer
                .as_ref()
                .map(|i| i.load(&mut store, &instance))
                .transpose()
                .map_err(host)?,
        };
        Ok(Instance { store, exports })
    }
}

fn classify(error: wasmtime::Error, stderr: &TailPipe) -> InvokeError {
    if let Some(Interrupted(i)) = error.downcast_ref::<Interrupted>() {
        return InvokeError::Interrupted(*i);
    }
    let message = match error.downcast_ref::<wasmtime::Trap>() {
        Some(trap) => format!("wasm trap: {trap}"),
        None => format!("{error:#}"),
    };
    InvokeError::Trap {
        message: message.lines().next().unwrap_or_default().to_string(),
        stderr: stderr.tail(),
    }
}
