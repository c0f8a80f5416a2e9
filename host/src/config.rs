//! The server's configuration, composed. Each layer owns its settings and
//! their checks: `auth::config`, `mcp::config` and `mcp::http::config`,
//! `runtime::config`, `telemetry::config`, `inventory::config`, each
//! capability's module (`[databases]`, `[directories]`, its grant), `admin`,
//! `workers`, `distribution::signature`; the seed's shared limits are in
//! `limits`. This module puts them into one TOML file, loads it, resolves
//! its paths and checks what spans layers. Layers never import it. Unknown
//! keys are an error everywhere: a typo must not silently fall back to a
//! default.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

// Each layer's settings, re-exported for the entry points, tests and tools
// that know the configuration as one thing.
pub use crate::admin::AdminConfig;
pub use crate::auth::config::*;
pub use crate::guest_text::MAX_LOGGED_GUEST_TEXT_BYTES;
pub use crate::inventory::config::*;
pub use crate::limits::*;
pub use crate::listener::accept::{ACCEPT_BACKOFF_MAX, ACCEPT_BACKOFF_MIN, ACCEPT_LOG_INTERVAL};
pub use crate::listener::limits::{DEFAULT_PEER_IPV4_PREFIX, DEFAULT_PEER_IPV6_PREFIX};
pub use crate::mcp::config::*;
pub use crate::mcp::http::config::*;
pub use crate::mcp::stdio::STDIO_MAX_IN_FLIGHT;
pub use crate::runtime::capabilities::http::config::HttpGrantLimits;
pub use crate::runtime::capabilities::sql::config::{
    SQLITE_CACHE_KIB, SQLITE_HEAP_BASE_BYTES, SQLITE_MAX_SQL_LENGTH, SQLITE_MEMORY_SHARE_DIVISOR,
    SQLITE_POOL_SIZE,
};
pub use crate::runtime::capabilities::sql::postgres::config::{
    DEFAULT_PG_POOL_SIZE, PG_CANCEL_TIMEOUT, PG_CONNECT_TIMEOUT, PG_POOL_WAIT_MAX, PG_RESET_TIMEOUT,
};
pub use crate::runtime::capabilities::wasi::DirectoryConfig;
pub use crate::runtime::config::*;
pub use crate::runtime::output::{
    MAX_GUEST_OUTPUT_LINES_PER_CALL, MAX_GUEST_OUTPUT_LINES_PER_SECOND,
};
pub use crate::secret::{self, Secret};
pub use crate::telemetry::config::*;
pub use crate::toml_file::one_line;
use crate::toml_file::parse_toml;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: {problem}")]
    Invalid {
        path: PathBuf,
        problem: ConfigProblem,
    },
}

/// The server configuration file.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address to listen on (`--listen` overrides it).
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// Directory of `NAME.wasm` sources (+ optional `NAME.toml` manifests).
    pub sources_dir: PathBuf,
    /// `[sources]`: the keys whose signatures (`NAME.sig`) are trusted and
    /// whether every source must carry one (`distribution::signature`).
    #[serde(default)]
    pub sources: SourcesConfig,
    /// Where the dev-mode secret (and, by default, the precompile cache) live.
    pub state_dir: PathBuf,
    /// The precompile cache; default `STATE_DIR/precompiled`. Servers may
    /// share one only if they share `cache_key_file` too.
    #[serde(default)]
    pub cache_dir: Option<PathBuf>,
    /// The 32-byte key that authenticates cache entries; default
    /// `STATE_DIR/precompile-key`. Must not be inside `cache_dir`.
    #[serde(default)]
    pub cache_key_file: Option<PathBuf>,
    /// The MCP listener: endpoint, deadlines, body limits, origins, sessions, connections.
    #[serde(default)]
    pub http: HttpConfig,
    /// The admin listener (`/metrics`, `/healthz`, `/readyz`); off unless set.
    #[serde(default)]
    pub admin: AdminConfig,
    /// `[log] format`: `human` (default) or `json` (`--log-format` overrides).
    #[serde(default)]
    pub log: LogConfig,
    /// `[traces]`: OpenTelemetry over OTLP/HTTP; off unless an endpoint is
    /// set here or in `OTEL_EXPORTER_OTLP_ENDPOINT`.
    #[serde(default)]
    pub traces: TracesConfig,
    /// The default guest budget of every call; a source's manifest may override it.
    #[serde(default)]
    pub budget: BudgetConfig,
    /// The guest runtime: call slots, fair shares, the pooling allocator.
    #[serde(default)]
    pub runtime: RuntimeConfig,
    /// `[workers] pin`: one CPU per worker thread (`auto`, `always`, `never`);
    /// `yield_after_us`: when a busy worker gives a peer on its CPU a turn.
    #[serde(default)]
    pub workers: crate::workers::WorkersConfig,
    /// `resources/list` pages.
    #[serde(default)]
    pub list_pagination: ListPagination,
    /// The seed's `maxApplicationResultBytes`: a bound on every serialized result.
    #[serde(default = "default_max_application_result_bytes")]
    pub max_application_result_bytes: usize,
    /// Bound on the content bytes of one `resources/read`.
    #[serde(default = "default_max_read_bytes")]
    pub max_read_bytes: usize,
    /// How callers authenticate (OAuth 2.1 resource server).
    #[serde(default)]
    pub auth: AuthConfig,
    /// Static resources (`[[resources]]`), listed before every source.
    #[serde(default)]
    pub resources: Vec<StaticResourceConfig>,
    /// Databases guests may be granted (label → file).
    #[serde(default)]
    pub databases: BTreeMap<String, DatabaseConfig>,
    /// Directories guests may be granted read-only (label → path).
    #[serde(default)]
    pub directories: BTreeMap<String, DirectoryConfig>,
    /// Server instructions sent on initialize / discover.
    #[serde(default)]
    pub instructions: Option<String>,
    /// The file this was read from; relative paths resolve against its directory.
    #[serde(skip)]
    pub file: PathBuf,
}

fn default_listen() -> SocketAddr {
    "127.0.0.1:8080".parse().unwrap()
}
fn default_max_application_result_bytes() -> usize {
    DEFAULT_MAX_APPLICATION_RESULT_BYTES
}
fn default_max_read_bytes() -> usize {
    DEFAULT_MAX_READ_BYTES
}

/// `[sources]`: defined by the signature check, which owns it.
pub use crate::distribution::signature::SourcesConfig;

/// `[databases.LABEL]`: defined by the SQL capability, which owns it.
pub use crate::runtime::capabilities::sql::config::{DatabaseConfig, Engine, EngineConfig};

impl Config {
    /// Reads and validates a config file; relative paths are resolved against
    /// the file's directory.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mut config: Config = parse_toml(&text).map_err(|message| ConfigError::Parse {
            path: path.to_owned(),
            message,
        })?;
        config.file = path.to_owned();
        let base = path.parent().unwrap_or(Path::new("."));
        config.sources_dir = base.join(&config.sources_dir);
        config.sources.resolve(base);
        config.state_dir = base.join(&config.state_dir);
        config.cache_dir = Some(match &config.cache_dir {
            Some(dir) => base.join(dir),
            None => config.state_dir.join("precompiled"),
        });
        config.cache_key_file = Some(match &config.cache_key_file {
            Some(file) => base.join(file),
            None => config.state_dir.join(DEFAULT_CACHE_KEY_FILE),
        });
        for resource in &mut config.resources {
            if let StaticBody::File(file) = &mut resource.body {
                *file = base.join(&*file);
            }
        }
        let invalid = |problem: ConfigProblem| ConfigError::Invalid {
            path: path.to_owned(),
            problem,
        };
        for (label, db) in config.databases.iter_mut() {
            match &mut db.engine {
                EngineConfig::Sqlite(sqlite) => sqlite.file = base.join(&sqlite.file),
                EngineConfig::Postgres(pg) => {
                    pg.load_secrets(&format!("databases.{label}"), base)
                        .map_err(|e| invalid(e.into()))?;
                    if let Some(ca) = &pg.ca_file {
                        pg.ca_file = Some(base.join(ca));
                    }
                }
            }
        }
        for dir in config.directories.values_mut() {
            dir.path = base.join(&dir.path);
        }
        if let AuthMethod::Jwt(JwtConfig {
            jwks: JwksSource::File(file),
            ..
        }) = &mut config.auth.method
        {
            *file = base.join(&*file);
        }
        if let AuthMethod::Introspection(i) = &mut config.auth.method {
            let forms = secret::Forms {
                key: "auth.introspection.client_secret",
                inline: i.client_secret.take(),
                file: i.client_secret_file.take(),
                env: i.client_secret_env.take(),
            };
            i.client_secret = forms.load(base, true).map_err(|e| invalid(e.into()))?;
        }
        config.validate().map_err(|problem| ConfigError::Invalid {
            path: path.to_owned(),
            problem,
        })?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), ConfigProblem> {
        if self.sources.require_signatures && self.sources.trusted_keys.is_empty() {
            return Err(ConfigProblem::SignaturesWithoutKeys);
        }
        // Each layer checks its own settings...
        self.traces.check()?;
        self.list_pagination
            .check(self.max_application_result_bytes)?;
        self.http.check()?;
        self.runtime.check()?;
        if self.workers.yield_after_us > crate::workers::MAX_YIELD_AFTER_US {
            return Err(ConfigProblem::YieldAfter);
        }
        // ...and what spans them is checked here.
        check_budget(&self.budget, self.runtime.max_memory_bytes)?;
        if self.cache_key_file().starts_with(self.cache_dir()) {
            return Err(ConfigProblem::KeyInsideCache {
                key: self.cache_key_file(),
                dir: self.cache_dir(),
            });
        }
        Ok(())
    }

    /// What the MCP layer reads: `[http]`, `[list_pagination]`, the result
    /// and read bounds, the instructions.
    pub fn mcp(&self) -> McpConfig {
        McpConfig {
            http: self.http.clone(),
            list_pagination: self.list_pagination,
            max_application_result_bytes: self.max_application_result_bytes,
            max_read_bytes: self.max_read_bytes,
            instructions: self.instructions.clone(),
        }
    }

    /// Each capability's own section, handed over as it asks for it.
    pub fn capabilities(&self) -> crate::runtime::capabilities::ServerSections<'_> {
        crate::runtime::capabilities::ServerSections {
            wasi: &self.directories,
            http: (),
            config: (),
            sql: &self.databases,
        }
    }

    /// The precompile cache directory (resolved by `load`).
    pub fn cache_dir(&self) -> PathBuf {
        self.cache_dir
            .clone()
            .unwrap_or_else(|| self.state_dir.join("precompiled"))
    }

    /// The precompile cache's key file (resolved by `load`).
    pub fn cache_key_file(&self) -> PathBuf {
        self.cache_key_file
            .clone()
            .unwrap_or_else(|| self.state_dir.join(DEFAULT_CACHE_KEY_FILE))
    }

    pub fn request_timeout(&self) -> Duration {
        self.http.request_timeout()
    }

    /// The effective per-page byte bound (`ListPagination::byte_limit`).
    pub fn page_byte_limit(&self) -> usize {
        self.list_pagination
            .byte_limit(self.max_application_result_bytes)
    }
}

/// What [`Config::validate`] refuses, each a setting out of its range.
#[derive(Debug, thiserror::Error)]
pub enum ConfigProblem {
    #[error(transparent)]
    Traces(#[from] TracesProblem),
    #[error(transparent)]
    Pagination(#[from] PaginationProblem),
    #[error(transparent)]
    Http(#[from] HttpProblem),
    #[error(transparent)]
    Runtime(#[from] RuntimeProblem),
    #[error(
        "workers.yield_after_us must be at most {} (0: never yield)",
        crate::workers::MAX_YIELD_AFTER_US
    )]
    YieldAfter,
    #[error("budget: {0}")]
    Budget(#[from] BudgetProblem),
    #[error(
        "cache_key_file {} is inside cache_dir {}: the key must live where cache writers cannot read it",
        key.display(),
        dir.display()
    )]
    KeyInsideCache { key: PathBuf, dir: PathBuf },
    #[error("{0}")]
    Secret(#[from] secret::SecretError),
    #[error("sources.require_signatures needs at least one sources.trusted_keys entry")]
    SignaturesWithoutKeys,
}

/// What loading the sources reads of the configuration.
impl<'c> From<&'c Config> for crate::runtime::LoadSettings<'c> {
    fn from(config: &'c Config) -> Self {
        Self {
            file: &config.file,
            sources_dir: &config.sources_dir,
            sources: &config.sources,
            cache_dir: config.cache_dir(),
            cache_key_file: config.cache_key_file(),
            budget: config.budget,
            runtime: &config.runtime,
            capabilities: config.capabilities(),
        }
    }
}

impl ConfigError {
    /// The file at fault.
    pub fn path(&self) -> &Path {
        match self {
            ConfigError::Read { path, .. }
            | ConfigError::Parse { path, .. }
            | ConfigError::Invalid { path, .. } => path,
        }
    }

    /// What is wrong with it, without the file name.
    pub fn reason(&self) -> String {
        match self {
            ConfigError::Read { source, .. } => source.to_string(),
            ConfigError::Parse { message, .. } => message.clone(),
            ConfigError::Invalid { problem, .. } => problem.to_string(),
        }
    }
}

/// The configuration reference (JSON Schema, defaults, the book page).
pub mod reference;

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests;
