//! What a guest may reach, one self-contained module per capability (the way
//! Spin keeps one factor per capability): each has its configuration (from
//! the server config and the source's manifest grants), its per-call state
//! and its host implementation. Nothing is reachable without a grant.

pub mod config;
pub mod http;
pub mod sqlite;
/// The `sql` capability's engines (the PostgreSQL one so far; the SQLite
/// one moves here).
pub mod sql {
    pub mod postgres;
}
pub mod wasi;

use super::host_state::HostState;
use crate::config::{Config, SourceManifest};
use wasmtime::component::{HasSelf, Linker};

/// A source's granted capabilities, prepared once at startup.
#[derive(Clone, Debug)]
pub struct SourceCapabilities {
    pub config: config::ConfigValues,
    pub sqlite: sqlite::SqliteGrants,
    pub wasi: wasi::WasiGrants,
    pub http: http::HttpGrants,
}

/// What the server config defines for capabilities, built once and shared
/// by every source (e.g. one connection pool per database).
pub struct ServerCapabilities<'a> {
    config: &'a Config,
    databases: sqlite::Databases,
}

impl<'a> ServerCapabilities<'a> {
    pub fn new(config: &'a Config) -> Self {
        Self {
            config,
            databases: sqlite::Databases::new(config),
        }
    }

    /// Resolve a manifest's grants. A grant naming something the server
    /// config does not define is an error.
    pub fn grant(&self, manifest: &SourceManifest) -> Result<SourceCapabilities, String> {
        Ok(SourceCapabilities {
            config: config::ConfigValues::new(manifest.config.clone()),
            sqlite: sqlite::SqliteGrants::resolve(&self.databases, &manifest.grants.databases)
                .map_err(|e| e.to_string())?,
            wasi: wasi::WasiGrants::resolve(self.config, &manifest.grants.directories)?,
            http: http::HttpGrants::resolve(&manifest.grants.http, manifest.grants.http_limits)?,
        })
    }
}

impl SourceCapabilities {
    /// Per-call state, made fresh for every guest call.
    pub fn for_call(
        &self,
        source: &std::sync::Arc<str>,
        deadline: std::time::Instant,
    ) -> CallCapabilities {
        CallCapabilities {
            config: self.config.clone(),
            sqlite: sqlite::SqliteCall::new(self.sqlite.clone()),
            http_ctx: wasmtime_wasi_http::WasiHttpCtx::new(),
            egress: http::EgressHooks {
                grants: self.http.clone(),
                deadline,
                source: source.clone(),
            },
        }
    }
}

/// The per-call state of every capability.
pub struct CallCapabilities {
    pub config: config::ConfigValues,
    pub sqlite: sqlite::SqliteCall,
    pub http_ctx: wasmtime_wasi_http::WasiHttpCtx,
    pub egress: http::EgressHooks,
}

/// Link every host-implemented interface. Which databases or directories a
/// call can reach is decided per call from its source's grants.
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)?;
    super::bindings::emseepea::inventory::config::add_to_linker::<HostState, HasSelf<HostState>>(
        linker,
        |s| s,
    )?;
    super::bindings::emseepea::inventory::sqlite::add_to_linker::<HostState, HasSelf<HostState>>(
        linker,
        |s| s,
    )?;
    Ok(())
}
