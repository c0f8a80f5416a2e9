//! Streamable HTTP edge cases, per protocol version: headers, sessions,
//! origins, sizes, malformed input, batches, cancellation, shutdown. Every
//! JSON-RPC message the server sends here is validated against the schema
//! of its version.

mod support;
use serde_json::{Value, json};
use std::time::Duration;
use support::*;

const LEGACY: [&str; 3] = ["2025-03-26", "2025-06-18", "2025-11-25"];

fn basic() -> Server {
    server()
        .config("[[resources]]\nuri = \"test://static-text\"\nname = \"static-text\"\nmimeType = \"text/plain\"\ntext = \"hello\"\n")
        .source("catalog", "catalog", "[config]\nitems = \"30\"\n")
        .source("template", "conformance/template-data", "")
        .start()
}

fn body(v: Value) -> Vec<u8> {
    serde_json::to_vec(&v).unwrap()
}

#[tokio::test]
async fn legacy_handshake_and_methods_validate_for_every_version() {
    let s = basic();
    let token = s.token(Some("alice"), "catalog:read");
    for version in LEGACY {
        let mut session = Session::open(&s.url, version, Some(&token)).await;
        assert_eq!(session.version, version, "a supported version is echoed");
        let init = post(&s.url, &[], body(json!({"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":version,"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}))).await;
        assert_schema(version, "InitializeResult", &init.json()["result"]);
        assert_eq!(
            init.json()["result"]["capabilities"]["resources"],
            json!({"subscribe": false, "listChanged": false})
        );
        let ping = session.request("ping", Value::Null).await;
        assert_eq!(ping.json()["result"], json!({}));
        assert_schema(version, "JSONRPCResponse", &ping.json());
        let set = session
            .request("logging/setLevel", json!({"level": "info"}))
            .await;
        assert_eq!(set.json()["result"], json!({}));
        let bad = session
            .request("logging/setLevel", json!({"level": "loud"}))
            .await;
        assert_eq!(bad.json()["error"]["code"], -32602);
        let list = session.request("resources/list", Value::Null).await;
        assert_schema(version, "ListResourcesResult", &list.json()["result"]);
        let tpl = session
            .request("resources/templates/list", Value::Null)
            .await
            .json();
        assert_schema(version, "ListResourceTemplatesResult", &tpl["result"]);
        let templates: Vec<&str> = tpl["result"]["resourceTemplates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["uriTemplate"].as_str().unwrap())
            .collect();
        assert_eq!(
            templates,
            ["catalog://catalog/items/{id}", "test://template/{id}/data"]
        );
        let read = session
            .request("resources/read", json!({"uri": "test://template/42/data"}))
            .await
            .json();
        assert_schema(version, "ReadResourceResult", &read["result"]);
        assert!(
            read["result"]["contents"][0]["text"]
                .as_str()
                .unwrap()
                .contains("42")
        );
        let nf = session
            .request("resources/read", json!({"uri": "nothing://here"}))
            .await
            .json();
        assert_eq!(nf["error"]["code"], -32002, "legacy versions keep -32002");
        assert_eq!(nf["error"]["data"]["uri"], "nothing://here");
        let unknown = session.request("tools/list", Value::Null).await;
        assert_eq!(unknown.status, 200);
        assert_eq!(unknown.json()["error"]["code"], -32601);
        // Ending the session: DELETE, then the id is unknown.
        let h = session.headers();
        let mut req = http().delete(&s.url);
        for (k, v) in &h {
            req = req.header(k, v);
        }
        assert_eq!(req.send().await.unwrap().status(), 200);
        let gone = session.request("ping", Value::Null).await;
        assert_eq!(gone.status, 404);
    }
}

#[test]
fn the_schema_check_rejects_what_the_schema_forbids() {
    let bad = std::panic::catch_unwind(|| {
        assert_schema(MODERN, "ListResourcesResult", &json!({"resources": 5}))
    });
    assert!(bad.is_err());
    let missing_ttl = std::panic::catch_unwind(|| {
        assert_schema(
            MODERN,
            "ListResourcesResult",
            &json!({"resources": [], "resultType": "complete"}),
        )
    });
    assert!(
        missing_ttl.is_err(),
        "2026-07-28 list results need ttlMs and cacheScope"
    );
    assert_schema(
        MODERN,
        "ListResourcesResult",
        &json!({"resources": [], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}),
    );
}

#[tokio::test]
async fn initialize_negotiates_unknown_versions_down() {
    let s = basic();
    for asked in ["2024-11-05", "2026-07-28", "1999-01-01"] {
        let a = post(&s.url, &[], body(json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":asked,"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}))).await;
        assert_eq!(
            a.json()["result"]["protocolVersion"],
            "2025-11-25",
            "asked {asked}"
        );
    }
}

#[tokio::test]
async fn modern_requests_are_stateless_and_checked_against_their_headers() {
    let s = basic();
    let token = s.token(Some("alice"), "catalog:read");
    let d = modern(&s.url, None, json!("d"), "server/discover", Value::Null).await;
    assert_eq!(d.status, 200);
    assert!(
        d.header("mcp-session-id").is_none(),
        "no sessions in 2026-07-28"
    );
    let v = d.json();
    assert_schema(MODERN, "DiscoverResultResponse", &v);
    assert_eq!(
        v["result"]["supportedVersions"],
        json!(["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"]),
        "the same list as -32022's data.supported"
    );
    assert_eq!(
        v["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "emseepea"
    );

    let read = modern(
        &s.url,
        Some(&token),
        json!(7),
        "resources/read",
        json!({"uri":"test://static-text"}),
    )
    .await
    .json();
    assert_schema(MODERN, "ReadResourceResultResponse", &read);
    let tpl = modern(
        &s.url,
        None,
        json!(8),
        "resources/templates/list",
        Value::Null,
    )
    .await
    .json();
    assert_schema(MODERN, "ListResourceTemplatesResultResponse", &tpl);
    let nf = modern(
        &s.url,
        None,
        json!(9),
        "resources/read",
        json!({"uri":"nothing://x"}),
    )
    .await
    .json();
    assert_eq!(
        nf["error"]["code"], -32602,
        "2026-07-28 not-found is -32602"
    );
    assert_eq!(nf["error"]["data"]["uri"], "nothing://x");
    assert_schema(MODERN, "JSONRPCErrorResponse", &nf);

    let meta = modern_meta();
    let raw = |method: &str, params: Value| {
        body(json!({"jsonrpc":"2.0","id":1,"method":method,"params":params}))
    };
    let check = |a: Answer, status: u16, code: i64| {
        assert_eq!(a.status, status, "{}", a.text());
        let v = a.json();
        assert_eq!(v["error"]["code"], code, "{v}");
        assert_schema(MODERN, "JSONRPCErrorResponse", &v);
        v
    };
    // Missing MCP-Protocol-Version.
    check(
        post(
            &s.url,
            &[("mcp-method", "server/discover")],
            raw("server/discover", json!({"_meta": meta})),
        )
        .await,
        400,
        -32020,
    );
    // Missing Mcp-Method, then a different one.
    check(
        post(
            &s.url,
            &[("mcp-protocol-version", MODERN)],
            raw("server/discover", json!({"_meta": meta})),
        )
        .await,
        400,
        -32020,
    );
    check(
        post(
            &s.url,
            &[
                ("mcp-protocol-version", MODERN),
                ("mcp-method", "resources/list"),
            ],
            raw("server/discover", json!({"_meta": meta})),
        )
        .await,
        400,
        -32020,
    );
    // Mcp-Name missing or different on resources/read; base64 form accepted.
    let read_params = json!({"uri":"test://static-text","_meta": meta});
    check(
        post(
            &s.url,
            &[
                ("mcp-protocol-version", MODERN),
                ("mcp-method", "resources/read"),
            ],
            raw("resources/read", read_params.clone()),
        )
        .await,
        400,
        -32020,
    );
    check(
        post(
            &s.url,
            &[
                ("mcp-protocol-version", MODERN),
                ("mcp-method", "resources/read"),
                ("mcp-name", "test://other"),
            ],
            raw("resources/read", read_params.clone()),
        )
        .await,
        400,
        -32020,
    );
    let ok = post(
        &s.url,
        &[
            ("mcp-protocol-version", MODERN),
            ("mcp-method", "resources/read"),
            ("mcp-name", "=?base64?dGVzdDovL3N0YXRpYy10ZXh0?="),
        ],
        raw("resources/read", read_params.clone()),
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    // Optional whitespace around a header value is not part of it (RFC 9110 §5.5).
    let ok = post(
        &s.url,
        &[
            ("mcp-protocol-version", MODERN),
            ("mcp-method", " resources/read\t"),
            ("mcp-name", "  test://static-text "),
        ],
        raw("resources/read", read_params.clone()),
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    // An unsupported version, with the list of supported ones.
    let mut old = meta.clone();
    old["io.modelcontextprotocol/protocolVersion"] = json!("1900-01-01");
    let v = check(
        post(
            &s.url,
            &[
                ("mcp-protocol-version", "1900-01-01"),
                ("mcp-method", "server/discover"),
            ],
            raw("server/discover", json!({"_meta": old})),
        )
        .await,
        400,
        -32022,
    );
    assert_eq!(v["error"]["data"]["requested"], "1900-01-01");
    assert_eq!(
        v["error"]["data"]["supported"],
        json!(["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"])
    );
    assert_schema(MODERN, "UnsupportedProtocolVersionError", &v);
    // _meta version differing from the header.
    let mut other = meta.clone();
    other["io.modelcontextprotocol/protocolVersion"] = json!("2025-11-25");
    check(
        post(
            &s.url,
            &[
                ("mcp-protocol-version", MODERN),
                ("mcp-method", "server/discover"),
            ],
            raw("server/discover", json!({"_meta": other})),
        )
        .await,
        400,
        -32020,
    );
    // Missing clientCapabilities.
    let mut no_caps = meta.clone();
    no_caps
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientCapabilities");
    check(
        post(
            &s.url,
            &[
                ("mcp-protocol-version", MODERN),
                ("mcp-method", "server/discover"),
            ],
            raw("server/discover", json!({"_meta": no_caps})),
        )
        .await,
        400,
        -32602,
    );
    // Unknown method: HTTP 404; legacy-only methods are unknown here, and so
    // is `initialize` sent in 2026-07-28 form.
    for m in [
        "tools/list",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "initialize",
    ] {
        check(
            modern(&s.url, None, json!(1), m, Value::Null).await,
            404,
            -32601,
        );
    }
    // A session id is ignored, never echoed.
    let a = post(
        &s.url,
        &[
            ("mcp-protocol-version", MODERN),
            ("mcp-method", "server/discover"),
            ("mcp-session-id", "whatever"),
        ],
        raw("server/discover", json!({"_meta": meta})),
    )
    .await;
    assert_eq!(a.status, 200);
    assert!(a.header("mcp-session-id").is_none());
}

#[tokio::test]
async fn legacy_headers_and_sessions() {
    let s = basic();
    let alice = s.token(Some("alice"), "catalog:read");
    let bob = s.token(Some("bob"), "catalog:read");
    let session = Session::open(&s.url, "2025-11-25", Some(&alice)).await;
    // Missing session id after initialize: 400.
    let a = post(
        &s.url,
        &[("mcp-protocol-version", "2025-11-25")],
        body(json!({"jsonrpc":"2.0","id":1,"method":"ping"})),
    )
    .await;
    assert_eq!(a.status, 400);
    // Unknown session: 404.
    let a = post(
        &s.url,
        &[("mcp-session-id", "0123456789abcdef0123456789abcdef")],
        body(json!({"jsonrpc":"2.0","id":1,"method":"ping"})),
    )
    .await;
    assert_eq!(a.status, 404);
    // An unsupported MCP-Protocol-Version: 400.
    let a = post(
        &s.url,
        &[
            ("mcp-session-id", &session.id),
            ("mcp-protocol-version", "1999-01-01"),
            ("authorization", &format!("Bearer {alice}")),
        ],
        body(json!({"jsonrpc":"2.0","id":1,"method":"ping"})),
    )
    .await;
    assert_eq!(a.status, 400);
    // A session presented with another caller's token: refused.
    let a = post(
        &s.url,
        &[
            ("mcp-session-id", &session.id),
            ("authorization", &format!("Bearer {bob}")),
        ],
        body(json!({"jsonrpc":"2.0","id":1,"method":"ping"})),
    )
    .await;
    assert_eq!(a.status, 404);
    let a = post(
        &s.url,
        &[("mcp-session-id", &session.id)],
        body(json!({"jsonrpc":"2.0","id":1,"method":"ping"})),
    )
    .await;
    assert_eq!(a.status, 404, "and without a token");
    // Ids are echoed unchanged, strings and numbers alike.
    for id in [json!("abc"), json!(12345678901234i64), json!(-1), json!("")] {
        let a = session
            .send(json!({"jsonrpc":"2.0","id":id.clone(),"method":"ping"}))
            .await;
        assert_eq!(a.json()["id"], id);
    }
    // Notifications and responses: 202, no body.
    let a = session
        .send(json!({"jsonrpc":"2.0","method":"notifications/whatever"}))
        .await;
    assert_eq!((a.status, a.body.len()), (202, 0));
    let a = session
        .send(json!({"jsonrpc":"2.0","id":99,"result":{}}))
        .await;
    assert_eq!(a.status, 202);
}

#[tokio::test]
async fn malformed_input() {
    let s = basic();
    let a = post(&s.url, &[], "{not json").await;
    assert_eq!(a.status, 400);
    assert_eq!(a.json()["error"]["code"], -32700);
    assert_schema("2025-11-25", "JSONRPCErrorResponse", &a.json());
    for bad in [
        json!({"jsonrpc":"1.0","id":1,"method":"ping"}),
        json!({"id":1,"method":"ping"}),
        json!({"jsonrpc":"2.0","id":null,"method":"ping"}),
        json!({"jsonrpc":"2.0","id":1,"method":7}),
        json!("text"),
    ] {
        let a = post(&s.url, &[], body(bad.clone())).await;
        assert_eq!(a.status, 400, "{bad}");
        assert_eq!(a.json()["error"]["code"], -32600, "{bad}");
        assert!(
            a.json()["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("Invalid Request"),
            "{bad}"
        );
    }
    let a = post(
        &s.url,
        &[("content-type", "text/plain")],
        body(json!({"jsonrpc":"2.0","id":1,"method":"ping"})),
    )
    .await;
    assert_eq!(a.status, 415);
    let a = post(
        &s.url,
        &[("accept", "text/event-stream")],
        body(json!({"jsonrpc":"2.0","id":1,"method":"ping"})),
    )
    .await;
    assert_eq!(a.status, 406);
    let get = http()
        .get(&s.url)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 405);
    let a = post(&format!("{}/elsewhere", s.url), &[], "{}").await;
    assert_eq!(a.status, 404);
}

#[tokio::test]
async fn oversized_bodies_get_413_without_being_read() {
    let s = server().config("[http]\nmax_body_bytes = 1000\n").start();
    let big = vec![b' '; 5000];
    let a = post(&s.url, &[], big.clone()).await;
    assert_eq!(a.status, 413);
    // Chunked (no Content-Length): stopped at the limit too, on a raw socket.
    use std::io::{Read, Write};
    let mut sock = std::net::TcpStream::connect(s.host_port()).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
        s.host_port()
    );
    sock.write_all(head.as_bytes()).unwrap();
    for _ in 0..10 {
        // The server may stop reading (and close) once past the limit.
        if sock
            .write_all(format!("1f4\r\n{}\r\n", " ".repeat(500)).as_bytes())
            .is_err()
        {
            break;
        }
    }
    let mut answer = Vec::new();
    let _ = sock.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
}

#[tokio::test]
async fn dns_rebinding_protection() {
    let s = basic();
    let init = body(
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
    );
    let port = s.host_port().rsplit(':').next().unwrap().to_owned();
    let foreign_host = post(&s.url, &[("host", "evil.example.com")], init.clone()).await;
    assert_eq!(foreign_host.status, 403);
    let foreign_origin = post(
        &s.url,
        &[("origin", "http://evil.example.com")],
        init.clone(),
    )
    .await;
    assert_eq!(foreign_origin.status, 403);
    let rebound = post(
        &s.url,
        &[
            ("origin", "http://localhost.evil.example.com"),
            ("host", "localhost"),
        ],
        init.clone(),
    )
    .await;
    assert_eq!(rebound.status, 403);
    let local = post(
        &s.url,
        &[
            ("origin", &format!("http://localhost:{port}")),
            ("host", &format!("localhost:{port}")),
        ],
        init.clone(),
    )
    .await;
    assert_eq!(local.status, 200);
    let loopback = post(
        &s.url,
        &[("origin", &format!("http://127.0.0.1:{port}"))],
        init,
    )
    .await;
    assert_eq!(loopback.status, 200);
}

#[tokio::test]
async fn batches_exist_only_in_2025_03_26() {
    let s = basic();
    let old = Session::open(&s.url, "2025-03-26", None).await;
    let a = old
        .send(json!([
            {"jsonrpc":"2.0","id":1,"method":"ping"},
            {"jsonrpc":"2.0","method":"notifications/whatever"},
            {"jsonrpc":"2.0","id":"two","method":"resources/read","params":{"uri":"test://static-text"}},
            {"jsonrpc":"2.0","id":3,"method":"nope"}
        ]))
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = a.json();
    let ids: Vec<Value> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].clone())
        .collect();
    assert_eq!(ids, [json!(1), json!("two"), json!(3)]);
    assert_eq!(v[2]["error"]["code"], -32601);
    let only_notifications = old
        .send(json!([{"jsonrpc":"2.0","method":"notifications/whatever"}]))
        .await;
    assert_eq!(only_notifications.status, 202);
    let empty = old.send(json!([])).await;
    assert_eq!(empty.status, 400);
    let newer = Session::open(&s.url, "2025-06-18", None).await;
    let a = newer
        .send(json!([{"jsonrpc":"2.0","id":1,"method":"ping"}]))
        .await;
    assert_eq!(a.status, 400);
    assert_eq!(a.json()["error"]["code"], -32600);
    let modern_batch = post(
        &s.url,
        &[("mcp-protocol-version", MODERN)],
        body(json!([{"jsonrpc":"2.0","id":1,"method":"server/discover"}])),
    )
    .await;
    assert_eq!(modern_batch.status, 400);
}

#[tokio::test]
async fn notifications_cancelled_stops_the_guest_and_sends_no_result() {
    let s = server()
        .hostile(
            "slow",
            "loop",
            "[budget]\nfuel = 1_000_000_000_000\nmax_duration_ms = 60000",
        )
        .start();
    let token = s.token(Some("alice"), "hostile:read");
    let session = Session::open(&s.url, "2025-11-25", Some(&token)).await;
    let url = s.url.clone();
    let headers = session.headers();
    let slow = tokio::spawn(async move {
        let refs: Vec<(&str, &str)> = headers
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        post(&url, &refs, body(json!({"jsonrpc":"2.0","id":"slow-1","method":"resources/read","params":{"uri":"hostile://slow/1"}}))).await
    });
    // Wait until the guest runs, then cancel it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let c = session.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow-1","reason":"user"}})).await;
    assert_eq!(c.status, 202);
    let a = tokio::time::timeout(Duration::from_secs(10), slow)
        .await
        .expect("cancelled request did not end")
        .unwrap();
    // The exchange ends with an empty event stream: no JSON-RPC message at all.
    assert_eq!(a.status, 200);
    assert_eq!(
        a.header("content-type").as_deref(),
        Some("text/event-stream")
    );
    assert!(a.body.is_empty(), "{}", a.text());
    s.wait_for_log(
        &["source=\"slow\"", "reason=\"cancelled\""],
        Duration::from_secs(5),
    )
    .unwrap_or_else(|| panic!("{}", s.log()));
    // The session keeps working.
    let mut session = session;
    assert_eq!(session.request("ping", Value::Null).await.status, 200);
}

#[test]
fn sigterm_finishes_in_flight_requests_and_exits_zero() {
    let s = server()
        .hostile("slow", "sleep", "[budget]\nmax_duration_ms = 1500")
        .start();
    let token = s.token(Some("alice"), "hostile:read");
    let url = s.url.clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let pending = rt.spawn(async move {
        modern(
            &url,
            Some(&token),
            json!(1),
            "resources/read",
            json!({"uri":"hostile://slow/1"}),
        )
        .await
    });
    std::thread::sleep(Duration::from_millis(300));
    let port = s.host_port();
    let status = s.terminate();
    assert!(status.success(), "exit status {status}");
    let a = rt.block_on(pending).unwrap();
    assert_eq!(a.status, 200, "the in-flight request got its answer");
    assert_eq!(a.json()["error"]["code"], -32603);
    assert!(
        std::net::TcpStream::connect(port).is_err(),
        "no longer accepting"
    );
}
