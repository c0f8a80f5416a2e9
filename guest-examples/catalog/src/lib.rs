//! A deterministic catalog of N items (the seed-004 bookshop), for demos and
//! benchmarks. Configuration (manifest `[config]`):
//! - `name`: source name and URI authority (default `catalog`)
//! - `items`: how many items exist (default 1000)
//! - `scope`: the scope a caller needs (default `catalog:read`)
//!
//! Keys are the zero-padded item number, so string order is numeric order,
//! and `list` computes only the requested slice: item `n` is a pure function
//! of `n`, nothing is ever materialized.

wit_bindgen::generate!({ world: "inventory-source", path: "../../wit" });

use emseepea::inventory::config;
use emseepea::inventory::types::{
    Access, CallContext, InventoryEntry, InventoryPage, ResourceBody, ResourceContents,
    ResourceMetadata, SourceError, Template,
};
use exports::emseepea::inventory::{inventory, template};

/// Width of the zero-padded key: enough for 10^10 - 1 items.
const KEY_WIDTH: usize = 10;

struct Catalog;

fn name() -> String {
    config::get("name").unwrap_or_else(|| "catalog".into())
}

fn items() -> u64 {
    config::get("items")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

/// The zero-padded key, without core::fmt (this runs 50 times per page).
fn key_of(n: u64) -> String {
    let mut digits = [b'0'; KEY_WIDTH];
    let mut v = n;
    for d in digits.iter_mut().rev() {
        *d = b'0' + (v % 10) as u8;
        v /= 10;
    }
    String::from_utf8(digits.to_vec()).expect("ASCII digits")
}

/// `n` in decimal, appended to `out`.
fn decimal(n: u64, out: &mut String) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut v = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.push_str(std::str::from_utf8(&digits[i..]).expect("ASCII digits"));
}

impl template::Guest for Catalog {
    fn describe() -> Template {
        let name = name();
        Template {
            uri_template: format!("catalog://{name}/items/{{id}}"),
            title: Some(format!("Catalog {name}")),
            description: Some(format!("A deterministic catalog of {} items", items())),
            mime_type: Some("text/plain".into()),
            access: Access::Protected,
            required_scopes: vec![config::get("scope").unwrap_or_else(|| "catalog:read".into())],
            discoverable: true,
            name,
        }
    }

    fn read(uri: String, _context: CallContext) -> Result<Vec<ResourceContents>, SourceError> {
        let prefix = format!("catalog://{}/items/", name());
        let n: u64 = uri
            .strip_prefix(&prefix)
            .filter(|id| id.len() == KEY_WIDTH && id.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|id| id.parse().ok())
            .ok_or(SourceError::NotFound)?;
        if n == 0 || n > items() {
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
        let total = items();
        let first = match after {
            None => 1,
            Some(key) => {
                key.parse::<u64>()
                    .map_err(|_| SourceError::Failed(format!("not a catalog key: {key:?}")))?
                    + 1
            }
        };
        let end = first.saturating_add(u64::from(limit)).min(total + 1);
        let prefix = format!("catalog://{}/items/", name());
        let mut entries = Vec::with_capacity(end.saturating_sub(first) as usize);
        for n in first..end {
            let key = key_of(n);
            let mut uri = String::with_capacity(prefix.len() + KEY_WIDTH);
            uri.push_str(&prefix);
            uri.push_str(&key);
            let mut title = String::with_capacity(16);
            title.push_str("Item ");
            decimal(n, &mut title);
            entries.push(InventoryEntry {
                resource: ResourceMetadata {
                    uri,
                    name: title,
                    // The template's `text/plain` applies (see the WIT).
                    mime_type: None,
                },
                key,
            });
        }
        Ok(InventoryPage {
            has_more: end <= total,
            entries,
        })
    }
}

export!(Catalog);

/// The global allocator: a bump arena in the module's own memory.
///
/// The host gives every call a fresh instance and discards it afterwards, so
/// nothing a call allocates needs to be freed. Allocating from a static arena
/// makes `alloc` a pointer bump and every `free` (including the canonical
/// ABI's post-return, which frees each returned string) a no-op, and needs no
/// `memory.grow`: the arena is part of the initial memory. When it is full,
/// allocation falls back to the system allocator.
mod arena {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::UnsafeCell;

    const SIZE: usize = 40 * 1024;

    #[repr(C, align(16))]
    struct Arena {
        bytes: UnsafeCell<[u8; SIZE]>,
        next: UnsafeCell<usize>,
    }

    // wasm32-wasip2 guests are single-threaded.
    unsafe impl Sync for Arena {}

    #[global_allocator]
    static ARENA: Arena = Arena {
        bytes: UnsafeCell::new([0; SIZE]),
        next: UnsafeCell::new(0),
    };

    impl Arena {
        fn contains(&self, ptr: *mut u8) -> bool {
            let start = self.bytes.get() as usize;
            (start..start + SIZE).contains(&(ptr as usize))
        }
    }

    unsafe impl GlobalAlloc for Arena {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            let start = self.bytes.get() as usize;
            // SAFETY: single-threaded; `next` is only touched here.
            let next = unsafe { &mut *self.next.get() };
            let at = (start + *next).next_multiple_of(layout.align());
            if at + layout.size() <= start + SIZE {
                *next = at + layout.size() - start;
                at as *mut u8
            } else {
                unsafe { System.alloc(layout) }
            }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            if !self.contains(ptr) {
                unsafe { System.dealloc(ptr, layout) }
            }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            if !self.contains(ptr) {
                return unsafe { System.realloc(ptr, layout, new_size) };
            }
            let start = self.bytes.get() as usize;
            let next = unsafe { &mut *self.next.get() };
            // The most recent allocation grows in place.
            if ptr as usize + layout.size() == start + *next
                && ptr as usize + new_size <= start + SIZE
            {
                *next = ptr as usize + new_size - start;
                return ptr;
            }
            let new = unsafe { self.alloc(Layout::from_size_align_unchecked(new_size, layout.align())) };
            if !new.is_null() {
                unsafe { std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size)) };
            }
            new
        }
    }
}
