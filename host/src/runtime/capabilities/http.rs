//! Outbound HTTP (`wasi:http/outgoing-handler`) through a per-source
//! allow-list of `scheme://host[:port]` origins.
//! (Over 500 lines: the capability's grant, per-call state and wasi:http
//! hooks; the rest is its tests.)
//!
//! - The address checked is the address connected to: an allowed origin's
//!   name is resolved once ([`destination`]), every answer must be public
//!   ([`address`]: every IANA special-purpose block is refused) unless the
//!   entry names an address (or `localhost`) literally, and the connector
//!   ([`send`], which replaces wasmtime-wasi-http's `default_send_request`)
//!   dials only those addresses and checks the socket's peer is the one
//!   dialed. The name is kept for the Host header, SNI and the certificate.
//! - Every request, including one a guest makes to follow a redirect, is
//!   checked: the host never follows redirects itself.
//! - Request bodies are sent whole with their length (the guest finishes the
//!   body before it waits for the response).
//! - A call has at most `[handles] http_requests` requests in flight (past
//!   it: `connection-limit-reached`); each request's buffers and its body
//!   are charged to the call's memory budget ([`bounds`]).
//! - Request and response bodies are capped; resolving, connecting and the
//!   byte timeouts are bounded by the grant's timeout, never past the call's
//!   deadline; the whole exchange stops with the call (the send runs in a
//!   task aborted when the call's store is dropped).
//!
//! (Over 500 lines: about 80 are its in-process tests; the grant, the
//! egress hooks and the bounded exchange read as one path, and the pieces
//! with one job each live in `http/`.)

pub mod address;
pub mod bounds;
pub mod config;
pub mod destination;
pub mod network;
pub mod send;

use super::handles::HandleCount;
use super::{CallInfo, CallView, Capability};
use crate::guest_text::GuestText;
use crate::runtime::host_state::{HostState, MemoryAccount};
use crate::telemetry::metrics::metrics;
use crate::telemetry::{spans, traces};
use config::{HttpAsked, HttpGrantLimits};
use http_body_util::BodyExt;
use network::Network;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::component::Linker;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};
use wasmtime_wasi_http::{WasiHttpCtxView, WasiHttpView};

/// One allowed origin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    pub scheme: String,
    pub host: String,
    pub port: u16,
}

/// An http grant entry that is not `scheme://host[:port]`.
#[derive(Debug, thiserror::Error)]
pub enum OriginError {
    #[error("grants http: {0:?} is not scheme://host[:port]")]
    NotAnOrigin(String),
    #[error("grants http: {0:?}: only http and https are allowed")]
    Scheme(String),
    #[error(
        "grants http: {0:?}: give scheme://host[:port] only (no path, credentials or wildcards)"
    )]
    NotJustAnOrigin(String),
    #[error("grants http: {0:?}: not a host[:port]")]
    NotAHostPort(String),
    #[error("grants http: {0:?}: no host")]
    NoHost(String),
    #[error("grants http: {0:?}: bad port")]
    Port(String),
}

impl Origin {
    pub fn parse(s: &str) -> Result<Origin, OriginError> {
        let (scheme, rest) = s
            .split_once("://")
            .ok_or_else(|| OriginError::NotAnOrigin(s.into()))?;
        let default_port = match scheme {
            "http" => 80,
            "https" => 443,
            _ => return Err(OriginError::Scheme(s.into())),
        };
        if rest.is_empty() || rest.contains(['/', '?', '#', '@', '*']) {
            return Err(OriginError::NotJustAnOrigin(s.into()));
        }
        // Read as the egress check reads a request's URI (http::Uri), so a
        // grant means exactly the origin it names.
        let authority: http::uri::Authority = rest
            .parse()
            .map_err(|_| OriginError::NotAHostPort(s.into()))?;
        let bracketed = authority.host();
        let host = bracketed.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(OriginError::NoHost(s.into()));
        }
        // `Authority::port` drops a port it cannot read; refuse it instead.
        let port = match rest[bracketed.len()..].strip_prefix(':') {
            Some(p) => p.parse::<u16>().map_err(|_| OriginError::Port(s.into()))?,
            None => default_port,
        };
        Ok(Origin {
            scheme: scheme.into(),
            host: host.to_ascii_lowercase(),
            port,
        })
    }
}

/// Why an allowed request did not get a response. The log gets all of it;
/// the guest gets the generic wasi-http error code of [`EgressError::for_guest`].
#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    #[error("cannot resolve {host}: {source}")]
    Resolve {
        host: String,
        source: std::io::Error,
    },
    #[error("{host} resolves to no address")]
    NoAddress { host: String },
    #[error("{host} resolves to a non-public address {ip}: {reach}")]
    NotPublic {
        host: String,
        ip: IpAddr,
        reach: address::Reach,
    },
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("connecting to {addr} timed out")]
    ConnectTimeout { addr: SocketAddr },
    #[error("the connection to {dialed} has no peer address: {source}")]
    PeerUnknown {
        dialed: SocketAddr,
        source: std::io::Error,
    },
    #[error("the connection to {dialed} reached {peer}, which was not checked")]
    PeerMismatch {
        dialed: SocketAddr,
        peer: SocketAddr,
    },
    #[error("{host:?} is not a name TLS can verify")]
    TlsName { host: String },
    #[error("TLS configuration: {0}")]
    TlsConfig(rustls::Error),
    #[error("no response within {0:?}")]
    Timeout(Duration),
    #[error("{0}")]
    Http(Error),
}

impl EgressError {
    /// Why the host refused the request (as opposed to a failure of the
    /// network or the backend), as a metric label.
    fn refusal(&self) -> Option<&'static str> {
        match self {
            EgressError::NotPublic { .. } => Some("not_public"),
            EgressError::PeerUnknown { .. } | EgressError::PeerMismatch { .. } => {
                Some("peer_mismatch")
            }
            _ => None,
        }
    }

    fn for_guest(self) -> Error {
        match self {
            EgressError::Resolve { .. } | EgressError::NoAddress { .. } => {
                Error::DestinationNotFound
            }
            EgressError::NotPublic { .. }
            | EgressError::PeerUnknown { .. }
            | EgressError::PeerMismatch { .. } => Error::DestinationIpProhibited,
            EgressError::Connect { source, .. }
                if source.kind() == std::io::ErrorKind::ConnectionRefused =>
            {
                Error::ConnectionRefused
            }
            EgressError::Connect { .. } => Error::DestinationUnavailable,
            EgressError::ConnectTimeout { .. } | EgressError::Timeout(_) => {
                Error::ConnectionTimeout
            }
            EgressError::TlsName { .. } => Error::TlsProtocolError,
            EgressError::TlsConfig(_) => Error::ConfigurationError,
            EgressError::Http(e) => e,
        }
    }
}

/// A source's HTTP grant.
#[derive(Clone, Debug, Default)]
pub struct HttpGrants {
    pub origins: Arc<Vec<Origin>>,
    pub limits: HttpGrantLimits,
    /// The system's resolver and TCP, except in tests.
    pub network: Network,
}

impl HttpGrants {
    pub fn resolve(entries: &[String], limits: HttpGrantLimits) -> Result<Self, OriginError> {
        let origins = entries
            .iter()
            .map(|e| Origin::parse(e))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            origins: Arc::new(origins),
            limits,
            network: Network::system(),
        })
    }
}

/// The capability: no server-config section; the grant is the manifest's
/// `grants.http` origins and `grants.http_limits`.
pub struct Http;

/// One call's wasi-http context and the hooks that enforce its grant.
pub struct HttpCall {
    ctx: wasmtime_wasi_http::WasiHttpCtx,
    hooks: EgressHooks,
}

impl Capability for Http {
    const NAME: &'static str = "http";
    type Grant = HttpGrants;
    type Call = HttpCall;
    type DefinitionError = std::convert::Infallible;
    type GrantError = OriginError;
    type CallError = std::convert::Infallible;

    type Section<'c> = ();
    type Asked<'m> = HttpAsked<'m>;

    fn configure((): ()) -> Result<Self, Self::DefinitionError> {
        Ok(Self)
    }

    fn grant(&self, asked: HttpAsked<'_>) -> Result<HttpGrants, OriginError> {
        HttpGrants::resolve(asked.origins, asked.limits)
    }

    fn call(grant: &HttpGrants, call: &CallInfo) -> Result<HttpCall, Self::CallError> {
        Ok(HttpCall {
            ctx: wasmtime_wasi_http::WasiHttpCtx::new(),
            hooks: EgressHooks {
                grants: grant.clone(),
                deadline: call.deadline,
                source: call.source.clone(),
                request_id: call.request_id.clone(),
                in_flight: HandleCount::default(),
                max_in_flight: call.handles.http_requests,
                memory: None,
                refusal_logged: false,
            },
        })
    }

    /// wasi-http's linker functions reach the call through [`WasiHttpView`].
    fn add_to_linker(
        linker: &mut Linker<HostState>,
        _view: fn(&mut HostState) -> CallView<'_, HttpCall>,
    ) -> wasmtime::Result<()> {
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)
    }
}

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        let HttpCall { ctx, hooks } = &mut self
            .capabilities
            .as_mut()
            .expect(crate::runtime::host_state::PARKED)
            .http;
        // The call's memory account, for what its requests hold.
        let memory = &self.memory;
        hooks.memory.get_or_insert_with(|| memory.share());
        WasiHttpCtxView {
            ctx,
            table: &mut self.table,
            hooks,
        }
    }
}

/// The per-call hooks: the grant, the call's deadline, and the source name for logs.
pub struct EgressHooks {
    pub grants: HttpGrants,
    pub deadline: Instant,
    pub source: Arc<str>,
    /// The request's id, for the log lines.
    pub request_id: Arc<str>,
    /// Requests in flight now, at most `max_in_flight`.
    pub in_flight: HandleCount,
    pub max_in_flight: usize,
    /// The call's memory account (set when wasi-http first reaches the call).
    pub memory: Option<MemoryAccount>,
    /// One log line per call for requests refused by a bound.
    pub refusal_logged: bool,
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

/// The guest's timeouts, none longer than `cap`.
fn timeouts(options: Option<RequestOptions>, cap: Duration) -> send::Timeouts {
    let pick = |asked: Option<Duration>| asked.map_or(cap, |a| a.min(cap));
    let options = options.unwrap_or_default();
    send::Timeouts {
        connect: pick(options.connect_timeout),
        first_byte: pick(options.first_byte_timeout),
        between_bytes: pick(options.between_bytes_timeout),
    }
}

/// One allowed request: resolve and check once, then send to exactly the
/// checked addresses.
async fn exchange(
    network: &Network,
    origin: &Origin,
    request: http::Request<WasiBody>,
    limits: HttpGrantLimits,
    timeouts: send::Timeouts,
    memory: MemoryAccount,
) -> Result<(http::Response<send::IncomingResponseBody>, send::Io), EgressError> {
    let checked = destination::destination(origin, &*network.resolver).await?;
    // The body is sent whole, with its length, never chunked: a backend
    // that answers from the head alone and closes with a chunked body (even
    // an empty one) still unread makes its kernel reset the connection,
    // which can destroy the response in flight (the "connection reset" of
    // streamed empty bodies). Kept, it is charged to the call.
    let (parts, body) = request.into_parts();
    let (body, _charge) = bounds::collect(body, limits.max_request_bytes, memory)
        .await
        .map_err(EgressError::Http)?;
    let request = http::Request::from_parts(parts, body);
    send::send(network, origin, &checked, request, timeouts).await
}

impl WasiHttpHooks for EgressHooks {
    fn send_request(
        &mut self,
        mut request: http::Request<WasiBody>,
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
        let request_id = self.request_id.clone();
        let uri = request.uri().clone();
        let Some(origin) = self.allowed(&uri) else {
            metrics().outbound_denied(&source, "not_granted");
            tracing::warn!(source = %source, request_id = %request_id, uri = ?GuestText::new(&uri.to_string()), "outbound request denied: origin not in the source's http grant");
            return Box::new(async { Err(Error::HttpRequestDenied) });
        };
        // A place under the call's bound and its buffers' charge, taken
        // before anything is resolved, dialed or spawned.
        let memory = self
            .memory
            .as_ref()
            .map_or_else(|| MemoryAccount::new(0), MemoryAccount::share);
        let in_flight = self
            .in_flight
            .take(self.max_in_flight)
            .ok_or("in_flight")
            .and_then(|held| bounds::InFlight::new(held, memory.share()).ok_or("memory"));
        let in_flight = match in_flight {
            Ok(in_flight) => in_flight,
            Err(bound) => {
                metrics().outbound_denied(&source, bound);
                if !std::mem::replace(&mut self.refusal_logged, true) {
                    tracing::warn!(source = %source, request_id = %request_id, max_in_flight = self.max_in_flight, "outbound request refused: the call holds its limit of requests in flight ({bound}); further refusals of this call are not logged");
                }
                return Box::new(async move {
                    Err(match bound {
                        "memory" => Error::InternalError(Some("memory budget exhausted".into())),
                        _ => Error::ConnectionLimitReached,
                    })
                });
            }
        };
        // Called while the guest runs: the current span is its call's. The
        // backend gets this span's context, so its spans join the trace.
        let span = spans::http_request(request.method().as_str(), &origin.host, origin.port);
        traces::inject(&span, request.headers_mut());
        let limits = self.grants.limits;
        let network = self.grants.network.clone();
        let deadline = self.deadline;
        Box::new(async move {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let cap = Duration::from_millis(limits.timeout_ms).min(remaining);
            let exchange = exchange(
                &network,
                &origin,
                request,
                limits,
                timeouts(options, cap),
                memory,
            );
            let outcome = tokio::time::timeout(cap, exchange)
                .await
                .unwrap_or(Err(EgressError::Timeout(cap)));
            let (response, io) = outcome.map_err(|e| {
                if let Some(reason) = e.refusal() {
                    metrics().outbound_denied(&source, reason);
                    spans::outcome(&span, "denied");
                    tracing::warn!(source = %source, request_id = %request_id, uri = ?GuestText::new(&uri.to_string()), "outbound request denied: {e}");
                } else {
                    metrics().outbound_response(&source, &origin.host, None);
                    spans::outcome(&span, "failed");
                    tracing::warn!(source = %source, request_id = %request_id, uri = ?GuestText::new(&uri.to_string()), "outbound request failed: {e}");
                }
                e.for_guest()
            })?;
            let status = response.status();
            metrics().outbound_response(&source, &origin.host, Some(status));
            if !span.is_disabled() {
                span.record("http.response.status_code", status.as_u16());
                spans::outcome(
                    &span,
                    if status.as_u16() < 400 {
                        "ok"
                    } else {
                        "http_error"
                    },
                );
            }
            tracing::debug!(source = %source, request_id = %request_id, uri = ?GuestText::new(&uri.to_string()), status = status.as_u16(), "outbound request");
            let response = response.map(|b| {
                capped(
                    b.boxed_unsync(),
                    limits.max_response_bytes,
                    Error::HttpResponseBodySize,
                )
            });
            // The connection's I/O holds the request's place until it ends.
            let io = async move {
                let _in_flight = in_flight;
                io.await
            };
            Ok((
                response,
                Box::new(io) as Box<dyn Future<Output = Result<(), Error>> + Send>,
            ))
        })
    }
}

#[cfg(test)]
pub(crate) mod checklist;

#[cfg(test)]
mod egress_tests;

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use super::*;

    use crate::runtime::capabilities::harness::{Harness, manifest};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A backend on 127.0.0.1 that answers every connection with "hi".
    async fn backend() -> u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut buf = [0u8; 4096];
                let _ = socket.read(&mut buf).await;
                let _ = socket
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nhi",
                    )
                    .await;
            }
        });
        port
    }

    #[tokio::test]
    async fn only_a_granted_origin_is_reached() {
        let port = backend().await;
        let harness = Harness::new("");
        let url = format!("http://127.0.0.1:{port}/x");
        let granted = manifest(
            "fetch",
            &format!("url = {url:?}\n[grants]\nhttp = [\"http://127.0.0.1:{port}\"]\n"),
        );
        let text = harness
            .read::<Http>(&granted, "hostile://x/1")
            .await
            .unwrap();
        assert_eq!(text, "200 hi");
        let ungranted = manifest("fetch", &format!("url = {url:?}\n"));
        let text = harness
            .read::<Http>(&ungranted, "hostile://x/1")
            .await
            .unwrap();
        assert!(
            text.starts_with("fetch failed") && text.contains("HttpRequestDenied"),
            "{text}"
        );
    }

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
}
