//! Running the real clients the end-to-end tests drive (the Python SDKs in
//! their venvs, the node scripts) and reading the one JSON object each
//! prints last. The clients are installed by `cargo xtask clients`, the
//! guest tools by `cargo xtask guests` (both part of `cargo xtask test`).

use super::root;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

/// `rel` under the repository root, which must have been installed.
pub fn installed(rel: &str) -> PathBuf {
    let p = root().join(rel);
    assert!(
        p.exists(),
        "{} is missing: run `cargo xtask clients` and `cargo xtask guests` (or `cargo xtask test`)",
        p.display()
    );
    p
}

/// tests/clients/python/`script` under the Python of the SDK venv `venv`
/// (target/clients/`venv`, e.g. py-mcp1 or py-mcp2).
pub fn python(venv: &str, script: &str) -> Command {
    let mut c = Command::new(installed(&format!("target/clients/{venv}/bin/python")));
    c.arg(root().join("tests/clients/python").join(script));
    c
}

/// Run `cmd` to its end; its stdout. Panics with both streams unless it
/// exited 0.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Run a client whose answer is the JSON object on its last stdout line.
pub fn run_json(cmd: &mut Command) -> Value {
    let stdout = run(cmd);
    serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: {stdout}"))
}
