//! The outbound HTTP capability's part of a manifest: `[grants.http_limits]`.

use serde::Deserialize;

#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct HttpGrantLimits {
    /// Largest request body a guest may send.
    pub max_request_bytes: usize,
    /// Largest response body a guest may receive.
    pub max_response_bytes: usize,
    /// Resolving, connecting and the whole exchange, within the call's deadline.
    pub timeout_ms: u64,
}

impl Default for HttpGrantLimits {
    fn default() -> Self {
        Self {
            max_request_bytes: 1 << 20,
            max_response_bytes: 4 << 20,
            timeout_ms: 5_000,
        }
    }
}

/// What a source's manifest asks of the HTTP capability: `grants.http`
/// (the origins) and `grants.http_limits`.
#[derive(Debug, Clone, Copy)]
pub struct HttpAsked<'m> {
    pub origins: &'m [String],
    pub limits: HttpGrantLimits,
}
