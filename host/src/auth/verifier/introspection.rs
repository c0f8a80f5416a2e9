//! RFC 7662 token introspection against a configured endpoint, with client
//! credentials (HTTP Basic). Active tokens are cached until their `exp` by
//! the shared token cache; the audience must name this server. Lookups are
//! bounded by `lookups.rs`: one in flight per token, inactive tokens
//! remembered briefly, a cap on concurrent calls.

use super::lookups::Lookups;
use super::{Verified, VerifyError, numeric_date, principal_from_claims};
use crate::config::{Config, IntrospectionConfig};
use serde_json::{Map, Value};
use std::time::Duration;

/// Tokens without `exp` are re-introspected after this long.
const DEFAULT_CACHE_S: u64 = 60;

pub struct Introspector {
    endpoint: String,
    client_id: String,
    client_secret: String,
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
        config: &Config,
        resource: &str,
    ) -> Result<Self, reqwest::Error> {
        Ok(Self {
            endpoint: c.endpoint.clone(),
            client_id: c.client_id.clone(),
            client_secret: c.client_secret.clone(),
            timeout: Duration::from_millis(c.timeout_ms),
            issuer: c.issuer.clone(),
            audience: resource.to_owned(),
            audiences: super::accepted_audiences(resource, config),
            subject_claim: config.auth.subject_claim.clone(),
            scope_claims: config.auth.scope_claims.clone(),
            client: crate::http_client::client()?,
            lookups: Lookups::new(
                c.max_concurrent,
                Duration::from_secs(c.negative_cache_s),
                c.negative_cache_entries,
                Duration::from_millis(c.timeout_ms),
            ),
        })
    }

    pub async fn verify(&self, token: &str) -> Result<Verified, VerifyError> {
        self.lookups.verify(token, || self.introspect(token)).await
    }

    async fn introspect(&self, token: &str) -> Result<Verified, VerifyError> {
        let resp = self
            .client
            .post(&self.endpoint)
            .basic_auth(&self.client_id, Some(&self.client_secret))
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
        let claims: Map<String, Value> = resp
            .json()
            .await
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
