//! Entry validation: every page a guest returns is checked here before
//! anything reaches the merge. A violation fails the whole `resources/list`
//! with a generic error; the rule, the source and the offending value go to
//! the log only ("Invalid or oversized callback results fail with a generic
//! protocol error.").

use crate::config::{MAX_KEY_LEN, MAX_MIME_TYPE_LEN, MAX_NAME_LEN, MAX_URI_LEN};
use crate::runtime::GuestPage;
use crate::uri_template::UriTemplate;
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

/// The URIs already on a page. Hashed with FxHash rather than SipHash: at
/// most 100 short keys per page leave no room for hash flooding, and this
/// runs for every listed entry.
pub type UriSet = HashSet<String, BuildHasherDefault<FxHasher>>;

/// The Fx hash (rustc's): multiply-rotate over 8-byte words.
#[derive(Default)]
pub struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.0 =
                (self.0.rotate_left(5) ^ u64::from_le_bytes(c.try_into().unwrap())).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Which rule a page broke (for the log; never sent to a client).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageViolation {
    #[error("{count} entries for a limit of {limit}")]
    TooManyEntries { count: usize, limit: u32 },
    #[error("has-more is true on a page without entries")]
    HasMoreWithoutEntries,
    #[error("entry {index}: key is empty or longer than 256 characters")]
    KeyLength { index: usize },
    #[error("entry {index}: key has a character outside printable ASCII without spaces")]
    KeyCharacters { index: usize },
    #[error("entry {index}: key is not strictly greater than the previous key")]
    KeyOrder { index: usize },
    #[error("entry {index}: key is not greater than `after`")]
    KeyNotAfter { index: usize },
    #[error("entry {index}: uri longer than 2048 characters")]
    UriLength { index: usize },
    #[error("entry {index}: uri does not match the source's template")]
    UriTemplate { index: usize },
    #[error("entry {index}: uri already on this page")]
    UriDuplicate { index: usize },
    #[error("entry {index}: name longer than 512 characters")]
    NameLength { index: usize },
    #[error("entry {index}: mimeType longer than 128 characters")]
    MimeTypeLength { index: usize },
}

/// Length as the seed's JavaScript framework counts it (UTF-16 code units).
fn js_len(s: &str) -> usize {
    // Every UTF-8 byte sequence of n bytes is at most n UTF-16 units: only
    // count when the byte length could exceed the limit.
    s.encode_utf16().count()
}

/// Whether `s` is at most `max` characters as the seed counts them (UTF-16).
pub(crate) fn within(s: &str, max: usize) -> bool {
    s.len() <= max || js_len(s) <= max
}

/// Check one guest page. `page_uris` holds the URIs already on the page being
/// built (across all sources on it); accepted URIs are added to it.
pub fn validate_page(
    page: &GuestPage,
    limit: u32,
    after: Option<&str>,
    template: &UriTemplate,
    page_uris: &mut UriSet,
) -> Result<(), PageViolation> {
    // "Query with after as an exclusive lower bound and return at most limit entries."
    if page.len() > limit as usize {
        return Err(PageViolation::TooManyEntries {
            count: page.len(),
            limit,
        });
    }
    // "A page with hasMore: true must contain an entry."
    if page.has_more && page.is_empty() {
        return Err(PageViolation::HasMoreWithoutEntries);
    }
    let mut previous: Option<&str> = after;
    for (index, entry) in page.entries().enumerate() {
        let key = entry.key;
        // "Keys contain 1–256 printable ASCII characters without spaces."
        if key.is_empty() || key.len() > MAX_KEY_LEN {
            return Err(PageViolation::KeyLength { index });
        }
        if !key.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
            return Err(PageViolation::KeyCharacters { index });
        }
        // "Return them in strictly increasing JavaScript string order": for
        // ASCII, byte order is JavaScript's UTF-16 code-unit order.
        if let Some(prev) = previous
            && key <= prev
        {
            return Err(if index == 0 {
                PageViolation::KeyNotAfter { index }
            } else {
                PageViolation::KeyOrder { index }
            });
        }
        previous = Some(key);
        let r = entry;
        // "Metadata permits only uri (at most 2,048 characters), name (at most
        // 512), and mimeType (at most 128)."
        if !within(r.uri, MAX_URI_LEN) {
            return Err(PageViolation::UriLength { index });
        }
        // "Keep each URI unique across the source’s traversal and consistent
        // with its registered template."
        if !template.matches(r.uri) {
            return Err(PageViolation::UriTemplate { index });
        }
        if !within(r.name, MAX_NAME_LEN) {
            return Err(PageViolation::NameLength { index });
        }
        if let Some(m) = r.mime_type
            && !within(m, MAX_MIME_TYPE_LEN)
        {
            return Err(PageViolation::MimeTypeLength { index });
        }
        // (Any violation fails the whole listing, so a rejected page may
        // leave some of its URIs in `page_uris`.)
        if !page_uris.insert(r.uri.to_owned()) {
            return Err(PageViolation::UriDuplicate { index });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::types::{InventoryEntry, InventoryPage, ResourceMetadata};

    fn entry(key: &str, id: &str) -> InventoryEntry {
        InventoryEntry {
            key: key.into(),
            resource: ResourceMetadata {
                uri: format!("learn://documents/{id}"),
                name: format!("Doc {id}"),
                mime_type: Some("text/plain".into()),
            },
        }
    }

    fn check(
        entries: Vec<InventoryEntry>,
        has_more: bool,
        limit: u32,
        after: Option<&str>,
    ) -> Result<(), PageViolation> {
        let t = UriTemplate::parse("learn://documents/{id}").unwrap();
        validate_page(
            &InventoryPage { entries, has_more }.into(),
            limit,
            after,
            &t,
            &mut UriSet::default(),
        )
    }

    #[test]
    fn a_good_page_passes() {
        assert_eq!(
            check(vec![entry("a", "1"), entry("b", "2")], true, 2, None),
            Ok(())
        );
        assert_eq!(check(vec![], false, 2, Some("z")), Ok(()));
    }

    #[test]
    fn each_rule() {
        use PageViolation::*;
        assert!(matches!(
            check(vec![entry("a", "1"), entry("b", "2")], false, 1, None),
            Err(TooManyEntries { .. })
        ));
        assert_eq!(check(vec![], true, 5, None), Err(HasMoreWithoutEntries));
        assert_eq!(
            check(vec![entry("", "1")], false, 5, None),
            Err(KeyLength { index: 0 })
        );
        assert_eq!(
            check(vec![entry(&"k".repeat(257), "1")], false, 5, None),
            Err(KeyLength { index: 0 })
        );
        assert_eq!(
            check(vec![entry(&"k".repeat(256), "1")], false, 5, None),
            Ok(())
        );
        assert_eq!(
            check(vec![entry("a b", "1")], false, 5, None),
            Err(KeyCharacters { index: 0 })
        );
        assert_eq!(
            check(vec![entry("é", "1")], false, 5, None),
            Err(KeyCharacters { index: 0 })
        );
        assert_eq!(
            check(vec![entry("a\u{7f}", "1")], false, 5, None),
            Err(KeyCharacters { index: 0 })
        );
        assert_eq!(
            check(vec![entry("b", "1"), entry("a", "2")], false, 5, None),
            Err(KeyOrder { index: 1 })
        );
        assert_eq!(
            check(vec![entry("b", "1"), entry("b", "2")], false, 5, None),
            Err(KeyOrder { index: 1 })
        );
        assert_eq!(
            check(vec![entry("b", "1")], false, 5, Some("b")),
            Err(KeyNotAfter { index: 0 })
        );
        assert_eq!(
            check(vec![entry("B", "1")], false, 5, Some("a")),
            Err(KeyNotAfter { index: 0 }),
            "byte order: 'B' < 'a'"
        );
        let mut e = entry("a", "1");
        e.resource.uri = format!("learn://documents/{}", "x".repeat(2048));
        assert_eq!(check(vec![e], false, 5, None), Err(UriLength { index: 0 }));
        let mut e = entry("a", "1");
        e.resource.uri = "other://documents/1".into();
        assert_eq!(
            check(vec![e], false, 5, None),
            Err(UriTemplate { index: 0 })
        );
        assert_eq!(
            check(vec![entry("a", "1"), entry("b", "1")], false, 5, None),
            Err(UriDuplicate { index: 1 })
        );
        let mut e = entry("a", "1");
        e.resource.name = "n".repeat(513);
        assert_eq!(check(vec![e], false, 5, None), Err(NameLength { index: 0 }));
        let mut e = entry("a", "1");
        e.resource.name = "😀".repeat(256);
        assert_eq!(check(vec![e], false, 5, None), Ok(()), "512 UTF-16 units");
        let mut e = entry("a", "1");
        e.resource.name = "😀".repeat(257);
        assert_eq!(
            check(vec![e], false, 5, None),
            Err(NameLength { index: 0 }),
            "514 UTF-16 units"
        );
        let mut e = entry("a", "1");
        e.resource.mime_type = Some("m".repeat(129));
        assert_eq!(
            check(vec![e], false, 5, None),
            Err(MimeTypeLength { index: 0 })
        );
    }

    #[test]
    fn uris_are_unique_across_sources_on_a_page() {
        let t = UriTemplate::parse("learn://documents/{id}").unwrap();
        let mut seen = UriSet::default();
        let p1: GuestPage = InventoryPage {
            entries: vec![entry("a", "1")],
            has_more: false,
        }
        .into();
        validate_page(&p1, 5, None, &t, &mut seen).unwrap();
        let p2: GuestPage = InventoryPage {
            entries: vec![entry("z", "1")],
            has_more: false,
        }
        .into();
        assert_eq!(
            validate_page(&p2, 5, None, &t, &mut seen),
            Err(PageViolation::UriDuplicate { index: 0 })
        );
    }
}
