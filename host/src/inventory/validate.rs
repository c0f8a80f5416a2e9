//! Entry validation: every page a guest returns is checked here before
//! anything reaches the merge. A violation fails the whole `resources/list`
//! with a generic error; the rule, the source and the offending value go to
//! the log only ("Invalid or oversized callback results fail with a generic
//! protocol error.").

use crate::fields;
use crate::limits::{MAX_KEY_LEN, MAX_URI_LEN};
use crate::runtime::GuestPage;
use crate::uri_template::UriTemplate;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::{BuildHasherDefault, Hasher};

/// The URIs already on a page (or a traversal, in `devkit`): copied into
/// one buffer and indexed by their Fx hash, rather than a `String` each
/// (this runs for every listed entry). FxHash rather than SipHash: a page
/// holds at most 100 URIs, and URIs whose hashes collide (a hostile guest
/// can make them) are compared in full, so flooding costs at most a
/// page's worth of comparisons per entry.
#[derive(Default)]
pub struct UriSet {
    text: String,
    /// A hash and the span in `text` of the first URI with that hash.
    first: HashMap<u64, (usize, usize), BuildHasherDefault<FxHasher>>,
    /// Later URIs whose hash an earlier one already had.
    collided: Vec<(u64, (usize, usize))>,
}

impl UriSet {
    pub fn with_capacity(uris: usize) -> Self {
        UriSet {
            text: String::with_capacity(uris * 48),
            first: HashMap::with_capacity_and_hasher(uris, Default::default()),
            collided: Vec::new(),
        }
    }

    /// Add `uri`; false if it was already in the set.
    pub fn insert(&mut self, uri: &str) -> bool {
        let hash = {
            let mut h = FxHasher::default();
            h.write(uri.as_bytes());
            h.finish()
        };
        let text = &mut self.text;
        let span_of = |(start, end): (usize, usize)| start..end;
        match self.first.entry(hash) {
            Entry::Vacant(v) => {
                v.insert(append(text, uri));
            }
            Entry::Occupied(o) => {
                if text[span_of(*o.get())] == *uri
                    || self
                        .collided
                        .iter()
                        .any(|&(h, span)| h == hash && text[span_of(span)] == *uri)
                {
                    return false;
                }
                let span = append(text, uri);
                self.collided.push((hash, span));
            }
        }
        true
    }
}

/// Append `s` to `text`; its span there.
fn append(text: &mut String, s: &str) -> (usize, usize) {
    let start = text.len();
    text.push_str(s);
    (start, text.len())
}

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
        // 512), and mimeType (at most 128)." Counted as `resources/read`
        // counts them (`crate::fields`).
        if !fields::within(r.uri, MAX_URI_LEN) {
            return Err(PageViolation::UriLength { index });
        }
        // "Keep each URI unique across the source’s traversal and consistent
        // with its registered template."
        if !template.matches(r.uri) {
            return Err(PageViolation::UriTemplate { index });
        }
        if !fields::name_ok(r.name) {
            return Err(PageViolation::NameLength { index });
        }
        if let Some(m) = r.mime_type
            && !fields::mime_type_ok(m)
        {
            return Err(PageViolation::MimeTypeLength { index });
        }
        // (Any violation fails the whole listing, so a rejected page may
        // leave some of its URIs in `page_uris`.)
        if !page_uris.insert(r.uri) {
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

    fn fx(s: &str) -> u64 {
        let mut h = FxHasher::default();
        h.write(s.as_bytes());
        h.finish()
    }

    #[test]
    fn the_uri_set_is_a_set_even_when_hashes_collide() {
        let mut set = UriSet::with_capacity(4);
        assert!(set.insert("a://1"));
        assert!(!set.insert("a://1"));
        // Make "a://2" collide with "a://1", as a crafted URI could.
        let first = set.first[&fx("a://1")];
        set.first.insert(fx("a://2"), first);
        assert!(
            set.insert("a://2"),
            "a different URI with the same hash is new"
        );
        assert!(!set.insert("a://2"), "and found again among the collisions");
        assert!(!set.insert("a://1"));
        assert!(set.insert("a://3"));
        assert!(!set.insert("a://3"));
    }

    proptest::proptest! {
        #[test]
        fn prop_the_uri_set_agrees_with_a_hash_set(uris in proptest::collection::vec("[a-c]{0,3}", 0..60)) {
            let mut set = UriSet::default();
            let mut reference = std::collections::HashSet::new();
            for u in &uris {
                proptest::prop_assert_eq!(set.insert(u), reference.insert(u.clone()));
            }
        }
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
