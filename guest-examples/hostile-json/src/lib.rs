//! A source that lists through `inventory-json` (world
//! inventory-source-json), well or badly, for tests. The manifest's
//! `[config]` picks what `list` answers:
//!
//! - `name`, `scope` (default `hostile:read`): the definition; its URIs are
//!   `hostile://NAME/{id}`.
//! - `mode`: `ok` (`items` entries, default 3, keys `k0001`…, paged after
//!   `after`; names with a quote, an escape and a non-ASCII letter; every
//!   third entry without `mimeType`, every third with `null`), `not-json`,
//!   `extra-field` (a valid page with one more field), `key-order` (valid
//!   JSON, keys out of order), `huge` (a valid empty page after `bytes`
//!   bytes of spaces).
//!
//! Every bad answer contains `HOSTILE-SECRET`, so tests can assert that no
//! guest text reaches a client.

wit_bindgen::generate!({ world: "inventory-source-json", path: "../../wit" });

use emseepea::inventory::config;
use emseepea::inventory::types::{
    Access, CallContext, ResourceBody, ResourceContents, SourceError, Template,
};
use exports::emseepea::inventory::{inventory_json, template};

struct HostileJson;

fn cfg(key: &str, default: &str) -> String {
    config::get(key).unwrap_or_else(|| default.into())
}

fn name() -> String {
    cfg("name", "hostile-json")
}

impl template::Guest for HostileJson {
    fn describe() -> Template {
        Template {
            name: name(),
            uri_template: format!("hostile://{}/{{id}}", name()),
            title: Some("Hostile JSON source".into()),
            description: Some("Lists through inventory-json (tests only)".into()),
            // None, so an entry without one shows none.
            mime_type: None,
            access: Access::Protected,
            required_scopes: vec![cfg("scope", "hostile:read")],
            discoverable: true,
        }
    }

    fn read(uri: String, _context: CallContext) -> Result<Vec<ResourceContents>, SourceError> {
        Ok(vec![ResourceContents {
            body: ResourceBody::Text(format!("contents of {uri}")),
            uri,
            mime_type: Some("text/plain".into()),
        }])
    }
}

/// `{"key":…,"resource":{…}}` of entry `n` (1-based).
fn entry(n: u32) -> String {
    let key = format!("k{n:04}");
    let mime = match n % 3 {
        0 => String::new(),
        1 => r#","mimeType":"text/plain""#.into(),
        _ => r#","mimeType":null"#.into(),
    };
    format!(
        r#"{{"key":"{key}","resource":{{"uri":"hostile://{}/{key}","name":"Item \"{n}\"\t\u00e9"{mime}}}}}"#,
        name()
    )
}

fn page(entries: &[String], has_more: bool) -> String {
    format!(
        r#"{{"entries":[{}],"hasMore":{has_more}}}"#,
        entries.join(",")
    )
}

impl inventory_json::Guest for HostileJson {
    fn list(
        after: Option<String>,
        limit: u32,
        _context: CallContext,
    ) -> Result<Vec<u8>, SourceError> {
        let items: u32 = cfg("items", "3").parse().unwrap_or(3);
        let first = after
            .as_deref()
            .and_then(|a| a.strip_prefix('k'))
            .and_then(|n| n.parse::<u32>().ok())
            .map_or(1, |n| n + 1);
        let last = items.min(first.saturating_add(limit).saturating_sub(1));
        let entries: Vec<String> = (first..=last).map(entry).collect();
        let has_more = last < items;
        Ok(match cfg("mode", "ok").as_str() {
            "not-json" => "HOSTILE-SECRET is not JSON".into(),
            "extra-field" => {
                let p = page(&entries, has_more);
                format!(r#"{},"HOSTILE-SECRET":1}}"#, &p[..p.len() - 1])
            }
            "key-order" => page(&[entry(2), entry(1)], false),
            _ => page(&entries, has_more),
        }
        .into_bytes())
    }
}

export!(HostileJson);
