//! `[[resources]]`: the static resources, listed before every source; each
//! has exactly one body, checked while parsing.

use serde::Deserialize;
use std::path::PathBuf;

#[derive(
    Debug, Clone, Copy, Default, Deserialize, serde::Serialize, PartialEq, Eq, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum AccessConfig {
    #[default]
    Public,
    Protected,
}

/// A `[[resources]]` entry as written: its body is one of `text`, `blob`
/// or `file`, checked into [`StaticResourceConfig`] while parsing.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct StaticResourceFile {
    /// The resource's URI (no source's template may match it).
    uri: String,
    /// Its name in listings.
    name: String,
    title: Option<String>,
    description: Option<String>,
    mime_type: Option<String>,
    /// `public` (anyone) or `protected` (a token with `requiredScopes`).
    #[serde(default)]
    access: AccessConfig,
    /// Scopes a token needs to list or read it (protected resources).
    #[serde(default)]
    required_scopes: Vec<String>,
    /// Inline text content; exactly one of `text`, `blob` and `file`.
    text: Option<String>,
    /// Inline binary content, base64.
    blob: Option<String>,
    /// Content read from this file at startup (relative to the config
    /// file); a missing file stops startup.
    file: Option<PathBuf>,
}

/// A static resource from the config (`[[resources]]`).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(try_from = "StaticResourceFile")]
#[schemars(with = "StaticResourceFile")]
pub struct StaticResourceConfig {
    pub uri: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
    pub access: AccessConfig,
    pub required_scopes: Vec<String>,
    pub body: StaticBody,
}

/// Where a static resource's content comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StaticBody {
    /// Inline text content.
    Text(String),
    /// Inline binary content, base64.
    Blob(String),
    /// Content read from a file at startup (relative to the config file).
    File(PathBuf),
}

/// A `[[resources]]` entry without exactly one body.
#[derive(Debug, thiserror::Error)]
#[error("resource {uri}: exactly one of text, blob or file is required")]
pub struct StaticBodyError {
    uri: String,
}

impl TryFrom<StaticResourceFile> for StaticResourceConfig {
    type Error = StaticBodyError;

    fn try_from(f: StaticResourceFile) -> Result<Self, StaticBodyError> {
        let body = match (f.text, f.blob, f.file) {
            (Some(text), None, None) => StaticBody::Text(text),
            (None, Some(blob), None) => StaticBody::Blob(blob),
            (None, None, Some(file)) => StaticBody::File(file),
            _ => return Err(StaticBodyError { uri: f.uri }),
        };
        Ok(Self {
            uri: f.uri,
            name: f.name,
            title: f.title,
            description: f.description,
            mime_type: f.mime_type,
            access: f.access,
            required_scopes: f.required_scopes,
            body,
        })
    }
}
