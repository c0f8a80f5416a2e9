//! Warm instances: an instance that served a call of one caller, kept for
//! that caller's next call of the same source.
//!
//! Making an instance of an interpreted guest (a 12–18 MB component whose
//! heap is a pre-initialized interpreter) and resetting its memory afterwards
//! was most of what a page of a Python or JavaScript source cost. The
//! isolation promise is between callers, so an instance may serve several
//! calls as long as they are all one caller's:
//!
//! - The key ([`InstanceKey`]) is made by the layer above from the verified
//!   principal *and* its scopes: two tokens of one subject with different
//!   scopes are two callers here. Anonymous callers, who cannot be told
//!   apart, and the host's own calls have no key and always get a fresh
//!   instance (or a never-called standby).
//! - Kept only after a call that ended well (a value or a `source-error`):
//!   a trap, a budget stop (fuel, memory, deadline), a cancellation or a
//!   result the host could not lift drops the instance with the call's store.
//!   A result the layer above finds invalid retires every kept instance of
//!   that caller and source ([`WarmPool::retire`]).
//! - Bounded: `[runtime] warm_instances` kept in all (the pool holds that many
//!   instances beyond the calls' slots; when full, the one idle longest makes
//!   room), `warm_max_calls` calls per instance, `warm_idle_ms` idle before
//!   it is dropped (`expire`, from the server's sweeper, and on the way out
//!   of `take`). The memory an instance keeps is its linear memory: what it
//!   had after its first call plus at most `warm_max_growth_bytes` (a guest
//!   whose heap only grows, like the catalog's bump allocator, is dropped
//!   when it has grown that much, not kept at its budget);
//!   `emseepea_guest_warm_memory_bytes` shows it.
//! - Parked, an instance holds nothing of its last call but its own memory:
//!   the call's resource table and capability state (connections, requests
//!   in flight, stdout) are dropped before it is kept (`HostState::park`),
//!   and the next call binds its own before any export runs.

use super::host_state::HostState;
use super::loader::Linked;
use crate::telemetry::metrics::metrics;
use foldhash::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wasmtime::Store;
use wasmtime::component::Instance;

/// Whose instances a call may reuse: one verified caller (principal and
/// scopes), as an opaque key made by the layer above. Equal keys, same caller.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InstanceKey(Arc<str>);

impl InstanceKey {
    /// A key named by `label`; the label is never shown to anyone.
    pub fn new(label: impl Into<Arc<str>>) -> Self {
        InstanceKey(label.into())
    }
}

/// The bounds of reuse (`[runtime] warm_*`).
#[derive(Clone, Copy, Debug)]
pub struct WarmLimits {
    /// Instances kept in all; 0 turns reuse off.
    pub instances: usize,
    /// Calls one instance serves before it is dropped.
    pub max_calls: u32,
    /// How long a kept instance may wait for its caller's next call.
    pub idle: Duration,
    /// Linear memory an instance may grow beyond what it had after its
    /// first call and still be kept.
    pub max_growth: u64,
}

/// An instance kept for its caller's next call.
pub(crate) struct Warm {
    pub(crate) store: Store<HostState>,
    pub(crate) instance: Instance,
    /// The component it is an instance of (a relinked source's is stale).
    linked: Arc<Linked>,
    /// Calls it has served.
    pub(crate) calls: u32,
    parked_at: Instant,
    /// Its linear memory when parked (the gauge's share).
    bytes: u64,
    /// Its linear memory after its first call (what growth counts from).
    pub(crate) base: u64,
}

impl Warm {
    /// Park `store`'s instance after its `calls`-th call: the call's
    /// resources and capability state go now, its memory stays. `base`:
    /// its memory after its first call (`None`: this was its first).
    pub(crate) fn park(
        mut store: Store<HostState>,
        instance: Instance,
        linked: Arc<Linked>,
        calls: u32,
        base: Option<u64>,
    ) -> Self {
        store.data_mut().park();
        let bytes = store.data().memory.linear_bytes();
        Warm {
            store,
            instance,
            linked,
            calls,
            parked_at: Instant::now(),
            bytes,
            base: base.unwrap_or(bytes),
        }
    }
}

/// Why a kept instance was dropped (`emseepea_guest_warm_retired_total`).
#[derive(Clone, Copy, Debug)]
enum Retired {
    /// Served `warm_max_calls`.
    Calls,
    /// Grew its memory by more than `warm_max_growth_bytes`.
    Grown,
    /// Waited `warm_idle_ms` for its caller.
    Idle,
    /// The bound was full: the one idle longest made room.
    Evicted,
    /// Its source was linked anew (trimming).
    Relinked,
    /// The layer above found a result of this caller invalid.
    InvalidResult,
}

impl Retired {
    fn label(self) -> &'static str {
        match self {
            Retired::Calls => "calls",
            Retired::Grown => "grown",
            Retired::Idle => "idle",
            Retired::Evicted => "evicted",
            Retired::Relinked => "relinked",
            Retired::InvalidResult => "invalid_result",
        }
    }
}

/// Every kept instance of the process, by source and caller.
pub(crate) struct WarmPool {
    limits: WarmLimits,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    shelves: HashMap<(Arc<str>, InstanceKey), Vec<Warm>>,
    count: usize,
    bytes: u64,
}

impl State {
    fn remove(&mut self, warm: &Warm) {
        self.count -= 1;
        self.bytes -= warm.bytes;
    }

    fn publish(&self) {
        let m = metrics();
        m.warm_instances.set(self.count as i64);
        m.warm_memory_bytes
            .set(i64::try_from(self.bytes).unwrap_or(i64::MAX));
    }

    /// Take out every instance `drop_it` picks; the caller drops them
    /// outside the lock (a store's teardown resets its memory).
    fn drain(
        &mut self,
        mut drop_it: impl FnMut(&(Arc<str>, InstanceKey), &Warm) -> bool,
    ) -> Vec<Warm> {
        let mut gone = Vec::new();
        self.shelves.retain(|key, shelf| {
            let mut i = 0;
            while i < shelf.len() {
                if drop_it(key, &shelf[i]) {
                    gone.push(shelf.remove(i));
                } else {
                    i += 1;
                }
            }
            !shelf.is_empty()
        });
        for warm in &gone {
            self.remove(warm);
        }
        gone
    }
}

fn retired(reason: Retired, n: usize) {
    if n > 0 {
        metrics().warm_retired(reason.label(), n as u64);
    }
}

impl WarmPool {
    pub(crate) fn new(limits: WarmLimits) -> Self {
        WarmPool {
            limits,
            state: Mutex::new(State::default()),
        }
    }

    pub(crate) fn enabled(&self) -> bool {
        self.limits.instances > 0
    }

    /// `key`'s most recently parked instance of `source`, if it is an
    /// instance of `linked` and has not waited too long.
    pub(crate) fn take(
        &self,
        source: &Arc<str>,
        key: &InstanceKey,
        linked: &Arc<Linked>,
    ) -> Option<Warm> {
        if !self.enabled() {
            return None;
        }
        // Instances of an earlier copy of the component (parked by a call
        // that began before the relink) and instances that waited too long.
        let (mut relinked, mut stale) = (Vec::new(), Vec::new());
        let found = {
            let mut st = self.state.lock().unwrap();
            let found = loop {
                let shelf_key = (source.clone(), key.clone());
                let Some(shelf) = st.shelves.get_mut(&shelf_key) else {
                    break None;
                };
                let warm = shelf.pop();
                if shelf.is_empty() {
                    st.shelves.remove(&shelf_key);
                }
                let Some(warm) = warm else { break None };
                st.remove(&warm);
                if !Arc::ptr_eq(&warm.linked, linked) {
                    relinked.push(warm);
                } else if warm.parked_at.elapsed() >= self.limits.idle {
                    stale.push(warm);
                } else {
                    break Some(warm);
                }
            };
            st.publish();
            found
        };
        retired(Retired::Relinked, relinked.len());
        retired(Retired::Idle, stale.len());
        drop((relinked, stale));
        found
    }

    /// Keep `warm` for `key`'s next call of `source`, unless it has served
    /// its calls; when the bound is full, the instance idle longest goes.
    pub(crate) fn put(&self, source: &Arc<str>, key: InstanceKey, warm: Warm) {
        if !self.enabled() || warm.calls >= self.limits.max_calls {
            retired(Retired::Calls, 1);
            return;
        }
        if warm.bytes > warm.base.saturating_add(self.limits.max_growth) {
            retired(Retired::Grown, 1);
            return;
        }
        let evicted = {
            let mut st = self.state.lock().unwrap();
            let evicted = if st.count >= self.limits.instances {
                oldest(&st).and_then(|k| {
                    let shelf = st.shelves.get_mut(&k)?;
                    let warm = shelf.remove(0);
                    if shelf.is_empty() {
                        st.shelves.remove(&k);
                    }
                    st.remove(&warm);
                    Some(warm)
                })
            } else {
                None
            };
            st.count += 1;
            st.bytes += warm.bytes;
            st.shelves
                .entry((source.clone(), key))
                .or_default()
                .push(warm);
            st.publish();
            evicted
        };
        if evicted.is_some() {
            retired(Retired::Evicted, 1);
        }
        drop(evicted);
    }

    /// Drop every kept instance of `key` and `source`: a result of theirs
    /// was invalid, so whatever that instance holds is not to be trusted.
    pub(crate) fn retire(&self, source: &Arc<str>, key: &InstanceKey) {
        let gone = {
            let mut st = self.state.lock().unwrap();
            let gone = st.drain(|(s, k), _| s == source && k == key);
            st.publish();
            gone
        };
        retired(Retired::InvalidResult, gone.len());
        drop(gone);
    }

    /// Drop every kept instance of `source` (it was linked anew).
    pub(crate) fn clear_source(&self, source: &Arc<str>) {
        let gone = {
            let mut st = self.state.lock().unwrap();
            let gone = st.drain(|(s, _), _| s == source);
            st.publish();
            gone
        };
        retired(Retired::Relinked, gone.len());
        drop(gone);
    }

    /// Drop every instance parked for `warm_idle_ms` or longer; how many.
    pub(crate) fn expire(&self) -> usize {
        let idle = self.limits.idle;
        let gone = {
            let mut st = self.state.lock().unwrap();
            let gone = st.drain(|_, w| w.parked_at.elapsed() >= idle);
            st.publish();
            gone
        };
        let n = gone.len();
        retired(Retired::Idle, n);
        drop(gone);
        n
    }

    /// How long a kept instance waits for its caller (the sweeper's period).
    pub(crate) fn idle(&self) -> Duration {
        self.limits.idle
    }
}

/// The shelf whose first (longest parked) instance has been idle longest.
fn oldest(st: &State) -> Option<(Arc<str>, InstanceKey)> {
    st.shelves
        .iter()
        .filter_map(|(k, shelf)| Some((k, shelf.first()?.parked_at)))
        .min_by_key(|(_, at)| *at)
        .map(|(k, _)| k.clone())
}
