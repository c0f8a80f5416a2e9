//! Ordering keys: 1..=256 printable ASCII characters without spaces
//! (0x21..=0x7e), compared as bytes. Every helper here preserves order: if
//! `a < b` then `key(a) < key(b)`, so a backend's `ORDER BY` and the key order
//! agree, and a composite key sorts by its parts in turn.

use std::fmt::Write;

/// The longest key the host accepts.
pub const MAX_KEY_LEN: usize = 256;

/// Separates the parts of a [`Composite`] key; below every character the
/// other helpers emit, so a shorter part sorts before its extensions.
pub const SEPARATOR: char = '!';

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyError {
    Empty,
    TooLong(usize),
}

impl std::fmt::Display for KeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyError::Empty => f.write_str("empty key"),
            KeyError::TooLong(n) => write!(f, "key of {n} characters (at most {MAX_KEY_LEN})"),
        }
    }
}

impl std::error::Error for KeyError {}

/// `n` zero-padded to 20 digits (every u64), so string order is numeric order.
pub fn number(n: u64) -> String {
    format!("{n:020}")
}

/// `n` zero-padded to `width` digits; `None` if it does not fit.
pub fn number_width(n: u64, width: usize) -> Option<String> {
    let s = format!("{n:0width$}");
    (s.len() == width).then_some(s)
}

/// A signed number: offset by 2^63 so negatives sort first.
pub fn signed(n: i64) -> String {
    number((n as u64) ^ (1 << 63))
}

/// A Unix timestamp in milliseconds (13 digits until the year 2286, then 20
/// via [`number`]-style padding: fixed at 20 digits here to stay ordered).
pub fn timestamp_ms(ms: u64) -> String {
    number(ms)
}

/// Escape any string into key characters, keeping byte order (and so
/// Unicode code point order): `$`..=`}` stay as they are, lower bytes become
/// `#` + two hex digits, higher bytes (`~`, DEL, UTF-8) `~` + two hex digits.
/// The output never contains [`SEPARATOR`].
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            0x24..=0x7d => out.push(b as char),
            0x00..=0x23 => {
                let _ = write!(out, "#{b:02X}");
            }
            _ => {
                let _ = write!(out, "~{b:02X}");
            }
        }
    }
    out
}

/// The inverse of [`escape`]; `None` for text `escape` cannot produce.
pub fn unescape(key: &str) -> Option<String> {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b @ 0x24..=0x7d => {
                out.push(b);
                i += 1;
            }
            b'#' | b'~' => {
                let hex = key.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            _ => return None,
        }
    }
    String::from_utf8(out).ok()
}

/// A key of several parts, compared part by part: e.g. a timestamp and the
/// record id as tie-breaker, so two records of the same instant still have
/// distinct, immutable keys.
#[derive(Debug, Clone, Default)]
pub struct Composite {
    key: String,
}

impl Composite {
    pub fn new() -> Self {
        Self::default()
    }

    fn part(mut self, p: &str) -> Self {
        if !self.key.is_empty() {
            self.key.push(SEPARATOR);
        }
        self.key.push_str(p);
        self
    }

    pub fn number(self, n: u64) -> Self {
        self.part(&number(n))
    }

    pub fn signed(self, n: i64) -> Self {
        self.part(&signed(n))
    }

    pub fn timestamp_ms(self, ms: u64) -> Self {
        self.part(&timestamp_ms(ms))
    }

    /// Any text, escaped.
    pub fn text(self, s: &str) -> Self {
        self.part(&escape(s))
    }

    /// The key, checked against the host's length rule.
    pub fn finish(self) -> Result<String, KeyError> {
        check(self.key)
    }
}

/// `key` if the host will accept its length (characters are already
/// printable when it comes from these helpers).
pub fn check(key: String) -> Result<String, KeyError> {
    match key.len() {
        0 => Err(KeyError::Empty),
        n if n > MAX_KEY_LEN => Err(KeyError::TooLong(n)),
        _ => Ok(key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn printable(k: &str) -> bool {
        k.bytes().all(|b| (0x21..=0x7e).contains(&b))
    }

    #[test]
    fn numbers_sort_numerically() {
        let ns = [0u64, 1, 9, 10, 99, 100, 12345, u64::MAX];
        for w in ns.windows(2) {
            assert!(number(w[0]) < number(w[1]));
        }
        let ss = [i64::MIN, -100, -1, 0, 1, 100, i64::MAX];
        for w in ss.windows(2) {
            assert!(signed(w[0]) < signed(w[1]), "{w:?}");
        }
        assert_eq!(number_width(42, 5).as_deref(), Some("00042"));
        assert_eq!(number_width(123456, 5), None);
        assert!(timestamp_ms(1_700_000_000_000) < timestamp_ms(10_000_000_000_000));
    }

    #[test]
    fn escaping_keeps_byte_order_and_round_trips() {
        let samples = [
            "",
            "\0",
            " ",
            "!",
            "\"",
            "#",
            "$",
            "%",
            "A",
            "a",
            "a b",
            "ab",
            "a!",
            "}",
            "~",
            "\u{7f}",
            "é",
            "z",
            "zz",
            "€",
            "😀",
            "HOSTILE key\n",
        ];
        for a in samples {
            let ea = escape(a);
            assert!(printable(&ea) || ea.is_empty(), "{a:?} -> {ea:?}");
            assert!(!ea.contains(SEPARATOR));
            assert_eq!(unescape(&ea).as_deref(), Some(a));
            for b in samples {
                assert_eq!(
                    a.cmp(b),
                    ea.cmp(&escape(b)),
                    "{a:?} vs {b:?}: {ea:?} vs {:?}",
                    escape(b)
                );
            }
        }
        assert_eq!(unescape("a b"), None);
        assert_eq!(unescape("#G0"), None);
    }

    #[test]
    fn composites_sort_part_by_part_with_a_tie_breaker() {
        let k = |t: u64, id: &str| Composite::new().timestamp_ms(t).text(id).finish().unwrap();
        // Same instant: the id breaks the tie; shorter ids sort first.
        assert!(k(5, "a") < k(5, "ab"));
        assert!(k(5, "ab") < k(5, "b"));
        assert!(k(5, "zzz") < k(6, "a"));
        let (x, y) = (
            Composite::new().text("a").text("z").finish().unwrap(),
            Composite::new().text("ab").text("a").finish().unwrap(),
        );
        assert!(x < y, "the first part decides: {x} vs {y}");
        assert!(printable(&k(5, "é 1")));
    }

    #[test]
    fn length_is_checked() {
        assert_eq!(Composite::new().finish(), Err(KeyError::Empty));
        assert!(Composite::new().text(&"a".repeat(256)).finish().is_ok());
        assert_eq!(
            Composite::new().text(&"a".repeat(257)).finish(),
            Err(KeyError::TooLong(257))
        );
    }
}
