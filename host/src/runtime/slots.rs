//! Fair shares of the guest-call pool.
//!
//! A call takes one slot of the pool, and with it one of its caller's share
//! and one of its source's share. A call that finds any of the three full
//! waits, but only for a bounded time, and only if its caller does not
//! already have a full queue of waiting calls; then it is refused with an
//! [`Overload`] that says whose limit it hit, so the layer above can answer
//! "slow down" (the caller's fault) apart from "try later" (ours).
//!
//! Who a caller is stays opaque here: the layer above names it with a
//! [`CallerKey`]; the runtime only counts per key.

use foldhash::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Who is calling, as an opaque key: calls with equal keys share one quota.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CallerKey(Key);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    /// The host itself (startup `describe()`): outside every caller's share.
    Host,
    Caller(Arc<str>),
}

impl CallerKey {
    /// A caller named by `label`; the label is never shown to anyone.
    pub fn new(label: impl Into<Arc<str>>) -> Self {
        CallerKey(Key::Caller(label.into()))
    }

    /// The host's own calls: bounded by the pool and the source's share only.
    pub fn host() -> Self {
        CallerKey(Key::Host)
    }
}

/// The bounds of the pool (see `RuntimeConfig`).
#[derive(Clone, Copy, Debug)]
pub struct SlotLimits {
    /// Guest calls running at once, all callers together.
    pub total: usize,
    /// Calls one caller may have running at once; as many more may wait.
    pub per_caller: usize,
    /// Calls one source may have running at once.
    pub per_source: usize,
    /// The longest a call waits for a slot before it is refused.
    pub max_wait: Duration,
}

/// Why a call got no slot. Every variant is retryable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Overload {
    /// The caller already runs (and queues) its whole share.
    #[error("the caller is over its share of concurrent guest calls")]
    CallerOverShare,
    /// The source runs as many calls as it may.
    #[error("the source runs its maximum of concurrent guest calls")]
    SourceBusy,
    /// Every slot of the pool is taken.
    #[error("every guest slot is taken")]
    HostFull,
}

pub(crate) struct Slots {
    limits: SlotLimits,
    state: Mutex<State>,
    released: Notify,
}

#[derive(Default)]
struct State {
    running: usize,
    /// Calls waiting for a slot, all callers together: a release wakes
    /// waiters only when there are any.
    waiting: usize,
    callers: HashMap<CallerKey, Share>,
    sources: HashMap<Arc<str>, usize>,
}

#[derive(Default)]
struct Share {
    running: usize,
    waiting: usize,
}

impl State {
    /// What stops `caller` from running a call of `source` now, if anything.
    fn blocker(
        &self,
        limits: &SlotLimits,
        caller: &CallerKey,
        source: &str,
        source_max: usize,
    ) -> Option<Overload> {
        let mine = self.callers.get(caller).map_or(0, |s| s.running);
        if caller.0 != Key::Host && mine >= limits.per_caller {
            return Some(Overload::CallerOverShare);
        }
        if self.sources.get(source).copied().unwrap_or(0) >= limits.per_source.min(source_max) {
            return Some(Overload::SourceBusy);
        }
        if self.running >= limits.total {
            return Some(Overload::HostFull);
        }
        None
    }

    fn share(&mut self, caller: &CallerKey) -> &mut Share {
        self.callers.entry(caller.clone()).or_default()
    }

    /// Forget a caller with nothing running or waiting: the map holds only
    /// active callers, so it cannot grow with the number of callers ever seen.
    fn tidy(&mut self, caller: &CallerKey) {
        if self
            .callers
            .get(caller)
            .is_some_and(|s| s.running == 0 && s.waiting == 0)
        {
            self.callers.remove(caller);
        }
    }
}

/// A taken slot; dropping it gives the slot back and wakes the waiters.
pub(crate) struct Slot {
    slots: Arc<Slots>,
    caller: CallerKey,
    source: Arc<str>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        {
            let mut st = self.slots.state.lock().unwrap();
            st.running -= 1;
            st.share(&self.caller).running -= 1;
            st.tidy(&self.caller);
            if let Some(n) = st.sources.get_mut(&*self.source) {
                *n -= 1;
                if *n == 0 {
                    st.sources.remove(&*self.source);
                }
            }
            // A waiter counts itself under this lock when it finds no slot,
            // after registering for the wake-up: none counted, none to wake.
            if st.waiting == 0 {
                return;
            }
        }
        self.slots.released.notify_waiters();
    }
}

/// A call counted as waiting for its caller; uncounted when it stops
/// waiting, whether it got a slot, was refused or was dropped.
struct Waiting<'a> {
    slots: &'a Slots,
    caller: &'a CallerKey,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut st = self.slots.state.lock().unwrap();
        st.waiting -= 1;
        st.share(self.caller).waiting -= 1;
        st.tidy(self.caller);
    }
}

impl Slots {
    pub(crate) fn new(limits: SlotLimits) -> Arc<Self> {
        Arc::new(Slots {
            limits: SlotLimits {
                total: limits.total.max(1),
                per_caller: limits.per_caller.max(1),
                per_source: limits.per_source.max(1),
                max_wait: limits.max_wait,
            },
            state: Mutex::new(State::default()),
            released: Notify::new(),
        })
    }

    /// Take a slot for `caller` calling `source`, which may run at most
    /// `source_max` calls at once (its own bound, within the pool's
    /// `per_source`), waiting at most until `now + max_wait` (or `deadline`,
    /// if sooner).
    pub(crate) async fn acquire(
        self: &Arc<Self>,
        caller: &CallerKey,
        source: &Arc<str>,
        source_max: usize,
        deadline: Instant,
    ) -> Result<Slot, Overload> {
        let wait_until = deadline.min(Instant::now() + self.limits.max_wait);
        let mut waiting: Option<Waiting<'_>> = None;
        loop {
            // Registered before every check but the first (a free slot, the
            // common case, needs no wake-up), so a release between the check
            // and the wait still wakes us.
            let notified = self.released.notified();
            tokio::pin!(notified);
            let first = waiting.is_none();
            if !first {
                notified.as_mut().enable();
            }
            let blocker = {
                let mut st = self.state.lock().unwrap();
                match st.blocker(&self.limits, caller, source, source_max) {
                    None => {
                        st.running += 1;
                        st.share(caller).running += 1;
                        *st.sources.entry(source.clone()).or_default() += 1;
                        drop(st);
                        drop(waiting);
                        return Ok(Slot {
                            slots: self.clone(),
                            caller: caller.clone(),
                            source: source.clone(),
                        });
                    }
                    Some(blocker) => {
                        if waiting.is_none() {
                            // A caller queues at most one share's worth of
                            // calls; beyond that, waiting only holds memory.
                            let share = st.share(caller);
                            if caller.0 != Key::Host && share.waiting >= self.limits.per_caller {
                                st.tidy(caller);
                                return Err(Overload::CallerOverShare);
                            }
                            share.waiting += 1;
                            st.waiting += 1;
                            waiting = Some(Waiting {
                                slots: self,
                                caller,
                            });
                        }
                        blocker
                    }
                }
            };
            if first {
                // Not registered yet: register, then look again.
                continue;
            }
            if tokio::time::timeout_at(wait_until.into(), notified)
                .await
                .is_err()
            {
                return Err(blocker);
            }
        }
    }

    /// Calls of `source` holding a slot now.
    pub(crate) fn running_of(&self, source: &str) -> usize {
        self.state
            .lock()
            .unwrap()
            .sources
            .get(source)
            .copied()
            .unwrap_or(0)
    }

    /// Calls running now (for tests).
    #[cfg(test)]
    fn running(&self) -> usize {
        self.state.lock().unwrap().running
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No bound of the source's own.
    const ANY: usize = usize::MAX;

    fn slots(total: usize, per_caller: usize, per_source: usize) -> Arc<Slots> {
        Slots::new(SlotLimits {
            total,
            per_caller,
            per_source,
            max_wait: Duration::from_millis(50),
        })
    }

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    #[tokio::test]
    async fn a_caller_gets_its_share_and_no_more() {
        let s = slots(10, 2, 10);
        let alice = CallerKey::new("alice");
        let src: Arc<str> = "a".into();
        let one = s.acquire(&alice, &src, ANY, far()).await.unwrap();
        let _two = s.acquire(&alice, &src, ANY, far()).await.unwrap();
        assert_eq!(
            s.acquire(&alice, &src, ANY, far()).await.err(),
            Some(Overload::CallerOverShare)
        );
        // Bob is not affected by Alice's share.
        let bob = CallerKey::new("bob");
        let _b = s.acquire(&bob, &src, ANY, far()).await.unwrap();
        // A slot given back within the wait is taken by the waiter.
        let s2 = s.clone();
        let waiter = tokio::spawn(async move {
            s2.acquire(&CallerKey::new("alice"), &"a".into(), ANY, far())
                .await
                .is_ok()
        });
        while s.state.lock().unwrap().callers[&alice].waiting == 0 {
            tokio::task::yield_now().await;
        }
        drop(one);
        assert!(waiter.await.unwrap());
    }

    #[tokio::test]
    async fn a_full_queue_is_refused_without_waiting() {
        let s = slots(10, 1, 10);
        let alice = CallerKey::new("alice");
        let src: Arc<str> = "a".into();
        let _running = s.acquire(&alice, &src, ANY, far()).await.unwrap();
        let s2 = s.clone();
        let queued = tokio::spawn(async move {
            s2.acquire(&CallerKey::new("alice"), &"a".into(), ANY, far())
                .await
                .err()
        });
        // Wait until the spawned call is queued.
        while s.state.lock().unwrap().callers[&alice].waiting == 0 {
            tokio::task::yield_now().await;
        }
        // Refused on the first poll: it does not wait at all.
        let third = s.acquire(&alice, &src, ANY, far());
        tokio::pin!(third);
        assert_eq!(
            poll_once(third.as_mut()).await.map(|r| r.err()),
            Some(Some(Overload::CallerOverShare))
        );
        assert_eq!(queued.await.unwrap(), Some(Overload::CallerOverShare));
    }

    #[tokio::test]
    async fn sources_and_the_pool_have_their_own_bounds() {
        let s = slots(3, 10, 2);
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        let _one = s
            .acquire(&CallerKey::new("1"), &a, ANY, far())
            .await
            .unwrap();
        let _two = s
            .acquire(&CallerKey::new("2"), &a, ANY, far())
            .await
            .unwrap();
        assert_eq!(
            s.acquire(&CallerKey::new("3"), &a, ANY, far()).await.err(),
            Some(Overload::SourceBusy)
        );
        let _three = s
            .acquire(&CallerKey::new("3"), &b, ANY, far())
            .await
            .unwrap();
        assert_eq!(
            s.acquire(&CallerKey::new("4"), &b, ANY, far()).await.err(),
            Some(Overload::HostFull)
        );
        assert_eq!(s.running(), 3);
    }

    #[tokio::test]
    async fn the_host_is_outside_caller_shares_and_state_is_forgotten() {
        let s = slots(10, 1, 10);
        let src: Arc<str> = "a".into();
        let held: Vec<_> = take_as_host(&s, &src, 5).await;
        assert_eq!(held.len(), 5);
        drop(held);
        let st = s.state.lock().unwrap();
        assert!(st.callers.is_empty() && st.sources.is_empty() && st.running == 0);
    }

    async fn take_as_host(s: &Arc<Slots>, src: &Arc<str>, n: usize) -> Vec<Slot> {
        let mut v = Vec::new();
        for _ in 0..n {
            v.push(
                s.acquire(&CallerKey::host(), src, ANY, far())
                    .await
                    .unwrap(),
            );
        }
        v
    }

    #[tokio::test]
    async fn a_dropped_waiter_is_uncounted() {
        let s = slots(10, 1, 10);
        let alice = CallerKey::new("alice");
        let src: Arc<str> = "a".into();
        let running = s.acquire(&alice, &src, ANY, far()).await.unwrap();
        {
            let wait = s.acquire(&alice, &src, ANY, far());
            tokio::pin!(wait);
            assert!(poll_once(wait.as_mut()).await.is_none(), "still waiting");
        }
        drop(running);
        assert!(s.state.lock().unwrap().callers.is_empty());
    }

    async fn poll_once<F: std::future::Future + Unpin>(f: F) -> Option<F::Output> {
        let mut f = f;
        std::future::poll_fn(|cx| {
            std::task::Poll::Ready(match std::pin::Pin::new(&mut f).poll(cx) {
                std::task::Poll::Ready(v) => Some(v),
                std::task::Poll::Pending => None,
            })
        })
        .await
    }

    #[tokio::test]
    async fn a_source_may_bound_itself_below_the_pools_share() {
        let s = slots(10, 10, 8);
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        let _one = s.acquire(&CallerKey::new("1"), &a, 2, far()).await.unwrap();
        let _two = s.acquire(&CallerKey::new("2"), &a, 2, far()).await.unwrap();
        // Obeyed up to its own bound, then refused as busy...
        assert_eq!(
            s.acquire(&CallerKey::new("3"), &a, 2, far()).await.err(),
            Some(Overload::SourceBusy)
        );
        // ...while another source still gets the pool's share.
        let mut held = Vec::new();
        for i in 0..8 {
            held.push(
                s.acquire(&CallerKey::new(format!("b{i}")), &b, ANY, far())
                    .await,
            );
        }
        assert!(held.iter().all(Result::is_ok));
    }
}
