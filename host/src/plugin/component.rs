//! A loaded plugin component: its compiled code, its roles, and its
//! instances.
//!
//! Instances come from a small idle pool ("pooled", the default: a warm
//! instance is reused by the next call) or are created for every call
//! ("fresh", for plugins that want isolation between calls). Creating one is
//! cheap (`InstancePre` is built once per generation; the pooling allocator
//! maps memory copy-on-write). An instance that trapped, or whose call was
//! abandoned (deadline, cancellation, a dropped future), is dropped — never
//! reused.
//!
//! Calls take one of two paths ([`CallPath`]). A component that imports
//! nothing that can wait — most guards, finalizers and observers — is
//! called on the synchronous path: `TypedFunc::call` on the calling thread,
//! no fiber, and an epoch callback that traps it when its signal fires. A
//! component that can wait (a waterfall hook running the rest of its chain,
//! a tool spawning a process, anything with file-system or network access)
//! runs on a fiber (`call_async`), which yields to the runtime at every
//! epoch tick and can be dropped mid-call. Which exports an instance has is
//! the contract version's business (`plugin::contract`): this module only
//! keeps them, type-erased, next to the store.

use std::any::Any;
use std::sync::{Arc, Mutex};

use wasmtime::component::{
    ComponentNamedList, Instance as WasmInstance, InstancePre, Lift, Lower, TypedFunc,
};
use wasmtime::{Engine, Store, Trap, UpdateDeadline};

use super::memory::MemoryError;
use super::pipe::TailPipe;
use super::store::{CallScope, Interrupted, PluginContext, StoreData, TooManyHandles};
use crate::call::Interrupt;
use crate::policy::Role;

/// How a plugin's instances are managed.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Deserialize,
    serde::Serialize,
    toolgate_schema::derive::Schema,
)]
#[schema(crate = "toolgate_schema::derive")]
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
    /// An OCI artifact from the local store ([`crate::oci`]): the reference
    /// configured, and the manifest digest it resolved to at pull (what
    /// runs), and who signed it (the key's fingerprint and file: see
    /// [`crate::oci::trust`]) when a trusted key did.
    Oci {
        reference: String,
        digest: String,
        signer: Option<String>,
    },
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Builtin => f.write_str("built-in")?,
            Origin::File(p) => write!(f, "{}", p.display())?,
            // Pinned already, or not resolved (not pulled).
            Origin::Oci {
                reference, digest, ..
            } if reference.contains('@') || digest.is_empty() => f.write_str(reference)?,
            Origin::Oci {
                reference, digest, ..
            } => write!(f, "{reference}@{digest}")?,
        }
        if let Origin::Oci {
            signer: Some(s), ..
        } = self
        {
            write!(f, ", signed by {s}")?;
        }
        Ok(())
    }
}

/// The contract version a component was built against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum ContractVersion {
    /// `toolgate:plugin@0.1.x`: records, every call on a fiber.
    #[serde(rename = "0.1")]
    V0_1,
    /// `toolgate:plugin@0.2.x`: resources, synchronous where possible.
    #[serde(rename = "0.2")]
    V0_2,
}

/// How calls into a plugin's instances are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CallPath {
    /// `call` on the calling thread: no fiber. For components that import
    /// nothing that can wait.
    Sync,
    /// `call_async` on a fiber.
    Async,
}

/// The exports of one instance, looked up by the contract version's code.
pub(crate) type ExportTable = Box<dyn Any + Send + Sync>;

/// Looks up an instance's exports (built at load, for one component).
pub(crate) type ExportLoader = Arc<
    dyn Fn(&mut Store<StoreData>, &WasmInstance) -> wasmtime::Result<ExportTable> + Send + Sync,
>;

struct Instance {
    store: Store<StoreData>,
    exports: ExportTable,
}

/// Why a call into a component did not return normally.
///
/// The message is one line, for the model and the operator; the wasmtime
/// error it was read from is kept whole as the `source()` — its chain holds
/// the host's own cause where there is one ([`MemoryError`],
/// [`TooManyHandles`], a `Misuse`) and the guest's backtrace, for the log
/// and for callers that downcast.
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    /// The guest trapped (a panic, an out-of-bounds access, a limit).
    #[error("{message}{}{}", stderr_note(.stderr), hint_note(.hint))]
    Trap {
        /// What went wrong, in one line (read from `source`).
        message: String,
        /// The first line of what the guest printed to stderr (its panic
        /// message, usually); the whole tail is logged.
        stderr: String,
        /// What to do about it, when the host can tell (a file outside
        /// every grant: [`super::fs_hint`]); empty otherwise.
        hint: String,
        /// The error the call failed with.
        #[source]
        source: wasmtime::Error,
    },
    /// Its signal fired (deadline, cancellation): the epoch callback
    /// stopped it.
    #[error("interrupted: {0:?}")]
    Interrupted(Interrupt),
    /// The host could not provide an instance: what it was doing for which
    /// plugin, the failure in one line, and the error itself.
    #[error("cannot {doing} `{plugin}`: {detail}")]
    Host {
        doing: &'static str,
        plugin: String,
        detail: String,
        #[source]
        source: wasmtime::Error,
    },
}

fn hint_note(hint: &str) -> String {
    if hint.is_empty() {
        String::new()
    } else {
        format!("; {hint}")
    }
}

fn stderr_note(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!(" (guest stderr: {stderr})")
    }
}

/// A plugin, loaded and ready.
pub struct ComponentPlugin {
    pub name: String,
    pub origin: Origin,
    pub roles: Vec<Role>,
    /// The contract version the component was built against.
    pub contract: ContractVersion,
    /// The exact `toolgate:plugin` version string it names.
    pub wit_version: String,
    /// Every interface the component imports.
    pub imports: Vec<String>,
    pub mode: InstanceMode,
    pub path: CallPath,
    /// What its instances share: grants, budgets, log, kv.
    pub context: Arc<PluginContext>,
    pub(crate) limits: toolgate_schema::Limits,
    engine: Engine,
    pre: InstancePre<StoreData>,
    exports: ExportLoader,
    max_idle: usize,
    idle: Mutex<Vec<Instance>>,
}

impl std::fmt::Debug for ComponentPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComponentPlugin")
            .field("name", &self.name)
            .field("origin", &self.origin)
            .field("roles", &self.roles)
            .field("contract", &self.contract)
            .field("path", &self.path)
            .finish()
    }
}

/// Everything needed to make a [`ComponentPlugin`].
pub(crate) struct Parts {
    pub name: String,
    pub origin: Origin,
    pub roles: Vec<Role>,
    pub contract: ContractVersion,
    pub wit_version: String,
    pub imports: Vec<String>,
    pub mode: InstanceMode,
    pub path: CallPath,
    pub context: Arc<PluginContext>,
    pub limits: toolgate_schema::Limits,
    pub engine: Engine,
    pub pre: InstancePre<StoreData>,
    pub exports: ExportLoader,
    pub max_idle: usize,
}

impl ComponentPlugin {
    pub(crate) fn new(parts: Parts) -> Self {
        ComponentPlugin {
            name: parts.name,
            origin: parts.origin,
            roles: parts.roles,
            contract: parts.contract,
            wit_version: parts.wit_version,
            imports: parts.imports,
            mode: parts.mode,
            path: parts.path,
            context: parts.context,
            limits: parts.limits,
            engine: parts.engine,
            pre: parts.pre,
            exports: parts.exports,
            max_idle: parts.max_idle,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// The hint for a failure that reads "no such file" while the path is
    /// outside every grant, or that follows the host's refusal of such a
    /// path (`ungranted`: [`super::ungranted`]); see [`super::fs_hint`].
    /// Logged once per failure.
    pub fn fs_hint(&self, failure: &str, ungranted: &[String]) -> Option<String> {
        let hint = super::fs_hint::hint(&self.name, &self.context.grants, failure, ungranted)?;
        tracing::warn!(plugin = %self.name, "a file access failed: {hint}");
        Some(hint)
    }

    /// Warm instances waiting for a call.
    pub fn idle_instances(&self) -> usize {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// An instance for one call, with `scope` installed: a warm one, or a
    /// new one (instantiated under `scope`'s signal). Give it back with
    /// [`Lease::finish`]; dropping the lease drops the instance.
    pub(crate) async fn lease(&self, scope: CallScope) -> Result<Lease<'_>, InvokeError> {
        let mut instance = match self.take_idle() {
            Some(mut i) => {
                i.store.data_mut().set_scope(scope);
                i
            }
            None => self.instantiate(scope).await?,
        };
        instance.store.set_epoch_deadline(1);
        Ok(Lease {
            plugin: self,
            instance: Some(instance),
        })
    }

    /// Make one instance now (under `scope`'s signal) and keep it warm: at
    /// load, this runs the component's initialisation and checks the type of
    /// every export before any call depends on it.
    pub(crate) async fn warm_up(&self, scope: CallScope) -> Result<(), InvokeError> {
        self.lease(scope).await?.finish(Ok(()))
    }

    fn take_idle(&self) -> Option<Instance> {
        if self.mode == InstanceMode::Fresh {
            return None;
        }
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop()
    }

    fn give_back(&self, mut instance: Instance) {
        if self.mode == InstanceMode::Fresh {
            return;
        }
        instance.store.data_mut().set_scope(CallScope::default());
        instance.store.data().stderr.clear();
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < self.max_idle {
            idle.push(instance);
        }
    }

    async fn instantiate(&self, scope: CallScope) -> Result<Instance, InvokeError> {
        let host =
            |doing: &'static str, detail: String, source: wasmtime::Error| InvokeError::Host {
                doing,
                plugin: self.name.clone(),
                detail,
                source,
            };
        let stderr = TailPipe::new(self.context.budgets.stderr_tail_bytes);
        let egress = super::store::component_egress(&self.context);
        let wasi =
            super::store::wasi_ctx(&self.context.grants, stderr.clone(), &egress).map_err(|e| {
                host(
                    "apply the grants of",
                    e.to_string(),
                    wasmtime::Error::from_anyhow(e),
                )
            })?;
        let mut store = Store::new(
            &self.engine,
            StoreData::new(self.context.clone(), wasi, stderr, egress),
        );
        store.data_mut().set_scope(scope);
        store.limiter(|d| &mut d.limiter);
        let path = self.path;
        store.epoch_deadline_callback(move |mut ctx| match ctx.data_mut().interrupt() {
            Some(i) => Err(Interrupted(i).into()),
            None if path == CallPath::Sync => Ok(UpdateDeadline::Continue(1)),
            None => Ok(UpdateDeadline::Yield(1)),
        });
        store.set_epoch_deadline(1);
        let instance = match self.path {
            CallPath::Sync => self.pre.instantiate(&mut store),
            CallPath::Async => self.pre.instantiate_async(&mut store).await,
        };
        let instance = match instance {
            Ok(i) => i,
            Err(e) => {
                let stderr = store.data().stderr.clone();
                return Err(match classify(&self.name, e, &stderr) {
                    InvokeError::Trap {
                        message,
                        stderr,
                        source,
                        ..
                    } => host(
                        "instantiate",
                        format!("{message}{}", stderr_note(&stderr)),
                        source,
                    ),
                    other => other,
                });
            }
        };
        let exports = (self.exports)(&mut store, &instance)
            .map_err(|e| host("look up the exports of", format!("{e:#}"), e))?;
        Ok(Instance { store, exports })
    }
}

/// One instance, lent to one call.
pub(crate) struct Lease<'p> {
    plugin: &'p ComponentPlugin,
    instance: Option<Instance>,
}

impl Lease<'_> {
    /// The store and the exports (as the contract version's type `E`).
    pub fn parts<E: 'static>(&mut self) -> (&mut Store<StoreData>, &E) {
        let Instance { store, exports } = self
            .instance
            .as_mut()
            .expect("a lease holds an instance until it finishes");
        let exports = exports
            .downcast_ref::<E>()
            .expect("the exports of an instance have the type its contract version loaded");
        (store, exports)
    }

    /// The store.
    pub fn store(&mut self) -> &mut Store<StoreData> {
        &mut self
            .instance
            .as_mut()
            .expect("a lease holds an instance until it finishes")
            .store
    }

    /// Call `func` on this instance's path.
    pub async fn call<P, R>(&mut self, func: TypedFunc<P, R>, params: P) -> wasmtime::Result<R>
    where
        P: ComponentNamedList + Lower + Send + Sync,
        R: ComponentNamedList + Lift + Send + Sync + 'static,
    {
        let path = self.plugin.path;
        let store = self.store();
        match path {
            CallPath::Sync => func.call(store, params),
            CallPath::Async => func.call_async(store, params).await,
        }
    }

    /// End the call: a sound instance goes back to the pool; one whose call
    /// failed is dropped, and the failure classified.
    pub fn finish<R>(mut self, answer: wasmtime::Result<R>) -> Result<R, InvokeError> {
        let instance = self.instance.take().expect("a lease finishes once");
        match answer {
            Ok(value) => {
                self.plugin.give_back(instance);
                Ok(value)
            }
            Err(error) => {
                let data = instance.store.data();
                let stderr = &data.stderr;
                let mut e = classify(&self.plugin.name, error, stderr);
                if let InvokeError::Trap { message, hint, .. } = &mut e
                    && let Some(h) = self.plugin.fs_hint(
                        &format!("{message}\n{}", stderr.tail()),
                        &data.scope.ungranted,
                    )
                {
                    *hint = h;
                }
                Err(e)
            }
        }
    }
}

/// Classify a failed call: an interruption, a limit, or a trap — each read
/// once, in one line; the guest's whole stderr tail goes to the log.
fn classify(plugin: &str, error: wasmtime::Error, stderr: &TailPipe) -> InvokeError {
    // The causes the host itself raised (its epoch callback, its limits)
    // may sit anywhere in the error's chain.
    fn find<E: std::error::Error + 'static>(error: &wasmtime::Error) -> Option<&E> {
        error.chain().find_map(|e| e.downcast_ref::<E>())
    }
    if let Some(Interrupted(i)) = find::<Interrupted>(&error) {
        return InvokeError::Interrupted(*i);
    }
    let tail = stderr.tail();
    if !tail.is_empty() {
        // The whole tail (a Python traceback, a Rust panic with its
        // location) is for the author, in the log; the model gets one line.
        tracing::warn!(
            plugin,
            stderr = %super::log::escape(&tail),
            "guest stderr before the trap"
        );
    }
    let first_line = |s: &str| s.lines().next().unwrap_or_default().trim().to_string();
    let message = if let Some(e) = find::<MemoryError>(&error) {
        e.to_string()
    } else if let Some(e) = find::<TooManyHandles>(&error) {
        e.to_string()
    } else if let Some(trap) = error.downcast_ref::<Trap>() {
        match trap {
            Trap::StackOverflow => "stack overflow (the guest recursed too deeply)".to_string(),
            Trap::UnreachableCodeReached if !tail.is_empty() => "the guest panicked".to_string(),
            // `Trap`'s own text starts with "wasm trap: ".
            other => first_line(&other.to_string()),
        }
    } else {
        // wasmtime wraps the cause in "error while executing at wasm
        // backtrace: …"; the cause is what the author needs.
        let cause = first_line(&error.root_cause().to_string());
        if cause.contains("borrow handles still remain") {
            format!(
                "{cause} (the guest kept a handle it was lent: with wit-bindgen's C bindings, call `…_drop_borrow` on every borrowed `call`/`call-result` before returning)"
            )
        } else {
            cause
        }
    };
    InvokeError::Trap {
        message,
        stderr: crate::budgets::cut(super::log::escape(&short_stderr(&tail)).into_owned(), 512),
        hint: String::new(),
        source: error,
    }
}

/// The one line of a guest's stderr worth showing the model: a Rust
/// panic's message, a Python traceback's last line (`ValueError: …`), a
/// JavaScript error's message — not the frames around them.
fn short_stderr(tail: &str) -> String {
    let is_frame = |l: &str| {
        l.starts_with("note:")
            || l.starts_with("Traceback (most recent call last)")
            || l.starts_with("stack backtrace")
            || l.starts_with("at ")
            // A SpiderMonkey frame: `name@file.js:10:5`.
            || (l.contains('@') && !l.contains(' ') && l.ends_with(|c: char| c.is_ascii_digit()))
    };
    let lines: Vec<&str> = tail
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with(char::is_whitespace))
        .map(str::trim)
        .filter(|l| !is_frame(l))
        .collect();
    let panic = lines.iter().rposition(|l| l.contains("panicked at "));
    // componentize-py prints the Python traceback, then its runtime (Rust)
    // panics: the exception is the line worth showing.
    if tail.contains("Traceback (most recent call last)")
        && let Some(line) = lines[..panic.unwrap_or(lines.len())].last()
    {
        return line.to_string();
    }
    // A Rust panic: `thread '…' panicked at FILE:LINE:COL:` then the message.
    if let Some(i) = panic {
        let at = lines[i].split("panicked at ").nth(1).unwrap_or_default();
        return match lines.get(i + 1) {
            Some(msg) => format!("{msg} (at {})", at.trim_end_matches(':')),
            None => lines[i].to_string(),
        };
    }
    lines.last().map(|l| l.to_string()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::{InvokeError, TailPipe, classify, short_stderr};
    use wasmtime::Trap;

    /// A trap reads "wasm trap: …" once; a stack overflow says so.
    #[test]
    fn a_trap_is_named_once() {
        let message =
            |trap: Trap| match classify("p", wasmtime::Error::from(trap), &TailPipe::new(64)) {
                InvokeError::Trap { message, .. } => message,
                other => panic!("not a trap: {other:?}"),
            };
        let m = message(Trap::IntegerDivisionByZero);
        assert_eq!(m.matches("wasm trap").count(), 1, "{m}");
        assert!(m.starts_with("wasm trap: "), "{m}");
        assert!(message(Trap::StackOverflow).contains("stack overflow"));
    }

    /// The host's own cause stays in the trap's source, under the one line
    /// the model reads, whatever wasmtime wrapped around it.
    #[test]
    fn a_trap_keeps_its_source() {
        use super::MemoryError;
        let error = wasmtime::Error::from(MemoryError::OverCap {
            plugin: "p".into(),
            desired: 1 << 30,
            cap: 1 << 20,
            setting: "`[limits] guest_memory_mb`",
        })
        .context("error while executing at wasm backtrace:\n    0: 0x1 - f");
        let e = classify("p", error, &TailPipe::new(64));
        let InvokeError::Trap { message, .. } = &e else {
            panic!("not a trap: {e:?}");
        };
        assert!(message.starts_with("plugin `p` asked for"), "{message}");
        assert!(!e.to_string().contains("backtrace"), "{e}");
        let mut chain = std::iter::successors(std::error::Error::source(&e), |e| e.source());
        assert!(
            chain.any(|c| matches!(
                c.downcast_ref::<MemoryError>(),
                Some(MemoryError::OverCap { cap, .. }) if *cap == 1 << 20
            )),
            "the MemoryError is not in the chain of {e:?}"
        );
    }

    #[test]
    fn one_line_of_stderr_for_the_model() {
        let rust = "thread '<unnamed>' panicked at src/lib.rs:5:9:\nboom\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(short_stderr(rust), "boom (at src/lib.rs:5:9)");
        let python = "Traceback (most recent call last):\n  File \"app.py\", line 3, in check\n    raise ValueError('bad')\nValueError: bad\n";
        assert_eq!(short_stderr(python), "ValueError: bad");
        let componentize_py = format!(
            "{python}thread '<unnamed>' panicked at runtime/src/lib.rs:1280:25:\nPython function threw an unexpected exception\n"
        );
        assert_eq!(short_stderr(&componentize_py), "ValueError: bad");
        let js = "Error: no path\npreExecute@hook.js:10:5\n@hook.js:20:1\n";
        assert_eq!(short_stderr(js), "Error: no path");
        assert_eq!(short_stderr(""), "");
    }
}
