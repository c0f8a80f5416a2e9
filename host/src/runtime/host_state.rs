//! The per-call store data: the resource table, memory accounting, the
//! call's deadline and cancellation, and the state of each capability.

use super::budget::{Budget, MemoryCapTrap};
use super::capabilities::{CallCapabilities, CallView};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;
use tokio_util::sync::CancellationToken;
use wasmtime::component::ResourceTable;

/// Why a host function cannot find its call's state: it ran while the
/// instance was parked, which the runtime never lets happen.
pub(crate) const PARKED: &str = "a host function ran in a parked instance";

pub struct HostState {
    pub(crate) table: ResourceTable,
    pub(crate) memory: MemoryAccount,
    /// `None` only while the instance is parked between two calls of one
    /// caller (`warm.rs`): no export runs then, so no host function asks.
    pub(crate) capabilities: Option<CallCapabilities>,
    /// The call's deadline and cancellation, for host functions that wait
    /// on backends (they must stop with the call).
    pub(crate) deadline: Instant,
    pub(crate) cancel: CancellationToken,
}

impl HostState {
    /// A call's (or a standby's) data under `budget`.
    pub(crate) fn new(
        capabilities: CallCapabilities,
        budget: &Budget,
        cancel: CancellationToken,
    ) -> Self {
        let mut table = ResourceTable::new();
        table.set_max_capacity(capabilities.handles.table_entries);
        HostState {
            table,
            memory: MemoryAccount::new(budget.memory_bytes),
            capabilities: Some(capabilities),
            deadline: budget.deadline,
            cancel,
        }
    }

    /// Drop everything of the finished call but the instance's own memory:
    /// its resources (connections, requests in flight, streams) and each
    /// capability's state. Kept this way, an instance holds nothing its
    /// caller's next call, or anyone else, could reach through the host.
    pub(crate) fn park(&mut self) {
        self.table = ResourceTable::new();
        self.capabilities = None;
    }

    /// One capability's view of this call: `pick` chooses its state.
    pub(crate) fn view<S>(
        &mut self,
        pick: impl FnOnce(&mut CallCapabilities) -> &mut S,
    ) -> CallView<'_, S> {
        CallView {
            state: pick(self.capabilities.as_mut().expect(PARKED)),
            table: &mut self.table,
            memory: &mut self.memory,
            deadline: self.deadline,
            cancel: &self.cancel,
        }
    }
}
/// Counts every byte of linear memory the instance grows, plus host-side
/// buffers made on its behalf (e.g. SQLite rows, outbound request bodies),
/// against one cap. [`MemoryAccount::share`] hands the same account to work
/// that runs off the store (an outbound request's task): what it charges
/// and releases is the call's.
#[derive(Debug)]
pub struct MemoryAccount {
    cap: u64,
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    used: AtomicU64,
    /// Of `used`, what the instance's memories grew by: what it keeps
    /// when it is kept for its caller's next call (`warm.rs`).
    linear: AtomicU64,
    /// Set when a growth or charge was refused: the call's failure is then
    /// reported as a memory-cap failure whatever the guest did next.
    exceeded: AtomicBool,
}

impl MemoryAccount {
    pub fn new(cap: u64) -> Self {
        Self {
            cap,
            shared: Arc::default(),
        }
    }

    /// The same account, for work that runs off the call's store.
    pub fn share(&self) -> Self {
        Self {
            cap: self.cap,
            shared: self.shared.clone(),
        }
    }

    /// Charge host-side bytes made for the guest; refused past the cap.
    pub fn charge(&self, bytes: u64) -> Result<(), MemoryCapTrap> {
        let cap = self.cap;
        let charged = self
            .shared
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|&total| total <= cap)
            });
        if charged.is_err() {
            self.shared.exceeded.store(true, Ordering::Release);
            return Err(MemoryCapTrap);
        }
        Ok(())
    }

    /// Give back bytes charged for a host buffer that is gone (a request
    /// body once sent).
    pub fn release(&self, bytes: u64) {
        let _ = self
            .shared
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                Some(used.saturating_sub(bytes))
            });
    }

    /// Whether a growth or a charge was refused.
    pub fn exceeded(&self) -> bool {
        self.shared.exceeded.load(Ordering::Acquire)
    }

    /// The linear memory the instance grew, within `used`.
    pub fn linear_bytes(&self) -> u64 {
        self.shared.linear.load(Ordering::Acquire)
    }

    /// Take over an instance made under another account: its `linear`
    /// bytes of memory and `host` bytes of host buffers are this call's
    /// (over the cap, the call fails as a memory-cap failure).
    pub fn adopt(&self, linear: u64, host: u64) {
        let _ = self.charge(linear.saturating_add(host));
        self.shared.linear.fetch_add(linear, Ordering::AcqRel);
    }

    pub fn used(&self) -> u64 {
        self.shared.used.load(Ordering::Acquire)
    }

    /// The call's whole memory budget.
    pub fn cap(&self) -> u64 {
        self.cap
    }

    pub fn remaining(&self) -> u64 {
        self.cap.saturating_sub(self.used())
    }
}

impl wasmtime::ResourceLimiter for MemoryAccount {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let delta = desired.saturating_sub(current) as u64;
        match self.charge(delta) {
            Ok(()) => {
                self.shared.linear.fetch_add(delta, Ordering::AcqRel);
                Ok(true)
            }
            // An error (not `Ok(false)`) traps right away: a guest allocator
            // would otherwise see a failed grow and abort with a less clear trap.
            Err(trap) => Err(wasmtime::Error::new(trap)),
        }
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Tables are bounded by the pooling allocator's `table_elements`; a
        // table entry costs a few bytes, charge it like memory.
        Ok(desired <= 1_000_000)
    }
}
