//! `resources/list` to the letter of the seed: entry validation against
//! hostile guests, byte and count bounds on the real bytes, sealed cursors,
//! caching headers, and live (not snapshot) semantics over SQLite.

mod support;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::time::Duration;
use support::engines::{Engine, TestDb};
use support::*;

async fn list(s: &Server, token: &str, cursor: Option<&str>) -> Answer {
    let params = match cursor {
        Some(c) => json!({ "cursor": c }),
        None => json!({}),
    };
    modern(&s.url, Some(token), json!(1), "resources/list", params).await
}

/// Each validation rule, broken by a real guest, fails the whole listing
/// with the generic error; the log names the source and the rule.
#[tokio::test]
async fn every_entry_rule_is_enforced_with_a_generic_error() {
    let rules: &[(&str, &str)] = &[
        ("too-many", "entries for a limit of"),
        (
            "has-more-empty",
            "has-more is true on a page without entries",
        ),
        ("key-empty", "key is empty or longer than 256"),
        ("key-long", "key is empty or longer than 256"),
        ("key-space", "key has a character outside printable ASCII"),
        ("key-order", "not strictly greater than the previous key"),
        ("key-not-after", "not greater than `after`"),
        ("uri-long", "uri longer than 2048"),
        ("uri-mismatch", "does not match the source's template"),
        ("uri-duplicate", "uri already on this page"),
        ("name-long", "name longer than 512"),
        ("mime-long", "mimeType longer than 128"),
        ("source-error", "HOSTILE-SECRET connection refused"),
        // Broken canonical ABI, caught by the host's page lifter.
        ("abi-out-of-bounds", "out of bounds of memory"),
        ("abi-invalid-utf8", "not valid UTF-8"),
        ("abi-split-utf8", "not valid UTF-8"),
        ("abi-alias", "reason=\"memory_cap\""),
    ];
    for (mode, logged) in rules {
        let s = server()
            .hostile("sneaky", mode, "")
            .config("[list_pagination]\npage_size = 5\n")
            .start();
        let token = s.token(Some("alice"), "hostile:read");
        // (key-not-after: the guest's first answer says has-more, so the
        // pager asks again for the rest of the page after its key.)
        let a = list(&s, &token, None).await;
        assert_eq!(a.status, 200, "{mode}");
        // No guest text, no rule name, no source name in the response.
        assert_generic_internal_error(&a, &["sneaky", logged, "10.0.0.7"]);
        assert_eq!(
            a.header("cache-control").as_deref(),
            Some("private, max-age=0, no-store")
        );
        let line = s
            .wait_for_log(&["sneaky", logged], Duration::from_secs(5))
            .unwrap_or_else(|| panic!("{mode}: log lacks {logged:?}:\n{}", s.log()));
        eprintln!("{mode}: {line}");
    }
}

#[tokio::test]
async fn a_full_traversal_sees_every_entry_once_in_order() {
    let s = server()
        .config("[[resources]]\nuri = \"demo://readme\"\nname = \"readme\"\ntext = \"hi\"\n")
        .source(
            "a-catalog",
            "catalog",
            "[config]\nname = \"one\"\nitems = \"230\"\n",
        )
        .source(
            "b-catalog",
            "catalog",
            "[config]\nname = \"two\"\nitems = \"120\"\n",
        )
        .start();
    let token = s.token(Some("alice"), "catalog:read");
    let (uris, pages) = traverse(&s.url, &token).await;
    assert_eq!(uris.len(), 1 + 230 + 120);
    assert_eq!(
        uris.iter().collect::<HashSet<_>>().len(),
        uris.len(),
        "an entry was listed twice"
    );
    assert_eq!(uris[0], "demo://readme", "static resources come first");
    assert_eq!(uris[1], "catalog://one/items/0000000001");
    assert_eq!(uris[230], "catalog://one/items/0000000230");
    assert_eq!(
        uris[231], "catalog://two/items/0000000001",
        "then sources in registration order"
    );
    assert_eq!(
        pages,
        (351usize).div_ceil(50),
        "pages of the default size 50"
    );
    // The catalog sends no per-entry MIME type: its entries carry the
    // template's; the static resource declares none and shows none.
    let first = list(&s, &token, None).await.json();
    let resources = first["result"]["resources"].as_array().unwrap();
    assert!(resources[0].get("mimeType").is_none(), "{}", resources[0]);
    assert_eq!(resources[1]["mimeType"], "text/plain", "{}", resources[1]);
}

#[tokio::test]
async fn pages_stay_within_the_byte_limit_measured_on_the_wire() {
    let s = server()
        .config("max_application_result_bytes = 4096\n[list_pagination]\nmax_page_bytes = 100000\npage_size = 100\n")
        .source("catalog", "catalog", "[config]\nitems = \"300\"\n")
        .start();
    let token = s.token(Some("alice"), "catalog:read");
    let mut cursor: Option<String> = None;
    let mut total = 0;
    loop {
        let a = list(&s, &token, cursor.as_deref()).await;
        // The tighter limit (4096) bounds the whole JSON-RPC response body.
        assert!(a.body.len() <= 4096, "a page of {} bytes", a.body.len());
        assert!(
            a.body.len() > 3000,
            "pages are filled up to the limit: {}",
            a.body.len()
        );
        let v = a.json();
        total += v["result"]["resources"].as_array().unwrap().len();
        match v["result"]["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.into()),
            None => break,
        }
    }
    assert_eq!(total, 300);
}

#[tokio::test]
async fn one_entry_too_big_for_an_empty_page_is_an_error() {
    let s = server()
        .config("max_application_result_bytes = 1024\n")
        .hostile("big", "big-entry", "")
        .start();
    let token = s.token(Some("alice"), "hostile:read");
    let a = list(&s, &token, None).await;
    assert_generic_internal_error(&a, &["big"]);
    s.expect_log(&["does not fit in an empty page"]);
}

#[tokio::test]
async fn the_guest_is_asked_only_for_the_slots_left() {
    // 3 static resources, then a source: a page of 5 asks the guest for 2.
    let mut cfg = String::from("[list_pagination]\npage_size = 5\n");
    for i in 0..3 {
        cfg.push_str(&format!(
            "[[resources]]\nuri = \"demo://s{i}\"\nname = \"s{i}\"\ntext = \"x\"\n"
        ));
    }
    let s = server()
        .config(&cfg)
        .hostile("counted", "count", "[config]\nitems = \"9\"\n")
        .start();
    let token = s.token(Some("alice"), "hostile:read");
    let v = list(&s, &token, None).await.json();
    let names: Vec<&str> = v["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["s0", "s1", "s2", "Entry 0 (limit 2)", "Entry 1 (limit 2)"]
    );
    let c = v["result"]["nextCursor"].as_str().unwrap();
    let v = list(&s, &token, Some(c)).await.json();
    let names: Vec<&str> = v["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names[0], "Entry 2 (limit 5)");
}

#[tokio::test]
async fn cursors_are_bound_opaque_and_generic_when_invalid() {
    let s = server()
        .source("catalog", "catalog", "")
        .config("[list_pagination]\npage_size = 10\n")
        .start();
    let alice = s.token(Some("alice"), "catalog:read");
    let first = list(&s, &alice, None).await.json();
    let cursor = first["result"]["nextCursor"].as_str().unwrap().to_owned();
    assert!(
        !cursor.contains("catalog") && !cursor.contains("0000000010"),
        "opaque: {cursor}"
    );
    let second = list(&s, &alice, Some(&cursor)).await;
    assert_eq!(
        second.json()["result"]["resources"][0]["uri"],
        "catalog://catalog/items/0000000011"
    );

    let invalid = |a: Answer| {
        let v = a.json();
        assert_eq!(v["error"]["code"], -32602, "{v}");
        assert_eq!(v["error"]["message"], "Invalid cursor", "{v}");
        assert!(v["error"].get("data").is_none());
        assert_schema(MODERN, "JSONRPCErrorResponse", &v);
    };
    let bob = s.token(Some("bob"), "catalog:read");
    invalid(list(&s, &bob, Some(&cursor)).await);
    let alice_more = s.token(Some("alice"), "catalog:read documents:read");
    invalid(list(&s, &alice_more, Some(&cursor)).await);
    let mut flipped = cursor.clone().into_bytes();
    flipped[cursor.len() / 2] = if flipped[cursor.len() / 2] == b'A' {
        b'B'
    } else {
        b'A'
    };
    invalid(list(&s, &alice, Some(std::str::from_utf8(&flipped).unwrap())).await);
    invalid(list(&s, &alice, Some("not a cursor")).await);
    invalid(list(&s, &alice, Some("")).await);
    // A cursor from before a restart (a new key) fails too.
    let s2 = server()
        .source("catalog", "catalog", "")
        .config("[list_pagination]\npage_size = 10\n")
        .start();
    let alice2 = s2.token(Some("alice"), "catalog:read");
    invalid(list(&s2, &alice2, Some(&cursor)).await);
}

#[tokio::test]
async fn a_token_with_scopes_for_two_of_three_sources_lists_exactly_those() {
    let s = server()
        .source(
            "a",
            "catalog",
            "[config]\nname = \"one\"\nitems = \"3\"\nscope = \"one:read\"\n",
        )
        .source(
            "b",
            "catalog",
            "[config]\nname = \"two\"\nitems = \"3\"\nscope = \"two:read\"\n",
        )
        .source(
            "c",
            "catalog",
            "[config]\nname = \"three\"\nitems = \"3\"\nscope = \"three:read\"\n",
        )
        .start();
    let token = s.token(Some("alice"), "one:read three:read");
    let (uris, _) = traverse(&s.url, &token).await;
    let authorities: HashSet<&str> = uris.iter().map(|u| u.split('/').nth(2).unwrap()).collect();
    assert_eq!(authorities, HashSet::from(["one", "three"]));
    assert_eq!(uris.len(), 6);
    // Skipped sources are not called at all.
    assert_eq!(
        s.log_lines_with("source=\"two\" call=\"list\""),
        0,
        "{}",
        s.log()
    );
    // A token reaching none of them: 403 insufficient_scope naming the scopes.
    let none = s.token(Some("alice"), "unrelated");
    let a = list(&s, &none, None).await;
    assert_eq!(a.status, 403);
    let challenge = a.header("www-authenticate").unwrap();
    assert!(
        challenge.contains("error=\"insufficient_scope\""),
        "{challenge}"
    );
    assert!(
        challenge.contains("scope=\"one:read three:read two:read\""),
        "{challenge}"
    );
}

#[tokio::test]
async fn caching_rules() {
    let s = server()
        .source("catalog", "catalog", "[config]\nitems = \"3\"\n")
        .start();
    let token = s.token(Some("alice"), "catalog:read");
    let a = list(&s, &token, None).await;
    assert_eq!(
        a.header("cache-control").as_deref(),
        Some("private, max-age=0, no-store")
    );
    let v = a.json();
    assert_eq!(v["result"]["ttlMs"], 0);
    assert_eq!(v["result"]["cacheScope"], "private");
    assert_eq!(v["result"]["resultType"], "complete");
    // Legacy clients get the same header (the result has no caching fields).
    let mut legacy = Session::open(&s.url, "2025-06-18", Some(&token)).await;
    let a = legacy.request("resources/list", Value::Null).await;
    assert_eq!(
        a.header("cache-control").as_deref(),
        Some("private, max-age=0, no-store")
    );
    assert!(a.json()["result"].get("ttlMs").is_none());
    assert_schema("2025-06-18", "ListResourcesResult", &a.json()["result"]);

    // Without inventory sources the plain behaviour stays: statics, no header.
    let plain = server()
        .auth(None)
        .config("[[resources]]\nuri = \"demo://a\"\nname = \"a\"\ntext = \"x\"\n")
        .start();
    let a = modern(&plain.url, None, json!(1), "resources/list", json!({})).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert!(a.header("cache-control").is_none());
    assert_eq!(a.json()["result"]["resources"][0]["uri"], "demo://a");
}

/// Documents live in SQLite or PostgreSQL; the test changes them between pages.
fn documents_server(engine: Engine, rows: &[(&str, &str, &str)]) -> (Server, TestDb) {
    let db = TestDb::new(
        engine,
        &std::fs::read_to_string(root().join("guest-examples/documents/sql/schema.sql")).unwrap(),
    );
    for (id, owner, key) in rows {
        db.exec(&format!(
            "INSERT INTO documents (id, owner, order_key, title, body) VALUES ('{id}', '{owner}', '{key}', '{id}', 'text of {id}')"
        ));
    }
    let s = server()
        .config(&format!(
            "[list_pagination]\npage_size = 2\n{}",
            db.section("documents")
        ))
        .source(
            "documents",
            "documents",
            "[grants]\ndatabases = [\"documents\"]\n",
        )
        .start();
    (s, db)
}

fn page_ids(v: &Value) -> Vec<String> {
    v["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["uri"]
                .as_str()
                .unwrap()
                .trim_start_matches("learn://documents/")
                .to_owned()
        })
        .collect()
}

#[tokio::test]
async fn pages_query_live_records_not_a_snapshot() {
    pages_query_live_records_on(Engine::Sqlite).await;
}

#[tokio::test]
async fn pages_query_live_records_not_a_snapshot_on_postgres() {
    pages_query_live_records_on(Engine::Postgres).await;
}

async fn pages_query_live_records_on(engine: Engine) {
    let (s, db) = documents_server(
        engine,
        &[
            ("d1", "alice", "k1"),
            ("d2", "alice", "k2"),
            ("d3", "alice", "k3"),
            ("d4", "alice", "k4"),
            ("d5", "alice", "k5"),
            ("x1", "bob", "k0"),
        ],
    );
    let token = s.token(Some("alice"), "documents:read");
    let p1 = list(&s, &token, None).await.json();
    assert_eq!(page_ids(&p1), ["d1", "d2"]);
    let c1 = p1["result"]["nextCursor"].as_str().unwrap().to_owned();
    // A deletion ahead of the cursor and an insertion behind it.
    db.exec("DELETE FROM documents WHERE id = 'd3'");
    db.exec("INSERT INTO documents (id, owner, order_key, title, body) VALUES ('d0', 'alice', 'k1a', 'late', 'x')");
    let p2 = list(&s, &token, Some(&c1)).await.json();
    assert_eq!(
        page_ids(&p2),
        ["d4", "d5"],
        "deleted record gone, record inserted behind the cursor not returned"
    );
    // Revoking access (here: moving a record to bob) removes it from later pages too.
    db.exec("UPDATE documents SET owner = 'bob' WHERE id = 'd5'");
    let replay = list(&s, &token, Some(&c1)).await.json();
    assert_eq!(
        page_ids(&replay),
        ["d4"],
        "a replayed cursor returns the live result"
    );
    assert!(replay["result"].get("nextCursor").is_none());
}

#[tokio::test]
async fn documents_are_private_to_their_owner() {
    documents_are_private_on(Engine::Sqlite).await;
}

#[tokio::test]
async fn documents_are_private_to_their_owner_on_postgres() {
    documents_are_private_on(Engine::Postgres).await;
}

async fn documents_are_private_on(engine: Engine) {
    let (s, _db) = documents_server(
        engine,
        &[
            ("a1", "alice", "k1"),
            ("a2", "alice", "k2"),
            ("b1", "bob", "k3"),
        ],
    );
    let alice = s.token(Some("alice"), "documents:read");
    let bob = s.token(Some("bob"), "documents:read");
    let (a_uris, _) = traverse(&s.url, &alice).await;
    assert_eq!(a_uris, ["learn://documents/a1", "learn://documents/a2"]);
    let (b_uris, _) = traverse(&s.url, &bob).await;
    assert_eq!(b_uris, ["learn://documents/b1"]);
    let read = |tok: String, uri: &'static str| {
        let url = s.url.clone();
        async move {
            modern(
                &url,
                Some(&tok),
                json!(2),
                "resources/read",
                json!({ "uri": uri }),
            )
            .await
        }
    };
    let ok = read(alice.clone(), "learn://documents/a1").await;
    assert_eq!(ok.json()["result"]["contents"][0]["text"], "text of a1");
    // Bob reading alice's URI: not found (a listed URI grants nothing).
    let nf = read(bob.clone(), "learn://documents/a1").await.json();
    assert_eq!(nf["error"]["code"], -32602);
    assert_eq!(nf["error"]["data"]["uri"], "learn://documents/a1");
    // A token without documents:read: 403 on list and on read.
    let other = s.token(Some("alice"), "catalog:read");
    assert_eq!(list(&s, &other, None).await.status, 403);
    let a = read(other, "learn://documents/a1").await;
    assert_eq!(a.status, 403);
    assert!(
        a.header("www-authenticate")
            .unwrap()
            .contains("scope=\"documents:read\"")
    );
    // A token without a user: the guest refuses (no unrestricted fallback).
    let no_user = s.token(None, "documents:read");
    let a = list(&s, &no_user, None).await;
    assert_generic_internal_error(&a, &["A verified user is required"]);
}

#[tokio::test]
async fn paging_across_ten_thousand_rows_reaches_every_row_once() {
    paging_across_ten_thousand_rows_on(Engine::Sqlite).await;
}

#[tokio::test]
async fn paging_across_ten_thousand_rows_reaches_every_row_once_on_postgres() {
    paging_across_ten_thousand_rows_on(Engine::Postgres).await;
}

async fn paging_across_ten_thousand_rows_on(engine: Engine) {
    let db = TestDb::new(
        engine,
        &std::fs::read_to_string(root().join("guest-examples/documents/sql/schema.sql")).unwrap(),
    );
    db.insert_rows(
        "documents (id, owner, order_key, title, body)",
        10_000,
        |i| {
            let owner = if i % 10 == 0 { "bob" } else { "alice" };
            format!("('d{i}', '{owner}', '2026-01-01T00:00:00Z#{i:05}', 'd{i}', 'b')")
        },
    );
    let s = server()
        .config(&db.section("documents"))
        .source(
            "documents",
            "documents",
            "[grants]\ndatabases = [\"documents\"]\n",
        )
        .start();
    let token = s.token(Some("alice"), "documents:read");
    let (uris, pages) = traverse(&s.url, &token).await;
    assert_eq!(uris.len(), 9_000);
    assert_eq!(uris.iter().collect::<HashSet<_>>().len(), 9_000);
    assert_eq!(pages, 180);
}

/// The README's minimal guest, built from guest-examples/minimal.
#[tokio::test]
async fn the_readme_example_guest_works() {
    let s = server().source("minimal", "examples/minimal", "").start();
    let alice = s.token(Some("alice"), "minimal:read");
    let bob = s.token(Some("bob"), "minimal:read");
    assert_eq!(
        traverse(&s.url, &alice).await.0,
        ["minimal://records/k1", "minimal://records/k2"]
    );
    assert_eq!(traverse(&s.url, &bob).await.0, ["minimal://records/k3"]);
    let nf = modern(
        &s.url,
        Some(&bob),
        json!(1),
        "resources/read",
        json!({"uri":"minimal://records/k1"}),
    )
    .await
    .json();
    assert_eq!(nf["error"]["code"], -32602);
}

/// The catalog's `books` layout serves the side-by-side benchmark's pages
/// (../shared/peers: `books://catalog/book-00001` named `book-00001`,
/// `text/plain`) byte for byte, so emseepea is measured on the peers' own
/// bodies; and its items read back.
#[tokio::test]
async fn the_catalogs_books_layout_serves_the_peers_pages() {
    let s = server()
        .source(
            "catalog",
            "catalog",
            "[config]\nitems = \"120\"\nlayout = \"books\"\n",
        )
        .start();
    let token = s.token(Some("alice"), "catalog:read");
    let a = list(&s, &token, None).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let peers_page: Vec<Value> = (1..=50)
        .map(|i| {
            let name = format!("book-{i:05}");
            json!({ "uri": format!("books://catalog/{name}"), "name": name, "mimeType": "text/plain" })
        })
        .collect();
    let resources = &a.json()["result"]["resources"];
    assert_eq!(
        serde_json::to_string(resources).unwrap(),
        serde_json::to_string(&peers_page).unwrap()
    );
    let (uris, pages) = traverse(&s.url, &token).await;
    assert_eq!(pages, 3);
    assert_eq!(uris.len(), 120);
    assert_eq!(uris.last().unwrap(), "books://catalog/book-00120");
    let read = |uri: &str| {
        let params = json!({ "uri": uri });
        modern(&s.url, Some(&token), json!(2), "resources/read", params)
    };
    let book = read("books://catalog/book-00007").await;
    assert_eq!(book.status, 200, "{}", book.text());
    assert_eq!(
        book.json()["result"]["contents"][0]["text"],
        "Item 7 of the catalog catalog.\n"
    );
    // The key is five digits: a ten-digit one is not a book.
    let missing = read("books://catalog/book-0000000007").await;
    assert!(missing.json()["error"].is_object(), "{}", missing.text());
}

/// A source that lists through `inventory-json` (the page as one JSON
/// string) is paged like a typed one: escapes decoded, `mimeType` absent or
/// null is none, the guest asked again after the key it gave last.
#[tokio::test]
async fn a_json_page_is_served_like_a_typed_one() {
    let s = server()
        .source(
            "j",
            "hostile/hostile-json",
            "[config]\nname = \"j\"\nitems = \"7\"\n",
        )
        .config("[list_pagination]\npage_size = 3\n")
        .start();
    let token = s.token(Some("alice"), "hostile:read");
    let (mut cursor, mut seen) = (None::<String>, Vec::new());
    loop {
        let v = list(&s, &token, cursor.as_deref()).await.json();
        seen.extend(v["result"]["resources"].as_array().unwrap().clone());
        match v["result"]["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.into()),
            None => break,
        }
    }
    let uris: Vec<&str> = seen.iter().map(|r| r["uri"].as_str().unwrap()).collect();
    let want: Vec<String> = (1..=7).map(|n| format!("hostile://j/k{n:04}")).collect();
    assert_eq!(uris, want);
    assert_eq!(seen[0]["name"], "Item \"1\"\té");
    // Entries 1, 4, 7 carry a MIME type; 2 and 5 say null, 3 and 6 nothing
    // (the template has none to stand in).
    assert_eq!(seen[0]["mimeType"], "text/plain");
    assert_eq!(seen[6]["mimeType"], "text/plain");
    assert!(seen[1].get("mimeType").is_none(), "{}", seen[1]);
    assert!(seen[2].get("mimeType").is_none(), "{}", seen[2]);
}

/// What is not a page in JSON, or breaks a page rule, fails the listing
/// with the generic error; the log says why; no guest text reaches the
/// client.
#[tokio::test]
async fn a_json_page_that_is_not_one_or_breaks_a_rule_is_a_generic_error() {
    for (mode, logged) in [
        ("not-json", "the JSON page is not an inventory-page"),
        ("extra-field", "unknown field"),
        ("key-order", "not strictly greater than the previous key"),
    ] {
        let s = server()
            .source(
                "j",
                "hostile/hostile-json",
                &format!("[config]\nname = \"j\"\nmode = \"{mode}\"\n"),
            )
            .start();
        let token = s.token(Some("alice"), "hostile:read");
        let a = list(&s, &token, None).await;
        assert_eq!(a.status, 200, "{mode}");
        assert_generic_internal_error(&a, &[logged]);
        s.expect_log(&["j", logged]);
    }
}
