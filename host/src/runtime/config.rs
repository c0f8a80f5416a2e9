//! The runtime's settings: `[runtime]` (engine, call slots, pooling
//! allocator) and `[budget]`, with their checks; and a source's manifest
//! (`NAME.toml`: budget overrides, `[config]`, `[grants]`, `[handles]`),
//! which the loader reads and whose parts go to the capabilities that own them.

use super::capabilities::http::config::{HttpAsked, HttpGrantLimits};
use super::capabilities::{HandleLimits, SourceAsks};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Default guest budget per call.
pub const DEFAULT_FUEL: u64 = 500_000_000;
pub const DEFAULT_MAX_CALL_DURATION_MS: u64 = 5_000;
pub const DEFAULT_MEMORY_BYTES: u64 = 64 << 20;
/// `describe()` at startup gets this budget's deadline.
pub const STARTUP_CALL_DURATION_MS: u64 = 10_000;

/// Unless configured, the guest calls one caller (a principal; all
/// anonymous callers together) may run at once are this fraction of
/// `max_concurrent_calls` (32 of 64); as many more may wait for a slot.
pub const DEFAULT_CALLER_SHARE: (u32, u32) = (1, 2);
/// Unless configured, the guest calls one source may run at once are this
/// fraction of the pool (48 of 64): one slow source cannot hold every slot,
/// and one caller alone cannot take every slot of a source.
pub const DEFAULT_SOURCE_SHARE: (u32, u32) = (3, 4);
/// Default `[runtime] slot_wait_ms`: no cap of its own. A call waits for a
/// slot as long as its request's remaining time lets it still finish
/// (`runtime/slots.rs`, the admission rule); the wait does not count
/// against the guest's `max_duration_ms`.
pub const DEFAULT_SLOT_WAIT_MS: u64 = 0;
/// Default `[runtime] warm_instances`: instances kept for their caller's
/// next call (`runtime/warm.rs`), in all: the few callers a server serves
/// at a time, a few instances each.
pub const DEFAULT_WARM_INSTANCES: u32 = 16;
/// Most `[runtime] warm_instances` (each holds a pool instance and its memory).
pub const MAX_WARM_INSTANCES: u32 = 1024;
/// Default `[runtime] warm_max_calls`: calls one kept instance serves
/// before it is dropped (so what a guest's heap accumulates is bounded in
/// time too; at 2,000 pages/s, two instantiations a second).
pub const DEFAULT_WARM_MAX_CALLS: u32 = 1_000;
/// Default `[runtime] warm_idle_ms`: how long a kept instance waits for its
/// caller's next call (a client's next page comes within milliseconds).
pub const DEFAULT_WARM_IDLE_MS: u64 = 10_000;
/// Default `[runtime] warm_max_growth_bytes`: a kept instance's memory may
/// grow this much beyond what it had after its first call. Interpreters
/// settle after their first call (python-notes: 12.3 MiB, call after call);
/// the catalog's bump allocator never frees and would grow by a few KiB a
/// call up to its 1,000th (8 MiB an instance).
pub const DEFAULT_WARM_MAX_GROWTH_BYTES: u64 = 1 << 20;
/// Most `[runtime] guest_threads` (each is an OS thread with its runtime).
pub const MAX_GUEST_THREADS: u32 = 64;
/// Default `[runtime] guest_threads`: none, calls run on the request's
/// worker. Measured side by side in time (`benchmarks/alternate.sh`, 11
/// cells at C = 16 and 64 on 2 shared cores), the workers served 0.96-1.18x
/// the pages of one guest thread (median 1.05): the hand-over's wake-ups
/// cost more than the guest thread's warm caches saved.
pub const DEFAULT_GUEST_THREADS: u32 = 0;
/// Client connections open from which the server is busy: calls go to the
/// guest threads (if any; below it the hand-over's two wake-ups cost a lone
/// client more than it saves), and a call's teardown and the next standby
/// are no longer deferred past its response.
pub const DEFAULT_GUEST_THREADS_FROM_CONNECTIONS: u32 = 8;
/// Default `[runtime] standby_instances`: enough for the few sources a lone
/// client or a quiet server calls in turn.
pub const DEFAULT_STANDBY_INSTANCES: u32 = 4;
/// Most `[runtime] standby_instances` (each holds a pool instance).
pub const MAX_STANDBY_INSTANCES: u32 = 256;

/// The precompile cache's key, by default in the state directory.
pub const DEFAULT_CACHE_KEY_FILE: &str = "precompile-key";

/// Runtime defaults. The epoch tick bounds how late a looping guest is
/// stopped after its deadline or after its call is dropped.
pub const DEFAULT_EPOCH_TICK_US: u64 = 1_000;
pub const DEFAULT_MAX_CONCURRENT_CALLS: u32 = 64;
pub const DEFAULT_MAX_MEMORY_BYTES: u64 = 512 << 20;
/// Reset (not unmap) this much of each linear memory between calls: a
/// Python or JavaScript guest's whole heap (~10-13 MiB); only the part a
/// guest actually used is ever reset.
pub const DEFAULT_KEEP_RESIDENT_BYTES: u64 = 16 << 20;
/// A source idle this long gives its pool slots' memory back (`runtime::trim`).
pub const DEFAULT_IDLE_TRIM_S: u64 = 30;

/// A guest call's budget. The server's `[budget]` is the default; a source's
/// manifest may override each field.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct BudgetConfig {
    /// Fuel (roughly: wasm instructions) per call.
    pub fuel: u64,
    /// Cap on the wall-clock time of one call; the request's deadline may end it earlier.
    pub max_duration_ms: u64,
    /// Cap on the guest's linear memories plus host-side buffers it asked for.
    pub memory_bytes: u64,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        Self {
            fuel: DEFAULT_FUEL,
            max_duration_ms: DEFAULT_MAX_CALL_DURATION_MS,
            memory_bytes: DEFAULT_MEMORY_BYTES,
        }
    }
}

/// What [`RuntimeConfig::check`] refuses.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeProblem {
    #[error("{0} must be positive")]
    NotPositive(&'static str),
    #[error("runtime.guest_threads must be at most {MAX_GUEST_THREADS}")]
    GuestThreads,
    #[error("runtime.standby_instances must be at most {MAX_STANDBY_INSTANCES}")]
    StandbyInstances,
    #[error("runtime.warm_instances must be at most {MAX_WARM_INSTANCES}")]
    WarmInstances,
}

/// Manifest budget overrides: any field left out keeps the server default.
#[derive(Debug, Clone, Copy, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetOverrides {
    /// Fuel per call (default: the server's `[budget] fuel`).
    pub fuel: Option<u64>,
    /// Wall-clock cap of one call (default: the server's).
    pub max_duration_ms: Option<u64>,
    /// Memory cap of one call (default: the server's; at most
    /// `[runtime] max_memory_bytes`).
    pub memory_bytes: Option<u64>,
    /// This source's calls running at once (default and maximum: the
    /// runtime's `max_calls_per_source`). With `memory_bytes` it bounds the
    /// source's guest memory: at most `max_concurrent_calls × memory_bytes`.
    pub max_concurrent_calls: Option<u32>,
}

impl BudgetOverrides {
    pub fn apply(&self, base: BudgetConfig) -> BudgetConfig {
        BudgetConfig {
            fuel: self.fuel.unwrap_or(base.fuel),
            max_duration_ms: self.max_duration_ms.unwrap_or(base.max_duration_ms),
            memory_bytes: self.memory_bytes.unwrap_or(base.memory_bytes),
        }
    }
}

/// Engine and pooling-allocator settings (serialized for the compiler
/// process, which must build the very same engine).
#[derive(Debug, Clone, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeConfig {
    /// Epoch tick: a looping guest is stopped at most one tick after its
    /// deadline, a dropped call at its next tick.
    pub epoch_tick_us: u64,
    /// Guest calls running at once; further calls wait for a slot while
    /// their request's remaining time allows.
    #[schemars(range(min = 1))]
    pub max_concurrent_calls: u32,
    /// Guest calls one caller may run at once (and as many may wait);
    /// default: `DEFAULT_CALLER_SHARE` of the pool.
    pub max_calls_per_caller: Option<u32>,
    /// Guest calls one source may run at once; default: `DEFAULT_SOURCE_SHARE`.
    pub max_calls_per_source: Option<u32>,
    /// The longest a call waits for a slot before a retryable refusal; 0: no
    /// cap beyond the rule that a call waits only while its request's
    /// remaining time still lets it finish (estimated from the calls'
    /// observed service times; a queue longer than that is refused at once).
    pub slot_wait_ms: u64,
    /// Largest memory budget any source may have (sizes the pool's slots).
    pub max_memory_bytes: u64,
    /// Bytes of each linear memory kept resident (memset, not unmapped)
    /// between instances: faster reuse, more RSS.
    pub keep_resident_bytes: u64,
    /// Let wasmtime reset a slot through Linux's PAGEMAP_SCAN (kernel >=
    /// 6.7; older kernels reset without it). On: the scan finds the pages
    /// a slot's calls have touched (in memory or swapped out), and only
    /// those are rewritten; off, the first `keep_resident_bytes` of the
    /// memory are, touched or not. An interpreted guest's memory is mostly
    /// pages a call never touches (BENCHMARKS.md, twenty-second round).
    pub pagemap_scan: bool,
    /// Write `/tmp/perf-PID.map` (Linux) so that `perf` names the guests'
    /// compiled functions (`wasm[0]::function[7]::list`) instead of
    /// `[JIT]` addresses. Off: it is a diagnostic, written once per loaded
    /// component, and it holds guest-chosen names.
    pub perf_map: bool,
    /// A source without calls for this long is relinked, so that the pool
    /// memory its idle slots keep resident goes back to the OS (0: never).
    pub idle_trim_s: u64,
    /// Threads that run guest calls, handed over from the request's worker
    /// (`runtime/guest_threads.rs`); 0: calls always run on the worker.
    #[schemars(range(max = MAX_GUEST_THREADS))]
    pub guest_threads: u32,
    /// The server is busy while at least this many client connections are
    /// open (0: always): calls then go to the guest threads (if any), and a
    /// call's teardown is no longer deferred past its response, nor a
    /// standby made (`Runtime::busy`).
    pub guest_threads_from_connections: u32,
    /// Never-called instances kept ready, one per source at most, made after
    /// a call while the server is not busy (`runtime/standby.rs`); the pool
    /// holds this many instances beyond `max_concurrent_calls`. 0: none.
    #[schemars(range(max = MAX_STANDBY_INSTANCES))]
    pub standby_instances: u32,
    /// Instances kept after a verified caller's call for that caller's next
    /// call of the same source (`runtime/warm.rs`), in all; the pool holds
    /// this many instances beyond `max_concurrent_calls`. 0: every call
    /// gets a fresh instance.
    #[schemars(range(max = MAX_WARM_INSTANCES))]
    pub warm_instances: u32,
    /// Calls one kept instance serves before it is dropped.
    #[schemars(range(min = 1))]
    pub warm_max_calls: u32,
    /// How long a kept instance waits for its caller's next call before it
    /// is dropped.
    pub warm_idle_ms: u64,
    /// Linear memory a kept instance may grow beyond what it had after its
    /// first call; an instance that grew more is dropped, not kept.
    pub warm_max_growth_bytes: u64,
    /// Core instances, memories and tables one component may have
    /// (interpreted languages need more than Rust guests).
    pub max_core_instances_per_component: u32,
    /// Linear memories one component may have.
    pub max_memories_per_component: u32,
    /// Tables one component may have.
    pub max_tables_per_component: u32,
    /// Elements of one table.
    pub max_table_elements: usize,
    /// Bytes of VM metadata per core instance.
    pub max_core_instance_size: usize,
    /// Bytes of VM metadata per component instance.
    pub max_component_instance_size: usize,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            epoch_tick_us: DEFAULT_EPOCH_TICK_US,
            max_concurrent_calls: DEFAULT_MAX_CONCURRENT_CALLS,
            max_calls_per_caller: None,
            max_calls_per_source: None,
            slot_wait_ms: DEFAULT_SLOT_WAIT_MS,
            max_memory_bytes: DEFAULT_MAX_MEMORY_BYTES,
            keep_resident_bytes: DEFAULT_KEEP_RESIDENT_BYTES,
            pagemap_scan: true,
            perf_map: false,
            idle_trim_s: DEFAULT_IDLE_TRIM_S,
            guest_threads: DEFAULT_GUEST_THREADS,
            guest_threads_from_connections: DEFAULT_GUEST_THREADS_FROM_CONNECTIONS,
            standby_instances: DEFAULT_STANDBY_INSTANCES,
            warm_instances: DEFAULT_WARM_INSTANCES,
            warm_max_calls: DEFAULT_WARM_MAX_CALLS,
            warm_idle_ms: DEFAULT_WARM_IDLE_MS,
            warm_max_growth_bytes: DEFAULT_WARM_MAX_GROWTH_BYTES,
            max_core_instances_per_component: 64,
            max_memories_per_component: 16,
            max_tables_per_component: 16,
            max_table_elements: 100_000,
            max_core_instance_size: 4 << 20,
            max_component_instance_size: 4 << 20,
        }
    }
}

impl RuntimeConfig {
    fn share(&self, (num, den): (u32, u32)) -> u32 {
        (self.max_concurrent_calls * num / den).max(1)
    }

    pub fn check(&self) -> Result<(), RuntimeProblem> {
        use RuntimeProblem::NotPositive;
        let r = self;
        if r.epoch_tick_us == 0 || r.max_concurrent_calls == 0 {
            return Err(NotPositive(
                "runtime.epoch_tick_us and runtime.max_concurrent_calls",
            ));
        }
        if r.guest_threads > MAX_GUEST_THREADS {
            return Err(RuntimeProblem::GuestThreads);
        }
        if r.standby_instances > MAX_STANDBY_INSTANCES {
            return Err(RuntimeProblem::StandbyInstances);
        }
        if r.warm_instances > MAX_WARM_INSTANCES {
            return Err(RuntimeProblem::WarmInstances);
        }
        if r.warm_max_calls == 0 {
            return Err(NotPositive("runtime.warm_max_calls"));
        }
        if r.max_calls_per_caller == Some(0) || r.max_calls_per_source == Some(0) {
            return Err(NotPositive(
                "runtime.max_calls_per_caller and runtime.max_calls_per_source",
            ));
        }
        Ok(())
    }

    /// Guest calls one caller may run at once.
    pub fn calls_per_caller(&self) -> u32 {
        self.max_calls_per_caller
            .unwrap_or_else(|| self.share(DEFAULT_CALLER_SHARE))
    }

    /// Guest calls one source may run at once.
    pub fn calls_per_source(&self) -> u32 {
        self.max_calls_per_source
            .unwrap_or_else(|| self.share(DEFAULT_SOURCE_SHARE))
    }
}

pub fn check_budget(budget: &BudgetConfig, max_memory: u64) -> Result<(), BudgetProblem> {
    if budget.fuel == 0 || budget.max_duration_ms == 0 || budget.memory_bytes == 0 {
        return Err(BudgetProblem::NotPositive);
    }
    if budget.memory_bytes > max_memory {
        return Err(BudgetProblem::OverMemory {
            memory_bytes: budget.memory_bytes,
            max_memory_bytes: max_memory,
        });
    }
    Ok(())
}

/// A `[budget]` (the server's, or a source manifest's after it applies).
#[derive(Debug, thiserror::Error)]
pub enum BudgetProblem {
    #[error("fuel, max_duration_ms and memory_bytes must be positive")]
    NotPositive,
    #[error("memory_bytes {memory_bytes} exceeds runtime.max_memory_bytes {max_memory_bytes}")]
    OverMemory {
        memory_bytes: u64,
        max_memory_bytes: u64,
    },
}

/// A source's manifest, `NAME.toml` beside `NAME.wasm`.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceManifest {
    #[serde(default)]
    pub budget: BudgetOverrides,
    /// Static key/value configuration the guest reads through `config.get`.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    #[serde(default)]
    pub grants: Grants,
    /// Per-call handle bounds (SQL connections, outbound requests in
    /// flight, resource-table entries); defaults in `capabilities/handles.rs`.
    #[serde(default)]
    pub handles: HandleLimits,
}

/// Capabilities granted to one source. Nothing is reachable without a grant.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Grants {
    /// Database labels from the server's `[databases]`.
    #[serde(default)]
    pub databases: Vec<String>,
    /// Directory labels from the server's `[directories]`, preopened read-only.
    #[serde(default)]
    pub directories: Vec<String>,
    /// Outbound HTTP origins, `scheme://host[:port]`.
    #[serde(default)]
    pub http: Vec<String>,
    /// Outbound HTTP caps.
    #[serde(default)]
    pub http_limits: HttpGrantLimits,
}

/// A manifest that cannot be read or parsed: said as a config file's error is.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
}

impl ManifestError {
    /// The file at fault.
    pub fn path(&self) -> &Path {
        match self {
            ManifestError::Read { path, .. } | ManifestError::Parse { path, .. } => path,
        }
    }

    /// What is wrong with it, without the file name.
    pub fn reason(&self) -> String {
        match self {
            ManifestError::Read { source, .. } => source.to_string(),
            ManifestError::Parse { message, .. } => message.clone(),
        }
    }
}

impl SourceManifest {
    /// What this manifest asks of each capability: each gets its own part.
    pub fn asks(&self) -> SourceAsks<'_> {
        SourceAsks {
            wasi: &self.grants.directories,
            http: HttpAsked {
                origins: &self.grants.http,
                limits: self.grants.http_limits,
            },
            config: &self.config,
            sql: &self.grants.databases,
            handles: self.handles,
        }
    }

    pub fn load(path: &Path) -> Result<SourceManifest, ManifestError> {
        let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// A manifest from bytes already read (the ones its signature was
    /// checked over), `path` naming it in errors.
    pub fn parse(path: &Path, text: &str) -> Result<SourceManifest, ManifestError> {
        crate::toml_file::parse_toml(text).map_err(|message| ManifestError::Parse {
            path: path.to_owned(),
            message,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_overrides_budget() {
        let m: SourceManifest =
            toml::from_str("[budget]\nfuel = 7\n[config]\nitems = '3'\n").unwrap();
        let b = m.budget.apply(BudgetConfig::default());
        assert_eq!(b.fuel, 7);
        assert_eq!(b.memory_bytes, DEFAULT_MEMORY_BYTES);
        assert!(toml::from_str::<SourceManifest>("[budgett]\n").is_err());
    }
}
