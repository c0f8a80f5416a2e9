//! The wasmtime side of the host: one [`Runtime`] (engine, linker, epoch
//! ticker, fair shares of the call pool), [`Source`]s loaded from a directory, and budgeted
//! guest calls. This module knows nothing of MCP or HTTP.
//!
//! Invariants:
//! - an instance serves calls of one caller only: a fresh `Store` +
//!   instance, or one kept after that same caller's call of that source
//!   (`warm.rs`; verified callers only, bounded, dropped after any failure):
//!   nothing a caller leaves in guest memory is visible to another caller;
//! - every guest call has fuel, a memory cap and a deadline; the future of a
//!   call may be dropped at any await point, and the guest then never runs
//!   again (it only runs while its future is polled);
//! - guests get no ambient authority: no preopens, no environment, no
//!   sockets, no stdin; stdout/stderr go to the host log tagged with the source.

pub mod bindings;
mod budget;
mod cache;
mod call;
pub mod capabilities;
pub mod compile;
pub mod config;
mod contents;
mod definition;
mod engine;
mod guest_threads;
mod host_state;
mod loader;
pub mod output;
mod page;
mod page_json;
mod scope;
mod slots;
mod standby;
mod trim;
mod warm;

pub use budget::{Budget, GuestError, SourceFailure};
pub use cache::CacheOutcome;
pub use contents::GuestContents;
pub use definition::{Access, SourceDefinition};
pub use engine::{Runtime, RuntimeSetupError, WASMTIME_VERSION};
pub use loader::{LoadError, LoadProblem, LoadSettings, Source, SourceSet};
pub use page::{Entries, EntryRef, GuestPage};
pub use scope::RequestScope;
pub use slots::{CallerKey, Overload, SlotLimits};
pub use warm::{InstanceKey, WarmLimits};

/// Plain data types of the WIT contract, as the other layers see them.
pub mod types {
    pub use super::bindings::emseepea::inventory::types::{
        CallContext, InventoryEntry, InventoryPage, Principal, ResourceBody, ResourceContents,
        ResourceMetadata,
    };
}
