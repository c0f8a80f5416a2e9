//! Reading a request body, bounded twice: in bytes (a declared length over
//! the limit is refused before a byte is read; a chunked body is stopped at
//! the limit) and in time (the whole body must arrive within its deadline,
//! however slowly it trickles).

use super::guards::Rejection;
use bytes::Bytes;
use http::header::{self, HeaderMap};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use std::time::Duration;

/// The limits of one body.
#[derive(Clone, Copy, Debug)]
pub struct BodyLimits {
    pub max_bytes: usize,
    pub deadline: Duration,
}

pub async fn read(
    headers: &HeaderMap,
    body: Incoming,
    limits: BodyLimits,
) -> Result<Bytes, Rejection> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limits.max_bytes as u64) {
        return Err(Rejection::PayloadTooLarge);
    }
    let collect = Limited::new(body, limits.max_bytes).collect();
    match tokio::time::timeout(limits.deadline, collect).await {
        Err(_elapsed) => Err(Rejection::BodyTimeout),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e))
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(Rejection::PayloadTooLarge)
        }
        Ok(Err(_)) => Err(Rejection::BodyUnreadable),
    }
}
