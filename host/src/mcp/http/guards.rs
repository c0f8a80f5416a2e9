//! What a request must pass before anything in it is parsed, each refusal a
//! typed rejection with its status (in the style of axum's rejections):
//! path (404), `Origin`/`Host` (DNS-rebinding protection, 403), HTTP method
//! (405), `Accept` (406), `Content-Type` (415), and the body's size (413)
//! and arrival time (408), which `body` checks.

use super::{HttpResponse, text};
use crate::guest_text::GuestText;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, StatusCode};

#[derive(Debug, thiserror::Error)]
pub enum Rejection {
    #[error("Not Found")]
    NotFound,
    /// The detail (which header, which value) is for the log.
    #[error("Forbidden: origin or host not allowed")]
    OriginOrHost(String),
    /// We push nothing: no GET stream (every version allows a 405 here).
    #[error("Method Not Allowed")]
    MethodNotAllowed,
    #[error("Not Acceptable: this server answers with application/json")]
    NotAcceptable,
    #[error("Unsupported Media Type: send application/json")]
    UnsupportedMediaType,
    #[error("Payload Too Large")]
    PayloadTooLarge,
    #[error("Request Timeout: the body did not arrive in time")]
    BodyTimeout,
    #[error("Bad Request: could not read the body")]
    BodyUnreadable,
}

impl Rejection {
    pub fn status(&self) -> StatusCode {
        match self {
            Rejection::NotFound => StatusCode::NOT_FOUND,
            Rejection::OriginOrHost(_) => StatusCode::FORBIDDEN,
            Rejection::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Rejection::NotAcceptable => StatusCode::NOT_ACCEPTABLE,
            Rejection::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Rejection::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Rejection::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            Rejection::BodyUnreadable => StatusCode::BAD_REQUEST,
        }
    }

    pub fn into_response(self) -> HttpResponse {
        match &self {
            Rejection::OriginOrHost(why) => tracing::warn!("refused request: {why}"),
            Rejection::BodyTimeout => {
                tracing::info!("request body not received within its deadline; closing")
            }
            _ => {}
        }
        let mut r = text(self.status(), &self.to_string());
        let headers = r.headers_mut();
        match self {
            Rejection::MethodNotAllowed => {
                headers.insert(header::ALLOW, HeaderValue::from_static("POST, DELETE"));
            }
            // The body was not read to its end: the connection cannot be reused.
            Rejection::PayloadTooLarge | Rejection::BodyTimeout => {
                headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            _ => {}
        }
        r
    }
}

/// Where the listener accepts requests from (DNS-rebinding rules).
pub struct Origins<'a> {
    pub loopback: bool,
    pub allowed_hosts: &'a [String],
    pub allowed_origins: &'a [String],
    /// `scheme://host[:port]` of the resource URL (a same-origin `Origin`).
    pub resource_origin: &'a str,
}

/// On a loopback listener only loopback `Host` names (and configured ones)
/// are served, and a browser `Origin` must be a loopback or configured origin.
pub fn origin_and_host(o: &Origins, headers: &HeaderMap) -> Result<(), Rejection> {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let configured = o.allowed_hosts.iter().any(|h| h.eq_ignore_ascii_case(host));
    let host_ok = if o.loopback {
        is_loopback_authority(host) || configured
    } else {
        o.allowed_hosts.is_empty() || configured
    };
    if !host_ok {
        return Err(Rejection::OriginOrHost(format!(
            "Host {:?}",
            GuestText::new(host)
        )));
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin
        .to_str()
        .map_err(|_| Rejection::OriginOrHost("non-ASCII Origin".into()))?;
    let allowed = o
        .allowed_origins
        .iter()
        .any(|a| a.eq_ignore_ascii_case(origin))
        || origin.eq_ignore_ascii_case(o.resource_origin)
        || (o.loopback
            && ["http://", "https://"].iter().any(|s| {
                origin.len() > s.len()
                    && origin[..s.len()].eq_ignore_ascii_case(s)
                    && is_loopback_authority(&origin[s.len()..])
            }));
    if allowed {
        Ok(())
    } else {
        Err(Rejection::OriginOrHost(format!(
            "Origin {:?}",
            GuestText::new(origin)
        )))
    }
}

fn is_loopback_authority(authority: &str) -> bool {
    let host = if let Some(rest) = authority.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((h, port)) if port.is_empty() || port.starts_with(':') => {
                h == "::1" && valid_port(port)
            }
            _ => false,
        };
    } else {
        match authority.split_once(':') {
            Some((h, port)) if valid_port_digits(port) => h,
            Some(_) => return false,
            None => authority,
        }
    };
    host.eq_ignore_ascii_case("localhost") || host == "127.0.0.1"
}

/// Empty, or `:` and a port's digits.
fn valid_port(p: &str) -> bool {
    match p.strip_prefix(':') {
        None => p.is_empty(),
        Some(d) => valid_port_digits(d),
    }
}

fn valid_port_digits(d: &str) -> bool {
    !d.is_empty() && d.len() <= 5 && d.bytes().all(|b| b.is_ascii_digit())
}

/// The HTTP methods the endpoint serves.
pub enum Verb {
    Post,
    Delete,
}

pub fn verb(method: &Method) -> Result<Verb, Rejection> {
    match *method {
        Method::POST => Ok(Verb::Post),
        Method::DELETE => Ok(Verb::Delete),
        _ => Err(Rejection::MethodNotAllowed),
    }
}

/// The client must accept what we answer with (`application/json`).
pub fn accept(headers: &HeaderMap) -> Result<(), Rejection> {
    let mut values = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .peekable();
    if values.peek().is_none() {
        return Ok(());
    }
    let accepted = values.flat_map(|v| v.split(',')).any(|item| {
        let mut parts = item.split(';');
        let media = parts.next().unwrap_or("").trim();
        let refused = parts.any(|p| {
            p.trim()
                .strip_prefix("q=")
                .is_some_and(|q| q.trim().parse::<f32>().is_ok_and(|q| q == 0.0))
        });
        !refused
            && (media.eq_ignore_ascii_case("application/json")
                || media == "*/*"
                || media.eq_ignore_ascii_case("application/*"))
    });
    accepted.then_some(()).ok_or(Rejection::NotAcceptable)
}

pub fn content_type(headers: &HeaderMap) -> Result<(), Rejection> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("application/json")
        });
    json.then_some(()).ok_or(Rejection::UnsupportedMediaType)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_authorities() {
        for ok in [
            "localhost",
            "localhost:8080",
            "127.0.0.1:1",
            "[::1]:443",
            "[::1]",
            "LOCALHOST:80",
        ] {
            assert!(is_loopback_authority(ok), "{ok}");
        }
        for bad in [
            "evil.example.com",
            "127.0.0.1.evil.com",
            "localhost.evil",
            "[::2]:1",
            "localhost:",
            "localhost:80x",
            "",
        ] {
            assert!(!is_loopback_authority(bad), "{bad}");
        }
    }

    #[test]
    fn accept_header() {
        let mut h = HeaderMap::new();
        assert!(accept(&h).is_ok());
        let mut with = |v: &'static str| {
            h.insert(header::ACCEPT, HeaderValue::from_static(v));
            accept(&h).is_ok()
        };
        assert!(with("application/json, text/event-stream"));
        assert!(!with("text/event-stream"));
        assert!(with("*/*"));
        assert!(!with("application/json;q=0"));
    }

    #[test]
    fn rejections_carry_their_status() {
        let r = Rejection::BodyTimeout.into_response();
        assert_eq!(r.status(), StatusCode::REQUEST_TIMEOUT);
        assert_eq!(r.headers()[header::CONNECTION], "close");
        let r = Rejection::MethodNotAllowed.into_response();
        assert_eq!(r.headers()[header::ALLOW], "POST, DELETE");
    }
}
