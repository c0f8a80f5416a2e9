//! The HTTP load driver behind BENCHMARKS.md: runs the release server and a
//! bare hyper server in the same script and drives both over HTTP/1.1
//! keep-alive connections.
//!
//! usage: cargo xtask load   (builds the guests and the release binary first)
//! env: SECONDS (per scenario, default 8), CONNECTIONS (default 64);
//! ONLY=catalog (the catalog page alone), ONLY=telemetry (the catalog page
//! with telemetry off, metrics on, and traces on to a local receiver that
//! discards, interleaved ROUNDS times, default 3); EMSEEPEA_BIN (another
//! server binary than target/release/emseepea, e.g. a debug build)

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

mod common;
use common::{Server, authority, connect, release_bin as bin, root};

/// Write a sources dir and config; `sources` are (stem, guest, manifest).
fn prepare(
    sources: &[(&str, &str, &str)],
    config: &str,
    cache: &Path,
) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    common::write_sources(&dir.path().join("sources"), sources);
    let file = dir.path().join("c.toml");
    std::fs::write(
        &file,
        format!(
            "sources_dir = \"sources\"\nstate_dir = \"state\"\ncache_dir = \"{}\"\ncache_key_file = \"{}.key\"\n{config}",
            cache.display(),
            cache.display()
        ),
    )
    .unwrap();
    (dir, file)
}

fn start(sources: &[(&str, &str, &str)], config: &str) -> Server {
    let (dir, file) = prepare(sources, config, &root().join("target/bench-cache"));
    Server::spawn(bin(), dir, file, "warn")
}

fn token(s: &Server, scopes: &str) -> String {
    s.token("alice", scopes)
}

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}})
}

/// One request to send repeatedly: headers and body.
#[derive(Clone)]
struct Req {
    headers: Vec<(String, String)>,
    body: Bytes,
}

fn modern_req(method: &str, params: Value, token: Option<&str>) -> Req {
    let mut p = params;
    p["_meta"] = meta();
    let mut headers = vec![
        ("content-type".into(), "application/json".into()),
        (
            "accept".into(),
            "application/json, text/event-stream".into(),
        ),
        ("mcp-protocol-version".into(), "2026-07-28".into()),
        ("mcp-method".into(), method.into()),
    ];
    if let Some(t) = token {
        headers.push(("authorization".into(), format!("Bearer {t}")));
    }
    Req {
        headers,
        body: Bytes::from(
            serde_json::to_vec(&json!({"jsonrpc":"2.0","id":1,"method":method,"params":p}))
                .unwrap(),
        ),
    }
}

async fn send(sender: &mut http1::SendRequest<Full<Bytes>>, authority: &str, req: &Req) -> Bytes {
    let mut b = hyper::Request::post("/mcp").header("host", authority);
    for (k, v) in &req.headers {
        b = b.header(k, v);
    }
    sender.ready().await.unwrap();
    let resp = sender
        .send_request(b.body(Full::new(req.body.clone())).unwrap())
        .await
        .unwrap();
    assert!(resp.status().is_success(), "status {}", resp.status());
    resp.into_body().collect().await.unwrap().to_bytes()
}

/// `connections` keep-alive connections sending `req` for `seconds`.
async fn load(name: &str, url: &str, req: Req, connections: usize, seconds: u64) -> f64 {
    let authority = authority(url);
    let stop = Instant::now() + Duration::from_secs(seconds);
    let req = Arc::new(req);
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let authority = authority.clone();
        let req = req.clone();
        tasks.push(tokio::spawn(async move {
            let mut sender = connect(&authority).await;
            let mut lat = Vec::new();
            while Instant::now() < stop {
                let t = Instant::now();
                send(&mut sender, &authority, &req).await;
                lat.push(t.elapsed().as_micros() as u32);
            }
            lat
        }));
    }
    let started = Instant::now();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort_unstable();
    let rps = all.len() as f64 / elapsed;
    println!(
        "| {name} | {rps:.0} | {:.2} | {:.2} |",
        all[all.len() / 2] as f64 / 1000.0,
        all[all.len() * 99 / 100] as f64 / 1000.0
    );
    rps
}

/// The bare baseline: hyper answering every request with the same 6 KiB JSON.
async fn bare_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let body = Bytes::from(format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"pad\":\"{}\"}}}}",
        "x".repeat(6 * 1024 - 40)
    ));
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let _ = stream.set_nodelay(true);
            let body = body.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let body = body.clone();
                        async move {
                            let _ = req.into_body().collect().await;
                            let mut r = hyper::Response::new(Full::new(body));
                            r.headers_mut()
                                .insert("content-type", "application/json".parse().unwrap());
                            Ok::<_, std::convert::Infallible>(r)
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    url
}

/// An OTLP/HTTP receiver that accepts every export and keeps nothing (an
/// empty body is an empty `ExportTraceServiceResponse`).
async fn discarding_receiver() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(
                    |req: hyper::Request<hyper::body::Incoming>| async move {
                        let _ = req.into_body().collect().await;
                        let mut r = hyper::Response::new(Full::new(Bytes::new()));
                        r.headers_mut()
                            .insert("content-type", "application/x-protobuf".parse().unwrap());
                        Ok::<_, std::convert::Infallible>(r)
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    url
}

/// CPU seconds (user + system) the process `pid` has used so far.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may contain spaces): utime is
    // the 12th, stime the 13th, in clock ticks.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
}

/// The authenticated catalog page with telemetry off, with the admin
/// listener (metrics) on, and with traces on too; the three servers run
/// side by side and the rows are interleaved so that a busy moment of the
/// machine does not fall on one configuration only.
async fn telemetry(connections: usize, seconds: u64) {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let receiver = discarding_receiver().await;
    let auth = "[auth]\nmode = \"dev\"\n";
    let admin = "[admin]\nlisten = \"127.0.0.1:0\"\n";
    let configs = [
        ("all off".to_owned(), auth.to_owned()),
        (
            "metrics on, traces off".to_owned(),
            format!("{admin}{auth}"),
        ),
        (
            "metrics on, traces on (every request sampled)".to_owned(),
            format!("{admin}[traces]\nendpoint = \"{receiver}\"\n{auth}"),
        ),
    ];
    let servers: Vec<(String, Server, String)> = configs
        .into_iter()
        .map(|(name, config)| {
            let s = start(
                &[("catalog", "catalog", "[config]\nitems = \"10000\"\n")],
                &config,
            );
            let t = token(&s, "catalog:read");
            (name, s, t)
        })
        .collect();
    println!("## Telemetry cost, {connections} keep-alive connections, {seconds} s per row\n");
    println!("| scenario | requests/s | p50 ms | p99 ms |\n|---|---|---|---|");
    let mut rates = vec![Vec::new(); servers.len()];
    let mut cpu = vec![Vec::new(); servers.len()];
    for _ in 0..rounds {
        for (i, (name, s, t)) in servers.iter().enumerate() {
            let req = modern_req("resources/list", json!({}), Some(t));
            let (before, started) = (cpu_seconds(s.child.id()), Instant::now());
            let rps = load(name, &s.url, req, connections, seconds).await;
            let used = cpu_seconds(s.child.id()) - before;
            rates[i].push(rps);
            // The server's CPU per request: what a busy machine disturbs least.
            cpu[i].push(used / (rps * started.elapsed().as_secs_f64()) * 1e6);
        }
    }
    println!(
        "\n| scenario | median requests/s | vs all off | median server CPU µs/request | vs all off |\n|---|---|---|---|---|"
    );
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let base = median(&mut rates[0].clone());
    let base_cpu = median(&mut cpu[0].clone());
    for (((name, _, _), r), c) in servers.iter().zip(rates.iter_mut()).zip(cpu.iter_mut()) {
        let (m, mc) = (median(r), median(c));
        println!(
            "| {name} | {m:.0} | {:+.1} % | {mc:.0} | {:+.1} % |",
            (m / base - 1.0) * 100.0,
            (mc / base_cpu - 1.0) * 100.0
        );
    }
}

/// Page through the whole listing with one client; (pages, entries, seconds).
async fn traverse(url: &str, token: &str) -> (usize, usize, f64) {
    let authority = authority(url);
    let mut sender = connect(&authority).await;
    let started = Instant::now();
    let (mut pages, mut entries, mut cursor) = (0, 0, None::<String>);
    loop {
        let params = cursor
            .as_ref()
            .map_or(json!({}), |c| json!({ "cursor": c }));
        let body = send(
            &mut sender,
            &authority,
            &modern_req("resources/list", params, Some(token)),
        )
        .await;
        let v: Value = serde_json::from_slice(&body).unwrap();
        pages += 1;
        entries += v["result"]["resources"].as_array().unwrap().len();
        match v["result"]["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return (pages, entries, started.elapsed().as_secs_f64()),
        }
    }
}

/// Median wall time of `emseepea check` over `runs`.
fn check_time(config: &Path, runs: usize, clear: Option<&Path>) -> Duration {
    let mut times = Vec::new();
    for _ in 0..runs {
        if let Some(c) = clear {
            let _ = std::fs::remove_dir_all(c);
        }
        let t = Instant::now();
        let st = Command::new(bin())
            .args(["check", "--config"])
            .arg(config)
            .env("EMSEEPEA_LOG", "error")
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
        times.push(t.elapsed());
    }
    times.sort();
    times[times.len() / 2]
}

#[tokio::main]
async fn main() {
    let seconds: u64 = common::env_or("SECONDS", 8);
    let connections: usize = common::env_or("CONNECTIONS", 64);
    let auth = "[auth]\nmode = \"dev\"\n";
    let mut statics50 = String::new();
    for i in 0..50 {
        statics50.push_str(&format!("[[resources]]\nuri = \"demo://static/{i:03}\"\nname = \"Static {i}\"\nmimeType = \"text/plain\"\ntext = \"x\"\n"));
    }

    if std::env::var("ONLY").as_deref() == Ok("telemetry") {
        telemetry(connections, seconds).await;
        return;
    }
    if std::env::var("ONLY").as_deref() == Ok("catalog") {
        let catalog = start(
            &[("catalog", "catalog", "[config]\nitems = \"10000\"\n")],
            auth,
        );
        let t = token(&catalog, "catalog:read");
        eprintln!("server pid {}", catalog.child.id());
        load(
            "catalog page",
            &catalog.url,
            modern_req("resources/list", json!({}), Some(&t)),
            connections,
            seconds,
        )
        .await;
        return;
    }
    println!("## HTTP, {connections} keep-alive connections, {seconds} s per row\n");
    println!("| scenario | requests/s | p50 ms | p99 ms |\n|---|---|---|---|");
    let bare = bare_server().await;
    let bare_rps = load(
        "bare hyper, fixed 6 KiB JSON",
        &bare,
        modern_req("x", json!({}), None),
        connections,
        seconds,
    )
    .await;
    let plain = start(&[], &statics50);
    let session = {
        let authority = plain.authority();
        let stream = TcpStream::connect(&authority).await.unwrap();
        let (mut sender, conn) = http1::handshake(TokioIo::new(stream)).await.unwrap();
        tokio::spawn(conn);
        let body = serde_json::to_vec(&json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"load","version":"1"}}})).unwrap();
        let resp = sender
            .send_request(
                hyper::Request::post("/mcp")
                    .header("host", &authority)
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(body)))
                    .unwrap(),
            )
            .await
            .unwrap();
        resp.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned()
    };
    let ping = Req {
        headers: vec![
            ("content-type".into(), "application/json".into()),
            ("mcp-session-id".into(), session),
            ("mcp-protocol-version".into(), "2025-11-25".into()),
        ],
        body: Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
    };
    load(
        "`ping` (2025-11-25 session)",
        &plain.url,
        ping,
        connections,
        seconds,
    )
    .await;
    load(
        "`resources/list`, 50 static resources, no auth",
        &plain.url,
        modern_req("resources/list", json!({}), None),
        connections,
        seconds,
    )
    .await;
    drop(plain);
    let with_auth = start(&[], &format!("{statics50}{auth}"));
    let t = token(&with_auth, "x");
    load(
        "`resources/list`, 50 static resources, bearer token (dev, cached)",
        &with_auth.url,
        modern_req("resources/list", json!({}), Some(&t)),
        connections,
        seconds,
    )
    .await;
    drop(with_auth);
    let catalog = start(
        &[("catalog", "catalog", "[config]\nitems = \"10000\"\n")],
        auth,
    );
    let t = token(&catalog, "catalog:read");
    let page_rps = load(
        "`resources/list`, 50 catalog entries (guest call), bearer token",
        &catalog.url,
        modern_req("resources/list", json!({}), Some(&t)),
        connections,
        seconds,
    )
    .await;
    println!(
        "\nThe 50-entry catalog page reaches {:.0}% of the bare server's rate.\n",
        page_rps / bare_rps * 100.0
    );

    println!("## Full traversals over HTTP (one client, 50 per page)\n");
    println!("| listing | pages | entries | pages/s | entries/s |\n|---|---|---|---|---|");
    let (p, e, s) = traverse(&catalog.url, &t).await;
    println!(
        "| catalog, 10,000 entries | {p} | {e} | {:.0} | {:.0} |",
        p as f64 / s,
        e as f64 / s
    );
    drop(catalog);
    let mut statics20 = String::new();
    for i in 0..20 {
        statics20.push_str(&format!(
            "[[resources]]\nuri = \"demo://static/{i:03}\"\nname = \"Static {i}\"\ntext = \"x\"\n"
        ));
    }
    let two = start(
        &[
            (
                "a",
                "catalog",
                "[config]\nname = \"one\"\nitems = \"5000\"\n",
            ),
            (
                "b",
                "catalog",
                "[config]\nname = \"two\"\nitems = \"5000\"\n",
            ),
        ],
        &format!("{statics20}{auth}"),
    );
    let t = token(&two, "catalog:read");
    let (p, e, s) = traverse(&two.url, &t).await;
    println!(
        "| 20 static + two catalogs of 5,000 | {p} | {e} | {:.0} | {:.0} |",
        p as f64 / s,
        e as f64 / s
    );
    drop(two);

    println!("\n## Startup (`emseepea check`, median of 5)\n");
    println!("| sources | cold (empty cache) | warm (cache) |\n|---|---|---|");
    let cold_cache = root().join("target/bench-cache-cold");
    let examples = [("catalog", "catalog", ""), ("documents", "documents", "")];
    let (_d, file) = prepare(&examples, auth, &cold_cache);
    let cold = check_time(&file, 5, Some(&cold_cache));
    let warm = check_time(&file, 5, None);
    println!("| catalog + documents (Rust) | {cold:.0?} | {warm:.0?} |");
    let (_d, file) = prepare(&[("python-notes", "python-notes", "")], auth, &cold_cache);
    let cold = check_time(&file, 1, Some(&cold_cache));
    let warm = check_time(&file, 5, None);
    println!("| python-notes (18 MB component) | {cold:.1?} | {warm:.0?} |");
    let (_d, file) = prepare(&[("js-catalog", "js-catalog", "")], auth, &cold_cache);
    let cold = check_time(&file, 1, Some(&cold_cache));
    let warm = check_time(&file, 5, None);
    println!("| js-catalog (12 MB component) | {cold:.1?} | {warm:.0?} |");
    let twenty: Vec<(String, String)> = (0..20)
        .map(|i| {
            (
                format!("c{i:02}"),
                format!("[config]\nname = \"c{i:02}\"\n"),
            )
        })
        .collect();
    let twenty: Vec<(&str, &str, &str)> = twenty
        .iter()
        .map(|(s, m)| (s.as_str(), "catalog", m.as_str()))
        .collect();
    let (_d, file) = prepare(&twenty, auth, &cold_cache);
    let cold = check_time(&file, 5, Some(&cold_cache));
    let warm = check_time(&file, 5, None);
    println!("| 20 catalog sources | {cold:.0?} | {warm:.0?} |");
}
