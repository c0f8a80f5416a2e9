//! `[databases.LABEL]` of the server config: the SQL capability's section.
//!
//! `engine` chooses the engine that serves the database (`sqlite`, the
//! default, or `postgres`); `read_only` and `max_result_bytes` mean the same
//! on every engine; every other key is the engine's own and is read by that
//! engine's config type (unknown keys are refused there).

use serde::{Deserialize, Deserializer};
use std::path::PathBuf;

/// SQLite's process-wide heap limit when no call is running: idle pooled
/// connections (schema, prepared statements; their page cache is released
/// on check-in). Running calls raise it by their reservations, so SQLite
/// never holds more than this plus what running calls' budgets pay for.
pub const SQLITE_HEAP_BASE_BYTES: u64 = 64 << 20;
/// A call that opens a connection reserves `memory_bytes / 4` of its budget
/// for SQLite's working memory; half of that is the longest string or blob
/// one of its statements may make (`SQLITE_LIMIT_LENGTH`).
pub const SQLITE_MEMORY_SHARE_DIVISOR: u64 = 4;
/// Longest SQL statement text (`SQLITE_LIMIT_SQL_LENGTH`), bytes.
pub const SQLITE_MAX_SQL_LENGTH: i32 = 1 << 20;
/// Page cache per connection (`PRAGMA cache_size = -KIB`).
pub const SQLITE_CACHE_KIB: i64 = 1024;
/// Idle connections kept per (source, database) pool.
pub const SQLITE_POOL_SIZE: usize = 8;

/// The engine that serves a database. Guests see the same `sql` interface
/// whichever it is.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    Deserialize,
    serde::Serialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// The embedded SQLite (the default): `file` on the host's own disk.
    #[default]
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
}

impl Engine {
    /// Every engine (the isolation checklist runs once per engine).
    pub const ALL: [Engine; 2] = [Engine::Sqlite, Engine::Postgres];

    /// The name in the config, in logs and in the `engine` metric label.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Sqlite => "sqlite",
            Engine::Postgres => "postgres",
        }
    }
}

/// One `[databases.LABEL]` section.
#[derive(Debug, Clone, schemars::JsonSchema)]
#[schemars(with = "SectionSchema")]
pub struct DatabaseConfig {
    /// `read_only = true` (the default): the engine refuses every write.
    pub read_only: bool,
    /// Cap on the bytes of one statement's result rows (every engine).
    pub max_result_bytes: usize,
    /// The engine and its own keys.
    pub engine: EngineConfig,
}

/// The engine-specific part of a `[databases.LABEL]` section. One per
/// database, read once at startup: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum EngineConfig {
    Sqlite(SqliteConfig),
    /// The PostgreSQL engine's keys (`postgres/config.rs`).
    Postgres(super::postgres::PostgresConfig),
}

impl EngineConfig {
    pub fn engine(&self) -> Engine {
        match self {
            EngineConfig::Sqlite(_) => Engine::Sqlite,
            EngineConfig::Postgres(_) => Engine::Postgres,
        }
    }
}

/// The SQLite engine's keys.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SqliteConfig {
    /// The database file (relative to the config file's directory).
    pub file: PathBuf,
}

/// The keys every engine shares, and the rest for the engine to read.
#[derive(Deserialize)]
struct Section {
    #[serde(default)]
    engine: Engine,
    #[serde(default = "default_true")]
    read_only: bool,
    #[serde(default = "default_max_result_bytes")]
    max_result_bytes: usize,
    #[serde(flatten)]
    rest: toml::Table,
}

/// The keys of a `[databases.LABEL]` section, for its JSON Schema only
/// (`emseepea config schema`): the shared keys and each engine's own.
#[derive(schemars::JsonSchema)]
#[allow(dead_code)]
struct SectionSchema {
    /// `sqlite` (the default: `file`) or `postgres` (`url` or `host`...).
    #[serde(default)]
    engine: Engine,
    /// The engine refuses every write (SQLite also opens the file read-only).
    #[serde(default = "default_true")]
    read_only: bool,
    /// Cap on the bytes of one statement's result rows.
    #[serde(default = "default_max_result_bytes")]
    max_result_bytes: usize,
    #[serde(flatten)]
    sqlite: Option<SqliteConfig>,
    #[serde(flatten)]
    postgres: Option<super::postgres::PostgresConfig>,
}

impl<'de> Deserialize<'de> for DatabaseConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let section = Section::deserialize(d)?;
        let engine = match section.engine {
            Engine::Sqlite => EngineConfig::Sqlite(
                engine_keys(section.rest)
                    .map_err(|e| D::Error::custom(format!("engine \"sqlite\": {e}")))?,
            ),
            Engine::Postgres => EngineConfig::Postgres(
                engine_keys(section.rest)
                    .map_err(|e| D::Error::custom(format!("engine \"postgres\": {e}")))?,
            ),
        };
        Ok(DatabaseConfig {
            read_only: section.read_only,
            max_result_bytes: section.max_result_bytes,
            engine,
        })
    }
}

/// The engine's own keys, read from the rest of the section; an error names
/// the key at fault (`password: ...`), and never its value (a secret's type
/// error says only its kind: `config/secret.rs`).
fn engine_keys<T: serde::de::DeserializeOwned>(rest: toml::Table) -> Result<T, String> {
    serde_path_to_error::deserialize(toml::Value::Table(rest)).map_err(|e| {
        let key = e.path().to_string();
        format!("{key}: {}", e.into_inner().message())
    })
}

fn default_true() -> bool {
    true
}
fn default_max_result_bytes() -> usize {
    4 << 20
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<DatabaseConfig, toml::de::Error> {
        toml::from_str(text)
    }

    #[test]
    fn sqlite_is_the_default_engine_and_an_unknown_one_is_refused() {
        let default = parse("file = \"a.sqlite\"").unwrap();
        assert_eq!(default.engine.engine(), Engine::Sqlite);
        assert!(default.read_only);
        assert_eq!(default.max_result_bytes, 4 << 20);
        let named = parse("engine = \"sqlite\"\nfile = \"a.sqlite\"\nread_only = false").unwrap();
        assert!(
            matches!(&named.engine, EngineConfig::Sqlite(s) if s.file == std::path::Path::new("a.sqlite"))
        );
        assert!(!named.read_only);
        let unknown = parse("engine = \"oracle\"\nfile = \"a.sqlite\"").unwrap_err();
        assert!(unknown.to_string().contains("oracle"), "{unknown}");
    }

    #[test]
    fn each_engine_reads_its_own_keys() {
        // A key SQLite does not know is refused, as before the split.
        let stray = parse("file = \"a.sqlite\"\nurl = \"postgres://x\"").unwrap_err();
        assert!(stray.to_string().contains("url"), "{stray}");
        let missing = parse("read_only = true").unwrap_err();
        assert!(missing.to_string().contains("file"), "{missing}");
        // PostgreSQL's keys are kept for its engine; the shared ones are read here.
        let pg =
            parse("engine = \"postgres\"\nurl = \"postgres://x\"\nmax_result_bytes = 9").unwrap();
        assert_eq!(pg.max_result_bytes, 9);
        assert!(
            matches!(&pg.engine, EngineConfig::Postgres(c) if c.url.as_ref().map(|u| u.expose()) == Some("postgres://x"))
        );
        let stray = parse("engine = \"postgres\"\nurl = \"postgres://x\"\nfile = \"a.sqlite\"")
            .unwrap_err();
        assert!(stray.to_string().contains("file"), "{stray}");
    }
}
