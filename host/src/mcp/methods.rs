//! The MCP methods this server implements, for every protocol version.
//! Each returns the complete JSON-RPC response bytes.

use super::App;
use super::errors::McpError;
use super::jsonrpc::{RequestId, result_bytes, result_envelope_len};
use super::version::Version;
use crate::auth::Principal;
use crate::inventory::templates::page_templates;
use crate::inventory::{PageRequest, read};
use crate::runtime::RequestScope;
use serde_json::{Map, Value, json};

/// What a method needs to know about its request.
pub struct Ctx<'a> {
    pub app: &'a App,
    pub version: Version,
    pub principal: Option<&'a Principal>,
    pub scope: &'a RequestScope,
    pub id: &'a RequestId,
}

/// A method's answer: the response bytes and, for private results, a
/// `Cache-Control` header.
pub struct Reply {
    pub body: Vec<u8>,
    pub cache_control: Option<&'static str>,
}

/// "The response is private and has a zero cache lifetime."
pub const PRIVATE_NO_STORE: &str = "private, max-age=0, no-store";

#[derive(Clone, Copy)]
struct Caching {
    ttl_ms: u64,
    private: bool,
}

const PRIVATE: Caching = Caching {
    ttl_ms: 0,
    private: true,
};

pub fn server_info() -> Value {
    json!({ "name": "emseepea", "title": "emseepea", "version": env!("CARGO_PKG_VERSION") })
}

fn capabilities(version: Version) -> Value {
    let mut caps = json!({ "resources": { "subscribe": false, "listChanged": false } });
    // Logging exists (as `logging/setLevel`) only before 2026-07-28, where it
    // is deprecated; we never emit log notifications either way.
    if !version.is_modern() {
        caps["logging"] = json!({});
    }
    caps
}

/// The fields 2026-07-28 adds to every result, as `,"k":v...` bytes.
fn modern_extras(version: Version, caching: Option<Caching>) -> Vec<u8> {
    if !version.is_modern() {
        return Vec::new();
    }
    let mut m = Map::new();
    m.insert("resultType".into(), json!("complete"));
    if let Some(c) = caching {
        m.insert("ttlMs".into(), json!(c.ttl_ms));
        m.insert(
            "cacheScope".into(),
            json!(if c.private { "private" } else { "public" }),
        );
    }
    m.insert(
        "_meta".into(),
        json!({ "io.modelcontextprotocol/serverInfo": server_info() }),
    );
    let bytes = serde_json::to_vec(&Value::Object(m)).expect("serializable");
    // Strip the braces: `{"a":1}` -> `,"a":1`.
    let mut out = Vec::with_capacity(bytes.len());
    out.push(b',');
    out.extend_from_slice(&bytes[1..bytes.len() - 1]);
    out
}

/// A result object plus the version's extras, wrapped in a response.
fn respond(
    ctx: &Ctx,
    fields: Map<String, Value>,
    caching: Option<Caching>,
) -> Result<Vec<u8>, McpError> {
    let mut body = serde_json::to_vec(&Value::Object(fields)).expect("serializable");
    let extras = modern_extras(ctx.version, caching);
    if !extras.is_empty() {
        body.pop();
        if body.len() == 1 {
            // `{` + `,"k":v` would start with a comma: drop it.
            body.extend_from_slice(&extras[1..]);
        } else {
            body.extend_from_slice(&extras);
        }
        body.push(b'}');
    }
    let response = result_bytes(ctx.id, &body);
    // "maxApplicationResultBytes ... bound response bytes."
    if response.len() > ctx.app.config.max_application_result_bytes {
        tracing::warn!(request_id = %ctx.id.raw(), bytes = response.len(), "result exceeds max_application_result_bytes");
        return Err(McpError::Internal);
    }
    Ok(response)
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
    method: &str,
    params: &Map<String, Value>,
) -> Result<Reply, McpError> {
    let plain = |body| {
        Ok(Reply {
            body,
            cache_control: None,
        })
    };
    match (method, ctx.version.is_modern()) {
        ("ping", false) => plain(respond(ctx, Map::new(), None)?),
        ("logging/setLevel", false) => {
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
                Some(l) if LEVELS.contains(&l) => plain(respond(ctx, Map::new(), None)?),
                _ => Err(McpError::InvalidParams(
                    "level must be one of the RFC 5424 levels".into(),
                )),
            }
        }
        ("server/discover", true) => {
            let mut m = Map::new();
            // A dual-era server: the same list as -32022's `data.supported`
            // (the legacy versions are reached through `initialize`).
            m.insert(
                "supportedVersions".into(),
                json!(Version::supported_strings()),
            );
            m.insert("capabilities".into(), capabilities(ctx.version));
            if let Some(i) = &ctx.app.config.instructions {
                m.insert("instructions".into(), json!(i));
            }
            plain(respond(
                ctx,
                m,
                Some(Caching {
                    ttl_ms: 3_600_000,
                    private: false,
                }),
            )?)
        }
        ("resources/list", _) => list_resources(ctx, params).await,
        ("resources/templates/list", _) => {
            let extras = modern_extras(
                ctx.version,
                Some(Caching {
                    ttl_ms: 300_000,
                    private: false,
                }),
            );
            let budget = ctx.app.config.page_byte_limit().saturating_sub(
                result_envelope_len(ctx.id) + br#"{"resourceTemplates":[]}"#.len() + extras.len(),
            );
            let page = page_templates(
                &ctx.app.template_listing,
                &ctx.app.keys,
                &ctx.app.sources.fingerprint,
                ctx.principal,
                cursor_param(params)?,
                ctx.app.config.list_pagination.page_size,
                budget,
            )?;
            plain(assemble(
                ctx.id,
                "resourceTemplates",
                &page.entries,
                page.next_cursor.as_deref(),
                &extras,
            ))
        }
        ("resources/read", _) => {
            let uri = match params.get("uri") {
                Some(Value::String(u)) => u.as_str(),
                _ => return Err(McpError::InvalidParams("uri (a string) is required".into())),
            };
            let contents = read::read(
                &ctx.app.statics,
                &ctx.app.sources.sources,
                uri,
                ctx.principal,
                ctx.scope,
                ctx.app.config.max_read_bytes,
            )
            .await
            .map_err(|e| {
                match &e {
                    read::ReadError::NotFound
                    | read::ReadError::UriTooLong
                    | read::ReadError::Unauthenticated { .. }
                    | read::ReadError::InsufficientScope { .. } => {}
                    _ => tracing::warn!(request_id = %ctx.id.raw(), "resources/read failed: {e}"),
                }
                McpError::from_read(e, uri)
            })?;
            let public = ctx
                .app
                .statics
                .get(uri)
                .is_some_and(|s| s.access == crate::runtime::Access::Public);
            let mut m = Map::new();
            m.insert(
                "contents".into(),
                serde_json::to_value(&contents).expect("serializable"),
            );
            let caching = if public {
                Caching {
                    ttl_ms: 0,
                    private: false,
                }
            } else {
                PRIVATE
            };
            let body = respond(ctx, m, Some(caching))?;
            Ok(Reply {
                body,
                cache_control: (!public).then_some(PRIVATE_NO_STORE),
            })
        }
        _ => Err(McpError::MethodNotFound),
    }
}

/// `{"<field>":[e1,e2,...],"nextCursor":"..."<extras>}` wrapped in a response.
fn assemble(
    id: &RequestId,
    field: &str,
    entries: &[Vec<u8>],
    cursor: Option<&str>,
    extras: &[u8],
) -> Vec<u8> {
    let size: usize = entries.iter().map(|e| e.len() + 1).sum::<usize>()
        + cursor.map_or(0, |c| c.len() + 16)
        + extras.len()
        + 32;
    let mut result = Vec::with_capacity(size);
    result.extend_from_slice(b"{\"");
    result.extend_from_slice(field.as_bytes());
    result.extend_from_slice(b"\":");
    super::jsonrpc::push_array(&mut result, entries);
    if let Some(c) = cursor {
        result.extend_from_slice(b",\"nextCursor\":\"");
        result.extend_from_slice(c.as_bytes());
        result.push(b'"');
    }
    result.extend_from_slice(extras);
    result.push(b'}');
    result_bytes(id, &result)
}

async fn list_resources(ctx: &Ctx<'_>, params: &Map<String, Value>) -> Result<Reply, McpError> {
    let app = ctx.app;
    // Listings that depend on who asks are private, with a zero lifetime.
    let private = app.pager.has_sources() || app.auth.enabled();
    let caching = if private {
        PRIVATE
    } else {
        Caching {
            ttl_ms: 0,
            private: false,
        }
    };
    let extras = modern_extras(ctx.version, Some(caching));
    // Everything but the entries and the cursor, measured on the real bytes.
    let envelope_bytes = assemble(ctx.id, "resources", &[], None, &extras).len();
    let page = app
        .pager
        .page(PageRequest {
            principal: ctx.principal,
            cursor: cursor_param(params)?,
            envelope_bytes,
            scope: ctx.scope,
        })
        .await
        .map_err(|e| {
            if !matches!(e, crate::inventory::ListError::NoAccessibleSource { .. }) {
                tracing::warn!(request_id = %ctx.id.raw(), "resources/list failed: {e}");
            }
            McpError::from(e)
        })?;
    let body = assemble(
        ctx.id,
        "resources",
        &page.entries,
        page.next_cursor.as_deref(),
        &extras,
    );
    if body.len() > app.config.page_byte_limit() {
        // The pager budgets exactly; this is a bug guard, not a code path.
        tracing::error!(request_id = %ctx.id.raw(), bytes = body.len(), "resources/list page exceeds its byte limit");
        return Err(McpError::Internal);
    }
    // "The response is private and has a zero cache lifetime."
    Ok(Reply {
        body,
        cache_control: app.pager.has_sources().then_some(PRIVATE_NO_STORE),
    })
}

/// The `initialize` result for a negotiated version.
pub fn initialize_result(app: &App, id: &RequestId, version: Version) -> Vec<u8> {
    let mut m = Map::new();
    m.insert("protocolVersion".into(), json!(version.as_str()));
    m.insert("capabilities".into(), capabilities(version));
    m.insert("serverInfo".into(), server_info());
    if let Some(i) = &app.config.instructions {
        m.insert("instructions".into(), json!(i));
    }
    result_bytes(
        id,
        &serde_json::to_vec(&Value::Object(m)).expect("serializable"),
    )
}
