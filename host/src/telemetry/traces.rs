//! OpenTelemetry traces: spans for MCP requests, guest calls and capability
//! calls (`spans.rs`), exported over OTLP/HTTP (protobuf) by the SDK's batch
//! processor, and W3C trace context in and out.
//!
//! Off unless an endpoint is configured (`[traces] endpoint` or
//! `OTEL_EXPORTER_OTLP_ENDPOINT`). Off means no layer: the spans' target is
//! filtered out of the log layer, so every span macro finds its callsite
//! disabled and builds nothing.
//!
//! Context comes from `params._meta` (`traceparent`; the request's own,
//! preferred) or the HTTP request's headers, and goes out in the guest's
//! granted outbound requests. A client's `tracestate` and `baggage` are
//! neither kept nor passed on: they would carry client-chosen data to the
//! sources' backends (issue 48). Whether a request is recorded is the
//! operator's `sample_ratio`, not the client's sampled flag, unless
//! `follow_client_sampled` lets that flag raise it ([`OperatorSampler`]).

use crate::telemetry::config::{DEFAULT_TRACE_SERVICE_NAME, MAX_TRACESTATE_BYTES, TracesConfig};
use http::HeaderMap;
use opentelemetry::Context;
use opentelemetry::KeyValue;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{
    Link, SpanContext, SpanKind, TraceContextExt, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    BatchSpanProcessor, Sampler, SamplingDecision, SamplingResult, SdkTracerProvider, ShouldSample,
};
use serde_json::{Map, Value};
use std::future::Future;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{FilterExt, Targets};

/// The target of every span meant for traces (and of nothing else).
pub const TARGET: &str = "emseepea::trace";

const ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
const TRACES_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
const SERVICE_NAME_VAR: &str = "OTEL_SERVICE_NAME";
const SDK_DISABLED_VAR: &str = "OTEL_SDK_DISABLED";
const TRACES_PATH: &str = "v1/traces";

static ENABLED: AtomicBool = AtomicBool::new(false);
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// Whether spans are exported (checked before work done only for them).
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

#[derive(Debug, thiserror::Error)]
pub enum TracesError {
    #[error("traces: cannot build the OTLP exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
}

/// Where spans go, from the config and the standard variables.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The full URL spans are POSTed to.
    pub traces_url: String,
    pub service_name: String,
    pub sample_ratio: f64,
    pub follow_client_sampled: bool,
}

/// Sampling by the operator's ratio. A span under one of ours follows it;
/// a request's span under a client's context is drawn at the ratio (the
/// client chose its trace id, so the id cannot be the draw) unless
/// `follow_client` is on and the client said sampled; a new trace is
/// sampled by its (our) trace id. Every span's `tracestate` starts empty.
#[derive(Clone, Debug)]
struct OperatorSampler {
    ratio: f64,
    follow_client: bool,
}

impl ShouldSample for OperatorSampler {
    fn should_sample(
        &self,
        parent: Option<&Context>,
        trace_id: TraceId,
        name: &str,
        kind: &SpanKind,
        attributes: &[KeyValue],
        links: &[Link],
    ) -> SamplingResult {
        let parent_span = parent
            .filter(|cx| cx.has_active_span())
            .map(|cx| cx.span().span_context().clone())
            .filter(|sc| sc.is_valid());
        let sampled = match parent_span {
            Some(sc) if !sc.is_remote() => sc.is_sampled(),
            Some(sc) => {
                (self.follow_client && sc.is_sampled()) || rand::random::<f64>() < self.ratio
            }
            None => {
                let by_id = Sampler::TraceIdRatioBased(self.ratio);
                let r = by_id.should_sample(None, trace_id, name, kind, attributes, links);
                r.decision == SamplingDecision::RecordAndSample
            }
        };
        SamplingResult {
            decision: if sampled {
                SamplingDecision::RecordAndSample
            } else {
                SamplingDecision::Drop
            },
            attributes: Vec::new(),
            trace_state: TraceState::default(),
        }
    }
}

impl Settings {
    /// `None`: traces are off.
    pub fn resolve(
        config: &TracesConfig,
        env: impl Fn(&str) -> Option<String>,
    ) -> Option<Settings> {
        let env = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        if env(SDK_DISABLED_VAR).is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return None;
        }
        let t = config;
        let traces_url = match (&t.endpoint, env(TRACES_ENDPOINT_VAR), env(ENDPOINT_VAR)) {
            (Some(base), _, _) => signal_url(base),
            // The per-signal variable is the full URL, as the spec says.
            (None, Some(url), _) => url,
            (None, None, Some(base)) => signal_url(&base),
            (None, None, None) => return None,
        };
        Some(Settings {
            follow_client_sampled: t.follow_client_sampled,
            traces_url,
            service_name: t
                .service_name
                .clone()
                .or_else(|| env(SERVICE_NAME_VAR))
                .unwrap_or_else(|| DEFAULT_TRACE_SERVICE_NAME.to_owned()),
            sample_ratio: t.sample_ratio.unwrap_or(1.0),
        })
    }
}

fn signal_url(base: &str) -> String {
    format!("{}/{TRACES_PATH}", base.trim_end_matches('/'))
}

/// The layer that turns `TARGET` spans into OpenTelemetry spans, or `None`
/// when traces are off. Must be called inside the tokio runtime (the
/// exporter sends on it).
pub fn layer<S>(config: &TracesConfig) -> Result<Option<(impl Layer<S>, Settings)>, TracesError>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let Some(settings) = Settings::resolve(config, |name| std::env::var(name).ok()) else {
        return Ok(None);
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(settings.traces_url.clone())
        .with_http_client(super::otlp_client::OtlpClient::new())
        .build()?;
    let provider = SdkTracerProvider::builder()
        .with_span_processor(BatchSpanProcessor::builder(exporter).build())
        .with_sampler(OperatorSampler {
            ratio: settings.sample_ratio,
            follow_client: settings.follow_client_sampled,
        })
        .with_resource(
            Resource::builder()
                .with_service_name(settings.service_name.clone())
                .build(),
        )
        .build();
    let tracer = provider.tracer("emseepea");
    // A second init (tests in one process) keeps the first provider.
    let _ = PROVIDER.set(provider);
    ENABLED.store(true, Ordering::Relaxed);
    let only_spans = Targets::new().with_target(TARGET, tracing::Level::TRACE);
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        .with_filter(only_spans.and(tracing_subscriber::filter::filter_fn(|m| m.is_span())));
    Ok(Some((layer, settings)))
}

/// Export what is buffered and stop the exporter (the drain path). Blocks:
/// call it outside async code while the runtime still runs.
pub fn shutdown() {
    if let Some(provider) = PROVIDER.get()
        && let Err(e) = provider.shutdown()
    {
        tracing::warn!("traces: flushing at shutdown failed: {e}");
    }
}

/// A carried value, unless it is an overlong `tracestate`.
fn bounded<'a>(key: &str, value: Option<&'a str>) -> Option<&'a str> {
    value.filter(|v| key != "tracestate" || v.len() <= MAX_TRACESTATE_BYTES)
}

/// `_meta` (or any JSON object) read as a carrier.
struct MetaCarrier<'a>(&'a Map<String, Value>);

impl Extractor for MetaCarrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        bounded(key, self.0.get(key).and_then(Value::as_str))
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

/// The HTTP request's headers read as a carrier.
struct HeaderSource<'a>(&'a HeaderMap);

impl Extractor for HeaderSource<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        bounded(key, self.0.get(key).and_then(|v| v.to_str().ok()))
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

struct HeaderCarrier<'a>(&'a mut HeaderMap);

impl Injector for HeaderCarrier<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(key.as_bytes()),
            http::HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

/// A client's context if its span context is valid, without its
/// `tracestate`: that is the client's text, and it never leaves the host.
fn valid(cx: Context) -> Option<Context> {
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| {
        Context::new().with_remote_span_context(SpanContext::new(
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags(),
            true,
            TraceState::default(),
        ))
    })
}

/// The remote parent named by `params._meta`, else by the HTTP headers the
/// request came with (`with_headers`).
pub(super) fn remote_parent(params: &Map<String, Value>) -> Option<Context> {
    let from_meta = params
        .get("_meta")
        .and_then(Value::as_object)
        .and_then(|meta| valid(TraceContextPropagator::new().extract(&MetaCarrier(meta))));
    from_meta.or_else(|| HEADER_PARENT.try_with(Clone::clone).ok())
}

tokio::task_local! {
    /// The trace context of the HTTP request being served.
    static HEADER_PARENT: Context;
}

/// Run what `start` makes (one HTTP request's MCP handling) with the trace
/// context its headers carry, if traces are on and they carry one. The
/// future is made here, in the branch that awaits it: passed by value, it
/// would be kept twice in this one, once per branch.
pub async fn with_headers<F: Future>(headers: &HeaderMap, start: impl FnOnce() -> F) -> F::Output {
    let parent = enabled()
        .then(|| valid(TraceContextPropagator::new().extract(&HeaderSource(headers))))
        .flatten();
    match parent {
        Some(cx) => HEADER_PARENT.scope(cx, start()).await,
        None => start().await,
    }
}

/// Put `span`'s context in `headers` (`traceparent`, `tracestate`),
/// replacing whatever the guest set there; nothing when traces are off.
pub fn inject(span: &tracing::Span, headers: &mut HeaderMap) {
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    if span.is_disabled() {
        return;
    }
    headers.remove("traceparent");
    headers.remove("tracestate");
    TraceContextPropagator::new().inject_context(&span.context(), &mut HeaderCarrier(headers));
    // Ours is always empty; a client's never gets this far (`valid`).
    headers.remove("tracestate");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[traces]` from its lines.
    fn config(toml: &str) -> TracesConfig {
        toml::from_str(toml.strip_prefix("[traces]\n").unwrap_or(toml)).unwrap()
    }

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn off_unless_an_endpoint_is_named() {
        assert_eq!(Settings::resolve(&config(""), env(&[])), None);
        assert_eq!(
            Settings::resolve(&config(""), env(&[(SERVICE_NAME_VAR, "x")])),
            None
        );
        assert_eq!(
            Settings::resolve(
                &config("[traces]\nendpoint = \"http://c:4318\"\n"),
                env(&[(SDK_DISABLED_VAR, "true")])
            ),
            None
        );
    }

    #[test]
    fn the_file_wins_over_the_variables() {
        let s = Settings::resolve(
            &config("[traces]\nendpoint = \"http://c:4318/\"\nservice_name = \"svc\"\nsample_ratio = 0.25\n"),
            env(&[(ENDPOINT_VAR, "http://other:4318"), (SERVICE_NAME_VAR, "env")]),
        )
        .unwrap();
        assert_eq!(s.traces_url, "http://c:4318/v1/traces");
        assert_eq!(s.service_name, "svc");
        assert_eq!(s.sample_ratio, 0.25);
    }

    #[test]
    fn the_standard_variables_alone_turn_traces_on() {
        let s = Settings::resolve(
            &config(""),
            env(&[(ENDPOINT_VAR, "http://c:4318"), (SERVICE_NAME_VAR, "env")]),
        )
        .unwrap();
        assert_eq!(s.traces_url, "http://c:4318/v1/traces");
        assert_eq!(s.service_name, "env");
        assert_eq!(s.sample_ratio, 1.0);
        let s = Settings::resolve(
            &config(""),
            env(&[(TRACES_ENDPOINT_VAR, "http://c:9/custom")]),
        )
        .unwrap();
        assert_eq!(s.traces_url, "http://c:9/custom");
        assert_eq!(s.service_name, DEFAULT_TRACE_SERVICE_NAME);
    }

    #[test]
    fn meta_context_is_read_and_garbage_is_not() {
        let meta = |tp: &str| {
            let mut params = Map::new();
            params.insert("_meta".into(), serde_json::json!({ "traceparent": tp }));
            remote_parent(&params)
        };
        let cx = meta("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").unwrap();
        assert_eq!(
            cx.span().span_context().trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        assert!(meta("00-zz-b7ad6b7169203331-01").is_none());
        assert!(meta("00-00000000000000000000000000000000-b7ad6b7169203331-01").is_none());
        assert!(remote_parent(&Map::new()).is_none());
    }

    /// A valid `tracestate` of exactly `len` bytes (members of at most
    /// 100-character values, as W3C allows at most 256).
    fn tracestate(len: usize) -> String {
        let mut s = String::new();
        for i in 0.. {
            if s.len() >= len {
                break;
            }
            if !s.is_empty() {
                s.push(',');
            }
            let head = format!("k{i}=");
            let room = (len - s.len() - head.len()).min(100);
            s.push_str(&head);
            s.push_str(&"v".repeat(room));
        }
        assert_eq!(s.len(), len);
        s
    }

    #[test]
    fn an_overlong_tracestate_is_dropped_and_the_parent_kept() {
        let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let state = |len: usize| {
            let mut params = Map::new();
            let value = tracestate(len);
            params.insert(
                "_meta".into(),
                serde_json::json!({ "traceparent": tp, "tracestate": value }),
            );
            remote_parent(&params)
                .unwrap()
                .span()
                .span_context()
                .trace_state()
                .header()
        };
        // A client's tracestate is never kept, whatever its length.
        assert_eq!(state(10), "");
        assert_eq!(state(MAX_TRACESTATE_BYTES + 1), "");
        let mut headers = HeaderMap::new();
        headers.insert("traceparent", tp.parse().unwrap());
        headers.insert(
            "tracestate",
            tracestate(MAX_TRACESTATE_BYTES + 1).parse().unwrap(),
        );
        let cx = TraceContextPropagator::new().extract(&HeaderSource(&headers));
        assert!(cx.span().span_context().is_valid());
        assert_eq!(cx.span().span_context().trace_state().header(), "");
    }
}
