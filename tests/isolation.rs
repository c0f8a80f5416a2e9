//! One call to the next: every guest call runs in a fresh instance, also
//! when a quiet server keeps a never-called one ready for it (a standby,
//! `runtime/standby.rs`). What a call leaves in its instance's memory never
//! reaches another call or caller; a standby is bound to the taking call's
//! deadline; it is bounded (`[runtime] standby_instances`, one per source),
//! made only while the server is not busy, and dropped when its source is
//! trimmed.

mod support;

use serde_json::json;
use std::time::{Duration, Instant};
use support::swap;
use support::*;

const FROM_STANDBY: &str = "emseepea_guest_calls_from_standby_total";
const STANDBYS: &str = "emseepea_guest_standby_instances";

async fn metric(admin: &str, name: &str) -> f64 {
    let (_, m) = get(&format!("{admin}/metrics")).await;
    series(&m, name)
}

/// Poll until the standby gauge is `want` (it is made after the response).
async fn standbys_become(admin: &str, want: f64) {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let now = metric(admin, STANDBYS).await;
        if now == want {
            return;
        }
        assert!(
            Instant::now() < until,
            "{now} standby instances, expected {want}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn read_text(s: &Server, token: &str, uri: &str) -> String {
    let a = modern(
        &s.url,
        Some(token),
        json!("r"),
        "resources/read",
        json!({ "uri": uri }),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    a.json()["result"]["contents"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", a.text()))
        .to_owned()
}

fn remembering_server(runtime: &str) -> Server {
    server()
        .config(&format!("{ADMIN}[runtime]\n{runtime}"))
        .hostile("mem", "remember", "")
        .start()
}

/// A guest that leaves each caller's URI and name in its memory and answers
/// what it found there: alice and bob, in turn, find nothing, call after
/// call, whether the instance was made for the call or kept ready for it.
#[tokio::test]
async fn nothing_a_call_leaves_in_its_instance_reaches_the_next_call() {
    let s = remembering_server("");
    let admin = admin_url(&s);
    let alice = s.token(Some("alice"), "hostile:read");
    let bob = s.token(Some("bob"), "hostile:read");
    for i in 0..20 {
        let (who, token) = if i % 2 == 0 {
            ("alice", &alice)
        } else {
            ("bob", &bob)
        };
        // Let the standby for this call be made (after the last response).
        if i > 0 {
            standbys_become(&admin, 1.0).await;
        }
        let text = read_text(&s, token, &format!("hostile://mem/{who}-{i}")).await;
        assert_eq!(text, "remembered nothing", "call {i} ({who})");
    }
    // All but the first (no call before it made one) took a standby.
    assert_eq!(metric(&admin, FROM_STANDBY).await, 19.0);
}

/// Memory pressure does not undo the reset. While alice's call waits in a
/// host call, with her secret on a page of its own, the kernel pages the
/// whole server out to swap (as memory pressure would). A reset that only
/// rewrote the pages still in memory (wasmtime before 50: `PAGEMAP_SCAN`
/// for pages both written and present) would leave hers in the slot, and
/// the next instance there would swap it back in for bob. Both resets are
/// tried: with the scan (the default) and `pagemap_scan = false`.
#[tokio::test]
async fn a_call_s_memory_paged_out_to_swap_is_reset_all_the_same() {
    let _swap = swap::Swap::ensure();
    for scan in [true, false] {
        let s = server()
            .config(&format!(
                "{ADMIN}[runtime]\nstandby_instances = 0\npagemap_scan = {scan}\n"
            ))
            .hostile(
                "vault",
                "vault",
                "[budget]\nmax_duration_ms = 20000\n[config]\ndelay_ms = \"1500\"\n",
            )
            .start();
        let alice = s.token(Some("alice"), "hostile:read");
        let bob = s.token(Some("bob"), "hostile:read");
        // Warm: the slot has held an instance before.
        assert_eq!(
            read_text(&s, &bob, "hostile://vault/warm").await,
            "remembered nothing",
            "pagemap_scan = {scan}"
        );
        let pid = s.pid();
        let url = s.url.clone();
        let call = tokio::spawn(async move {
            let a = modern(
                &url,
                Some(&alice),
                json!("r"),
                "resources/read",
                json!({ "uri": "hostile://vault/alice-diary" }),
            )
            .await;
            a.json()["result"]["contents"][0]["text"].clone()
        });
        tokio::time::sleep(Duration::from_millis(700)).await;
        let before = swap::swapped_kib(pid);
        let after = tokio::task::spawn_blocking(move || swap::page_out(pid))
            .await
            .unwrap();
        assert!(
            after > before + 1024,
            "paging the server out moved only {before} -> {after} KiB to swap"
        );
        assert_eq!(
            call.await.unwrap(),
            "remembered nothing",
            "alice's call, pagemap_scan = {scan}"
        );
        for i in 0..3 {
            let text = read_text(&s, &bob, &format!("hostile://vault/bob-{i}")).await;
            assert_eq!(
                text, "remembered nothing",
                "bob's call {i}, pagemap_scan = {scan}"
            );
        }
    }
}

/// The `deadline-ms` a guest is handed, and the deadline enforced, are the
/// taking call's: a standby made a second earlier is bound anew.
#[tokio::test]
async fn a_standby_runs_under_the_deadline_of_the_call_that_takes_it() {
    const CAP_MS: u64 = 3_000;
    let s = server()
        .config(&format!("{ADMIN}[http]\nrequest_timeout_ms = 600000\n"))
        .hostile(
            "ctx",
            "context",
            &format!("[budget]\nmax_duration_ms = {CAP_MS}\n"),
        )
        .start();
    let admin = admin_url(&s);
    let token = s.token(Some("alice"), "hostile:read");
    read_text(&s, &token, "hostile://ctx/1").await;
    standbys_become(&admin, 1.0).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let before = unix_ms();
    let text = read_text(&s, &token, "hostile://ctx/2").await;
    assert_eq!(
        metric(&admin, FROM_STANDBY).await,
        1.0,
        "not from the standby"
    );
    let context: serde_json::Value = serde_json::from_str(&text).unwrap();
    let given = context["deadlineMs"].as_u64().unwrap();
    assert!(
        given + 1 >= before + CAP_MS,
        "deadline-ms {given} is the standby's, not the {CAP_MS} ms cap from the call's start ({before})"
    );
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// `standby_instances` bounds them in all (one per source at most), 0 turns
/// them off, and a busy server (here: always, `guest_threads_from_connections
/// = 0`) makes none.
#[tokio::test]
async fn standbys_are_bounded_and_only_made_on_a_quiet_server() {
    let two_sources = |runtime: &str| {
        server()
            .config(&format!("{ADMIN}[runtime]\n{runtime}"))
            .hostile("a", "remember", "")
            .hostile("b", "remember", "")
            .start()
    };
    // Within the bound: one per source.
    let s = two_sources("standby_instances = 4\n");
    let admin = admin_url(&s);
    let alice = s.token(Some("alice"), "hostile:read");
    for i in 0..3 {
        read_text(&s, &alice, &format!("hostile://a/{i}")).await;
        read_text(&s, &alice, &format!("hostile://b/{i}")).await;
    }
    standbys_become(&admin, 2.0).await;

    // A bound of one: the second source finds it taken.
    let s = two_sources("standby_instances = 1\n");
    let admin = admin_url(&s);
    let alice = s.token(Some("alice"), "hostile:read");
    read_text(&s, &alice, "hostile://a/0").await;
    standbys_become(&admin, 1.0).await;
    for i in 0..5 {
        read_text(&s, &alice, &format!("hostile://b/{i}")).await;
    }
    assert_eq!(metric(&admin, STANDBYS).await, 1.0);
    assert_eq!(metric(&admin, FROM_STANDBY).await, 0.0, "b took none");
    read_text(&s, &alice, "hostile://a/1").await;
    assert_eq!(metric(&admin, FROM_STANDBY).await, 1.0, "a took its own");

    // Off, and busy: never one.
    for runtime in [
        "standby_instances = 0\n",
        "guest_threads_from_connections = 0\n",
    ] {
        let s = remembering_server(runtime);
        let admin = admin_url(&s);
        let alice = s.token(Some("alice"), "hostile:read");
        for i in 0..10 {
            read_text(&s, &alice, &format!("hostile://mem/{i}")).await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(metric(&admin, STANDBYS).await, 0.0, "{runtime}");
        assert_eq!(metric(&admin, FROM_STANDBY).await, 0.0, "{runtime}");
    }
}

/// Trimming an idle source drops its standby with the old copy (it would
/// keep that copy's memory images); the next call instantiates afresh.
#[tokio::test]
async fn trimming_drops_the_standby() {
    let s = remembering_server("idle_trim_s = 1\n");
    let admin = admin_url(&s);
    let alice = s.token(Some("alice"), "hostile:read");
    read_text(&s, &alice, "hostile://mem/1").await;
    standbys_become(&admin, 1.0).await;
    standbys_become(&admin, 0.0).await;
    let (_, m) = get(&format!("{admin}/metrics")).await;
    assert_eq!(
        series(&m, r#"emseepea_source_trims_total{source="mem"}"#),
        1.0,
        "{m}"
    );
    assert_eq!(series(&m, "emseepea_pool_idle_resident_bytes"), 0.0, "{m}");
    read_text(&s, &alice, "hostile://mem/2").await;
    assert_eq!(metric(&admin, FROM_STANDBY).await, 0.0);
    standbys_become(&admin, 1.0).await;
}
