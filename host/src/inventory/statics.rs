//! Static resources declared in the config (`[[resources]]`), loaded once at
//! startup. "Static resources come first" in every listing.

use crate::fields;
use crate::inventory::config::{AccessConfig, StaticBody, StaticResourceConfig};
use crate::limits::{
    MAX_MIME_TYPE_LEN, MAX_NAME_LEN, MAX_REQUIRED_SCOPES, MAX_SCOPE_LEN, MAX_URI_LEN,
};
use crate::runtime::Access;
use base64::Engine as _;
use serde::Serialize;

/// Why a `[[resources]]` entry cannot be served; startup stops on it.
#[derive(Debug, thiserror::Error)]
#[error("resources[{index}] ({uri}): {problem}")]
pub struct StaticResourceError {
    pub index: usize,
    pub uri: String,
    pub problem: StaticProblem,
}

#[derive(Debug, thiserror::Error)]
pub enum StaticProblem {
    #[error("uri must be an absolute URI of at most {MAX_URI_LEN} characters")]
    Uri,
    #[error("duplicate uri")]
    DuplicateUri,
    #[error("name longer than {MAX_NAME_LEN} characters")]
    Name,
    #[error("mimeType longer than {MAX_MIME_TYPE_LEN} characters")]
    MimeType,
    #[error("at most {MAX_REQUIRED_SCOPES} requiredScopes of at most {MAX_SCOPE_LEN} characters")]
    Scopes,
    #[error("requiredScopes on a public resource")]
    ScopesOnPublic,
    #[error("blob is not base64: {0}")]
    Blob(base64::DecodeError),
    #[error("cannot read file {}: {source}", path.display())]
    File {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

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
    pub fn load(configs: &[StaticResourceConfig]) -> Result<Self, StaticResourceError> {
        let mut items: Vec<StaticResource> = Vec::new();
        for (index, c) in configs.iter().enumerate() {
            let fail = |problem| StaticResourceError {
                index,
                uri: c.uri.clone(),
                problem,
            };
            if !fields::uri_ok(&c.uri)
                || !c.uri.contains(':')
                || c.uri
                    .chars()
                    .any(|ch| ch.is_whitespace() || ch.is_control())
            {
                return Err(fail(StaticProblem::Uri));
            }
            if items.iter().any(|s| s.uri == c.uri) {
                return Err(fail(StaticProblem::DuplicateUri));
            }
            if !fields::name_ok(&c.name) {
                return Err(fail(StaticProblem::Name));
            }
            if c.mime_type
                .as_deref()
                .is_some_and(|m| !fields::mime_type_ok(m))
            {
                return Err(fail(StaticProblem::MimeType));
            }
            let access = match c.access {
                AccessConfig::Public => Access::Public,
                AccessConfig::Protected => Access::Protected,
            };
            // Its 403 challenge names them: bounded as a template's are.
            if c.required_scopes.len() > MAX_REQUIRED_SCOPES
                || c.required_scopes.iter().any(|s| s.len() > MAX_SCOPE_LEN)
            {
                return Err(fail(StaticProblem::Scopes));
            }
            if access == Access::Public && !c.required_scopes.is_empty() {
                return Err(fail(StaticProblem::ScopesOnPublic));
            }
            let content = match &c.body {
                StaticBody::Text(text) => StaticContent::Text(text.clone()),
                StaticBody::Blob(blob) => StaticContent::Blob(
                    base64::engine::general_purpose::STANDARD
                        .decode(blob)
                        .map_err(|e| fail(StaticProblem::Blob(e)))?,
                ),
                StaticBody::File(path) => {
                    let bytes = std::fs::read(path).map_err(|source| {
                        fail(StaticProblem::File {
                            path: path.clone(),
                            source,
                        })
                    })?;
                    match String::from_utf8(bytes) {
                        Ok(text) if !c.mime_type.as_deref().is_some_and(is_binary_mime) => {
                            StaticContent::Text(text)
                        }
                        Ok(text) => StaticContent::Blob(text.into_bytes()),
                        Err(e) => StaticContent::Blob(e.into_bytes()),
                    }
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
            body: StaticBody::Text("hello".into()),
        }
    }

    #[test]
    fn listing_json_and_checks() {
        let s = StaticResources::load(&[cfg("test://a")]).unwrap();
        assert_eq!(
            s.items[0].listing.get(),
            r#"{"uri":"test://a","name":"n","title":"T","mimeType":"text/plain","size":5}"#
        );
        assert!(matches!(
            StaticResources::load(&[cfg("test://a"), cfg("test://a")])
                .unwrap_err()
                .problem,
            StaticProblem::DuplicateUri
        ));
        assert!(matches!(
            StaticResources::load(&[cfg("no scheme")])
                .unwrap_err()
                .problem,
            StaticProblem::Uri
        ));
        let mut missing = cfg("test://b");
        missing.body = StaticBody::File("/nonexistent/emseepea/file.txt".into());
        let e = StaticResources::load(&[missing]).unwrap_err();
        assert!(matches!(e.problem, StaticProblem::File { .. }), "{e}");
        assert!(
            e.to_string().contains("/nonexistent/emseepea/file.txt"),
            "{e}"
        );
    }
}
