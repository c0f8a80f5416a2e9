//! What happens to a TCP connection before HTTP sees it: the connection
//! caps (global and per peer address prefix), the accept loop's handling of
//! failures (back-off when descriptors run out, rate-limited logging), and
//! the stream and task wrappers the connection is served through.

pub mod accept;
pub mod limits;
mod self_wakes;
mod yielding_stream;

pub use accept::{AcceptFailures, RateLimitedLog};
pub use limits::{ConnectionGuard, ConnectionLimits, PeerPrefixes, Refused};
pub use self_wakes::{MAX_POLLS_IN_PLACE, repoll_self_wakes};
pub use yielding_stream::YieldingStream;
