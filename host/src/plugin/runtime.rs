//! The wasmtime engine of a host, its linkers, the instance memory budget
//! and the epoch ticker.
//!
//! Engine choices (measured, see BENCHMARKS.md): the pooling allocator with
//! copy-on-write memory images makes a fresh instance cost microseconds;
//! `concurrency_support(false)` keeps plain calls at a fraction of a
//! microsecond (component-model async is not used); epoch interruption with
//! a ticker thread lets the host stop guest code that ignores its deadline,
//! on a fiber and on the synchronous path alike.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::cache::CompileCache;
use super::contract::Linkers;
use super::memory::{self, MemoryBudget};
use crate::budgets::Budgets;
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
    /// lower; this sizes the pool's slots). A grant above it is a
    /// configuration error.
    pub max_memory_bytes: usize,
    /// Bytes of linear memory all instances together may hold
    /// ([`Budgets::guest_memory_bytes`]).
    pub guest_memory_bytes: usize,
    /// Where compiled components are cached; `None` disables the cache.
    pub cache_dir: Option<std::path::PathBuf>,
    /// The host's state directory ([`crate::state`]): the compile cache's
    /// key and the journal of protected paths. `None`: no journal, and no
    /// compile cache (it has nowhere safe for its key).
    pub state_dir: Option<std::path::PathBuf>,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            epoch_tick: Duration::from_millis(10),
            max_instances: 1000,
            max_memory_bytes: crate::grants::MAX_INSTANCE_MEMORY_MB << 20,
            guest_memory_bytes: Budgets::default().guest_memory_bytes,
            cache_dir: CompileCache::default_dir(),
            state_dir: crate::state::default_dir(),
        }
    }
}

/// The engine, the linkers with every host import, the memory budget and
/// the ticker.
pub struct Runtime {
    pub engine: Engine,
    pub(crate) linkers: Linkers,
    pub(crate) cache: Option<CompileCache>,
    /// The state directory, opened and checked.
    pub state: Option<crate::state::StateDir>,
    /// What all instances' memory is drawn from.
    pub memory: Arc<MemoryBudget>,
    pub options: RuntimeOptions,
    ticker: Option<Ticker>,
}

impl Runtime {
    /// A runtime with `options`, its state directory opened from
    /// `options.state_dir`.
    pub fn new(options: RuntimeOptions) -> Result<Arc<Runtime>, HostError> {
        let state = match &options.state_dir {
            Some(d) => Some(crate::state::StateDir::open(d)?),
            None => None,
        };
        Self::with_state(options, state)
    }

    /// A runtime with `options` and the state directory `state`, already
    /// opened and checked (the host's builder opens it once for all its
    /// parts).
    pub fn with_state(
        options: RuntimeOptions,
        state: Option<crate::state::StateDir>,
    ) -> Result<Arc<Runtime>, HostError> {
        let engine = Engine::new(&engine_config(&options)).map_err(HostError::Engine)?;
        let linkers = Linkers::new(&engine).map_err(HostError::Engine)?;
        let key_dir = state.as_ref().map(|s| s.path().to_path_buf());
        let cache = options
            .cache_dir
            .clone()
            .map(|d| CompileCache::new(d, key_dir.clone()));
        let ticker = Ticker::start(engine.clone(), options.epoch_tick);
        Ok(Arc::new(Runtime {
            engine,
            linkers,
            cache,
            state,
            memory: MemoryBudget::new(options.guest_memory_bytes),
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
        .max_core_instances_per_component(memory::MAX_INSTANCES as u32)
        .max_memories_per_component(memory::MAX_MEMORIES as u32)
        .max_tables_per_component(memory::MAX_TABLES as u32)
        .max_memory_size(options.max_memory_bytes);
    let mut config = Config::new();
    // What shapes the code is set in `codegen`, shared with the build
    // script that precompiles the built-ins.
    super::codegen::configure(&mut config)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    config
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
