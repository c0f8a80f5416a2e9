//! What a request hands down to every guest call it makes.

use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The deadline and cancellation signal of one MCP request, plus its id for
/// the logs. Cloning is cheap; all clones share the cancellation.
#[derive(Clone, Debug)]
pub struct RequestScope {
    /// No guest call of this request runs past this instant.
    pub deadline: Instant,
    /// Cancelled on `notifications/cancelled`, client disconnect or shutdown.
    pub cancel: CancellationToken,
    /// The JSON-RPC id (or another label) for log lines.
    pub request_id: Arc<str>,
}

impl RequestScope {
    pub fn new(deadline: Instant, request_id: impl Into<Arc<str>>) -> Self {
        Self {
            deadline,
            cancel: CancellationToken::new(),
            request_id: request_id.into(),
        }
    }

    /// This scope with its deadline capped at `max` from now: the deadline
    /// one guest call of a source runs under (its `max_duration_ms`).
    pub fn capped(&self, max: Duration) -> RequestScope {
        RequestScope {
            deadline: self.deadline.min(Instant::now() + max),
            ..self.clone()
        }
    }

    /// Milliseconds since the Unix epoch at which the deadline falls, for guests.
    pub fn deadline_unix_ms(&self) -> u64 {
        let remaining = self.deadline.saturating_duration_since(Instant::now());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        (now + remaining).as_millis() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capping_keeps_the_earlier_deadline() {
        let now = Instant::now();
        let scope = RequestScope::new(now + Duration::from_secs(30), "r");
        let capped = scope.capped(Duration::from_secs(5));
        assert!(capped.deadline <= Instant::now() + Duration::from_secs(5));
        assert!(capped.deadline >= now + Duration::from_secs(5));
        let soon = RequestScope::new(now + Duration::from_millis(10), "r");
        assert_eq!(soon.capped(Duration::from_secs(5)).deadline, soon.deadline);
    }
}
