//! What the property tests share: the naming rule, the time cap of
//! `cargo xtask fuzz`, and strategies for hostile input.
//!
//! Every property test's name starts with `prop_` so that `cargo xtask fuzz`
//! can pick them out (`nextest -E 'test(/prop_/)'`) and run them with many
//! more cases. By default a property runs proptest's 256 cases (or
//! `PROPTEST_CASES`).

use proptest::prelude::*;
use serde_json::{Map, Value};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Seconds each property may spend exploring before its remaining cases
/// pass without work; set only by `cargo xtask fuzz`, so CI always runs
/// every case. nextest runs each test in its own process, so the clock
/// starts at a property's first case.
pub const SECONDS_VAR: &str = "EMSEEPEA_FUZZ_SECONDS";

/// Whether this property's `cargo xtask fuzz` time is used up.
pub fn time_is_up() -> bool {
    static CAP: OnceLock<Option<(Instant, Duration)>> = OnceLock::new();
    let cap = CAP.get_or_init(|| {
        let seconds: u64 = std::env::var(SECONDS_VAR).ok()?.parse().ok()?;
        Some((Instant::now(), Duration::from_secs(seconds)))
    });
    cap.is_some_and(|(start, cap)| start.elapsed() >= cap)
}

/// Any JSON value, nested up to `depth` levels, with strings and numbers
/// that tend to sit on edges (empty, huge, negative, fractional, unicode).
pub fn json(depth: u32) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(depth, 64, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            proptest::collection::btree_map(text(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Strings a hostile caller would try: empty, plain, control characters,
/// astral characters, around 256 UTF-16 units, and anything at all.
pub fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-z0-9:/._-]{1,12}",
        "\\PC{0,40}",
        ".{0,40}",
        "[\\x00-\\x1f\\x7f-\\x9f a]{1,8}",
        (0usize..3, 250usize..262).prop_map(|(kind, n)| match kind {
            0 => "a".repeat(n),
            1 => "😀".repeat(n / 2),
            _ => format!("{}\u{85}", "a".repeat(n - 1)),
        }),
    ]
}

/// A claim-like value: mostly a string, else a number near today's Unix
/// time, else any JSON at all.
pub fn claim() -> impl Strategy<Value = Value> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    prop_oneof![
        3 => text().prop_map(Value::String),
        1 => (-100_000i64..100_000).prop_map(move |d| Value::from(now + d)),
        1 => (-100_000i64..100_000).prop_map(move |d| Value::from((now + d) as f64 + 0.5)),
        2 => json(3),
    ]
}

/// A JSON object holding each of `keys` with probability `presence` (with
/// a [`claim`] value), plus arbitrary other members.
pub fn object_with(
    keys: &'static [&'static str],
    presence: f64,
) -> impl Strategy<Value = Map<String, Value>> {
    let known =
        proptest::collection::vec(proptest::option::weighted(presence, claim()), keys.len());
    let extra = proptest::collection::btree_map(text(), json(2), 0..3);
    (known, extra).prop_map(move |(known, extra)| {
        let mut m: Map<String, Value> = extra.into_iter().collect();
        for (k, v) in keys.iter().zip(known) {
            if let Some(v) = v {
                m.insert((*k).to_owned(), v);
            }
        }
        m
    })
}

/// A JSON value nested `depth` arrays deep (serde_json refuses more than 128).
pub fn nested(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}
