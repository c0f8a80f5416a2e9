//! CORS for browser clients, for the configured `[http] allowed_origins`
//! only: an exact origin is echoed (never `*`), preflights are answered,
//! and every response to a cross-origin request says `Vary: Origin`.
//! Same-origin and loopback pages pass the `Origin` guard but get no CORS
//! grant unless they are configured: reading responses cross-origin is a
//! grant an operator makes, not a default.

use super::{HttpResponse, empty};
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, StatusCode};

/// Request headers a browser MCP client sends.
pub const ALLOW_HEADERS: &str = "Authorization, Content-Type, Accept, Mcp-Protocol-Version, Mcp-Session-Id, Mcp-Method, Mcp-Name, Last-Event-ID";
/// Response headers a page may read.
pub const EXPOSE_HEADERS: &str = "Mcp-Session-Id, WWW-Authenticate";
/// How long a browser may cache a preflight answer, seconds.
pub const PREFLIGHT_MAX_AGE_S: &str = "600";

/// What the request's `Origin` earns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Grant {
    /// No `Origin` header: not a cross-origin browser request.
    None,
    /// An `Origin` that is not configured: no CORS headers, but `Vary`.
    Refused,
    /// A configured origin, echoed exactly as the browser sent it.
    Allowed(HeaderValue),
}

pub fn grant(allowed_origins: &[String], headers: &HeaderMap) -> Grant {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Grant::None;
    };
    let configured = origin.to_str().is_ok_and(|o| {
        o != "null"
            && allowed_origins
                .iter()
                .any(|a| a != "*" && a.eq_ignore_ascii_case(o))
    });
    if configured {
        Grant::Allowed(origin.clone())
    } else {
        Grant::Refused
    }
}

/// Whether this is a CORS preflight (not just any OPTIONS request).
pub fn is_preflight(method: &Method, headers: &HeaderMap) -> bool {
    method == Method::OPTIONS
        && headers.contains_key(header::ORIGIN)
        && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
}

/// The answer to a preflight from a configured origin; `methods` are the
/// ones the path serves.
pub fn preflight(methods: &'static str) -> HttpResponse {
    let mut r = empty(StatusCode::NO_CONTENT);
    let h = r.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static(methods),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(ALLOW_HEADERS),
    );
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static(PREFLIGHT_MAX_AGE_S),
    );
    r
}

/// Add what `grant` earns to any response.
pub fn apply(grant: &Grant, r: &mut HttpResponse) {
    if *grant == Grant::None {
        return;
    }
    let h = r.headers_mut();
    h.append(header::VARY, HeaderValue::from_static("Origin"));
    if let Grant::Allowed(origin) = grant {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
        h.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static(EXPOSE_HEADERS),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_origin(o: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ORIGIN, HeaderValue::from_static(o));
        h
    }

    #[test]
    fn only_configured_origins_are_granted() {
        let allowed = vec!["http://localhost:6274".to_owned(), "*".to_owned()];
        assert_eq!(grant(&allowed, &HeaderMap::new()), Grant::None);
        assert_eq!(
            grant(&allowed, &with_origin("http://localhost:6274")),
            Grant::Allowed(HeaderValue::from_static("http://localhost:6274"))
        );
        // A configured `*` is never a wildcard grant.
        for refused in ["http://localhost:6275", "http://evil.example", "null", "*"] {
            assert_eq!(
                grant(&allowed, &with_origin(refused)),
                Grant::Refused,
                "{refused}"
            );
        }
    }

    #[test]
    fn responses_carry_exactly_the_grant() {
        let mut r = empty(StatusCode::OK);
        apply(&Grant::Refused, &mut r);
        assert_eq!(r.headers()[header::VARY], "Origin");
        assert!(
            r.headers()
                .get(header::ACCESS_CONTROL_ALLOW_ORIGIN)
                .is_none()
        );
        let mut r = preflight("POST, DELETE");
        apply(
            &Grant::Allowed(HeaderValue::from_static("http://a.example")),
            &mut r,
        );
        assert_eq!(r.status(), StatusCode::NO_CONTENT);
        assert_eq!(
            r.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN],
            "http://a.example"
        );
        assert_eq!(
            r.headers()[header::ACCESS_CONTROL_EXPOSE_HEADERS],
            EXPOSE_HEADERS
        );
        let allow = r.headers()[header::ACCESS_CONTROL_ALLOW_HEADERS]
            .to_str()
            .unwrap();
        for h in [
            "Authorization",
            "Content-Type",
            "Mcp-Protocol-Version",
            "Mcp-Session-Id",
            "Mcp-Method",
            "Mcp-Name",
            "Last-Event-ID",
        ] {
            assert!(allow.contains(h), "{h}");
        }
        assert!(
            r.headers()
                .get(header::ACCESS_CONTROL_ALLOW_CREDENTIALS)
                .is_none()
        );
    }
}
