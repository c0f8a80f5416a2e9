//! A standby: one never-called instance of a source, made after a call while
//! the server is not busy (`Runtime::busy`), in the same task as that call's
//! teardown, so while the client reads its answer. The source's next call
//! takes it instead of instantiating: a lone client's page does not wait for
//! the instantiation.
//!
//! It is still a fresh instance per call (the runtime's first invariant): it
//! was made for no caller and no export has run in it, and it is used once.
//! The call that takes it binds its own store data (capabilities, deadline,
//! cancellation, memory account), fuel and epoch deadline before any export
//! runs. What instantiation ran (a component's start functions) ran under
//! the source's budget with a capability context of its own, and its fuel
//! and memory count against the call that takes it.
//!
//! Bounds: one per source, and `[runtime] standby_instances` in all, which
//! the pool holds beyond the calls' slots (`engine.rs`): a standby never
//! takes an instance a call needs. A standby of a component that was linked
//! anew since (trimming) is dropped, not used: it would keep the old
//! module's memory images.

use super::host_state::HostState;
use super::loader::Linked;
use crate::telemetry::metrics::metrics;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use wasmtime::Store;
use wasmtime::component::Instance;

/// An instantiated, never-called instance and the store it lives in.
pub(crate) struct Standby {
    pub(crate) store: Store<HostState>,
    pub(crate) instance: Instance,
    /// The component it is an instance of.
    linked: Arc<Linked>,
    /// Fuel its instantiation used (the taking call is charged for it).
    pub(crate) fuel_used: u64,
    _reserved: Reserved,
}

impl Standby {
    pub(crate) fn new(
        store: Store<HostState>,
        instance: Instance,
        linked: Arc<Linked>,
        fuel_used: u64,
        reserved: Reserved,
    ) -> Self {
        Standby {
            store,
            instance,
            linked,
            fuel_used,
            _reserved: reserved,
        }
    }
}

/// The process-wide bound on standbys (`[runtime] standby_instances`).
pub(crate) struct StandbyBound {
    live: AtomicUsize,
    max: usize,
}

impl StandbyBound {
    pub(crate) fn new(max: usize) -> Arc<Self> {
        Arc::new(StandbyBound {
            live: AtomicUsize::new(0),
            max,
        })
    }

    /// Room for one more standby, if the bound allows it.
    pub(crate) fn reserve(self: &Arc<Self>) -> Option<Reserved> {
        self.live
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .ok()?;
        metrics().standby_instances.inc();
        Some(Reserved(self.clone()))
    }

    /// Standbys that exist now.
    #[cfg(test)]
    pub(crate) fn live(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }
}

/// One standby's share of the bound, given back when it is dropped or taken.
pub(crate) struct Reserved(Arc<StandbyBound>);

impl Drop for Reserved {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::AcqRel);
        metrics().standby_instances.dec();
    }
}

/// Where one source keeps its standby.
#[derive(Default)]
pub(crate) struct Shelf(Mutex<Option<Standby>>);

impl Shelf {
    /// The standby, if it is an instance of `linked` (a stale one is dropped).
    /// Its share of the bound is given back: from here on its instance is
    /// the taking call's, held by that call's slot.
    pub(crate) fn take(&self, linked: &Arc<Linked>) -> Option<Standby> {
        let standby = self.0.lock().unwrap().take()?;
        Arc::ptr_eq(&standby.linked, linked).then_some(standby)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.lock().unwrap().is_none()
    }

    /// Keep `standby` if the shelf is empty and it is an instance of
    /// `current`; else it is dropped (outside the lock).
    pub(crate) fn put(&self, standby: Standby, current: &Arc<Linked>) {
        if !Arc::ptr_eq(&standby.linked, current) {
            return;
        }
        let mut held = self.0.lock().unwrap();
        if held.is_none() {
            *held = Some(standby);
        }
    }

    /// Drop the standby (the component was linked anew).
    pub(crate) fn clear(&self) {
        let standby = self.0.lock().unwrap().take();
        drop(standby);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_counts_reservations_until_they_are_dropped() {
        let bound = StandbyBound::new(2);
        let a = bound.reserve().expect("first");
        let b = bound.reserve().expect("second");
        assert!(bound.reserve().is_none(), "over the bound");
        assert_eq!(bound.live(), 2);
        drop(a);
        let c = bound.reserve().expect("room again");
        drop((b, c));
        assert_eq!(bound.live(), 0);
        assert!(
            StandbyBound::new(0).reserve().is_none(),
            "0 turns standbys off"
        );
    }
}
