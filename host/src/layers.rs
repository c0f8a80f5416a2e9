//! The import rule (ARCHITECTURE.md, "Layers"), checked: every `crate::`
//! path in every file under `src/` names a module of a lower layer than
//! its own, or its own module. Nothing imports upward, and no layer imports
//! `config`, which sits above them all and composes their settings.

use std::path::{Path, PathBuf};

/// The layers, top to bottom; a module may import only modules of a later
/// line (or itself). Every top-level module of the crate is in one line.
const LAYERS: &[&[&str]] = &[
    // Entry points: the binary, `emseepea check` and the guest kit (and
    // this check, whose tests quote imports of every kind)...
    &["main", "check", "devkit", "layers"],
    // ...and serving, which they start.
    &["server"],
    // The configuration: composes every layer's settings and loads them.
    &["config"],
    // Transports: MCP over HTTP and stdio (transport, method, dispatch),
    // and the operator's admin listener.
    &["mcp", "admin"],
    // Accepting connections (the transport reads its per-peer defaults).
    &["listener"],
    // The pager: listings, reads, cursors, static resources.
    &["inventory"],
    // Authentication: the `Principal` the transport makes and the pager reads.
    &["auth"],
    // Budgeted guest calls and the capabilities.
    &["runtime"],
    // Signed sources (the loader checks signatures), `push`/`pull`.
    &["distribution"],
    // Worker threads' hooks (they count into the metrics).
    &["workers"],
    // Logs, metrics, traces.
    &["telemetry"],
    // Leaves every layer may use.
    &["fields", "uri_template"],
    &["guest_text", "http_client", "state", "secret", "toml_file"],
    &["limits", "fuzz"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|line| line.contains(&module))
}

/// One import against the rule.
#[derive(Debug, PartialEq, Eq)]
struct Violation {
    file: PathBuf,
    line: usize,
    what: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.file.display(), self.line, self.what)
    }
}

/// The top-level module a file (relative to `src/`) belongs to; `None` for
/// the crate root, which only declares the modules.
fn module_of(relative: &Path) -> Option<String> {
    let first = relative.components().next()?.as_os_str().to_str()?;
    match first.strip_suffix(".rs") {
        Some("lib") => None,
        Some(stem) => Some(stem.to_owned()),
        None => Some(first.to_owned()),
    }
}

/// The top-level names a line's `crate::` paths reach: `crate::a::b` gives
/// `a`, `crate::{a::b, c}` gives `a` and `c`.
fn imported(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        // `emseepea_crate::` or `my_crate::` are not `crate::`.
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let names: Vec<&str> = match rest.strip_prefix('{') {
            // A group: its items up to the closing brace (one level).
            Some(group) => group
                .split('}')
                .next()
                .unwrap_or("")
                .split(',')
                .filter_map(|item| item.trim().split("::").next())
                .collect(),
            None => rest.split("::").next().into_iter().collect(),
        };
        for name in names {
            let name: String = name
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

/// `text` without its `//` comments (doc comments name modules freely).
fn code(line: &str) -> &str {
    match line.find("//") {
        Some(at) => &line[..at],
        None => line,
    }
}

/// Every import of `text` (the file `relative`) against the rule.
fn check_file(relative: &Path, text: &str) -> Vec<Violation> {
    let Some(module) = module_of(relative) else {
        return Vec::new();
    };
    let violation = |line: usize, what: String| Violation {
        file: relative.to_owned(),
        line,
        what,
    };
    let Some(own) = layer_of(&module) else {
        return vec![violation(
            1,
            format!("module `{module}` is in no layer: add it to layers.rs and ARCHITECTURE.md"),
        )];
    };
    let mut found = Vec::new();
    // A `use crate::{...}` group may span lines: read it whole.
    let mut pending = String::new();
    let mut pending_at = 0;
    for (n, line) in text.lines().enumerate() {
        let line = code(line);
        if pending.is_empty() && !(line.contains("crate::{") && !line.contains('}')) {
            pending_at = n + 1;
            check_line(line, &module, own, |what| {
                found.push(violation(n + 1, what))
            });
            continue;
        }
        if pending.is_empty() {
            pending_at = n + 1;
        }
        pending.push_str(line);
        pending.push(' ');
        if line.contains('}') {
            check_line(&pending, &module, own, |what| {
                found.push(violation(pending_at, what))
            });
            pending.clear();
        }
    }
    found
}

fn check_line(line: &str, module: &str, own: usize, mut report: impl FnMut(String)) {
    for target in imported(line) {
        if target == module {
            continue;
        }
        match layer_of(&target) {
            // A crate-root item (`crate::VERSION`), not a module.
            None => {}
            Some(theirs) if theirs > own => {}
            Some(_) if target == "config" => report(format!(
                "`{module}` imports `crate::config`: a layer owns its settings and is handed them"
            )),
            Some(_) => report(format!(
                "`{module}` imports `crate::{target}`, which is not below it (layers.rs)"
            )),
        }
    }
}

/// Every `.rs` file under `dir`, relative to it.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path.strip_prefix(dir).unwrap().to_owned());
            }
        }
    }
    out.sort();
    out
}

/// The rule over a source tree: this crate's `src/`, or the one
/// `EMSEEPEA_LAYERS_SRC` names (to show what it says of another revision).
fn check_tree(dir: &Path) -> Vec<Violation> {
    sources(dir)
        .iter()
        .flat_map(|file| check_file(file, &std::fs::read_to_string(dir.join(file)).unwrap()))
        .collect()
}

#[test]
fn no_layer_imports_config_or_a_layer_above_it() {
    let dir = std::env::var_os("EMSEEPEA_LAYERS_SRC")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let found = check_tree(&dir);
    assert!(
        found.is_empty(),
        "{} import(s) against the layer rule:\n{}",
        found.len(),
        found
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The check itself: what the old configuration imports looked like is
/// refused with the file and line, what the layers do now passes.
#[test]
fn the_check_names_the_file_and_line() {
    let wasi = Path::new("runtime/capabilities/wasi.rs");
    let old = "//! doc naming crate::config is fine\nuse super::Capability;\nuse crate::config::{Config, SourceManifest};\n";
    assert_eq!(
        check_file(wasi, old),
        [Violation {
            file: wasi.to_owned(),
            line: 3,
            what: "`runtime` imports `crate::config`: a layer owns its settings and is handed them"
                .into(),
        }]
    );
    let upward = "use crate::{\n    guest_text::GuestText,\n    mcp::App,\n};\n";
    let found = check_file(Path::new("auth/mod.rs"), upward);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].line, 1);
    assert!(found[0].what.contains("`crate::mcp`"), "{}", found[0]);
    let inline = "    let n = crate::config::MAX_URI_LEN;\n";
    assert_eq!(check_file(Path::new("guest_text.rs"), inline).len(), 1);
    let fine = "use crate::runtime::config::RuntimeConfig;\nuse crate::limits::MAX_URI_LEN;\nlet v = crate::VERSION;\n";
    assert!(check_file(Path::new("runtime/engine.rs"), fine).is_empty());
    assert!(check_file(Path::new("config.rs"), "use crate::auth::config::*;\n").is_empty());
    let unknown = check_file(Path::new("newlayer/mod.rs"), "");
    assert!(unknown[0].what.contains("in no layer"), "{}", unknown[0]);
}
