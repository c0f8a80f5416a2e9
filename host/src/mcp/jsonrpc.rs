//! JSON-RPC 2.0 framing, exactly: a body is one message or a batch (split
//! with a bound on its items before they are allocated); ids (string or
//! integer) are kept as their raw JSON text and echoed unchanged; `params`
//! is an object or absent. Nothing here knows MCP's methods.

use crate::guest_text::GuestText;
use serde::Deserialize;
use serde::de::{DeserializeSeed, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::fmt;

/// A request id: the raw JSON of a string or an integer, echoed byte for byte.
#[derive(Clone, Debug)]
pub struct RequestId(Box<RawValue>);

impl PartialEq for RequestId {
    fn eq(&self, other: &Self) -> bool {
        self.raw() == other.raw()
    }
}
impl Eq for RequestId {}
impl std::hash::Hash for RequestId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.raw().hash(state)
    }
}

impl RequestId {
    /// Accept only what MCP allows: a JSON string or an integer (no null,
    /// no fraction, no exponent).
    fn from_raw(raw: &RawValue) -> Option<RequestId> {
        let text = raw.get().trim();
        let ok = match text.as_bytes().first() {
            Some(b'"') => serde_json::from_str::<String>(text).is_ok(),
            Some(b'-' | b'0'..=b'9') => {
                let digits = text.strip_prefix('-').unwrap_or(text);
                !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
            }
            _ => false,
        };
        if !ok {
            return None;
        }
        RawValue::from_string(text.to_owned()).ok().map(RequestId)
    }

    /// Parse a `requestId` carried inside params (cancellation), which may be
    /// a JSON value of either kind.
    pub fn from_value(v: &Value) -> Option<RequestId> {
        let raw = serde_json::value::to_raw_value(v).ok()?;
        RequestId::from_raw(&raw)
    }

    pub fn raw(&self) -> &str {
        self.0.get()
    }

    /// The id as log lines and span attributes show it: a client's text,
    /// so bounded and escaped like guest text (`GuestText`). A string id
    /// is quoted (`"abc"`, as its JSON), an integer is its digits.
    pub fn logged(&self) -> String {
        let raw = self.raw();
        // Every request pays this: the ids clients send (integers, short
        // plain strings) are already what escaping would print, so take
        // them as they are. No backslash means no escape inside a string,
        // so its only quotes are its own two.
        if raw.len() <= crate::guest_text::MAX_LOGGED_GUEST_TEXT_BYTES
            && raw.bytes().all(|b| (0x20..0x7f).contains(&b) && b != b'\\')
        {
            return raw.to_owned();
        }
        match serde_json::from_str::<String>(raw) {
            Ok(s) => format!("{:?}", GuestText::new(&s)),
            Err(_) => GuestText::new(raw).to_string(),
        }
    }

    /// For serializing the id unchanged.
    pub fn as_raw_value(&self) -> &RawValue {
        &self.0
    }
}

/// A request body: one message, or a 2025-03-26 batch of them.
#[derive(Debug)]
pub enum Frame {
    Single(Box<RawValue>),
    Batch(Vec<Box<RawValue>>),
}

/// Why a body is not a JSON-RPC message or batch at all.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("not JSON")]
    Parse,
    #[error("empty batch")]
    EmptyBatch,
    #[error("batch of more than {max} items")]
    TooManyItems { max: usize },
}

/// Split a body into its message(s); a batch holds at most `max_items`.
pub fn split(body: &[u8], max_items: usize) -> Result<Frame, FrameError> {
    let raw: &RawValue = serde_json::from_slice(body).map_err(|_| FrameError::Parse)?;
    if !raw.get().starts_with('[') {
        return Ok(Frame::Single(raw.to_owned()));
    }
    let mut de = serde_json::Deserializer::from_str(raw.get());
    match (BoundedItems { max: max_items }).deserialize(&mut de) {
        Ok(items) if items.is_empty() => Err(FrameError::EmptyBatch),
        Ok(items) => Ok(Frame::Batch(items)),
        Err(e) if e.to_string().starts_with(TOO_MANY) => {
            Err(FrameError::TooManyItems { max: max_items })
        }
        Err(_) => Err(FrameError::Parse),
    }
}

const TOO_MANY: &str = "too many batch items";

/// An array's items, refused at the first item past `max` (nothing more is
/// allocated for an oversized batch).
struct BoundedItems {
    max: usize,
}

impl<'de> DeserializeSeed<'de> for BoundedItems {
    type Value = Vec<Box<RawValue>>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for BoundedItems {
    type Value = Vec<Box<RawValue>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON array")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Box<RawValue>>()? {
            if items.len() == self.max {
                return Err(serde::de::Error::custom(TOO_MANY));
            }
            items.push(item);
        }
        Ok(items)
    }
}

/// One incoming message.
#[derive(Debug)]
pub enum Incoming {
    Request {
        id: RequestId,
        method: String,
        params: Map<String, Value>,
    },
    Notification {
        method: String,
        params: Map<String, Value>,
    },
    /// A response to a server-to-client request (we never send any).
    Response,
}

impl Incoming {
    pub fn id(&self) -> Option<&RequestId> {
        match self {
            Incoming::Request { id, .. } => Some(id),
            _ => None,
        }
    }

    pub fn params(&self) -> Option<&Map<String, Value>> {
        match self {
            Incoming::Request { params, .. } | Incoming::Notification { params, .. } => {
                Some(params)
            }
            Incoming::Response => None,
        }
    }
}

/// What is wrong with a message that is JSON but not a valid one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Violation {
    NotAnObject,
    BadId,
    BadVersion,
    /// Neither a request, a notification nor a response.
    Shape,
    /// `params` present but not an object (-32602, not -32600).
    ParamsNotAnObject,
}

/// Why a message is not a valid JSON-RPC message; carries the id when readable.
#[derive(Debug)]
pub struct Invalid {
    pub id: Option<RequestId>,
    pub violation: Violation,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    jsonrpc: Option<&'a RawValue>,
    /// `Some` whenever the member is present, even as `null` (which plain
    /// `Option` would read as absent, turning an invalid request into a
    /// notification).
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    method: Option<Value>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// Classify one JSON value as a JSON-RPC message.
pub fn classify(raw: &RawValue) -> Result<Incoming, Invalid> {
    let invalid = |id, violation| Invalid { id, violation };
    if !raw.get().trim_start().starts_with('{') {
        return Err(invalid(None, Violation::NotAnObject));
    }
    let env: Envelope =
        serde_json::from_str(raw.get()).map_err(|_| invalid(None, Violation::Shape))?;
    let id = match env.id {
        None => None,
        Some(r) => Some(RequestId::from_raw(r).ok_or(invalid(None, Violation::BadId))?),
    };
    if env.jsonrpc.map(|j| j.get().trim()) != Some("\"2.0\"") {
        return Err(invalid(id, Violation::BadVersion));
    }
    let method = match (env.method, id.is_some()) {
        (Some(Value::String(m)), _) if env.result.is_none() && env.error.is_none() => m,
        (None, true) if env.result.is_some() != env.error.is_some() => {
            return Ok(Incoming::Response);
        }
        _ => return Err(invalid(id, Violation::Shape)),
    };
    let params = match env.params {
        None => Map::new(),
        Some(p) => serde_json::from_str(p.get())
            .map_err(|_| invalid(id.clone(), Violation::ParamsNotAnObject))?,
    };
    Ok(match id {
        Some(id) => Incoming::Request { id, method, params },
        None => Incoming::Notification { method, params },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn is_json(bytes: &[u8]) -> bool {
        serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok()
    }

    fn c(s: &str) -> Result<Incoming, Invalid> {
        classify(&serde_json::from_str::<Box<RawValue>>(s).unwrap())
    }

    #[test]
    fn ids_keep_their_text() {
        for id in [
            "1",
            "\"abc\"",
            "-7",
            "123456789012345678901234567890",
            "\"\\u00e9\"",
        ] {
            let m = c(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#)).unwrap();
            assert_eq!(m.id().unwrap().raw(), id);
        }
    }

    #[test]
    fn logged_ids_are_escaped_and_plain_ones_shown_as_sent() {
        let logged = |id: &str| {
            c(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#))
                .unwrap()
                .id()
                .unwrap()
                .logged()
        };
        for plain in ["1", "-7", "\"abc\"", "\"a b-c_1\""] {
            assert_eq!(logged(plain), plain);
        }
        assert_eq!(logged(r#""x\ny""#), r#""x\ny""#);
        assert_eq!(logged(r#""a\"b""#), r#""a\"b""#);
        assert_eq!(logged(r#""\u202e""#), r#""\u{202e}""#);
        let long = format!("\"{}\"", "x".repeat(64 * 1024));
        let shown = logged(&long);
        assert!(
            shown.len() < 8 * 1024 && shown.contains("bytes]"),
            "{shown}"
        );
    }

    #[test]
    fn invalid_messages() {
        let violation = |s| c(s).unwrap_err().violation;
        assert_eq!(
            violation(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#),
            Violation::BadId
        );
        assert!(c(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#).is_err());
        assert!(c(r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#).is_err());
        let e = c(r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#).unwrap_err();
        assert!(e.id.is_some() && e.violation == Violation::BadVersion);
        assert!(c(r#"{"id":1,"method":"ping"}"#).is_err());
        assert!(c(r#"{"jsonrpc":"2.0","id":1,"method":5}"#).is_err());
        let e = c(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}"#).unwrap_err();
        assert_eq!(e.violation, Violation::ParamsNotAnObject);
        assert_eq!(e.id.unwrap().raw(), "1");
        assert!(c(r#"{"jsonrpc":"2.0","id":1}"#).is_err());
        assert_eq!(violation(r#"[1]"#), Violation::NotAnObject);
        assert!(c(r#""x""#).is_err());
        assert!(matches!(
            c(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Incoming::Notification { .. })
        ));
        assert!(matches!(
            c(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Ok(Incoming::Response)
        ));
        assert!(c(r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{}}"#).is_err());
    }

    #[test]
    fn batches_are_split_within_their_bound() {
        assert!(matches!(split(b" {} ", 2), Ok(Frame::Single(_))));
        assert!(matches!(split(b"[1,2]", 2), Ok(Frame::Batch(v)) if v.len() == 2));
        assert_eq!(
            split(b"[1,2,3]", 2).unwrap_err(),
            FrameError::TooManyItems { max: 2 }
        );
        assert_eq!(split(b"[]", 2).unwrap_err(), FrameError::EmptyBatch);
        assert_eq!(split(b"[1,", 2).unwrap_err(), FrameError::Parse);
        assert_eq!(split(b"{", 2).unwrap_err(), FrameError::Parse);
        assert_eq!(split(b"[1] x", 2).unwrap_err(), FrameError::Parse);
    }

    /// Bytes that look like JSON-RPC more often than uniform noise would.
    fn jsonish() -> impl Strategy<Value = Vec<u8>> {
        let token = prop_oneof![
            Just(b"{".to_vec()),
            Just(b"}".to_vec()),
            Just(b"[".to_vec()),
            Just(b"]".to_vec()),
            Just(b",".to_vec()),
            Just(b":".to_vec()),
            Just(b"\"jsonrpc\"".to_vec()),
            Just(b"\"2.0\"".to_vec()),
            Just(b"\"id\"".to_vec()),
            Just(b"\"method\"".to_vec()),
            Just(b"\"params\"".to_vec()),
            Just(b"\"result\"".to_vec()),
            Just(b"null".to_vec()),
            Just(b"1".to_vec()),
            Just(b"-0.5e3".to_vec()),
            Just(b"\"\\ud800\"".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..4),
        ];
        proptest::collection::vec(token, 0..40).prop_map(|t| t.concat())
    }

    /// What a client is told about a malformed message: one of a few fixed
    /// errors, nothing taken from its bytes.
    fn assert_generic(e: crate::mcp::errors::McpError) -> Result<(), TestCaseError> {
        use crate::mcp::errors::*;
        use crate::mcp::version::Version;
        let code = e.code(Version::UNNEGOTIATED);
        prop_assert!([PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS].contains(&code));
        prop_assert!(e.data().is_none());
        let fixed = [
            "Parse error",
            "Invalid Request",
            "Invalid Request: not a JSON object",
            "Invalid Request: id must be a string or an integer",
            "Invalid Request: jsonrpc must be \"2.0\"",
            "Invalid Request: empty batch",
            "Invalid Request: too many messages in the batch",
            "Invalid params: params must be an object",
        ];
        prop_assert!(fixed.contains(&e.message().as_str()), "{}", e.message());
        Ok(())
    }

    fn check_message(raw: &RawValue) -> Result<(), TestCaseError> {
        match classify(raw) {
            Ok(_) => Ok(()),
            Err(invalid) => assert_generic(invalid.into()),
        }
    }

    proptest! {
        // Arbitrary bytes: never a panic; a typed outcome every time, one
        // that agrees with a plain JSON parser, and a generic error.
        #[test]
        fn prop_framing_never_panics(bytes in prop_oneof![jsonish(), proptest::collection::vec(any::<u8>(), 0..256)], max in 1usize..8) {
            if crate::fuzz::time_is_up() { return Ok(()); }
            match split(&bytes, max) {
                Err(e) => {
                    match e {
                        FrameError::Parse => prop_assert!(!is_json(&bytes)),
                        FrameError::EmptyBatch => prop_assert!(is_json(&bytes)),
                        FrameError::TooManyItems { max: m } => prop_assert_eq!(m, max),
                    }
                    assert_generic(e.into())?;
                }
                Ok(Frame::Single(raw)) => {
                    prop_assert!(is_json(&bytes));
                    check_message(&raw)?;
                }
                Ok(Frame::Batch(items)) => {
                    prop_assert!(!items.is_empty() && items.len() <= max);
                    for item in &items {
                        check_message(item)?;
                    }
                }
            }
        }

        // A batch of n well-formed requests splits into exactly n messages
        // with their ids in order, or is refused whole past the bound.
        #[test]
        fn prop_batches_split_exactly(ids in proptest::collection::vec(any::<i64>(), 1..12), max in 1usize..12) {
            if crate::fuzz::time_is_up() { return Ok(()); }
            let items: Vec<String> = ids.iter().map(|i| format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"m"}}"#)).collect();
            let body = format!("[{}]", items.join(" , "));
            match split(body.as_bytes(), max) {
                Ok(Frame::Batch(raw)) => {
                    prop_assert!(ids.len() <= max);
                    let got: Vec<String> = raw.iter().map(|r| classify(r).unwrap().id().unwrap().raw().to_owned()).collect();
                    let want: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
                    prop_assert_eq!(got, want);
                }
                Err(FrameError::TooManyItems { .. }) => prop_assert!(ids.len() > max),
                other => prop_assert!(false, "{other:?}"),
            }
        }
    }
}
