//! OAuth 2.0 Protected Resource Metadata (RFC 9728), served at
//! `/.well-known/oauth-protected-resource` and at the path-suffixed form for
//! the MCP endpoint (`/.well-known/oauth-protected-resource/mcp`).

use serde_json::json;

/// The path-suffixed metadata URL for `resource` (RFC 9728 §3.1).
pub fn url_for(resource: &str) -> String {
    let (origin, path) = match resource
        .find("://")
        .and_then(|i| resource[i + 3..].find('/').map(|j| i + 3 + j))
    {
        Some(p) => (&resource[..p], &resource[p..]),
        None => (resource, ""),
    };
    let path = path.trim_end_matches('/');
    format!("{origin}/.well-known/oauth-protected-resource{path}")
}

pub fn document(resource: &str, authorization_servers: &[String], scopes: &[String]) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "resource": resource,
        "authorization_servers": authorization_servers,
        "scopes_supported": scopes,
        "bearer_methods_supported": ["header"],
        "resource_name": "emseepea",
    }))
    .expect("serializable")
}

#[cfg(test)]
mod tests {
    #[test]
    fn path_suffixed_url() {
        assert_eq!(
            super::url_for("http://127.0.0.1:8787/mcp"),
            "http://127.0.0.1:8787/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            super::url_for("https://h"),
            "https://h/.well-known/oauth-protected-resource"
        );
    }
}
