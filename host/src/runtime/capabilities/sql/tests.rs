//! The `sql` capability in-process, on the SQLite engine: the hostile
//! guest's `sql-script` mode against a real database file.

use super::*;

use crate::runtime::bindings::emseepea::inventory::types::SourceError;
use crate::runtime::budget::DeadlineTrap;
use crate::runtime::capabilities::harness::{Harness, ReadFailure, manifest};
use crate::runtime::config::SourceManifest;
use std::time::Duration;

/// A server config with one database `main` (table `t`: 1, 2, 3).
fn main_db(read_only: bool) -> (tempfile::TempDir, Harness) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("main.sqlite");
    rusqlite::Connection::open(&file)
        .unwrap()
        .execute_batch("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2), (3);")
        .unwrap();
    let harness = Harness::new(&format!(
        "[databases.main]\nfile = {:?}\nread_only = {read_only}\n",
        file.display().to_string()
    ));
    (dir, harness)
}

/// The hostile guest's `sql-script` mode on `main`, granted or not.
fn script(lines: &[&str], granted: bool) -> SourceManifest {
    let grants = if granted {
        "[grants]\ndatabases = [\"main\"]\n"
    } else {
        ""
    };
    manifest(
        "sql-script",
        &format!(
            "database = \"main\"\nscript = {:?}\n{grants}",
            lines.join("\n")
        ),
    )
}

#[tokio::test]
async fn a_granted_database_answers_and_an_ungranted_one_does_not() {
    let (_dir, harness) = main_db(true);
    let report = harness
        .read::<Sql>(
            &script(&["SELECT x FROM t ORDER BY x"], true),
            "hostile://x/1",
        )
        .await
        .unwrap();
    assert_eq!(report, "ok rows=3 first=1");
    let refused = harness
        .read::<Sql>(&script(&["SELECT x FROM t"], false), "hostile://x/1")
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, ReadFailure::Source(e) if format!("{e:?}").contains("NotGranted")),
        "{refused}"
    );
}

#[tokio::test]
async fn the_policy_holds_in_a_real_call() {
    let (_dir, harness) = main_db(true);
    let report = harness
        .read::<Sql>(
            &script(
                &[
                    "CREATE TEMP VIEW t AS SELECT 7 AS x",
                    "PRAGMA hard_heap_limit = 1",
                    "BEGIN",
                    "INSERT INTO t VALUES (4)",
                    "SELECT count(*) FROM t",
                ],
                true,
            ),
            "hostile://x/1",
        )
        .await
        .unwrap();
    let lines: Vec<&str> = report.lines().collect();
    assert_eq!(lines.len(), 5, "{report}");
    for refused in &lines[..4] {
        assert!(refused.starts_with("error: Error::Failed("), "{report}");
    }
    assert_eq!(lines[4], "ok rows=1 first=3");
}

#[tokio::test]
async fn a_long_statement_stops_at_the_deadline() {
    let (_dir, mut harness) = main_db(true);
    harness.deadline = Duration::from_millis(300);
    let runaway =
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";
    let failure = harness
        .read::<Sql>(&script(&[runaway], true), "hostile://x/1")
        .await
        .unwrap_err();
    assert!(
        matches!(&failure, ReadFailure::Trap(e) if e.downcast_ref::<DeadlineTrap>().is_some()),
        "{failure}"
    );
}

#[tokio::test]
async fn a_long_statement_stops_when_the_call_is_cancelled() {
    let (_dir, harness) = main_db(true);
    let runaway =
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";
    let cancel = harness.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let report = harness
        .read::<Sql>(&script(&[runaway], true), "hostile://x/1")
        .await
        .unwrap();
    assert_eq!(report, "error: Error::Interrupted");
}

#[test]
fn every_source_gets_its_own_pool_of_a_shared_database() {
    let config: DatabaseConfig = toml::from_str("file = \"documents.sqlite\"").unwrap();
    let databases = [("documents".to_string(), config)].into();
    let labels = ["documents".to_string()];
    let alice_source = SqlGrants::resolve(&databases, &labels).unwrap();
    let bob_source = SqlGrants::resolve(&databases, &labels).unwrap();
    assert!(!Arc::ptr_eq(&alice_source.0[0], &bob_source.0[0]));
    #[allow(irrefutable_let_patterns)]
    let (EnginePool::Sqlite(a), EnginePool::Sqlite(b)) =
        (&alice_source.0[0].pool, &bob_source.0[0].pool)
    else {
        panic!("both are SQLite pools");
    };
    assert!(!Arc::ptr_eq(a.database(), b.database()));
    assert_eq!(alice_source.labels(), bob_source.labels());
    let unknown = SqlGrants::resolve(&databases, &["notes".to_string()]).unwrap_err();
    assert!(unknown.to_string().contains("\"notes\""), "{unknown}");
}

#[test]
fn a_postgres_section_is_checked_at_startup() {
    let good = Harness::new("[databases.pg]\nengine = \"postgres\"\nurl = \"postgres://db/x\"\n");
    assert!(Sql::configure(&good.config.databases).is_ok());
    let harness = Harness::new(
        "[databases.pg]\nengine = \"postgres\"\nurl = \"postgres://app:hunter2@db:notaport/x\"\n",
    );
    let Err(refused) = Sql::configure(&harness.config.databases) else {
        panic!("a postgres section with a bad URL was accepted");
    };
    assert_eq!(
        refused.to_string(),
        "database \"pg\": engine \"postgres\": `url` is not a valid PostgreSQL connection URL"
    );
}

/// SQLite names the file in some errors (`unable to open database file:
/// /srv/...`): the guest gets the grant's label, the log the path.
#[tokio::test]
async fn a_sqlite_error_names_the_grant_never_a_host_path() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("host-only-secret-dir").join("db.sqlite");
    let harness = Harness::new(&format!(
        "[databases.main]\nfile = {:?}\n",
        file.display().to_string()
    ));
    let m = script(&["SELECT 1"], true);
    let (failure, lines) =
        crate::runtime::capabilities::checklist::logged(harness.read::<Sql>(&m, "hostile://x/1"))
            .await;
    let Err(ReadFailure::Source(SourceError::Failed(message))) = failure else {
        panic!("{failure:?}");
    };
    assert!(message.contains("\\\"main\\\""), "{message}");
    assert!(!message.contains("host-only-secret-dir"), "{message}");
    assert!(
        !message.contains(&dir.path().display().to_string()),
        "{message}"
    );
    // The operator's log has it.
    assert!(
        lines
            .iter()
            .any(|l| l.contains("cannot be opened") && l.contains("host-only-secret-dir")),
        "{lines:#?}"
    );
}
