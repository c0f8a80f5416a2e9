//! Each caller's fair share of a source's pool, as `runtime/slots.rs` gives
//! each caller a fair share of the guest slots.
//!
//! A caller (the runtime's [`CallerKey`]) may hold at most
//! `pool_size / callers` connections of a pool (at least one), `callers`
//! being the callers that hold or wait for one right now. A caller at its
//! share waits here, not in the pool's queue, so a connection given back
//! goes to a caller under its share first: one caller's burst of reads
//! cannot make another's single read wait for the whole burst.

use crate::runtime::CallerKey;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::Notify;

#[derive(Debug)]
pub struct Shares {
    size: usize,
    state: Mutex<HashMap<CallerKey, Share>>,
    changed: Notify,
}

#[derive(Debug, Default)]
struct Share {
    held: usize,
    waiting: usize,
}

/// A caller's hold on one connection of its share; given back on drop.
#[derive(Debug)]
pub struct ShareGuard {
    shares: Arc<Shares>,
    caller: CallerKey,
}

/// The caller stayed at its share until the wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverShare;

impl Shares {
    pub fn new(size: usize) -> Arc<Self> {
        Arc::new(Self {
            size: size.max(1),
            state: Mutex::new(HashMap::new()),
            changed: Notify::new(),
        })
    }

    /// The share each active caller has now.
    fn share(&self, state: &HashMap<CallerKey, Share>) -> usize {
        (self.size / state.len().max(1)).max(1)
    }

    /// Take one connection of `caller`'s share, waiting until `until`.
    pub async fn enter(
        self: &Arc<Self>,
        caller: &CallerKey,
        until: Instant,
    ) -> Result<ShareGuard, OverShare> {
        let mut registered = false;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
                if !registered {
                    st.entry(caller.clone()).or_default().waiting += 1;
                    registered = true;
                }
                let share = self.share(&st);
                let mine = st.get_mut(caller).expect("registered");
                if mine.held < share {
                    mine.held += 1;
                    mine.waiting -= 1;
                    return Ok(ShareGuard {
                        shares: self.clone(),
                        caller: caller.clone(),
                    });
                }
            }
            if tokio::time::timeout_at(until.into(), changed)
                .await
                .is_err()
            {
                let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
                let mine = st.get_mut(caller).expect("registered");
                mine.waiting -= 1;
                tidy(&mut st, caller);
                drop(st);
                // Fewer callers: the others' shares may have grown.
                self.changed.notify_waiters();
                return Err(OverShare);
            }
        }
    }
}

fn tidy(st: &mut HashMap<CallerKey, Share>, caller: &CallerKey) {
    if st
        .get(caller)
        .is_some_and(|s| s.held == 0 && s.waiting == 0)
    {
        st.remove(caller);
    }
}

impl Drop for ShareGuard {
    fn drop(&mut self) {
        let mut st = self.shares.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mine) = st.get_mut(&self.caller) {
            mine.held -= 1;
        }
        tidy(&mut st, &self.caller);
        drop(st);
        self.shares.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_caller_holds_at_most_its_share_while_another_waits() {
        let shares = Shares::new(2);
        let a = CallerKey::new("a");
        let b = CallerKey::new("b");
        let soon = || Instant::now() + Duration::from_millis(50);
        // Alone, a caller may take the whole pool.
        let a1 = shares.enter(&a, soon()).await.unwrap();
        let a2 = shares.enter(&a, soon()).await.unwrap();
        assert_eq!(shares.enter(&a, soon()).await.err(), Some(OverShare));
        // Another caller gets its share of one right away ...
        let b1 = shares.enter(&b, soon()).await.unwrap();
        // ... and the first, over its share now, gets nothing back until it
        // is under it again.
        drop(a1);
        assert_eq!(shares.enter(&a, soon()).await.err(), Some(OverShare));
        drop(a2);
        let _a3 = shares.enter(&a, soon()).await.unwrap();
        drop(b1);
    }
}
