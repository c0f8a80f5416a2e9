//! Compiling a component to native code, in a child process when the host
//! binary is known, so that compiling's memory never stays with the server.
//!
//! Compiling a component allocates tens of MiB (cranelift's per-thread
//! contexts, rayon's pool and their allocator heaps), and an allocator does
//! not give all of it back: a server that compiled at start held 71–86 MB
//! idle, 41 MB with a throwaway engine and pool, one that loaded the same
//! component from the cache 23–27 MB. A child process returns every byte
//! when it exits, and a compiler crash on a hostile component ends the child,
//! not the server.
//!
//! The child (`emseepea __compile-component RUNTIME_JSON`) builds its engine
//! from the same `RuntimeConfig` with the same function as the server
//! (`engine::build_engine`), reads the wasm on stdin and writes the artifact
//! on stdout; the server's `Component::deserialize` re-checks that the
//! artifact matches its own engine, so a mismatch is an error, never a load.
//! Without a binary to run (the library in tests and benchmarks) compiling
//! happens in-process on an engine and a thread pool of its own.

use super::cache::CacheError;
use crate::runtime::config::RuntimeConfig;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::OnceLock;
use wasmtime::Engine;

/// The hidden subcommand the child runs.
pub const CHILD_SUBCOMMAND: &str = "__compile-component";

static CHILD_EXECUTABLE: OnceLock<PathBuf> = OnceLock::new();

/// Compile in child processes of `exe` (the running `emseepea` binary, which
/// must dispatch [`CHILD_SUBCOMMAND`] to [`child_main`]). Set once, at start.
pub fn compile_in_child_processes(exe: PathBuf) {
    let _ = CHILD_EXECUTABLE.set(exe);
}

/// The native artifact of `wasm` for `engine`, built with `config` (the
/// configuration `engine` was built from).
pub(crate) fn precompile(
    engine: &Engine,
    config: &RuntimeConfig,
    wasm: &[u8],
) -> Result<Vec<u8>, CacheError> {
    match CHILD_EXECUTABLE.get() {
        Some(exe) => match in_child(exe, config, wasm) {
            Err(ChildError::Spawn(e)) => {
                tracing::warn!(
                    exe = %exe.display(),
                    "cannot start a compiler process ({e}); compiling in the server process"
                );
                on_own_threads(engine, wasm)
            }
            Err(ChildError::Failed(reason)) => Err(CacheError::Compile(reason)),
            Ok(compiled) => Ok(compiled),
        },
        None => on_own_threads(engine, wasm),
    }
}

enum ChildError {
    Spawn(std::io::Error),
    Failed(String),
}

fn in_child(exe: &Path, config: &RuntimeConfig, wasm: &[u8]) -> Result<Vec<u8>, ChildError> {
    let config = serde_json::to_string(config).expect("RuntimeConfig serializes");
    let mut command = std::process::Command::new(exe);
    command
        .arg(CHILD_SUBCOMMAND)
        .arg(config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: `prctl` is async-signal-safe and touches no memory of ours.
    // The compiler ends with the server that asked for it.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(ChildError::Spawn)?;
    let mut stdin = child.stdin.take().expect("piped");
    // Written from another thread: the child's stderr and stdout are read
    // by `wait_with_output` meanwhile, so no pipe can fill and stall both.
    let output = std::thread::scope(|s| {
        let writer = s.spawn(move || stdin.write_all(wasm));
        let output = child.wait_with_output();
        let _ = writer.join();
        output
    })
    .map_err(|e| ChildError::Failed(format!("the compiler process failed: {e}")))?;
    if output.status.success() {
        return Ok(output.stdout);
    }
    let reason = String::from_utf8_lossy(&output.stderr);
    let reason = crate::toml_file::one_line(reason.trim());
    Err(ChildError::Failed(if reason.is_empty() {
        format!("the compiler process ended with {}", output.status)
    } else {
        reason
    }))
}

/// Why the compiler process could not compile: the one line it writes to
/// its stderr, which the server reports as the component's compile error.
#[derive(Debug, thiserror::Error)]
enum ChildFailure {
    #[error("bad runtime config: {0}")]
    Config(serde_json::Error),
    #[error(transparent)]
    Engine(#[from] super::engine::RuntimeSetupError),
    #[error("reading the component: {0}")]
    Read(std::io::Error),
    #[error("{}", super::engine::one_line_chain(.0))]
    Compile(wasmtime::Error),
}

/// The child's side: `RUNTIME_JSON` as the argument, the wasm on stdin,
/// the artifact on stdout, a one-line reason on stderr.
pub fn child_main(runtime_json: &str) -> ExitCode {
    let run = || -> Result<Vec<u8>, ChildFailure> {
        let mut config: RuntimeConfig =
            serde_json::from_str(runtime_json).map_err(ChildFailure::Config)?;
        // The compiler loads no code: a perf map of its own would stay empty.
        config.perf_map = false;
        let engine = super::engine::build_engine(&config)?;
        let mut wasm = Vec::new();
        std::io::stdin()
            .read_to_end(&mut wasm)
            .map_err(ChildFailure::Read)?;
        engine
            .precompile_component(&wasm)
            .map_err(ChildFailure::Compile)
    };
    match run() {
        Ok(compiled) => match std::io::stdout().lock().write_all(&compiled) {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::FAILURE,
        },
        Err(reason) => {
            eprintln!("{reason}");
            ExitCode::FAILURE
        }
    }
}

/// How long loading waits for the compiler threads to end (they end at once
/// unless the machine is very busy; only the memory's return is delayed).
const COMPILER_EXIT_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Compile `wasm` in this process, with an engine and a thread pool of its
/// own that end with it (cranelift keeps its compiler contexts in the engine,
/// rayon's global pool its threads for the process's life). An engine of the
/// same configuration makes artifacts the serving engine accepts;
/// `crate::release_free_memory` then returns what it can to the OS.
fn on_own_threads(engine: &Engine, wasm: &[u8]) -> Result<Vec<u8>, CacheError> {
    let compile = || {
        let fail =
            |e: wasmtime::Error| CacheError::Compile(crate::toml_file::one_line(&format!("{e:#}")));
        let compiler = Engine::new(engine.config()).map_err(fail)?;
        compiler.precompile_component(wasm).map_err(fail)
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (exited, exits) = std::sync::mpsc::channel();
    match rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("emseepea-compile-{i}"))
        .exit_handler(move |_| {
            // Fails only once loading stopped waiting for the exits.
            let _ = exited.send(());
        })
        .build()
    {
        Ok(pool) => {
            let compiled = pool.install(compile);
            drop(pool);
            // Dropping a pool only asks its threads to end: wait (briefly) until
            // they have, so that their memory is free when the caller collects.
            for _ in 0..threads {
                if exits.recv_timeout(COMPILER_EXIT_WAIT).is_err() {
                    break;
                }
            }
            compiled
        }
        Err(e) => {
            tracing::warn!("no compiler threads of our own ({e}); compiling on the global pool");
            compile()
        }
    }
}
