//! What happens to a TCP connection before HTTP sees it: the connection
//! caps (global and per peer address) and the accept loop's handling of
//! failures (back-off when descriptors run out, rate-limited logging).

mod accept;
mod limits;
mod self_wakes;

pub use accept::{AcceptFailures, RateLimitedLog};
pub use limits::{ConnectionGuard, ConnectionLimits, Refused};
pub use self_wakes::{MAX_POLLS_IN_PLACE, repoll_self_wakes};
