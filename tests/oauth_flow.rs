//! The whole OAuth flow with a real authorization server and the real SDK
//! clients: panva's oidc-provider (tests/oauth/as.mjs, on Node 22 from
//! tests/clients/node) issues every token; nothing here mints one. The
//! official Python SDK 2.x (`OAuthClientProvider`) and the TypeScript SDK
//! (`StreamableHTTPClientTransport` with an `authProvider`) start with no
//! token and sign in: 401 -> protected-resource metadata -> authorization
//! server metadata -> dynamic registration -> authorization code + PKCE with
//! `resource` -> token; then, in the same client session, a scope step-up,
//! an access token that expires mid-traversal, a signing-key rotation, and
//! a token for another resource. The same in `[auth] mode = "introspection"`
//! with opaque tokens, and the claim mappings identity providers need
//! (docs/src/operating/identity-providers.md, whose config blocks are checked
//! here too).

mod support;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use support::clients::{installed, python, run_json};
use support::*;

/// The test authorization server: a child process, killed on drop.
struct AuthServer {
    child: Child,
    url: String,
}

impl AuthServer {
    fn start() -> AuthServer {
        let node22 = installed("tests/clients/node/node_modules/node/bin/node");
        installed("tests/oauth/node_modules/oidc-provider");
        let mut child = Command::new(node22)
            .arg(root().join("tests/oauth/as.mjs"))
            .current_dir(root().join("tests/oauth"))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the authorization server");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        // Keep reading: a closed pipe would kill the server at its next line.
        std::thread::spawn(move || {
            for l in stdout.lines().map_while(Result::ok) {
                eprintln!("as: {l}");
            }
        });
        let url = line
            .trim()
            .strip_prefix("as listening on ")
            .unwrap_or_else(|| panic!("authorization server said {line:?}"))
            .to_owned();
        AuthServer { child, url }
    }

    /// POST /admin/settings: what the server issues from now on.
    fn settings(&self, settings: Value) {
        let url = format!("{}/admin/settings", self.url);
        block_on(async move {
            let r = http().post(url).json(&settings).send().await.unwrap();
            assert!(r.status().is_success(), "{}", r.text().await.unwrap());
        });
    }

    fn stats(&self) -> Value {
        let url = format!("{}/admin/stats", self.url);
        block_on(async move { http().get(url).send().await.unwrap().json().await.unwrap() })
    }
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const INTROSPECTION_SECRET: &str = "introspection-secret-for-tests";
/// The JWKS is refetched this often: the bound on how long a retired key
/// keeps verifying.
const JWKS_REFRESH_S: u64 = 2;

fn jwt_auth(as_url: &str, extra: &str) -> String {
    format!(
        "[auth]\nmode = \"jwt\"\nauthorization_servers = [\"{as_url}\"]\nleeway_s = 0\n{extra}\n\
         [auth.jwt]\nissuer = \"{as_url}\"\njwks_url = \"{as_url}/jwks\"\n\
         jwks_refresh_interval_s = {JWKS_REFRESH_S}\nrequired_typ = \"at+jwt\"\n"
    )
}

fn introspection_auth(as_url: &str) -> String {
    format!(
        "[auth]\nmode = \"introspection\"\nauthorization_servers = [\"{as_url}\"]\nleeway_s = 0\n\
         [auth.introspection]\nendpoint = \"{as_url}/token/introspection\"\nclient_id = \"emseepea\"\n\
         client_secret = \"{INTROSPECTION_SECRET}\"\nissuer = \"{as_url}\"\n"
    )
}

/// 120 catalog items (catalog:read) and a source that needs notes:read and
/// reads back the principal it was given.
fn mcp_server(auth: &str) -> Server {
    server()
        .auth(Some(auth))
        .source("catalog", "catalog", "[config]\nitems = \"120\"\n")
        .hostile("ctx", "context", "[config]\nscope = \"notes:read\"\n")
        .start()
}

fn catalog_uris() -> Vec<String> {
    (1..=120)
        .map(|i| format!("catalog://catalog/items/{i:010}"))
        .collect()
}

fn ctx_uris() -> Vec<String> {
    (1..=3).map(|i| format!("hostile://ctx/{i}")).collect()
}

fn metadata_url(server: &Server) -> String {
    format!(
        "{}/.well-known/oauth-protected-resource/mcp",
        server.url.trim_end_matches("/mcp")
    )
}

fn seen(step: &Value) -> &Vec<Value> {
    step["seen"].as_array().unwrap()
}

/// The successful token requests (`grant_type`, `resource`) of a step.
fn grants(step: &Value) -> Vec<(String, String)> {
    seen(step)
        .iter()
        .filter(|r| r["form"]["grant_type"].is_string() && r["status"] == 200)
        .map(|r| {
            (
                r["form"]["grant_type"].as_str().unwrap().to_owned(),
                r["form"]["resource"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// Sign-in from nothing: the 401 names the metadata, the client reads it
/// and the authorization server's, registers, authorizes and exchanges the
/// code with `resource` = this server, then lists and reads.
fn check_signin(out: &Value, s: &Server, as_url: &str) {
    let step = &out["steps"]["signin"];
    let seen = seen(step);
    let first = &seen[seen
        .iter()
        .position(|r| r["status"] == 401)
        .unwrap_or_else(|| panic!("no 401: {step:#}"))];
    let challenge = first["www_authenticate"].as_str().unwrap();
    assert!(
        challenge.contains(&format!("resource_metadata=\"{}\"", metadata_url(s))),
        "{challenge}"
    );
    assert!(
        challenge.contains("scope=\"catalog:read notes:read\""),
        "{challenge}"
    );
    let order = |pred: &dyn Fn(&Value) -> bool, what: &str| {
        seen.iter()
            .position(pred)
            .unwrap_or_else(|| panic!("no {what}: {step:#}"))
    };
    let prm = order(
        &|r| r["url"] == metadata_url(s).as_str() && r["status"] == 200,
        "metadata",
    );
    let asm = order(
        &|r| {
            r["url"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{as_url}/.well-known/"))
                && r["status"] == 200
        },
        "authorization server metadata",
    );
    let reg = order(
        &|r| r["url"] == format!("{as_url}/reg").as_str() && r["status"] == 201,
        "registration",
    );
    let token = order(
        &|r| r["form"]["grant_type"] == "authorization_code",
        "code exchange",
    );
    assert!(prm < asm && asm < reg && reg < token, "{step:#}");
    assert_eq!(
        grants(step)[0],
        ("authorization_code".into(), s.url.clone()),
        "the code is exchanged for this server's resource"
    );
    let auth = &step["authorizations"][0];
    assert_eq!(auth["resource"], s.url.as_str(), "{out:#}");
    assert_eq!(auth["code_challenge_method"], "S256");
    assert_eq!(step["read"], "Item 1 of the catalog catalog.\n");
}

fn check_traversal(step: &Value, expected: &[String]) {
    let uris: Vec<String> = step["uris"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(uris, expected, "every URI once, in order");
    assert_eq!(step["pages"], expected.len().div_ceil(50), "{step:#}");
}

/// A whole session with one SDK client: what each step must show. `client`
/// runs the client with its steps and returns its JSON.
fn whole_session(sdk: Sdk, introspection: bool) {
    let a = AuthServer::start();
    // Short-lived tokens at first (the expiry step lets one lapse), opaque
    // ones in introspection mode; the user declines notes:read the first
    // time (the step-up asks again).
    a.settings(json!({
        "ttl": 5,
        "withhold": ["notes:read"],
        "format": if introspection { "opaque" } else { "jwt" },
    }));
    let auth = if introspection {
        introspection_auth(&a.url)
    } else {
        jwt_auth(&a.url, "")
    };
    let s = mcp_server(&auth);
    let other = mcp_server(&auth);
    let steps = if introspection {
        "signin,stepup,expiry,audience"
    } else {
        "signin,stepup,expiry,rotate,audience"
    };
    let guard = LogsOnFailure(&[&s, &other]);
    let out = sdk.run(&s, &a, steps, &other);
    // The wire, step by step (shown when an assertion fails).
    for (name, step) in out["steps"].as_object().unwrap() {
        eprintln!("{name}: sdk_error {}", step["sdk_error"]);
        for r in seen(step) {
            eprintln!(
                "  {} {} {} {} {}",
                r["method"].as_str().unwrap(),
                r["url"].as_str().unwrap(),
                r["status"],
                r["form"],
                r["www_authenticate"].as_str().unwrap_or("")
            );
        }
    }
    check_signin(&out, &s, &a.url);
    let signin = &out["steps"]["signin"];
    // notes:read was declined: its source is skipped, not an error.
    check_traversal(signin, &catalog_uris());

    // Step-up: 403 insufficient_scope naming the scope, then a new
    // authorization asking for it, and the read succeeds.
    let stepup = &out["steps"]["stepup"];
    let forbidden = seen(stepup)
        .iter()
        .find(|r| r["status"] == 403)
        .unwrap_or_else(|| panic!("no 403: {stepup:#}"));
    let challenge = forbidden["www_authenticate"].as_str().unwrap();
    assert!(
        challenge.contains("error=\"insufficient_scope\", scope=\"notes:read\""),
        "{challenge}"
    );
    assert!(challenge.contains(&metadata_url(&s)), "{challenge}");
    let asked = stepup["authorizations"]
        .as_array()
        .unwrap()
        .last()
        .unwrap_or_else(|| panic!("no new authorization: {stepup:#}"));
    assert!(
        asked["scope"]
            .as_str()
            .unwrap_or("")
            .split(' ')
            .any(|x| x == "notes:read"),
        "the new authorization asks for the missing scope: {stepup:#}"
    );
    let principal = &stepup["principal"];
    let client_id = out["client_id"].as_str().unwrap();
    assert_eq!(
        principal,
        &json!({"subject": "alice", "clientId": client_id,
                "scopes": ["catalog:read", "notes:read"], "audience": s.url}),
        "{stepup:#}"
    );

    // What the SDK did by itself. The Python SDK steps up alone (a new
    // authorization for the union of the scopes). The TypeScript SDK's
    // upscoping refreshes the token, which cannot add a scope, so it gives
    // up; the app then authorizes again through the SDK's `auth()`.
    match sdk {
        Sdk::Python => assert!(stepup["sdk_error"].is_null(), "{stepup:#}"),
        Sdk::TypeScript => {
            assert_eq!(
                stepup["sdk_error"],
                "Streamable HTTP error: Server returned 403 after trying upscoping"
            );
            assert_eq!(grants(stepup)[0].0, "refresh_token", "{stepup:#}");
        }
    }

    // Expiry mid-traversal: the token lapses after page 1 (the server now
    // refuses it), the client refreshes, and the cursor from page 1 still
    // opens: it is bound to the caller (client, subject, scopes, audience),
    // which a refresh does not change, not to the token.
    let expiry = &out["steps"]["expiry"];
    assert_eq!(expiry["old_token_now"]["status"], 401, "{expiry:#}");
    assert!(
        expiry["old_token_now"]["www_authenticate"]
            .as_str()
            .unwrap()
            .starts_with("Bearer error=\"invalid_token\""),
        "{expiry:#}"
    );
    assert_eq!(expiry["token_changed"], true);
    assert!(
        grants(expiry).contains(&("refresh_token".into(), s.url.clone())),
        "refreshed for this resource: {expiry:#}"
    );
    let everything: Vec<String> = catalog_uris().into_iter().chain(ctx_uris()).collect();
    check_traversal(expiry, &everything);
    assert!(
        !seen(expiry)
            .iter()
            .any(|r| r["form"]["grant_type"] == "authorization_code"),
        "a refresh, not a new sign-in: {expiry:#}"
    );

    if !introspection {
        // Key rotation: the new key's token verifies at once (the unknown
        // kid makes the server refetch the JWKS); once the old key is
        // retired, its tokens stop verifying within the refresh interval.
        let rotate = &out["steps"]["rotate"];
        assert_ne!(rotate["old_kid"], rotate["new_kid"], "{rotate:#}");
        assert_eq!(rotate["new_kid"], rotate["rotated"]["keys"][0]);
        assert_eq!(
            rotate["new_first_page"],
            "catalog://catalog/items/0000000001"
        );
        assert_eq!(rotate["old_before_retire"]["status"], 200, "{rotate:#}");
        assert_eq!(rotate["old_after_retire"]["status"], 401, "{rotate:#}");
        assert!(
            rotate["old_after_retire"]["www_authenticate"]
                .as_str()
                .unwrap()
                .starts_with("Bearer error=\"invalid_token\"")
        );
        assert_eq!(rotate["new_after_retire"]["status"], 200, "{rotate:#}");
        s.expect_log(&["JWKS changed"]);
    }

    // A token for another resource: the other server answers 401
    // invalid_token naming its own metadata, and the client's new token,
    // asked for with that server's `resource`, is accepted.
    let audience = &out["steps"]["audience"];
    let refused = seen(audience)
        .iter()
        .find(|r| {
            r["status"] == 401
                && r["www_authenticate"]
                    .as_str()
                    .is_some_and(|h| h.contains("invalid_token"))
        })
        .unwrap_or_else(|| panic!("no invalid_token 401: {audience:#}"));
    assert!(
        refused["www_authenticate"]
            .as_str()
            .unwrap()
            .contains(&metadata_url(&other)),
        "{refused}"
    );
    assert!(
        grants(audience).iter().any(|(_, r)| r == &other.url),
        "a token asked for with the other server's resource: {audience:#}"
    );
    check_traversal(audience, &everything);
    // The Python SDK answers the 401 with a new authorization for the other
    // server. The TypeScript SDK tries a refresh for it, which the
    // authorization server refuses (the grant is for the first server,
    // RFC 8707 `invalid_target`), and stops: the app signs in again.
    match sdk {
        Sdk::Python => assert!(audience["sdk_error"].is_null(), "{audience:#}"),
        Sdk::TypeScript => assert_eq!(
            audience["sdk_error"], "resource indicator is missing, or unknown",
            "{audience:#}"
        ),
    }
    let log = other.log().to_lowercase();
    assert!(
        log.lines()
            .any(|l| l.contains("authentication failed") && l.contains("audience")),
        "the other server refused the token for its audience:\n{log}"
    );
    if introspection {
        assert!(a.stats()["introspections"].as_u64().unwrap() > 0);
    }
    drop(guard);
}

/// Shows the servers' logs when the test fails while it lives.
struct LogsOnFailure<'a>(&'a [&'a Server]);

impl Drop for LogsOnFailure<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for (i, s) in self.0.iter().enumerate() {
                eprintln!("--- server {i} ({}) log:\n{}", s.url, s.log());
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Sdk {
    Python,
    TypeScript,
}

impl Sdk {
    fn run(self, s: &Server, a: &AuthServer, steps: &str, other: &Server) -> Value {
        match self {
            Sdk::Python => run_json(python("py-mcp2", "mcp2_oauth_client.py").args([
                &s.url, "--as", &a.url, "--steps", steps, "--other", &other.url,
            ])),
            Sdk::TypeScript => {
                let node_dir = installed("tests/clients/node/node_modules");
                run_json(
                    Command::new(installed("tests/clients/node/node_modules/node/bin/node"))
                        .current_dir(node_dir.parent().unwrap())
                        .arg("oauth_client.mjs")
                        .args([&s.url, &a.url, "alice", steps, &other.url]),
                )
            }
        }
    }
}

#[test]
fn python_sdk_signs_in_and_keeps_going_jwt() {
    whole_session(Sdk::Python, false);
}

#[test]
fn python_sdk_signs_in_and_keeps_going_introspection() {
    whole_session(Sdk::Python, true);
}

#[test]
fn typescript_sdk_signs_in_and_keeps_going_jwt() {
    whole_session(Sdk::TypeScript, false);
}

#[test]
fn typescript_sdk_signs_in_and_keeps_going_introspection() {
    whole_session(Sdk::TypeScript, true);
}

/// Entra ID-style tokens, issued for real by the test server: `aud` an
/// `api://` URI (not the resource URL), the user in `oid` (`sub` is
/// pairwise there), permissions in `roles`. Each needs its mapping
/// (`accepted_audiences`, `subject_claim`, `scope_claims`): without it the
/// same token is refused, or lacks the scope.
#[test]
fn provider_claim_mappings_with_real_tokens() {
    let a = AuthServer::start();
    const OID: &str = "3f2b7c1e-0000-4000-8000-00000000a11c";
    a.settings(json!({
        "audience": "api://emseepea-tests",
        "scopes": "catalog:read",
        "extraClaims": { "oid": OID, "roles": ["catalog:read", "notes:read"] },
    }));
    let mapped = jwt_auth(
        &a.url,
        "accepted_audiences = [\"api://emseepea-tests\"]\nsubject_claim = \"oid\"\nscope_claims = [\"roles\"]",
    );
    let s = mcp_server(&mapped);
    let out = Sdk::Python.run(&s, &a, "signin,whoami", &s);
    check_signin(&out, &s, &a.url);
    check_traversal(
        &out["steps"]["signin"],
        &catalog_uris()
            .into_iter()
            .chain(ctx_uris())
            .collect::<Vec<_>>(),
    );
    let client_id = out["client_id"].as_str().unwrap();
    assert_eq!(
        out["steps"]["whoami"]["principal"],
        json!({"subject": OID, "clientId": client_id,
               "scopes": ["catalog:read", "notes:read"], "audience": s.url}),
        "subject from oid, scopes from roles, the resource URL as audience"
    );
    let token = out["token"].as_str().unwrap();
    // The same token where a mapping is missing.
    let read_ctx = |url: String| {
        let token = token.to_owned();
        async move {
            modern(
                &url,
                Some(&token),
                json!(1),
                "resources/read",
                json!({"uri": "hostile://ctx/1"}),
            )
            .await
        }
    };
    let unmapped = mcp_server(&jwt_auth(&a.url, ""));
    let r = block_on(read_ctx(unmapped.url.clone()));
    assert_eq!(
        r.status,
        401,
        "an api:// audience is not this server's: {}",
        r.text()
    );
    let scopes_only = mcp_server(&jwt_auth(
        &a.url,
        "accepted_audiences = [\"api://emseepea-tests\"]\nsubject_claim = \"oid\"",
    ));
    let r = block_on(read_ctx(scopes_only.url.clone()));
    assert_eq!(
        r.status,
        403,
        "roles are not scopes unless mapped: {}",
        r.text()
    );
    assert!(
        r.header("www-authenticate")
            .unwrap()
            .contains("scope=\"notes:read\""),
    );
}

/// Every ```toml block of the identity-provider recipes is a whole config
/// file that `emseepea check` accepts, with a source in it; only the JWKS
/// URL is pointed at a local copy of a key set (check fetches it).
#[tokio::test(flavor = "multi_thread")]
async fn identity_provider_recipes_pass_check() {
    let jwks = std::fs::read_to_string(root().join("tests/fixtures/keys/jwks.json")).unwrap();
    let keys = FakeHttp::start(std::sync::Arc::new(move |_, _, _, _| (200, jwks.clone()))).await;
    let page =
        std::fs::read_to_string(root().join("docs/src/operating/identity-providers.md")).unwrap();
    let blocks: Vec<&str> = page
        .split("```toml\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .collect();
    assert_eq!(
        blocks.len(),
        6,
        "two for a generic provider, one each for Keycloak, Auth0, Okta and Entra ID (none for Google)"
    );
    for block in blocks {
        let dir = tempfile::tempdir().unwrap();
        let sources = dir.path().join("sources");
        std::fs::create_dir_all(&sources).unwrap();
        std::fs::copy(guest("catalog"), sources.join("catalog.wasm")).unwrap();
        let local: Vec<String> = block
            .lines()
            .map(|l| {
                if l.starts_with("jwks_url = ") {
                    format!("jwks_url = \"{}/jwks\"", keys.url)
                } else {
                    l.to_owned()
                }
            })
            .collect();
        // The tests' shared precompile cache, so the guest compiles once.
        let file = format!(
            "cache_dir = \"{}\"\ncache_key_file = \"{}\"\n{}\n",
            root().join("target/test-cache").display(),
            root().join("target/test-cache.key").display(),
            local.join("\n")
        );
        let path = dir.path().join("emseepea.toml");
        std::fs::write(&path, &file).unwrap();
        let out = Command::new(BIN)
            .args(["check", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{block}\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("1 source(s)"));
    }
    assert!(keys.hits() > 0);
}

/// A refused token is answered before the request body is read, so that
/// connection cannot carry another request: the answer must say
/// `Connection: close`. Without it, a client sending its next request on
/// the connection (the Python SDK's metadata fetch right after the 401,
/// seen failing here with "Server disconnected without sending a
/// response") finds it closed under it, depending on whether the body had
/// arrived before the answer was written.
#[test]
fn a_refused_token_with_its_body_unread_closes_the_connection_openly() {
    use std::io::{Read, Write};
    let s = server()
        .source("catalog", "catalog", "[config]\nitems = \"5\"\n")
        .start();
    let mut c = std::net::TcpStream::connect(s.host_port()).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    // Headers only: the body is still "on its way" when the token is refused.
    write!(
        c,
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nAuthorization: Bearer not.a.token\r\n\
         Content-Length: 1000\r\n\r\n",
        s.host_port()
    )
    .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(
            c.read(&mut byte).unwrap(),
            1,
            "{}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_lowercase();
    assert!(head.starts_with("http/1.1 401"), "{head}");
    assert!(head.contains("\r\nconnection: close\r\n"), "{head}");
}
