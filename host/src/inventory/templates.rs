//! `resources/templates/list`: the discoverable templates ("resources/
//! templates/list continues to describe registered URI patterns"), in
//! registration order, paged with the same sealed cursors.

use super::cursor::{CursorError, CursorKeys, CursorState, Position};
use super::pager::{ListError, Page, cursor_binding};
use crate::auth::Principal;
use crate::runtime::SourceDefinition;
use serde::Serialize;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TemplateJson<'a> {
    uri_template: &'a str,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mime_type: Option<&'a str>,
}

/// Serialized `ResourceTemplate` objects of every discoverable template.
pub fn template_listing(definitions: &[&SourceDefinition]) -> Vec<Vec<u8>> {
    definitions
        .iter()
        .filter(|d| d.discoverable)
        .map(|d| {
            serde_json::to_vec(&TemplateJson {
                uri_template: d.uri_template.as_str(),
                name: &d.name,
                title: d.title.as_deref(),
                description: d.description.as_deref(),
                mime_type: d.mime_type.as_deref(),
            })
            .expect("serializable")
        })
        .collect()
}

/// One page of `listing`, bounded like resource pages.
pub fn page_templates(
    listing: &[Vec<u8>],
    keys: &CursorKeys,
    fingerprint: &[u8; 32],
    principal: Option<&Principal>,
    cursor: Option<&str>,
    page_size: u32,
    budget: usize,
) -> Result<Page, ListError> {
    let binding = cursor_binding(principal, fingerprint);
    let (started_ms, mut offset) = match cursor {
        None => (keys.now_ms(), 0usize),
        Some(c) => match keys.open(c, &binding).map_err(ListError::InvalidCursor)? {
            CursorState {
                started_ms,
                position: Position::Template { offset },
            } if (offset as usize) < listing.len() => (started_ms, offset as usize),
            _ => return Err(ListError::InvalidCursor(CursorError::Plaintext)),
        },
    };
    let mut entries = Vec::new();
    let mut used = 0;
    while offset < listing.len() && entries.len() < page_size as usize {
        let json = &listing[offset];
        let next = offset + 1;
        let cursor_cost = if next < listing.len() {
            16 + CursorKeys::encoded_len(&Position::Template {
                offset: next as u32,
            })
        } else {
            0
        };
        let cost = json.len() + usize::from(!entries.is_empty());
        if used + cost + cursor_cost > budget {
            if entries.is_empty() {
                return Err(ListError::EntryTooLarge {
                    source_name: "templates".into(),
                });
            }
            break;
        }
        used += cost;
        entries.push(json.clone());
        offset = next;
    }
    let next_cursor = (offset < listing.len()).then(|| {
        keys.seal(
            &CursorState {
                started_ms,
                position: Position::Template {
                    offset: offset as u32,
                },
            },
            &binding,
        )
    });
    Ok(Page {
        entries,
        next_cursor,
    })
}
