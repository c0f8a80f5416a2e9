//! N instances behind a stock proxy (issue 12, part 3): two emseepea
//! instances on one PostgreSQL (a throwaway cluster from
//! tests/support/postgres.rs), the Debian nginx in front of them with
//! deploy/nginx/emseepea.conf (consistent hashing on `Authorization`), and
//! the official Python SDK client listing through the proxy.
//!
//! The seed: cursor keys are process-local, so "route subsequent pages to
//! the same serving instance, or restart without a cursor if it rejects
//! one". The tests show both halves: a caller's pages stay on its instance,
//! and when that instance stops or restarts, the next page is refused with
//! the generic -32602 and the client's fresh listing completes.

mod support;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use support::engines::{Engine, TestDb};
use support::nginx::{Nginx, free_port};
use support::registry::Registry;
use support::*;

/// The database every instance shares: `TestDb` (tests/support/engines.rs)
/// makes it on either engine, gives the `[databases.documents]` table each
/// instance gets, and writes records the way any other writer would,
/// outside emseepea. The issue's setup is PostgreSQL ("all instances on one
/// PostgreSQL"); the live-record test also runs on one shared SQLite file.
fn shared_db(engine: Engine) -> TestDb {
    TestDb::new(
        engine,
        &std::fs::read_to_string(root().join("guest-examples/documents/sql/schema.sql")).unwrap(),
    )
}

/// A document whose title is its id, as another writer would insert it.
fn insert(db: &TestDb, id: &str, owner: &str, order_key: &str) {
    db.exec(&format!(
        "INSERT INTO documents (id, owner, order_key, title, body) \
         VALUES ('{id}', '{owner}', '{order_key}', '{id}', 'text of {id}');"
    ));
}

/// Alice has 7 documents (4 pages of 2), bob 3 (2 pages).
const ALICE: [&str; 7] = ["a1", "a2", "a3", "a4", "a5", "a6", "a7"];
const BOB: [&str; 3] = ["b1", "b2", "b3"];

fn uris(ids: &[&str]) -> Vec<String> {
    ids.iter()
        .map(|i| format!("learn://documents/{i}"))
        .collect()
}

/// Two instances on one database behind nginx. Each instance has its own
/// state directory (and so its own, process-local cursor key); they share
/// only the dev-mode token secret, as instances behind one proxy share
/// their token issuer, and the resource URL, which is the proxy's.
struct Cluster {
    db: TestDb,
    secret: [u8; 32],
    resource: String,
    /// The instances' addresses (host:port), fixed for the test: a restart
    /// comes back on the same port, as a pod behind a Service would.
    addrs: [String; 2],
    instances: [Option<Server>; 2],
    nginx: Nginx,
    /// Where every instance pulls the `documents` source from, by `pinned`
    /// (registry/repository@sha256:...), as an init container would; kept
    /// running for restarts.
    _registry: Registry,
    pinned: String,
}

impl Cluster {
    /// The cluster on PostgreSQL, the setup.
    fn start() -> Cluster {
        Cluster::start_on(Engine::Postgres)
    }

    fn start_on(engine: Engine) -> Cluster {
        let db = shared_db(engine);
        // Each id is its own ordering key.
        for id in ALICE {
            insert(&db, id, "alice", id);
        }
        for id in BOB {
            insert(&db, id, "bob", id);
        }
        let nginx_port = free_port();
        let resource = format!("http://127.0.0.1:{nginx_port}/mcp");
        let secret: [u8; 32] = rand::random();
        let registry = Registry::start();
        let pinned = publish_documents(&registry);
        let a = instance(&db, &secret, &resource, &pinned).start();
        let b = instance(&db, &secret, &resource, &pinned).start();
        // Both serve the same bytes: the ones published.
        for s in [&a, &b] {
            assert_eq!(
                std::fs::read(s.prepared.dir.path().join("sources/documents.wasm")).unwrap(),
                std::fs::read(guest("documents")).unwrap()
            );
        }
        let addrs = [a.host_port(), b.host_port()];
        let nginx = Nginx::start(nginx_port, &addrs);
        Cluster {
            db,
            secret,
            resource,
            addrs,
            instances: [Some(a), Some(b)],
            nginx,
            _registry: registry,
            pinned,
        }
    }

    fn index_of(&self, addr: &str) -> usize {
        self.addrs
            .iter()
            .position(|a| a == addr)
            .unwrap_or_else(|| panic!("{addr} is not an instance of {:?}", self.addrs))
    }

    /// A dev token for `sub` whose hash lands on instance `on`: minted until
    /// one does (each token has its own `jti`, so its own hash), which is
    /// what a token refresh does to a caller's placement.
    async fn token_on(&self, sub: &str, on: usize) -> String {
        for _ in 0..64 {
            let token = self.mint(sub);
            if self.probe(&token).await == on {
                return token;
            }
        }
        panic!("no token of 64 landed on instance {on}");
    }

    fn mint(&self, sub: &str) -> String {
        let config = &self.instances[0]
            .as_ref()
            .or(self.instances[1].as_ref())
            .unwrap()
            .prepared
            .config_path;
        let out = Command::new(BIN)
            .args(["token", "--config"])
            .arg(config)
            .args(["--sub", sub, "--scope", "documents:read"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "token: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// Which instance serves `token` (one first page through the proxy).
    async fn probe(&self, token: &str) -> usize {
        let from = self.mark();
        let a = modern(
            &self.nginx.url(),
            Some(token),
            json!(1),
            "resources/list",
            json!({}),
        )
        .await;
        assert_eq!(a.status, 200, "{}", a.text());
        let served = self.served_since(from);
        assert_eq!(served.len(), 1, "{served:?}");
        served[0]
    }

    /// Where the access log stands once every answered request is in it.
    fn mark(&self) -> usize {
        self.nginx.settle();
        self.nginx.access_log().len()
    }

    /// The instances that answered the proxied requests `from..`.
    fn served_since(&self, from: usize) -> Vec<usize> {
        self.nginx.settle();
        self.nginx
            .upstreams_since(from)
            .iter()
            .map(|a| self.index_of(a))
            .collect()
    }

    fn stop(&mut self, i: usize) {
        let s = self.instances[i].take().expect("instance running");
        assert!(s.terminate().success());
    }

    /// Stop instance `i` and start it again on the same port: same config,
    /// same database, a new process (and so a new cursor key).
    fn restart(&mut self, i: usize) {
        self.stop(i);
        let s =
            instance(&self.db, &self.secret, &self.resource, &self.pinned).start_on(&self.addrs[i]);
        assert_eq!(s.host_port(), self.addrs[i]);
        self.instances[i] = Some(s);
    }
}

/// Push the `documents` guest and its manifest to `registry` once; the
/// reference pinned by digest that every instance pulls.
fn publish_documents(registry: &Registry) -> String {
    let src = support::registry::source_dir(
        "documents",
        &guest("documents"),
        Some("[grants]\ndatabases = [\"documents\"]\n"),
    );
    let repo = format!("{}/emseepea/documents", registry.addr);
    let digest = support::registry::push(&src.path().join("documents.wasm"), &format!("{repo}:v1"));
    format!("{repo}@{digest}")
}

/// One instance's directory and config: the `documents` guest (pulled from
/// the registry by digest) on the shared database, 2 entries a page, the
/// proxy's URL as its resource (audience).
fn instance(db: &TestDb, secret: &[u8; 32], resource: &str, pinned: &str) -> Prepared {
    let p = server()
        .config(&format!(
            "[list_pagination]\npage_size = 2\n{}",
            db.section("documents")
        ))
        .auth(Some(&format!(
            "[auth]\nmode = \"dev\"\nresource = \"{resource}\"\n"
        )))
        .prepare();
    let sources = p.dir.path().join("sources");
    support::registry::ok(&[
        "pull",
        pinned,
        "--into",
        sources.to_str().unwrap(),
        "--plain-http",
    ]);
    write_secret(&p.dir.path().join("state"), secret);
    p
}

/// The dev-mode secret every instance verifies tokens with (a 0600 file in
/// a 0700 state directory, as emseepea makes it).
fn write_secret(state: &std::path::Path, secret: &[u8; 32]) {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    std::fs::create_dir_all(state).unwrap();
    std::fs::set_permissions(state, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(state.join("dev-secret"))
        .unwrap()
        .write_all(secret)
        .unwrap();
}

fn python_client() -> Command {
    let py = root().join("target/clients/py-mcp2/bin/python");
    assert!(
        py.exists(),
        "{} is missing: run `cargo xtask clients` (or `cargo xtask test`)",
        py.display()
    );
    let mut c = Command::new(py);
    c.arg(root().join("tests/clients/python/scale_out_client.py"));
    c
}

/// A whole listing with the Python SDK; its JSON report.
fn list_all(url: &str, token: &str, mode: &str) -> Value {
    let out = python_client()
        .args([url, "--token", token, "--mode", mode])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// A listing with the Python SDK that pauses after its first page, lets
/// `between` act on the cluster, then finishes; its JSON report.
fn list_with_pause(url: &str, token: &str, between: impl FnOnce()) -> Value {
    let mut child = python_client()
        .args([url, "--token", token, "--pause-after", "1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    if serde_json::from_str::<Value>(&line)
        .ok()
        .map(|v| v["paused"].clone())
        != Some(json!(1))
    {
        let out = child.wait_with_output().unwrap();
        panic!(
            "client did not pause: {line}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    between();
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "client failed ({}):\n{rest}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(rest.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: {rest}"))
}

fn listed(report: &Value) -> Vec<String> {
    report["uris"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap().to_owned())
        .collect()
}

/// The one refusal a moved traversal meets: -32602 with the generic
/// message, nothing about keys, instances or why.
fn assert_one_generic_rejection(report: &Value) {
    assert_eq!(report["restarts"], 1, "{report}");
    assert_eq!(
        report["rejected"],
        json!([{ "code": -32602, "message": "Invalid cursor" }]),
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn alice_and_bob_traverse_through_the_proxy_each_on_one_instance() {
    let c = Cluster::start();
    let alice = c.mint("alice");
    let bob = c.mint("bob");
    // Alice on 2026-07-28 (stateless, the SDK probes server/discover),
    // bob on the legacy handshake (an Mcp-Session-Id session through the proxy).
    let from = c.mark();
    let a = list_all(&c.nginx.url(), &alice, "auto");
    let alice_served = c.served_since(from);
    let from = c.mark();
    let b = list_all(&c.nginx.url(), &bob, "legacy");
    let bob_served = c.served_since(from);
    assert_eq!(a["protocol"], MODERN);
    assert_eq!(b["protocol"], "2025-11-25");
    assert_eq!(listed(&a), uris(&ALICE), "{a}");
    assert_eq!(listed(&b), uris(&BOB), "{b}");
    assert_eq!(a["pages"], 4);
    assert_eq!(b["pages"], 2);
    // Every cursor came back to the instance that sealed it: no refusal.
    assert_eq!(a["rejected"], json!([]), "{a}");
    assert_eq!(b["rejected"], json!([]), "{b}");
    for served in [&alice_served, &bob_served] {
        assert!(served.len() >= 4, "{served:?}");
        assert!(
            served.iter().all(|i| *i == served[0]),
            "one caller, one instance: {served:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_record_inserted_into_postgresql_shows_up_through_either_instance() {
    a_record_inserted_into_the_database_shows_up_through_either_instance(Engine::Postgres).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_record_inserted_into_a_shared_sqlite_file_shows_up_through_either_instance() {
    a_record_inserted_into_the_database_shows_up_through_either_instance(Engine::Sqlite).await;
}

async fn a_record_inserted_into_the_database_shows_up_through_either_instance(engine: Engine) {
    let c = Cluster::start_on(engine);
    let on_a = c.token_on("alice", 0).await;
    let on_b = c.token_on("alice", 1).await;
    insert(&c.db, "a3x", "alice", "a3x");
    let mut want = uris(&ALICE);
    want.insert(3, "learn://documents/a3x".into());
    for (token, instance) in [(&on_a, 0), (&on_b, 1)] {
        let from = c.mark();
        let r = list_all(&c.nginx.url(), token, "auto");
        assert_eq!(listed(&r), want, "instance {instance}: {r}");
        assert_eq!(r["rejected"], json!([]), "{r}");
        let served = c.served_since(from);
        assert!(
            served.iter().all(|i| *i == instance),
            "instance {instance}: {served:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn stopping_the_serving_instance_moves_the_next_page_which_is_refused_then_restarts() {
    let mut c = Cluster::start();
    let token = c.token_on("alice", 0).await;
    let url = c.nginx.url();
    let from = c.mark();
    let mut after_stop = 0;
    let report = list_with_pause(&url, &token, || {
        assert!(c.served_since(from).iter().all(|i| *i == 0));
        c.stop(0);
        after_stop = c.mark();
    });
    assert_one_generic_rejection(&report);
    assert_eq!(listed(&report), uris(&ALICE), "{report}");
    // 1 page, the refused one, then 4 from the start.
    assert_eq!(report["pages"], 5, "{report}");
    let served = c.served_since(after_stop);
    assert!(
        !served.is_empty() && served.iter().all(|i| *i == 1),
        "after the stop every request went to the other instance: {served:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn restarting_an_instance_invalidates_its_old_cursors() {
    let mut c = Cluster::start();
    let token = c.token_on("alice", 1).await;
    let url = c.nginx.url();
    let mut after_restart = 0;
    let report = list_with_pause(&url, &token, || {
        c.restart(1);
        after_restart = c.mark();
    });
    assert_one_generic_rejection(&report);
    assert_eq!(listed(&report), uris(&ALICE), "{report}");
    let served = c.served_since(after_restart);
    assert!(
        !served.is_empty() && served.iter().all(|i| *i == 1),
        "the restarted instance (same port) answered: {served:?}"
    );
}

/// A JSON-RPC `resources/list` of exactly `len` bytes (padded in a param).
fn list_body_of(len: usize) -> Vec<u8> {
    let mut params = json!({ "pad": "" });
    params["_meta"] = modern_meta();
    let mut body = |pad: String| {
        params["pad"] = json!(pad);
        serde_json::to_vec(
            &json!({ "jsonrpc": "2.0", "id": 1, "method": "resources/list", "params": params }),
        )
        .unwrap()
    };
    let base = body(String::new()).len();
    let b = body("x".repeat(len - base));
    assert_eq!(b.len(), len);
    b
}

/// The proxy's body bound is the server's (`client_max_body_size 1m` =
/// `[http] max_body_bytes`, 1 MiB): a body of exactly 1 MiB reaches an
/// instance, one byte more gets 413 from nginx and reaches none.
#[tokio::test(flavor = "multi_thread")]
async fn the_proxy_passes_bodies_up_to_the_servers_bound_and_refuses_one_byte_more() {
    let c = Cluster::start();
    let auth = format!("Bearer {}", c.mint("alice"));
    let headers = [
        ("authorization", auth.as_str()),
        ("mcp-protocol-version", MODERN),
        ("mcp-method", "resources/list"),
    ];
    let from = c.mark();
    let at = post(&c.nginx.url(), &headers, list_body_of(1024 * 1024)).await;
    assert_eq!(at.status, 200, "{}", at.text());
    assert_eq!(
        at.json()["result"]["resources"].as_array().unwrap().len(),
        2
    );
    assert_eq!(c.served_since(from).len(), 1, "the instance answered");
    let from = c.mark();
    let over = post(&c.nginx.url(), &headers, list_body_of(1024 * 1024 + 1)).await;
    assert_eq!(over.status, 413);
    assert!(c.served_since(from).is_empty(), "no instance saw it");
    // nginx finalizes (and logs) a refused request only once it has
    // discarded the body, which can be after `settle`'s own request.
    let started = std::time::Instant::now();
    loop {
        let log = c.nginx.access_log();
        if log[from..].iter().any(|l| l.starts_with("- 413 ")) {
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{log:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// A token refresh (README "What a token refresh does to a traversal"):
/// the same caller's new token hashes anew. Landing on the instance that
/// sealed the cursor, the traversal continues (a cursor is bound to the
/// caller, not to the token string); landing on the other, the next page
/// gets the generic -32602 and a fresh listing completes there.
#[tokio::test(flavor = "multi_thread")]
async fn a_token_refresh_moves_a_traversal_only_when_the_new_token_hashes_elsewhere() {
    let c = Cluster::start();
    let first = c.token_on("alice", 0).await;
    let same = c.token_on("alice", 0).await;
    let other = c.token_on("alice", 1).await;
    assert!(first != same && first != other);
    let url = c.nginx.url();
    let page = |token: String, cursor: Option<String>| {
        let url = url.clone();
        async move {
            let params = cursor.map_or(json!({}), |c| json!({ "cursor": c }));
            modern(&url, Some(&token), json!(1), "resources/list", params)
                .await
                .json()
        }
    };
    let p1 = page(first.clone(), None).await;
    let cursor = p1["result"]["nextCursor"].as_str().unwrap().to_owned();
    // Refreshed onto the same instance: page 2 follows page 1.
    let from = c.mark();
    let p2 = page(same, Some(cursor.clone())).await;
    assert_eq!(
        p2["result"]["resources"][0]["uri"], "learn://documents/a3",
        "{p2}"
    );
    assert_eq!(c.served_since(from), [0]);
    // Refreshed onto the other instance: refused, generically.
    let from = c.mark();
    let refused = page(other.clone(), Some(cursor)).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(refused["error"]["message"], "Invalid cursor", "{refused}");
    assert!(refused["error"].get("data").is_none(), "{refused}");
    assert_eq!(c.served_since(from), [1]);
    // The client's restart without a cursor completes on the new instance.
    let from = c.mark();
    let (all, pages) = traverse(&url, &other).await;
    assert_eq!(all, uris(&ALICE));
    assert_eq!(pages, 4);
    assert!(c.served_since(from).iter().all(|i| *i == 1));
}
