//! `GuestContents`: a `read` result lifted from guest memory through the
//! read's byte bound (`max_read_bytes`).
//!
//! The bindgen `Vec<ResourceContents>` copies every string into the host
//! before anyone can count it: 40 contents naming the same megabyte of guest
//! memory cost 40 MiB of host memory, only to be refused for being over a
//! 4 MiB bound. This lifter reads the canonical-ABI layout of
//! `list<resource-contents>` directly (offsets checked against the bindgen
//! types in a test, the WIT signature typechecked by wasmtime before every
//! call), adds up every item's bytes from the (ptr, len) pairs alone, and
//! refuses the result with [`ResultTooLarge`] before copying a byte when the
//! total is over the bound. Only then are the strings checked and copied.
//!
//! `Lift` has no parameters, so the bound reaches it through a thread-local
//! that [`with_read_bound`] sets around every poll of the call's future (a
//! guest's result is lifted synchronously inside one of those polls, on the
//! polling thread). A lift outside it fails closed.

use super::bindings::emseepea::inventory::types::{ResourceBody, ResourceContents};
use super::page::{LiftError, lift_bytes, lift_str, read_u32};
use crate::limits::READ_CONTENT_ITEM_BYTES;
use std::cell::Cell;
use std::future::Future;
use wasmtime::component::__internal::wasmtime_environ::component::StringEncoding;
use wasmtime::component::__internal::{CanonicalAbiInfo, InstanceType, InterfaceType, LiftContext};
use wasmtime::component::{ComponentType, Lift};

/// A read result over its byte bound (`bytes` is what was counted when the
/// lifter stopped: at least that much).
#[derive(Debug, thiserror::Error)]
#[error("read result of at least {bytes} bytes is over the limit of {limit}")]
pub(crate) struct ResultTooLarge {
    pub bytes: usize,
    pub limit: usize,
}

/// A guest's `read` result, counted and copied within its byte bound; not
/// otherwise validated (see `inventory::read`).
#[derive(Debug)]
pub struct GuestContents(pub Vec<ResourceContents>);

thread_local! {
    static READ_BOUND: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Restores the previous bound when a poll ends, even by a panic.
struct BoundGuard(Option<usize>);

impl Drop for BoundGuard {
    fn drop(&mut self) {
        READ_BOUND.set(self.0);
    }
}

/// Drive `fut` (a guest call returning [`GuestContents`]) with `limit` as
/// the byte bound of every read result lifted while it is polled.
pub(crate) async fn with_read_bound<F: Future>(limit: usize, fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx| {
        let _restore = BoundGuard(READ_BOUND.replace(Some(limit)));
        fut.as_mut().poll(cx)
    })
    .await
}

/// What one item counts against the bound: its uri, mimeType and body (a
/// blob as its base64 length), plus `READ_CONTENT_ITEM_BYTES`.
fn item_bytes(uri: usize, mime_type: usize, body: usize, blob: bool) -> usize {
    let body = if blob {
        body.div_ceil(3).saturating_mul(4)
    } else {
        body
    };
    uri.saturating_add(mime_type)
        .saturating_add(body)
        .saturating_add(READ_CONTENT_ITEM_BYTES)
}

/// Count owned contents (the bindgen fallback) against `limit`.
fn check_owned(items: Vec<ResourceContents>, limit: usize) -> wasmtime::Result<GuestContents> {
    let mut total = 0usize;
    for c in &items {
        let (body, blob) = match &c.body {
            ResourceBody::Text(t) => (t.len(), false),
            ResourceBody::Blob(b) => (b.len(), true),
        };
        let mime = c.mime_type.as_ref().map_or(0, String::len);
        total = total.saturating_add(item_bytes(c.uri.len(), mime, body, blob));
        if total > limit {
            return Err(ResultTooLarge {
                bytes: total,
                limit,
            }
            .into());
        }
    }
    Ok(GuestContents(items))
}

fn current_bound() -> wasmtime::Result<usize> {
    READ_BOUND
        .get()
        .ok_or_else(|| LiftError("a read result lifted outside its byte bound").into())
}

// The canonical-ABI layout (32-bit) of
//   record resource-contents { uri: string, mime-type: option<string>, body: resource-body }
//   variant resource-body { text(string), blob(list<u8>) }
// A string or list is (ptr: u32, len: u32); an option or variant is a u8
// discriminant, then its payload at the payload's alignment (4).
const ITEM_SIZE: usize = 32;
const ITEM_ALIGN: usize = 4;
const ITEM_URI: usize = 0;
const ITEM_MIME_TAG: usize = 8;
const ITEM_MIME: usize = 12;
const ITEM_BODY_TAG: usize = 20;
const ITEM_BODY: usize = 24;
const BODY_TEXT: u8 = 0;
const BODY_BLOB: u8 = 1;

// SAFETY: the same type, ABI and lowered form as the bindgen
// `Vec<ResourceContents>`, whose typecheck this uses; only the lifted Rust
// value differs.
unsafe impl ComponentType for GuestContents {
    type Lower = <Vec<ResourceContents> as ComponentType>::Lower;
    const ABI: CanonicalAbiInfo = <Vec<ResourceContents> as ComponentType>::ABI;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        <Vec<ResourceContents> as ComponentType>::typecheck(ty, types)
    }
}

// SAFETY: lifting only reads guest memory through bounds-checked slices.
unsafe impl Lift for GuestContents {
    /// A `read` result is a `result<list<…>, …>`, always lifted from memory;
    /// this path (never taken by `read`) copies, then counts.
    fn linear_lift_from_flat(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        src: &Self::Lower,
    ) -> wasmtime::Result<Self> {
        let limit = current_bound()?;
        check_owned(Vec::linear_lift_from_flat(cx, ty, src)?, limit)
    }

    fn linear_lift_from_memory(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        bytes: &[u8],
    ) -> wasmtime::Result<Self> {
        let limit = current_bound()?;
        if !matches!(cx.options().string_encoding, StringEncoding::Utf8) {
            // Transcoding guests: the bindgen lift (bounded by hostcall
            // fuel, the call's memory budget), then the count.
            return check_owned(Vec::linear_lift_from_memory(cx, ty, bytes)?, limit);
        }
        let ptr = read_u32(bytes, 0)?;
        let len = read_u32(bytes, 4)?;
        let memory = cx.memory();
        let list = len
            .checked_mul(ITEM_SIZE)
            .and_then(|size| Some(ptr..ptr.checked_add(size)?))
            .and_then(|range| memory.get(range))
            .ok_or(LiftError("list pointer/length out of bounds of memory"))?;
        if ptr % ITEM_ALIGN != 0 {
            return Err(LiftError("list pointer is not aligned").into());
        }
        // Count first, from the lengths alone; stop at the first item over.
        let mut total = 0usize;
        for item in list.chunks_exact(ITEM_SIZE) {
            let mime = match item[ITEM_MIME_TAG] {
                0 => 0,
                1 => read_u32(item, ITEM_MIME + 4)?,
                _ => return Err(LiftError("invalid option discriminant").into()),
            };
            let blob = match item[ITEM_BODY_TAG] {
                BODY_TEXT => false,
                BODY_BLOB => true,
                _ => return Err(LiftError("invalid variant discriminant").into()),
            };
            let (uri, body) = (
                read_u32(item, ITEM_URI + 4)?,
                read_u32(item, ITEM_BODY + 4)?,
            );
            total = total.saturating_add(item_bytes(uri, mime, body, blob));
            if total > limit {
                return Err(ResultTooLarge {
                    bytes: total,
                    limit,
                }
                .into());
            }
        }
        cx.consume_fuel(total)?;
        let mut items = Vec::with_capacity(len);
        for item in list.chunks_exact(ITEM_SIZE) {
            let uri = lift_str(memory, item, ITEM_URI)?.to_owned();
            let mime_type = match item[ITEM_MIME_TAG] {
                0 => None,
                _ => Some(lift_str(memory, item, ITEM_MIME)?.to_owned()),
            };
            let body = match item[ITEM_BODY_TAG] {
                BODY_TEXT => ResourceBody::Text(lift_str(memory, item, ITEM_BODY)?.to_owned()),
                _ => ResourceBody::Blob(lift_bytes(memory, item, ITEM_BODY)?.to_vec()),
            };
            items.push(ResourceContents {
                uri,
                mime_type,
                body,
            });
        }
        Ok(GuestContents(items))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The offsets above are the bindgen types' canonical ABI.
    #[test]
    fn the_layout_is_the_canonical_abis() {
        assert_eq!(<ResourceContents as ComponentType>::SIZE32, ITEM_SIZE);
        assert_eq!(
            <ResourceContents as ComponentType>::ALIGN32 as usize,
            ITEM_ALIGN
        );
        let mut at = 0;
        assert_eq!(<String>::ABI.next_field32_size(&mut at), ITEM_URI);
        assert_eq!(
            <Option<String>>::ABI.next_field32_size(&mut at),
            ITEM_MIME_TAG
        );
        assert_eq!(
            <ResourceBody>::ABI.next_field32_size(&mut at),
            ITEM_BODY_TAG
        );
        assert_eq!(ITEM_MIME - ITEM_MIME_TAG, 4, "option payload at align 4");
        assert_eq!(ITEM_BODY - ITEM_BODY_TAG, 4, "variant payload at align 4");
        assert_eq!(<ResourceBody as ComponentType>::SIZE32, 12);
    }

    fn text(uri: &str, text: &str) -> ResourceContents {
        ResourceContents {
            uri: uri.into(),
            mime_type: Some("text/plain".into()),
            body: ResourceBody::Text(text.into()),
        }
    }

    #[test]
    fn the_bound_counts_every_item() {
        let one = item_bytes(3, 10, 5, false);
        assert_eq!(one, 3 + 10 + 5 + READ_CONTENT_ITEM_BYTES);
        assert!(check_owned(vec![text("a:b", "hello"); 2], 2 * one).is_ok());
        let err = check_owned(vec![text("a:b", "hello"); 2], 2 * one - 1).unwrap_err();
        let err = err.downcast_ref::<ResultTooLarge>().expect("typed");
        assert_eq!((err.bytes, err.limit), (2 * one, 2 * one - 1));
        assert_eq!(
            item_bytes(0, 0, 4, true),
            8 + READ_CONTENT_ITEM_BYTES,
            "base64"
        );
        assert!(
            check_owned(vec![text("", ""); 1000], 999 * READ_CONTENT_ITEM_BYTES).is_err(),
            "empty items count too"
        );
    }

    #[test]
    fn the_bound_holds_only_while_polled_inside() {
        assert!(current_bound().is_err(), "fails closed outside");
        let seen = futures_lite_block_on(with_read_bound(7, async { current_bound().ok() }));
        assert_eq!(seen, Some(7));
        assert!(current_bound().is_err(), "restored after");
    }

    /// A minimal executor for the test above (no tokio runtime needed).
    fn futures_lite_block_on<F: Future>(fut: F) -> F::Output {
        let mut fut = std::pin::pin!(fut);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        loop {
            if let std::task::Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
                return v;
            }
        }
    }
}
