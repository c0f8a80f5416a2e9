//! The MCP wire model: every message this server sends, as serde types.
//! Entries stay pre-serialized (`RawValue`s the inventory measured), so a
//! page's bytes are known exactly before it is assembled; everything else
//! is serialized here and nowhere else.

use super::version::Version;
use crate::runtime::SourceDefinition;
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

const JSONRPC: &str = "2.0";

/// `{"jsonrpc":"2.0","id":ID,"result":RESULT}`.
#[derive(Serialize)]
pub struct ResultResponse<'a, R> {
    jsonrpc: &'static str,
    id: &'a RawValue,
    result: R,
}

impl<'a, R: Serialize> ResultResponse<'a, R> {
    pub fn new(id: &'a RawValue, result: R) -> Self {
        Self {
            jsonrpc: JSONRPC,
            id,
            result,
        }
    }
}

/// `{"jsonrpc":"2.0","id":ID,"error":{...}}`; the id is omitted where it
/// could not be read, as the 2025-11-25 and 2026-07-28 schemas allow.
#[derive(Serialize)]
pub struct ErrorResponse<'a> {
    pub jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<&'a RawValue>,
    pub error: ErrorObject<'a>,
}

#[derive(Serialize)]
pub struct ErrorObject<'a> {
    pub code: i32,
    pub message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<&'a Value>,
}

impl<'a> ErrorResponse<'a> {
    pub fn new(id: Option<&'a RawValue>, error: ErrorObject<'a>) -> Self {
        Self {
            jsonrpc: JSONRPC,
            id,
            error,
        }
    }
}

/// The OAuth-style body of a 401/403 (RFC 6750 error codes).
#[derive(Serialize)]
pub struct OAuthError {
    pub error: &'static str,
    pub error_description: &'static str,
}

/// Who may cache a 2026-07-28 result.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CacheScope {
    Public,
    Private,
}

#[derive(Serialize)]
pub struct Implementation {
    name: &'static str,
    title: &'static str,
    version: &'static str,
}

pub const SERVER_INFO: Implementation = Implementation {
    name: "emseepea",
    title: "emseepea",
    version: env!("CARGO_PKG_VERSION"),
};

#[derive(Serialize)]
struct ServerMeta {
    #[serde(rename = "io.modelcontextprotocol/serverInfo")]
    server_info: Implementation,
}

/// The fields 2026-07-28 adds to every result.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResultMeta {
    result_type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_scope: Option<CacheScope>,
    #[serde(rename = "_meta")]
    meta: ServerMeta,
}

/// A result with the version's extra fields, if it has any.
#[derive(Serialize)]
pub struct ResultBody<T> {
    #[serde(flatten)]
    body: T,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    meta: Option<ResultMeta>,
}

impl<T: Serialize> ResultBody<T> {
    /// `caching`: the result's `ttlMs` and `cacheScope`, if it has them.
    pub fn new(version: Version, body: T, caching: Option<(u64, CacheScope)>) -> Self {
        let meta = version.has_result_metadata().then(|| ResultMeta {
            result_type: "complete",
            ttl_ms: caching.map(|c| c.0),
            cache_scope: caching.map(|c| c.1),
            meta: ServerMeta {
                server_info: SERVER_INFO,
            },
        });
        Self { body, meta }
    }
}

/// `{}`: ping and logging/setLevel.
#[derive(Serialize)]
pub struct Empty {}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResourcesCapability {
    subscribe: bool,
    list_changed: bool,
}

#[derive(Serialize)]
pub struct Capabilities {
    /// Only before 2026-07-28 (as `logging/setLevel`, deprecated there);
    /// we never emit log notifications either way.
    #[serde(skip_serializing_if = "Option::is_none")]
    logging: Option<Empty>,
    resources: ResourcesCapability,
}

impl Capabilities {
    pub fn of(version: Version) -> Self {
        Self {
            logging: version.has_ping_and_logging().then_some(Empty {}),
            resources: ResourcesCapability {
                subscribe: false,
                list_changed: false,
            },
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult<'a> {
    pub protocol_version: &'static str,
    pub capabilities: Capabilities,
    pub server_info: Implementation,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverResult<'a> {
    pub supported_versions: Vec<&'static str>,
    pub capabilities: Capabilities,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListResourcesResult<'a> {
    pub resources: &'a [Box<RawValue>],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTemplatesResult<'a> {
    pub resource_templates: &'a [Box<RawValue>],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<&'a str>,
}

#[derive(Serialize)]
pub struct ReadResult<'a> {
    pub contents: &'a [crate::inventory::ContentJson],
}

/// A `ResourceTemplate` of `resources/templates/list`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResourceTemplate<'a> {
    uri_template: &'a str,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mime_type: Option<&'a str>,
}

/// Serialized `ResourceTemplate` objects of every discoverable template,
/// in registration order ("resources/templates/list continues to describe
/// registered URI patterns").
pub fn template_listing(definitions: &[&SourceDefinition]) -> Vec<Box<RawValue>> {
    definitions
        .iter()
        .filter(|d| d.discoverable)
        .map(|d| {
            to_raw(&ResourceTemplate {
                uri_template: d.uri_template.as_str(),
                name: &d.name,
                title: d.title.as_deref(),
                description: d.description.as_deref(),
                mime_type: d.mime_type.as_deref(),
            })
        })
        .collect()
}

fn to_raw<T: Serialize>(value: &T) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).expect("wire types serialize")
}

/// `[a,b,...]` of complete, already serialized responses (a batch's answer).
pub fn array(items: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(items.iter().map(|i| i.len() + 1).sum::<usize>() + 2);
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item);
    }
    out.push(b']');
    out
}

/// Serialize a message (the wire types cannot fail to serialize).
pub fn to_bytes<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("wire types serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> Box<RawValue> {
        RawValue::from_string("7".into()).unwrap()
    }

    #[test]
    fn results_per_version() {
        let legacy = to_bytes(&ResultResponse::new(
            &id(),
            ResultBody::new(Version::V2025_03_26, Empty {}, None),
        ));
        assert_eq!(legacy, br#"{"jsonrpc":"2.0","id":7,"result":{}}"#);
        let modern = to_bytes(&ResultResponse::new(
            &id(),
            ResultBody::new(
                Version::V2026_07_28,
                Empty {},
                Some((0, CacheScope::Private)),
            ),
        ));
        let v: Value = serde_json::from_slice(&modern).unwrap();
        assert_eq!(v["result"]["resultType"], "complete");
        assert_eq!(v["result"]["cacheScope"], "private");
        assert_eq!(v["result"]["ttlMs"], 0);
        assert_eq!(
            v["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "emseepea"
        );
    }

    #[test]
    fn entries_are_copied_byte_for_byte() {
        let entries = vec![
            RawValue::from_string(r#"{"uri":"a://1", "name":"x"}"#.into()).unwrap(),
            RawValue::from_string(r#"{"uri":"a://2"}"#.into()).unwrap(),
        ];
        let body = to_bytes(&ListResourcesResult {
            resources: &entries,
            next_cursor: Some("c"),
        });
        assert_eq!(
            body,
            br#"{"resources":[{"uri":"a://1", "name":"x"},{"uri":"a://2"}],"nextCursor":"c"}"#
        );
    }
}
