//! `JsonPage`: the page of an `inventory-json` guest, UTF-8 JSON bytes
//! parsed straight from its memory into a [`GuestPage`].
//!
//! Why the export exists: an interpreted guest (componentize-js) lowers an
//! `inventory-page` field by field in interpreted code, and each string
//! character by character (its glue measures a string's UTF-8 length in a
//! JavaScript loop): most of a `list(50)` call. Its `JSON.stringify` and
//! `TextEncoder` are native, and a `list<u8>` is lowered as one block copy.
//! The host pays a parse instead (serde, borrowing the guest's bytes where no
//! escape forces a copy) and checks the page exactly as a typed one.
//!
//! The bytes are bounds-checked against guest memory and charged as
//! hostcall fuel before they are read, as the typed lift charges a page's
//! strings. What parsing allocates beyond them is bounded too: at most
//! [`MAX_ENTRIES`] entries are read (a megabyte of `{"key":"",…}` would
//! otherwise make the host hold three times that in entry records before
//! the pager could refuse the page). Text that is not the page's shape is a [`JsonPageError`]: an
//! invalid result (the instance is dropped), its message bounded because it
//! may quote the guest's text.

use super::page::{EntryRef, GuestPage, LiftError, guest_bytes, read_u32};
use serde::Deserialize;
use serde::de::{self, SeqAccess, Visitor};
use std::borrow::Cow;
use std::fmt;
use wasmtime::ValRaw;
use wasmtime::component::__internal::{CanonicalAbiInfo, InstanceType, InterfaceType, LiftContext};
use wasmtime::component::{ComponentType, Lift};

/// The guest's JSON was not an `inventory-page`.
#[derive(Debug, thiserror::Error)]
#[error("the JSON page is not an inventory-page: {0}")]
pub(crate) struct JsonPageError(String);

/// How much of serde's message (which may quote a field name or a value of
/// the guest's) reaches the log.
const MESSAGE_CHARS: usize = 160;

impl JsonPageError {
    fn new(e: serde_json::Error) -> Self {
        let mut message: String = e
            .to_string()
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(MESSAGE_CHARS + 1)
            .collect();
        if message.chars().count() > MESSAGE_CHARS {
            message = message.chars().take(MESSAGE_CHARS).collect::<String>() + "…";
        }
        JsonPageError(message)
    }
}

/// The most entries a JSON page may hold: ten times the largest page the
/// host asks for (`list_pagination.page_size` is at most 100), so only a
/// page the pager would refuse anyway is cut short.
pub(crate) const MAX_ENTRIES: usize = 1000;

/// A guest page lifted from its JSON.
pub(crate) struct JsonPage(pub GuestPage);

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PageDoc<'a> {
    #[serde(borrow, deserialize_with = "bounded_entries")]
    entries: Vec<EntryDoc<'a>>,
    has_more: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryDoc<'a> {
    #[serde(borrow)]
    key: Cow<'a, str>,
    #[serde(borrow)]
    resource: ResourceDoc<'a>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ResourceDoc<'a> {
    #[serde(borrow)]
    uri: Cow<'a, str>,
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    mime_type: Option<Cow<'a, str>>,
}

/// `entries`, refused past [`MAX_ENTRIES`] before more are allocated.
fn bounded_entries<'de, D>(d: D) -> Result<Vec<EntryDoc<'de>>, D::Error>
where
    D: de::Deserializer<'de>,
{
    struct Bounded;
    impl<'de> Visitor<'de> for Bounded {
        type Value = Vec<EntryDoc<'de>>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "an array of at most {MAX_ENTRIES} entries")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut entries = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(MAX_ENTRIES));
            while let Some(entry) = seq.next_element()? {
                if entries.len() == MAX_ENTRIES {
                    return Err(de::Error::custom(format!(
                        "more than {MAX_ENTRIES} entries"
                    )));
                }
                entries.push(entry);
            }
            Ok(entries)
        }
    }
    d.deserialize_seq(Bounded)
}

impl JsonPage {
    /// The page in `json`, or why it is not one.
    pub(crate) fn parse(json: &[u8]) -> Result<GuestPage, JsonPageError> {
        let doc: PageDoc<'_> = serde_json::from_slice(json).map_err(JsonPageError::new)?;
        Ok(GuestPage::from_entries(
            doc.entries.iter().map(|e| EntryRef {
                key: &e.key,
                uri: &e.resource.uri,
                name: &e.resource.name,
                mime_type: e.resource.mime_type.as_deref(),
            }),
            doc.has_more,
        ))
    }

    fn lift(cx: &mut LiftContext<'_>, ptr: usize, len: usize) -> wasmtime::Result<Self> {
        let json = guest_bytes(cx.memory(), ptr, len)
            .ok_or(LiftError("list pointer/length out of bounds of memory"))?;
        cx.consume_fuel(len)?;
        Ok(JsonPage(Self::parse(json)?))
    }
}

// SAFETY: lifted as the WIT `list<u8>` it typechecks as (a pointer pair to
// bytes, alignment 1); only the lifted Rust value differs.
unsafe impl ComponentType for JsonPage {
    type Lower = <[u8] as ComponentType>::Lower;
    const ABI: CanonicalAbiInfo = <[u8] as ComponentType>::ABI;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        <[u8] as ComponentType>::typecheck(ty, types)
    }
}

// SAFETY: lifting only reads guest memory through bounds-checked slices.
unsafe impl Lift for JsonPage {
    fn linear_lift_from_flat(
        cx: &mut LiftContext<'_>,
        _ty: InterfaceType,
        src: &Self::Lower,
    ) -> wasmtime::Result<Self> {
        let [ptr, len]: &[ValRaw; 2] = src;
        Self::lift(cx, ptr.get_u32() as usize, len.get_u32() as usize)
    }

    fn linear_lift_from_memory(
        cx: &mut LiftContext<'_>,
        _ty: InterfaceType,
        bytes: &[u8],
    ) -> wasmtime::Result<Self> {
        Self::lift(cx, read_u32(bytes, 0)?, read_u32(bytes, 4)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(p: &GuestPage) -> Vec<EntryRef<'_>> {
        p.entries().collect()
    }

    #[test]
    fn a_page_in_the_bindings_shape_is_read_with_escapes_and_optional_mime_types() {
        let p = JsonPage::parse(
            br#"{"entries":[
                {"key":"a","resource":{"uri":"x://a","name":"A \"quoted\" \u00e9","mimeType":"text/plain"}},
                {"key":"b","resource":{"uri":"x://b","name":"B"}},
                {"key":"c","resource":{"uri":"x://c","name":"C","mimeType":null}}
            ],"hasMore":true}"#,
        )
        .unwrap();
        assert!(p.has_more);
        let e = entries(&p);
        assert_eq!(e.len(), 3);
        assert_eq!(e[0].name, "A \"quoted\" é");
        assert_eq!(e[0].mime_type, Some("text/plain"));
        assert_eq!((e[1].key, e[1].uri, e[1].mime_type), ("b", "x://b", None));
        assert_eq!(e[2].mime_type, None);
    }

    #[test]
    fn anything_but_the_shape_is_refused() {
        for bad in [
            &b"not json"[..],
            br#"{"entries":[]}"#,
            br#"{"entries":[],"hasMore":false,"extra":1}"#,
            br#"{"entries":[{"key":"a","resource":{"uri":"x://a","name":"A","size":3}}],"hasMore":false}"#,
            br#"{"entries":[{"key":1,"resource":{"uri":"x://a","name":"A"}}],"hasMore":false}"#,
            br#"{"entries":[],"hasMore":false} trailing"#,
            b"{\"entries\":[],\"hasMore\":\xff}",
        ] {
            assert!(JsonPage::parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn entries_past_the_bound_are_refused_while_parsing() {
        let page = |n: usize| {
            let one = r#"{"key":"k","resource":{"uri":"u","name":"n"}}"#;
            format!(
                r#"{{"entries":[{}],"hasMore":false}}"#,
                vec![one; n].join(",")
            )
        };
        assert_eq!(
            JsonPage::parse(page(MAX_ENTRIES).as_bytes()).unwrap().len(),
            MAX_ENTRIES
        );
        let e = JsonPage::parse(page(MAX_ENTRIES + 1).as_bytes())
            .err()
            .unwrap();
        assert!(e.to_string().contains("more than 1000 entries"), "{e}");
    }

    #[test]
    fn the_message_quoting_guest_text_is_bounded_and_on_one_line() {
        let field = "f\n".repeat(10_000);
        let json = format!(
            r#"{{"entries":[],"hasMore":false,"{}":1}}"#,
            field.replace('\n', "\\n")
        );
        let e = JsonPage::parse(json.as_bytes()).err().unwrap().to_string();
        assert!(e.chars().count() < 250, "{}", e.len());
        assert!(!e.contains('\n'));
    }
}
