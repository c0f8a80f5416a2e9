//! The pager: one `resources/list` page of static resources followed by the
//! caller's records from every inventory source they may access, bounded in
//! count and in bytes, continued by a sealed cursor.
//! (Over 500 lines: the one page loop and what it shares, static entries,
//! sources and the cursor position, in one place; the other half is its
//! unit and property tests.)
//!
//! "Static resources come first, followed by eligible inventory sources in
//! registration order." "The framework authorizes each source before calling
//! it and skips inaccessible sources." "listPagination.pageSize bounds the
//! combined static and dynamic page count." "The tighter byte limit applies."
//! "A single entry that cannot fit causes an error." "Do not fetch the whole
//! collection to slice it in memory": a guest is asked for at most the slots
//! the page has left.

use super::access::may_access;
use super::cursor::{CursorBinding, CursorError, CursorKeys, CursorState, Position};
use super::statics::StaticResources;
use super::validate::{PageViolation, UriSet, validate_page};
use crate::auth::Principal;
use crate::runtime::types::CallContext;
use crate::runtime::{Access, GuestError, GuestPage, RequestScope, Source};
use crate::uri_template::UriTemplate;
use std::future::Future;
use std::sync::Arc;

/// What the pager needs of an inventory source (the runtime's `Source`, or
/// an in-memory source in tests).
pub trait InventorySource: Send + Sync {
    fn name(&self) -> &str;
    fn template(&self) -> &UriTemplate;
    fn access(&self) -> Access;
    fn required_scopes(&self) -> &[String];
    /// The template's MIME type: listed entries without their own inherit it.
    fn mime_type(&self) -> Option<&str>;
    fn list(
        &self,
        after: Option<&str>,
        limit: u32,
        context: CallContext,
        scope: &RequestScope,
    ) -> impl Future<Output = Result<GuestPage, GuestError>> + Send;
    /// A page of `scope`'s caller was invalid: whatever instance made it
    /// serves none of that caller's later calls (the runtime's kept
    /// instances; nothing to do for a source that keeps none).
    fn retire_kept_instances(&self, _scope: &RequestScope) {}
}

impl InventorySource for Arc<Source> {
    fn name(&self) -> &str {
        Source::name(self)
    }
    fn template(&self) -> &UriTemplate {
        &self.definition.uri_template
    }
    fn access(&self) -> Access {
        self.definition.access
    }
    fn required_scopes(&self) -> &[String] {
        &self.definition.required_scopes
    }
    fn mime_type(&self) -> Option<&str> {
        self.definition.mime_type.as_deref()
    }
    fn list(
        &self,
        after: Option<&str>,
        limit: u32,
        context: CallContext,
        scope: &RequestScope,
    ) -> impl Future<Output = Result<GuestPage, GuestError>> + Send {
        Source::list(self, after, limit, context, scope)
    }
    fn retire_kept_instances(&self, scope: &RequestScope) {
        Source::retire_kept_instances(self, scope)
    }
}

/// Why a page could not be served.
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    /// Any cursor failure: the client restarts the listing.
    #[error("invalid cursor: {0}")]
    InvalidCursor(CursorError),
    /// "A caller must have access to at least one inventory source."
    #[error("the caller may access no inventory source")]
    NoAccessibleSource { scopes: Vec<String> },
    /// "A single entry that cannot fit causes an error."
    #[error("an entry of {source_name} does not fit in an empty page")]
    EntryTooLarge { source_name: String },
    #[error("{source_name} returned an invalid page: {violation}")]
    InvalidPage {
        source_name: String,
        violation: PageViolation,
    },
    #[error("{source_name}: {error}")]
    Guest {
        source_name: String,
        error: GuestError,
    },
}

/// One page: the serialized entries (`Resource` or `ResourceTemplate`
/// objects), measured as the page was filled, in one buffer, and the
/// cursor, if more may follow.
#[derive(Debug, Default)]
pub struct Page {
    /// The entries' JSON joined by commas: the inside of the result's array.
    /// One buffer rather than a `Box<RawValue>` per entry: the response is
    /// this buffer spliced into its envelope (`mcp::model::ListEnvelope`).
    json: Vec<u8>,
    /// Where each entry ends in `json`.
    ends: Vec<u32>,
    pub next_cursor: Option<String>,
}

impl Page {
    /// The entries, serialized and joined by commas.
    pub fn joined(&self) -> &[u8] {
        &self.json
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Each entry's JSON.
    pub fn entries(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.ends.iter().enumerate().map(|(i, &end)| {
            // Entries after the first start after their comma.
            let start = if i == 0 {
                0
            } else {
                self.ends[i - 1] as usize + 1
            };
            std::str::from_utf8(&self.json[start..end as usize]).expect("entries are JSON text")
        })
    }

    /// Append the entry `write` serializes if the page, with the cursor that
    /// would follow it (`cursor_cost` bytes), stays within `budget` bytes;
    /// else leave the page as it was.
    pub(crate) fn push_within(
        &mut self,
        budget: usize,
        cursor_cost: usize,
        write: impl FnOnce(&mut Vec<u8>),
    ) -> bool {
        let before = self.json.len();
        if !self.ends.is_empty() {
            self.json.push(b',');
        }
        write(&mut self.json);
        match u32::try_from(self.json.len()) {
            Ok(end) if self.json.len() + cursor_cost <= budget => {
                self.ends.push(end);
                true
            }
            _ => {
                self.json.truncate(before);
                false
            }
        }
    }

    pub(crate) fn with_capacity(entries: usize, bytes: usize) -> Self {
        Page {
            json: Vec::with_capacity(bytes),
            ends: Vec::with_capacity(entries),
            next_cursor: None,
        }
    }
}

pub struct Pager<S> {
    statics: Arc<StaticResources>,
    /// Sources that export `inventory`, in registration order.
    sources: Vec<S>,
    keys: Arc<CursorKeys>,
    fingerprint: [u8; 32],
    page_size: u32,
    byte_limit: usize,
}

/// A request for one page.
pub struct PageRequest<'a> {
    pub principal: Option<&'a Principal>,
    pub cursor: Option<&'a str>,
    /// Bytes of the serialized JSON-RPC response with an empty `resources`
    /// array and no `nextCursor`: the page's entries and cursor must fit in
    /// `byte_limit - envelope_bytes`.
    pub envelope_bytes: usize,
    pub scope: &'a RequestScope,
}

/// One listed entry, as `{"uri":…,"name":…[,"mimeType":…]}`.
struct EntryJson<'a> {
    uri: &'a str,
    name: &'a str,
    mime_type: Option<&'a str>,
    /// None of `uri`, `name` and `mime_type` needs escaping (known from one
    /// pass over the whole guest page and the template's type,
    /// `needs_json_escape`): all are copied as is.
    plain: bool,
}

impl EntryJson<'_> {
    /// Written directly: the bytes serde_json would write for the same
    /// struct (a property test holds them equal), without its per-byte
    /// escaping pass over strings that need none (most of them).
    fn write(&self, out: &mut Vec<u8>) {
        let string = |out: &mut Vec<u8>, s: &str| {
            if self.plain {
                write_plain_json_str(out, s)
            } else {
                write_json_str(out, s)
            }
        };
        out.extend_from_slice(b"{\"uri\":");
        string(out, self.uri);
        out.extend_from_slice(b",\"name\":");
        string(out, self.name);
        if let Some(mime_type) = self.mime_type {
            out.extend_from_slice(b",\"mimeType\":");
            string(out, mime_type);
        }
        out.push(b'}');
    }
}

/// A JSON string: copied when nothing in it needs escaping (JSON escapes
/// only `"`, `\\` and controls below 0x20), else serde_json's escaping.
fn write_json_str(out: &mut Vec<u8>, s: &str) {
    if needs_json_escape(s.as_bytes()) {
        serde_json::to_writer(out, s).expect("a string serializes");
    } else {
        write_plain_json_str(out, s);
    }
}

/// `s` in quotes; only for a string with nothing to escape.
fn write_plain_json_str(out: &mut Vec<u8>, s: &str) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    out.extend_from_slice(s.as_bytes());
    out.push(b'"');
}

/// Whether any byte must be escaped in a JSON string.
fn needs_json_escape(bytes: &[u8]) -> bool {
    // No early exit, so that the check compiles to a vectorized pass.
    bytes.iter().fold(false, |esc, &b| {
        esc | (b < 0x20) | (b == b'"') | (b == b'\\')
    })
}

/// `,"nextCursor":""` around the cursor itself.
const CURSOR_FIELD_BYTES: usize = 16;

pub fn cursor_binding(principal: Option<&Principal>, fingerprint: &[u8; 32]) -> CursorBinding {
    match principal {
        Some(p) => CursorBinding::new(
            Some(&p.client_id),
            p.subject.as_deref(),
            &p.scopes,
            p.audience.as_deref(),
            fingerprint,
        ),
        None => CursorBinding::new(None, None, &[], None, fingerprint),
    }
}

pub fn call_context(principal: Option<&Principal>, scope: &RequestScope) -> CallContext {
    CallContext {
        principal: principal.map(|p| crate::runtime::types::Principal {
            subject: p.subject.clone(),
            client_id: p.client_id.clone(),
            scopes: p.scopes.clone(),
            audience: p.audience.clone(),
        }),
        deadline_ms: scope.deadline_unix_ms(),
    }
}

/// Accumulates one page within its count and byte bounds.
struct PageBuilder {
    page: Page,
    budget: usize,
    remaining: u32,
    /// Where the next page starts if this one ends now.
    resume: Option<Position>,
}

enum Push {
    Added,
    /// Does not fit: the page ends before this entry.
    Full,
}

/// The bytes the `nextCursor` field adds for a cursor at `next`.
fn cursor_cost(next: Option<&Position>) -> usize {
    next.map_or(0, |p| CURSOR_FIELD_BYTES + CursorKeys::encoded_len(p))
}

impl PageBuilder {
    /// Add an entry whose successor position is `next` (`None`: nothing follows).
    fn push(&mut self, json: &str, next: Option<Position>) -> Push {
        if !self.push_entry(cursor_cost(next.as_ref()), |out| {
            out.extend_from_slice(json.as_bytes())
        }) {
            return Push::Full;
        }
        self.resume = next;
        Push::Added
    }

    /// Add the entry `write` serializes if it fits with a cursor of
    /// `cursor_cost` bytes after it; the caller sets `resume`.
    fn push_entry(&mut self, cursor_cost: usize, write: impl FnOnce(&mut Vec<u8>)) -> bool {
        let added = self.page.push_within(self.budget, cursor_cost, write);
        if added {
            self.remaining -= 1;
        }
        added
    }
}

impl<S: InventorySource> Pager<S> {
    pub fn new(
        statics: Arc<StaticResources>,
        sources: Vec<S>,
        keys: Arc<CursorKeys>,
        fingerprint: [u8; 32],
        page_size: u32,
        byte_limit: usize,
    ) -> Self {
        Self {
            statics,
            sources,
            keys,
            fingerprint,
            page_size,
            byte_limit,
        }
    }

    pub fn has_sources(&self) -> bool {
        !self.sources.is_empty()
    }

    /// The union of the scopes the inventory sources require (for challenges).
    pub fn source_scopes(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .sources
            .iter()
            .flat_map(|s| s.required_scopes().iter().cloned())
            .collect();
        all.sort();
        all.dedup();
        all
    }

    fn accessible(&self, index: usize, principal: Option<&Principal>) -> bool {
        let s = &self.sources[index];
        // `list` is only ever called with a principal.
        principal.is_some() && may_access(s.access(), s.required_scopes(), principal)
    }

    fn next_accessible(&self, from: usize, principal: Option<&Principal>) -> Option<usize> {
        (from..self.sources.len()).find(|&i| self.accessible(i, principal))
    }

    fn static_visible(&self, offset: usize, principal: Option<&Principal>) -> bool {
        let s = &self.statics.items[offset];
        may_access(s.access, &s.required_scopes, principal)
    }

    /// The position after the static resource at `offset`: the next visible
    /// static, else the first accessible source, else the end.
    fn after_static(&self, offset: usize, principal: Option<&Principal>) -> Option<Position> {
        if let Some(o) =
            (offset + 1..self.statics.items.len()).find(|&o| self.static_visible(o, principal))
        {
            return Some(Position::Static { offset: o as u32 });
        }
        self.next_accessible(0, principal)
            .map(|i| Position::Source {
                index: i as u32,
                after: None,
            })
    }

    pub async fn page(&self, req: PageRequest<'_>) -> Result<Page, ListError> {
        let principal = req.principal;
        if !self.sources.is_empty() && self.next_accessible(0, principal).is_none() {
            return Err(ListError::NoAccessibleSource {
                scopes: self.source_scopes(),
            });
        }
        let binding = cursor_binding(principal, &self.fingerprint);
        let (started_ms, start) = match req.cursor {
            None => (self.keys.now_ms(), self.first_position(principal)),
            Some(c) => {
                let state = self
                    .keys
                    .open(c, &binding)
                    .map_err(|e| ListError::InvalidCursor(e.record()))?;
                (
                    state.started_ms,
                    Some(self.check_position(state.position, principal)?),
                )
            }
        };
        let budget = self.byte_limit.saturating_sub(req.envelope_bytes);
        let mut page = PageBuilder {
            // Room for a typical page without growing it (entries cost ~80 bytes).
            page: Page::with_capacity(self.page_size as usize, budget.min(16 * 1024)),
            budget,
            remaining: self.page_size,
            resume: start.clone(),
        };
        let mut position = start;
        let mut cut_by_bytes = false;
        let mut page_uris = UriSet::with_capacity(self.page_size as usize);
        let context = call_context(principal, req.scope);
        'page: while page.remaining > 0 {
            match position.take() {
                None => break,
                Some(Position::Static { offset }) => {
                    let offset = offset as usize;
                    let next = self.after_static(offset, principal);
                    let item = &self.statics.items[offset];
                    page_uris.insert(&item.uri);
                    match page.push(item.listing.get(), next.clone()) {
                        Push::Added => position = next,
                        Push::Full if page.page.is_empty() => {
                            return Err(ListError::EntryTooLarge {
                                source_name: "static resources".into(),
                            });
                        }
                        Push::Full => {
                            cut_by_bytes = true;
                            break;
                        }
                    }
                }
                Some(Position::Source { index, after }) => {
                    let i = index as usize;
                    let source = &self.sources[i];
                    let limit = page.remaining;
                    let guest_page = source
                        .list(after.as_deref(), limit, context.clone(), req.scope)
                        .await
                        .map_err(|error| ListError::Guest {
                            source_name: source.name().into(),
                            error,
                        })?;
                    validate_page(
                        &guest_page,
                        limit,
                        after.as_deref(),
                        source.template(),
                        &mut page_uris,
                    )
                    .map_err(|violation| {
                        source.retire_kept_instances(req.scope);
                        ListError::InvalidPage {
                            source_name: source.name().into(),
                            violation,
                        }
                    })?;
                    let after_source =
                        self.next_accessible(i + 1, principal)
                            .map(|n| Position::Source {
                                index: n as u32,
                                after: None,
                            });
                    let after_source_cost = cursor_cost(after_source.as_ref());
                    let count = guest_page.len();
                    // The key of the last entry added, and whether it ends
                    // the source: the position after it is built once, below,
                    // not for every entry.
                    let mut last_added: Option<(&str, bool)> = None;
                    // The page's strings and the template's type (which
                    // stands in for an entry's own) in two passes, not one
                    // per string.
                    let plain = !needs_json_escape(guest_page.text().as_bytes())
                        && !source
                            .mime_type()
                            .is_some_and(|m| needs_json_escape(m.as_bytes()));
                    for (k, entry) in guest_page.entries().enumerate() {
                        let last_of_source = k + 1 == count && !guest_page.has_more;
                        let cost = if last_of_source {
                            after_source_cost
                        } else {
                            CURSOR_FIELD_BYTES + CursorKeys::encoded_len_after(entry.key)
                        };
                        let added = page.push_entry(cost, |out| {
                            EntryJson {
                                uri: entry.uri,
                                name: entry.name,
                                // "Set only if every matching resource has this
                                // type": an entry without its own has the template's.
                                mime_type: entry.mime_type.or(source.mime_type()),
                                plain,
                            }
                            .write(out)
                        });
                        if added {
                            last_added = Some((entry.key, last_of_source));
                        } else if page.page.is_empty() {
                            return Err(ListError::EntryTooLarge {
                                source_name: source.name().into(),
                            });
                        } else {
                            // The cursor points at the last entry emitted.
                            cut_by_bytes = true;
                            break;
                        }
                    }
                    match last_added {
                        Some((_, true)) => position = after_source,
                        Some((key, false)) => {
                            position = Some(Position::Source {
                                index,
                                after: Some(key.to_owned()),
                            })
                        }
                        // An empty, final page of this source: move on.
                        None if count == 0 => position = after_source,
                        // Not even one entry of this guest page fitted.
                        None => {}
                    }
                    if count == 0 || last_added.is_some() {
                        page.resume = position.clone();
                    }
                    if cut_by_bytes {
                        break 'page;
                    }
                    // With has-more and room left, the loop asks the same
                    // source again for the rest, after its last key.
                }
                Some(Position::Template { .. }) => {
                    unreachable!("checked when the cursor was opened")
                }
            }
        }
        if cut_by_bytes {
            crate::telemetry::metrics().pages_cut_by_bytes.inc();
        }
        let mut result = page.page;
        result.next_cursor = page.resume.map(|position| {
            self.keys.seal(
                &CursorState {
                    started_ms,
                    position,
                },
                &binding,
            )
        });
        Ok(result)
    }

    fn first_position(&self, principal: Option<&Principal>) -> Option<Position> {
        if let Some(o) = (0..self.statics.items.len()).find(|&o| self.static_visible(o, principal))
        {
            return Some(Position::Static { offset: o as u32 });
        }
        self.next_accessible(0, principal)
            .map(|i| Position::Source {
                index: i as u32,
                after: None,
            })
    }

    /// A cursor that opened is authentic, but its position must still make
    /// sense for this source set and caller.
    fn check_position(
        &self,
        p: Position,
        principal: Option<&Principal>,
    ) -> Result<Position, ListError> {
        let ok = match &p {
            Position::Static { offset } => (*offset as usize) < self.statics.items.len(),
            Position::Source { index, .. } => {
                (*index as usize) < self.sources.len()
                    && self.accessible(*index as usize, principal)
            }
            Position::Template { .. } => false,
        };
        if ok {
            Ok(p)
        } else {
            Err(ListError::InvalidCursor(CursorError::Plaintext.record()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::cursor::tests::TestClock;
    use crate::inventory::statics::StaticResource;
    use crate::runtime::types::{InventoryEntry, InventoryPage, ResourceMetadata};
    use proptest::prelude::*;
    use serde_json::value::RawValue;
    use std::sync::Mutex;
    use std::sync::atomic::AtomicU64;

    /// (source name, limit asked, entries returned) of every `list` call.
    type CallLog = Arc<Mutex<Vec<(String, u32, usize)>>>;

    /// An in-memory source that records every `list` call.
    struct MemorySource {
        name: String,
        template: UriTemplate,
        scopes: Vec<String>,
        mime_type: Option<String>,
        /// (key, id, name), sorted by key.
        records: Mutex<Vec<(String, String, String)>>,
        calls: CallLog,
    }

    impl InventorySource for MemorySource {
        fn name(&self) -> &str {
            &self.name
        }
        fn template(&self) -> &UriTemplate {
            &self.template
        }
        fn access(&self) -> Access {
            Access::Protected
        }
        fn required_scopes(&self) -> &[String] {
            &self.scopes
        }
        fn mime_type(&self) -> Option<&str> {
            self.mime_type.as_deref()
        }
        async fn list(
            &self,
            after: Option<&str>,
            limit: u32,
            _c: CallContext,
            _s: &RequestScope,
        ) -> Result<GuestPage, GuestError> {
            let records = self.records.lock().unwrap();
            let rest: Vec<_> = records
                .iter()
                .filter(|(k, _, _)| after.is_none_or(|a| k.as_str() > a))
                .collect();
            let entries: Vec<InventoryEntry> = rest
                .iter()
                .take(limit as usize)
                .map(|(k, id, n)| InventoryEntry {
                    key: k.clone(),
                    resource: ResourceMetadata {
                        uri: format!("mem://{}/{id}", self.name),
                        name: n.clone(),
                        mime_type: None,
                    },
                })
                .collect();
            self.calls
                .lock()
                .unwrap()
                .push((self.name.clone(), limit, entries.len()));
            Ok(InventoryPage {
                has_more: rest.len() > entries.len(),
                entries,
            }
            .into())
        }
    }

    fn source(
        name: &str,
        scope: &str,
        records: Vec<(String, String, String)>,
        calls: &CallLog,
    ) -> MemorySource {
        MemorySource {
            name: name.into(),
            template: UriTemplate::parse(&format!("mem://{name}/{{id}}")).unwrap(),
            scopes: vec![scope.into()],
            mime_type: None,
            records: Mutex::new(records),
            calls: calls.clone(),
        }
    }

    fn statics(n: usize, protected_every: usize) -> StaticResources {
        StaticResources {
            items: (0..n)
                .map(|i| {
                    let protected = protected_every > 0 && i % protected_every == 0;
                    StaticResource {
                        uri: format!("static://{i}"),
                        mime_type: None,
                        access: if protected {
                            Access::Protected
                        } else {
                            Access::Public
                        },
                        required_scopes: if protected { vec!["b".into()] } else { vec![] },
                        content: crate::inventory::statics::StaticContent::Text(String::new()),
                        listing: RawValue::from_string(format!(
                            r#"{{"uri":"static://{i}","name":"s{i}"}}"#
                        ))
                        .unwrap(),
                    }
                })
                .collect(),
        }
    }

    fn scope() -> RequestScope {
        RequestScope::new(
            std::time::Instant::now() + std::time::Duration::from_secs(60),
            "test",
            crate::runtime::CallerKey::host(),
        )
    }

    fn uri_of(entry: &str) -> String {
        let v: serde_json::Value = serde_json::from_str(entry).unwrap();
        v["uri"].as_str().unwrap().to_owned()
    }

    /// Records with unique keys (sorted) and names of varied length.
    fn records() -> impl Strategy<Value = Vec<(String, String, String)>> {
        proptest::collection::btree_map("[!-~]{1,12}", 0usize..120, 0..40).prop_map(|m| {
            m.into_iter()
                .enumerate()
                .map(|(i, (k, name_len))| (k, format!("r{i}"), "n".repeat(name_len)))
                .collect()
        })
    }

    const ENVELOPE: usize = 120;

    /// What `EntryJson::write` must equal: serde_json on the same fields.
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct SerdeEntry<'a> {
        uri: &'a str,
        name: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        mime_type: Option<&'a str>,
    }

    proptest! {
        #[test]
        fn entries_are_written_as_serde_json_writes_them(
            uri in any::<String>(),
            name in "(\\PC|[\\x00-\\x1f\"\\\\\u{7f}\u{2028}])*",
            mime_type in proptest::option::of(any::<String>()),
        ) {
            let mut ours = Vec::new();
            // As the pager decides it: from one check over all the strings.
            let plain = !needs_json_escape(
                [uri.as_str(), &name, mime_type.as_deref().unwrap_or("")].concat().as_bytes(),
            );
            EntryJson { uri: &uri, name: &name, mime_type: mime_type.as_deref(), plain }
                .write(&mut ours);
            let theirs = serde_json::to_vec(&SerdeEntry {
                uri: &uri,
                name: &name,
                mime_type: mime_type.as_deref(),
            })
            .unwrap();
            prop_assert_eq!(ours, theirs);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        /// The cursor loop returns every eligible entry exactly once, in order
        /// (static, then sources in registration order, keys ascending); no
        /// page exceeds its count or byte bound; a guest is never asked for
        /// more than the page's remaining slots; inaccessible sources are
        /// never called.
        #[test]
        fn prop_the_cursor_loop_sees_everything_once(
            sources in proptest::collection::vec((records(), prop_oneof![Just("a"), Just("b"), Just("c")]), 0..4),
            n_statics in 0usize..8,
            protected_every in 0usize..3,
            page_size in 1u32..=100,
            extra_bytes in 0usize..3000,
            caller_scopes in proptest::sample::subsequence(vec!["a", "b"], 0..=2),
        ) {
            if crate::fuzz::time_is_up() { return Ok(()); }
            let calls = Arc::new(Mutex::new(Vec::new()));
            let mem: Vec<MemorySource> = sources.iter().enumerate()
                .map(|(i, (r, s))| source(&format!("src{i}"), s, r.clone(), &calls)).collect();
            let statics = Arc::new(statics(n_statics, protected_every));
            // Room for the largest entry plus the longest cursor, plus some.
            let byte_limit = ENVELOPE + 250 + 16 + CursorKeys::encoded_len(&Position::Source { index: 0, after: Some("k".repeat(12)) }) + extra_bytes;
            let clock = Arc::new(TestClock(AtomicU64::new(1_000_000)));
            let keys = Arc::new(CursorKeys::new(clock));
            let pager = Pager::new(statics.clone(), mem, keys, [1; 32], page_size, byte_limit);
            let principal = Principal::new(Some("alice".into()), "app".into(), caller_scopes.iter().map(|s| s.to_string()).collect(), None);
            let accessible: Vec<bool> = sources.iter().map(|(_, s)| principal.has_scope(s)).collect();

            let mut expected: Vec<String> = statics.items.iter()
                .filter(|s| s.access == Access::Public || principal.has_scope("b"))
                .map(|s| s.uri.clone()).collect();
            for (i, (r, _)) in sources.iter().enumerate() {
                if accessible[i] {
                    expected.extend(r.iter().map(|(_, id, _)| format!("mem://src{i}/{id}")));
                }
            }

            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let scope = scope();
            let mut cursor: Option<String> = None;
            let mut seen: Vec<String> = Vec::new();
            let mut pages = 0;
            loop {
                let before = calls.lock().unwrap().len();
                let result = rt.block_on(pager.page(PageRequest { principal: Some(&principal), cursor: cursor.as_deref(), envelope_bytes: ENVELOPE, scope: &scope }));
                if !sources.is_empty() && !accessible.iter().any(|a| *a) {
                    let no_access = matches!(result, Err(ListError::NoAccessibleSource { .. }));
                    prop_assert!(no_access);
                    prop_assert_eq!(calls.lock().unwrap().len(), 0);
                    return Ok(());
                }
                let page = result.unwrap();
                pages += 1;
                prop_assert!(pages < 10_000, "no progress");
                prop_assert!(page.len() <= page_size as usize);
                let bytes = ENVELOPE + page.entries().map(str::len).sum::<usize>() + page.len().saturating_sub(1)
                    + page.next_cursor.as_ref().map_or(0, |c| c.len() + CURSOR_FIELD_BYTES);
                prop_assert!(bytes <= byte_limit, "page of {} bytes over {}", bytes, byte_limit);
                // Every guest call asked for exactly the slots left at that point.
                let statics_on_page = page.entries().filter(|e| uri_of(e).starts_with("static://")).count();
                let mut emitted = statics_on_page;
                for (_, limit, returned) in calls.lock().unwrap()[before..].iter() {
                    prop_assert_eq!(*limit as usize, page_size as usize - emitted);
                    emitted += returned;
                }
                seen.extend(page.entries().map(uri_of));
                match page.next_cursor {
                    Some(c) => cursor = Some(c),
                    None => break,
                }
            }
            prop_assert_eq!(&seen, &expected);
            for (name, _, _) in calls.lock().unwrap().iter() {
                let i: usize = name[3..].parse().unwrap();
                prop_assert!(accessible[i], "an inaccessible source was called");
            }
        }
    }

    proptest! {
        /// "A cursor that fails any check gets one generic invalid cursor
        /// error": any text that is not a cursor this pager sealed for this
        /// caller is that error, before any guest is called.
        #[test]
        fn prop_any_foreign_cursor_is_the_one_invalid_cursor_error(
            cursor in prop_oneof![
                ".{0,600}",
                "[A-Za-z0-9_-]{0,600}",
                proptest::collection::vec(any::<u8>(), 0..400)
                    .prop_map(|b| base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, b)),
            ],
            other_pager in any::<bool>(),
        ) {
            if crate::fuzz::time_is_up() { return Ok(()); }
            let calls = Arc::new(Mutex::new(Vec::new()));
            let records: Vec<_> = (0..5).map(|i| (format!("k{i}"), format!("{i}"), "n".into())).collect();
            let pager = pager_of(vec![source("src0", "a", records.clone(), &calls)], 2, 100_000);
            // A real cursor, but sealed by another process's keys.
            let cursor = if other_pager {
                let other = pager_of(vec![source("src0", "a", records, &calls)], 2, 100_000);
                let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
                rt.block_on(page_of(&other, &alice(), None)).unwrap().next_cursor.unwrap()
            } else {
                cursor
            };
            let before = calls.lock().unwrap().len();
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let err = rt.block_on(page_of(&pager, &alice(), Some(&cursor))).unwrap_err();
            prop_assert!(matches!(err, ListError::InvalidCursor(_)), "{}", err);
            prop_assert_eq!(calls.lock().unwrap().len(), before, "a guest was called");
        }
    }

    /// A pager over `sources` (no static resources), on a test clock.
    fn pager_of(
        sources: Vec<MemorySource>,
        page_size: u32,
        byte_limit: usize,
    ) -> Pager<MemorySource> {
        let clock = Arc::new(TestClock(AtomicU64::new(1_000_000)));
        Pager::new(
            Arc::new(StaticResources::default()),
            sources,
            Arc::new(CursorKeys::new(clock)),
            [1; 32],
            page_size,
            byte_limit,
        )
    }

    async fn page_of(
        pager: &Pager<MemorySource>,
        principal: &Principal,
        cursor: Option<&str>,
    ) -> Result<Page, ListError> {
        pager
            .page(PageRequest {
                principal: Some(principal),
                cursor,
                envelope_bytes: ENVELOPE,
                scope: &scope(),
            })
            .await
    }

    fn alice() -> Principal {
        Principal::new(Some("alice".into()), "app".into(), vec!["a".into()], None)
    }

    #[tokio::test]
    async fn one_entry_that_cannot_fit_is_an_error_and_a_partial_page_ends_before_it() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let records = vec![
            ("k1".to_string(), "1".to_string(), "small".to_string()),
            ("k2".to_string(), "2".to_string(), "x".repeat(400)),
            ("k3".to_string(), "3".to_string(), "small".to_string()),
        ];
        // Room for a small entry and a cursor, not for the big one.
        let limit = ENVELOPE
            + 60
            + 16
            + CursorKeys::encoded_len(&Position::Source {
                index: 0,
                after: Some("k1".into()),
            })
            + 40;
        let pager = pager_of(vec![source("src0", "a", records, &calls)], 10, limit);
        let page = page_of(&pager, &alice(), None).await.unwrap();
        assert_eq!(
            page.len(),
            1,
            "the page ends before the entry that would break the byte bound"
        );
        let next = page
            .next_cursor
            .expect("the cursor points at the last entry emitted");
        let err = page_of(&pager, &alice(), Some(&next)).await.unwrap_err();
        assert!(matches!(err, ListError::EntryTooLarge { .. }), "{err}");
    }

    /// The pager copies a page's strings unescaped only when none of them
    /// needs escaping: one name with a quote, a backslash and a newline
    /// among plain ones, and every entry is still the JSON of its name.
    #[tokio::test]
    async fn one_string_that_needs_escaping_is_escaped_among_plain_ones() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let names = ["plain", "say \"hi\"\\ \n bye", "also plain"];
        let records = names
            .iter()
            .enumerate()
            .map(|(i, n)| (format!("k{i}"), i.to_string(), n.to_string()))
            .collect();
        let pager = pager_of(vec![source("src0", "a", records, &calls)], 10, 100_000);
        let page = page_of(&pager, &alice(), None).await.unwrap();
        let listed: Vec<String> = page
            .entries()
            .map(|e| {
                let v: serde_json::Value = serde_json::from_str(e).expect("valid JSON");
                v["name"].as_str().unwrap().to_owned()
            })
            .collect();
        assert_eq!(listed, names);
    }

    #[tokio::test]
    async fn entries_without_a_mime_type_have_the_templates() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let mut typed = source(
            "src0",
            "a",
            vec![("k1".into(), "1".into(), "n".into())],
            &calls,
        );
        typed.mime_type = Some("text/markdown".into());
        let untyped = source(
            "src1",
            "a",
            vec![("k2".into(), "2".into(), "n".into())],
            &calls,
        );
        let pager = pager_of(vec![typed, untyped], 10, 100_000);
        let page = page_of(&pager, &alice(), None).await.unwrap();
        let entries: Vec<serde_json::Value> = page
            .entries()
            .map(|e| serde_json::from_str(e).unwrap())
            .collect();
        assert_eq!(entries[0]["mimeType"], "text/markdown");
        assert!(entries[1].get("mimeType").is_none(), "{}", entries[1]);
    }

    /// A guest defines its template's type: only its length is checked, so
    /// it may need escaping while every string on the page does not.
    #[tokio::test]
    async fn a_templates_type_that_needs_escaping_is_escaped_on_a_plain_page() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let mut typed = source(
            "src0",
            "a",
            vec![("k1".into(), "1".into(), "n".into())],
            &calls,
        );
        let mime_type = "text/\"x\"\\y";
        typed.mime_type = Some(mime_type.into());
        let pager = pager_of(vec![typed], 10, 100_000);
        let page = page_of(&pager, &alice(), None).await.unwrap();
        let entry: serde_json::Value =
            serde_json::from_str(page.entries().next().unwrap()).expect("valid JSON");
        assert_eq!(entry["mimeType"], mime_type);
    }

    #[tokio::test]
    async fn cursors_are_bound_to_the_caller() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let records: Vec<_> = (0..5)
            .map(|i| (format!("k{i}"), format!("{i}"), "n".into()))
            .collect();
        let pager = pager_of(vec![source("src0", "a", records, &calls)], 2, 100_000);
        let bob = Principal::new(Some("bob".into()), "app".into(), vec!["a".into()], None);
        let page = page_of(&pager, &alice(), None).await.unwrap();
        let c = page.next_cursor.unwrap();
        let err = page_of(&pager, &bob, Some(&c)).await.unwrap_err();
        assert!(matches!(err, ListError::InvalidCursor(_)));
        assert!(page_of(&pager, &alice(), Some(&c)).await.is_ok());
    }
}
