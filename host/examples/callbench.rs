//! Quick per-call timing for tuning (not a benchmark of record; see benches/).
//! usage: cargo run --release --example callbench -- GUEST [CALLS] [LIMIT]
use emseepea::config::Config;
use emseepea::runtime::types::{CallContext, Principal};
use emseepea::runtime::{CallerKey, RequestScope, Runtime, SourceSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let guest = args.get(1).cloned().unwrap_or("catalog".into());
    let calls: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let limit: u32 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(50);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("s")).unwrap();
    std::fs::copy(
        root.join(format!("target/guests/{guest}.wasm")),
        dir.path().join(format!("s/{guest}.wasm")),
    )
    .unwrap();
    let manifest = root.join(format!("target/guests/{guest}.toml"));
    if manifest.is_file() {
        std::fs::copy(&manifest, dir.path().join(format!("s/{guest}.toml"))).unwrap();
    }
    let extra = std::env::var("EXTRA").unwrap_or_default();
    std::fs::write(dir.path().join("c.toml"), format!("sources_dir = \"s\"\nstate_dir = \"st\"\ncache_dir = \"{}\"\ncache_key_file = \"{}\"\n{extra}\n[auth]\nmode = \"dev\"\n", root.join("target/bench-cache").display(), root.join("target/bench-cache.key").display())).unwrap();
    let config = Config::load(&dir.path().join("c.toml")).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let runtime = Arc::new(Runtime::new(&config.runtime).unwrap());
    let set = rt.block_on(SourceSet::load(runtime, &config)).unwrap();
    let source = set.sources[0].clone();
    let ctx = || CallContext {
        principal: Some(Principal {
            subject: Some("alice".into()),
            client_id: "c".into(),
            scopes: vec!["catalog:read".into()],
            audience: None,
        }),
        deadline_ms: 0,
    };
    for tasks in [1usize, 2, 4, 64] {
        let start = Instant::now();
        rt.block_on(async {
            let mut hs = Vec::new();
            for _ in 0..tasks {
                let s = source.clone();
                hs.push(tokio::spawn(async move {
                    for _ in 0..calls / tasks {
                        let scope = RequestScope::new(
                            Instant::now() + Duration::from_secs(10),
                            "b",
                            CallerKey::host(),
                        );
                        s.list(None, limit, ctx(), &scope).await.unwrap();
                    }
                }));
            }
            for h in hs {
                h.await.unwrap();
            }
        });
        let el = start.elapsed();
        println!(
            "{guest} list({limit}) x{calls} tasks={tasks}: {:.1} us/call, {:.0} calls/s",
            el.as_secs_f64() * 1e6 / calls as f64 * tasks as f64,
            calls as f64 / el.as_secs_f64()
        );
    }
}
