//! The limits of one guest call and the typed ways a call can end badly.

use super::bindings::emseepea::inventory::types::SourceError;
use crate::guest_text::GuestText;
use crate::runtime::config::BudgetConfig;
use std::time::{Duration, Instant};

/// The limits one guest call runs under.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Fuel: when it runs out the guest traps.
    pub fuel: u64,
    /// The guest is stopped at this instant: the request's deadline capped
    /// by the source's `max_duration_ms`, counted from when the call got its
    /// slot (so waiting for one does not shorten the guest's own time).
    pub deadline: Instant,
    /// Cap on all linear memories of the instance plus host buffers charged to it.
    pub memory_bytes: u64,
}

impl Budget {
    pub fn new(limits: &BudgetConfig, request_deadline: Instant) -> Self {
        let cap = Instant::now() + Duration::from_millis(limits.max_duration_ms);
        Budget {
            fuel: limits.fuel,
            deadline: request_deadline.min(cap),
            memory_bytes: limits.memory_bytes,
        }
    }
}

/// A failure the guest reported itself (`source-error`). Messages are for
/// the log only, and go there as `GuestText` (escaped, bounded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceFailure {
    NotFound,
    Unavailable(String),
    Failed(String),
}

impl From<SourceError> for SourceFailure {
    fn from(e: SourceError) -> Self {
        match e {
            SourceError::NotFound => SourceFailure::NotFound,
            SourceError::Unavailable(m) => SourceFailure::Unavailable(m),
            SourceError::Failed(m) => SourceFailure::Failed(m),
        }
    }
}

impl SourceFailure {
    /// The WIT case name.
    pub fn kind(&self) -> &'static str {
        match self {
            SourceFailure::NotFound => "not-found",
            SourceFailure::Unavailable(_) => "unavailable",
            SourceFailure::Failed(_) => "failed",
        }
    }

    /// The guest's message (empty for not-found).
    pub fn message(&self) -> &str {
        match self {
            SourceFailure::NotFound => "",
            SourceFailure::Unavailable(m) | SourceFailure::Failed(m) => m,
        }
    }
}

impl std::fmt::Display for SourceFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceFailure::NotFound => f.write_str("not-found"),
            other => write!(f, "{}: {:?}", other.kind(), GuestText::new(other.message())),
        }
    }
}

/// How a guest call failed. Each variant is logged with the source name;
/// clients only ever see a generic error (except `Source(NotFound)` on read,
/// which becomes the protocol's not-found).
#[derive(Debug, thiserror::Error)]
pub enum GuestError {
    #[error("fuel exhausted")]
    FuelExhausted,
    #[error("deadline exceeded")]
    DeadlineExceeded,
    #[error("memory cap of {0} bytes exceeded")]
    MemoryCap(u64),
    #[error("stack overflow")]
    StackOverflow,
    #[error("trap: {:?}", GuestText::new(.0))]
    Trap(String),
    #[error("cancelled")]
    Cancelled,
    #[error("invalid result: {:?}", GuestText::new(.0))]
    InvalidResult(String),
    /// A `read` result over `max_read_bytes`, refused while lifting.
    #[error("read result of at least {bytes} bytes is over the limit of {limit}")]
    ResultTooLarge { bytes: usize, limit: usize },
    #[error("instantiation failed: {:?}", GuestText::new(.0))]
    Instantiate(String),
    #[error("source error: {0}")]
    Source(SourceFailure),
    /// No slot in the call pool within the bounded wait: the guest never ran.
    #[error("no guest slot: {0}")]
    Overloaded(super::slots::Overload),
}

impl GuestError {
    /// The `outcome` label of `emseepea_guest_calls_total`: a coarser set
    /// than `kind` (ok, fuel, deadline, memory, trap, cancelled,
    /// invalid_result, source_error).
    pub fn outcome(&self) -> &'static str {
        match self {
            GuestError::FuelExhausted => "fuel",
            GuestError::DeadlineExceeded => "deadline",
            GuestError::MemoryCap(_) => "memory",
            GuestError::StackOverflow | GuestError::Trap(_) | GuestError::Instantiate(_) => "trap",
            GuestError::Cancelled => "cancelled",
            GuestError::InvalidResult(_) | GuestError::ResultTooLarge { .. } => "invalid_result",
            GuestError::Source(_) => "source_error",
            GuestError::Overloaded(_) => "overloaded",
        }
    }

    /// A short stable name for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            GuestError::FuelExhausted => "fuel_exhausted",
            GuestError::DeadlineExceeded => "deadline",
            GuestError::MemoryCap(_) => "memory_cap",
            GuestError::StackOverflow => "stack_overflow",
            GuestError::Trap(_) => "trap",
            GuestError::Cancelled => "cancelled",
            GuestError::InvalidResult(_) => "invalid_result",
            GuestError::ResultTooLarge { .. } => "result_too_large",
            GuestError::Instantiate(_) => "instantiate",
            GuestError::Source(_) => "source_error",
            GuestError::Overloaded(_) => "overloaded",
        }
    }
}

/// Raised from the epoch callback when the deadline passes.
#[derive(Debug, thiserror::Error)]
#[error("guest deadline exceeded")]
pub(crate) struct DeadlineTrap;

/// Raised from the resource limiter when the memory cap would be exceeded.
#[derive(Debug, thiserror::Error)]
#[error("guest memory cap exceeded")]
pub struct MemoryCapTrap;
