//! Legacy-protocol sessions (2025-03-26 .. 2025-11-25): made by
//! `initialize`, named by `Mcp-Session-Id`, bound to the caller that opened
//! them, ended by DELETE or by idling out. 2026-07-28 has no sessions.

use super::jsonrpc::RequestId;
use super::version::Version;
use crate::auth::Principal;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Who a session belongs to: the identity of a token, not the token (a
/// refreshed token of the same user and client keeps the session).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Identity {
    client_id: String,
    subject: Option<String>,
    audience: Option<String>,
}

impl Identity {
    fn of(p: &Principal) -> Self {
        Self {
            client_id: p.client_id.clone(),
            subject: p.subject.clone(),
            audience: p.audience.clone(),
        }
    }
}

pub struct Session {
    pub id: String,
    pub version: Version,
    /// `None` until a token is first presented; then fixed.
    identity: Mutex<Option<Identity>>,
    last_seen_ms: AtomicU64,
    /// In-flight requests, for `notifications/cancelled`.
    in_flight: Mutex<HashMap<RequestId, CancellationToken>>,
    epoch: Instant,
}

impl Session {
    /// Whether `principal` may use this session. An anonymous session is
    /// bound to the first identity that presents a token on it (a client may
    /// initialize before it has signed in); a bound session admits only that
    /// identity.
    pub fn admit(&self, principal: Option<&Principal>) -> bool {
        let mut identity = self.identity.lock().unwrap();
        match (identity.as_ref(), principal) {
            (None, None) => true,
            (None, Some(p)) => {
                *identity = Some(Identity::of(p));
                true
            }
            (Some(bound), Some(p)) => *bound == Identity::of(p),
            (Some(_), None) => false,
        }
    }

    fn touch(&self) {
        self.last_seen_ms
            .store(self.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        Duration::from_millis(
            (self.epoch.elapsed().as_millis() as u64)
                .saturating_sub(self.last_seen_ms.load(Ordering::Relaxed)),
        )
    }

    /// Track a request so `notifications/cancelled` can reach it; the guard
    /// forgets it when the request ends.
    pub fn register(self: &Arc<Self>, id: &RequestId, token: CancellationToken) -> InFlight {
        self.in_flight.lock().unwrap().insert(id.clone(), token);
        InFlight {
            session: self.clone(),
            id: id.clone(),
        }
    }

    /// Cancel the in-flight request `id`; unknown ids are ignored (it may have finished).
    pub fn cancel(&self, id: &RequestId) -> bool {
        match self.in_flight.lock().unwrap().get(id) {
            Some(t) => {
                t.cancel();
                true
            }
            None => false,
        }
    }

    fn cancel_all(&self) {
        for t in self.in_flight.lock().unwrap().values() {
            t.cancel();
        }
    }
}

pub struct InFlight {
    session: Arc<Session>,
    id: RequestId,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.session.in_flight.lock().unwrap().remove(&self.id);
    }
}

pub struct Sessions {
    map: Mutex<HashMap<String, Arc<Session>>>,
    max: usize,
    idle_timeout: Duration,
}

/// 128 random bits, hex: visible ASCII only (0x21..0x7E), as the transport requires.
fn new_id() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

/// The sessions gauge follows the map (set under its lock).
fn held(map: &HashMap<String, Arc<Session>>) {
    crate::telemetry::metrics().sessions.set(map.len() as i64);
}

impl Sessions {
    pub fn new(max: usize, idle_timeout: Duration) -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
            max: max.max(1),
            idle_timeout,
        }
    }

    pub fn create(&self, version: Version, principal: Option<&Principal>) -> Arc<Session> {
        let epoch = Instant::now();
        let session = Arc::new(Session {
            id: new_id(),
            version,
            identity: Mutex::new(principal.map(Identity::of)),
            last_seen_ms: AtomicU64::new(0),
            in_flight: Mutex::new(HashMap::new()),
            epoch,
        });
        let mut map = self.map.lock().unwrap();
        if map.len() >= self.max {
            map.retain(|_, s| s.idle_for() < self.idle_timeout);
            if map.len() >= self.max {
                // Evict the longest idle session.
                if let Some(oldest) = map
                    .iter()
                    .max_by_key(|(_, s)| s.idle_for())
                    .map(|(k, _)| k.clone())
                    && let Some(s) = map.remove(&oldest)
                {
                    s.cancel_all();
                }
            }
        }
        map.insert(session.id.clone(), session.clone());
        held(&map);
        session
    }

    /// A live session by id (touching it), or `None` (unknown, ended, idled out).
    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        let mut map = self.map.lock().unwrap();
        let session = map.get(id)?.clone();
        if session.idle_for() >= self.idle_timeout {
            map.remove(id);
            held(&map);
            session.cancel_all();
            return None;
        }
        session.touch();
        Some(session)
    }

    pub fn remove(&self, id: &str) -> bool {
        let mut map = self.map.lock().unwrap();
        let removed = map.remove(id);
        held(&map);
        match removed {
            Some(s) => {
                s.cancel_all();
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(sub: &str) -> Principal {
        Principal::new(Some(sub.into()), "app".into(), vec!["x".into()], None)
    }

    #[test]
    fn sessions_are_bound_to_their_caller() {
        let s = Sessions::new(10, Duration::from_secs(60));
        let alice = s.create(Version::V2025_11_25, Some(&p("alice")));
        assert!(alice.id.len() == 32 && alice.id.bytes().all(|b| (0x21..=0x7e).contains(&b)));
        assert!(alice.admit(Some(&p("alice"))));
        assert!(!alice.admit(Some(&p("bob"))));
        assert!(!alice.admit(None));
        let anon = s.create(Version::V2025_11_25, None);
        assert!(anon.admit(None));
        assert!(anon.admit(Some(&p("bob"))), "first token binds");
        assert!(!anon.admit(Some(&p("alice"))));
        assert!(s.get(&alice.id).is_some());
        assert!(s.remove(&alice.id));
        assert!(s.get(&alice.id).is_none());
    }

    #[test]
    fn bounded() {
        let s = Sessions::new(2, Duration::from_secs(60));
        let a = s.create(Version::V2025_03_26, None);
        std::thread::sleep(Duration::from_millis(5));
        s.create(Version::V2025_03_26, None);
        s.create(Version::V2025_03_26, None);
        assert!(s.get(&a.id).is_none(), "longest idle evicted");
    }

    #[test]
    fn cancellation_reaches_in_flight_requests() {
        let s = Sessions::new(2, Duration::from_secs(60));
        let a = s.create(Version::V2025_03_26, None);
        let id = RequestId::from_value(&serde_json::json!(7)).unwrap();
        let token = CancellationToken::new();
        let guard = a.register(&id, token.clone());
        assert!(a.cancel(&id));
        assert!(token.is_cancelled());
        drop(guard);
        assert!(!a.cancel(&id));
    }
}
