//! Sends one request to addresses that already passed the check, never to a
//! name: this replaces wasmtime-wasi-http's `default_send_request`, which
//! resolves the authority again (the second answer of a rebinding name is
//! whatever the attacker wants). The rest mirrors that function in
//! wasmtime-wasi-http 48: rustls with the webpki roots for https (SNI and
//! certificate check against the origin's name), one HTTP/1.1 connection per
//! request, the guest's timeouts. Redirects are returned, never followed.

use super::destination::Checked;
use super::network::Network;
use super::{EgressError, Origin};
use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use hyper_util::rt::TokioIo;
use std::future::{Future, poll_fn};
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use wasmtime_wasi_http::Error;

/// The guest's timeouts, already capped by the grant and the call's deadline.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    pub connect: Duration,
    pub first_byte: Duration,
    pub between_bytes: Duration,
}

trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// Connect to the first checked address that answers; the connection is
/// used only if its peer is the address dialed.
async fn connect(
    network: &Network,
    checked: &Checked,
    timeout: Duration,
) -> Result<TcpStream, EgressError> {
    let mut outcome = attempt(network, checked.first(), timeout).await;
    for &addr in checked.rest() {
        // Only an unreachable address moves on to the next; a peer that is
        // not the address dialed stops the request.
        if !matches!(
            outcome,
            Err(EgressError::Connect { .. } | EgressError::ConnectTimeout { .. })
        ) {
            break;
        }
        outcome = attempt(network, addr, timeout).await;
    }
    outcome
}

async fn attempt(
    network: &Network,
    addr: SocketAddr,
    timeout: Duration,
) -> Result<TcpStream, EgressError> {
    let stream = tokio::time::timeout(timeout, network.connector.connect(addr))
        .await
        .map_err(|_| EgressError::ConnectTimeout { addr })?
        .map_err(|source| EgressError::Connect { addr, source })?;
    verify_peer(&stream, addr)?;
    Ok(stream)
}

/// The socket's peer must be the address dialed (which passed the check):
/// whatever sits between the host and the network, nothing is sent to an
/// address that was not checked.
fn verify_peer(stream: &TcpStream, dialed: SocketAddr) -> Result<(), EgressError> {
    let peer = stream
        .peer_addr()
        .map_err(|source| EgressError::PeerUnknown { dialed, source })?;
    // IP and port only: flow info and scope id are not part of the check.
    if (peer.ip(), peer.port()) != (dialed.ip(), dialed.port()) {
        return Err(EgressError::PeerMismatch { dialed, peer });
    }
    Ok(())
}

fn tls_config() -> Result<Arc<rustls::ClientConfig>, EgressError> {
    crate::http_client::public_tls_config().map_err(EgressError::TlsConfig)
}

async fn tls(
    origin: &Origin,
    stream: TcpStream,
    timeout: Duration,
) -> Result<Box<dyn Stream>, EgressError> {
    // The name the guest asked for (and the allow-list matched), not the
    // address: SNI and the certificate check are for the origin.
    let name = rustls::pki_types::ServerName::try_from(origin.host.as_str())
        .map_err(|_| EgressError::TlsName {
            host: origin.host.clone(),
        })?
        .to_owned();
    let connector = tokio_rustls::TlsConnector::from(tls_config()?);
    let stream = tokio::time::timeout(timeout, connector.connect(name, stream))
        .await
        .map_err(|_| EgressError::Http(Error::ConnectionTimeout))?
        .map_err(|e| EgressError::Http(Error::Tls(e)))?;
    Ok(Box::new(stream))
}

pub type Io = Pin<Box<dyn Future<Output = Result<(), Error>> + Send>>;

/// Send `request` over a fresh connection to one of `checked`. Returns the
/// response head and a future that drives the rest of the connection.
pub async fn send<B>(
    network: &Network,
    origin: &Origin,
    checked: &Checked,
    mut request: http::Request<B>,
    timeouts: Timeouts,
) -> Result<(http::Response<IncomingResponseBody>, Io), EgressError>
where
    B: Body<Data = Bytes, Error = Error> + Send + 'static,
{
    let stream = connect(network, checked, timeouts.connect).await?;
    let stream: Box<dyn Stream> = match origin.scheme.as_str() {
        "https" => tls(origin, stream, timeouts.connect).await?,
        _ => Box::new(stream),
    };
    let (mut sender, conn) = tokio::time::timeout(
        timeouts.connect,
        hyper::client::conn::http1::Builder::new()
            // What the call was charged for this request's buffers.
            .max_buf_size(super::bounds::REQUEST_BUFFER_BYTES)
            .handshake(TokioIo::new(stream)),
    )
    .await
    .map_err(|_| EgressError::Http(Error::ConnectionTimeout))?
    .map_err(|e| EgressError::Http(e.into()))?;

    // The request line carries only the path (scheme and authority are for
    // proxies); the Host header wasmtime-wasi-http set from the authority
    // stays.
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    *request.uri_mut() = http::Uri::builder()
        .path_and_query(path)
        .build()
        .map_err(|_| EgressError::Http(Error::HttpRequestUriInvalid))?;

    let between_bytes = timeouts.between_bytes.max(Duration::from_nanos(1));
    let send = async move {
        let response = tokio::time::timeout(timeouts.first_byte, sender.send_request(request))
            .await
            .map_err(|_| Error::ConnectionReadTimeout)?
            .map_err(Error::from)?;
        let mut timeout = tokio::time::interval(between_bytes);
        timeout.reset();
        Ok::<_, Error>(response.map(|incoming| IncomingResponseBody { incoming, timeout }))
    };
    // Drive the connection while waiting for the response head.
    let mut send = pin!(send);
    let mut conn = Some(conn);
    let response = poll_fn(|cx| match send.as_mut().poll(cx) {
        Poll::Ready(result) => Poll::Ready(result),
        Poll::Pending => {
            let Some(fut) = conn.as_mut() else {
                return Poll::Pending;
            };
            let result = ready!(Pin::new(fut).poll(cx));
            conn = None;
            match result {
                Ok(()) => send.as_mut().poll(cx),
                Err(e) => Poll::Ready(Err(Error::from(e))),
            }
        }
    })
    .await
    .map_err(EgressError::Http)?;
    let io: Io = Box::pin(async move {
        let Some(conn) = conn else { return Ok(()) };
        conn.await.map_err(|e| {
            if e.is_timeout() {
                Error::HttpResponseTimeout
            } else {
                e.into()
            }
        })
    });
    Ok((response, io))
}

/// The response body with the guest's between-bytes timeout.
pub struct IncomingResponseBody {
    incoming: hyper::body::Incoming,
    timeout: tokio::time::Interval,
}

impl Body for IncomingResponseBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        match Pin::new(&mut self.incoming).poll_frame(cx) {
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Ready(Some(Err(e))) if e.is_timeout() => {
                Poll::Ready(Some(Err(Error::HttpResponseTimeout)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(Some(Ok(frame))) => {
                self.timeout.reset();
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => {
                ready!(self.timeout.poll_tick(cx));
                Poll::Ready(Some(Err(Error::ConnectionReadTimeout)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}
