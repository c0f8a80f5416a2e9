//! The one place where every layer's errors become wire errors: JSON-RPC
//! codes, messages, `data`, and HTTP statuses per protocol version.
//! Client-facing messages are generic; the detail was logged where it arose.

use super::jsonrpc::*;
use super::session::SessionRefused;
use super::version::Version;
use crate::auth::AuthError;
use crate::config::RETRY_AFTER_S;
use crate::inventory::{ListError, ReadError};
use crate::runtime::{GuestError, Overload};
use http::StatusCode;
use serde_json::{Value, json};

/// The caller is over its fair share (guest calls, sessions): HTTP 429 with
/// `Retry-After`. Retry later, or send fewer requests at once.
pub const TOO_MANY_REQUESTS: i32 = -32050;
/// The server (or the source asked) is at capacity: HTTP 503 with
/// `Retry-After`. Nothing is wrong with the request; retry later.
pub const SERVER_BUSY: i32 = -32051;

/// Whose limit a refused request hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Busy {
    /// The caller's own share: 429.
    Caller,
    /// The server's capacity: 503.
    Server,
}

impl From<Overload> for Busy {
    fn from(o: Overload) -> Self {
        match o {
            Overload::CallerOverShare => Busy::Caller,
            Overload::SourceBusy | Overload::HostFull => Busy::Server,
        }
    }
}

impl From<SessionRefused> for Busy {
    fn from(r: SessionRefused) -> Self {
        match r {
            SessionRefused::PrincipalQuota => Busy::Caller,
            SessionRefused::Full => Busy::Server,
        }
    }
}

#[derive(Debug)]
pub enum McpError {
    Parse,
    InvalidRequest(&'static str),
    MethodNotFound,
    InvalidParams(String),
    /// 2026-07-28: a required `_meta` field is missing.
    MissingMeta(&'static str),
    HeaderMismatch(String),
    UnsupportedVersion {
        requested: String,
    },
    InvalidCursor,
    ResourceNotFound {
        uri: String,
    },
    /// Everything a client must not learn the detail of.
    Internal,
    /// HTTP 401 (400 for a token in the query string) with a challenge.
    Unauthorized {
        error: AuthError,
        scopes: Vec<String>,
    },
    /// HTTP 403 `insufficient_scope`.
    Forbidden {
        scopes: Vec<String>,
    },
    /// The request was cancelled: nothing is sent for it.
    Cancelled,
    /// Over a fair share or at capacity: a fast answer the client may retry.
    Busy(Busy),
}

impl McpError {
    pub fn code(&self, version: Version) -> i32 {
        match self {
            McpError::Parse => PARSE_ERROR,
            McpError::InvalidRequest(_) => INVALID_REQUEST,
            McpError::MethodNotFound => METHOD_NOT_FOUND,
            McpError::InvalidParams(_) | McpError::MissingMeta(_) | McpError::InvalidCursor => {
                INVALID_PARAMS
            }
            McpError::HeaderMismatch(_) => HEADER_MISMATCH,
            McpError::UnsupportedVersion { .. } => UNSUPPORTED_PROTOCOL_VERSION,
            McpError::ResourceNotFound { .. } => version.resource_not_found_code(),
            McpError::Busy(Busy::Caller) => TOO_MANY_REQUESTS,
            McpError::Busy(Busy::Server) => SERVER_BUSY,
            McpError::Internal
            | McpError::Unauthorized { .. }
            | McpError::Forbidden { .. }
            | McpError::Cancelled => INTERNAL_ERROR,
        }
    }

    pub fn message(&self) -> String {
        match self {
            McpError::Parse => "Parse error".into(),
            McpError::InvalidRequest(m) => (*m).into(),
            McpError::MethodNotFound => "Method not found".into(),
            McpError::InvalidParams(m) => format!("Invalid params: {m}"),
            McpError::MissingMeta(m) => format!("Invalid params: missing _meta field {m}"),
            McpError::HeaderMismatch(m) => format!("Header mismatch: {m}"),
            McpError::UnsupportedVersion { .. } => "Unsupported protocol version".into(),
            // The same message for every cursor failure, so clients restart.
            McpError::InvalidCursor => "Invalid cursor".into(),
            McpError::ResourceNotFound { .. } => "Resource not found".into(),
            McpError::Internal | McpError::Cancelled => "Internal error".into(),
            McpError::Unauthorized { .. } => "Unauthorized".into(),
            McpError::Forbidden { .. } => "Forbidden".into(),
            McpError::Busy(Busy::Caller) => "Too many requests: retry later".into(),
            McpError::Busy(Busy::Server) => "Server busy: retry later".into(),
        }
    }

    pub fn data(&self) -> Option<Value> {
        match self {
            McpError::UnsupportedVersion { requested } => {
                Some(json!({ "supported": Version::supported_strings(), "requested": requested }))
            }
            McpError::ResourceNotFound { uri } => Some(json!({ "uri": uri })),
            // Also in the body: a batch item or a client that hides HTTP
            // headers still learns when to come back.
            McpError::Busy(_) => Some(json!({ "retryAfterMs": RETRY_AFTER_S * 1000 })),
            _ => None,
        }
    }

    /// The HTTP status a JSON-RPC error travels with.
    pub fn status(&self, version: Version) -> StatusCode {
        match self {
            McpError::Parse | McpError::InvalidRequest(_) => StatusCode::BAD_REQUEST,
            McpError::HeaderMismatch(_)
            | McpError::UnsupportedVersion { .. }
            | McpError::MissingMeta(_) => StatusCode::BAD_REQUEST,
            // 2026-07-28: an unknown method is an HTTP 404.
            McpError::MethodNotFound if version.is_modern() => StatusCode::NOT_FOUND,
            McpError::Unauthorized {
                error: AuthError::QueryToken | AuthError::Malformed,
                ..
            } => StatusCode::BAD_REQUEST,
            McpError::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            McpError::Forbidden { .. } => StatusCode::FORBIDDEN,
            McpError::Busy(Busy::Caller) => StatusCode::TOO_MANY_REQUESTS,
            McpError::Busy(Busy::Server) => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::OK,
        }
    }

    /// The `Retry-After` (seconds) the HTTP answer carries, if any.
    pub fn retry_after_s(&self) -> Option<u64> {
        matches!(self, McpError::Busy(_)).then_some(RETRY_AFTER_S)
    }
}

impl From<GuestError> for McpError {
    fn from(e: GuestError) -> Self {
        match e {
            GuestError::Cancelled => McpError::Cancelled,
            GuestError::Overloaded(o) => McpError::Busy(o.into()),
            _ => McpError::Internal,
        }
    }
}

impl From<ListError> for McpError {
    fn from(e: ListError) -> Self {
        match e {
            // "A cursor that fails any check gets one generic invalid cursor error."
            ListError::InvalidCursor(_) => McpError::InvalidCursor,
            ListError::NoAccessibleSource { scopes } => McpError::Forbidden { scopes },
            ListError::Guest { error, .. } => error.into(),
            // "Invalid or oversized callback results fail with a generic protocol error."
            ListError::EntryTooLarge { .. } | ListError::InvalidPage { .. } => McpError::Internal,
        }
    }
}

impl McpError {
    pub fn from_read(e: ReadError, uri: &str) -> Self {
        match e {
            ReadError::NotFound => McpError::ResourceNotFound {
                uri: uri.to_owned(),
            },
            ReadError::Unauthenticated { scopes } => McpError::Unauthorized {
                error: AuthError::Missing,
                scopes,
            },
            ReadError::InsufficientScope { scopes } => McpError::Forbidden { scopes },
            ReadError::Guest { error, .. } => error.into(),
            ReadError::InvalidResult { .. } => McpError::Internal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_differ_where_the_spec_says() {
        let nf = McpError::ResourceNotFound {
            uri: "x://1".into(),
        };
        assert_eq!(nf.code(Version::V2025_11_25), -32002);
        assert_eq!(nf.code(Version::V2026_07_28), -32602);
        assert_eq!(nf.data().unwrap()["uri"], "x://1");
        assert_eq!(
            McpError::MethodNotFound.status(Version::V2026_07_28),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            McpError::MethodNotFound.status(Version::V2025_03_26),
            StatusCode::OK
        );
        let internal = McpError::from(ListError::InvalidPage {
            source_name: "secret-source".into(),
            violation: crate::inventory::validate::PageViolation::HasMoreWithoutEntries,
        });
        assert_eq!(internal.message(), "Internal error");
        assert_eq!(internal.data(), None);
    }

    #[test]
    fn overload_is_retryable_and_says_whose_limit() {
        let v = Version::V2025_11_25;
        let caller = McpError::from(GuestError::Overloaded(Overload::CallerOverShare));
        assert_eq!(caller.status(v), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(caller.code(v), TOO_MANY_REQUESTS);
        for o in [Overload::SourceBusy, Overload::HostFull] {
            let e = McpError::from(GuestError::Overloaded(o));
            assert_eq!(e.status(v), StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(e.code(v), SERVER_BUSY);
            assert_eq!(e.retry_after_s(), Some(RETRY_AFTER_S));
        }
        let listed = McpError::from(ListError::Guest {
            source_name: "slow".into(),
            error: GuestError::Overloaded(Overload::HostFull),
        });
        assert_eq!(listed.code(v), SERVER_BUSY);
        assert_eq!(McpError::Internal.retry_after_s(), None);
    }
}
