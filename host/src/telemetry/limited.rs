//! [`LineBudget`]: at most so many log lines a second for one kind of event
//! that anyone can cause (a failed authentication), the rest counted and the
//! count carried by the next line written. Without it, a client sending bad
//! tokens as fast as it can writes the log as fast as it can.

use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct LineBudget {
    per_second: u32,
    window: Mutex<Window>,
}

struct Window {
    start: Option<Instant>,
    /// Lines written in this window.
    logged: u32,
    /// Events not logged since the last line.
    suppressed: u64,
}

impl LineBudget {
    pub const fn new(per_second: u32) -> Self {
        Self {
            per_second,
            window: Mutex::new(Window {
                start: None,
                logged: 0,
                suppressed: 0,
            }),
        }
    }

    /// Count one event at `now`: `Some(n)` if it may be logged, `n` being
    /// the events not logged since the last line; `None` if it is one of them.
    pub fn admit(&self, now: Instant) -> Option<u64> {
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        if w.start
            .is_none_or(|s| now.saturating_duration_since(s) >= Duration::from_secs(1))
        {
            w.start = Some(now);
            w.logged = 0;
        }
        if w.logged >= self.per_second {
            w.suppressed += 1;
            return None;
        }
        w.logged += 1;
        Some(std::mem::take(&mut w.suppressed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_is_cut_to_the_budget_and_counted() {
        let budget = LineBudget::new(3);
        let t0 = Instant::now();
        let admitted: Vec<_> = (0..10).map(|_| budget.admit(t0)).collect();
        assert_eq!(admitted[..3], [Some(0), Some(0), Some(0)]);
        assert!(admitted[3..].iter().all(Option::is_none));
        // The next window's first line says how many were not logged.
        assert_eq!(budget.admit(t0 + Duration::from_secs(1)), Some(7));
        assert_eq!(budget.admit(t0 + Duration::from_secs(1)), Some(0));
    }
}
