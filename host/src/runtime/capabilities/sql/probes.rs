//! What both engines' checklist rows (`sqlite/checklist.rs`,
//! `postgres/checklist.rs`) drive the hostile guest with and read back.

use crate::runtime::capabilities::checklist::Outcome;
use crate::runtime::capabilities::harness::{Harness, ReadFailure, manifest};
use crate::runtime::capabilities::sql::Sql;
use crate::runtime::config::SourceManifest;

/// The hostile guest in `mode` on database `main`, granted `main` only.
pub(crate) fn guest(mode: &str, config: &str, rest: &str) -> SourceManifest {
    manifest(
        mode,
        &format!("database = \"main\"\n{config}\n[grants]\ndatabases = [\"main\"]\n{rest}"),
    )
}

pub(crate) async fn read(harness: &Harness, m: &SourceManifest) -> Result<String, ReadFailure> {
    harness.read::<Sql>(m, "hostile://x/1").await
}

/// A report line that is an error is the capability stopping the guest.
pub(crate) fn verdict(report: Result<String, ReadFailure>) -> Outcome {
    match report {
        Ok(r)
            if r.contains("error:")
                || r.contains("stopped=Error")
                || r.starts_with("query:")
                || r.starts_with("open:") =>
        {
            Outcome::Stopped(r)
        }
        Ok(r) => Outcome::Served(r),
        Err(e) => Outcome::Stopped(e.to_string()),
    }
}
