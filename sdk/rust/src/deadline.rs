//! The call's deadline (`context.deadline-ms`, Unix epoch milliseconds):
//! the host stops the guest then at the latest. Pass what is left on to
//! backends (a query timeout, an HTTP timeout header) so they stop too.

use crate::CallContext;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Now, in Unix epoch milliseconds (the guest's wall clock).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Time left at `now_ms` (zero once the deadline has passed).
pub fn remaining_at(context: &CallContext, now_ms: u64) -> Duration {
    Duration::from_millis(context.deadline_ms.saturating_sub(now_ms))
}

/// Time left now.
pub fn remaining(context: &CallContext) -> Duration {
    remaining_at(context, now_ms())
}

/// Whether the deadline has passed (stop work that cannot finish).
pub fn expired(context: &CallContext) -> bool {
    remaining(context).is_zero()
}

/// Time left minus a margin for the answer's own way back, for a backend
/// timeout; `None` when not even the margin is left.
pub fn backend_timeout(context: &CallContext, margin: Duration) -> Option<Duration> {
    remaining(context)
        .checked_sub(margin)
        .filter(|d| !d.is_zero())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(deadline_ms: u64) -> CallContext {
        CallContext {
            principal: None,
            deadline_ms,
        }
    }

    #[test]
    fn time_left() {
        assert_eq!(remaining_at(&at(1_500), 1_000), Duration::from_millis(500));
        assert_eq!(remaining_at(&at(1_000), 2_000), Duration::ZERO);
        assert!(expired(&at(0)));
        assert!(!expired(&at(now_ms() + 60_000)));
        assert_eq!(backend_timeout(&at(0), Duration::from_millis(10)), None);
        let t = backend_timeout(&at(now_ms() + 60_000), Duration::from_millis(10)).unwrap();
        assert!(t > Duration::from_secs(50) && t < Duration::from_secs(60));
    }
}
