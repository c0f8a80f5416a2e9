//! Every guest call runs under a budget. One test per budget, each against a
//! real hostile guest: the client gets a generic -32603 with no guest detail,
//! the log has the typed reason, and the next request on the same server
//! succeeds. A call whose client disconnects stops its guest.

mod support;
use serde_json::json;
use std::io::Write;
use std::time::{Duration, Instant};
use support::*;

const SCOPE: &str = "hostile:read catalog:read";

/// Read `uri` (2026-07-28) with a token holding both scopes.
async fn read(s: &Server, token: &str, uri: &str) -> Answer {
    modern(
        &s.url,
        Some(token),
        json!("r"),
        "resources/read",
        json!({ "uri": uri }),
    )
    .await
}

/// A server with one misbehaving source and a healthy one after it.
fn start(mode: &str, budget: &str) -> Server {
    start_with(mode, budget, "")
}

/// `start` with more server config.
fn start_with(mode: &str, budget: &str, config: &str) -> Server {
    server()
        .config(config)
        .hostile("bad", mode, &format!("[budget]\n{budget}"))
        .source("catalog", "catalog", "[config]\nitems = \"20\"\n")
        .start()
}

/// Guest calls handed to a dedicated thread (`[runtime] guest_threads`).
const ON_A_GUEST_THREAD: &str =
    "[runtime]\nguest_threads = 1\nguest_threads_from_connections = 0\n";

async fn expect_budget_failure(mode: &str, budget: &str, reason: &str, method: &str) {
    expect_budget_failure_with(mode, budget, reason, method, "").await
}

async fn expect_budget_failure_with(
    mode: &str,
    budget: &str,
    reason: &str,
    method: &str,
    config: &str,
) {
    let s = start_with(mode, budget, config);
    let token = s.token(Some("alice"), SCOPE);
    let a = match method {
        "read" => read(&s, &token, "hostile://bad/1").await,
        _ => modern(&s.url, Some(&token), json!(1), "resources/list", json!({})).await,
    };
    assert_eq!(a.status, 200);
    assert_generic_internal_error(&a, &["bad", reason]);
    assert_schema(MODERN, "JSONRPCErrorResponse", &a.json());
    let line = s
        .wait_for_log(
            &[
                "guest call failed",
                "source=\"bad\"",
                &format!("reason=\"{reason}\""),
            ],
            Duration::from_secs(10),
        )
        .unwrap_or_else(|| panic!("no typed log line for {reason}:\n{}", s.log()));
    assert!(line.contains("request_id"), "{line}");
    // The server keeps serving: the very next request succeeds.
    let ok = read(&s, &token, "catalog://catalog/items/0000000003").await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(
        ok.json()["result"]["contents"][0]["text"],
        "Item 3 of the catalog catalog.\n"
    );
}

#[tokio::test]
async fn fuel_exhaustion() {
    expect_budget_failure("loop", "fuel = 20_000_000", "fuel_exhausted", "read").await;
}

#[tokio::test]
async fn fuel_exhaustion_in_list() {
    expect_budget_failure("loop", "fuel = 20_000_000", "fuel_exhausted", "list").await;
}

#[tokio::test]
async fn deadline_of_a_busy_loop() {
    expect_budget_failure(
        "loop",
        "fuel = 1_000_000_000_000\nmax_duration_ms = 300",
        "deadline",
        "read",
    )
    .await;
}

#[tokio::test]
async fn on_a_guest_thread_budgets_hold() {
    for (budget, reason, method) in [
        (
            "fuel = 1_000_000_000_000\nmax_duration_ms = 300",
            "deadline",
            "read",
        ),
        ("fuel = 20_000_000", "fuel_exhausted", "list"),
    ] {
        expect_budget_failure_with("loop", budget, reason, method, ON_A_GUEST_THREAD).await;
    }
}

/// The epoch ticker parks after a second without guest calls; the next
/// call must wake it, or a busy loop runs on until its fuel is gone (here
/// seconds after its 300 ms deadline) and fails as `fuel_exhausted`.
#[tokio::test]
async fn deadline_of_a_busy_loop_after_the_ticker_slept() {
    // Fuel for far more than 300 ms of the loop: 5e9 ran out in 291 ms
    // on a fast machine, and then fuel, not the deadline, stopped it.
    let s = start("loop", "fuel = 100_000_000_000\nmax_duration_ms = 300");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let token = s.token(Some("alice"), SCOPE);
    let a = read(&s, &token, "hostile://bad/1").await;
    assert_generic_internal_error(&a, &["bad"]);
    s.wait_for_log(
        &["guest call failed", "source=\"bad\"", "reason=\"deadline\""],
        Duration::from_secs(10),
    )
    .unwrap_or_else(|| panic!("not stopped at its deadline:\n{}", s.log()));
}

#[tokio::test]
async fn deadline_of_a_guest_spinning_on_the_clock() {
    expect_budget_failure(
        "spin",
        "fuel = 1_000_000_000_000\nmax_duration_ms = 300",
        "deadline",
        "read",
    )
    .await;
}

#[tokio::test]
async fn deadline_of_a_guest_blocked_in_a_host_call() {
    expect_budget_failure("sleep", "max_duration_ms = 300", "deadline", "read").await;
}

#[tokio::test]
async fn memory_cap() {
    expect_budget_failure("memory", "memory_bytes = 33_554_432", "memory_cap", "read").await;
}

#[tokio::test]
async fn stack_overflow() {
    expect_budget_failure("recurse", "", "stack_overflow", "read").await;
}

#[tokio::test]
async fn trap() {
    expect_budget_failure("trap", "", "trap", "read").await;
}

#[tokio::test]
async fn source_error_detail_stays_in_the_log() {
    let s = start("source-error", "");
    let token = s.token(Some("alice"), SCOPE);
    let a = read(&s, &token, "hostile://bad/1").await;
    assert_generic_internal_error(&a, &["bad", "db-7"]);
    s.expect_log(&["HOSTILE-SECRET backend exploded at db-7"]);
}

#[tokio::test]
async fn a_stopped_deadline_comes_within_a_few_ticks() {
    // Not a timing assertion on the machine: the budget says 300 ms and the
    // error must not wait for the 30 s request deadline.
    let s = start("loop", "fuel = 1_000_000_000_000\nmax_duration_ms = 300");
    let token = s.token(Some("alice"), SCOPE);
    let started = Instant::now();
    let a = read(&s, &token, "hostile://bad/1").await;
    assert_generic_internal_error(&a, &[]);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the deadline did not stop the guest"
    );
}

/// Send a request on a raw socket, then hang up before the answer.
fn send_and_hang_up(s: &Server, token: &str, uri: &str) {
    let body = serde_json::to_vec(&json!({"jsonrpc":"2.0","id":"gone","method":"resources/read","params":{"uri":uri,"_meta":modern_meta()}})).unwrap();
    let mut sock = std::net::TcpStream::connect(s.host_port()).unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: {MODERN}\r\nMcp-Method: resources/read\r\nMcp-Name: {uri}\r\nAuthorization: Bearer {token}\r\n\
         Content-Length: {}\r\n\r\n",
        s.host_port(),
        body.len()
    );
    sock.write_all(head.as_bytes()).unwrap();
    sock.write_all(&body).unwrap();
    assert!(
        s.wait_for_log(
            &["source=\"bad\"", "call=\"read\""],
            Duration::from_millis(1)
        )
        .is_none()
    );
    std::thread::sleep(Duration::from_millis(400));
    drop(sock);
}

#[tokio::test]
async fn a_client_disconnect_stops_the_guest() {
    expect_a_disconnect_to_stop_the_guest("").await;
}

/// The call runs on another thread's runtime: the request's future that
/// waits for it is what the disconnect drops, and the call must go too.
#[tokio::test]
async fn on_a_guest_thread_a_client_disconnect_stops_the_guest() {
    expect_a_disconnect_to_stop_the_guest(ON_A_GUEST_THREAD).await;
}

async fn expect_a_disconnect_to_stop_the_guest(config: &str) {
    let s = start_with(
        "loop",
        "fuel = 1_000_000_000_000\nmax_duration_ms = 60000",
        config,
    );
    let token = s.token(Some("alice"), SCOPE);
    send_and_hang_up(&s, &token, "hostile://bad/1");
    let line = s
        .wait_for_log(
            &[
                "guest call cancelled",
                "source=\"bad\"",
                "request_id=\"\\\"gone\\\"\"",
            ],
            Duration::from_secs(5),
        )
        .unwrap_or_else(|| {
            panic!(
                "the guest was not stopped after the disconnect:\n{}",
                s.log()
            )
        });
    // The cancellation happened about when the client left, not at the deadline.
    let elapsed: u64 = line
        .split("elapsed_us=")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(elapsed < 10_000_000, "{line}");
    assert!(s.log_lines_with("guest call failed") == 0, "{}", s.log());
    let ok = read(&s, &token, "catalog://catalog/items/0000000001").await;
    assert_eq!(ok.status, 200);
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Issue 9.7: the `deadline-ms` a guest was handed was the request's (here
/// ten minutes away) while the host stopped it at the source's cap, so a
/// backend given that deadline worked on long after the guest was gone.
/// Now it is the deadline the host enforces: min(request, cap).
#[tokio::test(flavor = "multi_thread")]
async fn the_deadline_a_guest_is_given_is_the_one_enforced() {
    const CAP_MS: u64 = 1_500;
    let s = server()
        .config("[http]\nrequest_timeout_ms = 600000\n")
        .hostile(
            "ctx",
            "context",
            &format!("[budget]\nmax_duration_ms = {CAP_MS}\n"),
        )
        .start();
    let token = s.token(Some("alice"), "hostile:read");
    let before = unix_ms();
    let a = read(&s, &token, "hostile://ctx/1").await;
    let after = unix_ms();
    assert_eq!(a.status, 200, "{}", a.text());
    let text = a.json()["result"]["contents"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let context: serde_json::Value = serde_json::from_str(&text).unwrap();
    let given = context["deadlineMs"].as_u64().unwrap();
    // The call started between `before` and `after`; its deadline is the
    // cap from then (1 ms of rounding either way).
    assert!(
        given + 1 >= before + CAP_MS && given <= after + CAP_MS + 1,
        "deadline-ms {given} is not the {CAP_MS} ms cap from the call's start ({before}..{after})"
    );

    // A request deadline shorter than the cap is passed on unchanged.
    let s = server()
        .config("[http]\nrequest_timeout_ms = 3000\n")
        .hostile("ctx", "context", "[budget]\nmax_duration_ms = 600000\n")
        .start();
    let token = s.token(Some("alice"), "hostile:read");
    let before = unix_ms();
    let a = read(&s, &token, "hostile://ctx/1").await;
    let after = unix_ms();
    assert_eq!(a.status, 200, "{}", a.text());
    let text = a.json()["result"]["contents"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let given = serde_json::from_str::<serde_json::Value>(&text).unwrap()["deadlineMs"]
        .as_u64()
        .unwrap();
    assert!(
        given + 1 >= before + 3_000 && given <= after + 3_000 + 1,
        "deadline-ms {given} is not the request's ({before}..{after} + 3000)"
    );
}
