//! Outbound HTTP's rows of the isolation checklist (`checklist.rs`).

use super::Http;
use crate::runtime::capabilities::checklist::{Check, Outcome, Row, logged, pair, text_outcome};
use crate::runtime::capabilities::harness::{Harness, ReadFailure, manifest};
use crate::runtime::config::SourceManifest;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A backend on 127.0.0.1 that reads each request whole (by its
/// `content-length`) and answers "hi".
async fn backend() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(answer(socket));
        }
    });
    port
}

async fn answer(mut socket: TcpStream) {
    let mut seen = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    let body_start = loop {
        let Ok(n) = socket.read(&mut buf).await else {
            return;
        };
        if n == 0 {
            return;
        }
        seen.extend_from_slice(&buf[..n]);
        if let Some(i) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&seen[..body_start]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut got = seen.len() - body_start;
    while got < length {
        match socket.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => got += n,
        }
    }
    let _ = socket
        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nhi")
        .await;
}

/// A listener that accepts and never answers; each accepted socket is sent
/// on the channel (kept open by whoever receives it).
async fn silent() -> (u16, tokio::sync::mpsc::UnboundedReceiver<TcpStream>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let _ = tx.send(socket);
        }
    });
    (port, rx)
}

/// The hostile guest in `mode`, granted `http://127.0.0.1:PORT`.
fn granted(mode: &str, port: u16, config: &str, rest: &str) -> SourceManifest {
    manifest(
        mode,
        &format!("{config}\n[grants]\nhttp = [\"http://127.0.0.1:{port}\"]\n{rest}"),
    )
}

fn verdict(report: Result<String, ReadFailure>) -> Outcome {
    match report {
        Ok(r) if r.starts_with("200 ") || r.contains("refused=0 ") => Outcome::Served(r),
        Ok(r) => Outcome::Stopped(r),
        Err(e) => Outcome::Stopped(e.to_string()),
    }
}

pub fn rows(row: Row) -> Check {
    match row {
        // A 32 MiB call whose grant allows 64 MiB bodies: the body is the
        // call's memory, charged frame by frame before it is kept.
        Row::Memory => {
            let probe = |bytes: usize| async move {
                let port = backend().await;
                let mut harness = Harness::new("");
                harness.memory_bytes = 32 << 20;
                let m = granted(
                    "fetch",
                    port,
                    &format!("url = \"http://127.0.0.1:{port}/\"\nbody_bytes = \"{bytes}\""),
                    "[grants.http_limits]\nmax_request_bytes = 67108864\n",
                );
                verdict(harness.read::<Http>(&m, "hostile://x/1").await)
            };
            pair(probe(1 << 20), probe(40 << 20))
        }
        // Requests to a backend that never answers stay in flight.
        Row::Handles => {
            let probe = |count: usize| async move {
                let (port, _accepted) = silent().await;
                let harness = Harness::new("");
                let m = granted(
                    "http-flood",
                    port,
                    &format!("url = \"http://127.0.0.1:{port}/\"\ncount = \"{count}\""),
                    "[handles]\nhttp_requests = 4\n",
                );
                verdict(harness.read::<Http>(&m, "hostile://x/1").await)
            };
            pair(probe(4), probe(5))
        }
        // An ungranted URI is logged: the guest's text.
        Row::LogText => {
            let probe = |path: String| async move {
                let harness = Harness::new("");
                let url = format!("http://127.0.0.1:1/{path}");
                let m = manifest("fetch", &format!("url = {url:?}\n"));
                let request_id = harness.request_id.clone();
                let (_, lines) = logged(harness.read::<Http>(&m, "hostile://x/1")).await;
                text_outcome(&lines, &url, &request_id)
            };
            pair(probe("plain-path".into()), probe("x".repeat(20_000)))
        }
        Row::PoolShare => Check::NotApplicable(
            "no pool: every request dials its own connection (send.rs) and nothing is \
             kept between requests, calls or callers; what one call holds is bounded by \
             the Handles row",
        ),
        // Source A's grant is one backend; the other is another source's.
        Row::SourceIsolation => {
            let probe = |own: bool| async move {
                let (mine, theirs) = (backend().await, backend().await);
                let harness = Harness::new("");
                let target = if own { mine } else { theirs };
                let m = granted(
                    "fetch",
                    mine,
                    &format!("url = \"http://127.0.0.1:{target}/\""),
                    "",
                );
                verdict(harness.read::<Http>(&m, "hostile://x/1").await)
            };
            pair(probe(true), probe(false))
        }
        // A request the backend never answers: once the call is dropped (as
        // the server drops a cancelled call), the backend sees its
        // connection closed.
        Row::Cancellation => {
            let probe = |cancelled: bool| async move {
                if !cancelled {
                    let port = backend().await;
                    let harness = Harness::new("");
                    let m = granted(
                        "fetch",
                        port,
                        &format!("url = \"http://127.0.0.1:{port}/\""),
                        "",
                    );
                    return verdict(harness.read::<Http>(&m, "hostile://x/1").await);
                }
                let (port, mut accepted) = silent().await;
                let harness = Harness::new("");
                let m = granted(
                    "fetch",
                    port,
                    &format!("url = \"http://127.0.0.1:{port}/\""),
                    "",
                );
                let mut socket = tokio::select! {
                    r = harness.read::<Http>(&m, "hostile://x/1") => {
                        return Outcome::Served(format!("the call ended by itself: {r:?}"));
                    }
                    s = accepted.recv() => s.unwrap(),
                };
                harness.cancel.cancel();
                // Dropped with the select above: the call's store is gone.
                let mut buf = [0u8; 4096];
                let closed = tokio::time::timeout(Duration::from_secs(5), async {
                    loop {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(_) => {}
                        }
                    }
                })
                .await;
                match closed {
                    Ok(()) => Outcome::Stopped("the backend saw its connection closed".into()),
                    Err(_) => Outcome::Served("the connection outlived the call".into()),
                }
            };
            pair(probe(false), probe(true))
        }
    }
}
