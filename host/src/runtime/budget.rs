//! The limits of one guest call and the typed ways a call can end badly.

use crate::config::BudgetConfig;
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

/// A failure the guest reported itself (`source-error`). Messages are for the log only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceFailure {
    NotFound,
    Unavailable(String),
    Failed(String),
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
    #[error("trap: {0}")]
    Trap(String),
    #[error("cancelled")]
    Cancelled,
    #[error("invalid result: {0}")]
    InvalidResult(String),
    #[error("instantiation failed: {0}")]
    Instantiate(String),
    #[error("source error: {0:?}")]
    Source(SourceFailure),
    /// No slot in the call pool within the bounded wait: the guest never ran.
    #[error("no guest slot: {0}")]
    Overloaded(super::slots::Overload),
}

impl GuestError {
    /// A short stable name for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            GuestError::FuelExhausted => "fuel_exhausted",
            GuestError::DeadlineExceeded => "deadline",
            GuestError::MemoryCap(_) => "memory_cap",
            GuestError::StackOverflow => "stack_overflow",
            GuestError::Trap(_) => "trap",
            GuestError::Cancelled => "cancelled",
            GuestError::InvalidResult(_) => "invalid_result",
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
pub(crate) struct MemoryCapTrap;
