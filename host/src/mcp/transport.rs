//! Streamable HTTP on one endpoint, for every protocol version.
//!
//! Per request, in order: path → `Origin`/`Host` (DNS-rebinding protection,
//! 403) → HTTP method (GET 405, DELETE ends a legacy session) → `Accept`
//! (406) → `Content-Type` (415) → body size (413, not read to the end) →
//! JSON (-32700) → era: 2026-07-28 (stateless, headers checked against the
//! body) or legacy (session, `MCP-Protocol-Version`) → auth (401/403) →
//! method. Responses are `application/json`; a cancelled request gets an
//! empty `text/event-stream` response (a stream that ends without a
//! message), which every version's transport allows.

// Early returns carry the finished HTTP response; boxing it would only move
// the allocation.
#![allow(clippy::result_large_err)]

use super::App;
use super::caller::caller_key;
use super::errors::McpError;
use super::jsonrpc::{self, Incoming, RequestId};
use super::methods::{self, Ctx};
use super::session::Session;
use super::version::Version;
use crate::auth::{AuthError, Principal};
use crate::runtime::RequestScope;
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming as Body;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Instant;

pub type HttpResponse = Response<Full<Bytes>>;

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

fn response(status: StatusCode, content_type: Option<&'static str>, body: Vec<u8>) -> HttpResponse {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    if let Some(ct) = content_type {
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    }
    r
}

fn json(status: StatusCode, body: Vec<u8>) -> HttpResponse {
    response(status, Some("application/json"), body)
}

fn text(status: StatusCode, message: &str) -> HttpResponse {
    response(
        status,
        Some("text/plain; charset=utf-8"),
        message.as_bytes().to_vec(),
    )
}

fn error_response(
    app: &App,
    version: Version,
    id: Option<&RequestId>,
    err: McpError,
) -> HttpResponse {
    let status = err.status(version);
    let mut r = match &err {
        McpError::Unauthorized { error, scopes } => {
            let mut r = json(status, oauth_error_body(error));
            if let Ok(v) = HeaderValue::from_str(&app.auth.challenge_unauthorized(error, scopes)) {
                r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
            }
            r
        }
        McpError::Forbidden { scopes } => {
            let mut r = json(status, br#"{"error":"insufficient_scope","error_description":"The access token lacks a required scope"}"#.to_vec());
            if let Ok(v) = HeaderValue::from_str(&app.auth.challenge_forbidden(scopes)) {
                r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
            }
            r
        }
        McpError::Cancelled => cancelled_response(),
        _ => json(
            status,
            jsonrpc::error_bytes(id, err.code(version), &err.message(), err.data().as_ref()),
        ),
    };
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(s) = err.retry_after_s() {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(s));
    }
    r
}

fn oauth_error_body(error: &AuthError) -> Vec<u8> {
    let (code, description) = match error {
        AuthError::Missing => ("invalid_request", "A bearer token is required"),
        AuthError::QueryToken => (
            "invalid_request",
            "Access tokens are accepted only in the Authorization header",
        ),
        AuthError::Malformed => ("invalid_request", "Malformed Authorization header"),
        _ => ("invalid_token", "The access token is invalid or expired"),
    };
    serde_json::to_vec(&serde_json::json!({ "error": code, "error_description": description }))
        .expect("serializable")
}

/// A request that was cancelled gets a stream that ends without a message.
fn cancelled_response() -> HttpResponse {
    let mut r = response(StatusCode::OK, Some("text/event-stream"), Vec::new());
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

pub async fn handle(app: Arc<App>, req: Request<Body>) -> HttpResponse {
    let path = req.uri().path();
    if req.method() == Method::GET
        && (path == "/.well-known/oauth-protected-resource" || path == app.metadata_path)
    {
        return protected_resource_metadata(&app, req.headers());
    }
    if path != app.config.http.endpoint {
        return text(StatusCode::NOT_FOUND, "Not Found");
    }
    if let Err(why) = check_origin_and_host(&app, req.headers()) {
        tracing::warn!("refused request: {why}");
        return text(
            StatusCode::FORBIDDEN,
            "Forbidden: origin or host not allowed",
        );
    }
    match *req.method() {
        Method::POST => post(app, req).await,
        Method::DELETE => delete(&app, req).await,
        _ => {
            // We push nothing: no GET stream (every version allows a 405 here).
            let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST, DELETE"));
            r
        }
    }
}

fn protected_resource_metadata(app: &App, _headers: &HeaderMap) -> HttpResponse {
    match app.auth.metadata() {
        Some(doc) => {
            let mut r = json(StatusCode::OK, doc.to_vec());
            r.headers_mut().insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("max-age=3600"),
            );
            r
        }
        None => text(StatusCode::NOT_FOUND, "Not Found"),
    }
}

/// DNS-rebinding protection: on a loopback listener only loopback `Host`
/// names (and configured ones) are served, and a browser `Origin` must be a
/// loopback or configured origin.
fn check_origin_and_host(app: &App, headers: &HeaderMap) -> Result<(), String> {
    let allowed_hosts = &app.config.http.allowed_hosts;
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let host_ok = if app.loopback {
        is_loopback_authority(host) || allowed_hosts.iter().any(|h| h.eq_ignore_ascii_case(host))
    } else {
        allowed_hosts.is_empty() || allowed_hosts.iter().any(|h| h.eq_ignore_ascii_case(host))
    };
    if !host_ok {
        return Err(format!("Host {host:?}"));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin
            .to_str()
            .map_err(|_| "non-ASCII Origin".to_string())?;
        let allowed = app
            .config
            .http
            .allowed_origins
            .iter()
            .any(|o| o.eq_ignore_ascii_case(origin))
            || origin.eq_ignore_ascii_case(&app.resource_origin)
            || (app.loopback
                && ["http://", "https://"].iter().any(|s| {
                    origin.len() > s.len()
                        && origin[..s.len()].eq_ignore_ascii_case(s)
                        && is_loopback_authority(&origin[s.len()..])
                }));
        if !allowed {
            return Err(format!("Origin {origin:?}"));
        }
    }
    Ok(())
}

fn is_loopback_authority(authority: &str) -> bool {
    let host = if let Some(rest) = authority.strip_prefix('[') {
        match rest.split_once(']') {
            Some((h, port)) if port.is_empty() || port.starts_with(':') => {
                return h == "::1" && valid_port(port);
            }
            _ => return false,
        }
    } else {
        match authority.split_once(':') {
            Some((h, port)) => {
                if !valid_port(&format!(":{port}")) {
                    return false;
                }
                h
            }
            None => authority,
        }
    };
    host.eq_ignore_ascii_case("localhost") || host == "127.0.0.1"
}

fn valid_port(p: &str) -> bool {
    match p.strip_prefix(':') {
        None => p.is_empty(),
        Some(d) => !d.is_empty() && d.len() <= 5 && d.bytes().all(|b| b.is_ascii_digit()),
    }
}

/// Does the client accept what we answer with (`application/json`)?
fn accepts_json(headers: &HeaderMap) -> bool {
    let values: Vec<&str> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    if values.is_empty() {
        return true;
    }
    values.iter().flat_map(|v| v.split(',')).any(|item| {
        let mut parts = item.split(';');
        let media = parts.next().unwrap_or("").trim();
        let refused = parts.any(|p| {
            let p = p.trim();
            p.strip_prefix("q=")
                .is_some_and(|q| q.trim().parse::<f32>().is_ok_and(|q| q == 0.0))
        });
        !refused
            && (media.eq_ignore_ascii_case("application/json")
                || media == "*/*"
                || media.eq_ignore_ascii_case("application/*"))
    })
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("application/json")
        })
        .unwrap_or(false)
}

/// A header's value without the optional whitespace around it (RFC 9110 §5.5).
fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim_matches([' ', '\t']))
}

async fn read_body(
    app: &App,
    req: Request<Body>,
) -> Result<(http::request::Parts, Bytes), HttpResponse> {
    let max = app.config.http.max_body_bytes;
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let too_large = || {
        let mut r = text(StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large");
        // We stop reading: the connection cannot be reused.
        r.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        r
    };
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    let (parts, body) = req.into_parts();
    match Limited::new(body, max).collect().await {
        Ok(collected) => Ok((parts, collected.to_bytes())),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(too_large())
        }
        Err(_) => Err(text(
            StatusCode::BAD_REQUEST,
            "Bad Request: could not read the body",
        )),
    }
}

async fn post(app: Arc<App>, req: Request<Body>) -> HttpResponse {
    if !accepts_json(req.headers()) {
        return text(
            StatusCode::NOT_ACCEPTABLE,
            "Not Acceptable: this server answers with application/json",
        );
    }
    if !is_json(req.headers()) {
        return text(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Unsupported Media Type: send application/json",
        );
    }
    let (parts, body) = match read_body(&app, req).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let headers = &parts.headers;
    let query = parts.uri.query();
    let raw: Box<RawValue> = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(_) => return error_response(&app, Version::V2025_03_26, None, McpError::Parse),
    };
    if raw.get().trim_start().starts_with('[') {
        return batch(&app, headers, query, &raw).await;
    }
    let message = match jsonrpc::classify(&raw) {
        Ok(m) => m,
        Err(invalid) => {
            return error_response(
                &app,
                Version::V2025_03_26,
                invalid.id.as_ref(),
                McpError::InvalidRequest(invalid.message),
            );
        }
    };
    let params = match parse_params(&message) {
        Ok(p) => p,
        Err(e) => return error_response(&app, Version::V2025_03_26, message_id(&message), e),
    };
    let header_version = header_str(headers, VERSION_HEADER);
    let meta_version = params.get("_meta").and_then(|m| m.get(META_VERSION));
    // A request in 2026-07-28 form is served statelessly, even `initialize`
    // (removed there: 404); an `initialize` without those markers selects
    // the legacy handshake.
    let modern = header_version == Some(Version::V2026_07_28.as_str()) || meta_version.is_some();
    if modern {
        modern_post(&app, headers, query, message, params).await
    } else {
        legacy_post(&app, headers, query, message, params).await
    }
}

fn message_id(m: &Incoming) -> Option<&RequestId> {
    match m {
        Incoming::Request { id, .. } => Some(id),
        _ => None,
    }
}

fn parse_params(m: &Incoming) -> Result<Map<String, Value>, McpError> {
    let raw = match m {
        Incoming::Request { params, .. } | Incoming::Notification { params, .. } => {
            params.as_deref()
        }
        Incoming::Response => None,
    };
    match raw {
        None => Ok(Map::new()),
        Some(r) => serde_json::from_str(r.get())
            .map_err(|_| McpError::InvalidParams("params must be an object".into())),
    }
}

/// Decode an `Mcp-Name` value: `=?base64?...?=` carries non-ASCII values.
fn decode_header_value(v: &str) -> Option<String> {
    use base64::Engine as _;
    match v
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .ok()
            .and_then(|b| String::from_utf8(b).ok()),
        None => Some(v.to_owned()),
    }
}

/// 2026-07-28: the request carries its version and capabilities in `_meta`
/// and mirrors method and name in headers that must match the body.
async fn modern_post(
    app: &App,
    headers: &HeaderMap,
    query: Option<&str>,
    message: Incoming,
    params: Map<String, Value>,
) -> HttpResponse {
    let v = Version::V2026_07_28;
    let id = message_id(&message).cloned();
    let fail = |e: McpError| error_response(app, v, id.as_ref(), e);
    let method = match &message {
        Incoming::Request { method, .. } | Incoming::Notification { method, .. } => method.clone(),
        Incoming::Response => {
            return fail(McpError::InvalidRequest(
                "Invalid Request: clients must not send responses",
            ));
        }
    };
    // Header checks first: they are what intermediaries route on.
    let Some(header_version) = header_str(headers, VERSION_HEADER) else {
        return fail(McpError::HeaderMismatch(
            "missing MCP-Protocol-Version header".into(),
        ));
    };
    if matches!(message, Incoming::Request { .. }) {
        match header_str(headers, METHOD_HEADER) {
            None => return fail(McpError::HeaderMismatch("missing Mcp-Method header".into())),
            Some(h) if h != method => {
                return fail(McpError::HeaderMismatch(format!(
                    "Mcp-Method header value '{h}' does not match body value '{method}'"
                )));
            }
            _ => {}
        }
        if method == "resources/read"
            && let Some(Value::String(uri)) = params.get("uri")
        {
            match headers
                .get(NAME_HEADER)
                .map(|_| header_str(headers, NAME_HEADER).and_then(decode_header_value))
            {
                None => return fail(McpError::HeaderMismatch("missing Mcp-Name header".into())),
                Some(None) => {
                    return fail(McpError::HeaderMismatch(
                        "Mcp-Name header value is not valid".into(),
                    ));
                }
                Some(Some(name)) if &name != uri => {
                    return fail(McpError::HeaderMismatch(
                        "Mcp-Name header value does not match body value".into(),
                    ));
                }
                _ => {}
            }
        }
    }
    if Version::parse(header_version) != Some(v) {
        return fail(McpError::UnsupportedVersion {
            requested: header_version.to_owned(),
        });
    }
    let meta = params.get("_meta").and_then(Value::as_object);
    match meta.and_then(|m| m.get(META_VERSION)) {
        None => return fail(McpError::MissingMeta(META_VERSION)),
        Some(Value::String(s)) if s == header_version => {}
        Some(_) => {
            return fail(McpError::HeaderMismatch(
                "MCP-Protocol-Version header does not match _meta protocolVersion".into(),
            ));
        }
    }
    if !meta
        .and_then(|m| m.get(META_CAPABILITIES))
        .is_some_and(Value::is_object)
    {
        return fail(McpError::MissingMeta(META_CAPABILITIES));
    }
    let (id, method) = match message {
        // No client notifications are defined over HTTP in 2026-07-28: accept and ignore.
        Incoming::Notification { .. } => return response(StatusCode::ACCEPTED, None, Vec::new()),
        Incoming::Request { id, method, .. } => (id, method),
        Incoming::Response => unreachable!(),
    };
    let principal = match authorize(app, headers, query, &method).await {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    // Closing the response stream is the cancellation: the handler future
    // is dropped with the connection.
    let scope = RequestScope::new(
        Instant::now() + app.config.request_timeout(),
        id.raw(),
        caller_key(principal.as_deref()),
    );
    run(app, v, principal.as_deref(), &scope, &id, &method, &params).await
}

/// Whether the method needs a token, and the caller if one was presented.
/// A presented token is always verified, even where none is needed.
/// Refuse an anonymous caller where `method` needs a token.
fn require_token(app: &App, method: &str, principal: Option<&Principal>) -> Result<(), McpError> {
    // "Once a server registers an inventory callback, every resources/list
    // request requires authentication, even with public discovery or legacy
    // MCP clients." Other methods keep their rules.
    let required = app.auth.enabled()
        && (!app.auth.public_discovery || (method == "resources/list" && app.pager.has_sources()));
    if required && principal.is_none() {
        return Err(McpError::Unauthorized {
            error: AuthError::Missing,
            scopes: app.pager.source_scopes(),
        });
    }
    Ok(())
}

async fn authorize(
    app: &App,
    headers: &HeaderMap,
    query: Option<&str>,
    method: &str,
) -> Result<Option<Arc<Principal>>, McpError> {
    let principal = app
        .auth
        .authenticate(headers, query)
        .await
        .map_err(|error| {
            tracing::info!("authentication failed: {error}");
            let scopes = app.pager.source_scopes();
            McpError::Unauthorized { error, scopes }
        })?;
    require_token(app, method, principal.as_deref())?;
    Ok(principal)
}

async fn run(
    app: &App,
    version: Version,
    principal: Option<&Principal>,
    scope: &RequestScope,
    id: &RequestId,
    method: &str,
    params: &Map<String, Value>,
) -> HttpResponse {
    let ctx = Ctx {
        app,
        version,
        principal,
        scope,
        id,
    };
    let result = tokio::select! {
        biased;
        _ = scope.cancel.cancelled() => Err(McpError::Cancelled),
        r = methods::call(&ctx, method, params) => r,
    };
    match result {
        Ok(reply) => {
            let mut r = json(StatusCode::OK, reply.body);
            if let Some(cc) = reply.cache_control {
                r.headers_mut()
                    .insert(header::CACHE_CONTROL, HeaderValue::from_static(cc));
            }
            r
        }
        Err(McpError::Cancelled) => {
            tracing::info!(request_id = %id.raw(), method, "request cancelled; no response sent");
            cancelled_response()
        }
        Err(e) => {
            let mut r = error_response(app, version, Some(id), e);
            // Whatever the outcome, a resources/list answer stays private.
            if method == "resources/list" && app.pager.has_sources() {
                r.headers_mut().insert(
                    header::CACHE_CONTROL,
                    HeaderValue::from_static(methods::PRIVATE_NO_STORE),
                );
            }
            r
        }
    }
}

/// The session a legacy request names, or the response that refuses it.
fn legacy_session(
    app: &App,
    headers: &HeaderMap,
    id: Option<&RequestId>,
) -> Result<Arc<Session>, HttpResponse> {
    let Some(sid) = header_str(headers, SESSION_HEADER) else {
        return Err(json(
            StatusCode::BAD_REQUEST,
            jsonrpc::error_bytes(
                id,
                jsonrpc::INVALID_REQUEST,
                "Bad Request: Mcp-Session-Id header is required",
                None,
            ),
        ));
    };
    app.sessions.get(sid).ok_or_else(|| {
        json(
            StatusCode::NOT_FOUND,
            jsonrpc::error_bytes(id, -32001, "Session not found", None),
        )
    })
}

/// A legacy `MCP-Protocol-Version` header must name a version we speak.
fn check_legacy_header(
    app: &App,
    headers: &HeaderMap,
    id: Option<&RequestId>,
) -> Result<(), HttpResponse> {
    match header_str(headers, VERSION_HEADER) {
        None => Ok(()),
        Some(h) => match Version::parse(h) {
            Some(v) if !v.is_modern() => Ok(()),
            _ => Err(error_response(
                app,
                Version::V2025_03_26,
                id,
                McpError::UnsupportedVersion {
                    requested: h.to_owned(),
                },
            )),
        },
    }
}

async fn legacy_post(
    app: &App,
    headers: &HeaderMap,
    query: Option<&str>,
    message: Incoming,
    params: Map<String, Value>,
) -> HttpResponse {
    if let Err(r) = check_legacy_header(app, headers, message_id(&message)) {
        return r;
    }
    if let Incoming::Request { id, method, .. } = &message
        && method == "initialize"
    {
        return initialize(app, headers, query, id, &params).await;
    }
    let session = match legacy_session(app, headers, message_id(&message)) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let v = session.version;
    let method = match &message {
        Incoming::Request { method, .. } | Incoming::Notification { method, .. } => method.as_str(),
        Incoming::Response => "",
    };
    let principal = match authorize(app, headers, query, method).await {
        Ok(p) => p,
        Err(e) => return error_response(app, v, message_id(&message), e),
    };
    if !session.admit(principal.as_deref()) {
        tracing::warn!(session = %session.id, "session presented by another caller");
        return json(
            StatusCode::NOT_FOUND,
            jsonrpc::error_bytes(message_id(&message), -32001, "Session not found", None),
        );
    }
    match message {
        Incoming::Response => response(StatusCode::ACCEPTED, None, Vec::new()),
        Incoming::Notification { method, .. } => {
            notification(&session, &method, &params);
            response(StatusCode::ACCEPTED, None, Vec::new())
        }
        Incoming::Request { id, method, .. } => {
            let scope = RequestScope::new(
                Instant::now() + app.config.request_timeout(),
                id.raw(),
                caller_key(principal.as_deref()),
            );
            let _in_flight = session.register(&id, scope.cancel.clone());
            run(app, v, principal.as_deref(), &scope, &id, &method, &params).await
        }
    }
}

fn notification(session: &Session, method: &str, params: &Map<String, Value>) {
    if method == "notifications/cancelled"
        && let Some(id) = params.get("requestId").and_then(RequestId::from_value)
    {
        // "Receivers MAY ignore it if the id is unknown or the request finished."
        if session.cancel(&id) {
            tracing::info!(session = %session.id, request_id = %id.raw(), "cancellation requested");
        }
    }
}

async fn initialize(
    app: &App,
    headers: &HeaderMap,
    query: Option<&str>,
    id: &RequestId,
    params: &Map<String, Value>,
) -> HttpResponse {
    let Some(requested) = params.get("protocolVersion").and_then(Value::as_str) else {
        return error_response(
            app,
            Version::LATEST_LEGACY,
            Some(id),
            McpError::InvalidParams("protocolVersion is required".into()),
        );
    };
    let version = Version::negotiate(requested);
    let principal = match authorize(app, headers, query, "initialize").await {
        Ok(p) => p,
        Err(e) => return error_response(app, version, Some(id), e),
    };
    let session = match app.sessions.create(version, principal.as_deref()) {
        Ok(s) => s,
        Err(refused) => {
            tracing::info!("initialize refused: {refused}");
            return error_response(app, version, Some(id), McpError::Busy(refused.into()));
        }
    };
    let mut r = json(StatusCode::OK, methods::initialize_result(app, id, version));
    r.headers_mut().insert(
        SESSION_HEADER,
        HeaderValue::from_str(&session.id).expect("hex id"),
    );
    tracing::info!(session = %session.id, version = version.as_str(), "session initialized");
    r
}

async fn delete(app: &App, req: Request<Body>) -> HttpResponse {
    let headers = req.headers();
    let session = match legacy_session(app, headers, None) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let principal = app
        .auth
        .authenticate(headers, req.uri().query())
        .await
        .ok()
        .flatten();
    if !session.admit(principal.as_deref()) {
        return json(
            StatusCode::NOT_FOUND,
            jsonrpc::error_bytes(None, -32001, "Session not found", None),
        );
    }
    app.sessions.remove(&session.id);
    tracing::info!(session = %session.id, "session ended by the client");
    response(StatusCode::OK, None, Vec::new())
}

/// 2025-03-26 batches: an array of requests and notifications, answered by
/// an array of responses (202 when it held no request). Other versions
/// reject arrays.
async fn batch(
    app: &App,
    headers: &HeaderMap,
    query: Option<&str>,
    raw: &RawValue,
) -> HttpResponse {
    let invalid = |m: &'static str| {
        error_response(app, Version::V2025_03_26, None, McpError::InvalidRequest(m))
    };
    if header_str(headers, VERSION_HEADER).is_some_and(|h| h != Version::V2025_03_26.as_str()) {
        return invalid("Invalid Request: batches are not supported in this protocol version");
    }
    let items: Vec<Box<RawValue>> = match serde_json::from_str(raw.get()) {
        Ok(i) => i,
        Err(_) => return invalid("Invalid Request"),
    };
    if items.is_empty() {
        return invalid("Invalid Request: empty batch");
    }
    let session = match legacy_session(app, headers, None) {
        Ok(s) => s,
        Err(r) => return r,
    };
    if !session.version.allows_batch() {
        return invalid("Invalid Request: batches are not supported in this protocol version");
    }
    let v = session.version;
    let principal = match app.auth.authenticate(headers, query).await {
        Ok(p) => p,
        Err(error) => {
            return error_response(
                app,
                v,
                None,
                McpError::Unauthorized {
                    error,
                    scopes: app.pager.source_scopes(),
                },
            );
        }
    };
    if !session.admit(principal.as_deref()) {
        return json(
            StatusCode::NOT_FOUND,
            jsonrpc::error_bytes(None, -32001, "Session not found", None),
        );
    }
    let mut responses: Vec<Vec<u8>> = Vec::new();
    for item in &items {
        let message = match jsonrpc::classify(item) {
            Ok(m) => m,
            Err(e) => {
                responses.push(jsonrpc::error_bytes(
                    e.id.as_ref(),
                    jsonrpc::INVALID_REQUEST,
                    e.message,
                    None,
                ));
                continue;
            }
        };
        let params = match parse_params(&message) {
            Ok(p) => p,
            Err(e) => {
                if let Some(id) = message_id(&message) {
                    responses.push(jsonrpc::error_bytes(
                        Some(id),
                        e.code(v),
                        &e.message(),
                        None,
                    ));
                }
                continue;
            }
        };
        match message {
            Incoming::Response => {}
            Incoming::Notification { method, .. } => notification(&session, &method, &params),
            Incoming::Request { id, method, .. } => {
                // "The initialize request MUST NOT be part of a JSON-RPC batch."
                if method == "initialize" {
                    responses.push(jsonrpc::error_bytes(
                        Some(&id),
                        jsonrpc::INVALID_REQUEST,
                        "Invalid Request: initialize cannot be batched",
                        None,
                    ));
                    continue;
                }
                // Auth errors inside a batch cannot carry an HTTP status of
                // their own: the whole batch gets the challenge.
                if let Err(e) = require_token(app, &method, principal.as_deref()) {
                    return error_response(app, v, None, e);
                }
                let scope = RequestScope::new(
                    Instant::now() + app.config.request_timeout(),
                    id.raw(),
                    caller_key(principal.as_deref()),
                );
                let _in_flight = session.register(&id, scope.cancel.clone());
                let ctx = Ctx {
                    app,
                    version: v,
                    principal: principal.as_deref(),
                    scope: &scope,
                    id: &id,
                };
                match methods::call(&ctx, &method, &params).await {
                    Ok(reply) => responses.push(reply.body),
                    Err(McpError::Cancelled) => {}
                    Err(e @ (McpError::Unauthorized { .. } | McpError::Forbidden { .. })) => {
                        return error_response(app, v, Some(&id), e);
                    }
                    Err(e) => responses.push(jsonrpc::error_bytes(
                        Some(&id),
                        e.code(v),
                        &e.message(),
                        e.data().as_ref(),
                    )),
                }
            }
        }
    }
    if responses.is_empty() {
        return response(StatusCode::ACCEPTED, None, Vec::new());
    }
    let mut body = Vec::new();
    jsonrpc::push_array(&mut body, &responses);
    json(StatusCode::OK, body)
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
        assert!(accepts_json(&h));
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        assert!(accepts_json(&h));
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        assert!(!accepts_json(&h));
        h.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        assert!(accepts_json(&h));
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json;q=0"),
        );
        assert!(!accepts_json(&h));
    }

    #[test]
    fn base64_names() {
        assert_eq!(decode_header_value("x://1").as_deref(), Some("x://1"));
        assert_eq!(decode_header_value("=?base64?w6k=?=").as_deref(), Some("é"));
        assert_eq!(decode_header_value("=?base64?***?="), None);
    }
}
