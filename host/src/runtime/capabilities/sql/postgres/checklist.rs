//! The PostgreSQL engine's rows of the isolation checklist (`checklist.rs`),
//! each probe on a throwaway cluster of its own (tests/support/postgres.rs).

use super::{PgError, PostgresConfig, PostgresDatabase};
use crate::runtime::CallerKey;
use crate::runtime::capabilities::Capability;
use crate::runtime::capabilities::checklist::{
    Check, Outcome, Row, logged, pair, text_outcome, toml_str,
};
use crate::runtime::capabilities::harness::{Harness, manifest, server_config};
use crate::runtime::capabilities::sql::Sql;
use crate::runtime::capabilities::sql::probes::{guest, read, verdict};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use super::tests::harness as cluster;
use cluster::Postgres;

const SLEEP: &str = "SELECT 1::int8 FROM pg_sleep(30)";

/// A `[databases.main]` on `url` with `extra` lines.
fn section(label: &str, url: &str, extra: &str) -> String {
    format!(
        "[databases.{label}]\nengine = \"postgres\"\nurl = {url:?}\ntls = \"disable\"\n{extra}\n"
    )
}

/// Whether a backend runs `query` (the cluster's superuser sees all).
fn running(pg: &Postgres, query: &str) -> bool {
    pg.psql(&format!(
        "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query = '{}'",
        query.replace('\'', "''")
    )) != "0"
}

fn database(url: &str, extra: &str) -> Arc<PostgresDatabase> {
    let config: PostgresConfig =
        toml::from_str(&format!("url = {url:?}\ntls = \"disable\"\n{extra}")).unwrap();
    Arc::new(PostgresDatabase::new("main".into(), &config, true).unwrap())
}

pub fn rows(row: Row) -> Check {
    match row {
        // A 32 MiB call with a database cap of 1 GiB: only the call's budget
        // bounds the result, counted on the socket before a row is whole.
        Row::Memory => {
            let probe = |bytes: usize| async move {
                let pg = Postgres::start();
                let mut harness =
                    Harness::new(&section("main", &pg.url(), "max_result_bytes = 1073741824"));
                harness.memory_bytes = 32 << 20;
                let config = format!("sql = \"SELECT repeat('x', {bytes})\"");
                verdict(read(&harness, &guest("sql", &config, "")).await)
            };
            pair(probe(1 << 20), probe(64 << 20))
        }
        Row::Handles => {
            let probe = |count: usize| async move {
                let pg = Postgres::start();
                let harness = Harness::new(&section("main", &pg.url(), "pool_size = 8"));
                let m = guest(
                    "sql-hoard",
                    &format!("count = \"{count}\""),
                    "[handles]\nsql_connections = 4\n",
                );
                verdict(read(&harness, &m).await)
            };
            pair(probe(4), probe(5))
        }
        // A NOTICE is the guest's text (the hex keeps it out of SQL quoting).
        Row::LogText => {
            let probe = |text: String| async move {
                let pg = Postgres::start();
                let harness = Harness::new(&section("main", &pg.url(), ""));
                let hex: String = text.bytes().map(|b| format!("{b:02x}")).collect();
                let sql = format!(
                    "DO $$BEGIN RAISE NOTICE '%', convert_from(decode('{hex}', 'hex'), 'UTF8'); END$$"
                );
                let m = guest("sql-script", &format!("script = {}", toml_str(&sql)), "");
                let request_id = harness.request_id.clone();
                let (_, lines) = logged(read(&harness, &m)).await;
                text_outcome(&lines, &text, &request_id)
            };
            pair(
                probe("a-plain-notice-text".into()),
                probe("x\n2099-01-01T00:00:00Z  INFO emseepea::server: forged\u{1b}[2J".into()),
            )
        }
        // pool_size = 3, another caller holds one: this caller's share is
        // one connection; a second is refused though the pool has one idle.
        Row::PoolShare => {
            let probe = |second: bool| async move {
                let pg = Postgres::start();
                let db = database(&pg.url(), "pool_size = 3");
                let never = CancellationToken::new();
                let open = |caller: &'static str, wait: Duration| {
                    let db = db.clone();
                    let never = never.clone();
                    async move {
                        db.open(
                            &Arc::from("src"),
                            &CallerKey::new(caller),
                            &Arc::from("req"),
                            Instant::now() + wait,
                            &never,
                        )
                        .await
                    }
                };
                let _other = open("other", Duration::from_secs(10)).await.unwrap();
                let _first = open("greedy", Duration::from_secs(10)).await.unwrap();
                if !second {
                    return Outcome::Served("one connection, within its share".into());
                }
                match open("greedy", Duration::from_secs(3)).await {
                    Ok(_) => Outcome::Served("a second connection past its share".into()),
                    Err(e @ (PgError::Unavailable | PgError::Deadline)) => {
                        Outcome::Stopped(format!("{e}: held to its share"))
                    }
                    Err(e) => Outcome::Served(format!("unexpected: {e}")),
                }
            };
            pair(probe(false), probe(true))
        }
        // Two sources whose grants log in as one role could signal and
        // watch each other's sessions: the second grant is refused.
        Row::SourceIsolation => {
            let probe = |shared: bool| async move {
                let pg = Postgres::start();
                pg.add_role("other_app", cluster::DATABASE);
                let b = if shared {
                    pg.url()
                } else {
                    pg.url_as("other_app", cluster::DATABASE)
                };
                let config = server_config(&format!(
                    "{}{}",
                    section("a", &pg.url(), ""),
                    section("b", &b, "")
                ));
                let sql = Sql::configure(&config.databases).unwrap();
                let grant = |label: &str| {
                    manifest(
                        "sql-script",
                        &format!("[grants]\ndatabases = [{label:?}]\n"),
                    )
                };
                sql.grant(&grant("a").grants.databases).unwrap();
                match sql.grant(&grant("b").grants.databases) {
                    Ok(_) => Outcome::Served("a source of its own role".into()),
                    Err(e) => Outcome::Stopped(e.to_string()),
                }
            };
            pair(probe(false), probe(true))
        }
        // The call is dropped (as the server drops a cancelled call) while
        // pg_sleep runs: the backend stops (a cancel request).
        Row::Cancellation => {
            let probe = |runaway: bool| async move {
                let pg = Postgres::start();
                let harness = Harness::new(&section("main", &pg.url(), ""));
                let sql = if runaway { SLEEP } else { "SELECT 1::int8" };
                let m = guest("sql-script", &format!("script = {}", toml_str(sql)), "");
                let cancel = harness.cancel.clone();
                let call = read(&harness, &m);
                let report = if !runaway {
                    call.await.map_err(|e| e.to_string())
                } else {
                    tokio::select! {
                        r = call => r.map_err(|e| e.to_string()),
                        _ = async {
                            for _ in 0..200 {
                                if running(&pg, SLEEP) {
                                    break;
                                }
                                tokio::time::sleep(Duration::from_millis(50)).await;
                            }
                            cancel.cancel();
                        } => Err("cancelled: the call was dropped".into()),
                    }
                };
                let mut still = true;
                for _ in 0..100 {
                    still = running(&pg, SLEEP);
                    if !still {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                match (report, still) {
                    (_, true) => Outcome::Served("the statement still runs".into()),
                    (Ok(r), false) => Outcome::Served(r),
                    (Err(why), false) => Outcome::Stopped(format!("{why}; the backend stopped")),
                }
            };
            pair(probe(false), probe(true))
        }
    }
}
