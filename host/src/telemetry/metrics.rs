//! Every Prometheus metric of the process, in one registry.
//!
//! One per process (`metrics()`): telemetry observes every layer and
//! changes none, so the layers record into it without it being threaded
//! through their APIs (the runtime stays ignorant of MCP, the MCP layer of
//! wasmtime). Label values come from bounded sets only: configured source
//! names, method names, protocol versions and fixed reason names; never
//! URIs, subjects, tokens or anything a client or guest chose.
//!
//! (Over 500 lines: it is the one registry, each metric declared once with
//! its help text and labels; splitting it would split that list.)

use super::histogram::AtomicHistogram;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::exponential_buckets;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use std::sync::LazyLock;
use std::time::Duration;

/// The content type of `encode()`'s output (OpenMetrics text, which
/// Prometheus scrapes natively).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// `emseepea_build_info`: what this binary is (constant for the process).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    wasmtime: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct McpLabels {
    pub method: &'static str,
    pub version: &'static str,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusLabels {
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    pub source: String,
    pub export: &'static str,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ExportLabels {
    pub source: String,
    pub export: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: &'static str,
}

/// A database of a source (both from the config: a bounded set).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DatabaseLabels {
    pub source: String,
    pub database: String,
    pub reason: &'static str,
}

/// One database of one source, as the `sql` capability serves it: labels
/// from the server config (source and database names), the engine, and
/// the statement function (`query`/`execute`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SqlLabels {
    pub source: String,
    pub database: String,
    pub engine: &'static str,
    pub statement: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SqlOutcomeLabels {
    pub source: String,
    pub database: String,
    pub engine: &'static str,
    pub statement: &'static str,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutboundLabels {
    pub source: String,
    /// A host named in the source's grant, never one a guest chose.
    pub host: String,
    /// `2xx`..`5xx`, or `error` (no response: network, timeout, TLS).
    pub status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DeniedLabels {
    pub source: String,
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabels {
    pub source: String,
}

type Histograms<L> = Family<L, AtomicHistogram, fn() -> AtomicHistogram>;

fn seconds() -> AtomicHistogram {
    // 100 µs .. ~52 s.
    AtomicHistogram::new(exponential_buckets(0.0001, 2.0, 20))
}
fn counts() -> AtomicHistogram {
    // 1 .. ~500k (entries, rows).
    AtomicHistogram::new(exponential_buckets(1.0, 2.0, 20))
}
fn bytes() -> AtomicHistogram {
    // 256 B .. 128 MiB.
    AtomicHistogram::new(exponential_buckets(256.0, 2.0, 20))
}
fn fuel() -> AtomicHistogram {
    // 1k .. ~1e12 units.
    AtomicHistogram::new(exponential_buckets(1000.0, 4.0, 16))
}

pub struct Metrics {
    registry: Registry,
    pub mcp_requests: Family<McpLabels, Counter>,
    pub http_responses: Family<StatusLabels, Counter>,
    pub http_request_duration: AtomicHistogram,
    pub http_in_flight: Gauge,
    pub sessions: Gauge,
    pub guest_calls: Family<CallLabels, Counter>,
    pub guest_call_duration: Histograms<ExportLabels>,
    pub guest_fuel: Histograms<ExportLabels>,
    pub guest_memory: Histograms<ExportLabels>,
    pub slot_wait: AtomicHistogram,
    pub slots_in_use: Gauge,
    pub guest_calls_handed_over: Counter,
    /// Workers' `sched_yield`s after a long run (`workers::turns`).
    pub worker_yields: Counter,
    /// Turns skipped because the worker had itself waited for a CPU.
    pub worker_turns_skipped: Counter,
    pub guest_calls_from_standby: Counter,
    pub standby_instances: Gauge,
    pub guest_calls_warm: Counter,
    pub warm_instances: Gauge,
    pub warm_memory_bytes: Gauge,
    pub warm_retired: Family<ReasonLabels, Counter>,
    pub page_entries: AtomicHistogram,
    pub page_bytes: AtomicHistogram,
    pub pages_cut_by_bytes: Counter,
    pub cursor_rejections: Family<ReasonLabels, Counter>,
    pub auth_failures: Family<ReasonLabels, Counter>,
    pub token_cache_hits: Counter,
    pub token_cache_misses: Counter,
    pub database_unavailable: Family<DatabaseLabels, Counter>,
    pub sql_statements: Family<SqlOutcomeLabels, Counter>,
    pub sql_statement_duration: Histograms<SqlLabels>,
    pub sql_statement_rows: Histograms<SqlLabels>,
    pub outbound_http: Family<OutboundLabels, Counter>,
    pub outbound_http_denied: Family<DeniedLabels, Counter>,
    pub source_trims: Family<SourceLabels, Counter>,
    pub pool_idle_resident_bytes: Gauge,
}

impl Metrics {
    fn new() -> Self {
        let mut r = Registry::with_prefix("emseepea");
        let m = Metrics {
            mcp_requests: Family::default(),
            http_responses: Family::default(),
            http_request_duration: seconds(),
            http_in_flight: Gauge::default(),
            sessions: Gauge::default(),
            guest_calls: Family::default(),
            guest_call_duration: Family::new_with_constructor(seconds),
            guest_fuel: Family::new_with_constructor(fuel),
            guest_memory: Family::new_with_constructor(bytes),
            slot_wait: seconds(),
            slots_in_use: Gauge::default(),
            guest_calls_handed_over: Counter::default(),
            worker_yields: Counter::default(),
            worker_turns_skipped: Counter::default(),
            guest_calls_from_standby: Counter::default(),
            standby_instances: Gauge::default(),
            guest_calls_warm: Counter::default(),
            warm_instances: Gauge::default(),
            warm_memory_bytes: Gauge::default(),
            warm_retired: Family::default(),
            page_entries: counts(),
            page_bytes: bytes(),
            pages_cut_by_bytes: Counter::default(),
            cursor_rejections: Family::default(),
            auth_failures: Family::default(),
            token_cache_hits: Counter::default(),
            token_cache_misses: Counter::default(),
            database_unavailable: Family::default(),
            sql_statements: Family::default(),
            sql_statement_duration: Family::new_with_constructor(seconds),
            sql_statement_rows: Family::new_with_constructor(counts),
            outbound_http: Family::default(),
            outbound_http_denied: Family::default(),
            source_trims: Family::default(),
            pool_idle_resident_bytes: Gauge::default(),
            registry: Registry::default(),
        };
        // Counters get `_total` from the encoder, infos `_info`; units are in the names.
        r.register(
            "build",
            "This server's version and the wasmtime release it embeds (value 1)",
            Info::new(BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
                // `runtime::WASMTIME_VERSION` too: telemetry sits below the runtime.
                wasmtime: wasmtime_release!(),
            }),
        );
        r.register(
            "mcp_requests",
            "MCP requests answered, by method, protocol version and outcome",
            m.mcp_requests.clone(),
        );
        r.register(
            "http_responses",
            "HTTP responses on the MCP listener, by status code",
            m.http_responses.clone(),
        );
        r.register(
            "http_request_duration_seconds",
            "Time from a request's head to its response",
            m.http_request_duration.clone(),
        );
        r.register(
            "http_requests_in_flight",
            "HTTP requests being served on the MCP listener",
            m.http_in_flight.clone(),
        );
        r.register(
            "sessions",
            "Legacy-protocol sessions held",
            m.sessions.clone(),
        );
        r.register(
            "guest_calls",
            "Guest calls, by source, export (describe/list/read) and outcome",
            m.guest_calls.clone(),
        );
        r.register(
            "guest_call_duration_seconds",
            "Guest call time, including the wait for a slot",
            m.guest_call_duration.clone(),
        );
        r.register(
            "guest_fuel_consumed",
            "Fuel a guest call consumed",
            m.guest_fuel.clone(),
        );
        r.register(
            "guest_memory_peak_bytes",
            "Peak memory (linear memories and charged host buffers) of a guest call",
            m.guest_memory.clone(),
        );
        r.register(
            "guest_slot_wait_seconds",
            "Time a guest call waited for one of the max_concurrent_calls slots",
            m.slot_wait.clone(),
        );
        r.register(
            "guest_slots_in_use",
            "Guest call slots taken",
            m.slots_in_use.clone(),
        );
        r.register(
            "guest_calls_on_guest_threads",
            "Guest calls handed to a [runtime] guest_threads thread; the others ran on the request's worker",
            m.guest_calls_handed_over.clone(),
        );
        r.register(
            "worker_yields",
            "Times a worker that had run [workers] yield_after_us without waiting for I/O gave its CPU to whatever else was runnable there, after a response write",
            m.worker_yields.clone(),
        );
        r.register(
            "worker_turns_skipped",
            "Turns a worker skipped because it had itself waited for a CPU for over a tenth of the time since its last turn: the CPUs are oversubscribed (a proxy or other processes beside the server), where a yield gives nothing back",
            m.worker_turns_skipped.clone(),
        );
        r.register(
            "guest_calls_from_standby",
            "Guest calls that took a never-called instance made while the server was not busy ([runtime] standby_instances); the others instantiated",
            m.guest_calls_from_standby.clone(),
        );
        r.register(
            "guest_standby_instances",
            "Never-called instances kept ready now, at most [runtime] standby_instances (each holds a pool instance and its memory)",
            m.standby_instances.clone(),
        );
        r.register(
            "guest_calls_warm",
            "Guest calls that ran in an instance kept after an earlier call of the same caller (principal and scopes) and source ([runtime] warm_instances)",
            m.guest_calls_warm.clone(),
        );
        r.register(
            "guest_warm_instances",
            "Instances kept now for their caller's next call, at most [runtime] warm_instances (each holds a pool instance and its memory)",
            m.warm_instances.clone(),
        );
        r.register(
            "guest_warm_memory_bytes",
            "Linear memory the kept instances hold now, together (each at most its source's memory budget)",
            m.warm_memory_bytes.clone(),
        );
        r.register(
            "guest_warm_retired",
            "Kept instances dropped, by reason: calls (served [runtime] warm_max_calls), grown (grew more than warm_max_growth_bytes), idle (waited warm_idle_ms), evicted (the bound was full), relinked (source trimmed), invalid_result (a result of that caller was invalid)",
            m.warm_retired.clone(),
        );
        r.register(
            "page_entries",
            "Entries per resources/list page",
            m.page_entries.clone(),
        );
        r.register(
            "page_bytes",
            "Bytes of the entries (and cursor) per resources/list page",
            m.page_bytes.clone(),
        );
        r.register(
            "pages_cut_by_bytes",
            "Pages that ended before page_size because the byte bound was reached",
            m.pages_cut_by_bytes.clone(),
        );
        r.register(
            "cursor_rejections",
            "Cursors refused, by internal reason (the client always sees one generic error)",
            m.cursor_rejections.clone(),
        );
        r.register(
            "auth_failures",
            "Requests refused by authentication, by reason",
            m.auth_failures.clone(),
        );
        r.register(
            "token_cache_hits",
            "Bearer tokens found in the verified-token cache",
            m.token_cache_hits.clone(),
        );
        r.register(
            "token_cache_misses",
            "Bearer tokens sent to the verifier",
            m.token_cache_misses.clone(),
        );
        r.register(
            "sql_statements",
            "SQL statements of guests, by source, database, engine, statement (query/execute) and outcome",
            m.sql_statements.clone(),
        );
        r.register(
            "sql_statement_duration_seconds",
            "Time of one SQL statement, including the wait for its result",
            m.sql_statement_duration.clone(),
        );
        r.register(
            "sql_statement_rows",
            "Rows a SQL query returned, or an execute changed (statements that succeeded)",
            m.sql_statement_rows.clone(),
        );
        r.register(
            "outbound_http_requests",
            "Guest requests to granted origins, by source, granted host and status class (error: no response)",
            m.outbound_http.clone(),
        );
        r.register(
            "outbound_http_denied",
            "Guest requests the host refused, by source and reason (not_granted, not_public, peer_mismatch)",
            m.outbound_http_denied.clone(),
        );
        r.register(
            "source_trims",
            "Idle sources relinked so that the pool slots they warmed give their memory images back (runtime.idle_trim_s)",
            m.source_trims.clone(),
        );
        r.register(
            "pool_idle_resident_bytes",
            "Bytes of linear memory the pool's unused warm slots keep resident, as wasmtime counts them (sampled at each trim sweep; a trimmed slot counts 0)",
            m.pool_idle_resident_bytes.clone(),
        );
        Metrics { registry: r, ..m }
    }

    /// The registry in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }

    /// One guest call ended (`outcome` from `GuestError::outcome`).
    pub fn guest_call(
        &self,
        source: &str,
        export: &'static str,
        outcome: &'static str,
        elapsed: Duration,
    ) {
        self.guest_calls
            .get_or_create(&CallLabels {
                source: source.to_owned(),
                export,
                outcome,
            })
            .inc();
        self.guest_call_duration
            .get_or_create(&ExportLabels {
                source: source.to_owned(),
                export,
            })
            .observe(elapsed.as_secs_f64());
    }

    /// The series of `source`'s `export` its successful calls record into
    /// (`ExportSeries`), created now.
    pub fn export_series(&self, source: &str, export: &'static str) -> ExportSeries {
        let labels = ExportLabels {
            source: source.to_owned(),
            export,
        };
        ExportSeries {
            ok: self
                .guest_calls
                .get_or_create(&CallLabels {
                    source: source.to_owned(),
                    export,
                    outcome: "ok",
                })
                .clone(),
            duration: self.guest_call_duration.get_or_create(&labels).clone(),
            fuel: self.guest_fuel.get_or_create(&labels).clone(),
            memory: self.guest_memory.get_or_create(&labels).clone(),
        }
    }

    /// What a call that ran (had a store) used.
    pub fn guest_usage(&self, source: &str, export: &'static str, fuel: u64, memory: u64) {
        let labels = ExportLabels {
            source: source.to_owned(),
            export,
        };
        self.guest_fuel.get_or_create(&labels).observe(fuel as f64);
        self.guest_memory
            .get_or_create(&labels)
            .observe(memory as f64);
    }

    /// One SQL statement ended (`rows`: returned or changed, when it succeeded).
    #[allow(clippy::too_many_arguments)]
    pub fn sql_statement(
        &self,
        source: &str,
        database: &str,
        engine: &'static str,
        statement: &'static str,
        outcome: &'static str,
        elapsed: Duration,
        rows: Option<u64>,
    ) {
        let labels = SqlLabels {
            source: source.to_owned(),
            database: database.to_owned(),
            engine,
            statement,
        };
        self.sql_statements
            .get_or_create(&SqlOutcomeLabels {
                source: labels.source.clone(),
                database: labels.database.clone(),
                engine,
                statement,
                outcome,
            })
            .inc();
        self.sql_statement_duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
        if let Some(rows) = rows {
            self.sql_statement_rows
                .get_or_create(&labels)
                .observe(rows as f64);
        }
    }

    /// An outbound request to a granted `host` got `status` (`None`: no response).
    pub fn outbound_response(&self, source: &str, host: &str, status: Option<http::StatusCode>) {
        let status = match status.map(|s| s.as_u16() / 100) {
            Some(1) => "1xx",
            Some(2) => "2xx",
            Some(3) => "3xx",
            Some(4) => "4xx",
            Some(5) => "5xx",
            _ => "error",
        };
        self.outbound_http
            .get_or_create(&OutboundLabels {
                source: source.to_owned(),
                host: host.to_owned(),
                status,
            })
            .inc();
    }

    /// The host refused an outbound request.
    pub fn outbound_denied(&self, source: &str, reason: &'static str) {
        self.outbound_http_denied
            .get_or_create(&DeniedLabels {
                source: source.to_owned(),
                reason,
            })
            .inc();
    }

    /// An idle source was relinked (`runtime::trim`).
    /// `n` kept instances dropped for `reason`.
    pub fn warm_retired(&self, reason: &'static str, n: u64) {
        self.warm_retired
            .get_or_create(&ReasonLabels { reason })
            .inc_by(n);
    }

    pub fn source_trimmed(&self, source: &str) {
        self.source_trims
            .get_or_create(&SourceLabels {
                source: source.to_owned(),
            })
            .inc();
    }

    pub fn reason(family: &Family<ReasonLabels, Counter>, reason: &'static str) {
        family.get_or_create(&ReasonLabels { reason }).inc();
    }
}

/// One export of one source, its series looked up once: a lookup by labels
/// copies the source's name and takes the family's lock, four times per
/// call; a successful call of a hot export (`list`, `read`) does neither.
/// The handles share their values with the registry's series.
#[derive(Clone, Debug)]
pub struct ExportSeries {
    ok: Counter,
    duration: AtomicHistogram,
    fuel: AtomicHistogram,
    memory: AtomicHistogram,
}

impl ExportSeries {
    /// A call ended `ok` after `elapsed` (as `Metrics::guest_call`).
    pub fn ok(&self, elapsed: Duration) {
        self.ok.inc();
        self.duration.observe(elapsed.as_secs_f64());
    }

    /// What a call that ran used (as `Metrics::guest_usage`).
    pub fn usage(&self, fuel: u64, memory: u64) {
        self.fuel.observe(fuel as f64);
        self.memory.observe(memory as f64);
    }
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

/// Counts one in-flight item for as long as it lives.
pub struct InFlight(&'static Gauge);

impl InFlight {
    pub fn enter(gauge: &'static Gauge) -> Self {
        gauge.inc();
        InFlight(gauge)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_prometheus_conventions() {
        let m = Metrics::new();
        m.guest_call("s", "list", "ok", Duration::from_millis(1));
        m.token_cache_hits.inc();
        let text = m.encode();
        assert!(
            text.contains("# TYPE emseepea_guest_calls counter"),
            "{text}"
        );
        assert!(
            text.contains(r#"emseepea_guest_calls_total{source="s",export="list",outcome="ok"} 1"#),
            "{text}"
        );
        assert!(text.contains("emseepea_token_cache_hits_total 1"), "{text}");
        assert!(
            text.contains("emseepea_guest_call_duration_seconds_bucket"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn the_build_is_an_info_metric_naming_the_wasmtime_release() {
        let text = Metrics::new().encode();
        assert!(text.contains("# TYPE emseepea_build info"), "{text}");
        let line = format!(
            r#"emseepea_build_info{{version="{}",wasmtime="{}"}} 1"#,
            env!("CARGO_PKG_VERSION"),
            wasmtime_release!()
        );
        assert!(text.contains(&line), "{line} in\n{text}");
    }
}
