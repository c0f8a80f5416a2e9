//! A deterministic catalog of N items (the seed-004 bookshop), for demos and
//! benchmarks. Configuration (manifest `[config]`):
//! - `name`: source name and URI authority (default `catalog`)
//! - `items`: how many items exist (default 1000)
//! - `scope`: the scope a caller needs (default `catalog:read`)
//! - `layout`: `items` (default): `catalog://{name}/items/0000000042` named
//!   `Item 42`; or `books`: `books://{name}/book-00042` named `book-00042`,
//!   byte for byte the pages of the side-by-side benchmark's peer servers
//!   (at most 99,999 items)
//!
//! Keys are the zero-padded item number, so string order is numeric order,
//! and `list` computes only the requested slice: item `n` is a pure function
//! of `n`, nothing is ever materialized.
//!
//! It is the per-call benchmark's guest, so it is lean (BENCHMARKS.md):
//! `no_std` (the component imports nothing from WASI, so instantiation links
//! only `config`), no `core::fmt` on the hot path, a bump allocator, a small
//! stack.

#![no_std]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

wit_bindgen::generate!({ world: "inventory-source", path: "../../wit" });

use emseepea::inventory::config;
use emseepea::inventory::types::{
    Access, CallContext, InventoryEntry, InventoryPage, ResourceBody, ResourceContents,
    ResourceMetadata, SourceError, Template,
};
use exports::emseepea::inventory::{inventory, template};

/// Room for the widest zero-padded key: 10^10 - 1 items.
const MAX_KEY_WIDTH: usize = 10;

struct Catalog;

/// How the items' URIs, keys and names look (config `layout`).
#[derive(Clone, Copy)]
enum Layout {
    /// `catalog://{name}/items/0000000042`, `Item 42`.
    Items,
    /// `books://{name}/book-00042`, `book-00042`: the peers' pages.
    Books,
}

impl Layout {
    fn get() -> Self {
        match config::get("layout").as_deref() {
            Some("books") => Layout::Books,
            _ => Layout::Items,
        }
    }

    /// Digits of a key.
    fn width(self) -> usize {
        match self {
            Layout::Items => MAX_KEY_WIDTH,
            Layout::Books => 5,
        }
    }

    /// What precedes the key in an item's URI.
    fn uri_prefix(self, name: &str) -> String {
        match self {
            Layout::Items => ["catalog://", name, "/items/"].concat(),
            Layout::Books => ["books://", name, "/book-"].concat(),
        }
    }

    /// Append the name of the item whose zero-padded key is `key`.
    fn push_item_name(self, key: &str, out: &mut String) {
        match self {
            Layout::Items => {
                // "Item 42": the key without its padding (items start at 1).
                out.push_str("Item ");
                out.push_str(key.trim_start_matches('0'));
            }
            Layout::Books => {
                out.push_str("book-");
                out.push_str(key);
            }
        }
    }

    /// How many items the layout's keys can number.
    fn max_items(self) -> u64 {
        10u64.pow(self.width() as u32) - 1
    }
}

fn name() -> String {
    config::get("name").unwrap_or_else(|| "catalog".into())
}

fn items(layout: Layout) -> u64 {
    config::get("items")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
        .min(layout.max_items())
}

/// The zero-padded keys of consecutive items: set once from a page's first
/// item, then stepped like an odometer, so a page of keys costs no 64-bit
/// division per digit and no UTF-8 check of a copied buffer (BENCHMARKS.md,
/// sixteenth round).
struct Odometer {
    digits: [u8; MAX_KEY_WIDTH],
    /// How many trailing digits are the key.
    width: usize,
}

impl Odometer {
    fn at(n: u64, width: usize) -> Self {
        let mut digits = [b'0'; MAX_KEY_WIDTH];
        let mut v = n;
        for d in digits.iter_mut().rev() {
            *d = b'0' + (v % 10) as u8;
            v /= 10;
        }
        Odometer { digits, width }
    }

    /// The current key, e.g. `0000000042`.
    fn key(&self) -> &str {
        // ASCII digits only: the check cannot fail.
        core::str::from_utf8(&self.digits[MAX_KEY_WIDTH - self.width..]).unwrap_or("")
    }

    /// On to the next item (`list` stops before the widest key overflows).
    fn step(&mut self) {
        for d in self.digits.iter_mut().rev() {
            if *d == b'9' {
                *d = b'0';
            } else {
                *d += 1;
                return;
            }
        }
    }
}

impl template::Guest for Catalog {
    fn describe() -> Template {
        let name = name();
        let layout = Layout::get();
        Template {
            uri_template: [&layout.uri_prefix(&name), "{id}"].concat(),
            title: Some(format!("Catalog {name}")),
            description: Some(format!("A deterministic catalog of {} items", items(layout))),
            mime_type: Some("text/plain".into()),
            access: Access::Protected,
            required_scopes: vec![config::get("scope").unwrap_or_else(|| "catalog:read".into())],
            discoverable: true,
            name,
        }
    }

    fn read(uri: String, _context: CallContext) -> Result<Vec<ResourceContents>, SourceError> {
        let layout = Layout::get();
        let prefix = layout.uri_prefix(&name());
        let n: u64 = uri
            .strip_prefix(&prefix)
            .filter(|id| id.len() == layout.width() && id.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|id| id.parse().ok())
            .ok_or(SourceError::NotFound)?;
        if n == 0 || n > items(layout) {
            return Err(SourceError::NotFound);
        }
        Ok(vec![ResourceContents {
            body: ResourceBody::Text(format!("Item {n} of the {} catalog.\n", name())),
            mime_type: Some("text/plain".into()),
            uri,
        }])
    }
}

impl inventory::Guest for Catalog {
    fn list(
        after: Option<String>,
        limit: u32,
        _context: CallContext,
    ) -> Result<InventoryPage, SourceError> {
        let layout = Layout::get();
        let total = items(layout);
        let first = match after {
            None => 1,
            Some(key) => {
                key.parse::<u64>()
                    .map_err(|_| SourceError::Failed(format!("not a catalog key: {key:?}")))?
                    + 1
            }
        };
        let end = first.saturating_add(u64::from(limit)).min(total + 1);
        let prefix = layout.uri_prefix(&name());
        let mut entries = Vec::with_capacity(end.saturating_sub(first) as usize);
        let mut odometer = Odometer::at(first, layout.width());
        for _ in first..end {
            let key = odometer.key();
            let mut uri = String::with_capacity(prefix.len() + key.len());
            uri.push_str(&prefix);
            uri.push_str(key);
            let mut name = String::with_capacity(5 + key.len());
            layout.push_item_name(key, &mut name);
            entries.push(InventoryEntry {
                resource: ResourceMetadata {
                    uri,
                    name,
                    // The template's `text/plain` applies (see the WIT).
                    mime_type: None,
                },
                key: key.into(),
            });
            odometer.step();
        }
        Ok(InventoryPage {
            has_more: end <= total,
            entries,
        })
    }
}

export!(Catalog);

/// Without std, a panic (a guest bug) traps the call; the host reports it as
/// a generic error and logs the trap.
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    core::arch::wasm32::unreachable()
}

/// Without libc, `memcmp` (string comparisons) must come from here;
/// compiler-builtins supplies the other memory functions.
///
/// # Safety
/// `a` and `b` are readable for `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    for i in 0..n {
        // SAFETY: the caller passes two readable ranges of `n` bytes.
        let (x, y) = unsafe { (*a.add(i), *b.add(i)) };
        if x != y {
            return i32::from(x) - i32::from(y);
        }
    }
    0
}

/// The canonical ABI's allocator (the host calls it to pass strings in),
/// which wit-bindgen's runtime would otherwise bring with std.
///
/// # Safety
/// Called by the canonical ABI only: `align` is a power of two and `old`,
/// when non-null, is a block of `old_len` bytes allocated here.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cabi_realloc(
    old: *mut u8,
    old_len: usize,
    align: usize,
    new_len: usize,
) -> *mut u8 {
    use core::alloc::{GlobalAlloc, Layout};
    if new_len == 0 {
        return align as *mut u8;
    }
    // SAFETY: the canonical ABI passes a power-of-two alignment, and `old`
    // (when non-null) is a block of `old_len` bytes it allocated here.
    let ptr = unsafe {
        if old.is_null() {
            bump::BUMP.alloc(Layout::from_size_align_unchecked(new_len, align))
        } else {
            bump::BUMP.realloc(old, Layout::from_size_align_unchecked(old_len, align), new_len)
        }
    };
    if ptr.is_null() {
        core::arch::wasm32::unreachable();
    }
    ptr
}

/// The global allocator: a bump allocator.
///
/// An instance serves one caller for a bounded time and is then discarded
/// (`[runtime] warm_max_growth_bytes`: after its memory grew by 1 MiB, some
/// hundred pages), so nothing a call allocates needs to be freed: `alloc` is a pointer bump and
/// every `free` (including the canonical ABI's post-return, which frees each
/// returned string) a no-op. It starts in a static arena, part of the initial
/// memory, so a typical call never grows memory; beyond it, it grows memory.
mod bump {
    use core::alloc::{GlobalAlloc, Layout};
    use core::arch::wasm32::memory_grow;
    use core::cell::UnsafeCell;

    const ARENA: usize = 40 * 1024;
    const PAGE: usize = 65536;

    #[repr(C, align(16))]
    pub(crate) struct Bump {
        arena: UnsafeCell<[u8; ARENA]>,
        /// (next free address, end of the current region); 0 before first use.
        region: UnsafeCell<(usize, usize)>,
    }

    // wasm32-wasip2 guests are single-threaded.
    unsafe impl Sync for Bump {}

    #[global_allocator]
    pub(crate) static BUMP: Bump = Bump {
        arena: UnsafeCell::new([0; ARENA]),
        region: UnsafeCell::new((0, 0)),
    };

    unsafe impl GlobalAlloc for Bump {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            // SAFETY: single-threaded; `region` is only touched here.
            let region = unsafe { &mut *self.region.get() };
            if region.1 == 0 {
                let start = self.arena.get() as usize;
                *region = (start, start + ARENA);
            }
            let at = region.0.next_multiple_of(layout.align());
            if at + layout.size() <= region.1 {
                region.0 = at + layout.size();
                return at as *mut u8;
            }
            // A new region at the end of memory, big enough for this one.
            let pages = (layout.size() + layout.align()).div_ceil(PAGE).max(1);
            let old = memory_grow(0, pages);
            if old == usize::MAX {
                return core::ptr::null_mut();
            }
            let start = (old * PAGE).next_multiple_of(layout.align());
            *region = (start + layout.size(), old * PAGE + pages * PAGE);
            start as *mut u8
        }

        unsafe fn dealloc(&self, _ptr: *mut u8, _layout: Layout) {}

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            let region = unsafe { &mut *self.region.get() };
            // The most recent allocation grows in place.
            if ptr as usize + layout.size() == region.0 && ptr as usize + new_size <= region.1 {
                region.0 = ptr as usize + new_size;
                return ptr;
            }
            let new = unsafe {
                self.alloc(Layout::from_size_align_unchecked(new_size, layout.align()))
            };
            if !new.is_null() {
                unsafe { core::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size)) };
            }
            new
        }
    }
}
