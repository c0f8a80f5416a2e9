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

/// `resources/list` without its entries and cursor (see [`ListEnvelope`]).
#[derive(Serialize)]
pub struct ListResourcesResult {
    pub resources: EntriesMark,
}

/// `resources/templates/list` without its entries and cursor.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTemplatesResult {
    pub resource_templates: EntriesMark,
}

/// A list response serialized with an empty entries array, and where that
/// array is: the page's entries, already serialized into one buffer by the
/// pager, are copied in there, and the cursor after it, so that the page's
/// bytes are written once (not once per entry and again into the response)
/// and its size is known before it is assembled.
pub struct ListEnvelope {
    bytes: Vec<u8>,
    /// The index of the `]` of the empty array.
    close: usize,
}

/// Serializes as `[]` and records where serde wrote it.
pub struct EntriesMark(std::rc::Rc<Marks>);

#[derive(Default)]
struct Marks {
    /// Bytes written so far (kept by `MarkingWriter`).
    written: std::cell::Cell<usize>,
    /// Bytes written when the array began.
    array: std::cell::Cell<Option<usize>>,
}

impl Serialize for EntriesMark {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // serde_json writes straight to its writer: the array starts here.
        self.0.array.set(Some(self.0.written.get()));
        s.collect_seq(std::iter::empty::<()>())
    }
}

struct MarkingWriter {
    out: Vec<u8>,
    marks: std::rc::Rc<Marks>,
}

impl std::io::Write for MarkingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.out.extend_from_slice(buf);
        self.marks.written.set(self.out.len());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl ListEnvelope {
    /// Serialize what `message` builds around an [`EntriesMark`].
    pub fn new<T: Serialize>(message: impl FnOnce(EntriesMark) -> T) -> Self {
        let marks = std::rc::Rc::new(Marks::default());
        let mut w = MarkingWriter {
            out: Vec::with_capacity(256),
            marks: marks.clone(),
        };
        serde_json::to_writer(&mut w, &message(EntriesMark(marks.clone())))
            .expect("wire types serialize");
        let open = marks.array.get().expect("the message holds the entries");
        debug_assert_eq!(&w.out[open..open + 2], b"[]");
        ListEnvelope {
            bytes: w.out,
            close: open + 1,
        }
    }

    /// Bytes of the response with no entries and no cursor.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The response with `entries` (serialized, joined by commas) and the
    /// cursor, if any, as `,"nextCursor":"…"` after the array.
    pub fn fill(&self, entries: &[u8], next_cursor: Option<&str>) -> Vec<u8> {
        let cursor = next_cursor.map_or(0, |c| c.len() + 16);
        let mut out = Vec::with_capacity(self.bytes.len() + entries.len() + cursor + 8);
        out.extend_from_slice(&self.bytes[..self.close]);
        out.extend_from_slice(entries);
        out.push(b']');
        if let Some(c) = next_cursor {
            out.extend_from_slice(b",\"nextCursor\":");
            serde_json::to_writer(&mut out, c).expect("a string serializes");
        }
        out.extend_from_slice(&self.bytes[self.close + 1..]);
        out
    }
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
        let id = id();
        let envelope = ListEnvelope::new(|resources| {
            ResultResponse::new(&id, ListResourcesResult { resources })
        });
        assert_eq!(
            envelope.fill(br#"{"uri":"a://1", "name":"x"},{"uri":"a://2"}"#, Some("c")),
            br#"{"jsonrpc":"2.0","id":7,"result":{"resources":[{"uri":"a://1", "name":"x"},{"uri":"a://2"}],"nextCursor":"c"}}"#
        );
        assert_eq!(
            envelope.fill(b"", None),
            br#"{"jsonrpc":"2.0","id":7,"result":{"resources":[]}}"#
        );
        assert_eq!(envelope.len(), envelope.fill(b"", None).len());
    }

    #[test]
    fn the_entries_go_into_the_result_whatever_the_id_says() {
        // An id that contains what the array looks like, and 2026-07-28's
        // fields after the array: the entries still land in `resources`.
        let id = RawValue::from_string(r#""\"resources\":[]""#.into()).unwrap();
        let envelope = ListEnvelope::new(|resources| {
            ResultResponse::new(
                &id,
                ResultBody::new(
                    Version::V2026_07_28,
                    ListTemplatesResult {
                        resource_templates: resources,
                    },
                    Some((0, CacheScope::Public)),
                ),
            )
        });
        let body = envelope.fill(br#"{"a":1}"#, Some("c\"x"));
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["id"], r#""resources":[]"#);
        assert_eq!(v["result"]["resourceTemplates"][0]["a"], 1);
        assert_eq!(v["result"]["nextCursor"], "c\"x");
        assert_eq!(v["result"]["cacheScope"], "public");
    }
}
