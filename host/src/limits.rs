//! The seed's limits that several layers share (an entry's fields, a
//! template's definition, the scopes a challenge names, a traversal's
//! lifetime). A leaf: it imports nothing, so any layer may read it.

use std::time::Duration;

/// "A traversal expires 15 minutes after its first page."
pub const TRAVERSAL_LIFETIME: Duration = Duration::from_secs(15 * 60);

/// Entry limits from the seed ("Keys contain 1–256 printable ASCII characters",
/// "uri (at most 2,048 characters), name (at most 512), and mimeType (at most 128)").
pub const MAX_KEY_LEN: usize = 256;
/// `MAX_URI_LEN` also bounds the `uri` of a `resources/read` request: a longer
/// one is refused (invalid params) before any lookup or template matching.
pub const MAX_URI_LEN: usize = 2048;
pub const MAX_NAME_LEN: usize = 512;
pub const MAX_MIME_TYPE_LEN: usize = 128;
/// "The subject must be a nonempty string of at most 256 characters without control characters."
pub const MAX_SUBJECT_LEN: usize = 256;

/// A template's definition (`describe()`), bounded at startup. Name: 1..=64
/// of `[a-z0-9_-]`; title, description: characters (UTF-16 units).
pub const MAX_TEMPLATE_NAME_LEN: usize = 64;
pub const MAX_TITLE_LEN: usize = 512;
pub const MAX_DESCRIPTION_LEN: usize = 4096;
/// Required scopes of one template: at most 16, each 1..=128 printable ASCII
/// characters. A 401/403 challenge names them all.
pub const MAX_REQUIRED_SCOPES: usize = 16;
pub const MAX_SCOPE_LEN: usize = 128;
/// The joined, space-separated union of the scopes every inventory source
/// requires (the `scope` of an anonymous listing's 401) is at most this many
/// bytes, checked at startup. With the metadata URL at its longest
/// (`MAX_URI_LEN`, quoted), every `WWW-Authenticate` header then stays under
/// `MAX_CHALLENGE_BYTES` (a test computes the worst case).
pub const MAX_CHALLENGE_SCOPES_BYTES: usize = 3072;
/// Every `WWW-Authenticate` header is shorter than this: half of Node's
/// default 16 KiB header limit.
pub const MAX_CHALLENGE_BYTES: usize = 8192;

/// `max_read_bytes` counts, per content item, its uri, mimeType and body
/// (a blob as its base64 length) plus this much for the item itself, so a
/// result of many empty items is bounded too.
pub const READ_CONTENT_ITEM_BYTES: usize = 64;

/// The longest `uri-template` a source may register, in bytes. Matching a
/// URI costs, per URI byte, one pass over a bitset of the template's states
/// (at most this many + 1 bits, so 9 machine words) plus one step per
/// expression: 512 bytes keep that to tens of operations a byte, whatever
/// the template looks like, and leave room for any real template.
pub const MAX_TEMPLATE_LEN: usize = 512;
/// The most expressions (`{...}`, each with any number of variables) one
/// `uri-template` may have. Each costs two steps per matched URI byte.
pub const MAX_TEMPLATE_EXPRESSIONS: usize = 16;
