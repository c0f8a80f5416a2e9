//! The `owned*` modes: a per-user source that is correct (`owned`) or breaks
//! exactly one rule the server cannot see within one page, for
//! `emseepea test-source`'s tests. Each user `S` owns `items` records
//! (default 10) with keys `S#0000..` and URIs `hostile://NAME/S-N`.
//!
//! - `owned`: correct;
//! - `owned-read-leak`: read ignores the owner (any user reads any record);
//! - `owned-no-subject`: a token without a user lists `anonymous`'s records;
//! - `owned-read-unlisted`: read traps on a record that does not exist;
//! - `owned-has-more-lies`: the last page says has-more, the next is empty;
//! - `owned-uri-repeat`: a URI repeats on a later page (never on one page);
//! - `owned-limit-dependent`: with limit 1 the last record is missing;
//! - `owned-random`: names change from one call to the next.

use crate::emseepea::inventory::types::{
    CallContext, InventoryEntry, InventoryPage, ResourceBody, ResourceContents, ResourceMetadata,
    SourceError,
};
use crate::{cfg, name};

fn items() -> u64 {
    cfg("items", "10").parse().unwrap_or(10)
}

fn subject(context: &CallContext, variant: &str) -> Result<String, SourceError> {
    match context.principal.as_ref().and_then(|p| p.subject.clone()) {
        Some(s) => Ok(s),
        None if variant == "-no-subject" => Ok("anonymous".into()),
        None => Err(SourceError::Failed("a verified user is required".into())),
    }
}

fn random_u64() -> u64 {
    use std::hash::BuildHasher;
    // RandomState's keys come from WASI's random source in every fresh instance.
    std::collections::hash_map::RandomState::new().hash_one(7u8)
}

pub fn list(
    variant: &str,
    after: Option<String>,
    limit: u32,
    context: &CallContext,
) -> Result<InventoryPage, SourceError> {
    let user = subject(context, variant)?;
    let limit = u64::from(limit);
    let mut total = items();
    if variant == "-limit-dependent" && limit == 1 {
        total = total.saturating_sub(1);
    }
    let first = match after.as_deref() {
        None => 0,
        Some(a) => a
            .rsplit('#')
            .next()
            .and_then(|n| n.parse::<u64>().ok())
            .map_or(total, |n| n + 1),
    };
    let end = (first + limit).min(total);
    let entries = (first..end)
        .map(|i| {
            let id = if variant == "-uri-repeat" {
                i % limit
            } else {
                i
            };
            let title = if variant == "-random" {
                format!("Record {i} ({})", random_u64())
            } else {
                format!("Record {i}")
            };
            InventoryEntry {
                key: format!("{user}#{i:04}"),
                resource: ResourceMetadata {
                    uri: format!("hostile://{}/{user}-{id}", name()),
                    name: title,
                    mime_type: None,
                },
            }
        })
        .collect();
    let has_more = end < total || (variant == "-has-more-lies" && first < total);
    Ok(InventoryPage { entries, has_more })
}

pub fn read(
    variant: &str,
    uri: String,
    context: &CallContext,
) -> Result<Vec<ResourceContents>, SourceError> {
    let found = |uri: String| {
        Ok(vec![ResourceContents {
            body: ResourceBody::Text(format!("contents of {uri}")),
            mime_type: Some("text/plain".into()),
            uri,
        }])
    };
    let user = subject(context, variant)?;
    let prefix = format!("hostile://{}/", name());
    // A record exists when its owner is a plain name and its number < items.
    let record = uri
        .strip_prefix(&prefix)
        .and_then(|id| id.rsplit_once('-'))
        .filter(|(owner, _)| owner.bytes().all(|b| b.is_ascii_alphanumeric()))
        .and_then(|(owner, n)| Some((owner, n.parse::<u64>().ok()?)))
        .filter(|&(_, n)| n < items());
    let (owner, _) = match record {
        Some(r) => r,
        // The bug this variant stands for: a lookup that assumes the record exists.
        None if variant == "-read-unlisted" => panic!("HOSTILE-SECRET no such record"),
        None => return Err(SourceError::NotFound),
    };
    if owner != user && variant != "-read-leak" {
        return Err(SourceError::NotFound);
    }
    found(uri)
}
