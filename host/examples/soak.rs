//! The soak behind BENCHMARKS.md: a bounded, self-stopping mixed load against
//! the real server, checking every answer and sampling the server's RSS and
//! open descriptors once a second.
//!
//! usage: cargo xtask soak   (builds the guests and the server first)
//! env: REQUESTS (checked requests, default 1,000,000), MAX_SECONDS (default
//! 1200; the run stops at whichever comes first), WORKERS (default 32),
//! PROFILE (`release`, default, or `debug`: which server binary to run).
//!
//! The mix, per worker iteration: traversal steps for alice and bob over a
//! per-user SQLite source (every page checked against the caller's own
//! records), reads of one's own records (text checked) and of the other
//! user's (must be not-found), a fixed catalog page, bad and tampered cursors
//! (must be -32602), bad tokens (must be 401), 2025-03-26 batches, and
//! cancelled reads (the connection dropped mid-call). Beside it, abusive
//! neighbours: mallory's parallel reads of a slow source (must get a generic
//! error, 429 or 503, never a record) and slow bodies trickling in. Any other
//! answer is a wrong answer; the run exits 1 if there is one.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const MODERN: &str = "2026-07-28";
const DOCS_PER_USER: usize = 240;

mod common;
use common::{Server, env_or, root};

/// The records: (owner, id, title, body). Keys order by id.
fn records() -> Vec<(String, String, String, String)> {
    let mut out = Vec::new();
    for (owner, prefix) in [("alice", "a"), ("bob", "b")] {
        for i in 0..DOCS_PER_USER {
            let id = format!("{prefix}-{i:04}");
            out.push((
                owner.to_owned(),
                id.clone(),
                format!("{owner}'s document {i}"),
                format!("Body of {id}, private to {owner}."),
            ));
        }
    }
    out
}

fn start(profile: &str) -> Server {
    let dir = tempfile::tempdir().unwrap();
    common::write_sources(
        &dir.path().join("sources"),
        &[
            (
                "a-documents",
                "documents",
                "[grants]\ndatabases = [\"documents\"]\n",
            ),
            ("b-catalog", "catalog", "[config]\nitems = \"1000\"\n"),
            // mallory's slow source: every call blocks until its 100 ms deadline.
            (
                "c-slow",
                "hostile/hostile",
                "[config]\nname = \"slow\"\nmode = \"sleep\"\nscope = \"slow:read\"\n[budget]\nmax_duration_ms = 100\n",
            ),
        ],
    );
    let db = dir.path().join("documents.sqlite");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        &std::fs::read_to_string(root().join("guest-examples/documents/sql/schema.sql")).unwrap(),
    )
    .unwrap();
    for (owner, id, title, body) in records() {
        conn.execute(
            "INSERT INTO documents (id, owner, order_key, title, body) VALUES (?1, ?2, ?3, ?4, ?5)",
            rusqlite::params![id, owner, format!("k#{id}"), title, body],
        )
        .unwrap();
    }
    drop(conn);
    let config = dir.path().join("soak.toml");
    std::fs::write(
        &config,
        format!(
            "sources_dir = \"sources\"\nstate_dir = \"state\"\ncache_dir = \"{}\"\n\
             [auth]\nmode = \"dev\"\n\
             [databases.documents]\nfile = \"{}\"\nread_only = true\n\
             [[resources]]\nuri = \"soak://readme\"\nname = \"readme\"\ntext = \"soak\"\n",
            root().join("target/bench-cache").display(),
            db.display()
        ),
    )
    .unwrap();
    Server::spawn(common::profile_bin(profile), dir, config, "error")
}

fn token(s: &Server, sub: &str, scopes: &str) -> String {
    s.token(sub, scopes)
}

/// What one answer was, for the tally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    ListStep,
    ReadOwn,
    ReadOthers,
    CatalogPage,
    BadCursor,
    TamperedCursor,
    BadToken,
    Batch,
    Cancelled,
    Neighbour,
    SlowBody,
}

#[derive(Default)]
struct Tally {
    ok: BTreeMap<String, u64>,
    wrong: BTreeMap<String, u64>,
    first_wrong: Vec<String>,
}

struct Shared {
    authority: String,
    stop: AtomicBool,
    checked: AtomicU64,
    target: u64,
    tally: std::sync::Mutex<Tally>,
}

impl Shared {
    fn record(&self, kind: Kind, verdict: Result<(), String>) {
        let mut t = self.tally.lock().unwrap();
        let name = format!("{kind:?}");
        match verdict {
            Ok(()) => *t.ok.entry(name).or_default() += 1,
            Err(why) => {
                *t.wrong.entry(name.clone()).or_default() += 1;
                if t.first_wrong.len() < 20 {
                    t.first_wrong.push(format!("{name}: {why}"));
                }
            }
        }
        if !matches!(kind, Kind::Neighbour | Kind::SlowBody)
            && self.checked.fetch_add(1, Ordering::Relaxed) + 1 >= self.target
        {
            self.stop.store(true, Ordering::Relaxed);
        }
    }
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

struct Reply {
    status: u16,
    body: Value,
}

struct Conn {
    sender: http1::SendRequest<Full<Bytes>>,
    authority: String,
}

impl Conn {
    async fn open(authority: &str) -> std::io::Result<Conn> {
        let stream = TcpStream::connect(authority).await?;
        stream.set_nodelay(true)?;
        let (sender, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(std::io::Error::other)?;
        tokio::spawn(conn);
        Ok(Conn {
            sender,
            authority: authority.to_owned(),
        })
    }

    async fn post(&mut self, headers: &[(&str, &str)], body: &Value) -> Result<Reply, String> {
        let mut b = hyper::Request::post("/mcp")
            .header("host", &self.authority)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let req = b
            .body(Full::new(Bytes::from(serde_json::to_vec(body).unwrap())))
            .unwrap();
        self.sender.ready().await.map_err(|e| e.to_string())?;
        let resp = self
            .sender
            .send_request(req)
            .await
            .map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).map_err(|e| format!("{status}: not JSON: {e}"))?
        };
        Ok(Reply { status, body })
    }
}

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}})
}

fn modern_body(method: &str, mut params: Value) -> Value {
    params["_meta"] = meta();
    json!({"jsonrpc":"2.0","id":1,"method":method,"params":params})
}

async fn modern(
    conn: &mut Conn,
    method: &str,
    name: Option<&str>,
    params: Value,
    auth: Option<&str>,
) -> Result<Reply, String> {
    let mut h: Vec<(&str, &str)> = vec![("mcp-protocol-version", MODERN), ("mcp-method", method)];
    if let Some(n) = name {
        h.push(("mcp-name", n));
    }
    let bearer = auth.map(|t| format!("Bearer {t}"));
    if let Some(b) = &bearer {
        h.push(("authorization", b));
    }
    conn.post(&h, &modern_body(method, params)).await
}

fn error_code(r: &Reply) -> Option<i64> {
    r.body["error"]["code"].as_i64()
}

/// One user's view: the token and the URIs (with texts) they own.
struct User {
    token: String,
    own: BTreeMap<String, String>,
    other: Vec<String>,
}

struct Traversal {
    cursor: Option<String>,
    seen: BTreeSet<String>,
}

/// One list step; checks that the page holds only the caller's records (plus
/// the static readme and catalog items) and, at the end, that the traversal
/// saw exactly the caller's records.
async fn list_step(conn: &mut Conn, user: &User, t: &mut Traversal) -> Result<(), String> {
    let params = match &t.cursor {
        Some(c) => json!({ "cursor": c }),
        None => json!({}),
    };
    let r = modern(conn, "resources/list", None, params, Some(&user.token)).await?;
    if r.status != 200 || r.body.get("result").is_none() {
        return Err(format!("list: {} {}", r.status, r.body));
    }
    for res in r.body["result"]["resources"]
        .as_array()
        .ok_or("no resources")?
    {
        let uri = res["uri"].as_str().ok_or("no uri")?;
        if uri.starts_with("learn://documents/") {
            if !user.own.contains_key(uri) {
                return Err(format!("listed a record that is not the caller's: {uri}"));
            }
            if !t.seen.insert(uri.to_owned()) {
                return Err(format!("listed twice in one traversal: {uri}"));
            }
        } else if !(uri.starts_with("catalog://") || uri == "soak://readme") {
            return Err(format!("unexpected uri {uri}"));
        }
    }
    match r.body["result"]["nextCursor"].as_str() {
        Some(c) => t.cursor = Some(c.to_owned()),
        None => {
            let complete = t.seen.len() == user.own.len();
            let n = t.seen.len();
            t.cursor = None;
            t.seen.clear();
            if !complete {
                return Err(format!("traversal saw {n} of {} records", user.own.len()));
            }
        }
    }
    Ok(())
}

async fn read_own(conn: &mut Conn, user: &User, i: usize) -> Result<(), String> {
    let (uri, text) = user.own.iter().nth(i % user.own.len()).unwrap();
    let r = modern(
        conn,
        "resources/read",
        Some(uri),
        json!({ "uri": uri }),
        Some(&user.token),
    )
    .await?;
    let contents = &r.body["result"]["contents"];
    if r.status == 200 && contents[0]["uri"] == uri.as_str() && contents[0]["text"] == text.as_str()
    {
        Ok(())
    } else {
        Err(format!("read own {uri}: {} {}", r.status, r.body))
    }
}

async fn read_others(conn: &mut Conn, user: &User, i: usize) -> Result<(), String> {
    let uri = &user.other[i % user.other.len()];
    let r = modern(
        conn,
        "resources/read",
        Some(uri),
        json!({ "uri": uri }),
        Some(&user.token),
    )
    .await?;
    if r.body.get("result").is_none()
        && error_code(&r).is_some()
        && !r.body.to_string().contains("private to")
    {
        Ok(())
    } else {
        Err(format!(
            "read of another user's {uri}: {} {}",
            r.status, r.body
        ))
    }
}

async fn catalog_page(conn: &mut Conn, token: &str, cursor: &str) -> Result<(), String> {
    let r = modern(
        conn,
        "resources/list",
        None,
        json!({ "cursor": cursor }),
        Some(token),
    )
    .await?;
    let n = r.body["result"]["resources"].as_array().map_or(0, Vec::len);
    if r.status == 200 && n > 0 {
        Ok(())
    } else {
        Err(format!("catalog page: {} {}", r.status, r.body))
    }
}

async fn expect_invalid_cursor(conn: &mut Conn, token: &str, cursor: &str) -> Result<(), String> {
    let r = modern(
        conn,
        "resources/list",
        None,
        json!({ "cursor": cursor }),
        Some(token),
    )
    .await?;
    if error_code(&r) == Some(-32602) {
        Ok(())
    } else {
        Err(format!("cursor {cursor:.40}: {} {}", r.status, r.body))
    }
}

async fn bad_token(conn: &mut Conn, i: usize) -> Result<(), String> {
    let t = format!("not-a-token-{i}");
    let r = modern(conn, "resources/list", None, json!({}), Some(&t)).await?;
    if r.status == 401 {
        Ok(())
    } else {
        Err(format!("bad token: {} {}", r.status, r.body))
    }
}

/// A 2025-03-26 session (batches exist only there) for one worker.
async fn legacy_session(conn: &mut Conn, token: &str) -> Result<String, String> {
    let bearer = format!("Bearer {token}");
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"soak","version":"1"}}});
    let mut b = hyper::Request::post("/mcp")
        .header("host", &conn.authority)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", &bearer);
    b = b.header("user-agent", "soak");
    let req = b
        .body(Full::new(Bytes::from(serde_json::to_vec(&init).unwrap())))
        .unwrap();
    conn.sender.ready().await.map_err(|e| e.to_string())?;
    let resp = conn
        .sender
        .send_request(req)
        .await
        .map_err(|e| e.to_string())?;
    let id = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .ok_or("no session id")?;
    let _ = resp.into_body().collect().await;
    let note = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
    conn.post(
        &[("mcp-session-id", &id), ("authorization", &bearer)],
        &note,
    )
    .await?;
    Ok(id)
}

async fn batch(conn: &mut Conn, session: &str, token: &str, user: &User) -> Result<(), String> {
    let bearer = format!("Bearer {token}");
    let (uri, text) = user.own.iter().next().unwrap();
    let body = json!([
        {"jsonrpc":"2.0","id":1,"method":"resources/list"},
        {"jsonrpc":"2.0","id":2,"method":"ping"},
        {"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":uri}}
    ]);
    let r = conn
        .post(
            &[("mcp-session-id", session), ("authorization", &bearer)],
            &body,
        )
        .await?;
    let items = r
        .body
        .as_array()
        .ok_or_else(|| format!("batch: {} {}", r.status, r.body))?;
    let listed_only_own = items[0]["result"]["resources"]
        .as_array()
        .is_some_and(|rs| {
            rs.iter().all(|res| {
                let u = res["uri"].as_str().unwrap_or("");
                !u.starts_with("learn://") || user.own.contains_key(u)
            })
        });
    if items.len() == 3
        && listed_only_own
        && items[1]["result"].is_object()
        && items[2]["result"]["contents"][0]["text"] == text.as_str()
    {
        Ok(())
    } else {
        Err(format!("batch: {} {}", r.status, r.body))
    }
}

/// A read of the slow source whose connection is dropped mid-call.
async fn cancelled(authority: &str, token: &str) -> Result<(), String> {
    let mut conn = Conn::open(authority).await.map_err(|e| e.to_string())?;
    let fut = modern(
        &mut conn,
        "resources/read",
        Some("hostile://slow/1"),
        json!({"uri":"hostile://slow/1"}),
        Some(token),
    );
    match tokio::time::timeout(Duration::from_millis(20), fut).await {
        // Dropped before the answer: the point of the exercise.
        Err(_) => Ok(()),
        // Answered within 20 ms: it must be an error or back-pressure, never content.
        Ok(Ok(r)) if r.body.get("result").is_none() => Ok(()),
        Ok(Ok(r)) => Err(format!("slow read answered with a result: {}", r.body)),
        Ok(Err(e)) => Err(e),
    }
}

fn tamper(cursor: &str) -> String {
    let mut b = cursor.as_bytes().to_vec();
    let i = b.len() / 2;
    b[i] = if b[i] == b'A' { b'B' } else { b'A' };
    String::from_utf8(b).unwrap()
}

async fn worker(
    shared: Arc<Shared>,
    n: usize,
    users: Arc<[User; 2]>,
    catalog_cursors: Arc<[String]>,
    mallory: Arc<String>,
) {
    let mut conn = match Conn::open(&shared.authority).await {
        Ok(c) => c,
        Err(e) => return shared.record(Kind::ListStep, Err(format!("connect: {e}"))),
    };
    let mut traversals = [
        Traversal {
            cursor: None,
            seen: BTreeSet::new(),
        },
        Traversal {
            cursor: None,
            seen: BTreeSet::new(),
        },
    ];
    let mut session: Option<String> = None;
    let mut i = n;
    while !shared.stopped() {
        i += 1;
        let u = i % 2;
        let user = &users[u];
        let (kind, verdict) = match i % 20 {
            0..=7 => (
                Kind::ListStep,
                list_step(&mut conn, user, &mut traversals[u]).await,
            ),
            8..=11 => (Kind::ReadOwn, read_own(&mut conn, user, i).await),
            12 => (Kind::ReadOthers, read_others(&mut conn, user, i).await),
            13 => (
                Kind::CatalogPage,
                catalog_page(&mut conn, &user.token, &catalog_cursors[u]).await,
            ),
            14 => (
                Kind::BadCursor,
                expect_invalid_cursor(&mut conn, &user.token, &format!("garbage-{i}")).await,
            ),
            15 => {
                let t = match &traversals[u].cursor {
                    Some(c) => tamper(c),
                    None => tamper(&catalog_cursors[u]),
                };
                (
                    Kind::TamperedCursor,
                    expect_invalid_cursor(&mut conn, &user.token, &t).await,
                )
            }
            16 => (Kind::BadToken, bad_token(&mut conn, i).await),
            17 | 18 => {
                if session.is_none() {
                    session = legacy_session(&mut conn, &users[0].token).await.ok();
                }
                let v = match &session {
                    Some(s) => batch(&mut conn, s, &users[0].token, &users[0]).await,
                    None => Err("no legacy session".into()),
                };
                (Kind::Batch, v)
            }
            _ => (
                Kind::Cancelled,
                cancelled(&shared.authority, &mallory).await,
            ),
        };
        let broken = verdict
            .as_ref()
            .is_err_and(|e| !e.contains(':') || e.contains("connection"));
        shared.record(kind, verdict);
        if broken || conn.sender.is_closed() {
            match Conn::open(&shared.authority).await {
                Ok(c) => conn = c,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
            session = None;
        }
    }
}

/// mallory: parallel reads of the slow source. A generic error, 429 or 503 is right.
async fn neighbour(shared: Arc<Shared>, token: Arc<String>) {
    while !shared.stopped() {
        let Ok(mut conn) = Conn::open(&shared.authority).await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        while !shared.stopped() && !conn.sender.is_closed() {
            let verdict = match modern(
                &mut conn,
                "resources/read",
                Some("hostile://slow/1"),
                json!({"uri":"hostile://slow/1"}),
                Some(&token),
            )
            .await
            {
                Ok(r) if matches!(r.status, 429 | 503) => Ok(()),
                Ok(r) if r.body.get("result").is_none() && error_code(&r).is_some() => Ok(()),
                Ok(r) => Err(format!("{} {}", r.status, r.body)),
                Err(_) => break,
            };
            shared.record(Kind::Neighbour, verdict);
        }
    }
}

/// A body that trickles in a byte a second: the server must end it (any
/// close or 4xx), and it must never stop the others being served.
async fn slow_body(shared: Arc<Shared>) {
    while !shared.stopped() {
        let Ok(mut stream) = TcpStream::connect(&shared.authority).await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let head = format!(
            "POST /mcp HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: 1048575\r\n\r\n{{",
            shared.authority
        );
        if stream.write_all(head.as_bytes()).await.is_err() {
            continue;
        }
        let mut ended = false;
        while !shared.stopped() {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if stream.write_all(b" ").await.is_err() {
                ended = true;
                break;
            }
            let mut buf = [0u8; 1];
            // A server that answered (408/413) leaves bytes to read.
            if let Ok(Ok(n)) =
                tokio::time::timeout(Duration::from_millis(1), stream.peek(&mut buf)).await
                && n > 0
            {
                ended = true;
                break;
            }
        }
        if ended {
            shared.record(Kind::SlowBody, Ok(()));
        }
    }
}

/// (seconds since start, RSS KiB, open descriptors) of a process.
fn sample(pid: u32, t0: Instant) -> Option<(f64, u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
    Some((t0.elapsed().as_secs_f64(), rss, fds))
}

/// Least-squares slope of y over x.
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let (num, den) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| {
        (a + (x - mx) * (y - my), b + (x - mx) * (x - mx))
    });
    if den == 0.0 { 0.0 } else { num / den }
}

async fn catalog_cursor(authority: &str, token: &str) -> String {
    let mut conn = Conn::open(authority).await.unwrap();
    let mut cursor: Option<String> = None;
    loop {
        let params = cursor
            .as_ref()
            .map_or(json!({}), |c| json!({ "cursor": c }));
        let r = modern(&mut conn, "resources/list", None, params, Some(token))
            .await
            .unwrap();
        let page = r.body["result"]["resources"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let next = r.body["result"]["nextCursor"].as_str().map(str::to_owned);
        if page.iter().any(|p| {
            p["uri"]
                .as_str()
                .is_some_and(|u| u.starts_with("catalog://"))
        }) {
            return cursor.expect("catalog items after the documents");
        }
        cursor = Some(next.expect("the listing ended before the catalog"));
    }
}

async fn setup_users(s: &Server) -> [User; 2] {
    let mut own: [BTreeMap<String, String>; 2] = [BTreeMap::new(), BTreeMap::new()];
    for (owner, id, _title, body) in records() {
        own[usize::from(owner == "bob")].insert(format!("learn://documents/{id}"), body);
    }
    let alice = token(s, "alice", "documents:read catalog:read");
    let bob = token(s, "bob", "documents:read catalog:read");
    let other_of = |i: usize| own[1 - i].keys().cloned().collect::<Vec<_>>();
    [
        User {
            token: alice,
            own: own[0].clone(),
            other: other_of(0),
        },
        User {
            token: bob,
            own: own[1].clone(),
            other: other_of(1),
        },
    ]
}

#[tokio::main]
async fn main() {
    let target: u64 = env_or("REQUESTS", 1_000_000);
    let max_seconds: u64 = env_or("MAX_SECONDS", 1200);
    let workers: usize = env_or("WORKERS", 32);
    let profile: String = env_or("PROFILE", "release".to_string());
    let server = start(&profile);
    let pid = server.child.id();
    let users = Arc::new(setup_users(&server).await);
    let mallory = Arc::new(token(&server, "mallory", "slow:read"));
    // Each user's cursor to the first catalog page (past their documents and
    // the readme): the fixed page. Cursors are bound to their caller.
    let mut catalog_cursors = Vec::new();
    for user in users.iter() {
        catalog_cursors.push(catalog_cursor(&server.authority(), &user.token).await);
    }
    let shared = Arc::new(Shared {
        authority: server.authority(),
        stop: AtomicBool::new(false),
        checked: AtomicU64::new(0),
        target,
        tally: std::sync::Mutex::new(Tally::default()),
    });
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    let catalog_cursors: Arc<[String]> = catalog_cursors.into();
    for n in 0..workers {
        tasks.push(tokio::spawn(worker(
            shared.clone(),
            n,
            users.clone(),
            catalog_cursors.clone(),
            mallory.clone(),
        )));
    }
    for _ in 0..16 {
        tasks.push(tokio::spawn(neighbour(shared.clone(), mallory.clone())));
    }
    for _ in 0..8 {
        tasks.push(tokio::spawn(slow_body(shared.clone())));
    }
    let mut samples = Vec::new();
    let deadline = t0 + Duration::from_secs(max_seconds);
    while !shared.stopped() {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if let Some(s) = sample(pid, t0) {
            samples.push((s, shared.checked.load(Ordering::Relaxed)));
        }
        if Instant::now() >= deadline {
            eprintln!("soak: MAX_SECONDS reached");
            shared.stop.store(true, Ordering::Relaxed);
        }
        if samples.len() % 30 == 0 {
            eprintln!(
                "soak: {}s, {} checked, RSS {} KiB, {} fds",
                t0.elapsed().as_secs(),
                shared.checked.load(Ordering::Relaxed),
                samples.last().map_or(0, |s| s.0.1),
                samples.last().map_or(0, |s| s.0.2)
            );
        }
    }
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let alive = Conn::open(&server.authority()).await.is_ok() && sample(pid, t0).is_some();
    let tally = shared.tally.lock().unwrap();
    let checked = shared.checked.load(Ordering::Relaxed);
    // Slopes after the first fifth (warm-up: slots, caches, sessions filling).
    let warm: Vec<_> = samples.iter().skip(samples.len() / 5).collect();
    let rss_per_min = slope(
        &warm
            .iter()
            .map(|((t, r, _), _)| (*t / 60.0, *r as f64 / 1024.0))
            .collect::<Vec<_>>(),
    );
    let rss_per_m_req = slope(
        &warm
            .iter()
            .map(|((_, r, _), n)| (*n as f64 / 1e6, *r as f64 / 1024.0))
            .collect::<Vec<_>>(),
    );
    let fds_per_min = slope(
        &warm
            .iter()
            .map(|((t, _, f), _)| (*t / 60.0, *f as f64))
            .collect::<Vec<_>>(),
    );
    let rss = |i: usize| samples.get(i).map_or(0.0, |s| s.0.1 as f64 / 1024.0);
    let max_rss = samples.iter().map(|s| s.0.1).max().unwrap_or(0) as f64 / 1024.0;
    let max_fds = samples.iter().map(|s| s.0.2).max().unwrap_or(0);
    println!(
        "## Soak: {checked} checked requests in {elapsed:.0} s ({:.0}/s), {workers} workers, profile {profile}\n",
        checked as f64 / elapsed
    );
    println!("| kind | right | wrong |\n|---|---|---|");
    let kinds: BTreeSet<&String> = tally.ok.keys().chain(tally.wrong.keys()).collect();
    for k in kinds {
        println!(
            "| {k} | {} | {} |",
            tally.ok.get(k).unwrap_or(&0),
            tally.wrong.get(k).unwrap_or(&0)
        );
    }
    println!(
        "\nRSS: {:.1} MiB at 1 s, {:.1} MiB after warm-up, {:.1} MiB at the end, peak {max_rss:.1} MiB; \
         slope after warm-up {rss_per_min:+.3} MiB/min ({rss_per_m_req:+.2} MiB per million requests). \
         Descriptors: peak {max_fds}, slope {fds_per_min:+.2}/min. Server alive at the end: {alive}.",
        rss(0),
        rss(samples.len() / 5),
        rss(samples.len().saturating_sub(1)),
    );
    let wrong: u64 = tally.wrong.values().sum();
    for w in &tally.first_wrong {
        println!("wrong: {w}");
    }
    drop(tally);
    drop(server);
    if wrong > 0 || !alive || checked < target {
        eprintln!(
            "soak: FAILED ({wrong} wrong answers, alive {alive}, {checked} of {target} checked)"
        );
        std::process::exit(1);
    }
}
