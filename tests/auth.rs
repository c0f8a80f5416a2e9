//! The OAuth resource server: a verifier matrix with tokens minted here
//! (RS256, ES256, EdDSA against a JWKS URL; HS256 in dev mode; RFC 7662
//! introspection), challenges, protected-resource metadata, the principal a
//! guest sees, and which methods need a token.

mod support;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use support::*;

const ISSUER: &str = "https://issuer.test";
const RESOURCE: &str = "https://mcp.example.test/mcp";

fn key_file(name: &str) -> Vec<u8> {
    std::fs::read(root().join("tests/fixtures/keys").join(name)).unwrap()
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn claims() -> Value {
    json!({
        "iss": ISSUER, "aud": RESOURCE, "sub": "alice", "client_id": "app-1",
        "scope": "catalog:read hostile:read", "exp": now() + 600, "nbf": now() - 10, "iat": now(),
        "email": "alice@example.test", "roles": ["admin"]
    })
}

fn mint(alg: Algorithm, kid: &str, claims: &Value) -> String {
    let key = match alg {
        Algorithm::RS256 if kid == "rsa-2" => {
            EncodingKey::from_rsa_pem(&key_file("rsa-rotated.pem")).unwrap()
        }
        Algorithm::RS256 => EncodingKey::from_rsa_pem(&key_file("rsa.pem")).unwrap(),
        Algorithm::ES256 => EncodingKey::from_ec_pem(&key_file("ec.pem")).unwrap(),
        Algorithm::EdDSA => EncodingKey::from_ed_pem(&key_file("ed25519.pem")).unwrap(),
        _ => unreachable!(),
    };
    let mut header = Header::new(alg);
    header.kid = Some(kid.into());
    header.typ = Some("at+jwt".into());
    jsonwebtoken::encode(&header, claims, &key).unwrap()
}

struct Jwt {
    server: Server,
    jwks: FakeHttp,
    jwks_body: Arc<Mutex<String>>,
}

async fn jwt_server() -> Jwt {
    jwt_server_refreshing_every(1).await
}

/// A JWT server whose JWKS URL is refetched every `interval_s`.
async fn jwt_server_refreshing_every(interval_s: u64) -> Jwt {
    let body = Arc::new(Mutex::new(
        String::from_utf8(key_file("jwks.json")).unwrap(),
    ));
    let b2 = body.clone();
    let jwks = FakeHttp::start(Arc::new(move |_, _, _, _| {
        (200, b2.lock().unwrap().clone())
    }))
    .await;
    let auth = format!(
        "[auth]\nmode = \"jwt\"\nresource = \"{RESOURCE}\"\nauthorization_servers = [\"{ISSUER}\"]\n\
         [auth.jwt]\nissuer = \"{ISSUER}\"\njwks_url = \"{}/jwks.json\"\njwks_refresh_interval_s = {interval_s}\nrequired_typ = \"at+jwt\"\n",
        jwks.url
    );
    let server = server()
        .auth(Some(&auth))
        .source("catalog", "catalog", "[config]\nitems = \"5\"\n")
        .hostile("ctx", "context", "")
        .start();
    Jwt {
        server,
        jwks,
        jwks_body: body,
    }
}

async fn list_with(url: &str, token: Option<&str>) -> Answer {
    modern(url, token, json!(1), "resources/list", json!({})).await
}

fn expect_invalid(a: &Answer, why: &str) {
    assert_eq!(a.status, 401, "{why}: {}", a.text());
    let h = a.header("www-authenticate").unwrap_or_default();
    assert!(
        h.starts_with("Bearer error=\"invalid_token\""),
        "{why}: {h}"
    );
    assert!(h.contains("resource_metadata=\"https://mcp.example.test/.well-known/oauth-protected-resource/mcp\""), "{why}: {h}");
    assert_eq!(a.json()["error"], "invalid_token", "{why}");
}

#[tokio::test(flavor = "multi_thread")]
async fn jwt_verifier_matrix() {
    let j = jwt_server().await;
    let url = &j.server.url;
    for alg in [
        (Algorithm::RS256, "rsa-1"),
        (Algorithm::ES256, "ec-1"),
        (Algorithm::EdDSA, "ed-1"),
    ] {
        let a = list_with(url, Some(&mint(alg.0, alg.1, &claims()))).await;
        assert_eq!(a.status, 200, "{alg:?}: {}", a.text());
    }
    let with = |f: &dyn Fn(&mut Value)| {
        let mut c = claims();
        f(&mut c);
        mint(Algorithm::RS256, "rsa-1", &c)
    };
    let cases: Vec<(&str, String)> = vec![
        ("expired", with(&|c| c["exp"] = json!(now() - 120))),
        ("not yet valid", with(&|c| c["nbf"] = json!(now() + 600))),
        (
            "wrong issuer",
            with(&|c| c["iss"] = json!("https://evil.test")),
        ),
        (
            "wrong audience",
            with(&|c| c["aud"] = json!("https://other.example.test/mcp")),
        ),
        ("empty subject", with(&|c| c["sub"] = json!(""))),
        (
            "257-character subject",
            with(&|c| c["sub"] = json!("a".repeat(257))),
        ),
        (
            "control character in subject",
            with(&|c| c["sub"] = json!("ali\u{7}ce")),
        ),
        (
            "no client id",
            with(&|c| {
                c.as_object_mut().unwrap().remove("client_id");
            }),
        ),
        ("bad signature", {
            let t = mint(Algorithm::RS256, "rsa-1", &claims());
            let (rest, sig) = t.rsplit_once('.').unwrap();
            let flipped: String = sig.chars().rev().collect();
            format!("{rest}.{flipped}")
        }),
        ("alg none", {
            use base64::Engine as _;
            let e = |v: &Value| {
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .encode(serde_json::to_vec(v).unwrap())
            };
            format!(
                "{}.{}.",
                e(&json!({"alg":"none","typ":"at+jwt","kid":"rsa-1"})),
                e(&claims())
            )
        }),
        ("HS256 signed with the RSA public key", {
            let mut h = Header::new(Algorithm::HS256);
            h.kid = Some("rsa-1".into());
            h.typ = Some("at+jwt".into());
            jsonwebtoken::encode(
                &h,
                &claims(),
                &EncodingKey::from_secret(&key_file("rsa.pub.pem")).unwrap(),
            )
            .unwrap()
        }),
        ("wrong typ", {
            let mut h = Header::new(Algorithm::RS256);
            h.kid = Some("rsa-1".into());
            jsonwebtoken::encode(
                &h,
                &claims(),
                &EncodingKey::from_rsa_pem(&key_file("rsa.pem")).unwrap(),
            )
            .unwrap()
        }),
        ("unknown kid", mint(Algorithm::RS256, "nope", &claims())),
        (
            "oversized token",
            format!(
                "{}{}",
                mint(Algorithm::RS256, "rsa-1", &claims()),
                "A".repeat(9000)
            ),
        ),
        ("garbage", "not-a-jwt".into()),
    ];
    for (why, token) in &cases {
        expect_invalid(&list_with(url, Some(token)).await, why);
    }
    // Missing token: 401 without an error code, with the metadata and scopes.
    let a = list_with(url, None).await;
    assert_eq!(a.status, 401);
    assert_eq!(
        a.header("www-authenticate").unwrap(),
        "Bearer resource_metadata=\"https://mcp.example.test/.well-known/oauth-protected-resource/mcp\", scope=\"catalog:read hostile:read\""
    );
    // A token in the query string is refused, even a valid one.
    let valid = mint(Algorithm::RS256, "rsa-1", &claims());
    let a = post(&format!("{url}?access_token={valid}"), &[("mcp-protocol-version", MODERN), ("mcp-method", "resources/list")],
        serde_json::to_vec(&json!({"jsonrpc":"2.0","id":1,"method":"resources/list","params":{"_meta":modern_meta()}})).unwrap()).await;
    assert_eq!(a.status, 400);
    assert!(
        a.header("www-authenticate")
            .unwrap()
            .contains("error=\"invalid_request\"")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_kid_refreshes_the_jwks() {
    // An hour between scheduled refreshes: only the unknown kid fetches.
    let j = jwt_server_refreshing_every(3600).await;
    let token = mint(Algorithm::RS256, "rsa-2", &claims());
    *j.jwks_body.lock().unwrap() = String::from_utf8(key_file("jwks-rotated.json")).unwrap();
    let before = j.jwks.hits();
    let a = list_with(&j.server.url, Some(&token)).await;
    assert_eq!(a.status, 200, "the refresh found rsa-2: {}", a.text());
    assert_eq!(j.jwks.hits(), before + 1, "the unknown kid fetched once");
    // Another unknown kid within the interval does not fetch again.
    let unknown = mint(Algorithm::RS256, "rsa-3", &claims());
    expect_invalid(
        &list_with(&j.server.url, Some(&unknown)).await,
        "rsa-3 is published nowhere",
    );
    assert_eq!(j.jwks.hits(), before + 1, "at most one fetch per interval");
}

/// Issue 9.7: a key removed at the authorization server stopped verifying
/// only when a token with an unknown kid came by, and a token verified
/// before stayed valid from the cache until its `exp`. Now the JWKS is
/// refetched every interval and a changed key set flushes the cache.
#[tokio::test(flavor = "multi_thread")]
async fn a_key_removed_from_the_jwks_stops_verifying_within_one_interval() {
    let j = jwt_server_refreshing_every(1).await;
    let token = mint(Algorithm::RS256, "rsa-1", &claims());
    let a = list_with(&j.server.url, Some(&token)).await;
    assert_eq!(a.status, 200, "{}", a.text());
    // Remembered: a second request does not need the JWKS.
    let a = list_with(&j.server.url, Some(&token)).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let mut jwks: Value = serde_json::from_slice(&key_file("jwks.json")).unwrap();
    jwks["keys"]
        .as_array_mut()
        .unwrap()
        .retain(|k| k["kid"] != "rsa-1");
    *j.jwks_body.lock().unwrap() = jwks.to_string();
    // Two fetches after the change: at least one saw the new key set
    // (a fetch already under way may have read the old one).
    let changed = j.jwks.hits();
    let waited = std::time::Instant::now();
    while j.jwks.hits() < changed + 2 {
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(60),
            "the JWKS was not refetched on schedule"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    j.server.expect_log(&["JWKS changed"]);
    expect_invalid(
        &list_with(&j.server.url, Some(&token)).await,
        "rsa-1 was removed",
    );
    // The keys still published go on verifying.
    let ec = mint(Algorithm::ES256, "ec-1", &claims());
    assert_eq!(list_with(&j.server.url, Some(&ec)).await.status, 200);
}

/// `emseepea check` refuses the `[auth]` section `auth` with `reason`.
fn refused_at_startup(auth: &str, reason: &str) {
    let (ok, out) = server().auth(Some(auth)).prepare().check();
    assert!(!ok, "{out}");
    assert!(out.contains(reason), "{out}");
}

/// An operator who wrote `[auth.jwt]` but left `mode = "dev"` would have
/// served dev tokens while believing the JWKS was checked: refused at startup.
#[test]
fn an_auth_table_its_mode_does_not_read_is_refused() {
    refused_at_startup(
        "[auth]\nmode = \"dev\"\n[auth.jwt]\nissuer = \"https://as.test\"\njwks_url = \"https://as.test/jwks.json\"\n",
        "[auth.jwt] is set but auth.mode = \"dev\" does not read it",
    );
}

#[test]
fn a_jwks_refresh_interval_of_zero_is_refused() {
    refused_at_startup(
        "[auth]\nmode = \"jwt\"\nauthorization_servers = [\"https://as.test\"]\n[auth.jwt]\nissuer = \"x\"\njwks_url = \"http://127.0.0.1:1/jwks.json\"\njwks_refresh_interval_s = 0\n",
        "jwks_refresh_interval_s must be at least 1",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn protected_resource_metadata() {
    let j = jwt_server().await;
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let origin = j.server.url.trim_end_matches("/mcp");
        let r = http().get(format!("{origin}{path}")).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["resource"], RESOURCE);
        assert_eq!(v["authorization_servers"], json!([ISSUER]));
        assert_eq!(
            v["scopes_supported"],
            json!(["catalog:read", "hostile:read"])
        );
        assert_eq!(v["bearer_methods_supported"], json!(["header"]));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn guests_see_only_subject_client_scopes_and_audience() {
    let j = jwt_server().await;
    let token = mint(Algorithm::ES256, "ec-1", &claims());
    let a = modern(
        &j.server.url,
        Some(&token),
        json!(1),
        "resources/read",
        json!({"uri":"hostile://ctx/1"}),
    )
    .await;
    let text = a.json()["result"]["contents"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let ctx: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        ctx["principal"],
        json!({"subject":"alice","clientId":"app-1","scopes":["catalog:read","hostile:read"],"audience":RESOURCE})
    );
    assert_eq!(
        ctx.as_object().unwrap().len(),
        2,
        "principal and deadline only: {ctx}"
    );
    for leaked in ["alice@example.test", "admin", ISSUER, &token[..20]] {
        assert!(!text.contains(leaked), "{leaked} reached the guest: {text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn introspection_is_checked_and_cached() {
    let expected_auth = format!("Basic {}", {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode("rs-client:rs-secret")
    });
    let responder: Responder = Arc::new(move |_, _, headers, body| {
        if headers.get("authorization").and_then(|v| v.to_str().ok())
            != Some(expected_auth.as_str())
        {
            return (401, "{}".into());
        }
        let form = String::from_utf8_lossy(body).into_owned();
        let exp = now() + 600;
        let answer = if form.contains("token=good") {
            json!({"active":true,"sub":"alice","client_id":"app-1","scope":"catalog:read","aud":RESOURCE,"exp":exp,"iss":ISSUER})
        } else if form.contains("token=elsewhere") {
            json!({"active":true,"sub":"alice","client_id":"app-1","scope":"catalog:read","aud":"https://other.test","exp":exp})
        } else {
            json!({"active":false})
        };
        (200, answer.to_string())
    });
    let idp = FakeHttp::start(responder).await;
    let auth = format!(
        "[auth]\nmode = \"introspection\"\nresource = \"{RESOURCE}\"\nauthorization_servers = [\"{ISSUER}\"]\n\
         [auth.introspection]\nendpoint = \"{}/introspect\"\nclient_id = \"rs-client\"\nclient_secret = \"rs-secret\"\n",
        idp.url
    );
    let s = server()
        .auth(Some(&auth))
        .source("catalog", "catalog", "[config]\nitems = \"5\"\n")
        .start();
    assert_eq!(list_with(&s.url, Some("good")).await.status, 200);
    assert_eq!(list_with(&s.url, Some("good")).await.status, 200);
    assert_eq!(idp.hits(), 1, "the second request used the cache");
    expect_invalid(&list_with(&s.url, Some("inactive")).await, "inactive");
    expect_invalid(&list_with(&s.url, Some("elsewhere")).await, "audience");
}

#[tokio::test]
async fn method_rules_with_public_discovery() {
    let s = server()
        .config("[[resources]]\nuri = \"demo://public\"\nname = \"p\"\ntext = \"open\"\n[[resources]]\nuri = \"demo://secret\"\nname = \"s\"\naccess = \"protected\"\nrequiredScopes = [\"secret:read\"]\ntext = \"closed\"\n")
        .source("catalog", "catalog", "[config]\nitems = \"5\"\n")
        .start();
    let url = &s.url;
    // Open without a token: discover, templates, public reads, and the legacy handshake.
    assert_eq!(
        modern(url, None, json!(1), "server/discover", Value::Null)
            .await
            .status,
        200
    );
    assert_eq!(
        modern(url, None, json!(1), "resources/templates/list", Value::Null)
            .await
            .status,
        200
    );
    assert_eq!(
        modern(
            url,
            None,
            json!(1),
            "resources/read",
            json!({"uri":"demo://public"})
        )
        .await
        .status,
        200
    );
    let mut anon = Session::open(url, "2025-11-25", None).await;
    assert_eq!(anon.request("ping", Value::Null).await.status, 200);
    // resources/list always needs one once an inventory source exists, in every version.
    assert_eq!(
        modern(url, None, json!(1), "resources/list", Value::Null)
            .await
            .status,
        401
    );
    assert_eq!(
        anon.request("resources/list", Value::Null).await.status,
        401
    );
    // Protected reads: 401 without a token, 403 without the scope, 200 with it.
    let a = modern(
        url,
        None,
        json!(1),
        "resources/read",
        json!({"uri":"demo://secret"}),
    )
    .await;
    assert_eq!(a.status, 401);
    assert!(
        a.header("www-authenticate")
            .unwrap()
            .contains("scope=\"secret:read\"")
    );
    let no_scope = s.token(Some("alice"), "catalog:read");
    let a = modern(
        url,
        Some(&no_scope),
        json!(1),
        "resources/read",
        json!({"uri":"demo://secret"}),
    )
    .await;
    assert_eq!(a.status, 403);
    assert!(
        a.header("www-authenticate")
            .unwrap()
            .contains("error=\"insufficient_scope\", scope=\"secret:read\"")
    );
    let with_scope = s.token(Some("alice"), "secret:read catalog:read");
    let a = modern(
        url,
        Some(&with_scope),
        json!(1),
        "resources/read",
        json!({"uri":"demo://secret"}),
    )
    .await;
    assert_eq!(a.json()["result"]["contents"][0]["text"], "closed");
    // The protected static is listed only to callers holding its scope.
    let listed = |a: Answer| -> Vec<String> {
        a.json()["result"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["uri"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(
        !listed(
            modern(
                url,
                Some(&no_scope),
                json!(1),
                "resources/list",
                Value::Null
            )
            .await
        )
        .contains(&"demo://secret".to_string())
    );
    assert!(
        listed(
            modern(
                url,
                Some(&with_scope),
                json!(1),
                "resources/list",
                Value::Null
            )
            .await
        )
        .contains(&"demo://secret".to_string())
    );
    // A bad token is refused even where none is needed.
    assert_eq!(
        modern(
            url,
            Some("garbage"),
            json!(1),
            "server/discover",
            Value::Null
        )
        .await
        .status,
        401
    );
    // An anonymous session is bound to the first token presented on it.
    assert_eq!(anon.request("ping", Value::Null).await.status, 200);
    anon.token = Some(no_scope.clone());
    assert_eq!(
        anon.request("resources/list", Value::Null).await.status,
        200
    );
    anon.token = Some(s.token(Some("bob"), "catalog:read"));
    assert_eq!(
        anon.request("ping", Value::Null).await.status,
        404,
        "bound to alice now"
    );
}

#[tokio::test]
async fn without_public_discovery_everything_needs_a_token() {
    let s = server()
        .auth(Some("[auth]\nmode = \"dev\"\npublic_discovery = false\n"))
        .source("catalog", "catalog", "")
        .start();
    assert_eq!(
        modern(&s.url, None, json!(1), "server/discover", Value::Null)
            .await
            .status,
        401
    );
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    assert_eq!(
        post(&s.url, &[], serde_json::to_vec(&init).unwrap())
            .await
            .status,
        401
    );
    let token = s.token(Some("alice"), "catalog:read");
    assert_eq!(
        modern(
            &s.url,
            Some(&token),
            json!(1),
            "server/discover",
            Value::Null
        )
        .await
        .status,
        200
    );
}

#[test]
fn dev_tokens_need_dev_mode() {
    let p = server().auth(Some("[auth]\nmode = \"jwt\"\nauthorization_servers = [\"https://a\"]\n[auth.jwt]\nissuer = \"x\"\njwks_file = \"none.json\"\n")).prepare();
    let out = std::process::Command::new(BIN)
        .args(["token", "--config"])
        .arg(&p.config_path)
        .args(["--sub", "alice"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("mode = \"dev\""));
}

#[tokio::test]
async fn dev_mode_warns_at_start() {
    let s = server().source("catalog", "catalog", "").start();
    // stderr is read on its own thread, so the warning may land just after the ready line.
    s.expect_log(&["auth mode \"dev\""]);
}

// ---- Issue 48 §4: the auth fetchers and every log line ----

const FORGED_LINE: &str = "2099-01-01T00:00:00Z  INFO emseepea::server: forged";

/// A bearer token whose JOSE header's `alg` holds a forged log line:
/// `decode_header`'s error quotes the value, newlines and all.
fn forging_token() -> String {
    use base64::Engine as _;
    let header = format!("{{\"alg\":\"X\\n{FORGED_LINE}\\n\"}}");
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    format!("{}.{}.c2ln", b64.encode(header), b64.encode("{}"))
}

/// Every line of `log` is one the server wrote: none starts with the forged
/// timestamp, none is unbounded, none holds a raw bidi override.
fn assert_no_forged_line(log: &str) {
    for line in log.lines() {
        assert!(!line.starts_with("2099-"), "a forged line: {line}");
        assert!(
            line.len() < 4096,
            "an unbounded line of {} bytes",
            line.len()
        );
        assert!(!line.contains('\u{202e}'), "a raw bidi override: {line}");
    }
}

/// An anonymous client's JOSE header, and a JSON-RPC id of 40 KB with a
/// forged line and a bidi override, reach the log escaped and cut like
/// guest text, in both log formats.
#[tokio::test(flavor = "multi_thread")]
async fn a_forged_jose_header_or_request_id_forges_no_log_line() {
    for format in ["human", "json"] {
        let s = server()
            .config(&format!("[log]\nformat = \"{format}\"\n"))
            .hostile("bad", "loop", "[budget]\nfuel = 20_000_000")
            .start();
        let a = list_with(&s.url, Some(&forging_token())).await;
        assert_eq!(a.status, 401, "{}", a.text());
        s.expect_log(&["authentication failed"]);
        let id = format!("x\n{FORGED_LINE}\u{202e}{}", "A".repeat(40_000));
        let good = s.token(Some("alice"), "hostile:read");
        let a = modern(
            &s.url,
            Some(&good),
            json!(id),
            "resources/read",
            json!({"uri": "hostile://bad/1"}),
        )
        .await;
        assert_eq!(a.json()["error"]["code"], -32603, "{}", a.text());
        assert_eq!(a.json()["id"], json!(id), "the id is echoed unchanged");
        s.expect_log(&["guest call failed"]);
        let log = s.log();
        assert_no_forged_line(&log);
        let failure = log
            .lines()
            .find(|l| l.contains("guest call failed"))
            .unwrap();
        assert!(
            failure.contains("…[40"),
            "the id is cut with its length: {failure}"
        );
        assert!(
            failure.contains("\\\\u{202e}") || failure.contains("\\u{202e}"),
            "{failure}"
        );
    }
}

/// A flood of bad tokens: a bounded number of "authentication failed"
/// lines, and every failure either logged or counted in `suppressed`.
#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_bad_tokens_logs_a_bounded_number_of_lines() {
    let s = server()
        .config("[log]\nformat = \"json\"\n")
        .source("catalog", "catalog", "[config]\nitems = \"5\"\n")
        .start();
    let started = std::time::Instant::now();
    let flood: u64 = 300;
    let client = http();
    let mut tasks = Vec::new();
    for i in 0..flood {
        let url = s.url.clone();
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            modern_list(&client, &url, &format!("bad-token-{i}"))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }));
        if tasks.len() >= 16 {
            assert_eq!(tasks.remove(0).await.unwrap(), 401);
        }
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 401);
    }
    let elapsed = started.elapsed().as_secs();
    // One more, a window later: its line reports what was not logged.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(list_with(&s.url, Some("bad-token-last")).await.status, 401);
    let lines = || -> Vec<Value> {
        s.log()
            .lines()
            .filter(|l| l.contains("authentication failed"))
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    // stderr is read on a thread of its own: wait for the last line.
    let counted = |lines: &[Value]| -> u64 {
        lines
            .iter()
            .map(|v| v["suppressed"].as_u64().unwrap_or(0))
            .sum()
    };
    let waited = std::time::Instant::now();
    let mut got = lines();
    while (got.len() as u64 + counted(&got)) < flood + 1 && waited.elapsed().as_secs() < 5 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        got = lines();
    }
    let lines = got;
    let per_second = 10;
    assert!(
        lines.len() as u64 <= per_second * (elapsed + 3),
        "{} lines for {flood} failures in {elapsed} s",
        lines.len()
    );
    for v in &lines {
        assert!(v["suppressed"].is_u64(), "a count on every line: {v}");
    }
    assert_eq!(
        lines.len() as u64 + counted(&lines),
        flood + 1,
        "each failure logged or counted"
    );
}

fn check_auth(auth: &str) -> (bool, String) {
    server().auth(Some(auth)).prepare().check()
}

/// A JWKS URL or an introspection endpoint over plain http to a host that
/// is not loopback is refused by `check` (and so at startup), naming the
/// key; `auth.allow_plain_http` accepts it, and the log names that key.
#[test]
fn plain_http_to_a_remote_auth_endpoint_is_refused() {
    let jwt = |url: &str, extra: &str| {
        format!(
            "[auth]\nmode = \"jwt\"\nauthorization_servers = [\"https://as.test\"]\n{extra}\n\
             [auth.jwt]\nissuer = \"x\"\njwks_url = \"{url}\"\n"
        )
    };
    let introspection = |url: &str, extra: &str| {
        format!(
            "[auth]\nmode = \"introspection\"\nauthorization_servers = [\"https://as.test\"]\n{extra}\n\
             [auth.introspection]\nendpoint = \"{url}\"\nclient_id = \"c\"\nclient_secret = \"s\"\n"
        )
    };
    for (config, key) in [
        (
            jwt("http://as.example.test/jwks.json", ""),
            "auth.jwt.jwks_url",
        ),
        (jwt("http://10.0.0.1/jwks.json", ""), "auth.jwt.jwks_url"),
        (
            introspection("http://as.example.test/introspect", ""),
            "auth.introspection.endpoint",
        ),
        (
            introspection("ftp://as.example.test/i", ""),
            "auth.introspection.endpoint",
        ),
    ] {
        let (ok, out) = check_auth(&config);
        assert!(!ok, "{out}");
        assert!(out.contains(key), "{out}");
    }
    let (ok, out) = check_auth(&introspection("http://as.example.test/introspect", ""));
    assert!(
        !ok && out.contains("plain http is allowed only to a loopback host"),
        "{out}"
    );
    // Loopback, and https anywhere, are fine (introspection fetches nothing at startup).
    for url in [
        "http://127.0.0.1:9/introspect",
        "http://[::1]:9/introspect",
        "http://localhost:9/i",
        "https://as.example.test/introspect",
    ] {
        let (ok, out) = check_auth(&introspection(url, ""));
        assert!(ok, "{url}: {out}");
    }
    let (ok, out) = check_auth(&introspection(
        "http://as.example.test/introspect",
        "allow_plain_http = true",
    ));
    assert!(ok, "{out}");
    assert!(out.contains("auth.allow_plain_http = true"), "{out}");
}

/// `leeway_s = 1e9` accepted expired tokens forever: both durations have
/// an upper bound.
#[test]
fn leeway_and_cache_age_have_upper_bounds() {
    let dev = |extra: &str| check_auth(&format!("[auth]\nmode = \"dev\"\n{extra}\n"));
    let (ok, out) = dev("leeway_s = 1000000000");
    assert!(
        !ok && out.contains("auth.leeway_s must be at most 300"),
        "{out}"
    );
    let (ok, out) = dev("cache_max_age_s = 1000000000");
    assert!(
        !ok && out.contains("auth.cache_max_age_s must be at most 3600"),
        "{out}"
    );
    let (ok, out) = dev("leeway_s = 300\ncache_max_age_s = 3600");
    assert!(ok, "{out}");
}

/// A JWKS URL answering 100 MB (chunked, no length announced): a fetch
/// error once the cap is passed, and the host stops reading there.
#[tokio::test(flavor = "multi_thread")]
async fn a_100_mb_jwks_is_a_fetch_error_not_an_allocation() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const TOTAL: usize = 100 << 20;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let sent2 = sent.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let sent = sent2.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
                if stream.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let chunk = vec![b' '; 64 << 10];
                let framed = [
                    format!("{:x}\r\n", chunk.len()).into_bytes(),
                    chunk,
                    b"\r\n".to_vec(),
                ]
                .concat();
                while sent.load(std::sync::atomic::Ordering::SeqCst) < TOTAL {
                    if stream.write_all(&framed).await.is_err() {
                        return;
                    }
                    sent.fetch_add(64 << 10, std::sync::atomic::Ordering::SeqCst);
                }
                let _ = stream.write_all(b"0\r\n\r\n").await;
            });
        }
    });
    let auth = format!(
        "[auth]\nmode = \"jwt\"\nauthorization_servers = [\"https://as.test\"]\n\
         [auth.jwt]\nissuer = \"x\"\njwks_url = \"{url}\"\njwks_timeout_ms = 60000\n"
    );
    let prepared = server().auth(Some(&auth)).prepare();
    let (ok, out) = tokio::task::spawn_blocking(move || prepared.check())
        .await
        .unwrap();
    assert!(!ok, "{out}");
    assert!(out.contains("larger than 1048576 bytes"), "{out}");
    let sent = sent.load(std::sync::atomic::Ordering::SeqCst);
    assert!(sent < 32 << 20, "the host read {sent} bytes of it");
}

/// A secret of the wrong type: the error names the key, never the value.
#[test]
fn a_secret_of_the_wrong_type_is_named_not_echoed() {
    let (ok, out) = check_auth(
        "[auth]\nmode = \"introspection\"\nauthorization_servers = [\"https://as.test\"]\n\
         [auth.introspection]\nendpoint = \"https://as.test/i\"\nclient_id = \"c\"\nclient_secret = 918273645\n",
    );
    assert!(!ok, "{out}");
    assert!(out.contains("auth.introspection.client_secret"), "{out}");
    assert!(!out.contains("918273645"), "the value is echoed: {out}");
    let (ok, out) = server()
        .config(
            "[databases.pg]\nengine = \"postgres\"\nhost = \"127.0.0.1\"\npassword = 918273645\n",
        )
        .prepare()
        .check();
    assert!(!ok, "{out}");
    assert!(
        out.contains("databases.pg: engine \"postgres\": password: expected a string"),
        "{out}"
    );
    assert!(!out.contains("918273645"), "the value is echoed: {out}");
}

/// `client_secret_file` and `client_secret_env` reach the introspection
/// endpoint like an inline secret; two forms at once are refused.
#[tokio::test(flavor = "multi_thread")]
async fn the_client_secret_comes_from_a_file_or_the_environment() {
    let expected_auth = format!("Basic {}", {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode("rs-client:s3cret-value")
    });
    let responder: Responder = Arc::new(move |_, _, headers, _| {
        if headers.get("authorization").and_then(|v| v.to_str().ok())
            != Some(expected_auth.as_str())
        {
            return (401, "{}".into());
        }
        let answer = json!({"active":true,"sub":"alice","client_id":"app-1","scope":"catalog:read",
            "aud":RESOURCE,"exp":now() + 600,"iss":ISSUER});
        (200, answer.to_string())
    });
    let idp = FakeHttp::start(responder).await;
    let auth = |secret: &str| {
        format!(
            "[auth]\nmode = \"introspection\"\nresource = \"{RESOURCE}\"\nauthorization_servers = [\"{ISSUER}\"]\n\
             [auth.introspection]\nendpoint = \"{}/introspect\"\nclient_id = \"rs-client\"\n{secret}\n",
            idp.url
        )
    };
    let from_file = server()
        .auth(Some(&auth("client_secret_file = \"secret.txt\"")))
        .file("secret.txt", "s3cret-value\n")
        .source("catalog", "catalog", "[config]\nitems = \"5\"\n")
        .start();
    assert_eq!(list_with(&from_file.url, Some("good-1")).await.status, 200);
    let from_env = server()
        .auth(Some(&auth(
            "client_secret_env = \"EMSEEPEA_TEST_CLIENT_SECRET\"",
        )))
        .source("catalog", "catalog", "[config]\nitems = \"5\"\n")
        .prepare()
        .start_with_env(&[("EMSEEPEA_TEST_CLIENT_SECRET", "s3cret-value")]);
    assert_eq!(list_with(&from_env.url, Some("good-2")).await.status, 200);
    let (ok, out) = server()
        .auth(Some(&auth(
            "client_secret = \"a\"\nclient_secret_env = \"X\"",
        )))
        .prepare()
        .check();
    assert!(!ok, "{out}");
    assert!(
        out.contains("exactly one of auth.introspection.client_secret"),
        "{out}"
    );
}
