//! The guest's placeholder syntax (`?1`, `?2`, ...) in PostgreSQL's (`$1`,
//! `$2`, ...). Only placeholders in SQL text are rewritten: a `?` inside a
//! string literal (`'...'`, `E'...'`), a quoted identifier (`"..."`), a
//! comment (`-- ...`, nested `/* ... */`) or a dollar-quoted string
//! (`$$...$$`, `$tag$...$tag$`) is data and stays as it is. A bare `?` (no
//! digits) is left alone too: it is PostgreSQL's jsonb operator. `$N` written
//! by the guest is refused: one placeholder syntax works on every engine.

/// A statement the translator refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlaceholderError {
    /// `$N` in SQL text: PostgreSQL-only syntax.
    #[error("`$N` parameters are not portable; use `?N`")]
    DollarParameter,
}

/// Translate `?N` to `$N` outside literals, quoted identifiers, comments and
/// dollar-quoted strings.
pub fn translate(sql: &str) -> Result<String, PlaceholderError> {
    let b = sql.as_bytes();
    let mut out = String::with_capacity(sql.len() + 8);
    // `copied` is the end of what `out` already holds; spans are copied
    // whole so multi-byte UTF-8 is never split.
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\'' => {
                // E'...' (either case), not part of a longer identifier,
                // treats backslash as an escape.
                let escapes =
                    i > 0 && matches!(b[i - 1], b'e' | b'E') && (i < 2 || !is_ident_byte(b[i - 2]));
                i = skip_quoted(b, i + 1, b'\'', escapes);
            }
            b'"' => i = skip_quoted(b, i + 1, b'"', false),
            b'-' if b.get(i + 1) == Some(&b'-') => {
                i = b[i..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(b.len(), |p| i + p + 1);
            }
            b'/' if b.get(i + 1) == Some(&b'*') => i = skip_block_comment(b, i + 2),
            b'$' if i > 0 && is_ident_byte(b[i - 1]) => i += 1, // `a$b` is one identifier
            b'$' if b.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                return Err(PlaceholderError::DollarParameter);
            }
            b'$' => match dollar_tag_end(b, i) {
                Some(tag_end) => {
                    let tag = &b[i..tag_end];
                    i = find(b, tag_end, tag).map_or(b.len(), |p| p + tag.len());
                }
                None => i += 1,
            },
            b'?' if b.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                out.push_str(&sql[copied..i]);
                // `x?1` must not become the identifier `x$1`.
                if i > 0 && is_ident_byte(b[i - 1]) {
                    out.push(' ');
                }
                out.push('$');
                i += 1;
                copied = i;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    out.push_str(&sql[copied..]);
    Ok(out)
}

/// Letters, digits, `_`, `$` and every non-ASCII byte (PostgreSQL allows
/// them in identifiers).
fn is_ident_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80
}

/// Past the closing `quote` (a doubled quote is an escaped one; with
/// `escapes`, so is a backslash-escaped character). Unterminated: the end.
fn skip_quoted(b: &[u8], mut i: usize, quote: u8, escapes: bool) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' if escapes => i += 2,
            c if c == quote => {
                if b.get(i + 1) == Some(&quote) {
                    i += 2;
                } else {
                    return i + 1;
                }
            }
            _ => i += 1,
        }
    }
    b.len()
}

/// Past the end of a block comment whose body starts at `i`; PostgreSQL's
/// block comments nest.
fn skip_block_comment(b: &[u8], mut i: usize) -> usize {
    let mut depth = 1usize;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            depth += 1;
            i += 2;
        } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    b.len()
}

/// If a dollar-quote tag (`$$` or `$tag$`, the tag an identifier not
/// starting with a digit) starts at `i`, the index just past it.
fn dollar_tag_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    if j < b.len() && b[j] != b'$' {
        if b[j].is_ascii_digit() || !is_ident_byte(b[j]) {
            return None;
        }
        while j < b.len() && is_ident_byte(b[j]) && b[j] != b'$' {
            j += 1;
        }
    }
    (b.get(j) == Some(&b'$')).then_some(j + 1)
}

fn find(haystack: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    haystack[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| from + p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(sql: &str) -> String {
        translate(sql).unwrap()
    }

    #[test]
    fn placeholders_in_sql_text_are_renumbered_in_postgres_syntax() {
        assert_eq!(
            t("SELECT a FROM t WHERE x = ?1 AND y > ?2 LIMIT ?10"),
            "SELECT a FROM t WHERE x = $1 AND y > $2 LIMIT $10"
        );
        assert_eq!(t("SELECT ?1,?2"), "SELECT $1,$2");
        assert_eq!(t("SELECT 'é' || ?1"), "SELECT 'é' || $1");
    }

    #[test]
    fn question_marks_in_literals_identifiers_and_comments_are_data() {
        let untouched = [
            "SELECT '?1'",
            "SELECT 'it''s ?1'",
            r"SELECT E'\' ?1'",
            "SELECT \"col?1\" FROM t",
            "SELECT \"a\"\"?1\" FROM t",
            "SELECT 1 -- ?1\n",
            "SELECT 1 /* ?1 /* nested ?2 */ still ?3 */",
            "SELECT $$ ?1 $$",
            "SELECT $fn$ ?1 $x$ ?2 $fn$",
            "SELECT data ? 'key' FROM t",
        ];
        for sql in untouched {
            assert_eq!(t(sql), sql, "{sql}");
        }
        // Text after each of them is SQL again.
        assert_eq!(t("SELECT '?1', ?1"), "SELECT '?1', $1");
        assert_eq!(t("SELECT 1 -- ?1\n, ?2"), "SELECT 1 -- ?1\n, $2");
        assert_eq!(t("SELECT /* /* */ ?1 */ ?2"), "SELECT /* /* */ ?1 */ $2");
        assert_eq!(t("SELECT $q$ ?1 $q$, ?2"), "SELECT $q$ ?1 $q$, $2");
        // A plain literal has no backslash escapes: the quote ends it.
        assert_eq!(t(r"SELECT '\', ?1"), r"SELECT '\', $1");
        // `me'` is an identifier followed by a literal, not an E-string.
        assert_eq!(t(r"SELECT name'\', ?1"), r"SELECT name'\', $1");
    }

    #[test]
    fn dollar_parameters_are_refused_but_dollars_in_identifiers_are_not() {
        assert_eq!(
            translate("SELECT $1"),
            Err(PlaceholderError::DollarParameter)
        );
        assert_eq!(
            t("SELECT a$1 FROM t WHERE b = ?1"),
            "SELECT a$1 FROM t WHERE b = $1"
        );
        assert_eq!(t("SELECT '$1'"), "SELECT '$1'");
        assert_eq!(
            t("SELECT x FROM t WHERE x=y?1"),
            "SELECT x FROM t WHERE x=y $1"
        );
    }

    #[test]
    fn unterminated_quotes_run_to_the_end_and_never_panic() {
        for sql in [
            "SELECT '?1",
            "SELECT \"?1",
            "SELECT /* ?1",
            "SELECT $a$ ?1",
            "E'\\",
            "$",
            "?",
        ] {
            assert_eq!(t(sql), sql);
        }
    }
}
