//! The engine-neutral interface between the `sql` capability (`mod.rs`:
//! grants, bounds, memory, metrics, the WIT host functions) and the engines
//! that run statements. An engine plugs in as one variant of [`EnginePool`]
//! and of [`EngineConnection`] (plus its arm in [`EnginePool::new`]); it
//! takes the interface's own [`Value`]s, returns its [`Rows`], stops at the
//! call's deadline or cancellation, and answers with an [`EngineError`]
//! that names what happened, never the engine (its detail goes to the log).

use super::config::{DatabaseConfig, Engine, EngineConfig};
use super::{postgres, sqlite};
use crate::runtime::CallerKey;
use crate::runtime::host_state::MemoryAccount;
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// The interface's values and rows: what every engine takes and returns.
pub use crate::runtime::bindings::emseepea::inventory::sql::{Rows, Value};

/// How an open or a statement failed, in the interface's terms.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineError {
    /// The call's deadline passed: the capability ends the call (a trap).
    #[error("deadline exceeded")]
    Deadline,
    /// The MCP request was cancelled, or the engine gave the statement up.
    #[error("interrupted")]
    Interrupted,
    /// Past max-rows, the byte bound, or the engine's memory limit.
    #[error("too large")]
    TooLarge,
    /// No connection could be had (the database is down or unreachable).
    #[error("database unavailable")]
    Unavailable,
    /// The statement was refused; the message is the guest's (it reaches
    /// the host log, never a client).
    #[error("{0}")]
    Failed(String),
}

/// The bounds of one query's result, the same on every engine: rows past
/// `max_rows` or bytes past `max_bytes` (the database's cap or the call's
/// remaining memory budget, whichever is smaller) end it with
/// [`EngineError::TooLarge`] before more is copied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    pub max_rows: u32,
    pub max_bytes: usize,
}

/// What a query returned, and the bytes its rows were counted as (charged
/// to the call's memory budget by the capability).
#[derive(Debug)]
pub struct Fetched {
    pub rows: Rows,
    pub bytes: usize,
}

/// What a statement runs under: the call's deadline and cancellation.
#[derive(Clone, Copy)]
pub struct StatementCall<'a> {
    pub deadline: Instant,
    pub cancel: &'a CancellationToken,
    /// The request's id, for the engine's log lines.
    pub request_id: &'a Arc<str>,
}

/// What opening a connection may use of the call.
pub struct OpenCall<'a> {
    /// The source's name in logs.
    pub(crate) source: &'a Arc<str>,
    /// Who is calling: a caller holds at most its share of a pool.
    pub(crate) caller: &'a CallerKey,
    /// The request's id, for the engine's log lines.
    pub(crate) request_id: &'a Arc<str>,
    pub(crate) deadline: Instant,
    pub(crate) cancel: &'a CancellationToken,
    /// The call's memory budget (SQLite charges its share here).
    pub(crate) memory: &'a mut MemoryAccount,
    /// Per-call state the engines keep across the call's connections.
    pub(crate) engines: &'a mut EngineCallState,
}

/// Per-call, per-engine state, made fresh for every guest call.
#[derive(Default)]
pub struct EngineCallState {
    pub sqlite: sqlite::CallShare,
}

/// A `[databases.LABEL]` section the server cannot serve.
#[derive(Debug, thiserror::Error)]
pub enum EngineSetupError {
    #[error("engine \"postgres\": {0}")]
    Postgres(#[from] postgres::PostgresConfigError),
    #[error("engine \"postgres\": {0}")]
    PostgresRole(#[from] postgres::roles::PrivilegedRole),
}

/// Check a section at startup, before any source is granted it.
pub fn check(config: &DatabaseConfig) -> Result<(), EngineSetupError> {
    match &config.engine {
        EngineConfig::Sqlite(_) => Ok(()),
        EngineConfig::Postgres(pg) => {
            pg.resolve()?;
            Ok(())
        }
    }
}

/// At startup, what needs the database: PostgreSQL's role (`roles.rs`).
pub async fn verify(label: &str, config: &DatabaseConfig) -> Result<(), EngineSetupError> {
    match &config.engine {
        EngineConfig::Sqlite(_) => Ok(()),
        EngineConfig::Postgres(pg) => Ok(postgres::verify(label, pg).await?),
    }
}

/// The login role a section reaches, if its engine has roles, and whether
/// the section lets other sources reach it too (`allow_shared_role`).
pub fn login_role(config: &DatabaseConfig) -> Option<(postgres::roles::RoleKey, bool)> {
    match &config.engine {
        EngineConfig::Sqlite(_) => None,
        EngineConfig::Postgres(pg) => {
            let resolved = pg.resolve().ok()?;
            Some((
                postgres::roles::RoleKey::of(&resolved.pg),
                pg.allow_shared_role,
            ))
        }
    }
}

/// One source's pool of one database (never shared between sources).
#[derive(Debug)]
pub enum EnginePool {
    Sqlite(sqlite::SqlitePool),
    Postgres(postgres::PostgresPool),
}

impl EnginePool {
    /// A new pool for one source; no connection is made yet.
    pub fn new(label: &str, config: &DatabaseConfig) -> Result<Self, EngineSetupError> {
        match &config.engine {
            EngineConfig::Sqlite(sqlite) => Ok(EnginePool::Sqlite(sqlite::SqlitePool::new(
                label.to_owned(),
                sqlite.clone(),
                config.read_only,
            ))),
            EngineConfig::Postgres(pg) => Ok(EnginePool::Postgres(postgres::PostgresPool::new(
                label.to_owned(),
                pg,
                config.read_only,
            )?)),
        }
    }

    pub fn engine(&self) -> Engine {
        match self {
            EnginePool::Sqlite(_) => Engine::Sqlite,
            EnginePool::Postgres(_) => Engine::Postgres,
        }
    }

    /// A connection for the guest, from this source's pool or new.
    pub async fn open(&self, call: OpenCall<'_>) -> Result<EngineConnection, EngineError> {
        match self {
            EnginePool::Sqlite(pool) => pool.open(call).await.map(EngineConnection::Sqlite),
            EnginePool::Postgres(pool) => pool.open(call).await.map(EngineConnection::Postgres),
        }
    }
}

/// A connection a guest holds; given back to its pool when dropped.
pub enum EngineConnection {
    Sqlite(sqlite::SqliteConnection),
    Postgres(postgres::PgConnection),
}

impl EngineConnection {
    /// Run one statement that returns rows, within `bounds`.
    pub async fn query(
        &mut self,
        sql: String,
        params: Vec<Value>,
        bounds: Bounds,
        call: StatementCall<'_>,
    ) -> Result<Fetched, EngineError> {
        match self {
            EngineConnection::Sqlite(c) => c.query(sql, params, bounds, call).await,
            EngineConnection::Postgres(c) => c.query(sql, params, bounds, call).await,
        }
    }

    /// Run one statement for its effect: the number of rows it changed.
    pub async fn execute(
        &mut self,
        sql: String,
        params: Vec<Value>,
        call: StatementCall<'_>,
    ) -> Result<u64, EngineError> {
        match self {
            EngineConnection::Sqlite(c) => c.execute(sql, params, call).await,
            EngineConnection::Postgres(c) => c.execute(sql, params, call).await,
        }
    }
}
