//! The guest developer's kit: what a guest author runs before deploying.
//!
//! - [`test_source`]: `emseepea test-source`, which drives one component
//!   through the host's own runtime and validation (no HTTP) with a set of
//!   test principals and reports every contract break;
//! - [`report`]: the report it produces (a table, or JSON for machines);
//! - [`principals`]: the test principals (defaults and `--principal`);
//! - [`new`]: `emseepea new`, which scaffolds a guest project that passes
//!   `test-source` as generated.

pub mod new;
pub mod principals;
pub mod report;
pub mod test_source;
