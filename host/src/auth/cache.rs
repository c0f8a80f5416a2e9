//! Verified tokens remembered, keyed by a SHA-256 of the token (the token
//! itself is never stored), so a page request does not re-verify a
//! signature. An entry lives at most min(`exp`, `cache_max_age_s`) and only
//! while the verifier's key set is the one it was verified against: a
//! changed key set (a JWKS refresh that found a difference) drops every
//! entry. Bounded: expired entries go first, then the oldest.

use super::Principal;
use foldhash::{HashMap, HashMapExt};
use sha2::{Digest, Sha256};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

pub struct TokenCache {
    capacity: usize,
    /// Seconds an entry may live at most, whatever its `exp` says.
    max_age_s: u64,
    inner: Mutex<Inner>,
}

struct Entry {
    principal: Arc<Principal>,
    /// Unix seconds: min(`exp`, insertion + max age).
    until: u64,
    /// The verifier's key generation the token was verified under.
    generation: u64,
}

struct Inner {
    entries: HashMap<[u8; 32], Entry>,
    order: VecDeque<[u8; 32]>,
    /// The key generation of the entries held; another one flushes them.
    generation: u64,
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

fn key(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl TokenCache {
    pub fn new(capacity: usize, max_age_s: u64) -> Self {
        Self {
            capacity,
            max_age_s,
            inner: Mutex::new(Inner {
                entries: HashMap::new(),
                order: VecDeque::new(),
                generation: 0,
            }),
        }
    }

    /// The principal remembered for `token`, if verified under key
    /// `generation` and not yet expired.
    pub fn get(&self, token: &str, generation: u64) -> Option<Arc<Principal>> {
        self.get_at(token, generation, now_s())
    }

    pub fn insert(&self, token: &str, principal: Arc<Principal>, expires_at: u64, generation: u64) {
        self.insert_at(token, principal, expires_at, generation, now_s())
    }

    fn get_at(&self, token: &str, generation: u64, now: u64) -> Option<Arc<Principal>> {
        let mut inner = self.inner.lock().unwrap();
        inner.flush_if_rekeyed(generation);
        match inner.entries.get(&key(token)) {
            Some(e) if e.until > now && e.generation == generation => Some(e.principal.clone()),
            _ => None,
        }
    }

    fn insert_at(
        &self,
        token: &str,
        principal: Arc<Principal>,
        expires_at: u64,
        generation: u64,
        now: u64,
    ) {
        let until = expires_at.min(now.saturating_add(self.max_age_s));
        if self.capacity == 0 || until <= now {
            return;
        }
        let mut inner = self.inner.lock().unwrap();
        inner.flush_if_rekeyed(generation);
        if generation != inner.generation {
            return;
        }
        if inner.entries.len() >= self.capacity {
            inner.entries.retain(|_, e| e.until > now);
            let Inner { entries, order, .. } = &mut *inner;
            order.retain(|k| entries.contains_key(k));
            while inner.entries.len() >= self.capacity {
                let Some(oldest) = inner.order.pop_front() else {
                    break;
                };
                inner.entries.remove(&oldest);
            }
        }
        let k = key(token);
        let entry = Entry {
            principal,
            until,
            generation,
        };
        if inner.entries.insert(k, entry).is_none() {
            inner.order.push_back(k);
        }
    }
}

impl Inner {
    /// Generations only grow: a newer one drops everything remembered.
    fn flush_if_rekeyed(&mut self, generation: u64) {
        if generation > self.generation {
            self.entries.clear();
            self.order.clear();
            self.generation = generation;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Arc<Principal> {
        Arc::new(Principal::new(Some(s.into()), "c".into(), vec![], None))
    }

    #[test]
    fn bounded_and_expiring() {
        let c = TokenCache::new(2, 300);
        let later = now_s() + 100;
        c.insert("a", p("a"), later, 0);
        c.insert("b", p("b"), later, 0);
        c.insert("c", p("c"), later, 0);
        assert!(c.get("a", 0).is_none(), "oldest evicted");
        assert_eq!(c.get("c", 0).unwrap().subject.as_deref(), Some("c"));
        c.insert("old", p("old"), now_s() - 1, 0);
        assert!(c.get("old", 0).is_none());
    }

    #[test]
    fn entries_live_at_most_the_max_age() {
        let c = TokenCache::new(10, 300);
        let t = 1_000_000;
        // `exp` an hour away: the cap (5 min) decides.
        c.insert_at("long", p("long"), t + 3600, 0, t);
        assert!(c.get_at("long", 0, t + 299).is_some(), "just under the cap");
        assert!(c.get_at("long", 0, t + 300).is_none(), "at the cap");
        // `exp` a minute away: `exp` decides.
        c.insert_at("short", p("short"), t + 60, 0, t);
        assert!(c.get_at("short", 0, t + 59).is_some());
        assert!(c.get_at("short", 0, t + 60).is_none());
        // A max age of 0 remembers nothing.
        let none = TokenCache::new(10, 0);
        none.insert_at("x", p("x"), t + 3600, 0, t);
        assert!(none.get_at("x", 0, t).is_none());
    }

    #[test]
    fn a_new_key_generation_flushes_everything() {
        let c = TokenCache::new(10, 300);
        let t = 1_000_000;
        c.insert_at("a", p("a"), t + 3600, 0, t);
        assert!(c.get_at("a", 0, t + 1).is_some());
        assert!(c.get_at("a", 1, t + 1).is_none(), "rekeyed");
        assert!(c.get_at("a", 0, t + 1).is_none(), "flushed, not hidden");
        // Verified under the old keys, finished after the change: dropped.
        c.insert_at("late", p("late"), t + 3600, 0, t + 2);
        assert!(c.get_at("late", 1, t + 2).is_none());
        c.insert_at("b", p("b"), t + 3600, 1, t + 2);
        assert!(c.get_at("b", 1, t + 3).is_some());
    }
}
