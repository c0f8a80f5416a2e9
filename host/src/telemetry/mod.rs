//! What the process tells its operator: Prometheus metrics (`metrics`).
//! Telemetry observes every layer and changes none.

pub mod logs;
pub mod metrics;

pub use metrics::metrics;
