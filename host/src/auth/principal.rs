//! The caller, as the host knows it after verifying a token.

use crate::limits::MAX_SUBJECT_LEN;

/// Who is calling: built from a validated token, never the token. Holds
/// exactly what guests may see ("The framework exposes only that optional
/// principal.subject, alongside clientId, validated permissions, and the
/// resource audience. It does not forward tokens or other extra claims.").
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Principal {
    pub subject: Option<String>,
    pub client_id: String,
    /// Sorted and unique.
    pub scopes: Vec<String>,
    pub audience: Option<String>,
}

impl Principal {
    pub fn new(
        subject: Option<String>,
        client_id: String,
        mut scopes: Vec<String>,
        audience: Option<String>,
    ) -> Self {
        scopes.sort();
        scopes.dedup();
        Self {
            subject,
            client_id,
            scopes,
            audience,
        }
    }

    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes
            .binary_search_by(|s| s.as_str().cmp(scope))
            .is_ok()
    }

    pub fn has_all(&self, scopes: &[String]) -> bool {
        scopes.iter().all(|s| self.has_scope(s))
    }
}

/// "The subject must be a nonempty string of at most 256 characters without
/// control characters." Characters are counted as the seed's JavaScript
/// framework counts them (UTF-16 code units).
pub fn valid_subject(subject: &str) -> bool {
    !subject.is_empty()
        && subject.encode_utf16().count() <= MAX_SUBJECT_LEN
        && !subject.chars().any(char::is_control)
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subject_rules() {
        assert!(valid_subject("alice"));
        assert!(!valid_subject(""));
        assert!(valid_subject(&"a".repeat(256)));
        assert!(!valid_subject(&"a".repeat(257)));
        assert!(!valid_subject("al\u{0}ice"));
        assert!(!valid_subject("al\nice"));
        assert!(!valid_subject("al\u{7f}ice"));
        assert!(!valid_subject("al\u{85}ice"));
        // 128 astral characters are 256 UTF-16 units; 129 are 258.
        assert!(valid_subject(&"😀".repeat(128)));
        assert!(!valid_subject(&"😀".repeat(129)));
    }

    #[test]
    fn scopes_are_sorted_and_checked() {
        let p = Principal::new(
            None,
            "c".into(),
            vec!["b".into(), "a".into(), "b".into()],
            None,
        );
        assert_eq!(p.scopes, vec!["a", "b"]);
        assert!(p.has_all(&["a".into(), "b".into()]));
        assert!(!p.has_all(&["c".into()]));
    }
}
