//! The per-call store data: the resource table, memory accounting, the
//! call's deadline and cancellation, and the state of each capability.

use super::budget::{Budget, MemoryCapTrap};
use super::capabilities::{CallCapabilities, CallView};
use std::time::Instant;
use tokio_util::sync::CancellationToken;
use wasmtime::component::ResourceTable;

pub struct HostState {
    pub(crate) table: ResourceTable,
    pub(crate) memory: MemoryAccount,
    pub(crate) capabilities: CallCapabilities,
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
        HostState {
            table: ResourceTable::new(),
            memory: MemoryAccount::new(budget.memory_bytes),
            capabilities,
            deadline: budget.deadline,
            cancel,
        }
    }

    /// One capability's view of this call: `pick` chooses its state.
    pub(crate) fn view<S>(
        &mut self,
        pick: impl FnOnce(&mut CallCapabilities) -> &mut S,
    ) -> CallView<'_, S> {
        CallView {
            state: pick(&mut self.capabilities),
            table: &mut self.table,
            memory: &mut self.memory,
            deadline: self.deadline,
            cancel: &self.cancel,
        }
    }
}
/// Counts every byte of linear memory the instance grows, plus host-side
/// buffers made on its behalf (e.g. SQLite rows), against one cap.
#[derive(Debug)]
pub struct MemoryAccount {
    cap: u64,
    used: u64,
    /// Set when a growth or charge was refused: the call's failure is then
    /// reported as a memory-cap failure whatever the guest did next.
    pub(crate) exceeded: bool,
}

impl MemoryAccount {
    pub fn new(cap: u64) -> Self {
        Self {
            cap,
            used: 0,
            exceeded: false,
        }
    }

    /// Charge host-side bytes made for the guest; refused past the cap.
    pub fn charge(&mut self, bytes: u64) -> Result<(), MemoryCapTrap> {
        if self.used.saturating_add(bytes) > self.cap {
            self.exceeded = true;
            return Err(MemoryCapTrap);
        }
        self.used += bytes;
        Ok(())
    }

    pub fn used(&self) -> u64 {
        self.used
    }

    /// The call's whole memory budget.
    pub fn cap(&self) -> u64 {
        self.cap
    }

    pub fn remaining(&self) -> u64 {
        self.cap.saturating_sub(self.used)
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
            Ok(()) => Ok(true),
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
