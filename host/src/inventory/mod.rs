//! Listing and reading what the sources hold: entry validation, the
//! static+sources pager, sealed cursors, templates and reads. Knows nothing
//! of HTTP or JSON-RPC framing; hands serialized `Resource` objects up.

pub mod access;
pub mod config;
pub mod cursor;
pub mod ownership;
pub mod pager;
pub mod read;
pub mod statics;
pub mod templates;
pub mod validate;

pub use cursor::{Clock, CursorKeys, SystemClock};
pub use pager::{ListError, Page, PageRequest, Pager};
pub use read::{ContentJson, ReadError};
pub use statics::StaticResources;
