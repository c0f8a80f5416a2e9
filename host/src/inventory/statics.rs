//! Static resources declared in the config (`[[resources]]`), loaded once at
//! startup. "Static resources come first" in every listing.

use crate::config::{
    AccessConfig, MAX_MIME_TYPE_LEN, MAX_NAME_LEN, MAX_REQUIRED_SCOPES, MAX_SCOPE_LEN, MAX_URI_LEN,
    StaticResourceConfig,
};
use crate::fields;
use crate::runtime::Access;
use base64::Engine as _;
use serde::Serialize;

#[derive(Clone, Debug)]
pub enum StaticContent {
    Text(String),
    Blob(Vec<u8>),
}

#[derive(Clone, Debug)]
pub struct StaticResource {
    pub uri: String,
    pub mime_type: Option<String>,
    pub access: Access,
    pub required_scopes: Vec<String>,
    pub content: StaticContent,
    /// The `Resource` object of listings, serialized once.
    pub listing: Box<serde_json::value::RawValue>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResourceJson<'a> {
    uri: &'a str,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mime_type: Option<&'a str>,
    size: usize,
}

#[derive(Clone, Debug, Default)]
pub struct StaticResources {
    pub items: Vec<StaticResource>,
}

impl StaticResources {
    /// Build from the config; files are read now (a missing one stops startup).
    pub fn load(configs: &[StaticResourceConfig]) -> Result<Self, String> {
        let mut items: Vec<StaticResource> = Vec::new();
        for (i, c) in configs.iter().enumerate() {
            let at = format!("resources[{i}] ({})", c.uri);
            if !fields::uri_ok(&c.uri)
                || !c.uri.contains(':')
                || c.uri
                    .chars()
                    .any(|ch| ch.is_whitespace() || ch.is_control())
            {
                return Err(format!(
                    "{at}: uri must be an absolute URI of at most {MAX_URI_LEN} characters"
                ));
            }
            if items.iter().any(|s| s.uri == c.uri) {
                return Err(format!("{at}: duplicate uri"));
            }
            if !fields::name_ok(&c.name) {
                return Err(format!("{at}: name longer than {MAX_NAME_LEN} characters"));
            }
            if c.mime_type
                .as_deref()
                .is_some_and(|m| !fields::mime_type_ok(m))
            {
                return Err(format!(
                    "{at}: mimeType longer than {MAX_MIME_TYPE_LEN} characters"
                ));
            }
            let access = match c.access {
                AccessConfig::Public => Access::Public,
                AccessConfig::Protected => Access::Protected,
            };
            // Its 403 challenge names them: bounded as a template's are.
            if c.required_scopes.len() > MAX_REQUIRED_SCOPES
                || c.required_scopes.iter().any(|s| s.len() > MAX_SCOPE_LEN)
            {
                return Err(format!(
                    "{at}: at most {MAX_REQUIRED_SCOPES} requiredScopes of at most {MAX_SCOPE_LEN} characters"
                ));
            }
            if access == Access::Public && !c.required_scopes.is_empty() {
                return Err(format!("{at}: requiredScopes on a public resource"));
            }
            let content = if let Some(text) = &c.text {
                StaticContent::Text(text.clone())
            } else if let Some(blob) = &c.blob {
                StaticContent::Blob(
                    base64::engine::general_purpose::STANDARD
                        .decode(blob)
                        .map_err(|e| format!("{at}: blob is not base64: {e}"))?,
                )
            } else {
                let file = c.file.as_ref().expect("validated: one of text, blob, file");
                let bytes = std::fs::read(file)
                    .map_err(|e| format!("{at}: cannot read file {}: {e}", file.display()))?;
                match String::from_utf8(bytes) {
                    Ok(text) if !c.mime_type.as_deref().is_some_and(is_binary_mime) => {
                        StaticContent::Text(text)
                    }
                    Ok(text) => StaticContent::Blob(text.into_bytes()),
                    Err(e) => StaticContent::Blob(e.into_bytes()),
                }
            };
            let size = match &content {
                StaticContent::Text(t) => t.len(),
                StaticContent::Blob(b) => b.len(),
            };
            let listing = serde_json::value::to_raw_value(&ResourceJson {
                uri: &c.uri,
                name: &c.name,
                title: c.title.as_deref(),
                description: c.description.as_deref(),
                mime_type: c.mime_type.as_deref(),
                size,
            })
            .expect("serializable");
            let mut required_scopes = c.required_scopes.clone();
            required_scopes.sort();
            required_scopes.dedup();
            items.push(StaticResource {
                uri: c.uri.clone(),
                mime_type: c.mime_type.clone(),
                access,
                required_scopes,
                content,
                listing,
            });
        }
        Ok(Self { items })
    }

    pub fn get(&self, uri: &str) -> Option<&StaticResource> {
        self.items.iter().find(|s| s.uri == uri)
    }
}

fn is_binary_mime(m: &str) -> bool {
    !(m.starts_with("text/")
        || m.contains("json")
        || m.contains("xml")
        || m.contains("javascript")
        || m.contains("yaml"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(uri: &str) -> StaticResourceConfig {
        StaticResourceConfig {
            uri: uri.into(),
            name: "n".into(),
            title: Some("T".into()),
            description: None,
            mime_type: Some("text/plain".into()),
            access: AccessConfig::Public,
            required_scopes: vec![],
            text: Some("hello".into()),
            blob: None,
            file: None,
        }
    }

    #[test]
    fn listing_json_and_checks() {
        let s = StaticResources::load(&[cfg("test://a")]).unwrap();
        assert_eq!(
            s.items[0].listing.get(),
            r#"{"uri":"test://a","name":"n","title":"T","mimeType":"text/plain","size":5}"#
        );
        assert!(
            StaticResources::load(&[cfg("test://a"), cfg("test://a")])
                .unwrap_err()
                .contains("duplicate")
        );
        assert!(StaticResources::load(&[cfg("no scheme")]).is_err());
        let mut missing = cfg("test://b");
        missing.text = None;
        missing.file = Some("/nonexistent/emseepea/file.txt".into());
        let e = StaticResources::load(&[missing]).unwrap_err();
        assert!(e.contains("/nonexistent/emseepea/file.txt"), "{e}");
    }
}
