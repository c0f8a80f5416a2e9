//! WASI's rows of the isolation checklist (`checklist.rs`): its granted
//! directories and its captured output.

use super::Wasi;
use crate::runtime::capabilities::checklist::{
    Check, Outcome, Row, logged, pair, text_outcome, toml_str,
};
use crate::runtime::capabilities::harness::{Harness, ReadFailure, manifest};
use crate::runtime::config::SourceManifest;

/// Directories `assets` (this source's grant) and `other` (another's),
/// each with `hello.txt`.
fn directories() -> (tempfile::TempDir, Harness) {
    let root = tempfile::tempdir().unwrap();
    let mut config = String::new();
    for label in ["assets", "other"] {
        let dir = root.path().join(label);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("hello.txt"), format!("hello from {label}")).unwrap();
        config.push_str(&format!(
            "[directories.{label}]\npath = {:?}\n",
            dir.display().to_string()
        ));
    }
    (root, Harness::new(&config))
}

fn granted(mode: &str, config: &str, rest: &str) -> SourceManifest {
    manifest(
        mode,
        &format!("{config}\n[grants]\ndirectories = [\"assets\"]\n{rest}"),
    )
}

fn verdict(report: Result<String, ReadFailure>) -> Outcome {
    match report {
        Ok(r) if r.contains("read=Ok(") || r.contains("stopped=none") => Outcome::Served(r),
        Ok(r) => Outcome::Stopped(r),
        Err(e) => Outcome::Stopped(e.to_string()),
    }
}

pub fn rows(row: Row) -> Check {
    match row {
        Row::Memory => Check::NotApplicable(
            "no host buffer outlives a host call: wasmtime-wasi reads and writes a file \
             at most 64 KiB per call (MAX_READ_SIZE_ALLOC) straight into or out of the \
             guest's memory, which is charged as its growth; captured output is capped \
             at CAPTURED_OUTPUT_BYTES per stream",
        ),
        // Every open file is a descriptor and a table entry.
        Row::Handles => {
            let probe = |count: usize| async move {
                let (_root, harness) = directories();
                let m = granted(
                    "files-hoard",
                    &format!("path = \"/assets/hello.txt\"\ncount = \"{count}\""),
                    "[handles]\ntable_entries = 64\n",
                );
                verdict(harness.read::<Wasi>(&m, "hostile://x/1").await)
            };
            pair(probe(8), probe(200))
        }
        // What the guest prints goes to the log, line by line.
        Row::LogText => {
            let probe = |message: String| async move {
                let harness = Harness::new("");
                let m = manifest("print", &format!("message = {}\n", toml_str(&message)));
                let request_id = harness.request_id.clone();
                let (_, lines) = logged(harness.read::<Wasi>(&m, "hostile://x/1")).await;
                text_outcome(&lines, &message, &request_id)
            };
            pair(
                probe("a plain line of output".into()),
                probe("out \u{1b}[2J\u{202e}desrever".into()),
            )
        }
        Row::PoolShare => Check::NotApplicable(
            "no pool: each call preopens its granted directories afresh (WasiGrants::build) \
             and closes them with its store; nothing is shared between calls or callers",
        ),
        Row::SourceIsolation => {
            let probe = |label: &'static str| async move {
                let (_root, harness) = directories();
                let m = granted("readfile", &format!("path = \"/{label}/hello.txt\""), "");
                verdict(harness.read::<Wasi>(&m, "hostile://x/1").await)
            };
            pair(probe("assets"), probe("other"))
        }
        Row::Cancellation => Check::NotApplicable(
            "no backend work outlives a host call: a file operation is one bounded \
             blocking call on the local file system, and a cancelled call's store (every \
             descriptor with it) is dropped at its next epoch tick or host-call return",
        ),
    }
}
