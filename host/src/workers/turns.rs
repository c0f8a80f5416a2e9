//! Taking turns with a peer on the same CPU: a worker that has run for
//! `[workers] yield_after_us` without waiting for I/O gives up its CPU
//! (`sched_yield`) after its next response write.
//!
//! Why: a response wakes its client, and a client on this machine (a proxy
//! in front, a sidecar, a load driver) is woken on the writer's CPU. Under
//! load a worker then runs a batch of requests while the woken client
//! waits behind it, runnable, and the other CPU idles after its own batch:
//! the kernel does not move the waiting client over for so short an idle
//! stretch. On the 2-core benchmark VM that left 15 % of both cores idle at
//! 16 clients; yielding after every write ended the idle time but cost the
//! client its batching (its CPU per page nearly doubled, 0.96× the pages);
//! yielding once a worker has run 150 µs kept both: 3 % idle, 1.08–1.17×
//! the pages at 16 and 64 clients (BENCHMARKS.md, twenty-seventh round).
//!
//! Off by default: through an nginx on the same two CPUs the same turn
//! served 0.77–1.0× the pages. There the CPUs never idle (nginx's workers
//! fill them), so a yield gives nothing back and only adds switches, and
//! nginx, woken for fewer responses at a time, spends more per page.
//! With nothing else runnable on the CPU the yield returns at once (one
//! system call per `yield_after_us` of work); a lone client's requests
//! never reach it, since its worker waits for I/O between them.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// `[workers] yield_after_us` for this process, in µs; 0 = never yield.
static YIELD_AFTER_US: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// When this worker last started running: its last unpark or yield.
    static RUNNING_SINCE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Set the policy for this process's workers (once, when serving starts).
pub fn take_turns(after: Duration) {
    YIELD_AFTER_US.store(after.as_micros() as u64, Ordering::Relaxed);
}

fn yield_after() -> Option<Duration> {
    match YIELD_AFTER_US.load(Ordering::Relaxed) {
        0 => None,
        us => Some(Duration::from_micros(us)),
    }
}

/// The runtime's `on_thread_unpark` hook: the worker starts a run.
pub fn on_worker_unpark() {
    if yield_after().is_some() {
        RUNNING_SINCE.set(Some(Instant::now()));
    }
}

/// Called after a response's bytes went to the socket: yields the CPU when
/// this thread's run has lasted the configured time.
pub fn after_response_write() {
    let Some(after) = yield_after() else { return };
    let now = Instant::now();
    match turn(RUNNING_SINCE.get(), now, after) {
        Turn::Start => RUNNING_SINCE.set(Some(now)),
        Turn::Keep => {}
        Turn::Yield => {
            yield_cpu();
            crate::telemetry::metrics::metrics().worker_yields.inc();
            RUNNING_SINCE.set(Some(Instant::now()));
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Turn {
    /// No run recorded on this thread yet: it starts now.
    Start,
    Keep,
    Yield,
}

fn turn(running_since: Option<Instant>, now: Instant, after: Duration) -> Turn {
    match running_since {
        None => Turn::Start,
        Some(since) if now.saturating_duration_since(since) >= after => Turn::Yield,
        Some(_) => Turn::Keep,
    }
}

fn yield_cpu() {
    #[cfg(unix)]
    // SAFETY: no arguments, touches no memory; it cannot fail on Linux.
    unsafe {
        libc::sched_yield();
    }
    #[cfg(not(unix))]
    std::thread::yield_now();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_yields_once_it_has_lasted_the_configured_time() {
        let t0 = Instant::now();
        let after = Duration::from_micros(150);
        assert_eq!(turn(None, t0, after), Turn::Start);
        assert_eq!(turn(Some(t0), t0, after), Turn::Keep);
        assert_eq!(
            turn(Some(t0), t0 + Duration::from_micros(149), after),
            Turn::Keep
        );
        assert_eq!(
            turn(Some(t0), t0 + Duration::from_micros(150), after),
            Turn::Yield
        );
        // A clock read before the run's start (another thread's) keeps it.
        assert_eq!(
            turn(Some(t0 + Duration::from_micros(10)), t0, after),
            Turn::Keep
        );
    }
}
