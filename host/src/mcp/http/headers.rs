//! The per-version header rules, in one place: which era a request is in,
//! what 2026-07-28 requests mirror in headers (`MCP-Protocol-Version`,
//! `Mcp-Method`, `Mcp-Name`) and `_meta`, what legacy requests may say in
//! `MCP-Protocol-Version`, and the session header.

use crate::mcp::errors::McpError;
use crate::mcp::method::{Method, NameRule};
use crate::mcp::version::Version;
use http::HeaderMap;
use serde_json::{Map, Value};

pub const SESSION: &str = "mcp-session-id";
pub const VERSION: &str = "mcp-protocol-version";
pub const METHOD: &str = "mcp-method";
pub const NAME: &str = "mcp-name";
pub const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// A header's value without the optional whitespace around it (RFC 9110 §5.5).
pub fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim_matches([' ', '\t']))
}

pub fn session_id(headers: &HeaderMap) -> Option<&str> {
    header_str(headers, SESSION)
}

/// How a request is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Era {
    /// 2026-07-28: no session, everything in the request.
    Stateless,
    /// The handshake versions: `initialize`, then a session.
    Legacy,
}

/// A request in 2026-07-28 form is served statelessly, even `initialize`
/// (removed there: 404); one without those markers is legacy.
pub fn era(headers: &HeaderMap, params: Option<&Map<String, Value>>) -> Era {
    let header = header_str(headers, VERSION).and_then(Version::parse);
    let meta = params
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(META_VERSION));
    if header.is_some_and(Version::is_stateless) || meta.is_some() {
        Era::Stateless
    } else {
        Era::Legacy
    }
}

/// 2026-07-28: the headers are what intermediaries route on, so they are
/// checked first, then `_meta` against them.
pub fn check_stateless(
    headers: &HeaderMap,
    request: Option<(&str, Method)>,
    params: &Map<String, Value>,
) -> Result<Version, McpError> {
    let Some(header_version) = header_str(headers, VERSION) else {
        return Err(mismatch("missing MCP-Protocol-Version header"));
    };
    if let Some((name, method)) = request {
        check_mirrors(headers, name, method, params)?;
    }
    let version = Version::parse(header_version)
        .filter(|v| v.mirrors_headers())
        .ok_or_else(|| McpError::UnsupportedVersion {
            requested: header_version.to_owned(),
        })?;
    let meta = params.get("_meta").and_then(Value::as_object);
    match meta.and_then(|m| m.get(META_VERSION)) {
        None => return Err(McpError::MissingMeta(META_VERSION)),
        Some(Value::String(s)) if s == header_version => {}
        Some(_) => {
            return Err(mismatch(
                "MCP-Protocol-Version header does not match _meta protocolVersion",
            ));
        }
    }
    if !meta
        .and_then(|m| m.get(META_CAPABILITIES))
        .is_some_and(Value::is_object)
    {
        return Err(McpError::MissingMeta(META_CAPABILITIES));
    }
    Ok(version)
}

/// `Mcp-Method` always, `Mcp-Name` where the method's policy says.
fn check_mirrors(
    headers: &HeaderMap,
    name: &str,
    method: Method,
    params: &Map<String, Value>,
) -> Result<(), McpError> {
    match header_str(headers, METHOD) {
        None => return Err(mismatch("missing Mcp-Method header")),
        Some(h) if h != name => {
            return Err(McpError::HeaderMismatch(format!(
                "Mcp-Method header value '{h}' does not match body value '{name}'"
            )));
        }
        Some(_) => {}
    }
    let NameRule::MirrorsParam(param) = method.policy().name_header else {
        return Ok(());
    };
    // A missing or non-string param is the method's own -32602.
    let Some(Value::String(value)) = params.get(param) else {
        return Ok(());
    };
    match headers
        .get(NAME)
        .map(|_| header_str(headers, NAME).and_then(decode_header_value))
    {
        None => Err(mismatch("missing Mcp-Name header")),
        Some(None) => Err(mismatch("Mcp-Name header value is not valid")),
        Some(Some(decoded)) if &decoded != value => {
            Err(mismatch("Mcp-Name header value does not match body value"))
        }
        Some(Some(_)) => Ok(()),
    }
}

fn mismatch(why: &'static str) -> McpError {
    McpError::HeaderMismatch(why.into())
}

/// A legacy `MCP-Protocol-Version` header must name a handshake version.
pub fn check_legacy(headers: &HeaderMap) -> Result<(), McpError> {
    match header_str(headers, VERSION) {
        None => Ok(()),
        Some(h) => match Version::parse(h) {
            Some(v) if v.has_handshake() => Ok(()),
            _ => Err(McpError::UnsupportedVersion {
                requested: h.to_owned(),
            }),
        },
    }
}

/// A batch is refused when its header names a version without batches.
pub fn check_batch(headers: &HeaderMap) -> Result<(), McpError> {
    match header_str(headers, VERSION).map(Version::parse) {
        None | Some(Some(Version::V2025_03_26)) => Ok(()),
        Some(_) => Err(McpError::InvalidRequest(
            "Invalid Request: batches are not supported in this protocol version",
        )),
    }
}

/// Decode an `Mcp-Name` value: `=?base64?...?=` carries non-ASCII values.
pub fn decode_header_value(v: &str) -> Option<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_names() {
        assert_eq!(decode_header_value("x://1").as_deref(), Some("x://1"));
        assert_eq!(decode_header_value("=?base64?w6k=?=").as_deref(), Some("é"));
        assert_eq!(decode_header_value("=?base64?***?="), None);
    }

    #[test]
    fn eras() {
        let mut h = HeaderMap::new();
        assert_eq!(era(&h, None), Era::Legacy);
        h.insert(VERSION, "2026-07-28".parse().unwrap());
        assert_eq!(era(&h, None), Era::Stateless);
        h.insert(VERSION, "2025-11-25".parse().unwrap());
        assert_eq!(era(&h, None), Era::Legacy);
        let params: Map<String, Value> =
            serde_json::from_str(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"x"}}"#)
                .unwrap();
        assert_eq!(era(&h, Some(&params)), Era::Stateless);
    }
}
