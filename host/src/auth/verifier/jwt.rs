//! JWS access tokens (RFC 9068) verified against a JWKS from a file or URL.
//!
//! - RS256, ES256 and EdDSA keys; the token's `alg` must be the key's
//!   algorithm (no `none`, no HS/RS confusion: an HMAC token never meets an
//!   HMAC key here, and the verifier never accepts an algorithm of another
//!   family than the key's).
//! - `iss` and `aud` (this server's resource URL, RFC 8707) are checked, and
//!   `exp`/`nbf` with a configured leeway; optionally the `typ` header.
//! - An unknown `kid` refreshes a URL-based JWKS at most once per configured
//!   interval, with a timeout.

use super::{Verified, VerifyError, numeric_date, principal_from_claims};
use crate::config::Config;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::RwLock;
use std::time::{Duration, Instant};

struct Key {
    algorithm: Algorithm,
    key: DecodingKey,
}

pub struct JwtVerifier {
    keys: RwLock<HashMap<Option<String>, Key>>,
    issuer: String,
    audience: String,
    subject_claim: String,
    leeway: u64,
    required_typ: Option<String>,
    refresh: Option<Refresh>,
}

struct Refresh {
    url: String,
    interval: Duration,
    timeout: Duration,
    last: tokio::sync::Mutex<Option<Instant>>,
    client: reqwest::Client,
}

/// The key's algorithm: its `alg` when given, else the one its type implies.
fn key_algorithm(jwk: &jsonwebtoken::jwk::Jwk) -> Option<Algorithm> {
    let implied = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => {
            Algorithm::ES256
        }
        AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
            Algorithm::EdDSA
        }
        // Symmetric keys in a JWKS would let anyone holding the JWKS mint tokens.
        _ => return None,
    };
    match jwk.common.key_algorithm {
        None => Some(implied),
        Some(a) => {
            use jsonwebtoken::jwk::KeyAlgorithm as K;
            let given = match a {
                K::RS256 => Algorithm::RS256,
                K::ES256 => Algorithm::ES256,
                K::EdDSA => Algorithm::EdDSA,
                _ => return None,
            };
            (given == implied).then_some(given)
        }
    }
}

fn parse_jwks(text: &str) -> anyhow::Result<HashMap<Option<String>, Key>> {
    let set: JwkSet = serde_json::from_str(text)?;
    let mut keys = HashMap::new();
    for jwk in &set.keys {
        if jwk
            .common
            .public_key_use
            .as_ref()
            .is_some_and(|u| !matches!(u, jsonwebtoken::jwk::PublicKeyUse::Signature))
        {
            continue;
        }
        let Some(algorithm) = key_algorithm(jwk) else {
            continue;
        };
        let key = DecodingKey::from_jwk(jwk)?;
        keys.insert(jwk.common.key_id.clone(), Key { algorithm, key });
    }
    if keys.is_empty() {
        anyhow::bail!("the JWKS has no RS256, ES256 or EdDSA signing key");
    }
    Ok(keys)
}

async fn fetch(client: &reqwest::Client, url: &str, timeout: Duration) -> anyhow::Result<String> {
    let resp = client
        .get(url)
        .timeout(timeout)
        .send()
        .await?
        .error_for_status()?;
    Ok(resp.text().await?)
}

impl JwtVerifier {
    pub async fn from_config(config: &Config, resource: &str) -> anyhow::Result<Self> {
        let jwt = config.auth.jwt.as_ref().expect("validated");
        let (keys, refresh) = if let Some(file) = &jwt.jwks_file {
            let text = std::fs::read_to_string(file)
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            (
                parse_jwks(&text).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?,
                None,
            )
        } else {
            let url = jwt.jwks_url.clone().expect("validated");
            let client = crate::http_client::client()?;
            let timeout = Duration::from_millis(jwt.jwks_timeout_ms);
            let text = fetch(&client, &url, timeout)
                .await
                .map_err(|e| anyhow::anyhow!("fetching the JWKS from {url}: {e}"))?;
            let keys = parse_jwks(&text).map_err(|e| anyhow::anyhow!("the JWKS at {url}: {e}"))?;
            let refresh = Refresh {
                url,
                interval: Duration::from_secs(jwt.jwks_refresh_interval_s),
                timeout,
                last: tokio::sync::Mutex::new(Some(Instant::now())),
                client,
            };
            (keys, Some(refresh))
        };
        Ok(Self::new(
            keys,
            jwt.issuer.clone(),
            resource,
            config,
            jwt.required_typ.clone(),
            refresh,
        ))
    }

    fn new(
        keys: HashMap<Option<String>, Key>,
        issuer: String,
        resource: &str,
        config: &Config,
        required_typ: Option<String>,
        refresh: Option<Refresh>,
    ) -> Self {
        Self {
            keys: RwLock::new(keys),
            issuer,
            audience: resource.to_owned(),
            subject_claim: config.auth.subject_claim.clone(),
            leeway: config.auth.leeway_s,
            required_typ,
            refresh,
        }
    }

    /// A verifier with one HMAC key (dev mode).
    pub fn hmac(secret: &[u8], issuer: &str, resource: &str, config: &Config) -> Self {
        let mut keys = HashMap::new();
        keys.insert(
            None,
            Key {
                algorithm: Algorithm::HS256,
                key: DecodingKey::from_secret(secret).expect("hmac key"),
            },
        );
        Self::new(keys, issuer.to_owned(), resource, config, None, None)
    }

    pub async fn verify(&self, token: &str) -> Result<Verified, VerifyError> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| VerifyError::Invalid(format!("header: {e}")))?;
        if let Some(required) = &self.required_typ {
            let typ = header.typ.as_deref().unwrap_or("");
            let typ = typ.strip_prefix("application/").unwrap_or(typ);
            if !typ.eq_ignore_ascii_case(required) {
                return Err(VerifyError::Invalid(format!(
                    "typ {typ:?} is not {required:?}"
                )));
            }
        }
        if !self.has_key(header.kid.as_deref()) {
            self.refresh_keys().await?;
        }
        let keys = self.keys.read().unwrap();
        let key = match (keys.get(&header.kid), header.kid.as_ref()) {
            (Some(k), _) => k,
            // A token without `kid` may use the only key there is.
            (None, None) if keys.len() == 1 => keys.values().next().unwrap(),
            _ => {
                return Err(VerifyError::Invalid(format!(
                    "unknown kid {:?}",
                    header.kid
                )));
            }
        };
        if header.alg != key.algorithm {
            return Err(VerifyError::Invalid(format!(
                "alg {:?} does not match the key's {:?}",
                header.alg, key.algorithm
            )));
        }
        let mut validation = Validation::new(key.algorithm);
        validation.leeway = self.leeway;
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation)
            .map_err(|e| VerifyError::Invalid(format!("{e}")))?;
        let expires_at = data.claims.get("exp").and_then(numeric_date).unwrap_or(0);
        let principal = principal_from_claims(&data.claims, &self.subject_claim, &self.audience)?;
        Ok(Verified {
            principal,
            expires_at,
        })
    }

    fn has_key(&self, kid: Option<&str>) -> bool {
        let keys = self.keys.read().unwrap();
        match kid {
            Some(k) => keys.contains_key(&Some(k.to_owned())),
            None => keys.len() == 1 || keys.contains_key(&None),
        }
    }

    /// Refetch the JWKS, at most once per interval.
    async fn refresh_keys(&self) -> Result<(), VerifyError> {
        let Some(r) = &self.refresh else {
            return Ok(());
        };
        let mut last = r.last.lock().await;
        if last.is_some_and(|t| t.elapsed() < r.interval) {
            return Ok(());
        }
        *last = Some(Instant::now());
        let text = fetch(&r.client, &r.url, r.timeout)
            .await
            .map_err(|e| VerifyError::Unavailable(format!("JWKS refresh: {e}")))?;
        match parse_jwks(&text) {
            Ok(keys) => {
                *self.keys.write().unwrap() = keys;
                tracing::info!(url = %r.url, "JWKS refreshed");
                Ok(())
            }
            Err(e) => Err(VerifyError::Unavailable(format!("JWKS refresh: {e}"))),
        }
    }
}

#[cfg(test)]
mod props;
