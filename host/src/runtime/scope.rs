//! What a request hands down to every guest call it makes.

use super::slots::CallerKey;
use super::warm::InstanceKey;
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// The deadline and cancellation signal of one MCP request, plus its id for
/// the logs. Cloning is cheap; all clones share the cancellation.
#[derive(Clone, Debug)]
pub struct RequestScope {
    /// No guest call of this request runs past this instant.
    pub deadline: Instant,
    /// Cancelled on `notifications/cancelled`, client disconnect or shutdown.
    pub cancel: CancellationToken,
    /// The JSON-RPC id (or another label) for log lines, bounded and
    /// escaped by its maker (`RequestId::logged`): it is a client's text.
    pub request_id: Arc<str>,
    /// Whose share of the guest-call pool this request's calls take.
    pub caller: CallerKey,
    /// Whose kept instances this request's calls may run in (`warm.rs`):
    /// `None` (anonymous, the host) means a fresh instance for every call.
    pub instance_key: Option<InstanceKey>,
}

impl RequestScope {
    pub fn new(deadline: Instant, request_id: impl Into<Arc<str>>, caller: CallerKey) -> Self {
        Self {
            deadline,
            cancel: CancellationToken::new(),
            request_id: request_id.into(),
            caller,
            instance_key: None,
        }
    }

    /// Calls of this request may reuse `key`'s kept instances (`None`: never).
    pub fn reusing(mut self, key: Option<InstanceKey>) -> Self {
        self.instance_key = key;
        self
    }

    /// Milliseconds since the Unix epoch at which the deadline falls, for guests.
    pub fn deadline_unix_ms(&self) -> u64 {
        unix_ms(self.deadline)
    }
}

/// Milliseconds since the Unix epoch at which `deadline` falls.
pub fn unix_ms(deadline: Instant) -> u64 {
    let remaining = deadline.saturating_duration_since(Instant::now());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (now + remaining).as_millis() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_deadline_in_unix_milliseconds() {
        let wall = |d: Duration| {
            (std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                + d)
                .as_millis() as u64
        };
        let before = wall(Duration::from_secs(5));
        let ms = unix_ms(Instant::now() + Duration::from_secs(5));
        let after = wall(Duration::from_secs(5));
        assert!(
            (before..=after).contains(&ms),
            "{before} <= {ms} <= {after}"
        );
        // A deadline already past is now, never earlier than the epoch math allows.
        assert!(unix_ms(Instant::now() - Duration::from_secs(1)) >= before - 5_000);
    }
}
