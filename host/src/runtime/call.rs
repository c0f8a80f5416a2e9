//! One budgeted guest call: a slot (the caller's and the source's fair
//! share, `slots.rs`), an instance (the caller's kept one, `warm.rs`, a
//! standby, or a new one) bound to the call's fuel, memory cap and deadline,
//! the call itself, the classification of how it ended, and then the
//! instance kept for its caller or dropped.
//! (Over 500 lines: one call from its slot to its instance's teardown or
//! keeping, with its log line; the steps share the call's private types,
//! `Admitted`, `Spent`, `Keep`.)
//!
//! The wait for a slot is bounded (the admission rule of `slots.rs`, and
//! `runtime.slot_wait_ms` if set) and does not count against the guest: its budget, and so its
//! `max_duration_ms`, starts when it has a slot. Only the request's own
//! deadline, which the wait may have used up in part, still caps it.
//!
//! The deadline is enforced twice: the epoch callback checks it at every
//! tick while wasm runs (and yields to the executor, so the call's future can
//! be dropped there), and a tokio timer covers time spent in host calls.
//! Cancellation (`RequestScope::cancel`) and dropping the future both stop
//! the guest at its next tick; a drop is logged by `CallLog`.

use super::bindings::emseepea::inventory::types::SourceError;
use super::budget::{Budget, DeadlineTrap, GuestError, MemoryCapTrap};
use super::capabilities::wasi::CapturedOutput;
use super::contents::ResultTooLarge;
use super::engine::Runtime;
use super::host_state::HostState;
use super::loader::{Linked, Source};
use super::output;
use super::page::LiftError;
use super::page_json::JsonPageError;
use super::scope::RequestScope;
use super::slots::Slot;
use super::standby::Standby;
use super::warm::{InstanceKey, Warm};
use crate::guest_text::GuestText;
use crate::telemetry::metrics::{ExportSeries, InFlight, metrics};
use crate::telemetry::{spans, traces};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use wasmtime::component::Instance;
use wasmtime::{Store, Trap, UpdateDeadline};

/// Extra time the tokio timer grants beyond the budget's deadline, so that a
/// guest running wasm is stopped by the epoch callback (with the precise
/// reason) rather than by the timer.
const TIMER_SLACK: Duration = Duration::from_millis(20);

pub(crate) type CallFuture<'a, R> = Pin<Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>>;

/// What a call does with its fresh instance (an export's typed call).
pub(crate) trait CallFn<R>:
    for<'a> FnOnce(&'a mut Store<HostState>, &'a Instance, &'a Linked) -> CallFuture<'a, R> + Send
{
}

impl<R, F> CallFn<R> for F where
    F: for<'a> FnOnce(&'a mut Store<HostState>, &'a Instance, &'a Linked) -> CallFuture<'a, R>
        + Send
{
}

impl Source {
    /// Run `f` against a fresh instance of this source under a budget, on a
    /// guest thread if there are any and the server is busy enough
    /// (`guest_threads.rs`), else here. The slot is taken here, before any
    /// hand-over: only calls the fair shares admit reach a guest thread, so
    /// a flood that is refused never queues there ahead of other callers. A
    /// `source-error` the guest returned is `GuestError::Source` (so that
    /// the call's log line says so).
    pub(crate) async fn call<R, F>(
        self: &Arc<Self>,
        scope: &RequestScope,
        what: &'static str,
        f: F,
    ) -> Result<R, GuestError>
    where
        R: Send + 'static,
        F: CallFn<Result<R, SourceError>> + 'static,
    {
        let threads = self
            .runtime
            .guest_threads
            .as_ref()
            .filter(|_| self.runtime.busy());
        self.logged(scope, what, || async {
            let slot = self.take_slot(scope).await?;
            let budget = Budget::new(&self.budget, scope.deadline);
            let Some(threads) = threads else {
                let call = Admitted {
                    slot,
                    budget,
                    scope,
                    what,
                    refill: Some(self),
                };
                return self.budgeted(call, f).await;
            };
            metrics().guest_calls_handed_over.inc();
            let (source, scope) = (self.clone(), scope.clone());
            // Under the call's span (current here), as on the worker.
            let call = async move {
                let call = Admitted {
                    slot,
                    budget,
                    scope: &scope,
                    what,
                    refill: Some(&source),
                };
                source.budgeted(call, f).await
            }
            .instrument(tracing::Span::current());
            // `None`: the threads are stopping (shutdown).
            threads
                .run(call)
                .await
                .unwrap_or(Err(GuestError::Cancelled))
        })
        .await
    }

    /// `call` on this thread, guest threads or not (startup's `describe`).
    pub(crate) async fn call_here<R, F>(
        &self,
        scope: &RequestScope,
        what: &'static str,
        f: F,
    ) -> Result<R, GuestError>
    where
        R: Send,
        F: CallFn<Result<R, SourceError>>,
    {
        self.logged(scope, what, || async {
            let slot = self.take_slot(scope).await?;
            let budget = Budget::new(&self.budget, scope.deadline);
            let call = Admitted {
                slot,
                budget,
                scope,
                what,
                refill: None,
            };
            self.budgeted(call, f).await
        })
        .await
    }

    /// The call `start` makes (slot, hand-over, budgeted run) under the
    /// call's span and log line; a cancellation of the request ends it.
    /// `start` builds the call's future where it is awaited: a future passed
    /// by value would be kept twice in this one (the argument and what is
    /// awaited), and every caller's future holds this one.
    async fn logged<R, C>(
        &self,
        scope: &RequestScope,
        what: &'static str,
        start: impl FnOnce() -> C,
    ) -> Result<R, GuestError>
    where
        C: Future<Output = Result<Result<R, SourceError>, GuestError>>,
    {
        let mut log = CallLog {
            source: &self.log_name,
            series: self.series(what),
            what,
            request_id: &scope.request_id,
            started: Instant::now(),
            done: false,
            span: spans::guest_call(&self.log_name, what),
        };
        // Capability calls made while the guest runs are children of `span`.
        let result = async {
            tokio::select! {
                biased;
                _ = scope.cancel.cancelled() => Err(GuestError::Cancelled),
                r = start() => r,
            }
        }
        .instrument(log.span.clone())
        .await
        .and_then(|r| r.map_err(|e| GuestError::Source(e.into())));
        log.finish(&result);
        result
    }

    /// The caller's and the source's fair share of the pool; the wait is
    /// bounded and does not count against the guest's budget.
    async fn take_slot(&self, scope: &RequestScope) -> Result<Slot, GuestError> {
        let waiting = Instant::now();
        let slot = self
            .runtime
            .slots
            .acquire(
                &scope.caller,
                &self.log_name,
                self.max_concurrent_calls,
                scope.deadline,
            )
            .await
            .map_err(GuestError::Overloaded)?;
        metrics().slot_wait.observe(waiting.elapsed().as_secs_f64());
        Ok(slot)
    }

    /// Run `call` under its budget, holding its slot until the instance is
    /// gone, wherever this runs; the tokio timer covers time in host calls.
    async fn budgeted<R, F>(&self, call: Admitted<'_>, f: F) -> Result<R, GuestError>
    where
        R: Send,
        F: CallFn<R>,
    {
        let in_use = InFlight::enter(&metrics().slots_in_use);
        let deadline = call.budget.deadline;
        let run = self.run(call, in_use, f);
        tokio::time::timeout_at((deadline + TIMER_SLACK).into(), run)
            .await
            .unwrap_or(Err(GuestError::DeadlineExceeded))
    }

    async fn run<R, F>(&self, call: Admitted<'_>, in_use: InFlight, f: F) -> Result<R, GuestError>
    where
        R: Send,
        F: CallFn<R>,
    {
        let Admitted {
            slot,
            budget,
            scope,
            what,
            refill,
        } = call;
        let held = (slot, in_use);
        let m = metrics();
        if Instant::now() >= budget.deadline {
            return Err(GuestError::DeadlineExceeded);
        }
        // The deadline and the drop of this call are noticed at ticks.
        let _ticking = self.runtime.ticker.ticking();
        let _active = self.activity.enter();
        let linked = self.linked();
        let capabilities = self
            .capabilities
            .for_call(
                &self.log_name,
                &scope.request_id,
                &scope.caller,
                budget.deadline,
            )
            .map_err(|e| GuestError::Instantiate(e.to_string()))?;
        let captured = capabilities.wasi.output();
        let state = HostState::new(capabilities, &budget, scope.cancel.clone());
        // The caller's own kept instance, else a standby, else a new one.
        let key = scope.instance_key.as_ref();
        let warm = key.and_then(|k| self.runtime.warm.take(&self.log_name, k, &linked));
        let (mut store, instance, (calls, base)) = if let Some(warm) = warm {
            m.guest_calls_warm.inc();
            let instance = Ok(warm.instance);
            let served = (warm.calls, Some(warm.base));
            (rebind(warm.store, state, &budget)?, instance, served)
        } else if let Some(standby) = self.standby.take(&linked) {
            m.guest_calls_from_standby.inc();
            let instance = Ok(standby.instance);
            (bind(standby, state, &budget)?, instance, (0, None))
        } else {
            let mut store = self.store(state, &budget, 0)?;
            let instance = linked.pre.instantiate_async(&mut store).await;
            (store, instance, (0, None))
        };
        // A standby only after an instantiation that worked.
        let refill = refill.filter(|_| instance.is_ok()).cloned();
        let instance_made = instance.as_ref().ok().copied();
        let result = match instance {
            Ok(instance) => f(&mut store, &instance, &linked)
                .await
                .map_err(|e| classify(e, &store, &budget)),
            Err(e) => Err(match classify(e, &store, &budget) {
                GuestError::Trap(msg) => GuestError::Instantiate(msg),
                other => other,
            }),
        };
        let fuel_used = budget.fuel.saturating_sub(store.get_fuel().unwrap_or(0));
        match self.series(what) {
            Some(series) => series.usage(fuel_used, store.data().memory.used()),
            None => m.guest_usage(&self.log_name, what, fuel_used, store.data().memory.used()),
        }
        if traces::enabled() {
            // Inside `call`'s instrumented future: the current span is the call's.
            let span = tracing::Span::current();
            span.record("emseepea.fuel", fuel_used);
            span.record("emseepea.memory_bytes", store.data().memory.used());
        }
        self.last_fuel_used
            .store(fuel_used, std::sync::atomic::Ordering::Relaxed);
        self.last_memory_bytes.store(
            store.data().memory.used(),
            std::sync::atomic::Ordering::Relaxed,
        );
        self.forward_output(captured, &scope.request_id);
        // Kept for this caller's next call only after a call that ended
        // well: any failure (trap, budget stop, lift error) or cancellation
        // drops the instance with its store.
        let keep = match (&result, key, instance_made) {
            (Ok(_), Some(key), Some(instance))
                if self.runtime.warm.enabled()
                    && !scope.cancel.is_cancelled()
                    && !store.data().memory.exceeded() =>
            {
                Some(Keep {
                    source: self.log_name.clone(),
                    key: key.clone(),
                    instance,
                    linked: linked.clone(),
                    calls: calls.saturating_add(1),
                    base,
                })
            }
            _ => None,
        };
        Spent {
            store,
            held,
            refill,
            keep,
        }
        .retire(&self.runtime);
        result
    }

    /// What the guest printed, to the log under `request_id`.
    fn forward_output(&self, captured: Option<CapturedOutput>, request_id: &str) {
        let Some(captured) = captured else { return };
        for (stream, pipe) in [("stdout", &captured.stdout), ("stderr", &captured.stderr)] {
            output::forward(
                &self.output,
                &self.log_name,
                request_id,
                stream,
                &pipe.contents(),
            );
        }
    }

    /// A store for one instance of this source under `budget`, of which
    /// `fuel_spent` is used already.
    fn store(
        &self,
        state: HostState,
        budget: &Budget,
        fuel_spent: u64,
    ) -> Result<Store<HostState>, GuestError> {
        let mut store = Store::new(&self.runtime.engine, state);
        store.limiter(|s| &mut s.memory);
        arm(&mut store, budget, fuel_spent)?;
        Ok(store)
    }

    /// Make a standby (`standby.rs`): after a call, while the server is not
    /// busy, if this source has none and the bound has room. Under the
    /// source's budget, like a call; if instantiation fails, none is kept.
    async fn make_standby(self: Arc<Self>) {
        if self.runtime.busy() || !self.standby.is_empty() {
            return;
        }
        let Some(reserved) = self.runtime.standbys.reserve() else {
            return;
        };
        let linked = self.linked();
        let budget = Budget::new(
            &self.budget,
            Instant::now() + Duration::from_millis(self.budget.max_duration_ms),
        );
        let Ok(capabilities) = self.capabilities.for_call(
            &self.log_name,
            &STANDBY_REQUEST_ID,
            &super::slots::CallerKey::host(),
            budget.deadline,
        ) else {
            return;
        };
        let captured = capabilities.wasi.output();
        let state = HostState::new(capabilities, &budget, CancellationToken::new());
        let Ok(mut store) = self.store(state, &budget, 0) else {
            return;
        };
        let _ticking = self.runtime.ticker.ticking();
        let made = tokio::time::timeout_at(
            (budget.deadline + TIMER_SLACK).into(),
            linked.pre.instantiate_async(&mut store),
        )
        .await;
        // What start functions printed (the taking call captures its own).
        self.forward_output(captured, &STANDBY_REQUEST_ID);
        let Ok(Ok(instance)) = made else {
            return;
        };
        let fuel_used = budget.fuel.saturating_sub(store.get_fuel().unwrap_or(0));
        let standby = Standby::new(store, instance, linked, fuel_used, reserved);
        self.standby.put(standby, &self.linked());
    }
}

/// The request id in the log lines of what a standby's instantiation does.
static STANDBY_REQUEST_ID: LazyLock<Arc<str>> = LazyLock::new(|| "standby".into());

/// Fuel, the host-call allowance and the deadline of `budget` on `store`.
fn arm(store: &mut Store<HostState>, budget: &Budget, fuel_spent: u64) -> Result<(), GuestError> {
    store
        .set_fuel(budget.fuel.saturating_sub(fuel_spent))
        .map_err(|e| GuestError::Instantiate(format!("{e:#}")))?;
    // What lifting one result may allocate on the host (wasmtime's
    // default is 128 MiB): no more than the call's memory budget.
    store.set_hostcall_fuel(usize::try_from(budget.memory_bytes).unwrap_or(usize::MAX));
    let deadline = budget.deadline;
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        if Instant::now() >= deadline {
            Err(wasmtime::Error::new(DeadlineTrap))
        } else {
            // Yield at every tick: this is where a dropped or cancelled
            // call stops, and where the executor gets its thread back.
            // tokio's own yield (not a bare self-wake, which tokio runs
            // again at once from its LIFO slot and before it polls for
            // I/O): the thread's other calls and its sockets get a turn
            // first, so a CPU-bound guest delays others by a tick, not
            // by its whole deadline.
            Ok(UpdateDeadline::YieldCustom(
                1,
                Box::pin(tokio::task::yield_now()),
            ))
        }
    });
    Ok(())
}

/// A standby's store, now the call's: its data (capabilities, deadline,
/// cancellation, a memory account charged with what instantiation took),
/// fuel and deadline are the call's before any export runs.
fn bind(
    standby: Standby,
    state: HostState,
    budget: &Budget,
) -> Result<Store<HostState>, GuestError> {
    let mut store = standby.store;
    // Over the cap only if instantiation took more than the call may: the
    // call then fails as a memory-cap failure, as it would have instantiating.
    let made = &store.data().memory;
    let linear = made.linear_bytes();
    state
        .memory
        .adopt(linear, made.used().saturating_sub(linear));
    *store.data_mut() = state;
    arm(&mut store, budget, standby.fuel_used)?;
    Ok(store)
}

/// A kept instance's store (`warm.rs`), now this call's: the memory the
/// instance kept counts against this call's budget from the start (a heap
/// that grows call after call ends in a memory-cap failure, which drops
/// it), and its fuel and deadline are this call's alone.
fn rebind(
    mut store: Store<HostState>,
    state: HostState,
    budget: &Budget,
) -> Result<Store<HostState>, GuestError> {
    state.memory.adopt(store.data().memory.linear_bytes(), 0);
    *store.data_mut() = state;
    arm(&mut store, budget, 0)?;
    Ok(store)
}

/// What a call that ended well leaves to be kept for its caller.
struct Keep {
    source: Arc<str>,
    key: InstanceKey,
    instance: Instance,
    linked: Arc<Linked>,
    /// Calls the instance has served, this one included.
    calls: u32,
    /// Its memory after its first call (`None`: this was its first).
    base: Option<u64>,
}

/// A call the fair shares admitted: its slot, its budget (which started
/// when the slot was taken), and what it is for.
struct Admitted<'a> {
    slot: Slot,
    budget: Budget,
    scope: &'a RequestScope,
    what: &'static str,
    /// The source (the calling one) to make a standby of afterwards, if the
    /// server is not busy then; `None` for startup's `describe`.
    refill: Option<&'a Arc<Source>>,
}

/// A finished call's store (its instance, memories, tables, capabilities)
/// and the slot it held: the slot is free once the store is gone or kept.
struct Spent {
    store: Store<HostState>,
    held: (Slot, InFlight),
    /// The source to make a standby of once the store is gone.
    refill: Option<Arc<Source>>,
    /// Where the instance is kept for its caller, if it is.
    keep: Option<Keep>,
}

impl Spent {
    /// Drop now on a busy server. Otherwise in a task of its own, which the
    /// worker runs once the request's task yields, that is after the
    /// response is written: a lone client does not wait for the teardown
    /// (the memory reset, ~5-10 µs), which runs while the client reads.
    /// A standby (`standby.rs`) is made in that task, after the teardown.
    fn retire(mut self, runtime: &Runtime) {
        // Kept: parked at once (dropping the call's resources costs little;
        // the memory reset is what a kept instance saves), before the
        // result goes up, so a result found invalid above can retire it.
        if let Some(keep) = self.keep.take() {
            let warm = Warm::park(
                self.store,
                keep.instance,
                keep.linked,
                keep.calls,
                keep.base,
            );
            runtime.warm.put(&keep.source, keep.key, warm);
            // No standby after a kept call: its caller's next call has an
            // instance, and a task spawned per call here woke the idle
            // worker for a lone client (tests/operations.rs).
            drop(self.held);
            return;
        }
        let busy = runtime.busy();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) if !busy => {
                runtime.spawn(async move {
                    if let Some(source) = self.drop_now() {
                        source.make_standby().await;
                    }
                });
            }
            // Off a tokio runtime (never in the server): here, too.
            _ => drop(self.drop_now()),
        }
    }

    /// The instance first, then the slot it held.
    fn drop_now(self) -> Option<Arc<Source>> {
        let Spent {
            store,
            held,
            refill,
            keep: _,
        } = self;
        drop(store);
        drop(held);
        refill
    }
}

/// Turn a wasmtime error into the typed reason the call ended.
fn classify(err: wasmtime::Error, store: &Store<HostState>, budget: &Budget) -> GuestError {
    if store.data().memory.exceeded() || err.downcast_ref::<MemoryCapTrap>().is_some() {
        return GuestError::MemoryCap(budget.memory_bytes);
    }
    if err.downcast_ref::<DeadlineTrap>().is_some() {
        return GuestError::DeadlineExceeded;
    }
    if let Some(e) = err.downcast_ref::<ResultTooLarge>() {
        return GuestError::ResultTooLarge {
            bytes: e.bytes,
            limit: e.limit,
        };
    }
    if let Some(e) = err.downcast_ref::<LiftError>() {
        return GuestError::InvalidResult(e.to_string());
    }
    if let Some(e) = err.downcast_ref::<JsonPageError>() {
        return GuestError::InvalidResult(e.to_string());
    }
    // Lifting the result would have taken more host memory than the budget
    // (`set_hostcall_fuel`); wasmtime's error type for it is private.
    if format!("{err:#}").contains("fuel allocated for hostcalls") {
        return GuestError::MemoryCap(budget.memory_bytes);
    }
    match err.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => GuestError::FuelExhausted,
        Some(Trap::StackOverflow) => GuestError::StackOverflow,
        Some(Trap::Interrupt) => GuestError::DeadlineExceeded,
        Some(trap) => GuestError::Trap(trap.to_string()),
        // The message may carry guest text (names from its name section):
        // `GuestError`'s Display bounds and escapes it.
        None => GuestError::Trap(crate::toml_file::one_line(&format!("{err:#}"))),
    }
}

/// Logs how a call ended; when dropped before `finish` (the request's future
/// was dropped: client disconnect, shutdown), logs the cancellation.
struct CallLog<'a> {
    source: &'a str,
    /// Where a successful call is recorded, for the hot exports.
    series: Option<&'a ExportSeries>,
    what: &'static str,
    request_id: &'a str,
    started: Instant,
    done: bool,
    /// The call's span (disabled when traces are off).
    span: tracing::Span,
}

impl CallLog<'_> {
    /// The trace this call is part of, for its failure lines (`None`, and
    /// so no field, when traces are off).
    fn trace_id(&self) -> Option<String> {
        use opentelemetry::trace::TraceContextExt;
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        if self.span.is_disabled() {
            return None;
        }
        Some(
            self.span
                .context()
                .span()
                .span_context()
                .trace_id()
                .to_string(),
        )
    }

    fn end_span(&self, outcome: &'static str) {
        if !self.span.is_disabled() {
            self.span.record(
                "emseepea.duration_us",
                self.started.elapsed().as_micros() as u64,
            );
            spans::outcome(&self.span, outcome);
        }
    }
}

impl CallLog<'_> {
    fn finish<R>(&mut self, result: &Result<R, GuestError>) {
        self.done = true;
        let outcome = match result {
            Ok(_) => "ok",
            Err(e) => e.outcome(),
        };
        match (result, self.series) {
            (Ok(_), Some(series)) => series.ok(self.started.elapsed()),
            _ => metrics().guest_call(self.source, self.what, outcome, self.started.elapsed()),
        }
        self.end_span(outcome);
        let elapsed_us = self.started.elapsed().as_micros() as u64;
        match result {
            Ok(_) => tracing::debug!(
                source = self.source,
                call = self.what,
                request_id = self.request_id,
                elapsed_us,
                "guest call ok"
            ),
            // Expected under load, and answered with a retryable error:
            // not a warning, or an abusive caller would flood the log.
            Err(GuestError::Overloaded(why)) => tracing::debug!(
                source = self.source,
                call = self.what,
                request_id = self.request_id,
                "guest call refused: {why}"
            ),
            Err(GuestError::Source(failure)) => {
                let message = GuestText::new(failure.message());
                tracing::info!(
                    source = self.source,
                    call = self.what,
                    request_id = self.request_id,
                    trace_id = self.trace_id().as_deref(),
                    elapsed_us,
                    kind = failure.kind(),
                    message = ?message,
                    message_len = message.len(),
                    "guest call returned source-error"
                )
            }
            Err(e) => tracing::warn!(
                source = self.source,
                call = self.what,
                request_id = self.request_id,
                trace_id = self.trace_id().as_deref(),
                elapsed_us,
                reason = e.kind(),
                "guest call failed: {e}"
            ),
        }
    }
}

impl Drop for CallLog<'_> {
    fn drop(&mut self) {
        if !self.done {
            metrics().guest_call(
                self.source,
                self.what,
                GuestError::Cancelled.outcome(),
                self.started.elapsed(),
            );
            self.end_span(GuestError::Cancelled.outcome());
            tracing::warn!(
                source = self.source,
                call = self.what,
                request_id = self.request_id,
                trace_id = self.trace_id().as_deref(),
                elapsed_us = self.started.elapsed().as_micros() as u64,
                reason = "cancelled",
                "guest call cancelled: its future was dropped"
            );
        }
    }
}
