//! The HTTP transport's settings: `[http]` (endpoint, deadlines, body
//! limits, origins, sessions, connections).

use crate::listener::limits::{DEFAULT_PEER_IPV4_PREFIX, DEFAULT_PEER_IPV6_PREFIX};
use serde::Deserialize;
use std::time::Duration;

/// Default MCP request deadline.
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 30_000;
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
/// Body bytes accepted before a token is verified (no token, or auth on and
/// none presented): enough for any discovery request, far below a listing's.
pub const DEFAULT_MAX_UNAUTHENTICATED_BODY_BYTES: usize = 64 * 1024;
/// A request body must arrive whole within this, however it trickles in.
pub const DEFAULT_BODY_TIMEOUT_MS: u64 = 10_000;
/// Items in one 2025-03-26 JSON-RPC batch; a longer batch is refused whole.
pub const DEFAULT_MAX_BATCH_ITEMS: usize = 100;
pub const DEFAULT_SHUTDOWN_GRACE_MS: u64 = 10_000;
pub const DEFAULT_MAX_SESSIONS: usize = 10_000;
pub const DEFAULT_SESSION_IDLE_TIMEOUT_S: u64 = 3_600;

/// Connections open at once, from everyone. Below the usual 1,024
/// descriptors a process gets, leaving room for sources, databases, the
/// precompile cache and outbound HTTP: stalled clients run out of this
/// budget, not of descriptors. Over it a new connection is closed at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// Connections open at once from one peer IP address (over it: closed at
/// once). Half the global cap, so one address cannot take every connection.
pub const DEFAULT_MAX_CONNECTIONS_PER_PEER: usize = 256;

/// Legacy sessions one principal (client id, subject, audience) may hold;
/// a new one beyond it replaces the principal's own longest-idle session.
pub const DEFAULT_MAX_SESSIONS_PER_PRINCIPAL: usize = 32;
/// Sessions opened without a token, together; a new one beyond it replaces
/// the longest-idle anonymous session. Anonymous sessions never replace
/// authenticated ones.
pub const DEFAULT_MAX_ANONYMOUS_SESSIONS: usize = 1_000;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// The MCP endpoint path.
    pub endpoint: String,
    /// Deadline of every MCP request; flows into the guest budget.
    #[schemars(range(min = 1))]
    pub request_timeout_ms: u64,
    /// Request bodies above this get 413 without being read to the end.
    pub max_body_bytes: usize,
    /// The body limit until a token is verified (the Authorization header is
    /// checked before the body is read); at most `max_body_bytes`. Without
    /// auth nobody can be verified and `max_body_bytes` applies.
    pub max_unauthenticated_body_bytes: usize,
    /// A body not received whole within this gets 408 and the connection closes.
    pub body_timeout_ms: u64,
    /// Items in one JSON-RPC batch (2025-03-26); more: -32600, nothing runs.
    pub max_batch_items: usize,
    /// Origins allowed besides the listener's own loopback origins.
    pub allowed_origins: Vec<String>,
    /// Host header values allowed besides loopback names (for a public listener:
    /// the public host name).
    pub allowed_hosts: Vec<String>,
    /// On SIGINT/SIGTERM, how long in-flight requests may finish.
    pub shutdown_grace_ms: u64,
    /// Connections open at once, from everyone (over it: closed at once).
    pub max_connections: usize,
    /// Connections open at once from one peer IP address.
    pub max_connections_per_peer: usize,
    /// Leading bits of an IPv6 address that name one peer (0..=128).
    pub peer_ipv6_prefix: u8,
    /// Leading bits of an IPv4 address that name one peer (0..=32).
    pub peer_ipv4_prefix: u8,
    /// Legacy-protocol sessions kept at most (oldest idle evicted first;
    /// never one with a request in flight, never an authenticated one for
    /// an anonymous newcomer).
    pub max_sessions: usize,
    /// Sessions one principal may hold (its own oldest idle one gives way).
    pub max_sessions_per_principal: usize,
    /// Sessions opened without a token, together.
    pub max_anonymous_sessions: usize,
    /// A legacy session unused this long is dropped.
    pub session_idle_timeout_s: u64,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            endpoint: "/mcp".into(),
            request_timeout_ms: DEFAULT_REQUEST_TIMEOUT_MS,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_unauthenticated_body_bytes: DEFAULT_MAX_UNAUTHENTICATED_BODY_BYTES,
            body_timeout_ms: DEFAULT_BODY_TIMEOUT_MS,
            max_batch_items: DEFAULT_MAX_BATCH_ITEMS,
            allowed_origins: vec![],
            allowed_hosts: vec![],
            shutdown_grace_ms: DEFAULT_SHUTDOWN_GRACE_MS,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_peer: DEFAULT_MAX_CONNECTIONS_PER_PEER,
            peer_ipv6_prefix: DEFAULT_PEER_IPV6_PREFIX,
            peer_ipv4_prefix: DEFAULT_PEER_IPV4_PREFIX,
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_sessions_per_principal: DEFAULT_MAX_SESSIONS_PER_PRINCIPAL,
            max_anonymous_sessions: DEFAULT_MAX_ANONYMOUS_SESSIONS,
            session_idle_timeout_s: DEFAULT_SESSION_IDLE_TIMEOUT_S,
        }
    }
}

/// What [`HttpConfig::check`] refuses.
#[derive(Debug, thiserror::Error)]
pub enum HttpProblem {
    #[error("{0} must be positive")]
    NotPositive(&'static str),
    #[error("http.endpoint must start with '/', got {0:?}")]
    Endpoint(String),
    #[error("http.peer_ipv6_prefix must be 0..=128 and http.peer_ipv4_prefix 0..=32")]
    PeerPrefix,
}

impl HttpConfig {
    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }

    pub fn body_timeout(&self) -> Duration {
        Duration::from_millis(self.body_timeout_ms)
    }

    pub fn check(&self) -> Result<(), HttpProblem> {
        use HttpProblem::NotPositive;
        let h = self;
        if !h.endpoint.starts_with('/') {
            return Err(HttpProblem::Endpoint(h.endpoint.clone()));
        }
        if h.request_timeout_ms == 0 {
            return Err(NotPositive("http.request_timeout_ms"));
        }
        if h.body_timeout_ms == 0 || h.max_batch_items == 0 || h.max_unauthenticated_body_bytes == 0
        {
            return Err(NotPositive(
                "http.body_timeout_ms, http.max_batch_items and http.max_unauthenticated_body_bytes",
            ));
        }
        if h.max_connections == 0
            || h.max_connections_per_peer == 0
            || h.max_sessions_per_principal == 0
            || h.max_anonymous_sessions == 0
        {
            return Err(NotPositive(
                "http.max_connections, max_connections_per_peer, max_sessions_per_principal and max_anonymous_sessions",
            ));
        }
        if h.peer_ipv6_prefix > 128 || h.peer_ipv4_prefix > 32 {
            return Err(HttpProblem::PeerPrefix);
        }
        Ok(())
    }
}
