//! The one wasmtime `Engine` of the process, its `Linker`, the epoch ticker
//! and the slots that bound concurrent guest calls (fairly: `slots.rs`).

use super::capabilities;
use super::guest_threads::GuestThreads;
use super::host_state::HostState;
use super::slots::{SlotLimits, Slots};
use super::standby::StandbyBound;
use super::warm::{WarmLimits, WarmPool};
use crate::runtime::config::RuntimeConfig;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use wasmtime::component::Linker;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// The wasmtime release this binary embeds (`emseepea_build_info`).
pub const WASMTIME_VERSION: &str = wasmtime_release!();

/// Instances reserved beyond `max_concurrent_calls`, the standbys and the
/// kept instances (startup
/// `describe` calls, a call finishing while the next starts).
const SPARE_INSTANCES: u32 = 8;

/// Why the runtime could not be set up (startup only).
#[derive(Debug, thiserror::Error)]
pub enum RuntimeSetupError {
    /// wasmtime refused the engine configuration (the pool's sizes against
    /// the machine's address space, a feature the CPU lacks).
    #[error("creating the wasmtime engine: {}", one_line_chain(.0))]
    Engine(wasmtime::Error),
    /// Two capabilities define the same import (a host bug, caught at start).
    #[error("linking the host's imports: {}", one_line_chain(.0))]
    Linker(wasmtime::Error),
    #[error("starting the guest threads: {0}")]
    GuestThreads(std::io::Error),
}

/// wasmtime's error with its causes, on one line.
pub(crate) fn one_line_chain(e: &wasmtime::Error) -> String {
    crate::toml_file::one_line(&format!("{e:#}"))
}

pub struct Runtime {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<HostState>,
    /// One slot per concurrently running guest call, shared fairly between
    /// callers and sources: the pool has exactly this many instances
    /// (+ spares), so a call waits (briefly) instead of failing to instantiate.
    pub(crate) slots: Arc<Slots>,
    pub(crate) ticker: EpochTicker,
    /// Where guest calls run when `[runtime] guest_threads` > 0.
    pub(crate) guest_threads: Option<GuestThreads>,
    /// How many never-called instances may be kept ready (`standby.rs`).
    pub(crate) standbys: Arc<StandbyBound>,
    /// Instances kept for their caller's next call (`warm.rs`).
    pub(crate) warm: WarmPool,
    /// Client connections open, counted by the listener: whether the server
    /// is busy (`guest_threads_from_connections`, [`Runtime::busy`]).
    open_connections: Arc<AtomicUsize>,
    busy_from_connections: usize,
}

impl Runtime {
    pub fn new(config: &RuntimeConfig) -> Result<Self, RuntimeSetupError> {
        let engine = build_engine(config)?;
        let mut linker = Linker::new(&engine);
        capabilities::add_to_linker(&mut linker).map_err(RuntimeSetupError::Linker)?;
        let ticker =
            EpochTicker::start(engine.clone(), Duration::from_micros(config.epoch_tick_us));
        let open_connections = Arc::new(AtomicUsize::new(0));
        Ok(Self {
            engine,
            linker,
            slots: Slots::new(SlotLimits {
                total: config.max_concurrent_calls as usize,
                per_caller: config.calls_per_caller() as usize,
                per_source: config.calls_per_source() as usize,
                max_wait: (config.slot_wait_ms > 0)
                    .then(|| Duration::from_millis(config.slot_wait_ms)),
            }),
            ticker,
            guest_threads: GuestThreads::start(config.guest_threads)
                .map_err(RuntimeSetupError::GuestThreads)?,
            standbys: StandbyBound::new(config.standby_instances as usize),
            warm: WarmPool::new(WarmLimits {
                instances: config.warm_instances as usize,
                max_calls: config.warm_max_calls,
                idle: Duration::from_millis(config.warm_idle_ms),
                max_growth: config.warm_max_growth_bytes,
            }),
            open_connections,
            busy_from_connections: config.guest_threads_from_connections as usize,
        })
    }

    /// Where the listener counts its open connections
    /// (`listener::ConnectionLimits`); a runtime without a listener has none.
    pub fn open_connections(&self) -> Arc<AtomicUsize> {
        self.open_connections.clone()
    }

    /// Whether at least `guest_threads_from_connections` clients are
    /// connected. Busy, a call goes to a guest thread (if there are any) and
    /// its store is dropped where it ran; not busy, it runs on the request's
    /// worker and its teardown waits until the response is on its way
    /// (`call.rs`, `Spent`): a lone client does not wait for it.
    pub(crate) fn busy(&self) -> bool {
        self.open_connections.load(Ordering::Relaxed) >= self.busy_from_connections
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Drop the kept instances that waited `warm_idle_ms` for their caller
    /// (the server's sweeper); how many.
    pub fn expire_warm_instances(&self) -> usize {
        self.warm.expire()
    }

    /// How often the sweeper looks: a kept instance outlives its idle time
    /// by at most this.
    pub fn warm_sweep_period(&self) -> Option<Duration> {
        self.warm.enabled().then(|| {
            (self.warm.idle() / 2).clamp(Duration::from_millis(100), Duration::from_secs(5))
        })
    }

    /// The epoch tick: the bound on how late a running guest notices its
    /// deadline or the drop of its call.
    pub fn tick(&self) -> Duration {
        self.ticker.period
    }
}

pub(crate) fn build_engine(rc: &RuntimeConfig) -> Result<Engine, RuntimeSetupError> {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.consume_fuel(true);
    config.epoch_interruption(true);
    // Guests' native stack use is bounded; a runaway recursion traps with
    // `StackOverflow` long before the async fiber stack (2 MiB) is at risk.
    config.max_wasm_stack(512 * 1024);
    if rc.perf_map {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    // Calls instantiate often (anonymous callers, new callers, kept
    // instances retired), so initial memory must come from a
    // copy-on-write image, never from copying data segments. Interpreters
    // (CPython, SpiderMonkey) have large, sparse pre-initialized heaps that
    // the default 16 MiB would leave to per-call copying.
    config.memory_guaranteed_dense_image_size(rc.max_memory_bytes);
    let instances =
        rc.max_concurrent_calls + SPARE_INSTANCES + rc.standby_instances + rc.warm_instances;
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(instances)
        .total_core_instances(instances * rc.max_core_instances_per_component.min(16))
        .total_memories(instances * rc.max_memories_per_component.min(4))
        .total_tables(instances * rc.max_tables_per_component.min(4))
        .total_stacks(instances)
        .max_core_instances_per_component(rc.max_core_instances_per_component)
        .max_memories_per_component(rc.max_memories_per_component)
        .max_tables_per_component(rc.max_tables_per_component)
        .table_elements(rc.max_table_elements)
        .max_memory_size(rc.max_memory_bytes as usize)
        .max_core_instance_size(rc.max_core_instance_size)
        .max_component_instance_size(rc.max_component_instance_size)
        .linear_memory_keep_resident(rc.keep_resident_bytes as usize)
        // Without the scan a slot's reset rewrites the first
        // `keep_resident_bytes` of its memory and unmaps the rest. With it,
        // only the pages the scan reports: since wasmtime 50.0.2 those
        // written and present *or swapped out* (48's skipped a swapped-out
        // page, which kept the last caller's data for the next one; 50.0.1's
        // reported every page, touched or not). `RuntimeConfig::pagemap_scan`.
        .pagemap_scan(if rc.pagemap_scan {
            wasmtime::Enabled::Auto
        } else {
            wasmtime::Enabled::No
        })
        .table_keep_resident(64 * 1024);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Engine::new(&config).map_err(RuntimeSetupError::Engine)
}

/// Consecutive ticks without a running guest after which the ticker parks
/// (an idle server does not wake a thousand times a second); the next call
/// wakes it. Long enough that back-to-back calls at low concurrency do not
/// pay a wake-up each.
const IDLE_TICKS_BEFORE_PARKING: u32 = 1_000;

/// Increments the engine's epoch every `period` on a dedicated thread while
/// guests run (see [`Ticking`]); the thread ends when the ticker is dropped.
pub(crate) struct EpochTicker {
    period: Duration,
    shared: Arc<TickerShared>,
    thread: std::thread::Thread,
}

struct TickerShared {
    stop: AtomicBool,
    /// Guest calls that hold a [`Ticking`].
    running: AtomicUsize,
    /// Set by the thread before it parks; whoever clears it unparks it.
    parked: AtomicBool,
}

impl EpochTicker {
    fn start(engine: Engine, period: Duration) -> Self {
        let shared = Arc::new(TickerShared {
            stop: AtomicBool::new(false),
            running: AtomicUsize::new(0),
            parked: AtomicBool::new(false),
        });
        let s = shared.clone();
        let handle = std::thread::Builder::new()
            .name("emseepea-epoch".into())
            .spawn(move || {
                let mut idle_ticks = 0u32;
                while !s.stop.load(Ordering::Relaxed) {
                    std::thread::sleep(period);
                    engine.increment_epoch();
                    if s.running.load(Ordering::SeqCst) > 0 {
                        idle_ticks = 0;
                        continue;
                    }
                    idle_ticks += 1;
                    if idle_ticks < IDLE_TICKS_BEFORE_PARKING {
                        continue;
                    }
                    // Announce the park, then look again: a call that
                    // started in between either sees `parked` and unparks
                    // us (a pending unpark makes `park` return at once), or
                    // is seen here.
                    s.parked.store(true, Ordering::SeqCst);
                    if s.running.load(Ordering::SeqCst) == 0 {
                        std::thread::park();
                    }
                    s.parked.store(false, Ordering::SeqCst);
                    idle_ticks = 0;
                }
            })
            .expect("spawning the epoch thread");
        Self {
            period,
            shared,
            thread: handle.thread().clone(),
        }
    }

    /// Keep the epoch ticking for as long as the returned guard lives: held
    /// by every guest call from before it instantiates.
    pub(crate) fn ticking(&self) -> Ticking<'_> {
        self.shared.running.fetch_add(1, Ordering::SeqCst);
        // A load first: the common case (ticking) writes no shared line.
        if self.shared.parked.load(Ordering::SeqCst)
            && self.shared.parked.swap(false, Ordering::SeqCst)
        {
            self.thread.unpark();
        }
        Ticking(self)
    }
}

/// A running guest call, for the ticker (see [`EpochTicker::ticking`]).
pub(crate) struct Ticking<'a>(&'a EpochTicker);

impl Drop for Ticking<'_> {
    fn drop(&mut self) {
        self.0.shared.running.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.thread.unpark();
    }
}

#[cfg(test)]
mod tests {
    /// The wasmtime Cargo.lock resolves, which `WASMTIME_VERSION` must name.
    fn locked_wasmtime() -> String {
        let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.lock"))
            .expect("the workspace's Cargo.lock");
        lock.split("[[package]]")
            .find(|block| block.lines().any(|l| l == r#"name = "wasmtime""#))
            .and_then(|block| block.lines().find_map(|l| l.strip_prefix("version = ")))
            .map(|v| v.trim_matches('"').to_owned())
            .expect("wasmtime in Cargo.lock")
    }

    #[test]
    fn the_reported_wasmtime_version_is_the_locked_one() {
        let locked = locked_wasmtime();
        assert_eq!(
            super::WASMTIME_VERSION,
            locked,
            "wasmtime changed: re-audit runtime/page.rs and runtime/contents.rs (their \
             `component::__internal` lifts, ARCHITECTURE.md) and the pool reset \
             (tests/isolation.rs), then update `wasmtime_release!` in lib.rs"
        );
        assert!(crate::VERSION.ends_with(&format!("(wasmtime {locked})")));
    }
}
