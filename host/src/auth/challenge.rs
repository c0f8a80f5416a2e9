//! `WWW-Authenticate` challenges (RFC 6750 §3, RFC 9728 §5.1).
//!
//! Every challenge stays under `MAX_CHALLENGE_BYTES`: startup bounds the
//! scopes (per template, and all sources' together) and the resource URL so
//! that the largest allowed one fits (a test computes it); a challenge that
//! would still be longer leaves out its optional `scope` (the metadata
//! document lists them).

use super::AuthError;
use crate::limits::MAX_CHALLENGE_BYTES;

fn quoted(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// 401: no token, or a bad one (`error="invalid_token"`); 400 for a query token.
pub fn unauthorized(metadata_url: &str, error: &AuthError, scopes: &[String]) -> String {
    let challenge = unauthorized_with(metadata_url, error, scopes);
    if challenge.len() < MAX_CHALLENGE_BYTES {
        return challenge;
    }
    unauthorized_with(metadata_url, error, &[])
}

fn unauthorized_with(metadata_url: &str, error: &AuthError, scopes: &[String]) -> String {
    let mut out = String::from("Bearer");
    let mut params: Vec<String> = Vec::new();
    match error {
        AuthError::Missing => {}
        AuthError::QueryToken | AuthError::Malformed => {
            params.push("error=\"invalid_request\"".into());
            params.push(format!(
                "error_description=\"{}\"",
                if matches!(error, AuthError::QueryToken) {
                    "Access tokens are accepted only in the Authorization header"
                } else {
                    "Malformed Authorization header"
                }
            ));
        }
        AuthError::TooLarge | AuthError::Invalid(_) => {
            params.push("error=\"invalid_token\"".into());
            params.push("error_description=\"The access token is invalid or expired\"".into());
        }
        AuthError::Unavailable(_) => {
            params.push("error=\"invalid_token\"".into());
            params.push("error_description=\"The access token could not be verified\"".into());
        }
    }
    params.push(format!("resource_metadata=\"{}\"", quoted(metadata_url)));
    if !scopes.is_empty() {
        params.push(format!("scope=\"{}\"", quoted(&scopes.join(" "))));
    }
    out.push(' ');
    out.push_str(&params.join(", "));
    out
}

/// 403: the token is valid but lacks `scopes`.
pub fn insufficient_scope(metadata_url: &str, scopes: &[String]) -> String {
    let challenge = insufficient_scope_with(metadata_url, Some(scopes));
    if challenge.len() < MAX_CHALLENGE_BYTES {
        return challenge;
    }
    insufficient_scope_with(metadata_url, None)
}

fn insufficient_scope_with(metadata_url: &str, scopes: Option<&[String]>) -> String {
    let scope = scopes.map_or(String::new(), |s| {
        format!(" scope=\"{}\",", quoted(&s.join(" ")))
    });
    format!(
        "Bearer error=\"insufficient_scope\",{scope} resource_metadata=\"{}\", error_description=\"The access token lacks a required scope\"",
        quoted(metadata_url)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::{MAX_CHALLENGE_SCOPES_BYTES, MAX_SCOPE_LEN, MAX_URI_LEN};

    /// Scopes of `MAX_SCOPE_LEN` characters whose joined length is exactly
    /// `MAX_CHALLENGE_SCOPES_BYTES`: the most startup allows.
    fn the_most_scopes_allowed() -> Vec<String> {
        let mut scopes: Vec<String> = Vec::new();
        let mut joined = 0;
        while joined < MAX_CHALLENGE_SCOPES_BYTES {
            let sep = usize::from(!scopes.is_empty());
            let room = MAX_CHALLENGE_SCOPES_BYTES - joined - sep;
            let prefix = format!("s{}:", scopes.len());
            let len = room.min(MAX_SCOPE_LEN).max(prefix.len());
            scopes.push(format!("{prefix}{}", "x".repeat(len - prefix.len())));
            joined += sep + len;
        }
        assert_eq!(scopes.join(" ").len(), MAX_CHALLENGE_SCOPES_BYTES);
        scopes
    }

    fn every_error() -> Vec<AuthError> {
        vec![
            AuthError::Missing,
            AuthError::QueryToken,
            AuthError::Malformed,
            AuthError::TooLarge,
            AuthError::Invalid("x".repeat(100_000)),
            AuthError::Unavailable("x".repeat(100_000)),
        ]
    }

    /// The worst case startup allows: the longest resource URL, made of
    /// characters that all need quoting, and the most scope bytes.
    #[test]
    fn the_largest_allowed_challenge_is_under_8_kib() {
        let resource = format!("http://h/{}", "\"".repeat(MAX_URI_LEN - 9));
        assert_eq!(resource.len(), MAX_URI_LEN);
        let metadata = super::super::metadata::url_for(&resource);
        let scopes = the_most_scopes_allowed();
        for error in every_error() {
            let c = unauthorized(&metadata, &error, &scopes);
            assert!(c.len() < MAX_CHALLENGE_BYTES, "{error}: {}", c.len());
            assert!(c.contains(&scopes[0]), "{error}: the scopes are named");
        }
        let c = insufficient_scope(&metadata, &scopes);
        assert!(c.len() < MAX_CHALLENGE_BYTES, "{}", c.len());
        assert!(c.contains(&scopes[0]));
    }

    /// Beyond what startup allows (10,000 scopes), the header still fits:
    /// without its optional `scope`.
    #[test]
    fn a_challenge_never_exceeds_8_kib() {
        let scopes: Vec<String> = (0..10_000).map(|i| format!("scope-{i}")).collect();
        let m = "http://h/.well-known/oauth-protected-resource/mcp";
        for error in every_error() {
            let c = unauthorized(m, &error, &scopes);
            assert!(
                c.len() < MAX_CHALLENGE_BYTES && !c.contains("scope="),
                "{c}"
            );
        }
        let c = insufficient_scope(m, &scopes);
        assert!(
            c.len() < MAX_CHALLENGE_BYTES && !c.contains("scope="),
            "{c}"
        );
        assert!(
            c.contains("error=\"insufficient_scope\", resource_metadata="),
            "{c}"
        );
    }

    #[test]
    fn shapes() {
        let m = "http://h/.well-known/oauth-protected-resource/mcp";
        assert_eq!(
            unauthorized(m, &AuthError::Missing, &["a".into(), "b".into()]),
            format!("Bearer resource_metadata=\"{m}\", scope=\"a b\"")
        );
        let invalid = unauthorized(m, &AuthError::Invalid("x".into()), &[]);
        assert!(
            invalid.starts_with("Bearer error=\"invalid_token\""),
            "{invalid}"
        );
        assert!(!invalid.contains('x') || invalid.contains("expired"));
        assert!(
            insufficient_scope(m, &["documents:read".into()])
                .contains("error=\"insufficient_scope\", scope=\"documents:read\"")
        );
    }
}
