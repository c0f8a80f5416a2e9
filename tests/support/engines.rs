//! One test, either engine: a database made from an example's schema, as
//! an embedded SQLite file or in a throwaway PostgreSQL, with the server
//! config section that serves it and a way to change it behind the
//! server's back (live records).

use super::postgres::Postgres;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug)]
pub enum Engine {
    Sqlite,
    Postgres,
}

pub enum TestDb {
    Sqlite {
        _dir: tempfile::TempDir,
        file: PathBuf,
    },
    Postgres(Postgres),
}

impl TestDb {
    /// A database with `schema` (SQL both engines accept) applied.
    pub fn new(engine: Engine, schema: &str) -> TestDb {
        let db = match engine {
            Engine::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let file = dir.path().join("db.sqlite");
                TestDb::Sqlite { _dir: dir, file }
            }
            Engine::Postgres => TestDb::Postgres(Postgres::start()),
        };
        db.exec(schema);
        db
    }

    /// The `[databases.LABEL]` section for it (read-only, the default).
    pub fn section(&self, label: &str) -> String {
        match self {
            TestDb::Sqlite { file, .. } => {
                format!("[databases.{label}]\nfile = \"{}\"\n", file.display())
            }
            TestDb::Postgres(pg) => format!(
                "[databases.{label}]\nengine = \"postgres\"\nurl = \"{}\"\ntls = \"disable\"\n",
                pg.url()
            ),
        }
    }

    /// Run SQL (several statements) directly on the database.
    pub fn exec(&self, sql: &str) {
        match self {
            TestDb::Sqlite { file, .. } => rusqlite::Connection::open(file)
                .unwrap()
                .execute_batch(sql)
                .unwrap(),
            TestDb::Postgres(pg) => {
                pg.psql(sql);
            }
        }
    }

    /// Rows `0..n` of a generated table: `make(i)` is the SQL values tuple
    /// of row `i` (e.g. `('n1', 'alice')`), inserted in batches.
    pub fn insert_rows(&self, table: &str, n: usize, make: impl Fn(usize) -> String) {
        let mut start = 0;
        while start < n {
            let end = (start + 400).min(n);
            let values: Vec<String> = (start..end).map(&make).collect();
            self.exec(&format!(
                "INSERT INTO {table} VALUES {};",
                values.join(", ")
            ));
            start = end;
        }
    }
}
