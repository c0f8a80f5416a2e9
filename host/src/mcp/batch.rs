//! 2025-03-26 batches: an array of requests and notifications, answered by
//! an array of responses (202 when it held no request). Other versions
//! reject arrays. Bounded as a whole: at most `max_batch_items` items (the
//! framing refuses more before any runs), ONE deadline for every item, and
//! `max_application_result_bytes` over the whole response. The response's
//! `Cache-Control` is the strictest of its answers' (a listing keeps it
//! private).

use super::App;
use super::caller::Caller;
use super::errors::McpError;
use super::exchange::{self, bind, find_session};
use super::http::headers;
use super::http::{self as h, HttpResponse, cache_control};
use super::jsonrpc::{self, Incoming, RequestId, Violation};
use super::method::{Caching, Method};
use super::methods::Ctx;
use super::model;
use super::pipeline::Stop;
use super::session::Session;
use super::version::Version;
use crate::runtime::RequestScope;
use http::StatusCode;
use http::header::HeaderMap;
use serde_json::value::RawValue;
use std::sync::Arc;
use std::time::Instant;

pub async fn serve(
    app: &App,
    headers: &HeaderMap,
    caller: &Caller,
    items: &[Box<RawValue>],
) -> Result<HttpResponse, Stop> {
    let refuse = |e| Stop::rpc(Version::UNNEGOTIATED, None, e);
    headers::check_batch(headers).map_err(refuse)?;
    let session = find_session(app, headers).map_err(refuse)?;
    if !session.version.allows_batch() {
        return Err(refuse(McpError::InvalidRequest(
            "Invalid Request: batches are not supported in this protocol version",
        )));
    }
    bind(&session, caller).map_err(|e| Stop::rpc(session.version, None, e))?;
    let batch = Batch {
        app,
        session: &session,
        caller,
        deadline: Instant::now() + app.config.request_timeout(),
    };
    let mut out = Answers::new(app.config.max_application_result_bytes);
    for item in items {
        match batch.item(item).await? {
            Answer::Nothing => {}
            Answer::Result { id, body, caching } => {
                out.push_result(session.version, &id, body, caching)
            }
            Answer::Error { body, caching } => out.push(body, caching),
        }
    }
    Ok(out.into_response())
}

/// What the items of one batch share.
struct Batch<'a> {
    app: &'a App,
    session: &'a Arc<Session>,
    caller: &'a Caller,
    /// The one deadline of every item.
    deadline: Instant,
}

enum Answer {
    /// Notifications, responses, cancelled requests.
    Nothing,
    Result {
        id: RequestId,
        body: Vec<u8>,
        caching: Caching,
    },
    Error {
        body: Vec<u8>,
        caching: Caching,
    },
}

impl Batch<'_> {
    fn version(&self) -> Version {
        self.session.version
    }

    fn error(&self, id: Option<&RequestId>, e: McpError, caching: Caching) -> Answer {
        Answer::Error {
            body: e.to_bytes(self.version(), id),
            caching,
        }
    }

    async fn item(&self, raw: &RawValue) -> Result<Answer, Stop> {
        let message = match jsonrpc::classify(raw) {
            Ok(m) => m,
            // Bad params of a notification: nothing to answer.
            Err(invalid)
                if invalid.violation == Violation::ParamsNotAnObject && invalid.id.is_none() =>
            {
                return Ok(Answer::Nothing);
            }
            Err(invalid) => {
                let id = invalid.id.clone();
                return Ok(self.error(id.as_ref(), invalid.into(), Caching::Uncached));
            }
        };
        let (id, method, params) = match message {
            Incoming::Response => return Ok(Answer::Nothing),
            Incoming::Notification { method, params } => {
                exchange::notification(self.session, &method, &params);
                return Ok(Answer::Nothing);
            }
            Incoming::Request { id, method, params } => (id, Method::parse(&method), params),
        };
        let app = self.app;
        if !method.policy().batchable {
            let e = McpError::InvalidRequest("Invalid Request: initialize cannot be batched");
            return Ok(self.error(Some(&id), e, Caching::Uncached));
        }
        // Auth errors inside a batch cannot carry an HTTP status of their
        // own: the whole batch gets the challenge.
        method
            .admit(app, self.caller.principal())
            .map_err(|e| Stop::rpc(self.version(), None, e))?;
        let error_caching = method.error_caching(app);
        if Instant::now() >= self.deadline {
            tracing::warn!(request_id = %id.logged(), "batch deadline passed; item not run");
            return Ok(self.error(Some(&id), McpError::Internal, error_caching));
        }
        let scope = RequestScope::new(self.deadline, id.logged(), self.caller.key())
            .reusing(self.caller.instance_key());
        let _in_flight = self.session.register(&id, scope.cancel.clone());
        let ctx = Ctx {
            app,
            version: self.version(),
            principal: self.caller.principal(),
            scope: &scope,
            id: &id,
        };
        match exchange::run(&ctx, method, &params).await {
            Ok(reply) => Ok(Answer::Result {
                id,
                body: reply.body,
                caching: reply.caching,
            }),
            Err(McpError::Cancelled) => Ok(Answer::Nothing),
            Err(e) if e.is_http_level() => Err(Stop::rpc(self.version(), Some(id), e)),
            Err(e) => Ok(self.error(Some(&id), e, error_caching)),
        }
    }
}

/// The answers so far, within the result-size bound of the whole response.
struct Answers {
    items: Vec<Vec<u8>>,
    /// Bytes of `[` + items + commas + `]`.
    bytes: usize,
    limit: usize,
    caching: Option<Caching>,
}

impl Answers {
    fn new(limit: usize) -> Self {
        Self {
            items: Vec::new(),
            bytes: 2,
            limit,
            caching: None,
        }
    }

    fn push(&mut self, body: Vec<u8>, caching: Caching) {
        self.bytes += body.len() + usize::from(!self.items.is_empty());
        self.items.push(body);
        self.caching = Some(self.caching.map_or(caching, |c| c.strictest(caching)));
    }

    /// A result that would take the response past its bound is answered
    /// with the generic error instead (error objects are small, and there
    /// are at most `max_batch_items` of them).
    fn push_result(&mut self, version: Version, id: &RequestId, body: Vec<u8>, caching: Caching) {
        let cost = body.len() + usize::from(!self.items.is_empty());
        if self.bytes + cost > self.limit {
            tracing::warn!(request_id = %id.logged(), bytes = self.bytes + cost, "batch response would exceed max_application_result_bytes");
            return self.push(McpError::Internal.to_bytes(version, Some(id)), caching);
        }
        self.push(body, caching);
    }

    fn into_response(self) -> HttpResponse {
        let Some(caching) = self.caching else {
            return h::empty(StatusCode::ACCEPTED);
        };
        let mut r = h::json(StatusCode::OK, model::array(&self.items));
        if let Some(cc) = caching.header() {
            cache_control(&mut r, cc);
        }
        r
    }
}
