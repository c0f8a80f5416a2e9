//! The end-to-end harness: start the real `emseepea` binary on 127.0.0.1
//! port 0 with a sources directory made for the test, capture its log, and
//! speak MCP to it over HTTP.
#![allow(dead_code)]

pub mod clients;
pub mod engines;
pub mod nginx;
pub mod postgres;
pub mod registry;
pub mod swap;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_emseepea");

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// A built guest: target/guests/<rel>.wasm. The guests are built by
/// `cargo xtask guests` (which `cargo xtask test` runs first).
pub fn guest(rel: &str) -> PathBuf {
    let p = root().join("target/guests").join(format!("{rel}.wasm"));
    assert!(
        p.is_file(),
        "{} is missing: run `cargo xtask guests` (or `cargo xtask test`) first",
        p.display()
    );
    p
}

/// One source of a test server: a file stem (registration order is
/// file-name order), the guest it runs and its manifest.
pub struct SourceSpec {
    pub stem: String,
    pub wasm: PathBuf,
    pub manifest: Option<String>,
}

pub struct ServerBuilder {
    sources: Vec<SourceSpec>,
    config: String,
    auth: Option<String>,
    files: Vec<(String, Vec<u8>)>,
    private_cache: bool,
}

pub fn server() -> ServerBuilder {
    ServerBuilder {
        sources: Vec::new(),
        config: String::new(),
        auth: Some("[auth]\nmode = \"dev\"\n".into()),
        files: Vec::new(),
        private_cache: false,
    }
}

impl ServerBuilder {
    pub fn source(mut self, stem: &str, guest_rel: &str, manifest: &str) -> Self {
        self.sources.push(SourceSpec {
            stem: stem.into(),
            wasm: guest(guest_rel),
            manifest: (!manifest.is_empty()).then(|| manifest.to_owned()),
        });
        self
    }

    /// A source from a component anywhere (e.g. one a test just built).
    pub fn source_file(mut self, stem: &str, wasm: &Path, manifest: &str) -> Self {
        self.sources.push(SourceSpec {
            stem: stem.into(),
            wasm: wasm.to_owned(),
            manifest: (!manifest.is_empty()).then(|| manifest.to_owned()),
        });
        self
    }

    /// A hostile source named `stem` with `mode`; `extra` is more manifest
    /// TOML (a `[config]` table in it is merged with name and mode).
    pub fn hostile(self, stem: &str, mode: &str, extra: &str) -> Self {
        let ours = format!("name = \"{stem}\"\nmode = \"{mode}\"\n");
        let manifest = if extra.contains("[config]") {
            extra.replacen("[config]", &format!("[config]\n{ours}"), 1)
        } else {
            format!("{extra}\n[config]\n{ours}")
        };
        self.source(stem, "hostile/hostile", &manifest)
    }

    /// Extra top-level TOML for the server config (before any table).
    pub fn config(mut self, toml: &str) -> Self {
        self.config.push_str(toml);
        self.config.push('\n');
        self
    }

    /// Replace the `[auth]` table (None: no auth table at all).
    pub fn auth(mut self, toml: Option<&str>) -> Self {
        self.auth = toml.map(String::from);
        self
    }

    /// A precompile cache of this test's own (`DIR/cache`, its key in
    /// `DIR/state`) instead of the one all tests share.
    pub fn private_cache(mut self) -> Self {
        self.private_cache = true;
        self
    }

    /// A file to write into the test directory (before start).
    pub fn file(mut self, name: &str, contents: impl Into<Vec<u8>>) -> Self {
        self.files.push((name.into(), contents.into()));
        self
    }

    /// Write the directory and the config; return them without starting.
    pub fn prepare(self) -> Prepared {
        let dir = tempfile::tempdir().unwrap();
        let sources = dir.path().join("sources");
        std::fs::create_dir_all(&sources).unwrap();
        for s in &self.sources {
            std::fs::copy(&s.wasm, sources.join(format!("{}.wasm", s.stem))).unwrap();
            if let Some(m) = &s.manifest {
                std::fs::write(sources.join(format!("{}.toml", s.stem)), m).unwrap();
            }
        }
        for (name, contents) in &self.files {
            std::fs::write(dir.path().join(name), contents).unwrap();
        }
        // Tests share one cache (and so its key, kept outside it), so a
        // guest is compiled once per build, not once per test.
        let cache = if self.private_cache {
            "cache_dir = \"cache\"\n".to_owned()
        } else {
            format!(
                "cache_dir = \"{}\"\ncache_key_file = \"{}\"\n",
                root().join("target/test-cache").display(),
                root().join("target/test-cache.key").display()
            )
        };
        let config = format!(
            "sources_dir = \"sources\"\nstate_dir = \"state\"\n{cache}{}\n{}",
            self.config,
            self.auth.unwrap_or_default()
        );
        let config_path = dir.path().join("emseepea.toml");
        std::fs::write(&config_path, config).unwrap();
        Prepared { dir, config_path }
    }

    pub fn start(self) -> Server {
        self.prepare().start()
    }
}

pub struct Prepared {
    pub dir: tempfile::TempDir,
    pub config_path: PathBuf,
}

impl Prepared {
    /// Run `emseepea check`: (success, stdout + stderr).
    pub fn check(&self) -> (bool, String) {
        let out = Command::new(BIN)
            .args(["check", "--config"])
            .arg(&self.config_path)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    }

    pub fn start(self) -> Server {
        Server::spawn(self, "127.0.0.1:0", &[])
    }

    /// Start on a given address (a restart on the port a proxy knows).
    pub fn start_on(self, listen: &str) -> Server {
        Server::spawn(self, listen, &[])
    }

    /// Start with more environment variables.
    pub fn start_with_env(self, env: &[(&str, &str)]) -> Server {
        Server::spawn(self, "127.0.0.1:0", env)
    }
}

pub struct Server {
    child: Child,
    pub url: String,
    pub prepared: Prepared,
    log: Arc<Mutex<Vec<String>>>,
}

impl Server {
    fn spawn(prepared: Prepared, listen: &str, env: &[(&str, &str)]) -> Server {
        let mut child = Command::new(BIN)
            .args(["serve", "--listen", listen, "--config"])
            .arg(&prepared.config_path)
            .envs(env.iter().copied())
            .env(
                "EMSEEPEA_LOG",
                "info,emseepea=debug,cranelift_codegen=warn,wasmtime=warn",
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn emseepea");
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let log2 = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                log2.lock().unwrap().push(line);
            }
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("emseepea listening on ") {
                    let _ = tx.send(url.to_owned());
                }
            }
        });
        // Generous: a cold precompile cache on a busy 2-core machine compiles the
        // 12 MB JavaScript guest for well over a minute.
        let url = match rx.recv_timeout(Duration::from_secs(300)) {
            Ok(url) => url,
            Err(_) => {
                let _ = child.kill();
                std::thread::sleep(Duration::from_millis(200));
                panic!("server did not start:\n{}", log.lock().unwrap().join("\n"));
            }
        };
        Server {
            child,
            url,
            prepared,
            log,
        }
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// Wait until the log has a line containing every needle.
    pub fn wait_for_log(&self, needles: &[&str], timeout: Duration) -> Option<String> {
        let start = Instant::now();
        loop {
            if let Some(line) = self
                .log
                .lock()
                .unwrap()
                .iter()
                .find(|l| needles.iter().all(|n| l.contains(n)))
            {
                return Some(line.clone());
            }
            if start.elapsed() > timeout {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The log line containing every needle, waited for up to 5 s (stderr
    /// is read on its own thread); panics with the whole log if none comes.
    pub fn expect_log(&self, needles: &[&str]) -> String {
        self.wait_for_log(needles, Duration::from_secs(5))
            .unwrap_or_else(|| panic!("no log line with {needles:?}:\n{}", self.log()))
    }

    pub fn log_lines_with(&self, needle: &str) -> usize {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(needle))
            .count()
    }

    /// A dev token for this server's audience.
    pub fn token(&self, sub: Option<&str>, scopes: &str) -> String {
        let mut cmd = Command::new(BIN);
        cmd.args(["token", "--config"])
            .arg(&self.prepared.config_path)
            .args(["--scope", scopes, "--audience", &self.url]);
        if let Some(s) = sub {
            cmd.args(["--sub", s]);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "token: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Send SIGTERM and wait for the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        unsafe_kill(self.child.id(), "TERM");
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "server did not exit after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn host_port(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap()
            .to_owned()
    }
}

fn unsafe_kill(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status();
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    }
}

/// A config section that opens the admin listener (`/metrics`, `/readyz`).
pub const ADMIN: &str = "[admin]\nlisten = \"127.0.0.1:0\"\n";

/// The admin listener's address, from its startup log line.
pub fn admin_url(s: &Server) -> String {
    let line = s.expect_log(&["admin listener up"]);
    let addr = line
        .split("admin=")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {line}"));
    format!("http://{addr}")
}

/// GET `url`: the status and the body.
pub async fn get(url: &str) -> (u16, String) {
    let r = http().get(url).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// The value of one series (`name{labels}` exactly as encoded), 0 if absent.
pub fn series(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

pub fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// POST a raw body with headers.
pub async fn post(url: &str, headers: &[(&str, &str)], body: impl Into<Vec<u8>>) -> Answer {
    let mut req = http().post(url).body(body.into());
    let mut has_ct = false;
    let mut has_accept = false;
    for (k, v) in headers {
        has_ct |= k.eq_ignore_ascii_case("content-type");
        has_accept |= k.eq_ignore_ascii_case("accept");
        req = req.header(*k, *v);
    }
    if !has_ct {
        req = req.header("content-type", "application/json");
    }
    if !has_accept {
        req = req.header("accept", "application/json, text/event-stream");
    }
    let resp = req.send().await.expect("POST");
    let answer = Answer {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        body: resp.bytes().await.unwrap().to_vec(),
    };
    validate_message(headers, &answer);
    answer
}

/// Every JSON-RPC message a test receives is checked against the schema of
/// the protocol version its request named (`MCP-Protocol-Version`; none
/// means the handshake, checked with 2025-11-25's).
fn validate_message(request_headers: &[(&str, &str)], answer: &Answer) {
    if answer.header("content-type").as_deref() != Some("application/json") {
        return;
    }
    let Ok(v) = serde_json::from_slice::<Value>(&answer.body) else {
        return;
    };
    if v.get("jsonrpc").is_none() {
        return; // OAuth-style error bodies of 401/403 answers
    }
    let version = request_headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("mcp-protocol-version"))
        .map(|(_, v)| *v)
        .filter(|v| ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"].contains(v))
        .unwrap_or("2025-11-25");
    let def = if version == "2025-03-26" || version == "2025-06-18" {
        if v.get("error").is_some() {
            "JSONRPCError"
        } else {
            "JSONRPCResponse"
        }
    } else if v.get("error").is_some() {
        "JSONRPCErrorResponse"
    } else {
        "JSONRPCResultResponse"
    };
    // A parse error carries no id, which only the newer schemas allow.
    let version = if v.get("id").is_none() {
        "2025-11-25"
    } else {
        version
    };
    let def = if v.get("id").is_none() {
        "JSONRPCErrorResponse"
    } else {
        def
    };
    assert_schema(version, def, &v);
}

pub const MODERN: &str = "2026-07-28";

/// The `_meta` every 2026-07-28 request carries.
pub fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": { "name": "emseepea-tests", "version": "1.0.0" },
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

/// A stateless 2026-07-28 request with the headers it needs.
pub async fn modern(
    url: &str,
    token: Option<&str>,
    id: Value,
    method: &str,
    mut params: Value,
) -> Answer {
    if params.is_null() {
        params = json!({});
    }
    params["_meta"] = modern_meta();
    let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers: Vec<(&str, &str)> =
        vec![("mcp-protocol-version", MODERN), ("mcp-method", method)];
    let name = params.get("uri").and_then(Value::as_str).map(String::from);
    if let Some(n) = &name {
        headers.push(("mcp-name", n));
    }
    if let Some(a) = &auth {
        headers.push(("authorization", a));
    }
    post(url, &headers, serde_json::to_vec(&body).unwrap()).await
}

/// A 2026-07-28 `resources/list` without a cursor, with `token`, on
/// `client` (for a test that needs its own connection pool or local
/// address), not yet sent.
pub fn modern_list(client: &reqwest::Client, url: &str, token: &str) -> reqwest::RequestBuilder {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "resources/list",
        "params": { "_meta": modern_meta() },
    });
    client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "resources/list")
        .header("authorization", format!("Bearer {token}"))
        .body(serde_json::to_vec(&body).unwrap())
}

/// The seed-004 loop over 2026-07-28: list without a cursor, then with each
/// `nextCursor` until there is none. Returns the URIs and the page count;
/// every page is checked against the schema.
pub async fn traverse(url: &str, token: &str) -> (Vec<String>, usize) {
    let mut cursor: Option<String> = None;
    let mut uris = Vec::new();
    let mut pages = 0;
    loop {
        let params = cursor
            .as_ref()
            .map_or(json!({}), |c| json!({ "cursor": c }));
        let a = modern(url, Some(token), json!(pages), "resources/list", params).await;
        assert_eq!(a.status, 200, "{}", a.text());
        let v = a.json();
        assert_schema(MODERN, "ListResourcesResult", &v["result"]);
        pages += 1;
        uris.extend(
            v["result"]["resources"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["uri"].as_str().unwrap().to_owned()),
        );
        match v["result"]["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return (uris, pages),
        }
    }
}

/// A legacy-protocol session (initialize handshake, `Mcp-Session-Id`).
pub struct Session {
    pub url: String,
    pub id: String,
    pub version: String,
    pub token: Option<String>,
    next_id: i64,
}

impl Session {
    pub async fn open(url: &str, version: &str, token: Option<&str>) -> Session {
        let auth = token.map(|t| format!("Bearer {t}"));
        let mut headers = vec![];
        if let Some(a) = &auth {
            headers.push(("authorization", a.as_str()));
        }
        let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name":"emseepea-tests","version":"1.0.0"}}});
        let a = post(url, &headers, serde_json::to_vec(&init).unwrap()).await;
        assert_eq!(a.status, 200, "initialize: {}", a.text());
        let id = a.header("mcp-session-id").expect("session id");
        let v = a.json()["result"]["protocolVersion"]
            .as_str()
            .unwrap()
            .to_owned();
        let s = Session {
            url: url.into(),
            id,
            version: v,
            token: token.map(String::from),
            next_id: 1,
        };
        let n = s
            .send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
            .await;
        assert_eq!(n.status, 202);
        s
    }

    pub fn headers(&self) -> Vec<(String, String)> {
        let mut h = vec![("mcp-session-id".to_string(), self.id.clone())];
        if self.version != "2025-03-26" {
            h.push(("mcp-protocol-version".into(), self.version.clone()));
        }
        if let Some(t) = &self.token {
            h.push(("authorization".into(), format!("Bearer {t}")));
        }
        h
    }

    pub async fn send(&self, body: Value) -> Answer {
        let h = self.headers();
        let refs: Vec<(&str, &str)> = h.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        post(&self.url, &refs, serde_json::to_vec(&body).unwrap()).await
    }

    pub async fn request(&mut self, method: &str, params: Value) -> Answer {
        self.next_id += 1;
        let mut body = json!({"jsonrpc":"2.0","id":self.next_id,"method":method});
        if !params.is_null() {
            body["params"] = params;
        }
        self.send(body).await
    }
}

/// Validate `value` against definition `def` of the protocol version's JSON Schema.
pub fn assert_schema(version: &str, def: &str, value: &Value) {
    let dir = match version {
        // There is no 2025-03-26 schema among the shared ones; 2025-06-18 only
        // added optional fields, so its definitions accept 2025-03-26 messages.
        "2025-03-26" => "2025-06-18",
        v => v,
    };
    static VALIDATORS: std::sync::OnceLock<
        Mutex<std::collections::HashMap<String, Arc<jsonschema::Validator>>>,
    > = std::sync::OnceLock::new();
    let key = format!("{dir}#{def}");
    let cached = VALIDATORS
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .get(&key)
        .cloned();
    let validator = match cached {
        Some(v) => v,
        None => {
            let path = root()
                .join("tests/mcp-schema")
                .join(dir)
                .join("schema.json");
            let mut schema: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            let defs_key = if schema.get("$defs").is_some() {
                "$defs"
            } else {
                "definitions"
            };
            assert!(
                schema[defs_key].get(def).is_some(),
                "{def} not in the {dir} schema"
            );
            schema["$ref"] = json!(format!("#/{defs_key}/{def}"));
            let v = Arc::new(jsonschema::validator_for(&schema).unwrap());
            VALIDATORS
                .get()
                .unwrap()
                .lock()
                .unwrap()
                .insert(key, v.clone());
            v
        }
    };
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{def} ({version}) invalid: {errors:?}\n{value:#}"
    );
}

/// Assert a response body is a generic JSON-RPC -32603 carrying no guest detail.
pub fn assert_generic_internal_error(a: &Answer, secrets: &[&str]) {
    let body = a.text();
    let v = a.json();
    assert_eq!(v["error"]["code"], -32603, "{body}");
    assert_eq!(v["error"]["message"], "Internal error", "{body}");
    assert!(v["error"].get("data").is_none(), "{body}");
    for s in secrets.iter().chain(["HOSTILE-SECRET"].iter()) {
        assert!(!body.contains(s), "response leaks {s:?}: {body}");
    }
}

/// A tiny HTTP server for tests standing in for an authorization server
/// (JWKS, introspection) or an outbound backend: answers every request with
/// `responder(method, path, headers, body)` and counts requests.
pub struct FakeHttp {
    pub url: String,
    pub hits: Arc<std::sync::atomic::AtomicUsize>,
    _task: tokio::task::JoinHandle<()>,
}

pub type Responder =
    Arc<dyn Fn(&str, &str, &http::HeaderMap, &[u8]) -> (u16, String) + Send + Sync>;

impl FakeHttp {
    /// Must run inside a multi-threaded tokio runtime (the server under test
    /// may call it while the test thread blocks).
    pub async fn start(responder: Responder) -> FakeHttp {
        use http_body_util::BodyExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let hits2 = hits.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let responder = responder.clone();
                let hits = hits2.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |req: http::Request<hyper::body::Incoming>| {
                            let responder = responder.clone();
                            let hits = hits.clone();
                            async move {
                                hits.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                                let (parts, body) = req.into_parts();
                                let body = body
                                    .collect()
                                    .await
                                    .map(|b| b.to_bytes().to_vec())
                                    .unwrap_or_default();
                                let (status, text) = responder(
                                    parts.method.as_str(),
                                    parts.uri.path(),
                                    &parts.headers,
                                    &body,
                                );
                                let mut resp = http::Response::new(http_body_util::Full::new(
                                    bytes::Bytes::from(text),
                                ));
                                *resp.status_mut() = http::StatusCode::from_u16(status).unwrap();
                                resp.headers_mut().insert(
                                    "content-type",
                                    http::HeaderValue::from_static("application/json"),
                                );
                                Ok::<_, std::convert::Infallible>(resp)
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        FakeHttp {
            url,
            hits,
            _task: task,
        }
    }

    pub fn hits(&self) -> usize {
        self.hits.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// `resources/read` of `uri` over 2026-07-28.
pub async fn read_answer(s: &Server, token: &str, uri: &str) -> Answer {
    modern(
        &s.url,
        Some(token),
        json!(1),
        "resources/read",
        json!({ "uri": uri }),
    )
    .await
}

/// The text of the first content `resources/read` returns for `uri`.
pub async fn read_text(s: &Server, token: &str, uri: &str) -> String {
    let v = read_answer(s, token, uri).await.json();
    v["result"]["contents"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_owned()
}

/// The peak resident set of process `pid` so far (`VmHWM`), KiB.
pub fn peak_rss_kib(pid: u32) -> i64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM in {status}"))
}

/// `emseepea check` fails, naming `file` and saying `reason` in its error line.
pub fn check_refused(p: &Prepared, file: &str, reason: &str) {
    let (ok, out) = p.check();
    assert!(!ok, "check should fail:\n{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("emseepea:"))
        .unwrap_or_else(|| panic!("no error line:\n{out}"));
    assert!(line.contains(file), "error does not name {file}: {line}");
    assert!(
        line.contains(reason),
        "error does not say {reason:?}: {line}"
    );
}
