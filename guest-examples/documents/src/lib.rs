//! The seed's `documents` example: each caller lists and reads only the
//! documents they own, from a granted SQL database (SQLite by default).
//!
//! "Query only the caller’s records": `list` runs one bounded, ordered query
//! (`owner = ? AND order_key > ? ORDER BY order_key LIMIT limit + 1`; the
//! extra row decides `has-more`), and `read` re-checks ownership in its own
//! query, because a URI listed earlier grants nothing. Without a verified
//! subject both refuse: there is no unrestricted fallback.
//!
//! Config: `database` (the granted label, default `documents`).

use emseepea_guest::bindings::emseepea::inventory::sql::{Connection, Error as DbError, Value};
use emseepea_guest::*;

const PREFIX: &str = "learn://documents/";

struct Documents;

fn db() -> Result<Connection, SourceError> {
    let label = config::get("database").unwrap_or_else(|| "documents".into());
    Connection::open(&label).map_err(backend)
}

fn backend(e: DbError) -> SourceError {
    match e {
        DbError::Interrupted => SourceError::Unavailable("query interrupted".into()),
        other => SourceError::Failed(format!("database: {other:?}")),
    }
}

fn text(v: &Value) -> Result<String, SourceError> {
    match v {
        Value::Text(s) => Ok(s.clone()),
        _ => Err(SourceError::Failed("unexpected column type".into())),
    }
}

impl Source for Documents {
    fn definition() -> Definition {
        Definition::protected("documents", &format!("{PREFIX}{{id}}"))
            .title("Documents")
            .description("The signed-in user's documents")
            .mime_type("text/plain")
            .scopes(["documents:read"])
    }

    fn read(uri: String, context: CallContext) -> Result<Vec<ResourceContents>, SourceError> {
        // "if (!principal.subject) throw new Error("A verified user is required")"
        let owner = require_subject(&context)?;
        let id = uri.strip_prefix(PREFIX).ok_or(SourceError::NotFound)?;
        let rows = db()?
            .query(
                "SELECT body FROM documents WHERE id = ?1 AND owner = ?2 AND deleted = 0",
                &[Value::Text(id.into()), Value::Text(owner.into())],
                1,
            )
            .map_err(backend)?;
        let row = rows.rows.first().ok_or(SourceError::NotFound)?;
        let body = text(&row[0])?;
        Ok(emseepea_guest::text(uri, Some("text/plain"), body))
    }

    fn list(request: ListRequest) -> Result<InventoryPage, SourceError> {
        let owner = request.subject()?;
        // Every key is non-empty, so "" is below all of them; one row more
        // than `limit` tells whether more exist.
        let rows = db()?
            .query(
                "SELECT order_key, id, title FROM documents \
                 WHERE owner = ?1 AND order_key > ?2 AND deleted = 0 \
                 ORDER BY order_key LIMIT ?3",
                &[
                    Value::Text(owner.into()),
                    Value::Text(request.after_or_start().into()),
                    Value::Integer(i64::from(request.fetch())),
                ],
                request.fetch(),
            )
            .map_err(backend)?;
        let entries = rows
            .rows
            .iter()
            .map(|r| {
                let mut e = entry(
                    text(&r[0])?,
                    format!("{PREFIX}{}", text(&r[1])?),
                    text(&r[2])?,
                );
                e.resource.mime_type = Some("text/plain".into());
                Ok(e)
            })
            .collect::<Result<Vec<_>, SourceError>>()?;
        Ok(request.page(entries))
    }
}

export_source!(Documents);
