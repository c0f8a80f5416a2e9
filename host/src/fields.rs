//! The seed's field rules, in one place for every path that checks them:
//! listed entries (`inventory::validate`), read results (`inventory::read`),
//! static resources and template definitions.
//!
//! "Characters" are counted as the seed's JavaScript framework counts a
//! string's length: UTF-16 code units. So a URI of 2,048 units may be up to
//! 6,144 bytes, and what a listing accepts, a read accepts too.

use crate::limits::{MAX_MIME_TYPE_LEN, MAX_NAME_LEN, MAX_URI_LEN};

/// A string's length in the seed's characters (UTF-16 code units).
pub fn char_len(s: &str) -> usize {
    s.encode_utf16().count()
}

/// Whether `s` has at most `max` characters. A string of n UTF-8 bytes has
/// at most n UTF-16 units, so the count runs only when the bytes could be
/// over the limit.
pub fn within(s: &str, max: usize) -> bool {
    s.len() <= max || char_len(s) <= max
}

/// "uri (at most 2,048 characters)", and never empty.
pub fn uri_ok(uri: &str) -> bool {
    !uri.is_empty() && within(uri, MAX_URI_LEN)
}

/// "name (at most 512)".
pub fn name_ok(name: &str) -> bool {
    within(name, MAX_NAME_LEN)
}

/// "mimeType (at most 128)".
pub fn mime_type_ok(mime_type: &str) -> bool {
    within(mime_type, MAX_MIME_TYPE_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn characters_are_utf16_units() {
        assert_eq!(char_len("é"), 1);
        assert_eq!(char_len("😀"), 2);
        assert!(mime_type_ok(&"é".repeat(128)), "256 bytes, 128 characters");
        assert!(!mime_type_ok(&"é".repeat(129)));
        assert!(!mime_type_ok(&"😀".repeat(65)), "130 units");
        let uri = format!("a:{}", "é".repeat(2046));
        assert!(uri_ok(&uri), "2,048 units in 4,094 bytes");
        assert!(!uri_ok(&format!("{uri}x")));
        assert!(!uri_ok(""));
        assert!(name_ok(&"😀".repeat(256)) && !name_ok(&"😀".repeat(257)));
    }
}
