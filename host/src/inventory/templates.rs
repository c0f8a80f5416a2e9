//! `resources/templates/list`: the discoverable templates ("resources/
//! templates/list continues to describe registered URI patterns"), in
//! registration order, paged with the same sealed cursors. The listing
//! itself is serialized by the MCP layer (`mcp::model::template_listing`).

use super::cursor::{CursorError, CursorKeys, CursorState, Position};
use super::pager::{ListError, Page, cursor_binding};
use serde_json::value::RawValue;

/// One page of `listing` (serialized `ResourceTemplate`s), bounded like
/// resource pages. The listing is the same for every caller and is
/// advertised as public (`cacheScope: "public"`), so its cursors are bound
/// to the source set only, not to the caller: a page-1 cursor fetched
/// anonymously works with a token, and the other way round.
pub fn page_templates(
    listing: &[Box<RawValue>],
    keys: &CursorKeys,
    fingerprint: &[u8; 32],
    cursor: Option<&str>,
    page_size: u32,
    budget: usize,
) -> Result<Page, ListError> {
    let binding = cursor_binding(None, fingerprint);
    let (started_ms, mut offset) = match cursor {
        None => (keys.now_ms(), 0usize),
        Some(c) => match keys
            .open(c, &binding)
            .map_err(|e| ListError::InvalidCursor(e.record()))?
        {
            CursorState {
                started_ms,
                position: Position::Template { offset },
            } if (offset as usize) < listing.len() => (started_ms, offset as usize),
            _ => return Err(ListError::InvalidCursor(CursorError::Plaintext.record())),
        },
    };
    let mut page = Page::with_capacity(page_size as usize, budget.min(16 * 1024));
    while offset < listing.len() && page.len() < page_size as usize {
        let json = &listing[offset];
        let next = offset + 1;
        let cursor_cost = if next < listing.len() {
            16 + CursorKeys::encoded_len(&Position::Template {
                offset: next as u32,
            })
        } else {
            0
        };
        if !page.push_within(budget, cursor_cost, |out| {
            out.extend_from_slice(json.get().as_bytes())
        }) {
            if page.is_empty() {
                return Err(ListError::EntryTooLarge {
                    source_name: "templates".into(),
                });
            }
            break;
        }
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
    page.next_cursor = next_cursor;
    Ok(page)
}
