//! Authentication, once per HTTP request and before its body is read: the
//! one function every path (stateless, legacy, batch, DELETE) goes through.
//! A presented token is always verified, even where none is needed, and a
//! bad one is refused everywhere: it never counts as anonymous.

use super::App;
use super::errors::McpError;
use crate::auth::Principal;
use http::HeaderMap;
use std::sync::Arc;

/// Who is asking.
#[derive(Clone, Debug)]
pub enum Caller {
    /// No token presented.
    Anonymous,
    /// A token was presented and verified.
    Verified(Arc<Principal>),
}

impl Caller {
    pub fn principal(&self) -> Option<&Principal> {
        match self {
            Caller::Anonymous => None,
            Caller::Verified(p) => Some(p),
        }
    }
}

pub async fn authenticate(
    app: &App,
    headers: &HeaderMap,
    query: Option<&str>,
) -> Result<Caller, McpError> {
    match app.auth.authenticate(headers, query).await {
        Ok(None) => Ok(Caller::Anonymous),
        Ok(Some(p)) => Ok(Caller::Verified(p)),
        Err(error) => {
            tracing::info!("authentication failed: {error}");
            Err(McpError::Unauthorized {
                error,
                scopes: app.pager.source_scopes(),
            })
        }
    }
}

/// The body limit for this caller: the smaller one until a token is
/// verified. Without auth nobody can be verified, and the configured
/// `max_body_bytes` is the trust every caller gets.
pub fn body_limit(app: &App, caller: &Caller) -> usize {
    let http = &app.config.http;
    match caller {
        Caller::Anonymous if app.auth.enabled() => {
            http.max_unauthenticated_body_bytes.min(http.max_body_bytes)
        }
        _ => http.max_body_bytes,
    }
}
