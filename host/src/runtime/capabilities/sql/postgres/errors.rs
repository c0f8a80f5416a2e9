//! How a PostgreSQL statement ends badly, in the `sql` interface's terms.
//! The guest learns the kind (and for a refused statement a short,
//! engine-free category); the backend's own message goes to the host log
//! only, as `GuestText` (it can quote guest-controlled SQL and values).

use crate::guest_text::GuestText;
use tokio_postgres::error::SqlState;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PgError {
    /// No connection could be had (the database is down, unreachable,
    /// refused us, or the source's pool stayed busy).
    #[error("database unavailable")]
    Unavailable,
    /// The MCP request was cancelled (or the server gave up the statement).
    #[error("interrupted")]
    Interrupted,
    /// The call's deadline passed: the call ends (the neutral layer traps).
    #[error("deadline exceeded")]
    Deadline,
    /// Past max-rows, the result-bytes cap or the call's memory budget.
    #[error("too large")]
    TooLarge,
    /// The statement was refused; the message is for the guest.
    #[error("{0}")]
    Failed(&'static str),
}

/// Classify a driver error for `database`, logging the detail under the
/// request it happened in.
pub fn classify(e: &tokio_postgres::Error, database: &str, request_id: &str) -> PgError {
    if let Some(db) = e.as_db_error() {
        let code = db.code();
        let kind = from_sqlstate(code);
        tracing::warn!(
            database,
            request_id,
            sqlstate = code.code(),
            detail = ?GuestText::new(db.message()),
            "postgres statement failed"
        );
        return kind;
    }
    if e.is_closed() {
        tracing::warn!(database, request_id, error = %e, "postgres connection lost");
        return PgError::Unavailable;
    }
    // Not from the server: a parameter that does not fit its placeholder
    // (conversion) or a lost connection (I/O).
    let text = e.to_string();
    tracing::warn!(database, request_id, detail = ?GuestText::new(&text), "postgres statement failed in the client");
    if std::error::Error::source(e).is_some_and(|s| s.is::<super::values::ParamMismatch>()) {
        PgError::Failed("a parameter does not fit its placeholder's type")
    } else if std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>()) {
        PgError::Unavailable
    } else {
        PgError::Failed("statement failed")
    }
}

fn from_sqlstate(code: &SqlState) -> PgError {
    match code {
        // Our statement_timeout, or a cancel request.
        c if *c == SqlState::QUERY_CANCELED => PgError::Interrupted,
        c if *c == SqlState::READ_ONLY_SQL_TRANSACTION => {
            PgError::Failed("the database is read-only")
        }
        c if *c == SqlState::INSUFFICIENT_PRIVILEGE => PgError::Failed("permission denied"),
        c if *c == SqlState::OUT_OF_MEMORY || *c == SqlState::PROGRAM_LIMIT_EXCEEDED => {
            PgError::TooLarge
        }
        c => match &c.code()[..2] {
            "42" => PgError::Failed("invalid statement"),
            "23" => PgError::Failed("constraint violation"),
            "22" => PgError::Failed("invalid value"),
            "40" => PgError::Failed("transaction conflict"),
            "08" | "57" | "53" => PgError::Unavailable,
            _ => PgError::Failed("statement failed"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlstates_map_to_engine_free_kinds() {
        assert_eq!(
            from_sqlstate(&SqlState::QUERY_CANCELED),
            PgError::Interrupted
        );
        assert_eq!(
            from_sqlstate(&SqlState::READ_ONLY_SQL_TRANSACTION),
            PgError::Failed("the database is read-only")
        );
        assert_eq!(
            from_sqlstate(&SqlState::UNDEFINED_TABLE),
            PgError::Failed("invalid statement")
        );
        assert_eq!(
            from_sqlstate(&SqlState::SYNTAX_ERROR),
            PgError::Failed("invalid statement")
        );
        assert_eq!(
            from_sqlstate(&SqlState::UNIQUE_VIOLATION),
            PgError::Failed("constraint violation")
        );
        assert_eq!(
            from_sqlstate(&SqlState::ADMIN_SHUTDOWN),
            PgError::Unavailable
        );
        assert_eq!(
            from_sqlstate(&SqlState::PROGRAM_LIMIT_EXCEEDED),
            PgError::TooLarge
        );
    }
}
