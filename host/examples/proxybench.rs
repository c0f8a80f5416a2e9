//! The `documents` listing through nginx with two instances next to one
//! instance direct (BENCHMARKS.md, "Two instances behind nginx").
//!
//! usage: cargo xtask proxybench   (PROFILE=debug|release picks the server
//! build, default release; builds the guests and the binary first)
//! env: USERS (default 8), DOCS per user (default 2000), SECONDS (per
//! scenario, default 8), CONNECTIONS (default 8), ROUNDS (single-client
//! traversals per side, default 5), ENGINE (`sqlite`, the default, or
//! `postgres`: a throwaway PostgreSQL from tests/support/postgres.rs)
//!
//! Every instance serves the `documents` guest from one shared database
//! (one SQLite file, or one PostgreSQL with ENGINE=postgres);
//! nginx runs deploy/nginx/emseepea.conf (the test harness's generated
//! config, tests/support/nginx.rs, reused here). Two measurements:
//! 1. one client, one user's full traversal, page after page: pages/s and
//!    per-page latency direct vs through the proxy; their difference is the
//!    proxy's cost per page;
//! 2. CONNECTIONS clients, each a different user looping full traversals:
//!    pages/s and page latency for one instance direct vs two behind nginx
//!    (the hash spreads the users over the two).

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[path = "../../tests/support/nginx.rs"]
mod nginx;
#[path = "../../tests/support/postgres.rs"]
mod postgres;

mod common;
use common::{Server as Instance, authority, connect, env_or, root};

fn profile() -> String {
    std::env::var("PROFILE").unwrap_or_else(|_| "release".into())
}

/// One instance of `documents` on `db`; `resource` is the proxy's URL for
/// the instances behind it (none: the instance's own). `secret` is the
/// dev-token secret the instances behind one proxy share.
fn start(db: &Db, resource: Option<&str>, secret: &[u8; 32]) -> Instance {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    common::write_sources(
        &dir.path().join("sources"),
        &[(
            "documents",
            "documents",
            "[grants]\ndatabases = [\"documents\"]\n",
        )],
    );
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(state.join("dev-secret"))
        .unwrap()
        .write_all(secret)
        .unwrap();
    let cache = root().join("target/bench-cache");
    let resource = resource.map_or(String::new(), |r| format!("resource = \"{r}\"\n"));
    let config = dir.path().join("c.toml");
    std::fs::write(
        &config,
        format!(
            "sources_dir = \"sources\"\nstate_dir = \"state\"\ncache_dir = \"{}\"\ncache_key_file = \"{}.key\"\n\
             [http]\nmax_connections_per_peer = 512\n\
             {}[auth]\nmode = \"dev\"\n{resource}",
            cache.display(),
            cache.display(),
            db.section()
        ),
    )
    .unwrap();
    Instance::spawn(common::profile_bin(&profile()), dir, config, "warn")
}

/// The database every instance shares.
enum Db {
    Sqlite(PathBuf),
    Postgres(postgres::Postgres),
}

impl Db {
    /// The `[databases.documents]` table of every instance.
    fn section(&self) -> String {
        match self {
            Db::Sqlite(file) => format!("[databases.documents]\nfile = \"{}\"\n", file.display()),
            Db::Postgres(pg) => format!(
                "[databases.documents]\nengine = \"postgres\"\nurl = \"{}\"\ntls = \"disable\"\n",
                pg.url()
            ),
        }
    }

    fn engine(&self) -> &'static str {
        match self {
            Db::Sqlite(_) => "SQLite",
            Db::Postgres(_) => "PostgreSQL",
        }
    }
}

/// USERS users with DOCS documents each, the same rows as [`seed`], in a
/// fresh PostgreSQL.
fn seed_postgres(users: usize, docs: usize) -> postgres::Postgres {
    let pg = postgres::Postgres::start();
    pg.psql(
        &std::fs::read_to_string(root().join("guest-examples/documents/sql/schema.sql")).unwrap(),
    );
    pg.psql(&format!(
        "INSERT INTO documents (id, owner, order_key, title, body) \
         SELECT i, 'user' || u, i, i, 'body' FROM generate_series(0, {}) u, generate_series(0, {}) d, \
         LATERAL (SELECT 'u' || lpad(u::text, 2, '0') || '-' || lpad(d::text, 6, '0') AS i) ids",
        users - 1,
        docs - 1
    ));
    pg
}

/// USERS users with DOCS documents each, in one SQLite file.
fn seed(db: &Path, users: usize, docs: usize) {
    let mut conn = rusqlite::Connection::open(db).unwrap();
    conn.execute_batch(
        &std::fs::read_to_string(root().join("guest-examples/documents/sql/schema.sql")).unwrap(),
    )
    .unwrap();
    let tx = conn.transaction().unwrap();
    {
        let mut insert = tx
            .prepare(
                "INSERT INTO documents (id, owner, order_key, title, body) VALUES (?1, ?2, ?1, ?1, 'body')",
            )
            .unwrap();
        for u in 0..users {
            for d in 0..docs {
                insert
                    .execute(rusqlite::params![
                        format!("u{u:02}-{d:06}"),
                        format!("user{u}")
                    ])
                    .unwrap();
            }
        }
    }
    tx.commit().unwrap();
}

// The request plumbing of loadgen.rs: one HTTP/1.1 keep-alive connection
// per client, 2026-07-28 `resources/list` requests.

fn list_body(cursor: Option<&str>) -> Bytes {
    let mut params = cursor.map_or(json!({}), |c| json!({ "cursor": c }));
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    Bytes::from(
        serde_json::to_vec(
            &json!({"jsonrpc":"2.0","id":1,"method":"resources/list","params":params}),
        )
        .unwrap(),
    )
}

async fn list_page(
    sender: &mut http1::SendRequest<Full<Bytes>>,
    authority: &str,
    token: &str,
    cursor: Option<&str>,
) -> Value {
    let req = hyper::Request::post("/mcp")
        .header("host", authority)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "resources/list")
        .header("authorization", format!("Bearer {token}"))
        .body(Full::new(list_body(cursor)))
        .unwrap();
    // nginx ends a client connection after `keepalive_requests` (1000)
    // answers, saying so in the last one: open the next.
    if sender.ready().await.is_err() {
        *sender = connect(authority).await;
        sender.ready().await.unwrap();
    }
    let resp = sender.send_request(req).await.unwrap();
    assert!(resp.status().is_success(), "status {}", resp.status());
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert!(v.get("result").is_some(), "{v}");
    v
}

/// One full traversal on `sender`: (pages, entries, per-page latencies in µs).
async fn traverse(
    sender: &mut http1::SendRequest<Full<Bytes>>,
    authority: &str,
    token: &str,
) -> (usize, usize, Vec<u32>) {
    let (mut pages, mut entries, mut cursor, mut lat) = (0, 0, None::<String>, Vec::new());
    loop {
        let t = Instant::now();
        let v = list_page(sender, authority, token, cursor.as_deref()).await;
        lat.push(t.elapsed().as_micros() as u32);
        pages += 1;
        entries += v["result"]["resources"].as_array().unwrap().len();
        match v["result"]["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return (pages, entries, lat),
        }
    }
}

fn ms(us: u32) -> f64 {
    f64::from(us) / 1000.0
}

fn percentile(sorted: &[u32], p: usize) -> u32 {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

/// One side of the single-client comparison.
#[derive(Default)]
struct Side {
    pages: usize,
    entries: usize,
    busy: Duration,
    lat: Vec<u32>,
}

impl Side {
    fn row(&mut self, name: &str) {
        self.lat.sort_unstable();
        let secs = self.busy.as_secs_f64();
        println!(
            "| {name} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} |",
            self.pages as f64 / secs,
            self.entries as f64 / secs,
            secs * 1000.0 / self.pages as f64,
            ms(percentile(&self.lat, 50)),
            ms(percentile(&self.lat, 99))
        );
    }
}

/// ROUNDS full traversals by one client on each path in lockstep: page 1
/// direct, page 1 through the proxy, page 2 direct, ... so that a busy
/// moment of the machine hits both sides alike. Returns both sides and the
/// paired differences (proxy − direct, µs) of each page.
async fn single(
    direct: (&str, &str),
    proxy: (&str, &str),
    rounds: usize,
) -> (Side, Side, Vec<i64>) {
    let mut sides = [Side::default(), Side::default()];
    let mut conns = Vec::new();
    for (url, token) in [direct, proxy] {
        let a = authority(url);
        let mut sender = connect(&a).await;
        traverse(&mut sender, &a, token).await; // warm-up
        conns.push((a, sender, token));
    }
    let mut diffs = Vec::new();
    for _ in 0..rounds {
        let mut cursors: [Option<String>; 2] = [None, None];
        loop {
            let mut took = [0i64; 2];
            for (i, (a, sender, token)) in conns.iter_mut().enumerate() {
                let t = Instant::now();
                let v = list_page(sender, a, token, cursors[i].as_deref()).await;
                let elapsed = t.elapsed();
                sides[i].busy += elapsed;
                sides[i].pages += 1;
                sides[i].entries += v["result"]["resources"].as_array().unwrap().len();
                sides[i].lat.push(elapsed.as_micros() as u32);
                took[i] = elapsed.as_micros() as i64;
                cursors[i] = v["result"]["nextCursor"].as_str().map(String::from);
            }
            diffs.push(took[1] - took[0]);
            // Same user, same records: both listings end on the same page.
            assert_eq!(cursors[0].is_none(), cursors[1].is_none());
            if cursors[0].is_none() {
                break;
            }
        }
    }
    diffs.sort_unstable();
    let [d, p] = sides;
    (d, p, diffs)
}

/// CPU time (user + system, ms) the processes `pids` and their children
/// have used so far, from /proc (Linux).
fn cpu_ms(pids: &[u32]) -> f64 {
    let stat = |pid: &str| -> Option<(u32, u64)> {
        let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Fields after the parenthesised command name: state ppid ... utime(14) stime(15).
        let rest: Vec<&str> = s.rsplit_once(')')?.1.split_whitespace().collect();
        let ppid = rest.get(1)?.parse().ok()?;
        let ticks: u64 = rest.get(11)?.parse::<u64>().ok()? + rest.get(12)?.parse::<u64>().ok()?;
        Some((ppid, ticks))
    };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let mut ticks = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(pid) = name.parse::<u32>() else {
            continue;
        };
        if let Some((ppid, t)) = stat(&name)
            && (pids.contains(&pid) || pids.contains(&ppid))
        {
            ticks += t;
        }
    }
    ticks as f64 * 1000.0 / hz
}

/// One client per token, each looping full traversals for `seconds`:
/// (pages/s, p50 µs, p99 µs).
async fn concurrent(url: &str, tokens: &[String], seconds: u64) -> (f64, u32, u32) {
    let authority = authority(url);
    let stop = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for t in tokens {
        let (authority, token) = (authority.clone(), t.clone());
        tasks.push(tokio::spawn(async move {
            let mut sender = connect(&authority).await;
            let mut lat = Vec::new();
            let mut cursor: Option<String> = None;
            while Instant::now() < stop {
                let t = Instant::now();
                let v = list_page(&mut sender, &authority, &token, cursor.as_deref()).await;
                lat.push(t.elapsed().as_micros() as u32);
                cursor = v["result"]["nextCursor"].as_str().map(String::from);
            }
            lat
        }));
    }
    let started = Instant::now();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let secs = started.elapsed().as_secs_f64();
    all.sort_unstable();
    (
        all.len() as f64 / secs,
        percentile(&all, 50),
        percentile(&all, 99),
    )
}

#[tokio::main]
async fn main() {
    let users: usize = env_or("USERS", 8);
    let docs: usize = env_or("DOCS", 2000);
    let seconds: u64 = env_or("SECONDS", 8);
    let connections: usize = env_or("CONNECTIONS", 8);
    let rounds: usize = env_or("ROUNDS", 5);
    let dir = tempfile::tempdir().unwrap();
    let db = match std::env::var("ENGINE").as_deref() {
        Ok("postgres") => Db::Postgres(seed_postgres(users, docs)),
        Ok("sqlite") | Err(_) => {
            let file = dir.path().join("documents.sqlite");
            seed(&file, users, docs);
            Db::Sqlite(file)
        }
        Ok(other) => panic!("ENGINE is sqlite or postgres, not {other:?}"),
    };
    let secret: [u8; 32] = rand::random();
    let direct = start(&db, None, &secret);
    let port = nginx::free_port();
    let proxy_url = format!("http://127.0.0.1:{port}/mcp");
    let a = start(&db, Some(&proxy_url), &secret);
    let b = start(&db, Some(&proxy_url), &secret);
    let proxy = nginx::Nginx::start(port, &[authority(&a.url), authority(&b.url)]);
    let direct_tokens: Vec<String> = (0..connections)
        .map(|i| direct.token(&format!("user{}", i % users), "documents:read"))
        .collect();
    let proxy_tokens: Vec<String> = (0..connections)
        .map(|i| a.token_for(&format!("user{}", i % users), "documents:read", &proxy_url))
        .collect();

    println!(
        "## `documents` through nginx ({} build, {}, {users} users × {docs} documents, 50 per page)\n",
        profile(),
        db.engine()
    );
    println!("### One client, full traversals ({rounds} rounds after one warm-up)\n");
    println!(
        "| path | pages/s | entries/s | page mean ms | page p50 ms | page p99 ms |\n|---|---|---|---|---|---|"
    );
    let (mut d, mut p, diffs) = single(
        (&direct.url, &direct_tokens[0]),
        (&proxy.url(), &proxy_tokens[0]),
        rounds,
    )
    .await;
    d.row("one instance, direct");
    p.row("nginx → two instances");
    println!(
        "\nThe proxy's cost per page, paired (each page through nginx minus the same page direct, \
         asked one after the other): median {} µs, mean {:.0} µs, {} pairs.\n",
        diffs[diffs.len() / 2],
        diffs.iter().sum::<i64>() as f64 / diffs.len() as f64,
        diffs.len()
    );

    println!("### {connections} clients (one user each), {seconds} s per row\n");
    println!(
        "| path | pages/s | page p50 ms | page p99 ms | CPU per page: emseepea | CPU per page: nginx |\n|---|---|---|---|---|---|"
    );
    let before = cpu_ms(&[direct.child.id()]);
    let (rate, p50, p99) = concurrent(&direct.url, &direct_tokens, seconds).await;
    let pages = rate * seconds as f64;
    println!(
        "| one instance, direct | {rate:.0} | {:.2} | {:.2} | {:.2} ms | |",
        ms(p50),
        ms(p99),
        (cpu_ms(&[direct.child.id()]) - before) / pages
    );
    proxy.settle();
    let from = proxy.access_log().len();
    let instances = [a.child.id(), b.child.id()];
    let (before, before_nginx) = (cpu_ms(&instances), cpu_ms(&[proxy.pid()]));
    let (rate, p50, p99) = concurrent(&proxy.url(), &proxy_tokens, seconds).await;
    let pages = rate * seconds as f64;
    println!(
        "| nginx → two instances | {rate:.0} | {:.2} | {:.2} | {:.2} ms | {:.3} ms |",
        ms(p50),
        ms(p99),
        (cpu_ms(&instances) - before) / pages,
        (cpu_ms(&[proxy.pid()]) - before_nginx) / pages
    );
    proxy.settle();
    let served = proxy.upstreams_since(from);
    let on_a = served.iter().filter(|u| **u == authority(&a.url)).count();
    println!(
        "\nPages per instance behind nginx: {on_a} and {} (the hash of each client's token decides).",
        served.len() - on_a
    );
}
