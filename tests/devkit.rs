//! The guest developer's kit: `emseepea test-source` passes every example
//! guest and reports each contract break of a hostile guest with its rule.

mod support;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::*;

/// A scratch directory with a server config (shared precompile cache, and
/// the given extra TOML, e.g. databases).
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new(extra_config: &str) -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        let config = format!(
            "sources_dir = \"unused\"\nstate_dir = \"state\"\ncache_dir = \"{}\"\n{extra_config}\n",
            root().join("target/test-cache").display()
        );
        std::fs::write(dir.path().join("emseepea.toml"), config).unwrap();
        Scratch { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn write(&self, name: &str, contents: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, contents).unwrap();
        p
    }

    /// A SQLite database made from the given SQL files.
    fn database(&self, name: &str, sql: &[&str]) -> PathBuf {
        let p = self.path(name);
        let conn = rusqlite::Connection::open(&p).unwrap();
        for f in sql {
            conn.execute_batch(&std::fs::read_to_string(root().join(f)).unwrap())
                .unwrap();
        }
        p
    }

    /// `emseepea test-source WASM --config ... ARGS --json`: (success, report).
    fn test_source(&self, wasm: &Path, args: &[&str]) -> (bool, Value) {
        let out = Command::new(BIN)
            .arg("test-source")
            .arg(wasm)
            .arg("--config")
            .arg(self.path("emseepea.toml"))
            .args(args)
            .arg("--json")
            .env("EMSEEPEA_LOG", "warn")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
            panic!(
                "{e}: stdout {stdout}\nstderr {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        assert_eq!(
            out.status.success(),
            report["breaks"].as_array().unwrap().is_empty(),
            "exit status follows the breaks: {report:#}"
        );
        (out.status.success(), report)
    }

    /// The hostile guest in `mode` (its manifest written here).
    fn hostile(&self, mode: &str) -> (bool, Value) {
        let manifest = self.write(
            &format!("{mode}.toml"),
            &format!("[config]\nname = \"hostile\"\nmode = \"{mode}\"\n"),
        );
        self.test_source(
            &guest("hostile/hostile"),
            &["--manifest", manifest.to_str().unwrap()],
        )
    }
}

fn rules(report: &Value) -> BTreeSet<String> {
    report["breaks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["rule"].as_str().unwrap().to_owned())
        .collect()
}

fn assert_passes(ok: bool, report: &Value) {
    assert!(ok, "expected no contract breaks: {report:#}");
    assert!(report["breaks"].as_array().unwrap().is_empty());
    assert!(report["calls"].as_u64().unwrap() > 0);
}

#[test]
fn the_catalog_passes_as_a_shared_source() {
    let s = Scratch::new("");
    let (ok, report) = s.test_source(&guest("catalog"), &["--records", "shared"]);
    assert_passes(ok, &report);
    assert_eq!(report["source"], "catalog");
    let list = &report["budgets"][0];
    assert_eq!(list["call"], "list");
    assert!(list["fuel"]["max"].as_u64().unwrap() > 0);
    assert!(list["fuel"]["budget"].as_u64().unwrap() >= list["fuel"]["max"].as_u64().unwrap());
}

#[test]
fn the_catalog_is_not_per_user_and_test_source_says_so() {
    // Every user lists and reads the same 1,000 items: as a per-user source
    // that is an ownership break, and a token without a user gets records.
    let s = Scratch::new("");
    let (ok, report) = s.test_source(&guest("catalog"), &[]);
    assert!(!ok);
    assert_eq!(
        rules(&report),
        BTreeSet::from(["ownership".to_owned(), "require-subject".to_owned()]),
        "{report:#}"
    );
}

#[test]
fn the_minimal_example_passes() {
    let s = Scratch::new("");
    let (ok, report) = s.test_source(&guest("examples/minimal"), &[]);
    assert_passes(ok, &report);
    let outcomes: Vec<&str> = report["principals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["outcome"].as_str().unwrap())
        .collect();
    assert!(outcomes.contains(&"lists 2 record(s)"), "{outcomes:?}");
    assert!(outcomes.contains(&"lists 1 record(s)"), "{outcomes:?}");
    assert!(
        outcomes
            .iter()
            .any(|o| o.starts_with("refused by the host")),
        "the token without scopes: {outcomes:?}"
    );
}

#[test]
fn documents_with_a_seeded_database_pass() {
    let s = Scratch::new("");
    let db = s.database(
        "documents.sqlite",
        &[
            "guest-examples/documents/sql/schema.sql",
            "guest-examples/documents/sql/seed.sql",
        ],
    );
    let s2 = Scratch::new(&format!(
        "[databases.documents]\nfile = \"{}\"\n",
        db.display()
    ));
    let (ok, report) = s2.test_source(&guest("documents"), &[]);
    assert_passes(ok, &report);
}

#[test]
fn python_notes_pass() {
    let s = Scratch::new("");
    let db = s.database(
        "notes.sqlite",
        &[
            "guest-examples/python-notes/sql/schema.sql",
            "guest-examples/python-notes/sql/seed.sql",
        ],
    );
    let s2 = Scratch::new(&format!("[databases.notes]\nfile = \"{}\"\n", db.display()));
    let (ok, report) = s2.test_source(&guest("python-notes"), &[]);
    assert_passes(ok, &report);
}

#[test]
fn the_javascript_catalog_passes_as_a_shared_source() {
    let s = Scratch::new("");
    let manifest = s.write(
        "js.toml",
        &std::fs::read_to_string(root().join("guest-examples/js-catalog/manifest.toml"))
            .unwrap()
            .replace("items = \"500\"", "items = \"60\""),
    );
    let (ok, report) = s.test_source(
        &guest("js-catalog"),
        &[
            "--records",
            "shared",
            "--manifest",
            manifest.to_str().unwrap(),
        ],
    );
    assert_passes(ok, &report);
}

#[test]
fn a_correct_per_user_hostile_source_passes() {
    let s = Scratch::new("");
    let (ok, report) = s.hostile("owned");
    assert_passes(ok, &report);
}

/// Modes that break exactly one rule the server cannot see within one page.
#[test]
fn each_cross_call_break_is_reported_with_exactly_its_rule() {
    let s = Scratch::new("");
    for (mode, rule) in [
        ("owned-read-leak", "ownership"),
        ("owned-no-subject", "require-subject"),
        ("owned-read-unlisted", "read-unlisted-not-found"),
        ("owned-has-more-lies", "has-more-truthful"),
        ("owned-uri-repeat", "uri-unique-across-traversal"),
        ("owned-limit-dependent", "limit-independent"),
        ("owned-random", "deterministic"),
    ] {
        let (ok, report) = s.hostile(mode);
        assert!(!ok, "{mode}");
        assert_eq!(
            rules(&report),
            BTreeSet::from([rule.to_owned()]),
            "{mode}: {report:#}"
        );
    }
}

/// The seed's per-page rules, as the server names them.
const PAGE_RULES: [&str; 11] = [
    "too-many-entries",
    "has-more-without-entries",
    "key-length",
    "key-characters",
    "key-order",
    "key-not-after",
    "uri-length",
    "uri-template",
    "uri-duplicate",
    "name-length",
    "mime-type-length",
];

/// The older hostile modes also ignore who is calling (any user reads any
/// URI, a token without a user lists): those rules may be reported too, but
/// the page rule must be exactly the one the mode breaks.
#[test]
fn each_bad_page_mode_is_reported_with_exactly_its_page_rule() {
    let s = Scratch::new("");
    for (mode, rule) in [
        ("too-many", "too-many-entries"),
        ("has-more-empty", "has-more-without-entries"),
        ("key-empty", "key-length"),
        ("key-long", "key-length"),
        ("key-space", "key-characters"),
        ("key-order", "key-order"),
        ("key-not-after", "key-not-after"),
        ("uri-long", "uri-length"),
        ("uri-mismatch", "uri-template"),
        ("uri-duplicate", "uri-duplicate"),
        ("name-long", "name-length"),
        ("mime-long", "mime-type-length"),
    ] {
        let (ok, report) = s.hostile(mode);
        assert!(!ok, "{mode}");
        // At the default limit (the first traversal); smaller limits may
        // add `too-many-entries` for modes that ignore `limit`.
        let page_rules: BTreeSet<String> = report["breaks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["call"].as_str().unwrap().ends_with("limit=50)"))
            .map(|b| b["rule"].as_str().unwrap().to_owned())
            .filter(|r| PAGE_RULES.contains(&r.as_str()))
            .collect();
        assert_eq!(
            page_rules,
            BTreeSet::from([rule.to_owned()]),
            "{mode}: {report:#}"
        );
        let b = report["breaks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["rule"] == rule)
            .unwrap();
        assert!(b["call"].as_str().unwrap().starts_with("list("), "{b}");
        assert!(!b["value"].as_str().unwrap().is_empty(), "{b}");
        assert!(
            b["value"].as_str().unwrap().chars().count() < 400,
            "offending values are shortened: {b}"
        );
    }
}

#[test]
fn budget_breaks_are_reported_as_budget() {
    let s = Scratch::new("");
    let manifest = s.write(
        "loop.toml",
        "[budget]\nfuel = 5000000\n[config]\nname = \"hostile\"\nmode = \"loop\"\n",
    );
    let (ok, report) = s.test_source(
        &guest("hostile/hostile"),
        &["--manifest", manifest.to_str().unwrap()],
    );
    assert!(!ok);
    assert!(rules(&report).contains("budget"), "{report:#}");
    let b = report["breaks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["rule"] == "budget")
        .unwrap();
    assert_eq!(b["value"], "fuel exhausted");
}

#[test]
fn the_table_names_rule_principal_call_and_value_and_exits_1() {
    let s = Scratch::new("");
    let manifest = s.write(
        "m.toml",
        "[config]\nname = \"hostile\"\nmode = \"owned-read-leak\"\n",
    );
    let out = Command::new(BIN)
        .arg("test-source")
        .arg(guest("hostile/hostile"))
        .arg("--manifest")
        .arg(&manifest)
        .arg("--config")
        .arg(s.path("emseepea.toml"))
        .env("EMSEEPEA_LOG", "warn")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let table = String::from_utf8_lossy(&out.stdout);
    let header = table
        .lines()
        .find(|l| l.starts_with("rule "))
        .unwrap_or_else(|| panic!("{table}"));
    for column in ["principal", "call", "offending value"] {
        assert!(header.contains(column), "{header}");
    }
    let row = table
        .lines()
        .find(|l| l.starts_with("ownership "))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(row.contains("read(\"hostile://hostile/alice-0\")"), "{row}");
    assert!(table.contains("contract break(s)"), "{table}");
}

#[test]
fn given_principals_replace_the_defaults() {
    let s = Scratch::new("");
    let manifest = s.write("m.toml", "[config]\nname = \"hostile\"\nmode = \"owned\"\n");
    let (ok, report) = s.test_source(
        &guest("hostile/hostile"),
        &[
            "--manifest",
            manifest.to_str().unwrap(),
            "--principal",
            "carol",
            "--principal",
            "dave",
            "--principal",
            "-",
        ],
    );
    assert_passes(ok, &report);
    let labels: Vec<&str> = report["principals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["carol", "dave", "(no subject)"]);
}

#[test]
fn the_readme_embeds_the_minimal_guest_verbatim() {
    let readme = std::fs::read_to_string(root().join("docs/src/guide/rust.md")).unwrap();
    let minimal =
        std::fs::read_to_string(root().join("guest-examples/minimal/src/lib.rs")).unwrap();
    assert!(
        readme.contains(&format!("// src/lib.rs\n{minimal}```")),
        "the book's minimal example (docs/src/guide/rust.md) differs from guest-examples/minimal/src/lib.rs"
    );
}

#[test]
fn the_readme_embeds_the_python_guest_verbatim() {
    let readme = std::fs::read_to_string(root().join("docs/src/guide/python.md")).unwrap();
    let notes =
        std::fs::read_to_string(root().join("guest-examples/python-notes/notes.py")).unwrap();
    let code = &notes[notes.find("from typing import").unwrap()..];
    assert!(
        readme.contains(&format!("```python\n{code}```")),
        "the book's Python example (docs/src/guide/python.md) differs from guest-examples/python-notes/notes.py"
    );
}
