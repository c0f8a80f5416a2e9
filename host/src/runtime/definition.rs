//! A source's definition (the `template` record its `describe()` returned),
//! validated once at startup and fixed until restart.

use super::bindings::emseepea::inventory::types::{self as wit};
use crate::fields;
use crate::guest_text::GuestText;
use crate::limits::{
    MAX_DESCRIPTION_LEN, MAX_MIME_TYPE_LEN, MAX_REQUIRED_SCOPES, MAX_SCOPE_LEN,
    MAX_TEMPLATE_NAME_LEN as MAX_NAME, MAX_TITLE_LEN,
};
use crate::uri_template::{TemplateError, UriTemplate};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Public,
    Protected,
}

/// A validated template definition.
#[derive(Clone, Debug)]
pub struct SourceDefinition {
    pub name: String,
    pub uri_template: UriTemplate,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
    pub access: Access,
    pub required_scopes: Vec<String>,
    pub discoverable: bool,
}

/// Why a `describe()` result is refused at startup (the messages are the
/// startup error's reason; guest text in them is escaped and cut).
#[derive(Debug, thiserror::Error)]
pub enum DefinitionError {
    #[error("template name {:?} must be 1..={MAX_NAME} characters of [a-z0-9_-]", GuestText::new(.0))]
    Name(String),
    /// Over a host bound the template is not quoted (it may be huge).
    #[error("uri-template {0}")]
    UriTemplateBound(TemplateError),
    #[error("uri-template {:?} does not parse: {}", GuestText::new(template), GuestText::new(&reason.to_string()))]
    UriTemplateSyntax {
        template: String,
        reason: TemplateError,
    },
    #[error("uri-template {:?} has no expression", GuestText::new(.0))]
    UriTemplateWithoutExpression(String),
    #[error("{field} is longer than {max} characters")]
    TooLong { field: &'static str, max: usize },
    #[error("{0} required scopes; at most {MAX_REQUIRED_SCOPES} are allowed")]
    TooManyScopes(usize),
    #[error(
        "required scope {:?} must be 1..={MAX_SCOPE_LEN} printable ASCII characters without spaces or quotes",
        GuestText::new(.0)
    )]
    Scope(String),
    #[error("a public template cannot have required-scopes")]
    PublicWithScopes,
    #[error(
        "exports a listing (`inventory` or `inventory-json`) but its template is public; list needs a protected template"
    )]
    PublicListing,
    #[error(
        "exports a listing (`inventory` or `inventory-json`) but its template is suppressed (discoverable: false)"
    )]
    SuppressedListing,
}

impl SourceDefinition {
    /// Validate what `describe()` returned; `lists` is whether the component
    /// exports a listing (`inventory` or `inventory-json`).
    pub fn validate(t: wit::Template, lists: bool) -> Result<Self, DefinitionError> {
        if t.name.is_empty()
            || t.name.len() > MAX_NAME
            || !t
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            return Err(DefinitionError::Name(t.name));
        }
        // The bounds keep matching linear and cheap (config.rs).
        let uri_template = UriTemplate::parse(&t.uri_template).map_err(|e| {
            if e.is_bound() {
                DefinitionError::UriTemplateBound(e)
            } else {
                DefinitionError::UriTemplateSyntax {
                    template: t.uri_template.clone(),
                    reason: e,
                }
            }
        })?;
        if uri_template.expression_count() == 0 {
            return Err(DefinitionError::UriTemplateWithoutExpression(
                t.uri_template,
            ));
        }
        check_len("title", t.title.as_deref(), MAX_TITLE_LEN)?;
        check_len("description", t.description.as_deref(), MAX_DESCRIPTION_LEN)?;
        check_len("mime-type", t.mime_type.as_deref(), MAX_MIME_TYPE_LEN)?;
        // Every 401/403 challenge for the template names its scopes: bounded
        // so that the header stays small (`config::MAX_CHALLENGE_BYTES`).
        if t.required_scopes.len() > MAX_REQUIRED_SCOPES {
            return Err(DefinitionError::TooManyScopes(t.required_scopes.len()));
        }
        for scope in &t.required_scopes {
            if scope.is_empty()
                || scope.len() > MAX_SCOPE_LEN
                || !scope
                    .bytes()
                    .all(|b| (0x21..=0x7e).contains(&b) && b != b'"' && b != b'\\')
            {
                return Err(DefinitionError::Scope(scope.clone()));
            }
        }
        let access = match t.access {
            wit::Access::Public => Access::Public,
            wit::Access::Protected => Access::Protected,
        };
        if access == Access::Public && !t.required_scopes.is_empty() {
            return Err(DefinitionError::PublicWithScopes);
        }
        // "list is supported only on a protected, discoverable template. Public or
        // suppressed templates cannot register it."
        if lists && access == Access::Public {
            return Err(DefinitionError::PublicListing);
        }
        if lists && !t.discoverable {
            return Err(DefinitionError::SuppressedListing);
        }
        let mut required_scopes = t.required_scopes;
        required_scopes.sort();
        required_scopes.dedup();
        Ok(SourceDefinition {
            name: t.name,
            uri_template,
            title: t.title,
            description: t.description,
            mime_type: t.mime_type,
            access,
            required_scopes,
            discoverable: t.discoverable,
        })
    }
}

fn check_len(field: &'static str, value: Option<&str>, max: usize) -> Result<(), DefinitionError> {
    match value {
        Some(v) if !fields::within(v, max) => Err(DefinitionError::TooLong { field, max }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use super::*;

    fn template() -> wit::Template {
        wit::Template {
            name: "docs".into(),
            uri_template: "learn://documents/{id}".into(),
            title: None,
            description: None,
            mime_type: Some("text/plain".into()),
            access: wit::Access::Protected,
            required_scopes: vec!["documents:read".into()],
            discoverable: true,
        }
    }

    #[test]
    fn list_needs_protected_discoverable() {
        assert!(SourceDefinition::validate(template(), true).is_ok());
        let mut public = template();
        public.access = wit::Access::Public;
        public.required_scopes.clear();
        assert!(matches!(
            SourceDefinition::validate(public.clone(), true),
            Err(DefinitionError::PublicListing)
        ));
        assert!(SourceDefinition::validate(public, false).is_ok());
        let mut hidden = template();
        hidden.discoverable = false;
        assert!(matches!(
            SourceDefinition::validate(hidden.clone(), true),
            Err(DefinitionError::SuppressedListing)
        ));
        assert!(SourceDefinition::validate(hidden, false).is_ok());
    }

    #[test]
    fn names_templates_and_scopes_are_checked() {
        let mut t = template();
        t.name = "Bad Name".into();
        assert!(matches!(
            SourceDefinition::validate(t, false),
            Err(DefinitionError::Name(n)) if n == "Bad Name"
        ));
        let mut t = template();
        t.uri_template = "learn://{".into();
        assert!(matches!(
            SourceDefinition::validate(t, false),
            Err(DefinitionError::UriTemplateSyntax { .. })
        ));
        let mut t = template();
        t.uri_template = "learn://fixed".into();
        assert!(matches!(
            SourceDefinition::validate(t, false),
            Err(DefinitionError::UriTemplateWithoutExpression(_))
        ));
        let mut t = template();
        t.required_scopes = vec!["has space".into()];
        assert!(matches!(
            SourceDefinition::validate(t, false),
            Err(DefinitionError::Scope(_))
        ));
        let mut t = template();
        t.title = Some("x".repeat(MAX_TITLE_LEN + 1));
        assert!(matches!(
            SourceDefinition::validate(t, false),
            Err(DefinitionError::TooLong { field: "title", .. })
        ));
    }
}
