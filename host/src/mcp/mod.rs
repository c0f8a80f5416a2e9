//! MCP over Streamable HTTP, as one pipeline (`pipeline`), and over stdio
//! through the same pieces (`stdio`): HTTP guards and
//! per-version headers (`http`), authentication (`caller`), JSON-RPC
//! framing (`jsonrpc`), the methods and their policy table (`method`),
//! dispatch (`methods`), one message (`exchange`) or a batch (`batch`), the
//! wire model (`model`), sessions, versions, and the one mapping from layer
//! errors to wire codes (`errors`). Never touches wasmtime types: guest work
//! goes through `inventory`.

pub mod batch;
pub mod caller;
pub mod config;
pub mod errors;
pub mod exchange;
pub mod http;
pub mod jsonrpc;
pub mod method;
pub mod methods;
pub mod model;
pub mod pipeline;
pub mod session;
pub mod stdio;
pub mod version;

use crate::auth::Auth;
use crate::inventory::{CursorKeys, Pager, StaticResources};
use crate::runtime::{Source, SourceSet};
use serde_json::value::RawValue;
use std::sync::Arc;

/// Everything a request may need, built once at startup.
pub struct App {
    pub config: config::McpConfig,
    pub sources: SourceSet,
    pub statics: Arc<StaticResources>,
    pub pager: Pager<Arc<Source>>,
    /// Serialized `ResourceTemplate` objects of the discoverable templates.
    pub template_listing: Vec<Box<RawValue>>,
    pub keys: Arc<CursorKeys>,
    pub auth: Auth,
    pub sessions: session::Sessions,
    /// Whether the listener is on a loopback address (DNS-rebinding rules).
    pub loopback: bool,
    /// `scheme://host[:port]` of the resource URL (a same-origin `Origin`).
    pub resource_origin: String,
    /// Path of the path-suffixed protected-resource metadata document.
    pub metadata_path: String,
}
