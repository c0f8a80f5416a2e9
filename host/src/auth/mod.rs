//! The OAuth resource server: bearer verification, the principal, the
//! protected-resource metadata and challenges.

mod principal;

pub use principal::{Principal, valid_subject};
