//! Real MCP clients against the running binary: the official Python SDK
//! (2.x probing `server/discover` first, 2.x in the legacy handshake, and
//! 1.x), the official TypeScript SDK, and the MCP conformance suite. The
//! clients are installed by `cargo xtask clients` (part of `cargo xtask test`).

mod support;
use serde_json::Value;
use std::collections::HashSet;
use std::process::Command;
use support::clients::{installed, python, run_json};
use support::*;

/// A 1,000-item catalog behind dev-mode auth, with the conformance fixtures.
fn catalog_server() -> Server {
    server()
        .config(
            "[[resources]]\nuri = \"test://static-text\"\nname = \"static-text\"\nmimeType = \"text/plain\"\ntext = \"This is the content of the static text resource.\"\n\
             [[resources]]\nuri = \"test://static-binary\"\nname = \"static-binary\"\nmimeType = \"image/png\"\nblob = \"iVBORw0KGgo=\"\n",
        )
        .source("catalog", "catalog", "[config]\nitems = \"1000\"\n")
        .source("template", "conformance/template-data", "")
        .start()
}

const SAMPLES: [&str; 4] = [
    "catalog://catalog/items/0000000001",
    "catalog://catalog/items/0000000500",
    "catalog://catalog/items/0000001000",
    "test://template/123/data",
];

/// Every URI exactly once; samples read; templates listed.
fn check_traversal(out: &Value) {
    let uris: Vec<&str> = out["uris"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap())
        .collect();
    assert_eq!(uris.len(), 1002, "pages: {}", out["pages"]);
    assert_eq!(
        uris.iter().collect::<HashSet<_>>().len(),
        1002,
        "a URI was listed twice"
    );
    assert_eq!(
        &uris[..3],
        [
            "test://static-text",
            "test://static-binary",
            "catalog://catalog/items/0000000001"
        ]
    );
    assert_eq!(out["pages"], 21, "50 per page");
    assert_eq!(
        out["reads"][SAMPLES[1]],
        "Item 500 of the catalog catalog.\n"
    );
    assert!(
        out["reads"][SAMPLES[3]]
            .as_str()
            .unwrap()
            .contains("\"id\":\"123\"")
    );
    assert_eq!(
        out["templates"],
        serde_json::json!(["catalog://catalog/items/{id}", "test://template/{id}/data"])
    );
}

#[test]
fn python_sdk_2_probes_discover_and_speaks_2026_07_28() {
    let s = catalog_server();
    let token = s.token(Some("alice"), "catalog:read");
    let mut cmd = python("py-mcp2", "mcp2_client.py");
    cmd.args([&s.url, "--token", &token]);
    for u in SAMPLES {
        cmd.args(["--read", u]);
    }
    let out = run_json(&mut cmd);
    assert_eq!(out["protocol"], "2026-07-28");
    assert_eq!(out["missing"], -32602);
    check_traversal(&out);
    assert!(
        s.log_lines_with("session initialized") == 0,
        "the modern client opened no session"
    );
}

#[test]
fn python_sdk_2_in_the_legacy_handshake() {
    let s = catalog_server();
    let token = s.token(Some("alice"), "catalog:read");
    let mut cmd = python("py-mcp2", "mcp2_client.py");
    cmd.args([&s.url, "--token", &token, "--mode", "legacy"]);
    for u in SAMPLES {
        cmd.args(["--read", u]);
    }
    let out = run_json(&mut cmd);
    assert_eq!(out["protocol"], "2025-11-25");
    assert_eq!(out["missing"], -32002);
    check_traversal(&out);
    // The client closed its session (DELETE).
    s.expect_log(&["session ended by the client"]);
}

#[test]
fn python_sdk_1() {
    let s = catalog_server();
    let token = s.token(Some("alice"), "catalog:read");
    let mut cmd = python("py-mcp1", "mcp1_client.py");
    cmd.args([&s.url, "--token", &token]);
    for u in SAMPLES {
        cmd.args(["--read", u]);
    }
    let out = run_json(&mut cmd);
    assert_eq!(out["protocol"], "2025-11-25");
    check_traversal(&out);
    assert!(
        s.wait_for_log(
            &["session ended by the client"],
            std::time::Duration::from_secs(5)
        )
        .is_some()
    );
}

#[test]
fn python_sdk_without_a_token_finds_the_authorization_servers() {
    let s = catalog_server();
    let out = run_json(python("py-mcp2", "mcp2_auth_probe.py").arg(&s.url));
    let seen = out["seen"].as_array().unwrap();
    let first = seen
        .iter()
        .find(|r| r["status"] == 401)
        .unwrap_or_else(|| panic!("no 401: {out}"));
    let metadata_url = format!(
        "{}/.well-known/oauth-protected-resource/mcp",
        s.url.trim_end_matches("/mcp")
    );
    assert!(
        first["www_authenticate"]
            .as_str()
            .unwrap()
            .contains(&metadata_url),
        "{out}"
    );
    assert!(
        seen.iter()
            .any(|r| r["url"] == metadata_url.as_str() && r["status"] == 200),
        "the SDK fetched the metadata: {out}"
    );
    assert_eq!(out["resource"], s.url.as_str());
    let origin = s.url.trim_end_matches("/mcp");
    let servers: Vec<&str> = out["authorization_servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap().trim_end_matches('/'))
        .collect();
    assert_eq!(
        servers,
        [origin],
        "dev mode advertises the server's own origin: {out}"
    );
}

#[test]
fn typescript_sdk() {
    let s = catalog_server();
    let token = s.token(Some("alice"), "catalog:read");
    let node_dir = installed("tests/clients/node/node_modules");
    let out = run_json(
        Command::new("node")
            .current_dir(node_dir.parent().unwrap())
            .arg("client.mjs")
            .args([&s.url, &token])
            .args(SAMPLES),
    );
    assert_eq!(out["protocol"], "2025-11-25");
    assert_eq!(out["missing"], -32002);
    check_traversal(&out);
    assert!(
        s.wait_for_log(
            &["session ended by the client"],
            std::time::Duration::from_secs(5)
        )
        .is_some()
    );
}

/// The MCP conformance suite (server mode) against guest-examples/conformance.toml:
/// every active scenario passes except those listed (and explained in the
/// README) as not applying to a resources-only server.
#[test]
fn conformance_suite() {
    let node_dir = installed("tests/clients/node/node_modules")
        .parent()
        .unwrap()
        .to_owned();
    let node22 = installed("tests/clients/node/node_modules/node/bin/node");
    let config = root().join("guest-examples/conformance.toml");
    let p = Prepared {
        dir: tempfile::tempdir().unwrap(),
        config_path: config,
    };
    let s = p.start();
    // The suite's DNS-rebinding scenario needs a localhost URL.
    let url = s.url.replace("127.0.0.1", "localhost");
    let report = s.prepared.dir.path().join("conformance");
    let out = Command::new(node22)
        .current_dir(&node_dir)
        .arg("node_modules/@modelcontextprotocol/conformance/dist/index.js")
        .args([
            "server",
            "--url",
            &url,
            "--suite",
            "active",
            "--expected-failures",
            "conformance-expected-failures.yml",
            "-o",
        ])
        .arg(&report)
        .output()
        .unwrap();
    // The suite's own summary stays in this message, not on the test output.
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "conformance suite failed:\n{text}");
    for scenario in [
        "server-initialize",
        "ping",
        "logging-set-level",
        "resources-list",
        "resources-read-text",
        "resources-read-binary",
        "resources-templates-read",
        "dns-rebinding-protection",
        "server-sse-multiple-streams",
    ] {
        let passed = text
            .lines()
            .any(|l| l.contains('✓') && l.contains(&format!(" {scenario}:")));
        assert!(passed, "{scenario} did not pass:\n{text}");
    }
}

/// The 2026-07-28 scenarios of the conformance suite's 0.2.0 alpha: every
/// check passes except those the suite itself marks untestable (they need
/// the suite's diagnostic tools, which a resources-only server does not have).
#[test]
fn conformance_suite_2026_07_28_scenarios() {
    let node_dir = installed("tests/clients/node/node_modules")
        .parent()
        .unwrap()
        .to_owned();
    let node22 = installed("tests/clients/node/node_modules/node/bin/node");
    let suite = installed("tests/clients/node/node_modules/conformance-2026/dist/index.js");
    let p = Prepared {
        dir: tempfile::tempdir().unwrap(),
        config_path: root().join("guest-examples/conformance.toml"),
    };
    let s = p.start();
    let url = s.url.replace("127.0.0.1", "localhost");
    let report = s.prepared.dir.path().join("conformance-2026");
    let scenarios = [
        ("server-stateless", "2026-07-28"),
        ("sep-2164-resource-not-found", "2026-07-28"),
        ("resources-list", "2026-07-28"),
        ("resources-read-text", "2026-07-28"),
        ("resources-read-binary", "2026-07-28"),
        ("resources-templates-read", "2026-07-28"),
        ("dns-rebinding-protection", "2026-07-28"),
        ("server-session-lifecycle", "2025-11-25"),
    ];
    let mut passed = 0;
    for (scenario, version) in scenarios {
        let out = Command::new(&node22)
            .current_dir(&node_dir)
            .arg(&suite)
            .args([
                "server",
                "--url",
                &url,
                "--scenario",
                scenario,
                "--spec-version",
                version,
                "-o",
            ])
            .arg(&report)
            .output()
            .unwrap();
        let text = format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let dir = std::fs::read_dir(&report)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(&format!("server-{scenario}-"))
            })
            .unwrap_or_else(|| panic!("{scenario}: no report\n{text}"));
        let checks: Vec<Value> =
            serde_json::from_slice(&std::fs::read(dir.join("checks.json")).unwrap()).unwrap();
        for c in &checks {
            let status = c["status"].as_str().unwrap();
            let untestable = c["details"]["untestable"] == true;
            assert!(
                status != "FAILURE" || untestable,
                "{scenario}: {} failed: {}\n{}",
                c["id"],
                c["errorMessage"],
                c["description"]
            );
            passed += usize::from(status == "SUCCESS");
        }
    }
    assert!(passed >= 20, "only {passed} checks passed");
}
