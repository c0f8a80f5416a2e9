//! MCP over Streamable HTTP: JSON-RPC framing, protocol versions, sessions,
//! the methods, and the one mapping from layer errors to wire codes. Never
//! touches wasmtime types: guest work goes through `inventory`.

pub mod caller;
pub mod errors;
pub mod jsonrpc;
pub mod methods;
pub mod session;
pub mod transport;
pub mod version;

use crate::auth::Auth;
use crate::config::Config;
use crate::inventory::{CursorKeys, Pager, StaticResources};
use crate::runtime::{Source, SourceSet};
use std::sync::Arc;

/// Everything a request may need, built once at startup.
pub struct App {
    pub config: Config,
    pub sources: SourceSet,
    pub statics: Arc<StaticResources>,
    pub pager: Pager<Arc<Source>>,
    /// Serialized `ResourceTemplate` objects of the discoverable templates.
    pub template_listing: Vec<Vec<u8>>,
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
