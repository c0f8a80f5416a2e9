//! `resources/read`: a static resource by exact URI, else the source whose
//! template matches (startup made sure at most one does: `ownership`).
//! Access is checked on every call: "A previously listed URI does not grant
//! future read access." A `uri` over 2,048 characters is refused first,
//! before any lookup or matching: no listed URI can be that long.

use super::access::may_access;
use super::pager::call_context;
use super::statics::{StaticContent, StaticResources};
use crate::auth::Principal;
use crate::fields;
use crate::fields::within;
use crate::guest_text::GuestText;
use crate::limits::MAX_URI_LEN;
use crate::runtime::types::ResourceBody;
use crate::runtime::{Access, GuestError, RequestScope, Source, SourceFailure};
use base64::Engine as _;
use serde::Serialize;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The request's `uri` is longer than any listed URI may be.
    #[error("uri longer than {MAX_URI_LEN} characters")]
    UriTooLong,
    #[error("resource not found")]
    NotFound,
    /// Protected and no verified caller.
    #[error("authentication required")]
    Unauthenticated { scopes: Vec<String> },
    /// Protected and the caller lacks a required scope.
    #[error("insufficient scope")]
    InsufficientScope { scopes: Vec<String> },
    #[error("{source_name}: {error}")]
    Guest {
        source_name: String,
        error: GuestError,
    },
    #[error("{source_name} returned an invalid read result: {violation}")]
    InvalidResult {
        source_name: String,
        violation: ContentViolation,
    },
}

/// Which rule a read result broke (for the log; never sent to a client).
/// The listing's field rules (`crate::fields`), and every item is for the
/// URI that was read.
#[derive(Debug, thiserror::Error)]
pub enum ContentViolation {
    #[error("no contents")]
    Empty,
    #[error("content {index}: uri {:?} is not the uri that was read", GuestText::new(.uri))]
    OtherUri { index: usize, uri: String },
    #[error("content {index}: uri empty or longer than 2048 characters")]
    UriLength { index: usize },
    #[error("content {index}: mimeType longer than 128 characters")]
    MimeTypeLength { index: usize },
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContentJson {
    pub uri: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}

fn check_access(
    access: Access,
    scopes: &[String],
    principal: Option<&Principal>,
) -> Result<(), ReadError> {
    if may_access(access, scopes, principal) {
        return Ok(());
    }
    let scopes = scopes.to_vec();
    Err(if principal.is_none() {
        ReadError::Unauthenticated { scopes }
    } else {
        ReadError::InsufficientScope { scopes }
    })
}

/// Read `uri` for `principal`. `max_bytes` bounds a source's result, while
/// it is lifted (`runtime::GuestContents`).
pub async fn read(
    statics: &StaticResources,
    sources: &[Arc<Source>],
    uri: &str,
    principal: Option<&Principal>,
    scope: &RequestScope,
    max_bytes: usize,
) -> Result<Vec<ContentJson>, ReadError> {
    // The rule listings apply (UTF-16 units), so every listed URI can be read.
    if !within(uri, MAX_URI_LEN) {
        return Err(ReadError::UriTooLong);
    }
    if let Some(s) = statics.get(uri) {
        check_access(s.access, &s.required_scopes, principal)?;
        let (text, blob) = match &s.content {
            StaticContent::Text(t) => (Some(t.clone()), None),
            StaticContent::Blob(b) => (
                None,
                Some(base64::engine::general_purpose::STANDARD.encode(b)),
            ),
        };
        return Ok(vec![ContentJson {
            uri: s.uri.clone(),
            mime_type: s.mime_type.clone(),
            text,
            blob,
        }]);
    }
    let Some(source) = sources
        .iter()
        .find(|s| s.definition.uri_template.matches(uri))
    else {
        return Err(ReadError::NotFound);
    };
    let d = &source.definition;
    check_access(d.access, &d.required_scopes, principal)?;
    let contents = match source
        .read(uri, call_context(principal, scope), scope, max_bytes)
        .await
    {
        Ok(c) => c,
        Err(GuestError::Source(SourceFailure::NotFound)) => return Err(ReadError::NotFound),
        Err(error) => {
            return Err(ReadError::Guest {
                source_name: d.name.clone(),
                error,
            });
        }
    };
    let invalid = |violation: ContentViolation| {
        source.retire_kept_instances(scope);
        ReadError::InvalidResult {
            source_name: d.name.clone(),
            violation,
        }
    };
    if contents.is_empty() {
        return Err(invalid(ContentViolation::Empty));
    }
    let mut out = Vec::with_capacity(contents.len());
    for (index, c) in contents.into_iter().enumerate() {
        // Exactly the URI that was read: a source answers only for its own
        // resources, and the client asked for this one.
        if c.uri != uri {
            return Err(invalid(ContentViolation::OtherUri { index, uri: c.uri }));
        }
        if !fields::uri_ok(&c.uri) {
            return Err(invalid(ContentViolation::UriLength { index }));
        }
        if c.mime_type
            .as_deref()
            .is_some_and(|m| !fields::mime_type_ok(m))
        {
            return Err(invalid(ContentViolation::MimeTypeLength { index }));
        }
        let (text, blob) = match c.body {
            ResourceBody::Text(t) => (Some(t), None),
            ResourceBody::Blob(b) => (
                None,
                Some(base64::engine::general_purpose::STANDARD.encode(b)),
            ),
        };
        out.push(ContentJson {
            uri: c.uri,
            mime_type: c.mime_type.or_else(|| d.mime_type.clone()),
            text,
            blob,
        });
    }
    Ok(out)
}
