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
//! - Isolation (`policy`, `pool`): every source has its own pool per
//!   database; a connection reaches its one file only, cannot change
//!   settings, open a transaction or make TEMP objects, cannot write on a
//!   read-only grant, and is pooled again only when proven clean.
//! - Memory (`heap`): a call that opens a connection reserves part of its
//!   budget for SQLite, which bounds its values (`SQLITE_LIMIT_LENGTH`) and
//!   raises the process-wide heap limit while the call runs.

mod heap;
mod policy;
mod pool;

use crate::config::{Config, DatabaseConfig};
use crate::guest_text::GuestText;
use crate::runtime::bindings::emseepea::inventory::sqlite::{
    Error, Host, HostConnection, Rows, Value,
};
use crate::runtime::budget::DeadlineTrap;
use crate::runtime::host_state::{HostState, MemoryAccount};
use crate::telemetry::spans;
use pool::{CallLimits, Database};
use rusqlite::InterruptHandle;
use std::sync::Arc;
use wasmtime::component::Resource;

/// Per-value overhead charged on top of the value's payload.
const VALUE_OVERHEAD: usize = 16;

/// Every database of the server config. Each source that is granted one
/// gets its own pool of it ([`SqliteGrants::resolve`]).
#[derive(Debug, Default)]
pub struct Databases(std::collections::BTreeMap<String, DatabaseConfig>);

impl Databases {
    pub fn new(config: &Config) -> Self {
        // The process-wide heap limit is the host's from the start.
        heap::enforce();
        Self(config.databases.clone())
    }
}

/// A grant names a database the server config does not define.
#[derive(Debug, thiserror::Error)]
#[error("grants database {0:?}, which the server config does not define")]
pub struct UnknownDatabase(String);

/// The databases one source was granted, each with this source's own pool.
#[derive(Clone, Debug, Default)]
pub struct SqliteGrants(Arc<Vec<Arc<Database>>>);

impl SqliteGrants {
    /// One new pool per database named by `labels`: called once per source,
    /// so no two sources ever share a connection.
    pub fn resolve(databases: &Databases, labels: &[String]) -> Result<Self, UnknownDatabase> {
        let mut out = Vec::new();
        for label in labels {
            let config = databases
                .0
                .get(label)
                .ok_or_else(|| UnknownDatabase(label.clone()))?;
            out.push(Arc::new(Database::new(label.clone(), config.clone())));
        }
        Ok(Self(Arc::new(out)))
    }

    pub fn labels(&self) -> Vec<String> {
        self.0.iter().map(|d| d.label.clone()).collect()
    }
}

/// Per-call state: the grants, and the call's SQLite share once it opened
/// a connection.
pub struct SqliteCall {
    grants: SqliteGrants,
    share: Option<Share>,
}

/// A call's SQLite share: charged to its memory budget, added to the
/// process heap limit until the call ends.
struct Share {
    limits: CallLimits,
    _reservation: heap::Reservation,
}

/// The call's memory budget cannot pay for its SQLite share (bytes).
#[derive(Debug, thiserror::Error)]
#[error("no memory budget left for a {0}-byte SQLite share")]
pub struct NoBudgetForShare(u64);

impl SqliteCall {
    pub fn new(grants: SqliteGrants) -> Self {
        Self {
            grants,
            share: None,
        }
    }

    /// The call's limits: on its first connection, its share is charged to
    /// `memory` (a refusal marks the call as over its memory cap) and added
    /// to the process heap limit; later connections reuse it.
    fn take_share(&mut self, memory: &mut MemoryAccount) -> Result<CallLimits, NoBudgetForShare> {
        if let Some(share) = &self.share {
            return Ok(share.limits);
        }
        let bytes = heap::reservation_bytes(memory.cap());
        memory.charge(bytes).map_err(|_| NoBudgetForShare(bytes))?;
        let share = Share {
            limits: CallLimits::for_reservation(bytes),
            _reservation: heap::Reservation::new(bytes),
        };
        let limits = share.limits;
        self.share = Some(share);
        Ok(limits)
    }
}

/// A connection the guest holds, checked out of its source's pool for this
/// database and given back (if clean) when the guest drops it or the call
/// ends.
pub struct Connection {
    db: Arc<Database>,
    limits: CallLimits,
    conn: Option<rusqlite::Connection>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.db.checkin(conn, self.limits);
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
        kind: &'static str,
        work: impl FnOnce(&rusqlite::Connection) -> Result<T, Error> + Send + 'static,
    ) -> wasmtime::Result<Result<T, Error>> {
        let connection = self.table.get(handle)?;
        // Child of the guest call's span; ends when the statement does.
        let span = spans::sqlite_statement(&connection.db.label, kind);
        let result = self.statement(handle, work).await;
        spans::outcome(
            &span,
            match &result {
                Ok(Ok(_)) => "ok",
                Ok(Err(Error::Interrupted)) => "interrupted",
                Ok(Err(Error::TooLarge)) => "too_large",
                Ok(Err(_)) => "failed",
                Err(_) => "trap",
            },
        );
        result
    }

    async fn statement<T: Send + 'static>(
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
        let request_id = self.request_id.clone();
        let task = tokio::task::spawn_blocking(move || {
            let result = work(&conn);
            if matches!(result, Err(Error::Interrupted)) {
                tracing::warn!(database = %label, request_id = %request_id, "sqlite statement interrupted");
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
    use rusqlite::ErrorCode;
    match &e {
        rusqlite::Error::SqliteFailure(f, _) => match f.code {
            ErrorCode::OperationInterrupted => Error::Interrupted,
            // A value past the call's length limit, or SQLite's heap limit.
            ErrorCode::TooBig | ErrorCode::OutOfMemory => Error::TooLarge,
            _ => Error::Failed(e.to_string()),
        },
        _ => Error::Failed(e.to_string()),
    }
}

/// SQLite's answer when the authorizer refused part of a statement.
fn is_refused(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::AuthorizationForStatementDenied)
}

/// Prepare a guest's statement; a refusal by the authorizer is logged.
fn prepare<'c>(
    conn: &'c rusqlite::Connection,
    sql: &str,
    label: &str,
    request_id: &str,
) -> Result<rusqlite::CachedStatement<'c>, Error> {
    conn.prepare_cached(sql).map_err(|e| {
        if is_refused(&e) {
            tracing::warn!(database = %label, request_id, "sqlite statement refused by the authorizer");
        }
        map_err(e)
    })
}

fn query_rows(
    conn: &rusqlite::Connection,
    (label, request_id): (&str, &str),
    sql: &str,
    params: Vec<Value>,
    max_rows: u32,
    max_bytes: usize,
) -> Result<(Rows, usize), Error> {
    let mut stmt = prepare(conn, sql, label, request_id)?;
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
            tracing::warn!(database = %GuestText::new(&label), request_id = %self.request_id, "guest asked for a database it was not granted");
            return Ok(Err(Error::NotGranted));
        };
        let limits = match self.capabilities.sqlite.take_share(&mut self.memory) {
            Ok(limits) => limits,
            Err(NoBudgetForShare(bytes)) => {
                tracing::warn!(database = %label, request_id = %self.request_id, bytes, "no memory budget left for the call's SQLite share");
                return Ok(Err(Error::TooLarge));
            }
        };
        let db2 = db.clone();
        let conn = match tokio::task::spawn_blocking(move || db2.checkout(limits)).await? {
            Ok(c) => c,
            Err(e) => return Ok(Err(Error::Failed(e.to_string()))),
        };
        Ok(Ok(self.table.push(Connection {
            db,
            limits,
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
        let db = self.table.get(&handle)?.db.clone();
        let remaining = self.memory.remaining() as usize;
        let max_bytes = db.config.max_result_bytes.min(remaining);
        let request_id = self.request_id.clone();
        let result = self
            .run_statement(&handle, "query", move |conn| {
                query_rows(
                    conn,
                    (&db.label, &request_id),
                    &sql,
                    params,
                    max_rows,
                    max_bytes,
                )
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
        let db = self.table.get(&handle)?.db.clone();
        let request_id = self.request_id.clone();
        self.run_statement(&handle, "execute", move |conn| {
            let mut stmt = prepare(conn, &sql, &db.label, &request_id)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_source_gets_its_own_pool_of_a_shared_database() {
        let config = DatabaseConfig {
            file: "documents.sqlite".into(),
            read_only: true,
            max_result_bytes: 1 << 20,
        };
        let databases = Databases([("documents".to_string(), config)].into());
        let labels = ["documents".to_string()];
        let alice_source = SqliteGrants::resolve(&databases, &labels).unwrap();
        let bob_source = SqliteGrants::resolve(&databases, &labels).unwrap();
        assert!(!Arc::ptr_eq(&alice_source.0[0], &bob_source.0[0]));
        assert_eq!(alice_source.labels(), bob_source.labels());
        let unknown = SqliteGrants::resolve(&databases, &["notes".to_string()]).unwrap_err();
        assert!(unknown.to_string().contains("\"notes\""), "{unknown}");
    }

    #[test]
    fn the_share_is_charged_once_and_only_when_the_budget_has_it() {
        const BUDGET: u64 = 32 << 20;
        let share = BUDGET / 4;
        // Just enough left: charged once, however many connections follow.
        let mut memory = MemoryAccount::new(BUDGET);
        memory.charge(BUDGET - share).unwrap();
        let mut call = SqliteCall::new(SqliteGrants::default());
        let limits = call.take_share(&mut memory).unwrap();
        assert_eq!(limits.length, (share / 2) as i32);
        assert_eq!(memory.remaining(), 0);
        assert_eq!(call.take_share(&mut memory).unwrap(), limits);
        assert!(!memory.exceeded);
        // One byte short: refused, and the call is over its memory cap.
        let mut memory = MemoryAccount::new(BUDGET);
        memory.charge(BUDGET - share + 1).unwrap();
        let mut call = SqliteCall::new(SqliteGrants::default());
        assert!(call.take_share(&mut memory).is_err());
        assert!(call.share.is_none());
        assert!(memory.exceeded);
    }
}
