//! Loading sources: every `*.wasm` of the sources directory in file-name
//! order (= registration order), each with an optional `NAME.toml` manifest.
//! Anything wrong stops startup with one line naming the file and the reason.
//!
//! (Over 500 lines: the checked export signatures, the typed load errors
//! and one source's load, from its verified bytes to a linked component,
//! read as one sequence.)

use super::bindings::emseepea::inventory::types::{
    CallContext, ResourceContents, SourceError, Template,
};
use super::bindings::exports::emseepea::inventory::template;
use super::budget::GuestError;
use super::cache::{CacheError, CacheOutcome, ComponentCache, sha256_hex};
use super::capabilities::ServerSections;
use super::capabilities::{CapabilityError, ServerCapabilities, SourceCapabilities};
use super::contents::{GuestContents, with_read_bound};
use super::definition::{DefinitionError, SourceDefinition};
use super::engine::{Runtime, one_line_chain};
use super::host_state::HostState;
use super::page::GuestPage;
use super::page_json::JsonPage;
use super::scope::RequestScope;
use crate::distribution::signature::SourcesConfig;
use crate::distribution::signature::{self, KeysError, Policy, SignatureProblem, Verdict};
use crate::guest_text::GuestText;
use crate::limits::MAX_CHALLENGE_SCOPES_BYTES;
use crate::runtime::config::{
    BudgetConfig, BudgetProblem, ManifestError, RuntimeConfig, STARTUP_CALL_DURATION_MS,
    SourceManifest, check_budget,
};
use crate::telemetry::metrics::ExportSeries;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use wasmtime::component::{
    Component, ComponentExportIndex, ComponentNamedList, Instance, InstancePre, Lift, Lower,
    TypedFunc,
};
use wasmtime::{AsContextMut, Store};

/// The signature the host calls an export with; `Export<S>` checks it once
/// and only ever hands out functions of this signature.
trait Signature {
    type Params<'a>: ComponentNamedList + Lower;
    type Return: ComponentNamedList + Lift;
}

/// `list` as the host calls it: the page is lifted into one buffer
/// (`page::GuestPage`) rather than the bindgen `InventoryPage`.
enum ListSignature {}
impl Signature for ListSignature {
    type Params<'a> = (Option<&'a str>, u32, &'a CallContext);
    type Return = (Result<GuestPage, SourceError>,);
}

/// `inventory-json`'s `list`: the page as one JSON string, lifted and parsed
/// into the same `GuestPage` (`page_json::JsonPage`).
enum ListJsonSignature {}
impl Signature for ListJsonSignature {
    type Params<'a> = (Option<&'a str>, u32, &'a CallContext);
    type Return = (Result<JsonPage, SourceError>,);
}

/// A source's `list`, in the form its component exports.
enum ListExport {
    /// `inventory`: the page as WIT records.
    Records(Export<ListSignature>),
    /// `inventory-json`: the page as JSON, for interpreted guests.
    Json(Export<ListJsonSignature>),
}

impl ListExport {
    /// Check the export's signature (at startup, on `describe`'s instance).
    fn check(&self, store: &mut Store<HostState>, instance: &Instance) -> wasmtime::Result<()> {
        match self {
            ListExport::Records(list) => list.typed(store, instance).map(drop),
            ListExport::Json(list) => list.typed(store, instance).map(drop),
        }
    }

    async fn call(
        &self,
        store: &mut Store<HostState>,
        instance: &Instance,
        after: Option<&str>,
        limit: u32,
        context: &CallContext,
    ) -> wasmtime::Result<Result<GuestPage, SourceError>> {
        Ok(match self {
            ListExport::Records(list) => {
                let func = list.typed(&mut *store, instance)?;
                func.call_async(&mut *store, (after, limit, context))
                    .await?
                    .0
            }
            ListExport::Json(list) => {
                let func = list.typed(&mut *store, instance)?;
                let (page,) = func
                    .call_async(&mut *store, (after, limit, context))
                    .await?;
                page.map(|json| json.0)
            }
        })
    }
}

/// `read` as the host calls it: the result is lifted through the read's
/// byte bound (`contents::GuestContents`) rather than as bindgen's
/// `Vec<ResourceContents>`.
enum ReadSignature {}
impl Signature for ReadSignature {
    type Params<'a> = (&'a str, &'a CallContext);
    type Return = (Result<GuestContents, SourceError>,);
}

/// An export of one compiled component, its signature checked against the
/// host's on the first instance that looks it up (a mismatch is a wasmtime
/// "type mismatch" error, reported at startup as a wrong world). The type is
/// the component's, the same in every instance of it, so later instances
/// skip the check (a comparison of every field and case name, per call).
struct Export<S> {
    index: ComponentExportIndex,
    checked: AtomicBool,
    signature: PhantomData<S>,
}

impl<S: Signature> Export<S> {
    fn new(index: ComponentExportIndex) -> Self {
        Self {
            index,
            checked: AtomicBool::new(false),
            signature: PhantomData,
        }
    }

    fn typed<'a>(
        &self,
        mut store: impl AsContextMut<Data = HostState>,
        instance: &Instance,
    ) -> wasmtime::Result<TypedFunc<S::Params<'a>, S::Return>> {
        if self.checked.load(Ordering::Acquire) {
            let func = instance
                .get_func(&mut store, self.index)
                .ok_or_else(|| wasmtime::format_err!("export missing from its own component"))?;
            // SAFETY: `S` was checked against this export's type on an
            // earlier instance of the same component (a `Linked` has one),
            // and an `Export<S>` hands out no other signature.
            return Ok(unsafe { TypedFunc::new_unchecked(func) });
        }
        let func = instance.get_typed_func(&mut store, self.index)?;
        self.checked.store(true, Ordering::Release);
        Ok(func)
    }
}

/// A startup refusal: the file at fault and what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("{}: {problem}", file.display())]
pub struct LoadError {
    pub file: PathBuf,
    pub problem: LoadProblem,
}

impl LoadError {
    fn new(file: &Path, problem: LoadProblem) -> Self {
        Self {
            file: file.to_owned(),
            problem,
        }
    }
}

/// What stopped a source (or the sources directory) from loading. The
/// messages are the startup log's one line after the file name.
#[derive(Debug, thiserror::Error)]
pub enum LoadProblem {
    #[error("cannot read the sources directory: {0}")]
    SourcesDir(std::io::Error),
    #[error("manifest without a component (expected a .wasm beside it)")]
    ManifestWithoutComponent,
    #[error("signature without a component (expected a .wasm beside it)")]
    SignatureWithoutComponent,
    /// `[sources] trusted_keys` could not be loaded (the file is the config).
    #[error(transparent)]
    TrustedKeys(KeysError),
    /// The source's signature is missing, malformed, by an untrusted key or
    /// over other bytes, under the config's `[sources]` policy.
    #[error(transparent)]
    Signature(SignatureProblem),
    /// The precompile cache could not be opened, or a component not
    /// compiled or stored.
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// The server's own capability settings (`[sql]`, `[http]`, ...).
    #[error(transparent)]
    Capabilities(CapabilityError),
    /// The manifest could not be read or parsed (the error's path is the
    /// `LoadError`'s file).
    #[error("bad manifest: {}", .0.reason())]
    Manifest(ManifestError),
    #[error("bad manifest: budget: {0}")]
    Budget(BudgetProblem),
    #[error(
        "bad manifest: budget.max_concurrent_calls {asked} must be between 1 and the runtime's max_calls_per_source ({share})"
    )]
    ConcurrentCalls { asked: u32, share: u32 },
    /// The manifest asks for a grant the server's settings do not allow.
    #[error("bad manifest: {0}")]
    Grant(CapabilityError),
    #[error("cannot read: {0}")]
    ReadComponent(std::io::Error),
    #[error("imports something the host does not provide: {}", one_line_chain(.0))]
    Imports(wasmtime::Error),
    #[error(
        "not an inventory source: it must export emseepea:inventory/template@0.1.0 (world resource-template or inventory-source): {}",
        one_line_chain(.0)
    )]
    NotASource(wasmtime::Error),
    #[error("bad template export: no `read`")]
    NoRead,
    #[error("bad inventory export: no `list`")]
    NoList,
    #[error(
        "exports both emseepea:inventory/inventory and inventory-json: a source lists one way (world inventory-source or inventory-source-json)"
    )]
    TwoInventories,
    /// The trap message of `describe()` on a component whose exports have
    /// other types than the host's (quoted and bounded: it is the guest's).
    #[error("exports emseepea:inventory with the wrong signatures (wrong world or version?): {:?}", GuestText::new(.0))]
    WrongSignatures(String),
    #[error("describe() failed: {0}")]
    Describe(GuestError),
    #[error("bad definition: {0}")]
    Definition(#[from] DefinitionError),
    #[error("duplicate template name {name:?} (already registered by {})", other.display())]
    DuplicateName { name: String, other: PathBuf },
    #[error(
        "the required scopes of all sources together would take {bytes} bytes of a WWW-Authenticate challenge; at most {MAX_CHALLENGE_SCOPES_BYTES} are allowed"
    )]
    ChallengeScopes { bytes: usize },
}

/// One loaded source: its component, definition, budget and grants.
pub struct Source {
    pub definition: SourceDefinition,
    /// The name in logs: the template name, or the file stem before describe().
    pub(crate) log_name: Arc<str>,
    pub file: PathBuf,
    pub wasm_sha256: String,
    /// What the signature check found (`distribution::signature`).
    pub signature: Verdict,
    pub budget: BudgetConfig,
    /// Calls of this source running at once (its manifest's
    /// `max_concurrent_calls`, within the runtime's per-source share).
    pub max_concurrent_calls: usize,
    pub cache: CacheOutcome,
    pub(crate) runtime: Arc<Runtime>,
    /// The component linked for calls; replaced when the source is trimmed
    /// (`trim.rs`), so that the pool memory its idle slots hold is given back.
    linked: RwLock<Arc<Linked>>,
    /// A never-called instance of `linked`, kept ready while the server is
    /// not busy (`standby.rs`).
    pub(crate) standby: super::standby::Shelf,
    /// Calls running and when the last one ended, for trimming.
    pub(crate) activity: super::trim::Activity,
    /// The metric series of `list` and `read`, once the name is known
    /// (after `describe`, whose calls are recorded by labels).
    series: std::sync::OnceLock<SourceSeries>,
    pub(crate) capabilities: SourceCapabilities,
    /// This source's share of the log for its stdout/stderr.
    pub(crate) output: super::output::OutputLimiter,
    /// Fuel and memory (linear memories + host buffers) of the last finished
    /// call, for benchmarks and capacity planning.
    pub last_fuel_used: std::sync::atomic::AtomicU64,
    pub last_memory_bytes: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source")
            .field("name", &self.definition.name)
            .field("file", &self.file)
            .finish()
    }
}

/// The context with the deadline the host enforces on this call (fixed once
/// the call has its slot: the request's deadline capped by the source's
/// `max_duration_ms`): the `deadline-ms` a guest is handed, and may pass on
/// to its backends, is never the longer request deadline.
fn with_enforced_deadline(mut context: CallContext, store: &Store<HostState>) -> CallContext {
    context.deadline_ms = super::scope::unix_ms(store.data().deadline);
    context
}

/// The hot exports' metric series of one source.
struct SourceSeries {
    read: ExportSeries,
    list: Option<ExportSeries>,
}

/// A component linked for calls: everything tied to one compiled module
/// (wasmtime's export indices are), so it is replaced as one.
pub(crate) struct Linked {
    pub(crate) pre: InstancePre<HostState>,
    template: template::GuestIndices,
    /// The template's `read` export.
    read: Export<ReadSignature>,
    /// The `list` export, if the component exports `inventory` or
    /// `inventory-json`.
    list: Option<ListExport>,
}

impl Linked {
    /// Link `component` against the host's imports and find its exports.
    pub(crate) fn new(
        runtime: &Runtime,
        component: &Component,
        file: &Path,
    ) -> Result<Self, LoadError> {
        let pre = runtime
            .linker
            .instantiate_pre(component)
            .map_err(|e| LoadError::new(file, LoadProblem::Imports(e)))?;
        let template = template::GuestIndices::new(&pre)
            .map_err(|e| LoadError::new(file, LoadProblem::NotASource(e)))?;
        let read = component
            .get_export_index(None, "emseepea:inventory/template@0.1.0")
            .and_then(|t| component.get_export_index(Some(&t), "read"))
            .ok_or_else(|| LoadError::new(file, LoadProblem::NoRead))?;
        let list_of = |interface: &str| {
            component
                .get_export_index(None, interface)
                .map(|inventory| {
                    component
                        .get_export_index(Some(&inventory), "list")
                        .ok_or_else(|| LoadError::new(file, LoadProblem::NoList))
                })
                .transpose()
        };
        let list = match (
            list_of("emseepea:inventory/inventory@0.1.0")?,
            list_of("emseepea:inventory/inventory-json@0.1.0")?,
        ) {
            (Some(_), Some(_)) => return Err(LoadError::new(file, LoadProblem::TwoInventories)),
            (Some(records), None) => Some(ListExport::Records(Export::new(records))),
            (None, Some(json)) => Some(ListExport::Json(Export::new(json))),
            (None, None) => None,
        };
        Ok(Linked {
            pre,
            template,
            read: Export::new(read),
            list,
        })
    }
}

impl Source {
    pub fn name(&self) -> &str {
        &self.definition.name
    }

    /// Whether the component exports `inventory` (a `list` callback).
    pub fn lists(&self) -> bool {
        self.linked.read().unwrap().list.is_some()
    }

    /// The metric series of `what`, when it is a hot export.
    pub(crate) fn series(&self, what: &str) -> Option<&ExportSeries> {
        let series = self.series.get()?;
        match what {
            "read" => Some(&series.read),
            "list" => series.list.as_ref(),
            _ => None,
        }
    }

    /// The component as linked now.
    pub(crate) fn linked(&self) -> Arc<Linked> {
        self.linked.read().unwrap().clone()
    }

    /// Link the component anew (trimming): calls that start from now on use
    /// `linked`; the old one goes when the calls holding it end.
    pub(crate) fn relink(&self, linked: Linked) {
        *self.linked.write().unwrap() = Arc::new(linked);
        // An instance of the old copy would keep its memory images.
        self.standby.clear();
        self.runtime.warm.clear_source(&self.log_name);
    }

    /// A result of this request's caller was found invalid above: none of
    /// that caller's kept instances of this source serves another call.
    pub fn retire_kept_instances(&self, scope: &RequestScope) {
        if let Some(key) = &scope.instance_key {
            self.runtime.warm.retire(&self.log_name, key);
        }
    }

    async fn describe(&self, scope: &RequestScope) -> Result<Template, GuestError> {
        // At startup, before the source is shared: on this thread.
        self.call_here(scope, "describe", move |store, instance, linked| {
            Box::pin(async move {
                let guest = linked.template.load(&mut *store, instance)?;
                if let Some(list) = &linked.list {
                    list.check(&mut *store, instance)?;
                }
                guest.call_describe(&mut *store).await.map(Ok)
            })
        })
        .await
    }

    /// Call the guest's `read`. A result over `max_bytes` (counted as
    /// `contents` does) is refused while lifting, before it is copied
    /// (`GuestError::ResultTooLarge`); otherwise it is the guest's, unvalidated.
    pub async fn read(
        self: &Arc<Self>,
        uri: &str,
        context: CallContext,
        scope: &RequestScope,
        max_bytes: usize,
    ) -> Result<Vec<ResourceContents>, GuestError> {
        let uri = uri.to_owned();
        self.call(scope, "read", move |store, instance, linked| {
            Box::pin(async move {
                let context = with_enforced_deadline(context, store);
                let func = linked.read.typed(&mut *store, instance)?;
                let call = func.call_async(&mut *store, (&uri, &context));
                let (result,) = with_read_bound(max_bytes, call).await?;
                Ok(result.map(|contents| contents.0))
            })
        })
        .await
    }

    /// Call the guest's `list`. The page is the guest's, unvalidated.
    pub async fn list(
        self: &Arc<Self>,
        after: Option<&str>,
        limit: u32,
        context: CallContext,
        scope: &RequestScope,
    ) -> Result<GuestPage, GuestError> {
        if !self.lists() {
            return Err(GuestError::InvalidResult(
                "source does not export inventory".into(),
            ));
        }
        let after = after.map(str::to_owned);
        self.call(
            scope,
            "list",
            move |store: &mut Store<HostState>, instance, linked| {
                Box::pin(async move {
                    // Relinking keeps the component: `lists()` stays true.
                    let Some(list) = &linked.list else {
                        wasmtime::bail!("source does not export inventory");
                    };
                    let context = with_enforced_deadline(context, store);
                    list.call(&mut *store, instance, after.as_deref(), limit, &context)
                        .await
                })
            },
        )
        .await
    }
}

/// All sources, in registration order, plus a fingerprint of the set.
pub struct SourceSet {
    pub sources: Vec<Arc<Source>>,
    /// Where trimming (`trim.rs`) reloads a source's compiled component from.
    pub(crate) cache: ComponentCache,
    pub(crate) runtime: Arc<Runtime>,
    /// SHA-256 over the names, order and content hashes: cursors are bound to
    /// it, so any change of the registered sources invalidates them.
    pub fingerprint: [u8; 32],
}

/// What loading the sources reads of the server's configuration, which
/// composes it (`From<&Config>`); each field is the key of the same name.
pub struct LoadSettings<'c> {
    /// The config file: errors in its own settings name it.
    pub file: &'c Path,
    pub sources_dir: &'c Path,
    /// `[sources]`: the trusted keys and the signature policy.
    pub sources: &'c SourcesConfig,
    pub cache_dir: PathBuf,
    pub cache_key_file: PathBuf,
    pub budget: BudgetConfig,
    pub runtime: &'c RuntimeConfig,
    /// Each capability's own section (`[databases]`, `[directories]`).
    pub capabilities: ServerSections<'c>,
}

impl SourceSet {
    /// Load every `*.wasm` of `config.sources_dir` in file-name order.
    pub async fn load<'c>(
        runtime: Arc<Runtime>,
        config: impl Into<LoadSettings<'c>>,
    ) -> Result<SourceSet, LoadError> {
        let config = &config.into();
        let dir = &config.sources_dir;
        let entries =
            std::fs::read_dir(dir).map_err(|e| LoadError::new(dir, LoadProblem::SourcesDir(e)))?;
        let mut files: Vec<PathBuf> = Vec::new();
        let mut manifests: Vec<PathBuf> = Vec::new();
        let mut signatures: Vec<PathBuf> = Vec::new();
        for entry in entries {
            let path = entry
                .map_err(|e| LoadError::new(dir, LoadProblem::SourcesDir(e)))?
                .path();
            match path.extension().and_then(|e| e.to_str()) {
                Some("wasm") => files.push(path),
                Some("toml") => manifests.push(path),
                Some(signature::EXTENSION) => signatures.push(path),
                _ => {}
            }
        }
        // Registration order is file-name order, compared as bytes.
        files.sort_by(|a, b| {
            a.file_name()
                .unwrap()
                .as_encoded_bytes()
                .cmp(b.file_name().unwrap().as_encoded_bytes())
        });
        for manifest in &manifests {
            if !manifest.with_extension("wasm").is_file() {
                return Err(LoadError::new(
                    manifest,
                    LoadProblem::ManifestWithoutComponent,
                ));
            }
        }
        for sig in &signatures {
            if !sig.with_extension("wasm").is_file() {
                return Err(LoadError::new(sig, LoadProblem::SignatureWithoutComponent));
            }
        }
        let policy = Policy::from_config(config.sources)
            .map_err(|e| LoadError::new(config.file, LoadProblem::TrustedKeys(e)))?;
        let cache = ComponentCache::open(
            &runtime.engine,
            config.cache_dir.clone(),
            &config.cache_key_file,
        )
        .map_err(|e| LoadError::new(config.file, e.into()))?;
        let shared = ServerCapabilities::new(config.capabilities)
            .map_err(|e| LoadError::new(config.file, LoadProblem::Capabilities(e)))?;
        shared
            .verify()
            .await
            .map_err(|e| LoadError::new(config.file, LoadProblem::Capabilities(e)))?;
        let mut sources: Vec<Arc<Source>> = Vec::new();
        for file in files {
            let source = load_one(&runtime, config, &shared, &cache, &policy, &file).await?;
            if let Some(other) = sources.iter().find(|s| s.name() == source.name()) {
                return Err(LoadError::new(
                    &file,
                    LoadProblem::DuplicateName {
                        name: source.name().to_owned(),
                        other: other.file.clone(),
                    },
                ));
            }
            let scopes = joined_scopes_len(sources.iter().map(|s| &**s).chain([&source]));
            if scopes > MAX_CHALLENGE_SCOPES_BYTES {
                return Err(LoadError::new(
                    &file,
                    LoadProblem::ChallengeScopes { bytes: scopes },
                ));
            }
            tracing::info!(
                source = source.name(), file = %source.file.display(), cache = %source.cache,
                lists = source.lists(), signature = %source.signature, "source registered"
            );
            sources.push(Arc::new(source));
        }
        let fingerprint = fingerprint(&sources);
        Ok(SourceSet {
            sources,
            cache,
            runtime,
            fingerprint,
        })
    }

    pub fn get(&self, name: &str) -> Option<&Arc<Source>> {
        self.sources.iter().find(|s| s.name() == name)
    }

    pub fn any_lists(&self) -> bool {
        self.sources.iter().any(|s| s.lists())
    }
}

/// The length of the distinct scopes of `sources`, space-separated: the
/// `scope` of an anonymous listing's challenge.
fn joined_scopes_len<'a>(sources: impl Iterator<Item = &'a Source>) -> usize {
    let all: std::collections::BTreeSet<&str> = sources
        .flat_map(|s| s.definition.required_scopes.iter().map(String::as_str))
        .collect();
    all.iter()
        .map(|s| s.len() + 1)
        .sum::<usize>()
        .saturating_sub(1)
}

fn fingerprint(sources: &[Arc<Source>]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for s in sources {
        h.update((s.name().len() as u32).to_be_bytes());
        h.update(s.name().as_bytes());
        h.update(s.wasm_sha256.as_bytes());
    }
    h.finalize().into()
}

async fn load_one(
    runtime: &Arc<Runtime>,
    config: &LoadSettings<'_>,
    shared: &ServerCapabilities,
    cache: &ComponentCache,
    policy: &Policy,
    file: &Path,
) -> Result<Source, LoadError> {
    // Each file is read once: the bytes the signature is checked over are
    // the manifest parsed and the component compiled (and the cache key).
    let manifest_path = file.with_extension("toml");
    let manifest_error = |e: std::io::Error| {
        LoadError::new(
            &manifest_path,
            LoadProblem::Manifest(ManifestError::Read {
                path: manifest_path.clone(),
                source: e,
            }),
        )
    };
    let manifest_bytes = if manifest_path.is_file() {
        Some(std::fs::read(&manifest_path).map_err(manifest_error)?)
    } else {
        None
    };
    let wasm =
        std::fs::read(file).map_err(|e| LoadError::new(file, LoadProblem::ReadComponent(e)))?;
    let signature_path = signature::signature_path(file);
    let signature_verdict = signature::read_signature(&signature_path)
        .and_then(|sig| {
            policy.check(
                &signature_path,
                sig.as_deref(),
                &wasm,
                manifest_bytes.as_deref(),
            )
        })
        .map_err(|e| {
            // A missing signature is the component's fault; any other, the
            // signature file's.
            let at = if matches!(e, SignatureProblem::Missing(_)) {
                file
            } else {
                &signature_path
            };
            LoadError::new(at, LoadProblem::Signature(e))
        })?;
    let manifest = match &manifest_bytes {
        Some(bytes) => {
            let text = std::str::from_utf8(bytes).map_err(|_| {
                manifest_error(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "stream did not contain valid UTF-8",
                ))
            })?;
            SourceManifest::parse(&manifest_path, text).map_err(|e| LoadError {
                file: e.path().to_owned(),
                problem: LoadProblem::Manifest(e),
            })?
        }
        None => SourceManifest::default(),
    };
    let budget = manifest.budget.apply(config.budget);
    check_budget(&budget, config.runtime.max_memory_bytes)
        .map_err(|e| LoadError::new(&manifest_path, LoadProblem::Budget(e)))?;
    let source_share = config.runtime.calls_per_source();
    let max_concurrent_calls = match manifest.budget.max_concurrent_calls {
        None => source_share,
        Some(n) if (1..=source_share).contains(&n) => n,
        Some(n) => {
            return Err(LoadError::new(
                &manifest_path,
                LoadProblem::ConcurrentCalls {
                    asked: n,
                    share: source_share,
                },
            ));
        }
    } as usize;
    let mut capabilities = shared
        .grant(manifest.asks())
        .map_err(|e| LoadError::new(&manifest_path, LoadProblem::Grant(e)))?;

    // The cache is keyed by the digest of the verified bytes and compiles
    // those same bytes on a miss.
    let wasm_sha256 = sha256_hex(&wasm);
    let engine = runtime.engine.clone();
    let (component, outcome) = {
        let cache_result = tokio::task::block_in_place(|| {
            cache.load_or_compile(&engine, config.runtime, &wasm, &wasm_sha256)
        });
        cache_result.map_err(|e| LoadError::new(file, e.into()))?
    };
    capabilities.wasi.uses = super::capabilities::wasi::WasiUse::of(&component);
    let linked = Linked::new(runtime, &component, file)?;
    let stem: Arc<str> = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
        .into();
    let mut source = Source {
        // Filled in from describe() below.
        definition: placeholder_definition(),
        log_name: stem,
        file: file.to_owned(),
        wasm_sha256,
        signature: signature_verdict,
        budget,
        max_concurrent_calls,
        cache: outcome,
        runtime: runtime.clone(),
        linked: RwLock::new(Arc::new(linked)),
        standby: Default::default(),
        activity: Default::default(),
        series: Default::default(),
        capabilities,
        output: super::output::OutputLimiter::new(),
        last_fuel_used: Default::default(),
        last_memory_bytes: Default::default(),
    };
    // Typed lookups happen at instantiation: a mismatched signature shows up
    // in describe() as an error, reported as a wrong world.
    let scope = RequestScope::new(
        Instant::now() + Duration::from_millis(STARTUP_CALL_DURATION_MS),
        "startup",
        super::slots::CallerKey::host(),
    );
    let described = source.describe(&scope).await.map_err(|e| match e {
        GuestError::Trap(m) if m.contains("type mismatch") || m.contains("expected") => {
            LoadError::new(file, LoadProblem::WrongSignatures(m))
        }
        e => LoadError::new(file, LoadProblem::Describe(e)),
    })?;
    source.definition = SourceDefinition::validate(described, source.lists())
        .map_err(|e| LoadError::new(file, e.into()))?;
    source.log_name = source.definition.name.as_str().into();
    let m = crate::telemetry::metrics::metrics();
    let series = SourceSeries {
        read: m.export_series(&source.log_name, "read"),
        list: source
            .lists()
            .then(|| m.export_series(&source.log_name, "list")),
    };
    let _ = source.series.set(series);
    Ok(source)
}

fn placeholder_definition() -> SourceDefinition {
    SourceDefinition {
        name: String::new(),
        uri_template: crate::uri_template::UriTemplate::parse("x:{x}").unwrap(),
        title: None,
        description: None,
        mime_type: None,
        access: super::definition::Access::Protected,
        required_scopes: vec![],
        discoverable: false,
    }
}
