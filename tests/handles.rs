//! Handles a guest can open are bounded per call (`[handles]`): a guest
//! hoarding SQL connections and one flooding a silent origin with requests
//! it never awaits cannot take the server to its descriptor limit.

mod support;
use serde_json::{Value, json};
use std::time::Duration;
use support::*;

/// The server's open descriptors.
fn descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// `RLIMIT_NOFILE` = `limit` on a running process.
fn limit_descriptors(pid: u32, limit: u64) {
    let rlim = libc::rlimit {
        rlim_cur: limit,
        rlim_max: limit,
    };
    // SAFETY: prlimit reads `rlim` and writes nothing (old is null).
    let rc = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_NOFILE,
            &rlim,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
}

/// A local origin that accepts connections and never answers (the test
/// keeps every socket open until it ends).
async fn silent_origin() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    port
}

/// Per-call bounds the test server runs with (the defaults).
const SQL_CONNECTIONS: usize = 8;
const HTTP_REQUESTS: usize = 16;
/// Descriptors the server may open beyond its idle count while the two
/// hostile calls hold everything they can: their bounds, plus the other
/// client's connections, the blocking pool's and the calls' own (stores,
/// pipes) with room to spare.
const SLACK: usize = 48;

#[tokio::test(flavor = "multi_thread")]
async fn a_guest_hoarding_handles_cannot_exhaust_the_servers_descriptors() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db.sqlite");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("CREATE TABLE t (x INTEGER);")
        .unwrap();
    let port = silent_origin().await;
    let hold = "[budget]\nmax_duration_ms = 20000\n";
    let s = server()
        .config(&format!("[databases.main]\nfile = \"{}\"\n", db.display()))
        .hostile(
            "hoard",
            "sql-hoard",
            &format!(
                "{hold}[grants]\ndatabases = [\"main\"]\n[config]\ndatabase = \"main\"\n\
                 count = \"100000\"\nhold_ms = \"12000\"\n"
            ),
        )
        .hostile(
            "flood",
            "http-flood",
            &format!(
                "{hold}[grants]\nhttp = [\"http://127.0.0.1:{port}\"]\n[config]\n\
                 url = \"http://127.0.0.1:{port}/never\"\ncount = \"900\"\nhold_ms = \"12000\"\n"
            ),
        )
        .hostile("calm", "ok", "")
        .start();
    let pid = s.pid();
    limit_descriptors(pid, 1024);
    let token = s.token(Some("alice"), "hostile:read");
    let idle = descriptors(pid);

    let attacks: Vec<_> = ["hoard", "flood"]
        .into_iter()
        .map(|name| {
            let (url, token) = (s.url.clone(), token.clone());
            tokio::spawn(async move {
                let uri = format!("hostile://{name}/1");
                modern(
                    &url,
                    Some(&token),
                    json!(1),
                    "resources/read",
                    json!({ "uri": uri }),
                )
                .await
            })
        })
        .collect();
    let aborts: Vec<_> = attacks.iter().map(|a| a.abort_handle()).collect();

    // Until both guests hold all they could get: the host refused more
    // (with the bounds), or the process nears its limit (without).
    let mut peak = 0;
    for _ in 0..200 {
        peak = peak.max(descriptors(pid));
        let refused = s.log_lines_with("guest refused a connection") > 0
            && s.log_lines_with("outbound request refused") > 0;
        if refused || peak > 900 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Another client, while they hold it: initialize + resources/list.
    let other = async {
        let mut session = Session::open(&s.url, "2025-06-18", Some(&token)).await;
        let list = session.request("resources/list", Value::Null).await;
        assert_eq!(list.status, 200, "{}", list.text());
        assert!(
            list.json()["result"]["resources"].is_array(),
            "{}",
            list.text()
        );
    };
    let attacks_done = async {
        for a in attacks {
            a.await.unwrap();
        }
    };
    tokio::select! {
        biased;
        () = other => {}
        () = attacks_done => panic!(
            "the other client was served only once the hostile calls had ended \
             (peak {peak} descriptors)\n{}", s.log()
        ),
    }
    peak = peak.max(descriptors(pid));
    let bound = idle + SQL_CONNECTIONS + HTTP_REQUESTS + SLACK;
    eprintln!("descriptors: idle {idle}, peak under attack {peak}, bound {bound}");
    assert!(
        peak <= bound,
        "the server held {peak} descriptors under attack (idle: {idle}, bound: {bound})"
    );
    // The guests were told so by their capabilities.
    s.expect_log(&["guest refused a connection", "source=hoard"]);
    s.expect_log(&["outbound request refused", "source=flood"]);
    for a in aborts {
        a.abort();
    }
}
