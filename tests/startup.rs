//! Startup: every refusal names the file and the reason; the precompile
//! cache makes a second start skip compilation and survives corruption.

mod support;
use support::*;

fn refused(p: Prepared, file: &str, reason: &str) {
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

#[test]
fn a_file_that_is_not_a_component_is_refused() {
    let p = server().source("catalog", "catalog", "").prepare();
    std::fs::write(
        p.dir.path().join("sources/junk.wasm"),
        b"\0asm\x01\0\0\0garbage",
    )
    .unwrap();
    refused(p, "junk.wasm", "not a WebAssembly component");
    let p = server().prepare();
    std::fs::write(p.dir.path().join("sources/text.wasm"), b"hello").unwrap();
    refused(p, "text.wasm", "component");
}

#[test]
fn a_component_of_the_wrong_world_is_refused() {
    refused(
        server()
            .source("wrong", "hostile/wrong-world", "")
            .prepare(),
        "wrong.wasm",
        "not an inventory source",
    );
}

#[test]
fn list_on_a_public_template_is_refused() {
    let p = server()
        .hostile("pub", "ok", "[config]\naccess = \"public\"")
        .prepare();
    refused(p, "pub.wasm", "public");
}

#[test]
fn list_on_a_suppressed_template_is_refused() {
    let p = server()
        .source(
            "hidden",
            "hostile/hostile",
            "[config]\nname = \"hidden\"\ndiscoverable = \"false\"\n",
        )
        .prepare();
    refused(p, "hidden.wasm", "suppressed");
}

#[test]
fn duplicate_names_are_refused() {
    let p = server()
        .source("a-first", "hostile/hostile", "[config]\nname = \"same\"\n")
        .source("b-second", "hostile/hostile", "[config]\nname = \"same\"\n")
        .prepare();
    refused(p, "b-second.wasm", "duplicate template name \"same\"");
}

#[test]
fn a_bad_template_is_refused() {
    let p = server()
        .source(
            "bad",
            "hostile/hostile",
            "[config]\nname = \"bad\"\ntemplate = \"hostile://{oops\"\n",
        )
        .prepare();
    refused(p, "bad.wasm", "does not parse");
}

#[test]
fn bad_manifests_are_refused() {
    let p = server()
        .source("catalog", "catalog", "[budget]\nfuel = 10\nfeul = 3\n")
        .prepare();
    refused(p, "catalog.toml", "feul");
    let p = server()
        .source(
            "catalog",
            "catalog",
            "[grants]\ndatabases = [\"nowhere\"]\n",
        )
        .prepare();
    refused(p, "catalog.toml", "nowhere");
    let p = server()
        .source("catalog", "catalog", "this is not toml")
        .prepare();
    refused(p, "catalog.toml", "bad manifest");
    let p = server().source("catalog", "catalog", "").prepare();
    std::fs::write(p.dir.path().join("sources/orphan.toml"), "").unwrap();
    refused(p, "orphan.toml", "without a component");
}

#[test]
fn inventory_without_authentication_is_refused() {
    let p = server()
        .source("catalog", "catalog", "")
        .auth(None)
        .prepare();
    let (ok, out) = p.check();
    assert!(!ok);
    assert!(
        out.contains("emseepea.toml") && out.contains("[auth] mode"),
        "{out}"
    );
}

#[test]
fn a_missing_static_file_is_refused() {
    let p = server()
        .config("[[resources]]\nuri = \"test://f\"\nname = \"f\"\nfile = \"missing.txt\"\n")
        .prepare();
    let (ok, out) = p.check();
    assert!(!ok);
    assert!(out.contains("missing.txt"), "{out}");
}

#[test]
fn a_second_start_uses_the_precompile_cache_and_corruption_is_rebuilt() {
    // A private cache so other tests cannot have filled it.
    let cache = tempfile::tempdir().unwrap();
    let cfg = format!("cache_dir = \"{}\"", cache.path().display());
    let p = server()
        .source("catalog", "catalog", "")
        .config(&cfg)
        .prepare();
    // The config's later cache_dir wins over the harness's.
    let text = std::fs::read_to_string(&p.config_path).unwrap();
    let text: String = text
        .lines()
        .filter(|l| !l.contains("test-cache"))
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&p.config_path, text).unwrap();
    let (ok, first) = p.check();
    assert!(ok, "{first}");
    assert!(first.contains("compiled"), "{first}");
    let (ok, second) = p.check();
    assert!(ok, "{second}");
    assert!(
        second.contains("cached") && !second.contains("compiled"),
        "second start recompiled:\n{second}"
    );
    // Flip one byte of the cached artifact: detected, rebuilt, never loaded.
    let entry = std::fs::read_dir(cache.path())
        .unwrap()
        .flatten()
        .find(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&entry).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0x40;
    std::fs::write(&entry, bytes).unwrap();
    let (ok, third) = p.check();
    assert!(ok, "{third}");
    assert!(third.contains("rebuilt"), "{third}");
    assert!(third.contains("corrupt cache entry"), "{third}");
    let (_, fourth) = p.check();
    assert!(fourth.contains("cached"), "{fourth}");
}

#[test]
fn check_prints_a_table_in_registration_order() {
    let p = server()
        .source("b-catalog", "catalog", "[config]\nname = \"second\"\n")
        .source("a-catalog", "catalog", "[config]\nname = \"first\"\n")
        .prepare();
    let (ok, out) = p.check();
    assert!(ok, "{out}");
    let first = out.find("first").unwrap();
    let second = out.find("second").unwrap();
    assert!(
        first < second,
        "file-name order is registration order:\n{out}"
    );
}
