//! `list`'s arguments and a page builder that sets `has-more` truthfully:
//! ask the backend for `limit + 1` rows; the extra row only says whether
//! more exist.

use crate::{CallContext, InventoryEntry, InventoryPage, ResourceMetadata, SourceError};

/// The arguments of one `list` call.
#[derive(Debug, Clone)]
pub struct ListRequest {
    /// Exclusive lower bound: return only keys strictly greater.
    pub after: Option<String>,
    pub limit: u32,
    pub context: CallContext,
}

impl ListRequest {
    /// How many rows to ask the backend for: `limit + 1`.
    pub fn fetch(&self) -> u32 {
        self.limit.saturating_add(1)
    }

    /// `after`, or `""` (below every non-empty key) for the first page.
    pub fn after_or_start(&self) -> &str {
        self.after.as_deref().unwrap_or("")
    }

    /// Whether `key` belongs on this page's side of `after`.
    pub fn is_after(&self, key: &str) -> bool {
        self.after.as_deref().is_none_or(|a| key > a)
    }

    pub fn subject(&self) -> Result<&str, SourceError> {
        crate::require_subject(&self.context)
    }

    /// A page from rows in increasing key order, already after `after`:
    /// takes at most `limit + 1` of them; `has-more` is whether the extra one
    /// existed.
    pub fn page(&self, rows: impl IntoIterator<Item = InventoryEntry>) -> InventoryPage {
        let mut b = PageBuilder::new(self.limit);
        for row in rows {
            if !b.push(row) {
                break;
            }
        }
        b.finish()
    }
}

/// Collects up to `limit` entries and notices the `limit + 1`-th.
#[derive(Debug)]
pub struct PageBuilder {
    limit: usize,
    entries: Vec<InventoryEntry>,
    has_more: bool,
}

impl PageBuilder {
    pub fn new(limit: u32) -> Self {
        PageBuilder {
            limit: limit as usize,
            entries: Vec::with_capacity((limit as usize).min(100)),
            has_more: false,
        }
    }

    /// Add the next row; false once the page is complete (stop fetching).
    pub fn push(&mut self, entry: InventoryEntry) -> bool {
        if self.entries.len() < self.limit {
            self.entries.push(entry);
            true
        } else {
            self.has_more = true;
            false
        }
    }

    pub fn finish(self) -> InventoryPage {
        InventoryPage {
            // A page with has-more must hold an entry: with limit 0 nothing
            // can be returned, so nothing is promised either.
            has_more: self.has_more && !self.entries.is_empty(),
            entries: self.entries,
        }
    }
}

/// One listed record.
pub fn entry(
    key: impl Into<String>,
    uri: impl Into<String>,
    name: impl Into<String>,
) -> InventoryEntry {
    InventoryEntry {
        key: key.into(),
        resource: ResourceMetadata {
            uri: uri.into(),
            name: name.into(),
            mime_type: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(after: Option<&str>, limit: u32) -> ListRequest {
        ListRequest {
            after: after.map(str::to_owned),
            limit,
            context: CallContext {
                principal: None,
                deadline_ms: 0,
            },
        }
    }

    fn rows(n: usize) -> impl Iterator<Item = InventoryEntry> {
        (0..n).map(|i| entry(format!("k{i:03}"), format!("x://{i}"), "n"))
    }

    #[test]
    fn has_more_is_truthful() {
        let r = request(None, 3);
        assert_eq!(r.fetch(), 4);
        let p = r.page(rows(4));
        assert_eq!((p.entries.len(), p.has_more), (3, true));
        let p = r.page(rows(3));
        assert_eq!((p.entries.len(), p.has_more), (3, false));
        let p = r.page(rows(0));
        assert_eq!((p.entries.len(), p.has_more), (0, false));
        let p = request(None, 0).page(rows(5));
        assert_eq!((p.entries.len(), p.has_more), (0, false));
    }

    #[test]
    fn pages_stop_pulling_rows_after_limit_plus_one() {
        let mut pulled = 0;
        let r = request(None, 2);
        let _ = r.page(rows(1000).inspect(|_| pulled += 1));
        assert_eq!(pulled, 3);
    }

    #[test]
    fn after_is_exclusive() {
        let r = request(Some("k002"), 5);
        assert!(!r.is_after("k002"));
        assert!(r.is_after("k003"));
        assert_eq!(r.after_or_start(), "k002");
        assert_eq!(request(None, 1).after_or_start(), "");
    }
}
