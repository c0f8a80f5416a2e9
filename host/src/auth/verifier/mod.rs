//! Token verifiers, chosen by `[auth] mode`: `dev` (HS256, a secret in the
//! state directory), `jwt` (JWS with a JWKS) and `introspection` (RFC 7662).
//! Each turns a token into a [`Verified`] principal or refuses it.

pub mod dev;
pub mod introspection;
pub mod jwt;
pub mod lookups;

use super::{AuthSetupError, Principal, valid_subject};
use crate::auth::config::{AuthConfig, AuthMethod, IntrospectionConfig, JwtConfig};
use serde_json::{Map, Value};
use std::path::Path;

#[derive(Clone, Debug)]
pub struct Verified {
    pub principal: Principal,
    /// Unix seconds after which the token is no longer valid.
    pub expires_at: u64,
}

#[derive(Clone, Debug)]
pub enum VerifyError {
    Invalid(String),
    Unavailable(String),
}

/// One per process, made at startup: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub enum Verifier {
    Dev(jwt::JwtVerifier),
    Jwt(jwt::JwtVerifier),
    Introspection(introspection::Introspector),
}

/// The key material a verifier needs, loaded (and checked) before any
/// component is compiled: a bad dev secret or JWKS stops startup at once.
pub enum Credentials {
    None,
    Dev([u8; crate::state::SECRET_LEN]),
    Jwt(std::sync::Arc<jwt::KeyStore>, JwtConfig),
    /// Introspection has nothing to load; its endpoint is asked per token.
    Introspection(IntrospectionConfig),
}

impl Credentials {
    /// `state_dir` holds the dev secret.
    pub async fn load(config: &AuthConfig, state_dir: &Path) -> Result<Self, AuthSetupError> {
        if config.allow_plain_http {
            tracing::warn!(
                "auth.allow_plain_http = true: the JWKS URL and the introspection endpoint may be \
                 plain http to any host; anyone on the path can read bearer tokens and the client \
                 secret, or swap the keys"
            );
        }
        Ok(match &config.method {
            AuthMethod::None => Credentials::None,
            AuthMethod::Dev => Credentials::Dev(dev::load_or_create_secret(state_dir)?),
            AuthMethod::Jwt(jwt) => Credentials::Jwt(jwt::KeyStore::load(jwt).await?, jwt.clone()),
            AuthMethod::Introspection(i) => Credentials::Introspection(i.clone()),
        })
    }
}

impl Verifier {
    /// The verifier for `resource` (the audience); `None` in mode `none`.
    pub fn new(
        config: &AuthConfig,
        credentials: Credentials,
        resource: &str,
    ) -> Result<Option<Self>, AuthSetupError> {
        Ok(Some(match credentials {
            Credentials::None => return Ok(None),
            Credentials::Dev(secret) => Verifier::Dev(jwt::JwtVerifier::hmac(
                &secret,
                dev::ISSUER,
                resource,
                config,
            )),
            Credentials::Jwt(store, jwt) => {
                Verifier::Jwt(jwt::JwtVerifier::from_config(store, &jwt, config, resource))
            }
            Credentials::Introspection(i) => {
                Verifier::Introspection(introspection::Introspector::new(&i, config, resource)?)
            }
        }))
    }

    /// `peer`: the address the token came from (`None`: stdio), for the
    /// per-peer bounds on outbound lookups.
    pub async fn verify(
        &self,
        token: &str,
        peer: Option<std::net::IpAddr>,
    ) -> Result<Verified, VerifyError> {
        match self {
            Verifier::Dev(v) | Verifier::Jwt(v) => v.verify(token).await,
            Verifier::Introspection(v) => v.verify(token, peer).await,
        }
    }

    /// Changes whenever the keys tokens are checked against change.
    pub fn key_generation(&self) -> u64 {
        match self {
            Verifier::Dev(v) | Verifier::Jwt(v) => v.key_generation(),
            Verifier::Introspection(_) => 0,
        }
    }
}

/// An RFC 7519 NumericDate (`exp`) in whole seconds: integers as they are,
/// fractions rounded down, negative numbers as 0 (long past); `None` for
/// anything that is not a number.
pub fn numeric_date(v: &Value) -> Option<u64> {
    v.as_u64()
        .or_else(|| v.as_f64().map(|f| f.max(0.0).floor() as u64))
}

/// Build the principal from verified claims: nothing but subject, client id,
/// scopes and the audience the token was validated for. The scopes are the
/// union of `scope_claims` (`[auth] scope_claims`; each a space-separated
/// string or an array of strings).
pub fn principal_from_claims(
    claims: &Map<String, Value>,
    subject_claim: &str,
    scope_claims: &[String],
    audience: &str,
) -> Result<Principal, VerifyError> {
    let subject = match claims.get(subject_claim) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if valid_subject(s) => Some(s.clone()),
        // "The verifier must validate the token and its subject before returning them."
        Some(_) => {
            return Err(VerifyError::Invalid(format!(
                "claim {subject_claim:?} is not a valid subject"
            )));
        }
    };
    let client_id = ["client_id", "azp", "cid"]
        .iter()
        .find_map(|k| claims.get(*k).and_then(Value::as_str))
        .filter(|c| !c.is_empty() && c.len() <= 1024)
        .ok_or_else(|| VerifyError::Invalid("no client_id (or azp) claim".into()))?
        .to_owned();
    let mut scopes: Vec<String> = Vec::new();
    for name in scope_claims {
        match claims.get(name) {
            Some(Value::String(s)) => {
                scopes.extend(s.split(' ').filter(|s| !s.is_empty()).map(String::from))
            }
            Some(Value::Array(a)) => {
                for v in a {
                    scopes.push(
                        v.as_str()
                            .ok_or_else(|| {
                                VerifyError::Invalid(format!("claim {name:?} has a non-string"))
                            })?
                            .to_owned(),
                    );
                }
            }
            Some(Value::Null) | None => {}
            Some(_) => {
                return Err(VerifyError::Invalid(format!(
                    "claim {name:?} is neither a string nor an array"
                )));
            }
        }
    }
    Ok(Principal::new(
        subject,
        client_id,
        scopes,
        Some(audience.to_owned()),
    ))
}

/// What a token's `aud` may name: this server's resource URL, and the
/// operator's `[auth] accepted_audiences`.
fn accepted_audiences(resource: &str, config: &AuthConfig) -> Vec<String> {
    let mut all = vec![resource.to_owned()];
    all.extend(config.accepted_audiences.iter().cloned());
    all
}

/// Whether a token's `aud` (a string or an array) names one of `accepted`.
pub fn audience_matches(aud: Option<&Value>, accepted: &[String]) -> bool {
    match aud {
        Some(Value::String(a)) => accepted.contains(a),
        Some(Value::Array(a)) => a
            .iter()
            .any(|v| v.as_str().is_some_and(|v| accepted.iter().any(|x| x == v))),
        _ => false,
    }
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claims(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn default_scope_claims() -> Vec<String> {
        vec!["scope".into(), "scp".into()]
    }

    /// Providers that put permissions elsewhere: `roles` (Entra ID app
    /// roles), `permissions` (Auth0 RBAC), united with `scp`.
    #[test]
    fn scopes_come_from_the_configured_claims() {
        let c = claims(json!({"sub":"a","client_id":"c","scope":"s1","scp":"s2",
            "roles":["r1","r2"],"permissions":"p1 p2"}));
        let scopes = |names: &[&str]| {
            let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
            principal_from_claims(&c, "sub", &names, "r").map(|p| p.scopes)
        };
        assert_eq!(scopes(&["scope", "scp"]).unwrap(), vec!["s1", "s2"]);
        assert_eq!(scopes(&["roles"]).unwrap(), vec!["r1", "r2"]);
        assert_eq!(
            scopes(&["scp", "permissions"]).unwrap(),
            vec!["p1", "p2", "s2"]
        );
        let bad = claims(json!({"client_id":"c","roles":[1]}));
        assert!(principal_from_claims(&bad, "sub", &["roles".into()], "r").is_err());
        let bad = claims(json!({"client_id":"c","roles":{"a":1}}));
        assert!(principal_from_claims(&bad, "sub", &["roles".into()], "r").is_err());
    }

    #[test]
    fn audiences_match_a_string_or_an_array() {
        let ok = ["https://r/mcp".to_string(), "api://r".to_string()];
        assert!(audience_matches(Some(&json!("api://r")), &ok));
        assert!(audience_matches(Some(&json!(["x", "https://r/mcp"])), &ok));
        assert!(!audience_matches(Some(&json!("api://other")), &ok));
        assert!(!audience_matches(Some(&json!([1, "y"])), &ok));
        assert!(!audience_matches(None, &ok));
    }

    #[test]
    fn principal_holds_only_the_four_fields() {
        let p = principal_from_claims(
            &claims(json!({"sub":"alice","client_id":"app","scope":"b a","email":"x@y","aud":"r"})),
            "sub",
            &default_scope_claims(),
            "r",
        )
        .unwrap();
        assert_eq!(
            p,
            Principal::new(
                Some("alice".into()),
                "app".into(),
                vec!["a".into(), "b".into()],
                Some("r".into())
            )
        );
    }

    #[test]
    fn subject_is_validated() {
        for bad in [
            json!(""),
            json!("a".repeat(257)),
            json!("a\u{1}b"),
            json!(5),
        ] {
            assert!(
                principal_from_claims(
                    &claims(json!({"sub":bad,"client_id":"c"})),
                    "sub",
                    &default_scope_claims(),
                    "r"
                )
                .is_err()
            );
        }
        assert!(
            principal_from_claims(
                &claims(json!({"client_id":"c"})),
                "sub",
                &default_scope_claims(),
                "r"
            )
            .unwrap()
            .subject
            .is_none()
        );
        let p = principal_from_claims(
            &claims(json!({"uid":"u1","azp":"c","scp":["x"]})),
            "uid",
            &default_scope_claims(),
            "r",
        )
        .unwrap();
        assert_eq!(
            (p.subject.as_deref(), p.client_id.as_str(), p.scopes.len()),
            (Some("u1"), "c", 1)
        );
        assert!(
            principal_from_claims(
                &claims(json!({"sub":"a"})),
                "sub",
                &default_scope_claims(),
                "r"
            )
            .is_err(),
            "client id required"
        );
    }
}
