//! Startup: every refusal names the file and the reason; the precompile
//! cache makes a second start skip compilation and survives corruption.

mod support;
use support::*;

fn refused(p: Prepared, file: &str, reason: &str) {
    check_refused(&p, file, reason)
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
fn a_component_listing_two_ways_is_refused() {
    refused(
        server().source("both", "hostile/two-lists", "").prepare(),
        "both.wasm",
        "exports both emseepea:inventory/inventory and inventory-json",
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
    for n in ["0", "1000"] {
        let p = server()
            .source(
                "catalog",
                "catalog",
                &format!("[budget]\nmax_concurrent_calls = {n}\n"),
            )
            .prepare();
        refused(p, "catalog.toml", "max_concurrent_calls");
    }
}

#[test]
fn a_component_that_does_not_compile_is_refused_with_the_compilers_reason() {
    // A component header, then nothing valid: the compiler (a child process
    // of the server) fails, and its reason reaches the startup line.
    let p = server().source("catalog", "catalog", "").prepare();
    std::fs::write(
        p.dir.path().join("sources/broken.wasm"),
        b"\0asm\x0d\0\x01\0\x07garbage",
    )
    .unwrap();
    // The parser's own words: they can only have come from the child.
    refused(
        p,
        "broken.wasm",
        "does not compile: failed to parse WebAssembly",
    );
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

fn sha256_hex(path: &std::path::Path) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(std::fs::read(path).unwrap()))
}

/// The cache entry of the component at `wasm`, found by its digest.
fn cache_entry(cache: &std::path::Path, wasm: &std::path::Path) -> std::path::PathBuf {
    let sha = sha256_hex(wasm);
    std::fs::read_dir(cache)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with(&sha) && name.ends_with(".cwasm")
        })
        .unwrap_or_else(|| panic!("no cache entry for {}", wasm.display()))
}

/// The names in the first column of `emseepea check`'s table.
fn table_names(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .filter(|l| !l.contains("source(s)"))
        .filter_map(|l| l.split_whitespace().nth(1).map(String::from))
        .collect()
}

/// Issue 9.6: copying one source's precompiled entry over another's made
/// the second source's file run as the first (with the second's grants),
/// because the entry's digest was unkeyed and carried in the entry itself.
#[test]
fn a_cache_entry_copied_onto_another_source_is_never_run() {
    let db_dir = tempfile::tempdir().unwrap();
    let db = db_dir.path().join("documents.sqlite");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(
            &std::fs::read_to_string(root().join("guest-examples/documents/sql/schema.sql"))
                .unwrap(),
        )
        .unwrap();
    let p = server()
        .private_cache()
        .config(&format!(
            "[databases.documents]\nfile = \"{}\"\n",
            db.display()
        ))
        .source(
            "documents",
            "documents",
            "[grants]\ndatabases = [\"documents\"]\n",
        )
        .hostile("zz-hostile", "denials", "")
        .prepare();
    let (ok, first) = p.check();
    assert!(ok, "{first}");
    assert_eq!(table_names(&first), ["documents", "zz-hostile"], "{first}");
    let cache = p.dir.path().join("cache");
    let sources = p.dir.path().join("sources");
    let documents = cache_entry(&cache, &sources.join("documents.wasm"));
    let hostile = cache_entry(&cache, &sources.join("zz-hostile.wasm"));
    std::fs::copy(&hostile, &documents).unwrap();

    let (ok, second) = p.check();
    assert!(ok, "{second}");
    // documents.wasm ran as itself (the hostile guest would have described
    // itself as "hostile"), recompiled, and the swap was logged by file name.
    assert_eq!(
        table_names(&second),
        ["documents", "zz-hostile"],
        "documents.wasm ran as another component:\n{second}"
    );
    let row = second.lines().find(|l| l.contains(" documents ")).unwrap();
    assert!(row.contains("rebuilt"), "{second}");
    let warning = second
        .lines()
        .find(|l| l.contains("corrupt cache entry"))
        .unwrap_or_else(|| panic!("no warning:\n{second}"));
    assert!(warning.contains("WARN"), "{warning}");
    assert!(
        warning.contains(&*documents.file_name().unwrap().to_string_lossy()),
        "the warning names the entry: {warning}"
    );
}

/// Issue 9.6: the cache directory is created 0700 and its entries 0600; a
/// group- or world-writable one is refused, saying why.
#[test]
fn the_cache_directory_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let p = server()
        .private_cache()
        .source("catalog", "catalog", "")
        .prepare();
    let (ok, out) = p.check();
    assert!(ok, "{out}");
    let cache = p.dir.path().join("cache");
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&cache), 0o700);
    let entry = cache_entry(&cache, &p.dir.path().join("sources/catalog.wasm"));
    assert_eq!(mode(&entry), 0o600);
    let key = p.dir.path().join("state/precompile-key");
    assert_eq!(mode(&key), 0o600);
    assert_eq!(std::fs::metadata(&key).unwrap().len(), 32);
    for shared in [0o777, 0o775] {
        std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(shared)).unwrap();
        let (ok, out) = p.check();
        assert!(!ok, "a {shared:o} cache was used:\n{out}");
        let line = out.lines().find(|l| l.starts_with("emseepea:")).unwrap();
        assert!(
            line.contains(&*cache.to_string_lossy())
                && line.contains("writable by group or others"),
            "{line}"
        );
    }
}

/// Issue 9.7: a dev secret that is not exactly 32 bytes of a 0600 file is a
/// startup error (a `00` file used to give a 1-byte key anyone could guess,
/// an empty one a panic).
#[test]
fn a_bad_dev_secret_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    for (contents, mode, reason) in [
        (&b"00"[..], 0o600, "exactly 32 bytes, this file has 2"),
        (&b""[..], 0o600, "exactly 32 bytes, this file has 0"),
        (&[7u8; 32][..], 0o644, "mode 0644"),
    ] {
        let p = server().source("catalog", "catalog", "").prepare();
        let state = p.dir.path().join("state");
        std::fs::create_dir_all(&state).unwrap();
        let secret = state.join("dev-secret");
        std::fs::write(&secret, contents).unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(mode)).unwrap();
        let (ok, out) = p.check();
        assert!(!ok, "{contents:?} {mode:o} accepted:\n{out}");
        assert!(!out.contains("panicked"), "{out}");
        let line = out.lines().find(|l| l.starts_with("emseepea:")).unwrap();
        assert!(
            line.contains("dev-secret") && line.contains(reason),
            "{line}"
        );
    }
}

/// Issue 9 "Also": a config problem is reported before any component is
/// compiled (it used to come after minutes of compiling the interpreted
/// guests): nothing reaches the cache, no source is registered.
#[test]
fn config_problems_come_before_any_compilation() {
    let p = server()
        .private_cache()
        .auth(Some(
            "[auth]\nmode = \"jwt\"\n[auth.jwt]\nissuer = \"https://as.test\"\njwks_file = \"jwks.json\"\n",
        ))
        .file(
            "jwks.json",
            std::fs::read(root().join("tests/fixtures/keys/jwks.json")).unwrap(),
        )
        .source("catalog", "catalog", "")
        .hostile("hostile", "ok", "")
        .prepare();
    let (ok, out) = p.check();
    assert!(!ok, "{out}");
    let error = out
        .lines()
        .position(|l| l.starts_with("emseepea:"))
        .unwrap_or_else(|| panic!("no error:\n{out}"));
    assert!(
        out.lines()
            .nth(error)
            .unwrap()
            .contains("authorization_servers"),
        "{out}"
    );
    // Nothing was compiled before the error: no entry, no registration.
    let cache = p.dir.path().join("cache");
    let entries = std::fs::read_dir(&cache).map_or(0, |d| d.count());
    assert_eq!(entries, 0, "compiled before reporting:\n{out}");
    assert!(!out.contains("source registered"), "{out}");

    // The same for a broken JWKS file (found only when auth was set up).
    let p = server()
        .private_cache()
        .auth(Some(
            "[auth]\nmode = \"jwt\"\nauthorization_servers = [\"https://as.test\"]\n[auth.jwt]\nissuer = \"https://as.test\"\njwks_file = \"jwks.json\"\n",
        ))
        .file("jwks.json", "{\"keys\": []}")
        .source("catalog", "catalog", "")
        .prepare();
    let (ok, out) = p.check();
    assert!(!ok, "{out}");
    assert!(out.contains("jwks.json"), "{out}");
    let entries = std::fs::read_dir(p.dir.path().join("cache")).map_or(0, |d| d.count());
    assert_eq!(entries, 0, "compiled before reporting:\n{out}");
    assert!(!out.contains("source registered"), "{out}");
}

#[test]
fn the_version_names_the_wasmtime_release() {
    // `emseepea::VERSION` is checked against Cargo.lock in runtime::engine.
    let out = std::process::Command::new(BIN)
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    let line = String::from_utf8(out.stdout).unwrap();
    assert_eq!(line.trim(), format!("emseepea {}", emseepea::VERSION));
    assert!(line.contains(" (wasmtime "), "{line}");
}
