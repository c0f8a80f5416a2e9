//! The book in docs/ (mdBook), checked as code:
//!
//! - `cargo xtask config-reference` writes the generated pages (the
//!   configuration reference and the two JSON Schemas) from the `emseepea`
//!   binary (`emseepea config reference`, `config schema [--manifest]`);
//! - `cargo xtask docs` (run by `cargo xtask test`) fails when those pages
//!   are stale, builds the book with `mdbook build`, checks every internal
//!   link and `#anchor`, and runs `emseepea check` on every config block:
//!   a fence marked ```` ```toml,config ```` is a whole `emseepea.toml`;
//!   ```` ```toml,config-fragment ```` is part of one, checked after
//!   `sources_dir = "sources"` and `state_dir = "state"`. Both run in a
//!   scratch directory with an empty `sources/`, so a block's relative paths
//!   must name files the block does not need to exist;
//! - checks every command line of a ```` ```sh ```` block that names this
//!   project: an `emseepea …` line must parse (it is run with `--help`
//!   added, which clap answers only when every argument before it is
//!   known), a `cargo xtask NAME` must name a task, and a script path
//!   (`benchmarks/…`, `deploy/…`, `.ci/…`) must exist. Other programs
//!   (curl, npm, python3) are the reader's.

use super::{Result, cargo, output, root, run};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The mdBook release the book is built with (`cargo install --locked`).
const MDBOOK_VERSION: &str = "0.5.4";

/// The generated files, each with the `emseepea` arguments that print it.
const GENERATED: &[(&str, &[&str])] = &[
    ("docs/src/reference/config.md", &["config", "reference"]),
    (
        "docs/src/reference/emseepea.schema.json",
        &["config", "schema"],
    ),
    (
        "docs/src/reference/manifest.schema.json",
        &["config", "schema", "--manifest"],
    ),
];

/// Build the server binary (debug) and return its path.
fn emseepea() -> Result<PathBuf> {
    let root = root();
    run(cargo()
        .current_dir(&root)
        .args(["build", "--quiet", "-p", "emseepea", "--bin", "emseepea"]))?;
    Ok(root.join("target/debug/emseepea"))
}

fn generated(bin: &Path) -> Result<Vec<(PathBuf, String)>> {
    GENERATED
        .iter()
        .map(|(file, args)| Ok((root().join(file), output(Command::new(bin).args(*args))?)))
        .collect()
}

/// `cargo xtask config-reference`: rewrite the generated pages.
pub fn write_reference() -> Result {
    let bin = emseepea()?;
    for (path, text) in generated(&bin)? {
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!("xtask: wrote {}", path.display());
    }
    Ok(())
}

/// `cargo xtask docs`.
pub fn check() -> Result {
    let root = root();
    let bin = emseepea()?;
    let mut problems = Vec::new();
    for (path, text) in generated(&bin)? {
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            problems.push(format!(
                "{} is stale (the config types changed): run `cargo xtask config-reference` and commit it",
                path.display()
            ));
        }
    }
    let src = root.join("docs/src");
    problems.extend(check_links(&src)?);
    problems.extend(check_config_blocks(&bin, &src)?);
    problems.extend(check_command_blocks(&bin, &src)?);
    if !problems.is_empty() {
        for p in &problems {
            eprintln!("xtask: docs: {p}");
        }
        return Err(format!("{} problem(s) in docs/", problems.len()));
    }
    ensure_mdbook()?;
    run(Command::new("mdbook")
        .current_dir(root.join("docs"))
        .arg("build"))?;
    eprintln!("xtask: the book is in target/book/index.html");
    Ok(())
}

fn ensure_mdbook() -> Result {
    let have = Command::new("mdbook")
        .arg("--version")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(MDBOOK_VERSION));
    if !have {
        run(cargo().args(["install", "--locked", "mdbook", "--version", MDBOOK_VERSION]))?;
    }
    Ok(())
}

/// Every page under `src`, relative to it.
fn pages(src: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![src.to_owned()];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p.strip_prefix(src).unwrap().to_owned());
            }
        }
    }
    out.sort();
    out
}

/// The lines outside fenced code blocks, numbered from 1.
fn outside_fences(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut fence: Option<&str> = None;
    for (n, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if let Some(f) = fence {
            if t.starts_with(f) {
                fence = None;
            }
            continue;
        }
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = Some(&t[..3]);
            continue;
        }
        out.push((n + 1, line));
    }
    out
}

/// The text outside fenced code blocks and inline code, line by line.
fn prose(text: &str) -> Vec<(usize, String)> {
    outside_fences(text)
        .into_iter()
        .map(|(n, line)| {
            // Inline code spans hold no links.
            let kept: String = line
                .split('`')
                .enumerate()
                .filter(|(i, _)| i % 2 == 0)
                .map(|(_, part)| part)
                .collect();
            (n, kept)
        })
        .collect()
}

/// mdBook's id for a heading: its text, lowercased, alphanumerics, `-`
/// and `_` kept, spaces as `-`, everything else dropped.
fn heading_id(heading: &str) -> String {
    let mut text = String::new();
    let mut chars = heading.chars().peekable();
    // Link text only: "[text](url)" → "text".
    while let Some(c) = chars.next() {
        match c {
            '`' | '*' => {}
            ']' if chars.peek() == Some(&'(') => {
                for c in chars.by_ref() {
                    if c == ')' {
                        break;
                    }
                }
            }
            '[' => {}
            c => text.push(c),
        }
    }
    text.trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_lowercase().next()?),
            _ => None,
        })
        .collect()
}

/// The anchors of a page: its headings' ids (duplicates numbered as
/// mdBook numbers them).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in outside_fences(text) {
        let t = line.trim_start();
        if t.starts_with('#') {
            let heading = t.trim_start_matches('#');
            if heading.starts_with(' ') {
                let id = heading_id(heading);
                let n = seen.entry(id.clone()).or_insert(0);
                out.insert(if *n == 0 {
                    id.clone()
                } else {
                    format!("{id}-{n}")
                });
                *n += 1;
            }
        }
    }
    out
}

/// The link targets on one line of prose: `[text](target)` and
/// `[label]: target`.
fn targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let t = line.trim_start();
    if t.starts_with('[')
        && let Some(i) = t.find("]: ")
    {
        out.push(
            t[i + 3..]
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_owned(),
        );
    }
    let mut rest = line;
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let end = after.find(')').unwrap_or(after.len());
        out.push(
            after[..end]
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_owned(),
        );
        rest = &after[end..];
    }
    out
}

fn check_links(src: &Path) -> Result<Vec<String>> {
    let pages = pages(src);
    let mut texts = BTreeMap::new();
    for p in &pages {
        let text = std::fs::read_to_string(src.join(p)).map_err(|e| e.to_string())?;
        texts.insert(p.clone(), text);
    }
    let mut problems = Vec::new();
    let summary = texts
        .get(Path::new("SUMMARY.md"))
        .cloned()
        .unwrap_or_default();
    let listed: BTreeSet<String> = prose(&summary)
        .iter()
        .flat_map(|(_, l)| targets(l))
        .collect();
    for p in &pages {
        let name = p.to_string_lossy().into_owned();
        if name != "SUMMARY.md" && !listed.contains(&name) {
            problems.push(format!("docs/src/{name} is not in SUMMARY.md"));
        }
    }
    for (page, text) in &texts {
        let dir = page.parent().unwrap_or(Path::new(""));
        for (line, prose_line) in prose(text) {
            for target in targets(&prose_line) {
                let at = format!("docs/src/{}:{line}", page.display());
                if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (file, anchor) = match target.split_once('#') {
                    Some((f, a)) => (f, Some(a)),
                    None => (target.as_str(), None),
                };
                let resolved = if file.is_empty() {
                    page.clone()
                } else {
                    match normalize(&dir.join(file)) {
                        Some(p) => p,
                        None => {
                            problems.push(format!(
                                "{at}: {target} leaves the book (it would break in the built site: name a repository path in `code` instead)"
                            ));
                            continue;
                        }
                    }
                };
                if !src.join(&resolved).exists() {
                    problems.push(format!("{at}: {target}: no such file"));
                    continue;
                }
                if let Some(anchor) = anchor {
                    let Some(target_text) = texts.get(&resolved) else {
                        continue;
                    };
                    if !anchors(target_text).contains(anchor) {
                        problems.push(format!(
                            "{at}: {target}: no heading with id #{anchor} in {}",
                            resolved.display()
                        ));
                    }
                }
            }
        }
    }
    Ok(problems)
}

/// `a/b/../c` → `a/c`; `None` when the path climbs out of the book.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    Some(out)
}

/// The config blocks of every page: (page, line, whole file?, text).
fn config_blocks(src: &Path) -> Result<Vec<(PathBuf, usize, bool, String)>> {
    let mut out = Vec::new();
    for page in pages(src) {
        let text = std::fs::read_to_string(src.join(&page)).map_err(|e| e.to_string())?;
        let mut block: Option<(usize, bool, String)> = None;
        for (n, line) in text.lines().enumerate() {
            let t = line.trim();
            match &mut block {
                Some((start, whole, body)) => {
                    if t == "```" {
                        out.push((page.clone(), *start, *whole, std::mem::take(body)));
                        block = None;
                    } else {
                        body.push_str(line);
                        body.push('\n');
                    }
                }
                None => {
                    let info = t.strip_prefix("```").unwrap_or("");
                    let marks: Vec<&str> = info.split(',').map(str::trim).collect();
                    if marks.first() == Some(&"toml") {
                        if marks.contains(&"config") {
                            block = Some((n + 1, true, String::new()));
                        } else if marks.contains(&"config-fragment") {
                            block = Some((n + 1, false, String::new()));
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

fn check_config_blocks(bin: &Path, src: &Path) -> Result<Vec<String>> {
    let scratch = root().join("target/docs-check");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(scratch.join("sources")).map_err(|e| e.to_string())?;
    let mut problems = Vec::new();
    let blocks = config_blocks(src)?;
    for (i, (page, line, whole, body)) in blocks.iter().enumerate() {
        let text = if *whole {
            body.clone()
        } else {
            format!("sources_dir = \"sources\"\nstate_dir = \"state\"\n{body}")
        };
        let file = scratch.join(format!("block-{i}.toml"));
        std::fs::write(&file, text).map_err(|e| e.to_string())?;
        let out = Command::new(bin)
            .args(["check", "--config"])
            .arg(&file)
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            problems.push(format!(
                "docs/src/{}:{line}: this config block fails `emseepea check`:\n{}{}",
                page.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    eprintln!("xtask: {} config blocks checked", blocks.len());
    Ok(problems)
}

/// The command lines of every page's shell blocks: (page, line, command),
/// continuation lines joined, prompts and comments dropped, one entry per
/// command of a `&&`, `||`, `;` or `|` chain.
fn command_lines(src: &Path) -> Result<Vec<(PathBuf, usize, String)>> {
    let mut out = Vec::new();
    for page in pages(src) {
        let text = std::fs::read_to_string(src.join(&page)).map_err(|e| e.to_string())?;
        let mut in_shell = false;
        let mut pending: Option<(usize, String)> = None;
        for (n, line) in text.lines().enumerate() {
            let t = line.trim();
            if let Some(info) = t.strip_prefix("```") {
                in_shell = !in_shell && matches!(info.trim(), "sh" | "bash" | "shell" | "console");
                continue;
            }
            if !in_shell {
                continue;
            }
            let t = t.strip_prefix("$ ").unwrap_or(t);
            let (start, mut joined) = pending.take().unwrap_or((n + 1, String::new()));
            joined.push_str(t.trim_end_matches('\\'));
            joined.push(' ');
            if t.ends_with('\\') {
                pending = Some((start, joined));
                continue;
            }
            let code = strip_comment(&joined);
            for command in code.split(|c| c == ';' || c == '|' || c == '&') {
                let command = command.trim();
                if !command.is_empty() {
                    out.push((page.clone(), start, command.to_owned()));
                }
            }
        }
    }
    Ok(out)
}

/// `line` without a trailing `# comment` (a `#` outside quotes, after a space).
fn strip_comment(line: &str) -> String {
    let (mut single, mut double, mut prev) = (false, false, ' ');
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && prev.is_whitespace() => return line[..i].to_owned(),
            _ => {}
        }
        prev = c;
    }
    line.to_owned()
}

/// Split a command into words, honouring quotes (no expansion).
fn words(command: &str) -> Vec<String> {
    let (mut out, mut word, mut quote) = (Vec::new(), String::new(), None);
    let mut any = false;
    for c in command.chars() {
        match (quote, c) {
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if any {
                    out.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            (_, c) => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(word);
    }
    out
}

/// The tasks `cargo xtask` knows (its `main` match arms).
fn xtask_tasks() -> BTreeSet<String> {
    include_str!("main.rs")
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Some(\""))
        .filter_map(|l| l.split('"').next())
        .map(str::to_owned)
        .collect()
}

fn check_command_blocks(bin: &Path, src: &Path) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    let tasks = xtask_tasks();
    let root = root();
    let mut checked = 0;
    for (page, line, command) in command_lines(src)? {
        let mut w = words(&command);
        // Leading VAR=value assignments are the shell's.
        while w
            .first()
            .is_some_and(|x| x.contains('=') && !x.starts_with('-'))
        {
            w.remove(0);
        }
        let Some(first) = w.first().cloned() else {
            continue;
        };
        let at = format!("docs/src/{}:{line}", page.display());
        if first == "emseepea" || first.ends_with("/emseepea") {
            // A substitution or a redirection is the shell's: check the
            // words before it.
            let upto = w
                .iter()
                .position(|x| {
                    x.contains("$(")
                        || x.contains('`')
                        || x.starts_with(['>', '<'])
                        || x.starts_with("2>")
                })
                .unwrap_or(w.len());
            let out = Command::new(bin)
                .args(&w[1..upto])
                .arg("--help")
                .output()
                .map_err(|e| e.to_string())?;
            if !out.status.success() {
                problems.push(format!(
                    "{at}: `{command}` does not parse:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            checked += 1;
        } else if first == "cargo" && w.get(1).is_some_and(|x| x == "xtask") {
            match w.get(2) {
                Some(task) if tasks.contains(task) => {}
                other => problems.push(format!("{at}: `{command}`: no xtask {other:?}")),
            }
            checked += 1;
        } else if ["benchmarks/", "deploy/", ".ci/", "./benchmarks/"]
            .iter()
            .any(|p| first.starts_with(p))
        {
            if !root.join(first.trim_start_matches("./")).is_file() {
                problems.push(format!("{at}: `{command}`: no file {first}"));
            }
            checked += 1;
        }
    }
    eprintln!("xtask: {checked} command lines checked");
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_lines_are_split_into_words_and_commands() {
        assert_eq!(
            words(r#"emseepea token --scope "a b" --sub 'x y'"#),
            ["emseepea", "token", "--scope", "a b", "--sub", "x y"]
        );
        assert_eq!(
            strip_comment("cargo xtask test   # all of it"),
            "cargo xtask test   "
        );
        assert_eq!(strip_comment("echo '#not'"), "echo '#not'");
        assert!(xtask_tasks().contains("docs"));
    }

    #[test]
    fn heading_ids_follow_mdbook() {
        assert_eq!(heading_id(" `[http]` keys"), "http-keys");
        assert_eq!(
            heading_id(" Fair shares and overload"),
            "fair-shares-and-overload"
        );
        assert_eq!(heading_id(" The [link](x.md) here"), "the-link-here");
    }

    #[test]
    fn targets_are_found_outside_code() {
        let lines = prose("see [a](b.md#c) and `[x](y)`\n```\n[z](w)\n```\n[l]: m.md\n");
        let all: Vec<String> = lines.iter().flat_map(|(_, l)| targets(l)).collect();
        assert_eq!(all, ["b.md#c", "m.md"]);
    }
}
