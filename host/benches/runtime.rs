//! Criterion benchmarks of the host's hot paths:
//! - `list` of 50 (and 1) from the Rust `catalog`, the JavaScript
//!   `js-catalog` and the Python `python-notes` guests, in a fresh instance
//!   (as the host, or an anonymous caller) and in one caller's kept instance
//!   (as a verified caller's requests are served);
//! - cursor seal + open; validation of a 50-entry page;
//! - token verification per algorithm, and a cached verification.
//!
//! Run with `cargo xtask bench` (it builds the guests first).

use criterion::{Criterion, criterion_group, criterion_main};
use emseepea::auth::Auth;
use emseepea::config::Config;
use emseepea::inventory::cursor::{CursorBinding, CursorKeys, CursorState, Position};
use emseepea::inventory::validate::{UriSet, validate_page};
use emseepea::inventory::{Clock, SystemClock};
use emseepea::runtime::types::{
    CallContext, InventoryEntry, InventoryPage, Principal, ResourceMetadata,
};
use emseepea::runtime::{CallerKey, InstanceKey, RequestScope, Runtime, SourceSet};
use emseepea::uri_template::UriTemplate;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// A config over a directory holding the given guests (copied from target/guests).
fn config_with(guests: &[&str], extra: &str) -> (tempfile::TempDir, Config) {
    let dir = tempfile::tempdir().unwrap();
    let sources = dir.path().join("sources");
    std::fs::create_dir_all(&sources).unwrap();
    for g in guests {
        let from = root().join("target/guests").join(format!("{g}.wasm"));
        assert!(
            from.is_file(),
            "{} missing: run `cargo xtask guests`",
            from.display()
        );
        let stem = Path::new(g)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        std::fs::copy(&from, sources.join(format!("{stem}.wasm"))).unwrap();
        let manifest = root().join("target/guests").join(format!("{g}.toml"));
        if manifest.is_file() {
            std::fs::copy(manifest, sources.join(format!("{stem}.toml"))).unwrap();
        }
    }
    let text = format!(
        "sources_dir = \"sources\"\nstate_dir = \"state\"\ncache_dir = \"{}\"\ncache_key_file = \"{}\"\n{extra}\n[auth]\nmode = \"dev\"\n",
        root().join("target/bench-cache").display(),
        root().join("target/bench-cache.key").display()
    );
    let file = dir.path().join("c.toml");
    std::fs::write(&file, text).unwrap();
    let config = Config::load(&file).unwrap();
    (dir, config)
}

fn context() -> CallContext {
    CallContext {
        principal: Some(Principal {
            subject: Some("alice".into()),
            client_id: "bench".into(),
            scopes: vec!["catalog:read".into(), "notes:read".into()],
            audience: None,
        }),
        deadline_ms: 0,
    }
}

fn notes_db(dir: &Path) -> PathBuf {
    let db = dir.join("notes.sqlite");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        &std::fs::read_to_string(root().join("guest-examples/python-notes/sql/schema.sql"))
            .unwrap(),
    )
    .unwrap();
    for i in 0..200 {
        conn.execute(
            "INSERT INTO notes (id, owner, sort_key, title, body) VALUES (?1, 'alice', ?2, ?1, 'b')",
            rusqlite::params![format!("n{i}"), format!("{i:06}")],
        )
        .unwrap();
    }
    db
}

fn guest_calls(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let db = notes_db(tmp.path());
    let (_dir, config) = config_with(
        &["catalog", "js-catalog", "python-notes"],
        &format!("[databases.notes]\nfile = \"{}\"\n", db.display()),
    );
    let runtime = Arc::new(Runtime::new(&config.runtime).unwrap());
    let set = rt.block_on(SourceSet::load(runtime, &config)).unwrap();
    // A fresh instance per call (the host, anonymous callers), then alice's
    // kept instance (`runtime/warm.rs`), which is how a verified caller's
    // pages are served.
    for (group_name, kept) in [
        ("guest call (fresh instance)", false),
        ("guest call (kept instance)", true),
    ] {
        let mut group = c.benchmark_group(group_name);
        for (name, limit) in [
            ("catalog", 50u32),
            ("catalog", 1),
            ("js-catalog", 50),
            ("python-notes", 50),
        ] {
            let source = set.get(name).unwrap().clone();
            group.bench_function(format!("{name} list({limit})"), |b| {
                b.to_async(&rt).iter(|| {
                    let source = source.clone();
                    async move {
                        let deadline = Instant::now() + Duration::from_secs(10);
                        let scope = if kept {
                            RequestScope::new(deadline, "bench", CallerKey::new("alice"))
                                .reusing(Some(InstanceKey::new("alice")))
                        } else {
                            RequestScope::new(deadline, "bench", CallerKey::host())
                        };
                        let page = source.list(None, limit, context(), &scope).await.unwrap();
                        assert_eq!(page.len(), limit as usize);
                    }
                })
            });
            eprintln!(
                "{name} list({limit}): fuel {} / memory {} KiB per call",
                source
                    .last_fuel_used
                    .load(std::sync::atomic::Ordering::Relaxed),
                source
                    .last_memory_bytes
                    .load(std::sync::atomic::Ordering::Relaxed)
                    / 1024
            );
        }
        group.finish();
    }

    // Throughput on every core: many calls in flight at once.
    let source = set.get("catalog").unwrap().clone();
    let calls = 20_000;
    let started = Instant::now();
    rt.block_on(async {
        let mut tasks = Vec::new();
        for _ in 0..64 {
            let source = source.clone();
            tasks.push(tokio::spawn(async move {
                for _ in 0..calls / 64 {
                    let scope = RequestScope::new(
                        Instant::now() + Duration::from_secs(10),
                        "bench",
                        CallerKey::host(),
                    );
                    source.list(None, 50, context(), &scope).await.unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    let per_s = (calls / 64 * 64) as f64 / started.elapsed().as_secs_f64();
    eprintln!(
        "catalog list(50), 64 concurrent tasks on {} cores: {per_s:.0} calls/s",
        std::thread::available_parallelism().unwrap()
    );
}

fn stops(c: &mut Criterion) {
    let _ = c;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (_dir, config) = config_with(&["hostile/hostile"], "");
    let sources = _dir.path().join("sources");
    std::fs::write(
        sources.join("hostile.toml"),
        "[budget]\nfuel = 1_000_000_000_000\nmax_duration_ms = 60000\n[config]\nmode = \"loop\"\n",
    )
    .unwrap();
    let runtime = Arc::new(Runtime::new(&config.runtime).unwrap());
    let set = rt.block_on(SourceSet::load(runtime, &config)).unwrap();
    let source = set.sources[0].clone();
    let mut late_deadline = Vec::new();
    let mut late_drop = Vec::new();
    for _ in 0..50 {
        // Deadline: how long after the deadline the call returns.
        let deadline = Instant::now() + Duration::from_millis(20);
        let scope = RequestScope::new(deadline, "bench", CallerKey::host());
        let r = rt.block_on(source.list(None, 1, context(), &scope));
        assert!(r.is_err());
        late_deadline.push(deadline.elapsed());
        // Drop: how long after abort() the task (and its guest) is gone.
        let s2 = source.clone();
        let task = rt.spawn(async move {
            let scope = RequestScope::new(
                Instant::now() + Duration::from_secs(60),
                "bench",
                CallerKey::host(),
            );
            let _ = s2.list(None, 1, context(), &scope).await;
        });
        std::thread::sleep(Duration::from_millis(10));
        let t = Instant::now();
        task.abort();
        let _ = rt.block_on(task);
        late_drop.push(t.elapsed());
    }
    for (what, mut v) in [
        ("after its deadline", late_deadline),
        ("after its future is dropped", late_drop),
    ] {
        v.sort();
        eprintln!(
            "looping guest stopped {what}: median {:?}, p99 {:?}, max {:?}",
            v[v.len() / 2],
            v[v.len() * 99 / 100],
            v[v.len() - 1]
        );
    }
}

fn cursors_and_validation(c: &mut Criterion) {
    let keys = CursorKeys::new(Arc::new(SystemClock));
    let binding = CursorBinding::new(
        Some("app"),
        Some("alice"),
        &["documents:read".into()],
        Some("https://mcp.example/mcp"),
        &[7; 32],
    );
    let state = CursorState {
        started_ms: SystemClock.now_ms(),
        position: Position::Source {
            index: 1,
            after: Some("2026-03-02T08:15:00Z#a-004".into()),
        },
    };
    c.bench_function("cursor seal + open", |b| {
        b.iter(|| {
            let sealed = keys.seal(&state, &binding);
            keys.open(&sealed, &binding).unwrap()
        })
    });
    let template = UriTemplate::parse("catalog://catalog/items/{id}").unwrap();
    let page: emseepea::runtime::GuestPage = InventoryPage {
        entries: (1..=50)
            .map(|n| InventoryEntry {
                key: format!("{n:010}"),
                resource: ResourceMetadata {
                    uri: format!("catalog://catalog/items/{n:010}"),
                    name: format!("Item {n}"),
                    mime_type: Some("text/plain".into()),
                },
            })
            .collect(),
        has_more: true,
    }
    .into();
    c.bench_function("validate a 50-entry page", |b| {
        b.iter(|| {
            let mut seen = UriSet::with_capacity(50);
            validate_page(&page, 50, None, &template, &mut seen).unwrap();
        })
    });
}

fn tokens(c: &mut Criterion) {
    use jsonwebtoken::{Algorithm, EncodingKey, Header};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let keys = root().join("tests/fixtures/keys");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = serde_json::json!({"iss":"https://issuer.test","aud":"https://mcp.test/mcp","sub":"alice","client_id":"app","scope":"a b","exp":now + 3600});
    let mut group = c.benchmark_group("token verification");
    for cached in [false, true] {
        let (_dir, config) = config_with(&[], "");
        let text = std::fs::read_to_string(&config.file).unwrap().replace(
            "[auth]\nmode = \"dev\"\n",
            &format!(
                "[auth]\nmode = \"jwt\"\nresource = \"https://mcp.test/mcp\"\nauthorization_servers = [\"https://issuer.test\"]\ncache_entries = {}\n[auth.jwt]\nissuer = \"https://issuer.test\"\njwks_file = \"{}\"\n",
                if cached { 1000 } else { 0 },
                keys.join("jwks.json").display()
            ),
        );
        std::fs::write(&config.file, text).unwrap();
        let config = Config::load(&config.file).unwrap();
        let auth = rt
            .block_on(Auth::new(
                &config.auth,
                &config.state_dir,
                "https://mcp.test/mcp".into(),
                vec![],
            ))
            .unwrap();
        for (alg, kid, file) in [
            (Algorithm::RS256, "rsa-1", "rsa.pem"),
            (Algorithm::ES256, "ec-1", "ec.pem"),
            (Algorithm::EdDSA, "ed-1", "ed25519.pem"),
        ] {
            if cached && alg != Algorithm::RS256 {
                continue;
            }
            let pem = std::fs::read(keys.join(file)).unwrap();
            let key = match alg {
                Algorithm::RS256 => EncodingKey::from_rsa_pem(&pem),
                Algorithm::ES256 => EncodingKey::from_ec_pem(&pem),
                _ => EncodingKey::from_ed_pem(&pem),
            }
            .unwrap();
            let mut header = Header::new(alg);
            header.kid = Some(kid.into());
            let token = jsonwebtoken::encode(&header, &claims, &key).unwrap();
            let mut headers = http::HeaderMap::new();
            headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
            let name = if cached {
                "cached (any algorithm)".to_string()
            } else {
                format!("{alg:?}")
            };
            group.bench_function(name, |b| {
                b.to_async(&rt).iter(|| async {
                    auth.authenticate(&headers, None, None)
                        .await
                        .unwrap()
                        .unwrap()
                })
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(4)).warm_up_time(Duration::from_secs(1));
    targets = guest_calls, stops, cursors_and_validation, tokens
}
criterion_main!(benches);
