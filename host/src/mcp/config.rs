//! The MCP layer's settings: `[list_pagination]`, the result and read
//! bounds, and the wire constants of its answers. `crate::config` composes
//! them into the server's configuration; [`McpConfig`] is what the layer keeps.

use super::http::config::HttpConfig;
use serde::Deserialize;
use std::time::Duration;

/// "The inventory default is 50."
pub const DEFAULT_PAGE_SIZE: u32 = 50;
/// "listPagination.pageSize bounds the combined static and dynamic page count (maximum 100)."
pub const MAX_PAGE_SIZE: u32 = 100;
/// "The tighter byte limit applies; the default is 1 MiB."
pub const DEFAULT_MAX_PAGE_BYTES: usize = 1024 * 1024;
/// Default of `max_application_result_bytes` (the seed's `maxApplicationResultBytes`).
pub const DEFAULT_MAX_APPLICATION_RESULT_BYTES: usize = 1024 * 1024;

/// "authentication failed" lines logged per second, from all clients
/// together; the rest are counted in the next such line (`suppressed`).
/// Anyone can send bad tokens: this bounds what they make the log hold.
pub const MAX_AUTH_FAILURE_LOG_LINES_PER_SECOND: u32 = 10;

/// Cap on the bytes of one `resources/read` result from a guest.
pub const DEFAULT_MAX_READ_BYTES: usize = 4 << 20;

/// `Retry-After` (seconds) of those 429/503 answers.
pub const RETRY_AFTER_S: u64 = 1;

/// The seed's `listPagination`.
#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ListPagination {
    /// The seed's `listPagination.pageSize`: entries per page, static and dynamic combined.
    #[schemars(range(min = 1, max = MAX_PAGE_SIZE))]
    pub page_size: u32,
    /// The seed's `listPagination.maxPageBytes`: bytes of the serialized JSON-RPC result.
    #[schemars(range(min = 1024))]
    pub max_page_bytes: usize,
}

impl Default for ListPagination {
    fn default() -> Self {
        Self {
            page_size: DEFAULT_PAGE_SIZE,
            max_page_bytes: DEFAULT_MAX_PAGE_BYTES,
        }
    }
}

/// What [`ListPagination::check`] refuses.
#[derive(Debug, thiserror::Error)]
pub enum PaginationProblem {
    #[error("list_pagination.page_size must be 1..={MAX_PAGE_SIZE}, got {0}")]
    PageSize(u32),
    #[error(
        "list_pagination.max_page_bytes and max_application_result_bytes must be at least 1024"
    )]
    PageBytes,
}

impl ListPagination {
    /// The effective per-page byte bound: "The tighter byte limit applies".
    pub fn byte_limit(&self, max_application_result_bytes: usize) -> usize {
        self.max_page_bytes.min(max_application_result_bytes)
    }

    /// With `max_application_result_bytes`, which bounds every page too.
    pub fn check(&self, max_application_result_bytes: usize) -> Result<(), PaginationProblem> {
        if self.page_size == 0 || self.page_size > MAX_PAGE_SIZE {
            return Err(PaginationProblem::PageSize(self.page_size));
        }
        if self.max_page_bytes < 1024 || max_application_result_bytes < 1024 {
            return Err(PaginationProblem::PageBytes);
        }
        Ok(())
    }
}

/// What the MCP layer reads of the configuration (`Config::mcp` composes
/// it); each field is the key of the same name.
#[derive(Debug, Clone)]
pub struct McpConfig {
    pub http: HttpConfig,
    pub list_pagination: ListPagination,
    pub max_application_result_bytes: usize,
    pub max_read_bytes: usize,
    /// Server instructions sent on initialize / discover.
    pub instructions: Option<String>,
}

impl McpConfig {
    pub fn request_timeout(&self) -> Duration {
        self.http.request_timeout()
    }

    pub fn body_timeout(&self) -> Duration {
        self.http.body_timeout()
    }

    /// The effective per-page byte bound (`ListPagination::byte_limit`).
    pub fn page_byte_limit(&self) -> usize {
        self.list_pagination
            .byte_limit(self.max_application_result_bytes)
    }
}
