//! The PostgreSQL engine of the `sql` capability (`[databases.LABEL]
//! engine = "postgres"`), on `tokio-postgres` with a `deadpool` pool of
//! connections the host makes itself (`connect.rs`) and rustls.
//! (Over 500 lines: the engine's connection, statements and notices share
//! the connection's private state; its tests are in `tests.rs`.)
//!
//! - Pools per source and database ([`PostgresDatabase`] is made once per
//!   grant): no source ever gets a connection another one used. A
//!   connection given back is reset (`DISCARD ALL`: settings, prepared
//!   statements, temporary tables, advisory locks, LISTEN) before it is
//!   pooled again, and closed if that fails.
//! - Every statement is its own transaction, `READ ONLY` on a read-only
//!   grant, with `statement_timeout` (`SET LOCAL`) set to the call's
//!   remaining time plus a backstop margin (the host's timer ends the call).
//! - When the call is out of time, cancelled, its future is dropped, or a
//!   result is cut short (too large), the statement is cancelled on the
//!   server (a cancel request) and that connection is closed, never reused.
//! - Rows are counted while they stream in, against max-rows and the byte
//!   cap the caller gives (the database's and the call's memory budget):
//!   past either the statement stops before more is copied. Every row is
//!   charged at least [`ROW_OVERHEAD`]. Under the driver, the socket's bytes
//!   are counted as they arrive (`wire.rs`): a statement's driver buffer and
//!   kept rows together stay within its cap plus [`wire::PG_WIRE_SLACK`],
//!   whatever a row, error or notice looks like; the slack is charged to
//!   the call's memory budget for each connection it opens.
//! - NOTICEs reach the log as guest output (`notices.rs`); every string from
//!   the database in a log line is `GuestText`.
//! - The role is checked at startup and on each new connection (`roles.rs`);
//!   a caller holds at most its fair share of the pool (`shares.rs`).
//! - Placeholders: the guest's `?N` become `$N` ([`placeholders`]).
//!
//! - A database that is down costs a call at most the connect timeout (or
//!   its remaining time); the guest gets `failed("database unavailable")`,
//!   the log a line, and `emseepea_database_unavailable_total` a count.
//!
//! (Over 500 lines: one statement's path, checkout within the caller's share,
//! transaction, metered row reading, cancel guard and reset, reads best as
//! one sequence; the pieces with one job each live in the files above.)

#[cfg(test)]
pub(crate) mod checklist;
pub mod config;
pub mod connect;
pub mod errors;
pub mod notices;
pub mod placeholders;
pub mod roles;
pub mod shares;
pub mod values;
pub mod wire;

pub use config::{PostgresConfig, PostgresConfigError};
pub use errors::PgError;

use super::engine::{Bounds, EngineError, Fetched, OpenCall, Rows, StatementCall, Value};

use crate::guest_text::GuestText;
use crate::runtime::CallerKey;
use crate::runtime::capabilities::sql::postgres::config::{
    PG_CANCEL_TIMEOUT, PG_CONNECT_TIMEOUT, PG_POOL_WAIT_MAX, PG_RESET_TIMEOUT,
};
use crate::telemetry::metrics::{DatabaseLabels, metrics};
use connect::{Canceller, ConnectError, Manager};
use deadpool::managed::{PoolError, Timeouts};
use futures_util::TryStreamExt;
use shares::{ShareGuard, Shares};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use wire::PG_WIRE_SLACK;

type Pool = deadpool::managed::Pool<Manager>;
type Object = deadpool::managed::Object<Manager>;

/// Bytes charged per row on top of its values (a row with no columns is
/// not free: the host keeps a row for it).
pub const ROW_OVERHEAD: usize = 24;

/// One database as one source sees it: its own pool.
pub struct PostgresDatabase {
    pub label: String,
    pool: Pool,
    shares: Arc<Shares>,
    read_only: bool,
}

/// The engine's pool as the `sql` capability holds it (one per source and
/// database).
#[derive(Debug, Clone)]
pub struct PostgresPool(Arc<PostgresDatabase>);

impl PostgresPool {
    pub fn new(
        label: String,
        config: &PostgresConfig,
        read_only: bool,
    ) -> Result<Self, PostgresConfigError> {
        PostgresDatabase::new(label, config, read_only).map(|db| Self(Arc::new(db)))
    }

    pub fn database(&self) -> &Arc<PostgresDatabase> {
        &self.0
    }

    pub async fn open(&self, call: OpenCall<'_>) -> Result<PgConnection, EngineError> {
        // The connection's buffer beyond the rows a statement keeps (those
        // are charged as they are returned): charged before it exists.
        if call.memory.charge(PG_WIRE_SLACK as u64).is_err() {
            tracing::warn!(source = %call.source, request_id = %call.request_id, database = %self.0.label, "no memory budget left for a postgres connection");
            return Err(EngineError::TooLarge);
        }
        Ok(self
            .0
            .open(
                call.source,
                call.caller,
                call.request_id,
                call.deadline,
                call.cancel,
            )
            .await?)
    }
}

impl From<PgError> for EngineError {
    fn from(e: PgError) -> Self {
        match e {
            PgError::Unavailable => EngineError::Unavailable,
            PgError::Interrupted => EngineError::Interrupted,
            PgError::Deadline => EngineError::Deadline,
            PgError::TooLarge => EngineError::TooLarge,
            PgError::Failed(m) => EngineError::Failed(m.into()),
        }
    }
}

impl std::fmt::Debug for PostgresDatabase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the connection config: it can hold a password.
        f.debug_struct("PostgresDatabase")
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

impl PostgresDatabase {
    /// A new pool of `config` (no connection is made yet: a database that
    /// is down does not stop the server from starting).
    pub fn new(
        label: String,
        config: &PostgresConfig,
        read_only: bool,
    ) -> Result<Self, PostgresConfigError> {
        let resolved = config.resolve()?;
        let manager = Manager {
            pg: resolved.pg,
            tls: resolved.tls,
            allow_privileged_role: config.allow_privileged_role,
            notices: notices::SourceNotices::new(label.clone()),
        };
        let pool = Pool::builder(manager)
            .max_size(config.pool_size)
            .runtime(deadpool::Runtime::Tokio1)
            .build()
            .expect("a pool with a runtime and no hooks always builds");
        Ok(Self {
            label,
            pool,
            shares: Shares::new(config.pool_size),
            read_only,
        })
    }

    /// A connection for one call of `source` (request `request_id`, for
    /// the log), waiting at most until `deadline`.
    pub async fn open(
        self: &Arc<Self>,
        source: &Arc<str>,
        caller: &CallerKey,
        request_id: &Arc<str>,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<PgConnection, PgError> {
        let (client, share) = self
            .checkout(source, caller, request_id, deadline, cancel)
            .await?;
        Ok(PgConnection {
            db: self.clone(),
            source: source.clone(),
            caller: caller.clone(),
            request_id: request_id.clone(),
            client: Some(client),
            share: Some(share),
            poisoned: Arc::new(AtomicBool::new(false)),
        })
    }

    /// A connection within `caller`'s share of the pool.
    async fn checkout(
        &self,
        source: &Arc<str>,
        caller: &CallerKey,
        request_id: &Arc<str>,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<(Object, ShareGuard), PgError> {
        let remaining = remaining(deadline)?;
        let wait = PG_POOL_WAIT_MAX.min(remaining);
        let get = async {
            let share = self
                .shares
                .enter(caller, Instant::now() + wait)
                .await
                .map_err(|_| {
                    let why = "the caller held its share of the pool until the wait ended";
                    self.unavailable(source, request_id, "caller_share", why)
                })?;
            let timeouts = Timeouts {
                wait: Some(wait),
                create: Some(PG_CONNECT_TIMEOUT.min(remaining)),
                recycle: Some(PG_RESET_TIMEOUT.min(remaining)),
            };
            let client = self
                .pool
                .timeout_get(&timeouts)
                .await
                .map_err(|e| self.pool_error(source, request_id, e))?;
            client.notices.begin(source, request_id);
            Ok((client, share))
        };
        tokio::select! {
            got = get => got,
            _ = tokio::time::sleep_until(deadline.into()) => Err(PgError::Deadline),
            _ = cancel.cancelled() => Err(PgError::Interrupted),
        }
    }

    fn pool_error(&self, source: &str, request_id: &str, e: PoolError<ConnectError>) -> PgError {
        let reason = match &e {
            PoolError::Timeout(deadpool::managed::TimeoutType::Wait) => "pool_busy",
            PoolError::Backend(ConnectError::Role(_)) => "role",
            _ => "connect",
        };
        self.unavailable(source, request_id, reason, &e.to_string())
    }

    fn unavailable(
        &self,
        source: &str,
        request_id: &str,
        reason: &'static str,
        error: &str,
    ) -> PgError {
        // The server's text at connect (a FATAL) is not ours: escaped.
        let error = GuestText::new(error);
        if reason == "role" {
            tracing::error!(source, request_id, database = %self.label, reason, error = ?error, "postgres database unavailable: its role is refused");
        } else {
            tracing::warn!(
                source,
                request_id,
                database = %self.label,
                reason,
                error = ?error,
                "postgres database unavailable"
            );
        }
        metrics()
            .database_unavailable
            .get_or_create(&DatabaseLabels {
                source: source.to_owned(),
                database: self.label.clone(),
                reason,
            })
            .inc();
        PgError::Unavailable
    }
}

/// At startup (and in `emseepea check`): the role of `config`, checked once
/// if the database answers now (every new connection is checked anyway).
/// `allow_privileged_role = true` is logged at WARN, whatever the role.
pub async fn verify(label: &str, config: &PostgresConfig) -> Result<(), roles::PrivilegedRole> {
    let Ok(resolved) = config.resolve() else {
        // Refused by `engine::check` already.
        return Ok(());
    };
    let manager = Manager {
        pg: resolved.pg,
        tls: resolved.tls,
        allow_privileged_role: true,
        notices: notices::SourceNotices::new(label.to_owned()),
    };
    let checked = match tokio::time::timeout(PG_CONNECT_TIMEOUT, manager.connect_unchecked()).await
    {
        Ok(Ok(connection)) => match roles::check(&connection.client).await {
            Ok(()) => Ok(()),
            Err(roles::RoleCheckError::Privileged(p)) => Err(Some(p)),
            Err(e) => {
                unchecked(label, &e.to_string());
                Err(None)
            }
        },
        Ok(Err(e)) => {
            unchecked(label, &e.to_string());
            Err(None)
        }
        Err(_) => {
            unchecked(label, "timed out");
            Err(None)
        }
    };
    match checked {
        _ if config.allow_privileged_role => {
            let reasons = match &checked {
                Ok(()) => "none now".to_owned(),
                Err(Some(p)) => p.reasons.join(", "),
                Err(None) => "not known".to_owned(),
            };
            tracing::warn!(database = label, request_id = "startup", privileges = %reasons, "allow_privileged_role = true: every guest granted this database may do what its role can");
            Ok(())
        }
        Err(Some(privileged)) => Err(privileged),
        Ok(()) | Err(None) => Ok(()),
    }
}

fn unchecked(label: &str, error: &str) {
    tracing::warn!(database = label, request_id = "startup", error = ?GuestText::new(error), "postgres role not checked at startup (every new connection is checked)");
}

fn remaining(deadline: Instant) -> Result<Duration, PgError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(PgError::Deadline)
    } else {
        Ok(left)
    }
}

/// A connection a guest call holds; given back (reset) when dropped.
pub struct PgConnection {
    db: Arc<PostgresDatabase>,
    source: Arc<str>,
    caller: CallerKey,
    /// The request whose call holds the connection (its statements' log
    /// lines carry it); [`PgConnection::query`] and
    /// [`PgConnection::execute`] take it from each statement's call.
    request_id: Arc<str>,
    client: Option<Object>,
    /// The caller's hold on its share of the pool, given back with `client`.
    share: Option<ShareGuard>,
    /// Set when a cancel request was sent on this connection: it may still
    /// land on whatever runs next there, so the connection is closed.
    poisoned: Arc<AtomicBool>,
}

impl PgConnection {
    /// The engine interface's query: its rows and the bytes they were charged.
    pub async fn query(
        &mut self,
        sql: String,
        params: Vec<Value>,
        bounds: Bounds,
        call: StatementCall<'_>,
    ) -> Result<Fetched, EngineError> {
        self.request_id = call.request_id.clone();
        let (rows, bytes) = self
            .query_rows(&sql, &params, bounds, call.deadline, call.cancel)
            .await?;
        Ok(Fetched { rows, bytes })
    }

    /// The engine interface's execute: the number of changed rows.
    pub async fn execute(
        &mut self,
        sql: String,
        params: Vec<Value>,
        call: StatementCall<'_>,
    ) -> Result<u64, EngineError> {
        self.request_id = call.request_id.clone();
        Ok(self
            .execute_rows(&sql, &params, call.deadline, call.cancel)
            .await?)
    }

    /// Run one query; its rows and the bytes they were charged.
    pub async fn query_rows(
        &mut self,
        sql: &str,
        params: &[Value],
        bounds: Bounds,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<(Rows, usize), PgError> {
        let at = At::of(self);
        // The statement's allowance on the wire: its rows' bound plus the slack.
        let allowance = bounds.max_bytes.saturating_add(PG_WIRE_SLACK);
        self.statement(
            sql,
            params,
            allowance,
            deadline,
            cancel,
            async move |tx, stmt, params, meter| {
                read_rows(tx, stmt, params, bounds, meter, &at).await
            },
        )
        .await
    }

    /// Run one statement that returns no rows; the number of changed rows.
    pub async fn execute_rows(
        &mut self,
        sql: &str,
        params: &[Value],
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<u64, PgError> {
        let at = At::of(self);
        self.statement(
            sql,
            params,
            PG_WIRE_SLACK,
            deadline,
            cancel,
            async move |tx, stmt, params, _| {
                tx.execute_raw(stmt, params.iter().map(values::Param))
                    .await
                    .map_err(|e| Finished(at.classify(&e)))
            },
        )
        .await
    }

    /// The common part: a transaction with the call's timeout around `work`,
    /// bounded by the deadline and cancellation, cancelled on the server
    /// when it does not finish.
    async fn statement<T>(
        &mut self,
        sql: &str,
        params: &[Value],
        allowance: usize,
        deadline: Instant,
        cancel: &CancellationToken,
        work: impl AsyncFnOnce(
            &tokio_postgres::Transaction<'_>,
            &tokio_postgres::Statement,
            &[Value],
            &wire::Meter,
        ) -> Result<T, Stopped>,
    ) -> Result<T, PgError> {
        let sql = placeholders::translate(sql).map_err(|e| {
            tracing::warn!(database = %self.db.label, request_id = %self.request_id, error = %e, "postgres statement refused");
            PgError::Failed("use ?N placeholders")
        })?;
        let left = remaining(deadline)?;
        if self.poisoned.load(Ordering::Relaxed) {
            // The last statement was cancelled: close that connection, take another.
            if let Some(old) = self.client.take() {
                drop(Object::take(old));
            }
            self.share = None;
            self.poisoned = Arc::new(AtomicBool::new(false));
        }
        let at = At::of(self);
        let read_only = self.db.read_only;
        let client = match self.client.take() {
            Some(client) => client,
            None => {
                let (client, share) = self
                    .db
                    .checkout(
                        &self.source,
                        &self.caller,
                        &self.request_id,
                        deadline,
                        cancel,
                    )
                    .await?;
                self.share = Some(share);
                client
            }
        };
        let pooled = &mut **self.client.insert(client);
        let meter = pooled.meter.clone();
        let mut guard = CancelOnDrop {
            canceller: Some(pooled.canceller()),
            poisoned: self.poisoned.clone(),
            at: at.clone(),
        };
        let client = &mut pooled.client;
        meter.arm(allowance);
        let meter_ref = &*meter;
        let run = async {
            let fail = |e: tokio_postgres::Error| Finished(at.classify(&e));
            let tx = client
                .build_transaction()
                .read_only(read_only)
                .start()
                .await
                .map_err(fail)?;
            // Whole milliseconds (0 would mean no timeout).
            let ms = (left + STATEMENT_TIMEOUT_BACKSTOP)
                .as_millis()
                .clamp(1, i32::MAX as u128);
            tx.batch_execute(&format!("SET LOCAL statement_timeout = {ms}"))
                .await
                .map_err(fail)?;
            let stmt = tx.prepare(&sql).await.map_err(fail)?;
            if stmt.params().len() != params.len() {
                return Err(Finished(PgError::Failed("wrong number of parameters")));
            }
            let out = work(&tx, &stmt, params, meter_ref).await?;
            tx.commit().await.map_err(fail)?;
            Ok(out)
        };
        let outcome = tokio::select! {
            outcome = run => outcome,
            _ = tokio::time::sleep_until(deadline.into()) => return Err(PgError::Deadline),
            _ = cancel.cancelled() => return Err(PgError::Interrupted),
        };
        // Past its allowance the connection was closed under the statement:
        // whatever the driver made of that, the result was too large.
        if meter.is_over() {
            tracing::warn!(database = %at.database, request_id = %at.request_id, "postgres statement past its byte bound: connection closed");
            return Err(PgError::TooLarge);
        }
        meter.arm(PG_WIRE_SLACK);
        match outcome {
            Ok(out) => {
                guard.disarm();
                Ok(out)
            }
            // The server is done with the statement.
            Err(Finished(e)) => {
                guard.disarm();
                Err(e)
            }
            // Cut short while rows still came: the guard cancels it.
            Err(Unfinished(e)) => Err(e),
        }
    }
}

/// How long after the call's deadline the server's own `statement_timeout`
/// fires. The host's deadline timer ends the call (and the cancel guard stops
/// the statement); the server's timeout is only the backstop for a cancel
/// request that never arrives, so it must never win the race: a server-side
/// stop at the deadline would reach the guest as "interrupted" instead of the
/// call's deadline trap.
const STATEMENT_TIMEOUT_BACKSTOP: Duration = Duration::from_millis(500);

/// Where a statement runs, for its log lines: the database and the request.
#[derive(Clone)]
struct At {
    database: String,
    request_id: Arc<str>,
}

impl At {
    fn of(conn: &PgConnection) -> At {
        At {
            database: conn.db.label.clone(),
            request_id: conn.request_id.clone(),
        }
    }

    fn classify(&self, e: &tokio_postgres::Error) -> PgError {
        errors::classify(e, &self.database, &self.request_id)
    }
}

/// How `work` failed: whether the server still runs the statement.
enum Stopped {
    Finished(PgError),
    Unfinished(PgError),
}
use Stopped::{Finished, Unfinished};

async fn read_rows(
    tx: &tokio_postgres::Transaction<'_>,
    stmt: &tokio_postgres::Statement,
    params: &[Value],
    bounds: Bounds,
    meter: &wire::Meter,
    at: &At,
) -> Result<(Rows, usize), Stopped> {
    let columns: Vec<String> = stmt.columns().iter().map(|c| c.name().to_owned()).collect();
    let types: Vec<_> = stmt.columns().iter().map(|c| c.type_().clone()).collect();
    for ty in &types {
        if let Err(e) = values::check_column(ty) {
            // The type's name is the database's (a writable grant names its own types).
            tracing::warn!(database = at.database, request_id = %at.request_id, error = ?GuestText::new(&e.to_string()), "postgres column refused");
            return Err(Finished(PgError::Failed("unsupported column type")));
        }
    }
    let fail = |e: tokio_postgres::Error| Unfinished(at.classify(&e));
    let stream = tx
        .query_raw(stmt, params.iter().map(values::Param))
        .await
        .map_err(|e| Finished(at.classify(&e)))?;
    let mut stream = std::pin::pin!(stream);
    let mut rows = Vec::new();
    let mut bytes = 0usize;
    while let Some(row) = stream.as_mut().try_next().await.map_err(fail)? {
        if rows.len() as u64 >= u64::from(bounds.max_rows) {
            return Err(Unfinished(PgError::TooLarge));
        }
        // Every row costs at least its overhead, whatever its columns.
        let row_start = bytes;
        bytes += ROW_OVERHEAD;
        // The row's message on the wire: tag, length, count, and per value
        // a length and the payload.
        let mut wire_bytes = 7;
        if bytes > bounds.max_bytes {
            return Err(Unfinished(PgError::TooLarge));
        }
        let mut values = Vec::with_capacity(types.len());
        for (i, ty) in types.iter().enumerate() {
            let raw: values::Raw<'_> = row.try_get(i).map_err(fail)?;
            // Count before copying: an oversized result is refused, not allocated.
            bytes += raw.charge(ty);
            wire_bytes += 4 + raw.0.map_or(0, <[u8]>::len);
            if bytes > bounds.max_bytes {
                return Err(Unfinished(PgError::TooLarge));
            }
            values.push(raw.decode(ty).map_err(|e| {
                tracing::warn!(database = at.database, request_id = %at.request_id, error = ?GuestText::new(&e.to_string()), "postgres value not decodable");
                Unfinished(PgError::Failed("unsupported column value"))
            })?);
        }
        // The row left the driver's buffer and is held as values now.
        meter.settle(wire_bytes, bytes - row_start);
        rows.push(values);
    }
    Ok((Rows { columns, rows }, bytes))
}

impl Drop for PgConnection {
    fn drop(&mut self) {
        let share = self.share.take();
        let Some(client) = self.client.take() else {
            return;
        };
        client.notices.end();
        if self.poisoned.load(Ordering::Relaxed) {
            drop(Object::take(client));
            return;
        }
        let database = self.db.label.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(reset(client, share, database));
            }
            Err(_) => drop(Object::take(client)),
        }
    }
}

/// `DISCARD ALL`, then back to the pool; closed if the reset fails. The
/// caller's share is given back only then, with the connection.
async fn reset(client: Object, share: Option<ShareGuard>, database: String) {
    client.meter.arm(PG_WIRE_SLACK);
    let done = tokio::time::timeout(PG_RESET_TIMEOUT, client.client.batch_execute("DISCARD ALL"));
    match done.await {
        Ok(Ok(())) => drop(client),
        outcome => {
            let error = match outcome {
                Ok(Err(e)) => e.to_string(),
                _ => "timed out".into(),
            };
            tracing::warn!(database, error = ?GuestText::new(&error), "postgres connection not reset: closed");
            drop(Object::take(client));
        }
    }
    drop(share);
}

/// Sends a cancel request for the connection's running statement unless
/// disarmed, and marks the connection as not reusable.
struct CancelOnDrop {
    canceller: Option<Canceller>,
    poisoned: Arc<AtomicBool>,
    at: At,
}

impl CancelOnDrop {
    fn disarm(&mut self) {
        self.canceller = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(canceller) = self.canceller.take() else {
            return;
        };
        self.poisoned.store(true, Ordering::Relaxed);
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let At {
            database,
            request_id,
        } = self.at.clone();
        rt.spawn(async move {
            let sent = tokio::time::timeout(PG_CANCEL_TIMEOUT, canceller.cancel()).await;
            match sent {
                Ok(Ok(())) => {
                    tracing::info!(database, %request_id, "postgres statement cancelled on the server")
                }
                Ok(Err(e)) => {
                    tracing::warn!(database, %request_id, error = %e, "postgres cancel request failed")
                }
                Err(_) => {
                    tracing::warn!(database, %request_id, "postgres cancel request timed out")
                }
            }
        });
    }
}

#[cfg(test)]
mod tests;
