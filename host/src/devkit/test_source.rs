//! `emseepea test-source FILE.wasm`: drive one guest through the host's own
//! loader, budgeted calls, page validation and read path (no HTTP), as a set
//! of test principals, and report every contract break.
//!
//! Beyond the seed's per-page rules (checked exactly as the server checks
//! them, by `inventory::validate`), it checks what the server can only see
//! across calls: URIs unique over a whole traversal, `has-more` truthful,
//! the same entries for every `limit`, determinism, ownership between users,
//! refusal without a subject, `not-found` for a never-listed URI, and the
//! budget each call used.
//!
//! (Over 500 lines: one driver makes every check, each across a whole
//! traversal, a set of `limit`s and every test principal; they share its state.)

use super::principals::{self, PrincipalSpec, Role, TestPrincipal};
use super::report::{BudgetRow, PrincipalRow, Report, Rule, Stat, shorten};
use crate::config::{Config, ConfigError};
use crate::inventory::StaticResources;
use crate::inventory::access::may_access;
use crate::inventory::pager::call_context;
use crate::inventory::read::{ContentJson, ReadError, read};
use crate::inventory::validate::{PageViolation, UriSet, validate_page};
use crate::mcp::config::DEFAULT_PAGE_SIZE;
use crate::runtime::{
    Access, GuestError, GuestPage, LoadError, RequestScope, Runtime, RuntimeSetupError, Source,
    SourceSet,
};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// The `limit`s every user's traversal is repeated with ("the same traversal
/// for limit 1, 7, 50 and 100"); the server's default page size comes first
/// and is the reference the others are compared with.
pub const TRAVERSAL_LIMITS: [u32; 4] = [DEFAULT_PAGE_SIZE, 1, 7, 100];

/// A traversal stops (with a warning, not a break) after this many entries:
/// a real backend may hold more than is worth listing one by one.
pub const MAX_TRAVERSAL_ENTRIES: usize = 2_000;

/// Reads per principal and check: listed URIs beyond this are not read.
pub const MAX_READS_PER_CHECK: usize = 200;

/// The variable value of the never-listed URI (tried with a counter suffix
/// until the URI is one no principal listed).
const UNLISTED_VALUE: &str = "emseepea-never-listed";

/// Whose records a source serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Records {
    /// Each user has their own ("Query only the caller's records"): the
    /// ownership and no-subject checks apply.
    PerUser,
    /// Every caller holding the scopes sees the same records (a catalog).
    Shared,
}

impl Records {
    pub fn as_str(self) -> &'static str {
        match self {
            Records::PerUser => "per-user",
            Records::Shared => "shared",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected `per-user` or `shared`, got {0:?}")]
pub struct RecordsError(String);

impl std::str::FromStr for Records {
    type Err = RecordsError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "per-user" => Ok(Records::PerUser),
            "shared" => Ok(Records::Shared),
            other => Err(RecordsError(other.to_owned())),
        }
    }
}

/// What to test and how.
#[derive(Debug, Clone)]
pub struct Options {
    pub wasm: PathBuf,
    /// Default: `FILE.toml` beside the component, if it exists.
    pub manifest: Option<PathBuf>,
    /// A server config for databases, directories, budgets and the runtime;
    /// its `sources_dir` is ignored.
    pub config: Option<PathBuf>,
    /// Empty: [`principals::defaults`].
    pub principals: Vec<PrincipalSpec>,
    pub records: Records,
}

#[derive(Debug, thiserror::Error)]
pub enum TestSourceError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("starting the runtime: {0}")]
    Runtime(#[from] RuntimeSetupError),
    #[error("{}: no source was loaded", .0.display())]
    NothingLoaded(PathBuf),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TestSourceError + '_ {
    move |source| TestSourceError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Load the component as the server would and run every check.
pub async fn run(options: Options) -> Result<Report, TestSourceError> {
    // A scratch sources directory holding just this component (and its
    // manifest), so the server's own loader loads it.
    let scratch = tempfile::tempdir().map_err(io(Path::new("temporary directory")))?;
    let sources = scratch.path().join("sources");
    std::fs::create_dir_all(&sources).map_err(io(&sources))?;
    let wasm = std::fs::canonicalize(&options.wasm).map_err(io(&options.wasm))?;
    let stem = wasm
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "source".into());
    std::fs::copy(&wasm, sources.join(format!("{stem}.wasm"))).map_err(io(&wasm))?;
    let manifest = options
        .manifest
        .clone()
        .or_else(|| Some(wasm.with_extension("toml")).filter(|m| m.is_file()));
    if let Some(m) = &manifest {
        std::fs::copy(m, sources.join(format!("{stem}.toml"))).map_err(io(m))?;
    }
    let mut config = match &options.config {
        Some(path) => Config::load(path)?,
        None => {
            let path = scratch.path().join("emseepea.toml");
            std::fs::write(&path, "sources_dir = \"sources\"\nstate_dir = \"state\"\n")
                .map_err(io(&path))?;
            Config::load(&path)?
        }
    };
    config.sources_dir = sources;
    let runtime = Arc::new(Runtime::new(&config.runtime)?);
    let set = SourceSet::load(runtime, &config).await?;
    let source = set
        .sources
        .into_iter()
        .next()
        .ok_or_else(|| TestSourceError::NothingLoaded(options.wasm.clone()))?;
    let specs = if options.principals.is_empty() {
        principals::defaults()
    } else {
        options.principals.clone()
    };
    let principals: Vec<TestPrincipal> = specs
        .iter()
        .map(|s| s.resolve(&source.definition.required_scopes))
        .collect();
    let statics = StaticResources::load(&[]).expect("no static resources is valid");
    let mut driver = Driver {
        report: Report {
            source: source.definition.name.clone(),
            file: options.wasm.display().to_string(),
            records: options.records.as_str(),
            lists: source.lists(),
            principals: vec![],
            breaks: vec![],
            warnings: vec![],
            budgets: vec![],
            calls: 0,
        },
        source,
        config,
        statics,
        records: options.records,
        list_samples: Samples::default(),
        read_samples: Samples::default(),
    };
    driver.run(&principals).await;
    Ok(driver.finish())
}

/// One listed entry, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    key: String,
    uri: String,
    name: String,
    mime_type: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// `has-more: false` reached.
    Complete,
    /// Stopped at [`MAX_TRAVERSAL_ENTRIES`].
    Truncated,
    /// A break was reported; the entries are those before it.
    Broken,
}

struct Traversal {
    entries: Vec<Entry>,
    ending: Ending,
}

#[derive(Default)]
struct Samples {
    fuel: Vec<u64>,
    memory: Vec<u64>,
    time_us: Vec<u64>,
}

struct Driver {
    source: Arc<Source>,
    config: Config,
    statics: StaticResources,
    records: Records,
    report: Report,
    list_samples: Samples,
    read_samples: Samples,
}

/// The rule a failed call broke: a budget, or `otherwise`.
fn guest_rule(e: &GuestError, otherwise: Rule) -> Rule {
    match e {
        GuestError::FuelExhausted | GuestError::MemoryCap(_) | GuestError::DeadlineExceeded => {
            Rule::Budget
        }
        _ => otherwise,
    }
}

/// The report's name for a per-page rule and the value that broke it.
fn page_break(page: &GuestPage, after: Option<&str>, v: &PageViolation) -> (Rule, String) {
    let entry = |i: usize| page.entries().nth(i);
    let key = |i: usize| entry(i).map(|e| e.key.to_owned()).unwrap_or_default();
    let uri = |i: usize| entry(i).map(|e| e.uri.to_owned()).unwrap_or_default();
    match *v {
        PageViolation::TooManyEntries { count, limit } => (
            Rule::TooManyEntries,
            format!("{count} entries for limit {limit}"),
        ),
        PageViolation::HasMoreWithoutEntries => (
            Rule::HasMoreWithoutEntries,
            "has-more: true, entries: []".into(),
        ),
        PageViolation::KeyLength { index } => (
            Rule::KeyLength,
            format!("key {:?} ({} bytes)", key(index), key(index).len()),
        ),
        PageViolation::KeyCharacters { index } => {
            (Rule::KeyCharacters, format!("key {:?}", key(index)))
        }
        PageViolation::KeyOrder { index } => (
            Rule::KeyOrder,
            format!(
                "key {:?} after {:?}",
                key(index),
                key(index.saturating_sub(1))
            ),
        ),
        PageViolation::KeyNotAfter { index } => (
            Rule::KeyNotAfter,
            format!(
                "key {:?} with after {:?}",
                key(index),
                after.unwrap_or_default()
            ),
        ),
        PageViolation::UriLength { index } => (
            Rule::UriLength,
            format!("uri of {} UTF-16 units", uri(index).encode_utf16().count()),
        ),
        PageViolation::UriTemplate { index } => {
            (Rule::UriTemplate, format!("uri {:?}", uri(index)))
        }
        PageViolation::UriDuplicate { index } => {
            (Rule::UriDuplicate, format!("uri {:?}", uri(index)))
        }
        PageViolation::NameLength { index } => (
            Rule::NameLength,
            format!(
                "name of {} UTF-16 units",
                entry(index).map_or(0, |e| e.name.encode_utf16().count())
            ),
        ),
        PageViolation::MimeTypeLength { index } => (
            Rule::MimeTypeLength,
            format!(
                "mimeType of {} UTF-16 units",
                entry(index)
                    .and_then(|e| e.mime_type)
                    .map_or(0, |m| m.encode_utf16().count())
            ),
        ),
        // Rules added to the validator later still fail the test.
        #[allow(unreachable_patterns)]
        _ => (Rule::PageRule, v.to_string()),
    }
}

fn list_call(after: Option<&str>, limit: u32) -> String {
    match after {
        None => format!("list(after=none, limit={limit})"),
        Some(a) => format!("list(after={:?}, limit={limit})", shorten(a)),
    }
}

fn read_call(uri: &str) -> String {
    format!("read({:?})", shorten(uri))
}

/// What a read that should have been refused answered instead.
fn read_answer(r: &Result<Vec<ContentJson>, ReadError>) -> String {
    match r {
        Ok(c) => format!("{} content item(s)", c.len()),
        Err(e) => e.to_string(),
    }
}

impl Driver {
    fn scope(&self) -> RequestScope {
        RequestScope::new(
            Instant::now() + self.config.request_timeout(),
            "test-source",
            crate::runtime::CallerKey::new("test-source"),
        )
    }

    fn sample(&mut self, read: bool, started: Instant) {
        let s = if read {
            &mut self.read_samples
        } else {
            &mut self.list_samples
        };
        s.fuel
            .push(self.source.last_fuel_used.load(Ordering::Relaxed));
        s.memory
            .push(self.source.last_memory_bytes.load(Ordering::Relaxed));
        s.time_us.push(started.elapsed().as_micros() as u64);
        self.report.calls += 1;
    }

    async fn list(
        &mut self,
        p: &TestPrincipal,
        after: Option<&str>,
        limit: u32,
    ) -> Result<GuestPage, GuestError> {
        let scope = self.scope();
        let context = call_context(Some(&p.principal), &scope);
        let started = Instant::now();
        let page = self.source.list(after, limit, context, &scope).await;
        self.sample(false, started);
        page
    }

    /// A read through the server's own read path (access check, template
    /// match, guest call, result validation).
    async fn read(
        &mut self,
        p: Option<&TestPrincipal>,
        uri: &str,
    ) -> Result<Vec<ContentJson>, ReadError> {
        let scope = self.scope();
        let started = Instant::now();
        let result = read(
            &self.statics,
            std::slice::from_ref(&self.source),
            uri,
            p.map(|p| &p.principal),
            &scope,
            self.config.max_read_bytes,
        )
        .await;
        // Refused by the host: the guest never ran.
        if !matches!(
            result,
            Err(ReadError::Unauthenticated { .. } | ReadError::InsufficientScope { .. })
        ) {
            self.sample(true, started);
        }
        result
    }

    /// Page through everything `p` may list with `limit`, checking every
    /// page as the server does and the traversal as a whole.
    async fn traverse(&mut self, p: &TestPrincipal, limit: u32) -> Traversal {
        let template = self.source.definition.uri_template.clone();
        let mut entries: Vec<Entry> = Vec::new();
        let mut uris = UriSet::default();
        let mut after: Option<String> = None;
        let mut previous_call = String::new();
        let broken = |entries| Traversal {
            entries,
            ending: Ending::Broken,
        };
        loop {
            let call = list_call(after.as_deref(), limit);
            let page = match self.list(p, after.as_deref(), limit).await {
                Ok(page) => page,
                Err(e) => {
                    let rule = guest_rule(&e, Rule::ListFails);
                    self.report.add(rule, &p.label, call, &e.to_string());
                    return broken(entries);
                }
            };
            if let Err(v) = validate_page(
                &page,
                limit,
                after.as_deref(),
                &template,
                &mut UriSet::default(),
            ) {
                let (rule, value) = page_break(&page, after.as_deref(), &v);
                self.report.add(rule, &p.label, call, &value);
                return broken(entries);
            }
            if page.is_empty() && after.is_some() {
                // Only reached after a page that said has-more.
                self.report.add(
                    Rule::HasMoreTruthful,
                    &p.label,
                    previous_call,
                    "has-more: true, but the next page is empty",
                );
                return broken(entries);
            }
            for e in page.entries() {
                if !uris.insert(e.uri) {
                    self.report.add(
                        Rule::UriUniqueAcrossTraversal,
                        &p.label,
                        call,
                        &format!("uri {:?} listed again", e.uri),
                    );
                    return broken(entries);
                }
                entries.push(Entry {
                    key: e.key.to_owned(),
                    uri: e.uri.to_owned(),
                    name: e.name.to_owned(),
                    mime_type: e.mime_type.map(str::to_owned),
                });
            }
            if !page.has_more {
                return Traversal {
                    entries,
                    ending: Ending::Complete,
                };
            }
            if entries.len() >= MAX_TRAVERSAL_ENTRIES {
                self.report.warn(format!(
                    "{}: traversals stop after {MAX_TRAVERSAL_ENTRIES} entries; later pages were not checked",
                    p.label
                ));
                return Traversal {
                    entries,
                    ending: Ending::Truncated,
                };
            }
            after = entries.last().map(|e| e.key.clone());
            previous_call = call;
        }
    }

    /// Every check for one user; returns the URIs listed for it.
    async fn check_user(&mut self, p: &TestPrincipal) -> Vec<String> {
        let base = self.traverse(p, TRAVERSAL_LIMITS[0]).await;
        if base.ending == Ending::Complete
            && let Some(last) = base.entries.last().map(|e| e.key.clone())
        {
            // has-more was false: nothing may follow the last key.
            let call = list_call(Some(&last), TRAVERSAL_LIMITS[0]);
            match self.list(p, Some(&last), TRAVERSAL_LIMITS[0]).await {
                Ok(page) if !page.is_empty() => self.report.add(
                    Rule::HasMoreTruthful,
                    &p.label,
                    call,
                    &format!("has-more was false, but {} more entries follow", page.len()),
                ),
                Ok(_) => {}
                Err(e) => {
                    let rule = guest_rule(&e, Rule::ListFails);
                    self.report.add(rule, &p.label, call, &e.to_string());
                }
            }
        }
        let ids = |t: &Traversal| -> Vec<(String, String)> {
            t.entries
                .iter()
                .map(|e| (e.key.clone(), e.uri.clone()))
                .collect()
        };
        for &limit in &TRAVERSAL_LIMITS[1..] {
            let t = self.traverse(p, limit).await;
            if t.ending != Ending::Complete || base.ending != Ending::Complete {
                continue;
            }
            let (a, b) = (ids(&base), ids(&t));
            if a != b {
                let at = a
                    .iter()
                    .zip(&b)
                    .position(|(x, y)| x != y)
                    .unwrap_or(a.len().min(b.len()));
                let show = |v: &[(String, String)]| {
                    v.get(at)
                        .map_or("(end)".to_owned(), |(k, u)| format!("{k} {u}"))
                };
                self.report.add(
                    Rule::LimitIndependent,
                    &p.label,
                    format!("traversal with limit {limit}"),
                    &format!(
                        "{} entries vs {} with limit {}; entry {at}: {} vs {}",
                        b.len(),
                        a.len(),
                        TRAVERSAL_LIMITS[0],
                        show(&b),
                        show(&a)
                    ),
                );
            }
        }
        let again = self.traverse(p, TRAVERSAL_LIMITS[0]).await;
        if again.ending == base.ending && again.entries != base.entries {
            let at = again
                .entries
                .iter()
                .zip(&base.entries)
                .position(|(x, y)| x != y)
                .unwrap_or(again.entries.len().min(base.entries.len()));
            let show = |v: &[Entry]| v.get(at).map_or("(end)".to_owned(), |e| format!("{e:?}"));
            self.report.add(
                Rule::Deterministic,
                &p.label,
                format!("second traversal with limit {}", TRAVERSAL_LIMITS[0]),
                &format!(
                    "entry {at}: {} then {}",
                    show(&base.entries),
                    show(&again.entries)
                ),
            );
        }
        for e in base.entries.iter().take(MAX_READS_PER_CHECK) {
            let call = read_call(&e.uri);
            match self.read(Some(p), &e.uri).await {
                Ok(_) => {}
                Err(ReadError::NotFound) => self.report.add(
                    Rule::ReadListed,
                    &p.label,
                    call,
                    "listed for this principal, but read says not-found",
                ),
                Err(ReadError::InvalidResult { violation, .. }) => {
                    self.report
                        .add(Rule::ReadResult, &p.label, call, &violation.to_string())
                }
                Err(ReadError::Guest { error, .. }) => {
                    let rule = guest_rule(&error, Rule::ReadListed);
                    self.report.add(rule, &p.label, call, &error.to_string())
                }
                Err(e) => self
                    .report
                    .add(Rule::ReadListed, &p.label, call, &e.to_string()),
            }
        }
        let outcome = match base.ending {
            Ending::Complete => format!("lists {} record(s)", base.entries.len()),
            Ending::Truncated => format!("lists more than {} records", base.entries.len()),
            Ending::Broken => "listing broke a rule".to_owned(),
        };
        self.report.principals.push(PrincipalRow {
            label: p.label.clone(),
            role: p.role,
            outcome,
        });
        base.entries.into_iter().map(|e| e.uri).collect()
    }

    /// A principal without a subject must be refused: no records listed, no
    /// listed URI readable.
    async fn check_no_subject(&mut self, p: &TestPrincipal, others: &[String]) {
        let call = list_call(None, TRAVERSAL_LIMITS[0]);
        let outcome = match self.list(p, None, TRAVERSAL_LIMITS[0]).await {
            Ok(page) if !page.is_empty() => {
                self.report.add(
                    Rule::RequireSubject,
                    &p.label,
                    call,
                    &format!("list returned {} entries", page.len()),
                );
                "got records".to_owned()
            }
            Ok(_) => "list refused (an empty page)".to_owned(),
            Err(e) => format!("list refused ({})", e.kind()),
        };
        for uri in others.iter().take(MAX_READS_PER_CHECK) {
            let r = self.read(Some(p), uri).await;
            if r.is_ok() {
                self.report.add(
                    Rule::RequireSubject,
                    &p.label,
                    read_call(uri),
                    &read_answer(&r),
                );
            }
        }
        self.report.principals.push(PrincipalRow {
            label: p.label.clone(),
            role: p.role,
            outcome,
        });
    }

    /// Every URI listed for `a` must not be listed for, nor readable by, `b`.
    async fn check_ownership(
        &mut self,
        a: &TestPrincipal,
        listed_a: &[String],
        b: &TestPrincipal,
        listed_b: &HashSet<&String>,
    ) {
        for uri in listed_a.iter().take(MAX_READS_PER_CHECK) {
            if listed_b.contains(uri) {
                self.report.add(
                    Rule::Ownership,
                    &b.label,
                    format!("list (as {} and {})", a.label, b.label),
                    &format!("{uri:?} listed for both"),
                );
                continue;
            }
            let r = self.read(Some(b), uri).await;
            if !matches!(r, Err(ReadError::NotFound)) {
                self.report.add(
                    Rule::Ownership,
                    &b.label,
                    read_call(uri),
                    &format!(
                        "{}'s record: {} instead of not-found",
                        a.label,
                        read_answer(&r)
                    ),
                );
            }
        }
    }

    /// A URI that matches the template but that no principal listed.
    fn unlisted_uri(&self, listed: &HashSet<&String>) -> Option<String> {
        let template = &self.source.definition.uri_template;
        (0..100)
            .map(|i| template.expand_first_variables(&format!("{UNLISTED_VALUE}-{i}")))
            .find(|u| template.matches(u) && !listed.contains(u))
    }

    async fn run(&mut self, principals: &[TestPrincipal]) {
        let d = self.source.definition.clone();
        if d.access == Access::Protected && d.required_scopes.is_empty() {
            self.report
                .warn("the template requires no scopes: any valid token reaches it".into());
        }
        let mut listed: Vec<(usize, Vec<String>)> = Vec::new();
        for (i, p) in principals.iter().enumerate() {
            if !may_access(d.access, &d.required_scopes, Some(&p.principal)) {
                self.report.principals.push(PrincipalRow {
                    label: p.label.clone(),
                    role: p.role,
                    outcome: "refused by the host (insufficient scope); the guest is not called"
                        .into(),
                });
                continue;
            }
            if p.role == Role::User && self.source.lists() {
                let uris = self.check_user(p).await;
                listed.push((i, uris));
            }
        }
        let users: Vec<&TestPrincipal> =
            principals.iter().filter(|p| p.role == Role::User).collect();
        if !self.source.lists() {
            self.report
                .warn("the source does not export inventory: only reads were checked".into());
        } else if self.records == Records::PerUser {
            let all_users: Vec<String> =
                listed.iter().flat_map(|(_, u)| u.iter().cloned()).collect();
            for p in principals.iter().filter(|p| p.role == Role::NoSubject) {
                self.check_no_subject(p, &all_users).await;
            }
            let distinct: HashSet<&str> = users
                .iter()
                .filter_map(|p| p.principal.subject.as_deref())
                .collect();
            if distinct.len() < 2 {
                self.report
                    .warn("fewer than two users: ownership between users was not checked".into());
            }
            for (ia, la) in &listed {
                for (ib, lb) in &listed {
                    let (a, b) = (&principals[*ia], &principals[*ib]);
                    if a.principal.subject == b.principal.subject {
                        continue;
                    }
                    let lb: HashSet<&String> = lb.iter().collect();
                    self.check_ownership(a, la, b, &lb).await;
                }
            }
        } else {
            for p in principals.iter().filter(|p| p.role == Role::NoSubject) {
                self.report.principals.push(PrincipalRow {
                    label: p.label.clone(),
                    role: p.role,
                    outcome: "not checked (shared records)".into(),
                });
            }
        }
        if self.source.lists() && listed.iter().all(|(_, l)| l.is_empty()) {
            self.report.warn(
                "no user has records: reads and ownership were not exercised (seed the backend, or pass --principal with a user who has records)".into(),
            );
        }
        let all: HashSet<&String> = listed.iter().flat_map(|(_, u)| u.iter()).collect();
        match self.unlisted_uri(&all) {
            Some(uri) => {
                let reader = match d.access {
                    Access::Public => None,
                    Access::Protected => users.first().copied(),
                };
                if d.access == Access::Public || reader.is_some() {
                    let label = reader.map_or("(anonymous)".to_owned(), |p| p.label.clone());
                    let r = self.read(reader, &uri).await;
                    if !matches!(r, Err(ReadError::NotFound)) {
                        let rule = match &r {
                            Err(ReadError::Guest { error, .. }) => {
                                guest_rule(error, Rule::ReadUnlistedNotFound)
                            }
                            _ => Rule::ReadUnlistedNotFound,
                        };
                        self.report
                            .add(rule, &label, read_call(&uri), &read_answer(&r));
                    }
                }
            }
            None => self.report.warn(format!(
                "could not build a never-listed URI for {}: not-found was not checked",
                d.uri_template.as_str()
            )),
        }
    }

    fn finish(mut self) -> Report {
        let budget = self.source.budget;
        for (call, samples) in [
            ("list", &mut self.list_samples),
            ("read", &mut self.read_samples),
        ] {
            let calls = samples.fuel.len();
            let (Some(fuel), Some(memory_bytes), Some(time_us)) = (
                Stat::of(&mut samples.fuel, budget.fuel),
                Stat::of(&mut samples.memory, budget.memory_bytes),
                Stat::of(&mut samples.time_us, budget.max_duration_ms * 1000),
            ) else {
                continue;
            };
            for (what, s) in [
                ("fuel", &fuel),
                ("memory", &memory_bytes),
                ("time", &time_us),
            ] {
                if s.over_half() {
                    self.report.warnings.push(format!(
                        "{call}: median {what} {} is over half of the budget ({})",
                        s.median, s.budget
                    ));
                }
            }
            self.report.budgets.push(BudgetRow {
                call,
                calls,
                fuel,
                memory_bytes,
                time_us,
            });
        }
        self.report
    }
}
