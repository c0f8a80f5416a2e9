//! Running it in production: the admin listener's `/metrics` after known
//! traffic, and `/healthz`/`/readyz` through a drain.

mod support;

use serde_json::json;
use std::time::{Duration, Instant};
use support::*;

#[tokio::test]
async fn metrics_count_known_traffic_exactly() {
    let s = server()
        .config(&format!("{ADMIN}[list_pagination]\npage_size = 8\n"))
        .hostile("bad", "loop", "[budget]\nfuel = 20_000_000")
        .source("catalog", "catalog", "[config]\nitems = \"20\"\n")
        .start();
    let admin = admin_url(&s);
    let (status, before) = get(&format!("{admin}/metrics")).await;
    assert_eq!(status, 200);
    assert_eq!(
        series(
            &before,
            r#"emseepea_guest_calls_total{source="catalog",export="describe",outcome="ok"}"#
        ),
        1.0,
        "{before}"
    );

    // A 401: no token for a listing; and a bad token.
    let a = modern(&s.url, None, json!(1), "resources/list", json!({})).await;
    assert_eq!(a.status, 401);
    let a = modern(
        &s.url,
        Some("not-a-token"),
        json!(2),
        "resources/list",
        json!({}),
    )
    .await;
    assert_eq!(a.status, 401);

    // The cursor loop over 20 entries in pages of 8: 3 pages.
    let catalog = s.token(Some("alice"), "catalog:read");
    let (uris, pages) = traverse(&s.url, &catalog).await;
    assert_eq!((uris.len(), pages), (20, 3));

    // A tampered cursor.
    let first = modern(
        &s.url,
        Some(&catalog),
        json!(3),
        "resources/list",
        json!({}),
    )
    .await;
    let cursor = first.json()["result"]["nextCursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut bad = cursor.clone();
    bad.replace_range(10..11, if &cursor[10..11] == "A" { "B" } else { "A" });
    let a = modern(
        &s.url,
        Some(&catalog),
        json!(4),
        "resources/list",
        json!({ "cursor": bad }),
    )
    .await;
    assert_eq!(a.json()["error"]["code"], -32602, "{}", a.text());

    // A fuel-exhausted read.
    let hostile = s.token(Some("bob"), "hostile:read");
    let a = modern(
        &s.url,
        Some(&hostile),
        json!(5),
        "resources/read",
        json!({"uri": "hostile://bad/1"}),
    )
    .await;
    assert_eq!(a.json()["error"]["code"], -32603, "{}", a.text());

    let (_, m) = get(&format!("{admin}/metrics")).await;
    let v = |name: &str| series(&m, name) - series(&before, name);
    let list = |outcome: &str| {
        v(&format!(
            r#"emseepea_mcp_requests_total{{method="resources/list",version="2026-07-28",outcome="{outcome}"}}"#
        ))
    };
    assert_eq!(list("ok"), 4.0, "{m}");
    assert_eq!(list("invalid_cursor"), 1.0, "{m}");
    assert_eq!(
        v(
            r#"emseepea_mcp_requests_total{method="resources/read",version="2026-07-28",outcome="internal_error"}"#
        ),
        1.0,
        "{m}"
    );
    assert_eq!(
        v(r#"emseepea_http_responses_total{status="401"}"#),
        2.0,
        "{m}"
    );
    assert_eq!(
        v(r#"emseepea_http_responses_total{status="200"}"#),
        6.0,
        "{m}"
    );
    assert_eq!(
        v(r#"emseepea_auth_failures_total{reason="missing"}"#),
        1.0,
        "{m}"
    );
    assert_eq!(
        v(r#"emseepea_auth_failures_total{reason="invalid"}"#),
        1.0,
        "{m}"
    );
    assert_eq!(
        v(r#"emseepea_cursor_rejections_total{reason="tampered"}"#),
        1.0,
        "{m}"
    );
    assert_eq!(
        v(r#"emseepea_cursor_rejections_total{reason="expired"}"#),
        0.0,
        "{m}"
    );
    assert_eq!(
        v(r#"emseepea_guest_calls_total{source="bad",export="read",outcome="fuel"}"#),
        1.0,
        "{m}"
    );
    assert_eq!(
        v(r#"emseepea_guest_calls_total{source="catalog",export="list",outcome="ok"}"#),
        4.0,
        "{m}"
    );
    assert_eq!(
        v(r#"emseepea_guest_fuel_consumed_count{source="bad",export="read"}"#),
        1.0,
        "{m}"
    );
    assert_eq!(
        v(r#"emseepea_guest_call_duration_seconds_count{source="catalog",export="list"}"#),
        4.0,
        "{m}"
    );
    // Pages: 3 of the loop and the first page again; 8 + 8 + 4 + 8 entries.
    assert_eq!(v("emseepea_page_entries_count"), 4.0, "{m}");
    assert_eq!(v("emseepea_page_entries_sum"), 28.0, "{m}");
    assert_eq!(v("emseepea_pages_cut_by_bytes_total"), 0.0, "{m}");
    // Tokens: the catalog token verified once, then cached (3 more uses);
    // the hostile token and the bad token verified once each.
    assert_eq!(v("emseepea_token_cache_misses_total"), 3.0, "{m}");
    assert_eq!(v("emseepea_token_cache_hits_total"), 4.0, "{m}");
    // Gauges back to rest; this scrape is the only request in flight... on the admin port.
    assert_eq!(series(&m, "emseepea_http_requests_in_flight"), 0.0, "{m}");
    assert_eq!(series(&m, "emseepea_guest_slots_in_use"), 0.0, "{m}");
    // Bounded labels: no URI, subject or token in any series.
    for secret in [
        "hostile://",
        "catalog://",
        "alice",
        "bob",
        &catalog,
        "not-a-token",
    ] {
        assert!(!m.contains(secret), "{secret} in /metrics");
    }
}

#[test]
fn readyz_is_503_while_draining() {
    let s = server()
        .config(ADMIN)
        .hostile("slow", "sleep", "[budget]\nmax_duration_ms = 3000")
        .start();
    let admin = admin_url(&s);
    let rt = tokio::runtime::Runtime::new().unwrap();
    assert_eq!(rt.block_on(get(&format!("{admin}/healthz"))).0, 200);
    assert_eq!(
        rt.block_on(get(&format!("{admin}/readyz"))),
        (200, "ready\n".into())
    );
    let (status, _) = rt.block_on(get(&format!("{}/metrics", s.url.trim_end_matches("/mcp"))));
    assert_eq!(status, 404, "no /metrics on the MCP listener");

    let token = s.token(Some("alice"), "hostile:read");
    let url = s.url.clone();
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
    // In flight before the signal: on a loaded machine a fixed sleep may
    // not be long enough for the request to arrive.
    let start = Instant::now();
    while series(
        &rt.block_on(get(&format!("{admin}/metrics"))).1,
        "emseepea_http_requests_in_flight",
    ) < 1.0
    {
        assert!(start.elapsed() < Duration::from_secs(10), "never in flight");
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &s.pid().to_string()])
        .status();
    let start = Instant::now();
    let draining = loop {
        let r = rt.block_on(get(&format!("{admin}/readyz")));
        if r.0 == 503 {
            break r;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "readyz never 503: {r:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(draining.1, "draining\n");
    assert!(
        !pending.is_finished(),
        "the slow request is still in flight"
    );
    // Alive while draining.
    assert_eq!(rt.block_on(get(&format!("{admin}/healthz"))).0, 200);
    let a = rt.block_on(pending).unwrap();
    assert_eq!(a.status, 200, "the in-flight request got its answer");
    let status = s.terminate();
    assert!(status.success(), "exit status {status}");
}

#[tokio::test]
async fn json_logs_carry_the_request_id_of_a_guest_failure() {
    let s = server()
        .config("[log]\nformat = \"json\"\n")
        .hostile("bad", "loop", "[budget]\nfuel = 20_000_000")
        .start();
    let token = s.token(Some("alice"), "hostile:read");
    let a = modern(
        &s.url,
        Some(&token),
        json!("req-fuel-7"),
        "resources/read",
        json!({"uri": "hostile://bad/1"}),
    )
    .await;
    assert_eq!(a.json()["error"]["code"], -32603, "{}", a.text());
    s.expect_log(&["guest call failed"]);
    let log = s.log();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let failure = lines
        .iter()
        .find(|v| {
            v["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("guest call failed"))
        })
        .unwrap_or_else(|| panic!("no failure line:\n{log}"));
    assert_eq!(failure["level"], "WARN", "{failure}");
    assert_eq!(failure["target"], "emseepea::runtime::call", "{failure}");
    assert_eq!(failure["source"], "bad", "{failure}");
    assert_eq!(failure["reason"], "fuel_exhausted", "{failure}");
    assert_eq!(failure["request_id"], "\"req-fuel-7\"", "{failure}");
    assert!(failure["timestamp"].is_string(), "{failure}");
    // Every line about this request carries the same id.
    let about: Vec<_> = lines
        .iter()
        .filter(|v| v.to_string().contains("req-fuel-7"))
        .collect();
    assert!(!about.is_empty());
    for v in about {
        assert_eq!(v["request_id"], "\"req-fuel-7\"", "{v}");
    }
}

/// Issue 11.1: SQL statements (duration, rows, outcome incl. interrupted)
/// by source, database and engine, counted exactly after known traffic;
/// a database label a guest made up never becomes a series.
#[tokio::test]
async fn sql_statements_are_counted_by_source_database_engine_and_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let main = dir.path().join("main.sqlite");
    rusqlite::Connection::open(&main)
        .unwrap()
        .execute_batch("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2), (3);")
        .unwrap();
    let rw = dir.path().join("rw.sqlite");
    rusqlite::Connection::open(&rw)
        .unwrap()
        .execute_batch("CREATE TABLE w (x INTEGER);")
        .unwrap();
    let on =
        |db: &str| format!("[grants]\ndatabases = [\"{db}\"]\n[config]\ndatabase = \"{db}\"\n");
    let runaway =
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";
    let s = server()
        .config(&format!(
            "{ADMIN}[databases.main]\nfile = \"{}\"\n[databases.rw]\nfile = \"{}\"\nread_only = false\n",
            main.display(),
            rw.display()
        ))
        .hostile("three", "sql", &format!("{}sql = \"SELECT x FROM t\"\n", on("main")))
        .hostile(
            "rows",
            "sql",
            &format!("{}sql = \"SELECT x FROM t\"\nmax_rows = \"2\"\n", on("main")),
        )
        .hostile(
            "escape",
            "sql",
            &format!("{}sql = \"ATTACH DATABASE 'x.db' AS other\"\n", on("main")),
        )
        .hostile(
            "runaway",
            "sql",
            &format!("[budget]\nmax_duration_ms = 500\n{}sql = \"{runaway}\"\n", on("main")),
        )
        .hostile(
            "spin",
            "sql",
            &format!("[budget]\nmax_duration_ms = 60000\n{}sql = \"{runaway}\"\n", on("main")),
        )
        .hostile(
            "writer",
            "sql-execute",
            &format!(
                "{}script = \"INSERT INTO w VALUES (1), (2)\\nUPDATE w SET x = 0\"\n",
                on("rw")
            ),
        )
        .hostile(
            "stranger",
            "sql",
            "[grants]\ndatabases = [\"main\"]\n[config]\ndatabase = \"made-up\"\n",
        )
        .start();
    let admin = admin_url(&s);
    let (_, before) = get(&format!("{admin}/metrics")).await;
    let token = s.token(Some("alice"), "hostile:read");
    let read = async |source: &str| {
        let a = modern(
            &s.url,
            Some(&token),
            json!(source),
            "resources/read",
            json!({"uri": format!("hostile://{source}/1")}),
        )
        .await;
        a.json()["result"]["contents"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(read("three").await, "rows=3");
    assert_eq!(read("three").await, "rows=3");
    assert_eq!(read("rows").await, "query: Error::TooLarge");
    assert!(read("escape").await.starts_with("query: Error::Failed("));
    assert_eq!(read("runaway").await, "", "the deadline ends the call");
    assert_eq!(read("writer").await, "changed=2\nchanged=2");
    assert_eq!(read("stranger").await, "open: Error::NotGranted");

    // A statement whose request is cancelled (the call's future is dropped).
    let session = Session::open(&s.url, "2025-11-25", Some(&token)).await;
    let (url, headers) = (s.url.clone(), session.headers());
    let pending = tokio::spawn(async move {
        let refs: Vec<(&str, &str)> = headers
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        post(&url, &refs, serde_json::to_vec(&json!({"jsonrpc":"2.0","id":"q","method":"resources/read","params":{"uri":"hostile://spin/1"}})).unwrap()).await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    session
        .send(
            json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"q"}}),
        )
        .await;
    tokio::time::timeout(Duration::from_secs(10), pending)
        .await
        .unwrap()
        .unwrap();
    s.expect_log(&["sqlite statement interrupted", "database=main"]);

    let (_, m) = get(&format!("{admin}/metrics")).await;
    let v = |name: &str| series(&m, name) - series(&before, name);
    let labels = |source: &str, db: &str, statement: &str| {
        format!(r#"source="{source}",database="{db}",engine="sqlite",statement="{statement}""#)
    };
    let count = |source: &str, db: &str, statement: &str, outcome: &str| {
        v(&format!(
            "emseepea_sql_statements_total{{{},outcome=\"{outcome}\"}}",
            labels(source, db, statement)
        ))
    };
    assert_eq!(count("three", "main", "query", "ok"), 2.0, "{m}");
    assert_eq!(count("rows", "main", "query", "too_large"), 1.0, "{m}");
    assert_eq!(count("escape", "main", "query", "failed"), 1.0, "{m}");
    assert_eq!(count("runaway", "main", "query", "deadline"), 1.0, "{m}");
    assert_eq!(count("spin", "main", "query", "interrupted"), 1.0, "{m}");
    assert_eq!(count("writer", "rw", "execute", "ok"), 2.0, "{m}");
    let hist = |metric: &str, part: &str, source: &str, db: &str, statement: &str| {
        v(&format!(
            "emseepea_sql_statement_{metric}_{part}{{{}}}",
            labels(source, db, statement)
        ))
    };
    // Rows of the statements that succeeded: 3 + 3 returned, 2 + 2 changed.
    assert_eq!(hist("rows", "count", "three", "main", "query"), 2.0, "{m}");
    assert_eq!(hist("rows", "sum", "three", "main", "query"), 6.0, "{m}");
    assert_eq!(hist("rows", "count", "rows", "main", "query"), 0.0, "{m}");
    assert_eq!(hist("rows", "sum", "writer", "rw", "execute"), 4.0, "{m}");
    // Every statement is timed, however it ended.
    assert_eq!(
        hist("duration_seconds", "count", "three", "main", "query"),
        2.0,
        "{m}"
    );
    assert_eq!(
        hist("duration_seconds", "count", "spin", "main", "query"),
        1.0,
        "{m}"
    );
    assert_eq!(
        hist("duration_seconds", "count", "writer", "rw", "execute"),
        2.0,
        "{m}"
    );
    assert_eq!(
        hist("duration_seconds", "count", "runaway", "main", "query"),
        1.0,
        "{m}"
    );
    assert!(
        hist("duration_seconds", "sum", "runaway", "main", "query") > 0.0,
        "{m}"
    );
    // An open of an ungranted label runs no statement and names no series.
    assert!(!m.contains("made-up"), "{m}");
    assert!(
        !m.lines()
            .any(|l| l.starts_with("emseepea_sql_") && l.contains("source=\"stranger\"")),
        "{m}"
    );
}

/// Outbound HTTP by source, granted host and status class, and refusals by
/// reason: labels come from the grants, never from the URL a guest chose.
#[tokio::test(flavor = "multi_thread")]
async fn outbound_http_is_counted_by_granted_host_and_status_class() {
    let backend = FakeHttp::start(std::sync::Arc::new(|_, path, _, _| {
        if path == "/fail" {
            (503, "down".into())
        } else {
            (200, "fine".into())
        }
    }))
    .await;
    let fetch = |url: String, grant: &str| {
        format!("[grants]\nhttp = [\"{grant}\"]\n[config]\nurl = \"{url}\"\n")
    };
    let s = server()
        .config(ADMIN)
        .hostile(
            "ok",
            "fetch",
            &fetch(format!("{}/ok?secret=1", backend.url), &backend.url),
        )
        .hostile(
            "fail",
            "fetch",
            &fetch(format!("{}/fail", backend.url), &backend.url),
        )
        .hostile(
            "dead",
            "fetch",
            &fetch("http://127.0.0.1:1/x".into(), "http://127.0.0.1:1"),
        )
        .hostile(
            "denied",
            "fetch",
            &fetch("http://127.0.0.1:1/x".into(), &backend.url),
        )
        .start();
    let admin = admin_url(&s);
    let token = s.token(Some("alice"), "hostile:read");
    let (_, before) = get(&format!("{admin}/metrics")).await;
    for (i, uri) in [
        "hostile://ok/1",
        "hostile://ok/2",
        "hostile://fail/1",
        "hostile://dead/1",
        "hostile://denied/1",
    ]
    .iter()
    .enumerate()
    {
        let a = modern(
            &s.url,
            Some(&token),
            json!(i),
            "resources/read",
            json!({ "uri": uri }),
        )
        .await;
        assert_eq!(a.status, 200, "{uri}: {}", a.text());
    }
    let (_, after) = get(&format!("{admin}/metrics")).await;
    let moved = |name: &str| series(&after, name) - series(&before, name);
    let req = |source: &str, status: &str| {
        format!(
            r#"emseepea_outbound_http_requests_total{{source="{source}",host="127.0.0.1",status="{status}"}}"#
        )
    };
    assert_eq!(moved(&req("ok", "2xx")), 2.0, "{after}");
    assert_eq!(moved(&req("fail", "5xx")), 1.0, "{after}");
    assert_eq!(moved(&req("dead", "error")), 1.0, "{after}");
    assert_eq!(
        moved(r#"emseepea_outbound_http_denied_total{source="denied",reason="not_granted"}"#),
        1.0,
        "{after}"
    );
    assert_eq!(backend.hits(), 3);
    // Nothing a guest chose became a label.
    for l in after
        .lines()
        .filter(|l| l.starts_with("emseepea_outbound_http"))
    {
        assert!(
            !l.contains("secret") && !l.contains("/ok") && !l.contains(":1"),
            "{l}"
        );
    }
    assert!(after.contains("# HELP emseepea_outbound_http_requests Guest requests"));
}

/// Every warning a guest's failure produces in a capability (a refused
/// outbound request, a database it was not granted, a statement the
/// authorizer refused) carries the request's id, like the call's own line.
#[tokio::test(flavor = "multi_thread")]
async fn json_logs_carry_the_request_id_of_capability_failures() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db.sqlite");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("CREATE TABLE t (x INTEGER);")
        .unwrap();
    let s = server()
        .config(&format!(
            "[log]\nformat = \"json\"\n[databases.main]\nfile = \"{}\"\n",
            db.display()
        ))
        .hostile("fetcher", "fetch", "[config]\nurl = \"http://127.0.0.1:1/x\"\n")
        .hostile("probe", "denials", "")
        .hostile(
            "escape",
            "sql",
            "[grants]\ndatabases = [\"main\"]\n[config]\ndatabase = \"main\"\nsql = \"ATTACH DATABASE '/tmp/emseepea-escape.db' AS other\"\n",
        )
        .start();
    let token = s.token(Some("alice"), "hostile:read");
    for (id, uri) in [
        ("req-http", "hostile://fetcher/1"),
        ("req-db", "hostile://probe/1"),
        ("req-sql", "hostile://escape/1"),
    ] {
        let a = modern(
            &s.url,
            Some(&token),
            json!(id),
            "resources/read",
            json!({ "uri": uri }),
        )
        .await;
        assert_eq!(a.status, 200, "{uri}: {}", a.text());
    }
    s.expect_log(&["sqlite statement refused by the authorizer"]);
    let log = s.log();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let line = |message: &str| {
        lines
            .iter()
            .find(|v| {
                v["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with(message))
            })
            .unwrap_or_else(|| panic!("no {message:?} line:\n{log}"))
    };
    assert_eq!(
        line("outbound request denied")["request_id"],
        "\"req-http\"",
        "{log}"
    );
    assert_eq!(
        line("guest asked for a database it was not granted")["request_id"],
        "\"req-db\"",
        "{log}"
    );
    assert_eq!(
        line("sqlite statement refused by the authorizer")["request_id"],
        "\"req-sql\"",
        "{log}"
    );
    // And no warning of the runtime is without one.
    for v in lines.iter().filter(|v| {
        v["level"] == "WARN"
            && v["target"]
                .as_str()
                .is_some_and(|t| t.starts_with("emseepea::runtime"))
    }) {
        assert!(v["request_id"].is_string(), "{v}");
    }
}

/// The PostgreSQL engine's lines carry the request id too: a statement the
/// server refuses (its SQLSTATE line) and a database that is down (the
/// unavailable line), each under the request that caused it.
#[tokio::test(flavor = "multi_thread")]
async fn json_logs_carry_the_request_id_of_postgres_failures() {
    let pg = support::postgres::Postgres::start();
    // A port nothing listens on: the database is down.
    let down = support::nginx::free_port();
    let s = server()
        .config(&format!(
            "[log]\nformat = \"json\"\n\
             [databases.main]\nengine = \"postgres\"\nurl = \"{}\"\ntls = \"disable\"\n\
             [databases.down]\nengine = \"postgres\"\nurl = \"postgres://x@127.0.0.1:{down}/x\"\ntls = \"disable\"\n",
            pg.url()
        ))
        .hostile(
            "refused",
            "sql",
            "[grants]\ndatabases = [\"main\"]\n[config]\ndatabase = \"main\"\nsql = \"SELECT * FROM no_such_table\"\n",
        )
        .hostile(
            "gone",
            "sql",
            "[grants]\ndatabases = [\"down\"]\n[config]\ndatabase = \"down\"\n",
        )
        .start();
    let token = s.token(Some("alice"), "hostile:read");
    for (id, uri) in [
        ("req-pg", "hostile://refused/1"),
        ("req-down", "hostile://gone/1"),
    ] {
        let a = modern(
            &s.url,
            Some(&token),
            json!(id),
            "resources/read",
            json!({ "uri": uri }),
        )
        .await;
        assert_eq!(a.status, 200, "{uri}: {}", a.text());
    }
    s.expect_log(&["postgres statement failed"]);
    s.expect_log(&["postgres database unavailable"]);
    let log = s.log();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let line = |message: &str| {
        lines
            .iter()
            .find(|v| v["message"].as_str().is_some_and(|m| m == message))
            .unwrap_or_else(|| panic!("no {message:?} line:\n{log}"))
    };
    let failed = line("postgres statement failed");
    assert_eq!(failed["request_id"], "\"req-pg\"", "{log}");
    assert_eq!(failed["sqlstate"], "42P01", "{log}");
    assert_eq!(
        line("postgres database unavailable")["request_id"],
        "\"req-down\"",
        "{log}"
    );
    for v in lines.iter().filter(|v| {
        v["level"] == "WARN"
            && v["target"]
                .as_str()
                .is_some_and(|t| t.starts_with("emseepea::runtime"))
    }) {
        assert!(v["request_id"].is_string(), "{v}");
    }
}

/// `emseepea_source_trims_total` of the catalog, polled until it is at
/// least `want` or `within` has passed.
async fn trims_after(admin: &str, want: f64, within: Duration) -> (f64, String) {
    let name = r#"emseepea_source_trims_total{source="catalog"}"#;
    let until = Instant::now() + within;
    loop {
        let (_, m) = get(&format!("{admin}/metrics")).await;
        let n = series(&m, name);
        if n >= want || Instant::now() >= until {
            return (n, m);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A 20-item catalog with `idle_trim_s`; its admin URL and alice's token.
fn trimming_server(idle_trim_s: u64) -> (Server, String, String) {
    let s = server()
        .config(&format!("{ADMIN}[runtime]\nidle_trim_s = {idle_trim_s}\n"))
        .source("catalog", "catalog", "[config]\nitems = \"20\"\n")
        .start();
    let admin = admin_url(&s);
    let alice = s.token(Some("alice"), "catalog:read");
    (s, admin, alice)
}

#[tokio::test]
async fn an_idle_source_gives_its_pool_memory_back_and_serves_the_same_after() {
    let (s, admin, alice) = trimming_server(1);
    let (before, _) = traverse(&s.url, &alice).await;
    let (used, _) = trims_after(&admin, 0.0, Duration::ZERO).await;
    // Idle for a second: relinked, and the slots warm for the old copy give
    // their memory images back with it (wasmtime counts them at 0 then).
    let (trims, m) = trims_after(&admin, used + 1.0, Duration::from_secs(20)).await;
    assert_eq!(trims, used + 1.0, "never trimmed:\n{m}");
    assert_eq!(
        series(&m, "emseepea_pool_idle_resident_bytes"),
        0.0,
        "the pool still holds memory:\n{m}"
    );
    // Served from the new copy exactly as before.
    let (after, _) = traverse(&s.url, &alice).await;
    assert_eq!(before, after);
    // Used again, idle again: trimmed once more; unused, never again.
    let (again, m) = trims_after(&admin, trims + 1.0, Duration::from_secs(20)).await;
    assert_eq!(again, trims + 1.0, "{m}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (later, m) = trims_after(&admin, again + 1.0, Duration::ZERO).await;
    assert_eq!(later, again, "trimmed without calls in between:\n{m}");
}

#[tokio::test]
async fn with_idle_trim_off_nothing_is_trimmed() {
    let (s, admin, alice) = trimming_server(0);
    traverse(&s.url, &alice).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (trims, m) = trims_after(&admin, 1.0, Duration::ZERO).await;
    assert_eq!(trims, 0.0, "{m}");
}

/// `guest_threads` takes calls only while the server has the clients to
/// pay for the hand-over (`guest_threads_from_connections`, default 8):
/// one client alone is served on the worker, at a wake-up less per call.
#[tokio::test]
async fn guest_threads_take_calls_only_while_enough_clients_are_connected() {
    let s = server()
        .config(&format!("{ADMIN}[runtime]\nguest_threads = 1\n"))
        .source("catalog", "catalog", "[config]\nitems = \"20\"\n")
        .start();
    let admin = admin_url(&s);
    let alice = s.token(Some("alice"), "catalog:read");
    let handed_over = || async {
        let (_, m) = get(&format!("{admin}/metrics")).await;
        series(&m, "emseepea_guest_calls_on_guest_threads_total")
    };
    let reads = |n: usize| {
        let (url, alice) = (s.url.clone(), alice.clone());
        async move {
            for i in 0..n {
                let uri = format!("catalog://catalog/items/{:010}", i + 1);
                let a = modern(
                    &url,
                    Some(&alice),
                    json!(i),
                    "resources/read",
                    json!({"uri": uri}),
                )
                .await;
                assert!(a.json()["result"]["contents"].is_array(), "{}", a.text());
            }
        }
    };

    // One client: on the worker.
    reads(5).await;
    assert_eq!(handed_over().await, 0.0);

    // Eight more clients connected (idle): the same reads go to the thread.
    let addr = s
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    // Each answers a request first, so the server has surely accepted it.
    let others: Vec<_> = (0..8)
        .map(|_| {
            use std::io::{Read, Write};
            let mut c = std::net::TcpStream::connect(&addr).unwrap();
            c.write_all(b"GET /nothing HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                .unwrap();
            let mut head = [0u8; 12];
            c.read_exact(&mut head).unwrap();
            assert!(head.starts_with(b"HTTP/1.1 "), "{head:?}");
            c
        })
        .collect();
    reads(5).await;
    assert_eq!(handed_over().await, 5.0);

    // They leave: back on the worker, once the server has seen them go.
    drop(others);
    let started = std::time::Instant::now();
    loop {
        let before = handed_over().await;
        reads(1).await;
        if handed_over().await == before {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "still handed over 10 s after the clients left"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let settled = handed_over().await;
    reads(5).await;
    assert_eq!(handed_over().await, settled);
}

/// The CPUs in a `Cpus_allowed_list` line of /proc (`0-1,4`).
fn cpu_list(list: &str) -> Vec<usize> {
    list.trim()
        .split(',')
        .flat_map(|r| match r.split_once('-') {
            Some((a, b)) => (a.parse().unwrap()..=b.parse().unwrap()).collect::<Vec<usize>>(),
            None => vec![r.parse().unwrap()],
        })
        .collect()
}

/// Every thread of `pid`: its name and the CPUs it may run on.
fn thread_masks(pid: u32) -> Vec<(String, Vec<usize>)> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| {
            let t = t.ok()?.path();
            let comm = std::fs::read_to_string(t.join("comm")).ok()?;
            let status = std::fs::read_to_string(t.join("status")).ok()?;
            let list = status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
            Some((comm.trim().to_owned(), cpu_list(list)))
        })
        .collect()
}

fn own_cpus() -> Vec<usize> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    cpu_list(
        status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap(),
    )
}

/// A 20-item catalog with `config`, started.
fn catalog_server(config: &str) -> Server {
    server()
        .config(config)
        .source("catalog", "catalog", "[config]\nitems = \"20\"\n")
        .start()
}

/// The worker count in the server's "worker threads ..." line.
fn logged_workers(s: &Server) -> (usize, String) {
    let line = s
        .wait_for_log(&["worker threads"], Duration::from_secs(10))
        .expect("no worker threads line");
    let n = line
        .split("workers=")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no worker count in {line}"));
    (n, line)
}

/// `[workers] pin`: each worker on a CPU of its own, and the threads the
/// runtime starts afterwards (the idle trimmer's blocking thread, started by
/// a pinned worker) back on all of them, not on their creator's one.
#[tokio::test]
async fn pinned_workers_take_one_cpu_each_and_later_threads_take_them_all() {
    let cpus = own_cpus();
    assert!(cpus.len() >= 2, "the test needs two CPUs: {cpus:?}");
    let s = catalog_server("[workers]\npin = \"always\"\n[runtime]\nidle_trim_s = 3\n");
    let (workers, line) = logged_workers(&s);
    assert!(line.contains("pinned, one per CPU"), "{line}");
    let alice = s.token(Some("alice"), "catalog:read");
    traverse(&s.url, &alice).await;
    // The trimmer spawns a blocking task every second from here.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let masks = thread_masks(s.pid());
    let pinned: Vec<usize> = masks
        .iter()
        .filter(|(name, m)| name == "tokio-rt-worker" && m.len() == 1)
        .map(|(_, m)| m[0])
        .collect();
    assert_eq!(pinned.len(), workers, "{masks:?}");
    let mut distinct = pinned.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), workers.min(cpus.len()), "{masks:?}");
    let blocking = masks
        .iter()
        .filter(|(name, m)| name == "tokio-rt-worker" && m.len() > 1)
        .count();
    assert!(blocking >= 1, "no blocking thread started: {masks:?}");
    for (name, m) in &masks {
        assert!(
            m.len() == 1 && name == "tokio-rt-worker" || *m == cpus,
            "{name}: {m:?} of {cpus:?}"
        );
    }
}

#[tokio::test]
async fn never_pinned_workers_and_auto_pins_only_on_one_cpu_per_worker() {
    let cpus = own_cpus();
    let s = catalog_server("[workers]\npin = \"never\"\n");
    let (_, line) = logged_workers(&s);
    assert!(line.contains("not pinned"), "{line}");
    let alice = s.token(Some("alice"), "catalog:read");
    traverse(&s.url, &alice).await;
    for (name, m) in thread_masks(s.pid()) {
        assert_eq!(m, cpus, "{name}");
    }
    // The default, "auto": pinned exactly when the counts match.
    let s = catalog_server("");
    let (workers, line) = logged_workers(&s);
    assert_eq!(
        line.contains("pinned, one per CPU"),
        workers == cpus.len(),
        "{workers} workers on {cpus:?}: {line}"
    );
}

/// Voluntary context switches so far of each pinned worker thread (one CPU
/// in its mask; the blocking pool's threads have them all), by thread id.
fn worker_switches(pid: u32) -> Vec<(String, u64)> {
    let mut workers: Vec<(String, u64)> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| {
            let t = t.ok()?;
            let status = std::fs::read_to_string(t.path().join("status")).ok()?;
            let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name));
            let pinned = cpu_list(field("Cpus_allowed_list:")?).len() == 1;
            let switches = field("voluntary_ctxt_switches:")?.trim().parse().ok()?;
            pinned.then(|| (t.file_name().to_string_lossy().into_owned(), switches))
        })
        .collect();
    workers.sort();
    workers
}

/// One client's requests in turn, on one keep-alive connection, wake at most
/// the worker that reads them. hyper's body hand-over used to wake the
/// connection's own task, which tokio handed to the other worker, which woke
/// and slept again for about every request: 1.3–2.1 worker context switches
/// per request here, 0.4–0.6 with `listener::self_wakes` (a worker finds
/// the next request without sleeping about half of the time). Since calls
/// keep their instance (no teardown after the response), the reading worker
/// sleeps about once a request; the other must not wake.
#[tokio::test]
async fn a_lone_clients_requests_do_not_wake_the_other_worker() {
    let s = catalog_server("[workers]\npin = \"always\"\n");
    let (workers, _) = logged_workers(&s);
    assert!(workers >= 2, "the test needs two workers");
    let alice = s.token(Some("alice"), "catalog:read");
    let client = http();
    let list = || modern_list(&client, &s.url, &alice).send();
    // The connection, the standby, the caches: then count.
    for _ in 0..20 {
        assert_eq!(list().await.unwrap().status(), 200);
    }
    const REQUESTS: u64 = 300;
    let before = worker_switches(s.pid());
    for _ in 0..REQUESTS {
        let a = list().await.unwrap();
        assert_eq!(a.status(), 200);
        a.bytes().await.unwrap();
    }
    let after = worker_switches(s.pid());
    assert_eq!(after.len(), workers, "{after:?}");
    let mut each: Vec<u64> = before
        .iter()
        .zip(&after)
        .map(|((b_id, b), (a_id, a))| {
            assert_eq!(b_id, a_id);
            a - b
        })
        .collect();
    each.sort_unstable();
    let per_request = |n: u64| n as f64 / REQUESTS as f64;
    // The worker that reads the requests may sleep between two of them (a
    // faster server sleeps more often: with kept instances, about once a
    // request); every other worker must stay asleep.
    let others: u64 = each[..each.len() - 1].iter().sum();
    println!(
        "worker context switches per request: {:?}",
        each.iter().map(|&n| per_request(n)).collect::<Vec<_>>()
    );
    assert!(
        per_request(others) < 0.3,
        "the other workers woke {:.2} times a request",
        per_request(others)
    );
    assert!(per_request(each.iter().sum()) < 1.5, "{each:?}");
}

/// `[workers] yield_after_us`: a worker that has run that long without
/// waiting for I/O gives its CPU a turn after its next response write, and
/// `0` turns it off. With 1 µs every response's write comes after the run's
/// limit (a request takes longer than that to serve), so the yields count
/// the responses, less the turns a worker skips because it had itself been
/// waiting for a CPU (on this shared machine, a few), which are counted
/// apart.
#[tokio::test]
async fn a_worker_yields_after_running_its_turn_and_never_when_off() {
    async fn yields_for_40_pages(config: &str) -> (f64, f64, String) {
        let s = catalog_server(&format!("{ADMIN}{config}"));
        let (_, line) = logged_workers(&s);
        let admin = admin_url(&s);
        let alice = s.token(Some("alice"), "catalog:read");
        let client = http();
        for _ in 0..40 {
            let a = modern_list(&client, &s.url, &alice).send().await.unwrap();
            assert_eq!(a.status(), 200);
            a.bytes().await.unwrap();
        }
        let (_, m) = get(&format!("{admin}/metrics")).await;
        (
            series(&m, "emseepea_worker_yields_total"),
            series(&m, "emseepea_worker_turns_skipped_total"),
            line,
        )
    }
    let (yields, skipped, line) = yields_for_40_pages("[workers]\nyield_after_us = 1\n").await;
    assert!(line.contains("yield_after_us=1"), "{line}");
    assert!(yields >= 1.0, "{yields} yields for 40 responses");
    // Every response after a worker's first run ends a turn, taken or skipped.
    assert!(
        yields + skipped >= 30.0,
        "{yields} yields and {skipped} skipped turns for 40 responses"
    );
    let (yields, skipped, _) = yields_for_40_pages("[workers]\nyield_after_us = 0\n").await;
    assert_eq!((yields, skipped), (0.0, 0.0));
    // The default: a 150 µs turn.
    let (_, _, line) = yields_for_40_pages("").await;
    assert!(line.contains("yield_after_us=150"), "{line}");
}

/// `[runtime] perf_map`: wasmtime writes `/tmp/perf-PID.map` for the
/// serving process, so that `perf` names a guest's compiled functions (its
/// exports by their WIT names) instead of `[JIT]` addresses. The compiler
/// child (a private cache makes the server start one) leaves no map of its
/// own, and without the setting there is none at all.
#[tokio::test]
async fn a_perf_map_names_the_guests_functions_only_when_asked() {
    let maps = || -> std::collections::BTreeSet<std::path::PathBuf> {
        std::fs::read_dir("/tmp")
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy();
                name.starts_with("perf-") && name.ends_with(".map")
            })
            .collect()
    };
    let start = |config: &str| {
        server()
            .config(config)
            .private_cache()
            .source("catalog", "catalog", "[config]\nitems = \"20\"\n")
            .start()
    };
    let client = http();
    let before = maps();
    let s = start("[runtime]\nperf_map = true\n");
    let alice = s.token(Some("alice"), "catalog:read");
    let answer = modern_list(&client, &s.url, &alice).send().await.unwrap();
    assert_eq!(answer.status(), 200);
    let ours = std::path::PathBuf::from(format!("/tmp/perf-{}.map", s.pid()));
    let new: Vec<_> = maps().difference(&before).cloned().collect();
    assert_eq!(new, vec![ours.clone()], "perf maps written");
    let map = std::fs::read_to_string(&ours).unwrap();
    let _ = std::fs::remove_file(&ours);
    // `ADDRESS SIZE NAME` per function, as perf reads it.
    let list = map
        .lines()
        .find(|l| l.ends_with("emseepea:inventory/inventory@0.1.0#list"))
        .unwrap_or_else(|| panic!("the list export is not named:\n{map}"));
    let fields: Vec<&str> = list.splitn(3, ' ').collect();
    assert!(fields[0].starts_with("0x"), "{list}");
    assert!(usize::from_str_radix(fields[1], 16).unwrap() > 0, "{list}");
    drop(s);

    let before = maps();
    let s = start("");
    let alice = s.token(Some("alice"), "catalog:read");
    let answer = modern_list(&client, &s.url, &alice).send().await.unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(maps(), before, "a perf map was written unasked");
}
