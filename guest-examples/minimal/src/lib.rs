//! The smallest useful inventory source: the README's example, built by
//! `cargo xtask guests` so it is known to compile.
use emseepea_guest::*;

const RECORDS: [(&str, &str, &str); 3] = [
    ("alice", "k1", "Alpha"),
    ("alice", "k2", "Beta"),
    ("bob", "k3", "Gamma"),
];

struct Minimal;

impl Source for Minimal {
    fn definition() -> Definition {
        Definition::protected("minimal", "minimal://records/{key}")
            .title("Minimal")
            .mime_type("text/plain")
            .scopes(["minimal:read"])
    }

    fn list(request: ListRequest) -> Result<InventoryPage, SourceError> {
        let user = request.subject()?;
        // Only this caller's records, keys strictly after `after`, in key order.
        let mine = RECORDS
            .iter()
            .filter(|(owner, key, _)| *owner == user && request.is_after(key))
            .map(|(_, key, title)| entry(*key, format!("minimal://records/{key}"), *title));
        Ok(request.page(mine))
    }

    fn read(uri: String, context: CallContext) -> Result<Vec<ResourceContents>, SourceError> {
        let user = require_subject(&context)?;
        let key = uri
            .strip_prefix("minimal://records/")
            .ok_or(SourceError::NotFound)?;
        // Check ownership again on every read: a listed URI grants nothing.
        let (_, _, title) = RECORDS
            .iter()
            .find(|(owner, k, _)| *owner == user && *k == key)
            .ok_or(SourceError::NotFound)?;
        Ok(text(uri, Some("text/plain"), *title))
    }
}

export_source!(Minimal);
