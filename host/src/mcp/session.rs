//! Legacy-protocol sessions (2025-03-26 .. 2025-11-25): made by
//! `initialize`, named by `Mcp-Session-Id`, bound to the caller that opened
//! them, ended by DELETE or by idling out. 2026-07-28 has no sessions.
//!
//! The table is bounded three ways ([`SessionLimits`]): in all, per
//! principal, and for anonymous sessions together. When a bound is reached
//! the longest-idle session the newcomer may replace gives way: its own (a
//! principal's, or an anonymous one), or, when the table is full, an
//! anonymous one, or for an authenticated newcomer any authenticated one.
//! Anonymous newcomers never replace authenticated sessions, and a session
//! with a request in flight is never replaced (nor idled out): then the
//! newcomer is refused ([`SessionRefused`]), with a retryable answer.

use super::jsonrpc::RequestId;
use super::version::Version;
use crate::auth::Principal;
use foldhash::{HashMap, HashMapExt};
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

    /// Whether `p` is this identity: compared in place, since every request
    /// on a bound session asks (no copies of its strings to compare them).
    fn is(&self, p: &Principal) -> bool {
        self.client_id == p.client_id && self.subject == p.subject && self.audience == p.audience
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
            (Some(bound), Some(p)) => bound.is(p),
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

    /// A request is in flight on it: not to be evicted.
    fn busy(&self) -> bool {
        !self.in_flight.lock().unwrap().is_empty()
    }

    fn anonymous(&self) -> bool {
        self.identity.lock().unwrap().is_none()
    }

    fn belongs_to(&self, identity: &Identity) -> bool {
        self.identity.lock().unwrap().as_ref() == Some(identity)
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

/// The bounds of the session table (`[http]` in the config).
#[derive(Clone, Copy, Debug)]
pub struct SessionLimits {
    pub max: usize,
    pub per_principal: usize,
    pub anonymous: usize,
    pub idle_timeout: Duration,
}

/// Why `initialize` got no session. Both are retryable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SessionRefused {
    /// The principal (or the anonymous callers together) holds its quota,
    /// each with a request in flight.
    #[error("the caller holds its quota of sessions, all of them busy")]
    PrincipalQuota,
    /// The table is full of sessions this newcomer may not replace.
    #[error("the session table is full")]
    Full,
}

pub struct Sessions {
    map: Mutex<HashMap<String, Arc<Session>>>,
    limits: SessionLimits,
}

/// 128 random bits, hex: visible ASCII only (0x21..0x7E), as the transport requires.
fn new_id() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

type Table = HashMap<String, Arc<Session>>;

/// Remove the longest-idle session that is not busy and that `may_go`
/// admits; whether there was one.
fn evict(map: &mut Table, may_go: impl Fn(&Session) -> bool) -> bool {
    let victim = map
        .iter()
        .filter(|(_, s)| may_go(s) && !s.busy())
        .max_by_key(|(_, s)| s.idle_for())
        .map(|(k, _)| k.clone());
    match victim.and_then(|k| map.remove(&k)) {
        Some(s) => {
            tracing::info!(session = %s.id, "session evicted to make room");
            s.cancel_all();
            true
        }
        None => false,
    }
}

/// The sessions gauge follows the map (set under its lock).
fn held(map: &HashMap<String, Arc<Session>>) {
    crate::telemetry::metrics().sessions.set(map.len() as i64);
}

impl Sessions {
    pub fn new(limits: SessionLimits) -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
            limits: SessionLimits {
                max: limits.max.max(1),
                per_principal: limits.per_principal.max(1),
                anonymous: limits.anonymous.max(1),
                idle_timeout: limits.idle_timeout,
            },
        }
    }

    pub fn create(
        &self,
        version: Version,
        principal: Option<&Principal>,
    ) -> Result<Arc<Session>, SessionRefused> {
        let identity = principal.map(Identity::of);
        let mut map = self.map.lock().unwrap();
        let idle_timeout = self.limits.idle_timeout;
        if map.len() >= self.limits.max {
            map.retain(|_, s| s.busy() || s.idle_for() < idle_timeout);
        }
        // The newcomer's own quota: its own longest-idle session gives way.
        let (mine, quota) = match &identity {
            None => (
                map.values().filter(|s| s.anonymous()).count(),
                self.limits.anonymous,
            ),
            Some(id) => (
                map.values().filter(|s| s.belongs_to(id)).count(),
                self.limits.per_principal,
            ),
        };
        if mine >= quota {
            let freed = match &identity {
                None => evict(&mut map, Session::anonymous),
                Some(id) => evict(&mut map, |s| s.belongs_to(id)),
            };
            if !freed {
                return Err(SessionRefused::PrincipalQuota);
            }
        }
        // The whole table: anonymous sessions go first; an authenticated
        // newcomer may then replace an authenticated one, an anonymous never.
        if map.len() >= self.limits.max
            && !evict(&mut map, Session::anonymous)
            && (identity.is_none() || !evict(&mut map, |_| true))
        {
            return Err(SessionRefused::Full);
        }
        let session = Arc::new(Session {
            id: new_id(),
            version,
            identity: Mutex::new(identity),
            last_seen_ms: AtomicU64::new(0),
            in_flight: Mutex::new(HashMap::new()),
            epoch: Instant::now(),
        });
        map.insert(session.id.clone(), session.clone());
        held(&map);
        Ok(session)
    }

    /// A live session by id (touching it), or `None` (unknown, ended, idled out).
    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        let mut map = self.map.lock().unwrap();
        let session = map.get(id)?.clone();
        if session.idle_for() >= self.limits.idle_timeout && !session.busy() {
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

    fn sessions(max: usize, per_principal: usize, anonymous: usize) -> Sessions {
        Sessions::new(SessionLimits {
            max,
            per_principal,
            anonymous,
            idle_timeout: Duration::from_secs(60),
        })
    }

    fn open(s: &Sessions, who: Option<&str>) -> Result<Arc<Session>, SessionRefused> {
        s.create(Version::V2025_11_25, who.map(p).as_ref())
    }

    /// Whether `session` is still in the table (without touching it, which
    /// would change who is longest idle).
    fn alive(s: &Sessions, session: &Session) -> bool {
        s.map.lock().unwrap().contains_key(&session.id)
    }

    /// Keep a request "in flight" on `session` while the guard lives.
    fn busy(session: &Arc<Session>, n: i64) -> InFlight {
        let id = RequestId::from_value(&serde_json::json!(n)).unwrap();
        session.register(&id, CancellationToken::new())
    }

    #[test]
    fn sessions_are_bound_to_their_caller() {
        let s = sessions(10, 10, 10);
        let alice = open(&s, Some("alice")).unwrap();
        assert!(alice.id.len() == 32 && alice.id.bytes().all(|b| (0x21..=0x7e).contains(&b)));
        assert!(alice.admit(Some(&p("alice"))));
        assert!(!alice.admit(Some(&p("bob"))));
        assert!(!alice.admit(None));
        // The same user through another client, or for another audience,
        // is another identity; scopes are not part of it.
        let as_alice = |client: &str, audience: Option<&str>, scopes: Vec<String>| {
            Principal::new(
                Some("alice".into()),
                client.into(),
                scopes,
                audience.map(Into::into),
            )
        };
        let same = p("alice");
        assert!(!alice.admit(Some(&as_alice(
            "other-app",
            same.audience.as_deref(),
            vec![]
        ))));
        assert!(!alice.admit(Some(&as_alice(
            &same.client_id,
            Some("https://elsewhere"),
            vec![]
        ))));
        assert!(alice.admit(Some(&as_alice(
            &same.client_id,
            same.audience.as_deref(),
            vec!["more".into()]
        ))));
        let anon = open(&s, None).unwrap();
        assert!(anon.admit(None));
        assert!(anon.admit(Some(&p("bob"))), "first token binds");
        assert!(!anon.admit(Some(&p("alice"))));
        assert!(s.get(&alice.id).is_some());
        assert!(s.remove(&alice.id));
        assert!(s.get(&alice.id).is_none());
    }

    #[test]
    fn bounded() {
        let s = sessions(2, 10, 10);
        let a = open(&s, None).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        open(&s, None).unwrap();
        open(&s, None).unwrap();
        assert!(s.get(&a.id).is_none(), "longest idle evicted");
    }

    #[test]
    fn anonymous_sessions_never_evict_authenticated_ones() {
        let s = sessions(3, 10, 10);
        let alice = open(&s, Some("alice")).unwrap();
        let bob = open(&s, Some("bob")).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        for _ in 0..100 {
            open(&s, None).unwrap();
        }
        assert!(alive(&s, &alice) && alive(&s, &bob));
        // Only one anonymous session fits; with it busy, the next is refused.
        let anon = open(&s, None).unwrap();
        let _guard = busy(&anon, 1);
        assert_eq!(open(&s, None).err(), Some(SessionRefused::Full));
        // An authenticated newcomer may replace an idle authenticated one.
        let carol = open(&s, Some("carol")).unwrap();
        assert!(alive(&s, &carol) && alive(&s, &anon));
        assert_eq!(s.map.lock().unwrap().len(), 3);
    }

    #[test]
    fn the_anonymous_quota_obeyed_and_violated() {
        let s = sessions(100, 10, 3);
        let first = open(&s, None).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let held: Vec<_> = (0..2).map(|_| open(&s, None).unwrap()).collect();
        assert!(alive(&s, &first), "just under the quota: all kept");
        std::thread::sleep(Duration::from_millis(5));
        let _fourth = open(&s, None).unwrap();
        assert!(!alive(&s, &first), "over it: the longest idle gave way");
        let guards: Vec<_> = s
            .map
            .lock()
            .unwrap()
            .values()
            .enumerate()
            .map(|(i, session)| busy(session, i as i64))
            .collect();
        assert_eq!(open(&s, None).err(), Some(SessionRefused::PrincipalQuota));
        drop(guards);
        drop(held);
    }

    #[test]
    fn the_per_principal_quota_obeyed_and_violated() {
        let s = sessions(100, 2, 10);
        let a1 = open(&s, Some("alice")).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let a2 = open(&s, Some("alice")).unwrap();
        let bob = open(&s, Some("bob")).unwrap();
        assert!(alive(&s, &a1), "just under the quota: kept");
        std::thread::sleep(Duration::from_millis(5));
        let a3 = open(&s, Some("alice")).unwrap();
        assert!(!alive(&s, &a1), "alice's own longest idle gave way");
        assert!(alive(&s, &bob), "bob is not touched by alice's quota");
        let _g2 = busy(&a2, 1);
        let _g3 = busy(&a3, 2);
        assert_eq!(
            open(&s, Some("alice")).err(),
            Some(SessionRefused::PrincipalQuota)
        );
        assert!(open(&s, Some("bob")).is_ok());
    }

    #[test]
    fn a_session_with_a_request_in_flight_is_never_evicted() {
        let s = sessions(2, 10, 10);
        let a = open(&s, None).unwrap();
        let guard = busy(&a, 1);
        std::thread::sleep(Duration::from_millis(5));
        let b = open(&s, None).unwrap();
        open(&s, None).unwrap();
        assert!(alive(&s, &a), "busy: kept although the longest idle");
        assert!(!alive(&s, &b));
        drop(guard);
        std::thread::sleep(Duration::from_millis(5));
        open(&s, None).unwrap();
        open(&s, None).unwrap();
        assert!(!alive(&s, &a), "idle again: it may go");
    }

    #[test]
    fn cancellation_reaches_in_flight_requests() {
        let s = sessions(2, 10, 10);
        let a = open(&s, None).unwrap();
        let id = RequestId::from_value(&serde_json::json!(7)).unwrap();
        let token = CancellationToken::new();
        let guard = a.register(&id, token.clone());
        assert!(a.cancel(&id));
        assert!(token.is_cancelled());
        drop(guard);
        assert!(!a.cancel(&id));
    }
}
