//! Taking turns with a peer on the same CPU: a worker that has run for
//! `[workers] yield_after_us` without waiting for I/O gives up its CPU
//! (`sched_yield`) after its next response write, unless it has itself
//! been waiting for a CPU.
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
//! Where the CPUs are oversubscribed (an nginx with a worker per CPU beside
//! ours) they never idle, a yield gives nothing back and only adds switches:
//! the plain turn served 0.77–0.95× the pages there. A worker that waited
//! for a CPU for over a tenth of the time since its last turn (its
//! `run_delay` in `/proc/thread-self/schedstat`, the kernel's count) is on
//! such a machine and skips the yield: 1.03–1.23× behind nginx, and
//! 1.04–1.21× against the local driver (twenty-eighth round). The wait a
//! yield itself causes (the client running on this CPU) is the turn
//! working, so the gate's span starts again when the yield returns.
//!
//! With nothing else runnable on the CPU the yield returns at once (one
//! system call per `yield_after_us` of work, and one read of the
//! schedstat); a lone client's requests reach it only when one takes longer
//! than the turn to serve, since its worker waits for I/O between them.

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
            if cpu_wait::waited_since_last_turn(now) {
                crate::telemetry::metrics::metrics()
                    .worker_turns_skipped
                    .inc();
                RUNNING_SINCE.set(Some(now));
                return;
            }
            // `sched_yield(2)` on Unix.
            std::thread::yield_now();
            crate::telemetry::metrics::metrics().worker_yields.inc();
            let resumed = Instant::now();
            // The wait the yield itself caused (the peer running on this
            // CPU) is the turn working, not contention: the next turn
            // counts from here.
            cpu_wait::rebase(resumed);
            RUNNING_SINCE.set(Some(resumed));
        }
    }
}

/// How long this thread was runnable but not running, by the kernel's count.
mod cpu_wait {
    use std::cell::RefCell;
    use std::time::Instant;

    /// The thread's schedstat, kept open, and the last reading of it.
    struct Reading {
        #[cfg(target_os = "linux")]
        file: std::fs::File,
        at: Instant,
        run_delay_ns: u64,
    }

    thread_local! {
        static LAST: RefCell<Option<Reading>> = const { RefCell::new(None) };
    }

    /// Whether the thread waited for a CPU for more than a tenth of the
    /// time since the last call (false on the first, and where the kernel
    /// does not say).
    pub fn waited_since_last_turn(now: Instant) -> bool {
        LAST.with_borrow_mut(|last| {
            let Some(reading) = last else {
                *last = open(now);
                return false;
            };
            let Some(run_delay_ns) = read(reading) else {
                return false;
            };
            let waited = run_delay_ns.saturating_sub(reading.run_delay_ns);
            let span = now.saturating_duration_since(reading.at).as_nanos() as u64;
            reading.at = now;
            reading.run_delay_ns = run_delay_ns;
            contended(waited, span)
        })
    }

    /// Start the next span now, from a fresh reading.
    pub fn rebase(now: Instant) {
        LAST.with_borrow_mut(|last| {
            if let Some(reading) = last
                && let Some(run_delay_ns) = read(reading)
            {
                reading.at = now;
                reading.run_delay_ns = run_delay_ns;
            }
        })
    }

    /// Over a tenth of `span_ns` spent waiting for a CPU.
    pub(super) fn contended(waited_ns: u64, span_ns: u64) -> bool {
        waited_ns.saturating_mul(10) > span_ns
    }

    #[cfg(target_os = "linux")]
    fn open(now: Instant) -> Option<Reading> {
        let file = std::fs::File::open("/proc/thread-self/schedstat").ok()?;
        let mut reading = Reading {
            file,
            at: now,
            run_delay_ns: 0,
        };
        reading.run_delay_ns = read(&reading)?;
        Some(reading)
    }

    /// `cpu-time run-delay timeslices`, in ns; read again from the start.
    #[cfg(target_os = "linux")]
    fn read(reading: &Reading) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 96];
        let n = reading.file.read_at(&mut buf, 0).ok()?;
        std::str::from_utf8(&buf[..n])
            .ok()?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    }

    #[cfg(not(target_os = "linux"))]
    fn open(_now: Instant) -> Option<Reading> {
        None
    }

    #[cfg(not(target_os = "linux"))]
    fn read(_reading: &Reading) -> Option<u64> {
        None
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_that_waited_for_its_cpu_skips_its_turn() {
        // 100 µs since the last turn: up to 10 µs of waiting is not contention.
        assert!(!cpu_wait::contended(0, 100_000));
        assert!(!cpu_wait::contended(10_000, 100_000));
        assert!(cpu_wait::contended(10_001, 100_000));
        assert!(!cpu_wait::contended(u64::MAX, u64::MAX));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_threads_cpu_wait_is_read_from_the_kernel() {
        let t0 = Instant::now();
        // The first call opens the file and reads the baseline.
        assert!(!cpu_wait::waited_since_last_turn(t0));
        // A thread that only slept did not wait for a CPU.
        std::thread::sleep(Duration::from_millis(200));
        assert!(!cpu_wait::waited_since_last_turn(Instant::now()));
        // Sharing one CPU with a spinning thread, it waits about half the time.
        let cpu = crate::workers::affinity::allowed()[0];
        crate::workers::affinity::set_current_thread(&[cpu]).unwrap();
        let spin = |for_: Duration| {
            let start = Instant::now();
            while start.elapsed() < for_ {
                std::hint::spin_loop();
            }
        };
        let wait_behind_a_rival = || {
            let rival = std::thread::spawn(move || {
                crate::workers::affinity::set_current_thread(&[cpu]).unwrap();
                spin(Duration::from_millis(300));
            });
            spin(Duration::from_millis(300));
            rival.join().unwrap();
        };
        wait_behind_a_rival();
        assert!(cpu_wait::waited_since_last_turn(Instant::now()));
        // A wait the turn itself caused is forgotten once the turn ends.
        wait_behind_a_rival();
        cpu_wait::rebase(Instant::now());
        // Long enough that a busy CI machine's wake-up delay stays under a tenth.
        std::thread::sleep(Duration::from_millis(200));
        assert!(!cpu_wait::waited_since_last_turn(Instant::now()));
    }

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
