//! A source's definition (the `template` record its `describe()` returned),
//! validated once at startup and fixed until restart.

use super::bindings::emseepea::inventory::types::{self as wit};
use crate::config::{
    MAX_DESCRIPTION_LEN, MAX_MIME_TYPE_LEN, MAX_REQUIRED_SCOPES, MAX_SCOPE_LEN,
    MAX_TEMPLATE_NAME_LEN as MAX_NAME, MAX_TITLE_LEN,
};
use crate::fields;
use crate::guest_text::GuestText;
use crate::uri_template::UriTemplate;

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

impl SourceDefinition {
    /// Validate what `describe()` returned; `lists` is whether the component
    /// exports `inventory`.
    pub fn validate(t: wit::Template, lists: bool) -> Result<Self, String> {
        if t.name.is_empty()
            || t.name.len() > MAX_NAME
            || !t
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            return Err(format!(
                "template name {:?} must be 1..={MAX_NAME} characters of [a-z0-9_-]",
                GuestText::new(&t.name)
            ));
        }
        // Over a bound, the template is not quoted (it may be huge); the
        // bounds keep matching it linear and cheap (config.rs).
        let uri_template = UriTemplate::parse(&t.uri_template).map_err(|e| {
            if e.is_bound() {
                format!("uri-template {e}")
            } else {
                format!(
                    "uri-template {:?} does not parse: {}",
                    GuestText::new(&t.uri_template),
                    GuestText::new(&e.to_string())
                )
            }
        })?;
        if uri_template.expression_count() == 0 {
            return Err(format!(
                "uri-template {:?} has no expression",
                GuestText::new(&t.uri_template)
            ));
        }
        check_len("title", t.title.as_deref(), MAX_TITLE_LEN)?;
        check_len("description", t.description.as_deref(), MAX_DESCRIPTION_LEN)?;
        check_len("mime-type", t.mime_type.as_deref(), MAX_MIME_TYPE_LEN)?;
        // Every 401/403 challenge for the template names its scopes: bounded
        // so that the header stays small (`config::MAX_CHALLENGE_BYTES`).
        if t.required_scopes.len() > MAX_REQUIRED_SCOPES {
            return Err(format!(
                "{} required scopes; at most {MAX_REQUIRED_SCOPES} are allowed",
                t.required_scopes.len()
            ));
        }
        for scope in &t.required_scopes {
            if scope.is_empty()
                || scope.len() > MAX_SCOPE_LEN
                || !scope
                    .bytes()
                    .all(|b| (0x21..=0x7e).contains(&b) && b != b'"' && b != b'\\')
            {
                return Err(format!(
                    "required scope {:?} must be 1..={MAX_SCOPE_LEN} printable ASCII characters without spaces or quotes",
                    GuestText::new(scope)
                ));
            }
        }
        let access = match t.access {
            wit::Access::Public => Access::Public,
            wit::Access::Protected => Access::Protected,
        };
        if access == Access::Public && !t.required_scopes.is_empty() {
            return Err("a public template cannot have required-scopes".into());
        }
        // "list is supported only on a protected, discoverable template. Public or
        // suppressed templates cannot register it."
        if lists && access == Access::Public {
            return Err("exports `inventory` (list) but its template is public; list needs a protected template".into());
        }
        if lists && !t.discoverable {
            return Err(
                "exports `inventory` (list) but its template is suppressed (discoverable: false)"
                    .into(),
            );
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

fn check_len(what: &str, value: Option<&str>, max: usize) -> Result<(), String> {
    match value {
        Some(v) if !fields::within(v, max) => {
            Err(format!("{what} is longer than {max} characters"))
        }
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
        assert!(
            SourceDefinition::validate(public.clone(), true)
                .unwrap_err()
                .contains("public")
        );
        assert!(SourceDefinition::validate(public, false).is_ok());
        let mut hidden = template();
        hidden.discoverable = false;
        assert!(
            SourceDefinition::validate(hidden.clone(), true)
                .unwrap_err()
                .contains("suppressed")
        );
        assert!(SourceDefinition::validate(hidden, false).is_ok());
    }

    #[test]
    fn names_templates_and_scopes_are_checked() {
        let mut t = template();
        t.name = "Bad Name".into();
        assert!(SourceDefinition::validate(t, false).is_err());
        let mut t = template();
        t.uri_template = "learn://{".into();
        assert!(SourceDefinition::validate(t, false).is_err());
        let mut t = template();
        t.uri_template = "learn://fixed".into();
        assert!(SourceDefinition::validate(t, false).is_err());
        let mut t = template();
        t.required_scopes = vec!["has space".into()];
        assert!(SourceDefinition::validate(t, false).is_err());
    }
}
