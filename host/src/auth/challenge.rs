//! `WWW-Authenticate` challenges (RFC 6750 §3, RFC 9728 §5.1).

use super::AuthError;

fn quoted(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// 401: no token, or a bad one (`error="invalid_token"`); 400 for a query token.
pub fn unauthorized(metadata_url: &str, error: &AuthError, scopes: &[String]) -> String {
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
    format!(
        "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{}\", error_description=\"The access token lacks a required scope\"",
        quoted(&scopes.join(" ")),
        quoted(metadata_url)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
