//! The book's example: each user lists and reads only their own records.
use emseepea_guest::*;

const RECORDS: [(&str, &str, &str); 3] = [
    ("alice", "k1", "Alpha"),
    ("alice", "k2", "Beta"),
    ("bob", "k3", "Gamma"),
];

struct Minimal;

impl Source for Minimal {
    fn definition() -> Definition {
        Definition::protected("minimal", "minimal://records/{key}").scopes(["minimal:read"])
    }

    fn list(request: ListRequest) -> Result<InventoryPage, SourceError> {
        let user = request.subject()?;
        Ok(request.page(
            RECORDS
                .iter()
                .filter(|r| r.0 == user && request.is_after(r.1))
                .map(|(_, key, title)| entry(*key, format!("minimal://records/{key}"), *title)),
        ))
    }

    fn read(uri: String, context: CallContext) -> Result<Vec<ResourceContents>, SourceError> {
        let user = require_subject(&context)?;
        let key = uri.strip_prefix("minimal://records/");
        let record = RECORDS.iter().find(|r| r.0 == user && Some(r.1) == key);
        let (_, _, title) = record.ok_or(SourceError::NotFound)?;
        Ok(text(uri, Some("text/plain"), *title))
    }
}

export_source!(Minimal);
