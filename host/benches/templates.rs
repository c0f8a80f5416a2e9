//! Criterion benchmarks of URI-template work the host does outside any
//! guest budget: matching one URI (a real template, the largest template
//! startup accepts, against 2,048-character and 300 KB URIs) and the startup
//! overlap check of two templates.
//!
//! Run with `cargo bench -p emseepea --bench templates` (no guests needed).

use criterion::{Criterion, criterion_group, criterion_main};
use emseepea::config::{MAX_TEMPLATE_EXPRESSIONS, MAX_TEMPLATE_LEN};
use emseepea::uri_template::UriTemplate;
use std::hint::black_box;
use std::time::Duration;

/// The largest template startup accepts, shaped so that every expression's
/// states stay live on a run of `a` (adjacent reserved expressions) and its
/// literal tail never matches.
fn worst_template() -> UriTemplate {
    let mut t = "x://".to_string();
    for i in 0..MAX_TEMPLATE_EXPRESSIONS {
        t.push_str(&format!("{{+v{i}}}"));
    }
    t.push_str(&"/end".repeat((MAX_TEMPLATE_LEN - t.len()) / 4));
    UriTemplate::parse(&t).unwrap()
}

fn matching(c: &mut Criterion) {
    let real = UriTemplate::parse("learn://documents/{id}").unwrap();
    let worst = worst_template();
    let listed = format!("learn://documents/{}", "i".repeat(2048 - 18));
    let long_a = |len: usize| format!("x://{}", "a".repeat(len - 4));
    let (a_2048, a_300k) = (long_a(2048), long_a(300_000));
    let mut group = c.benchmark_group("uri template match");
    group.bench_function("learn://documents/{id} vs 2,048 chars", |b| {
        b.iter(|| black_box(real.matches(black_box(&listed))))
    });
    group.bench_function("learn://documents/{id} vs 50 chars", |b| {
        b.iter(|| {
            black_box(real.matches(black_box("learn://documents/0123456789abcdef0123456789")))
        })
    });
    group.bench_function("512-byte, 16-expression template vs 2,048 chars", |b| {
        b.iter(|| black_box(worst.matches(black_box(&a_2048))))
    });
    group.bench_function("512-byte, 16-expression template vs 300 KB", |b| {
        b.iter(|| black_box(worst.matches(black_box(&a_300k))))
    });
    group.finish();
}

fn overlap(c: &mut Criterion) {
    let a = UriTemplate::parse("hostile://{x}/{id}").unwrap();
    let b = UriTemplate::parse("hostile://bbb/{id}").unwrap();
    let docs = UriTemplate::parse("learn://documents/{id}").unwrap();
    let notes = UriTemplate::parse("notes://notes/{id}").unwrap();
    let worst = worst_template();
    let mut group = c.benchmark_group("uri template overlap");
    group.bench_function("hostile://{x}/{id} vs hostile://bbb/{id}", |bench| {
        bench.iter(|| black_box(a.overlap(black_box(&b))))
    });
    group.bench_function("learn://documents/{id} vs notes://notes/{id}", |bench| {
        bench.iter(|| black_box(docs.overlap(black_box(&notes))))
    });
    group.bench_function("largest template vs itself", |bench| {
        bench.iter(|| black_box(worst.overlap(black_box(&worst))))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = matching, overlap
}
criterion_main!(benches);
