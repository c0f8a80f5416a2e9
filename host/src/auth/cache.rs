//! Verified tokens remembered until they expire, keyed by a SHA-256 of the
//! token (the token itself is never stored), so a page request does not
//! re-verify a signature. Bounded: expired entries go first, then the oldest.

use super::Principal;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

pub struct TokenCache {
    capacity: usize,
    inner: Mutex<Inner>,
}

struct Inner {
    entries: HashMap<[u8; 32], (Arc<Principal>, u64)>,
    order: VecDeque<[u8; 32]>,
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

impl TokenCache {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            inner: Mutex::new(Inner {
                entries: HashMap::new(),
                order: VecDeque::new(),
            }),
        }
    }

    pub fn get(&self, token: &str) -> Option<Arc<Principal>> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let inner = self.inner.lock().unwrap();
        match inner.entries.get(&key) {
            Some((p, exp)) if *exp > now_s() => Some(p.clone()),
            _ => None,
        }
    }

    pub fn insert(&self, token: &str, principal: Arc<Principal>, expires_at: u64) {
        if self.capacity == 0 || expires_at <= now_s() {
            return;
        }
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut inner = self.inner.lock().unwrap();
        if inner.entries.len() >= self.capacity {
            let now = now_s();
            inner.entries.retain(|_, (_, exp)| *exp > now);
            let Inner { entries, order } = &mut *inner;
            order.retain(|k| entries.contains_key(k));
            while inner.entries.len() >= self.capacity {
                let Some(oldest) = inner.order.pop_front() else {
                    break;
                };
                inner.entries.remove(&oldest);
            }
        }
        if inner.entries.insert(key, (principal, expires_at)).is_none() {
            inner.order.push_back(key);
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
        let c = TokenCache::new(2);
        let later = now_s() + 100;
        c.insert("a", p("a"), later);
        c.insert("b", p("b"), later);
        c.insert("c", p("c"), later);
        assert!(c.get("a").is_none(), "oldest evicted");
        assert_eq!(c.get("c").unwrap().subject.as_deref(), Some("c"));
        c.insert("old", p("old"), now_s() - 1);
        assert!(c.get("old").is_none());
    }
}
