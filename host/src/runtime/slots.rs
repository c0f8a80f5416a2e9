//! Fair shares of the guest-call pool.
//! (Over 500 lines: the shares, the admission rule and the fair hand-over
//! live under one lock and share its state; the rest is their tests.)
//!
//! A call takes one slot of the pool, and with it one of its caller's share
//! and one of its source's share. A call that finds any of the three full
//! waits, if its caller does not already have a full queue of waiting calls,
//! for as long as it could still finish in its request's time; then it is
//! refused with an [`Overload`] that says whose limit it hit, so the layer
//! above can answer "slow down" (the caller's fault) apart from "try later"
//! (ours).
//!
//! The admission rule: a call waits at most until its *latest start*, its
//! request's deadline less the time a call holds a slot (observed: a moving
//! average over the pool's calls), and at most `slot_wait_ms` if that is set.
//! A call that arrives to a queue it could not get through by then (the
//! calls waiting ahead of it, each holding a slot for the observed time,
//! through the slots of the limit that blocks it) is refused at once rather
//! than after a wait that could only end in a refusal: a flood beyond what
//! the pool serves in time is answered fast, with `Retry-After`, while a
//! burst the pool works through in time waits its turn.
//!
//! Waiting is fair between callers: a freed slot is handed (under the lock,
//! so no waiter races another for it) to the waiting call it can serve
//! whose caller runs the fewest calls, the earliest of those first. So a
//! caller's long queue delays that caller's own calls, not another's, and a
//! caller may queue up to `QUEUE_SHARES` shares' worth of calls (what its
//! request time lets it wait for), not one share.
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
    /// The longest a call waits for a slot before it is refused, beyond
    /// the admission rule; `None`: the rule alone.
    pub max_wait: Option<Duration>,
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
}

#[derive(Default)]
struct State {
    running: usize,
    /// Calls waiting for a slot, all callers together (`queue.len()`).
    waiting: usize,
    callers: HashMap<CallerKey, Share>,
    sources: HashMap<Arc<str>, usize>,
    /// The waiting calls, in arrival order. Each is blocked by some limit:
    /// one that was not is handed a slot as soon as one is free.
    queue: std::collections::VecDeque<Waiter>,
    /// Callers with at least one call in `queue`.
    waiting_callers: usize,
    next_ticket: u64,
    /// Slots given so far (the clock of `Share::served`).
    grants: u64,
    /// How long a call holds its slot, on average (µs; exponentially
    /// weighted, 1/16 per call): the admission rule's service time.
    mean_hold_us: f64,
}

/// Weight of each finished call in `mean_hold_us`.
const HOLD_WEIGHT: f64 = 1.0 / 16.0;

/// How often a waiting call looks at its latest start again.
const RECHECK: Duration = Duration::from_millis(100);

/// A caller may have this many shares' worth of calls waiting (beyond its
/// running share); past it, it is refused at once whatever its time.
pub(crate) const QUEUE_SHARES: usize = 4;

/// A call waiting for a slot.
struct Waiter {
    ticket: u64,
    caller: CallerKey,
    source: Arc<str>,
    source_max: usize,
    /// Notified once the slot is handed to it.
    handed: Arc<Notify>,
}

#[derive(Default)]
struct Share {
    running: usize,
    waiting: usize,
    /// When it was last given a slot (`State::grants` then): of two callers
    /// running as many calls, the one served longer ago goes first.
    served: u64,
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

    fn mean_hold(&self) -> Duration {
        Duration::from_micros(self.mean_hold_us as u64)
    }

    /// The latest a call of a request ending at `deadline` may start and
    /// still finish, at the observed service time.
    fn latest_start(&self, deadline: Instant, now: Instant) -> Instant {
        deadline.checked_sub(self.mean_hold()).unwrap_or(now)
    }

    /// How long a call that must wait behind `blocker` can expect to: the
    /// calls waiting ahead of it (and itself) through the slots of that
    /// limit, each held for the observed mean.
    fn expected_wait(
        &self,
        limits: &SlotLimits,
        caller: &CallerKey,
        source_max: usize,
        blocker: Overload,
    ) -> Duration {
        let mine = self.callers.get(caller).map_or(0, |s| s.waiting);
        // Freed slots go round the waiting callers: ahead of this call are
        // its caller's own, and about as many of each other caller's.
        let callers = self.waiting_callers + usize::from(mine == 0);
        let fair_ahead = (mine * callers + callers - 1).min(self.waiting);
        let (ahead, slots) = match blocker {
            Overload::CallerOverShare => (mine, limits.per_caller.min(source_max)),
            Overload::SourceBusy => (fair_ahead, limits.per_source.min(source_max)),
            Overload::HostFull => (fair_ahead, limits.total),
        };
        self.mean_hold()
            .mul_f64((ahead + 1) as f64 / slots.max(1) as f64)
    }

    fn share(&mut self, caller: &CallerKey) -> &mut Share {
        self.callers.entry(caller.clone()).or_default()
    }

    /// Count a call of `caller` on `source` as running.
    fn admit(&mut self, caller: &CallerKey, source: &Arc<str>) {
        self.running += 1;
        self.grants += 1;
        let grants = self.grants;
        let share = self.share(caller);
        share.running += 1;
        share.served = grants;
        *self.sources.entry(source.clone()).or_default() += 1;
    }

    /// Uncount a running call (its slot is free), which held it for `held`
    /// (`None`: never used, no service time to learn from).
    fn release(&mut self, caller: &CallerKey, source: &str, held: Option<Duration>) {
        if let Some(held) = held {
            let held_us = held.as_micros() as f64;
            self.mean_hold_us += (held_us - self.mean_hold_us) * HOLD_WEIGHT;
        }
        self.running -= 1;
        self.share(caller).running -= 1;
        self.tidy(caller);
        if let Some(n) = self.sources.get_mut(source) {
            *n -= 1;
            if *n == 0 {
                self.sources.remove(source);
            }
        }
    }

    /// Count `waiter` as waiting, at the end of the queue.
    fn enqueue(&mut self, waiter: Waiter) {
        let share = self.share(&waiter.caller);
        share.waiting += 1;
        if share.waiting == 1 {
            self.waiting_callers += 1;
        }
        self.waiting += 1;
        self.queue.push_back(waiter);
    }

    /// Take the waiter at `index` out of the queue (handed a slot, gone).
    fn dequeue(&mut self, index: usize) -> Waiter {
        let waiter = self.queue.remove(index).expect("a queued waiter");
        self.waiting -= 1;
        let share = self.share(&waiter.caller);
        share.waiting -= 1;
        if share.waiting == 0 {
            self.waiting_callers -= 1;
        }
        self.tidy(&waiter.caller);
        waiter
    }

    /// Hand free slots to waiters: each to the waiting call it can serve
    /// whose caller runs the fewest calls, of those the caller served
    /// longest ago (round and round), that caller's earliest call first.
    fn hand_over(&mut self, limits: &SlotLimits) {
        while !self.queue.is_empty() && self.running < limits.total {
            let mut best: Option<(usize, (usize, u64))> = None;
            for (i, w) in self.queue.iter().enumerate() {
                if self
                    .blocker(limits, &w.caller, &w.source, w.source_max)
                    .is_some()
                {
                    continue;
                }
                let rank = self
                    .callers
                    .get(&w.caller)
                    .map_or((0, 0), |s| (s.running, s.served));
                if best.is_none_or(|(_, first)| rank < first) {
                    best = Some((i, rank));
                }
            }
            let Some((i, _)) = best else { return };
            let waiter = self.dequeue(i);
            self.admit(&waiter.caller, &waiter.source);
            waiter.handed.notify_one();
        }
    }

    fn queued(&self, ticket: u64) -> Option<usize> {
        self.queue.iter().position(|w| w.ticket == ticket)
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

/// A taken slot; dropping it gives the slot back and hands it on.
pub(crate) struct Slot {
    slots: Arc<Slots>,
    caller: CallerKey,
    source: Arc<str>,
    taken: Instant,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut st = self.slots.state.lock().unwrap();
        st.release(&self.caller, &self.source, Some(self.taken.elapsed()));
        st.hand_over(&self.slots.limits);
    }
}

/// A call in the queue; dropped (refused, or its request gone), it leaves
/// the queue, or gives back the slot it was handed meanwhile.
struct InQueue<'a> {
    slots: &'a Slots,
    ticket: u64,
    caller: &'a CallerKey,
    source: &'a Arc<str>,
}

impl InQueue<'_> {
    /// Whether the slot was handed over: then it is the caller's (counted
    /// as running); else the call leaves the queue.
    fn settle(self) -> bool {
        let handed = {
            let mut st = self.slots.state.lock().unwrap();
            match st.queued(self.ticket) {
                Some(i) => {
                    st.dequeue(i);
                    false
                }
                None => true,
            }
        };
        std::mem::forget(self);
        handed
    }
}

impl Drop for InQueue<'_> {
    fn drop(&mut self) {
        let mut st = self.slots.state.lock().unwrap();
        match st.queued(self.ticket) {
            Some(i) => {
                st.dequeue(i);
            }
            // Handed a slot the call will never use: on to the next.
            None => {
                st.release(self.caller, self.source, None);
                st.hand_over(&self.slots.limits);
            }
        }
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
        })
    }

    /// Take a slot for `caller` calling `source`, which may run at most
    /// `source_max` calls at once (its own bound, within the pool's
    /// `per_source`), waiting at most until the call's latest start (the
    /// admission rule, above) and `now + max_wait`, if set.
    pub(crate) async fn acquire(
        self: &Arc<Self>,
        caller: &CallerKey,
        source: &Arc<str>,
        source_max: usize,
        deadline: Instant,
    ) -> Result<Slot, Overload> {
        let now = Instant::now();
        let slot = || Slot {
            slots: self.clone(),
            caller: caller.clone(),
            source: source.clone(),
            taken: Instant::now(),
        };
        let handed = Arc::new(Notify::new());
        let (ticket, blocker, cap) = {
            let mut st = self.state.lock().unwrap();
            // Waiting calls are all blocked (a free slot is handed on at
            // once): a call that is not may run now.
            let Some(blocker) = st.blocker(&self.limits, caller, source, source_max) else {
                st.admit(caller, source);
                drop(st);
                return Ok(slot());
            };
            let queued = st.callers.get(caller).map_or(0, |s| s.waiting);
            if caller.0 != Key::Host && queued >= QUEUE_SHARES * self.limits.per_caller {
                return Err(Overload::CallerOverShare);
            }
            // The admission rule: wait only for a start that leaves the
            // call its observed service time; none in sight, refuse now.
            let cap = self
                .limits
                .max_wait
                .map_or(deadline, |max| deadline.min(now + max));
            let wait_until = cap.min(st.latest_start(deadline, now));
            if now + st.expected_wait(&self.limits, caller, source_max, blocker) > wait_until {
                return Err(blocker);
            }
            let ticket = st.next_ticket;
            st.next_ticket += 1;
            st.enqueue(Waiter {
                ticket,
                caller: caller.clone(),
                source: source.clone(),
                source_max,
                handed: handed.clone(),
            });
            (ticket, blocker, cap)
        };
        let in_queue = InQueue {
            slots: self,
            ticket,
            caller,
            source,
        };
        // The latest start is looked at again as calls finish and teach
        // the mean: a call learns it cannot finish in time when it can't.
        let mut notified = std::pin::pin!(handed.notified());
        loop {
            let now = Instant::now();
            let until = cap.min(self.state.lock().unwrap().latest_start(deadline, now));
            if now >= until {
                break;
            }
            let look_again = until.min(now + RECHECK);
            // A hand-over before this await leaves a permit: never lost.
            if tokio::time::timeout_at(look_again.into(), notified.as_mut())
                .await
                .is_ok()
            {
                break;
            }
        }
        if in_queue.settle() {
            Ok(slot())
        } else {
            Err(blocker)
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
            max_wait: Some(Duration::from_millis(50)),
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
        let queued: Vec<_> = (0..QUEUE_SHARES)
            .map(|_| {
                let s2 = s.clone();
                tokio::spawn(async move {
                    s2.acquire(&CallerKey::new("alice"), &"a".into(), ANY, far())
                        .await
                        .err()
                })
            })
            .collect();
        // Wait until the spawned calls are queued.
        while s.state.lock().unwrap().callers[&alice].waiting < QUEUE_SHARES {
            tokio::task::yield_now().await;
        }
        // Refused on the first poll: it does not wait at all.
        let over = s.acquire(&alice, &src, ANY, far());
        tokio::pin!(over);
        assert_eq!(
            poll_once(over.as_mut()).await.map(|r| r.err()),
            Some(Some(Overload::CallerOverShare))
        );
        for q in queued {
            assert_eq!(q.await.unwrap(), Some(Overload::CallerOverShare));
        }
    }

    /// Fair: while alice has a long queue for the one slot, bob's call,
    /// arriving last, is handed the next free slot (alice was served last).
    #[tokio::test]
    async fn a_freed_slot_goes_to_the_caller_running_fewest() {
        let s = Slots::new(SlotLimits {
            total: 1,
            per_caller: 4,
            per_source: 4,
            max_wait: None,
        });
        let (alice, bob) = (CallerKey::new("alice"), CallerKey::new("bob"));
        let src: Arc<str> = "a".into();
        let running = s.acquire(&alice, &src, ANY, far()).await.unwrap();
        // Each of alice's queued calls holds its slot until the gate lets it
        // finish, as a running guest call would.
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let mut hers = Vec::new();
        for _ in 0..3 {
            let (s2, gate) = (s.clone(), gate.clone());
            hers.push(tokio::spawn(async move {
                let slot = s2
                    .acquire(&CallerKey::new("alice"), &"a".into(), ANY, far())
                    .await;
                gate.acquire().await.unwrap().forget();
                slot.map(drop)
            }));
        }
        while s.state.lock().unwrap().waiting < 3 {
            tokio::task::yield_now().await;
        }
        let his = s.acquire(&bob, &src, ANY, far());
        tokio::pin!(his);
        assert!(poll_once(his.as_mut()).await.is_none(), "bob waits");
        drop(running);
        // Alice's waiting tasks get their turns first: racing for the
        // freed slot (the old code woke every waiter), one of them would
        // take it before bob is polled again.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        let slot = poll_once(his.as_mut()).await;
        assert!(matches!(slot, Some(Ok(_))), "bob was handed the slot");
        assert_eq!(s.state.lock().unwrap().waiting, 3, "alice's still wait");
        drop(slot);
        gate.add_permits(3);
        for h in hers {
            assert!(h.await.unwrap().is_ok());
        }
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

    fn unbounded(total: usize) -> Arc<Slots> {
        Slots::new(SlotLimits {
            total,
            per_caller: 10,
            per_source: 10,
            max_wait: None,
        })
    }

    /// Obeyed: with no `slot_wait_ms`, a call waits past the old 500 ms for
    /// a slot its request's time still allows, and gets it.
    #[tokio::test]
    async fn a_call_waits_as_long_as_its_request_allows() {
        let s = unbounded(1);
        let src: Arc<str> = "a".into();
        let held = s
            .acquire(&CallerKey::new("1"), &src, ANY, far())
            .await
            .unwrap();
        let s2 = s.clone();
        let waiter = tokio::spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(5);
            s2.acquire(&CallerKey::new("2"), &"a".into(), ANY, deadline)
                .await
                .is_ok()
        });
        tokio::time::sleep(Duration::from_millis(700)).await;
        drop(held);
        assert!(waiter.await.unwrap(), "served after 700 ms of waiting");
    }

    /// Violated: a call that could not start in its request's time (the
    /// calls ahead of it hold the one slot for the observed mean each) is
    /// refused on its first poll, without waiting.
    #[tokio::test]
    async fn a_queue_that_cannot_be_served_in_time_is_refused_at_once() {
        let s = unbounded(1);
        s.state.lock().unwrap().mean_hold_us = 100_000.0;
        let src: Arc<str> = "a".into();
        let _held = s
            .acquire(&CallerKey::new("0"), &src, ANY, far())
            .await
            .unwrap();
        let soon = Instant::now() + Duration::from_millis(450);
        let who: Vec<CallerKey> = (0..6).map(|i| CallerKey::new(i.to_string())).collect();
        // One waiter: 100 ms expected, latest start 350 ms away: it waits.
        let first = s.acquire(&who[1], &src, ANY, soon);
        tokio::pin!(first);
        assert!(poll_once(first.as_mut()).await.is_none(), "waits");
        let second = s.acquire(&who[2], &src, ANY, soon);
        tokio::pin!(second);
        assert!(poll_once(second.as_mut()).await.is_none(), "waits");
        let third = s.acquire(&who[3], &src, ANY, soon);
        tokio::pin!(third);
        assert!(poll_once(third.as_mut()).await.is_none(), "waits");
        // Three ahead: 400 ms expected, past its 350 ms latest start.
        let fourth = s.acquire(&who[4], &src, ANY, soon);
        tokio::pin!(fourth);
        assert_eq!(
            poll_once(fourth.as_mut()).await.map(|r| r.err()),
            Some(Some(Overload::HostFull))
        );
        // A request with time enough still queues behind them.
        let patient = s.acquire(&who[5], &src, ANY, far());
        tokio::pin!(patient);
        assert!(poll_once(patient.as_mut()).await.is_none(), "waits");
    }
}
