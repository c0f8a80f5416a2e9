//! A new guest's name. One name is used everywhere a project needs one: the
//! Cargo/npm package, the template name (`[a-z0-9_-]`, at most
//! `MAX_TEMPLATE_NAME_LEN`), the URI scheme (`NAME://records/{id}`: a letter
//! first, no `_`) and the scope (`NAME:read`), so it must suit all of them.

use crate::limits::MAX_TEMPLATE_NAME_LEN;

/// Names Cargo refuses for a package (Rust keywords and the standard
/// crates) and the SDK's own, which the project depends on.
const RESERVED: &[&str] = &[
    "as",
    "async",
    "await",
    "break",
    "const",
    "continue",
    "crate",
    "dyn",
    "else",
    "enum",
    "extern",
    "false",
    "fn",
    "for",
    "if",
    "impl",
    "in",
    "let",
    "loop",
    "match",
    "mod",
    "move",
    "mut",
    "pub",
    "ref",
    "return",
    "self",
    "static",
    "struct",
    "super",
    "trait",
    "true",
    "type",
    "unsafe",
    "use",
    "where",
    "while",
    "abstract",
    "become",
    "box",
    "do",
    "final",
    "gen",
    "macro",
    "override",
    "priv",
    "try",
    "typeof",
    "unsized",
    "virtual",
    "yield",
    "core",
    "std",
    "alloc",
    "test",
    "proc-macro",
    "emseepea-guest",
];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error(
        "{0:?} is not a valid guest name: use 1 to {MAX_TEMPLATE_NAME_LEN} lowercase ASCII letters, digits and `-`, starting with a letter and not ending with `-` (e.g. `my-notes`)"
    )]
    Invalid(String),
    #[error("{0:?} is reserved (a Rust keyword or a crate the project needs): choose another name")]
    Reserved(String),
}

/// A checked name: `[a-z][a-z0-9-]*`, not ending with `-`, at most 64.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Name(String);

impl Name {
    pub fn parse(s: &str) -> Result<Name, NameError> {
        let b = s.as_bytes();
        let valid = !b.is_empty()
            && b.len() <= MAX_TEMPLATE_NAME_LEN
            && b[0].is_ascii_lowercase()
            && b[b.len() - 1] != b'-'
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-');
        if !valid {
            return Err(NameError::Invalid(s.to_owned()));
        }
        if RESERVED.contains(&s) {
            return Err(NameError::Reserved(s.to_owned()));
        }
        Ok(Name(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name as a Rust crate sees it (and its `.wasm` file is called).
    pub fn crate_name(&self) -> String {
        self.0.replace('-', "_")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifier_ish_names_only() {
        for ok in ["a", "notes", "my-notes", "x1", "a-b-c9", &"a".repeat(64)] {
            assert_eq!(Name::parse(ok).unwrap().as_str(), ok);
        }
        for bad in [
            "",
            "1abc",
            "-a",
            "a-",
            "My",
            "a_b",
            "a b",
            "a.b",
            "../x",
            "a/b",
            "é",
            "a\n",
            &"a".repeat(65),
        ] {
            assert_eq!(
                Name::parse(bad),
                Err(NameError::Invalid(bad.to_owned())),
                "{bad:?}"
            );
        }
        for reserved in ["fn", "test", "std", "emseepea-guest"] {
            assert!(matches!(Name::parse(reserved), Err(NameError::Reserved(_))));
        }
        assert_eq!(Name::parse("my-notes").unwrap().crate_name(), "my_notes");
    }
}
