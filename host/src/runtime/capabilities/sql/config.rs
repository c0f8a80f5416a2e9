//! `[databases.LABEL]` of the server config: the SQL capability's section.
//!
//! `engine` chooses the engine that serves the database (`sqlite`, the
//! default, or `postgres`); `read_only` and `max_result_bytes` mean the same
//! on every engine; every other key is the engine's own and is read by that
//! engine's config type (unknown keys are refused there).

use serde::{Deserialize, Deserializer};
use std::path::PathBuf;

/// The engine that serves a database. Guests see the same `sql` interface
/// whichever it is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize)]
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
#[derive(Debug, Clone)]
pub struct DatabaseConfig {
    /// `read_only = true` (the default): the engine refuses every write.
    pub read_only: bool,
    /// Cap on the bytes of one statement's result rows (every engine).
    pub max_result_bytes: usize,
    /// The engine and its own keys.
    pub engine: EngineConfig,
}

/// The engine-specific part of a `[databases.LABEL]` section.
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
#[derive(Debug, Clone, Deserialize)]
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

impl<'de> Deserialize<'de> for DatabaseConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let section = Section::deserialize(d)?;
        let engine = match section.engine {
            Engine::Sqlite => EngineConfig::Sqlite(
                toml::Value::Table(section.rest)
                    .try_into()
                    .map_err(|e| D::Error::custom(format!("engine \"sqlite\": {e}")))?,
            ),
            Engine::Postgres => EngineConfig::Postgres(
                toml::Value::Table(section.rest)
                    .try_into()
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
            matches!(&pg.engine, EngineConfig::Postgres(c) if c.url.as_deref() == Some("postgres://x"))
        );
        let stray = parse("engine = \"postgres\"\nurl = \"postgres://x\"\nfile = \"a.sqlite\"")
            .unwrap_err();
        assert!(stray.to_string().contains("file"), "{stray}");
    }
}
