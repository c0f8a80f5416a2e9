//! Property tests of introspection answers, against a local endpoint (`prop_*`, see crate::fuzz).

use super::*;
use crate::fuzz::{json, object_with, time_is_up};
use proptest::prelude::*;
use serde_json::json;
use std::sync::{Arc, LazyLock, Mutex};

const RESOURCE: &str = "https://r.example/mcp";
const ISSUER: &str = "https://as.example";

/// The introspection endpoint's next answer: status and body bytes.
type Answer = Arc<Mutex<(u16, Vec<u8>)>>;

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
});

/// A local introspection endpoint answering whatever the test sets, and
/// an introspector pointed at it.
static ENDPOINT: LazyLock<(Answer, Introspector)> = LazyLock::new(|| {
    let answer: Answer = Arc::new(Mutex::new((200, b"{}".to_vec())));
    let listener = RUNTIME
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("http://{}/introspect", listener.local_addr().unwrap());
    let served = answer.clone();
    RUNTIME.spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let served = served.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |_req| {
                    let (status, body) = served.lock().unwrap().clone();
                    let mut resp =
                        http::Response::new(http_body_util::Full::new(bytes::Bytes::from(body)));
                    *resp.status_mut() = http::StatusCode::from_u16(status).unwrap();
                    resp.headers_mut().insert(
                        http::header::CONTENT_TYPE,
                        http::HeaderValue::from_static("application/json"),
                    );
                    async move { Ok::<_, std::convert::Infallible>(resp) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    let config: AuthConfig = toml::from_str(&format!(
        "mode = \"introspection\"\nauthorization_servers = [\"{ISSUER}\"]\n\
         [introspection]\nendpoint = \"{url}\"\nclient_id = \"rs\"\nclient_secret = \"x\"\nissuer = \"{ISSUER}\"\n"
    ))
    .unwrap();
    let crate::auth::config::AuthMethod::Introspection(c) = &config.method else {
        unreachable!("mode introspection reads [auth.introspection]")
    };
    let introspector = Introspector::new(c, &config, RESOURCE).unwrap();
    (answer, introspector)
});

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn introspect(status: u16, body: Vec<u8>) -> Result<Verified, VerifyError> {
    // One answer at a time: the endpoint is shared by the tests, which run
    // in parallel, and another test's answer set between this one's and its
    // request made a past `exp` look active (seen under load).
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (answer, introspector) = &*ENDPOINT;
    *answer.lock().unwrap() = (status, body);
    // A new token each time: inactive answers are remembered per token
    // (`lookups.rs`), and each case is its own answer.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    RUNTIME.block_on(introspector.verify(&format!("some-token-{n}"), None))
}

fn active() -> Map<String, Value> {
    json!({"active": true, "iss": ISSUER, "aud": RESOURCE, "exp": now() + 600,
           "sub": "alice", "client_id": "app", "scope": "a"})
    .as_object()
    .unwrap()
    .clone()
}

#[test]
fn an_active_token_verifies() {
    let v = introspect(200, serde_json::to_vec(&active()).unwrap()).unwrap();
    assert_eq!(v.principal.subject.as_deref(), Some("alice"));
}

/// An `exp` in the past is expired whether it is written as an integer, a
/// fraction or a negative number (found by prop_any_introspection_answer:
/// only integers were read, anything else counted as "no exp").
#[test]
fn a_past_exp_of_any_numeric_form_is_expired() {
    let past = now() - 600;
    for exp in [json!(past), json!(past as f64 + 0.5), json!(-5)] {
        let mut m = active();
        m.insert("exp".into(), exp.clone());
        let r = introspect(200, serde_json::to_vec(&m).unwrap());
        assert!(matches!(r, Err(VerifyError::Invalid(_))), "exp {exp}");
    }
    let future = now() + 600;
    let mut m = active();
    m.insert("exp".into(), json!(future as f64 + 0.5));
    let v = introspect(200, serde_json::to_vec(&m).unwrap()).unwrap();
    assert_eq!(v.expires_at, future);
}

proptest! {
    /// Whatever the introspection endpoint answers, the token is either
    /// accepted by every rule (active, issuer, audience, expiry, subject)
    /// or refused: invalid when the endpoint said so in a well-formed
    /// answer, unavailable when the answer is not one.
    #[test]
    fn prop_any_introspection_answer(
        status in prop_oneof![4 => Just(200u16), 1 => Just(401u16), 1 => Just(503u16)],
        body in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..100),
            json(3).prop_map(|v| serde_json::to_vec(&v).unwrap()),
            (object_with(&["active", "iss", "aud", "exp", "sub", "client_id", "scope", "scp"], 0.15),
             proptest::sample::subsequence(vec!["active", "iss", "aud", "exp", "sub"], 0..=1))
                .prop_map(|(overrides, removed)| {
                    let mut m = active();
                    for k in removed { m.remove(k); }
                    m.extend(overrides);
                    serde_json::to_vec(&m).unwrap()
                }),
        ],
    ) {
        if time_is_up() { return Ok(()); }
        let parsed: Option<Map<String, Value>> = serde_json::from_slice(&body).ok();
        let r = introspect(status, body);
        match (&r, parsed) {
            (Ok(v), Some(m)) => {
                prop_assert_eq!(status, 200);
                prop_assert_eq!(m.get("active"), Some(&json!(true)));
                prop_assert_eq!(m.get("iss"), Some(&json!(ISSUER)));
                let aud_ok = match m.get("aud") {
                    Some(Value::String(a)) => a == RESOURCE,
                    Some(Value::Array(a)) => a.contains(&json!(RESOURCE)),
                    _ => false,
                };
                prop_assert!(aud_ok);
                let exp = m.get("exp").and_then(Value::as_f64);
                prop_assert!(exp.is_none_or(|e| e > (now() - 5) as f64), "exp {:?}", exp);
                prop_assert!(v.expires_at <= now() + 3600);
                prop_assert!(exp.is_none_or(|e| v.expires_at as f64 <= e), "cached past exp {:?}", exp);
                if let Some(s) = &v.principal.subject {
                    prop_assert!(crate::auth::valid_subject(s));
                }
            }
            (Ok(_), None) => prop_assert!(false, "accepted an answer that is not a JSON object"),
            (Err(VerifyError::Invalid(_)), parsed) => {
                prop_assert!(status == 200 && parsed.is_some(), "invalid only for a well-formed answer");
            }
            (Err(VerifyError::Unavailable(e)), parsed) => {
                prop_assert!(status != 200 || parsed.is_none(), "{}", e);
            }
        }
    }
}
