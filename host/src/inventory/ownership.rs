//! One owner per URI, checked once at startup: no two sources' templates
//! can match the same URI, and no template matches a static resource's
//! URI. Without this a read would go to whichever owner comes first, and
//! a source could answer (and apply its own policy) for another's records.
//! Decided exactly on the templates' automata (`UriTemplate::overlap`).

use super::statics::StaticResources;
use crate::runtime::Source;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Two owners for some URI; names both files.
#[derive(Debug, thiserror::Error)]
pub enum OwnershipError {
    #[error(
        "{}: uri-template {template:?} of source {name:?} can match the same URIs as uri-template {other_template:?} of source {other_name:?} ({}), e.g. {example:?}; every URI must belong to one source",
        file.display(), other_file.display()
    )]
    Templates {
        file: PathBuf,
        name: String,
        template: String,
        other_file: PathBuf,
        other_name: String,
        other_template: String,
        example: String,
    },
    #[error(
        "{}: resources[{index}] ({uri}): the uri also matches uri-template {template:?} of source {name:?} ({}); every URI must belong to one owner",
        config.display(), file.display()
    )]
    Static {
        config: PathBuf,
        index: usize,
        uri: String,
        file: PathBuf,
        name: String,
        template: String,
    },
}

/// Check `sources` (in registration order: the later one is reported) and
/// the static resources of the config file `config`.
pub fn check(
    sources: &[Arc<Source>],
    statics: &StaticResources,
    config: &Path,
) -> Result<(), Box<OwnershipError>> {
    for (i, source) in sources.iter().enumerate() {
        let template = &source.definition.uri_template;
        for other in &sources[..i] {
            let other_template = &other.definition.uri_template;
            if let Some(example) = template.overlap(other_template) {
                return Err(Box::new(OwnershipError::Templates {
                    file: source.file.clone(),
                    name: source.name().to_owned(),
                    template: template.as_str().to_owned(),
                    other_file: other.file.clone(),
                    other_name: other.name().to_owned(),
                    other_template: other_template.as_str().to_owned(),
                    example,
                }));
            }
        }
    }
    for (index, resource) in statics.items.iter().enumerate() {
        if let Some(source) = sources
            .iter()
            .find(|s| s.definition.uri_template.matches(&resource.uri))
        {
            return Err(Box::new(OwnershipError::Static {
                config: config.to_owned(),
                index,
                uri: resource.uri.clone(),
                file: source.file.clone(),
                name: source.name().to_owned(),
                template: source.definition.uri_template.as_str().to_owned(),
            }));
        }
    }
    Ok(())
}
