//! The bounds of the request pipeline (bodies and batches) and the rules
//! that used to differ between its paths: each limit as an obeyed/violated
//! pair, and the attacks observed on the old transport, now bounded.

mod support;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use support::*;

fn body(v: Value) -> Vec<u8> {
    serde_json::to_vec(&v).unwrap()
}

/// A raw HTTP/1.1 request head for the endpoint.
fn head(s: &Server, extra: &str, content_length: usize) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json\r\n{extra}Content-Length: {content_length}\r\n\r\n",
        s.host_port()
    )
}

/// Everything the server sends until it closes (or 20 s pass: a hang guard,
/// long past any deadline these tests configure).
fn read_all(sock: &mut TcpStream) -> String {
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut answer = Vec::new();
    let _ = sock.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn a_body_that_stalls_is_cut_off_at_the_body_deadline() {
    let s = server()
        .config("[http]\nbody_timeout_ms = 1000\n")
        .source("catalog", "catalog", "[config]\nitems = \"3\"\n")
        .start();
    let token = s.token(Some("alice"), "catalog:read");
    // The observed attack: many connections each announcing 1 MiB - 1 byte
    // and sending it slowly. Each is answered 408 and closed at the deadline.
    let mut socks: Vec<TcpStream> = (0..40)
        .map(|_| {
            let mut sock = TcpStream::connect(s.host_port()).unwrap();
            let auth = format!("Authorization: Bearer {token}\r\n");
            sock.write_all(head(&s, &auth, (1 << 20) - 1).as_bytes())
                .unwrap();
            sock.write_all(b"{\"jsonrpc\":").unwrap();
            sock
        })
        .collect();
    // Meanwhile a well-formed request is served.
    let ok = modern(&s.url, Some(&token), json!(1), "resources/list", json!({})).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    for sock in &mut socks {
        let answer = read_all(sock);
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(
            answer.to_ascii_lowercase().contains("connection: close"),
            "{answer}"
        );
    }
    s.expect_log(&["request body not received within its deadline"]);

    // Obeyed: a body that arrives in pieces, but whole within the deadline.
    let msg = body(
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
    );
    let mut sock = TcpStream::connect(s.host_port()).unwrap();
    sock.write_all(head(&s, "Connection: close\r\n", msg.len()).as_bytes())
        .unwrap();
    let (first, rest) = msg.split_at(msg.len() / 2);
    sock.write_all(first).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    sock.write_all(rest).unwrap();
    let answer = read_all(&mut sock);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[tokio::test]
async fn a_smaller_body_limit_applies_until_a_token_is_verified() {
    let s = server()
        .config("[http]\nmax_body_bytes = 4000\nmax_unauthenticated_body_bytes = 1000\n")
        .source("catalog", "catalog", "[config]\nitems = \"3\"\n")
        .start();
    let token = s.token(Some("alice"), "catalog:read");
    let auth = format!("Bearer {token}");
    // A ping padded with whitespace to exactly `n` bytes.
    let padded = |n: usize| {
        let mut b = body(
            json!({"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":modern_meta()}}),
        );
        assert!(b.len() <= n);
        b.resize(n, b' ');
        b
    };
    let headers = [
        ("mcp-protocol-version", MODERN),
        ("mcp-method", "server/discover"),
    ];
    let with_token = [
        ("mcp-protocol-version", MODERN),
        ("mcp-method", "server/discover"),
        ("authorization", auth.as_str()),
    ];
    // Anonymous: up to 1000 bytes.
    assert_eq!(post(&s.url, &headers, padded(1000)).await.status, 200);
    assert_eq!(post(&s.url, &headers, padded(1001)).await.status, 413);
    // With a verified token: up to 4000.
    assert_eq!(post(&s.url, &with_token, padded(1001)).await.status, 200);
    assert_eq!(post(&s.url, &with_token, padded(4000)).await.status, 200);
    assert_eq!(post(&s.url, &with_token, padded(4001)).await.status, 413);
    // A bad token is refused before its body is read at all.
    let bad = [
        ("mcp-protocol-version", MODERN),
        ("mcp-method", "server/discover"),
        ("authorization", "Bearer not-a-token"),
    ];
    let a = post(&s.url, &bad, padded(4000)).await;
    assert_eq!(a.status, 401, "{}", a.text());
    // The observed attack: 1 MiB - 1 byte sent without a token is refused
    // from its Content-Length, before the body is read.
    let mut sock = TcpStream::connect(s.host_port()).unwrap();
    sock.write_all(head(&s, "", (1 << 20) - 1).as_bytes())
        .unwrap();
    let answer = read_all(&mut sock);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
}

/// A 2025-03-26 session with a token for `scope`.
async fn batch_session(s: &Server, scope: &str) -> Session {
    let token = s.token(Some("alice"), scope);
    Session::open(&s.url, "2025-03-26", Some(&token)).await
}

#[tokio::test]
async fn a_batch_has_an_item_limit() {
    let s = server()
        .config("[http]\nmax_batch_items = 5\n")
        .source("catalog", "catalog", "[config]\nitems = \"3\"\n")
        .start();
    let session = batch_session(&s, "catalog:read").await;
    let pings = |n: usize| -> Value {
        (0..n)
            .map(|i| json!({"jsonrpc":"2.0","id":i,"method":"ping"}))
            .collect()
    };
    let a = session.send(pings(5)).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.json().as_array().unwrap().len(), 5);
    let a = session.send(pings(6)).await;
    assert_eq!(a.status, 400, "{}", a.text());
    assert_eq!(a.json()["error"]["code"], -32600);
    assert!(a.json().get("id").is_none());
}

#[tokio::test]
async fn a_17000_item_batch_is_refused_whole() {
    let s = server()
        .source("catalog", "catalog", "[config]\nitems = \"3\"\n")
        .start();
    let session = batch_session(&s, "catalog:read").await;
    // The observed attack: 17,000 resources/list calls in one 1 MB batch.
    let batch: Value = (0..17_000)
        .map(|i| json!({"jsonrpc":"2.0","id":i,"method":"resources/list"}))
        .collect();
    assert!(body(batch.clone()).len() < 1 << 20);
    let calls_before = s.log_lines_with("guest call");
    let a = session.send(batch).await;
    let start: String = a.text().chars().take(300).collect();
    assert_eq!(a.status, 400, "{start}");
    assert_eq!(a.json()["error"]["code"], -32600);
    assert!(a.body.len() < 200, "{}", a.text());
    assert_eq!(s.log_lines_with("guest call"), calls_before, "no item ran");
    s.expect_log(&["batch refused: more items than max_batch_items"]);
}

#[tokio::test]
async fn a_batch_has_one_deadline() {
    let s = server()
        .config("[http]\nrequest_timeout_ms = 1000\n")
        .hostile("slow", "sleep", "")
        .hostile("ctx", "context", "")
        .start();
    let session = batch_session(&s, "hostile:read").await;
    let read = |id: usize, uri: &str| json!({"jsonrpc":"2.0","id":id,"method":"resources/read","params":{"uri":uri}});
    // Obeyed: a read in a batch of its own is served.
    let a = session.send(json!([read(0, "hostile://ctx/1")])).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert!(a.json()[0]["result"]["contents"].is_array(), "{}", a.text());
    // The observed attack: 8 reads of a slow source, each once given a fresh
    // deadline (8 × the request timeout). Now the first uses up the batch's
    // one deadline and nothing after it runs, not even a fast read.
    let mut items: Vec<Value> = (1..=8).map(|i| read(i, "hostile://slow/1")).collect();
    items.push(read(9, "hostile://ctx/1"));
    let a = session.send(Value::Array(items)).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let answers = a.json();
    let answers = answers.as_array().unwrap();
    assert_eq!(answers.len(), 9, "{}", a.text());
    for answer in answers {
        assert_generic_internal_error(
            &Answer {
                status: 200,
                headers: a.headers.clone(),
                body: serde_json::to_vec(answer).unwrap(),
            },
            &[],
        );
    }
    s.expect_log(&["batch deadline passed"]);
    assert_eq!(
        s.log_lines_with("batch deadline passed"),
        8,
        "items 2..9 are answered without running:\n{}",
        s.log()
    );
}

#[tokio::test]
async fn the_result_bound_covers_the_whole_batch_response() {
    let text = "x".repeat(300);
    let s = server()
        .config("max_application_result_bytes = 1024\n")
        .config(&format!(
            "[[resources]]\nuri = \"test://t\"\nname = \"t\"\ntext = \"{text}\"\n"
        ))
        .auth(None)
        .start();
    let session = Session::open(&s.url, "2025-03-26", None).await;
    let read = |id: u32| json!({"jsonrpc":"2.0","id":id,"method":"resources/read","params":{"uri":"test://t"}});
    let one = session.send(read(1)).await;
    assert_eq!(one.status, 200, "{}", one.text());
    let r = one.body.len();
    // Two results fit in 1024 bytes with the array's brackets and comma; three do not.
    assert!(2 * r + 3 <= 1024 && 3 * r + 4 > 1024, "result is {r} bytes");
    let a = session.send(json!([read(1), read(2)])).await;
    assert_eq!(a.status, 200);
    assert!(a.body.len() <= 1024);
    assert!(a.json()[1]["result"].is_object(), "{}", a.text());
    let a = session.send(json!([read(1), read(2), read(3)])).await;
    assert_eq!(a.status, 200);
    let v = a.json();
    assert!(v[0]["result"].is_object() && v[1]["result"].is_object());
    assert_eq!(v[2]["id"], 3);
    assert_eq!(v[2]["error"]["code"], -32603, "{}", a.text());
    s.expect_log(&["batch response would exceed max_application_result_bytes"]);
}

#[tokio::test]
async fn a_batch_with_a_listing_is_private() {
    let s = server()
        .source("catalog", "catalog", "[config]\nitems = \"3\"\n")
        .start();
    let session = batch_session(&s, "catalog:read").await;
    let a = session
        .send(json!([
            {"jsonrpc":"2.0","id":1,"method":"ping"},
            {"jsonrpc":"2.0","id":2,"method":"resources/list"}
        ]))
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert!(
        a.json()[1]["result"]["resources"].is_array(),
        "{}",
        a.text()
    );
    assert_eq!(
        a.header("cache-control").as_deref(),
        Some("private, max-age=0, no-store")
    );
    // The same listing alone carries the same header.
    let mut single = batch_session(&s, "catalog:read").await;
    let a = single.request("resources/list", Value::Null).await;
    assert_eq!(
        a.header("cache-control").as_deref(),
        Some("private, max-age=0, no-store")
    );
}

#[tokio::test]
async fn a_template_listing_cursor_is_as_public_as_it_is_advertised() {
    let s = server()
        .config("[list_pagination]\npage_size = 1\n")
        .source("catalog", "catalog", "[config]\nitems = \"3\"\n")
        .source("template", "conformance/template-data", "")
        .start();
    let first = modern(
        &s.url,
        None,
        json!(1),
        "resources/templates/list",
        json!({}),
    )
    .await;
    assert_eq!(first.status, 200, "{}", first.text());
    let v = first.json();
    assert_eq!(v["result"]["cacheScope"], "public");
    assert_eq!(v["result"]["ttlMs"], 300000);
    let cursor = v["result"]["nextCursor"].as_str().unwrap().to_owned();
    // The anonymous page-1 cursor, used by a caller with a token.
    let token = s.token(Some("alice"), "catalog:read");
    let second = modern(
        &s.url,
        Some(&token),
        json!(2),
        "resources/templates/list",
        json!({ "cursor": cursor }),
    )
    .await;
    assert_eq!(second.status, 200, "{}", second.text());
    let v = second.json();
    assert!(v.get("error").is_none(), "{}", second.text());
    assert_eq!(
        v["result"]["resourceTemplates"][0]["uriTemplate"],
        "test://template/{id}/data"
    );
    // A tampered cursor is still refused.
    let mut bad = cursor.clone();
    bad.replace_range(10..11, if &cursor[10..11] == "A" { "B" } else { "A" });
    let a = modern(
        &s.url,
        None,
        json!(3),
        "resources/templates/list",
        json!({ "cursor": bad }),
    )
    .await;
    assert_eq!(a.json()["error"]["code"], -32602);
}

#[tokio::test]
async fn params_given_as_an_array_are_invalid_params() {
    let s = server().auth(None).start();
    let mut meta_headers = vec![("mcp-protocol-version", MODERN), ("mcp-method", "ping")];
    let a = post(
        &s.url,
        &meta_headers,
        body(json!({"jsonrpc":"2.0","id":1,"method":"ping","params":[1]})),
    )
    .await;
    assert_eq!(a.json()["error"]["code"], -32602, "{}", a.text());
    assert_eq!(a.json()["id"], 1);
    meta_headers.clear();
    let session = Session::open(&s.url, "2025-03-26", None).await;
    let a = session
        .send(json!({"jsonrpc":"2.0","id":2,"method":"ping","params":[1]}))
        .await;
    assert_eq!(a.json()["error"]["code"], -32602, "{}", a.text());
    let a = session
        .send(json!([{"jsonrpc":"2.0","id":3,"method":"ping","params":[]}]))
        .await;
    assert_eq!(a.json()[0]["error"]["code"], -32602, "{}", a.text());
    // An object is fine.
    let a = session
        .send(json!({"jsonrpc":"2.0","id":4,"method":"ping","params":{}}))
        .await;
    assert!(a.json()["result"].is_object(), "{}", a.text());
}

#[tokio::test]
async fn delete_with_a_bad_token_is_not_anonymous() {
    let s = server()
        .source("catalog", "catalog", "[config]\nitems = \"3\"\n")
        .start();
    // An anonymous session (public discovery lets initialize through).
    let mut session = Session::open(&s.url, "2025-11-25", None).await;
    let a = delete_session(&s.url, &session.id, Some("Bearer forged-token")).await;
    assert_eq!(a.status(), 401);
    assert!(a.headers().get("www-authenticate").is_some());
    // The session survived the forged DELETE; a real one ends it.
    let ping = session.request("ping", Value::Null).await;
    assert_eq!(ping.status, 200, "{}", ping.text());
    let a = delete_session(&s.url, &session.id, None).await;
    assert_eq!(a.status(), 200);
}

async fn delete_session(url: &str, id: &str, auth: Option<&str>) -> reqwest::Response {
    let mut req = http()
        .delete(url)
        .header("mcp-session-id", id)
        .header("mcp-protocol-version", "2025-11-25");
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    req.send().await.unwrap()
}
