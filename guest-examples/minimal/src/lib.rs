//! The smallest useful inventory source: the README's example, built by
//! `cargo xtask guests` so it is known to compile.
wit_bindgen::generate!({ world: "inventory-source", path: "../../wit" });

use emseepea::inventory::types::*;
use exports::emseepea::inventory::{inventory, template};

const RECORDS: [(&str, &str, &str); 3] = [
    ("alice", "k1", "Alpha"),
    ("alice", "k2", "Beta"),
    ("bob", "k3", "Gamma"),
];

struct Minimal;

impl template::Guest for Minimal {
    fn describe() -> Template {
        Template {
            name: "minimal".into(),
            uri_template: "minimal://records/{key}".into(),
            title: Some("Minimal".into()),
            description: None,
            mime_type: Some("text/plain".into()),
            access: Access::Protected,
            required_scopes: vec!["minimal:read".into()],
            discoverable: true,
        }
    }

    fn read(uri: String, context: CallContext) -> Result<Vec<ResourceContents>, SourceError> {
        let user = context
            .principal
            .and_then(|p| p.subject)
            .ok_or(SourceError::Failed("no user".into()))?;
        let key = uri
            .strip_prefix("minimal://records/")
            .ok_or(SourceError::NotFound)?;
        // Check ownership again on every read: a listed URI grants nothing.
        let (_, _, title) = RECORDS
            .iter()
            .find(|(o, k, _)| *o == user && *k == key)
            .ok_or(SourceError::NotFound)?;
        Ok(vec![ResourceContents {
            uri,
            mime_type: Some("text/plain".into()),
            body: ResourceBody::Text(title.to_string()),
        }])
    }
}

impl inventory::Guest for Minimal {
    fn list(
        after: Option<String>,
        limit: u32,
        context: CallContext,
    ) -> Result<InventoryPage, SourceError> {
        let user = context
            .principal
            .and_then(|p| p.subject)
            .ok_or(SourceError::Failed("no user".into()))?;
        // Only this caller's records, keys strictly after `after`, in key order.
        let mine = RECORDS
            .iter()
            .filter(|(o, k, _)| *o == user && after.as_deref().is_none_or(|a| *k > a));
        let mut entries: Vec<InventoryEntry> = mine
            .map(|(_, k, title)| InventoryEntry {
                key: k.to_string(),
                resource: ResourceMetadata {
                    uri: format!("minimal://records/{k}"),
                    name: title.to_string(),
                    mime_type: None,
                },
            })
            .take(limit as usize + 1)
            .collect();
        let has_more = entries.len() > limit as usize;
        entries.truncate(limit as usize);
        Ok(InventoryPage { entries, has_more })
    }
}

export!(Minimal);
