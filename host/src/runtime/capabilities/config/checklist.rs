//! The `config` capability's rows of the isolation checklist
//! (`checklist.rs`): a source's own manifest values, nothing else.

use super::SourceConfig;
use crate::runtime::capabilities::checklist::{Check, Outcome, Row, pair};
use crate::runtime::capabilities::harness::{Harness, manifest};

pub fn rows(row: Row) -> Check {
    match row {
        Row::Memory => Check::NotApplicable(
            "the values are the operator's manifest, held once per source and shared by \
             its calls (values_are_shared_not_copied); `get` copies one into the guest's \
             memory, charged as its growth",
        ),
        Row::Handles => Check::NotApplicable(
            "`get` returns a string: no handle, descriptor or table entry is made",
        ),
        Row::LogText => Check::NotApplicable(
            "the host logs no value and no key: a key is only looked up in the source's map",
        ),
        Row::PoolShare => {
            Check::NotApplicable("no pool: the values are in memory, read without waiting")
        }
        // Source A's manifest has `mine`; `theirs` is only in another source's.
        Row::SourceIsolation => {
            let probe = |key: &'static str| async move {
                let harness = Harness::new("");
                let m = manifest(
                    "config-get",
                    &format!("key = {key:?}\nmine = \"A's value\"\n"),
                );
                match harness.read::<SourceConfig>(&m, "hostile://x/1").await {
                    Ok(r) if r.starts_with("Some(") => Outcome::Served(r),
                    Ok(r) => Outcome::Stopped(r),
                    Err(e) => Outcome::Stopped(e.to_string()),
                }
            };
            pair(probe("mine"), probe("theirs"))
        }
        Row::Cancellation => {
            Check::NotApplicable("no backend work: `get` answers from memory at once")
        }
    }
}
