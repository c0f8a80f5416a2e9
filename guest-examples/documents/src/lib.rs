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

wit_bindgen::generate!({ world: "inventory-source", path: "../../wit" });

use emseepea::inventory::config;
use emseepea::inventory::sql::{Connection, Error as DbError, Value};
use emseepea::inventory::types::{
    Access, CallContext, InventoryEntry, InventoryPage, ResourceBody, ResourceContents,
    ResourceMetadata, SourceError, Template,
};
use exports::emseepea::inventory::{inventory, template};

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

/// "if (!principal.subject) throw new Error("A verified user is required")"
fn owner(context: &CallContext) -> Result<&str, SourceError> {
    context
        .principal
        .as_ref()
        .and_then(|p| p.subject.as_deref())
        .ok_or_else(|| SourceError::Failed("A verified user is required".into()))
}

fn text(v: &Value) -> Result<String, SourceError> {
    match v {
        Value::Text(s) => Ok(s.clone()),
        _ => Err(SourceError::Failed("unexpected column type".into())),
    }
}

impl template::Guest for Documents {
    fn describe() -> Template {
        Template {
            name: "documents".into(),
            uri_template: format!("{PREFIX}{{id}}"),
            title: Some("Documents".into()),
            description: Some("The signed-in user's documents".into()),
            mime_type: Some("text/plain".into()),
            access: Access::Protected,
            required_scopes: vec!["documents:read".into()],
            discoverable: true,
        }
    }

    fn read(uri: String, context: CallContext) -> Result<Vec<ResourceContents>, SourceError> {
        let owner = owner(&context)?;
        let id = uri.strip_prefix(PREFIX).ok_or(SourceError::NotFound)?;
        let rows = db()?
            .query(
                "SELECT body FROM documents WHERE id = ?1 AND owner = ?2 AND deleted = 0",
                &[Value::Text(id.into()), Value::Text(owner.into())],
                1,
            )
            .map_err(backend)?;
        let row = rows.rows.first().ok_or(SourceError::NotFound)?;
        Ok(vec![ResourceContents {
            body: ResourceBody::Text(text(&row[0])?),
            mime_type: Some("text/plain".into()),
            uri,
        }])
    }
}

impl inventory::Guest for Documents {
    fn list(
        after: Option<String>,
        limit: u32,
        context: CallContext,
    ) -> Result<InventoryPage, SourceError> {
        let owner = owner(&context)?;
        // Every key is non-empty, so "" is below all of them.
        let rows = db()?
            .query(
                "SELECT order_key, id, title FROM documents \
                 WHERE owner = ?1 AND order_key > ?2 AND deleted = 0 \
                 ORDER BY order_key LIMIT ?3",
                &[
                    Value::Text(owner.into()),
                    Value::Text(after.unwrap_or_default()),
                    Value::Integer(i64::from(limit) + 1),
                ],
                limit + 1,
            )
            .map_err(backend)?;
        let has_more = rows.rows.len() > limit as usize;
        let entries = rows
            .rows
            .iter()
            .take(limit as usize)
            .map(|r| {
                Ok(InventoryEntry {
                    key: text(&r[0])?,
                    resource: ResourceMetadata {
                        uri: format!("{PREFIX}{}", text(&r[1])?),
                        name: text(&r[2])?,
                        mime_type: Some("text/plain".into()),
                    },
                })
            })
            .collect::<Result<Vec<_>, SourceError>>()?;
        Ok(InventoryPage { entries, has_more })
    }
}

export!(Documents);
