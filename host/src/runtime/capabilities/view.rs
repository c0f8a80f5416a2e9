//! What one capability's host functions see of a call: its own state and
//! the call's shared pieces, never another capability's state (wasmtime's
//! `HasData` pattern, as `wasmtime_wasi::WasiView` does for WASI).

use crate::runtime::host_state::MemoryAccount;
use std::marker::PhantomData;
use std::time::Instant;
use tokio_util::sync::CancellationToken;
use wasmtime::component::{HasData, ResourceTable};

/// One capability's view of a call: `state` is that capability's per-call
/// state; the rest is the call's.
pub struct CallView<'a, S> {
    pub(crate) state: &'a mut S,
    /// The call's resource table (the guest's handles).
    pub(crate) table: &'a mut ResourceTable,
    /// The call's memory budget: host-side buffers made for the guest are
    /// charged here.
    pub(crate) memory: &'a mut MemoryAccount,
    /// The call's deadline: host functions that wait on a backend stop then.
    pub(crate) deadline: Instant,
    /// Cancelled with the MCP request.
    pub(crate) cancel: &'a CancellationToken,
}

/// The `HasData` marker whose data is a [`CallView`] of `S`.
pub struct ViewOf<S>(PhantomData<fn() -> S>);

impl<S: 'static> HasData for ViewOf<S> {
    type Data<'a> = CallView<'a, S>;
}
