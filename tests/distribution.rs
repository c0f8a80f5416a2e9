//! Distributing sources (issue 52): signed with `emseepea sign` (an SSH
//! signature over the component and its manifest), pushed to and pulled
//! from a real OCI registry (Debian's docker-registry, started by
//! tests/support/registry.rs), served, and listed with the official Python
//! SDK; and every way the chain can be broken refused with the file and the
//! reason: a layer changed in the registry, an untrusted key, a manifest or
//! component changed after signing, a signature missing where required.

mod support;
use std::path::Path;
use support::clients::{python, run_json};
use support::registry::{Registry, emseepea, ok, push, sign, source_dir, ssh_key, text};
use support::*;

const CATALOG_MANIFEST: &str = "[config]\nitems = \"5\"\n";

/// `[sources]` trusting `public` (inline), signatures required.
fn trusting(public: &str) -> String {
    format!("[sources]\ntrusted_keys = [\"{public}\"]\nrequire_signatures = true\n")
}

/// A server prepared with the signed catalog in its sources directory,
/// under `sources` policy; the key that signed it.
fn signed_catalog(keys: &Path, sources: impl FnOnce(&str) -> String) -> Prepared {
    let (key, public) = ssh_key(keys, "release");
    let p = server()
        .config(&sources(&public))
        .source("catalog", "catalog", CATALOG_MANIFEST)
        .prepare();
    sign(&p.dir.path().join("sources/catalog.wasm"), &key);
    p
}

/// `emseepea serve` exits at startup, naming `file` and saying `reason`.
fn serve_refused(p: &Prepared, file: &str, reason: &str) {
    // Bounded: a server that (wrongly) starts is killed, and the test fails.
    let mut child = std::process::Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&p.config_path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let all = text(&out);
    assert!(!out.status.success(), "serve should refuse:\n{all}");
    assert!(
        all.contains(file) && all.contains(reason),
        "serve did not name {file} and {reason:?}:\n{all}"
    );
}

#[test]
fn a_signed_source_under_require_signatures_starts() {
    let keys = tempfile::tempdir().unwrap();
    let p = signed_catalog(keys.path(), trusting);
    let (ok, out) = p.check();
    assert!(ok, "{out}");
    let s = p.start();
    s.expect_log(&["source registered", "signed by SHA256:"]);
}

#[test]
fn a_source_signed_by_an_untrusted_key_is_refused() {
    let keys = tempfile::tempdir().unwrap();
    let (_, other) = ssh_key(keys.path(), "someone-else");
    let p = signed_catalog(keys.path(), |_| trusting(&other));
    check_refused(&p, "catalog.sig", "signed by an untrusted key (SHA256:");
    serve_refused(&p, "catalog.sig", "untrusted key");
}

#[test]
fn a_manifest_edited_after_signing_is_refused() {
    let keys = tempfile::tempdir().unwrap();
    let p = signed_catalog(keys.path(), trusting);
    // More items than were signed for: the kind of edit that would widen grants.
    std::fs::write(
        p.dir.path().join("sources/catalog.toml"),
        "[config]\nitems = \"6\"\n",
    )
    .unwrap();
    check_refused(
        &p,
        "catalog.sig",
        "does not match the component and its manifest",
    );
    serve_refused(&p, "catalog.sig", "does not match");
}

#[test]
fn a_manifest_removed_or_a_component_swapped_after_signing_is_refused() {
    let keys = tempfile::tempdir().unwrap();
    let p = signed_catalog(keys.path(), trusting);
    std::fs::remove_file(p.dir.path().join("sources/catalog.toml")).unwrap();
    check_refused(&p, "catalog.sig", "does not match");
    let keys = tempfile::tempdir().unwrap();
    let p = signed_catalog(keys.path(), trusting);
    std::fs::copy(
        guest("hostile/hostile"),
        p.dir.path().join("sources/catalog.wasm"),
    )
    .unwrap();
    check_refused(&p, "catalog.sig", "does not match");
}

#[test]
fn a_missing_signature_under_require_signatures_is_refused() {
    let keys = tempfile::tempdir().unwrap();
    let p = signed_catalog(keys.path(), trusting);
    std::fs::remove_file(p.dir.path().join("sources/catalog.sig")).unwrap();
    check_refused(&p, "catalog.wasm", "no signature catalog.sig");
    serve_refused(&p, "catalog.wasm", "no signature");
    // Without the requirement an unsigned source loads as before.
    let p = server()
        .source("catalog", "catalog", CATALOG_MANIFEST)
        .prepare();
    assert!(p.check().0);
}

#[test]
fn a_malformed_signature_or_one_for_another_namespace_is_refused() {
    let keys = tempfile::tempdir().unwrap();
    let p = signed_catalog(keys.path(), trusting);
    let sig = p.dir.path().join("sources/catalog.sig");
    std::fs::write(
        &sig,
        "-----BEGIN SSH SIGNATURE-----\nAAAA\n-----END SSH SIGNATURE-----\n",
    )
    .unwrap();
    check_refused(&p, "catalog.sig", "malformed signature");
    // A signature the same key made for git (`-n git`) over the same statement.
    let (key, public) = ssh_key(keys.path(), "git");
    let p = server()
        .config(&trusting(&public))
        .source("catalog", "catalog", CATALOG_MANIFEST)
        .prepare();
    let out = std::process::Command::new("ssh-keygen")
        .args(["-q", "-Y", "sign", "-n", "git", "-f"])
        .arg(&key)
        .arg(p.dir.path().join("sources/catalog.wasm"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    std::fs::rename(
        p.dir.path().join("sources/catalog.wasm.sig"),
        p.dir.path().join("sources/catalog.sig"),
    )
    .unwrap();
    check_refused(&p, "catalog.sig", "namespace");
}

#[test]
fn a_signature_without_its_component_is_refused() {
    let keys = tempfile::tempdir().unwrap();
    let p = signed_catalog(keys.path(), trusting);
    std::fs::rename(
        p.dir.path().join("sources/catalog.sig"),
        p.dir.path().join("sources/orphan.sig"),
    )
    .unwrap();
    check_refused(&p, "orphan.sig", "signature without a component");
}

#[test]
fn push_then_pull_by_tag_and_by_digest_then_serve_and_list_with_the_python_sdk() {
    let registry = Registry::start();
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = ssh_key(keys.path(), "release");
    let src = source_dir("catalog", &guest("catalog"), Some(CATALOG_MANIFEST));
    let component = src.path().join("catalog.wasm");
    sign(&component, &key);
    let tag = format!("{}/emseepea/catalog:v1", registry.addr);
    let digest = push(&component, &tag);
    // Pushing the same files again gives the same digest.
    assert_eq!(push(&component, &tag), digest);

    // By tag, recording the digest in a lockfile, checking the signature.
    let by_tag = tempfile::tempdir().unwrap();
    let lock = by_tag.path().join("sources.lock");
    let out = ok(&[
        "pull",
        &tag,
        "--into",
        by_tag.path().to_str().unwrap(),
        "--lock",
        lock.to_str().unwrap(),
        "--trusted-key",
        &public,
        "--plain-http",
    ]);
    let pinned = format!("{}/emseepea/catalog@{digest}", registry.addr);
    assert!(
        out.contains(&pinned),
        "pull printed no pinned digest: {out}"
    );
    assert!(out.contains("signed by SHA256:"), "{out}");
    let lock_text = std::fs::read_to_string(&lock).unwrap();
    assert!(
        lock_text.contains(&format!("catalog = \"{pinned}\"")),
        "{lock_text}"
    );
    for ext in ["wasm", "toml", "sig"] {
        assert_eq!(
            std::fs::read(by_tag.path().join(format!("catalog.{ext}"))).unwrap(),
            std::fs::read(src.path().join(format!("catalog.{ext}"))).unwrap(),
            "catalog.{ext} differs after the pull"
        );
    }

    // Retag to other bytes: the lockfile still pulls what it pinned.
    let other = source_dir(
        "catalog",
        &guest("catalog"),
        Some("[config]\nitems = \"7\"\n"),
    );
    sign(&other.path().join("catalog.wasm"), &key);
    let moved = push(&other.path().join("catalog.wasm"), &tag);
    assert_ne!(moved, digest);

    // The server's own sources directory, filled from the lockfile (by
    // digest), under a config that requires signatures by this key.
    let p = server().config(&trusting(&public)).prepare();
    let sources = p.dir.path().join("sources");
    let out = ok(&[
        "pull",
        "--lock",
        lock.to_str().unwrap(),
        "--into",
        sources.to_str().unwrap(),
        "--config",
        p.config_path.to_str().unwrap(),
        "--plain-http",
    ]);
    assert!(out.contains(&pinned), "{out}");
    assert_eq!(
        std::fs::read(sources.join("catalog.toml")).unwrap(),
        CATALOG_MANIFEST.as_bytes()
    );

    // And by digest directly, under another name.
    let by_digest = tempfile::tempdir().unwrap();
    ok(&[
        "pull",
        &pinned,
        "--name",
        "pinned",
        "--into",
        by_digest.path().to_str().unwrap(),
        "--plain-http",
    ]);
    assert_eq!(
        std::fs::read(by_digest.path().join("pinned.wasm")).unwrap(),
        std::fs::read(&component).unwrap()
    );

    let s = p.start();
    s.expect_log(&["source registered", "signed by SHA256:"]);
    let token = s.token(Some("alice"), "catalog:read");
    let mut cmd = python("py-mcp2", "mcp2_client.py");
    cmd.args([&s.url, "--token", &token]);
    cmd.args(["--read", "catalog://catalog/items/0000000005"]);
    let listed = run_json(&mut cmd);
    let uris: Vec<&str> = listed["uris"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap())
        .collect();
    assert_eq!(
        uris,
        (1..=5)
            .map(|i| format!("catalog://catalog/items/{i:010}"))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        listed["reads"]["catalog://catalog/items/0000000005"],
        "Item 5 of the catalog catalog.\n"
    );
}

#[test]
fn a_layer_modified_in_the_registry_is_refused_and_nothing_is_written() {
    let registry = Registry::start();
    let src = source_dir("catalog", &guest("catalog"), Some(CATALOG_MANIFEST));
    let component = src.path().join("catalog.wasm");
    let tag = format!("{}/emseepea/catalog:v1", registry.addr);
    let digest = push(&component, &tag);
    // The manifest layer's blob, changed in the registry's storage: the
    // registry serves it under its old digest.
    let manifest_digest = format!(
        "sha256:{}",
        sha256_hex(&std::fs::read(src.path().join("catalog.toml")).unwrap())
    );
    let blob = registry.blob_file(&manifest_digest);
    assert_eq!(std::fs::read(&blob).unwrap(), CATALOG_MANIFEST.as_bytes());
    std::fs::write(&blob, "[config]\nitems = \"9\"\n").unwrap();
    let into = tempfile::tempdir().unwrap();
    for reference in [
        tag.clone(),
        format!("{}/emseepea/catalog@{digest}", registry.addr),
    ] {
        let out = emseepea(&[
            "pull",
            &reference,
            "--into",
            into.path().to_str().unwrap(),
            "--plain-http",
        ]);
        let all = text(&out);
        assert!(!out.status.success(), "the pull should fail:\n{all}");
        assert!(
            all.contains(&format!(
                "layer {manifest_digest} does not match its digest"
            )),
            "{all}"
        );
        assert_eq!(
            std::fs::read_dir(into.path()).unwrap().count(),
            0,
            "a refused pull wrote files"
        );
    }
}

#[test]
fn a_pull_signed_by_an_untrusted_key_or_unsigned_is_refused_when_keys_are_given() {
    let registry = Registry::start();
    let keys = tempfile::tempdir().unwrap();
    let (key, _) = ssh_key(keys.path(), "release");
    let (_, other) = ssh_key(keys.path(), "other");
    let signed = source_dir("catalog", &guest("catalog"), Some(CATALOG_MANIFEST));
    sign(&signed.path().join("catalog.wasm"), &key);
    let unsigned = source_dir("plain", &guest("catalog"), None);
    let signed_ref = format!("{}/emseepea/catalog:v1", registry.addr);
    let unsigned_ref = format!("{}/emseepea/plain:v1", registry.addr);
    push(&signed.path().join("catalog.wasm"), &signed_ref);
    push(&unsigned.path().join("plain.wasm"), &unsigned_ref);
    let into = tempfile::tempdir().unwrap();
    for (reference, reason) in [
        (&signed_ref, "signed by an untrusted key"),
        (&unsigned_ref, "no signature"),
    ] {
        let out = emseepea(&[
            "pull",
            reference,
            "--into",
            into.path().to_str().unwrap(),
            "--trusted-key",
            &other,
            "--plain-http",
        ]);
        let all = text(&out);
        assert!(!out.status.success() && all.contains(reason), "{all}");
        assert_eq!(std::fs::read_dir(into.path()).unwrap().count(), 0);
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}
