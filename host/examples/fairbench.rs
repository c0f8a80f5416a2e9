//! Fairness benchmark behind BENCHMARKS.md: bob's listing latency alone,
//! then while another caller (alice) keeps 200 slow reads in flight.
//!
//! usage: cargo build --release --bin emseepea && cargo xtask guests &&
//!        cargo run --release --example fairbench
//! env: LISTINGS (bob's requests per phase, default 300), DELAY_MS (alice's
//! reads, default 2000), HEAVY (alice's parallel reads, default 200),
//! MODE (`slow`: alice's reads wait in a host call; `spin`: they burn CPU
//! until their `DELAY_MS` deadline), GUEST_THREADS (`[runtime]
//! guest_threads`, default: the server's), EMSEEPEA_BIN (the server binary,
//! default target/release/emseepea)

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

mod common;
use common::{Server, connect, env_or, release_bin as bin, root};

fn start(delay_ms: u64, mode: &str, runtime: &str) -> Server {
    let dir = tempfile::tempdir().unwrap();
    // A spinning read is stopped at its deadline; a slow one answers first.
    let max_ms = if mode == "spin" { delay_ms } else { 30_000 };
    let slow = format!(
        "[budget]\nmax_duration_ms = {max_ms}\n[config]\nname = \"slow\"\nmode = \"{mode}\"\ndelay_ms = \"{delay_ms}\"\n"
    );
    common::write_sources(
        &dir.path().join("sources"),
        &[
            ("catalog", "catalog", "[config]\nitems = \"1000\"\n"),
            ("slow", "hostile/hostile", &slow),
        ],
    );
    let config = dir.path().join("c.toml");
    std::fs::write(
        &config,
        format!(
            "sources_dir = \"sources\"\nstate_dir = \"state\"\ncache_dir = \"{}\"\n[http]\nmax_connections_per_peer = 512\n[auth]\nmode = \"dev\"\n{runtime}",
            root().join("target/bench-cache").display()
        ),
    )
    .unwrap();
    Server::spawn(bin(), dir, config, "warn")
}

fn token(s: &Server, sub: &str) -> String {
    s.token(sub, "hostile:read catalog:read")
}

/// A 2026-07-28 request: headers and body.
struct Req {
    headers: Vec<(&'static str, String)>,
    body: Bytes,
}

fn request(method: &str, mut params: Value, token: &str) -> Req {
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}});
    let mut headers = vec![
        ("content-type", "application/json".to_owned()),
        ("accept", "application/json, text/event-stream".to_owned()),
        ("mcp-protocol-version", "2026-07-28".to_owned()),
        ("mcp-method", method.to_owned()),
        ("authorization", format!("Bearer {token}")),
    ];
    if let Some(uri) = params.get("uri").and_then(Value::as_str) {
        headers.push(("mcp-name", uri.to_owned()));
    }
    let body = json!({"jsonrpc":"2.0","id":1,"method":method,"params":params});
    Req {
        headers,
        body: Bytes::from(serde_json::to_vec(&body).unwrap()),
    }
}

/// Send `req` once; the status.
async fn send(sender: &mut http1::SendRequest<Full<Bytes>>, authority: &str, req: &Req) -> u16 {
    let mut b = hyper::Request::post("/mcp").header("host", authority);
    for (k, v) in &req.headers {
        b = b.header(*k, v);
    }
    sender.ready().await.unwrap();
    let resp = sender
        .send_request(b.body(Full::new(req.body.clone())).unwrap())
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let _ = resp.into_body().collect().await.unwrap();
    status
}

/// Bob's listings, one after another on one keep-alive connection: sorted
/// latencies.
async fn bob(authority: &str, token: &str, n: u64) -> Vec<Duration> {
    let req = request("resources/list", json!({}), token);
    let mut sender = connect(authority).await;
    let mut latencies = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        assert_eq!(send(&mut sender, authority, &req).await, 200);
        latencies.push(t.elapsed());
    }
    latencies.sort();
    latencies
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i].as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let listings = env_or("LISTINGS", 300);
    let delay_ms = env_or("DELAY_MS", 2000);
    let heavy: usize = env_or("HEAVY", 200);
    let mode = std::env::var("MODE").unwrap_or_else(|_| "slow".into());
    let runtime = std::env::var("GUEST_THREADS")
        .map(|n| format!("[runtime]\nguest_threads = {n}\n"))
        .unwrap_or_default();
    let s = start(delay_ms, &mode, &runtime);
    let authority = s.authority();
    let (alice, bob_token) = (token(&s, "alice"), token(&s, "bob"));
    // Warm up (first calls instantiate the pool's slots).
    bob(&authority, &bob_token, 20).await;
    let alone = bob(&authority, &bob_token, listings).await;

    let stop = Arc::new(AtomicBool::new(false));
    let (served, refused) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut tasks = Vec::new();
    for _ in 0..heavy {
        let (authority, alice) = (authority.clone(), alice.clone());
        let (stop, served, refused) = (stop.clone(), served.clone(), refused.clone());
        tasks.push(tokio::spawn(async move {
            let req = request("resources/read", json!({"uri": "hostile://slow/1"}), &alice);
            let mut sender = connect(&authority).await;
            while !stop.load(Ordering::Relaxed) {
                match send(&mut sender, &authority, &req).await {
                    200 => served.fetch_add(1, Ordering::Relaxed),
                    429 => {
                        refused.fetch_add(1, Ordering::Relaxed);
                        // What a client told `Retry-After: 1` does.
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        0
                    }
                    other => panic!("alice got {other}"),
                };
            }
        }));
    }
    // Let alice's reads fill her share first.
    tokio::time::sleep(Duration::from_millis(delay_ms / 2)).await;
    let loaded = bob(&authority, &bob_token, listings).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    println!("| bob's `resources/list` | p50 ms | p99 ms | max ms |");
    println!("|---|---|---|---|");
    let busy = format!("while alice runs {heavy} parallel {delay_ms} ms {mode} reads");
    for (name, l) in [("alone", &alone), (busy.as_str(), &loaded)] {
        println!(
            "| {name} | {:.2} | {:.2} | {:.2} |",
            pct(l, 0.5),
            pct(l, 0.99),
            pct(l, 1.0)
        );
    }
    println!(
        "\nalice: {} reads answered (a spinning read: with its deadline error), {} refused with 429; p99 ratio loaded/alone: {:.2}",
        served.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed),
        pct(&loaded, 0.99) / pct(&alone, 0.99)
    );
}
