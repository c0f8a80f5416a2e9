//! `emseepea stdio`: MCP over newline-delimited JSON-RPC on stdin/stdout.
//! Real clients (the Python SDK's `stdio_client`, the TypeScript SDK's
//! `StdioClientTransport`, the MCP Inspector CLI) start the server from the
//! client configuration the book shows (docs/src/operating/auth.md), and a raw driver checks the rules:
//! the token from `EMSEEPEA_TOKEN`, re-verified once it expires; listings
//! without a valid token fail clearly while the rest is served; stdout
//! carries only JSON-RPC; cancellation; end of stdin and SIGTERM exit 0.

mod support;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command};
use std::sync::mpsc;
use std::time::Duration;
use support::clients::{installed, python, run_json};
use support::*;

/// The client configuration block of the book's Authentication page
/// (docs/src/operating/auth.md), verbatim.
fn readme_snippet() -> Value {
    let readme = std::fs::read_to_string(root().join("docs/src/operating/auth.md")).unwrap();
    let start = readme
        .find("<!-- stdio-client-config -->")
        .expect("the book has the stdio client configuration");
    let end = readme[start..]
        .find("<!-- /stdio-client-config -->")
        .unwrap()
        + start;
    let block = &readme[start..end];
    let json_start = block.find("```json").unwrap() + "```json".len();
    let json_end = block[json_start..].find("```").unwrap() + json_start;
    serde_json::from_str(&block[json_start..json_end]).expect("the README snippet is JSON")
}

/// The README configuration with its placeholders filled in: the binary
/// under test, the test's config file and a token.
fn client_config(config: &Path, token: Option<&str>) -> Value {
    let mut snippet = readme_snippet();
    let server = &mut snippet["mcpServers"]["emseepea"];
    assert_eq!(server["command"], "emseepea");
    assert_eq!(server["args"][0], "stdio");
    assert_eq!(server["args"][1], "--config");
    server["command"] = json!(BIN);
    server["args"][2] = json!(config.to_str().unwrap());
    assert!(server["env"]["EMSEEPEA_TOKEN"].is_string());
    match token {
        Some(t) => server["env"]["EMSEEPEA_TOKEN"] = json!(t),
        None => {
            server.as_object_mut().unwrap().remove("env");
        }
    }
    snippet
}

/// A dev token for the stdio server's audience (the config's default).
fn token(config: &Path, sub: &str, scopes: &str, ttl: u64) -> String {
    let out = Command::new(BIN)
        .args(["token", "--config"])
        .arg(config)
        .args(["--sub", sub, "--scope", scopes, "--ttl", &ttl.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// The 1,000-item catalog of tests/clients.rs, behind dev-mode auth.
fn catalog() -> Prepared {
    server()
        .config(
            "[[resources]]\nuri = \"test://static-text\"\nname = \"static-text\"\nmimeType = \"text/plain\"\ntext = \"This is the content of the static text resource.\"\n",
        )
        .source("catalog", "catalog", "[config]\nitems = \"1000\"\n")
        .source("template", "conformance/template-data", "")
        .prepare()
}

const SAMPLES: [&str; 3] = [
    "catalog://catalog/items/0000000001",
    "catalog://catalog/items/0000000500",
    "test://template/123/data",
];

fn check_traversal(out: &Value) {
    let uris: Vec<&str> = out["uris"]
        .as_array()
        .unwrap_or_else(|| panic!("{out}"))
        .iter()
        .map(|u| u.as_str().unwrap())
        .collect();
    assert_eq!(uris.len(), 1001, "{out}");
    assert_eq!(uris.iter().collect::<HashSet<_>>().len(), 1001);
    assert_eq!(uris[0], "test://static-text");
    assert_eq!(out["pages"], 21, "50 per page");
    assert_eq!(
        out["reads"][SAMPLES[1]],
        "Item 500 of the catalog catalog.\n"
    );
    assert!(
        out["reads"][SAMPLES[2]]
            .as_str()
            .unwrap()
            .contains("\"id\":\"123\"")
    );
    assert_eq!(
        out["templates"],
        json!(["catalog://catalog/items/{id}", "test://template/{id}/data"])
    );
    assert_eq!(out["missing"], -32002);
}

fn stdio_server_entry(config: &Value) -> String {
    config["mcpServers"]["emseepea"].to_string()
}

#[test]
fn python_sdk_stdio_client_runs_the_cursor_loop() {
    let p = catalog();
    let t = token(&p.config_path, "alice", "catalog:read", 3600);
    let config = client_config(&p.config_path, Some(&t));
    let mut cmd = python("py-mcp1", "mcp1_stdio_client.py");
    cmd.arg(stdio_server_entry(&config));
    for u in SAMPLES {
        cmd.args(["--read", u]);
    }
    let out = run_json(&mut cmd);
    assert_eq!(out["protocol"], "2025-11-25");
    check_traversal(&out);
}

#[test]
fn typescript_sdk_stdio_transport_runs_the_cursor_loop() {
    let p = catalog();
    let t = token(&p.config_path, "alice", "catalog:read", 3600);
    let config = client_config(&p.config_path, Some(&t));
    let node_dir = installed("tests/clients/node/node_modules");
    let out = run_json(
        Command::new("node")
            .current_dir(node_dir.parent().unwrap())
            .arg("stdio_client.mjs")
            .arg(stdio_server_entry(&config))
            .args(SAMPLES),
    );
    check_traversal(&out);
}

#[test]
fn the_inspector_cli_lists_resources_over_stdio() {
    let p = catalog();
    let t = token(&p.config_path, "alice", "catalog:read", 3600);
    let config_file = p.dir.path().join("mcp.json");
    std::fs::write(
        &config_file,
        client_config(&p.config_path, Some(&t)).to_string(),
    )
    .unwrap();
    let node_dir = installed("tests/clients/node/node_modules");
    let out = Command::new("node")
        .current_dir(node_dir.parent().unwrap())
        .arg("node_modules/@modelcontextprotocol/inspector/cli/build/cli.js")
        .args(["--cli", "--config"])
        .arg(&config_file)
        .args(["--server", "emseepea", "--method", "resources/list"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "inspector failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let start = stdout.find('{').unwrap_or_else(|| panic!("{stdout}"));
    let listed: Value = serde_json::from_str(stdout[start..].trim()).unwrap();
    let resources = listed["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 50, "the first page");
    assert_eq!(resources[0]["uri"], "test://static-text");
    assert_eq!(resources[1]["uri"], "catalog://catalog/items/0000000001");
    assert!(listed["nextCursor"].is_string());
}

/// The server driven line by line.
struct Driver {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    _prepared: Prepared,
}

impl Driver {
    fn start(prepared: Prepared, token: Option<&str>) -> Driver {
        let mut s = Driver::spawn(prepared, token);
        let init = s.call(json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}));
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
        s.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        s
    }

    /// The process, before any message.
    fn spawn(prepared: Prepared, token: Option<&str>) -> Driver {
        let mut cmd = Command::new(BIN);
        cmd.args(["stdio", "--config"])
            .arg(&prepared.config_path)
            .env(
                "EMSEEPEA_LOG",
                "info,emseepea=debug,cranelift_codegen=warn,wasmtime=warn",
            )
            .env_remove("EMSEEPEA_TOKEN")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        if let Some(t) = token {
            cmd.env("EMSEEPEA_TOKEN", t);
        }
        let mut child = cmd.spawn().unwrap();
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log2 = log.clone();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                log2.lock().unwrap().push(line);
            }
        });
        let stdin = child.stdin.take();
        Driver {
            child,
            stdin,
            lines,
            log,
            _prepared: prepared,
        }
    }

    /// A 2026-07-28 request: its version and capabilities in `_meta`.
    fn modern(&mut self, id: Value, method: &str, mut params: Value) -> Value {
        params["_meta"] = modern_meta();
        self.call(json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}))
    }

    fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next line of stdout: always one JSON-RPC message.
    fn next(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no answer; log:\n{}", self.log()));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout line not JSON ({e}): {line}"))
    }

    fn call(&mut self, message: Value) -> Value {
        self.send(message);
        self.next()
    }

    fn list(&mut self, id: u64, cursor: Option<&str>) -> Value {
        let params = cursor.map_or(json!({}), |c| json!({ "cursor": c }));
        self.call(json!({"jsonrpc":"2.0","id":id,"method":"resources/list","params":params}))
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    fn wait_for_log(&self, needle: &str) {
        for _ in 0..1000 {
            if self.log().contains(needle) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("no log line with {needle:?}:\n{}", self.log());
    }

    /// Close stdin and wait for the exit.
    fn close(mut self) -> (std::process::ExitStatus, Vec<String>) {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        (status, self.lines.try_iter().collect())
    }
}

#[test]
fn without_a_token_listings_fail_clearly_and_the_rest_is_served() {
    let mut s = Driver::start(catalog(), None);
    let listed = s.list(1, None);
    assert_eq!(listed["id"], 1);
    assert!(
        listed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("EMSEEPEA_TOKEN"),
        "{listed}"
    );
    assert_eq!(listed["error"]["data"]["reason"], "unauthorized");
    // The process keeps serving what needs no token.
    let ping = s.call(json!({"jsonrpc":"2.0","id":2,"method":"ping"}));
    assert_eq!(ping["result"], json!({}), "{ping}");
    let (status, rest) = s.close();
    assert!(status.success(), "{status}");
    assert!(rest.is_empty(), "{rest:?}");
}

#[test]
fn a_refused_token_is_reported_at_start_and_listings_fail() {
    let p = catalog();
    // Another server's audience: well-formed, correctly signed, refused.
    let out = Command::new(BIN)
        .args(["token", "--config"])
        .arg(&p.config_path)
        .args(["--sub", "mallory", "--scope", "catalog:read"])
        .args(["--audience", "http://elsewhere.example/mcp"])
        .output()
        .unwrap();
    let bad = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let mut s = Driver::start(p, Some(&bad));
    s.wait_for_log("EMSEEPEA_TOKEN was refused");
    let listed = s.list(1, None);
    assert_eq!(
        listed["error"]["data"]["reason"], "unauthorized",
        "{listed}"
    );
    assert!(!s.log().contains(&bad), "the token is never logged");
    let ping = s.call(json!({"jsonrpc":"2.0","id":2,"method":"ping"}));
    assert_eq!(ping["result"], json!({}));
    assert!(s.close().0.success());
}

#[test]
fn the_token_is_verified_again_when_it_expires() {
    let p = server()
        .auth(Some("[auth]\nmode = \"dev\"\nleeway_s = 0\n"))
        .source("catalog", "catalog", "[config]\nitems = \"3\"\n")
        .prepare();
    let t = token(&p.config_path, "alice", "catalog:read", 2);
    let mut s = Driver::start(p, Some(&t));
    s.wait_for_log("EMSEEPEA_TOKEN verified");
    let first = s.list(1, None);
    assert_eq!(
        first["result"]["resources"].as_array().map(Vec::len),
        Some(3),
        "{first}"
    );
    // Past `exp` (whole seconds) the cached verification is gone and the
    // verifier refuses the token.
    std::thread::sleep(Duration::from_millis(3100));
    let later = s.list(2, None);
    assert_eq!(later["error"]["data"]["reason"], "unauthorized", "{later}");
    assert!(s.close().0.success());
}

#[test]
fn scopes_and_sealed_cursors_hold_over_stdio() {
    let p = catalog();
    let t = token(&p.config_path, "alice", "other:scope", 3600);
    let mut s = Driver::start(p, Some(&t));
    // A token whose scopes reach no source.
    let listed = s.list(1, None);
    assert_eq!(
        listed["error"]["data"]["reason"], "insufficient_scope",
        "{listed}"
    );
    assert!(s.close().0.success());
}

#[test]
fn a_tampered_cursor_is_refused() {
    let p = catalog();
    let alice = token(&p.config_path, "alice", "catalog:read", 3600);
    let mut s = Driver::start(p, Some(&alice));
    let page = s.list(1, None);
    let cursor = page["result"]["nextCursor"].as_str().unwrap().to_owned();
    let next = s.list(2, Some(&cursor));
    assert_eq!(next["result"]["resources"].as_array().unwrap().len(), 50);
    let mut flipped = cursor.clone().into_bytes();
    let last = flipped.len() - 2;
    flipped[last] = if flipped[last] == b'A' { b'B' } else { b'A' };
    let bad = s.list(3, Some(std::str::from_utf8(&flipped).unwrap()));
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert_eq!(bad["error"]["message"], "Invalid cursor");
    assert!(s.close().0.success());
}

#[test]
fn cancellation_stops_the_guest_and_later_requests_are_answered() {
    let p = server()
        .hostile(
            "slow",
            "loop",
            "[budget]\nfuel = 1_000_000_000_000\nmax_duration_ms = 60000",
        )
        .prepare();
    let t = token(&p.config_path, "alice", "hostile:read", 3600);
    let mut s = Driver::start(p, Some(&t));
    s.send(json!({"jsonrpc":"2.0","id":"slow-1","method":"resources/read","params":{"uri":"hostile://slow/1"}}));
    s.wait_for_log("slow");
    std::thread::sleep(Duration::from_millis(300));
    s.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow-1","reason":"user"}}));
    s.wait_for_log("request cancelled; no response sent");
    // The guest itself was stopped, not just its answer dropped.
    s.wait_for_log("reason=\"cancelled\"");
    let ping = s.call(json!({"jsonrpc":"2.0","id":"p","method":"ping"}));
    assert_eq!(
        ping["id"], "p",
        "the cancelled request got no answer: {ping}"
    );
    let (status, rest) = s.close();
    assert!(status.success());
    assert!(rest.is_empty(), "{rest:?}");
}

#[test]
fn sigterm_drains_and_exits_zero() {
    let p = server()
        .hostile(
            "slow",
            "spin",
            "[budget]\nfuel = 1_000_000_000_000\nmax_duration_ms = 1500",
        )
        .prepare();
    let t = token(&p.config_path, "alice", "hostile:read", 3600);
    let mut s = Driver::start(p, Some(&t));
    s.send(json!({"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"hostile://slow/1"}}));
    // Lines are read in order: once the ping is answered, the read is in
    // flight (its spinning guest outlives the ping by far). The source's
    // name in the log proves nothing: startup's `describe` logs it.
    s.send(json!({"jsonrpc":"2.0","id":8,"method":"ping"}));
    let pong = s.next();
    assert_eq!(pong["id"], 8, "{pong}");
    let kill = Command::new("kill")
        .args(["-TERM", &s.child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    // stdin stays open: the signal alone ends the process, after the
    // in-flight read got its (deadline) answer.
    let answer = s.next();
    assert_eq!(answer["id"], 7, "{answer}");
    assert!(answer["error"].is_object(), "{answer}");
    let status = s.child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(s.log().contains("SIGTERM"));
}

#[test]
fn an_overlong_line_is_skipped_and_the_next_one_served() {
    let p = catalog();
    let mut s = Driver::start(p, None);
    // Anonymous: the unauthenticated body bound (64 KiB by default) applies.
    let ping = |id: u64, line_len: usize| {
        let head = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\",\"params\":{{\"pad\":\""
        );
        let tail = "\"}}";
        format!(
            "{head}{}{tail}",
            "x".repeat(line_len - head.len() - tail.len())
        )
    };
    let stdin = s.stdin.as_mut().unwrap();
    writeln!(stdin, "{}", ping(8, 64 * 1024)).unwrap();
    writeln!(stdin, "{}", ping(9, 64 * 1024 + 1)).unwrap();
    // Requests run concurrently, so the two answers may come in either order.
    let answers = [s.next(), s.next()];
    let obeyed = answers.iter().find(|a| a["id"] == 8);
    assert!(
        obeyed.is_some_and(|a| a.get("result").is_some()),
        "just at the bound must be served: {answers:?}"
    );
    let refused = answers.iter().find(|a| a["id"] != 8);
    assert!(
        refused.is_some_and(|a| a["error"]["code"] == -32600),
        "one byte over must be -32600: {answers:?}"
    );
    let ping = s.call(json!({"jsonrpc":"2.0","id":10,"method":"ping"}));
    assert_eq!(ping["id"], 10);
    assert!(s.close().0.success());
}

/// 2026-07-28 over stdio: no `initialize`; every request names its version
/// in `_meta`. Discovery, the whole cursor loop and a read work, and the
/// era's rules hold (capabilities required, only that version accepted).
#[test]
fn the_2026_07_28_era_is_served_without_a_handshake() {
    let p = catalog();
    let t = token(&p.config_path, "alice", "catalog:read", 3600);
    let mut s = Driver::spawn(p, Some(&t));
    let found = s.modern(json!("d"), "server/discover", json!({}));
    assert!(
        found["result"]["supportedVersions"]
            .as_array()
            .is_some_and(|v| v.contains(&json!(MODERN))),
        "{found}"
    );
    support::assert_schema(MODERN, "DiscoverResultResponse", &found);
    let mut uris = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        pages += 1;
        let params = cursor
            .as_ref()
            .map_or(json!({}), |c| json!({ "cursor": c }));
        let page = s.modern(json!(pages), "resources/list", params);
        support::assert_schema(MODERN, "ListResourcesResultResponse", &page);
        let result = &page["result"];
        for r in result["resources"].as_array().unwrap() {
            uris.push(r["uri"].as_str().unwrap().to_owned());
        }
        match result["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!((uris.len(), pages), (1001, 21));
    assert_eq!(uris.iter().collect::<HashSet<_>>().len(), 1001);
    let read = s.modern(json!("r"), "resources/read", json!({ "uri": SAMPLES[1] }));
    assert_eq!(
        read["result"]["contents"][0]["text"], "Item 500 of the catalog catalog.\n",
        "{read}"
    );
    // Without the client's capabilities, or naming a handshake version in
    // `_meta`: refused with the era's errors, and nothing else changes.
    let bare = s.call(
        json!({"jsonrpc":"2.0","id":"b","method":"resources/list","params":{
        "_meta":{"io.modelcontextprotocol/protocolVersion": MODERN}}}),
    );
    assert_eq!(bare["error"]["code"], -32602, "{bare}");
    let old = s.call(
        json!({"jsonrpc":"2.0","id":"o","method":"resources/list","params":{
        "_meta":{"io.modelcontextprotocol/protocolVersion": "2025-11-25",
                 "io.modelcontextprotocol/clientCapabilities": {}}}}),
    );
    assert!(old["error"]["code"].is_i64(), "{old}");
    assert!(old.get("result").is_none(), "{old}");
    // A handshake-era request still needs `initialize`.
    let legacy = s.list(99, None);
    assert_eq!(legacy["error"]["code"], -32600, "{legacy}");
    let (status, rest) = s.close();
    assert!(status.success());
    assert!(rest.is_empty(), "{rest:?}");
}

/// `notifications/cancelled` reaches a 2026-07-28 request (it has no session).
#[test]
fn a_2026_07_28_request_is_cancelled_over_stdio() {
    let p = server()
        .hostile(
            "slow",
            "loop",
            "[budget]\nfuel = 1_000_000_000_000\nmax_duration_ms = 60000",
        )
        .prepare();
    let t = token(&p.config_path, "alice", "hostile:read", 3600);
    let mut s = Driver::spawn(p, Some(&t));
    let mut params = json!({"uri":"hostile://slow/1"});
    params["_meta"] = modern_meta();
    s.send(json!({"jsonrpc":"2.0","id":"slow-1","method":"resources/read","params":params}));
    s.wait_for_log("slow");
    std::thread::sleep(Duration::from_millis(300));
    s.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow-1","reason":"user"}}));
    s.wait_for_log("request cancelled; no response sent");
    s.wait_for_log("reason=\"cancelled\"");
    let ping = s.modern(json!("p"), "server/discover", json!({}));
    assert_eq!(
        ping["id"], "p",
        "the cancelled request got no answer: {ping}"
    );
    let (status, rest) = s.close();
    assert!(status.success());
    assert!(rest.is_empty(), "{rest:?}");
}
