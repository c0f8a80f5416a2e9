//! The one place where every layer's errors become wire errors: JSON-RPC
//! codes, messages, `data`, HTTP statuses per protocol version, and the
//! bytes of every error response. Client-facing messages are generic; the
//! detail was logged where it arose.

use super::http::{self, HttpResponse, no_store};
use super::jsonrpc::{FrameError, Invalid, RequestId, Violation};
use super::model::{ErrorObject, ErrorResponse, OAuthError, to_bytes};
use super::session::SessionRefused;
use super::version::Version;
use crate::auth::{Auth, AuthError};
use crate::inventory::{ListError, ReadError};
use crate::mcp::config::RETRY_AFTER_S;
use crate::runtime::{GuestError, Overload};
use ::http::StatusCode;
use ::http::header::{self, HeaderValue};
use serde_json::{Value, json};

pub const PARSE_ERROR: i32 = -32700;
pub const INVALID_REQUEST: i32 = -32600;
pub const METHOD_NOT_FOUND: i32 = -32601;
pub const INVALID_PARAMS: i32 = -32602;
pub const INTERNAL_ERROR: i32 = -32603;
/// Legacy versions: the resource a read names does not exist.
pub const RESOURCE_NOT_FOUND: i32 = -32002;
/// A legacy session id that is unknown, ended, or another caller's.
pub const SESSION_NOT_FOUND: i32 = -32001;
/// 2026-07-28: a standard header is missing or disagrees with the body.
pub const HEADER_MISMATCH: i32 = -32020;
/// 2026-07-28: the requested protocol version is not supported.
pub const UNSUPPORTED_PROTOCOL_VERSION: i32 = -32022;
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

#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("parse error")]
    Parse,
    #[error("{0}")]
    InvalidRequest(&'static str),
    #[error("method not found")]
    MethodNotFound,
    #[error("invalid params: {0}")]
    InvalidParams(String),
    /// 2026-07-28: a required `_meta` field is missing.
    #[error("missing _meta field {0}")]
    MissingMeta(&'static str),
    #[error("header mismatch: {0}")]
    HeaderMismatch(String),
    #[error("unsupported protocol version {requested:?}")]
    UnsupportedVersion { requested: String },
    #[error("invalid cursor")]
    InvalidCursor,
    #[error("resource not found")]
    ResourceNotFound { uri: String },
    /// A legacy request without `Mcp-Session-Id` (HTTP 400).
    #[error("no session id")]
    SessionRequired,
    /// Unknown, ended, or presented by another caller (HTTP 404).
    #[error("session not found")]
    SessionNotFound,
    /// Everything a client must not learn the detail of.
    #[error("internal error")]
    Internal,
    /// HTTP 401 (400 for a token in the query string) with a challenge.
    #[error("unauthorized: {error}")]
    Unauthorized {
        error: AuthError,
        scopes: Vec<String>,
    },
    /// HTTP 403 `insufficient_scope`.
    #[error("forbidden")]
    Forbidden { scopes: Vec<String> },
    /// The request was cancelled: nothing is sent for it.
    #[error("cancelled")]
    Cancelled,
    /// Over a fair share or at capacity: a fast answer the client may retry.
    #[error("busy: {0:?}")]
    Busy(Busy),
}

impl McpError {
    /// A short stable name for metrics (`outcome` of `emseepea_mcp_requests_total`).
    pub fn kind(&self) -> &'static str {
        match self {
            McpError::Parse => "parse_error",
            McpError::InvalidRequest(_) => "invalid_request",
            McpError::MethodNotFound => "method_not_found",
            McpError::InvalidParams(_) => "invalid_params",
            McpError::MissingMeta(_) => "missing_meta",
            McpError::HeaderMismatch(_) => "header_mismatch",
            McpError::UnsupportedVersion { .. } => "unsupported_version",
            McpError::InvalidCursor => "invalid_cursor",
            McpError::ResourceNotFound { .. } => "resource_not_found",
            McpError::SessionRequired => "session_required",
            McpError::SessionNotFound => "session_not_found",
            McpError::Internal => "internal_error",
            McpError::Unauthorized { .. } => "unauthorized",
            McpError::Forbidden { .. } => "forbidden",
            McpError::Cancelled => "cancelled",
            McpError::Busy(Busy::Caller) => "too_many_requests",
            McpError::Busy(Busy::Server) => "server_busy",
        }
    }

    pub fn code(&self, version: Version) -> i32 {
        match self {
            McpError::Parse => PARSE_ERROR,
            McpError::InvalidRequest(_) | McpError::SessionRequired => INVALID_REQUEST,
            McpError::MethodNotFound => METHOD_NOT_FOUND,
            McpError::InvalidParams(_) | McpError::MissingMeta(_) | McpError::InvalidCursor => {
                INVALID_PARAMS
            }
            McpError::HeaderMismatch(_) => HEADER_MISMATCH,
            McpError::UnsupportedVersion { .. } => UNSUPPORTED_PROTOCOL_VERSION,
            McpError::ResourceNotFound { .. } if version.not_found_is_invalid_params() => {
                INVALID_PARAMS
            }
            McpError::ResourceNotFound { .. } => RESOURCE_NOT_FOUND,
            McpError::SessionNotFound => SESSION_NOT_FOUND,
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
            McpError::SessionRequired => "Bad Request: Mcp-Session-Id header is required".into(),
            McpError::SessionNotFound => "Session not found".into(),
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
            McpError::Parse | McpError::InvalidRequest(_) | McpError::SessionRequired => {
                StatusCode::BAD_REQUEST
            }
            McpError::HeaderMismatch(_)
            | McpError::UnsupportedVersion { .. }
            | McpError::MissingMeta(_) => StatusCode::BAD_REQUEST,
            McpError::SessionNotFound => StatusCode::NOT_FOUND,
            McpError::MethodNotFound if version.unknown_method_is_404() => StatusCode::NOT_FOUND,
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

    /// Errors that are HTTP answers of their own: inside a batch they
    /// answer the whole batch.
    pub fn is_http_level(&self) -> bool {
        matches!(
            self,
            McpError::Unauthorized { .. } | McpError::Forbidden { .. }
        )
    }

    /// The JSON-RPC error response bytes for the request `id`.
    pub fn to_bytes(&self, version: Version, id: Option<&RequestId>) -> Vec<u8> {
        let message = self.message();
        let data = self.data();
        to_bytes(&ErrorResponse::new(
            id.map(RequestId::as_raw_value),
            ErrorObject {
                code: self.code(version),
                message: &message,
                data: data.as_ref(),
            },
        ))
    }

    /// The whole HTTP answer: JSON-RPC error, OAuth challenge, or (for a
    /// cancelled request) a stream that ends without a message.
    pub fn into_response(
        self,
        auth: &Auth,
        version: Version,
        id: Option<&RequestId>,
    ) -> HttpResponse {
        let status = self.status(version);
        let retry_after = self.retry_after_s();
        let failed = match &self {
            McpError::Unauthorized { error, .. } => Some(error.reason()),
            McpError::Forbidden { .. } => Some("insufficient_scope"),
            _ => None,
        };
        if let Some(reason) = failed {
            let m = crate::telemetry::metrics();
            crate::telemetry::metrics::Metrics::reason(&m.auth_failures, reason);
        }
        let (body, challenge) = match &self {
            McpError::Cancelled => return http::cancelled(),
            McpError::Unauthorized { error, scopes } => (
                to_bytes(&oauth_error(error)),
                auth.challenge_unauthorized(error, scopes),
            ),
            McpError::Forbidden { scopes } => (
                to_bytes(&OAuthError {
                    error: "insufficient_scope",
                    error_description: "The access token lacks a required scope",
                }),
                auth.challenge_forbidden(scopes),
            ),
            _ => (self.to_bytes(version, id), String::new()),
        };
        let mut r = http::json(status, body);
        if let Ok(v) = HeaderValue::from_str(&challenge)
            && !challenge.is_empty()
        {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        if let Some(s) = retry_after {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        no_store(&mut r);
        r
    }
}

fn oauth_error(error: &AuthError) -> OAuthError {
    let (error, error_description) = match error {
        AuthError::Missing => ("invalid_request", "A bearer token is required"),
        AuthError::QueryToken => (
            "invalid_request",
            "Access tokens are accepted only in the Authorization header",
        ),
        AuthError::Malformed => ("invalid_request", "Malformed Authorization header"),
        _ => ("invalid_token", "The access token is invalid or expired"),
    };
    OAuthError {
        error,
        error_description,
    }
}

impl From<Invalid> for McpError {
    fn from(invalid: Invalid) -> Self {
        match invalid.violation {
            Violation::NotAnObject => {
                McpError::InvalidRequest("Invalid Request: not a JSON object")
            }
            Violation::BadId => {
                McpError::InvalidRequest("Invalid Request: id must be a string or an integer")
            }
            Violation::BadVersion => {
                McpError::InvalidRequest("Invalid Request: jsonrpc must be \"2.0\"")
            }
            Violation::Shape => McpError::InvalidRequest("Invalid Request"),
            Violation::ParamsNotAnObject => {
                McpError::InvalidParams("params must be an object".into())
            }
        }
    }
}

impl From<FrameError> for McpError {
    fn from(e: FrameError) -> Self {
        match e {
            FrameError::Parse => McpError::Parse,
            FrameError::EmptyBatch => McpError::InvalidRequest("Invalid Request: empty batch"),
            FrameError::TooManyItems { .. } => {
                McpError::InvalidRequest("Invalid Request: too many messages in the batch")
            }
        }
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
            ReadError::UriTooLong => McpError::InvalidParams(e.to_string()),
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
    fn error_without_id_omits_it() {
        assert_eq!(
            String::from_utf8(McpError::Parse.to_bytes(Version::V2025_03_26, None)).unwrap(),
            r#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"}}"#
        );
        let id = RequestId::from_value(&json!("a")).unwrap();
        assert_eq!(
            String::from_utf8(McpError::SessionNotFound.to_bytes(Version::V2025_03_26, Some(&id)))
                .unwrap(),
            r#"{"jsonrpc":"2.0","id":"a","error":{"code":-32001,"message":"Session not found"}}"#
        );
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
