//! RFC 7662 token introspection against a configured endpoint, with client
//! credentials (HTTP Basic). Active tokens are cached until their `exp` by
//! the shared token cache; the audience must name this server. Lookups are
//! bounded by `lookups.rs`: one in flight per token, inactive tokens
//! remembered briefly, a cap on concurrent calls.

use super::lookups::Lookups;
use super::{Verified, VerifyError, numeric_date, principal_from_claims};
use crate::auth::AuthSetupError;
use crate::auth::config::{AuthConfig, IntrospectionConfig, MAX_INTROSPECTION_RESPONSE_BYTES};
use crate::secret::Secret;
use serde_json::{Map, Value};
use std::net::IpAddr;
use std::time::Duration;

/// Tokens without `exp` are re-introspected after this long.
const DEFAULT_CACHE_S: u64 = 60;

pub struct Introspector {
    endpoint: String,
    client_id: String,
    client_secret: Secret,
    timeout: Duration,
    issuer: Option<String>,
    audience: String,
    /// The audience and `[auth] accepted_audiences`: what `aud` may name.
    audiences: Vec<String>,
    subject_claim: String,
    scope_claims: Vec<String>,
    client: reqwest::Client,
    lookups: Lookups,
}

impl Introspector {
    pub fn new(
        c: &IntrospectionConfig,
        config: &AuthConfig,
        resource: &str,
    ) -> Result<Self, AuthSetupError> {
        Ok(Self {
            endpoint: c.endpoint.clone(),
            client_id: c.client_id.clone(),
            // `Config::load` reads it from whichever form was given.
            client_secret: c
                .client_secret
                .clone()
                .ok_or(AuthSetupError::ClientSecretNotLoaded)?,
            timeout: Duration::from_millis(c.timeout_ms),
            issuer: c.issuer.clone(),
            audience: resource.to_owned(),
            audiences: super::accepted_audiences(resource, config),
            subject_claim: config.subject_claim.clone(),
            scope_claims: config.scope_claims.clone(),
            client: crate::http_client::client().map_err(AuthSetupError::IntrospectionClient)?,
            lookups: Lookups::new(
                c.max_concurrent,
                Duration::from_secs(c.negative_cache_s),
                c.negative_cache_entries,
                Duration::from_millis(c.timeout_ms),
            )
            .with_per_peer(c.max_concurrent_per_peer),
        })
    }

    /// `peer`: who presented it (`None`: the stdio client), whose share of
    /// the lookups it takes (`lookups.rs`).
    pub async fn verify(&self, token: &str, peer: Option<IpAddr>) -> Result<Verified, VerifyError> {
        self.lookups
            .verify(token, peer, || self.introspect(token))
            .await
    }

    async fn introspect(&self, token: &str) -> Result<Verified, VerifyError> {
        let resp = self
            .client
            .post(&self.endpoint)
            .basic_auth(&self.client_id, Some(self.client_secret.expose()))
            .form(&[("token", token), ("token_type_hint", "access_token")])
            .timeout(self.timeout)
            .send()
            .await
            .map_err(|e| VerifyError::Unavailable(format!("introspection: {e}")))?;
        if !resp.status().is_success() {
            return Err(VerifyError::Unavailable(format!(
                "introspection answered {}",
                resp.status()
            )));
        }
        let body = crate::http_client::read_capped(resp, MAX_INTROSPECTION_RESPONSE_BYTES)
            .await
            .map_err(|e| VerifyError::Unavailable(format!("introspection response: {e}")))?;
        let claims: Map<String, Value> = serde_json::from_slice(&body)
            .map_err(|e| VerifyError::Unavailable(format!("introspection response: {e}")))?;
        if claims.get("active") != Some(&Value::Bool(true)) {
            return Err(VerifyError::Invalid("inactive token".into()));
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let exp = claims.get("exp").and_then(numeric_date);
        if exp.is_some_and(|e| e <= now) {
            return Err(VerifyError::Invalid("expired".into()));
        }
        if let Some(iss) = &self.issuer
            && claims.get("iss").and_then(Value::as_str) != Some(iss)
        {
            return Err(VerifyError::Invalid("wrong issuer".into()));
        }
        if !super::audience_matches(claims.get("aud"), &self.audiences) {
            return Err(VerifyError::Invalid(
                "audience does not name this server".into(),
            ));
        }
        let principal = principal_from_claims(
            &claims,
            &self.subject_claim,
            &self.scope_claims,
            &self.audience,
        )?;
        Ok(Verified {
            principal,
            expires_at: exp.unwrap_or(now + DEFAULT_CACHE_S).min(now + 3600),
        })
    }
}

#[cfg(test)]
mod props;
