//! The accept loop's failures. When descriptors run out (EMFILE, ENFILE)
//! retrying at once only spins: the loop backs off, doubling the pause while
//! the failures go on. And one line per interval, with a count, says what
//! happened, instead of one per failure (observed: 3,951 lines in 40 s).

use std::io;
use std::time::{Duration, Instant};

/// When `accept` fails for lack of descriptors (EMFILE/ENFILE), the loop
/// pauses this long at first, doubling up to the maximum while it keeps failing.
pub const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
pub const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);
/// "accept failed" is logged at most once per interval, with a count.
pub const ACCEPT_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// errno values of "no descriptor left", the same on Linux and the BSDs.
const ENFILE: i32 = 23;
const EMFILE: i32 = 24;

/// Counts events and lets one log line through per interval.
pub struct RateLimitedLog {
    interval: Duration,
    last_line: Option<Instant>,
    unlogged: u64,
}

impl RateLimitedLog {
    pub fn new(interval: Duration) -> Self {
        Self {
            interval,
            last_line: None,
            unlogged: 0,
        }
    }

    /// Count one event at `now`; `Some(n)` when a line is due, `n` being the
    /// events since the last line (this one included).
    pub fn hit(&mut self, now: Instant) -> Option<u64> {
        self.unlogged += 1;
        let due = self
            .last_line
            .is_none_or(|t| now.duration_since(t) >= self.interval);
        due.then(|| {
            self.last_line = Some(now);
            std::mem::take(&mut self.unlogged)
        })
    }
}

/// The accept loop's state between failures.
pub struct AcceptFailures {
    backoff: Duration,
    log: RateLimitedLog,
}

impl Default for AcceptFailures {
    fn default() -> Self {
        Self {
            backoff: ACCEPT_BACKOFF_MIN,
            log: RateLimitedLog::new(ACCEPT_LOG_INTERVAL),
        }
    }
}

impl AcceptFailures {
    /// Record a failed accept: log if a line is due, and return how long
    /// the loop should pause before accepting again.
    pub fn failed(&mut self, e: &io::Error, now: Instant) -> Duration {
        if let Some(n) = self.log.hit(now) {
            tracing::warn!(
                failures = n,
                "accept failed {n} time(s) since the last report, latest: {e}"
            );
        }
        if matches!(e.raw_os_error(), Some(EMFILE | ENFILE)) {
            let pause = self.backoff;
            self.backoff = (self.backoff * 2).min(ACCEPT_BACKOFF_MAX);
            pause
        } else {
            ACCEPT_BACKOFF_MIN
        }
    }

    /// A connection was accepted: the next failure starts from the shortest pause.
    pub fn succeeded(&mut self) {
        self.backoff = ACCEPT_BACKOFF_MIN;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_with_a_count() {
        let mut log = RateLimitedLog::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(log.hit(t0), Some(1), "the first failure is reported");
        let lines = (1..1000)
            .filter_map(|i| log.hit(t0 + Duration::from_millis(i)))
            .count();
        assert_eq!(lines, 0, "within the interval: counted, not logged");
        assert_eq!(log.hit(t0 + Duration::from_secs(10)), Some(1000));
    }

    #[test]
    fn descriptor_exhaustion_backs_off_and_success_resets() {
        let mut f = AcceptFailures::default();
        let now = Instant::now();
        let emfile = io::Error::from_raw_os_error(EMFILE);
        let pauses: Vec<_> = (0..10).map(|_| f.failed(&emfile, now)).collect();
        assert_eq!(pauses[0], ACCEPT_BACKOFF_MIN);
        assert_eq!(pauses[1], ACCEPT_BACKOFF_MIN * 2);
        assert_eq!(*pauses.last().unwrap(), ACCEPT_BACKOFF_MAX, "capped");
        f.succeeded();
        assert_eq!(
            f.failed(&io::Error::from_raw_os_error(ENFILE), now),
            ACCEPT_BACKOFF_MIN
        );
        let other = io::Error::from(io::ErrorKind::ConnectionAborted);
        assert_eq!(f.failed(&other, now), ACCEPT_BACKOFF_MIN);
    }
}
