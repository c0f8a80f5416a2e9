//! The OTLP exporter's HTTP client: one POST per batch over hyper (plain
//! HTTP, or rustls with the webpki roots for `https`).
//!
//! The SDK's batch processor exports from its own thread with a blocking
//! executor, where no tokio reactor runs: each export is spawned onto the
//! server's runtime and its `JoinHandle` awaited, which any executor can do.

use crate::telemetry::config::{TRACE_EXPORT_MAX_RESPONSE_BYTES, TRACE_EXPORT_TIMEOUT};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use std::sync::Arc;
use tokio::net::TcpStream;

/// Why an export did not get an answer (the SDK logs it and drops the batch).
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("collector URL {0:?} has no host")]
    NoHost(String),
    #[error("collector URL scheme must be http or https, got {0:?}")]
    Scheme(String),
    #[error("cannot connect to the collector: {0}")]
    Connect(std::io::Error),
    #[error("TLS to the collector: {0}")]
    Tls(std::io::Error),
    #[error("TLS configuration: {0}")]
    TlsConfig(rustls::Error),
    #[error("{0:?} is not a name TLS can verify")]
    TlsName(String),
    #[error("HTTP to the collector: {0}")]
    Http(#[from] hyper::Error),
    #[error("the collector's response is over {TRACE_EXPORT_MAX_RESPONSE_BYTES} bytes")]
    ResponseTooLarge,
    #[error("no answer from the collector within {TRACE_EXPORT_TIMEOUT:?}")]
    Timeout,
    #[error("the export task ended without an answer: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// Sends on the runtime it was made on.
#[derive(Debug)]
pub struct OtlpClient {
    runtime: tokio::runtime::Handle,
}

impl OtlpClient {
    /// Must be called inside the server's tokio runtime.
    pub fn new() -> Self {
        OtlpClient {
            runtime: tokio::runtime::Handle::current(),
        }
    }
}

#[async_trait::async_trait]
impl HttpClient for OtlpClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let task = self.runtime.spawn(async move {
            tokio::time::timeout(TRACE_EXPORT_TIMEOUT, post(request))
                .await
                .unwrap_or(Err(ExportError::Timeout))
        });
        let answer = task.await.map_err(ExportError::from)??;
        Ok(answer)
    }
}

async fn post(request: Request<Bytes>) -> Result<Response<Bytes>, ExportError> {
    let uri = request.uri().clone();
    let host = uri
        .host()
        .ok_or_else(|| ExportError::NoHost(uri.to_string()))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let (tls, default_port) = match uri.scheme_str() {
        Some("http") => (false, 80),
        Some("https") => (true, 443),
        other => return Err(ExportError::Scheme(other.unwrap_or("").to_owned())),
    };
    let port = uri.port_u16().unwrap_or(default_port);
    let tcp = TcpStream::connect((host.as_str(), port))
        .await
        .map_err(ExportError::Connect)?;
    let (mut parts, body) = request.into_parts();
    // The request line carries the path only; Host names the authority.
    if let Some(authority) = uri.authority()
        && let Ok(value) = http::HeaderValue::from_str(authority.as_str())
    {
        parts.headers.insert(http::header::HOST, value);
    }
    parts.uri = uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .parse()
        .unwrap_or_else(|_| http::Uri::from_static("/"));
    let request = http::Request::from_parts(parts, Full::new(body));
    if tls {
        let stream = tokio_rustls::TlsConnector::from(tls_config()?)
            .connect(server_name(&host)?, tcp)
            .await
            .map_err(ExportError::Tls)?;
        exchange(TokioIo::new(stream), request).await
    } else {
        exchange(TokioIo::new(tcp), request).await
    }
}

async fn exchange<T>(
    io: T,
    request: http::Request<Full<Bytes>>,
) -> Result<Response<Bytes>, ExportError>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await?;
    let conn = tokio::spawn(conn);
    let response = sender.send_request(request).await?;
    let (parts, body) = response.into_parts();
    let body = Limited::new(body, TRACE_EXPORT_MAX_RESPONSE_BYTES)
        .collect()
        .await
        .map_err(|e| match e.downcast::<hyper::Error>() {
            Ok(e) => ExportError::Http(*e),
            Err(_) => ExportError::ResponseTooLarge,
        })?
        .to_bytes();
    conn.abort();
    Ok(Response::from_parts(parts, body))
}

fn server_name(host: &str) -> Result<rustls::pki_types::ServerName<'static>, ExportError> {
    rustls::pki_types::ServerName::try_from(host)
        .map(|n| n.to_owned())
        .map_err(|_| ExportError::TlsName(host.to_owned()))
}

fn tls_config() -> Result<Arc<rustls::ClientConfig>, ExportError> {
    crate::http_client::public_tls_config().map_err(ExportError::TlsConfig)
}
