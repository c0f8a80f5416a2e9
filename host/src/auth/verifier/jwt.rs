//! JWS access tokens (RFC 9068) verified against a JWKS from a file or URL.
//!
//! - RS256, ES256 and EdDSA keys; the token's `alg` must be the key's
//!   algorithm (no `none`, no HS/RS confusion: an HMAC token never meets an
//!   HMAC key here, and the verifier never accepts an algorithm of another
//!   family than the key's).
//! - `iss` and `aud` (this server's resource URL, RFC 8707) are checked, and
//!   `exp`/`nbf` with a configured leeway; optionally the `typ` header.
//! - A URL-based JWKS is refetched every configured interval and on an
//!   unknown `kid` (at most once per interval), with a timeout; when the key
//!   set changes, its generation changes and remembered tokens are dropped.

use super::{Verified, VerifyError, numeric_date, principal_from_claims};
use crate::auth::config::{AuthConfig, JwksSource, JwtConfig};
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

struct Key {
    algorithm: Algorithm,
    key: DecodingKey,
}

pub struct JwtVerifier {
    store: Arc<KeyStore>,
    issuer: String,
    audience: String,
    /// The audience and `[auth] accepted_audiences`: what `aud` may name.
    audiences: Vec<String>,
    subject_claim: String,
    scope_claims: Vec<String>,
    leeway: u64,
    required_typ: Option<String>,
}

/// The verification keys in force, with a fingerprint of the set so a
/// refresh can tell whether anything changed.
struct KeySet {
    keys: HashMap<Option<String>, Key>,
    fingerprint: [u8; 32],
}

/// The keys and, for a JWKS URL, how they are kept current: refetched every
/// interval by a background task and on an unknown `kid` (at most once per
/// interval). Loaded before any component is compiled, so a bad JWKS stops
/// startup at once.
pub struct KeyStore {
    keys: RwLock<Arc<KeySet>>,
    /// Bumped whenever the key set changes: remembered principals of an
    /// older generation are dropped (`auth::cache`).
    generation: AtomicU64,
    refresh: Option<Refresh>,
}

struct Refresh {
    url: String,
    interval: Duration,
    timeout: Duration,
    /// When the JWKS was last fetched for an unknown `kid`; `None` until
    /// the first such fetch, so a key published just after startup is found.
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

/// Why a JWKS could not be loaded at startup.
#[derive(Debug, thiserror::Error)]
pub enum JwksError {
    #[error("{}: {source}", path.display())]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {problem}", path.display())]
    FileInvalid {
        path: std::path::PathBuf,
        problem: JwksProblem,
    },
    #[error("fetching the JWKS from {url}: {source}")]
    Fetch {
        url: String,
        source: crate::http_client::FetchError,
    },
    #[error("the JWKS at {url}: {problem}")]
    UrlInvalid { url: String, problem: JwksProblem },
    #[error("building the HTTP client: {0}")]
    Client(reqwest::Error),
}

/// What is wrong with a JWKS document.
#[derive(Debug, thiserror::Error)]
pub enum JwksProblem {
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("{0}")]
    Key(#[from] jsonwebtoken::errors::Error),
    #[error("the JWKS has no RS256, ES256 or EdDSA signing key")]
    NoSigningKey,
}

fn parse_jwks(text: &[u8]) -> Result<KeySet, JwksProblem> {
    let set: JwkSet = serde_json::from_slice(text)?;
    let mut keys = HashMap::new();
    let mut described: Vec<String> = Vec::new();
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
        described.push(serde_json::to_string(jwk)?);
        keys.insert(jwk.common.key_id.clone(), Key { algorithm, key });
    }
    if keys.is_empty() {
        return Err(JwksProblem::NoSigningKey);
    }
    // Order-independent: a reordered but equal JWKS is no change.
    described.sort();
    let mut h = Sha256::new();
    for d in &described {
        h.update((d.len() as u64).to_be_bytes());
        h.update(d.as_bytes());
    }
    Ok(KeySet {
        keys,
        fingerprint: h.finalize().into(),
    })
}

/// The JWKS at `url`, at most `MAX_JWKS_BYTES` (the timeout covers the body).
async fn fetch(
    client: &reqwest::Client,
    url: &str,
    timeout: Duration,
) -> Result<Vec<u8>, crate::http_client::FetchError> {
    let resp = client
        .get(url)
        .timeout(timeout)
        .send()
        .await?
        .error_for_status()?;
    crate::http_client::read_capped(resp, crate::auth::config::MAX_JWKS_BYTES).await
}

impl KeyStore {
    /// Read the JWKS file or fetch the JWKS URL (and start its refresh task).
    pub async fn load(jwt: &JwtConfig) -> Result<Arc<Self>, JwksError> {
        let url = match &jwt.jwks {
            JwksSource::Url(url) => url.clone(),
            JwksSource::File(file) => {
                let text = std::fs::read(file).map_err(|source| JwksError::Read {
                    path: file.clone(),
                    source,
                })?;
                let keys = parse_jwks(&text).map_err(|problem| JwksError::FileInvalid {
                    path: file.clone(),
                    problem,
                })?;
                return Ok(Arc::new(Self::fixed(keys)));
            }
        };
        let client = crate::http_client::client().map_err(JwksError::Client)?;
        let timeout = Duration::from_millis(jwt.jwks_timeout_ms);
        let text = match fetch(&client, &url, timeout).await {
            Ok(text) => text,
            Err(source) => return Err(JwksError::Fetch { url, source }),
        };
        let keys = match parse_jwks(&text) {
            Ok(keys) => keys,
            Err(problem) => return Err(JwksError::UrlInvalid { url, problem }),
        };
        let interval = Duration::from_secs(jwt.jwks_refresh_interval_s);
        let store = Arc::new(Self {
            keys: RwLock::new(Arc::new(keys)),
            generation: AtomicU64::new(0),
            refresh: Some(Refresh {
                url,
                interval,
                timeout,
                last: tokio::sync::Mutex::new(None),
                client,
            }),
        });
        spawn_schedule(Arc::downgrade(&store), interval);
        Ok(store)
    }

    fn fixed(keys: KeySet) -> Self {
        Self {
            keys: RwLock::new(Arc::new(keys)),
            generation: AtomicU64::new(0),
            refresh: None,
        }
    }

    /// Changes whenever the key set does.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn current(&self) -> Arc<KeySet> {
        self.keys.read().unwrap().clone()
    }

    /// Refetch for an unknown `kid`, at most once per interval.
    async fn refresh_for_unknown_kid(&self) -> Result<(), VerifyError> {
        let Some(r) = &self.refresh else {
            return Ok(());
        };
        let mut last = r.last.lock().await;
        if last.is_some_and(|t| t.elapsed() < r.interval) {
            return Ok(());
        }
        *last = Some(Instant::now());
        self.refetch(r).await
    }

    /// Fetch the JWKS and install it if it differs from the keys in force.
    async fn refetch(&self, r: &Refresh) -> Result<(), VerifyError> {
        let text = fetch(&r.client, &r.url, r.timeout)
            .await
            .map_err(|e| VerifyError::Unavailable(format!("JWKS refresh: {e}")))?;
        let keys = parse_jwks(&text)
            .map_err(|e| VerifyError::Unavailable(format!("JWKS refresh: {e}")))?;
        let mut current = self.keys.write().unwrap();
        if current.fingerprint != keys.fingerprint {
            let count = keys.keys.len();
            *current = Arc::new(keys);
            self.generation.fetch_add(1, Ordering::AcqRel);
            tracing::info!(url = %r.url, keys = count, "JWKS changed: remembered tokens are re-verified");
        } else {
            tracing::debug!(url = %r.url, "JWKS refreshed, unchanged");
        }
        Ok(())
    }
}

/// Refetch the JWKS every `interval` for as long as its store lives, so a
/// key removed at the authorization server stops verifying within one
/// interval. A failed fetch keeps the keys in force (logged).
fn spawn_schedule(store: std::sync::Weak<KeyStore>, interval: Duration) {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let Some(store) = store.upgrade() else {
                return;
            };
            let Some(r) = &store.refresh else {
                return;
            };
            if let Err(VerifyError::Unavailable(e) | VerifyError::Invalid(e)) =
                store.refetch(r).await
            {
                // The reason quotes the authorization server's answer.
                let e = crate::guest_text::GuestText::new(&e);
                tracing::warn!(url = %r.url, error = ?e, "scheduled JWKS refresh failed; keeping the keys in force");
            }
        }
    });
}

impl JwtVerifier {
    pub fn new(
        store: Arc<KeyStore>,
        issuer: String,
        resource: &str,
        config: &AuthConfig,
        required_typ: Option<String>,
    ) -> Self {
        Self {
            store,
            issuer,
            audience: resource.to_owned(),
            audiences: super::accepted_audiences(resource, config),
            subject_claim: config.subject_claim.clone(),
            scope_claims: config.scope_claims.clone(),
            leeway: config.leeway_s,
            required_typ,
        }
    }

    /// The verifier of `[auth.jwt]` over keys loaded by [`KeyStore::load`].
    pub fn from_config(
        store: Arc<KeyStore>,
        jwt: &JwtConfig,
        config: &AuthConfig,
        resource: &str,
    ) -> Self {
        Self::new(
            store,
            jwt.issuer.clone(),
            resource,
            config,
            jwt.required_typ.clone(),
        )
    }

    /// A verifier with one HMAC key (dev mode).
    pub fn hmac(secret: &[u8], issuer: &str, resource: &str, config: &AuthConfig) -> Self {
        let mut keys = HashMap::new();
        keys.insert(
            None,
            Key {
                algorithm: Algorithm::HS256,
                key: DecodingKey::from_secret(secret).expect("hmac key"),
            },
        );
        let store = KeyStore::fixed(KeySet {
            keys,
            fingerprint: [0; 32],
        });
        Self::new(Arc::new(store), issuer.to_owned(), resource, config, None)
    }

    /// Changes whenever the key set does (see [`KeyStore::generation`]).
    pub fn key_generation(&self) -> u64 {
        self.store.generation()
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
        if !has_key(&self.store.current(), header.kid.as_deref()) {
            self.store.refresh_for_unknown_kid().await?;
        }
        let set = self.store.current();
        let keys = &set.keys;
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
        validation.set_audience(&self.audiences);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation)
            .map_err(|e| VerifyError::Invalid(format!("{e}")))?;
        let expires_at = data.claims.get("exp").and_then(numeric_date).unwrap_or(0);
        let principal = principal_from_claims(
            &data.claims,
            &self.subject_claim,
            &self.scope_claims,
            &self.audience,
        )?;
        Ok(Verified {
            principal,
            expires_at,
        })
    }
}

fn has_key(set: &KeySet, kid: Option<&str>) -> bool {
    match kid {
        Some(k) => set.keys.contains_key(&Some(k.to_owned())),
        None => set.keys.len() == 1 || set.keys.contains_key(&None),
    }
}

#[cfg(test)]
mod props;
