//! Log lines on stderr, human or JSON, filtered like `RUST_LOG` by
//! `EMSEEPEA_LOG`.

use crate::config::LogFormat;
use tracing_subscriber::EnvFilter;

/// The filter when `EMSEEPEA_LOG` is unset: wasmtime and cranelift are
/// chatty at info.
const DEFAULT_FILTER: &str = "info,cranelift_codegen=warn,wasmtime=warn";

/// The variable holding a `RUST_LOG`-style filter (`info,emseepea=debug`).
pub const FILTER_VAR: &str = "EMSEEPEA_LOG";

pub fn init(format: LogFormat) {
    let filter =
        EnvFilter::try_from_env(FILTER_VAR).unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false);
    match format {
        LogFormat::Human => builder.init(),
        // Fields flattened to the top level, so `request_id`, `source` and
        // `reason` have the same names in every line; no span list (spans
        // carry nothing a line does not already have).
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .init(),
    }
}
