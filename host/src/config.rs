//! The server's TOML configuration and the per-source manifests, validated at
//! startup. Every limit and default lives here as a named constant, with the
//! seed's numbers. Unknown keys are an error everywhere: a typo must not
//! silently fall back to a default.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// "The inventory default is 50."
pub const DEFAULT_PAGE_SIZE: u32 = 50;
/// "listPagination.pageSize bounds the combined static and dynamic page count (maximum 100)."
pub const MAX_PAGE_SIZE: u32 = 100;
/// "The tighter byte limit applies; the default is 1 MiB."
pub const DEFAULT_MAX_PAGE_BYTES: usize = 1024 * 1024;
/// Default of `max_application_result_bytes` (the seed's `maxApplicationResultBytes`).
pub const DEFAULT_MAX_APPLICATION_RESULT_BYTES: usize = 1024 * 1024;
/// "A traversal expires 15 minutes after its first page."
pub const TRAVERSAL_LIFETIME: Duration = Duration::from_secs(15 * 60);

/// Entry limits from the seed ("Keys contain 1–256 printable ASCII characters",
/// "uri (at most 2,048 characters), name (at most 512), and mimeType (at most 128)").
pub const MAX_KEY_LEN: usize = 256;
/// `MAX_URI_LEN` also bounds the `uri` of a `resources/read` request: a longer
/// one is refused (invalid params) before any lookup or template matching.
pub const MAX_URI_LEN: usize = 2048;
pub const MAX_NAME_LEN: usize = 512;
pub const MAX_MIME_TYPE_LEN: usize = 128;
/// "The subject must be a nonempty string of at most 256 characters without control characters."
pub const MAX_SUBJECT_LEN: usize = 256;

/// A template's definition (`describe()`), bounded at startup. Name: 1..=64
/// of `[a-z0-9_-]`; title, description: characters (UTF-16 units).
pub const MAX_TEMPLATE_NAME_LEN: usize = 64;
pub const MAX_TITLE_LEN: usize = 512;
pub const MAX_DESCRIPTION_LEN: usize = 4096;
/// Required scopes of one template: at most 16, each 1..=128 printable ASCII
/// characters. A 401/403 challenge names them all.
pub const MAX_REQUIRED_SCOPES: usize = 16;
pub const MAX_SCOPE_LEN: usize = 128;
/// The joined, space-separated union of the scopes every inventory source
/// requires (the `scope` of an anonymous listing's 401) is at most this many
/// bytes, checked at startup. With the metadata URL at its longest
/// (`MAX_URI_LEN`, quoted), every `WWW-Authenticate` header then stays under
/// `MAX_CHALLENGE_BYTES` (a test computes the worst case).
pub const MAX_CHALLENGE_SCOPES_BYTES: usize = 3072;
/// Every `WWW-Authenticate` header is shorter than this: half of Node's
/// default 16 KiB header limit.
pub const MAX_CHALLENGE_BYTES: usize = 8192;

/// `max_read_bytes` counts, per content item, its uri, mimeType and body
/// (a blob as its base64 length) plus this much for the item itself, so a
/// result of many empty items is bounded too.
pub const READ_CONTENT_ITEM_BYTES: usize = 64;

/// The OTLP exporter's HTTP request (connect, send, response) gives up
/// after this long: a dead collector costs the batch thread this much per
/// batch, never a request.
pub const TRACE_EXPORT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// A collector's answer to an export is read up to this many bytes (it is
/// a small status message; more is refused).
pub const TRACE_EXPORT_MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// A `tracestate` longer than this (from `_meta` or a header) is dropped,
/// not passed on: it is client-chosen text that would reach the sources'
/// backends. W3C trace context asks that at least 512 characters be kept.
pub const MAX_TRACESTATE_BYTES: usize = 512;
/// `service.name` of the spans when neither `[traces] service_name` nor
/// `OTEL_SERVICE_NAME` names one.
pub const DEFAULT_TRACE_SERVICE_NAME: &str = "emseepea";

/// A guest-supplied string in a log line (source-error messages, output
/// lines, template names, trap messages) is escaped and cut to at most this
/// many bytes; a cut string ends in `…[N bytes]` with its original length.
pub const MAX_LOGGED_GUEST_TEXT_BYTES: usize = 512;
/// Lines of guest stdout (and, separately, stderr) logged per call; the rest
/// are counted in one "guest output suppressed" line.
pub const MAX_GUEST_OUTPUT_LINES_PER_CALL: usize = 20;
/// Lines of guest output logged per source per second, over all its calls
/// (both streams); the rest are suppressed and counted the same way.
pub const MAX_GUEST_OUTPUT_LINES_PER_SECOND: usize = 100;
/// "authentication failed" lines logged per second, from all clients
/// together; the rest are counted in the next such line (`suppressed`).
/// Anyone can send bad tokens: this bounds what they make the log hold.
pub const MAX_AUTH_FAILURE_LOG_LINES_PER_SECOND: u32 = 10;
/// The longest `uri-template` a source may register, in bytes. Matching a
/// URI costs, per URI byte, one pass over a bitset of the template's states
/// (at most this many + 1 bits, so 9 machine words) plus one step per
/// expression: 512 bytes keep that to tens of operations a byte, whatever
/// the template looks like, and leave room for any real template.
pub const MAX_TEMPLATE_LEN: usize = 512;
/// The most expressions (`{...}`, each with any number of variables) one
/// `uri-template` may have. Each costs two steps per matched URI byte.
pub const MAX_TEMPLATE_EXPRESSIONS: usize = 16;

/// Default guest budget per call.
pub const DEFAULT_FUEL: u64 = 500_000_000;
pub const DEFAULT_MAX_CALL_DURATION_MS: u64 = 5_000;
pub const DEFAULT_MEMORY_BYTES: u64 = 64 << 20;
/// `describe()` at startup gets this budget's deadline.
pub const STARTUP_CALL_DURATION_MS: u64 = 10_000;

/// Default MCP request deadline.
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 30_000;
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
/// Body bytes accepted before a token is verified (no token, or auth on and
/// none presented): enough for any discovery request, far below a listing's.
pub const DEFAULT_MAX_UNAUTHENTICATED_BODY_BYTES: usize = 64 * 1024;
/// A request body must arrive whole within this, however it trickles in.
pub const DEFAULT_BODY_TIMEOUT_MS: u64 = 10_000;
/// Items in one 2025-03-26 JSON-RPC batch; a longer batch is refused whole.
pub const DEFAULT_MAX_BATCH_ITEMS: usize = 100;
pub const DEFAULT_SHUTDOWN_GRACE_MS: u64 = 10_000;
pub const DEFAULT_MAX_SESSIONS: usize = 10_000;
pub const DEFAULT_SESSION_IDLE_TIMEOUT_S: u64 = 3_600;
/// Cap on the bytes of one `resources/read` result from a guest.
pub const DEFAULT_MAX_READ_BYTES: usize = 4 << 20;

/// Connections open at once, from everyone. Below the usual 1,024
/// descriptors a process gets, leaving room for sources, databases, the
/// precompile cache and outbound HTTP: stalled clients run out of this
/// budget, not of descriptors. Over it a new connection is closed at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// Connections open at once from one peer IP address (over it: closed at
/// once). Half the global cap, so one address cannot take every connection.
pub const DEFAULT_MAX_CONNECTIONS_PER_PEER: usize = 256;
/// What one peer is, for the per-peer caps: an IPv6 client is usually
/// given a /64, so each of its addresses is not a peer of its own.
pub const DEFAULT_PEER_IPV6_PREFIX: u8 = 64;
/// IPv4: each address is a peer (a whole /24 is often many customers).
pub const DEFAULT_PEER_IPV4_PREFIX: u8 = 32;
/// When `accept` fails for lack of descriptors (EMFILE/ENFILE), the loop
/// pauses this long at first, doubling up to the maximum while it keeps failing.
pub const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
pub const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);
/// "accept failed" is logged at most once per interval, with a count.
pub const ACCEPT_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// PostgreSQL databases (`[databases.LABEL] engine = "postgres"`): pooled
/// connections per source and database unless `pool_size` says otherwise.
pub const DEFAULT_PG_POOL_SIZE: usize = 4;
/// Longest a new PostgreSQL connection may take (TCP, TLS, authentication);
/// a call's remaining deadline shortens it. A database that is down answers
/// within this, so it holds a guest slot no longer.
pub const PG_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest a call waits for a free pooled connection of its source (also
/// capped by the call's remaining deadline).
pub const PG_POOL_WAIT_MAX: Duration = Duration::from_secs(2);
/// A connection given back is reset (`DISCARD ALL`) within this, else closed.
pub const PG_RESET_TIMEOUT: Duration = Duration::from_secs(2);
/// A server-side cancel request (of a statement whose call was dropped,
/// cancelled or out of time) is given up after this.
pub const PG_CANCEL_TIMEOUT: Duration = Duration::from_secs(2);

/// Legacy sessions one principal (client id, subject, audience) may hold;
/// a new one beyond it replaces the principal's own longest-idle session.
pub const DEFAULT_MAX_SESSIONS_PER_PRINCIPAL: usize = 32;
/// Sessions opened without a token, together; a new one beyond it replaces
/// the longest-idle anonymous session. Anonymous sessions never replace
/// authenticated ones.
pub const DEFAULT_MAX_ANONYMOUS_SESSIONS: usize = 1_000;

/// Unless configured, the guest calls one caller (a principal; all
/// anonymous callers together) may run at once are this fraction of
/// `max_concurrent_calls` (32 of 64); as many more may wait for a slot.
pub const DEFAULT_CALLER_SHARE: (u32, u32) = (1, 2);
/// Unless configured, the guest calls one source may run at once are this
/// fraction of the pool (48 of 64): one slow source cannot hold every slot,
/// and one caller alone cannot take every slot of a source.
pub const DEFAULT_SOURCE_SHARE: (u32, u32) = (3, 4);
/// Default `[runtime] slot_wait_ms`: no cap of its own. A call waits for a
/// slot as long as its request's remaining time lets it still finish
/// (`runtime/slots.rs`, the admission rule); the wait does not count
/// against the guest's `max_duration_ms`.
pub const DEFAULT_SLOT_WAIT_MS: u64 = 0;
/// Default `[runtime] warm_instances`: instances kept for their caller's
/// next call (`runtime/warm.rs`), in all: the few callers a server serves
/// at a time, a few instances each.
pub const DEFAULT_WARM_INSTANCES: u32 = 16;
/// Most `[runtime] warm_instances` (each holds a pool instance and its memory).
pub const MAX_WARM_INSTANCES: u32 = 1024;
/// Default `[runtime] warm_max_calls`: calls one kept instance serves
/// before it is dropped (so what a guest's heap accumulates is bounded in
/// time too; at 2,000 pages/s, two instantiations a second).
pub const DEFAULT_WARM_MAX_CALLS: u32 = 1_000;
/// Default `[runtime] warm_idle_ms`: how long a kept instance waits for its
/// caller's next call (a client's next page comes within milliseconds).
pub const DEFAULT_WARM_IDLE_MS: u64 = 10_000;
/// Most `[runtime] guest_threads` (each is an OS thread with its runtime).
pub const MAX_GUEST_THREADS: u32 = 64;
/// Default `[runtime] guest_threads`: none, calls run on the request's
/// worker. Measured side by side in time (`benchmarks/alternate.sh`, 11
/// cells at C = 16 and 64 on 2 shared cores), the workers served 0.96-1.18x
/// the pages of one guest thread (median 1.05): the hand-over's wake-ups
/// cost more than the guest thread's warm caches saved.
pub const DEFAULT_GUEST_THREADS: u32 = 0;
/// Client connections open from which the server is busy: calls go to the
/// guest threads (if any; below it the hand-over's two wake-ups cost a lone
/// client more than it saves), and a call's teardown and the next standby
/// are no longer deferred past its response.
pub const DEFAULT_GUEST_THREADS_FROM_CONNECTIONS: u32 = 8;
/// Default `[runtime] standby_instances`: enough for the few sources a lone
/// client or a quiet server calls in turn.
pub const DEFAULT_STANDBY_INSTANCES: u32 = 4;
/// Most `[runtime] standby_instances` (each holds a pool instance).
pub const MAX_STANDBY_INSTANCES: u32 = 256;
/// `Retry-After` (seconds) of those 429/503 answers.
pub const RETRY_AFTER_S: u64 = 1;

/// Outbound introspection requests in flight at once; more callers wait.
pub const DEFAULT_MAX_CONCURRENT_INTROSPECTION: usize = 8;
/// How long an inactive (invalid) token's introspection answer is
/// remembered, so a flood of one bad token costs one outbound call.
pub const DEFAULT_INTROSPECTION_NEGATIVE_CACHE_S: u64 = 10;
/// Inactive tokens remembered at most (by hash; oldest forgotten first).
pub const DEFAULT_INTROSPECTION_NEGATIVE_CACHE_ENTRIES: usize = 10_000;

/// Least `[auth.jwt] jwks_refresh_interval_s`: the JWKS is fetched at most
/// once per interval (scheduled, or on an unknown `kid`), so this also bounds
/// how often a stream of made-up `kid`s can make the host call the
/// authorization server.
pub const MIN_JWKS_REFRESH_INTERVAL_S: u64 = 1;
/// Default JWKS refresh interval: a key removed at the authorization server
/// stops verifying here within this long.
pub const DEFAULT_JWKS_REFRESH_INTERVAL_S: u64 = 60;
/// Default `[auth] cache_max_age_s`: a verified token's principal is reused
/// for at most min(`exp`, this long) (introspected revocations show within it).
pub const DEFAULT_TOKEN_CACHE_MAX_AGE_S: u64 = 300;
/// Most `[auth] leeway_s`: five minutes covers any real clock skew; more
/// would accept a token that long after its `exp` (`leeway_s = 1e9` did:
/// expired tokens forever).
pub const MAX_LEEWAY_S: u64 = 300;
/// Most `[auth] cache_max_age_s`: an hour, the same cap an introspected
/// token gets (`introspection.rs`), so a revocation shows within it.
pub const MAX_TOKEN_CACHE_MAX_AGE_S: u64 = 3600;
/// A JWKS larger than this is a fetch error (read in chunks and given up
/// past it, never held whole): real key sets are a few KiB.
pub const MAX_JWKS_BYTES: usize = 1 << 20;
/// An introspection answer larger than this is "unavailable", read the
/// same way: a real one is a few hundred bytes.
pub const MAX_INTROSPECTION_RESPONSE_BYTES: usize = 64 << 10;
/// The precompile cache's key, by default in the state directory.
pub const DEFAULT_CACHE_KEY_FILE: &str = "precompile-key";

/// Runtime defaults. The epoch tick bounds how late a looping guest is
/// stopped after its deadline or after its call is dropped.
pub const DEFAULT_EPOCH_TICK_US: u64 = 1_000;
pub const DEFAULT_MAX_CONCURRENT_CALLS: u32 = 64;
pub const DEFAULT_MAX_MEMORY_BYTES: u64 = 512 << 20;
/// Reset (not unmap) this much of each linear memory between calls: a
/// Python or JavaScript guest's whole heap (~10-13 MiB); only the part a
/// guest actually used is ever reset.
pub const DEFAULT_KEEP_RESIDENT_BYTES: u64 = 16 << 20;
/// A source idle this long gives its pool slots' memory back (`runtime::trim`).
pub const DEFAULT_IDLE_TRIM_S: u64 = 30;

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
/// `emseepea stdio`: requests of the one client running at once (and
/// answers waiting for stdout). Reading stdin pauses at this bound, so a
/// client that never reads its answers cannot grow the host's memory.
pub const STDIO_MAX_IN_FLIGHT: usize = 64;

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

/// How log lines are written (to stderr).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Deserialize,
    serde::Serialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One `key=value` line per event (the default).
    #[default]
    Human,
    /// One JSON object per line: timestamp, level, target, message and the
    /// event's fields (request_id, source, reason, ...) at the top level.
    Json,
}

#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// `human` or `json` (`--log-format` overrides; `EMSEEPEA_LOG` filters
    /// like `RUST_LOG`).
    pub format: LogFormat,
}

/// `[traces]`: where spans go. Every key falls back to the standard
/// OpenTelemetry variable named with it; this file wins over the variable.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TracesConfig {
    /// The collector's OTLP/HTTP base URL (`http://collector:4318`);
    /// spans go to `ENDPOINT/v1/traces` as protobuf. Falls back to
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`; neither set: no traces.
    pub endpoint: Option<String>,
    /// `service.name`; falls back to `OTEL_SERVICE_NAME`, then `emseepea`.
    pub service_name: Option<String>,
    /// The share of requests recorded, 0.0..=1.0 (default 1.0), whatever
    /// a client's `traceparent` says: the operator's sampling decides.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub sample_ratio: Option<f64>,
    /// Also record every request whose `traceparent` says sampled (default
    /// false): a client may then raise the share, never lower it.
    pub follow_client_sampled: bool,
}

/// `[admin]`: the operator's listener, separate from MCP.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    /// Where `/metrics`, `/healthz` and `/readyz` are served (never the MCP
    /// address). Unset: no admin listener.
    pub listen: Option<SocketAddr>,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// The MCP endpoint path.
    pub endpoint: String,
    /// Deadline of every MCP request; flows into the guest budget.
    #[schemars(range(min = 1))]
    pub request_timeout_ms: u64,
    /// Request bodies above this get 413 without being read to the end.
    pub max_body_bytes: usize,
    /// The body limit until a token is verified (the Authorization header is
    /// checked before the body is read); at most `max_body_bytes`. Without
    /// auth nobody can be verified and `max_body_bytes` applies.
    pub max_unauthenticated_body_bytes: usize,
    /// A body not received whole within this gets 408 and the connection closes.
    pub body_timeout_ms: u64,
    /// Items in one JSON-RPC batch (2025-03-26); more: -32600, nothing runs.
    pub max_batch_items: usize,
    /// Origins allowed besides the listener's own loopback origins.
    pub allowed_origins: Vec<String>,
    /// Host header values allowed besides loopback names (for a public listener:
    /// the public host name).
    pub allowed_hosts: Vec<String>,
    /// On SIGINT/SIGTERM, how long in-flight requests may finish.
    pub shutdown_grace_ms: u64,
    /// Connections open at once, from everyone (over it: closed at once).
    pub max_connections: usize,
    /// Connections open at once from one peer IP address.
    pub max_connections_per_peer: usize,
    /// Leading bits of an IPv6 address that name one peer (0..=128).
    pub peer_ipv6_prefix: u8,
    /// Leading bits of an IPv4 address that name one peer (0..=32).
    pub peer_ipv4_prefix: u8,
    /// Legacy-protocol sessions kept at most (oldest idle evicted first;
    /// never one with a request in flight, never an authenticated one for
    /// an anonymous newcomer).
    pub max_sessions: usize,
    /// Sessions one principal may hold (its own oldest idle one gives way).
    pub max_sessions_per_principal: usize,
    /// Sessions opened without a token, together.
    pub max_anonymous_sessions: usize,
    /// A legacy session unused this long is dropped.
    pub session_idle_timeout_s: u64,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            endpoint: "/mcp".into(),
            request_timeout_ms: DEFAULT_REQUEST_TIMEOUT_MS,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_unauthenticated_body_bytes: DEFAULT_MAX_UNAUTHENTICATED_BODY_BYTES,
            body_timeout_ms: DEFAULT_BODY_TIMEOUT_MS,
            max_batch_items: DEFAULT_MAX_BATCH_ITEMS,
            allowed_origins: vec![],
            allowed_hosts: vec![],
            shutdown_grace_ms: DEFAULT_SHUTDOWN_GRACE_MS,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_peer: DEFAULT_MAX_CONNECTIONS_PER_PEER,
            peer_ipv6_prefix: DEFAULT_PEER_IPV6_PREFIX,
            peer_ipv4_prefix: DEFAULT_PEER_IPV4_PREFIX,
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_sessions_per_principal: DEFAULT_MAX_SESSIONS_PER_PRINCIPAL,
            max_anonymous_sessions: DEFAULT_MAX_ANONYMOUS_SESSIONS,
            session_idle_timeout_s: DEFAULT_SESSION_IDLE_TIMEOUT_S,
        }
    }
}

/// A guest call's budget. The server's `[budget]` is the default; a source's
/// manifest may override each field.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct BudgetConfig {
    /// Fuel (roughly: wasm instructions) per call.
    pub fuel: u64,
    /// Cap on the wall-clock time of one call; the request's deadline may end it earlier.
    pub max_duration_ms: u64,
    /// Cap on the guest's linear memories plus host-side buffers it asked for.
    pub memory_bytes: u64,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        Self {
            fuel: DEFAULT_FUEL,
            max_duration_ms: DEFAULT_MAX_CALL_DURATION_MS,
            memory_bytes: DEFAULT_MEMORY_BYTES,
        }
    }
}

/// Manifest budget overrides: any field left out keeps the server default.
#[derive(Debug, Clone, Copy, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetOverrides {
    /// Fuel per call (default: the server's `[budget] fuel`).
    pub fuel: Option<u64>,
    /// Wall-clock cap of one call (default: the server's).
    pub max_duration_ms: Option<u64>,
    /// Memory cap of one call (default: the server's; at most
    /// `[runtime] max_memory_bytes`).
    pub memory_bytes: Option<u64>,
    /// This source's calls running at once (default and maximum: the
    /// runtime's `max_calls_per_source`). With `memory_bytes` it bounds the
    /// source's guest memory: at most `max_concurrent_calls × memory_bytes`.
    pub max_concurrent_calls: Option<u32>,
}

impl BudgetOverrides {
    pub fn apply(&self, base: BudgetConfig) -> BudgetConfig {
        BudgetConfig {
            fuel: self.fuel.unwrap_or(base.fuel),
            max_duration_ms: self.max_duration_ms.unwrap_or(base.max_duration_ms),
            memory_bytes: self.memory_bytes.unwrap_or(base.memory_bytes),
        }
    }
}

/// Engine and pooling-allocator settings (serialized for the compiler
/// process, which must build the very same engine).
#[derive(Debug, Clone, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeConfig {
    /// Epoch tick: a looping guest is stopped at most one tick after its
    /// deadline, a dropped call at its next tick.
    pub epoch_tick_us: u64,
    /// Guest calls running at once; further calls wait for a slot while
    /// their request's remaining time allows.
    #[schemars(range(min = 1))]
    pub max_concurrent_calls: u32,
    /// Guest calls one caller may run at once (and as many may wait);
    /// default: `DEFAULT_CALLER_SHARE` of the pool.
    pub max_calls_per_caller: Option<u32>,
    /// Guest calls one source may run at once; default: `DEFAULT_SOURCE_SHARE`.
    pub max_calls_per_source: Option<u32>,
    /// The longest a call waits for a slot before a retryable refusal; 0: no
    /// cap beyond the rule that a call waits only while its request's
    /// remaining time still lets it finish (estimated from the calls'
    /// observed service times; a queue longer than that is refused at once).
    pub slot_wait_ms: u64,
    /// Largest memory budget any source may have (sizes the pool's slots).
    pub max_memory_bytes: u64,
    /// Bytes of each linear memory kept resident (memset, not unmapped)
    /// between instances: faster reuse, more RSS.
    pub keep_resident_bytes: u64,
    /// Let wasmtime reset a slot through Linux's PAGEMAP_SCAN (kernel >=
    /// 6.7; older kernels reset without it). On: the scan finds the pages
    /// a slot's calls have touched (in memory or swapped out), and only
    /// those are rewritten; off, the first `keep_resident_bytes` of the
    /// memory are, touched or not. An interpreted guest's memory is mostly
    /// pages a call never touches (BENCHMARKS.md, twenty-second round).
    pub pagemap_scan: bool,
    /// Write `/tmp/perf-PID.map` (Linux) so that `perf` names the guests'
    /// compiled functions (`wasm[0]::function[7]::list`) instead of
    /// `[JIT]` addresses. Off: it is a diagnostic, written once per loaded
    /// component, and it holds guest-chosen names.
    pub perf_map: bool,
    /// A source without calls for this long is relinked, so that the pool
    /// memory its idle slots keep resident goes back to the OS (0: never).
    pub idle_trim_s: u64,
    /// Threads that run guest calls, handed over from the request's worker
    /// (`runtime/guest_threads.rs`); 0: calls always run on the worker.
    #[schemars(range(max = MAX_GUEST_THREADS))]
    pub guest_threads: u32,
    /// The server is busy while at least this many client connections are
    /// open (0: always): calls then go to the guest threads (if any), and a
    /// call's teardown is no longer deferred past its response, nor a
    /// standby made (`Runtime::busy`).
    pub guest_threads_from_connections: u32,
    /// Never-called instances kept ready, one per source at most, made after
    /// a call while the server is not busy (`runtime/standby.rs`); the pool
    /// holds this many instances beyond `max_concurrent_calls`. 0: none.
    #[schemars(range(max = MAX_STANDBY_INSTANCES))]
    pub standby_instances: u32,
    /// Instances kept after a verified caller's call for that caller's next
    /// call of the same source (`runtime/warm.rs`), in all; the pool holds
    /// this many instances beyond `max_concurrent_calls`. 0: every call
    /// gets a fresh instance.
    #[schemars(range(max = MAX_WARM_INSTANCES))]
    pub warm_instances: u32,
    /// Calls one kept instance serves before it is dropped.
    #[schemars(range(min = 1))]
    pub warm_max_calls: u32,
    /// How long a kept instance waits for its caller's next call before it
    /// is dropped.
    pub warm_idle_ms: u64,
    /// Core instances, memories and tables one component may have
    /// (interpreted languages need more than Rust guests).
    pub max_core_instances_per_component: u32,
    /// Linear memories one component may have.
    pub max_memories_per_component: u32,
    /// Tables one component may have.
    pub max_tables_per_component: u32,
    /// Elements of one table.
    pub max_table_elements: usize,
    /// Bytes of VM metadata per core instance.
    pub max_core_instance_size: usize,
    /// Bytes of VM metadata per component instance.
    pub max_component_instance_size: usize,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            epoch_tick_us: DEFAULT_EPOCH_TICK_US,
            max_concurrent_calls: DEFAULT_MAX_CONCURRENT_CALLS,
            max_calls_per_caller: None,
            max_calls_per_source: None,
            slot_wait_ms: DEFAULT_SLOT_WAIT_MS,
            max_memory_bytes: DEFAULT_MAX_MEMORY_BYTES,
            keep_resident_bytes: DEFAULT_KEEP_RESIDENT_BYTES,
            pagemap_scan: true,
            perf_map: false,
            idle_trim_s: DEFAULT_IDLE_TRIM_S,
            guest_threads: DEFAULT_GUEST_THREADS,
            guest_threads_from_connections: DEFAULT_GUEST_THREADS_FROM_CONNECTIONS,
            standby_instances: DEFAULT_STANDBY_INSTANCES,
            warm_instances: DEFAULT_WARM_INSTANCES,
            warm_max_calls: DEFAULT_WARM_MAX_CALLS,
            warm_idle_ms: DEFAULT_WARM_IDLE_MS,
            max_core_instances_per_component: 64,
            max_memories_per_component: 16,
            max_tables_per_component: 16,
            max_table_elements: 100_000,
            max_core_instance_size: 4 << 20,
            max_component_instance_size: 4 << 20,
        }
    }
}

impl RuntimeConfig {
    fn share(&self, (num, den): (u32, u32)) -> u32 {
        (self.max_concurrent_calls * num / den).max(1)
    }

    /// Guest calls one caller may run at once.
    pub fn calls_per_caller(&self) -> u32 {
        self.max_calls_per_caller
            .unwrap_or_else(|| self.share(DEFAULT_CALLER_SHARE))
    }

    /// Guest calls one source may run at once.
    pub fn calls_per_source(&self) -> u32 {
        self.max_calls_per_source
            .unwrap_or_else(|| self.share(DEFAULT_SOURCE_SHARE))
    }
}

/// The seed's `listPagination`.
#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ListPagination {
    /// The seed's `listPagination.pageSize`: entries per page, static and dynamic combined.
    #[schemars(range(min = 1, max = MAX_PAGE_SIZE))]
    pub page_size: u32,
    /// The seed's `listPagination.maxPageBytes`: bytes of the serialized JSON-RPC result.
    #[schemars(range(min = 1024))]
    pub max_page_bytes: usize,
}

impl Default for ListPagination {
    fn default() -> Self {
        Self {
            page_size: DEFAULT_PAGE_SIZE,
            max_page_bytes: DEFAULT_MAX_PAGE_BYTES,
        }
    }
}

/// `auth.mode` as written: which verifier. [`AuthMethod`] is the same choice
/// with that verifier's settings.
#[derive(
    Debug, Clone, Copy, Default, Deserialize, serde::Serialize, PartialEq, Eq, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    #[default]
    None,
    Dev,
    Jwt,
    Introspection,
}

impl std::fmt::Display for AuthMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AuthMode::None => "none",
            AuthMode::Dev => "dev",
            AuthMode::Jwt => "jwt",
            AuthMode::Introspection => "introspection",
        })
    }
}

/// `[auth]` as written: `mode` names the verifier, and `[auth.jwt]` or
/// `[auth.introspection]` holds its settings. Checked into [`AuthConfig`]
/// while parsing, so a mode without its table (or a table its mode does not
/// read) never reaches the server.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
struct AuthFile {
    /// How bearer tokens are verified: `none` (refused once a source exports
    /// `inventory` or a resource is protected), `dev` (tokens minted by
    /// `emseepea token`), `jwt` (needs `[auth.jwt]`) or `introspection`
    /// (needs `[auth.introspection]`).
    mode: AuthMode,
    /// `initialize`, `server/discover`, `ping`, `resources/templates/list`
    /// and public reads need no token; `false`: every request does.
    /// `resources/list` always needs one once an inventory source exists.
    public_discovery: bool,
    /// This server's canonical URL, the audience tokens must carry (RFC 8707).
    /// Default: `http://LISTEN/ENDPOINT`.
    resource: Option<String>,
    /// Authorization servers advertised in the protected-resource metadata.
    /// `dev` may leave it empty (the server's own origin); `jwt` and
    /// `introspection` must list one.
    authorization_servers: Vec<String>,
    /// The claim that holds the user id.
    subject_claim: String,
    /// The claims scopes arrive in, each a space-separated string (`scope`)
    /// or an array of strings (`scp`, `roles`); the scopes are their union.
    scope_claims: Vec<String>,
    /// More audiences accepted besides `resource` (an identity provider's
    /// `api://` application URI, say); tokens for any other audience get 401.
    accepted_audiences: Vec<String>,
    /// Clock skew tolerated on `exp` and `nbf`, in seconds.
    leeway_s: u64,
    /// Tokens longer than this are refused without parsing.
    max_token_bytes: usize,
    /// Verified tokens remembered (by hash) until they expire.
    cache_entries: usize,
    /// A remembered token is verified again after at most this long, even
    /// if its `exp` is later (0: never remembered). A changed JWKS flushes them.
    cache_max_age_s: u64,
    /// Allow `http://` (not only `https://`) to a non-loopback JWKS or
    /// introspection endpoint; the startup log names it. Default false.
    allow_plain_http: bool,
    /// JWS access tokens verified with a JWKS (`mode = "jwt"`).
    jwt: Option<JwtFile>,
    /// RFC 7662 token introspection (`mode = "introspection"`).
    introspection: Option<IntrospectionConfig>,
}

impl Default for AuthFile {
    fn default() -> Self {
        Self {
            mode: AuthMode::None,
            public_discovery: true,
            resource: None,
            authorization_servers: vec![],
            subject_claim: "sub".into(),
            scope_claims: vec!["scope".into(), "scp".into()],
            accepted_audiences: vec![],
            leeway_s: 30,
            max_token_bytes: 8192,
            cache_entries: 10_000,
            cache_max_age_s: DEFAULT_TOKEN_CACHE_MAX_AGE_S,
            allow_plain_http: false,
            jwt: None,
            introspection: None,
        }
    }
}

/// Why an `[auth]` section cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AuthConfigError {
    #[error("auth.mode = \"{mode}\" needs [{table}]")]
    TableMissing { mode: AuthMode, table: &'static str },
    #[error("[{table}] is set but auth.mode = \"{mode}\" does not read it")]
    TableUnused { mode: AuthMode, table: &'static str },
    #[error("[auth.jwt] needs exactly one of jwks_file or jwks_url")]
    JwksSource,
    #[error(
        "[auth.jwt] jwks_refresh_interval_s must be at least {MIN_JWKS_REFRESH_INTERVAL_S}, got {0}"
    )]
    JwksRefreshInterval(u64),
    #[error("auth.introspection.max_concurrent must be positive")]
    IntrospectionConcurrency,
    #[error("[auth] authorization_servers must list at least one server")]
    NoAuthorizationServer,
    #[error("[auth] scope_claims must name at least one claim, and no empty one")]
    ScopeClaims,
    #[error("[auth] accepted_audiences must not hold an empty string")]
    EmptyAudience,
    #[error(
        "{key}: plain http is allowed only to a loopback host (127.0.0.0/8, ::1, localhost): \
         anyone on the path could read the tokens and secrets it carries or swap the keys; \
         use https, or set auth.allow_plain_http = true to accept that"
    )]
    PlainHttp { key: &'static str },
    #[error("{key}: not an https (or loopback http) URL")]
    NotHttpUrl { key: &'static str },
    #[error("auth.leeway_s must be at most {MAX_LEEWAY_S}, got {0}")]
    Leeway(u64),
    #[error("auth.cache_max_age_s must be at most {MAX_TOKEN_CACHE_MAX_AGE_S}, got {0}")]
    CacheMaxAge(u64),
}

/// `url` (the value of `key`) is https, or http to a loopback host, or
/// `allow_plain_http` says plain http anywhere is accepted.
fn check_fetch_url(
    key: &'static str,
    url: &str,
    allow_plain_http: bool,
) -> Result<(), AuthConfigError> {
    let parsed = reqwest::Url::parse(url).map_err(|_| AuthConfigError::NotHttpUrl { key })?;
    let loopback = || {
        let host = parsed.host_str().unwrap_or("");
        let ip = host.trim_start_matches('[').trim_end_matches(']');
        match ip.parse::<std::net::IpAddr>() {
            Ok(ip) => ip.to_canonical().is_loopback(),
            Err(_) => host.eq_ignore_ascii_case("localhost"),
        }
    };
    match parsed.scheme() {
        "https" if parsed.has_host() => Ok(()),
        "http" if parsed.has_host() && (allow_plain_http || loopback()) => Ok(()),
        "http" if parsed.has_host() => Err(AuthConfigError::PlainHttp { key }),
        _ => Err(AuthConfigError::NotHttpUrl { key }),
    }
}

/// `[auth]`, checked: the verifier with the settings only it has, and what
/// every verifier shares.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(try_from = "AuthFile")]
#[schemars(with = "AuthFile")]
pub struct AuthConfig {
    pub method: AuthMethod,
    /// When true, initialize/discover/ping/templates/list and public reads
    /// need no token. `resources/list` always needs one once an inventory
    /// source exists.
    pub public_discovery: bool,
    /// This server's canonical resource URL (RFC 8707 audience). Default:
    /// `http://LISTEN/ENDPOINT`.
    pub resource: Option<String>,
    /// Authorization servers advertised in the protected-resource metadata.
    /// Dev mode may leave it empty (it advertises the server's own origin);
    /// `jwt` and `introspection` must list one.
    pub authorization_servers: Vec<String>,
    /// Claim that holds the user id.
    pub subject_claim: String,
    /// Claims whose values are the caller's scopes (a space-separated
    /// string or an array of strings each), united: `scope` and `scp` by
    /// default; e.g. `roles` for Entra ID app roles, `permissions` for Auth0 RBAC.
    pub scope_claims: Vec<String>,
    /// Audiences accepted besides the resource URL, for providers that
    /// cannot put the URL in `aud` (an Entra ID `api://` App ID URI or
    /// client id, an Okta authorization server's audience). The guest
    /// still sees the resource URL as the audience.
    pub accepted_audiences: Vec<String>,
    /// Clock skew tolerated on `exp`/`nbf`; at most [`MAX_LEEWAY_S`].
    pub leeway_s: u64,
    /// Tokens longer than this are rejected without parsing.
    pub max_token_bytes: usize,
    /// Verified tokens remembered (by hash) until they expire.
    pub cache_entries: usize,
    /// A remembered token is re-verified after at most this long, even if
    /// its `exp` is later (0: never remembered). At most
    /// [`MAX_TOKEN_CACHE_MAX_AGE_S`].
    pub cache_max_age_s: u64,
    /// Accept `http://` for the JWKS URL and the introspection endpoint to
    /// any host (default: only to a loopback host). Named in the startup log.
    pub allow_plain_http: bool,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self::with_method(AuthMethod::None, AuthFile::default())
    }
}

/// How tokens are verified, with the settings of that way only.
#[derive(Debug, Clone)]
pub enum AuthMethod {
    /// No tokens at all: only valid when no source exports `inventory` and
    /// no resource is protected.
    None,
    /// HS256 tokens minted by `emseepea token` with a secret kept in the state dir.
    Dev,
    /// JWS access tokens verified with a JWKS.
    Jwt(JwtConfig),
    /// RFC 7662 token introspection.
    Introspection(IntrospectionConfig),
}

impl TryFrom<AuthFile> for AuthConfig {
    type Error = AuthConfigError;

    fn try_from(mut f: AuthFile) -> Result<Self, AuthConfigError> {
        let unused = |table: &'static str| AuthConfigError::TableUnused {
            mode: f.mode,
            table,
        };
        let missing = |table: &'static str| AuthConfigError::TableMissing {
            mode: f.mode,
            table,
        };
        let method = match (f.mode, f.jwt.take(), f.introspection.take()) {
            (AuthMode::None, None, None) => AuthMethod::None,
            (AuthMode::Dev, None, None) => AuthMethod::Dev,
            (AuthMode::Jwt, Some(jwt), None) => AuthMethod::Jwt(jwt.try_into()?),
            (AuthMode::Introspection, None, Some(i)) if i.max_concurrent == 0 => {
                return Err(AuthConfigError::IntrospectionConcurrency);
            }
            (AuthMode::Introspection, None, Some(i)) => AuthMethod::Introspection(i),
            (AuthMode::Jwt, None, _) => return Err(missing("auth.jwt")),
            (AuthMode::Introspection, _, None) => return Err(missing("auth.introspection")),
            (AuthMode::Jwt, Some(_), Some(_)) => return Err(unused("auth.introspection")),
            (_, Some(_), _) => return Err(unused("auth.jwt")),
            (_, None, Some(_)) => return Err(unused("auth.introspection")),
        };
        match &method {
            AuthMethod::Jwt(JwtConfig {
                jwks: JwksSource::Url(url),
                ..
            }) => check_fetch_url("auth.jwt.jwks_url", url, f.allow_plain_http)?,
            AuthMethod::Introspection(i) => check_fetch_url(
                "auth.introspection.endpoint",
                &i.endpoint,
                f.allow_plain_http,
            )?,
            _ => {}
        }
        if f.leeway_s > MAX_LEEWAY_S {
            return Err(AuthConfigError::Leeway(f.leeway_s));
        }
        if f.cache_max_age_s > MAX_TOKEN_CACHE_MAX_AGE_S {
            return Err(AuthConfigError::CacheMaxAge(f.cache_max_age_s));
        }
        // Dev mode advertises the server's own origin when none is listed.
        if matches!(method, AuthMethod::Jwt(_) | AuthMethod::Introspection(_))
            && f.authorization_servers.is_empty()
        {
            return Err(AuthConfigError::NoAuthorizationServer);
        }
        if f.scope_claims.is_empty() || f.scope_claims.iter().any(String::is_empty) {
            return Err(AuthConfigError::ScopeClaims);
        }
        if f.accepted_audiences.iter().any(String::is_empty) {
            return Err(AuthConfigError::EmptyAudience);
        }
        Ok(Self::with_method(method, f))
    }
}

impl AuthConfig {
    /// `method` with the settings every mode shares, from `f`.
    fn with_method(method: AuthMethod, f: AuthFile) -> Self {
        Self {
            method,
            public_discovery: f.public_discovery,
            resource: f.resource,
            authorization_servers: f.authorization_servers,
            subject_claim: f.subject_claim,
            scope_claims: f.scope_claims,
            accepted_audiences: f.accepted_audiences,
            leeway_s: f.leeway_s,
            max_token_bytes: f.max_token_bytes,
            cache_entries: f.cache_entries,
            cache_max_age_s: f.cache_max_age_s,
            allow_plain_http: f.allow_plain_http,
        }
    }
}

/// Where `[auth.jwt]` reads its keys.
#[derive(Debug, Clone)]
pub enum JwksSource {
    /// A JWKS file, read once at startup (relative to the config file).
    File(PathBuf),
    /// A JWKS URL, fetched at startup and refreshed.
    Url(String),
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct JwtFile {
    /// The `iss` every token must carry.
    issuer: String,
    /// A JWKS file, read at startup (relative to the config file); exactly
    /// one of `jwks_file` and `jwks_url`.
    jwks_file: Option<PathBuf>,
    /// A JWKS URL, fetched at startup and refreshed.
    jwks_url: Option<String>,
    /// A `jwks_url` is refetched this often, and on an unknown `kid` at most
    /// once per interval: a key removed at the issuer stops verifying within
    /// one interval.
    #[serde(default = "default_jwks_refresh_s")]
    #[schemars(range(min = 1))]
    jwks_refresh_interval_s: u64,
    /// Timeout of one JWKS fetch.
    #[serde(default = "default_fetch_timeout_ms")]
    jwks_timeout_ms: u64,
    /// If set, the JOSE `typ` header must equal it (e.g. `at+jwt`, RFC 9068).
    required_typ: Option<String>,
}

/// `[auth.jwt]`, checked.
#[derive(Debug, Clone)]
pub struct JwtConfig {
    pub issuer: String,
    pub jwks: JwksSource,
    /// The JWKS is refetched every this many seconds, and on an unknown
    /// `kid` (at most once per interval). At least [`MIN_JWKS_REFRESH_INTERVAL_S`].
    pub jwks_refresh_interval_s: u64,
    pub jwks_timeout_ms: u64,
    /// If set, the JOSE `typ` header must equal it (e.g. `at+jwt`, RFC 9068).
    pub required_typ: Option<String>,
}

impl TryFrom<JwtFile> for JwtConfig {
    type Error = AuthConfigError;

    fn try_from(f: JwtFile) -> Result<Self, AuthConfigError> {
        let jwks = match (f.jwks_file, f.jwks_url) {
            (Some(file), None) => JwksSource::File(file),
            (None, Some(url)) => JwksSource::Url(url),
            _ => return Err(AuthConfigError::JwksSource),
        };
        if f.jwks_refresh_interval_s < MIN_JWKS_REFRESH_INTERVAL_S {
            return Err(AuthConfigError::JwksRefreshInterval(
                f.jwks_refresh_interval_s,
            ));
        }
        Ok(Self {
            issuer: f.issuer,
            jwks,
            jwks_refresh_interval_s: f.jwks_refresh_interval_s,
            jwks_timeout_ms: f.jwks_timeout_ms,
            required_typ: f.required_typ,
        })
    }
}

fn default_jwks_refresh_s() -> u64 {
    DEFAULT_JWKS_REFRESH_INTERVAL_S
}
fn default_fetch_timeout_ms() -> u64 {
    5_000
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IntrospectionConfig {
    /// The RFC 7662 introspection endpoint.
    pub endpoint: String,
    /// This server's client id at the authorization server.
    pub client_id: String,
    /// Its client secret (HTTP Basic authentication). Exactly one of
    /// `client_secret`, `client_secret_file` and `client_secret_env`
    /// (`config/secret.rs`); after `Config::load`, the value is here and the
    /// other two are `None`.
    pub client_secret: Option<Secret>,
    /// A file holding the client secret (one trailing newline is dropped).
    pub client_secret_file: Option<PathBuf>,
    /// An environment variable holding the client secret.
    pub client_secret_env: Option<String>,
    /// Timeout of one introspection call (and of waiting for a free one).
    #[serde(default = "default_fetch_timeout_ms")]
    pub timeout_ms: u64,
    /// Expected issuer (`iss` of the introspection response), if the server sends one.
    pub issuer: Option<String>,
    /// Introspection requests in flight at once (one per distinct token).
    #[serde(default = "default_max_concurrent_introspection")]
    pub max_concurrent: usize,
    /// Of those, how many one peer (an IPv4 address, an IPv6 /64) may hold;
    /// default a quarter (at least 1). Behind a proxy every client is the
    /// proxy's address: raise it there, up to `max_concurrent`.
    pub max_concurrent_per_peer: Option<usize>,
    /// Seconds an inactive token's answer is remembered (0: not at all).
    #[serde(default = "default_introspection_negative_cache_s")]
    pub negative_cache_s: u64,
    /// Inactive tokens remembered at most.
    #[serde(default = "default_introspection_negative_cache_entries")]
    pub negative_cache_entries: usize,
}

fn default_max_concurrent_introspection() -> usize {
    DEFAULT_MAX_CONCURRENT_INTROSPECTION
}
fn default_introspection_negative_cache_s() -> u64 {
    DEFAULT_INTROSPECTION_NEGATIVE_CACHE_S
}
fn default_introspection_negative_cache_entries() -> usize {
    DEFAULT_INTROSPECTION_NEGATIVE_CACHE_ENTRIES
}

#[derive(
    Debug, Clone, Copy, Default, Deserialize, serde::Serialize, PartialEq, Eq, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum AccessConfig {
    #[default]
    Public,
    Protected,
}

/// A `[[resources]]` entry as written: its body is one of `text`, `blob`
/// or `file`, checked into [`StaticResourceConfig`] while parsing.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct StaticResourceFile {
    /// The resource's URI (no source's template may match it).
    uri: String,
    /// Its name in listings.
    name: String,
    title: Option<String>,
    description: Option<String>,
    mime_type: Option<String>,
    /// `public` (anyone) or `protected` (a token with `requiredScopes`).
    #[serde(default)]
    access: AccessConfig,
    /// Scopes a token needs to list or read it (protected resources).
    #[serde(default)]
    required_scopes: Vec<String>,
    /// Inline text content; exactly one of `text`, `blob` and `file`.
    text: Option<String>,
    /// Inline binary content, base64.
    blob: Option<String>,
    /// Content read from this file at startup (relative to the config
    /// file); a missing file stops startup.
    file: Option<PathBuf>,
}

/// A static resource from the config (`[[resources]]`).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(try_from = "StaticResourceFile")]
#[schemars(with = "StaticResourceFile")]
pub struct StaticResourceConfig {
    pub uri: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
    pub access: AccessConfig,
    pub required_scopes: Vec<String>,
    pub body: StaticBody,
}

/// Where a static resource's content comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StaticBody {
    /// Inline text content.
    Text(String),
    /// Inline binary content, base64.
    Blob(String),
    /// Content read from a file at startup (relative to the config file).
    File(PathBuf),
}

/// A `[[resources]]` entry without exactly one body.
#[derive(Debug, thiserror::Error)]
#[error("resource {uri}: exactly one of text, blob or file is required")]
pub struct StaticBodyError {
    uri: String,
}

impl TryFrom<StaticResourceFile> for StaticResourceConfig {
    type Error = StaticBodyError;

    fn try_from(f: StaticResourceFile) -> Result<Self, StaticBodyError> {
        let body = match (f.text, f.blob, f.file) {
            (Some(text), None, None) => StaticBody::Text(text),
            (None, Some(blob), None) => StaticBody::Blob(blob),
            (None, None, Some(file)) => StaticBody::File(file),
            _ => return Err(StaticBodyError { uri: f.uri }),
        };
        Ok(Self {
            uri: f.uri,
            name: f.name,
            title: f.title,
            description: f.description,
            mime_type: f.mime_type,
            access: f.access,
            required_scopes: f.required_scopes,
            body,
        })
    }
}

/// `[sources]`: defined by the signature check, which owns it.
pub use crate::distribution::signature::SourcesConfig;

/// `[databases.LABEL]`: defined by the SQL capability, which owns it.
pub use crate::runtime::capabilities::sql::config::{DatabaseConfig, Engine, EngineConfig};

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DirectoryConfig {
    /// The directory, preopened read-only at `/LABEL` for sources granted it.
    pub path: PathBuf,
}

/// A source's manifest, `NAME.toml` beside `NAME.wasm`.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceManifest {
    #[serde(default)]
    pub budget: BudgetOverrides,
    /// Static key/value configuration the guest reads through `config.get`.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    #[serde(default)]
    pub grants: Grants,
    /// Per-call handle bounds (SQL connections, outbound requests in
    /// flight, resource-table entries); defaults in `capabilities/handles.rs`.
    #[serde(default)]
    pub handles: crate::runtime::capabilities::HandleLimits,
}

/// Capabilities granted to one source. Nothing is reachable without a grant.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Grants {
    /// Database labels from the server's `[databases]`.
    #[serde(default)]
    pub databases: Vec<String>,
    /// Directory labels from the server's `[directories]`, preopened read-only.
    #[serde(default)]
    pub directories: Vec<String>,
    /// Outbound HTTP origins, `scheme://host[:port]`.
    #[serde(default)]
    pub http: Vec<String>,
    /// Outbound HTTP caps.
    #[serde(default)]
    pub http_limits: HttpGrantLimits,
}

#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct HttpGrantLimits {
    /// Largest request body a guest may send.
    pub max_request_bytes: usize,
    /// Largest response body a guest may receive.
    pub max_response_bytes: usize,
    /// Resolving, connecting and the whole exchange, within the call's deadline.
    pub timeout_ms: u64,
}

impl Default for HttpGrantLimits {
    fn default() -> Self {
        Self {
            max_request_bytes: 1 << 20,
            max_response_bytes: 4 << 20,
            timeout_ms: 5_000,
        }
    }
}

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
        if r.warm_instances > MAX_WARM_INSTANCES {
            return Err(ConfigProblem::WarmInstances);
        }
        if r.warm_max_calls == 0 {
            return Err(NotPositive("runtime.warm_max_calls"));
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

pub fn check_budget(budget: &BudgetConfig, max_memory: u64) -> Result<(), BudgetProblem> {
    if budget.fuel == 0 || budget.max_duration_ms == 0 || budget.memory_bytes == 0 {
        return Err(BudgetProblem::NotPositive);
    }
    if budget.memory_bytes > max_memory {
        return Err(BudgetProblem::OverMemory {
            memory_bytes: budget.memory_bytes,
            max_memory_bytes: max_memory,
        });
    }
    Ok(())
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
    #[error("runtime.warm_instances must be at most {MAX_WARM_INSTANCES}")]
    WarmInstances,
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

/// A `[budget]` (the server's, or a source manifest's after it applies).
#[derive(Debug, thiserror::Error)]
pub enum BudgetProblem {
    #[error("fuel, max_duration_ms and memory_bytes must be positive")]
    NotPositive,
    #[error("memory_bytes {memory_bytes} exceeds runtime.max_memory_bytes {max_memory_bytes}")]
    OverMemory {
        memory_bytes: u64,
        max_memory_bytes: u64,
    },
}

impl SourceManifest {
    pub fn load(path: &Path) -> Result<SourceManifest, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// A manifest from bytes already read (the ones its signature was
    /// checked over), `path` naming it in errors.
    pub fn parse(path: &Path, text: &str) -> Result<SourceManifest, ConfigError> {
        parse_toml(text).map_err(|message| ConfigError::Parse {
            path: path.to_owned(),
            message,
        })
    }
}

/// `text` as a `T`, or one line saying where, which key and what is wrong.
/// TOML's own message quotes the offending line, and serde's the offending
/// value: a secret written with the wrong type would be echoed to the log
/// or a CI console. So the line is given by number, the key by its path,
/// and a secret's type error by its kind only (`config/secret.rs`).
fn parse_toml<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    let at = |span: Option<std::ops::Range<usize>>| match span {
        Some(span) => {
            let line = text.as_bytes()[..span.start.min(text.len())]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            format!("line {}: ", line + 1)
        }
        None => String::new(),
    };
    let de = toml::Deserializer::parse(text)
        .map_err(|e| format!("{}{}", at(e.span()), one_line(e.message())))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let key = e.path().to_string();
        let inner = e.into_inner();
        let message = match key.as_str() {
            "" | "." => format!("{}{}", at(inner.span()), inner.message()),
            key => format!("{}{key}: {}", at(inner.span()), inner.message()),
        };
        // A quoted key may hold a newline too.
        one_line(&message)
    })
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

/// TOML errors span several lines with a source excerpt; startup errors are one line.
pub fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The configuration reference (JSON Schema, defaults, the book page).
pub mod reference;

#[cfg(test)]
mod props;
pub mod secret;
pub use secret::Secret;

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
