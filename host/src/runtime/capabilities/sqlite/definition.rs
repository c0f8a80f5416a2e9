//! `[databases.LABEL]` of the server config: the SQL capability's section.

use serde::Deserialize;
use std::path::PathBuf;

/// The engine that serves a database. Guests see the same `sql` interface
/// whichever it is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// The embedded SQLite (the default): `file` on the host's own disk.
    #[default]
    Sqlite,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseConfig {
    /// `engine = "sqlite"` (the default; the only engine built so far).
    #[serde(default)]
    pub engine: Engine,
    pub file: PathBuf,
    #[serde(default = "default_true")]
    pub read_only: bool,
    /// Cap on the bytes of one statement's result rows.
    #[serde(default = "default_max_result_bytes")]
    pub max_result_bytes: usize,
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
        assert_eq!(default.engine, Engine::Sqlite);
        assert!(default.read_only);
        let named = parse("engine = \"sqlite\"\nfile = \"a.sqlite\"").unwrap();
        assert_eq!(named.engine, Engine::Sqlite);
        let unknown = parse("engine = \"oracle\"\nfile = \"a.sqlite\"").unwrap_err();
        assert!(unknown.to_string().contains("oracle"), "{unknown}");
    }
}
