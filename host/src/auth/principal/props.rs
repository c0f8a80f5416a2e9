//! Property tests of subject validation (`prop_*`, see crate::fuzz).

use super::*;
use crate::fuzz::{text, time_is_up};
use proptest::prelude::*;

/// The seed's rule, written out independently: 1..=256 characters as
/// JavaScript counts them (UTF-16 code units), none of them a control
/// character (Unicode general category Cc: U+0000–U+001F, U+007F–U+009F).
fn seed_rule(s: &str) -> bool {
    let units: usize = s
        .chars()
        .map(|c| if (c as u32) > 0xFFFF { 2 } else { 1 })
        .sum();
    let control = s
        .chars()
        .any(|c| matches!(c as u32, 0x00..=0x1F | 0x7F..=0x9F));
    (1..=256).contains(&units) && !control
}

proptest! {
    #[test]
    fn prop_subject_validation_is_the_seed_rule(
        s in prop_oneof![
            text(),
            "\\PC{250,260}",
            "[a😀]{120,260}",
            (".{0,255}", "[\\x00-\\x1f\\x7f-\\x9f\u{a0}\u{2028}\u{feff}]", ".{0,255}")
                .prop_map(|(a, c, b)| format!("{a}{c}{b}")),
        ],
    ) {
        if time_is_up() { return Ok(()); }
        prop_assert_eq!(valid_subject(&s), seed_rule(&s), "{:?}", s);
    }
}
