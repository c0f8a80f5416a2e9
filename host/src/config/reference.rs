//! The configuration's reference, derived from the config types themselves:
//! their JSON Schema (`schemars`: doc comments become descriptions, serde
//! defaults become `default`, `#[schemars(range)]` bounds become
//! `minimum`/`maximum`), a complete commented `emseepea.toml` of every
//! default, and the book's reference page. `emseepea config schema`,
//! `config defaults` and `config reference` print them; `cargo xtask
//! config-reference` writes the page and the schema into docs/, and `cargo
//! xtask docs` fails when they are stale.
//! (Over 500 lines: the renderer of the generated reference and the tests
//! that keep the page, the schema and the defaults in step.)

use super::{Config, SourceManifest};
use serde_json::Value;
use std::fmt::Write;

/// Draft 7: what taplo (Even Better TOML) and most validators read.
fn generator() -> schemars::SchemaGenerator {
    schemars::generate::SchemaSettings::draft07().into_generator()
}

/// The JSON Schema of the server's config file (`emseepea.toml`).
pub fn schema() -> Value {
    let schema = generator().into_root_schema_for::<Config>();
    let mut schema = serde_json::to_value(schema).expect("schema");
    schema["title"] = "emseepea.toml".into();
    schema
}

/// The JSON Schema of a source's manifest (`NAME.toml` beside `NAME.wasm`).
pub fn manifest_schema() -> Value {
    let schema = generator().into_root_schema_for::<SourceManifest>();
    let mut schema = serde_json::to_value(schema).expect("schema");
    schema["title"] = "emseepea source manifest (NAME.toml)".into();
    schema
}

/// Placeholders for the keys that have no default (`defaults` must load).
const REQUIRED_PLACEHOLDERS: &[(&str, &str)] =
    &[("sources_dir", "\"sources\""), ("state_dir", "\"state\"")];

/// One key of a table, its schema resolved.
struct Key<'a> {
    name: &'a str,
    schema: &'a Value,
    /// The property's own schema (its description and default live here
    /// when the type is a reference).
    outer: &'a Value,
    required: bool,
    /// `Option<T>`: may be left out entirely (`[auth.jwt]`).
    nullable: bool,
}

/// What a key holds, for laying it out.
enum Shape<'a> {
    /// A value on one line.
    Scalar,
    /// A table (`[name]`), optional or not.
    Table(&'a Value),
    /// A table of tables named by the operator (`[name.LABEL]`).
    Map(&'a Value),
    /// An array of tables (`[[name]]`).
    Tables(&'a Value),
}

struct Doc<'a> {
    root: &'a Value,
}

impl<'a> Doc<'a> {
    /// `schema` with a `$ref` (or a nullable `anyOf` of one) followed.
    fn resolve(&self, schema: &'a Value) -> &'a Value {
        if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
            let name = r.rsplit('/').next().unwrap_or_default();
            let defs = self
                .root
                .get("definitions")
                .or_else(|| self.root.get("$defs"));
            return self.resolve(&defs.expect("schema definitions")[name]);
        }
        // A reference with a description of its own is `allOf: [ref]`.
        if let Some([only]) = schema
            .get("allOf")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
        {
            return self.resolve(only);
        }
        if let Some(any) = schema.get("anyOf").and_then(Value::as_array) {
            let some: Vec<&Value> = any.iter().filter(|s| s["type"] != "null").collect();
            if some.len() == 1 {
                return self.resolve(some[0]);
            }
        }
        schema
    }

    fn keys(&self, table: &'a Value) -> Vec<Key<'a>> {
        let required: Vec<&str> = table["required"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        table["properties"]
            .as_object()
            .map(|props| {
                props
                    .iter()
                    .map(|(name, outer)| Key {
                        name,
                        schema: self.resolve(outer),
                        outer,
                        required: required.contains(&name.as_str()),
                        nullable: outer["anyOf"]
                            .as_array()
                            .is_some_and(|any| any.iter().any(|s| s["type"] == "null")),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn shape(&self, key: &Key<'a>) -> Shape<'a> {
        let s = key.schema;
        if s.get("properties").is_some() {
            return Shape::Table(s);
        }
        if let Some(values) = s.get("additionalProperties").filter(|v| v.is_object()) {
            let values = self.resolve(values);
            if values.get("properties").is_some() {
                return Shape::Map(values);
            }
        }
        if let Some(items) = s.get("items") {
            let items = self.resolve(items);
            if items.get("properties").is_some() {
                return Shape::Tables(items);
            }
        }
        Shape::Scalar
    }

    /// The key's one-line type: `integer (1..=100)`, `"a" | "b"`, ...
    fn type_of(&self, s: &'a Value) -> String {
        if let Some(values) = enum_values(s) {
            return values
                .iter()
                .map(|(v, _)| format!("`\"{v}\"`"))
                .collect::<Vec<_>>()
                .join(" \\| ");
        }
        let types: Vec<&str> = match &s["type"] {
            Value::String(t) => vec![t.as_str()],
            Value::Array(a) => a
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
                .collect(),
            _ => vec![],
        };
        let mut out = match types.first().copied() {
            Some("array") => {
                let items = self.resolve(&s["items"]);
                format!("array of {}", self.type_of(items))
            }
            Some("object") if s.get("additionalProperties").is_some() => {
                let values = self.resolve(&s["additionalProperties"]);
                format!("table of {}", self.type_of(values))
            }
            Some(t) => t.to_owned(),
            None => "any".to_owned(),
        };
        let min = s.get("minimum").and_then(Value::as_f64);
        let max = s.get("maximum").and_then(Value::as_f64);
        let bound = |v: f64| {
            if v.fract() == 0.0 {
                format!("{}", v as i64)
            } else {
                format!("{v}")
            }
        };
        match (min, max) {
            (Some(lo), Some(hi)) => write!(out, " ({}..={})", bound(lo), bound(hi)).unwrap(),
            (Some(lo), None) if lo != 0.0 => write!(out, " (≥ {})", bound(lo)).unwrap(),
            (_, Some(hi)) => write!(out, " (≤ {})", bound(hi)).unwrap(),
            _ => {}
        }
        out
    }
}

/// An enum's values and their descriptions (`enum`, or `oneOf` of `const`s).
fn enum_values(s: &Value) -> Option<Vec<(String, String)>> {
    if let Some(values) = s.get("enum").and_then(Value::as_array) {
        return Some(
            values
                .iter()
                .filter_map(|v| v.as_str().map(|v| (v.to_owned(), String::new())))
                .collect(),
        );
    }
    let one_of = s.get("oneOf")?.as_array()?;
    let mut out = Vec::new();
    for v in one_of {
        let value = v
            .get("const")
            .or_else(|| v.get("enum").and_then(|e| e.get(0)))?;
        out.push((value.as_str()?.to_owned(), description(v)));
    }
    Some(out)
}

fn description(s: &Value) -> String {
    s.get("description")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

/// A key's description: its own, else its type's.
fn key_description(key: &Key) -> String {
    let own = description(key.outer);
    if own.is_empty() {
        description(key.schema)
    } else {
        own
    }
}

fn default_of<'v>(key: &Key<'v>) -> Option<&'v Value> {
    key.outer
        .get("default")
        .or_else(|| key.schema.get("default"))
        .filter(|v| !v.is_null())
}

/// A JSON value as a TOML value on one line.
fn toml_value(v: &Value) -> String {
    match v {
        Value::String(s) => toml::Value::String(s.clone()).to_string(),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(toml_value).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(map) => format!(
            "{{ {} }}",
            map.iter()
                .map(|(k, v)| format!("{k} = {}", toml_value(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

/// `text` as `# ` comment lines of at most ~78 characters.
fn comment(out: &mut String, prefix: &str, text: &str) {
    for paragraph in text.split("\n\n") {
        let mut line = String::new();
        for word in paragraph.split_whitespace() {
            if !line.is_empty() && line.len() + word.len() > 76 {
                writeln!(out, "{prefix}# {line}").unwrap();
                line.clear();
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        if !line.is_empty() {
            writeln!(out, "{prefix}# {line}").unwrap();
        }
    }
}

/// A complete `emseepea.toml` with every key at its default, each with its
/// meaning as a comment; optional tables and keys without a default are
/// commented out. It loads as it is (with `sources/` and `state/` beside it).
pub fn defaults_toml() -> String {
    let schema = schema();
    let doc = Doc { root: &schema };
    let mut out = String::new();
    out.push_str(
        "# emseepea.toml: every key at its default (`emseepea config defaults`).\n\
         # Paths are relative to this file; unknown keys are errors.\n\
         #:schema ./emseepea.schema.json\n\n",
    );
    write_table(&doc, &mut out, &schema, "", "");
    out
}

fn write_table<'a>(doc: &Doc<'a>, out: &mut String, table: &'a Value, path: &str, prefix: &str) {
    let keys = doc.keys(table);
    let mut later = Vec::new();
    for key in &keys {
        match doc.shape(key) {
            Shape::Scalar => {
                // In a commented-out table, descriptions are `# # ` and keys `# `.
                let text = if prefix.is_empty() { "" } else { "# " };
                comment(out, text, &key_description(key));
                if let Some(values) = enum_values(key.schema) {
                    for (v, d) in values.iter().filter(|(_, d)| !d.is_empty()) {
                        comment(out, text, &format!("  \"{v}\": {d}"));
                    }
                }
                let placeholder = REQUIRED_PLACEHOLDERS
                    .iter()
                    .find(|(k, _)| path.is_empty() && *k == key.name);
                let line = match (default_of(key), placeholder) {
                    (_, Some((_, v))) => format!("{} = {v}  # required", key.name),
                    (Some(v), None) => format!("{} = {}", key.name, toml_value(v)),
                    (None, None) => format!(
                        "{}{} = ...  ({}{})",
                        if prefix.is_empty() { "# " } else { "" },
                        key.name,
                        doc.type_of(key.schema),
                        if key.required {
                            ", required"
                        } else {
                            ", optional"
                        }
                    ),
                };
                writeln!(out, "{prefix}{line}").unwrap();
                out.push('\n');
            }
            shape => later.push((key, shape)),
        }
    }
    for (key, shape) in later {
        let name = if path.is_empty() {
            key.name.to_owned()
        } else {
            format!("{path}.{}", key.name)
        };
        let optional = key.nullable;
        match shape {
            Shape::Table(t) => {
                // A table that is only there when set (`[auth.jwt]`) is
                // shown commented out, as an example of its keys.
                let prefix = if optional || !prefix.is_empty() {
                    "# "
                } else {
                    ""
                };
                comment(out, "", &key_description(key));
                writeln!(out, "{prefix}[{name}]").unwrap();
                write_table(doc, out, t, &name, prefix);
            }
            Shape::Map(t) => {
                comment(out, "", &key_description(key));
                writeln!(out, "# [{name}.LABEL]").unwrap();
                write_table(doc, out, t, &format!("{name}.LABEL"), "# ");
            }
            Shape::Tables(t) => {
                comment(out, "", &key_description(key));
                writeln!(out, "# [[{name}]]").unwrap();
                write_table(doc, out, t, &name, "# ");
            }
            Shape::Scalar => unreachable!(),
        }
    }
}

/// The book's configuration reference page (docs/src/reference/config.md).
pub fn markdown() -> String {
    let mut out = String::new();
    out.push_str(
        "<!-- Generated by `cargo xtask config-reference` from the config types \
         (host/src/config.rs and the sections it composes); do not edit by hand. -->\n\n\
         # Configuration keys\n\n\
         Every key of the server's `emseepea.toml` and of a source's manifest \
         (`NAME.toml` beside `NAME.wasm`), with its type, default and meaning, \
         generated from the code. Paths are relative to the file that names them; \
         unknown keys are errors everywhere. Sizes are bytes, durations are in the \
         key's unit (`_ms`, `_s`, `_us`).\n\n\
         The same facts, for machines and editors:\n\n\
         - `emseepea config schema` prints the JSON Schema of `emseepea.toml` \
         (`emseepea config schema --manifest`: of a manifest); the book carries both as \
         [`emseepea.schema.json`](emseepea.schema.json) and \
         [`manifest.schema.json`](manifest.schema.json).\n\
         - `emseepea config defaults` prints a complete `emseepea.toml` with every \
         key at its default and its meaning as a comment.\n\
         - [Configuration](../operating/configuration.md) explains how to validate a \
         config in an editor with the schema.\n\n\
         ## emseepea.toml\n\n",
    );
    let schema = schema();
    write_markdown_table(&Doc { root: &schema }, &mut out, &schema, "");
    out.push_str("## Source manifest (`NAME.toml`)\n\n");
    let manifest = manifest_schema();
    write_markdown_table(&Doc { root: &manifest }, &mut out, &manifest, "");
    out
}

fn write_markdown_table<'a>(doc: &Doc<'a>, out: &mut String, table: &'a Value, path: &str) {
    let keys = doc.keys(table);
    let mut later = Vec::new();
    let mut rows = Vec::new();
    for key in &keys {
        match doc.shape(key) {
            Shape::Scalar => rows.push(key),
            shape => later.push((key, shape)),
        }
    }
    if !rows.is_empty() {
        out.push_str("| key | type | default | meaning |\n|---|---|---|---|\n");
        for key in rows {
            let default = match default_of(key) {
                Some(v) => format!("`{}`", toml_value(v)),
                None if key.required => "required".to_owned(),
                None => "unset".to_owned(),
            };
            let mut meaning = key_description(key);
            if let Some(values) = enum_values(key.schema) {
                for (v, d) in values.iter().filter(|(_, d)| !d.is_empty()) {
                    write!(meaning, " `\"{v}\"`: {d}").unwrap();
                }
            }
            writeln!(
                out,
                "| `{}` | {} | {} | {} |",
                key.name,
                doc.type_of(key.schema),
                cell(&default),
                cell(&meaning)
            )
            .unwrap();
        }
        out.push('\n');
    }
    for (key, shape) in later {
        let name = if path.is_empty() {
            key.name.to_owned()
        } else {
            format!("{path}.{}", key.name)
        };
        let (heading, next, t) = match shape {
            Shape::Table(t) => (format!("[{name}]"), name.clone(), t),
            Shape::Map(t) => (format!("[{name}.LABEL]"), format!("{name}.LABEL"), t),
            Shape::Tables(t) => (format!("[[{name}]]"), name.clone(), t),
            Shape::Scalar => unreachable!(),
        };
        writeln!(out, "### `{heading}`\n").unwrap();
        let text = key_description(key);
        if !text.is_empty() {
            writeln!(out, "{}\n", text.replace('\n', " ")).unwrap();
        }
        write_markdown_table(doc, out, t, &next);
    }
}

/// Text for one Markdown table cell.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// The JSON Schema as the file the book carries (pretty, newline-ended).
pub fn to_file(schema: &Value) -> String {
    let mut text = serde_json::to_string_pretty(schema).expect("json");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_file_loads_and_holds_every_default() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sources")).unwrap();
        let path = dir.path().join("emseepea.toml");
        std::fs::write(&path, defaults_toml()).unwrap();
        let loaded = Config::load(&path).unwrap();
        assert_eq!(
            loaded.http.request_timeout_ms,
            super::super::DEFAULT_REQUEST_TIMEOUT_MS
        );
        assert_eq!(
            loaded.list_pagination.page_size,
            super::super::DEFAULT_PAGE_SIZE
        );
        let text = defaults_toml();
        for key in [
            "request_timeout_ms = 30000",
            "page_size = 50",
            "# [auth.jwt]",
            "# [databases.LABEL]",
        ] {
            assert!(text.contains(key), "{key} missing from:\n{text}");
        }
    }

    #[test]
    fn the_schema_has_descriptions_defaults_and_bounds() {
        let s = schema();
        let page = &s["definitions"]["ListPagination"]["properties"]["page_size"];
        assert_eq!(page["maximum"], 100);
        assert_eq!(page["default"], 50);
        assert!(
            page["description"]
                .as_str()
                .unwrap()
                .contains("entries per page")
        );
        let keys = s["properties"].as_object().unwrap();
        for key in [
            "listen",
            "sources_dir",
            "auth",
            "databases",
            "runtime",
            "workers",
        ] {
            assert!(keys.contains_key(key), "{key}");
        }
        assert!(
            !keys.contains_key("file"),
            "the loader's own field is not a key"
        );
    }
}
