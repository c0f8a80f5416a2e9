//! The engine against a real PostgreSQL (tests/support/postgres.rs).
//!
//! (Over 500 lines: tests only, one per behaviour of the engine against a
//! real server.)

use super::*;

// Also the checklist's (`checklist.rs`): one copy of the module.
#[path = "../../../../../../tests/support/postgres.rs"]
pub(super) mod harness;

use crate::runtime::CallerKey;
use harness::Postgres;

const FAR: Duration = Duration::from_secs(60);

/// One source's pool of the test database: `extra` is more of the section
/// (`read_only` among it, as the capability reads it).
fn database(pg: &Postgres, source: &str, extra: &str) -> TestDb {
    database_at(&pg.url(), source, extra)
}

/// As [`database`], logging in with `url`.
fn database_at(url: &str, source: &str, extra: &str) -> TestDb {
    let mut table: toml::Table =
        toml::from_str(&format!("url = {url:?}\ntls = \"disable\"\n{extra}")).unwrap();
    let read_only = table
        .remove("read_only")
        .is_none_or(|v| v.as_bool().unwrap());
    let config: PostgresConfig = toml::Value::Table(table).try_into().unwrap();
    TestDb {
        db: Arc::new(PostgresDatabase::new("main".into(), &config, read_only).unwrap()),
        source: source.into(),
    }
}

struct TestDb {
    db: Arc<PostgresDatabase>,
    source: Arc<str>,
}

impl TestDb {
    async fn open(
        &self,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<PgConnection, PgError> {
        self.open_as(&CallerKey::new("alice"), deadline, cancel)
            .await
    }

    async fn open_as(
        &self,
        caller: &CallerKey,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<PgConnection, PgError> {
        self.db
            .open(&self.source, caller, &"req-test".into(), deadline, cancel)
            .await
    }
}

fn far() -> Instant {
    Instant::now() + FAR
}

const ALL: Bounds = Bounds {
    max_rows: 1000,
    max_bytes: 1 << 20,
};

async fn one(
    conn: &mut PgConnection,
    sql: &str,
    params: &[Value],
) -> Result<Vec<Vec<Value>>, PgError> {
    let never = CancellationToken::new();
    conn.query_rows(sql, params, ALL, far(), &never)
        .await
        .map(|(rows, _)| rows.rows)
}

async fn open(db: &TestDb) -> PgConnection {
    db.open(far(), &CancellationToken::new()).await.unwrap()
}

fn int(rows: &[Vec<Value>]) -> i64 {
    match rows {
        [row] => match row[..] {
            [Value::Integer(i)] => i,
            ref other => panic!("not one integer: {other:?}"),
        },
        other => panic!("not one row: {other:?}"),
    }
}

/// A backend of this cluster is running `query` right now.
fn running(pg: &Postgres, query: &str) -> bool {
    pg.psql(&format!(
        "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query = '{}'",
        query.replace('\'', "''")
    )) != "0"
}

#[tokio::test]
async fn values_round_trip_and_other_types_are_refused() {
    let pg = Postgres::start();
    pg.psql(
        "CREATE TABLE v (i8 int8, i4 int4, i2 int2, f8 float8, f4 float4, t text, vc varchar(20), \
         b bytea, bo bool)",
    );
    let db = database(&pg, "notes", "read_only = false");
    let mut conn = open(&db).await;
    let row = vec![
        Value::Integer(i64::MIN),
        Value::Integer(-7),
        Value::Integer(300),
        Value::Real(2.5),
        Value::Real(-0.25),
        Value::Text("héllo '?1'".into()),
        Value::Text("short".into()),
        Value::Blob(vec![0, 255, 1]),
        Value::Integer(1),
    ];
    let never = CancellationToken::new();
    let insert = "INSERT INTO v VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
    assert_eq!(conn.execute_rows(insert, &row, far(), &never).await, Ok(1));
    let nulls = vec![Value::Null; 9];
    assert_eq!(
        conn.execute_rows(insert, &nulls, far(), &never).await,
        Ok(1)
    );
    let rows = one(&mut conn, "SELECT * FROM v ORDER BY i8 NULLS LAST", &[])
        .await
        .unwrap();
    assert_eq!(format!("{rows:?}"), format!("{:?}", vec![row, nulls]));
    // Columns of other types are refused before a row is read.
    for sql in ["SELECT now()", "SELECT 1.5::numeric", "SELECT '{}'::jsonb"] {
        assert_eq!(
            one(&mut conn, sql, &[]).await.err(),
            Some(PgError::Failed("unsupported column type")),
            "{sql}"
        );
    }
    // A parameter that does not fit its placeholder's inferred type.
    let mismatch = Some(PgError::Failed(
        "a parameter does not fit its placeholder's type",
    ));
    assert_eq!(
        one(
            &mut conn,
            "SELECT i2 FROM v WHERE i2 = ?1",
            &[Value::Integer(70_000)]
        )
        .await
        .err(),
        mismatch
    );
    assert_eq!(
        one(
            &mut conn,
            "SELECT i2 FROM v WHERE i4 = ?1",
            &[Value::Text("1".into())]
        )
        .await
        .err(),
        mismatch
    );
    assert_eq!(
        one(&mut conn, "SELECT ?1::int8", &[]).await.err(),
        Some(PgError::Failed("wrong number of parameters"))
    );
    // The connection still serves.
    assert_eq!(
        int(&one(&mut conn, "SELECT count(*) FROM v", &[]).await.unwrap()),
        2
    );
}

#[tokio::test]
async fn placeholders_in_literals_and_comments_are_not_parameters() {
    let pg = Postgres::start();
    let db = database(&pg, "notes", "");
    let mut conn = open(&db).await;
    let x = Value::Text("x".into());
    let rows = one(
        &mut conn,
        "SELECT '?1' AS a, ?1 AS b, $$ ?2 $$ AS c, \"?3\".d -- ?4\n FROM (SELECT 'q' AS d) AS \"?3\" /* ?5 */",
        std::slice::from_ref(&x),
    )
    .await
    .unwrap();
    let want = vec![vec![
        Value::Text("?1".into()),
        x.clone(),
        Value::Text(" ?2 ".into()),
        Value::Text("q".into()),
    ]];
    assert_eq!(format!("{rows:?}"), format!("{want:?}"));
    assert_eq!(
        one(&mut conn, "SELECT $1::text", std::slice::from_ref(&x))
            .await
            .err(),
        Some(PgError::Failed("use ?N placeholders"))
    );
}

#[tokio::test]
async fn a_read_only_grant_refuses_every_write() {
    let pg = Postgres::start();
    pg.psql("CREATE TABLE t (x int8); INSERT INTO t VALUES (1)");
    let db = database(&pg, "notes", "");
    let mut conn = open(&db).await;
    let never = CancellationToken::new();
    let read_only = Err(PgError::Failed("the database is read-only"));
    assert_eq!(
        conn.execute_rows("INSERT INTO t VALUES (2)", &[], far(), &never)
            .await,
        read_only
    );
    assert_eq!(
        one(
            &mut conn,
            "WITH w AS (DELETE FROM t RETURNING x) SELECT x FROM w",
            &[]
        )
        .await
        .err(),
        read_only.clone().err()
    );
    assert_eq!(
        conn.execute_rows("CREATE TEMP TABLE tmp (x int)", &[], far(), &never)
            .await,
        read_only
    );
    // Switching the transaction to read-write is too late once it ran a query.
    assert!(
        one(
            &mut conn,
            "SELECT set_config('transaction_read_only', 'off', true)",
            &[]
        )
        .await
        .is_err()
    );
    assert_eq!(
        conn.execute_rows("UPDATE t SET x = 5", &[], far(), &never)
            .await,
        read_only
    );
    assert_eq!(pg.psql("SELECT x FROM t"), "1");
    // A read-write grant of the same database writes.
    let rw = database(&pg, "notes", "read_only = false");
    let mut conn = open(&rw).await;
    assert_eq!(
        conn.execute_rows("INSERT INTO t VALUES (2)", &[], far(), &never)
            .await,
        Ok(1)
    );
    assert_eq!(pg.psql("SELECT count(*) FROM t"), "2");
}

#[tokio::test]
async fn session_state_does_not_survive_into_the_next_call() {
    let pg = Postgres::start();
    // One connection: the second call gets the very connection the first used.
    let db = database(&pg, "notes", "read_only = false\npool_size = 1");
    let never = CancellationToken::new();
    let mut first = open(&db).await;
    let pid = int(&one(&mut first, "SELECT pg_backend_pid()::int8", &[])
        .await
        .unwrap());
    for sql in [
        "SET application_name = 'leaked'",
        "SET search_path = leaked, public",
        "CREATE TEMP TABLE leaked (x int)",
        "PREPARE leaked AS SELECT 1",
    ] {
        assert_eq!(
            first.execute_rows(sql, &[], far(), &never).await,
            Ok(0),
            "{sql}"
        );
    }
    one(
        &mut first,
        "SELECT 1::int8 FROM (SELECT pg_advisory_lock(42)) AS l",
        &[],
    )
    .await
    .unwrap();
    drop(first);

    let mut second = open(&db).await;
    assert_eq!(
        int(&one(&mut second, "SELECT pg_backend_pid()::int8", &[])
            .await
            .unwrap()),
        pid
    );
    let checks = [
        ("SELECT current_setting('application_name') = 'emseepea'", 1),
        (
            "SELECT current_setting('search_path') = '\"$user\", public'",
            1,
        ),
        ("SELECT to_regclass('pg_temp.leaked') IS NULL", 1),
        (
            "SELECT count(*) FROM pg_prepared_statements WHERE name = 'leaked'",
            0,
        ),
        (
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()",
            0,
        ),
    ];
    for (sql, want) in checks {
        assert_eq!(
            int(&one(&mut second, sql, &[]).await.expect(sql)),
            want,
            "{sql}"
        );
    }
}

#[tokio::test]
async fn sources_never_share_a_pool() {
    let pg = Postgres::start();
    let alice = database(&pg, "alice-notes", "pool_size = 1");
    let bob = database(&pg, "bob-notes", "pool_size = 1");
    let mut a = open(&alice).await;
    let a_pid = int(&one(&mut a, "SELECT pg_backend_pid()::int8", &[])
        .await
        .unwrap());
    // Alice holds her one connection; Bob still gets one of his own.
    let mut b = bob
        .open(
            Instant::now() + Duration::from_secs(5),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    let b_pid = int(&one(&mut b, "SELECT pg_backend_pid()::int8", &[])
        .await
        .unwrap());
    assert_ne!(a_pid, b_pid);
    drop(a);
    drop(b);
    for _ in 0..3 {
        let mut b = open(&bob).await;
        assert_eq!(
            int(&one(&mut b, "SELECT pg_backend_pid()::int8", &[])
                .await
                .unwrap()),
            b_pid
        );
    }
    // Alice's pool, full, makes her wait; Bob is not affected.
    let _held = open(&alice).await;
    let busy = alice
        .open(
            Instant::now() + Duration::from_millis(300),
            &CancellationToken::new(),
        )
        .await
        .err();
    assert!(
        matches!(busy, Some(PgError::Unavailable | PgError::Deadline)),
        "{busy:?}"
    );
    let mut b = open(&bob).await;
    assert_eq!(int(&one(&mut b, "SELECT 7::int8", &[]).await.unwrap()), 7);
}

#[tokio::test]
async fn results_past_max_rows_or_bytes_are_refused() {
    let pg = Postgres::start();
    // Ten rows of a 100-byte text: 140 bytes each as charged (the value's
    // 100 + 16, the row's 24).
    pg.psql(
        "CREATE TABLE t AS SELECT g AS n, repeat('x', 100) AS s FROM generate_series(1, 10) AS g",
    );
    let db = database(&pg, "notes", "");
    let mut conn = open(&db).await;
    let never = CancellationToken::new();
    let sql = "SELECT s FROM t ORDER BY n";
    let rows = |max_rows, max_bytes| Bounds {
        max_rows,
        max_bytes,
    };
    let (ok, bytes) = conn
        .query_rows(sql, &[], rows(10, 1400), far(), &never)
        .await
        .unwrap();
    assert_eq!((ok.rows.len(), bytes), (10, 1400));
    assert_eq!(
        conn.query_rows(sql, &[], rows(9, 1 << 20), far(), &never)
            .await
            .err(),
        Some(PgError::TooLarge)
    );
    assert_eq!(
        conn.query_rows(sql, &[], rows(10, 1399), far(), &never)
            .await
            .err(),
        Some(PgError::TooLarge)
    );
    // The connection cut short was closed; the next statement gets another.
    assert_eq!(
        int(&one(&mut conn, "SELECT count(*) FROM t", &[]).await.unwrap()),
        10
    );
    // A large result stops early on the server too: nothing keeps running.
    let huge = "SELECT repeat('y', 1000) FROM generate_series(1, 100000000)";
    assert_eq!(
        conn.query_rows(huge, &[], rows(10, 1 << 20), far(), &never)
            .await
            .err(),
        Some(PgError::TooLarge)
    );
    assert!(
        stopped(&pg, huge).await,
        "the cut-short statement still runs"
    );
}

/// Whether no backend runs `query` within 5 s (polled; the runtime keeps
/// running meanwhile, so the host's cancel task can).
async fn stopped(pg: &Postgres, query: &str) -> bool {
    for _ in 0..100 {
        if !running(pg, query) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Resolves once a backend runs `query` (polled, bounded: panics after 10 s).
async fn started(pg: &Postgres, query: &str) {
    for _ in 0..200 {
        if running(pg, query) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{query} never started");
}

#[tokio::test]
async fn a_statement_is_cancelled_on_the_server_when_the_call_is_cancelled_or_dropped() {
    let pg = Postgres::start();
    let db = database(&pg, "notes", "");
    let sleep = "SELECT 1::int8 FROM pg_sleep(30)";
    let never = CancellationToken::new();

    // The request is cancelled (the deadline is far: statement_timeout does
    // not end it, only the cancel request can).
    let mut conn = open(&db).await;
    let cancel = CancellationToken::new();
    let r = {
        let query = conn.query_rows(sleep, &[], ALL, far(), &cancel);
        tokio::pin!(query);
        tokio::select! {
            r = &mut query => panic!("ended early: {r:?}"),
            () = started(&pg, sleep) => {}
        }
        cancel.cancel();
        query.await
    };
    assert_eq!(r.err(), Some(PgError::Interrupted));
    assert!(stopped(&pg, sleep).await, "still running after cancel");
    drop(conn);

    // The call's future is dropped mid-statement.
    let mut conn = open(&db).await;
    {
        let query = conn.query_rows(sleep, &[], ALL, far(), &never);
        tokio::pin!(query);
        tokio::select! {
            r = &mut query => panic!("ended early: {r:?}"),
            () = started(&pg, sleep) => {}
        }
    }
    assert!(stopped(&pg, sleep).await, "still running after drop");
    // The same guest connection serves the next statement.
    assert_eq!(
        int(&one(&mut conn, "SELECT 1::int8", &[]).await.unwrap()),
        1
    );
    drop(conn);

    // Out of time: the call ends at its deadline and the statement with it.
    let mut conn = open(&db).await;
    let r = conn
        .query_rows(
            sleep,
            &[],
            ALL,
            Instant::now() + Duration::from_millis(500),
            &never,
        )
        .await;
    assert!(
        matches!(r, Err(PgError::Deadline | PgError::Interrupted)),
        "{r:?}"
    );
    assert!(stopped(&pg, sleep).await, "still running after deadline");
    drop(conn);

    // And the source serves the next call.
    let mut conn = open(&db).await;
    assert_eq!(
        int(&one(&mut conn, "SELECT 2::int8", &[]).await.unwrap()),
        2
    );
}

#[tokio::test]
async fn a_database_that_is_down_answers_unavailable_and_is_counted() {
    let mut pg = Postgres::start();
    let db = database(&pg, "down-source", "");
    let mut conn = open(&db).await;
    assert_eq!(
        int(&one(&mut conn, "SELECT 1::int8", &[]).await.unwrap()),
        1
    );
    drop(conn);
    pg.stop();
    let count = || {
        metrics()
            .database_unavailable
            .get_or_create(&DatabaseLabels {
                source: "down-source".into(),
                database: "main".into(),
                reason: "connect",
            })
            .get()
    };
    let before = count();
    // Give the reset task time to find its connection dead; then a new one is refused.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r = db.open(far(), &CancellationToken::new()).await;
    let r = match r {
        // A pooled connection not yet known dead: its first statement fails instead.
        Ok(mut conn) => one(&mut conn, "SELECT 1::int8", &[]).await.map(|_| ()),
        Err(e) => Err(e),
    };
    assert_eq!(r, Err(PgError::Unavailable));
    let r = db.open(far(), &CancellationToken::new()).await.err();
    assert_eq!(r, Some(PgError::Unavailable));
    assert!(count() > before);

    // A server that accepts and never answers: the connect timeout, not the
    // call's (far) deadline, ends the wait.
    let hung = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = hung.local_addr().unwrap().port();
    let config: PostgresConfig = toml::from_str(&format!(
        "url = \"postgres://x@127.0.0.1:{port}/x\"\ntls = \"disable\""
    ))
    .unwrap();
    let db = TestDb {
        db: Arc::new(PostgresDatabase::new("main".into(), &config, true).unwrap()),
        source: "hung-source".into(),
    };
    let r = db.open(far(), &CancellationToken::new()).await.err();
    assert_eq!(r, Some(PgError::Unavailable));
}

/// Issue 48.1: tokio-postgres buffers a whole message before a row is
/// counted, so one 64 MiB value (or a 64 MiB error or notice text) was in
/// host memory before the 1 MiB bound was looked at, and rows with no
/// columns were charged nothing. Now the bytes are counted on the socket:
/// each of these ends as too large, the connection is closed, and the next
/// statement gets a fresh one. (The process's peak RSS under the same
/// attack is asserted end to end: tests/postgres_isolation.rs.)
#[tokio::test]
async fn a_huge_value_error_notice_or_empty_row_count_is_refused_on_the_wire() {
    let pg = Postgres::start();
    let db = database(&pg, "notes", "");
    let mut conn = open(&db).await;
    let never = CancellationToken::new();
    let bound = Bounds {
        max_rows: u32::MAX,
        max_bytes: 1 << 20,
    };
    for sql in [
        "SELECT repeat('x', 67108864)",
        "SELECT FROM generate_series(1, 20000000)",
        // The error quotes the 8 MiB value.
        "SELECT repeat('x', 8388608)::int8",
        "DO $$BEGIN RAISE NOTICE '%', repeat('x', 8388608); END$$",
    ] {
        let r = conn.query_rows(sql, &[], bound, far(), &never).await;
        assert_eq!(r.err(), Some(PgError::TooLarge), "{sql}");
        assert!(stopped(&pg, sql).await, "{sql} still runs");
        assert_eq!(
            int(&one(&mut conn, "SELECT 5::int8", &[]).await.unwrap()),
            5
        );
    }
    // Rows with no columns are charged their overhead: the bound counts them.
    let (rows, bytes) = conn
        .query_rows(
            "SELECT FROM generate_series(1, 10)",
            &[],
            bound,
            far(),
            &never,
        )
        .await
        .unwrap();
    assert_eq!((rows.rows.len(), bytes), (10, 10 * ROW_OVERHEAD));
}

/// Issue 48.2: the driver logged every NOTICE raw at INFO through `log`
/// (no source, no request id, no limit). Now notices are the guest's
/// output: the connection's messages are polled, so the driver's line is
/// never written (the end-to-end test reads the real log).
#[tokio::test]
async fn notices_are_taken_from_the_driver() {
    let pg = Postgres::start();
    let db = database(&pg, "notes", "");
    let mut conn = open(&db).await;
    let forged =
        "DO $$BEGIN RAISE NOTICE E'x\\n2099-01-01T00:00:00Z  INFO emseepea::server: forged'; END$$";
    assert!(one(&mut conn, forged, &[]).await.unwrap().is_empty());
    let flood = "DO $$BEGIN FOR i IN 1..500 LOOP RAISE NOTICE 'n%', i; END LOOP; END$$";
    assert!(one(&mut conn, flood, &[]).await.unwrap().is_empty());
    let client = conn.client.as_ref().unwrap();
    assert_eq!(
        client.notices.counts(),
        (
            crate::runtime::output::MAX_GUEST_OUTPUT_LINES_PER_CALL,
            501 - crate::runtime::output::MAX_GUEST_OUTPUT_LINES_PER_CALL
        )
    );
}

/// Issue 48.2: any role was served; a superuser's (or a member of
/// `pg_execute_server_program`'s) `COPY ... TO PROGRAM` ran a command on the
/// database host from a read-only grant. Now a new connection's role is
/// checked: such a role gets no connection, unless the section allows it.
#[tokio::test]
async fn a_privileged_role_gets_no_connection() {
    let pg = Postgres::start();
    let marker = tempfile::tempdir().unwrap();
    let touched = marker.path().join("touched");
    // The server runs as another user: it may write there.
    std::fs::set_permissions(
        marker.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let copy = format!("COPY (SELECT 1) TO PROGRAM 'touch {}'", touched.display());
    pg.psql("CREATE ROLE prog LOGIN; GRANT pg_execute_server_program TO prog");
    pg.psql("CREATE ROLE creator LOGIN CREATEROLE");
    let never = CancellationToken::new();
    for url in [
        pg.admin_url(),
        pg.url_as("prog", harness::DATABASE),
        pg.url_as("creator", harness::DATABASE),
    ] {
        let db = database_at(&url, "notes", "");
        let r = db.open(far(), &never).await;
        let r = match r {
            Ok(mut c) => c.execute_rows(&copy, &[], far(), &never).await.map(|_| ()),
            Err(e) => Err(e),
        };
        assert_eq!(r, Err(PgError::Unavailable), "{url}");
    }
    assert!(!touched.exists(), "COPY TO PROGRAM ran");
    // The operator's explicit opt-out.
    let allowed = database_at(&pg.admin_url(), "notes", "allow_privileged_role = true");
    let mut c = open(&allowed).await;
    assert_eq!(int(&one(&mut c, "SELECT 1::int8", &[]).await.unwrap()), 1);
    // The startup check names the key and the reason.
    let config: PostgresConfig =
        toml::from_str(&format!("url = {:?}\ntls = \"disable\"", pg.admin_url())).unwrap();
    let e = verify("main", &config).await.unwrap_err().to_string();
    assert!(
        e.contains("rolsuper") && e.contains("allow_privileged_role"),
        "{e}"
    );
    let config: PostgresConfig = toml::from_str(&format!(
        "url = {:?}\ntls = \"disable\"",
        pg.url_as("prog", harness::DATABASE)
    ))
    .unwrap();
    let e = verify("main", &config).await.unwrap_err().to_string();
    assert!(e.contains("member of pg_execute_server_program"), "{e}");
    let config: PostgresConfig =
        toml::from_str(&format!("url = {:?}\ntls = \"disable\"", pg.url())).unwrap();
    verify("main", &config).await.unwrap();
}

/// Issue 48.2: two sources granted databases on one role could stop and
/// watch each other: any member of a role may `pg_terminate_backend` its
/// backends and read their SQL. Now the second source's grant is refused
/// (unless both sections allow a shared role); with a role each (the
/// operator's recipe) source A can neither stop nor read B's statement.
#[tokio::test]
async fn one_source_cannot_stop_or_watch_another_sources_sessions() {
    use crate::runtime::capabilities::Capability;
    let pg = Postgres::start();
    pg.add_role("bob_app", harness::DATABASE);
    let sections = |b_url: &str, extra: &str| {
        crate::runtime::capabilities::harness::server_config(&format!(
            "[databases.a]\nengine = \"postgres\"\nurl = {:?}\ntls = \"disable\"\n{extra}\n\
             [databases.b]\nengine = \"postgres\"\nurl = {b_url:?}\ntls = \"disable\"\n{extra}\n",
            pg.url()
        ))
    };
    let grant = |label: &str| {
        crate::runtime::capabilities::harness::manifest(
            "sql-script",
            &format!("[grants]\ndatabases = [{label:?}]\n"),
        )
    };
    // One role for both: the second source is refused, naming the key.
    let sql = super::super::Sql::configure(&sections(&pg.url(), "").databases).unwrap();
    sql.grant(&grant("a").grants.databases).unwrap();
    let e = sql
        .grant(&grant("b").grants.databases)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("allow_shared_role") && e.contains("\"b\""),
        "{e}"
    );
    // The same database granted to two sources is the same role too.
    let sql = super::super::Sql::configure(&sections(&pg.url(), "").databases).unwrap();
    sql.grant(&grant("a").grants.databases).unwrap();
    assert!(sql.grant(&grant("a").grants.databases).is_err());
    // Both sections opt in: allowed.
    let sql =
        super::super::Sql::configure(&sections(&pg.url(), "allow_shared_role = true").databases)
            .unwrap();
    sql.grant(&grant("a").grants.databases).unwrap();
    sql.grant(&grant("b").grants.databases).unwrap();
    // A role each: accepted, and A cannot reach B's session.
    let bob_url = pg.url_as("bob_app", harness::DATABASE);
    let sql = super::super::Sql::configure(&sections(&bob_url, "").databases).unwrap();
    sql.grant(&grant("a").grants.databases).unwrap();
    sql.grant(&grant("b").grants.databases).unwrap();

    let alice = database(&pg, "a", "");
    let bob = database_at(&bob_url, "b", "");
    let sleep = "SELECT 1::int8 FROM pg_sleep(1.5)";
    let mut b = open(&bob).await;
    let bobs = tokio::spawn(async move { one(&mut b, sleep, &[]).await });
    started(&pg, sleep).await;
    let mut a = open(&alice).await;
    let seen = one(
        &mut a,
        "SELECT query FROM pg_stat_activity WHERE usename = 'bob_app'",
        &[],
    )
    .await
    .unwrap();
    assert_eq!(
        format!("{seen:?}"),
        format!(
            "{:?}",
            vec![vec![Value::Text("<insufficient privilege>".into())]]
        )
    );
    let kill = "SELECT count(pg_terminate_backend(pid))::int8 FROM pg_stat_activity \
                WHERE usename = 'bob_app'";
    assert_eq!(
        one(&mut a, kill, &[]).await.err(),
        Some(PgError::Failed("permission denied"))
    );
    assert_eq!(
        int(&bobs.await.unwrap().unwrap()),
        1,
        "Bob's statement ran to its end"
    );
}

/// Issue 48.2: the pool had no per-caller share: with `pool_size = 2`, one
/// caller's 16 concurrent reads made another caller's single read wait
/// behind all of them, past the 2 s pool wait ("unavailable"). Now a caller
/// holds at most its share, and the connection the first caller gives back
/// goes to the other. (The reads took 0.5 s; then the first
/// caller's own waits end at the same 2 s bound and free the queue just as
/// the other's ends, a coin toss; 1.5 s reads make the outcome certain.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_callers_burst_does_not_starve_another_caller() {
    let pg = Postgres::start();
    let db = Arc::new(database(&pg, "notes", "pool_size = 2"));
    let sleep = "SELECT 1::int8 FROM pg_sleep(1.5)";
    let burst: Vec<_> = (0..16)
        .map(|_| {
            let db = db.clone();
            tokio::spawn(async move {
                let never = CancellationToken::new();
                let deadline = Instant::now() + Duration::from_secs(30);
                match db
                    .open_as(&CallerKey::new("greedy"), deadline, &never)
                    .await
                {
                    Ok(mut c) => c
                        .query_rows(sleep, &[], ALL, deadline, &never)
                        .await
                        .map(|_| ()),
                    Err(e) => Err(e),
                }
            })
        })
        .collect();
    started(&pg, sleep).await;
    let never = CancellationToken::new();
    let mut mine = db
        .open_as(&CallerKey::new("modest"), far(), &never)
        .await
        .expect("the other caller gets a connection");
    assert_eq!(
        int(&one(&mut mine, "SELECT 3::int8", &[]).await.unwrap()),
        3
    );
    drop(mine);
    // The first caller's reads ran or were refused as its share allowed.
    for read in burst {
        let r = read.await.unwrap();
        assert!(matches!(r, Ok(()) | Err(PgError::Unavailable)), "{r:?}");
    }
}

/// The capability in-process with the hostile guest's `sql-script` mode:
/// a guest call, not just the engine.
mod guest {
    use super::*;
    use crate::runtime::budget::DeadlineTrap;
    use crate::runtime::capabilities::harness::{Harness, ReadFailure, manifest};
    use crate::runtime::capabilities::sql::Sql;
    use crate::runtime::config::SourceManifest;

    const SLEEP: &str = "SELECT 1::int8 FROM pg_sleep(30)";

    fn harness(pg: &Postgres) -> Harness {
        Harness::new(&format!(
            "[databases.main]\nengine = \"postgres\"\nurl = {:?}\ntls = \"disable\"\n",
            pg.url()
        ))
    }

    fn script(lines: &[&str]) -> SourceManifest {
        manifest(
            "sql-script",
            &format!(
                "database = \"main\"\nscript = {:?}\n[grants]\ndatabases = [\"main\"]\n",
                lines.join("\n")
            ),
        )
    }

    #[tokio::test]
    async fn a_guest_call_running_pg_sleep_is_cancelled_on_the_server() {
        let pg = Postgres::start();
        let mut harness = harness(&pg);
        let sleeping = script(&[SLEEP]);
        let grants = harness.grant::<Sql>(&sleeping).unwrap();

        // The call's future is dropped while the statement runs.
        tokio::select! {
            r = harness.read_with(&grants, "hostile://x/1") => panic!("ended early: {r:?}"),
            () = started(&pg, SLEEP) => {}
        }
        assert!(
            stopped(&pg, SLEEP).await,
            "still running after the call was dropped"
        );

        // The request is cancelled.
        let cancel = harness.cancel.clone();
        let report = {
            let read = harness.read_with(&grants, "hostile://x/1");
            tokio::pin!(read);
            tokio::select! {
                r = &mut read => panic!("ended early: {r:?}"),
                () = started(&pg, SLEEP) => {}
            }
            cancel.cancel();
            read.await.unwrap()
        };
        assert_eq!(report, "error: Error::Interrupted");
        assert!(
            stopped(&pg, SLEEP).await,
            "still running after the request was cancelled"
        );

        // The call runs out of time: it ends as the deadline trap.
        harness.cancel = CancellationToken::new();
        harness.deadline = Duration::from_millis(1500);
        let failure = harness
            .read_with(&grants, "hostile://x/1")
            .await
            .unwrap_err();
        assert!(
            matches!(&failure, ReadFailure::Trap(e) if e.downcast_ref::<DeadlineTrap>().is_some()),
            "{failure}"
        );
        assert!(
            stopped(&pg, SLEEP).await,
            "still running after the deadline"
        );

        // The same source serves the next call.
        harness.deadline = Duration::from_secs(10);
        let next = harness
            .grant::<Sql>(&script(&["SELECT 41::int8 + 1"]))
            .unwrap();
        let report = harness.read_with(&next, "hostile://x/1").await.unwrap();
        assert_eq!(report, "ok rows=1 first=42");
    }

    #[tokio::test]
    async fn the_guest_sees_engine_free_errors() {
        let pg = Postgres::start();
        pg.psql("CREATE TABLE t (x int8); INSERT INTO t VALUES (1), (2), (3)");
        let harness = harness(&pg);
        let report = harness
            .read::<Sql>(
                &script(&[
                    "SELECT x FROM t WHERE x > ?1 ORDER BY x",
                    "INSERT INTO t VALUES (4)",
                    "SELECT * FROM missing",
                    "SELECT now()",
                ]),
                "hostile://x/1",
            )
            .await
            .unwrap();
        let lines: Vec<&str> = report.lines().collect();
        assert_eq!(lines.len(), 4, "{report}");
        // No parameters given: PostgreSQL wants one.
        assert_eq!(
            lines[0],
            "error: Error::Failed(\"wrong number of parameters\")"
        );
        assert_eq!(
            lines[1],
            "error: Error::Failed(\"the database is read-only\")"
        );
        assert_eq!(lines[2], "error: Error::Failed(\"invalid statement\")");
        assert_eq!(
            lines[3],
            "error: Error::Failed(\"unsupported column type\")"
        );
    }
}
