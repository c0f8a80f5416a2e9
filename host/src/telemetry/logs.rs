//! Log lines on stderr, human or JSON, filtered like `RUST_LOG` by
//! `EMSEEPEA_LOG`; and, when traces are on, the layer that exports spans.

use super::traces;
use crate::telemetry::config::{LogFormat, TracesConfig};
use tracing_log::AsLog;
use tracing_subscriber::filter::{EnvFilter, FilterExt, LevelFilter, filter_fn};
use tracing_subscriber::prelude::*;
use tracing_subscriber::{Layer, Registry};

/// The filter when `EMSEEPEA_LOG` is unset: wasmtime and cranelift are
/// chatty at info.
const DEFAULT_FILTER: &str = "info,cranelift_codegen=warn,wasmtime=warn";

/// The variable holding a `RUST_LOG`-style filter (`info,emseepea=debug`).
pub const FILTER_VAR: &str = "EMSEEPEA_LOG";

type BoxedLayer = Box<dyn Layer<Registry> + Send + Sync>;

/// Logs only.
pub fn init(format: LogFormat) {
    install(format, None);
}

/// Logs, and traces if `config`, the `[traces]` section, (or the OpenTelemetry variables) turns them
/// on. Must run inside the tokio runtime.
pub fn init_with_traces(
    format: LogFormat,
    config: &TracesConfig,
) -> Result<(), traces::TracesError> {
    let Some((layer, settings)) = traces::layer::<Registry>(config)? else {
        install(format, None);
        return Ok(());
    };
    install(format, Some(Box::new(layer)));
    tracing::info!(
        endpoint = %settings.traces_url,
        service = %settings.service_name,
        ratio = settings.sample_ratio,
        follow_client_sampled = settings.follow_client_sampled,
        "traces on (OTLP/HTTP)"
    );
    Ok(())
}

fn install(format: LogFormat, traces: Option<BoxedLayer>) {
    // A second init (the config could not be read, then was) keeps the first.
    if subscriber(format, traces).try_init().is_ok() {
        // `try_init` sets the `log` crate's level from all layers, and the
        // traces layer takes every level (of its own spans); but `log`
        // records only ever reach the log lines, so their filter bounds them.
        let level = log_filter().max_level_hint().unwrap_or(LevelFilter::TRACE);
        tracing_log::log::set_max_level(level.as_log());
    }
}

fn log_filter() -> EnvFilter {
    EnvFilter::try_from_env(FILTER_VAR).unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER))
}

fn subscriber(
    format: LogFormat,
    traces: Option<BoxedLayer>,
) -> tracing_subscriber::layer::Layered<Vec<BoxedLayer>, Registry> {
    let filter = log_filter();
    // Spans made for traces are never log lines (and, with traces off,
    // nothing is interested in them, so they cost nothing). The target test
    // says nothing about levels: without its hint the combined filter would
    // have none, the `log` crate's level would stay at TRACE, and every
    // `log::trace!` of wasmtime (a few per guest call) would be matched
    // against the directives instead of stopping at one atomic load.
    let filter = filter
        .and(filter_fn(|m| m.target() != traces::TARGET).with_max_level_hint(LevelFilter::TRACE));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let fmt: BoxedLayer = match format {
        LogFormat::Human => fmt.with_filter(filter).boxed(),
        // Fields flattened to the top level, so `request_id`, `source` and
        // `reason` have the same names in every line; no span list (spans
        // carry nothing a line does not already have).
        LogFormat::Json => fmt
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .with_filter(filter)
            .boxed(),
    };
    let layers: Vec<BoxedLayer> = std::iter::once(fmt).chain(traces).collect();
    tracing_subscriber::registry().with(layers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::spans;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Traces off: every span of `spans` is disabled, and a span's fields
    /// are not even evaluated; log lines are unaffected.
    #[test]
    fn with_traces_off_spans_cost_nothing() {
        static EVALUATED: AtomicUsize = AtomicUsize::new(0);
        fn field() -> u64 {
            EVALUATED.fetch_add(1, Ordering::Relaxed);
            1
        }
        for format in [LogFormat::Human, LogFormat::Json] {
            tracing::subscriber::with_default(subscriber(format, None), || {
                assert!(spans::guest_call("s", "list").is_disabled());
                assert!(spans::sql_statement("sqlite", "db", "query").is_disabled());
                assert!(spans::http_request("GET", "h", 80).is_disabled());
                assert!(
                    spans::mcp_request("resources/list", "2026-07-28", "1", &Default::default())
                        .is_disabled()
                );
                let span = tracing::error_span!(target: traces::TARGET, "t", f = field());
                assert!(span.is_disabled());
                // Not ours: still enabled for the log.
                assert!(!tracing::error_span!("other").is_disabled());
            });
        }
        assert_eq!(EVALUATED.load(Ordering::Relaxed), 0);
    }

    /// The log lines' level bounds the whole subscriber (with traces off),
    /// so `log` and `tracing` macros below it stop at one atomic load rather
    /// than being matched against the directives.
    #[test]
    fn the_subscriber_hints_the_filters_level() {
        use tracing::Subscriber;
        assert_eq!(
            subscriber(LogFormat::Human, None).max_level_hint(),
            log_filter().max_level_hint()
        );
        assert_eq!(
            EnvFilter::new(DEFAULT_FILTER).max_level_hint(),
            Some(LevelFilter::INFO)
        );
    }
}
