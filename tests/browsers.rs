//! Browsers: CORS for the configured `[http] allowed_origins` only. The
//! attack of issue 11: a preflight from `Origin: http://localhost:6274` got
//! 405 and no response carried `Access-Control-Allow-Origin`, so no page
//! could call the server; and nothing may grant a page that is not
//! configured.

mod support;
use serde_json::json;
use support::clients::{installed, run_json};
use support::*;

const ALLOWED: &str = "http://localhost:6274";
const FOREIGN: &str = "http://evil.example";

fn cors_server() -> Server {
    server()
        .config(&format!("[http]\nallowed_origins = [\"{ALLOWED}\"]\n"))
        .source("catalog", "catalog", "[config]\nitems = \"3\"\n")
        .start()
}

async fn preflight(url: &str, origin: &str) -> reqwest::Response {
    http()
        .request(reqwest::Method::OPTIONS, url)
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, content-type, mcp-protocol-version",
        )
        .send()
        .await
        .unwrap()
}

fn h(r: &reqwest::Response, name: &str) -> Option<String> {
    r.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
}

#[tokio::test]
async fn a_preflight_from_a_configured_origin_is_answered() {
    let s = cors_server();
    let r = preflight(&s.url, ALLOWED).await;
    assert_eq!(r.status(), 204);
    assert_eq!(
        h(&r, "access-control-allow-origin").as_deref(),
        Some(ALLOWED)
    );
    assert_eq!(h(&r, "vary").as_deref(), Some("Origin"));
    let methods = h(&r, "access-control-allow-methods").unwrap();
    assert!(
        methods.contains("POST") && methods.contains("DELETE"),
        "{methods}"
    );
    let allow = h(&r, "access-control-allow-headers")
        .unwrap()
        .to_lowercase();
    for name in [
        "authorization",
        "content-type",
        "mcp-protocol-version",
        "mcp-session-id",
        "mcp-method",
        "mcp-name",
        "last-event-id",
    ] {
        assert!(allow.contains(name), "{name} not in {allow}");
    }
    assert_eq!(h(&r, "access-control-allow-credentials"), None);
}

#[tokio::test]
async fn a_preflight_from_any_other_origin_is_refused() {
    let s = cors_server();
    for origin in [FOREIGN, "http://localhost:6275", "null"] {
        let r = preflight(&s.url, origin).await;
        assert_eq!(r.status(), 403, "{origin}");
        assert_eq!(h(&r, "access-control-allow-origin"), None, "{origin}");
    }
}

#[tokio::test]
async fn responses_to_a_configured_origin_carry_the_grant_even_a_401() {
    let s = cors_server();
    let list =
        json!({"jsonrpc":"2.0","id":1,"method":"resources/list","params":{"_meta": modern_meta()}});
    let headers = [
        ("origin", ALLOWED),
        ("mcp-protocol-version", MODERN),
        ("mcp-method", "resources/list"),
    ];
    let anon = post(&s.url, &headers, serde_json::to_vec(&list).unwrap()).await;
    assert_eq!(anon.status, 401);
    assert_eq!(
        anon.header("access-control-allow-origin").as_deref(),
        Some(ALLOWED)
    );
    let expose = anon.header("access-control-expose-headers").unwrap();
    assert!(expose.contains("WWW-Authenticate") && expose.contains("Mcp-Session-Id"));
    assert_eq!(anon.header("vary").as_deref(), Some("Origin"));
    let token = s.token(Some("alice"), "catalog:read");
    let bearer = format!("Bearer {token}");
    let mut with_token = headers.to_vec();
    with_token.push(("authorization", &bearer));
    let ok = post(&s.url, &with_token, serde_json::to_vec(&list).unwrap()).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(
        ok.header("access-control-allow-origin").as_deref(),
        Some(ALLOWED)
    );
    // The metadata document too, and its preflight.
    let origin = s.url.trim_end_matches("/mcp");
    let doc_url = format!("{origin}/.well-known/oauth-protected-resource/mcp");
    let doc = http()
        .get(&doc_url)
        .header("origin", ALLOWED)
        .send()
        .await
        .unwrap();
    assert_eq!(doc.status(), 200);
    assert_eq!(
        h(&doc, "access-control-allow-origin").as_deref(),
        Some(ALLOWED)
    );
    let pre = http()
        .request(reqwest::Method::OPTIONS, &doc_url)
        .header("origin", ALLOWED)
        .header("access-control-request-method", "GET")
        .send()
        .await
        .unwrap();
    assert_eq!(pre.status(), 204);
    assert_eq!(
        h(&pre, "access-control-allow-methods").as_deref(),
        Some("GET")
    );
}

#[tokio::test]
async fn a_foreign_origin_gets_no_grant() {
    let s = cors_server();
    let a = post(
        &s.url,
        &[("origin", FOREIGN)],
        serde_json::to_vec(&json!({"jsonrpc":"2.0","id":1,"method":"ping"})).unwrap(),
    )
    .await;
    assert_eq!(a.status, 403);
    assert_eq!(a.header("access-control-allow-origin"), None);
    assert_eq!(a.header("vary").as_deref(), Some("Origin"));
    // A loopback page passes the DNS-rebinding guard but is not granted CORS.
    let origin = s.url.trim_end_matches("/mcp");
    let doc_url = format!("{origin}/.well-known/oauth-protected-resource/mcp");
    let doc = http()
        .get(&doc_url)
        .header("origin", "http://127.0.0.1:9")
        .send()
        .await
        .unwrap();
    assert_eq!(h(&doc, "access-control-allow-origin"), None);
}

/// Debian's chromium (`apt-get install -y chromium`; `.ci/run` installs it).
const CHROMIUM: &str = "/usr/bin/chromium";

/// A static server for the test page on 127.0.0.1, port 0: `/` is the
/// page, `/page.js` the bundled SDK client. The same page is reachable as
/// `http://localhost:PORT` and `http://127.0.0.1:PORT`: two origins.
fn static_server(dir: &std::path::Path) -> u16 {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let dir = dir.to_owned();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            let _ = reader.read_line(&mut request_line);
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let path = request_line.split(' ').nth(1).unwrap_or("/");
            let (status, kind, body) = match path {
                "/" => (
                    "200 OK",
                    "text/html",
                    std::fs::read(dir.join("index.html")).unwrap(),
                ),
                "/page.js" => (
                    "200 OK",
                    "text/javascript",
                    std::fs::read(dir.join("page.js")).unwrap(),
                ),
                _ => ("404 Not Found", "text/plain", b"not found".to_vec()),
            };
            let mut s = stream;
            let _ = write!(
                s,
                "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(&body);
        }
    });
    port
}

fn node(args: &[&str]) -> serde_json::Value {
    installed("tests/clients/node/node_modules/puppeteer-core");
    run_json(
        std::process::Command::new("node")
            .current_dir(root().join("tests/clients/node"))
            .arg("browser_client.mjs")
            .args(args),
    )
}

#[test]
fn a_real_browser_on_an_allowed_origin_runs_the_cursor_loop_and_another_is_refused() {
    assert!(
        std::path::Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: apt-get install -y chromium"
    );
    let site = tempfile::tempdir().unwrap();
    std::fs::write(
        site.path().join("index.html"),
        "<!doctype html><meta charset=utf-8><title>emseepea browser test</title><script type=module src=/page.js></script>",
    )
    .unwrap();
    node(&["bundle", site.path().to_str().unwrap()]);
    let port = static_server(site.path());
    let allowed = format!("http://localhost:{port}");
    let s = server()
        .config(&format!("[http]\nallowed_origins = [\"{allowed}\"]\n"))
        .source("catalog", "catalog", "[config]\nitems = \"120\"\n")
        .start();
    let token = s.token(Some("alice"), "catalog:read");
    let params =
        json!({"url": s.url, "token": token, "read": "catalog://catalog/items/0000000077"});
    let fragment = format!("#{}", urlencode(&params.to_string()));

    let ok = node(&["run", CHROMIUM, &format!("{allowed}/{fragment}")]);
    assert_eq!(ok["ok"], true, "{ok}");
    let out = &ok["out"];
    assert_eq!(out["origin"], allowed.as_str());
    assert_eq!(out["pages"], 3, "{out}");
    let uris = out["uris"].as_array().unwrap();
    assert_eq!(uris.len(), 120);
    assert_eq!(uris[0], "catalog://catalog/items/0000000001");
    assert_eq!(out["read"], "Item 77 of the catalog catalog.\n");
    assert!(
        out["session"].is_string(),
        "Mcp-Session-Id was readable: {out}"
    );
    s.expect_log(&["session ended by the client"]);

    // The same page from another origin (loopback too, so only CORS stands
    // in the way): the browser refuses to let it call the server.
    let refused = node(&[
        "run",
        CHROMIUM,
        &format!("http://127.0.0.1:{port}/{fragment}"),
    ]);
    assert_eq!(refused["ok"], false, "{refused}");
    assert!(
        refused["error"].as_str().unwrap().contains("fetch"),
        "{refused}"
    );
    assert_eq!(
        s.log_lines_with("session initialized"),
        1,
        "the refused page never got past the preflight"
    );
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
