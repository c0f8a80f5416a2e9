//! Property tests of validating what a guest's `describe()` returned
//! (`prop_*`, see crate::fuzz): a hostile guest chooses every byte of it.

use super::*;
use crate::fuzz::{text, time_is_up};
use proptest::prelude::*;

fn template() -> impl Strategy<Value = wit::Template> {
    let name = prop_oneof![3 => "[a-z0-9_-]{1,64}", 1 => "[a-z0-9_-]{65,70}", 1 => text()];
    let uri = prop_oneof![
        3 => prop_oneof![Just("learn://documents/{id}"), Just("x://{a}/{b}"), Just("x://fixed"), Just("x://{"), Just("")]
            .prop_map(String::from),
        1 => "[a-z:/{}+#.?&=]{0,30}",
        1 => (505usize..520).prop_map(|n| format!("x://{{id}}{}", "a".repeat(n - 7))),
    ];
    let long = |max: usize| {
        proptest::option::of(prop_oneof![
            3 => text(),
            1 => (max - 2..max + 3, any::<bool>()).prop_map(|(n, astral)| if astral { "😀".repeat(n / 2) } else { "é".repeat(n) }),
        ])
    };
    let scope = prop_oneof![3 => "[!-~]{1,16}", 1 => text(), 1 => "[a]{127,129}"];
    (
        (
            name,
            uri,
            long(MAX_TITLE_LEN),
            long(MAX_DESCRIPTION_LEN),
            long(MAX_MIME_TYPE_LEN),
        ),
        (
            any::<bool>(),
            proptest::collection::vec(scope, 0..4),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (name, uri_template, title, description, mime_type),
                (public, required_scopes, discoverable),
            )| {
                wit::Template {
                    name,
                    uri_template,
                    title,
                    description,
                    mime_type,
                    access: if public {
                        wit::Access::Public
                    } else {
                        wit::Access::Protected
                    },
                    required_scopes,
                    discoverable,
                }
            },
        )
}

/// The rules, written out again from the seed and the WIT docs.
fn acceptable(t: &wit::Template, lists: bool) -> bool {
    let units = |s: &Option<String>| s.as_ref().map_or(0, |s| s.encode_utf16().count());
    let name_ok = (1..=MAX_NAME).contains(&t.name.len())
        && t.name
            .chars()
            .all(|c| matches!(c, 'a'..='z' | '0'..='9' | '-' | '_'));
    // Parsing enforces the template bounds (length, expressions).
    let uri_ok = t.uri_template.len() <= crate::limits::MAX_TEMPLATE_LEN
        && UriTemplate::parse(&t.uri_template).is_ok_and(|u| u.expression_count() > 0);
    let scopes_ok = t.required_scopes.len() <= MAX_REQUIRED_SCOPES
        && t.required_scopes.iter().all(|s| {
            (1..=MAX_SCOPE_LEN).contains(&s.len())
                && s.chars()
                    .all(|c| matches!(c, '!'..='~') && c != '"' && c != '\\')
        });
    let public = matches!(t.access, wit::Access::Public);
    name_ok
        && uri_ok
        && units(&t.title) <= MAX_TITLE_LEN
        && units(&t.description) <= MAX_DESCRIPTION_LEN
        && units(&t.mime_type) <= MAX_MIME_TYPE_LEN
        && scopes_ok
        && (!public || t.required_scopes.is_empty())
        && !(lists && (public || !t.discoverable))
}

proptest! {
    /// A definition is accepted exactly when it keeps every rule, and then
    /// carries what the guest said with its scopes sorted and unique.
    #[test]
    fn prop_a_definition_is_accepted_exactly_when_it_keeps_the_rules(t in template(), lists in any::<bool>()) {
        if time_is_up() { return Ok(()); }
        let expected = acceptable(&t, lists);
        match SourceDefinition::validate(t.clone(), lists) {
            Ok(d) => {
                prop_assert!(expected, "accepted {:?}", t);
                prop_assert_eq!(&d.name, &t.name);
                let mut scopes = t.required_scopes.clone();
                scopes.sort();
                scopes.dedup();
                prop_assert_eq!(d.required_scopes, scopes);
                prop_assert_eq!(d.discoverable, t.discoverable);
            }
            Err(e) => {
                prop_assert!(!expected, "refused {:?}: {}", t, e);
                prop_assert!(!e.to_string().is_empty());
            }
        }
    }
}
