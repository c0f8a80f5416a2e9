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
        use ConfigProblem::NotPositive;
        if self.sources.require_signatures && self.sources.trusted_keys.is_empty() {
            return Err(ConfigProblem::SignaturesWithoutKeys);
        }
        if let Some(r) = self.traces.sample_ratio
            && !(0.0..=1.0).contains(&r)
        {
            return Err(ConfigProblem::SampleRatio(r));
        }
        let p = &self.list_pagination;
        if p.page_size == 0 || p.page_size > MAX_PAGE_SIZE {
            return Err(ConfigProblem::PageSize(p.page_size));
        }
        if p.max_page_bytes < 1024 || self.max_application_result_bytes < 1024 {
            return Err(ConfigProblem::PageBytes);
        }
        let h = &self.http;
        if !h.endpoint.starts_with('/') {
            return Err(ConfigProblem::Endpoint(h.endpoint.clone()));
        }
        if h.request_timeout_ms == 0 {
            return Err(NotPositive("http.request_timeout_ms"));
        }
        if h.body_timeout_ms == 0 || h.max_batch_items == 0 || h.max_unauthenticated_body_bytes == 0
        {
            return Err(NotPositive(
                "http.body_timeout_ms, http.max_batch_items and http.max_unauthenticated_body_bytes",
            ));
        }
        let r = &self.runtime;
        if r.epoch_tick_us == 0 || r.max_concurrent_calls == 0 {
            return Err(NotPositive(
                "runtime.epoch_tick_us and runtime.max_concurrent_calls",
            ));
        }
        if r.guest_threads > MAX_GUEST_THREADS {
            return Err(ConfigProblem::GuestThreads);
        }
        if r.standby_instances > MAX_STANDBY_INSTANCES {
            return Err(ConfigProblem::StandbyInstances);
        }
        if self.workers.yield_after_us > crate::workers::MAX_YIELD_AFTER_US {
            return Err(ConfigProblem::YieldAfter);
        }
        if r.max_calls_per_caller == Some(0) || r.max_calls_per_source == Some(0) {
            return Err(NotPositive(
                "runtime.max_calls_per_caller and runtime.max_calls_per_source",
            ));
        }
        if h.max_connections == 0
            || h.max_connections_per_peer == 0
            || h.max_sessions_per_principal == 0
            || h.max_anonymous_sessions == 0
        {
            return Err(NotPositive(
                "http.max_connections, max_connections_per_peer, max_sessions_per_principal and max_anonymous_sessions",
            ));
        }
        if h.peer_ipv6_prefix > 128 || h.peer_ipv4_prefix > 32 {
            return Err(ConfigProblem::PeerPrefix);
        }
        check_budget(&self.budget, r.max_memory_bytes)?;
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
        Duration::from_millis(self.http.request_timeout_ms)
    }

    pub fn body_timeout(&self) -> Duration {
        Duration::from_millis(self.http.body_timeout_ms)
    }

    /// The effective per-page byte bound: "The tighter byte limit applies".
    pub fn page_byte_limit(&self) -> usize {
        self.list_pagination
            .max_page_bytes
            .min(self.max_application_result_bytes)
    }
}

/// What [`Config::validate`] refuses, each a setting out of its range.
#[derive(Debug, thiserror::Error)]
pub enum ConfigProblem {
    #[error("{0} must be positive")]
    NotPositive(&'static str),
    #[error("traces.sample_ratio must be 0.0..=1.0, got {0}")]
    SampleRatio(f64),
    #[error("list_pagination.page_size must be 1..={MAX_PAGE_SIZE}, got {0}")]
    PageSize(u32),
    #[error(
        "list_pagination.max_page_bytes and max_application_result_bytes must be at least 1024"
    )]
    PageBytes,
    #[error("http.endpoint must start with '/', got {0:?}")]
    Endpoint(String),
    #[error("runtime.guest_threads must be at most {MAX_GUEST_THREADS}")]
    GuestThreads,
    #[error("runtime.standby_instances must be at most {MAX_STANDBY_INSTANCES}")]
    StandbyInstances,
    #[error(
        "workers.yield_after_us must be at most {} (0: never yield)",
        crate::workers::MAX_YIELD_AFTER_US
    )]
    YieldAfter,
    #[error("http.peer_ipv6_prefix must be 0..=128 and http.peer_ipv4_prefix 0..=32")]
    PeerPrefix,
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
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        let dir = std::env::temp_dir().join(format!("emseepea-config-{}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("c.toml");
        std::fs::write(&file, text).unwrap();
        Config::load(&file)
    }

    #[test]
    fn defaults_follow_the_seed() {
        let c = parse("sources_dir = 's'\nstate_dir = 't'\n").unwrap();
        assert_eq!(c.list_pagination.page_size, 50);
        assert_eq!(c.page_byte_limit(), 1 << 20);
        assert!(c.sources_dir.ends_with("s"));
    }

    #[test]
    fn signatures_required_without_trusted_keys_are_refused() {
        let e = parse("sources_dir = 's'\nstate_dir = 't'\n[sources]\nrequire_signatures = true\n")
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("needs at least one sources.trusted_keys"),
            "{e}"
        );
        let c = parse("sources_dir = 's'\nstate_dir = 't'\n[sources]\ntrusted_keys = ['k.pub']\n")
            .unwrap();
        assert!(c.sources.trusted_keys[0].ends_with("/k.pub"));
        assert!(!c.sources.require_signatures);
    }

    #[test]
    fn unknown_keys_are_errors() {
        let e = parse("sources_dir = 's'\nstate_dir = 't'\npage_sise = 3\n").unwrap_err();
        assert!(e.to_string().contains("page_sise"), "{e}");
        let e = parse("sources_dir = 's'\nstate_dir = 't'\n[list_pagination]\npagesize = 3\n")
            .unwrap_err();
        assert!(e.to_string().contains("pagesize"), "{e}");
    }

    #[test]
    fn page_size_above_100_is_refused() {
        let e = parse("sources_dir = 's'\nstate_dir = 't'\n[list_pagination]\npage_size = 101\n")
            .unwrap_err();
        assert!(e.to_string().contains("page_size"), "{e}");
    }

    #[test]
    fn tighter_byte_limit_applies() {
        let c = parse(
            "sources_dir = 's'\nstate_dir = 't'\nmax_application_result_bytes = 5000\n[list_pagination]\nmax_page_bytes = 9000\n",
        )
        .unwrap();
        assert_eq!(c.page_byte_limit(), 5000);
    }

    #[test]
    fn fair_shares_default_to_fractions_of_the_pool() {
        let c = parse("sources_dir = 's'\nstate_dir = 't'\n").unwrap();
        assert_eq!(
            (c.runtime.calls_per_caller(), c.runtime.calls_per_source()),
            (32, 48)
        );
        let c = parse("sources_dir = 's'\nstate_dir = 't'\n[runtime]\nmax_concurrent_calls = 1\n")
            .unwrap();
        assert_eq!(
            (c.runtime.calls_per_caller(), c.runtime.calls_per_source()),
            (1, 1)
        );
        let e = parse("sources_dir = 's'\nstate_dir = 't'\n[runtime]\nmax_calls_per_caller = 0\n")
            .unwrap_err();
        assert!(e.to_string().contains("max_calls_per_caller"), "{e}");
    }

    #[test]
    fn guest_threads_are_bounded() {
        let with = |n: u32| {
            parse(&format!(
                "sources_dir = 's'\nstate_dir = 't'\n[runtime]\nguest_threads = {n}\n"
            ))
        };
        assert_eq!(with(0).unwrap().runtime.guest_threads, 0);
        assert_eq!(
            with(MAX_GUEST_THREADS).unwrap().runtime.guest_threads,
            MAX_GUEST_THREADS
        );
        let e = with(MAX_GUEST_THREADS + 1).unwrap_err();
        assert!(e.to_string().contains("guest_threads"), "{e}");
    }

    #[test]
    fn peer_prefixes_default_to_64_and_32_and_are_bounded() {
        let with = |v6: u32, v4: u32| {
            parse(&format!(
                "sources_dir = 's'\nstate_dir = 't'\n[http]\npeer_ipv6_prefix = {v6}\npeer_ipv4_prefix = {v4}\n"
            ))
        };
        let c = parse("sources_dir = 's'\nstate_dir = 't'\n").unwrap();
        assert_eq!((c.http.peer_ipv6_prefix, c.http.peer_ipv4_prefix), (64, 32));
        let c = with(56, 24).unwrap();
        assert_eq!((c.http.peer_ipv6_prefix, c.http.peer_ipv4_prefix), (56, 24));
        for (v6, v4) in [(129, 32), (64, 33)] {
            let e = with(v6, v4).unwrap_err();
            assert!(e.to_string().contains("peer_ipv"), "{e}");
        }
    }

    #[test]
    fn a_workers_turn_is_bounded() {
        use crate::workers::{DEFAULT_YIELD_AFTER_US, MAX_YIELD_AFTER_US};
        let with = |n: u32| {
            parse(&format!(
                "sources_dir = 's'\nstate_dir = 't'\n[workers]\nyield_after_us = {n}\n"
            ))
        };
        let c = parse("sources_dir = 's'\nstate_dir = 't'\n").unwrap();
        assert_eq!(c.workers.yield_after_us, DEFAULT_YIELD_AFTER_US);
        assert_eq!(with(0).unwrap().workers.yield_after_us, 0);
        assert_eq!(
            with(MAX_YIELD_AFTER_US).unwrap().workers.yield_after_us,
            MAX_YIELD_AFTER_US
        );
        let e = with(MAX_YIELD_AFTER_US + 1).unwrap_err();
        assert!(e.to_string().contains("yield_after_us"), "{e}");
    }

    #[test]
    fn guest_threads_are_off_by_default() {
        let c = parse("sources_dir = 's'\nstate_dir = 't'\n").unwrap();
        assert_eq!(c.runtime.guest_threads, 0);
        assert_eq!(
            c.runtime.guest_threads_from_connections,
            DEFAULT_GUEST_THREADS_FROM_CONNECTIONS
        );
        assert_eq!(c.runtime.standby_instances, DEFAULT_STANDBY_INSTANCES);
    }

    /// The claim mappings: defaults as before, and no empty claim name or
    /// audience (an empty `scope_claims` would leave every caller scopeless).
    #[test]
    fn claim_mappings_are_checked() {
        let with = |auth: &str| {
            parse(&format!(
                "sources_dir = 's'\nstate_dir = 't'\n[auth]\nmode = 'dev'\n{auth}"
            ))
        };
        let c = with("").unwrap();
        assert_eq!(c.auth.scope_claims, ["scope", "scp"]);
        assert!(c.auth.accepted_audiences.is_empty());
        let c = with("scope_claims = ['roles']\naccepted_audiences = ['api://x']").unwrap();
        assert_eq!(c.auth.scope_claims, ["roles"]);
        assert_eq!(c.auth.accepted_audiences, ["api://x"]);
        for (bad, reason) in [
            ("scope_claims = []", "scope_claims must name"),
            ("scope_claims = ['scp', '']", "scope_claims must name"),
            ("accepted_audiences = ['']", "accepted_audiences must not"),
        ] {
            let e = with(bad).unwrap_err();
            assert!(e.to_string().contains(reason), "{bad}: {e}");
        }
    }

    /// Each mode reads its own table: a mode without it, or a table the mode
    /// would silently ignore (an operator who set `[auth.jwt]` but left
    /// `mode = "dev"`), stops startup with the reason.
    #[test]
    fn each_auth_mode_reads_its_own_table_only() {
        const BASE: &str = "sources_dir = 's'\nstate_dir = 't'\n";
        const JWT: &str = "[auth.jwt]\nissuer = 'i'\njwks_file = 'k.json'\n";
        const INTROSPECTION: &str = "[auth.introspection]\nendpoint = 'https://as/i'\nclient_id = 'c'\nclient_secret = 's'\n";
        let with = |mode: &str, tables: &str| {
            parse(&format!(
                "{BASE}[auth]\nmode = '{mode}'\nauthorization_servers = ['https://as']\n{tables}"
            ))
        };
        let refused = [
            ("jwt", "", "auth.mode = \"jwt\" needs [auth.jwt]"),
            ("introspection", "", "needs [auth.introspection]"),
            (
                "dev",
                JWT,
                "[auth.jwt] is set but auth.mode = \"dev\" does not read it",
            ),
            ("none", JWT, "[auth.jwt] is set"),
            ("dev", INTROSPECTION, "[auth.introspection] is set"),
            ("jwt", INTROSPECTION, "needs [auth.jwt]"),
            ("introspection", JWT, "needs [auth.introspection]"),
        ];
        for (mode, tables, reason) in refused {
            let e = with(mode, tables).unwrap_err();
            assert!(e.to_string().contains(reason), "{mode} {tables:?}: {e}");
        }
        let both = format!("{JWT}{INTROSPECTION}");
        let e = with("jwt", &both).unwrap_err();
        assert!(e.to_string().contains("[auth.introspection] is set"), "{e}");
        let e = with("introspection", &both).unwrap_err();
        assert!(e.to_string().contains("[auth.jwt] is set"), "{e}");
        let e = with("jwt", "[auth.jwt]\nissuer = 'i'\n").unwrap_err();
        assert!(
            e.to_string()
                .contains("exactly one of jwks_file or jwks_url"),
            "{e}"
        );
        let e = with(
            "jwt",
            "[auth.jwt]\nissuer = 'i'\njwks_file = 'k.json'\njwks_url = 'https://as/k'\n",
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("exactly one of jwks_file or jwks_url"),
            "{e}"
        );
        let e = with(
            "introspection",
            &format!("{INTROSPECTION}max_concurrent = 0\n"),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("max_concurrent must be positive"),
            "{e}"
        );

        assert!(matches!(
            with("dev", "").unwrap().auth.method,
            AuthMethod::Dev
        ));
        assert!(matches!(parse(BASE).unwrap().auth.method, AuthMethod::None));
        let c = with("jwt", JWT).unwrap();
        let AuthMethod::Jwt(JwtConfig {
            jwks: JwksSource::File(file),
            ..
        }) = &c.auth.method
        else {
            panic!("{:?}", c.auth.method)
        };
        // Relative to the config file, like every other path in it.
        assert_eq!(file, &c.file.parent().unwrap().join("k.json"));
        let c = with("introspection", INTROSPECTION).unwrap();
        assert!(matches!(&c.auth.method, AuthMethod::Introspection(i) if i.client_id == "c"));
    }

    #[test]
    fn a_static_resource_has_exactly_one_body() {
        let with = |body: &str| {
            parse(&format!(
                "sources_dir = 's'\nstate_dir = 't'\n[[resources]]\nuri = 'test://a'\nname = 'a'\n{body}"
            ))
        };
        for body in [
            "",
            "text = 'x'\nblob = 'eA=='\n",
            "text = 'x'\nfile = 'f.txt'\n",
        ] {
            let e = with(body).unwrap_err();
            assert!(
                e.to_string()
                    .contains("resource test://a: exactly one of text, blob or file is required"),
                "{body:?}: {e}"
            );
        }
        let c = with("file = 'f.txt'\n").unwrap();
        assert_eq!(
            c.resources[0].body,
            StaticBody::File(c.file.parent().unwrap().join("f.txt"))
        );
        assert_eq!(
            with("blob = 'eA=='\n").unwrap().resources[0].body,
            StaticBody::Blob("eA==".into())
        );
    }

    #[test]
    fn credentials_settings_are_checked() {
        let jwt = |extra: &str| {
            parse(&format!(
                "sources_dir = 's'\nstate_dir = 't'\n[auth]\nmode = 'jwt'\n{extra}\n[auth.jwt]\nissuer = 'i'\njwks_file = 'k.json'\n"
            ))
        };
        let e = jwt("").unwrap_err();
        assert!(e.to_string().contains("authorization_servers"), "{e}");
        jwt("authorization_servers = ['https://as']").unwrap();
        let e = parse(
            "sources_dir = 's'\nstate_dir = 't'\n[auth]\nmode = 'jwt'\nauthorization_servers = ['https://as']\n[auth.jwt]\nissuer = 'i'\njwks_file = 'k.json'\njwks_refresh_interval_s = 0\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("jwks_refresh_interval_s"), "{e}");
        let c = parse(
            "sources_dir = 's'\nstate_dir = 't'\n[auth]\nmode = 'jwt'\nauthorization_servers = ['https://as']\n[auth.jwt]\nissuer = 'i'\njwks_file = 'k.json'\njwks_refresh_interval_s = 1\n",
        )
        .unwrap();
        let AuthMethod::Jwt(jwt) = c.auth.method else {
            panic!("mode jwt reads [auth.jwt]")
        };
        assert_eq!(jwt.jwks_refresh_interval_s, 1);
        let e = parse(
            "sources_dir = 's'\nstate_dir = 't'\ncache_dir = 'c'\ncache_key_file = 'c/key'\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("cache_key_file"), "{e}");
        let c = parse("sources_dir = 's'\nstate_dir = 't'\n").unwrap();
        assert!(c.cache_key_file().ends_with("t/precompile-key"));
        assert_eq!(c.auth.cache_max_age_s, DEFAULT_TOKEN_CACHE_MAX_AGE_S);
    }

    /// Issue 48: the config types derived `Debug` with the secrets in them.
    #[test]
    fn secrets_never_show_in_debug() {
        let c = parse(
            "sources_dir = 's'\nstate_dir = 't'\n[auth]\nmode = 'introspection'\n\
             authorization_servers = ['https://as']\n[auth.introspection]\nendpoint = 'https://as/i'\n\
             client_id = 'c'\nclient_secret = 'hunter2-client'\n[databases.pg]\nengine = 'postgres'\n\
             url = 'postgres://u:hunter2-url@h/d'\n[databases.pg2]\nengine = 'postgres'\nhost = 'h'\n\
             password = 'hunter2-password'\n",
        )
        .unwrap();
        let shown = format!("{c:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert_eq!(shown.matches("[redacted]").count(), 3, "{shown}");
        let AuthMethod::Introspection(i) = &c.auth.method else {
            panic!("mode introspection")
        };
        assert_eq!(i.client_secret.as_ref().unwrap().expose(), "hunter2-client");
    }

    #[test]
    fn manifest_overrides_budget() {
        let m: SourceManifest =
            toml::from_str("[budget]\nfuel = 7\n[config]\nitems = '3'\n").unwrap();
        let b = m.budget.apply(BudgetConfig::default());
        assert_eq!(b.fuel, 7);
        assert_eq!(b.memory_bytes, DEFAULT_MEMORY_BYTES);
        assert!(toml::from_str::<SourceManifest>("[budgett]\n").is_err());
    }
}
