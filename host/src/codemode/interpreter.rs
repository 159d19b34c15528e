//! The `run_code` interpreter: Boa (a JavaScript engine in Rust) compiled
//! to a `wasm32-wasip2` component (`plugins/run-code`, the `code-interpreter` world), run by
//! the host itself rather than by the plugin loader — it is no role, and
//! its one import (`tool-calls`) reaches the pipeline.
//!
//! Containment, in the order a program meets it:
//! * a fresh instance per program (nothing survives a run), on the host's
//!   engine: the same pooling allocator, the same epoch ticker;
//! * WASI served empty: no preopened directory, no environment variable,
//!   no socket (TCP, UDP and name lookup refused), stdout and stderr
//!   dropped — what the language runtime imports resolves, and reaches
//!   nothing;
//! * memory capped by the store's limit (a trap: Boa has no heap limit of
//!   its own), which also draws from the host-wide budget of all instances
//!   (`[limits] guest_memory_mb`), like every plugin instance; deep
//!   recursion is Boa's own `RangeError` (its call stack is on the heap);
//! * wall time: the program's signal (the caller's cancellation fused with
//!   the call's deadline and `timeoutMs`) is read by the epoch callback,
//!   which traps an endless loop within one tick, and raced by the host,
//!   which drops a program blocked in a nested call.
//!
//! The component's machine code is made with the binary (the build script
//! precompiles it with the built-in plugins, `plugin::precompiled`) and
//! deserialised once per host, on first use; only where this engine does
//! not match the build's is it compiled then (through the compile cache
//! when there is one). Every program after that only instantiates it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::OnceCell;
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Engine, Store, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::nested::Nested;
use super::{Limits, failure};
use crate::bindings::code_mode::exports::toolgate::plugin::code_runner;
use crate::bindings::code_mode::{CodeInterpreter, CodeInterpreterPre};
use crate::call::{CallSignal, Interrupt};
use crate::plugin::Runtime;
use crate::plugin::memory::MemoryLimiter;
use crate::tool::BodyError;

/// The component, built by `host/build.rs` from `plugins/run-code`.
pub static COMPONENT: &[u8] = include_bytes!(env!("TOOLGATE_RUN_CODE_WASM"));
/// Its name in the table of precompiled code (its directory's).
const INTERPRETER_NAME: &str = "run-code";

/// How long a program's nested calls, cancelled with it, may take to drain
/// before the program is dropped regardless.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// What one program's store holds.
pub struct CodeStore {
    wasi: WasiCtx,
    table: ResourceTable,
    /// The program's cap (`[run_code] memory_mb`), drawn from the host-wide
    /// budget every plugin instance draws from (`[limits] guest_memory_mb`).
    limits: MemoryLimiter,
    signal: CallSignal,
    pub(super) nested: Nested,
}

impl WasiView for CodeStore {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// The error the epoch callback traps with.
#[derive(Debug, thiserror::Error)]
#[error("the program was interrupted: {0:?}")]
struct Stopped(Interrupt);

/// The compiled interpreter, ready to instantiate.
pub struct Interpreter {
    runtime: Arc<Runtime>,
    engine: Engine,
    pre: OnceCell<CodeInterpreterPre<CodeStore>>,
}

/// A program that ran (to its end, or to its own failure).
pub struct Ran(Result<code_runner::Finished, code_runner::Failed>, usize);

impl Interpreter {
    pub fn new(runtime: Arc<Runtime>) -> Self {
        Interpreter {
            engine: runtime.engine.clone(),
            runtime,
            pre: OnceCell::new(),
        }
    }

    /// Compile (or read from the cache) and link, once; returns how long
    /// this call waited.
    pub async fn warm_up(&self) -> Result<Duration, BodyError> {
        let started = Instant::now();
        self.pre().await?;
        Ok(started.elapsed())
    }

    async fn pre(&self) -> Result<&CodeInterpreterPre<CodeStore>, BodyError> {
        self.pre
            .get_or_try_init(|| async {
                let runtime = self.runtime.clone();
                // Compiled with the binary (`plugin::precompiled`) where
                // this engine matches the build's; else compiled here.
                let component = tokio::task::spawn_blocking(move || {
                    if let Some(c) = crate::plugin::precompiled::precompiled(
                        &runtime.engine,
                        INTERPRETER_NAME,
                        COMPONENT,
                    ) {
                        return Ok(c);
                    }
                    match &runtime.cache {
                        Some(cache) => cache.load_or_compile(&runtime.engine, COMPONENT),
                        None => Component::new(&runtime.engine, COMPONENT),
                    }
                })
                .await
                .map_err(|e| Setup::failed("compiling the interpreter", e.into()))?
                .map_err(|e| Setup::failed("compiling the interpreter", e))?;
                let mut linker = Linker::<CodeStore>::new(&self.engine);
                wasmtime_wasi::p2::add_to_linker_async(&mut linker)
                    .map_err(|e| Setup::failed("linking WASI", e))?;
                CodeInterpreter::add_to_linker::<CodeStore, HasSelf<CodeStore>>(&mut linker, |s| s)
                    .map_err(|e| Setup::failed("linking tool-calls", e))?;
                linker
                    .instantiate_pre(&component)
                    .and_then(CodeInterpreterPre::new)
                    .map_err(|e| Setup::failed("the interpreter does not link", e))
            })
            .await
    }

    /// Run one program under `signal`.
    pub async fn run(
        &self,
        code: &str,
        limits: &Limits,
        signal: CallSignal,
        nested: Nested,
    ) -> Result<Ran, BodyError> {
        let pre = self.pre().await?;
        let mut wasi = WasiCtx::builder();
        wasi.allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        let data = CodeStore {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            limits: MemoryLimiter::new(
                "run_code".into(),
                limits.memory_bytes,
                self.runtime.memory.clone(),
            )
            .cap_set_by("`[run_code] memory_mb`"),
            signal: signal.clone(),
            nested,
        };
        let mut store = Store::new(&self.engine, data);
        store.limiter(|d| &mut d.limits);
        store.epoch_deadline_callback(|ctx| match ctx.data().signal.fired() {
            Some(i) => Err(Stopped(i).into()),
            None => Ok(UpdateDeadline::Yield(1)),
        });
        store.set_epoch_deadline(1);
        let settings = code_runner::Settings {
            max_output_bytes: u32::try_from(limits.max_output_bytes).unwrap_or(u32::MAX),
            // A hint for an engine with a heap limit of its own (kept below
            // the store's cap so that running out would be an exception the
            // program sees); Boa has none, the store's cap is the bound.
            memory_bytes: (limits.memory_bytes as u64).saturating_mul(3) / 4,
        };
        let program = async {
            let instance = pre.instantiate_async(&mut store).await?;
            let ran = instance
                .toolgate_plugin_code_runner()
                .call_run(&mut store, code, settings)
                .await?;
            Ok::<_, wasmtime::Error>(ran)
        };
        // Running Wasm is trapped by the epoch callback once the signal
        // fires; a program waiting in `call-batch` returns as soon as its
        // batch, cancelled with it, has drained — so that every nested call
        // that started is committed (observers see it). The backstop only
        // bounds a batch that would not drain.
        let backstop = async {
            let interrupt = signal.wait().await;
            tokio::time::sleep(DRAIN_GRACE).await;
            interrupt
        };
        let answer = tokio::select! {
            biased;
            ran = program => Ok(ran),
            interrupt = backstop => Err(interrupt),
        };
        let used = store.data().nested.used();
        match answer {
            Err(interrupt) => Err(BodyError::Interrupted(interrupt)),
            // Finished in the instant after its deadline (a caught
            // `ABORTED` from a cancelled batch): still too late.
            Ok(Ok(_)) if signal.fired().is_some() => Err(BodyError::Interrupted(
                signal.fired().unwrap_or(Interrupt::DeadlineExceeded),
            )),
            Ok(Ok(ran)) => Ok(Ran(ran, used)),
            Ok(Err(error)) => {
                if let Some(Stopped(i)) = error.chain().find_map(|e| e.downcast_ref::<Stopped>()) {
                    return Err(BodyError::Interrupted(*i));
                }
                if let Some(i) = signal.fired() {
                    return Err(BodyError::Interrupted(i));
                }
                Err(BodyError::Trapped(crate::Cause::new(Crashed(error))))
            }
        }
    }
}

impl Ran {
    /// The canonical value `{output, outputTruncated, result, calls}`, or
    /// the program's failure (syntax error, uncaught exception: with its
    /// line and column).
    // `BodyError` is what every tool body returns; boxing it here alone
    // would buy nothing.
    #[allow(clippy::result_large_err)]
    pub fn into_value(self, limits: &Limits) -> Result<Value, BodyError> {
        let Ran(ran, calls) = self;
        match ran {
            Ok(finished) => {
                let result = match &finished.value {
                    None => Value::Null,
                    Some(text) if text.len() > limits.max_output_bytes => {
                        return Err(failure(
                            "OUTPUT_TOO_LARGE",
                            format!(
                                "the program's return value is {} bytes of JSON, more than the limit of {} bytes ([run_code] max_output_kb); return less, or print a summary",
                                text.len(),
                                limits.max_output_bytes
                            ),
                        ));
                    }
                    Some(text) => serde_json::from_str(text).map_err(|e| {
                        failure(
                            "BAD_VALUE",
                            format!("the return value is not JSON the host accepts: {e}"),
                        )
                    })?,
                };
                Ok(json!({
                    "output": finished.output,
                    "outputTruncated": finished.output_truncated,
                    "result": result,
                    "calls": calls,
                }))
            }
            Err(failed) => {
                use code_runner::FailureKind as K;
                let (code, what) = match failed.kind {
                    K::SyntaxError => ("SYNTAX_ERROR", "the program does not parse"),
                    K::Uncaught => ("UNCAUGHT_EXCEPTION", "the program threw"),
                    K::Stalled => ("STALLED", "the program stalled"),
                    K::BadValue => ("BAD_VALUE", "the program's return value is not JSON"),
                };
                let at = match (failed.line, failed.column) {
                    (Some(l), Some(c)) => format!(" at line {l}, column {c}"),
                    (Some(l), None) => format!(" at line {l}"),
                    _ => String::new(),
                };
                let mut message = format!("{what}{at}: {}", failed.message);
                if !failed.output.is_empty() {
                    message.push_str(&format!(
                        "\nOutput before it stopped:\n{}{}",
                        failed.output,
                        if failed.output_truncated {
                            "\n[output truncated]"
                        } else {
                            ""
                        }
                    ));
                }
                Err(BodyError::Failure(crate::tool::ToolFailure {
                    name: "CodeError".into(),
                    code: code.into(),
                    message,
                    details: Some(json!({
                        "line": failed.line,
                        "column": failed.column,
                        "error": failed.message,
                        "calls": calls,
                    })),
                }))
            }
        }
    }
}

/// The program's only way out.
impl crate::bindings::code_mode::toolgate::plugin::tool_calls::Host for CodeStore {
    async fn call_batch(
        &mut self,
        calls: Vec<crate::bindings::code_mode::toolgate::plugin::tool_calls::Request>,
    ) -> wasmtime::Result<
        Vec<Result<String, crate::bindings::code_mode::toolgate::plugin::tool_calls::Failure>>,
    > {
        Ok(self.nested.run(calls).await)
    }
}

/// Sizes for the README and BENCHMARKS: the component's bytes.
pub fn component_size() -> usize {
    COMPONENT.len()
}

/// The interpreter trapped: its root cause is what the model reads; the
/// whole error (the guest's backtrace) is kept as the source.
#[derive(Debug, thiserror::Error)]
#[error("the interpreter stopped: {}", .0.root_cause())]
struct Crashed(#[source] wasmtime::Error);

/// A step of preparing the interpreter that failed (a host failure, not
/// the program's): the step, and the error kept as the source.
#[derive(Debug, thiserror::Error)]
#[error("{step}: {source:#}")]
struct Setup {
    step: &'static str,
    #[source]
    source: wasmtime::Error,
}

impl Setup {
    fn failed(step: &'static str, source: wasmtime::Error) -> BodyError {
        BodyError::Internal(crate::Cause::new(Setup { step, source }))
    }
}
