//! Issue 48, sections 1 and 2, end to end on the real binary: what a
//! guest with a PostgreSQL grant can make the host hold, write into its
//! log, or reach through the database role. (The engine-level tests are in
//! host/src/runtime/capabilities/sql/postgres/tests.rs.)

mod support;
use support::postgres::Postgres;
use support::*;

/// A `[databases.LABEL]` section on `url` with more `extra` lines.
fn section(label: &str, url: &str, extra: &str) -> String {
    format!(
        "[databases.{label}]\nengine = \"postgres\"\nurl = {url:?}\ntls = \"disable\"\n{extra}\n"
    )
}

/// A hostile `sql-script` source's manifest on `database`.
fn script_manifest(database: &str, script: &str, config: &str) -> String {
    format!(
        "[budget]\nmax_duration_ms = 30000\n[grants]\ndatabases = [{database:?}]\n[config]\ndatabase = {database:?}\nscript = {}\n{config}\n",
        serde_json::to_string(script).unwrap()
    )
}

/// Issue 48.1: with `max_result_bytes` = 1 MiB, `SELECT repeat('x',
/// 67108864)` made the server buffer the whole 64 MiB row (more while its
/// buffer grew) before the bound was looked at, and `SELECT FROM
/// generate_series(1, 20000000)` (rows with no columns, charged nothing)
/// grew the host's row vector until the deadline. Now the bytes are counted
/// on the socket and every row is charged: each call fails with the generic
/// error and the server's peak RSS grows by less than 16 MiB (the bound is
/// 1 MiB of rows plus 256 KiB of slack per statement; the rest is the
/// guest's instance and allocator noise).
#[tokio::test]
async fn a_64_mib_value_or_20_million_empty_rows_keep_the_server_within_the_result_bound() {
    let pg = Postgres::start();
    pg.add_role("value_app", support::postgres::DATABASE);
    pg.add_role("rows_app", support::postgres::DATABASE);
    let url = |role: &str| pg.url_as(role, support::postgres::DATABASE);
    let bound = "max_result_bytes = 1048576";
    let rows = "max_rows = \"4000000000\"\non_error = \"fail\"";
    let s = server()
        .config(&format!(
            "{}{}{}",
            section("warm", &pg.url(), bound),
            section("value", &url("value_app"), bound),
            section("rows", &url("rows_app"), bound)
        ))
        .hostile(
            "warm",
            "sql-script",
            &script_manifest(
                "warm",
                "SELECT repeat('x', 100000)\nSELECT FROM generate_series(1, 1000)",
                rows,
            ),
        )
        .hostile(
            "value",
            "sql-script",
            &script_manifest("value", "SELECT repeat('x', 67108864)", rows),
        )
        .hostile(
            "rows",
            "sql-script",
            &script_manifest("rows", "SELECT FROM generate_series(1, 20000000)", rows),
        )
        .start();
    let token = s.token(Some("mallory"), "hostile:read");
    // The same kind of statements, small: the instance, pool and buffers
    // are warm before the peak is read.
    for _ in 0..2 {
        let warm = read_text(&s, &token, "hostile://warm/1").await;
        assert!(warm.ends_with("ok rows=1000"), "{warm}");
    }
    let before = peak_rss_kib(s.pid());
    for source in ["value", "rows"] {
        let a = read_answer(&s, &token, &format!("hostile://{source}/1")).await;
        assert_generic_internal_error(&a, &["TooLarge", "postgres"]);
    }
    s.expect_log(&["value", "statement 0 failed: Error::TooLarge"]);
    s.expect_log(&["rows", "statement 0 failed: Error::TooLarge"]);
    let grown = peak_rss_kib(s.pid()) - before;
    eprintln!("peak RSS grew by {grown} KiB");
    assert!(grown < 16 << 10, "peak RSS grew by {grown} KiB");
    // And the sources serve again.
    let warm = read_text(&s, &token, "hostile://warm/1").await;
    assert!(warm.ends_with("ok rows=1000"), "{warm}");
}

/// Issue 48.2: a NOTICE reached the log raw through the driver's own `log`
/// line, so `RAISE NOTICE E'x\n2099-… INFO emseepea::server: forged'`
/// (allowed in a read-only transaction) wrote a forged line, and a loop of
/// notices flooded the log past the guest's output limits with no source or
/// request id; a column type's name reached "postgres column refused"
/// unescaped. Now both are guest text: escaped, tagged, limited.
#[tokio::test]
async fn notices_and_type_names_cannot_forge_or_flood_the_log() {
    let pg = Postgres::start();
    let forged = "2099-01-01T00:00:00Z  INFO emseepea::server: forged";
    pg.psql(&format!(
        "CREATE TYPE \"t\n{forged}\" AS ENUM ('a'); CREATE TABLE typed (c \"t\n{forged}\"); \
         INSERT INTO typed VALUES ('a')"
    ));
    let script = [
        format!("DO $$BEGIN RAISE NOTICE E'x\\n{forged}'; END$$"),
        "DO $$BEGIN FOR i IN 1..1000 LOOP RAISE NOTICE 'flood %', i; END LOOP; END$$".into(),
        "SELECT c FROM typed".into(),
    ]
    .join("\n");
    let s = server()
        .config(&section("main", &pg.url(), ""))
        .hostile("loud", "sql-script", &script_manifest("main", &script, ""))
        .start();
    let token = s.token(Some("mallory"), "hostile:read");
    assert_eq!(
        read_text(&s, &token, "hostile://loud/1").await,
        "ok rows=0\nok rows=0\nerror: Error::Failed(\"unsupported column type\")"
    );
    s.expect_log(&["guest output suppressed", "postgres-notice"]);
    let log = s.log();
    for line in log.lines() {
        assert!(!line.starts_with("2099"), "a forged line: {line}");
    }
    let escaped = s.expect_log(&["postgres-notice", "x\\n2099-01-01"]);
    assert!(
        escaped.contains("source=") && escaped.contains("request_id="),
        "{escaped}"
    );
    s.expect_log(&["postgres column refused", "t\\n2099-01-01"]);
    let notices = log
        .lines()
        .filter(|l| l.contains("postgres-notice") && l.contains("flood"))
        .count();
    assert!(notices < 20, "{notices} notice lines");
    assert!(!log.contains("tokio_postgres"), "the driver logged: {log}");
}

/// Issue 48.2: any role was accepted, so the test cluster's superuser (and
/// the demo's) let a `read_only` grant run `COPY ... TO PROGRAM`. Now
/// `emseepea check` (and startup: the same load) refuses a superuser or a
/// member of `pg_execute_server_program`, naming the key and the reason,
/// unless the section says `allow_privileged_role = true`.
#[tokio::test]
async fn check_refuses_a_privileged_role_unless_the_section_allows_it() {
    let pg = Postgres::start();
    pg.psql("CREATE ROLE prog LOGIN; GRANT pg_execute_server_program TO prog");
    let manifest = script_manifest("main", "SELECT 1::int8", "");
    let check = |url: &str, extra: &str| {
        server()
            .config(&section("main", url, extra))
            .hostile("probe", "sql-script", &manifest)
            .prepare()
            .check()
    };
    let (ok, out) = check(&pg.admin_url(), "");
    assert!(!ok, "{out}");
    assert!(
        out.contains("\"main\"")
            && out.contains("rolsuper")
            && out.contains("allow_privileged_role"),
        "{out}"
    );
    let (ok, out) = check(&pg.url_as("prog", support::postgres::DATABASE), "");
    assert!(!ok, "{out}");
    assert!(out.contains("member of pg_execute_server_program"), "{out}");
    let (ok, out) = check(&pg.admin_url(), "allow_privileged_role = true");
    assert!(ok, "{out}");
    assert!(
        out.contains("allow_privileged_role = true"),
        "warned: {out}"
    );
    let (ok, out) = check(&pg.url(), "");
    assert!(ok, "{out}");
}

/// Issue 48.2: two sources on one role could stop and watch each other's
/// sessions (`pg_terminate_backend`, `pg_stat_activity.query`). Now
/// `emseepea check` refuses two sources whose grants log in as one role,
/// naming the key, unless both sections allow it; a role each passes.
#[tokio::test]
async fn check_refuses_two_sources_on_one_role() {
    let pg = Postgres::start();
    pg.add_role("bob_app", support::postgres::DATABASE);
    let bob = pg.url_as("bob_app", support::postgres::DATABASE);
    let check = |b_url: &str, extra: &str| {
        server()
            .config(&format!(
                "{}{}",
                section("a", &pg.url(), extra),
                section("b", b_url, extra)
            ))
            .hostile(
                "alpha",
                "sql-script",
                &script_manifest("a", "SELECT 1::int8", ""),
            )
            .hostile(
                "beta",
                "sql-script",
                &script_manifest("b", "SELECT 1::int8", ""),
            )
            .prepare()
            .check()
    };
    let (ok, out) = check(&pg.url(), "");
    assert!(!ok, "{out}");
    assert!(
        out.contains("allow_shared_role") && out.contains("emseepea_app"),
        "{out}"
    );
    let (ok, out) = check(&pg.url(), "allow_shared_role = true");
    assert!(ok, "{out}");
    let (ok, out) = check(&bob, "");
    assert!(ok, "{out}");
}
