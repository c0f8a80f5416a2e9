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
