//! Giving back the memory an idle source's pool slots hold.
//!
//! The pooling allocator resets a slot in place after each call and keeps its
//! memory image mapped, and up to `keep_resident_bytes` of each linear
//! memory resident, for the next instance of the same component: that is
//! what makes back-to-back calls cheap, and what held an interpreted guest's
//! heap image in every slot it ever ran in long after its load was gone.
//! wasmtime unmaps a slot's image when the compiled module it is warm for is
//! dropped, and only then. So a source idle for `idle_trim_s` is linked anew
//! from its precompiled artifact: new calls use the new copy, and the old
//! one, with the images of every slot warm for it, is released when the last
//! call holding it ends. (The pages `keep_resident_bytes` kept outside the
//! image stay, zeroed, for the slot's next call of any source.) The next
//! call maps its memory image afresh (one page fault per page it touches).

use super::loader::{Linked, SourceSet};
use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What `Activity::last_end` counts from.
static START: LazyLock<Instant> = LazyLock::new(Instant::now);

fn now_ms() -> u64 {
    START.elapsed().as_millis() as u64
}

/// A source's calls, as the trimmer sees them (how many run now is the
/// slots' count: `Slots::running_of`).
#[derive(Debug)]
pub(crate) struct Activity {
    /// Whether a call ran since the last trim (else there is nothing to give back).
    used: AtomicBool,
    /// When the last call ended, in ms since `START` (an atomic, not a
    /// lock: every call of the source writes it).
    last_end_ms: AtomicU64,
}

impl Default for Activity {
    fn default() -> Self {
        Activity {
            // `describe()` at startup ran in a slot.
            used: AtomicBool::new(true),
            last_end_ms: AtomicU64::new(now_ms()),
        }
    }
}

/// A call of the source, from before it instantiates until its store is
/// gone (its slot is given back after that).
pub(crate) struct Active<'a>(&'a Activity);

impl Activity {
    pub(crate) fn enter(&self) -> Active<'_> {
        if !self.used.load(Ordering::Relaxed) {
            self.used.store(true, Ordering::Relaxed);
        }
        Active(self)
    }

    /// Idle for at least `idle_for` (and `running` calls now), with calls
    /// since the last trim.
    fn trimmable(&self, running: usize, idle_for: Duration) -> bool {
        running == 0
            && self.used.load(Ordering::Relaxed)
            && now_ms().saturating_sub(self.last_end_ms.load(Ordering::Relaxed))
                >= idle_for.as_millis() as u64
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.0.last_end_ms.store(now_ms(), Ordering::Relaxed);
    }
}

impl SourceSet {
    /// Relink every source idle for `idle_for` that ran calls since its last
    /// trim; returns how many were trimmed.
    pub fn trim_idle(&self, idle_for: Duration) -> usize {
        let mut trimmed = 0;
        for source in &self.sources {
            let running = self.runtime.slots.running_of(&source.log_name);
            if !source.activity.trimmable(running, idle_for) {
                continue;
            }
            let engine = &self.runtime.engine;
            let Some(component) = self.cache.load_stored(engine, &source.wasm_sha256) else {
                // Removed from the cache since startup: keep the copy we have.
                tracing::debug!(source = source.name(), "not trimmed: no cache entry");
                continue;
            };
            match Linked::new(&self.runtime, &component, &source.file) {
                Ok(linked) => {
                    source.activity.used.store(false, Ordering::Relaxed);
                    source.relink(linked);
                    crate::telemetry::metrics::metrics().source_trimmed(source.name());
                    trimmed += 1;
                }
                Err(e) => tracing::warn!(source = source.name(), "not trimmed: {e}"),
            }
        }
        if trimmed > 0 {
            crate::release_free_memory();
        }
        if let Some(pool) = self.runtime.engine.pooling_allocator_metrics() {
            crate::telemetry::metrics::metrics()
                .pool_idle_resident_bytes
                .set(i64::try_from(pool.unused_memory_bytes_resident()).unwrap_or(i64::MAX));
        }
        trimmed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_idle_used_source_is_trimmable() {
        let a = Activity::default();
        assert!(!a.trimmable(0, Duration::from_secs(60)), "recently used");
        assert!(a.trimmable(0, Duration::ZERO));
        assert!(!a.trimmable(1, Duration::ZERO), "a call is running");
        a.used.store(false, Ordering::Relaxed);
        assert!(
            !a.trimmable(0, Duration::ZERO),
            "nothing ran since the last trim"
        );
        drop(a.enter());
        assert!(a.trimmable(0, Duration::ZERO), "a call ran since");
    }
}
