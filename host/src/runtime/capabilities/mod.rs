//! What a guest may reach, one self-contained module per capability (as
//! Spin keeps one factor per capability and wasmtime's WASI crates one
//! `HasData` view per interface). Each module owns:
//!
//! - its server-config section ([`Capability::Section`]), which it defines
//!   and checks, and of which it is handed only its own part, once at
//!   startup ([`Capability::configure`]): `crate::config` composes the
//!   sections into the server's file and hands them over as [`ServerSections`];
//! - its grant type, resolved per source from its own part of the manifest
//!   ([`Capability::Asked`], [`Capability::grant`]; [`SourceAsks`]);
//! - its per-call state, made fresh for every guest call ([`Capability::call`]);
//! - its linker registration, through a [`CallView`] of its own state plus
//!   the call's resource table, memory account, deadline and cancellation:
//!   a capability never sees another's state;
//! - its unit tests, which drive a real component in-process (`harness`).
//!
//! Adding a capability = its WIT interface, its module, and one line in the
//! [`capabilities!`] list below. Nothing is reachable without a grant.

pub mod config;
pub mod handles;
pub mod http;
pub mod sql;
mod view;
pub mod wasi;

#[cfg(test)]
pub(crate) mod checklist;
#[cfg(test)]
pub(crate) mod harness;

pub use handles::HandleLimits;
pub use view::{CallView, ViewOf};

use super::host_state::HostState;
use std::sync::Arc;
use std::time::Instant;
use wasmtime::component::Linker;

/// Boxed error of one capability, kept whole for the log and for tests.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What one call is, as capabilities need to know it.
#[derive(Clone, Debug)]
pub struct CallInfo {
    /// The source's name in logs.
    pub source: Arc<str>,
    /// The request's id, as its log lines, metrics and traces carry it.
    pub request_id: Arc<str>,
    /// Who is calling (a capability's shared pools give each caller a share).
    pub caller: super::CallerKey,
    pub deadline: Instant,
    /// The source's per-call handle bounds (`[handles]` of its manifest).
    pub handles: HandleLimits,
}

/// One capability: configured once at startup, granted per source, fresh
/// state per call, linked through its own view.
pub trait Capability: Sized + Send + Sync + 'static {
    /// Its name in startup errors (`capability "sql": ...`).
    const NAME: &'static str;
    /// What a source was granted; `Default` is "nothing granted".
    type Grant: Clone + Default + std::fmt::Debug + Send + Sync + 'static;
    /// Per-call state, owned by the call's store.
    type Call: Send + 'static;
    /// The server config defines something this capability cannot serve.
    type DefinitionError: std::error::Error + Send + Sync + 'static;
    /// A manifest grants something the server config does not define.
    type GrantError: std::error::Error + Send + Sync + 'static;
    /// The per-call state could not be made.
    type CallError: std::error::Error + Send + Sync + 'static;

    /// Its section of the server config, as it is handed over (`()`: it has none).
    type Section<'c>: Copy;
    /// What a source's manifest asks of it: its keys of `[grants]`, or its table.
    type Asked<'m>: Copy;

    /// Check and keep this capability's section of the server config.
    fn configure(section: Self::Section<'_>) -> Result<Self, Self::DefinitionError>;
    /// Resolve one source's grant; called once per source.
    fn grant(&self, asked: Self::Asked<'_>) -> Result<Self::Grant, Self::GrantError>;
    /// Fresh state for one call of a source with `grant`.
    fn call(grant: &Self::Grant, call: &CallInfo) -> Result<Self::Call, Self::CallError>;
    /// Link this capability's host functions; `view` picks its state.
    fn add_to_linker(
        linker: &mut Linker<HostState>,
        view: fn(&mut HostState) -> CallView<'_, Self::Call>,
    ) -> wasmtime::Result<()>;
}

/// A capability refused the server config or a source's manifest at startup.
#[derive(Debug, thiserror::Error)]
pub enum CapabilityError {
    #[error("capability {capability:?}: {source}")]
    Definition {
        capability: &'static str,
        source: BoxError,
    },
    #[error("{source}")]
    Grant {
        capability: &'static str,
        source: BoxError,
    },
}

/// A call's capability state could not be made (e.g. a granted directory
/// vanished since startup).
#[derive(Debug, thiserror::Error)]
#[error("capability {capability:?}: {source}")]
pub struct CallSetupError {
    pub capability: &'static str,
    pub source: BoxError,
}

/// Where a registered capability sits in the generated structs.
pub trait Registered: Capability {
    fn pick(c: &mut CallCapabilities) -> &mut Self::Call;
    fn grant_slot(s: &mut SourceCapabilities) -> &mut Self::Grant;
    fn section<'c>(s: &ServerSections<'c>) -> Self::Section<'c>;
    fn asked<'m>(a: &SourceAsks<'m>) -> Self::Asked<'m>;
}

/// The registration list: one line per capability (field name: type).
/// Generates what the rest of the host sees: [`ServerCapabilities`] (one
/// configured value each), [`SourceCapabilities`] (one grant each),
/// [`CallCapabilities`] (one per-call state each) and [`add_to_linker`].
macro_rules! capabilities {
    ($($field:ident: $ty:ty),* $(,)?) => {
        /// Each capability's own section of the server config, as the
        /// composer (`crate::config`) hands them over.
        #[derive(Clone, Copy)]
        pub struct ServerSections<'c> {
            $(pub $field: <$ty as Capability>::Section<'c>,)*
        }

        /// What one source's manifest asks of each capability, and its
        /// handle bounds (`runtime::config::SourceManifest::asks`).
        #[derive(Clone, Copy)]
        pub struct SourceAsks<'m> {
            $(pub $field: <$ty as Capability>::Asked<'m>,)*
            pub handles: HandleLimits,
        }

        /// Every capability, configured from the server config.
        pub struct ServerCapabilities {
            $($field: $ty,)*
        }

        /// A source's granted capabilities, prepared once at startup.
        #[derive(Clone, Debug, Default)]
        pub struct SourceCapabilities {
            $(pub $field: <$ty as Capability>::Grant,)*
            /// The per-call handle bounds every capability keeps.
            pub handles: HandleLimits,
        }

        /// The per-call state of every capability.
        pub struct CallCapabilities {
            $(pub $field: <$ty as Capability>::Call,)*
            /// The call's handle bounds (the resource table's is applied
            /// by `HostState`).
            pub handles: HandleLimits,
        }

        /// Every registered capability's `NAME` (the isolation checklist's
        /// subjects, `checklist.rs`).
        pub const REGISTERED: &[&str] = &[$(<$ty>::NAME),*];

        impl ServerCapabilities {
            pub fn new(sections: ServerSections<'_>) -> Result<Self, CapabilityError> {
                Ok(Self {
                    $($field: <$ty>::configure(sections.$field).map_err(|e| CapabilityError::Definition {
                        capability: <$ty>::NAME,
                        source: Box::new(e),
                    })?,)*
                })
            }

            /// Resolve a manifest's grants. A grant naming something the
            /// server config does not define is an error.
            pub fn grant(&self, asks: SourceAsks<'_>) -> Result<SourceCapabilities, CapabilityError> {
                Ok(SourceCapabilities {
                    $($field: self.$field.grant(asks.$field).map_err(|e| CapabilityError::Grant {
                        capability: <$ty>::NAME,
                        source: Box::new(e),
                    })?,)*
                    handles: asks.handles,
                })
            }
        }

        impl SourceCapabilities {
            /// Per-call state, made fresh for every guest call.
            pub fn for_call(
                &self,
                source: &Arc<str>,
                request_id: &Arc<str>,
                caller: &super::CallerKey,
                deadline: Instant,
            ) -> Result<CallCapabilities, CallSetupError> {
                let info = CallInfo {
                    source: source.clone(),
                    request_id: request_id.clone(),
                    caller: caller.clone(),
                    deadline,
                    handles: self.handles,
                };
                Ok(CallCapabilities {
                    $($field: <$ty>::call(&self.$field, &info).map_err(|e| CallSetupError {
                        capability: <$ty>::NAME,
                        source: Box::new(e),
                    })?,)*
                    handles: self.handles,
                })
            }
        }

        /// Link every capability. Which databases, directories or origins a
        /// call can reach is decided per call from its source's grants.
        pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
            $(<$ty>::add_to_linker(linker, |s| s.view(<$ty as Registered>::pick))?;)*
            Ok(())
        }

        $(impl Registered for $ty {
            fn pick(c: &mut CallCapabilities) -> &mut Self::Call {
                &mut c.$field
            }
            fn grant_slot(s: &mut SourceCapabilities) -> &mut Self::Grant {
                &mut s.$field
            }
            fn section<'c>(s: &ServerSections<'c>) -> Self::Section<'c> {
                s.$field
            }
            fn asked<'m>(a: &SourceAsks<'m>) -> Self::Asked<'m> {
                a.$field
            }
        })*
    };
}

impl ServerCapabilities {
    /// Checks that need a capability's backend (a database's role), once at
    /// startup and in `emseepea check`, after [`ServerCapabilities::new`].
    pub async fn verify(&self) -> Result<(), CapabilityError> {
        self.sql
            .verify()
            .await
            .map_err(|e| CapabilityError::Definition {
                capability: <sql::Sql as Capability>::NAME,
                source: Box::new(e),
            })
    }
}

capabilities! {
    wasi: wasi::Wasi,
    http: http::Http,
    config: config::SourceConfig,
    sql: sql::Sql,
}
