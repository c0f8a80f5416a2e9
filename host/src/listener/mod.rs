//! What happens to a TCP connection before HTTP sees it: the connection
//! caps (global and per peer address) and the accept loop's handling of
//! failures (back-off when descriptors run out, rate-limited logging).

mod accept;
mod limits;

pub use accept::{AcceptFailures, RateLimitedLog};
pub use limits::{ConnectionGuard, ConnectionLimits, Refused};
