//! `emseepea:inventory/sqlite`: embedded SQLite databases declared in the
//! server config (`[databases.LABEL]`) and granted per source by label.
//!
//! - Statements run on tokio's blocking pool, never on a runtime worker.
//! - A statement stops when the call's deadline passes, when the request is
//!   cancelled, or when the call's future is dropped (`InterruptHandle`); its
//!   rows are then not delivered.
//! - Result rows are counted while they are read: past `max-rows`, the
//!   database's `max_result_bytes` or the call's remaining memory budget the
//!   statement ends with `too-large` before anything more is allocated.
//! - A connection can reach its one file only: ATTACH (and with it
//!   `VACUUM INTO`) and extension loading are refused, read-only databases are
//!   opened read-only.

use crate::config::{Config, DatabaseConfig};
use crate::guest_text::GuestText;
use crate::runtime::bindings::emseepea::inventory::sqlite::{
    Error, Host, HostConnection, Rows, Value,
};
use crate::runtime::budget::DeadlineTrap;
use crate::runtime::host_state::HostState;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::{InterruptHandle, OpenFlags, limits::Limit};
use std::sync::{Arc, Mutex};
use wasmtime::component::Resource;

/// Idle connections kept per database.
const POOL_SIZE: usize = 8;
/// Per-value overhead charged on top of the value's payload.
const VALUE_OVERHEAD: usize = 16;

/// One configured database with its pool of idle connections, shared by
/// every source granted it.
#[derive(Debug)]
pub struct Database {
    pub label: String,
    config: DatabaseConfig,
    idle: Mutex<Vec<rusqlite::Connection>>,
}

impl Database {
    pub fn new(label: String, config: DatabaseConfig) -> Self {
        Self {
            label,
            config,
            idle: Mutex::new(Vec::new()),
        }
    }

    fn checkout(&self) -> rusqlite::Result<rusqlite::Connection> {
        if let Some(conn) = self.idle.lock().unwrap().pop() {
            return Ok(conn);
        }
        let flags = if self.config.read_only {
            OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_URI
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX
        };
        let conn = rusqlite::Connection::open_with_flags(&self.config.file, flags)?;
        conn.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0)?;
        conn.set_limit(Limit::SQLITE_LIMIT_LENGTH, 64 << 20)?;
        conn.busy_timeout(std::time::Duration::from_millis(0))?;
        conn.authorizer(Some(authorize));
        conn.set_prepared_statement_cache_capacity(32);
        Ok(conn)
    }

    fn checkin(&self, conn: rusqlite::Connection) {
        let mut idle = self.idle.lock().unwrap();
        if idle.len() < POOL_SIZE {
            idle.push(conn);
        }
    }
}

/// Refuse everything that reaches beyond the granted file.
fn authorize(ctx: AuthContext<'_>) -> Authorization {
    match ctx.action {
        AuthAction::Attach { .. } | AuthAction::Detach { .. } => Authorization::Deny,
        AuthAction::Function { function_name }
            if function_name.eq_ignore_ascii_case("load_extension") =>
        {
            Authorization::Deny
        }
        _ => Authorization::Allow,
    }
}

/// Every database of the server config, each with one connection pool
/// shared by all sources granted it.
#[derive(Debug, Default)]
pub struct Databases(std::collections::BTreeMap<String, Arc<Database>>);

impl Databases {
    pub fn new(config: &Config) -> Self {
        Self(
            config
                .databases
                .iter()
                .map(|(label, db)| {
                    (
                        label.clone(),
                        Arc::new(Database::new(label.clone(), db.clone())),
                    )
                })
                .collect(),
        )
    }
}

/// The databases one source was granted.
#[derive(Clone, Debug, Default)]
pub struct SqliteGrants(Arc<Vec<Arc<Database>>>);

impl SqliteGrants {
    /// The databases named by `labels`, from the server's shared pools.
    pub fn resolve(databases: &Databases, labels: &[String]) -> Result<Self, String> {
        let mut out = Vec::new();
        for label in labels {
            let db = databases.0.get(label).ok_or_else(|| {
                format!("grants database {label:?}, which the server config does not define")
            })?;
            out.push(db.clone());
        }
        Ok(Self(Arc::new(out)))
    }

    pub fn labels(&self) -> Vec<String> {
        self.0.iter().map(|d| d.label.clone()).collect()
    }
}

/// Per-call state: the grants and the connections the guest opened.
pub struct SqliteCall {
    grants: SqliteGrants,
}

impl SqliteCall {
    pub fn new(grants: SqliteGrants) -> Self {
        Self { grants }
    }
}

/// A connection the guest holds, checked out of its database's pool and
/// returned when the guest drops it (or the call ends).
pub struct Connection {
    db: Arc<Database>,
    conn: Option<rusqlite::Connection>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.db.checkin(conn);
        }
    }
}

/// Interrupts the running statement unless disarmed: dropping the host
/// function's future (the guest call was cancelled) stops the statement.
struct InterruptOnDrop(Option<InterruptHandle>);

impl Drop for InterruptOnDrop {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            h.interrupt();
        }
    }
}

enum Outcome<T> {
    Done(rusqlite::Connection, Result<T, Error>),
}

impl HostState {
    /// Run `work` on the blocking pool with the guest's connection, bounded by
    /// the call's deadline and cancellation.
    async fn run_statement<T: Send + 'static>(
        &mut self,
        handle: &Resource<Connection>,
        work: impl FnOnce(&rusqlite::Connection) -> Result<T, Error> + Send + 'static,
    ) -> wasmtime::Result<Result<T, Error>> {
        let connection = self.table.get_mut(handle)?;
        let Some(conn) = connection.conn.take() else {
            return Ok(Err(Error::Failed("connection is busy".into())));
        };
        let db = connection.db.clone();
        let interrupt = conn.get_interrupt_handle();
        let mut guard = InterruptOnDrop(Some(conn.get_interrupt_handle()));
        let label = db.label.clone();
        let task = tokio::task::spawn_blocking(move || {
            let result = work(&conn);
            if matches!(result, Err(Error::Interrupted)) {
                tracing::warn!(database = %label, "sqlite statement interrupted");
            }
            Outcome::Done(conn, result)
        });
        let deadline = tokio::time::Instant::from_std(self.deadline);
        let cancel = self.cancel.clone();
        tokio::pin!(task);
        let joined = tokio::select! {
            joined = &mut task => joined,
            _ = tokio::time::sleep_until(deadline) => {
                interrupt.interrupt();
                let Outcome::Done(conn, _) = task.await?;
                guard.0 = None;
                self.table.get_mut(handle)?.conn = Some(conn);
                return Err(wasmtime::Error::new(DeadlineTrap));
            }
            _ = cancel.cancelled() => {
                interrupt.interrupt();
                let Outcome::Done(conn, _) = task.await?;
                guard.0 = None;
                self.table.get_mut(handle)?.conn = Some(conn);
                return Ok(Err(Error::Interrupted));
            }
        };
        guard.0 = None;
        let Outcome::Done(conn, result) = joined?;
        self.table.get_mut(handle)?.conn = Some(conn);
        Ok(result)
    }
}

fn to_sql(v: &Value) -> rusqlite::types::Value {
    use rusqlite::types::Value as V;
    match v {
        Value::Null => V::Null,
        Value::Integer(i) => V::Integer(*i),
        Value::Real(f) => V::Real(*f),
        Value::Text(s) => V::Text(s.clone()),
        Value::Blob(b) => V::Blob(b.clone()),
    }
}

fn map_err(e: rusqlite::Error) -> Error {
    match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if f.code == rusqlite::ErrorCode::OperationInterrupted =>
        {
            Error::Interrupted
        }
        _ => Error::Failed(e.to_string()),
    }
}

fn query_rows(
    conn: &rusqlite::Connection,
    sql: &str,
    params: Vec<Value>,
    max_rows: u32,
    max_bytes: usize,
) -> Result<(Rows, usize), Error> {
    let mut stmt = conn.prepare_cached(sql).map_err(map_err)?;
    let columns: Vec<String> = stmt.column_names().into_iter().map(String::from).collect();
    let params: Vec<rusqlite::types::Value> = params.iter().map(to_sql).collect();
    let mut rows = stmt
        .query(rusqlite::params_from_iter(params))
        .map_err(map_err)?;
    let mut out = Vec::new();
    let mut bytes = 0usize;
    while let Some(row) = rows.next().map_err(map_err)? {
        if out.len() as u32 >= max_rows {
            return Err(Error::TooLarge);
        }
        let mut values = Vec::with_capacity(columns.len());
        for i in 0..columns.len() {
            use rusqlite::types::ValueRef;
            let v = row.get_ref(i).map_err(map_err)?;
            // Count before copying: an oversized result is refused, not allocated.
            bytes += VALUE_OVERHEAD
                + match v {
                    ValueRef::Text(t) | ValueRef::Blob(t) => t.len(),
                    _ => 8,
                };
            if bytes > max_bytes {
                return Err(Error::TooLarge);
            }
            values.push(match v {
                ValueRef::Null => Value::Null,
                ValueRef::Integer(i) => Value::Integer(i),
                ValueRef::Real(f) => Value::Real(f),
                ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
                ValueRef::Blob(b) => Value::Blob(b.to_vec()),
            });
        }
        out.push(values);
    }
    Ok((Rows { columns, rows: out }, bytes))
}

impl HostConnection for HostState {
    async fn open(
        &mut self,
        label: String,
    ) -> wasmtime::Result<Result<Resource<Connection>, Error>> {
        let Some(db) = self
            .capabilities
            .sqlite
            .grants
            .0
            .iter()
            .find(|d| d.label == label)
            .cloned()
        else {
            tracing::warn!(database = %GuestText::new(&label), "guest asked for a database it was not granted");
            return Ok(Err(Error::NotGranted));
        };
        let db2 = db.clone();
        let conn = match tokio::task::spawn_blocking(move || db2.checkout()).await? {
            Ok(c) => c,
            Err(e) => return Ok(Err(Error::Failed(e.to_string()))),
        };
        Ok(Ok(self.table.push(Connection {
            db,
            conn: Some(conn),
        })?))
    }

    async fn query(
        &mut self,
        handle: Resource<Connection>,
        sql: String,
        params: Vec<Value>,
        max_rows: u32,
    ) -> wasmtime::Result<Result<Rows, Error>> {
        let db_cap = self.table.get(&handle)?.db.config.max_result_bytes;
        let remaining = self.memory.remaining() as usize;
        let max_bytes = db_cap.min(remaining);
        let result = self
            .run_statement(&handle, move |conn| {
                query_rows(conn, &sql, params, max_rows, max_bytes)
            })
            .await?;
        Ok(match result {
            Ok((rows, bytes)) => match self.memory.charge(bytes as u64) {
                Ok(()) => Ok(rows),
                Err(_) => Err(Error::TooLarge),
            },
            Err(e) => Err(e),
        })
    }

    async fn execute(
        &mut self,
        handle: Resource<Connection>,
        sql: String,
        params: Vec<Value>,
    ) -> wasmtime::Result<Result<u64, Error>> {
        self.run_statement(&handle, move |conn| {
            let mut stmt = conn.prepare_cached(&sql).map_err(map_err)?;
            let params: Vec<rusqlite::types::Value> = params.iter().map(to_sql).collect();
            stmt.execute(rusqlite::params_from_iter(params))
                .map(|n| n as u64)
                .map_err(map_err)
        })
        .await
    }

    async fn drop(&mut self, handle: Resource<Connection>) -> wasmtime::Result<()> {
        self.table.delete(handle)?;
        Ok(())
    }
}

impl Host for HostState {}
