//! Guest stdout/stderr into the host log, bounded: each line escaped and
//! cut (`GuestText`), at most `MAX_GUEST_OUTPUT_LINES_PER_CALL` lines per
//! stream per call, at most `MAX_GUEST_OUTPUT_LINES_PER_SECOND` log lines per
//! source per second over all its calls, and what is dropped is counted in
//! one "guest output suppressed" line instead (16 KiB of `x\n` was 8,192 log
//! lines per call and stream).

use crate::guest_text::GuestText;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Lines of guest stdout (and, separately, stderr) logged per call; the rest
/// are counted in one "guest output suppressed" line.
pub const MAX_GUEST_OUTPUT_LINES_PER_CALL: usize = 20;
/// Lines of guest output logged per source per second, over all its calls
/// (both streams); the rest are suppressed and counted the same way.
pub const MAX_GUEST_OUTPUT_LINES_PER_SECOND: usize = 100;

/// One source's output allowance: a fixed one-second window.
#[derive(Debug)]
pub(crate) struct OutputLimiter {
    window: Mutex<Window>,
}

#[derive(Debug)]
struct Window {
    start: Instant,
    /// Log lines (output and notes) written in this window.
    logged: usize,
    /// Lines suppressed after the window's last note was possible: reported
    /// by the first note of a later window.
    carried: usize,
}

/// What to log of one stream of one call.
#[derive(Debug, PartialEq, Eq)]
struct Admission {
    /// A note for lines suppressed in an earlier window.
    carried: Option<usize>,
    /// How many of the call's lines to log (the first ones).
    lines: usize,
    /// A note for the call's other lines.
    suppressed: Option<usize>,
}

impl OutputLimiter {
    pub(crate) fn new() -> Self {
        Self {
            window: Mutex::new(Window {
                start: Instant::now(),
                logged: 0,
                carried: 0,
            }),
        }
    }

    fn admit(&self, total: usize, now: Instant) -> Admission {
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        let mut carried = None;
        if now.saturating_duration_since(w.start) >= Duration::from_secs(1) {
            w.start = now;
            w.logged = 0;
            if w.carried > 0 {
                carried = Some(std::mem::take(&mut w.carried));
                w.logged = 1;
            }
        }
        let room = MAX_GUEST_OUTPUT_LINES_PER_SECOND.saturating_sub(w.logged);
        let lines = total.min(MAX_GUEST_OUTPUT_LINES_PER_CALL).min(room);
        w.logged += lines;
        let dropped = total - lines;
        let suppressed = if dropped == 0 {
            None
        } else if w.logged < MAX_GUEST_OUTPUT_LINES_PER_SECOND {
            w.logged += 1;
            Some(dropped)
        } else {
            w.carried += dropped;
            None
        };
        Admission {
            carried,
            lines,
            suppressed,
        }
    }
}

/// Log what a call wrote on `stream` (its captured bytes).
pub(crate) fn forward(
    limiter: &OutputLimiter,
    source: &str,
    request_id: &str,
    stream: &str,
    bytes: &[u8],
) {
    if bytes.is_empty() {
        return;
    }
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let a = limiter.admit(lines.len(), Instant::now());
    if let Some(n) = a.carried {
        tracing::info!(target: "guest", source, stream, suppressed = n, "guest output suppressed (earlier calls, over the per-second limit)");
    }
    for line in &lines[..a.lines] {
        tracing::info!(target: "guest", source, request_id, stream, "{:?}", GuestText::new(line));
    }
    if let Some(n) = a.suppressed {
        tracing::info!(target: "guest", source, request_id, stream, suppressed = n, "guest output suppressed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PER_CALL: usize = MAX_GUEST_OUTPUT_LINES_PER_CALL;
    const PER_SECOND: usize = MAX_GUEST_OUTPUT_LINES_PER_SECOND;

    #[test]
    fn a_call_logs_at_most_its_share_and_one_note() {
        let l = OutputLimiter::new();
        let t = Instant::now();
        assert_eq!(
            l.admit(PER_CALL, t),
            Admission {
                carried: None,
                lines: PER_CALL,
                suppressed: None
            },
            "exactly at the limit: all of it"
        );
        let l = OutputLimiter::new();
        assert_eq!(
            l.admit(8192, t),
            Admission {
                carried: None,
                lines: PER_CALL,
                suppressed: Some(8192 - PER_CALL)
            }
        );
    }

    #[test]
    fn a_source_logs_at_most_its_per_second_share_over_all_calls() {
        let l = OutputLimiter::new();
        let t = Instant::now();
        let mut logged = 0;
        let mut notes = 0;
        let mut suppressed = 0;
        for _ in 0..1000 {
            let a = l.admit(PER_CALL + 5, t);
            logged += a.lines;
            notes += usize::from(a.suppressed.is_some());
            suppressed += a.suppressed.unwrap_or(0);
            assert_eq!(a.carried, None);
        }
        assert!(logged + notes <= PER_SECOND, "{logged} + {notes}");
        // The next window starts with one note of everything else.
        let a = l.admit(0, t + Duration::from_secs(1));
        let carried = a.carried.expect("a note of the rest");
        assert_eq!(logged + suppressed + carried, 1000 * (PER_CALL + 5));
        assert_eq!(l.admit(1, t + Duration::from_secs(1)).lines, 1);
    }
}
