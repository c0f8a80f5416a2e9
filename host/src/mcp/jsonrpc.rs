//! JSON-RPC 2.0 framing, exactly: ids (string or integer) are kept as their
//! raw JSON text and echoed unchanged; results are assembled from bytes so
//! the transport controls every byte it sends.

use serde::Deserialize;
use serde_json::value::RawValue;

pub const PARSE_ERROR: i32 = -32700;
pub const INVALID_REQUEST: i32 = -32600;
pub const METHOD_NOT_FOUND: i32 = -32601;
pub const INVALID_PARAMS: i32 = -32602;
pub const INTERNAL_ERROR: i32 = -32603;
/// 2026-07-28: a standard header is missing or disagrees with the body.
pub const HEADER_MISMATCH: i32 = -32020;
/// 2026-07-28: the requested protocol version is not supported.
pub const UNSUPPORTED_PROTOCOL_VERSION: i32 = -32022;

/// A request id: the raw JSON of a string or an integer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RequestId(String);

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
        ok.then(|| RequestId(text.to_owned()))
    }

    /// Parse a `requestId` carried inside params (cancellation), which may be
    /// a JSON value of either kind.
    pub fn from_value(v: &serde_json::Value) -> Option<RequestId> {
        let raw = serde_json::value::to_raw_value(v).ok()?;
        RequestId::from_raw(&raw)
    }

    pub fn raw(&self) -> &str {
        &self.0
    }
}

/// One incoming message.
#[derive(Debug)]
pub enum Incoming {
    Request {
        id: RequestId,
        method: String,
        params: Option<Box<RawValue>>,
    },
    Notification {
        method: String,
        params: Option<Box<RawValue>>,
    },
    /// A response to a server-to-client request (we never send any).
    Response,
}

/// Why a message is not a valid JSON-RPC message; carries the id when readable.
#[derive(Debug)]
pub struct Invalid {
    pub id: Option<RequestId>,
    pub message: &'static str,
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
    method: Option<serde_json::Value>,
    params: Option<Box<RawValue>>,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// Classify one JSON object as a JSON-RPC message.
pub fn classify(raw: &RawValue) -> Result<Incoming, Invalid> {
    if !raw.get().trim_start().starts_with('{') {
        return Err(Invalid {
            id: None,
            message: "Invalid Request: not a JSON object",
        });
    }
    let env: Envelope = serde_json::from_str(raw.get()).map_err(|_| Invalid {
        id: None,
        message: "Invalid Request",
    })?;
    let id = match env.id {
        None => None,
        Some(r) => match RequestId::from_raw(r) {
            Some(id) => Some(id),
            None => {
                return Err(Invalid {
                    id: None,
                    message: "Invalid Request: id must be a string or an integer",
                });
            }
        },
    };
    if env.jsonrpc.map(|j| j.get().trim()) != Some("\"2.0\"") {
        return Err(Invalid {
            id,
            message: "Invalid Request: jsonrpc must be \"2.0\"",
        });
    }
    if let Some(p) = &env.params
        && !p.get().trim_start().starts_with('{')
    {
        return Err(Invalid {
            id,
            message: "Invalid Request: params must be an object",
        });
    }
    match (env.method, id) {
        (Some(serde_json::Value::String(method)), Some(id))
            if env.result.is_none() && env.error.is_none() =>
        {
            Ok(Incoming::Request {
                id,
                method,
                params: env.params,
            })
        }
        (Some(serde_json::Value::String(method)), None)
            if env.result.is_none() && env.error.is_none() =>
        {
            Ok(Incoming::Notification {
                method,
                params: env.params,
            })
        }
        (None, Some(_)) if env.result.is_some() != env.error.is_some() => Ok(Incoming::Response),
        (_, id) => Err(Invalid {
            id,
            message: "Invalid Request",
        }),
    }
}

/// `{"jsonrpc":"2.0","id":ID,"result":RESULT}` from pre-serialized parts.
pub fn result_bytes(id: &RequestId, result: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(result.len() + id.0.len() + 36);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.0.as_bytes());
    out.extend_from_slice(b",\"result\":");
    out.extend_from_slice(result);
    out.push(b'}');
    out
}

/// Append `[a,b,...]` made of pre-serialized JSON values.
pub fn push_array(out: &mut Vec<u8>, items: &[Vec<u8>]) {
    out.reserve(items.iter().map(|i| i.len() + 1).sum::<usize>() + 2);
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item);
    }
    out.push(b']');
}

/// The bytes `result_bytes` adds around a result.
pub fn result_envelope_len(id: &RequestId) -> usize {
    result_bytes(id, b"").len()
}

/// An error response; `id` is omitted when it could not be read.
pub fn error_bytes(
    id: Option<&RequestId>,
    code: i32,
    message: &str,
    data: Option<&serde_json::Value>,
) -> Vec<u8> {
    let mut error = serde_json::json!({ "code": code, "message": message });
    if let Some(d) = data {
        error["data"] = d.clone();
    }
    let mut out = Vec::with_capacity(96);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",");
    if let Some(id) = id {
        out.extend_from_slice(b"\"id\":");
        out.extend_from_slice(id.0.as_bytes());
        out.push(b',');
    }
    // Where the id could not be read it is omitted, as the 2025-11-25 and
    // 2026-07-28 schemas allow (their `JSONRPCErrorResponse.id` is optional).
    out.extend_from_slice(b"\"error\":");
    out.extend_from_slice(&serde_json::to_vec(&error).expect("serializable"));
    out.push(b'}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> Result<Incoming, Invalid> {
        classify(&serde_json::from_str::<Box<RawValue>>(s).unwrap())
    }

    #[test]
    fn ids_echo_unchanged() {
        for id in [
            "1",
            "\"abc\"",
            "-7",
            "123456789012345678901234567890",
            "\"\\u00e9\"",
        ] {
            let m = c(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#)).unwrap();
            let Incoming::Request { id: got, .. } = m else {
                panic!()
            };
            assert_eq!(got.raw(), id);
            let bytes = result_bytes(&got, b"{}");
            assert_eq!(
                String::from_utf8(bytes).unwrap(),
                format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#)
            );
        }
    }

    #[test]
    fn invalid_messages() {
        assert!(c(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#).is_err());
        assert!(c(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#).is_err());
        assert!(c(r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#).is_err());
        assert!(
            c(r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#)
                .unwrap_err()
                .id
                .is_some()
        );
        assert!(c(r#"{"id":1,"method":"ping"}"#).is_err());
        assert!(c(r#"{"jsonrpc":"2.0","id":1,"method":5}"#).is_err());
        assert!(c(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}"#).is_err());
        assert!(c(r#"{"jsonrpc":"2.0","id":1}"#).is_err());
        assert!(c(r#"[1]"#).is_err());
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
    fn error_without_id_omits_it() {
        let b = error_bytes(None, PARSE_ERROR, "Parse error", None);
        assert_eq!(
            String::from_utf8(b).unwrap(),
            r#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"}}"#
        );
    }
}
