//! The SQLite engine's rows of the isolation checklist (`checklist.rs`).

use crate::runtime::capabilities::checklist::{
    Check, Outcome, Row, logged, pair, text_outcome, toml_str,
};
use crate::runtime::capabilities::harness::{Harness, manifest};
use crate::runtime::capabilities::sql::probes::{guest, read, verdict};
use std::time::Duration;

/// Databases `main` and `other` (table `t`: 1, 2, 3) in a fresh directory.
fn databases(extra: &str) -> (tempfile::TempDir, Harness) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = String::new();
    for label in ["main", "other"] {
        let file = dir.path().join(format!("{label}.sqlite"));
        rusqlite::Connection::open(&file)
            .unwrap()
            .execute_batch("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2), (3);")
            .unwrap();
        config.push_str(&format!(
            "[databases.{label}]\nfile = {:?}\n{extra}\n",
            file.display().to_string()
        ));
    }
    (dir, Harness::new(&config))
}

/// One statement per line; the report's lines.
fn script(lines: &[&str]) -> String {
    format!("script = {:?}", lines.join("\n"))
}

/// Rows of `n` values of `bytes` bytes each.
fn blobs(n: usize, bytes: usize) -> String {
    format!(
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {n}) \
         SELECT zeroblob({bytes}) FROM c"
    )
}

pub fn rows(row: Row) -> Check {
    match row {
        // A 32 MiB call (8 MiB of it SQLite's share) with a database cap of
        // 1 GiB: only the call's budget bounds the result, counted before
        // each value is copied.
        Row::Memory => {
            let probe = |n: usize| async move {
                let (_dir, mut harness) = databases("max_result_bytes = 1073741824");
                harness.memory_bytes = 32 << 20;
                // `sql` mode reports the row count only (not the blobs).
                let config = format!("sql = {:?}", blobs(n, 3_000_000));
                verdict(read(&harness, &guest("sql", &config, "")).await)
            };
            pair(probe(2), probe(10))
        }
        Row::Handles => {
            let probe = |count: usize| async move {
                let (_dir, harness) = databases("");
                let m = guest(
                    "sql-hoard",
                    &format!("count = \"{count}\""),
                    "[handles]\nsql_connections = 4\n",
                );
                verdict(read(&harness, &m).await)
            };
            pair(probe(4), probe(5))
        }
        // A label the source was not granted is logged; it is the guest's.
        Row::LogText => {
            let probe = |label: String| async move {
                let (_dir, harness) = databases("");
                let m = manifest(
                    "sql-script",
                    &format!("database = {}\non_error = \"report\"\n", toml_str(&label)),
                );
                let request_id = harness.request_id.clone();
                let (_, lines) = logged(read(&harness, &m)).await;
                text_outcome(&lines, &label, &request_id)
            };
            pair(
                probe("not-granted-label".into()),
                probe("x\n2099-01-01T00:00:00Z  INFO emseepea::server: forged\u{1b}[2J".into()),
            )
        }
        Row::PoolShare => Check::NotApplicable(
            "a SQLite pool never makes a call wait: with no idle connection a new one \
             is opened, so there is no scarce connection to divide; what one call holds \
             is bounded by the Handles row, how many calls a caller runs by slots.rs",
        ),
        // Source A holds `main`; `other` is another source's grant.
        Row::SourceIsolation => {
            let probe = |label: &'static str| async move {
                let (_dir, harness) = databases("");
                let m = manifest(
                    "sql-script",
                    &format!(
                        "database = {label:?}\nscript = \"SELECT x FROM t\"\n\
                         [grants]\ndatabases = [\"main\"]\n"
                    ),
                );
                verdict(read(&harness, &m).await)
            };
            pair(probe("main"), probe("other"))
        }
        // A runaway read holds a shared lock on the file while it runs: once
        // the call is dropped (as the server drops a cancelled call), a
        // writer gets the file, which proves the statement stopped.
        Row::Cancellation => {
            let probe = |runaway: bool| async move {
                let (dir, harness) = databases("");
                let sql = if runaway {
                    "WITH RECURSIVE c(x) AS (SELECT x FROM t UNION ALL SELECT x + 1 FROM c) \
                     SELECT count(*) FROM c"
                } else {
                    "SELECT count(*) FROM t"
                };
                let m = guest("sql-script", &script(&[sql]), "");
                let cancel = harness.cancel.clone();
                let call = read(&harness, &m);
                let report = if !runaway {
                    call.await.map_err(|e| e.to_string())
                } else {
                    tokio::select! {
                    r = call => r.map_err(|e| e.to_string()),
                    _ = async {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        cancel.cancel();
                    } => Err("cancelled: the call was dropped".into()),
                    }
                };
                let writer = rusqlite::Connection::open(dir.path().join("main.sqlite")).unwrap();
                writer.busy_timeout(Duration::from_secs(5)).unwrap();
                let wrote = tokio::task::spawn_blocking(move || {
                    writer.execute_batch("BEGIN EXCLUSIVE; INSERT INTO t VALUES (4); COMMIT;")
                })
                .await
                .unwrap();
                match (report, wrote) {
                    (Ok(r), Ok(())) => Outcome::Served(r),
                    (Err(why), Ok(())) => {
                        Outcome::Stopped(format!("{why}; the statement's lock was released"))
                    }
                    (_, Err(e)) => Outcome::Served(format!("the statement still runs: {e}")),
                }
            };
            pair(probe(false), probe(true))
        }
    }
}
