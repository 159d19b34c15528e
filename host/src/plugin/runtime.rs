//! The one wasmtime engine of the process, its linker, and the epoch ticker.
//!
//! Engine choices (measured, see BENCHMARKS.md): the pooling allocator with
//! copy-on-write memory images makes a fresh instance cost microseconds;
//! `concurrency_support(false)` keeps plain calls at a fraction of a
//! microsecond (component-model async is not used); epoch interruption with
//! a ticker thread lets the host stop guest code that ignores its deadline.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig};

use super::cache::CompileCache;
use super::store::StoreData;
use crate::bindings::toolgate::plugin as imports;
use crate::error::HostError;

/// Engine-wide settings.
#[derive(Clone, Debug)]
pub struct RuntimeOptions {
    /// Interval of the epoch ticker: the granularity of deadlines for guest
    /// code that ignores them.
    pub epoch_tick: Duration,
    /// Most instances alive at once (pool slots).
    pub max_instances: u32,
    /// Largest linear memory any instance may have (per-plugin limits are
    /// lower; this sizes the pool).
    pub max_memory_bytes: usize,
    /// Where compiled components are cached; `None` disables the cache.
    pub cache_dir: Option<std::path::PathBuf>,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            epoch_tick: Duration::from_millis(10),
            max_instances: 1000,
            max_memory_bytes: 1 << 30,
            cache_dir: CompileCache::default_dir(),
        }
    }
}

/// The engine, the linker with every host import, and the ticker.
pub struct Runtime {
    pub engine: Engine,
    pub(crate) linker: Linker<StoreData>,
    pub(crate) cache: Option<CompileCache>,
    pub options: RuntimeOptions,
    ticker: Option<Ticker>,
}

impl Runtime {
    pub fn new(options: RuntimeOptions) -> Result<Arc<Runtime>, HostError> {
        let engine = Engine::new(&engine_config(&options)).map_err(HostError::engine)?;
        let mut linker = Linker::new(&engine);
        add_imports(&mut linker).map_err(HostError::engine)?;
        let cache = options.cache_dir.clone().map(CompileCache::new);
        let ticker = Ticker::start(engine.clone(), options.epoch_tick);
        Ok(Arc::new(Runtime {
            engine,
            linker,
            cache,
            options,
            ticker: Some(ticker),
        }))
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(t) = self.ticker.take() {
            t.stop();
        }
    }
}

fn engine_config(options: &RuntimeOptions) -> Config {
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(options.max_instances)
        .total_core_instances(options.max_instances * 4)
        .total_memories(options.max_instances * 2)
        .total_tables(options.max_instances * 4)
        .total_stacks(options.max_instances)
        .max_core_instances_per_component(64)
        .max_memories_per_component(16)
        .max_tables_per_component(64)
        .max_memory_size(options.max_memory_bytes);
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .concurrency_support(false)
        .epoch_interruption(true)
        .cranelift_opt_level(OptLevel::Speed)
        .parallel_compilation(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    config
}

fn add_imports(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    type D = HasSelf<StoreData>;
    imports::log::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::cancellation::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::deferred_context::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::pre_execute_chain::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::execute_chain::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::post_execute_chain::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::shell::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::subprocess::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::types::add_to_linker::<StoreData, D>(linker, |d| d)?;
    imports::process::add_to_linker::<StoreData, D>(linker, |d| d)?;
    Ok(())
}

/// Increments the engine's epoch every tick until stopped.
struct Ticker {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Ticker {
    fn start(engine: Engine, tick: Duration) -> Ticker {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("toolgate-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    engine.increment_epoch();
                }
            })
            .expect("spawning the epoch ticker thread");
        Ticker { stop, thread }
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
    }
}
