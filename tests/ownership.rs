//! One owner per URI, and bounded host work for templates (issue 9, item 2):
//! startup refuses two templates that can match one URI and a static URI a
//! template matches, naming both files; templates are bounded in length and
//! expressions; a `resources/read` URI over 2,048 characters is refused
//! before any matching.

mod support;
use serde_json::{Value, json};
use support::*;

/// `emseepea check` fails with one error line that contains every needle.
fn refused_naming(p: &Prepared, needles: &[&str]) -> String {
    let (ok, out) = p.check();
    assert!(!ok, "check should fail:\n{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("emseepea:"))
        .unwrap_or_else(|| panic!("no error line:\n{out}"))
        .to_owned();
    for n in needles {
        assert!(line.contains(n), "error does not contain {n:?}: {line}");
    }
    line
}

fn accepted(p: &Prepared) {
    let (ok, out) = p.check();
    assert!(ok, "check should succeed:\n{out}");
}

/// A hostile source `name` (file `name.wasm`) with `template` and `scope`.
fn with_template(b: ServerBuilder, name: &str, template: &str, scope: &str) -> ServerBuilder {
    b.hostile(
        name,
        "ok",
        &format!("[config]\ntemplate = \"{template}\"\nscope = \"{scope}\"\n"),
    )
}

/// The observed attack: `aaa` (`hostile://{x}/{id}`, registered first)
/// matched every URI `bbb` lists, so bbb's reads went to aaa.
#[test]
fn a_template_that_matches_another_sources_uris_is_refused() {
    let p = with_template(server(), "aaa", "hostile://{x}/{id}", "a:read");
    let p = with_template(p, "bbb", "hostile://bbb/{id}", "b:read").prepare();
    refused_naming(
        &p,
        &[
            "bbb.wasm",
            "aaa.wasm",
            "hostile://{x}/{id}",
            "hostile://bbb/{id}",
            "can match the same URIs",
            "\"hostile://bbb/a\"",
        ],
    );
}

/// A catch-all `{+u}` takes over every other source's URIs, whether it is
/// registered before or after them.
#[test]
fn a_catch_all_template_is_refused() {
    let p = with_template(server(), "aaa", "{+u}", "a:read");
    let p = with_template(p, "bbb", "hostile://bbb/{id}", "b:read").prepare();
    refused_naming(&p, &["bbb.wasm", "aaa.wasm", "{+u}"]);
    let p = with_template(server(), "bbb", "hostile://bbb/{id}", "b:read");
    let p = with_template(p, "zzz", "{+u}", "z:read").prepare();
    refused_naming(&p, &["zzz.wasm", "bbb.wasm", "{+u}"]);
}

/// Templates that differ where they must still start together.
#[test]
fn disjoint_templates_start_and_each_read_reaches_its_owner() {
    let b = with_template(server(), "aaa", "hostile://aaa/{id}", "a:read");
    let b = with_template(b, "bbb", "hostile://bbb/{id}", "b:read");
    // `{id}` cannot hold '/', so this one is disjoint from both.
    let b = with_template(b, "ccc", "hostile://{x}/{id}/c", "c:read");
    let s = b.start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let token = s.token(Some("alice"), "b:read");
        let a = modern(
            &s.url,
            Some(&token),
            json!(1),
            "resources/read",
            json!({ "uri": "hostile://bbb/1" }),
        )
        .await;
        assert_eq!(a.status, 200, "{}", a.text());
        assert_eq!(
            a.json()["result"]["contents"][0]["text"],
            "Contents of hostile://bbb/1"
        );
    });
}

/// A static resource whose URI a template matches shadowed that source's
/// record on read (and listings broke depending on page size).
#[test]
fn a_static_uri_that_a_template_matches_is_refused() {
    let p = with_template(server(), "bbb", "hostile://bbb/{id}", "b:read")
        .config("[[resources]]\nuri = \"demo://ok\"\nname = \"ok\"\ntext = \"x\"\n")
        .config("[[resources]]\nuri = \"hostile://bbb/1\"\nname = \"shadow\"\ntext = \"forged\"\n")
        .prepare();
    refused_naming(
        &p,
        &[
            "emseepea.toml",
            "resources[1] (hostile://bbb/1)",
            "bbb.wasm",
            "hostile://bbb/{id}",
        ],
    );
    // The same static URI beside a template that cannot match it is fine.
    let p = with_template(server(), "bbb", "hostile://bbb/{id}/x", "b:read")
        .config("[[resources]]\nuri = \"hostile://bbb/1\"\nname = \"shadow\"\ntext = \"x\"\n")
        .prepare();
    accepted(&p);
}

/// A template of `expressions` expressions, `len` bytes long.
fn sized_template(expressions: usize, len: usize) -> String {
    let mut t = "hostile://hostile/".to_string();
    for i in 0..expressions {
        t.push_str(&format!("{{v{i}}}"));
    }
    assert!(t.len() <= len);
    let pad = len - t.len();
    t.insert_str("hostile://hostile/".len(), &"p".repeat(pad));
    t
}

#[test]
fn templates_are_bounded_at_startup() {
    const MAX_LEN: usize = 512;
    const MAX_EXPRESSIONS: usize = 16;
    let with = |t: &str| with_template(server(), "hostile", t, "hostile:read").prepare();
    accepted(&with(&sized_template(MAX_EXPRESSIONS, MAX_LEN)));
    refused_naming(
        &with(&sized_template(MAX_EXPRESSIONS + 1, MAX_LEN)),
        &["hostile.wasm", "more than 16 expressions"],
    );
    refused_naming(
        &with(&sized_template(1, MAX_LEN + 1)),
        &["hostile.wasm", "513 bytes long; at most 512"],
    );
    // The template of the observed attack: 2,048 bytes, 682 expressions.
    let attack = "{a}".repeat(682) + "xx";
    let line = refused_naming(&with(&attack), &["hostile.wasm", "2048 bytes long"]);
    assert!(
        !line.contains("{a}{a}"),
        "the template is not quoted: {line}"
    );
}

async fn read(s: &Server, token: &str, uri: &str) -> Value {
    let a = modern(
        &s.url,
        Some(token),
        json!(1),
        "resources/read",
        json!({ "uri": uri }),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    a.json()
}

/// 2,048 characters are read; 2,049 are refused as invalid params before
/// any matching (the guest is never called); so is a 300 KB URI, at once.
#[test]
fn a_read_uri_over_2048_characters_is_refused_before_matching() {
    let s = server().hostile("hostile", "ok", "").start();
    let token = s.token(Some("alice"), "hostile:read");
    let uri = |len: usize| {
        let head = "hostile://hostile/";
        format!("{head}{}", "i".repeat(len - head.len()))
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let longest = uri(2048);
        let ok = read(&s, &token, &longest).await;
        assert_eq!(
            ok["result"]["contents"][0]["text"],
            format!("Contents of {longest}"),
            "{ok}"
        );
        for len in [2049, 300_000] {
            let refused = read(&s, &token, &uri(len)).await;
            let error = &refused["error"];
            assert_eq!(error["code"], -32602, "{refused}");
            assert!(
                error["message"]
                    .as_str()
                    .unwrap()
                    .starts_with("Invalid params"),
                "{refused}"
            );
            // Not the "resource not found" answer, which echoes the uri.
            assert!(error.get("data").is_none(), "{refused}");
        }
    });
    // Only the 2,048-character read reached the guest.
    s.expect_log(&["source=\"hostile\" call=\"read\""]);
    assert_eq!(
        s.log_lines_with("source=\"hostile\" call=\"read\""),
        1,
        "{}",
        s.log()
    );
}
