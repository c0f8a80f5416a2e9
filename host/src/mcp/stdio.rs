//! MCP over stdio: newline-delimited JSON-RPC on stdin/stdout, one client
//! per process, through the same pieces as Streamable HTTP (framing,
//! `Method` policy, authentication by `caller`, dispatch by `exchange::run`,
//! sessions for `notifications/cancelled`, the one error mapping). Only
//! JSON-RPC messages go to stdout; the log stays on stderr.
//! (Over 500 lines: the stdio transport's reader, dispatch and writer share
//! one connection's state; the rest is its tests.)
//!
//! The MCP specification says stdio servers take credentials from the
//! environment: the caller's bearer token is [`TOKEN_ENV`]. It is verified
//! by the configured verifier at start and then through the token cache,
//! which keeps it until its `exp`, so it is verified again once it expires.
//! Without a valid token the process keeps serving what needs none, and
//! listings fail with a clear error.
//!
//! 2026-07-28 has no handshake: a request whose `_meta` names that version
//! (and the client's capabilities) is served without `initialize`, and
//! `notifications/cancelled` reaches it through the connection's own table
//! of such requests.
//!
//! End of stdin or SIGTERM/SIGINT: stop reading, let in-flight requests end
//! within `http.shutdown_grace_ms`, cancel the rest, flush, return.
//!
//! (Over 500 lines: the whole stdio front end, reader, in-flight bound,
//! cancellation and one writer, reads as one loop; about 45 are tests.)

use super::App;
use super::caller::{self, Caller};
use super::errors::McpError;
use super::exchange;
use super::http::headers::{META_CAPABILITIES, META_VERSION};
use super::jsonrpc::{self, Frame, Incoming, RequestId};
use super::method::Method;
use super::methods::{self, Ctx};
use super::model::{ErrorObject, ErrorResponse, to_bytes};
use super::session::Session;
use super::version::Version;
use crate::runtime::RequestScope;
use http::HeaderMap;
use http::header::{AUTHORIZATION, HeaderValue};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// `emseepea stdio`: requests of the one client running at once (and
/// answers waiting for stdout). Reading stdin pauses at this bound, so a
/// client that never reads its answers cannot grow the host's memory.
pub const STDIO_MAX_IN_FLIGHT: usize = 64;

/// The environment variable that carries the caller's bearer token.
pub const TOKEN_ENV: &str = "EMSEEPEA_TOKEN";

#[derive(Debug, thiserror::Error)]
pub enum StdioError {
    #[error("{TOKEN_ENV} is not a valid header value (it must be visible ASCII)")]
    TokenNotAscii,
    #[error("reading stdin: {0}")]
    Read(std::io::Error),
}

/// The token from the environment, as the `Authorization` header the
/// shared authentication reads.
pub struct Credentials {
    headers: HeaderMap,
}

impl Credentials {
    pub fn new(token: Option<&str>) -> Result<Self, StdioError> {
        let mut headers = HeaderMap::new();
        if let Some(t) = token.map(str::trim).filter(|t| !t.is_empty()) {
            let v = HeaderValue::from_str(&format!("Bearer {t}"))
                .map_err(|_| StdioError::TokenNotAscii)?;
            headers.insert(AUTHORIZATION, v);
        }
        Ok(Self { headers })
    }

    pub fn from_env() -> Result<Self, StdioError> {
        Self::new(std::env::var(TOKEN_ENV).ok().as_deref())
    }

    /// Who is asking now. A refused token (expired, bad signature, verifier
    /// down) leaves the caller anonymous: over stdio there is no other
    /// caller to protect from, and what needs no token keeps working.
    pub async fn caller(&self, app: &App) -> Caller {
        caller::authenticate(app, &self.headers, None, None)
            .await
            .unwrap_or(Caller::Anonymous)
    }

    fn presented(&self) -> bool {
        self.headers.contains_key(AUTHORIZATION)
    }
}

/// Serve one client on stdin/stdout (`server::stdio` builds the app).
pub async fn serve(app: Arc<App>, credentials: Credentials) -> anyhow::Result<()> {
    announce(&app, &credentials).await;
    let stdin = BufReader::new(tokio::io::stdin());
    run(
        app,
        credentials,
        stdin,
        tokio::io::stdout(),
        shutdown_signal(),
    )
    .await?;
    Ok(())
}

/// The verification at start, on stderr.
async fn announce(app: &App, credentials: &Credentials) {
    let sources = app.sources.sources.len();
    match (credentials.presented(), credentials.caller(app).await) {
        (_, Caller::Verified(p)) => tracing::info!(
            sources,
            client_id = ?crate::guest_text::GuestText::new(&p.client_id),
            "serving MCP on stdio; {TOKEN_ENV} verified"
        ),
        (true, Caller::Anonymous) => tracing::warn!(
            sources,
            "serving MCP on stdio; {TOKEN_ENV} was refused (see above): requests that need a token will fail"
        ),
        (false, Caller::Anonymous) => tracing::info!(
            sources,
            "serving MCP on stdio without a token ({TOKEN_ENV} unset)"
        ),
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM"),
        _ = int.recv() => tracing::info!("SIGINT"),
    }
}

/// The one client's state: its session (made by `initialize`), and its
/// 2026-07-28 requests in flight (those have no session).
struct Conn {
    app: Arc<App>,
    credentials: Credentials,
    session: Mutex<Option<Arc<Session>>>,
    stateless: Mutex<HashMap<RequestId, CancellationToken>>,
    out: mpsc::Sender<Vec<u8>>,
}

/// A 2026-07-28 request `notifications/cancelled` can reach until it ends.
struct Stateless<'a> {
    conn: &'a Conn,
    id: RequestId,
}

impl Drop for Stateless<'_> {
    fn drop(&mut self) {
        self.conn.stateless.lock().unwrap().remove(&self.id);
    }
}

impl Conn {
    fn register(&self, id: &RequestId, token: CancellationToken) -> Stateless<'_> {
        self.stateless.lock().unwrap().insert(id.clone(), token);
        Stateless {
            conn: self,
            id: id.clone(),
        }
    }

    /// A client notification: a cancellation reaches a request of the
    /// session or a 2026-07-28 one.
    fn notify(&self, method: &str, params: &Map<String, Value>) {
        if let Some(s) = self.session() {
            exchange::notification(&s, method, params);
        }
        if method == "notifications/cancelled"
            && let Some(id) = params.get("requestId").and_then(RequestId::from_value)
            && let Some(token) = self.stateless.lock().unwrap().get(&id)
        {
            token.cancel();
            tracing::info!(request_id = %id.logged(), "cancellation requested");
        }
    }

    fn session(&self) -> Option<Arc<Session>> {
        self.session.lock().unwrap().clone()
    }

    fn version(&self) -> Version {
        self.session().map_or(Version::UNNEGOTIATED, |s| s.version)
    }

    async fn send(&self, bytes: Vec<u8>) {
        // The writer ends only after every sender is gone.
        let _ = self.out.send(bytes).await;
    }
}

/// Serve until `input` ends or `stop` completes, then drain.
pub async fn run<R, W, S>(
    app: Arc<App>,
    credentials: Credentials,
    mut input: R,
    output: W,
    stop: S,
) -> Result<(), StdioError>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
    S: std::future::Future<Output = ()>,
{
    let (tx, rx) = mpsc::channel(STDIO_MAX_IN_FLIGHT);
    let writer = tokio::spawn(write_all(rx, output));
    let conn = Arc::new(Conn {
        app,
        credentials,
        session: Mutex::new(None),
        stateless: Mutex::default(),
        out: tx,
    });
    let permits = Arc::new(Semaphore::new(STDIO_MAX_IN_FLIGHT));
    let mut tasks = JoinSet::new();
    let mut stop = std::pin::pin!(stop);
    let read_result = loop {
        while tasks.try_join_next().is_some() {}
        // The trust a message gets decides how much of it is read.
        let limit = caller::body_limit(&conn.app, &conn.credentials.caller(&conn.app).await);
        let line = tokio::select! {
            line = next_line(&mut input, limit) => line,
            _ = &mut stop => break Ok(()),
        };
        match line {
            Err(e) => break Err(StdioError::Read(e)),
            Ok(Line::End) => {
                tracing::info!("stdin closed");
                break Ok(());
            }
            Ok(Line::TooLong) => {
                tracing::warn!(limit, "stdio message longer than the body limit; skipped");
                let e = McpError::InvalidRequest("Invalid Request: message too large");
                conn.send(e.to_bytes(conn.version(), None)).await;
            }
            Ok(Line::Message(bytes)) => {
                if let Some(work) = frame(&conn, &bytes).await {
                    let permit = permits.clone().acquire_owned().await.expect("never closed");
                    let conn = conn.clone();
                    tasks.spawn(async move {
                        if let Some(reply) = work.run(&conn).await {
                            conn.send(reply).await;
                        }
                        drop(permit);
                    });
                }
            }
        }
    };
    drain(&conn, &mut tasks).await;
    drop(conn);
    let _ = writer.await;
    read_result
}

/// In-flight requests end within the grace period; then they are cancelled.
async fn drain(conn: &Conn, tasks: &mut JoinSet<()>) {
    let grace = Duration::from_millis(conn.app.config.http.shutdown_grace_ms);
    if !tasks.is_empty() {
        tracing::info!(
            "shutting down: waiting up to {grace:?} for {} in-flight requests",
            tasks.len()
        );
    }
    let all = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(grace, all).await.is_err() {
        tracing::warn!("grace period over; cancelling remaining requests");
        if let Some(s) = conn.session() {
            conn.app.sessions.remove(&s.id);
        }
        tasks.shutdown().await;
    }
}

async fn write_all<W: AsyncWrite + Unpin>(mut rx: mpsc::Receiver<Vec<u8>>, mut out: W) {
    while let Some(mut msg) = rx.recv().await {
        // Serialized JSON has no raw newline, so one message is one line.
        msg.push(b'\n');
        if let Err(e) = async {
            out.write_all(&msg).await?;
            out.flush().await
        }
        .await
        {
            tracing::warn!("stdout closed: {e}");
            return;
        }
    }
}

/// One line of input.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    Message(Vec<u8>),
    /// Longer than the limit: skipped to its newline, never buffered whole.
    TooLong,
    End,
}

async fn next_line<R: AsyncBufRead + Unpin>(r: &mut R, limit: usize) -> std::io::Result<Line> {
    let mut buf = Vec::new();
    let mut too_long = false;
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(match (too_long, buf.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::End,
                (false, false) => Line::Message(buf),
            });
        }
        let newline = chunk.iter().position(|&b| b == b'\n');
        let take = newline.unwrap_or(chunk.len());
        if !too_long && buf.len() + take > limit {
            too_long = true;
            buf = Vec::new();
        }
        if !too_long {
            buf.extend_from_slice(&chunk[..take]);
        }
        r.consume(take + usize::from(newline.is_some()));
        if newline.is_some() {
            if too_long {
                return Ok(Line::TooLong);
            }
            if buf.iter().all(u8::is_ascii_whitespace) {
                // Blank lines carry nothing.
                buf.clear();
                continue;
            }
            return Ok(Line::Message(buf));
        }
    }
}

/// What a line asks for, once framed: run concurrently with later lines so
/// a `notifications/cancelled` can reach it.
enum Work {
    Single(Box<serde_json::value::RawValue>),
    Batch(Vec<Box<serde_json::value::RawValue>>),
}

/// Frame a line; notifications and framing errors are handled here, in
/// order (a cancellation must not wait behind the request it cancels).
async fn frame(conn: &Conn, bytes: &[u8]) -> Option<Work> {
    let app = &conn.app;
    let frame = match jsonrpc::split(bytes, app.config.http.max_batch_items) {
        Ok(f) => f,
        Err(e) => {
            let e: McpError = e.into();
            conn.send(e.to_bytes(conn.version(), None)).await;
            return None;
        }
    };
    match frame {
        Frame::Single(raw) => match jsonrpc::classify(&raw) {
            Ok(Incoming::Notification { method, params }) => {
                conn.notify(&method, &params);
                None
            }
            Ok(Incoming::Response) => None,
            _ => Some(Work::Single(raw)),
        },
        Frame::Batch(items) => Some(Work::Batch(items)),
    }
}

impl Work {
    async fn run(self, conn: &Conn) -> Option<Vec<u8>> {
        let deadline = Instant::now() + conn.app.config.request_timeout();
        match self {
            Work::Single(raw) => message(conn, &raw, deadline).await,
            Work::Batch(items) => batch(conn, &items, deadline).await,
        }
    }
}

/// 2025-03-26 batches: the items in order, under one deadline, answered as
/// one array (nothing when no item was a request).
async fn batch(
    conn: &Conn,
    items: &[Box<serde_json::value::RawValue>],
    deadline: Instant,
) -> Option<Vec<u8>> {
    if !conn.version().allows_batch() || conn.session().is_none() {
        let e = McpError::InvalidRequest(
            "Invalid Request: batches are not supported in this protocol version",
        );
        return Some(e.to_bytes(conn.version(), None));
    }
    let mut answers: Vec<Vec<u8>> = Vec::new();
    let mut bytes = 2;
    for item in items {
        if let Some(a) = message(conn, item, deadline).await {
            bytes += a.len() + 1;
            if bytes > conn.app.config.max_application_result_bytes {
                tracing::warn!(
                    bytes,
                    "batch response would exceed max_application_result_bytes"
                );
                return Some(McpError::Internal.to_bytes(conn.version(), None));
            }
            answers.push(a);
        }
    }
    (!answers.is_empty()).then(|| {
        let mut out = b"[".to_vec();
        out.extend(answers.join(&b","[..]));
        out.push(b']');
        out
    })
}

/// One message: its answer, or nothing (notifications, responses,
/// cancelled requests).
async fn message(
    conn: &Conn,
    raw: &serde_json::value::RawValue,
    deadline: Instant,
) -> Option<Vec<u8>> {
    let version = conn.version();
    let (id, method, params) = match jsonrpc::classify(raw) {
        Ok(Incoming::Request { id, method, params }) => (id, Method::parse(&method), params),
        Ok(Incoming::Notification { method, params }) => {
            conn.notify(&method, &params);
            return None;
        }
        Ok(Incoming::Response) => return None,
        Err(invalid) => {
            let id = invalid.id.clone();
            return Some(McpError::from(invalid).to_bytes(version, id.as_ref()));
        }
    };
    let caller = conn.credentials.caller(&conn.app).await;
    match request(conn, &caller, &id, method, &params, deadline).await {
        Ok(body) => Some(body),
        Err((_, McpError::Cancelled)) => {
            tracing::info!(request_id = %id.logged(), method = method.policy().name, "request cancelled; no response sent");
            None
        }
        Err((v, e)) => Some(error_bytes(&e, v, &id)),
    }
}

async fn request(
    conn: &Conn,
    caller: &Caller,
    id: &RequestId,
    method: Method,
    params: &Map<String, Value>,
    deadline: Instant,
) -> Result<Vec<u8>, (Version, McpError)> {
    let app = &*conn.app;
    if let Some(version) = stateless_version(params) {
        return stateless(conn, caller, id, method, params, deadline, version?).await;
    }
    if method == Method::Initialize {
        let Some(requested) = params.get("protocolVersion").and_then(Value::as_str) else {
            return Err((
                Version::LATEST_LEGACY,
                McpError::InvalidParams("protocolVersion is required".into()),
            ));
        };
        let version = Version::negotiate(requested);
        method
            .admit(app, caller.principal())
            .map_err(|e| (version, e))?;
        // One client per process: a new handshake replaces the session.
        let session = app
            .sessions
            .create(version, None)
            .map_err(|refused| (version, McpError::Busy(refused.into())))?;
        if let Some(old) = conn.session.lock().unwrap().replace(session) {
            app.sessions.remove(&old.id);
        }
        tracing::info!(version = version.as_str(), "stdio session initialized");
        return Ok(methods::initialize_result(app, id, version));
    }
    let Some(session) = conn.session() else {
        return Err((
            Version::UNNEGOTIATED,
            McpError::InvalidRequest("Invalid Request: send initialize first"),
        ));
    };
    let version = session.version;
    method
        .admit(app, caller.principal())
        .map_err(|e| (version, e))?;
    if Instant::now() >= deadline {
        tracing::warn!(request_id = %id.logged(), "batch deadline passed; item not run");
        return Err((version, McpError::Internal));
    }
    let scope =
        RequestScope::new(deadline, id.logged(), caller.key()).reusing(caller.instance_key());
    let _in_flight = session.register(id, scope.cancel.clone());
    let ctx = Ctx {
        app,
        version,
        principal: caller.principal(),
        scope: &scope,
        id,
    };
    exchange::run(&ctx, method, params)
        .await
        .map(|reply| reply.body)
        .map_err(|e| (version, e))
}

/// The version a 2026-07-28 request names in `_meta`; `None` for a request
/// of the handshake eras (no version there).
fn stateless_version(params: &Map<String, Value>) -> Option<Result<Version, (Version, McpError)>> {
    let meta = params.get("_meta").and_then(Value::as_object)?;
    let requested = meta.get(META_VERSION)?;
    let fail = |e| Some(Err((Version::STATELESS, e)));
    let Some(version) = requested
        .as_str()
        .and_then(Version::parse)
        .filter(|v| v.is_stateless())
    else {
        return fail(McpError::UnsupportedVersion {
            requested: requested
                .as_str()
                .map_or_else(|| requested.to_string(), String::from),
        });
    };
    if !meta.get(META_CAPABILITIES).is_some_and(Value::is_object) {
        return fail(McpError::MissingMeta(META_CAPABILITIES));
    }
    Some(Ok(version))
}

/// One 2026-07-28 request: no session, cancellable by id.
async fn stateless(
    conn: &Conn,
    caller: &Caller,
    id: &RequestId,
    method: Method,
    params: &Map<String, Value>,
    deadline: Instant,
    version: Version,
) -> Result<Vec<u8>, (Version, McpError)> {
    let app = &*conn.app;
    method
        .admit(app, caller.principal())
        .map_err(|e| (version, e))?;
    let scope =
        RequestScope::new(deadline, id.logged(), caller.key()).reusing(caller.instance_key());
    let _in_flight = conn.register(id, scope.cancel.clone());
    let ctx = Ctx {
        app,
        version,
        principal: caller.principal(),
        scope: &scope,
        id,
    };
    exchange::run(&ctx, method, params)
        .await
        .map(|reply| reply.body)
        .map_err(|e| (version, e))
}

/// Errors as JSON-RPC error responses. Over HTTP, 401/403 are OAuth
/// challenges; stdio has no such flow, so they say what to fix.
fn error_bytes(e: &McpError, version: Version, id: &RequestId) -> Vec<u8> {
    let (message, data) = match e {
        McpError::Unauthorized { scopes, .. } => (
            format!("Unauthorized: this request needs a valid bearer token in {TOKEN_ENV}"),
            json!({ "reason": "unauthorized", "scopes": scopes }),
        ),
        McpError::Forbidden { scopes } => (
            format!("Forbidden: the token in {TOKEN_ENV} lacks a required scope"),
            json!({ "reason": "insufficient_scope", "scopes": scopes }),
        ),
        _ => return e.to_bytes(version, Some(id)),
    };
    to_bytes(&ErrorResponse::new(
        Some(id.as_raw_value()),
        ErrorObject {
            code: e.code(version),
            message: &message,
            data: Some(&data),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], limit: usize) -> Vec<Line> {
        // A tiny buffer: lines cross chunk boundaries.
        let mut r = tokio::io::BufReader::with_capacity(3, input);
        let mut out = Vec::new();
        loop {
            let l = next_line(&mut r, limit).await.unwrap();
            let end = l == Line::End;
            out.push(l);
            if end {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn lines_are_bounded_and_skipped_whole() {
        let got = lines(b"{\"a\":1}\n\n  \n0123456789\n{}\r\nlast", 8).await;
        assert_eq!(
            got,
            [
                Line::Message(b"{\"a\":1}".to_vec()),
                Line::TooLong,
                Line::Message(b"{}\r".to_vec()),
                Line::Message(b"last".to_vec()),
                Line::End,
            ]
        );
        // Just under and just over the limit.
        assert_eq!(
            lines(b"12345678\n", 8).await[0],
            Line::Message(b"12345678".to_vec())
        );
        assert_eq!(lines(b"123456789\n", 8).await[0], Line::TooLong);
        assert_eq!(lines(b"123456789", 8).await[0], Line::TooLong);
    }

    #[test]
    fn a_token_that_is_not_a_header_value_is_refused() {
        assert!(Credentials::new(Some("a\nb")).is_err());
        assert!(!Credentials::new(Some("  ")).unwrap().presented());
        assert!(Credentials::new(Some("abc")).unwrap().presented());
    }
}
