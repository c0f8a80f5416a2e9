//! Dispatch: the MCP methods this server implements, for every protocol
//! version. Each returns the complete JSON-RPC response bytes and how they
//! may be cached.

use super::App;
use super::errors::McpError;
use super::jsonrpc::RequestId;
use super::method::{Caching, Method};
use super::model::{self, EntriesMark, ListEnvelope, ResultBody, ResultResponse, to_bytes};
use super::version::Version;
use crate::auth::Principal;
use crate::inventory::templates::page_templates;
use crate::inventory::{PageRequest, read};
use crate::runtime::{Access, RequestScope};
use serde::Serialize;
use serde_json::{Map, Value};

/// What a method needs to know about its request.
pub struct Ctx<'a> {
    pub app: &'a App,
    pub version: Version,
    pub principal: Option<&'a Principal>,
    pub scope: &'a RequestScope,
    pub id: &'a RequestId,
}

/// A method's answer: the response bytes and how they may be cached.
pub struct Reply {
    pub body: Vec<u8>,
    pub caching: Caching,
}

impl Ctx<'_> {
    /// The response bytes of `body` with the version's extras.
    fn serialize<T: Serialize>(&self, body: T, caching: Caching) -> Vec<u8> {
        to_bytes(&ResultResponse::new(
            self.id.as_raw_value(),
            ResultBody::new(self.version, body, caching.fields()),
        ))
    }

    /// The response of a list result, with the version's extras, around an
    /// empty entries array.
    fn list_envelope<T: Serialize>(
        &self,
        body: impl FnOnce(EntriesMark) -> T,
        caching: Caching,
    ) -> ListEnvelope {
        ListEnvelope::new(|entries| {
            ResultResponse::new(
                self.id.as_raw_value(),
                ResultBody::new(self.version, body(entries), caching.fields()),
            )
        })
    }

    /// A whole result, bounded: "maxApplicationResultBytes ... bound response bytes."
    fn reply<T: Serialize>(&self, body: T, caching: Caching) -> Result<Reply, McpError> {
        self.bounded(self.serialize(body, caching), caching)
    }

    fn bounded(&self, body: Vec<u8>, caching: Caching) -> Result<Reply, McpError> {
        if body.len() > self.app.config.max_application_result_bytes {
            tracing::warn!(request_id = %self.id.logged(), bytes = body.len(), "result exceeds max_application_result_bytes");
            return Err(McpError::Internal);
        }
        Ok(Reply { body, caching })
    }
}

fn cursor_param(params: &Map<String, Value>) -> Result<Option<&str>, McpError> {
    match params.get("cursor") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        // A cursor that is not even a string is still just an invalid cursor.
        Some(_) => Err(McpError::InvalidCursor),
    }
}

pub async fn call(
    ctx: &Ctx<'_>,
    method: Method,
    params: &Map<String, Value>,
) -> Result<Reply, McpError> {
    if !method.available_in(ctx.version) {
        return Err(McpError::MethodNotFound);
    }
    let app = ctx.app;
    let caching = Caching::of(method, app, false);
    match method {
        Method::Ping => ctx.reply(model::Empty {}, caching),
        Method::SetLevel => set_level(ctx, params, caching),
        Method::Discover => ctx.reply(
            model::DiscoverResult {
                // A dual-era server: the same list as -32022's `data.supported`
                // (the legacy versions are reached through `initialize`).
                supported_versions: Version::supported_strings(),
                capabilities: model::Capabilities::of(ctx.version),
                instructions: app.config.instructions.as_deref(),
            },
            caching,
        ),
        Method::ListResources => list_resources(ctx, params, caching).await,
        Method::ListTemplates => list_templates(ctx, params, caching),
        Method::Read => read_resource(ctx, params).await,
        // `initialize` is the handshake, served before a session exists.
        Method::Initialize | Method::Unknown => Err(McpError::MethodNotFound),
    }
}

fn set_level(ctx: &Ctx, params: &Map<String, Value>, caching: Caching) -> Result<Reply, McpError> {
    const LEVELS: [&str; 8] = [
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ];
    match params.get("level").and_then(Value::as_str) {
        Some(l) if LEVELS.contains(&l) => ctx.reply(model::Empty {}, caching),
        _ => Err(McpError::InvalidParams(
            "level must be one of the RFC 5424 levels".into(),
        )),
    }
}

fn list_templates(
    ctx: &Ctx,
    params: &Map<String, Value>,
    caching: Caching,
) -> Result<Reply, McpError> {
    let app = ctx.app;
    let envelope = ctx.list_envelope(
        |resource_templates| model::ListTemplatesResult { resource_templates },
        caching,
    );
    // Everything but the entries and the cursor, measured on the real bytes.
    let budget = app.config.page_byte_limit().saturating_sub(envelope.len());
    let page = page_templates(
        &app.template_listing,
        &app.keys,
        &app.sources.fingerprint,
        cursor_param(params)?,
        app.config.list_pagination.page_size,
        budget,
    )?;
    ctx.bounded(
        envelope.fill(page.joined(), page.next_cursor.as_deref()),
        caching,
    )
}

async fn list_resources(
    ctx: &Ctx<'_>,
    params: &Map<String, Value>,
    caching: Caching,
) -> Result<Reply, McpError> {
    let app = ctx.app;
    let envelope = ctx.list_envelope(
        |resources| model::ListResourcesResult { resources },
        caching,
    );
    let page = app
        .pager
        .page(PageRequest {
            principal: ctx.principal,
            cursor: cursor_param(params)?,
            envelope_bytes: envelope.len(),
            scope: ctx.scope,
        })
        .await
        .map_err(|e| {
            if !matches!(e, crate::inventory::ListError::NoAccessibleSource { .. }) {
                tracing::warn!(request_id = %ctx.id.logged(), "resources/list failed: {e}");
            }
            McpError::from(e)
        })?;
    let reply = ctx.bounded(
        envelope.fill(page.joined(), page.next_cursor.as_deref()),
        caching,
    )?;
    if reply.body.len() > app.config.page_byte_limit() {
        // The pager budgets exactly; this is a bug guard, not a code path.
        tracing::error!(request_id = %ctx.id.logged(), bytes = reply.body.len(), "resources/list page exceeds its byte limit");
        return Err(McpError::Internal);
    }
    let m = crate::telemetry::metrics();
    m.page_entries.observe(page.len() as f64);
    m.page_bytes.observe(reply.body.len() as f64);
    Ok(reply)
}

async fn read_resource(ctx: &Ctx<'_>, params: &Map<String, Value>) -> Result<Reply, McpError> {
    let app = ctx.app;
    let Some(Value::String(uri)) = params.get("uri") else {
        return Err(McpError::InvalidParams("uri (a string) is required".into()));
    };
    let contents = read::read(
        &app.statics,
        &app.sources.sources,
        uri,
        ctx.principal,
        ctx.scope,
        app.config.max_read_bytes,
    )
    .await
    .map_err(|e| {
        match &e {
            read::ReadError::NotFound
            | read::ReadError::UriTooLong
            | read::ReadError::Unauthenticated { .. }
            | read::ReadError::InsufficientScope { .. } => {}
            _ => tracing::warn!(request_id = %ctx.id.logged(), "resources/read failed: {e}"),
        }
        McpError::from_read(e, uri)
    })?;
    let public = app
        .statics
        .get(uri)
        .is_some_and(|s| s.access == Access::Public);
    ctx.reply(
        model::ReadResult {
            contents: &contents,
        },
        Caching::of(Method::Read, app, public),
    )
}

/// The `initialize` result for a negotiated version.
pub fn initialize_result(app: &App, id: &RequestId, version: Version) -> Vec<u8> {
    to_bytes(&ResultResponse::new(
        id.as_raw_value(),
        model::InitializeResult {
            protocol_version: version.as_str(),
            capabilities: model::Capabilities::of(version),
            server_info: model::SERVER_INFO,
            instructions: app.config.instructions.as_deref(),
        },
    ))
}
