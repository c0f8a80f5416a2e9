//! NOTICEs from the backend into the host log, as guest output is.
//!
//! A guest writes them (`RAISE NOTICE`, `SET client_min_messages = debug5`)
//! so they are guest text: escaped and cut (`GuestText`), tagged with the
//! source, database and request, at most `MAX_GUEST_OUTPUT_LINES_PER_CALL`
//! per connection and call and `MAX_GUEST_OUTPUT_LINES_PER_SECOND` per
//! source and database, the rest counted in one "suppressed" line when the
//! call gives the connection back. The driver is polled for its messages
//! (`connect.rs`), so its own `log` line for a notice is never written.

use crate::guest_text::GuestText;
use crate::runtime::output::{MAX_GUEST_OUTPUT_LINES_PER_CALL, MAX_GUEST_OUTPUT_LINES_PER_SECOND};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One source's allowance for one database (its pool): a fixed
/// one-second window.
#[derive(Debug)]
pub struct SourceNotices {
    database: String,
    window: Mutex<(Instant, usize)>,
}

impl SourceNotices {
    pub fn new(database: String) -> Arc<Self> {
        Arc::new(Self {
            database,
            window: Mutex::new((Instant::now(), 0)),
        })
    }

    fn admit(&self) -> bool {
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if now.saturating_duration_since(w.0) >= Duration::from_secs(1) {
            *w = (now, 0);
        }
        if w.1 >= MAX_GUEST_OUTPUT_LINES_PER_SECOND {
            return false;
        }
        w.1 += 1;
        true
    }
}

/// One connection's notices, charged to the call that holds it.
#[derive(Debug)]
pub struct ConnectionNotices {
    pool: Arc<SourceNotices>,
    call: Mutex<CallNotices>,
}

#[derive(Debug)]
struct CallNotices {
    source: Arc<str>,
    request_id: Arc<str>,
    logged: usize,
    suppressed: usize,
}

impl ConnectionNotices {
    pub fn new(pool: Arc<SourceNotices>) -> Arc<Self> {
        Arc::new(Self {
            pool,
            call: Mutex::new(CallNotices {
                source: "none".into(),
                request_id: "none".into(),
                logged: 0,
                suppressed: 0,
            }),
        })
    }

    /// The connection now serves `request_id` of `source`.
    pub fn begin(&self, source: &Arc<str>, request_id: &Arc<str>) {
        self.end();
        let mut call = self.call.lock().unwrap_or_else(|e| e.into_inner());
        call.source = source.clone();
        call.request_id = request_id.clone();
        call.logged = 0;
    }

    /// The call gives the connection back: one line for what was dropped.
    pub fn end(&self) {
        let (source, request_id, suppressed) = {
            let mut call = self.call.lock().unwrap_or_else(|e| e.into_inner());
            (
                call.source.clone(),
                call.request_id.clone(),
                std::mem::take(&mut call.suppressed),
            )
        };
        if suppressed > 0 {
            tracing::info!(
                target: "guest",
                source = %source,
                request_id = %request_id,
                database = %self.pool.database,
                stream = "postgres-notice",
                suppressed,
                "guest output suppressed"
            );
        }
    }

    /// (logged, suppressed) of the call now holding the connection.
    #[cfg(test)]
    pub fn counts(&self) -> (usize, usize) {
        let call = self.call.lock().unwrap_or_else(|e| e.into_inner());
        (call.logged, call.suppressed)
    }

    /// A notice arrived.
    pub fn notice(&self, notice: &tokio_postgres::error::DbError) {
        let (source, request_id) = {
            let mut call = self.call.lock().unwrap_or_else(|e| e.into_inner());
            if call.logged >= MAX_GUEST_OUTPUT_LINES_PER_CALL || !self.pool.admit() {
                call.suppressed += 1;
                return;
            }
            call.logged += 1;
            (call.source.clone(), call.request_id.clone())
        };
        tracing::info!(
            target: "guest",
            source = %source,
            request_id = %request_id,
            database = %self.pool.database,
            stream = "postgres-notice",
            severity = ?GuestText::new(notice.severity()),
            "{:?}",
            GuestText::new(notice.message())
        );
    }
}
