//! [`GuestText`]: how a guest-supplied string goes into a log line.
//!
//! Guest strings (source-error messages, stdout/stderr lines, template
//! names, scopes, trap messages) are hostile input. In a log they must
//! neither be huge (an 8 MiB message must not become an 8 MiB line) nor act
//! on the reader: a raw CR or LF forges a line, an ESC rewrites a terminal.
//! So every such string is logged through `GuestText`, which escapes and
//! truncates it and keeps its original length.

use std::fmt::{self, Write};

/// A guest-supplied string in a log line (source-error messages, output
/// lines, template names, trap messages) is escaped and cut to at most this
/// many bytes; a cut string ends in `…[N bytes]` with its original length.
pub const MAX_LOGGED_GUEST_TEXT_BYTES: usize = 512;

/// Displays a guest string escaped (`\r`, `\n`, `\t`, `\\`, `\"`, `\u{1b}`
/// for every other control or bidi/format character) and cut to at most
/// `MAX_LOGGED_GUEST_TEXT_BYTES` bytes of output; a cut string ends in
/// `…[N bytes]`, N being the original length.
#[derive(Clone, Copy)]
pub struct GuestText<'a> {
    text: &'a str,
    limit: usize,
}

impl<'a> GuestText<'a> {
    pub fn new(text: &'a str) -> Self {
        Self {
            text,
            limit: MAX_LOGGED_GUEST_TEXT_BYTES,
        }
    }

    /// The original length in bytes (for a `…_len` log field).
    pub fn len(&self) -> usize {
        self.text.len()
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }
}

/// Characters that move the cursor, switch direction or hide text: Unicode
/// line/paragraph separators, bidi overrides and isolates, zero-width
/// characters, the BOM and interlinear annotation marks.
fn is_format_control(c: char) -> bool {
    matches!(c,
        '\u{061c}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}'
        | '\u{2060}'..='\u{2069}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}')
}

/// Write `c` escaped into `buf`; returns the escaped form.
fn escape(c: char, buf: &mut String) -> &str {
    buf.clear();
    match c {
        '\\' => buf.push_str("\\\\"),
        '"' => buf.push_str("\\\""),
        '\n' => buf.push_str("\\n"),
        '\r' => buf.push_str("\\r"),
        '\t' => buf.push_str("\\t"),
        c if c.is_control() || is_format_control(c) => {
            let _ = write!(buf, "\\u{{{:x}}}", c as u32);
        }
        c => buf.push(c),
    }
    buf
}

impl fmt::Display for GuestText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut written = 0;
        let mut buf = String::with_capacity(12);
        for c in self.text.chars() {
            let piece = escape(c, &mut buf);
            if written + piece.len() > self.limit {
                return write!(f, "…[{} bytes]", self.text.len());
            }
            written += piece.len();
            f.write_str(piece)?;
        }
        Ok(())
    }
}

/// Quoted: what log lines use, so that guest text cannot pass for other
/// fields of the line (`x source="other"`).
impl fmt::Debug for GuestText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{self}\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(s: &str, limit: usize) -> String {
        GuestText { text: s, limit }.to_string()
    }

    #[test]
    fn control_characters_are_escaped() {
        let s =
            GuestText::new("a\rINFO b\u{1b}[2K\nc\td\\e\u{0}\u{7f}\u{85}\u{202e}é\"").to_string();
        assert_eq!(
            s,
            r#"a\rINFO b\u{1b}[2K\nc\td\\e\u{0}\u{7f}\u{85}\u{202e}é\""#
        );
        let quoted = format!("{:?}", GuestText::new(r#"x" source="y"#));
        assert_eq!(
            quoted, r#""x\" source=\"y""#,
            "cannot pass for another field"
        );
        assert!(!s.chars().any(|c| c.is_control()));
    }

    #[test]
    fn long_text_is_cut_with_its_length() {
        let big = "x".repeat(8 << 20);
        let s = GuestText::new(&big).to_string();
        assert!(s.len() <= MAX_LOGGED_GUEST_TEXT_BYTES + 32, "{}", s.len());
        assert!(s.ends_with("…[8388608 bytes]"), "{s}");
        assert_eq!(shown("abc", 3), "abc", "exactly at the limit: whole");
        assert_eq!(shown("abcd", 3), "abc…[4 bytes]");
        // An escape is never split: the cut falls before it.
        assert_eq!(shown("ab\r", 3), "ab…[3 bytes]");
        assert_eq!(shown("éé", 3), "é…[4 bytes]", "nor is a character");
    }
}
