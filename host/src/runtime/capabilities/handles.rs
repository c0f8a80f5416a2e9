//! Per-call bounds on the handles a guest can hold: each is a host
//! resource (a file descriptor, a socket, a task, a table slot) that the
//! call's memory budget does not see. Defaults below; a source's manifest
//! may set its own in `[handles]`. Past a bound the capability answers with
//! its own error (the guest sees it; the host keeps serving).
//!
//! With these defaults one call holds at most 8 + 16 descriptors of SQL
//! connections and outbound requests (a directory's open files count as
//! table entries), so `max_concurrent_calls` calls stay far below the
//! process's descriptor limit with room for every client connection.

use serde::Deserialize;

/// SQL connections one call may hold open at once (each is a connection
/// and, on SQLite, a file descriptor).
pub const DEFAULT_MAX_SQL_CONNECTIONS: usize = 8;
/// Outbound HTTP requests one call may have in flight (each a socket and a
/// task, from `handle` until its response body is done or dropped).
pub const DEFAULT_MAX_HTTP_REQUESTS: usize = 16;
/// Entries of one call's resource table (every WASI, wasi-http and SQL
/// handle: streams, pollables, fields, open files, connections).
pub const DEFAULT_MAX_TABLE_ENTRIES: usize = 1024;

/// `[handles]` in a source's manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct HandleLimits {
    /// SQL connections open at once per call.
    pub sql_connections: usize,
    /// Outbound HTTP requests in flight per call.
    pub http_requests: usize,
    /// Resource-table entries per call.
    pub table_entries: usize,
}

impl Default for HandleLimits {
    fn default() -> Self {
        Self {
            sql_connections: DEFAULT_MAX_SQL_CONNECTIONS,
            http_requests: DEFAULT_MAX_HTTP_REQUESTS,
            table_entries: DEFAULT_MAX_TABLE_ENTRIES,
        }
    }
}

/// A count of open handles shared by a call and the handles themselves: a
/// [`Held`] is taken per handle and gives its place back when dropped,
/// wherever that happens (a table entry, a task, a connection's I/O).
#[derive(Clone, Debug, Default)]
pub struct HandleCount(std::sync::Arc<std::sync::atomic::AtomicUsize>);

/// One counted handle.
#[derive(Debug)]
pub struct Held(HandleCount);

impl HandleCount {
    /// A place under `max`, or `None` when `max` are held.
    pub fn take(&self, max: usize) -> Option<Held> {
        use std::sync::atomic::Ordering;
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Held(self.clone()))
    }

    pub fn held(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::Acquire)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_gives_places_back_when_they_are_dropped() {
        let count = HandleCount::default();
        let a = count.take(2).unwrap();
        let _b = count.take(2).unwrap();
        assert!(count.take(2).is_none());
        drop(a);
        assert_eq!(count.held(), 1);
        assert!(count.take(2).is_some());
    }

    #[test]
    fn a_manifest_overrides_each_bound() {
        let limits: HandleLimits = toml::from_str("sql_connections = 2").unwrap();
        assert_eq!(limits.sql_connections, 2);
        assert_eq!(limits.http_requests, DEFAULT_MAX_HTTP_REQUESTS);
        assert!(toml::from_str::<HandleLimits>("sockets = 1").is_err());
        // From a source's manifest to every call of that source.
        let config = crate::runtime::capabilities::harness::server_config("");
        let server =
            crate::runtime::capabilities::ServerCapabilities::new(config.sections()).unwrap();
        let manifest: crate::runtime::config::SourceManifest = toml::from_str(
            "[handles]
http_requests = 3
table_entries = 99
",
        )
        .unwrap();
        let grants = server.grant(manifest.asks()).unwrap();
        let call = grants
            .for_call(
                &"s".into(),
                &"r".into(),
                &crate::runtime::CallerKey::new("c"),
                std::time::Instant::now(),
            )
            .unwrap();
        assert_eq!(call.handles.http_requests, 3);
        assert_eq!(call.handles.table_entries, 99);
        assert_eq!(call.handles.sql_connections, DEFAULT_MAX_SQL_CONNECTIONS);
        let state = crate::runtime::host_state::HostState::new(
            call,
            &crate::runtime::budget::Budget::new(&Default::default(), std::time::Instant::now()),
            Default::default(),
        );
        assert_eq!(state.table.max_capacity(), 99);
    }
}
