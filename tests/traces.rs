//! OpenTelemetry traces end to end: a real OTLP/HTTP receiver in this
//! process decodes what the server exports (`ExportTraceServiceRequest`,
//! protobuf), and a test backend records the `traceparent` the guest's
//! outbound request carried.
//!
//! The server's batch processor keeps its default 5 s delay: the spans
//! arrive because SIGTERM's drain flushes the exporter before the process
//! exits, so each test stops the server and then reads what was received.

mod support;

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use support::*;

/// What the receiver got: (service.name, span) pairs.
type Received = Arc<Mutex<Vec<(String, Span)>>>;

struct Receiver {
    url: String,
    spans: Received,
    _task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    async fn start() -> Receiver {
        use http_body_util::BodyExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let spans: Received = Arc::default();
        let got = spans.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let got = got.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |req: http::Request<hyper::body::Incoming>| {
                            let got = got.clone();
                            async move {
                                assert_eq!(req.uri().path(), "/v1/traces");
                                assert_eq!(req.headers()["content-type"], "application/x-protobuf");
                                let body = req.into_body().collect().await.unwrap().to_bytes();
                                let export = ExportTraceServiceRequest::decode(body).unwrap();
                                let mut got = got.lock().unwrap();
                                for rs in export.resource_spans {
                                    let service = rs
                                        .resource
                                        .as_ref()
                                        .and_then(|r| attr_of(&r.attributes, "service.name"))
                                        .unwrap_or_default();
                                    for ss in rs.scope_spans {
                                        for span in ss.spans {
                                            got.push((service.clone(), span));
                                        }
                                    }
                                }
                                let mut r = http::Response::new(http_body_util::Full::new(
                                    bytes::Bytes::from(
                                        ExportTraceServiceResponse::default().encode_to_vec(),
                                    ),
                                ));
                                r.headers_mut().insert(
                                    "content-type",
                                    http::HeaderValue::from_static("application/x-protobuf"),
                                );
                                Ok::<_, std::convert::Infallible>(r)
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Receiver {
            url,
            spans,
            _task: task,
        }
    }

    fn spans(&self) -> Vec<(String, Span)> {
        self.spans.lock().unwrap().clone()
    }
}

fn attr_of(attrs: &[KeyValue], key: &str) -> Option<String> {
    let v = attrs.iter().find(|kv| kv.key == key)?.value.as_ref()?;
    Some(match v.value.as_ref()? {
        Any::StringValue(s) => s.clone(),
        Any::IntValue(i) => i.to_string(),
        Any::BoolValue(b) => b.to_string(),
        Any::DoubleValue(d) => d.to_string(),
        other => format!("{other:?}"),
    })
}

fn attr(span: &Span, key: &str) -> String {
    attr_of(&span.attributes, key)
        .unwrap_or_else(|| panic!("span {:?} has no {key}: {:?}", span.name, span.attributes))
}

/// The one span named `name` in trace `trace` whose parent is `parent`.
fn child<'a>(spans: &'a [(String, Span)], trace: &[u8], parent: &[u8], name: &str) -> &'a Span {
    let found: Vec<_> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.trace_id == trace && s.parent_span_id == parent && s.name == name)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{name} under {} in trace {}: {:#?}",
        hex::encode(parent),
        hex::encode(trace),
        spans
            .iter()
            .map(|(_, s)| (
                &s.name,
                hex::encode(&s.trace_id),
                hex::encode(&s.parent_span_id)
            ))
            .collect::<Vec<_>>()
    );
    found[0]
}

/// A 2026-07-28 `resources/read`, with a `traceparent` in `_meta` and/or
/// in the HTTP headers.
async fn read(
    url: &str,
    token: &str,
    id: &str,
    uri: &str,
    meta_parent: Option<&str>,
    header_parent: Option<&str>,
) -> Answer {
    let mut meta = modern_meta();
    if let Some(tp) = meta_parent {
        meta["traceparent"] = json!(tp);
        meta["tracestate"] = json!("vendor=from-meta");
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "resources/read",
        "params": {"uri": uri, "_meta": meta}});
    let auth = format!("Bearer {token}");
    let mut headers = vec![
        ("mcp-protocol-version", MODERN),
        ("mcp-method", "resources/read"),
        ("mcp-name", uri),
        ("authorization", auth.as_str()),
    ];
    if let Some(tp) = header_parent {
        headers.push(("traceparent", tp));
    }
    post(url, &headers, serde_json::to_vec(&body).unwrap()).await
}

fn text(a: &Answer) -> String {
    let v: Value = a.json();
    v["result"]["contents"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_owned()
}

/// A backend that records the `traceparent` of every request (every
/// value, so a forged header left beside ours would show).
async fn backend() -> (FakeHttp, Arc<Mutex<Vec<Option<String>>>>) {
    backend_recording("traceparent").await
}

const TRACE_A: &str = "0af7651916cd43dd8448eb211c80319c";
const PARENT_A: &str = "b7ad6b7169203331";
const FORGED: &str = "11111111111111111111111111111111";
const TRACE_B: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_B: &str = "00f067aa0ba902b7";

#[tokio::test(flavor = "multi_thread")]
async fn a_request_its_guest_call_and_capability_calls_form_one_trace() {
    expect_one_trace_per_request("").await;
}

/// The same with guest calls on a thread of their own: the call's span is
/// still the request's child, and so are its HTTP request and SQL statement
/// (made from that thread's runtime).
#[tokio::test(flavor = "multi_thread")]
async fn on_a_guest_thread_a_request_and_its_calls_still_form_one_trace() {
    expect_one_trace_per_request(
        "[runtime]\nguest_threads = 1\nguest_threads_from_connections = 0\n",
    )
    .await;
}

async fn expect_one_trace_per_request(runtime: &str) {
    let receiver = Receiver::start().await;
    let (backend, seen) = backend().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db.sqlite");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2);")
        .unwrap();
    let s = server()
        .config(&format!(
            "[traces]\nendpoint = \"{}\"\nservice_name = \"emseepea-test\"\n[databases.main]\nfile = \"{}\"\n{runtime}",
            receiver.url,
            db.display()
        ))
        .hostile(
            "fetcher",
            "fetch",
            // The guest forges a context of its own: the host's replaces it.
            &format!(
                "[grants]\nhttp = [\"{0}\"]\n[config]\nurl = \"{0}/items\"\ntraceparent = \"00-{FORGED}-{PARENT_B}-01\"\n",
                backend.url
            ),
        )
        .hostile(
            "rows",
            "sql",
            "[grants]\ndatabases = [\"main\"]\n[config]\ndatabase = \"main\"\nsql = \"SELECT x FROM t\"\n",
        )
        .start();
    s.expect_log(&["traces on (OTLP/HTTP)"]);
    let token = s.token(Some("alice"), "hostile:read");

    // The context in `_meta` (2026-07-28 reserves `traceparent` there) wins
    // over the one in the headers.
    let a = read(
        &s.url,
        &token,
        "req-a",
        "hostile://fetcher/1",
        Some(&format!("00-{TRACE_A}-{PARENT_A}-01")),
        Some(&format!("00-{TRACE_B}-{PARENT_B}-01")),
    )
    .await;
    assert!(text(&a).contains("from the backend"), "{}", a.text());
    // Only the headers: that context is the parent.
    let b = read(
        &s.url,
        &token,
        "req-b",
        "hostile://rows/1",
        None,
        Some(&format!("00-{TRACE_B}-{PARENT_B}-01")),
    )
    .await;
    assert_eq!(b.status, 200, "{}", b.text());
    assert!(s.terminate().success());

    let spans = receiver.spans();
    assert!(
        spans.iter().all(|(svc, _)| svc == "emseepea-test"),
        "{spans:?}"
    );
    let trace_a = hex::decode(TRACE_A).unwrap();
    let request = child(
        &spans,
        &trace_a,
        &hex::decode(PARENT_A).unwrap(),
        "resources/read",
    );
    assert_eq!(attr(request, "mcp.method.name"), "resources/read");
    assert_eq!(attr(request, "mcp.protocol.version"), MODERN);
    assert_eq!(attr(request, "jsonrpc.request.id"), "\"req-a\"");
    assert_eq!(attr(request, "emseepea.outcome"), "ok");
    let call = child(&spans, &trace_a, &request.span_id, "guest.call");
    assert_eq!(attr(call, "emseepea.source"), "fetcher");
    assert_eq!(attr(call, "emseepea.export"), "read");
    assert_eq!(attr(call, "emseepea.outcome"), "ok");
    for key in [
        "emseepea.fuel",
        "emseepea.memory_bytes",
        "emseepea.duration_us",
    ] {
        assert!(attr(call, key).parse::<u64>().unwrap() > 0, "{key}");
    }
    let out = child(&spans, &trace_a, &call.span_id, "GET");
    assert_eq!(attr(out, "server.address"), "127.0.0.1");
    assert_eq!(attr(out, "http.request.method"), "GET");
    assert_eq!(attr(out, "http.response.status_code"), "200");
    // The backend was told to join the trace, as a child of that span.
    assert_eq!(
        *seen.lock().unwrap(),
        vec![Some(format!(
            "00-{TRACE_A}-{}-01",
            hex::encode(&out.span_id)
        ))]
    );

    let trace_b = hex::decode(TRACE_B).unwrap();
    let request = child(
        &spans,
        &trace_b,
        &hex::decode(PARENT_B).unwrap(),
        "resources/read",
    );
    assert_eq!(attr(request, "jsonrpc.request.id"), "\"req-b\"");
    let call = child(&spans, &trace_b, &request.span_id, "guest.call");
    assert_eq!(attr(call, "emseepea.source"), "rows");
    let statement = child(&spans, &trace_b, &call.span_id, "sql.statement");
    assert_eq!(attr(statement, "db.system.name"), "sqlite");
    assert_eq!(attr(statement, "db.namespace"), "main");
    assert_eq!(attr(statement, "db.operation.name"), "query");
    assert_eq!(attr(statement, "emseepea.outcome"), "ok");
    // The first read's header context (TRACE_B) was not used for it.
    assert!(
        !spans
            .iter()
            .any(|(_, s)| s.trace_id == trace_b && s.name == "GET"),
        "{spans:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_standard_variables_turn_traces_on() {
    let receiver = Receiver::start().await;
    let s = server()
        .hostile("quiet", "ok", "")
        .prepare()
        .start_with_env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url),
            ("OTEL_SERVICE_NAME", "from-env"),
        ]);
    let token = s.token(Some("alice"), "hostile:read");
    let a = read(
        &s.url,
        &token,
        "req-env",
        "hostile://quiet/1",
        Some(&format!("00-{TRACE_A}-{PARENT_A}-01")),
        None,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert!(s.terminate().success());
    let spans = receiver.spans();
    let trace_a = hex::decode(TRACE_A).unwrap();
    let request = child(
        &spans,
        &trace_a,
        &hex::decode(PARENT_A).unwrap(),
        "resources/read",
    );
    child(&spans, &trace_a, &request.span_id, "guest.call");
    assert!(spans.iter().all(|(svc, _)| svc == "from-env"), "{spans:?}");
}

/// Off by default: the client's context is not passed to backends, and
/// nothing is exported.
#[tokio::test(flavor = "multi_thread")]
async fn without_an_endpoint_nothing_is_traced_or_propagated() {
    let (backend, seen) = backend().await;
    let s = server()
        .hostile(
            "fetcher",
            "fetch",
            &format!(
                "[grants]\nhttp = [\"{0}\"]\n[config]\nurl = \"{0}/items\"\n",
                backend.url
            ),
        )
        .start();
    let token = s.token(Some("alice"), "hostile:read");
    let a = read(
        &s.url,
        &token,
        "req-off",
        "hostile://fetcher/1",
        Some(&format!("00-{TRACE_A}-{PARENT_A}-01")),
        Some(&format!("00-{TRACE_B}-{PARENT_B}-01")),
    )
    .await;
    assert!(text(&a).contains("from the backend"), "{}", a.text());
    assert_eq!(*seen.lock().unwrap(), vec![None]);
    assert!(!s.log().contains("traces on"), "{}", s.log());
    assert!(s.terminate().success());
}

/// A guest failure's log line carries the request id the span carries
/// (`jsonrpc.request.id`), and the trace id next to it.
#[tokio::test(flavor = "multi_thread")]
async fn a_guest_failure_line_names_its_request_and_trace() {
    let receiver = Receiver::start().await;
    let s = server()
        .config(&format!(
            "[log]\nformat = \"json\"\n[traces]\nendpoint = \"{}\"\n",
            receiver.url
        ))
        .hostile("bad", "loop", "[budget]\nfuel = 20_000_000")
        .start();
    let token = s.token(Some("alice"), "hostile:read");
    let a = read(
        &s.url,
        &token,
        "req-fuel",
        "hostile://bad/1",
        Some(&format!("00-{TRACE_A}-{PARENT_A}-01")),
        None,
    )
    .await;
    assert_eq!(a.json()["error"]["code"], -32603, "{}", a.text());
    let line = s.expect_log(&["guest call failed"]);
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["request_id"], "\"req-fuel\"", "{v}");
    assert_eq!(v["trace_id"], TRACE_A, "{v}");
    assert!(s.terminate().success());
    let spans = receiver.spans();
    let trace_a = hex::decode(TRACE_A).unwrap();
    let request = child(
        &spans,
        &trace_a,
        &hex::decode(PARENT_A).unwrap(),
        "resources/read",
    );
    assert_eq!(attr(request, "jsonrpc.request.id"), "\"req-fuel\"");
    let call = child(&spans, &trace_a, &request.span_id, "guest.call");
    assert_eq!(attr(call, "emseepea.outcome"), "fuel");
    // A failed call's span is an error.
    assert_eq!(call.status.as_ref().map(|s| s.code), Some(2), "{call:?}");
}

// ---- Issue 48 §4: the operator's sampling decides; a client's tracestate stays here ----

/// A backend that records the values of `header` in every request.
async fn backend_recording(header: &'static str) -> (FakeHttp, Arc<Mutex<Vec<Option<String>>>>) {
    let seen: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let seen2 = seen.clone();
    let b = FakeHttp::start(Arc::new(move |_, _, headers, _| {
        let all: Vec<&str> = headers
            .get_all(header)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        seen2
            .lock()
            .unwrap()
            .push((!all.is_empty()).then(|| all.join(" | ")));
        (200, "from the backend".into())
    }))
    .await;
    (b, seen)
}

fn fetcher_manifest(backend: &FakeHttp) -> String {
    format!(
        "[grants]\nhttp = [\"{0}\"]\n[config]\nurl = \"{0}/items\"\n",
        backend.url
    )
}

/// `sample_ratio = 0`: a client's `traceparent` saying sampled records
/// nothing, and the backend is told the request is not sampled.
#[tokio::test(flavor = "multi_thread")]
async fn a_clients_sampled_traceparent_does_not_override_a_zero_sample_ratio() {
    let receiver = Receiver::start().await;
    let (backend, seen) = backend().await;
    let s = server()
        .config(&format!(
            "[traces]\nendpoint = \"{}\"\nsample_ratio = 0.0\n",
            receiver.url
        ))
        .hostile("fetcher", "fetch", &fetcher_manifest(&backend))
        .start();
    s.expect_log(&["traces on (OTLP/HTTP)"]);
    let token = s.token(Some("alice"), "hostile:read");
    for (id, meta, header) in [
        (
            "req-meta",
            Some(format!("00-{TRACE_A}-{PARENT_A}-01")),
            None,
        ),
        (
            "req-header",
            None,
            Some(format!("00-{TRACE_B}-{PARENT_B}-01")),
        ),
    ] {
        let a = read(
            &s.url,
            &token,
            id,
            "hostile://fetcher/1",
            meta.as_deref(),
            header.as_deref(),
        )
        .await;
        assert!(text(&a).contains("from the backend"), "{}", a.text());
    }
    assert!(s.terminate().success());
    let spans = receiver.spans();
    assert!(
        spans.is_empty(),
        "recorded although the ratio is 0: {spans:?}"
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    for tp in seen {
        let tp = tp.expect("the trace goes on, unsampled");
        assert!(tp.ends_with("-00"), "told it is sampled: {tp}");
    }
}

/// `follow_client_sampled = true`: then, and only then, a client's
/// sampled flag raises the share.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_raises_sampling_only_where_the_operator_allows_it() {
    let receiver = Receiver::start().await;
    let s = server()
        .config(&format!(
            "[traces]\nendpoint = \"{}\"\nsample_ratio = 0.0\nfollow_client_sampled = true\n",
            receiver.url
        ))
        .hostile("quiet", "ok", "")
        .start();
    let token = s.token(Some("alice"), "hostile:read");
    let sampled = format!("00-{TRACE_A}-{PARENT_A}-01");
    let unsampled = format!("00-{TRACE_B}-{PARENT_B}-00");
    for (id, tp) in [("req-a", &sampled), ("req-b", &unsampled)] {
        let a = read(&s.url, &token, id, "hostile://quiet/1", Some(tp), None).await;
        assert_eq!(a.status, 200, "{}", a.text());
    }
    assert!(s.terminate().success());
    let spans = receiver.spans();
    let trace_a = hex::decode(TRACE_A).unwrap();
    child(
        &spans,
        &trace_a,
        &hex::decode(PARENT_A).unwrap(),
        "resources/read",
    );
    let trace_b = hex::decode(TRACE_B).unwrap();
    assert!(
        !spans.iter().any(|(_, s)| s.trace_id == trace_b),
        "an unsampled request under a zero ratio: {spans:?}"
    );
}

/// A client's `tracestate` (in `_meta` or a header) never reaches a
/// source's backend, nor the exported spans.
#[tokio::test(flavor = "multi_thread")]
async fn a_clients_tracestate_never_leaves_the_host() {
    let receiver = Receiver::start().await;
    let (backend, seen) = backend_recording("tracestate").await;
    let s = server()
        .config(&format!("[traces]\nendpoint = \"{}\"\n", receiver.url))
        .hostile("fetcher", "fetch", &fetcher_manifest(&backend))
        .start();
    let token = s.token(Some("alice"), "hostile:read");
    // In `_meta` (`read` puts `vendor=from-meta` beside the traceparent).
    let a = read(
        &s.url,
        &token,
        "req-meta",
        "hostile://fetcher/1",
        Some(&format!("00-{TRACE_A}-{PARENT_A}-01")),
        None,
    )
    .await;
    assert!(text(&a).contains("from the backend"), "{}", a.text());
    // In the headers.
    let body = json!({"jsonrpc": "2.0", "id": "req-header", "method": "resources/read",
        "params": {"uri": "hostile://fetcher/1", "_meta": modern_meta()}});
    let auth = format!("Bearer {token}");
    let tp = format!("00-{TRACE_B}-{PARENT_B}-01");
    let headers = [
        ("mcp-protocol-version", MODERN),
        ("mcp-method", "resources/read"),
        ("mcp-name", "hostile://fetcher/1"),
        ("authorization", auth.as_str()),
        ("traceparent", tp.as_str()),
        ("tracestate", "vendor=from-header"),
    ];
    let a = post(&s.url, &headers, serde_json::to_vec(&body).unwrap()).await;
    assert!(text(&a).contains("from the backend"), "{}", a.text());
    assert!(s.terminate().success());
    assert_eq!(
        *seen.lock().unwrap(),
        vec![None, None],
        "a tracestate reached the backend"
    );
    let spans = receiver.spans();
    assert!(!spans.is_empty());
    for (_, span) in &spans {
        assert_eq!(span.trace_state, "", "{span:?}");
    }
}
