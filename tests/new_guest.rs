//! `emseepea new` for each language: scaffold → the printed build command →
//! `emseepea test-source` passes → serve it → the official Python SDK
//! client lists and reads it, each user seeing only their own records.
//!
//! The tools are the ones `cargo xtask test` installs before the tests:
//! cargo with the wasm32-wasip2 target (the build shares
//! target/guest-build with `cargo xtask guests`, so only the project and its
//! vendored SDK compile), componentize-py in target/clients/guest-tools, and
//! js-catalog's node_modules (the same pinned componentize-js and esbuild as
//! the generated package.json, which a unit test of `devkit::new` checks).

mod support;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use support::clients::{installed, python, run, run_json};
use support::*;

/// What `emseepea new` prints to run: once, then for every build.
struct Printed {
    /// The command in backticks on the `once:` line.
    once: String,
    build: String,
}

/// `emseepea new NAME --lang LANG --dir DIR`: the commands it printed.
fn scaffold(name: &str, lang: &str, dir: &Path) -> Printed {
    let out = run(Command::new(BIN)
        .args(["new", name, "--lang", lang, "--dir"])
        .arg(dir));
    let line = |label: &str| {
        out.lines()
            .find_map(|l| l.trim_start().strip_prefix(label))
            .unwrap_or_else(|| panic!("no {label} line printed: {out}"))
            .trim()
            .to_owned()
    };
    let once = line("once:");
    let once = once
        .split('`')
        .nth(1)
        .unwrap_or_else(|| panic!("no command in backticks on the once: line: {once}"))
        .to_owned();
    Printed {
        once,
        build: line("build:"),
    }
}

/// Run the printed build command as a shell line in the project.
fn build(dir: &Path, command: &str, env: &[(&str, String)]) {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(command).current_dir(dir);
    // What cargo sets for this test must not steer the guest's build.
    for var in [
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTUP_TOOLCHAIN",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    run(&mut cmd);
}

/// `emseepea test-source WASM --manifest manifest.toml --json` passes: no
/// breaks, alice lists 3 records and bob 2.
fn test_source(project: &Path, wasm: &Path) {
    let scratch = tempfile::tempdir().unwrap();
    let config = scratch.path().join("emseepea.toml");
    std::fs::write(
        &config,
        format!(
            "sources_dir = \"unused\"\nstate_dir = \"state\"\ncache_dir = \"{}\"\ncache_key_file = \"{}\"\n",
            root().join("target/test-cache").display(),
            root().join("target/test-cache.key").display()
        ),
    )
    .unwrap();
    let out = Command::new(BIN)
        .arg("test-source")
        .arg(wasm)
        .arg("--manifest")
        .arg(project.join("manifest.toml"))
        .arg("--config")
        .arg(&config)
        .arg("--json")
        .env("EMSEEPEA_LOG", "warn")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    assert!(out.status.success(), "test-source: {report:#}");
    assert!(
        report["breaks"].as_array().unwrap().is_empty(),
        "{report:#}"
    );
    let outcomes: Vec<(&str, &str)> = report["principals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["label"].as_str().unwrap(), p["outcome"].as_str().unwrap()))
        .collect();
    assert!(
        outcomes.contains(&("alice", "lists 3 record(s)")),
        "{outcomes:?}"
    );
    assert!(
        outcomes.contains(&("bob", "lists 2 record(s)")),
        "{outcomes:?}"
    );
}

/// Serve the component with its manifest; the Python SDK client (2.x)
/// traverses and reads as alice, then as bob.
fn serve_and_list(name: &str, project: &Path, wasm: &Path) {
    let manifest = std::fs::read_to_string(project.join("manifest.toml")).unwrap();
    let s = server().source_file(name, wasm, &manifest).start();
    let uri = |id: &str| format!("{name}://records/{id}");
    for (user, ids, other) in [
        ("alice", &["a1", "a2", "a3"][..], "b1"),
        ("bob", &["b1", "b2"][..], "a1"),
    ] {
        let token = s.token(Some(user), &format!("{name}:read"));
        let out = run_json(python("py-mcp2", "mcp2_client.py").arg(&s.url).args([
            "--token",
            &token,
            "--read",
            &uri(ids[0]),
        ]));
        let expected: Vec<String> = ids.iter().map(|id| uri(id)).collect();
        assert_eq!(out["uris"], serde_json::json!(expected), "{user}: {out:#}");
        assert!(
            out["reads"][uri(ids[0])]
                .as_str()
                .unwrap()
                .ends_with("first record"),
            "{out:#}"
        );
        assert!(
            !out["uris"].to_string().contains(&uri(other)),
            "{user} sees only their own records"
        );
        assert_eq!(out["templates"], serde_json::json!([uri("{id}")]));
    }
}

#[test]
fn a_new_rust_guest_builds_passes_test_source_and_serves() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("rusty-notes");
    let printed = scaffold("rusty-notes", "rust", &project);
    // The once-command installs the pinned toolchain itself: a rustup
    // that does not install on demand (RUSTUP_AUTO_INSTALL=0) would
    // otherwise fail the build with "toolchain ... is not installed".
    assert_eq!(printed.once, "rustup toolchain install");
    build(&project, &printed.once, &[]);
    let command = printed.build;
    assert_eq!(command, "cargo build --release --target wasm32-wasip2");
    // The repository's guest target dir: wit-bindgen is already built there.
    let target = root().join("target/guest-build");
    build(
        &project,
        &command,
        &[("CARGO_TARGET_DIR", target.display().to_string())],
    );
    let wasm = target.join("wasm32-wasip2/release/rusty_notes.wasm");
    test_source(&project, &wasm);
    serve_and_list("rusty-notes", &project, &wasm);
}

#[test]
fn a_new_python_guest_builds_passes_test_source_and_serves() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("py-notes");
    let command = scaffold("py-notes", "python", &project).build;
    let tools = installed("target/clients/guest-tools/bin");
    let path = format!(
        "{}:{}",
        tools.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    build(&project, &command, &[("PATH", path)]);
    let wasm = project.join("py-notes.wasm");
    test_source(&project, &wasm);
    serve_and_list("py-notes", &project, &wasm);
}

#[test]
fn a_new_javascript_guest_builds_passes_test_source_and_serves() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("js-notes");
    let command = scaffold("js-notes", "javascript", &project).build;
    assert_eq!(command, "npm run build");
    // `npm install` would fetch the same pinned packages js-catalog has.
    std::os::unix::fs::symlink(
        installed("guest-examples/js-catalog/node_modules/.bin/esbuild")
            .parent()
            .unwrap()
            .parent()
            .unwrap(),
        project.join("node_modules"),
    )
    .unwrap();
    build(&project, &command, &[]);
    let wasm = project.join("js-notes.wasm");
    test_source(&project, &wasm);
    serve_and_list("js-notes", &project, &wasm);
}

#[test]
fn new_refuses_a_bad_name_and_a_non_empty_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["new", "Not A Name", "--lang", "rust", "--dir"])
        .arg(dir.path().join("x"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a valid guest name"));
    assert!(!dir.path().join("x").exists());
    std::fs::write(dir.path().join("mine.txt"), "keep").unwrap();
    let out = Command::new(BIN)
        .args(["new", "ok", "--lang", "python", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not empty"));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}
