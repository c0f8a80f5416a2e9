//! `GuestPage`: a guest's `inventory-page`, lifted from its memory into one
//! string buffer.
//!
//! The bindgen `InventoryPage` lifts every field into its own `String` (150 to
//! 200 allocations for a 50-entry page) only for the pager to serialize and
//! drop them; that was a third of a `list(50)` call (BENCHMARKS.md). This
//! lifter checks and copies all of a page's strings into one buffer instead.
//!
//! It reads the canonical-ABI layout of `inventory-page` directly (the
//! offsets below, checked against the bindgen types' ABI in a test, and the
//! WIT signature typechecked by wasmtime before every call). Every read is
//! bounds-checked against guest memory, strings are UTF-8-validated (the
//! page's bytes in one pass, then each string's ends as character
//! boundaries), and the host-allocation ("hostcall fuel") limit is charged
//! as wasmtime charges it.
//! Flat values and guests with a non-UTF-8 string encoding take the bindgen
//! lift.

use super::bindings::emseepea::inventory::types::InventoryPage;
use std::ops::Range;
use wasmtime::component::__internal::wasmtime_environ::component::StringEncoding;
use wasmtime::component::__internal::{CanonicalAbiInfo, InstanceType, InterfaceType, LiftContext};
use wasmtime::component::{ComponentType, Lift};

/// Why a page could not be lifted: the guest broke the canonical ABI.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct LiftError(pub &'static str);

/// One listed entry, borrowed from its page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryRef<'a> {
    pub key: &'a str,
    pub uri: &'a str,
    pub name: &'a str,
    pub mime_type: Option<&'a str>,
}

/// Where one entry's strings are in the page's buffer.
#[derive(Debug, Clone)]
struct EntrySpans {
    key: Range<u32>,
    uri: Range<u32>,
    name: Range<u32>,
    mime_type: Option<Range<u32>>,
}

/// A page of a guest's inventory, unvalidated (see `inventory::validate`).
#[derive(Debug, Clone, Default)]
pub struct GuestPage {
    text: String,
    entries: Vec<EntrySpans>,
    pub has_more: bool,
}

impl GuestPage {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// All of the page's strings (keys, URIs, names, MIME types),
    /// concatenated: what a check that holds for every string can scan once.
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn entries(&self) -> Entries<'_> {
        Entries {
            text: &self.text,
            spans: self.entries.iter(),
        }
    }

    /// A page from owned entries (tests, and guests lifted the bindgen way).
    pub fn from_entries<'a>(
        entries: impl IntoIterator<Item = EntryRef<'a>>,
        has_more: bool,
    ) -> Self {
        let mut page = GuestPage {
            has_more,
            ..GuestPage::default()
        };
        for e in entries {
            let key = page.push(e.key);
            let uri = page.push(e.uri);
            let name = page.push(e.name);
            let mime_type = e.mime_type.map(|m| page.push(m));
            page.entries.push(EntrySpans {
                key,
                uri,
                name,
                mime_type,
            });
        }
        page
    }

    fn push(&mut self, s: &str) -> Range<u32> {
        let start = self.text.len() as u32;
        self.text.push_str(s);
        start..self.text.len() as u32
    }
}

fn span(r: &Range<u32>) -> Range<usize> {
    r.start as usize..r.end as usize
}

/// The entries of a [`GuestPage`], in order.
pub struct Entries<'a> {
    text: &'a str,
    spans: std::slice::Iter<'a, EntrySpans>,
}

impl<'a> Iterator for Entries<'a> {
    type Item = EntryRef<'a>;

    // Inlined into the loops that walk a page (validation, the pager): a
    // call returns the 56-byte `EntryRef` through memory, written field by
    // field and read back in wider loads, and those loads wait for the
    // stores (a failed store-to-load forwarding per entry: perf put 0.7 %
    // of the server's samples on them in the pager's loop).
    #[inline(always)]
    fn next(&mut self) -> Option<EntryRef<'a>> {
        let e = self.spans.next()?;
        let text = self.text;
        Some(EntryRef {
            key: &text[span(&e.key)],
            uri: &text[span(&e.uri)],
            name: &text[span(&e.name)],
            mime_type: e.mime_type.as_ref().map(|m| &text[span(m)]),
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.spans.size_hint()
    }
}

impl ExactSizeIterator for Entries<'_> {}

impl From<InventoryPage> for GuestPage {
    fn from(p: InventoryPage) -> Self {
        GuestPage::from_entries(
            p.entries.iter().map(|e| EntryRef {
                key: &e.key,
                uri: &e.resource.uri,
                name: &e.resource.name,
                mime_type: e.resource.mime_type.as_deref(),
            }),
            p.has_more,
        )
    }
}

// The canonical-ABI layout (32-bit) of
//   record inventory-page { entries: list<inventory-entry>, has-more: bool }
//   record inventory-entry { key: string, resource: resource-metadata }
//   record resource-metadata { uri: string, name: string, mime-type: option<string> }
// A string is (ptr: u32, len: u32); an option is a u8 discriminant, then the
// payload at its alignment (4).
const PAGE_ENTRIES: usize = 0;
const PAGE_HAS_MORE: usize = 8;
const ENTRY_SIZE: usize = 36;
const ENTRY_ALIGN: usize = 4;
const ENTRY_KEY: usize = 0;
const ENTRY_URI: usize = 8;
const ENTRY_NAME: usize = 16;
const ENTRY_MIME_TAG: usize = 24;
const ENTRY_MIME: usize = 28;

// SAFETY: the same type, ABI and lowered form as the bindgen `InventoryPage`,
// whose typecheck this uses; only the lifted Rust value differs.
unsafe impl ComponentType for GuestPage {
    type Lower = <InventoryPage as ComponentType>::Lower;
    const ABI: CanonicalAbiInfo = <InventoryPage as ComponentType>::ABI;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        <InventoryPage as ComponentType>::typecheck(ty, types)
    }
}

// SAFETY: lifting only reads guest memory through bounds-checked slices.
unsafe impl Lift for GuestPage {
    fn linear_lift_from_flat(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        src: &Self::Lower,
    ) -> wasmtime::Result<Self> {
        InventoryPage::linear_lift_from_flat(cx, ty, src).map(GuestPage::from)
    }

    fn linear_lift_from_memory(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        bytes: &[u8],
    ) -> wasmtime::Result<Self> {
        if !matches!(cx.options().string_encoding, StringEncoding::Utf8) {
            return InventoryPage::linear_lift_from_memory(cx, ty, bytes).map(GuestPage::from);
        }
        let ptr = read_u32(bytes, PAGE_ENTRIES)?;
        let len = read_u32(bytes, PAGE_ENTRIES + 4)?;
        let has_more = *bytes
            .get(PAGE_HAS_MORE)
            .ok_or(LiftError("page out of bounds"))?
            != 0;
        let memory = cx.memory();
        let list = len
            .checked_mul(ENTRY_SIZE)
            .and_then(|size| Some(ptr..ptr.checked_add(size)?))
            .and_then(|range| memory.get(range))
            .ok_or(LiftError("list pointer/length out of bounds of memory"))?;
        if ptr % ENTRY_ALIGN != 0 {
            return Err(LiftError("list pointer is not aligned").into());
        }
        cx.consume_fuel_array(len, std::mem::size_of::<EntrySpans>())?;
        // First the total, charged before anything is allocated (strings may
        // overlap: a hostile page can name the same megabyte 400 times).
        let mut total = 0usize;
        for entry in list.chunks_exact(ENTRY_SIZE) {
            for at in [ENTRY_KEY, ENTRY_URI, ENTRY_NAME] {
                total = total.saturating_add(read_u32(entry, at + 4)?);
            }
            if entry[ENTRY_MIME_TAG] == 1 {
                total = total.saturating_add(read_u32(entry, ENTRY_MIME + 4)?);
            }
        }
        cx.consume_fuel(total)?;
        let mut text = Vec::with_capacity(total);
        let mut entries = Vec::with_capacity(len);
        for entry in list.chunks_exact(ENTRY_SIZE) {
            let key = append_bytes(memory, entry, ENTRY_KEY, &mut text)?;
            let uri = append_bytes(memory, entry, ENTRY_URI, &mut text)?;
            let name = append_bytes(memory, entry, ENTRY_NAME, &mut text)?;
            let mime_type = match entry[ENTRY_MIME_TAG] {
                0 => None,
                1 => Some(append_bytes(memory, entry, ENTRY_MIME, &mut text)?),
                _ => return Err(LiftError("invalid option discriminant").into()),
            };
            entries.push(EntrySpans {
                key,
                uri,
                name,
                mime_type,
            });
        }
        Ok(GuestPage {
            text: utf8_strings(text, &entries)?,
            entries,
            has_more,
        })
    }
}

/// The page's bytes as text, if each of its strings is UTF-8. One pass over
/// all of them (rather than one call per string, 150 for a typical page)
/// proves the concatenation UTF-8; each string is then UTF-8 if it also
/// starts at a character boundary of it (and so ends at one: the next
/// string's start, or the end). Without that check, a string ending in half
/// a character followed by one starting with the other half would pass.
fn utf8_strings(text: Vec<u8>, entries: &[EntrySpans]) -> wasmtime::Result<String> {
    let not_utf8 = || LiftError("a string is not valid UTF-8");
    let text = String::from_utf8(text).map_err(|_| not_utf8())?;
    let starts_on_boundary = |r: &Range<u32>| text.is_char_boundary(r.start as usize);
    let all = entries.iter().all(|e| {
        starts_on_boundary(&e.key)
            && starts_on_boundary(&e.uri)
            && starts_on_boundary(&e.name)
            && e.mime_type.as_ref().is_none_or(starts_on_boundary)
    });
    if all {
        Ok(text)
    } else {
        Err(not_utf8().into())
    }
}

/// The little-endian u32 at `bytes[at..]` (a canonical-ABI pointer or length).
pub(super) fn read_u32(bytes: &[u8], at: usize) -> wasmtime::Result<usize> {
    let b: [u8; 4] = bytes
        .get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .ok_or(LiftError("record out of bounds"))?;
    Ok(u32::from_le_bytes(b) as usize)
}

/// The guest bytes whose (ptr, len) is at `record[at..]`, bounds-checked.
pub(super) fn lift_bytes<'m>(
    memory: &'m [u8],
    record: &[u8],
    at: usize,
) -> wasmtime::Result<&'m [u8]> {
    // `ok_or_else`: a `wasmtime::Error` made eagerly would be an allocation,
    // and a captured backtrace under RUST_BACKTRACE, for every string lifted.
    guest_bytes(memory, read_u32(record, at)?, read_u32(record, at + 4)?)
        .ok_or_else(|| LiftError("string pointer/length out of bounds of memory").into())
}

/// The `len` guest bytes at `ptr`, if they are all in `memory`.
pub(super) fn guest_bytes(memory: &[u8], ptr: usize, len: usize) -> Option<&[u8]> {
    memory.get(ptr..ptr.checked_add(len)?)
}

/// The guest string whose (ptr, len) is at `record[at..]`, checked as UTF-8.
pub(super) fn lift_str<'m>(
    memory: &'m [u8],
    record: &[u8],
    at: usize,
) -> wasmtime::Result<&'m str> {
    std::str::from_utf8(lift_bytes(memory, record, at)?)
        .map_err(|_| LiftError("a string is not valid UTF-8").into())
}

/// Append the bytes whose (ptr, len) is at `record[at..]` to `text` (their
/// length was charged as hostcall fuel with the page's; `utf8_strings`
/// checks them). Inlined: returned from a call, the `Result` goes through
/// memory and its range is read back wider than it was written, a stalled
/// load per string (perf put 1.7 % of the server's samples there).
#[inline(always)]
fn append_bytes(
    memory: &[u8],
    record: &[u8],
    at: usize,
    text: &mut Vec<u8>,
) -> wasmtime::Result<Range<u32>> {
    let s = lift_bytes(memory, record, at)?;
    let too_long = |_| LiftError("the page's strings exceed 4 GiB");
    let start = u32::try_from(text.len()).map_err(too_long)?;
    text.extend_from_slice(s);
    Ok(start..u32::try_from(text.len()).map_err(too_long)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::bindings::emseepea::inventory::types::{InventoryEntry, ResourceMetadata};

    /// The offsets above are the bindgen types' canonical ABI.
    #[test]
    fn the_layout_is_the_canonical_abis() {
        let mut at = 0;
        assert_eq!(
            <Vec<InventoryEntry>>::ABI.next_field32_size(&mut at),
            PAGE_ENTRIES
        );
        assert_eq!(<bool>::ABI.next_field32_size(&mut at), PAGE_HAS_MORE);
        assert_eq!(<InventoryEntry as ComponentType>::SIZE32, ENTRY_SIZE);
        assert_eq!(
            <InventoryEntry as ComponentType>::ALIGN32 as usize,
            ENTRY_ALIGN
        );
        let mut at = 0;
        assert_eq!(<String>::ABI.next_field32_size(&mut at), ENTRY_KEY);
        let resource = <ResourceMetadata as ComponentType>::ABI.next_field32_size(&mut at);
        let mut at = resource;
        assert_eq!(<String>::ABI.next_field32_size(&mut at), ENTRY_URI);
        assert_eq!(<String>::ABI.next_field32_size(&mut at), ENTRY_NAME);
        assert_eq!(
            <Option<String>>::ABI.next_field32_size(&mut at),
            ENTRY_MIME_TAG
        );
        assert_eq!(
            ENTRY_MIME - ENTRY_MIME_TAG,
            4,
            "the option's payload is at its alignment"
        );
        assert_eq!(<Option<String>>::SIZE32, 12);
    }

    #[test]
    fn entries_read_back_as_given() {
        let page = GuestPage::from(InventoryPage {
            entries: vec![
                InventoryEntry {
                    key: "k1".into(),
                    resource: ResourceMetadata {
                        uri: "u://1".into(),
                        name: "één".into(),
                        mime_type: None,
                    },
                },
                InventoryEntry {
                    key: "k2".into(),
                    resource: ResourceMetadata {
                        uri: "u://2".into(),
                        name: String::new(),
                        mime_type: Some("text/plain".into()),
                    },
                },
            ],
            has_more: true,
        });
        let e: Vec<EntryRef> = page.entries().collect();
        assert_eq!(e.len(), 2);
        assert_eq!(
            (e[0].key, e[0].uri, e[0].name, e[0].mime_type),
            ("k1", "u://1", "één", None)
        );
        assert_eq!(
            (e[1].key, e[1].name, e[1].mime_type),
            ("k2", "", Some("text/plain"))
        );
        assert!(page.has_more);
    }
}
