//! SQLite's heap, process-wide, under one limit the host alone sets
//! (`PRAGMA hard_heap_limit` and `soft_heap_limit` are refused to guests).
//!
//! The limit is [`SQLITE_HEAP_BASE_BYTES`] (idle pooled connections: schema
//! and prepared statements; their page cache is released on check-in) plus
//! what the calls running right now reserved: a call that opens a
//! connection charges [`reservation_bytes`] to its own memory budget and
//! raises the limit by as much until it ends. SQLite therefore never holds
//! more than the base plus memory that running calls' budgets pay for, so
//! all calls together stay within `max_concurrent_calls × memory_bytes +
//! SQLITE_HEAP_BASE_BYTES`. A statement that needs more gets SQLite's
//! out-of-memory error (`too-large` to the guest).

use crate::runtime::capabilities::sql::config::{
    SQLITE_HEAP_BASE_BYTES, SQLITE_MEMORY_SHARE_DIVISOR,
};
use rusqlite::ffi;
use std::sync::Mutex;

/// Bytes reserved by the calls running now.
static RESERVED: Mutex<u64> = Mutex::new(0);

/// The SQLite share of a call whose memory budget is `memory_bytes`.
pub fn reservation_bytes(memory_bytes: u64) -> u64 {
    memory_bytes / SQLITE_MEMORY_SHARE_DIVISOR
}

/// Apply the limit for the current reservations (at startup: the base).
pub fn enforce() {
    apply(*RESERVED.lock().unwrap());
}

fn apply(reserved: u64) {
    let limit = i64::try_from(SQLITE_HEAP_BASE_BYTES.saturating_add(reserved)).unwrap_or(i64::MAX);
    // SAFETY: both functions only take SQLite's memory mutex and store the
    // value; any thread may call them at any time. The soft limit follows
    // so that SQLite starts recycling its page cache before failing.
    unsafe {
        ffi::sqlite3_hard_heap_limit64(limit);
        ffi::sqlite3_soft_heap_limit64(limit);
    }
}

/// One call's share of the heap limit, given back when it is dropped.
#[derive(Debug)]
pub struct Reservation {
    bytes: u64,
}

impl Reservation {
    pub fn new(bytes: u64) -> Self {
        let mut reserved = RESERVED.lock().unwrap();
        *reserved = reserved.saturating_add(bytes);
        apply(*reserved);
        Self { bytes }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut reserved = RESERVED.lock().unwrap();
        *reserved = reserved.saturating_sub(self.bytes);
        apply(*reserved);
    }
}

/// The process's current hard limit.
#[cfg(test)]
fn current_limit() -> i64 {
    // SAFETY: a negative argument only reads the limit.
    unsafe { ffi::sqlite3_hard_heap_limit64(-1) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reservation_raises_the_limit_until_it_is_dropped() {
        // Other tests in this process may hold reservations too: compare
        // against the base and the reservation's own effect only.
        let r = Reservation::new(1 << 40);
        assert!(current_limit() >= (SQLITE_HEAP_BASE_BYTES + (1 << 40)) as i64);
        drop(r);
        assert!(current_limit() < (1 << 40), "{}", current_limit());
        assert!(current_limit() >= SQLITE_HEAP_BASE_BYTES as i64);
    }
}
