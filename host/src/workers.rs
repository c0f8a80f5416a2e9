//! Where the tokio worker threads run: one CPU each, when the process has
//! exactly as many CPUs as workers.
//!
//! Why: a worker blocked in `epoll_wait` is woken by the peer that wrote to
//! its socket (a proxy, a sidecar, a load driver on the same machine), and
//! the kernel runs a woken thread on its waker's CPU. The two then take
//! turns on one CPU while the other CPU idles: tokio hands work to a parked
//! sibling only when a poll of the driver returns more than one task, which
//! a worker taking turns with its peer rarely sees. With one worker on
//! each CPU they cannot pile onto one; tokio's work stealing still moves
//! tasks between them. On the 2-core benchmark VM this served 1.01–1.11× the
//! pages at 16 and 64 clients and cut their p99 (BENCHMARKS.md, tenth round).
//!
//! Only workers park (the blocking pool's threads never do), so the
//! runtime's `on_thread_park` hook ([`on_worker_park`]) is where a worker
//! pins itself, at its first park after [`place`] made the plan. A thread
//! inherits its creator's mask, so every thread the runtime starts later
//! (the blocking pool's, from a pinned worker) first gets all the allowed
//! CPUs back ([`on_thread_start`]). `block_in_place` hands a worker's core
//! to a new thread, which is why the plan is made after the sources are
//! compiled; nothing calls it after that.
//!
//! When a busy worker gives its CPU a turn (`[workers] yield_after_us`) is
//! `turns`, fed by the `on_thread_unpark` hook.

mod turns;

pub use turns::{after_response_write, on_worker_unpark, take_turns};

use serde::Deserialize;
use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `[workers] pin`.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum PinWorkers {
    /// Pin when the process may run on exactly as many CPUs as it has
    /// workers: a dedicated machine or VM, or a container given a cpuset of
    /// its own. Under a CPU quota alone (every CPU allowed, fewer workers)
    /// nothing is pinned: other processes would be pinned to the same few.
    #[default]
    Auto,
    /// Pin worker N to the Nth allowed CPU (round robin), whatever the counts.
    Always,
    /// Leave placement to the kernel.
    Never,
}

/// `[workers]`: the threads that serve connections and run guest calls.
#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct WorkersConfig {
    pub pin: PinWorkers,
    /// A worker that has run this long without waiting for I/O yields its
    /// CPU after its next response write (`turns`); 0 = never.
    pub yield_after_us: u32,
}

/// `[workers] yield_after_us`: on the 2-core benchmark VM, 150 µs (the best
/// of 50–1000) served 1.10–1.17× the pages to a load driver on the same
/// machine, and 0.99–1.04× through an nginx on it, where a worker waiting
/// for its CPU skips its turn (BENCHMARKS.md, twenty-seventh round).
pub const DEFAULT_YIELD_AFTER_US: u32 = 150;
/// Above this a worker's run is long enough for the kernel's own balancing.
pub const MAX_YIELD_AFTER_US: u32 = 100_000;

impl Default for WorkersConfig {
    fn default() -> Self {
        WorkersConfig {
            pin: PinWorkers::default(),
            yield_after_us: DEFAULT_YIELD_AFTER_US,
        }
    }
}

/// What [`decide`] chose, for the startup log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// Worker N (in the order the workers first park after the plan is
    /// made) runs only on `cpus[N % cpus.len()]`; every other thread the
    /// runtime starts, on all of `cpus` (the process's mask).
    Pinned { cpus: Vec<usize> },
    /// The kernel places the workers.
    Unpinned { reason: Unpinned },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unpinned {
    /// `pin = "never"`.
    Configured,
    /// `pin = "auto"`, and the counts differ.
    CountsDiffer { workers: usize, cpus: usize },
    /// The allowed CPUs could not be read (or this is not Linux).
    NoAffinity,
}

impl std::fmt::Display for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Placement::Pinned { cpus } => write!(f, "pinned, one per CPU of {cpus:?}"),
            Placement::Unpinned {
                reason: Unpinned::Configured,
            } => {
                write!(f, "not pinned ([workers] pin = \"never\")")
            }
            Placement::Unpinned {
                reason: Unpinned::CountsDiffer { workers, cpus },
            } => write!(
                f,
                "not pinned: {workers} workers, {cpus} CPUs allowed (\"auto\" pins only when they match)"
            ),
            Placement::Unpinned {
                reason: Unpinned::NoAffinity,
            } => write!(f, "not pinned: the allowed CPUs are unknown"),
        }
    }
}

/// The placement for `workers` workers on the `allowed` CPUs.
pub fn decide(policy: PinWorkers, workers: usize, allowed: &[usize]) -> Placement {
    match policy {
        PinWorkers::Never => Placement::Unpinned {
            reason: Unpinned::Configured,
        },
        _ if allowed.is_empty() => Placement::Unpinned {
            reason: Unpinned::NoAffinity,
        },
        PinWorkers::Auto if workers != allowed.len() => Placement::Unpinned {
            reason: Unpinned::CountsDiffer {
                workers,
                cpus: allowed.len(),
            },
        },
        PinWorkers::Auto | PinWorkers::Always => Placement::Pinned {
            cpus: allowed.to_vec(),
        },
    }
}

/// `Placement::Pinned`'s CPUs, once decided; unset until then.
static PLAN: OnceLock<Vec<usize>> = OnceLock::new();
/// The next worker's index into `PLAN`.
static NEXT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static PLACED: Cell<bool> = const { Cell::new(false) };
}

/// Decide for this process's runtime (`workers` threads) and let each worker
/// pin itself at its next park. Call once, after the config is loaded.
pub fn place(policy: PinWorkers, workers: usize) -> Placement {
    let placement = decide(policy, workers, &affinity::allowed());
    if let Placement::Pinned { cpus } = &placement {
        let _ = PLAN.set(cpus.clone());
    }
    placement
}

/// The runtime's `on_thread_start` hook: once workers are pinned, a new
/// thread (created by one of them) runs on every allowed CPU, not on its
/// creator's one.
pub fn on_thread_start() {
    if let Some(allowed) = PLAN.get()
        && let Err(e) = affinity::set_current_thread(allowed)
    {
        tracing::warn!(error = %e, "could not unpin a new runtime thread");
    }
}

/// The runtime's `on_thread_park` hook: a worker not yet placed takes the
/// next CPU of the plan. One thread-local read on every later park.
pub fn on_worker_park() {
    if PLACED.get() {
        return;
    }
    let Some(cpus) = PLAN.get() else { return };
    PLACED.set(true);
    let cpu = cpus[NEXT.fetch_add(1, Ordering::Relaxed) % cpus.len()];
    if let Err(e) = affinity::set_current_thread(&[cpu]) {
        tracing::warn!(cpu, error = %e, "could not pin a worker thread; it stays where the kernel puts it");
    }
}

#[cfg(target_os = "linux")]
mod affinity {
    /// The CPUs this process may run on (its affinity mask).
    pub fn allowed() -> Vec<usize> {
        // SAFETY: `set` is a plain bit set of the size passed; the kernel
        // writes at most that many bytes into it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
                return Vec::new();
            }
            (0..libc::CPU_SETSIZE as usize)
                .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
                .collect()
        }
    }

    /// Runs the calling thread on `cpus` only.
    pub fn set_current_thread(cpus: &[usize]) -> std::io::Result<()> {
        // SAFETY: as above; pid 0 is the calling thread.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for &cpu in cpus {
                libc::CPU_SET(cpu, &mut set);
            }
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

#[cfg(not(target_os = "linux"))]
mod affinity {
    pub fn allowed() -> Vec<usize> {
        Vec::new()
    }
    pub fn set_current_thread(_cpus: &[usize]) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_pins_only_when_the_process_has_one_cpu_per_worker() {
        assert_eq!(
            decide(PinWorkers::Auto, 2, &[0, 1]),
            Placement::Pinned { cpus: vec![0, 1] }
        );
        // A cpuset of its own: the CPUs it was given, not 0..N.
        assert_eq!(
            decide(PinWorkers::Auto, 2, &[4, 6]),
            Placement::Pinned { cpus: vec![4, 6] }
        );
        // A quota of 2 CPUs on a 64-CPU host: every CPU allowed.
        let all: Vec<usize> = (0..64).collect();
        assert_eq!(
            decide(PinWorkers::Auto, 2, &all),
            Placement::Unpinned {
                reason: Unpinned::CountsDiffer {
                    workers: 2,
                    cpus: 64
                }
            }
        );
        assert_eq!(
            decide(PinWorkers::Auto, 4, &[0, 1]),
            Placement::Unpinned {
                reason: Unpinned::CountsDiffer {
                    workers: 4,
                    cpus: 2
                }
            }
        );
    }

    #[test]
    fn always_and_never_override_the_counts() {
        let all: Vec<usize> = (0..64).collect();
        assert_eq!(
            decide(PinWorkers::Always, 2, &all),
            Placement::Pinned { cpus: all.clone() }
        );
        assert_eq!(
            decide(PinWorkers::Never, 2, &[0, 1]),
            Placement::Unpinned {
                reason: Unpinned::Configured
            }
        );
        assert_eq!(
            decide(PinWorkers::Always, 2, &[]),
            Placement::Unpinned {
                reason: Unpinned::NoAffinity
            }
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_allowed_cpus_are_this_process_mask() {
        let allowed = affinity::allowed();
        assert!(!allowed.is_empty());
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let count = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap()
            .trim()
            .split(',')
            .map(|r| match r.split_once('-') {
                Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
                None => 1,
            })
            .sum::<usize>();
        assert_eq!(allowed.len(), count);
    }
}
