//! Property tests of JWS verification: arbitrary text, JOSE headers and claims (`prop_*`, see crate::fuzz).

use super::*;
use crate::fuzz::{json, nested, object_with, time_is_up};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::EncodingKey;
use proptest::prelude::*;
use serde_json::json;
use std::sync::LazyLock;

const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";
const ISSUER: &str = "https://as.example";
const RESOURCE: &str = "https://r.example/mcp";
const LEEWAY_S: u64 = 30;

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
});

static VERIFIER: LazyLock<JwtVerifier> = LazyLock::new(|| {
    let config: AuthConfig = toml::from_str(&format!("leeway_s = {LEEWAY_S}\n")).unwrap();
    JwtVerifier::hmac(SECRET, ISSUER, RESOURCE, &config)
});

fn verify(token: &str) -> Result<Verified, VerifyError> {
    RUNTIME.block_on(VERIFIER.verify(token))
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// `header.claims.signature` with a correct HS256 signature over
/// whatever header and claims JSON it is given.
fn signed(header: &[u8], claims: &[u8]) -> String {
    let message = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header),
        URL_SAFE_NO_PAD.encode(claims)
    );
    let signature = jsonwebtoken::crypto::sign(
        message.as_bytes(),
        &EncodingKey::from_secret(SECRET).unwrap(),
        Algorithm::HS256,
    )
    .unwrap();
    format!("{message}.{signature}")
}

fn good_claims() -> Map<String, Value> {
    let now = now();
    json!({"iss": ISSUER, "aud": RESOURCE, "exp": now + 600, "nbf": now, "iat": now,
           "sub": "alice", "client_id": "app", "scope": "a b"})
    .as_object()
    .unwrap()
    .clone()
}

fn good_header() -> Vec<u8> {
    br#"{"alg":"HS256","typ":"JWT"}"#.to_vec()
}

#[test]
fn a_well_formed_token_verifies() {
    let claims = serde_json::to_vec(&good_claims()).unwrap();
    let v = verify(&signed(&good_header(), &claims)).unwrap();
    assert_eq!(v.principal.subject.as_deref(), Some("alice"));
    assert_eq!(v.principal.scopes, ["a", "b"]);
}

/// RFC 7519 NumericDates may be fractional; the expiry the cache uses is
/// the one checked (found by prop_signed_claims_of_any_shape: a fractional
/// `exp` verified with an expiry of 0).
#[test]
fn a_fractional_exp_is_a_numeric_date() {
    let mut claims = good_claims();
    let exp = now() + 600;
    claims.insert("exp".into(), json!(exp as f64 + 0.5));
    let v = verify(&signed(
        &good_header(),
        &serde_json::to_vec(&claims).unwrap(),
    ))
    .unwrap();
    assert_eq!(v.expires_at, exp);
}

fn is_invalid(r: &Result<Verified, VerifyError>) -> bool {
    matches!(r, Err(VerifyError::Invalid(_)))
}

proptest! {
    /// Any text at all, shaped like a JWS or not, is an invalid token.
    #[test]
    fn prop_arbitrary_text_is_an_invalid_token(
        token in prop_oneof![
            ".{0,300}",
            "[A-Za-z0-9_-]{0,120}\\.[A-Za-z0-9_-]{0,200}\\.[A-Za-z0-9_-]{0,90}",
            "[A-Za-z0-9_.-]{0,300}",
        ],
    ) {
        if time_is_up() { return Ok(()); }
        let r = verify(&token);
        prop_assert!(is_invalid(&r));
    }

    /// A correctly signed token with an arbitrary JOSE header verifies
    /// only with `alg: HS256` (the key's algorithm) and no `kid`; every
    /// other header is an invalid token.
    #[test]
    fn prop_arbitrary_header_json(
        header in prop_oneof![
            json(3).prop_map(|v| serde_json::to_vec(&v).unwrap()),
            object_with(&["alg", "typ", "kid", "cty", "crit", "jwk", "x5c", "enc", "zip"], 0.5)
                .prop_map(|m| serde_json::to_vec(&m).unwrap()),
            (prop_oneof![Just("HS256"), Just("none"), Just("RS256"), Just("HS512"), Just("hs256"), Just("ES256")],
             proptest::option::of(prop_oneof![Just(json!(null)), Just(json!("k")), Just(json!(1))]))
                .prop_map(|(alg, kid)| {
                    let mut h = json!({"alg": alg});
                    if let Some(kid) = kid { h["kid"] = kid; }
                    serde_json::to_vec(&h).unwrap()
                }),
            proptest::collection::vec(any::<u8>(), 0..64),
            Just(nested(200).into_bytes()),
        ],
    ) {
        if time_is_up() { return Ok(()); }
        let claims = serde_json::to_vec(&good_claims()).unwrap();
        let r = verify(&signed(&header, &claims));
        match &r {
            Ok(_) => {
                let h: Map<String, Value> = serde_json::from_slice(&header).unwrap();
                prop_assert_eq!(h.get("alg"), Some(&json!("HS256")));
                prop_assert!(h.get("kid").is_none_or(Value::is_null));
            }
            r => prop_assert!(is_invalid(r)),
        }
    }

    /// Correctly signed claims of any shape: a principal that keeps
    /// every rule (issuer, audience, expiry, subject, client id), or an
    /// invalid token. Never a panic.
    #[test]
    fn prop_signed_claims_of_any_shape(
        overrides in object_with(&["iss", "aud", "exp", "nbf", "iat", "sub", "client_id", "azp", "scope", "scp"], 0.12),
        removed in proptest::sample::subsequence(vec!["iss", "aud", "exp", "sub", "client_id"], 0..=1),
    ) {
        if time_is_up() { return Ok(()); }
        let mut claims = good_claims();
        for k in removed {
            claims.remove(k);
        }
        claims.extend(overrides);
        let r = verify(&signed(&good_header(), &serde_json::to_vec(&claims).unwrap()));
        match &r {
            Ok(v) => {
                prop_assert_eq!(claims.get("iss"), Some(&json!(ISSUER)));
                let aud_ok = match claims.get("aud") {
                    Some(Value::String(a)) => a == RESOURCE,
                    Some(Value::Array(a)) => a.contains(&json!(RESOURCE)),
                    _ => false,
                };
                prop_assert!(aud_ok, "aud {:?}", claims.get("aud"));
                // A NumericDate, possibly fractional; the cache keeps the whole seconds.
                let exp = claims.get("exp").and_then(|e| {
                    e.as_u64().or_else(|| e.as_f64().filter(|f| *f >= 0.0).map(|f| f.floor() as u64))
                });
                prop_assert!(exp.is_some_and(|e| e + LEEWAY_S + 5 >= now()), "exp {:?}", claims.get("exp"));
                prop_assert_eq!(Some(v.expires_at), exp);
                match claims.get("sub") {
                    None | Some(Value::Null) => prop_assert!(v.principal.subject.is_none()),
                    Some(s) => prop_assert_eq!(v.principal.subject.as_deref(), s.as_str()),
                }
                if let Some(s) = &v.principal.subject {
                    prop_assert!(crate::auth::valid_subject(s));
                }
                prop_assert!(!v.principal.client_id.is_empty());
                prop_assert_eq!(v.principal.audience.as_deref(), Some(RESOURCE));
            }
            r => prop_assert!(is_invalid(r)),
        }
    }

    /// Deeply nested and huge claim values: refused past serde_json's
    /// nesting limit, accepted below it, never a stack overflow.
    #[test]
    fn prop_nested_and_huge_claims(depth in 0usize..3000, huge in 0usize..200_000) {
        if time_is_up() { return Ok(()); }
        let mut text = serde_json::to_string(&good_claims()).unwrap();
        text.pop();
        text.push_str(&format!(r#","deep":{},"huge":"{}"}}"#, nested(depth), "x".repeat(huge)));
        let r = verify(&signed(&good_header(), text.as_bytes()));
        if depth < 100 {
            prop_assert!(r.is_ok());
        } else if depth > 130 {
            prop_assert!(is_invalid(&r));
        }
    }
}
