//! What guests may reach: nothing without a grant (environment, stdin,
//! files, sockets, databases, HTTP all fail inside the guest and the host
//! logs it); granted SQLite, directories and HTTP origins work; backend work
//! stops with the call. Plus the Python and JavaScript guests end to end.

mod support;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use support::engines::{Engine, TestDb};
use support::*;

/// Read every URI at once (one task each); the texts in the same order.
async fn read_all_at_once(
    s: &Server,
    token: &str,
    uris: impl Iterator<Item = String>,
) -> Vec<String> {
    let reads: Vec<_> = uris
        .map(|uri| {
            let (url, token) = (s.url.clone(), token.to_owned());
            tokio::spawn(async move {
                let a = modern(
                    &url,
                    Some(&token),
                    json!(1),
                    "resources/read",
                    json!({ "uri": uri }),
                )
                .await;
                a.json()["result"]["contents"][0]["text"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{}", a.text()))
                    .to_owned()
            })
        })
        .collect();
    let mut texts = Vec::new();
    for read in reads {
        texts.push(read.await.unwrap());
    }
    texts
}

#[tokio::test]
async fn without_grants_nothing_is_reachable() {
    let s = server().hostile("probe", "denials", "").start();
    let token = s.token(Some("alice"), "hostile:read");
    let report = read_text(&s, &token, "hostile://probe/1").await;
    let expected = [
        "env=0",
        "stdin=eof",
        "file /etc/passwd=denied",
        "file /=denied",
        "file .=denied",
        "file /tmp=denied",
        "tcp=denied",
        "sql=Error::NotGranted",
    ];
    assert_eq!(report.lines().collect::<Vec<_>>(), expected, "{report}");
    s.expect_log(&[
        "guest asked for a database it was not granted",
        "database=documents",
    ]);

    // Outbound HTTP without a grant: refused inside the guest, logged by the host.
    let backend = FakeHttp::start(Arc::new(|_, _, _, _| (200, "secret".into()))).await;
    let s = server()
        .hostile(
            "fetcher",
            "fetch",
            &format!("[config]\nurl = \"{}/data\"\n", backend.url),
        )
        .start();
    let token = s.token(Some("alice"), "hostile:read");
    let out = read_text(&s, &token, "hostile://fetcher/1").await;
    assert!(
        out.starts_with("fetch failed: ") && out.contains("HttpRequestDenied"),
        "{out}"
    );
    assert_eq!(backend.hits(), 0, "nothing was sent");
    s.expect_log(&["outbound request denied", "source=fetcher"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_allow_listed_origin_works_and_others_do_not() {
    let backend = FakeHttp::start(Arc::new(|_, path, _, _| {
        (200, format!("hello from {path}"))
    }))
    .await;
    let port = backend.url.rsplit(':').next().unwrap().to_owned();
    let fetcher = |stem: &str, url: String, grant: &str| {
        format!(
            "[grants]\nhttp = [\"{grant}\"]\n[config]\nname = \"{stem}\"\nmode = \"fetch\"\nurl = \"{url}\"\n"
        )
    };
    let s = server()
        .source(
            "a-listed",
            "hostile/hostile",
            &fetcher("listed", format!("{}/items", backend.url), &backend.url),
        )
        .source(
            "b-other-port",
            "hostile/hostile",
            &fetcher("other", "http://127.0.0.1:1/items".into(), &backend.url),
        )
        .source(
            "c-other-host",
            "hostile/hostile",
            &fetcher(
                "otherhost",
                format!("http://localhost:{port}/items"),
                &backend.url,
            ),
        )
        // A name that is not itself a private address but resolves to one
        // ("127.1" is the C library's shorthand for 127.0.0.1).
        .source(
            "d-rebinding",
            "hostile/hostile",
            &fetcher(
                "rebinding",
                format!("http://127.1:{port}/items"),
                &format!("http://127.1:{port}"),
            ),
        )
        .start();
    let token = s.token(Some("alice"), "hostile:read");
    assert_eq!(
        read_text(&s, &token, "hostile://listed/1").await,
        "200 hello from /items"
    );
    for (name, why) in [
        ("other", "origin not in"),
        ("otherhost", "origin not in"),
        ("rebinding", "non-public address"),
    ] {
        let out = read_text(&s, &token, &format!("hostile://{name}/1")).await;
        assert!(out.starts_with("fetch failed"), "{name}: {out}");
        s.expect_log(&["outbound request denied", &format!("source={name}"), why]);
    }
    assert_eq!(
        backend.hits(),
        1,
        "only the listed request reached the backend"
    );
}

/// The prototype's `wstd` client saw 15-25 % "connection reset": it takes the
/// request body, starts the request, then finishes the (empty) body. The same
/// sequence here, empty and not, sequential and concurrent.
#[tokio::test(flavor = "multi_thread")]
async fn a_request_body_finished_after_the_request_started_goes_whole() {
    // (A chunked request would show as " chunked": the host sends bodies
    // whole, with their length.)
    let backend = FakeHttp::start(Arc::new(|method, _, headers, body| {
        let chunked = if headers.contains_key("transfer-encoding") {
            " chunked"
        } else {
            ""
        };
        (200, format!("{method} got {} bytes{chunked}", body.len()))
    }))
    .await;
    let poster = |name: &str, body: &str| {
        format!(
            "[grants]\nhttp = [\"{0}\"]\n[config]\nname = \"{name}\"\nmode = \"fetch\"\nurl = \"{0}/items\"\nbody = \"{body}\"\n",
            backend.url
        )
    };
    let s = server()
        .source("empty", "hostile/hostile", &poster("empty", ""))
        .source("hello", "hostile/hostile", &poster("hello", "hello"))
        .start();
    let token = s.token(Some("alice"), "hostile:read");
    for _ in 0..50 {
        assert_eq!(
            read_text(&s, &token, "hostile://empty/1").await,
            "200 POST got 0 bytes"
        );
        assert_eq!(
            read_text(&s, &token, "hostile://hello/1").await,
            "200 POST got 5 bytes"
        );
    }
    let uris = (0..40).map(|n| ["hostile://empty/1", "hostile://hello/1"][n % 2].to_owned());
    let texts = read_all_at_once(&s, &token, uris).await;
    for (n, text) in texts.iter().enumerate() {
        let bytes = [0, 5][n % 2];
        assert_eq!(text, &format!("200 POST got {bytes} bytes"));
    }
    assert_eq!(backend.hits(), 140);
}

/// The harshest backend for that sequence: it answers as soon as it has the
/// request head, without reading the body, and closes the connection. With
/// the body streamed (chunked) after the head, its kernel resets the
/// connection over the unread bytes and the response was lost about 1 time
/// in 200; the host now sends bodies whole, with their length.
#[tokio::test(flavor = "multi_thread")]
async fn a_backend_that_answers_before_the_body_and_closes() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = sock
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                    )
                    .await;
            });
        }
    });
    let poster = |name: &str, body: &str| {
        format!(
            "[grants]\nhttp = [\"{origin}\"]\n[config]\nname = \"{name}\"\nmode = \"fetch\"\nurl = \"{origin}/items\"\nbody = \"{body}\"\n"
        )
    };
    let s = server()
        .source("empty", "hostile/hostile", &poster("empty", ""))
        .source("hello", "hostile/hostile", &poster("hello", "hello"))
        .start();
    let token = s.token(Some("alice"), "hostile:read");
    let mut failures = Vec::new();
    for n in 0..400 {
        let uri = if n % 2 == 0 {
            "hostile://empty/1"
        } else {
            "hostile://hello/1"
        };
        let text = read_text(&s, &token, uri).await;
        if text != "200 ok" {
            failures.push(text);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of 400 failed: {:?}",
        failures.len(),
        failures.first()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn response_bodies_are_capped() {
    let backend = FakeHttp::start(Arc::new(|_, _, _, _| (200, "x".repeat(100_000)))).await;
    let manifest = format!(
        "[grants]\nhttp = [\"{0}\"]\n[grants.http_limits]\nmax_response_bytes = 1000\n[config]\nname = \"big\"\nmode = \"fetch\"\nurl = \"{0}/\"\n",
        backend.url
    );
    let s = server().source("big", "hostile/hostile", &manifest).start();
    let token = s.token(Some("alice"), "hostile:read");
    let out = read_text(&s, &token, "hostile://big/1").await;
    assert!(
        out.starts_with("fetch failed") && out.contains("body"),
        "{out}"
    );
}

/// The host never follows a redirect: a 302 to a path of the same allowed
/// origin reaches the guest as the 302 itself, and the backend sees one
/// request (a guest that wants the target asks for it, through the
/// allow-list like any request).
#[tokio::test(flavor = "multi_thread")]
async fn a_redirect_is_returned_to_the_guest_not_followed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = requests.clone();
    let reply = format!(
        "HTTP/1.1 302 Found\r\nlocation: {origin}/moved\r\ncontent-length: 5\r\nconnection: close\r\n\r\nmoved"
    );
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let (seen, reply) = (seen.clone(), reply.clone());
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let line = String::from_utf8_lossy(&head);
                seen.lock()
                    .unwrap()
                    .push(line.lines().next().unwrap_or("").to_owned());
                let _ = sock.write_all(reply.as_bytes()).await;
            });
        }
    });
    let s = server()
        .hostile(
            "redirected",
            "fetch",
            &format!("[grants]\nhttp = [\"{origin}\"]\n[config]\nurl = \"{origin}/start\"\n"),
        )
        .start();
    let token = s.token(Some("alice"), "hostile:read");
    assert_eq!(
        read_text(&s, &token, "hostile://redirected/1").await,
        "302 moved"
    );
    assert_eq!(*requests.lock().unwrap(), ["GET /start HTTP/1.1"]);
}

#[tokio::test]
async fn a_granted_directory_is_readable_and_read_only() {
    let assets = tempfile::tempdir().unwrap();
    std::fs::write(assets.path().join("hello.txt"), "hello, guest").unwrap();
    let s = server()
        .config(&format!(
            "[directories.assets]\npath = \"{}\"\n",
            assets.path().display()
        ))
        .hostile(
            "reader",
            "readfile",
            "[grants]\ndirectories = [\"assets\"]\n",
        )
        .hostile("stranger", "readfile", "")
        .start();
    let token = s.token(Some("alice"), "hostile:read");
    let granted = read_text(&s, &token, "hostile://reader/1").await;
    assert!(
        granted.starts_with("read=Ok(\"hello, guest\")"),
        "{granted}"
    );
    assert!(granted.contains("write=Err("), "{granted}");
    assert!(!assets.path().join("hello.txt.new").exists());
    let stranger = read_text(&s, &token, "hostile://stranger/1").await;
    assert!(stranger.starts_with("read=Err("), "{stranger}");
}

/// A SQLite database with the documents schema, and a server whose `runaway`
/// source runs a recursive CTE that would count forever.
fn sqlite_server(budget: &str, extra_config: &str) -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db.sqlite");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2), (3);")
        .unwrap();
    let s = server()
        .config(&format!("[databases.main]\nfile = \"{}\"\n", db.display()))
        .hostile(
            "runaway",
            "sql",
            &format!(
                "[budget]\n{budget}\n[grants]\ndatabases = [\"main\"]\n[config]\ndatabase = \"main\"\n\
                 sql = \"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c\"\n{extra_config}"
            ),
        )
        .hostile("rows", "sql", "[grants]\ndatabases = [\"main\"]\n[config]\ndatabase = \"main\"\nsql = \"SELECT x FROM t\"\nmax_rows = \"2\"\n")
        .hostile("escape", "sql", "[grants]\ndatabases = [\"main\"]\n[config]\ndatabase = \"main\"\nsql = \"ATTACH DATABASE '/tmp/emseepea-escape.db' AS other\"\n")
        .start();
    (s, dir)
}

#[tokio::test]
async fn a_long_statement_is_interrupted_at_the_deadline() {
    let (s, _dir) = sqlite_server("max_duration_ms = 500", "");
    let token = s.token(Some("alice"), "hostile:read");
    let a = modern(
        &s.url,
        Some(&token),
        json!(1),
        "resources/read",
        json!({"uri":"hostile://runaway/1"}),
    )
    .await;
    assert_generic_internal_error(&a, &[]);
    s.expect_log(&["sqlite statement interrupted", "database=main"]);
    s.expect_log(&["source=\"runaway\"", "reason=\"deadline\""]);
}

#[tokio::test]
async fn a_long_statement_is_interrupted_when_the_request_is_cancelled() {
    let (s, _dir) = sqlite_server("max_duration_ms = 60000", "");
    let token = s.token(Some("alice"), "hostile:read");
    let session = Session::open(&s.url, "2025-11-25", Some(&token)).await;
    let url = s.url.clone();
    let headers = session.headers();
    let pending = tokio::spawn(async move {
        let refs: Vec<(&str, &str)> = headers
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        post(&url, &refs, serde_json::to_vec(&json!({"jsonrpc":"2.0","id":"q","method":"resources/read","params":{"uri":"hostile://runaway/1"}})).unwrap()).await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        s.log_lines_with("sqlite statement interrupted") == 0,
        "not yet"
    );
    session
        .send(
            json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"q"}}),
        )
        .await;
    let a = tokio::time::timeout(Duration::from_secs(10), pending)
        .await
        .unwrap()
        .unwrap();
    assert!(
        a.body.is_empty(),
        "no result for a cancelled request: {}",
        a.text()
    );
    s.expect_log(&["sqlite statement interrupted", "database=main"]);
}

#[tokio::test]
async fn a_long_statement_is_interrupted_when_the_client_disconnects() {
    use std::io::Write;
    let (s, _dir) = sqlite_server("max_duration_ms = 60000", "");
    let token = s.token(Some("alice"), "hostile:read");
    let uri = "hostile://runaway/1";
    let body = serde_json::to_vec(&json!({"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":uri,"_meta":modern_meta()}})).unwrap();
    let mut sock = std::net::TcpStream::connect(s.host_port()).unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nMCP-Protocol-Version: {MODERN}\r\nMcp-Method: resources/read\r\n\
         Mcp-Name: {uri}\r\nAuthorization: Bearer {token}\r\nContent-Length: {}\r\n\r\n",
        s.host_port(),
        body.len()
    );
    sock.write_all(head.as_bytes()).unwrap();
    sock.write_all(&body).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    drop(sock);
    s.expect_log(&["sqlite statement interrupted", "database=main"]);
}

#[tokio::test]
async fn statements_are_bounded_and_confined_to_their_file() {
    let (s, _dir) = sqlite_server("", "");
    let token = s.token(Some("alice"), "hostile:read");
    assert_eq!(
        read_text(&s, &token, "hostile://rows/1").await,
        "query: Error::TooLarge",
        "3 rows for max_rows = 2"
    );
    let escape = read_text(&s, &token, "hostile://escape/1").await;
    assert!(escape.starts_with("query: Error::Failed("), "{escape}");
    assert!(!std::path::Path::new("/tmp/emseepea-escape.db").exists());
}

fn notes_db(engine: Engine, rows: usize) -> TestDb {
    let db = TestDb::new(
        engine,
        &std::fs::read_to_string(root().join("guest-examples/python-notes/sql/schema.sql"))
            .unwrap(),
    );
    db.insert_rows("notes (id, owner, sort_key, title, body)", rows, |i| {
        let owner = if i % 4 == 3 { "bob" } else { "alice" };
        format!("('n{i}', '{owner}', '{i:06}', 'n{i}', 'note n{i}')")
    });
    db
}

#[tokio::test]
async fn python_notes_end_to_end() {
    python_notes_end_to_end_on(Engine::Sqlite).await;
}

#[tokio::test]
async fn python_notes_end_to_end_on_postgres() {
    python_notes_end_to_end_on(Engine::Postgres).await;
}

async fn python_notes_end_to_end_on(engine: Engine) {
    let db = notes_db(engine, 10_000);
    let manifest = std::fs::read_to_string(root().join("target/guests/python-notes.toml")).unwrap();
    let s = server()
        .config(&db.section("notes"))
        .source("python-notes", "python-notes", &manifest)
        .start();
    let alice = s.token(Some("alice"), "notes:read");
    let bob = s.token(Some("bob"), "notes:read");
    let (uris, _) = traverse(&s.url, &alice).await;
    assert_eq!(uris.len(), 7_500);
    assert_eq!(
        uris.iter().collect::<HashSet<_>>().len(),
        7_500,
        "every row once"
    );
    assert_eq!(read_text(&s, &alice, "notes://notes/n0").await, "note n0");
    let nf = modern(
        &s.url,
        Some(&bob),
        json!(1),
        "resources/read",
        json!({"uri":"notes://notes/n0"}),
    )
    .await
    .json();
    assert_eq!(
        nf["error"]["code"], -32602,
        "bob cannot read alice's note: {nf}"
    );
    // A deletion between pages shows on the next page.
    let first = modern(&s.url, Some(&bob), json!(1), "resources/list", json!({}))
        .await
        .json();
    let cursor = first["result"]["nextCursor"].as_str().unwrap().to_owned();
    let last_of_first: Value = first["result"]["resources"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last_of_first["uri"], "notes://notes/n199");
    db.exec("DELETE FROM notes WHERE id = 'n203'");
    let second = modern(
        &s.url,
        Some(&bob),
        json!(1),
        "resources/list",
        json!({ "cursor": cursor }),
    )
    .await
    .json();
    let ids: Vec<&str> = second["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(ids[0], "notes://notes/n207", "n203 was deleted");
}

#[tokio::test]
async fn javascript_catalog_end_to_end() {
    let manifest = std::fs::read_to_string(root().join("target/guests/js-catalog.toml")).unwrap();
    let s = server()
        .source("js-catalog", "js-catalog", &manifest)
        .start();
    let token = s.token(Some("alice"), "catalog:read");
    let (uris, _) = traverse(&s.url, &token).await;
    assert_eq!(uris.len(), 500);
    assert_eq!(uris.iter().collect::<HashSet<_>>().len(), 500);
    assert_eq!(uris[499], "jscat://items/0000000500");
    assert_eq!(
        read_text(&s, &token, "jscat://items/0000000042").await,
        "Item 42 of the JavaScript catalog.\n"
    );
    let nf = read_answer(&s, &token, "jscat://items/0000009999")
        .await
        .json();
    assert_eq!(nf["error"]["code"], -32602);
}

/// Outbound HTTP from a JavaScript guest: `fetch` inside an async export,
/// through the same allow-list as the Rust guests.
#[tokio::test(flavor = "multi_thread")]
async fn javascript_fetch_reaches_only_a_granted_backend() {
    let backend = FakeHttp::start(Arc::new(|method, path, headers, _| {
        let caller = headers
            .get("x-caller")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("?");
        match path {
            "/details/0000000404" => (404, String::new()),
            "/details/0000000500" => (503, "down".into()),
            _ => (200, format!("{method} {path} for {caller}")),
        }
    }))
    .await;
    let manifest = std::fs::read_to_string(root().join("target/guests/js-catalog.toml")).unwrap();
    let config = format!("details_url = \"{}/details\"\n", backend.url);
    let granted = manifest.replace(
        "[config]\n",
        &format!("[grants]\nhttp = [\"{}\"]\n[config]\n{config}", backend.url),
    );
    let s = server()
        .source("js-catalog", "js-catalog", &granted)
        .start();
    let token = s.token(Some("alice"), "catalog:read");
    assert_eq!(
        read_text(&s, &token, "jscat://items/0000000042").await,
        "GET /details/0000000042 for alice"
    );
    // The backend's 404 is the guest's not-found; its 503 a generic error.
    let nf = read_answer(&s, &token, "jscat://items/0000000404")
        .await
        .json();
    assert_eq!(nf["error"]["code"], -32602, "{nf}");
    let failed = read_answer(&s, &token, "jscat://items/0000000500").await;
    assert_generic_internal_error(&failed, &["503", "details"]);
    assert_eq!(backend.hits(), 3);
    // The prototype saw 15-25 % "connection reset" from a Rust `wstd` client;
    // none here, over 40 concurrent fetches.
    let uris = (1..=40).map(|n| format!("jscat://items/{n:010}"));
    let texts = read_all_at_once(&s, &token, uris).await;
    for (n, text) in (1..=40).zip(texts) {
        assert_eq!(text, format!("GET /details/{n:010} for alice"));
    }
    assert_eq!(backend.hits(), 43);

    // The same guest and config without the grant: nothing leaves the host.
    let ungranted = manifest.replace("[config]\n", &format!("[config]\n{config}"));
    let s = server()
        .source("js-catalog", "js-catalog", &ungranted)
        .start();
    let token = s.token(Some("alice"), "catalog:read");
    let denied = read_answer(&s, &token, "jscat://items/0000000042").await;
    assert_generic_internal_error(&denied, &["details", "unreachable"]);
    s.expect_log(&["outbound request denied", "source=js-catalog"]);
    assert_eq!(
        backend.hits(),
        43,
        "the denied request never reached the backend"
    );
}

/// The documents example's database (alice: a-001..a-004, bob: b-001,
/// b-002), granted read-only to the `documents` source and to a hostile
/// source `stem` that runs `script` (one statement a line) on it, with
/// `budget` (lines of its `[budget]` table) and `config` (more `[config]`).
fn shared_documents(
    stem: &str,
    script: &str,
    budget: &str,
    config: &str,
) -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("documents.sqlite");
    let sql =
        |f: &str| std::fs::read_to_string(root().join("guest-examples/documents/sql").join(f));
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(&(sql("schema.sql").unwrap() + &sql("seed.sql").unwrap()))
        .unwrap();
    let s = server()
        .config(&format!("[databases.documents]\nfile = \"{}\"\n", db.display()))
        .source(
            "documents",
            "documents",
            "[grants]\ndatabases = [\"documents\"]\n",
        )
        .hostile(
            stem,
            "sql-script",
            &format!(
                "[budget]\n{budget}\n[grants]\ndatabases = [\"documents\"]\n[config]\ndatabase = \"documents\"\nscript = {}\n{config}\n",
                toml_string(script)
            ),
        )
        .start();
    (s, dir)
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// Every line of a `sql-script` report is a refusal by the database.
fn assert_all_refused(report: &str, statements: usize) {
    let lines: Vec<&str> = report.lines().collect();
    assert_eq!(lines.len(), statements, "{report}");
    for line in lines {
        assert!(line.starts_with("error: Error::Failed("), "{report}");
    }
}

/// Issue 9.1: a TEMP VIEW made by one source shadowed `documents` for every
/// later user of the pooled connection, and bob listed alice's records.
#[tokio::test]
async fn a_temp_view_from_one_source_never_reaches_another() {
    let view = "CREATE TEMP VIEW documents AS SELECT id, 'bob' AS owner, order_key, title, body, deleted FROM main.documents";
    let (s, _dir) = shared_documents("shadow", view, "", "");
    let mallory = s.token(Some("mallory"), "hostile:read");
    let bob = s.token(Some("bob"), "documents:read");
    let attempt = read_text(&s, &mallory, "hostile://shadow/1").await;
    for _ in 0..3 {
        let (uris, _) = traverse(&s.url, &bob).await;
        assert_eq!(
            uris,
            ["learn://documents/b-001", "learn://documents/b-002"],
            "bob lists his records only"
        );
        let nf = read_answer(&s, &bob, "learn://documents/a-001")
            .await
            .json();
        assert_eq!(nf["error"]["code"], -32602, "bob cannot read alice's: {nf}");
    }
    assert_all_refused(&attempt, 1);
    s.expect_log(&[
        "sqlite statement refused by the authorizer",
        "database=documents",
    ]);
}

/// Issue 9.1: `PRAGMA hard_heap_limit = 1` (process-wide) made every SQLite
/// statement of the process fail until restart.
#[tokio::test]
async fn a_guest_cannot_lower_the_process_heap_limit() {
    let script = "PRAGMA hard_heap_limit = 1\nPRAGMA soft_heap_limit = 1\nSELECT * FROM pragma_hard_heap_limit";
    let (s, _dir) = shared_documents("heap", script, "", "");
    let mallory = s.token(Some("mallory"), "hostile:read");
    let alice = s.token(Some("alice"), "documents:read");
    let attempt = read_text(&s, &mallory, "hostile://heap/1").await;
    let (uris, _) = traverse(&s.url, &alice).await;
    assert_eq!(
        uris.len(),
        4,
        "the documents source keeps working: {uris:?}"
    );
    assert_eq!(
        read_text(&s, &alice, "learn://documents/a-001").await,
        "Ship the inventory host by Q2."
    );
    assert_all_refused(&attempt, 3);
    // And the attacker's own next call is refused the same way, not broken.
    assert_all_refused(&read_text(&s, &mallory, "hostile://heap/1").await, 3);
}

/// Issue 9.1: `PRAGMA temp_store_directory` (process-wide) was accepted.
#[tokio::test]
async fn a_guest_cannot_move_the_temp_directory() {
    let elsewhere = tempfile::tempdir().unwrap();
    let script = format!(
        "PRAGMA temp_store_directory = '{0}'\nPRAGMA temp_store_directory\nPRAGMA data_store_directory = '{0}'",
        elsewhere.path().display()
    );
    let (s, _dir) = shared_documents("tempdir", &script, "", "");
    let mallory = s.token(Some("mallory"), "hostile:read");
    assert_all_refused(&read_text(&s, &mallory, "hostile://tempdir/1").await, 3);
}

/// Issue 9.1: writes on a read-only grant, TEMP tables included (the file is
/// opened read-only, but TEMP objects were writable).
#[tokio::test]
async fn a_read_only_grant_refuses_every_write() {
    let script = "CREATE TEMP TABLE scratch (x)\n\
                  CREATE TABLE temp.scratch2 (x)\n\
                  INSERT INTO documents (id, owner, order_key, title, body) VALUES ('m-1', 'bob', 'z', 't', 'b')\n\
                  UPDATE documents SET owner = 'mallory'\n\
                  DELETE FROM documents\n\
                  PRAGMA user_version = 7";
    let (s, dir) = shared_documents("writer", script, "", "");
    let mallory = s.token(Some("mallory"), "hostile:read");
    assert_all_refused(&read_text(&s, &mallory, "hostile://writer/1").await, 6);
    let db = rusqlite::Connection::open(dir.path().join("documents.sqlite")).unwrap();
    let (rows, owners): (i64, i64) = db
        .query_row(
            "SELECT count(*), count(DISTINCT owner) FROM documents",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((rows, owners), (6, 2), "nothing was written");
}

/// Issue 9.1: `BEGIN` left a transaction open on a pooled connection: the
/// application's own writer got "database is locked" (rollback journal) and
/// later readers a stale snapshot (WAL). Transaction control is refused, and
/// each statement is its own transaction.
#[tokio::test]
async fn a_transaction_never_outlives_its_statement() {
    for journal in ["DELETE", "WAL"] {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("app.sqlite");
        let app = rusqlite::Connection::open(&file).unwrap();
        app.pragma_update(None, "journal_mode", journal).unwrap();
        app.execute_batch("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2), (3);")
            .unwrap();
        app.busy_timeout(Duration::ZERO).unwrap();
        let script = "SELECT count(*) FROM t\nBEGIN\nSAVEPOINT s\nSELECT count(*) FROM t";
        let s = server()
            .config(&format!(
                "[databases.app]\nfile = \"{}\"\nread_only = false\n",
                file.display()
            ))
            .hostile(
                "txn",
                "sql-script",
                &format!(
                    "[grants]\ndatabases = [\"app\"]\n[config]\ndatabase = \"app\"\nscript = {}\n",
                    toml_string(script)
                ),
            )
            .start();
        let token = s.token(Some("alice"), "hostile:read");
        let first = read_text(&s, &token, "hostile://txn/1").await;
        app.execute("INSERT INTO t VALUES (4)", [])
            .unwrap_or_else(|e| panic!("{journal}: the application's writer: {e}"));
        let second = read_text(&s, &token, "hostile://txn/1").await;
        for (report, count) in [(first, 3), (second, 4)] {
            let ok = format!("ok rows=1 first={count}");
            let lines: Vec<&str> = report.lines().collect();
            assert_eq!(lines.len(), 4, "{report}");
            assert_eq!(
                [lines[0], lines[3]],
                [ok.as_str(); 2],
                "{journal}: each call sees the latest write: {report}"
            );
            for line in &lines[1..3] {
                assert!(
                    line.starts_with("error: Error::Failed("),
                    "{journal}: BEGIN and SAVEPOINT are refused: {report}"
                );
            }
        }
    }
}

/// The hostile source `hog` with a 32 MiB budget, on the documents database.
fn memory_server(script: &str, on_error: &str) -> (Server, tempfile::TempDir) {
    shared_documents(
        "hog",
        script,
        "memory_bytes = 33554432\nmax_duration_ms = 30000",
        &format!("on_error = \"{on_error}\""),
    )
}

/// Issue 9.1: SQLite's own memory was not charged to the call: 4 concurrent
/// reads with a 32 MiB budget, each making 66 MB strings 4 times, all
/// succeeded and the process grew by more than 1 GiB. Now each call's
/// values are bounded by its SQLite share (a quarter of its budget; half of
/// that per value), so each read gets the generic error.
#[tokio::test(flavor = "multi_thread")]
async fn sqlite_memory_is_bounded_by_the_call_budget() {
    let script = ["SELECT length(hex(zeroblob(33000000)))"; 4].join("\n");
    let (s, _dir) = memory_server(&script, "fail");
    let token = s.token(Some("mallory"), "hostile:read");
    let before = peak_rss_kib(s.pid());
    let reads: Vec<_> = (0..4)
        .map(|_| {
            let (url, token) = (s.url.clone(), token.clone());
            tokio::spawn(async move {
                modern(
                    &url,
                    Some(&token),
                    json!(1),
                    "resources/read",
                    json!({"uri": "hostile://hog/1"}),
                )
                .await
            })
        })
        .collect();
    for read in reads {
        assert_generic_internal_error(&read.await.unwrap(), &["TooLarge"]);
    }
    s.expect_log(&["hog", "statement 0 failed: Error::TooLarge"]);
    // A generous bound (the unbounded version grew by 1.1-1.3 GiB).
    let grown = peak_rss_kib(s.pid()) - before;
    eprintln!("peak RSS grew by {grown} KiB");
    assert!(grown < 256 << 10, "peak RSS grew by {grown} KiB");
}

/// The largest value a statement may make is half the call's SQLite share:
/// with 32 MiB, 4 MiB. `hex()` makes twice its input plus a terminator, so
/// 2 MiB - 1 bytes is the largest input that fits.
#[tokio::test]
async fn a_value_just_over_the_length_limit_is_too_large() {
    let fits = (32 << 20) / 4 / 2 / 2 - 1;
    let script = format!(
        "SELECT length(hex(zeroblob({fits})))\nSELECT length(hex(zeroblob({})))",
        fits + 1
    );
    let (s, _dir) = memory_server(&script, "report");
    let token = s.token(Some("mallory"), "hostile:read");
    assert_eq!(
        read_text(&s, &token, "hostile://hog/1").await,
        format!("ok rows=1 first={}\nerror: Error::TooLarge", 2 * fits)
    );
}

/// Beyond single values, SQLite's heap as a whole is bounded: a DISTINCT
/// over 10,000 random 1,000-byte blobs (~11 MB of temp b-tree in memory)
/// fits the process limit (64 MiB base + running calls' shares), ten times
/// as many do not and get `too-large`; the source's next call works.
#[tokio::test]
async fn a_statement_past_the_process_heap_limit_is_too_large() {
    let distinct = |rows: u32| {
        format!(
            "SELECT count(DISTINCT x) > 0 FROM (WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c LIMIT {rows}) SELECT randomblob(1000) AS x FROM c)"
        )
    };
    let script = format!("{}\n{}", distinct(10_000), distinct(100_000));
    let (s, _dir) = memory_server(&script, "report");
    let token = s.token(Some("mallory"), "hostile:read");
    for _ in 0..2 {
        assert_eq!(
            read_text(&s, &token, "hostile://hog/1").await,
            "ok rows=1 first=1\nerror: Error::TooLarge"
        );
    }
}

/// A PostgreSQL database that goes down: the source granted it answers the
/// generic error (the reason in the log, never to the client) within its
/// connect timeout, and another source keeps serving; when it is back the
/// source serves again without a restart.
#[tokio::test]
async fn a_postgres_database_that_is_down_fails_its_source_only() {
    let mut down = notes_db(Engine::Postgres, 3);
    let other = notes_db(Engine::Sqlite, 3);
    let manifest = std::fs::read_to_string(root().join("target/guests/python-notes.toml")).unwrap();
    let s = server()
        .config(&format!(
            "{}{}",
            down.section("notes"),
            other.section("other")
        ))
        .source("python-notes", "python-notes", &manifest)
        .hostile(
            "zz-other",
            "sql-script",
            "[grants]\ndatabases = [\"other\"]\n[config]\ndatabase = \"other\"\nscript = \"SELECT count(*) FROM notes\"\n",
        )
        .start();
    let alice = s.token(Some("alice"), "notes:read");
    assert_eq!(read_text(&s, &alice, "notes://notes/n0").await, "note n0");
    let TestDb::Postgres(pg) = &mut down else {
        unreachable!()
    };
    pg.stop();
    let refused = read_answer(&s, &alice, "notes://notes/n0").await;
    assert_generic_internal_error(&refused, &["database unavailable", "127.0.0.1"]);
    assert!(
        s.wait_for_log(&["database unavailable"], Duration::from_secs(5))
            .is_some(),
        "{}",
        s.log()
    );
    // The other source, on another database, is not affected.
    let mallory = s.token(Some("mallory"), "hostile:read");
    assert_eq!(
        read_text(&s, &mallory, "hostile://zz-other/1").await,
        "ok rows=1 first=3"
    );
}
