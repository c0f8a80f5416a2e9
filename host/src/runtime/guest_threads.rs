//! Dedicated threads for guest calls (`[runtime] guest_threads`; default: half
//! the cores; 0 = off).
//!
//! Off, a guest call runs on the tokio worker that serves its request, in
//! between that worker's HTTP parsing, socket writes and JSON, and the load
//! driver's work on the same cores. A fresh instance per call runs a long,
//! cold code path (store, instantiation, teardown): on two busy cores it
//! costs about twice its time in a loop (BENCHMARKS.md, "Why a guest call
//! costs more in the server"). On a dedicated thread, calls run back to
//! back and that path stays warm; each call then pays two cross-thread
//! wake-ups, which an idle server feels (one client's latency rises) and a
//! busy one does not. Hence a call is handed over only while the server is
//! busy (`Runtime::busy`: at least `guest_threads_from_connections` client
//! connections open, as the listener counts them); with fewer it runs on
//! the worker. Not requests in flight: a call on the worker runs to
//! completion without yielding, so those stay near the number of workers
//! however many clients wait.
//!
//! Each thread runs a current-thread tokio runtime (with I/O and timers:
//! capabilities reach databases and origins from it). A call is handed to
//! the threads in turn; dropping its handle aborts it, which the guest
//! notices at its next epoch tick, as it would on the worker. The threads
//! end when the `Runtime` that owns them is dropped.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tokio_util::task::AbortOnDropHandle;

pub(crate) struct GuestThreads {
    handles: Vec<Handle>,
    next: AtomicUsize,
    /// Dropped with `GuestThreads`: each thread's runtime then ends.
    _stop: Vec<oneshot::Sender<()>>,
}

impl GuestThreads {
    /// `count` threads, or `None` for 0 (calls stay on the request's worker).
    pub(crate) fn start(count: u32) -> std::io::Result<Option<Self>> {
        if count == 0 {
            return Ok(None);
        }
        let mut handles = Vec::new();
        let mut stop = Vec::new();
        for i in 0..count {
            let (stop_tx, stop_rx) = oneshot::channel::<()>();
            let (handle_tx, handle_rx) = std::sync::mpsc::channel();
            std::thread::Builder::new()
                .name(format!("emseepea-guest-{i}"))
                .spawn(move || {
                    let runtime = match tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    {
                        Ok(runtime) => runtime,
                        Err(e) => {
                            let _ = handle_tx.send(Err(e));
                            return;
                        }
                    };
                    let _ = handle_tx.send(Ok(runtime.handle().clone()));
                    // Until the owner is gone; calls still running are dropped.
                    let _ = runtime.block_on(stop_rx);
                })?;
            let handle = handle_rx
                .recv()
                .map_err(|_| std::io::Error::other("guest thread ended at start"))??;
            handles.push(handle);
            stop.push(stop_tx);
        }
        Ok(Some(Self {
            handles,
            next: AtomicUsize::new(0),
            _stop: stop,
        }))
    }

    /// Run `call` on the next thread; its result, or `None` if it was
    /// aborted because the threads are stopping. A panic in it goes on in
    /// the caller, as it would have on the worker. Dropping the returned
    /// future (client gone, deadline, shutdown) aborts the call.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        call: impl Future<Output = T> + Send + 'static,
    ) -> Option<T> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.handles.len();
        match AbortOnDropHandle::new(self.handles[i].spawn(call)).await {
            Ok(value) => Some(value),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => None,
        }
    }
}
