//! `emseepea:inventory/sql`: databases declared in the server config
//! (`[databases.LABEL]`, `config.rs`) and granted per source by label
//! (`grants.databases`), served by the engine each section names.
//!
//! This module is the engine-neutral part, the same for every engine:
//! grants (one pool per source and database, never shared), per-call state,
//! the WIT host functions, the result bounds (`max-rows`, the database's
//! `max_result_bytes`, the call's remaining memory budget, and the charge of
//! what was returned), the mapping of [`EngineError`] to the guest's error
//! or the deadline trap, and the statement metrics. `engine.rs` is the
//! interface an engine implements; `sqlite/` is the embedded engine.

pub mod config;
pub mod engine;
pub mod postgres;
pub mod sqlite;

#[cfg(test)]
pub(crate) mod probes;
#[cfg(test)]
mod tests;

use super::handles::{HandleCount, Held};
use super::{CallInfo, CallView, Capability, ViewOf};
use crate::guest_text::GuestText;
use crate::runtime::bindings::emseepea::inventory::sql::{
    self as wit, Error, Host, HostConnection, Rows, Value,
};
use crate::runtime::budget::DeadlineTrap;
use crate::runtime::host_state::HostState;
use crate::telemetry::metrics::metrics;
use crate::telemetry::spans;
use config::DatabaseConfig;
use engine::{
    Bounds, EngineCallState, EngineConnection, EngineError, EnginePool, EngineSetupError, OpenCall,
    StatementCall,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument;
use wasmtime::component::{Linker, Resource, ResourceTableError};

/// The capability: every `[databases.LABEL]` of the server config.
pub struct Sql {
    databases: BTreeMap<String, DatabaseConfig>,
    /// The login roles earlier sources' grants reach (two sources on one
    /// role could signal and watch each other's sessions: `postgres/roles.rs`).
    claimed: std::sync::Mutex<Vec<Claim>>,
}

struct Claim {
    role: postgres::roles::RoleKey,
    label: String,
    shared: bool,
}

/// A `[databases.LABEL]` section the server cannot serve.
#[derive(Debug, thiserror::Error)]
#[error("database {label:?}: {source}")]
pub struct SqlDefinitionError {
    label: String,
    source: EngineSetupError,
}

/// A manifest's `grants.databases` the server cannot honour.
#[derive(Debug, thiserror::Error)]
pub enum SqlGrantError {
    #[error("grants database {0:?}, which the server config does not define")]
    UnknownDatabase(String),
    #[error("database {label:?}: {source}")]
    Engine {
        label: String,
        source: EngineSetupError,
    },
    #[error(
        "database {label:?} logs in as the role {role}, as database {other:?} granted to another \
         source does: a role's sessions can signal and watch each other, so one source could stop \
         or read the other's statements; give each source a role of its own (docs: \
         operating/postgres-roles), or set `allow_shared_role = true` in both sections"
    )]
    SharedRole {
        label: String,
        other: String,
        role: String,
    },
}

impl Capability for Sql {
    const NAME: &'static str = "sql";
    type Grant = SqlGrants;
    type Call = SqlCall;
    type DefinitionError = SqlDefinitionError;
    type GrantError = SqlGrantError;
    type CallError = std::convert::Infallible;

    /// `[databases]`: label → the database's config.
    type Section<'c> = &'c BTreeMap<String, DatabaseConfig>;
    /// `grants.databases`: the labels a source asks for.
    type Asked<'m> = &'m [String];

    fn configure(databases: Self::Section<'_>) -> Result<Self, SqlDefinitionError> {
        for (label, database) in databases {
            engine::check(database).map_err(|source| SqlDefinitionError {
                label: label.clone(),
                source,
            })?;
        }
        // The process-wide heap limit is the host's from the start.
        sqlite::enforce_heap_limit();
        Ok(Self {
            databases: databases.clone(),
            claimed: Default::default(),
        })
    }

    fn grant(&self, labels: &[String]) -> Result<SqlGrants, SqlGrantError> {
        let grants = SqlGrants::resolve(&self.databases, labels)?;
        self.claim(labels)?;
        Ok(grants)
    }

    fn call(grant: &SqlGrants, call: &CallInfo) -> Result<SqlCall, Self::CallError> {
        Ok(SqlCall {
            grants: grant.clone(),
            source: call.source.clone(),
            caller: call.caller.clone(),
            request_id: call.request_id.clone(),
            engines: EngineCallState::default(),
            connections: HandleCount::default(),
            max_connections: call.handles.sql_connections,
            refusal_logged: false,
        })
    }

    fn add_to_linker(
        linker: &mut Linker<HostState>,
        view: fn(&mut HostState) -> CallView<'_, SqlCall>,
    ) -> wasmtime::Result<()> {
        wit::add_to_linker::<HostState, ViewOf<SqlCall>>(linker, view)
    }
}

impl Sql {
    /// What needs the databases themselves, once at startup (and in
    /// `emseepea check`): every PostgreSQL section's role.
    pub async fn verify(&self) -> Result<(), SqlDefinitionError> {
        for (label, database) in &self.databases {
            engine::verify(label, database)
                .await
                .map_err(|source| SqlDefinitionError {
                    label: label.clone(),
                    source,
                })?;
        }
        Ok(())
    }

    /// Record the login roles one source's grant (`labels`) reaches;
    /// refused if an earlier source's grant reaches one of them, unless
    /// both sections allow a shared role.
    fn claim(&self, labels: &[String]) -> Result<(), SqlGrantError> {
        let mine: Vec<Claim> = labels
            .iter()
            .filter_map(|label| {
                let (role, shared) = engine::login_role(self.databases.get(label)?)?;
                Some(Claim {
                    role,
                    label: label.clone(),
                    shared,
                })
            })
            .collect();
        let mut claimed = self.claimed.lock().unwrap_or_else(|e| e.into_inner());
        for c in &mine {
            if let Some(other) = claimed
                .iter()
                .find(|o| o.role == c.role && !(o.shared && c.shared))
            {
                return Err(SqlGrantError::SharedRole {
                    label: c.label.clone(),
                    other: other.label.clone(),
                    role: c.role.to_string(),
                });
            }
        }
        claimed.extend(mine);
        Ok(())
    }
}

/// One granted database of one source: its own pool.
#[derive(Debug)]
pub struct GrantedDatabase {
    /// The label from the server config (a bounded set: safe as a metric label).
    pub label: String,
    max_result_bytes: usize,
    pool: EnginePool,
}

/// The databases one source was granted, each with this source's own pool.
#[derive(Clone, Debug, Default)]
pub struct SqlGrants(Arc<Vec<Arc<GrantedDatabase>>>);

impl SqlGrants {
    /// One new pool per database named by `labels`: called once per source,
    /// so no two sources ever share a connection.
    pub fn resolve(
        databases: &BTreeMap<String, DatabaseConfig>,
        labels: &[String],
    ) -> Result<Self, SqlGrantError> {
        let mut out = Vec::new();
        for label in labels {
            let config = databases
                .get(label)
                .ok_or_else(|| SqlGrantError::UnknownDatabase(label.clone()))?;
            let pool = EnginePool::new(label, config).map_err(|source| SqlGrantError::Engine {
                label: label.clone(),
                source,
            })?;
            out.push(Arc::new(GrantedDatabase {
                label: label.clone(),
                max_result_bytes: config.max_result_bytes,
                pool,
            }));
        }
        Ok(Self(Arc::new(out)))
    }

    pub fn labels(&self) -> Vec<String> {
        self.0.iter().map(|d| d.label.clone()).collect()
    }
}

/// Per-call state: the grants, the source's name, and what the engines
/// keep for the call (e.g. its SQLite share).
pub struct SqlCall {
    grants: SqlGrants,
    source: Arc<str>,
    caller: crate::runtime::CallerKey,
    request_id: Arc<str>,
    engines: EngineCallState,
    /// Connections the guest holds now, at most `max_connections`.
    connections: HandleCount,
    max_connections: usize,
    /// One log line per call for refused opens, however many there are.
    refusal_logged: bool,
}

/// A connection the guest holds, checked out of its source's pool for one
/// database and given back when the guest drops it or the call ends.
pub struct Connection {
    db: Arc<GrantedDatabase>,
    engine: EngineConnection,
    /// Its place under the call's connection bound.
    _held: Held,
}

/// Which statement function ran (a metric label).
#[derive(Clone, Copy)]
enum Statement {
    Query,
    Execute,
}

impl Statement {
    fn name(self) -> &'static str {
        match self {
            Statement::Query => "query",
            Statement::Execute => "execute",
        }
    }
}

/// The outcome label of a statement.
fn outcome(result: &Result<u64, EngineError>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(EngineError::Deadline) => "deadline",
        Err(EngineError::Interrupted) => "interrupted",
        Err(EngineError::TooLarge) => "too_large",
        Err(EngineError::Unavailable) => "unavailable",
        Err(EngineError::Failed(_)) => "failed",
    }
}

/// The guest's answer to an engine's error; the deadline ends the call.
fn to_guest<T>(result: Result<T, EngineError>) -> wasmtime::Result<Result<T, Error>> {
    match result {
        Ok(v) => Ok(Ok(v)),
        Err(EngineError::Deadline) => Err(wasmtime::Error::new(DeadlineTrap)),
        Err(EngineError::Interrupted) => Ok(Err(Error::Interrupted)),
        Err(EngineError::TooLarge) => Ok(Err(Error::TooLarge)),
        Err(EngineError::Unavailable) => Ok(Err(Error::Failed("database unavailable".into()))),
        Err(EngineError::Failed(m)) => Ok(Err(Error::Failed(m))),
    }
}

/// Records one statement when it ends: its count by outcome, its time, and
/// the rows it returned (`query`) or changed (`execute`). A statement whose
/// future is dropped (the call was cancelled or abandoned) counts as
/// `interrupted`.
struct Recorder {
    /// The statement's span (child of the guest call's); disabled when traces are off.
    span: tracing::Span,
    source: Arc<str>,
    db: Arc<GrantedDatabase>,
    statement: Statement,
    started: Instant,
    done: bool,
}

impl Recorder {
    fn start(source: &Arc<str>, db: &Arc<GrantedDatabase>, statement: Statement) -> Self {
        Self {
            span: spans::sql_statement(db.pool.engine().name(), &db.label, statement.name()),
            source: source.clone(),
            db: db.clone(),
            statement,
            started: Instant::now(),
            done: false,
        }
    }

    fn finish(mut self, result: &Result<u64, EngineError>) {
        self.done = true;
        self.record(outcome(result), result.as_ref().ok().copied());
    }

    fn record(&self, outcome: &'static str, rows: Option<u64>) {
        spans::outcome(&self.span, outcome);
        metrics().sql_statement(
            &self.source,
            &self.db.label,
            self.db.pool.engine().name(),
            self.statement.name(),
            outcome,
            self.started.elapsed(),
            rows,
        );
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if !self.done {
            self.record("interrupted", None);
        }
    }
}

impl HostConnection for CallView<'_, SqlCall> {
    async fn open(
        &mut self,
        label: String,
    ) -> wasmtime::Result<Result<Resource<Connection>, Error>> {
        let Some(db) = self
            .state
            .grants
            .0
            .iter()
            .find(|d| d.label == label)
            .cloned()
        else {
            tracing::warn!(database = %GuestText::new(&label), request_id = %self.state.request_id, "guest asked for a database it was not granted");
            return Ok(Err(Error::NotGranted));
        };
        // Counted before anything is opened: past the bound no descriptor,
        // no pool checkout, no SQLite share.
        let Some(held) = self.state.connections.take(self.state.max_connections) else {
            let max = self.state.max_connections;
            if !std::mem::replace(&mut self.state.refusal_logged, true) {
                tracing::warn!(source = %self.state.source, request_id = %self.state.request_id, database = %db.label, max, "guest refused a connection: it holds its call's limit");
            }
            return Ok(Err(Error::Failed(format!(
                "connection limit reached: a call may hold {max} connections"
            ))));
        };
        let opened = db
            .pool
            .open(OpenCall {
                source: &self.state.source,
                caller: &self.state.caller,
                request_id: &self.state.request_id,
                deadline: self.deadline,
                cancel: self.cancel,
                memory: self.memory,
                engines: &mut self.state.engines,
            })
            .await;
        Ok(match to_guest(opened)? {
            Ok(engine) => match self.table.push(Connection {
                db,
                engine,
                _held: held,
            }) {
                Ok(handle) => Ok(handle),
                // The call's resource table is full (`[handles] table_entries`).
                Err(ResourceTableError::Full) => Err(Error::Failed(
                    "handle limit reached: the call's resource table is full".into(),
                )),
                Err(e) => return Err(e.into()),
            },
            Err(e) => Err(e),
        })
    }

    async fn query(
        &mut self,
        handle: Resource<Connection>,
        sql: String,
        params: Vec<Value>,
        max_rows: u32,
    ) -> wasmtime::Result<Result<Rows, Error>> {
        let call = StatementCall {
            deadline: self.deadline,
            cancel: self.cancel,
            request_id: &self.state.request_id,
        };
        let remaining = usize::try_from(self.memory.remaining()).unwrap_or(usize::MAX);
        let connection = self.table.get_mut(&handle)?;
        let db = connection.db.clone();
        let bounds = Bounds {
            max_rows,
            max_bytes: db.max_result_bytes.min(remaining),
        };
        let recorder = Recorder::start(&self.state.source, &db, Statement::Query);
        let fetched = connection
            .engine
            .query(sql, params, bounds, call)
            .instrument(recorder.span.clone())
            .await;
        // What was returned is the guest's now: charged to its budget.
        let result = fetched.and_then(|f| match self.memory.charge(f.bytes as u64) {
            Ok(()) => Ok(f.rows),
            Err(_) => Err(EngineError::TooLarge),
        });
        let counted = result.as_ref().map(|rows| rows.rows.len() as u64);
        recorder.finish(&counted.map_err(Clone::clone));
        to_guest(result)
    }

    async fn execute(
        &mut self,
        handle: Resource<Connection>,
        sql: String,
        params: Vec<Value>,
    ) -> wasmtime::Result<Result<u64, Error>> {
        let call = StatementCall {
            deadline: self.deadline,
            cancel: self.cancel,
            request_id: &self.state.request_id,
        };
        let connection = self.table.get_mut(&handle)?;
        let db = connection.db.clone();
        let recorder = Recorder::start(&self.state.source, &db, Statement::Execute);
        let result = connection
            .engine
            .execute(sql, params, call)
            .instrument(recorder.span.clone())
            .await;
        recorder.finish(&result);
        to_guest(result)
    }

    async fn drop(&mut self, handle: Resource<Connection>) -> wasmtime::Result<()> {
        self.table.delete(handle)?;
        Ok(())
    }
}

impl Host for CallView<'_, SqlCall> {}
