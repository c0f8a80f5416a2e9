//! Write an emseepea inventory source in a few lines.
//!
//! - [`bindings`]: the WIT contract (`emseepea:inventory@0.1.0`, world
//!   `inventory-source`), generated once here;
//! - [`Definition`]: the template declaration, close to the seed's
//!   `defineResourceTemplate({ name, uriTemplate, access, requiredScopes, list, handler })`;
//! - [`Source`] + [`export_source!`]: implement `definition`, `list` and
//!   `read`, export them;
//! - [`ListRequest`]: the `list` arguments, with [`ListRequest::page`] (takes
//!   up to `limit + 1` rows and sets `has-more` truthfully) and
//!   [`ListRequest::subject`];
//! - [`keys`]: order-preserving printable-ASCII keys;
//! - [`require_subject`], [`deadline`]: the caller and the time left.
//!
//! The rules a source must keep are stated once, in the README's "Writing a
//! guest"; `emseepea test-source FILE.wasm` checks them before you deploy.
//!
//! Statics may persist between calls of one caller (the host keeps an
//! instance for that caller's next call) and never reach another caller; do
//! not rely on them being empty or kept, and never mix callers' data in
//! them. Handles (connections, requests) never persist. See the book:
//! Concepts, "Instances".

pub mod deadline;
pub mod keys;
mod page;

/// The generated WIT bindings. Off wasm32 the imports are stubs that panic,
/// so the pure helpers of this crate test natively.
pub mod bindings {
    wit_bindgen::generate!({
        world: "inventory-source",
        path: "../../wit",
        pub_export_macro: true,
        export_macro_name: "export_bindings",
        default_bindings_module: "emseepea_guest::bindings",
    });
}

pub use bindings::emseepea::inventory::config;
pub use bindings::emseepea::inventory::types::{
    Access, CallContext, InventoryEntry, InventoryPage, Principal, ResourceBody, ResourceContents,
    ResourceMetadata, SourceError, Template,
};
pub use page::{ListRequest, PageBuilder, entry};

/// A source's template, as a declaration: protected and discoverable unless
/// said otherwise.
#[derive(Debug, Clone)]
pub struct Definition {
    template: Template,
}

impl Definition {
    /// A protected, discoverable template (the kind that may list).
    pub fn protected(name: &str, uri_template: &str) -> Self {
        Definition {
            template: Template {
                name: name.into(),
                uri_template: uri_template.into(),
                title: None,
                description: None,
                mime_type: None,
                access: Access::Protected,
                required_scopes: vec![],
                discoverable: true,
            },
        }
    }

    /// A public template: anyone may read; it may not list.
    pub fn public(name: &str, uri_template: &str) -> Self {
        let mut d = Self::protected(name, uri_template);
        d.template.access = Access::Public;
        d
    }

    pub fn title(mut self, title: &str) -> Self {
        self.template.title = Some(title.into());
        self
    }

    pub fn description(mut self, description: &str) -> Self {
        self.template.description = Some(description.into());
        self
    }

    /// Every resource of the template has this type.
    pub fn mime_type(mut self, mime_type: &str) -> Self {
        self.template.mime_type = Some(mime_type.into());
        self
    }

    /// Scopes a token must hold, all of them.
    pub fn scopes<'a>(mut self, scopes: impl IntoIterator<Item = &'a str>) -> Self {
        self.template.required_scopes = scopes.into_iter().map(str::to_owned).collect();
        self
    }

    pub fn hidden(mut self) -> Self {
        self.template.discoverable = false;
        self
    }

    pub fn template(self) -> Template {
        self.template
    }
}

/// A source: its definition, `list` (the caller's records, one page) and
/// `read` (one resource, ownership checked again). Export it with
/// [`export_source!`].
pub trait Source {
    fn definition() -> Definition;
    fn list(request: ListRequest) -> Result<InventoryPage, SourceError>;
    fn read(uri: String, context: CallContext) -> Result<Vec<ResourceContents>, SourceError>;
}

/// Export a [`Source`] as the component's `template` and `inventory`.
#[macro_export]
macro_rules! export_source {
    ($source:ty) => {
        #[doc(hidden)]
        pub struct __EmseepeaExport;

        impl $crate::bindings::exports::emseepea::inventory::template::Guest for __EmseepeaExport {
            fn describe() -> $crate::Template {
                <$source as $crate::Source>::definition().template()
            }
            fn read(
                uri: ::std::string::String,
                context: $crate::CallContext,
            ) -> ::core::result::Result<::std::vec::Vec<$crate::ResourceContents>, $crate::SourceError>
            {
                <$source as $crate::Source>::read(uri, context)
            }
        }

        impl $crate::bindings::exports::emseepea::inventory::inventory::Guest for __EmseepeaExport {
            fn list(
                after: ::core::option::Option<::std::string::String>,
                limit: u32,
                context: $crate::CallContext,
            ) -> ::core::result::Result<$crate::InventoryPage, $crate::SourceError> {
                <$source as $crate::Source>::list($crate::ListRequest {
                    after,
                    limit,
                    context,
                })
            }
        }

        $crate::bindings::export_bindings!(__EmseepeaExport with_types_in $crate::bindings);
    };
}

/// The caller's user id, or the refusal a per-user source must give without
/// one ("if (!principal.subject) throw ..."): never fall back to everyone's
/// records.
pub fn require_subject(context: &CallContext) -> Result<&str, SourceError> {
    context
        .principal
        .as_ref()
        .and_then(|p| p.subject.as_deref())
        .ok_or_else(|| SourceError::Failed("A verified user is required".into()))
}

/// A one-item text result for `read`.
pub fn text(
    uri: String,
    mime_type: Option<&str>,
    body: impl Into<String>,
) -> Vec<ResourceContents> {
    vec![ResourceContents {
        uri,
        mime_type: mime_type.map(str::to_owned),
        body: ResourceBody::Text(body.into()),
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(subject: Option<&str>) -> CallContext {
        CallContext {
            principal: Some(Principal {
                subject: subject.map(str::to_owned),
                client_id: "c".into(),
                scopes: vec![],
                audience: None,
            }),
            deadline_ms: 0,
        }
    }

    #[test]
    fn require_subject_refuses_without_a_user() {
        assert_eq!(require_subject(&context(Some("alice"))).ok(), Some("alice"));
        assert!(matches!(
            require_subject(&context(None)),
            Err(SourceError::Failed(_))
        ));
        let anonymous = CallContext {
            principal: None,
            deadline_ms: 0,
        };
        assert!(require_subject(&anonymous).is_err());
    }

    #[test]
    fn definitions_read_like_the_seed() {
        let t = Definition::protected("docs", "learn://documents/{id}")
            .title("Documents")
            .mime_type("text/plain")
            .scopes(["documents:read"])
            .template();
        assert_eq!(t.name, "docs");
        assert_eq!(t.access, Access::Protected);
        assert!(t.discoverable);
        assert_eq!(t.required_scopes, ["documents:read"]);
        let p = Definition::public("p", "p://{x}").hidden().template();
        assert_eq!(p.access, Access::Public);
        assert!(!p.discoverable);
    }
}
