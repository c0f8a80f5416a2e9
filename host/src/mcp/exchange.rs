//! One JSON-RPC message through the rest of the pipeline: its era and
//! headers, the legacy session, the method's policy, dispatch, and the
//! response with the cache headers the policy gives. The batch path uses
//! the same pieces (`find_session`, `bind`, `notification`, `run`).

use super::App;
use super::caller::Caller;
use super::errors::McpError;
use super::http::headers::{self, Era};
use super::http::{self as h, HttpResponse, cache_control};
use super::jsonrpc::{self, Incoming, RequestId};
use super::method::Method;
use super::methods::{self, Ctx, Reply};
use super::pipeline::Stop;
use super::session::Session;
use super::version::Version;
use crate::runtime::RequestScope;
use crate::telemetry::metrics::{McpLabels, metrics};
use crate::telemetry::spans;
use http::StatusCode;
use http::header::{HeaderMap, HeaderValue};
use prometheus_client::metrics::counter::Counter;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::sync::{Arc, OnceLock};
use std::time::Instant;
use tracing::Instrument;

pub async fn single(
    app: &App,
    headers: &HeaderMap,
    caller: &Caller,
    raw: &RawValue,
) -> Result<HttpResponse, Stop> {
    let message = jsonrpc::classify(raw).map_err(|invalid| {
        let id = invalid.id.clone();
        Stop::rpc(Version::UNNEGOTIATED, id, invalid.into())
    })?;
    match headers::era(headers, message.params()) {
        Era::Stateless => stateless(app, headers, caller, message).await,
        Era::Legacy => legacy(app, headers, caller, message).await,
    }
}

/// 2026-07-28: the request carries its version and capabilities in `_meta`
/// and mirrors method and name in headers that must match the body.
async fn stateless(
    app: &App,
    headers: &HeaderMap,
    caller: &Caller,
    message: Incoming,
) -> Result<HttpResponse, Stop> {
    let fail = |e| Stop::rpc(Version::STATELESS, message.id().cloned(), e);
    let (request, params) = match &message {
        Incoming::Response => {
            return Err(fail(McpError::InvalidRequest(
                "Invalid Request: clients must not send responses",
            )));
        }
        Incoming::Request { method, params, .. } => {
            (Some((method.as_str(), Method::parse(method))), params)
        }
        Incoming::Notification { params, .. } => (None, params),
    };
    let version = headers::check_stateless(headers, request, params).map_err(fail)?;
    let Incoming::Request { id, method, params } = message else {
        // No client notifications are defined over HTTP in 2026-07-28: accept and ignore.
        return Ok(h::empty(StatusCode::ACCEPTED));
    };
    let method = Method::parse(&method);
    method
        .admit(app, caller.principal())
        .map_err(|e| Stop::rpc(version, Some(id.clone()), e))?;
    // Closing the response stream is the cancellation: the handler future
    // is dropped with the connection.
    let scope = RequestScope::new(
        Instant::now() + app.config.request_timeout(),
        id.logged(),
        caller.key(),
    )
    .reusing(caller.instance_key());
    let ctx = Ctx {
        app,
        version,
        principal: caller.principal(),
        scope: &scope,
        id: &id,
    };
    let outcome = run(&ctx, method, &params).await;
    Ok(respond(app, version, &id, method, outcome))
}

async fn legacy(
    app: &App,
    headers: &HeaderMap,
    caller: &Caller,
    message: Incoming,
) -> Result<HttpResponse, Stop> {
    let fail = |v, e| Stop::rpc(v, message.id().cloned(), e);
    headers::check_legacy(headers).map_err(|e| fail(Version::UNNEGOTIATED, e))?;
    let method = match &message {
        Incoming::Request { method, .. } | Incoming::Notification { method, .. } => {
            Method::parse(method)
        }
        Incoming::Response => Method::Unknown,
    };
    if let (Incoming::Request { id, params, .. }, Method::Initialize) = (&message, method) {
        return initialize(app, caller, id, params);
    }
    let session = find_session(app, headers).map_err(|e| fail(Version::UNNEGOTIATED, e))?;
    let v = session.version;
    method
        .admit(app, caller.principal())
        .map_err(|e| fail(v, e))?;
    bind(&session, caller).map_err(|e| fail(v, e))?;
    match message {
        Incoming::Response => Ok(h::empty(StatusCode::ACCEPTED)),
        Incoming::Notification { method, params } => {
            notification(&session, &method, &params);
            Ok(h::empty(StatusCode::ACCEPTED))
        }
        Incoming::Request { id, params, .. } => {
            let scope = RequestScope::new(
                Instant::now() + app.config.request_timeout(),
                id.logged(),
                caller.key(),
            )
            .reusing(caller.instance_key());
            let _in_flight = session.register(&id, scope.cancel.clone());
            let ctx = Ctx {
                app,
                version: v,
                principal: caller.principal(),
                scope: &scope,
                id: &id,
            };
            let outcome = run(&ctx, method, &params).await;
            Ok(respond(app, v, &id, method, outcome))
        }
    }
}

fn initialize(
    app: &App,
    caller: &Caller,
    id: &RequestId,
    params: &Map<String, Value>,
) -> Result<HttpResponse, Stop> {
    let Some(requested) = params.get("protocolVersion").and_then(Value::as_str) else {
        return Err(Stop::rpc(
            Version::LATEST_LEGACY,
            Some(id.clone()),
            McpError::InvalidParams("protocolVersion is required".into()),
        ));
    };
    let version = Version::negotiate(requested);
    Method::Initialize
        .admit(app, caller.principal())
        .map_err(|e| Stop::rpc(version, Some(id.clone()), e))?;
    let session = app
        .sessions
        .create(version, caller.principal())
        .map_err(|refused| {
            tracing::info!("initialize refused: {refused}");
            Stop::rpc(version, Some(id.clone()), McpError::Busy(refused.into()))
        })?;
    let mut r = h::json(StatusCode::OK, methods::initialize_result(app, id, version));
    r.headers_mut().insert(
        headers::SESSION,
        HeaderValue::from_str(&session.id).expect("hex id"),
    );
    tracing::info!(session = %session.id, version = version.as_str(), "session initialized");
    Ok(r)
}

/// The session a legacy request names.
pub fn find_session(app: &App, headers: &HeaderMap) -> Result<Arc<Session>, McpError> {
    let sid = headers::session_id(headers).ok_or(McpError::SessionRequired)?;
    app.sessions.get(sid).ok_or(McpError::SessionNotFound)
}

/// A session serves only the caller it belongs to; to anyone else it does
/// not exist.
pub fn bind(session: &Session, caller: &Caller) -> Result<(), McpError> {
    if session.admit(caller.principal()) {
        Ok(())
    } else {
        tracing::warn!(session = %session.id, "session presented by another caller");
        Err(McpError::SessionNotFound)
    }
}

pub fn notification(session: &Session, method: &str, params: &Map<String, Value>) {
    if method == "notifications/cancelled"
        && let Some(id) = params.get("requestId").and_then(RequestId::from_value)
    {
        // "Receivers MAY ignore it if the id is unknown or the request finished."
        if session.cancel(&id) {
            tracing::info!(session = %session.id, request_id = %id.logged(), "cancellation requested");
        }
    }
}

/// Dispatch, until the request is cancelled.
pub async fn run(
    ctx: &Ctx<'_>,
    method: Method,
    params: &Map<String, Value>,
) -> Result<Reply, McpError> {
    let span = spans::mcp_request(
        method.metric_name(),
        ctx.version.as_str(),
        &ctx.scope.request_id,
        params,
    );
    let outcome = async {
        tokio::select! {
            biased;
            _ = ctx.scope.cancel.cancelled() => Err(McpError::Cancelled),
            r = methods::call(ctx, method, params) => r,
        }
    }
    .instrument(span.clone())
    .await;
    let label = outcome.as_ref().map_or_else(McpError::kind, |_| "ok");
    spans::outcome(&span, label);
    count_request(method, ctx.version, label);
    outcome
}

/// One answered request in `mcp_requests`. The `ok` series are looked up
/// once per method and version: a lookup by labels hashes them and takes
/// the family's lock, which every worker shares.
fn count_request(method: Method, version: Version, outcome: &'static str) {
    static OK: [[OnceLock<Counter>; Version::ALL.len()]; Method::COUNT] =
        [const { [const { OnceLock::new() }; Version::ALL.len()] }; Method::COUNT];
    let labels = || McpLabels {
        method: method.metric_name(),
        version: version.as_str(),
        outcome,
    };
    let family = &metrics().mcp_requests;
    if outcome == "ok" {
        OK[method as usize][version as usize]
            .get_or_init(|| family.get_or_create(&labels()).clone())
            .inc();
    } else {
        family.get_or_create(&labels()).inc();
    }
}

/// The HTTP answer to one request; its cache headers come from the method's
/// policy whatever the outcome.
fn respond(
    app: &App,
    version: Version,
    id: &RequestId,
    method: Method,
    outcome: Result<Reply, McpError>,
) -> HttpResponse {
    match outcome {
        Ok(reply) => {
            let mut r = h::json(StatusCode::OK, reply.body);
            if let Some(cc) = reply.caching.header() {
                cache_control(&mut r, cc);
            }
            r
        }
        Err(McpError::Cancelled) => {
            tracing::info!(request_id = %id.logged(), method = method.policy().name, "request cancelled; no response sent");
            h::cancelled()
        }
        Err(e) => {
            let mut r = e.into_response(&app.auth, version, Some(id));
            cache_control(&mut r, method.error_cache_control(app));
            r
        }
    }
}
