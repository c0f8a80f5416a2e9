//! One call to the next: an instance serves one caller only. A call runs in
//! an instance kept after its own caller's last call of the source
//! (`runtime/warm.rs`), in a never-called one a quiet server keeps ready (a
//! standby, `runtime/standby.rs`), or in a new one. What a call leaves in its
//! instance's memory never reaches another caller (principal and scopes);
//! with `warm_instances = 0`, not even the next call. A kept instance is
//! dropped after any failure; a standby is bound to the taking call's
//! deadline; both are bounded, and dropped when their source is trimmed.

mod support;

use serde_json::json;
use std::time::{Duration, Instant};
use support::swap;
use support::*;

const FROM_STANDBY: &str = "emseepea_guest_calls_from_standby_total";
const STANDBYS: &str = "emseepea_guest_standby_instances";
const WARM_CALLS: &str = "emseepea_guest_calls_warm_total";
const WARM: &str = "emseepea_guest_warm_instances";

/// Standbys alone: no instance is kept for its caller.
const NO_WARM: &str = "warm_instances = 0\n";

/// Kept instances dropped for `reason`, from a metrics text.
fn retired(metrics: &str, reason: &str) -> f64 {
    series(
        metrics,
        &format!(r#"emseepea_guest_warm_retired_total{{reason="{reason}"}}"#),
    )
}

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
/// what it found there: with no instance kept for its caller, alice and bob,
/// in turn, find nothing, call after call, whether the instance was made for
/// the call or kept ready for it.
#[tokio::test]
async fn nothing_a_call_leaves_in_its_instance_reaches_the_next_call() {
    let s = remembering_server(NO_WARM);
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

/// Instances kept for their caller (the default): a guest that keeps its
/// last caller's URI and name in a global shows them to that caller's next
/// call, and to no one else: not to bob, not to alice holding a token with
/// other scopes, however the calls interleave. (Anonymous callers, who
/// cannot be told apart, never reuse one: `mcp/caller.rs`.)
#[tokio::test]
async fn a_guest_remembering_its_last_caller_shows_it_to_no_other_caller() {
    let s = server()
        .config(ADMIN)
        .hostile("mem", "remember", "")
        .start();
    let admin = admin_url(&s);
    let alice = s.token(Some("alice"), "hostile:read");
    let alice_wider = s.token(Some("alice"), "hostile:read other:read");
    let bob = s.token(Some("bob"), "hostile:read");
    let callers = [
        ("alice", Some(&alice)),
        ("bob", Some(&bob)),
        ("alice-wider", Some(&alice_wider)),
    ];
    let mut last: std::collections::HashMap<&str, String> = Default::default();
    for i in 0..24 {
        // alice twice as often, and twice in a row: her instance is reused.
        let (who, token) = callers[[0, 0, 1, 2, 0, 1][i % 6]];
        let uri = format!("hostile://mem/{who}-{i}");
        let a = modern(
            &s.url,
            token.map(String::as_str),
            json!("r"),
            "resources/read",
            json!({ "uri": uri }),
        )
        .await;
        assert_eq!(a.status, 200, "{}", a.text());
        let text = a.json()["result"]["contents"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned();
        match last.get(who) {
            // Its own last call, or a fresh instance: nothing of anyone else's.
            Some(mine) => assert!(
                text == "remembered nothing" || text == format!("remembered {mine}"),
                "call {i} ({who}) saw {text:?}"
            ),
            _ => assert_eq!(text, "remembered nothing", "call {i} ({who})"),
        }
        let subject = if who == "bob" { "bob" } else { "alice" };
        last.insert(who, format!("HOSTILE-SECRET {uri} of {subject}"));
    }
    // alice's calls in a row ran in her kept instance.
    assert!(
        metric(&admin, WARM_CALLS).await >= 4.0,
        "no instance was reused"
    );
    assert!(metric(&admin, WARM).await >= 1.0);
}

/// A guest that ruins its own state on one call (here: every later call in
/// that instance traps, as after scribbling over its heap) harms no other
/// caller, and its own caller only until the failed call drops the instance.
#[tokio::test]
async fn a_guest_that_ruins_its_state_harms_only_its_own_next_call() {
    let s = server().config(ADMIN).hostile("h", "smash", "").start();
    let admin = admin_url(&s);
    let alice = s.token(Some("alice"), "hostile:read");
    let bob = s.token(Some("bob"), "hostile:read");
    assert_eq!(read_text(&s, &alice, "hostile://h/smash").await, "smashed");
    for i in 0..3 {
        assert_eq!(
            read_text(&s, &bob, &format!("hostile://h/b{i}")).await,
            "whole"
        );
    }
    // alice's kept instance traps once; the trap drops it.
    let a = modern(
        &s.url,
        Some(&alice),
        json!("r"),
        "resources/read",
        json!({ "uri": "hostile://h/after" }),
    )
    .await;
    assert!(a.json()["error"].is_object(), "{}", a.text());
    assert!(!a.text().contains("HOSTILE-SECRET"), "{}", a.text());
    assert_eq!(read_text(&s, &alice, "hostile://h/again").await, "whole");
    assert_eq!(read_text(&s, &bob, "hostile://h/b9").await, "whole");
    assert!(metric(&admin, WARM_CALLS).await >= 3.0);
}

/// Reuse is bounded: `warm_max_calls` calls per instance, `warm_idle_ms`
/// idle, `warm_instances` in all; each drop is counted by reason.
#[tokio::test]
async fn kept_instances_are_bounded_in_calls_idle_time_and_number() {
    let s = server()
        .config(&format!(
            "{ADMIN}[runtime]\nstandby_instances = 0\nwarm_max_calls = 3\nwarm_idle_ms = 300\nwarm_instances = 2\n"
        ))
        .hostile("mem", "remember", "")
        .start();
    let admin = admin_url(&s);
    let alice = s.token(Some("alice"), "hostile:read");
    // Three calls per instance: the fourth finds nothing.
    let seen: Vec<String> = {
        let mut v = Vec::new();
        for i in 0..4 {
            v.push(read_text(&s, &alice, &format!("hostile://mem/{i}")).await);
        }
        v
    };
    assert_eq!(seen[0], "remembered nothing");
    assert!(
        seen[1].contains("mem/0 of alice") && seen[2].contains("mem/1 of alice"),
        "{seen:?}"
    );
    assert_eq!(seen[3], "remembered nothing", "{seen:?}");
    let (_, m) = get(&format!("{admin}/metrics")).await;
    assert_eq!(retired(&m, "calls"), 1.0, "{m}");
    // Idle: gone within the sweep after 300 ms.
    let until = Instant::now() + Duration::from_secs(5);
    while metric(&admin, WARM).await != 0.0 {
        assert!(Instant::now() < until, "still kept after its idle time");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        read_text(&s, &alice, "hostile://mem/idle").await,
        "remembered nothing"
    );
    // Three callers, two kept: the longest idle makes room.
    for who in ["u1", "u2", "u3"] {
        let t = s.token(Some(who), "hostile:read");
        read_text(&s, &t, "hostile://mem/x").await;
    }
    let (_, m) = get(&format!("{admin}/metrics")).await;
    assert!(series(&m, WARM) <= 2.0, "{m}");
    assert!(retired(&m, "evicted") >= 1.0, "{m}");
}

/// A guest whose heap only grows (the catalog's bump allocator never frees)
/// is kept only while it has grown less than `warm_max_growth_bytes` since
/// its first call: its memory is not kept up to its budget.
#[tokio::test]
async fn an_instance_whose_memory_keeps_growing_is_dropped() {
    let s = server()
        .config(&format!(
            "{ADMIN}[runtime]\nstandby_instances = 0\nwarm_max_growth_bytes = 65536\n"
        ))
        .source("catalog", "catalog", "[config]\nitems = \"1000\"\n")
        .start();
    let admin = admin_url(&s);
    let alice = s.token(Some("alice"), "catalog:read");
    for i in 0..40 {
        let a = modern(&s.url, Some(&alice), json!(i), "resources/list", json!({})).await;
        assert_eq!(a.status, 200, "{}", a.text());
    }
    let (_, m) = get(&format!("{admin}/metrics")).await;
    assert!(series(&m, WARM_CALLS) >= 10.0, "{m}");
    assert!(retired(&m, "grown") >= 1.0, "{m}");
    assert!(
        series(&m, "emseepea_guest_warm_memory_bytes") <= 4.0 * 1024.0 * 1024.0,
        "{m}"
    );
}

/// A result the host refuses (a read answering another URI) drops that
/// caller's kept instance: the next call starts afresh.
#[tokio::test]
async fn an_invalid_result_drops_the_kept_instance() {
    let s = server()
        .config(&format!("{ADMIN}[runtime]\nstandby_instances = 0\n"))
        .hostile(
            "f",
            "read-forged-uri",
            "[config]\nforged_uri = \"hostile://f/other\"\n",
        )
        .start();
    let admin = admin_url(&s);
    let alice = s.token(Some("alice"), "hostile:read");
    let a = modern(
        &s.url,
        Some(&alice),
        json!("r"),
        "resources/read",
        json!({ "uri": "hostile://f/1" }),
    )
    .await;
    assert!(a.json()["error"].is_object(), "{}", a.text());
    let (_, m) = get(&format!("{admin}/metrics")).await;
    assert_eq!(retired(&m, "invalid_result"), 1.0, "{m}");
    assert_eq!(series(&m, WARM), 0.0, "{m}");
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
                "{ADMIN}[runtime]\nstandby_instances = 0\npagemap_scan = {scan}\n{NO_WARM}"
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
        .config(&format!(
            "{ADMIN}[http]\nrequest_timeout_ms = 600000\n[runtime]\n{NO_WARM}"
        ))
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
            .config(&format!("{ADMIN}[runtime]\n{NO_WARM}{runtime}"))
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
        let s = remembering_server(&format!("{NO_WARM}{runtime}"));
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

/// Trimming an idle source drops its kept instances with the old copy
/// (they would keep that copy's memory images; standbys likewise, tested
/// above with reuse off); the next call instantiates afresh.
#[tokio::test]
async fn trimming_drops_the_standby() {
    let s = remembering_server("idle_trim_s = 1\nwarm_idle_ms = 600000\n");
    let admin = admin_url(&s);
    let alice = s.token(Some("alice"), "hostile:read");
    read_text(&s, &alice, "hostile://mem/1").await;
    assert_eq!(metric(&admin, WARM).await, 1.0, "alice's instance is kept");
    let until = Instant::now() + Duration::from_secs(10);
    while metric(&admin, r#"emseepea_source_trims_total{source="mem"}"#).await < 1.0 {
        assert!(Instant::now() < until, "never trimmed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, m) = get(&format!("{admin}/metrics")).await;
    // The kept instance went with the standby (it too held the old copy).
    assert_eq!(series(&m, WARM), 0.0, "{m}");
    assert_eq!(retired(&m, "relinked"), 1.0, "{m}");
    assert_eq!(
        series(&m, r#"emseepea_source_trims_total{source="mem"}"#),
        1.0,
        "{m}"
    );
    assert_eq!(series(&m, "emseepea_pool_idle_resident_bytes"), 0.0, "{m}");
    read_text(&s, &alice, "hostile://mem/2").await;
    assert_eq!(metric(&admin, FROM_STANDBY).await, 0.0);
    assert_eq!(metric(&admin, WARM).await, 1.0, "kept again");
}

/// The same for a page in JSON (`inventory-json`): text that is not a page
/// ends the call as invalid, and a page that breaks a rule retires the
/// caller's kept instance.
#[tokio::test]
async fn an_invalid_json_page_keeps_no_instance() {
    for (mode, dropped) in [("not-json", 0.0), ("key-order", 1.0)] {
        let s = server()
            .config(&format!("{ADMIN}[runtime]\nstandby_instances = 0\n"))
            .source(
                "j",
                "hostile/hostile-json",
                &format!("[config]\nname = \"j\"\nmode = \"{mode}\"\n"),
            )
            .start();
        let admin = admin_url(&s);
        let alice = s.token(Some("alice"), "hostile:read");
        let a = modern(&s.url, Some(&alice), json!(1), "resources/list", json!({})).await;
        assert!(a.json()["error"].is_object(), "{mode}: {}", a.text());
        let (_, m) = get(&format!("{admin}/metrics")).await;
        assert_eq!(retired(&m, "invalid_result"), dropped, "{mode}: {m}");
        assert_eq!(series(&m, WARM), 0.0, "{mode}: {m}");
    }
}
