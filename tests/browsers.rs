//! Browsers: CORS for the configured `[http] allowed_origins` only. The
//! attack of issue 11: a preflight from `Origin: http://localhost:6274` got
//! 405 and no response carried `Access-Control-Allow-Origin`, so no page
//! could call the server; and nothing may grant a page that is not
//! configured.

mod support;
use serde_json::json;
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
