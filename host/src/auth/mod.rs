//! The OAuth 2.1 resource server: bearer tokens are verified (never
//! forwarded anywhere), turned into a [`Principal`], and missing or bad
//! tokens are answered with RFC 6750 / RFC 9728 challenges.
//!
//! The host is never an authorization server. Which methods need a token is
//! decided by the MCP layer (it knows the method); this module answers "who
//! is this?" and "what do we tell a client that is not allowed?".

mod cache;
mod challenge;
pub mod config;
mod metadata;
mod principal;
pub mod verifier;

pub use principal::{Principal, valid_subject};

use cache::TokenCache;
use config::{AuthConfig, AuthMethod};
use http::HeaderMap;
use std::sync::Arc;
pub use verifier::Credentials;
use verifier::{Verifier, VerifyError};

/// Why authentication cannot be set up at startup (the server does not start).
#[derive(Debug, thiserror::Error)]
pub enum AuthSetupError {
    #[error(transparent)]
    DevSecret(#[from] crate::state::StateError),
    #[error(transparent)]
    Jwks(#[from] verifier::jwt::JwksError),
    #[error("building the introspection HTTP client: {0}")]
    IntrospectionClient(reqwest::Error),
    #[error("[auth.introspection] client_secret was not loaded (Config::load reads it)")]
    ClientSecretNotLoaded,
    #[error(
        "the resource URL ([auth] resource, or derived from http.endpoint) is longer than {} bytes",
        crate::limits::MAX_URI_LEN
    )]
    ResourceTooLong,
}

/// Why a request's credentials were refused.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("no bearer token")]
    Missing,
    /// A token in the URI query string: refused whatever its validity.
    #[error("token in the query string")]
    QueryToken,
    #[error("malformed Authorization header")]
    Malformed,
    #[error("token longer than the configured maximum")]
    TooLarge,
    /// Bad signature, expired, wrong issuer or audience, bad subject, ...
    /// The reason is for the log only.
    #[error("invalid token: {0}")]
    Invalid(String),
    /// The verifier could not decide (JWKS or introspection endpoint down).
    #[error("token verification unavailable: {0}")]
    Unavailable(String),
}

impl AuthError {
    /// The `reason` label of `emseepea_auth_failures_total`.
    pub fn reason(&self) -> &'static str {
        match self {
            AuthError::Missing => "missing",
            AuthError::QueryToken => "query_token",
            AuthError::Malformed => "malformed",
            AuthError::TooLarge => "too_large",
            AuthError::Invalid(_) => "invalid",
            AuthError::Unavailable(_) => "unavailable",
        }
    }
}

pub struct Auth {
    /// `None` in mode `none`: no token is ever verified.
    verifier: Option<Verifier>,
    cache: TokenCache,
    /// This server's canonical resource URL: the audience tokens must carry.
    pub resource: String,
    /// URL of the protected-resource metadata document (path-suffixed form).
    pub metadata_url: String,
    metadata: Vec<u8>,
    pub public_discovery: bool,
    max_token_bytes: usize,
}

impl Auth {
    /// `resource` is the canonical URL of the MCP endpoint (the token audience);
    /// `scopes` the union of scopes templates and static resources require.
    pub async fn new(
        config: &AuthConfig,
        state_dir: &std::path::Path,
        resource: String,
        scopes: Vec<String>,
    ) -> Result<Self, AuthSetupError> {
        let credentials = Credentials::load(config, state_dir).await?;
        Self::with_credentials(config, credentials, resource, scopes)
    }

    /// As [`Auth::new`], with the key material loaded beforehand (at startup,
    /// before any component is compiled).
    pub fn with_credentials(
        config: &AuthConfig,
        credentials: Credentials,
        resource: String,
        scopes: Vec<String>,
    ) -> Result<Self, AuthSetupError> {
        let a = config;
        let verifier = Verifier::new(config, credentials, &resource)?;
        // Dev mode has no authorization server (tokens come from `emseepea
        // token`); advertise the server's own origin. The other modes must
        // list one (`Config::validate`).
        let authorization_servers = if a.authorization_servers.is_empty() {
            vec![origin_of(&resource)]
        } else {
            a.authorization_servers.clone()
        };
        // Every challenge names the metadata URL: bounded so that it fits
        // (`challenge`).
        if resource.len() > crate::limits::MAX_URI_LEN {
            return Err(AuthSetupError::ResourceTooLong);
        }
        let metadata_url = metadata::url_for(&resource);
        Ok(Self {
            verifier,
            cache: TokenCache::new(a.cache_entries, a.cache_max_age_s),
            metadata: metadata::document(&resource, &authorization_servers, &scopes),
            metadata_url,
            resource,
            public_discovery: a.public_discovery || matches!(a.method, AuthMethod::None),
            max_token_bytes: a.max_token_bytes,
        })
    }

    /// Whether tokens are verified at all.
    pub fn enabled(&self) -> bool {
        self.verifier.is_some()
    }

    /// The protected-resource metadata document (RFC 9728), if auth is on.
    pub fn metadata(&self) -> Option<&[u8]> {
        self.enabled().then_some(self.metadata.as_slice())
    }

    /// The caller of a request: `Ok(None)` when no token was presented.
    /// `peer` is the client's address as the transport saw it (`None`:
    /// stdio): outbound lookups are bounded per peer.
    pub async fn authenticate(
        &self,
        headers: &HeaderMap,
        query: Option<&str>,
        peer: Option<std::net::IpAddr>,
    ) -> Result<Option<Arc<Principal>>, AuthError> {
        let Some(verifier) = &self.verifier else {
            return Ok(None);
        };
        // "Access tokens MUST NOT be included in the URI query string."
        if query.is_some_and(has_query_token) {
            return Err(AuthError::QueryToken);
        }
        let Some(value) = headers.get(http::header::AUTHORIZATION) else {
            return Ok(None);
        };
        let value = value.to_str().map_err(|_| AuthError::Malformed)?;
        let (scheme, token) = value.split_once(' ').ok_or(AuthError::Malformed)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(AuthError::Malformed);
        }
        let token = token.trim();
        if token.len() > self.max_token_bytes {
            return Err(AuthError::TooLarge);
        }
        if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(AuthError::Malformed);
        }
        // Read before verifying: a principal verified against keys that were
        // replaced meanwhile is remembered under the old generation, so never
        // returned.
        let generation = verifier.key_generation();
        if let Some(p) = self.cache.get(token, generation) {
            crate::telemetry::metrics().token_cache_hits.inc();
            return Ok(Some(p));
        }
        crate::telemetry::metrics().token_cache_misses.inc();
        match verifier.verify(token, peer).await {
            Ok(v) => {
                let principal = Arc::new(v.principal);
                self.cache
                    .insert(token, principal.clone(), v.expires_at, generation);
                Ok(Some(principal))
            }
            Err(VerifyError::Invalid(reason)) => Err(AuthError::Invalid(reason)),
            Err(VerifyError::Unavailable(reason)) => Err(AuthError::Unavailable(reason)),
        }
    }

    /// `WWW-Authenticate` for a 401 (or, for a query token, a 400).
    pub fn challenge_unauthorized(&self, error: &AuthError, scopes: &[String]) -> String {
        challenge::unauthorized(&self.metadata_url, error, scopes)
    }

    /// `WWW-Authenticate` for a 403: the token lacks `scopes`.
    pub fn challenge_forbidden(&self, scopes: &[String]) -> String {
        challenge::insufficient_scope(&self.metadata_url, scopes)
    }
}

fn has_query_token(query: &str) -> bool {
    query.split('&').any(|pair| {
        let key = pair.split('=').next().unwrap_or("");
        key.eq_ignore_ascii_case("access_token") || key.eq_ignore_ascii_case("token")
    })
}

fn origin_of(url: &str) -> String {
    match url.find("://") {
        Some(i) => match url[i + 3..].find('/') {
            Some(j) => url[..i + 3 + j].to_owned(),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_tokens_are_detected() {
        assert!(has_query_token("access_token=abc"));
        assert!(has_query_token("x=1&ACCESS_TOKEN=abc"));
        assert!(!has_query_token("x=1"));
        assert_eq!(
            origin_of("http://127.0.0.1:8787/mcp"),
            "http://127.0.0.1:8787"
        );
    }
}
