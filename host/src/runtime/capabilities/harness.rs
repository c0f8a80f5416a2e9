//! An in-process harness for capability unit tests (no server): the
//! hostile guest, a real component, instantiated in a store of its own with
//! the one capability under test granted (plus its manifest's `config`
//! values, which choose its behaviour). Every other capability is linked,
//! as the guest imports them all, but granted nothing, which is what a
//! source without that grant gets. The guest's `read` reports what it could do.

use super::sql::config::DatabaseConfig;
use super::wasi::DirectoryConfig;
use super::{Capability, Registered, ServerSections, SourceCapabilities};
use crate::runtime::bindings::InventorySource;
use crate::runtime::bindings::emseepea::inventory::types::{
    CallContext, Principal, ResourceBody, SourceError,
};
use crate::runtime::config::SourceManifest;
use crate::runtime::host_state::{HostState, MemoryAccount};
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Engine, Store};

/// The call budget the harness gives a guest.
pub const MEMORY_BYTES: u64 = 64 << 20;

/// How a harness read ended, other than with text.
#[derive(Debug, thiserror::Error)]
pub enum ReadFailure {
    #[error("source-error: {0:?}")]
    Source(SourceError),
    #[error("trap: {0:#}")]
    Trap(wasmtime::Error),
    #[error("the guest returned no text")]
    NoText,
}

/// The capabilities' sections of a server config (`[databases.*]`,
/// `[directories.*]`), as the server's file spells them.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    #[serde(default)]
    pub databases: BTreeMap<String, DatabaseConfig>,
    #[serde(default)]
    pub directories: BTreeMap<String, DirectoryConfig>,
}

impl ServerConfig {
    /// Each capability's own section, as the config composer hands it over.
    pub fn sections(&self) -> ServerSections<'_> {
        ServerSections {
            wasi: &self.directories,
            http: (),
            config: (),
            sql: &self.databases,
        }
    }
}

/// Capability sections from TOML lines (absolute paths, nothing resolved).
pub fn server_config(extra: &str) -> ServerConfig {
    toml::from_str(extra).expect("harness server config")
}

/// The hostile guest's manifest: `mode`, then `rest` (more `[config]`
/// lines, then any other tables such as `[grants]`).
pub fn manifest(mode: &str, rest: &str) -> SourceManifest {
    toml::from_str(&format!("[config]\nmode = {mode:?}\n{rest}")).expect("harness manifest")
}

fn guest() -> &'static (Engine, Component) {
    static GUEST: OnceLock<(Engine, Component)> = OnceLock::new();
    GUEST.get_or_init(|| {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        let engine = Engine::new(&config).expect("engine");
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../target/guests/hostile/hostile.wasm");
        let component = Component::from_file(&engine, &path)
            .unwrap_or_else(|e| panic!("{}: {e:#} (run `cargo xtask guests`)", path.display()));
        (engine, component)
    })
}

/// The server config every capability is configured from, and the call's
/// budget, names and cancellation.
pub struct Harness {
    pub config: ServerConfig,
    pub deadline: Duration,
    pub cancel: CancellationToken,
    /// The call's `memory_bytes`.
    pub memory_bytes: u64,
    /// The source's name and the request's id, as log lines carry them.
    pub source: Arc<str>,
    pub request_id: Arc<str>,
}

impl Harness {
    pub fn new(config: &str) -> Self {
        Self {
            config: server_config(config),
            deadline: Duration::from_secs(10),
            cancel: CancellationToken::new(),
            memory_bytes: MEMORY_BYTES,
            source: Arc::from("harness"),
            request_id: Arc::from("harness-request"),
        }
    }

    /// Configure `C` from the server config and grant it per `manifest`.
    pub fn grant<C: Capability + Registered>(
        &self,
        manifest: &SourceManifest,
    ) -> Result<SourceCapabilities, C::GrantError> {
        let capability =
            C::configure(C::section(&self.config.sections())).expect("capability configures");
        let asks = manifest.asks();
        let mut grants = SourceCapabilities {
            config: super::config::SourceConfig
                .grant(asks.config)
                .expect("config values"),
            handles: manifest.handles,
            ..Default::default()
        };
        *C::grant_slot(&mut grants) = capability.grant(C::asked(&asks))?;
        Ok(grants)
    }

    /// One `read` of the hostile guest, `mode` and grants from `manifest`,
    /// with only `C` granted.
    pub async fn read<C: Capability + Registered>(
        &self,
        manifest: &SourceManifest,
        uri: &str,
    ) -> Result<String, ReadFailure> {
        let grants = self.grant::<C>(manifest).expect("grants resolve");
        self.read_with(&grants, uri).await
    }

    /// As [`Harness::read`], with grants made once (e.g. to share pools).
    pub async fn read_with(
        &self,
        grants: &SourceCapabilities,
        uri: &str,
    ) -> Result<String, ReadFailure> {
        let (engine, component) = guest();
        let mut linker = Linker::<HostState>::new(engine);
        super::add_to_linker(&mut linker).expect("link");
        let deadline = Instant::now() + self.deadline;
        let capabilities = grants
            .for_call(
                &self.source,
                &self.request_id,
                &crate::runtime::CallerKey::new("harness"),
                deadline,
            )
            .expect("call state");
        let captured = capabilities.wasi.output();
        let mut table = ResourceTable::new();
        table.set_max_capacity(capabilities.handles.table_entries);
        let state = HostState {
            table,
            memory: MemoryAccount::new(self.memory_bytes),
            capabilities: Some(capabilities),
            deadline,
            cancel: self.cancel.clone(),
        };
        // What the guest printed goes to the log as the server sends it,
        // however the call ends.
        let _forward = Forward {
            captured,
            source: &self.source,
            request_id: &self.request_id,
        };
        let mut store = Store::new(engine, state);
        store.limiter(|s| &mut s.memory);
        let guest = InventorySource::instantiate_async(&mut store, component, &linker)
            .await
            .map_err(ReadFailure::Trap)?;
        let context = CallContext {
            principal: Some(Principal {
                subject: Some("alice".into()),
                client_id: "harness".into(),
                scopes: vec!["hostile:read".into()],
                audience: None,
            }),
            deadline_ms: 0,
        };
        let contents = guest
            .emseepea_inventory_template()
            .call_read(&mut store, uri, &context)
            .await
            .map_err(ReadFailure::Trap)?
            .map_err(ReadFailure::Source)?;
        match contents.into_iter().next().map(|c| c.body) {
            Some(ResourceBody::Text(text)) => Ok(text),
            _ => Err(ReadFailure::NoText),
        }
    }
}

/// Forwards a call's captured output to the log when dropped.
struct Forward<'a> {
    captured: Option<super::wasi::CapturedOutput>,
    source: &'a str,
    request_id: &'a str,
}

impl Drop for Forward<'_> {
    fn drop(&mut self) {
        let Some(captured) = self.captured.take() else {
            return;
        };
        let limiter = crate::runtime::output::OutputLimiter::new();
        for (stream, pipe) in [("stdout", &captured.stdout), ("stderr", &captured.stderr)] {
            crate::runtime::output::forward(
                &limiter,
                self.source,
                self.request_id,
                stream,
                &pipe.contents(),
            );
        }
    }
}
