//! The admin listener (`[admin] listen`, off unless configured, never the
//! MCP port): `/metrics` (Prometheus), `/healthz` (the process is alive) and
//! `/readyz` (sources loaded, MCP listener up, not draining). It carries no
//! MCP and no credentials; bind it where only the operator's scrapers and
//! probes reach.

use crate::telemetry::metrics::{self, metrics};
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;
use tokio::net::TcpListener;

/// `[admin]`: the operator's listener, separate from MCP.
#[derive(Debug, Clone, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    /// Where `/metrics`, `/healthz` and `/readyz` are served (never the MCP
    /// address). Unset: no admin listener.
    pub listen: Option<SocketAddr>,
}

/// Where the server is in its life, as `/readyz` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    /// Sources loaded, MCP listener not bound yet.
    Starting = 0,
    /// Serving MCP.
    Ready = 1,
    /// SIGTERM/SIGINT received: finishing in-flight requests, taking no new ones.
    Draining = 2,
}

/// The server's phase, shared by the MCP side (which moves it) and the
/// admin listener (which reports it).
#[derive(Debug, Default)]
pub struct Health(AtomicU8);

impl Health {
    pub fn set(&self, phase: Phase) {
        self.0.store(phase as u8, Ordering::SeqCst);
    }

    pub fn phase(&self) -> Phase {
        match self.0.load(Ordering::SeqCst) {
            0 => Phase::Starting,
            1 => Phase::Ready,
            _ => Phase::Draining,
        }
    }
}

/// Bind the admin listener; the MCP address is refused so that /metrics is
/// never reachable where MCP clients are.
pub async fn bind(addr: SocketAddr, mcp: SocketAddr) -> anyhow::Result<TcpListener> {
    if addr == mcp && addr.port() != 0 {
        anyhow::bail!("[admin] listen must not be the MCP listen address ({addr})");
    }
    TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr} ([admin] listen): {e}"))
}

/// Serve the admin endpoints until the process ends (the task is dropped).
pub async fn serve(listener: TcpListener, health: Arc<Health>) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!("admin accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let health = health.clone();
        let service = service_fn(move |req| {
            let health = health.clone();
            async move { Ok::<_, std::convert::Infallible>(answer(&req, &health)) }
        });
        tokio::spawn(async move {
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = conn.await {
                tracing::debug!("admin connection ended: {e}");
            }
        });
    }
}

fn answer<B>(req: &Request<B>, health: &Health) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    }
    match req.uri().path() {
        "/metrics" => {
            let mut r = Response::new(Full::new(Bytes::from(metrics().encode())));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static(metrics::CONTENT_TYPE),
            );
            r
        }
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/readyz" => match health.phase() {
            Phase::Ready => text(StatusCode::OK, "ready\n"),
            Phase::Starting => text(StatusCode::SERVICE_UNAVAILABLE, "starting\n"),
            Phase::Draining => text(StatusCode::SERVICE_UNAVAILABLE, "draining\n"),
        },
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}
