//! Quick per-call timing for tuning (not a benchmark of record; see benches/).
//! usage: cargo run --release --example callbench -- GUEST [CALLS] [LIMIT]
//!
//! Environment, to reproduce what a call meets in a busy server (BENCHMARKS.md,
//! "Why a guest call costs more in the server"):
//! - `ITEMS=N` the catalog's `items`; `AFTER=KEY` list after that key.
//! - `IDLE_US=N` sleep N µs after each call (the core idles between requests).
//! - `TRASH_KB=N` write N KiB after each call (other work evicts the data cache).
//! - `TASKS=1,4` the concurrencies to run (default 1,2,4,64).
//!
//! Each phase also prints the process's CPU time per call (every thread:
//! the call, its teardown and the next standby), which is what a busy
//! server pays; "in the call" is what one caller waits.
use emseepea::config::Config;
use emseepea::runtime::types::{CallContext, Principal};
use emseepea::runtime::{CallerKey, RequestScope, Runtime, SourceSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;
use common::env_or;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let guest = args.get(1).cloned().unwrap_or("catalog".into());
    let calls: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let limit: u32 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(50);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("s")).unwrap();
    std::fs::copy(
        root.join(format!("target/guests/{guest}.wasm")),
        dir.path().join(format!("s/{guest}.wasm")),
    )
    .unwrap();
    let manifest = root.join(format!("target/guests/{guest}.toml"));
    if let Ok(items) = std::env::var("ITEMS") {
        std::fs::write(
            dir.path().join(format!("s/{guest}.toml")),
            format!("[config]\nitems = \"{items}\"\n"),
        )
        .unwrap();
    } else if manifest.is_file() {
        std::fs::copy(&manifest, dir.path().join(format!("s/{guest}.toml"))).unwrap();
    }
    let after: Option<String> = std::env::var("AFTER").ok();
    let idle_us: u64 = env_or("IDLE_US", 0);
    let trash_kb: usize = env_or("TRASH_KB", 0);
    let extra = std::env::var("EXTRA").unwrap_or_default();
    std::fs::write(dir.path().join("c.toml"), format!("sources_dir = \"s\"\nstate_dir = \"st\"\ncache_dir = \"{}\"\ncache_key_file = \"{}\"\n{extra}\n[auth]\nmode = \"dev\"\n", root.join("target/bench-cache").display(), root.join("target/bench-cache.key").display())).unwrap();
    let config = Config::load(&dir.path().join("c.toml")).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let runtime = Arc::new(Runtime::new(&config.runtime).unwrap());
    let set = rt.block_on(SourceSet::load(runtime, &config)).unwrap();
    let source = set.sources[0].clone();
    let ctx = || CallContext {
        principal: Some(Principal {
            subject: Some("alice".into()),
            client_id: "c".into(),
            scopes: vec!["catalog:read".into()],
            audience: None,
        }),
        deadline_ms: 0,
    };
    let phases: Vec<usize> = std::env::var("TASKS")
        .ok()
        .map(|v| {
            v.split(',')
                .filter_map(|t| t.trim().parse().ok())
                .filter(|&t| t > 0)
                .collect()
        })
        .filter(|phases: &Vec<usize>| !phases.is_empty())
        .unwrap_or_else(|| vec![1, 2, 4, 64]);
    for tasks in phases {
        let cpu_before = process_cpu();
        let in_call = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let start = Instant::now();
        rt.block_on(async {
            let mut hs = Vec::new();
            for _ in 0..tasks {
                let s = source.clone();
                let after = after.clone();
                let in_call = in_call.clone();
                hs.push(tokio::spawn(async move {
                    for _ in 0..calls / tasks {
                        let scope = RequestScope::new(
                            Instant::now() + Duration::from_secs(10),
                            "b",
                            CallerKey::host(),
                        );
                        let t0 = Instant::now();
                        s.list(after.as_deref(), limit, ctx(), &scope)
                            .await
                            .unwrap();
                        in_call.fetch_add(
                            t0.elapsed().as_nanos() as u64,
                            std::sync::atomic::Ordering::Relaxed,
                        );
                        if idle_us > 0 {
                            std::thread::sleep(Duration::from_micros(idle_us));
                        }
                        if trash_kb > 0 {
                            touch_data(trash_kb);
                        }
                    }
                }));
            }
            for h in hs {
                h.await.unwrap();
            }
        });
        let el = start.elapsed();
        let cpu = process_cpu() - cpu_before;
        println!(
            "{guest} list({limit}) x{calls} tasks={tasks}: in the call {:.1} us",
            in_call.load(std::sync::atomic::Ordering::Relaxed) as f64 / 1e3 / calls as f64
        );
        println!(
            "{guest} list({limit}) x{calls} tasks={tasks}: {:.1} us/call, {:.0} calls/s",
            el.as_secs_f64() * 1e6 / calls as f64 * tasks as f64,
            calls as f64 / el.as_secs_f64()
        );
        println!(
            "{guest} list({limit}) x{calls} tasks={tasks}: {:.1} us of process CPU per call",
            cpu.as_secs_f64() * 1e6 / calls as f64
        );
    }
}

/// CPU time of the whole process so far (user + system, every thread).
fn process_cpu() -> Duration {
    // SAFETY: `getrusage` fills the zeroed struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

/// Write one byte of every cache line of a `kb` KiB buffer (kept per thread).
fn touch_data(kb: usize) {
    thread_local! {
        static BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUFFER.with(|buffer| {
        let mut buffer = buffer.borrow_mut();
        buffer.resize(kb * 1024, 1);
        for i in (0..buffer.len()).step_by(64) {
            buffer[i] = buffer[i].wrapping_add(1);
        }
        std::hint::black_box(&*buffer);
    });
}
