//! `resources/read` keeps the listing's rules: one way of counting a field's
//! characters for both, every content item is for the URI that was asked
//! for, and the result's byte bound stops the copy while lifting. Each test
//! reproduces an attack against a real hostile guest.

mod support;
use serde_json::{Value, json};
use support::*;

const SCOPE: &str = "hostile:read catalog:read";

/// `resources/list` then `resources/read` over a 2025-11-25 session (no
/// `Mcp-Name` header: these URIs are not ASCII).
async fn list_and_read(s: &Server, token: &str) -> (Answer, Option<Answer>) {
    let mut session = Session::open(&s.url, "2025-11-25", Some(token)).await;
    let listed = session.request("resources/list", json!({})).await;
    let uri = listed.json()["result"]["resources"][0]["uri"]
        .as_str()
        .map(String::from);
    let read = match uri {
        Some(uri) => Some(
            session
                .request("resources/read", json!({ "uri": uri }))
                .await,
        ),
        None => None,
    };
    (listed, read)
}

fn wide(template: &str, mime: &str) -> Server {
    server()
        .hostile(
            "bad",
            "wide",
            &format!("[config]\ntemplate = {template:?}\nmime = {mime:?}\n"),
        )
        .start()
}

/// A URI of 2,048 UTF-16 units but 2,288 bytes: listed, so it must read back.
/// (Templates are at most 512 bytes, so the non-ASCII part, which only a
/// template's literal may hold, is 240 `é`.)
#[tokio::test]
async fn a_listed_uri_of_2048_units_and_more_bytes_reads_back() {
    let template = format!("hostile://bad/{}/{{id}}", "é".repeat(240));
    let s = wide(&template, "text/plain");
    let token = s.token(Some("alice"), SCOPE);
    let (listed, read) = list_and_read(&s, &token).await;
    let uri = listed.json()["result"]["resources"][0]["uri"]
        .as_str()
        .unwrap_or_else(|| panic!("not listed: {}\n{}", listed.text(), s.log()))
        .to_owned();
    assert_eq!(uri.encode_utf16().count(), 2048);
    assert_eq!(uri.len(), 2048 + 240);
    let read = read.unwrap();
    let v = read.json();
    assert_eq!(
        v["result"]["contents"][0]["uri"].as_str(),
        Some(uri.as_str()),
        "{}\n{}",
        read.text(),
        s.log()
    );
    assert_eq!(v["result"]["contents"][0]["text"], "wide contents");
}

/// A mimeType of 100 × `é` (100 characters, 200 bytes) is accepted on read
/// as it is on list; 129 × `é` is refused by both.
#[tokio::test]
async fn a_mime_type_is_counted_the_same_way_on_read_as_on_list() {
    let template = "hostile://bad/{id}";
    let s = wide(template, &"é".repeat(100));
    let token = s.token(Some("alice"), SCOPE);
    let (listed, read) = list_and_read(&s, &token).await;
    assert_eq!(
        listed.json()["result"]["resources"][0]["mimeType"],
        Value::from("é".repeat(100)),
        "{}",
        listed.text()
    );
    let read = read.unwrap();
    assert_eq!(
        read.json()["result"]["contents"][0]["mimeType"],
        Value::from("é".repeat(100)),
        "{}\n{}",
        read.text(),
        s.log()
    );

    let s = wide(template, &"é".repeat(129));
    let token = s.token(Some("alice"), SCOPE);
    let mut session = Session::open(&s.url, "2025-11-25", Some(&token)).await;
    let listed = session.request("resources/list", json!({})).await;
    assert_generic_internal_error(&listed, &[]);
    let read = session
        .request("resources/read", json!({ "uri": "hostile://bad/1" }))
        .await;
    assert_generic_internal_error(&read, &[]);
    s.expect_log(&["mimeType longer than 128"]);
}

/// A read that answers with another source's URI and forged text: the
/// client gets a generic error, never the forged record.
#[tokio::test]
async fn contents_under_another_uri_are_refused() {
    let s = server()
        .hostile("bad", "read-forged-uri", "")
        .source("catalog", "catalog", "[config]\nitems = \"20\"\n")
        .start();
    let token = s.token(Some("alice"), SCOPE);
    let a = modern(
        &s.url,
        Some(&token),
        json!(1),
        "resources/read",
        json!({ "uri": "hostile://bad/1" }),
    )
    .await;
    assert_eq!(a.status, 200);
    assert_generic_internal_error(&a, &["catalog://", "forged"]);
    s.expect_log(&["is not the uri that was read", "bad"]);
}

fn aliasing(items: usize, bytes: usize, max_read_bytes: usize) -> Server {
    server()
        .config(&format!("max_read_bytes = {max_read_bytes}"))
        .hostile(
            "bad",
            "read-alias",
            &format!("[config]\nitems = \"{items}\"\nbytes = \"{bytes}\"\n"),
        )
        .start()
}

async fn read_bad(s: &Server) -> Answer {
    let token = s.token(Some("alice"), SCOPE);
    modern(
        &s.url,
        Some(&token),
        json!(1),
        "resources/read",
        json!({ "uri": "hostile://bad/1" }),
    )
    .await
}

/// 40 contents that all name the same 1 MiB of guest memory, against a
/// 4 MiB bound: refused by the lifter before it copies them (old code
/// copied 40 MiB, then counted).
#[tokio::test]
async fn a_read_over_the_byte_bound_is_refused_while_lifting() {
    let s = aliasing(40, 1 << 20, 4 << 20);
    let a = read_bad(&s).await;
    assert_generic_internal_error(&a, &[]);
    let line = s.expect_log(&["guest call failed", "reason=\"result_too_large\""]);
    assert!(line.contains("limit of 4194304"), "{line}");
}

/// The bound counts every item's uri, mimeType and text plus
/// `READ_CONTENT_ITEM_BYTES`: exactly at it works, one byte over is refused.
#[tokio::test]
async fn the_read_bound_obeyed_and_violated() {
    let uri = "hostile://bad/1";
    let per_item = |text: usize| {
        uri.len() + "text/plain".len() + text + emseepea::config::READ_CONTENT_ITEM_BYTES
    };
    let bound = 2 * per_item(1000);
    let s = aliasing(2, 1000, bound);
    let a = read_bad(&s).await;
    assert_eq!(
        a.json()["result"]["contents"].as_array().map(Vec::len),
        Some(2),
        "{}",
        a.text()
    );
    let s = aliasing(2, 1001, bound);
    let a = read_bad(&s).await;
    assert_generic_internal_error(&a, &[]);
    s.expect_log(&["reason=\"result_too_large\""]);
}
