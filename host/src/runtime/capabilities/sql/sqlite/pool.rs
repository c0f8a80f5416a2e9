//! One source's idle connections to one database, and the state every
//! connection must be in: set up when opened, checked when given back.
//!
//! A pool belongs to one (source, database) pair, never to a database alone,
//! so no connection carries anything from one source to another. A
//! connection goes back to its pool only if [`check_clean`] proves its state
//! is the one [`configure`] set (no transaction, empty temp schema, the
//! host's settings and limits); otherwise it is closed.

use super::super::config::SqliteConfig;
use super::policy::{self, Access};
use crate::runtime::capabilities::sql::config::{
    SQLITE_CACHE_KIB, SQLITE_MAX_SQL_LENGTH, SQLITE_POOL_SIZE,
};
use rusqlite::OpenFlags;
use rusqlite::config::DbConfig;
use rusqlite::limits::Limit;
use std::sync::Mutex;

/// The per-connection limits that follow from a call's SQLite reservation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallLimits {
    /// `SQLITE_LIMIT_LENGTH`: the largest string or blob a statement may make.
    pub length: i32,
}

impl CallLimits {
    /// Half the reservation for one value: a function's input and its
    /// result are both live (`hex(x)` holds 3x its input).
    pub fn for_reservation(bytes: u64) -> Self {
        Self {
            length: i32::try_from(bytes / 2).unwrap_or(i32::MAX).max(1),
        }
    }
}

/// Why a connection given back was closed instead of pooled.
#[derive(Debug, thiserror::Error)]
pub enum Dirty {
    #[error("a transaction is open")]
    OpenTransaction,
    #[error("the temp schema holds {0} objects")]
    TempObjects(i64),
    #[error("{name} is {found}, the host set {expected}")]
    Setting {
        name: &'static str,
        found: i64,
        expected: i64,
    },
    #[error("its state could not be read: {0}")]
    Unreadable(#[from] rusqlite::Error),
}

/// Open a connection with the host's settings for `access`; the call's
/// limits are set by [`apply_limits`] on every checkout.
pub fn open(config: &SqliteConfig, access: Access) -> rusqlite::Result<rusqlite::Connection> {
    let flags = match access {
        Access::ReadOnly => OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        Access::ReadWrite => OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    };
    let conn = rusqlite::Connection::open_with_flags(&config.file, flags)?;
    configure(&conn, access)?;
    Ok(conn)
}

/// The settings every connection has before a guest sees it. Pragmas are
/// set before the authorizer is installed (it refuses them afterwards).
pub fn configure(conn: &rusqlite::Connection, access: Access) -> rusqlite::Result<()> {
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, false)?;
    conn.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0)?;
    conn.set_limit(Limit::SQLITE_LIMIT_WORKER_THREADS, 0)?;
    // Temp b-trees (sorts, DISTINCT) live in SQLite's heap, under its
    // limit, not in files in a directory the host did not choose.
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    conn.pragma_update(None, "query_only", access == Access::ReadOnly)?;
    // Under the soft heap limit SQLite recycles cache pages rather than
    // grow, so a small call share is not eaten by the cache either.
    conn.pragma_update(None, "cache_size", -SQLITE_CACHE_KIB)?;
    conn.busy_timeout(std::time::Duration::from_millis(0))?;
    conn.authorizer(Some(move |ctx: rusqlite::hooks::AuthContext<'_>| {
        policy::decide(access, &ctx)
    }));
    conn.set_prepared_statement_cache_capacity(32);
    Ok(())
}

/// The limits of the call that checks the connection out.
pub fn apply_limits(conn: &rusqlite::Connection, limits: CallLimits) -> rusqlite::Result<()> {
    conn.set_limit(Limit::SQLITE_LIMIT_LENGTH, limits.length)?;
    conn.set_limit(
        Limit::SQLITE_LIMIT_SQL_LENGTH,
        SQLITE_MAX_SQL_LENGTH.min(limits.length),
    )?;
    Ok(())
}

/// Prove `conn` is in the state [`configure`] and [`apply_limits`] left it.
pub fn check_clean(
    conn: &rusqlite::Connection,
    access: Access,
    limits: CallLimits,
) -> Result<(), Dirty> {
    if !conn.is_autocommit() {
        return Err(Dirty::OpenTransaction);
    }
    let mut stmt = conn.prepare_cached(
        "SELECT (SELECT count(*) FROM temp.sqlite_master), q.query_only, t.trusted_schema, \
         s.temp_store, c.cache_size \
         FROM pragma_query_only q, pragma_trusted_schema t, pragma_temp_store s, pragma_cache_size c",
    )?;
    let (temp, query_only, trusted, temp_store, cache): (i64, i64, i64, i64, i64) = stmt
        .query_row([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })?;
    if temp != 0 {
        return Err(Dirty::TempObjects(temp));
    }
    let flag = |b: bool| i64::from(b);
    let expected = [
        ("query_only", query_only, flag(access == Access::ReadOnly)),
        ("trusted_schema", trusted, 0),
        ("temp_store", temp_store, 2),
        ("cache_size", cache, -SQLITE_CACHE_KIB),
        (
            "defensive",
            flag(conn.db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE)?),
            1,
        ),
        (
            "fts3_tokenizer",
            flag(conn.db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER)?),
            0,
        ),
        (
            "limit_attached",
            i64::from(conn.limit(Limit::SQLITE_LIMIT_ATTACHED)?),
            0,
        ),
        (
            "limit_worker_threads",
            i64::from(conn.limit(Limit::SQLITE_LIMIT_WORKER_THREADS)?),
            0,
        ),
        (
            "limit_length",
            i64::from(conn.limit(Limit::SQLITE_LIMIT_LENGTH)?),
            i64::from(limits.length),
        ),
    ];
    for (name, found, expected) in expected {
        if found != expected {
            return Err(Dirty::Setting {
                name,
                found,
                expected,
            });
        }
    }
    Ok(())
}

/// One source's idle connections to one database.
#[derive(Debug)]
pub struct Database {
    pub label: String,
    pub config: SqliteConfig,
    access: Access,
    idle: Mutex<Vec<rusqlite::Connection>>,
}

impl Database {
    pub fn new(label: String, config: SqliteConfig, read_only: bool) -> Self {
        let access = if read_only {
            Access::ReadOnly
        } else {
            Access::ReadWrite
        };
        Self {
            label,
            config,
            access,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// An idle connection or a new one, with `limits` applied.
    pub fn checkout(&self, limits: CallLimits) -> rusqlite::Result<rusqlite::Connection> {
        let pooled = self.idle.lock().unwrap().pop();
        let conn = match pooled {
            Some(conn) => conn,
            None => open(&self.config, self.access)?,
        };
        apply_limits(&conn, limits)?;
        Ok(conn)
    }

    /// A pooled connection under `limits`, if one is idle: no file is
    /// opened, nothing blocks, so the caller need not leave its thread.
    pub fn checkout_idle(
        &self,
        limits: CallLimits,
    ) -> Option<rusqlite::Result<rusqlite::Connection>> {
        let conn = self.idle.lock().unwrap().pop()?;
        Some(apply_limits(&conn, limits).map(|()| conn))
    }

    /// Give a connection back: pooled if provably clean, else closed.
    pub fn checkin(&self, conn: rusqlite::Connection, limits: CallLimits) {
        if let Err(dirty) = check_clean(&conn, self.access, limits) {
            tracing::warn!(database = %self.label, reason = %dirty, "sqlite connection closed instead of pooled");
            return;
        }
        // An idle connection keeps no page cache (it counts against
        // SQLite's heap base, not against any call).
        let _ = conn.release_memory();
        let mut idle = self.idle.lock().unwrap();
        if idle.len() < SQLITE_POOL_SIZE {
            idle.push(conn);
        }
    }

    #[cfg(test)]
    pub fn idle_count(&self) -> usize {
        self.idle.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::hooks::{AuthContext, Authorization};

    const LIMITS: CallLimits = CallLimits { length: 1 << 20 };

    /// A database file with one table, and its config.
    fn database() -> (tempfile::TempDir, SqliteConfig) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("db.sqlite");
        rusqlite::Connection::open(&file)
            .unwrap()
            .execute_batch("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2);")
            .unwrap();
        let config = SqliteConfig { file };
        (dir, config)
    }

    fn access(read_only: bool) -> Access {
        if read_only {
            Access::ReadOnly
        } else {
            Access::ReadWrite
        }
    }

    /// A connection as the host hands it to a guest.
    fn guest_conn(read_only: bool) -> (tempfile::TempDir, rusqlite::Connection) {
        let (dir, config) = database();
        let conn = open(&config, access(read_only)).unwrap();
        apply_limits(&conn, LIMITS).unwrap();
        (dir, conn)
    }

    /// What the authorizer would never let a guest do, done by a test that
    /// removes it: the clean-state check must not rely on the authorizer.
    fn without_authorizer(conn: &rusqlite::Connection, sql: &str) {
        conn.authorizer(None::<fn(AuthContext<'_>) -> Authorization>);
        conn.execute_batch(sql).unwrap();
    }

    /// Prepare and run `sql`: was it refused by the authorizer (while
    /// preparing, or while running, for a nested pragma statement)?
    fn refused(conn: &rusqlite::Connection, sql: &str) -> bool {
        let run = || -> rusqlite::Result<()> {
            let mut stmt = conn.prepare(sql)?;
            let mut rows = stmt.query([])?;
            while rows.next()?.is_some() {}
            Ok(())
        };
        match run() {
            Err(rusqlite::Error::SqliteFailure(f, _))
                if f.code == rusqlite::ErrorCode::AuthorizationForStatementDenied =>
            {
                true
            }
            Err(other) => panic!("{sql}: {other}"),
            Ok(()) => false,
        }
    }

    #[test]
    fn a_fresh_connection_is_clean() {
        for read_only in [true, false] {
            let (_dir, conn) = guest_conn(read_only);
            check_clean(&conn, access(read_only), LIMITS).unwrap();
        }
    }

    #[test]
    fn an_open_transaction_is_not_clean() {
        let (_dir, conn) = guest_conn(false);
        without_authorizer(&conn, "BEGIN; SELECT count(*) FROM t;");
        assert!(matches!(
            check_clean(&conn, Access::ReadWrite, LIMITS),
            Err(Dirty::OpenTransaction)
        ));
    }

    #[test]
    fn a_temp_object_is_not_clean() {
        // (`query_only` alone would keep TEMP objects off a read-only one.)
        let (_dir, conn) = guest_conn(false);
        without_authorizer(
            &conn,
            "CREATE TEMP VIEW t AS SELECT 7 AS x; CREATE TEMP TABLE u (y);",
        );
        assert!(matches!(
            check_clean(&conn, Access::ReadWrite, LIMITS),
            Err(Dirty::TempObjects(2))
        ));
    }

    #[test]
    fn a_changed_setting_is_not_clean() {
        for (sql, name) in [
            ("PRAGMA query_only = 0", "query_only"),
            ("PRAGMA trusted_schema = 1", "trusted_schema"),
            ("PRAGMA temp_store = FILE", "temp_store"),
            ("PRAGMA cache_size = -100000", "cache_size"),
        ] {
            let (_dir, conn) = guest_conn(true);
            without_authorizer(&conn, sql);
            match check_clean(&conn, Access::ReadOnly, LIMITS) {
                Err(Dirty::Setting { name: found, .. }) => assert_eq!(found, name, "{sql}"),
                other => panic!("{sql}: {other:?}"),
            }
        }
        let (_dir, conn) = guest_conn(true);
        conn.set_limit(Limit::SQLITE_LIMIT_LENGTH, 1 << 30).unwrap();
        assert!(matches!(
            check_clean(&conn, Access::ReadOnly, LIMITS),
            Err(Dirty::Setting {
                name: "limit_length",
                ..
            })
        ));
        let (_dir, conn) = guest_conn(true);
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, false)
            .unwrap();
        assert!(matches!(
            check_clean(&conn, Access::ReadOnly, LIMITS),
            Err(Dirty::Setting {
                name: "defensive",
                ..
            })
        ));
    }

    #[test]
    fn only_a_clean_connection_goes_back_to_the_pool() {
        let (_dir, config) = database();
        let db = Database::new("main".into(), config, true);
        let clean = db.checkout(LIMITS).unwrap();
        let dirty = db.checkout(LIMITS).unwrap();
        without_authorizer(
            &dirty,
            "PRAGMA query_only = 0; CREATE TEMP VIEW t AS SELECT 'shadow' AS x;",
        );
        db.checkin(dirty, LIMITS);
        assert_eq!(db.idle_count(), 0, "the dirty connection was closed");
        db.checkin(clean, LIMITS);
        assert_eq!(db.idle_count(), 1);
        // The pooled one is the clean one: `t` is the real table.
        let again = db.checkout(LIMITS).unwrap();
        let n: i64 = again
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 2);
    }

    #[test]
    fn the_authorizer_guards_every_connection() {
        for read_only in [true, false] {
            let (_dir, conn) = guest_conn(read_only);
            for sql in [
                "CREATE TEMP VIEW t AS SELECT 'bob' AS x",
                "CREATE TEMP TABLE s (x)",
                "CREATE TABLE temp.s (x)",
                "BEGIN",
                "SAVEPOINT s",
                "COMMIT",
                "ROLLBACK",
                "RELEASE s",
                "PRAGMA hard_heap_limit = 1",
                "PRAGMA soft_heap_limit = 1",
                "PRAGMA temp_store_directory = '/tmp'",
                "PRAGMA temp_store_directory",
                "PRAGMA query_only = 0",
                // The table-valued form prepares the same pragma.
                "SELECT * FROM pragma_hard_heap_limit",
                "ATTACH DATABASE '/tmp/emseepea-unit-attach.db' AS other",
            ] {
                assert!(refused(&conn, sql), "{sql} (read_only = {read_only})");
            }
            for sql in [
                "SELECT x FROM t",
                "PRAGMA table_info(t)",
                "SELECT name FROM pragma_table_info('t')",
                "PRAGMA user_version",
            ] {
                assert!(!refused(&conn, sql), "{sql}");
            }
            for write in [
                "INSERT INTO t VALUES (3)",
                "UPDATE t SET x = x + 1",
                "DELETE FROM t WHERE x = 3",
                "CREATE TABLE t2 (y)",
                "CREATE INDEX t_x ON t (x)",
                "ALTER TABLE t ADD COLUMN z",
                "ANALYZE",
                "PRAGMA main.user_version = 3",
            ] {
                // A writable grant may change its file (but for pragmas).
                let expected = read_only || write.starts_with("PRAGMA");
                assert_eq!(
                    refused(&conn, write),
                    expected,
                    "{write} (read_only = {read_only})"
                );
            }
        }
    }

    #[test]
    fn values_are_bounded_by_the_call_limit() {
        let limits = CallLimits::for_reservation(8 << 20);
        assert_eq!(limits.length, 4 << 20);
        let (_dir, conn) = guest_conn(true);
        apply_limits(&conn, limits).unwrap();
        let hex = |n: i64| {
            conn.query_row("SELECT length(hex(zeroblob(?1)))", [n], |r| {
                r.get::<_, i64>(0)
            })
        };
        // hex() makes 2n bytes and a terminator: n = limit/2 - 1 is the
        // largest that fits.
        let fits = i64::from(limits.length) / 2 - 1;
        assert_eq!(hex(fits).unwrap(), 2 * fits);
        let err = hex(fits + 1).unwrap_err();
        assert_eq!(err.sqlite_error_code(), Some(rusqlite::ErrorCode::TooBig));
    }
}
