//! Telemetry's settings: `[log]`, `[traces]` and the OTLP exporter's bounds.

use serde::Deserialize;

/// The OTLP exporter's HTTP request (connect, send, response) gives up
/// after this long: a dead collector costs the batch thread this much per
/// batch, never a request.
pub const TRACE_EXPORT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// A collector's answer to an export is read up to this many bytes (it is
/// a small status message; more is refused).
pub const TRACE_EXPORT_MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// A `tracestate` longer than this (from `_meta` or a header) is dropped,
/// not passed on: it is client-chosen text that would reach the sources'
/// backends. W3C trace context asks that at least 512 characters be kept.
pub const MAX_TRACESTATE_BYTES: usize = 512;
/// `service.name` of the spans when neither `[traces] service_name` nor
/// `OTEL_SERVICE_NAME` names one.
pub const DEFAULT_TRACE_SERVICE_NAME: &str = "emseepea";

/// How log lines are written (to stderr).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Deserialize,
    serde::Serialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One `key=value` line per event (the default).
    #[default]
    Human,
    /// One JSON object per line: timestamp, level, target, message and the
    /// event's fields (request_id, source, reason, ...) at the top level.
    Json,
}

#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// `human` or `json` (`--log-format` overrides; `EMSEEPEA_LOG` filters
    /// like `RUST_LOG`).
    pub format: LogFormat,
}

/// `[traces]`: where spans go. Every key falls back to the standard
/// OpenTelemetry variable named with it; this file wins over the variable.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TracesConfig {
    /// The collector's OTLP/HTTP base URL (`http://collector:4318`);
    /// spans go to `ENDPOINT/v1/traces` as protobuf. Falls back to
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`; neither set: no traces.
    pub endpoint: Option<String>,
    /// `service.name`; falls back to `OTEL_SERVICE_NAME`, then `emseepea`.
    pub service_name: Option<String>,
    /// The share of requests recorded, 0.0..=1.0 (default 1.0), whatever
    /// a client's `traceparent` says: the operator's sampling decides.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub sample_ratio: Option<f64>,
    /// Also record every request whose `traceparent` says sampled (default
    /// false): a client may then raise the share, never lower it.
    pub follow_client_sampled: bool,
}

/// What [`TracesConfig::check`] refuses.
#[derive(Debug, thiserror::Error)]
pub enum TracesProblem {
    #[error("traces.sample_ratio must be 0.0..=1.0, got {0}")]
    SampleRatio(f64),
}

impl TracesConfig {
    pub fn check(&self) -> Result<(), TracesProblem> {
        if let Some(r) = self.sample_ratio
            && !(0.0..=1.0).contains(&r)
        {
            return Err(TracesProblem::SampleRatio(r));
        }
        Ok(())
    }
}
