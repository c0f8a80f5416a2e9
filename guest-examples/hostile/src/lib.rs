//! A configurable misbehaving source, for tests. One component, many
//! behaviours: the manifest's `[config]` picks them.
//!
//! - `name`, `template` (URI template, default `hostile://{name}/{id}`),
//!   `access` (`protected`|`public`), `discoverable` (`true`|`false`),
//!   `scope` (default `hostile:read`): the definition `describe()` returns.
//! - `mode`: what `list` and `read` do. Budget breakers: `loop`, `memory`,
//!   `recurse`, `trap`, `spin` (busy-waits on the wall clock), `sleep`
//!   (blocks in a host call), `slow` (a slow but well-behaved source: read
//!   waits `delay_ms` in a host call, then answers as `ok`; list is fast).
//!   Bad pages: `too-many`, `has-more-empty`,
//!   `key-empty`, `key-long`, `key-space`, `key-order`, `key-not-after`,
//!   `uri-long`, `uri-mismatch`, `uri-duplicate`, `name-long`, `mime-long`,
//!   `source-error`, `big-entry`. Others: `ok` (a valid 3-entry source),
//!   `context` (read returns its whole call context), `count` (valid; `items`
//!   entries, `limit` echoed in names so tests can see what was asked),
//!   `remember` (read answers what an earlier call left in this instance's
//!   memory, `remembered nothing` in a fresh one, then leaves its own URI
//!   and caller there). `smash` (read of `…/smash` ruins the instance's
//!   state and answers `smashed`; any later call in that instance traps;
//!   other reads answer `whole`). `vault`: the same, but in a 4 KiB-aligned page of
//!   its own that nothing else touches, and it then waits `delay_ms` in a
//!   host call (the window in which a test pages the server out to swap).
//! - Read results: `wide` (list: one entry whose URI is the template's
//!   literal prefix plus `x`s up to `units` UTF-16 units, default 2,048, with
//!   mimeType `mime`; read: that URI back with mimeType `mime`),
//!   `read-forged-uri` (contents under `forged_uri`, not the URI asked for),
//!   `read-alias` (`items` contents, all the same `bytes`-byte text).
//! - Log text: `source-error-huge` (a `bytes`-byte source-error message),
//!   `say` (source-error with the manifest's `message`), `chatty` (prints
//!   `lines` lines of `x` on stdout and stderr, then reads normally).
//! - Definitions: `describe-huge` (`part` = `name`: a 1 MiB name; `scope`: a
//!   1 MiB scope; `scopes`: `count` (default 10,000) scopes `NAME-i:xx…` of
//!   `scope_len` (default 8) characters).
//! - `owned`, `owned-*`: a per-user source, correct or breaking one
//!   cross-call rule (see `owned.rs`).
//! - `denials`: read tries every ambient authority it must not have
//!   (environment, stdin, files, sockets, an ungranted database) and reports.
//! - `sql-script`: read runs each line of `script` as one statement on one
//!   connection to the granted `database` and reports a line per statement
//!   (`ok rows=N first=V` or `error: E`); with `on_error = "fail"` the first
//!   error fails the read instead (a `source-error` naming it); each asks
//!   for at most `max_rows` rows (default 1000).
//! - `sql-execute`: read `execute`s each line of `script` on one connection
//!   and reports a line per statement (`changed=N` or `error: E`).
//!
//! - `fetch`: read GETs `url` (POSTs `body` if set, or `body_bytes` bytes
//!   of `x`) through wasi:http, with a `traceparent` header if one is
//!   configured.
//! - Handle hoarders (each then holds what it got for `hold_ms`):
//!   `sql-hoard` opens `database` up to `count` times keeping every
//!   connection (`opened=N stopped=E`); `http-flood` starts `count` GETs of
//!   `url` without awaiting them (`sent=N refused=M first=E`); `files-hoard`
//!   opens `path` up to `count` times keeping every file.
//! - `print`: prints `message` on stdout. `config-get`: reads config `key`.
//!
//! Every message it produces contains `HOSTILE-SECRET`, so tests can assert
//! that no guest text reaches a client.

wit_bindgen::generate!({ world: "inventory-source", path: "../../wit" });

use emseepea::inventory::config;
use emseepea::inventory::types::{
    Access, CallContext, InventoryEntry, InventoryPage, ResourceBody, ResourceContents,
    ResourceMetadata, SourceError, Template,
};
use exports::emseepea::inventory::{inventory, template};

mod owned;

struct Hostile;

/// Set by a `smash` read of `…/smash`: this instance's state is ruined, and
/// every later call in it traps (what a guest that scribbled over its own
/// heap would do next).
static SMASHED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// What the last call in this instance left (mode `remember`).
static LEFT_BEHIND: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// What the last call in this instance left (mode `vault`): a length byte
/// and text, alone on its host page, so that once written nothing else the
/// call does (its allocator, stack or return) touches that page again.
#[repr(C, align(4096))]
struct Vault([u8; 4096]);
static mut VAULT: Vault = Vault([0; 4096]);

fn cfg(key: &str, default: &str) -> String {
    config::get(key).unwrap_or_else(|| default.to_string())
}

fn name() -> String {
    cfg("name", "hostile")
}

fn uri(id: &str) -> String {
    format!("hostile://{}/{id}", name())
}

fn entry(key: &str, id: &str) -> InventoryEntry {
    InventoryEntry {
        key: key.into(),
        resource: ResourceMetadata {
            uri: uri(id),
            name: format!("Entry {id}"),
            mime_type: Some("text/plain".into()),
        },
    }
}

#[inline(never)]
#[allow(unconditional_recursion)]
fn recurse(depth: u64, pad: &mut [u8; 64]) -> u64 {
    pad[(depth % 64) as usize] = depth as u8;
    let mut next = *pad;
    recurse(depth + 1, &mut next) + u64::from(next[0])
}

fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Budget-breaking behaviours shared by list and read; returns only for other modes.
fn misbehave(mode: &str, context: &CallContext) {
    match mode {
        "loop" => {
            let mut x: u64 = 0;
            loop {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        "memory" => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                let mut chunk = vec![0u8; 1 << 20];
                chunk[0] = 1;
                chunk[(1 << 20) - 1] = 1;
                hoard.push(std::hint::black_box(chunk));
            }
        }
        "recurse" => {
            let mut pad = [0u8; 64];
            std::hint::black_box(recurse(0, &mut pad));
        }
        "trap" => core::arch::wasm32::unreachable(),
        "spin" => {
            // Busy-wait well past the deadline we were given.
            let until = context.deadline_ms + 60_000;
            while wall_ms() < until {
                std::hint::spin_loop();
            }
        }
        "sleep" => std::thread::sleep(std::time::Duration::from_secs(600)),
        _ => {}
    }
}

impl template::Guest for Hostile {
    fn describe() -> Template {
        let access = if cfg("access", "protected") == "public" {
            Access::Public
        } else {
            Access::Protected
        };
        let mut template = Template {
            name: name(),
            uri_template: cfg("template", &format!("hostile://{}/{{id}}", name())),
            title: Some("Hostile source".into()),
            description: Some("Misbehaves on purpose (tests only)".into()),
            mime_type: Some("text/plain".into()),
            required_scopes: if access == Access::Public {
                vec![]
            } else {
                vec![cfg("scope", "hostile:read")]
            },
            access,
            discoverable: cfg("discoverable", "true") == "true",
        };
        if cfg("mode", "ok") == "describe-huge" {
            match cfg("part", "name").as_str() {
                "name" => template.name = format!("HOSTILE-SECRET{}", "n".repeat(1 << 20)),
                "scope" => template.required_scopes = vec![format!("s{}", "x".repeat(1 << 20))],
                _ => {
                    let count: usize = cfg("count", "10000").parse().unwrap_or(10_000);
                    let len: usize = cfg("scope_len", "8").parse().unwrap_or(8);
                    template.required_scopes = (0..count)
                        .map(|i| {
                            let n = format!("{}-{i}:", name());
                            format!("{n}{}", "x".repeat(len.saturating_sub(n.len())))
                        })
                        .collect();
                }
            }
        }
        template
    }

    fn read(uri: String, context: CallContext) -> Result<Vec<ResourceContents>, SourceError> {
        let mode = cfg("mode", "ok");
        if let Some(variant) = mode.strip_prefix("owned") {
            return owned::read(variant, uri, &context);
        }
        misbehave(&mode, &context);
        if mode == "chatty" {
            let lines: usize = cfg("lines", "8192").parse().unwrap_or(8192);
            let out = "x\n".repeat(lines);
            print!("{out}");
            eprint!("{out}");
        }
        if mode == "slow" {
            let ms: u64 = cfg("delay_ms", "1000").parse().unwrap_or(1000);
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
        let text = match mode.as_str() {
            "smash" => {
                use std::sync::atomic::Ordering;
                if SMASHED.load(Ordering::Relaxed) {
                    core::arch::wasm32::unreachable();
                }
                if uri.ends_with("/smash") {
                    SMASHED.store(true, Ordering::Relaxed);
                    "smashed".to_string()
                } else {
                    "whole".to_string()
                }
            }
            "remember" => {
                let mut left = LEFT_BEHIND.lock().unwrap();
                let seen = left.take().unwrap_or_else(|| "nothing".into());
                let caller = context
                    .principal
                    .as_ref()
                    .and_then(|p| p.subject.clone())
                    .unwrap_or_default();
                *left = Some(format!("HOSTILE-SECRET {uri} of {caller}"));
                format!("remembered {seen}")
            }
            "vault" => {
                // SAFETY: a component instance runs one call on one thread.
                let vault = unsafe { &mut *core::ptr::addr_of_mut!(VAULT.0) };
                let len = vault[0] as usize;
                let seen = match len {
                    0 => "nothing".to_string(),
                    n => String::from_utf8_lossy(&vault[1..1 + n]).into_owned(),
                };
                let caller = context
                    .principal
                    .as_ref()
                    .and_then(|p| p.subject.clone())
                    .unwrap_or_default();
                let secret = format!("HOSTILE-SECRET {uri} of {caller}");
                let n = secret.len().min(255);
                vault[1..1 + n].copy_from_slice(&secret.as_bytes()[..n]);
                vault[0] = n as u8;
                let ms: u64 = cfg("delay_ms", "0").parse().unwrap_or(0);
                std::thread::sleep(std::time::Duration::from_millis(ms));
                format!("remembered {seen}")
            }
            "wide" => {
                return Ok(vec![ResourceContents {
                    uri,
                    mime_type: Some(cfg("mime", "text/plain")),
                    body: ResourceBody::Text("wide contents".into()),
                }]);
            }
            "read-forged-uri" => {
                return Ok(vec![ResourceContents {
                    uri: cfg("forged_uri", "catalog://catalog/items/0000000003"),
                    mime_type: Some("text/plain".into()),
                    body: ResourceBody::Text("HOSTILE-SECRET forged record".into()),
                }]);
            }
            "read-alias" => {
                // `items` texts that are all the same `bytes` bytes of guest
                // memory: a host that copies before it counts copies them all.
                let items: usize = cfg("items", "40").parse().unwrap_or(40);
                let bytes: usize = cfg("bytes", "1048576").parse().unwrap_or(1 << 20);
                let big: &'static str = "a".repeat(bytes).leak();
                return Ok((0..items)
                    .map(|_| ResourceContents {
                        uri: uri.clone(),
                        mime_type: Some("text/plain".into()),
                        body: ResourceBody::Text(unsafe {
                            raw_string(big.as_ptr() as usize, big.len())
                        }),
                    })
                    .collect());
            }
            "source-error-huge" => {
                let bytes: usize = cfg("bytes", "8388608").parse().unwrap_or(8 << 20);
                let mut message = String::from("HOSTILE-SECRET ");
                message.push_str(&"x".repeat(bytes.saturating_sub(message.len())));
                return Err(SourceError::Failed(message));
            }
            "say" => return Err(SourceError::Failed(cfg("message", ""))),
            "source-error" => {
                return Err(SourceError::Failed(
                    "HOSTILE-SECRET backend exploded at db-7".into(),
                ));
            }
            "context" => {
                let p = context.principal.as_ref();
                format!(
                    "{{\"principal\":{},\"deadlineMs\":{}}}",
                    match p {
                        None => "null".to_string(),
                        Some(p) => format!(
                            "{{\"subject\":{},\"clientId\":{:?},\"scopes\":{:?},\"audience\":{}}}",
                            p.subject
                                .as_ref()
                                .map_or("null".into(), |s| format!("{s:?}")),
                            p.client_id,
                            p.scopes,
                            p.audience
                                .as_ref()
                                .map_or("null".into(), |s| format!("{s:?}")),
                        ),
                    },
                    context.deadline_ms
                )
            }
            "denials" => denials(),
            "fetch" => fetch(&cfg("url", "http://127.0.0.1:1/"))
                .unwrap_or_else(|e| format!("fetch failed: {e}")),
            "readfile" => {
                let path = cfg("path", "/assets/hello.txt");
                let read = std::fs::read_to_string(&path).map_err(|e| e.kind().to_string());
                let write =
                    std::fs::write(format!("{path}.new"), b"x").map_err(|e| e.kind().to_string());
                format!("read={read:?}\nwrite={write:?}")
            }
            "sql" => sql(),
            "sql-hoard" => sql_hoard(),
            "http-flood" => http_flood(),
            "files-hoard" => files_hoard(),
            "print" => {
                println!("{}", cfg("message", ""));
                "printed".into()
            }
            "config-get" => format!("{:?}", config::get(&cfg("key", ""))),
            "sql-script" => sql_script()?,
            "sql-execute" => sql_execute(),
            _ => format!("Contents of {uri}"),
        };
        Ok(vec![ResourceContents {
            uri,
            mime_type: Some("text/plain".into()),
            body: ResourceBody::Text(text),
        }])
    }
}

/// Try every authority a source must not have; report what happened.
fn denials() -> String {
    let mut report = Vec::new();
    let env: Vec<(String, String)> = std::env::vars().collect();
    report.push(format!("env={}", env.len()));
    let mut line = String::new();
    let stdin = std::io::stdin().read_line(&mut line);
    report.push(format!(
        "stdin={}",
        match stdin {
            Ok(0) => "eof".to_string(),
            Ok(n) => format!("read {n}"),
            Err(_) => "error".to_string(),
        }
    ));
    for path in ["/etc/passwd", "/", ".", "/tmp"] {
        report.push(format!(
            "file {path}={}",
            if std::fs::read_dir(path).is_ok() || std::fs::read(path).is_ok() {
                "open"
            } else {
                "denied"
            }
        ));
    }
    let tcp = std::net::TcpStream::connect("127.0.0.1:1");
    report.push(format!(
        "tcp={}",
        if tcp.is_ok() { "open" } else { "denied" }
    ));
    let db = emseepea::inventory::sql::Connection::open(&cfg("database", "documents"));
    report.push(format!(
        "sql={}",
        match db {
            Ok(_) => "open".to_string(),
            Err(e) => format!("{e:?}"),
        }
    ));
    report.join("\n")
}

/// A request body: the manifest's text, or `n` generated bytes.
enum Body {
    Text(String),
    Generated(usize),
}

/// GET `url` through wasi:http/outgoing-handler; "STATUS BODY" or an error.
fn fetch(url: &str) -> Result<String, String> {
    use wasi::http::outgoing_handler;
    use wasi::http::types::{Fields, Method, OutgoingBody, OutgoingRequest, Scheme};
    let (scheme, rest) = url.split_once("://").ok_or("bad url")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let headers = Fields::new();
    // `traceparent = "..."` in the config: a guest forging a trace context
    // (the host replaces it when traces are on; tests/traces.rs).
    if let Some(tp) = config::get("traceparent") {
        headers
            .append("traceparent", tp.as_bytes())
            .map_err(|_| "header")?;
    }
    let request = OutgoingRequest::new(headers);
    request
        .set_scheme(Some(&if scheme == "https" {
            Scheme::Https
        } else {
            Scheme::Http
        }))
        .map_err(|_| "scheme")?;
    request
        .set_authority(Some(authority))
        .map_err(|_| "authority")?;
    request
        .set_path_with_query(Some(path))
        .map_err(|_| "path")?;
    // `body = "..."` in the config: send it the way the `wstd` crate does
    // (take the body, start the request, then write and finish the body).
    // Streamed after the head, such a body could lose the response to a
    // connection reset (tests/capabilities.rs).
    // `body_bytes`: that many `x`, written 4 KiB at a time (never held).
    let body = config::get("body").map(Body::Text).or_else(|| {
        let n: usize = config::get("body_bytes")?.parse().ok()?;
        Some(Body::Generated(n))
    });
    if body.is_some() {
        request.set_method(&Method::Post).map_err(|_| "method")?;
    }
    let outgoing = match &body {
        Some(_) => Some(request.body().map_err(|_| "body taken")?),
        None => None,
    };
    let pending = outgoing_handler::handle(request, None).map_err(|e| format!("{e:?}"))?;
    if let (Some(outgoing), Some(body)) = (outgoing, body) {
        {
            let stream = outgoing.write().map_err(|_| "body stream")?;
            let filler = [b'x'; 4096];
            let chunks: Box<dyn Iterator<Item = &[u8]>> = match &body {
                Body::Text(text) => Box::new(text.as_bytes().chunks(4096)),
                &Body::Generated(n) => {
                    let filler = &filler;
                    Box::new(
                        (0..n.div_ceil(4096)).map(move |i| &filler[..(n - i * 4096).min(4096)]),
                    )
                }
            };
            // At most 4,096 bytes per blocking write.
            for chunk in chunks {
                stream
                    .blocking_write_and_flush(chunk)
                    .map_err(|e| format!("body write: {e:?}"))?;
            }
        }
        OutgoingBody::finish(outgoing, None).map_err(|e| format!("body finish: {e:?}"))?;
    }
    pending.subscribe().block();
    let response = pending
        .get()
        .ok_or("no response")?
        .map_err(|_| "taken")?
        .map_err(|e| format!("{e:?}"))?;
    let status = response.status();
    let body = response.consume().map_err(|_| "body")?;
    let stream = body.stream().map_err(|_| "stream")?;
    let mut bytes = Vec::new();
    loop {
        match stream.blocking_read(65536) {
            Ok(chunk) => bytes.extend_from_slice(&chunk),
            Err(wasi::io::streams::StreamError::Closed) => break,
            Err(e) => return Err(format!("body: {e:?}")),
        }
    }
    Ok(format!("{status} {}", String::from_utf8_lossy(&bytes)))
}

/// Wait `hold_ms` (holding whatever the caller holds).
fn hold() {
    let ms: u64 = cfg("hold_ms", "0").parse().unwrap_or(0);
    std::thread::sleep(std::time::Duration::from_millis(ms));
}

/// Open `database` up to `count` times, keeping every connection.
fn sql_hoard() -> String {
    use emseepea::inventory::sql::Connection;
    let count: usize = cfg("count", "100000").parse().unwrap_or(100_000);
    let mut held = Vec::new();
    let mut stopped = "none".to_string();
    while held.len() < count {
        match Connection::open(&cfg("database", "documents")) {
            Ok(c) => held.push(c),
            Err(e) => {
                stopped = format!("{e:?}");
                break;
            }
        }
    }
    hold();
    format!("opened={} stopped={stopped}", held.len())
}

/// Start `count` GETs of `url` without awaiting them; then count those
/// already refused.
fn http_flood() -> String {
    use wasi::http::outgoing_handler;
    use wasi::http::types::{Fields, OutgoingRequest, Scheme};
    let url = cfg("url", "http://127.0.0.1:1/");
    let count: usize = cfg("count", "1000").parse().unwrap_or(1000);
    let rest = url.split_once("://").map_or("", |(_, r)| r);
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut pending = Vec::new();
    let mut stopped = "none".to_string();
    for _ in 0..count {
        let request = OutgoingRequest::new(Fields::new());
        let _ = request.set_scheme(Some(&Scheme::Http));
        let _ = request.set_authority(Some(authority));
        let _ = request.set_path_with_query(Some(if path.is_empty() { "/" } else { path }));
        match outgoing_handler::handle(request, None) {
            Ok(f) => pending.push(f),
            Err(e) => {
                stopped = format!("{e:?}");
                break;
            }
        }
    }
    let settle: u64 = cfg("settle_ms", "300").parse().unwrap_or(300);
    std::thread::sleep(std::time::Duration::from_millis(settle));
    let mut refused = 0;
    let mut first = String::from("none");
    for f in &pending {
        // A future is `get`-able once its pollable has seen it ready.
        if !f.subscribe().ready() {
            continue;
        }
        if let Some(Ok(Err(e))) = f.get() {
            if refused == 0 {
                first = format!("{e:?}");
            }
            refused += 1;
        }
    }
    hold();
    format!(
        "sent={} refused={refused} first={first} stopped={stopped}",
        pending.len()
    )
}

/// Open `path` up to `count` times, keeping every file.
fn files_hoard() -> String {
    let path = cfg("path", "/assets/hello.txt");
    let count: usize = cfg("count", "100000").parse().unwrap_or(100_000);
    let mut held = Vec::new();
    let mut stopped = "none".to_string();
    while held.len() < count {
        match std::fs::File::open(&path) {
            Ok(f) => held.push(f),
            Err(e) => {
                stopped = e.kind().to_string();
                break;
            }
        }
    }
    hold();
    format!("opened={} stopped={stopped}", held.len())
}

/// Run the manifest's `sql` on the granted `database`; report rows or the error.
fn sql() -> String {
    use emseepea::inventory::sql::Connection;
    let conn = match Connection::open(&cfg("database", "documents")) {
        Ok(c) => c,
        Err(e) => return format!("open: {e:?}"),
    };
    let max_rows: u32 = cfg("max_rows", "1000").parse().unwrap_or(1000);
    match conn.query(&cfg("sql", "SELECT 1"), &[], max_rows) {
        Ok(rows) => format!("rows={}", rows.rows.len()),
        Err(e) => format!("query: {e:?}"),
    }
}

/// `execute` each line of `script` on one connection: `changed=N` or the
/// error, one line each.
fn sql_execute() -> String {
    use emseepea::inventory::sql::Connection;
    let conn = match Connection::open(&cfg("database", "documents")) {
        Ok(c) => c,
        Err(e) => return format!("open: {e:?}"),
    };
    cfg("script", "SELECT 1")
        .lines()
        .map(|sql| match conn.execute(sql, &[]) {
            Ok(n) => format!("changed={n}"),
            Err(e) => format!("error: {e:?}"),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Run each line of `script` on one connection; one report line each.
fn sql_script() -> Result<String, SourceError> {
    use emseepea::inventory::sql::{Connection, Value};
    let conn = Connection::open(&cfg("database", "documents"))
        .map_err(|e| SourceError::Failed(format!("HOSTILE-SECRET open: {e:?}")))?;
    let fail = cfg("on_error", "report") == "fail";
    let max_rows = cfg("max_rows", "1000").parse().unwrap_or(1000);
    let mut report = Vec::new();
    for (n, sql) in cfg("script", "SELECT 1").lines().enumerate() {
        match conn.query(sql, &[], max_rows) {
            Ok(rows) => {
                let first = match rows.rows.first().and_then(|r| r.first()) {
                    None => String::new(),
                    Some(Value::Integer(i)) => format!(" first={i}"),
                    Some(Value::Text(t)) => format!(" first={t}"),
                    Some(v) => format!(" first={v:?}"),
                };
                report.push(format!("ok rows={}{first}", rows.rows.len()));
            }
            Err(e) if fail => {
                return Err(SourceError::Failed(format!(
                    "HOSTILE-SECRET statement {n} failed: {e:?}"
                )));
            }
            Err(e) => report.push(format!("error: {e:?}")),
        }
    }
    Ok(report.join("\n"))
}

/// A `String` over any (ptr, len) of this guest's address space, for the
/// `abi-*` modes: never read or freed here, only lowered.
unsafe fn raw_string(ptr: usize, len: usize) -> String {
    unsafe { String::from_raw_parts(ptr as *mut u8, len, len) }
}

impl inventory::Guest for Hostile {
    fn list(
        after: Option<String>,
        limit: u32,
        context: CallContext,
    ) -> Result<InventoryPage, SourceError> {
        let mode = cfg("mode", "ok");
        if let Some(variant) = mode.strip_prefix("owned") {
            return owned::list(variant, after, limit, &context);
        }
        misbehave(&mode, &context);
        let limit = limit as usize;
        let page =
            |entries: Vec<InventoryEntry>, has_more: bool| Ok(InventoryPage { entries, has_more });
        match mode.as_str() {
            "too-many" => page(
                (0..=limit)
                    .map(|i| entry(&format!("k{i:04}"), &format!("{i}")))
                    .collect(),
                false,
            ),
            "has-more-empty" => page(vec![], true),
            "wide" => {
                let template = cfg("template", "");
                let prefix = template.trim_end_matches("{id}");
                let units: usize = cfg("units", "2048").parse().unwrap_or(2048);
                let id = "x".repeat(units.saturating_sub(prefix.encode_utf16().count()));
                let mut e = entry("k1", "1");
                e.resource.uri = format!("{prefix}{id}");
                e.resource.mime_type = Some(cfg("mime", "text/plain"));
                page(vec![e], false)
            }
            "key-empty" => page(vec![entry("", "1")], false),
            "key-long" => page(vec![entry(&"k".repeat(257), "1")], false),
            "key-space" => page(vec![entry("HOSTILE-SECRET key", "1")], false),
            "key-order" => page(vec![entry("k2", "2"), entry("k1", "1")], false),
            "key-not-after" => match after {
                None => page(vec![entry("k1", "1")], true),
                Some(a) => page(vec![entry(&a, "again")], false),
            },
            "uri-long" => page(vec![entry("k1", &"x".repeat(2100))], false),
            "uri-mismatch" => {
                let mut e = entry("k1", "1");
                e.resource.uri = "other://HOSTILE-SECRET/1".into();
                page(vec![e], false)
            }
            "uri-duplicate" => page(vec![entry("k1", "1"), entry("k2", "1")], false),
            "name-long" => {
                let mut e = entry("k1", "1");
                e.resource.name = format!("HOSTILE-SECRET{}", "n".repeat(600));
                page(vec![e], false)
            }
            "mime-long" => {
                let mut e = entry("k1", "1");
                e.resource.mime_type = Some(format!("text/HOSTILE-SECRET{}", "m".repeat(200)));
                page(vec![e], false)
            }
            // Pages whose canonical-ABI form is broken: wit-bindgen lowers a
            // `String` as its (ptr, len) without reading the bytes, so these
            // reach the host's lifter as they are.
            "abi-out-of-bounds" => {
                let mut e = entry("k1", "1");
                e.resource.name = unsafe { raw_string(0xffff_0000, 4096) };
                page(vec![e], false)
            }
            "abi-invalid-utf8" => {
                let mut e = entry("k1", "1");
                e.resource.name = unsafe { String::from_utf8_unchecked(vec![b'H', 0xff, 0xfe]) };
                page(vec![e], false)
            }
            "abi-split-utf8" => {
                // Half of "é" ends the name, the other half starts the mime
                // type: neither is UTF-8, though the two side by side are.
                let mut e = entry("k1", "1");
                e.resource.name = unsafe { String::from_utf8_unchecked(vec![b'H', 0xc3]) };
                e.resource.mime_type =
                    Some(unsafe { String::from_utf8_unchecked(vec![0xa9, b'x']) });
                page(vec![e], false)
            }
            "abi-alias" => {
                // `limit` names that are all the same 16 MiB: 16 MiB of guest
                // memory, `limit` times that for a host that copies them.
                let big: &'static str = "a".repeat(16 << 20).leak();
                let entries = (0..limit)
                    .map(|i| {
                        let mut e = entry(&format!("k{i:04}"), &format!("{i}"));
                        e.resource.name = unsafe { raw_string(big.as_ptr() as usize, big.len()) };
                        e
                    })
                    .collect();
                page(entries, false)
            }
            "source-error" => Err(SourceError::Unavailable(
                "HOSTILE-SECRET connection refused to 10.0.0.7".into(),
            )),
            "big-entry" => {
                // Valid, but as long as an entry may be: a 2,048-character
                // URI and a 512-character name.
                let mut e = entry("k1", "1");
                let id_len = 2048 - uri("").len();
                e.resource.uri = uri(&"i".repeat(id_len));
                e.resource.name = "b".repeat(512);
                page(vec![e], false)
            }
            "count" => {
                let items: u64 = cfg("items", "10").parse().unwrap_or(10);
                let first = after
                    .map(|a| a[1..].parse::<u64>().unwrap() + 1)
                    .unwrap_or(0);
                let end = (first + limit as u64).min(items);
                let entries = (first..end)
                    .map(|i| {
                        let mut e = entry(&format!("k{i:06}"), &format!("{i}"));
                        e.resource.name = format!("Entry {i} (limit {limit})");
                        e
                    })
                    .collect();
                page(entries, end < items)
            }
            _ => {
                let all = [entry("k1", "1"), entry("k2", "2"), entry("k3", "3")];
                let rest: Vec<_> = all
                    .into_iter()
                    .filter(|e| after.as_deref().is_none_or(|a| e.key.as_str() > a))
                    .collect();
                let has_more = rest.len() > limit;
                page(rest.into_iter().take(limit).collect(), has_more)
            }
        }
    }
}

export!(Hostile);
