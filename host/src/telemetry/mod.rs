//! What the process tells its operator: Prometheus metrics (`metrics`),
//! log lines (`logs`) and OpenTelemetry traces (`traces`, `spans`).
//! Telemetry observes every layer and changes none.

pub mod config;
mod histogram;
pub mod limited;
pub mod logs;
pub mod metrics;
mod otlp_client;
pub mod spans;
pub mod traces;

pub use metrics::metrics;
