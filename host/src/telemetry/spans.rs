//! The spans of a trace, one constructor each, so the layers that make them
//! stay one line long. All are at `traces::TARGET`: with traces off each
//! macro finds its callsite disabled and returns `Span::none()` without
//! evaluating a field. Attribute names follow the OpenTelemetry semantic
//! conventions where one exists (`mcp.*`, `jsonrpc.*`, `db.*`, `http.*`,
//! `server.*`); ours are under `emseepea.*`.

use super::traces::{self, TARGET};
use serde_json::{Map, Value};
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// One MCP request (each item of a batch is one), child of the caller's
/// trace context when it sent one. Named by its method, as the MCP
/// semantic conventions say.
pub fn mcp_request(
    method: &'static str,
    version: &'static str,
    request_id: &str,
    params: &Map<String, Value>,
) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "mcp.request",
        otel.name = method,
        otel.kind = "server",
        otel.status_code = Empty,
        mcp.method.name = method,
        mcp.protocol.version = version,
        jsonrpc.request.id = request_id,
        emseepea.outcome = Empty,
    );
    if !span.is_disabled()
        && let Some(parent) = traces::remote_parent(params)
    {
        // Only fails when no OpenTelemetry layer is installed.
        let _ = span.set_parent(parent);
    }
    span
}

/// One guest call (`describe`, `list` or `read`); fuel, memory, outcome and
/// duration are recorded when it ends.
pub fn guest_call(source: &str, export: &'static str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "guest.call",
        otel.status_code = Empty,
        emseepea.source = source,
        emseepea.export = export,
        emseepea.outcome = Empty,
        emseepea.fuel = Empty,
        emseepea.memory_bytes = Empty,
        emseepea.duration_us = Empty,
    )
}

/// One SQLite statement a guest ran on a granted database.
pub fn sql_statement(engine: &'static str, database: &str, kind: &'static str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "sql.statement",
        otel.kind = "client",
        otel.status_code = Empty,
        // OpenTelemetry's well-known names for the engines.
        db.system.name = match engine {
            "postgres" => "postgresql",
            other => other,
        },
        db.namespace = database,
        db.operation.name = kind,
        emseepea.outcome = Empty,
    )
}

/// One outbound HTTP request of a guest to a granted origin (named by its
/// method, as the HTTP semantic conventions say).
pub fn http_request(method: &str, host: &str, port: u16) -> Span {
    tracing::info_span!(
        target: TARGET,
        "http.client",
        otel.name = method,
        otel.kind = "client",
        otel.status_code = Empty,
        http.request.method = method,
        server.address = host,
        server.port = port,
        http.response.status_code = Empty,
        emseepea.outcome = Empty,
    )
}

/// How the span's work ended: `ok`, or a reason that marks it an error.
pub fn outcome(span: &Span, outcome: &'static str) {
    if span.is_disabled() {
        return;
    }
    span.record("emseepea.outcome", outcome);
    span.record(
        "otel.status_code",
        if outcome == "ok" { "ok" } else { "error" },
    );
}
