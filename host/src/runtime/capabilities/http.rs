//! Outbound HTTP (`wasi:http/outgoing-handler`) through a per-source
//! allow-list of `scheme://host[:port]` origins.
//!
//! - Every request, including one a guest makes to follow a redirect, is
//!   checked: the host never follows redirects itself.
//! - A listed name that resolves to a loopback, private, link-local or
//!   otherwise non-public address is refused unless the entry names that
//!   address (or `localhost`) literally.
//! - Request bodies are sent whole with their length (the guest finishes the
//!   body before it waits for the response).
//! - Request and response bodies are capped; connect and byte timeouts are
//!   the grant's timeout, never past the call's deadline; the whole exchange
//!   stops with the call (the send runs in a task aborted when the call's
//!   store is dropped).

use crate::config::HttpGrantLimits;
use http_body_util::BodyExt;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

/// One allowed origin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    pub scheme: String,
    pub host: String,
    pub port: u16,
}

impl Origin {
    pub fn parse(s: &str) -> Result<Origin, String> {
        let (scheme, rest) = s
            .split_once("://")
            .ok_or_else(|| format!("{s:?} is not scheme://host[:port]"))?;
        let default_port = match scheme {
            "http" => 80,
            "https" => 443,
            _ => return Err(format!("{s:?}: only http and https are allowed")),
        };
        if rest.is_empty() || rest.contains(['/', '?', '#', '@', '*']) {
            return Err(format!(
                "{s:?}: give scheme://host[:port] only (no path, credentials or wildcards)"
            ));
        }
        // Read as the egress check reads a request's URI (http::Uri), so a
        // grant means exactly the origin it names.
        let authority: http::uri::Authority = rest
            .parse()
            .map_err(|_| format!("{s:?}: not a host[:port]"))?;
        let bracketed = authority.host();
        let host = bracketed.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(format!("{s:?}: no host"));
        }
        // `Authority::port` drops a port it cannot read; refuse it instead.
        let port = match rest[bracketed.len()..].strip_prefix(':') {
            Some(p) => p.parse::<u16>().map_err(|_| format!("{s:?}: bad port"))?,
            None => default_port,
        };
        Ok(Origin {
            scheme: scheme.into(),
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    /// Whether the entry itself names a non-public address, so that
    /// resolving to one is what the operator asked for.
    fn names_private(&self) -> bool {
        self.host == "localhost" || self.host.parse::<IpAddr>().is_ok_and(|ip| !is_public(ip))
    }
}

/// Loopback, private, link-local, unique-local, unspecified, documentation,
/// CGNAT and multicast addresses are not public.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || (o[0] == 100 && (o[1] & 0xc0) == 64)
                || o[0] == 0)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let s = v6.segments();
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80)
        }
    }
}

/// A source's HTTP grant.
#[derive(Clone, Debug, Default)]
pub struct HttpGrants {
    pub origins: Arc<Vec<Origin>>,
    pub limits: HttpGrantLimits,
}

impl HttpGrants {
    pub fn resolve(entries: &[String], limits: HttpGrantLimits) -> Result<Self, String> {
        let origins = entries
            .iter()
            .map(|e| Origin::parse(e))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("grants http: {e}"))?;
        Ok(Self {
            origins: Arc::new(origins),
            limits,
        })
    }
}

/// The per-call hooks: the grant, the call's deadline, and the source name for logs.
pub struct EgressHooks {
    pub grants: HttpGrants,
    pub deadline: Instant,
    pub source: Arc<str>,
}

impl EgressHooks {
    fn allowed(&self, uri: &http::Uri) -> Option<Origin> {
        let scheme = uri.scheme_str()?;
        let host = uri
            .host()?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        let port = uri
            .port_u16()
            .unwrap_or(if scheme == "https" { 443 } else { 80 });
        self.grants
            .origins
            .iter()
            .find(|o| o.scheme == scheme && o.host == host && o.port == port)
            .cloned()
    }
}

fn capped(body: WasiBody, max: usize, on_exceed: fn(Option<u64>) -> Error) -> WasiBody {
    http_body_util::Limited::new(body, max)
        .map_err(move |e| match e.downcast::<Error>() {
            Ok(e) => *e,
            Err(_) => on_exceed(Some(max as u64)),
        })
        .boxed_unsync()
}

impl WasiHttpHooks for EgressHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Box<
        dyn Future<
                Output = Result<
                    (
                        http::Response<WasiBody>,
                        Box<dyn Future<Output = Result<(), Error>> + Send>,
                    ),
                    Error,
                >,
            > + Send,
    > {
        drop(fut);
        let source = self.source.clone();
        let uri = request.uri().clone();
        let Some(origin) = self.allowed(&uri) else {
            tracing::warn!(source = %source, %uri, "outbound request denied: origin not in the source's http grant");
            return Box::new(async { Err(Error::HttpRequestDenied) });
        };
        let limits = self.grants.limits;
        let deadline = self.deadline;
        Box::new(async move {
            // Resolve first: a listed name must not lead to a private address
            // unless the entry names one itself.
            if !origin.names_private() {
                let addrs = tokio::net::lookup_host((origin.host.as_str(), origin.port)).await.map_err(|e| {
                    tracing::warn!(source = %source, %uri, "outbound request failed: cannot resolve the host: {e}");
                    Error::DestinationNotFound
                })?;
                for addr in addrs {
                    if !is_public(addr.ip()) {
                        tracing::warn!(source = %source, %uri, ip = %addr.ip(), "outbound request denied: resolves to a non-public address");
                        return Err(Error::DestinationIpProhibited);
                    }
                }
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            let cap = Duration::from_millis(limits.timeout_ms).min(remaining);
            let pick = |asked: Option<Duration>| Some(asked.map_or(cap, |a| a.min(cap)));
            let options = options.unwrap_or_default();
            let options = RequestOptions {
                connect_timeout: pick(options.connect_timeout),
                first_byte_timeout: pick(options.first_byte_timeout),
                between_bytes_timeout: pick(options.between_bytes_timeout),
            };
            let exchange = async {
                // The body is sent whole, with its length, never chunked: a
                // backend that answers from the head alone and closes with a
                // chunked body (even an empty one) still unread makes its
                // kernel reset the connection, which can destroy the response
                // in flight (the "connection reset" of streamed empty bodies).
                let (parts, body) = request.into_parts();
                let body = capped(body, limits.max_request_bytes, Error::HttpRequestBodySize)
                    .collect()
                    .await?
                    .to_bytes();
                let body = http_body_util::Full::new(body)
                    .map_err(|never| match never {})
                    .boxed_unsync();
                let request = http::Request::from_parts(parts, body);
                wasmtime_wasi_http::default_send_request(request, Some(options)).await
            };
            let (response, io) = tokio::time::timeout(cap, exchange)
                .await
                .map_err(|_| Error::ConnectionTimeout)??;
            tracing::debug!(source = %source, %uri, status = response.status().as_u16(), "outbound request");
            let response = response.map(|b| {
                capped(
                    b.boxed_unsync(),
                    limits.max_response_bytes,
                    Error::HttpResponseBodySize,
                )
            });
            Ok((
                response,
                Box::new(io) as Box<dyn Future<Output = Result<(), Error>> + Send>,
            ))
        })
    }
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_parse_strictly() {
        assert_eq!(
            Origin::parse("https://api.example.com").unwrap(),
            Origin {
                scheme: "https".into(),
                host: "api.example.com".into(),
                port: 443
            }
        );
        assert_eq!(Origin::parse("http://127.0.0.1:8080").unwrap().port, 8080);
        assert_eq!(Origin::parse("http://[::1]:9").unwrap().host, "::1");
        for bad in [
            "api.example.com",
            "ftp://x",
            "https://x/path",
            "https://*.example.com",
            "https://u@x",
            "https://x:99999",
            "https://",
        ] {
            assert!(Origin::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn public_addresses() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.0.1",
            "172.16.0.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fc00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in ["1.1.1.1", "93.184.216.34", "2606:4700::1111"] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
        assert!(Origin::parse("http://127.0.0.1:1").unwrap().names_private());
        assert!(Origin::parse("http://localhost:1").unwrap().names_private());
        assert!(
            !Origin::parse("https://api.example.com")
                .unwrap()
                .names_private()
        );
    }
}
