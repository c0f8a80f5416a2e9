//! emseepea: an MCP server hosting sandboxed WebAssembly components as
//! resource sources.
//!
//! The data path reads top to bottom: [`mcp`] (HTTP transport, JSON-RPC,
//! sessions) → [`auth`] (the caller's [`auth::Principal`]) → the method →
//! [`inventory`] (the pager, entry validation, sealed cursors) → [`runtime`]
//! (budgeted guest calls). `runtime` knows nothing of MCP, `inventory`
//! nothing of HTTP, and `mcp` never touches wasmtime types.

/// Every guest call lifts dozens of small strings into the host and drops
/// them again; mimalloc makes that about a fifth cheaper than glibc's
/// allocator and scales across threads (BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Return the allocator's free memory to the OS now, rather than when
/// mimalloc next gets round to it: after loading the sources, whose
/// compilation is the process's largest, short-lived use of memory.
pub fn release_free_memory() {
    // SAFETY: `mi_collect` takes no pointers; it frees and decommits memory
    // the allocator no longer uses, and is safe to call from any thread.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

/// No transparent huge pages for this process (and its compiler children).
/// mimalloc v3 asks for them on its arenas: a heap that grew under load
/// then stays resident in 2 MiB units, and it purges freed memory only in
/// such units. Measured on the demo (Python and JavaScript guests, 200
/// concurrent traversals): 292 MB a minute after the load with huge pages,
/// 234 MB without (idle 150 / 140 MB). Call first thing in `main`.
pub fn no_transparent_huge_pages() {
    // SAFETY: PR_SET_THP_DISABLE takes plain integers and changes only a
    // flag of this process's memory map; a failure leaves it as it was.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// The wasmtime release this binary embeds, as a literal for `concat!`.
/// A test (`runtime::engine`) checks it against Cargo.lock, so a wasmtime
/// upgrade cannot leave it stale, nor skip the audit it names.
macro_rules! wasmtime_release {
    () => {
        "50.0.2"
    };
}

/// `emseepea --version`: this server and the wasmtime it embeds, which is
/// what an operator checks against a wasmtime security advisory (also
/// scraped as `emseepea_build_info`).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (wasmtime ",
    wasmtime_release!(),
    ")"
);

pub mod admin;
pub mod auth;
pub mod check;
pub mod config;
pub mod devkit;
pub mod distribution;
pub mod fields;
#[cfg(test)]
mod fuzz;
pub mod guest_text;
pub mod http_client;
pub mod inventory;
#[cfg(test)]
mod layers;
pub mod limits;
pub mod listener;
pub mod mcp;
pub mod runtime;
pub mod secret;
pub mod server;
pub mod state;
pub mod telemetry;
pub mod toml_file;
pub mod uri_template;
pub mod workers;
