//! Streamable HTTP on one endpoint, for every protocol version, as one
//! pipeline that every era and the batch path go through:
//!
//! guards (path 404, `Origin`/`Host` 403, method 405, `Accept` 406,
//! `Content-Type` 415) → authentication from the headers (401/403/400; a
//! bad token is refused here, on every path) → the body, bounded in bytes
//! (smaller until a token is verified; 413) and in time (408) → framing
//! (-32700; one message or a bounded batch) → era and per-version headers
//! → session (legacy) → the method's policy → dispatch → response, with the
//! cache headers the method's policy gives.
//!
//! Responses are `application/json`; a cancelled request gets an empty
//! `text/event-stream` response (a stream that ends without a message),
//! which every version's transport allows.

use super::App;
use super::batch;
use super::caller::{self, Caller};
use super::errors::McpError;
use super::exchange;
use super::http::body::{self, BodyLimits};
use super::http::cors;
use super::http::guards::{self, Origins, Rejection, Verb};
use super::http::{self as h, HttpResponse, cache_control};
use super::jsonrpc::{self, Frame, RequestId};
use super::version::Version;
use crate::telemetry::metrics::{InFlight, StatusLabels, metrics};
use bytes::Bytes;
use http::{Method as HttpMethod, Request, StatusCode, request::Parts};
use hyper::body::Incoming as Body;
use prometheus_client::metrics::counter::Counter;
use std::sync::{Arc, OnceLock};

const WELL_KNOWN_METADATA: &str = "/.well-known/oauth-protected-resource";

/// Why a request ends before a method could answer it.
#[derive(Debug)]
pub enum Stop {
    /// Refused by HTTP's rules: a plain-text answer.
    Rejected(Rejection),
    /// A JSON-RPC error (or an OAuth challenge) framed for `version`.
    Rpc {
        version: Version,
        id: Option<RequestId>,
        error: McpError,
    },
}

impl Stop {
    pub fn rpc(version: Version, id: Option<RequestId>, error: McpError) -> Stop {
        Stop::Rpc { version, id, error }
    }

    fn into_response(self, app: &App) -> HttpResponse {
        match self {
            Stop::Rejected(r) => r.into_response(),
            Stop::Rpc { version, id, error } => {
                error.into_response(&app.auth, version, id.as_ref())
            }
        }
    }
}

impl From<Rejection> for Stop {
    fn from(r: Rejection) -> Self {
        Stop::Rejected(r)
    }
}

/// The client's address, put in the request's extensions by the listener,
/// so that authentication can bound token lookups per peer.
#[derive(Clone, Copy, Debug)]
pub struct PeerAddr(pub std::net::IpAddr);

pub async fn handle(app: Arc<App>, req: Request<Body>) -> HttpResponse {
    let m = metrics();
    let _in_flight = InFlight::enter(&m.http_in_flight);
    let started = std::time::Instant::now();
    // CORS is decided once, from the request, and added to whatever answers it.
    let grant = cors::grant(&app.config.http.allowed_origins, req.headers());
    let mut r = serve(&app, req, &grant)
        .await
        .unwrap_or_else(|stop| stop.into_response(&app));
    cors::apply(&grant, &mut r);
    m.http_request_duration
        .observe(started.elapsed().as_secs_f64());
    count_response(r.status().as_u16());
    r
}

/// One response in `http_responses`; the `200` series is looked up once (a
/// lookup by labels hashes them and takes the family's lock).
fn count_response(status: u16) {
    static OK: OnceLock<Counter> = OnceLock::new();
    let family = &metrics().http_responses;
    if status == 200 {
        OK.get_or_init(|| family.get_or_create(&StatusLabels { status }).clone())
            .inc();
    } else {
        family.get_or_create(&StatusLabels { status }).inc();
    }
}

async fn serve(app: &App, req: Request<Body>, grant: &cors::Grant) -> Result<HttpResponse, Stop> {
    let path = req.uri().path();
    if cors::is_preflight(req.method(), req.headers()) {
        return preflight(app, &req, grant);
    }
    if req.method() == HttpMethod::GET && (path == WELL_KNOWN_METADATA || path == app.metadata_path)
    {
        return metadata(app);
    }
    if path != app.config.http.endpoint {
        return Err(Rejection::NotFound.into());
    }
    guards::origin_and_host(&origins(app), req.headers())?;
    let verb = guards::verb(req.method())?;
    let (parts, body) = req.into_parts();
    match verb {
        Verb::Post => post(app, &parts, body).await,
        Verb::Delete => delete(app, &parts).await,
    }
}

/// A CORS preflight: answered for configured origins on the paths we
/// serve, refused (403) for every other origin.
fn preflight(app: &App, req: &Request<Body>, grant: &cors::Grant) -> Result<HttpResponse, Stop> {
    let path = req.uri().path();
    let methods = if path == app.config.http.endpoint {
        "POST, DELETE"
    } else if app.auth.enabled() && (path == WELL_KNOWN_METADATA || path == app.metadata_path) {
        "GET"
    } else {
        return Err(Rejection::NotFound.into());
    };
    guards::origin_and_host(&origins(app), req.headers())?;
    match grant {
        cors::Grant::Allowed(_) => Ok(cors::preflight(methods)),
        _ => {
            Err(Rejection::OriginOrHost("Origin not in allowed_origins (preflight)".into()).into())
        }
    }
}

fn origins(app: &App) -> Origins<'_> {
    Origins {
        loopback: app.loopback,
        allowed_hosts: &app.config.http.allowed_hosts,
        allowed_origins: &app.config.http.allowed_origins,
        resource_origin: &app.resource_origin,
    }
}

/// The protected-resource metadata document (RFC 9728).
fn metadata(app: &App) -> Result<HttpResponse, Stop> {
    let doc = app.auth.metadata().ok_or(Rejection::NotFound)?;
    let mut r = h::json(StatusCode::OK, doc.to_vec());
    cache_control(&mut r, "max-age=3600");
    Ok(r)
}

async fn authenticate(app: &App, parts: &Parts) -> Result<Caller, Stop> {
    let peer = parts.extensions.get::<PeerAddr>().map(|p| p.0);
    caller::authenticate(app, &parts.headers, parts.uri.query(), peer)
        .await
        .map_err(|e| Stop::rpc(Version::UNNEGOTIATED, None, e))
}

async fn post(app: &App, parts: &Parts, body: Body) -> Result<HttpResponse, Stop> {
    let headers = &parts.headers;
    let caller = match before_body(app, parts).await {
        Ok(caller) => caller,
        // The body stays unread, so the connection ends with this answer:
        // saying so keeps a client from sending its next request on it (the
        // SDKs fetch the metadata right after a 401) and finding it closed.
        Err(stop) => {
            let mut r = stop.into_response(app);
            r.headers_mut().insert(
                http::header::CONNECTION,
                http::HeaderValue::from_static("close"),
            );
            return Ok(r);
        }
    };
    let limits = BodyLimits {
        max_bytes: caller::body_limit(app, &caller),
        deadline: app.config.body_timeout(),
    };
    let bytes: Bytes = body::read(headers, body, limits).await?;
    let frame = jsonrpc::split(&bytes, app.config.http.max_batch_items).map_err(|e| {
        if let jsonrpc::FrameError::TooManyItems { max } = e {
            tracing::warn!(max, "batch refused: more items than max_batch_items");
        }
        Stop::rpc(Version::UNNEGOTIATED, None, e.into())
    })?;
    let caller = &caller;
    let answer = move || async move {
        match frame {
            Frame::Single(raw) => exchange::single(app, headers, caller, &raw).await,
            Frame::Batch(items) => batch::serve(app, headers, caller, &items).await,
        }
    };
    crate::telemetry::traces::with_headers(headers, answer).await
}

/// What is checked before the body is read. Who asks decides how much we
/// read: the token comes first.
async fn before_body(app: &App, parts: &Parts) -> Result<Caller, Stop> {
    guards::accept(&parts.headers)?;
    guards::content_type(&parts.headers)?;
    authenticate(app, parts).await
}

/// DELETE ends a legacy session: only for the caller it belongs to.
async fn delete(app: &App, parts: &Parts) -> Result<HttpResponse, Stop> {
    let caller = authenticate(app, parts).await?;
    let fail = |e| Stop::rpc(Version::UNNEGOTIATED, None, e);
    let session = exchange::find_session(app, &parts.headers).map_err(fail)?;
    exchange::bind(&session, &caller).map_err(fail)?;
    app.sessions.remove(&session.id);
    tracing::info!(session = %session.id, "session ended by the client");
    Ok(h::empty(StatusCode::OK))
}
