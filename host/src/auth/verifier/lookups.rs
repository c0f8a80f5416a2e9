//! Bounds on outbound token lookups (introspection): a flood of bad tokens
//! must not become a flood of requests to the authorization server
//! (observed: 200 random tokens → 200 calls, 192 in flight at once).
//!
//! - one lookup in flight per token hash: concurrent requests with the same
//!   token wait for that one answer (if its request goes away, a waiter
//!   takes over);
//! - a short, bounded negative cache: a token found inactive is refused
//!   without a call for `negative_ttl`;
//! - at most `max_concurrent` lookups in flight in all; the others wait, at
//!   most `wait`, then get "unavailable";
//! - at most a quarter of them (at least 1) for one peer (an IPv4 address,
//!   an IPv6 /64, or the stdio client): each distinct random token costs a
//!   lookup, so without this one client sending random tokens held every
//!   permit and a real new token from anyone else waited out `wait` (issue
//!   48). A peer over its share waits for its own lookups, not for others'.
//!
//! Active tokens are remembered by the token cache one layer up.

use super::{Verified, VerifyError};
use sha2::{Digest, Sha256};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{OnceCell, Semaphore};

type Hash = [u8; 32];
type Outcome = Result<Verified, VerifyError>;

pub struct Lookups {
    in_flight: Mutex<HashMap<Hash, Arc<OnceCell<Outcome>>>>,
    negative: Mutex<NegativeCache>,
    permits: Semaphore,
    /// Each peer's own permits, with how many requests use them; a peer
    /// is forgotten when none does (the map holds only peers with a
    /// request in here, so the connection caps bound it).
    peers: Mutex<HashMap<PeerKey, (Arc<Semaphore>, usize)>>,
    per_peer: usize,
    wait: Duration,
}

/// Whose share a lookup takes: an IPv4 address, an IPv6 /64 (one host
/// usually holds a whole /64), or the one local (stdio) client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum PeerKey {
    V4(std::net::Ipv4Addr),
    V6Prefix(u64),
    Local,
}

impl PeerKey {
    fn of(peer: Option<IpAddr>) -> Self {
        match peer.map(|p| p.to_canonical()) {
            None => PeerKey::Local,
            Some(IpAddr::V4(a)) => PeerKey::V4(a),
            Some(IpAddr::V6(a)) => PeerKey::V6Prefix((u128::from(a) >> 64) as u64),
        }
    }
}

/// One request's use of its peer's permits; forgets the peer with the last.
struct PeerUse<'a> {
    lookups: &'a Lookups,
    key: PeerKey,
    permits: Arc<Semaphore>,
}

impl<'a> PeerUse<'a> {
    fn enter(lookups: &'a Lookups, key: PeerKey) -> Self {
        let mut peers = lookups.peers.lock().unwrap();
        let entry = peers
            .entry(key)
            .or_insert_with(|| (Arc::new(Semaphore::new(lookups.per_peer)), 0));
        entry.1 += 1;
        let permits = entry.0.clone();
        Self {
            lookups,
            key,
            permits,
        }
    }
}

impl Drop for PeerUse<'_> {
    fn drop(&mut self) {
        let mut peers = self.lookups.peers.lock().unwrap();
        if let Some(entry) = peers.get_mut(&self.key) {
            entry.1 -= 1;
            if entry.1 == 0 {
                peers.remove(&self.key);
            }
        }
    }
}

impl Lookups {
    /// `wait` bounds the wait for one of the `max_concurrent` permits.
    pub fn new(
        max_concurrent: usize,
        negative_ttl: Duration,
        negative_entries: usize,
        wait: Duration,
    ) -> Self {
        let max_concurrent = max_concurrent.max(1);
        Self {
            in_flight: Mutex::new(HashMap::new()),
            negative: Mutex::new(NegativeCache::new(negative_entries, negative_ttl)),
            permits: Semaphore::new(max_concurrent),
            peers: Mutex::new(HashMap::new()),
            per_peer: (max_concurrent / 4).max(1),
            wait,
        }
    }

    /// One peer's share of the lookups in flight, instead of a quarter
    /// (`None`: keep that), at least 1 and at most all of them.
    pub fn with_per_peer(mut self, per_peer: Option<usize>) -> Self {
        if let Some(n) = per_peer {
            self.per_peer = n.clamp(1, self.permits.available_permits().max(1));
        }
        self
    }

    /// Verify `token` presented by `peer` (`None`: the stdio client),
    /// calling `lookup` only if no answer is cached or in flight.
    pub async fn verify<F, Fut>(&self, token: &str, peer: Option<IpAddr>, lookup: F) -> Outcome
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Outcome>,
    {
        let key: Hash = Sha256::digest(token.as_bytes()).into();
        if let Some(reason) = self.negative.lock().unwrap().get(&key, Instant::now()) {
            return Err(VerifyError::Invalid(format!("{reason} (remembered)")));
        }
        let cell = self
            .in_flight
            .lock()
            .unwrap()
            .entry(key)
            .or_default()
            .clone();
        let outcome = cell
            .get_or_init(|| async {
                // The peer's own share first, then one of all: both within `wait`.
                let peer = PeerUse::enter(self, PeerKey::of(peer));
                let permits = async {
                    let own = peer.permits.acquire().await;
                    let all = self.permits.acquire().await;
                    (own, all)
                };
                let Ok(_permits) = tokio::time::timeout(self.wait, permits).await else {
                    return Err(VerifyError::Unavailable(
                        "too many token lookups in flight".into(),
                    ));
                };
                let outcome = lookup().await;
                if let Err(VerifyError::Invalid(reason)) = &outcome {
                    self.negative
                        .lock()
                        .unwrap()
                        .insert(key, reason.clone(), Instant::now());
                }
                outcome
            })
            .await
            .clone();
        let mut in_flight = self.in_flight.lock().unwrap();
        if in_flight.get(&key).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
            in_flight.remove(&key);
        }
        outcome
    }
}

/// Inactive token hashes with their expiry, oldest first when full.
struct NegativeCache {
    capacity: usize,
    ttl: Duration,
    entries: HashMap<Hash, (Instant, String)>,
    order: VecDeque<Hash>,
}

impl NegativeCache {
    fn new(capacity: usize, ttl: Duration) -> Self {
        Self {
            capacity,
            ttl,
            entries: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    fn get(&self, key: &Hash, now: Instant) -> Option<String> {
        match self.entries.get(key) {
            Some((until, reason)) if *until > now => Some(reason.clone()),
            _ => None,
        }
    }

    fn insert(&mut self, key: Hash, reason: String, now: Instant) {
        if self.capacity == 0 || self.ttl.is_zero() {
            return;
        }
        if self.entries.len() >= self.capacity {
            self.entries.retain(|_, (until, _)| *until > now);
            let entries = &self.entries;
            self.order.retain(|k| entries.contains_key(k));
            while self.entries.len() >= self.capacity {
                let Some(oldest) = self.order.pop_front() else {
                    break;
                };
                self.entries.remove(&oldest);
            }
        }
        if self.entries.insert(key, (now + self.ttl, reason)).is_none() {
            self.order.push_back(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Principal;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn verified() -> Verified {
        Verified {
            principal: Principal::new(Some("alice".into()), "app".into(), vec![], None),
            expires_at: u64::MAX,
        }
    }

    struct Counter {
        calls: AtomicUsize,
        now: AtomicUsize,
        peak: AtomicUsize,
    }

    impl Counter {
        fn new() -> Arc<Self> {
            Arc::new(Self {
                calls: AtomicUsize::new(0),
                now: AtomicUsize::new(0),
                peak: AtomicUsize::new(0),
            })
        }

        /// A lookup that counts itself, stays in flight a while, and says
        /// tokens starting with "good" are active.
        async fn lookup(self: Arc<Self>, token: String) -> Outcome {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(n, Ordering::SeqCst);
            // Good tokens stay in flight long enough for every concurrent
            // request to find the one lookup.
            let pause = if token.starts_with("good") { 300 } else { 20 };
            tokio::time::sleep(Duration::from_millis(pause)).await;
            self.now.fetch_sub(1, Ordering::SeqCst);
            if token.starts_with("good") {
                Ok(verified())
            } else {
                Err(VerifyError::Invalid("inactive".into()))
            }
        }
    }

    fn lookups(max: usize) -> Arc<Lookups> {
        Arc::new(Lookups::new(
            max,
            Duration::from_secs(60),
            100,
            Duration::from_secs(60),
        ))
    }

    async fn verify_all(l: &Arc<Lookups>, c: &Arc<Counter>, tokens: Vec<String>) -> usize {
        let tasks: Vec<_> = tokens
            .into_iter()
            .map(|t| {
                let (l, c) = (l.clone(), c.clone());
                tokio::spawn(
                    async move { l.verify(&t, None, || c.lookup(t.clone())).await.is_ok() },
                )
            })
            .collect();
        let mut ok = 0;
        for t in tasks {
            ok += usize::from(t.await.unwrap());
        }
        ok
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_lookup_per_token_and_at_most_the_cap_in_flight() {
        let (l, c) = (lookups(4), Counter::new());
        // 50 distinct bad tokens, each sent 4 times at once.
        let tokens: Vec<String> = (0..200).map(|i| format!("bad-{}", i % 50)).collect();
        assert_eq!(verify_all(&l, &c, tokens.clone()).await, 0);
        assert_eq!(
            c.calls.load(Ordering::SeqCst),
            50,
            "one call per distinct token"
        );
        assert!(
            c.peak.load(Ordering::SeqCst) <= 4,
            "cap on concurrent lookups"
        );
        // Remembered: the same bad tokens again cost nothing.
        assert_eq!(verify_all(&l, &c, tokens).await, 0);
        assert_eq!(c.calls.load(Ordering::SeqCst), 50, "negative cache");
        // Good tokens are shared while in flight, and not negatively cached.
        let good: Vec<String> = (0..10).map(|_| "good-1".to_string()).collect();
        assert_eq!(verify_all(&l, &c, good).await, 10);
        assert_eq!(c.calls.load(Ordering::SeqCst), 51);
        assert!(
            l.in_flight.lock().unwrap().is_empty(),
            "nothing left in flight"
        );
    }

    /// Issue 48: 200 random tokens a second from one peer, each a slow
    /// lookup, must not make a real new token from another peer wait out
    /// `wait` (with one pool of 8 permits it queued behind ~50 of them).
    /// Bounded: 200 tokens over one second, each lookup 400 ms.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn random_tokens_from_one_peer_do_not_starve_a_real_token() {
        let l = Arc::new(Lookups::new(
            8,
            Duration::from_secs(60),
            1000,
            Duration::from_secs(1),
        ));
        let slow = |good: bool| async move {
            tokio::time::sleep(Duration::from_millis(400)).await;
            if good {
                Ok(verified())
            } else {
                Err(VerifyError::Invalid("inactive".into()))
            }
        };
        let attacker: IpAddr = "192.0.2.1".parse().unwrap();
        let flood = {
            let l = l.clone();
            tokio::spawn(async move {
                let mut tasks = Vec::new();
                for i in 0..200 {
                    let l = l.clone();
                    tasks.push(tokio::spawn(async move {
                        let token = format!("random-{i}-{}", rand::random::<u64>());
                        l.verify(&token, Some(attacker), || slow(false)).await
                    }));
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                for t in tasks {
                    assert!(t.await.unwrap().is_err());
                }
            })
        };
        // The flood is under way: dozens of lookups queued.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let client: IpAddr = "2001:db8::1".parse().unwrap();
        let r = l.verify("good-token", Some(client), || slow(true)).await;
        assert!(r.is_ok(), "a real token from another peer: {r:?}");
        flood.await.unwrap();
        assert!(l.peers.lock().unwrap().is_empty(), "peers forgotten");
    }

    #[test]
    fn a_peers_share_is_a_quarter_unless_configured() {
        let share = |per_peer| {
            Lookups::new(8, Duration::from_secs(1), 1, Duration::from_secs(1))
                .with_per_peer(per_peer)
                .per_peer
        };
        assert_eq!(share(None), 2);
        assert_eq!(share(Some(0)), 1);
        assert_eq!(share(Some(5)), 5);
        assert_eq!(share(Some(100)), 8, "at most all of them");
    }

    #[test]
    fn an_ipv6_peer_is_its_64() {
        let a = PeerKey::of(Some("2001:db8:0:1::1".parse().unwrap()));
        assert_eq!(
            a,
            PeerKey::of(Some("2001:db8:0:1:ffff::9".parse().unwrap()))
        );
        assert_ne!(a, PeerKey::of(Some("2001:db8:0:2::1".parse().unwrap())));
        assert_eq!(
            PeerKey::of(Some("::ffff:192.0.2.1".parse().unwrap())),
            PeerKey::of(Some("192.0.2.1".parse().unwrap()))
        );
        assert_eq!(PeerKey::of(None), PeerKey::Local);
    }

    #[test]
    fn the_negative_cache_is_bounded_and_expires() {
        let mut n = NegativeCache::new(2, Duration::from_secs(10));
        let t0 = Instant::now();
        n.insert([1; 32], "a".into(), t0);
        n.insert([2; 32], "b".into(), t0);
        assert!(n.get(&[1; 32], t0).is_some(), "just at capacity: kept");
        n.insert([3; 32], "c".into(), t0);
        assert!(
            n.get(&[1; 32], t0).is_none(),
            "over it: the oldest forgotten"
        );
        assert_eq!(n.entries.len(), 2);
        assert!(
            n.get(&[3; 32], t0 + Duration::from_secs(10)).is_none(),
            "expired"
        );
    }
}
