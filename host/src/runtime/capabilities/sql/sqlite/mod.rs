//! The SQLite engine of the `sql` capability: embedded database files
//! (`[databases.LABEL] engine = "sqlite"`, the default). Guests' `?N`
//! placeholders are SQLite's own.
//!
//! - Statements run on tokio's blocking pool, never on a runtime worker.
//! - A statement stops when the call's deadline passes, when the request is
//!   cancelled, or when the call's future is dropped (`InterruptHandle`); its
//!   rows are then not delivered.
//! - Result rows are counted while they are read, against the capability's
//!   [`Bounds`]: past either the statement ends with `too-large` before
//!   anything more is allocated.
//! - Isolation (`policy`, `pool`): every source has its own pool per
//!   database; a connection reaches its one file only, cannot change
//!   settings, open a transaction or make TEMP objects, cannot write on a
//!   read-only grant, and is pooled again only when proven clean.
//! - Memory (`heap`): a call that opens a connection reserves part of its
//!   budget for SQLite ([`CallShare`]), which bounds its values
//!   (`SQLITE_LIMIT_LENGTH`) and raises the process-wide heap limit while
//!   the call runs.

#[cfg(test)]
pub(crate) mod checklist;
mod heap;
mod policy;
mod pool;

use super::config::SqliteConfig;
use super::engine::{Bounds, EngineError, Fetched, OpenCall, Rows, StatementCall, Value};
use crate::runtime::host_state::MemoryAccount;
use pool::{CallLimits, Database};
use rusqlite::InterruptHandle;
use std::sync::Arc;

/// Per-value overhead charged on top of the value's payload.
const VALUE_OVERHEAD: usize = 16;

/// Make the process-wide heap limit the host's (once, at startup).
pub fn enforce_heap_limit() {
    heap::enforce();
}

/// One source's pool of one SQLite database.
#[derive(Debug)]
pub struct SqlitePool(Arc<Database>);

impl SqlitePool {
    pub fn new(label: String, config: SqliteConfig, read_only: bool) -> Self {
        Self(Arc::new(Database::new(label, config, read_only)))
    }

    /// Check a connection out for the call, taking the call's SQLite share
    /// on its first connection.
    pub async fn open(&self, call: OpenCall<'_>) -> Result<SqliteConnection, EngineError> {
        // Opening a file is quick: the call's end is checked, not raced.
        if call.cancel.is_cancelled() {
            return Err(EngineError::Interrupted);
        }
        if std::time::Instant::now() >= call.deadline {
            return Err(EngineError::Deadline);
        }
        let db = self.0.clone();
        let limits = match call.engines.sqlite.take(call.memory) {
            Ok(limits) => limits,
            Err(NoBudgetForShare(bytes)) => {
                tracing::warn!(source = %call.source, request_id = %call.request_id, database = %db.label, bytes, "no memory budget left for the call's SQLite share");
                return Err(EngineError::TooLarge);
            }
        };
        // An idle pooled connection is taken here; opening a file (which
        // may block) goes to the blocking pool. One hand-over fewer per
        // call of a busy source (two context switches).
        let checked_out = match db.checkout_idle(limits) {
            Some(conn) => conn,
            None => {
                let db2 = db.clone();
                tokio::task::spawn_blocking(move || db2.checkout(limits))
                    .await
                    .map_err(|e| EngineError::Failed(format!("open: {e}")))?
            }
        };
        let conn = checked_out.map_err(|e| {
                // The detail (SQLite's message, the file's path) is the
                // operator's; the guest learns which grant failed, no more.
                tracing::warn!(source = %call.source, request_id = %call.request_id, database = %db.label, file = %db.config.file.display(), "sqlite database cannot be opened: {e}");
                EngineError::Failed(format!("database {:?} cannot be opened", db.label))
            })?;
        Ok(SqliteConnection {
            db,
            limits,
            conn: Some(conn),
        })
    }

    #[cfg(test)]
    pub(crate) fn database(&self) -> &Arc<Database> {
        &self.0
    }
}

/// A call's SQLite share, taken on its first connection: charged to its
/// memory budget and added to the process heap limit until the call ends.
#[derive(Default)]
pub struct CallShare(Option<Share>);

struct Share {
    limits: CallLimits,
    _reservation: heap::Reservation,
}

/// The call's memory budget cannot pay for its SQLite share (bytes).
#[derive(Debug, thiserror::Error)]
#[error("no memory budget left for a {0}-byte SQLite share")]
pub struct NoBudgetForShare(u64);

impl CallShare {
    /// The call's limits: on its first connection, its share is charged to
    /// `memory` (a refusal marks the call as over its memory cap) and added
    /// to the process heap limit; later connections reuse it.
    fn take(&mut self, memory: &mut MemoryAccount) -> Result<CallLimits, NoBudgetForShare> {
        if let Some(share) = &self.0 {
            return Ok(share.limits);
        }
        let bytes = heap::reservation_bytes(memory.cap());
        memory.charge(bytes).map_err(|_| NoBudgetForShare(bytes))?;
        let share = Share {
            limits: CallLimits::for_reservation(bytes),
            _reservation: heap::Reservation::new(bytes),
        };
        let limits = share.limits;
        self.0 = Some(share);
        Ok(limits)
    }
}

/// A connection the guest holds, checked out of its source's pool for this
/// database and given back (if clean) when the guest drops it or the call
/// ends.
pub struct SqliteConnection {
    db: Arc<Database>,
    limits: CallLimits,
    /// `None` while a statement runs on the blocking pool, and for good
    /// when the call's future was dropped mid-statement.
    conn: Option<rusqlite::Connection>,
}

impl Drop for SqliteConnection {
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

impl SqliteConnection {
    pub async fn query(
        &mut self,
        sql: String,
        params: Vec<Value>,
        bounds: Bounds,
        call: StatementCall<'_>,
    ) -> Result<Fetched, EngineError> {
        let label = self.db.label.clone();
        let request_id = call.request_id.clone();
        self.run_statement(call, move |conn| {
            query_rows(conn, (&label, &request_id), &sql, params, bounds)
        })
        .await
    }

    pub async fn execute(
        &mut self,
        sql: String,
        params: Vec<Value>,
        call: StatementCall<'_>,
    ) -> Result<u64, EngineError> {
        let label = self.db.label.clone();
        let request_id = call.request_id.clone();
        self.run_statement(call, move |conn| {
            let mut stmt = prepare(conn, &sql, &label, &request_id)?;
            let params: Vec<rusqlite::types::Value> = params.iter().map(to_sql).collect();
            stmt.execute(rusqlite::params_from_iter(params))
                .map(|n| n as u64)
                .map_err(map_err)
        })
        .await
    }

    /// Run `work` on the blocking pool with the connection, bounded by the
    /// call's deadline and cancellation.
    async fn run_statement<T: Send + 'static>(
        &mut self,
        call: StatementCall<'_>,
        work: impl FnOnce(&rusqlite::Connection) -> Result<T, EngineError> + Send + 'static,
    ) -> Result<T, EngineError> {
        let Some(conn) = self.conn.take() else {
            return Err(EngineError::Failed("connection is busy".into()));
        };
        let interrupt = conn.get_interrupt_handle();
        let mut guard = InterruptOnDrop(Some(conn.get_interrupt_handle()));
        let label = self.db.label.clone();
        let request_id = call.request_id.clone();
        let task = tokio::task::spawn_blocking(move || {
            let result = work(&conn);
            if matches!(result, Err(EngineError::Interrupted)) {
                tracing::warn!(database = %label, request_id = %request_id, "sqlite statement interrupted");
            }
            (conn, result)
        });
        let deadline = tokio::time::Instant::from_std(call.deadline);
        tokio::pin!(task);
        let stopped = tokio::select! {
            joined = &mut task => {
                guard.0 = None;
                let (conn, result) = joined.map_err(|e| EngineError::Failed(format!("statement: {e}")))?;
                self.conn = Some(conn);
                return result.map_err(|e| self.db.for_guest(e));
            }
            _ = tokio::time::sleep_until(deadline) => EngineError::Deadline,
            _ = call.cancel.cancelled() => EngineError::Interrupted,
        };
        interrupt.interrupt();
        let joined = task.await;
        guard.0 = None;
        if let Ok((conn, _)) = joined {
            self.conn = Some(conn);
        }
        Err(stopped)
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

fn map_err(e: rusqlite::Error) -> EngineError {
    use rusqlite::ErrorCode;
    match &e {
        rusqlite::Error::SqliteFailure(f, _) => match f.code {
            ErrorCode::OperationInterrupted => EngineError::Interrupted,
            // A value past the call's length limit, or SQLite's heap limit.
            ErrorCode::TooBig | ErrorCode::OutOfMemory => EngineError::TooLarge,
            _ => EngineError::Failed(e.to_string()),
        },
        _ => EngineError::Failed(e.to_string()),
    }
}

impl Database {
    /// An error as the guest gets it: the database file's path (and its
    /// directory's) never, the grant's label in their place. SQLite names
    /// the file in some messages (`unable to open database file: /srv/...`).
    fn for_guest(&self, e: EngineError) -> EngineError {
        let EngineError::Failed(mut message) = e else {
            return e;
        };
        let file = self.config.file.to_string_lossy();
        let dir = self
            .config
            .file
            .parent()
            .map(|d| d.to_string_lossy().into_owned())
            .filter(|d| d.len() > 1);
        for path in std::iter::once(file.into_owned()).chain(dir) {
            if !path.is_empty() && message.contains(&path) {
                message = message.replace(&path, &format!("<database {:?}>", self.label));
            }
        }
        EngineError::Failed(message)
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
) -> Result<rusqlite::CachedStatement<'c>, EngineError> {
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
    bounds: Bounds,
) -> Result<Fetched, EngineError> {
    let mut stmt = prepare(conn, sql, label, request_id)?;
    let columns: Vec<String> = stmt.column_names().into_iter().map(String::from).collect();
    let params: Vec<rusqlite::types::Value> = params.iter().map(to_sql).collect();
    let mut rows = stmt
        .query(rusqlite::params_from_iter(params))
        .map_err(map_err)?;
    let mut out = Vec::new();
    let mut bytes = 0usize;
    while let Some(row) = rows.next().map_err(map_err)? {
        if out.len() as u32 >= bounds.max_rows {
            return Err(EngineError::TooLarge);
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
            if bytes > bounds.max_bytes {
                return Err(EngineError::TooLarge);
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
    Ok(Fetched {
        rows: Rows { columns, rows: out },
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_is_charged_once_and_only_when_the_budget_has_it() {
        const BUDGET: u64 = 32 << 20;
        let share = BUDGET / 4;
        // Just enough left: charged once, however many connections follow.
        let mut memory = MemoryAccount::new(BUDGET);
        memory.charge(BUDGET - share).unwrap();
        let mut call = CallShare::default();
        let limits = call.take(&mut memory).unwrap();
        assert_eq!(limits.length, (share / 2) as i32);
        assert_eq!(memory.remaining(), 0);
        assert_eq!(call.take(&mut memory).unwrap(), limits);
        assert!(!memory.exceeded());
        // One byte short: refused, and the call is over its memory cap.
        let mut memory = MemoryAccount::new(BUDGET);
        memory.charge(BUDGET - share + 1).unwrap();
        let mut call = CallShare::default();
        assert!(call.take(&mut memory).is_err());
        assert!(call.0.is_none());
        assert!(memory.exceeded());
    }
}
