//! What one call's outbound requests may hold of the host: a place under
//! the call's in-flight bound (`[handles] http_requests`) and host memory
//! charged to the call's `memory_bytes`: a fixed allowance per request for
//! the connection's buffers ([`REQUEST_BUFFER_BYTES`], which also caps
//! hyper's read buffer), and the request body, frame by frame as it arrives
//! and before it is kept.

use crate::runtime::capabilities::handles::Held;
use crate::runtime::host_state::MemoryAccount;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};
use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use wasmtime_wasi_http::{Error, WasiBody};

/// Host memory charged per request in flight: the connection's read
/// buffer (hyper's `max_buf_size`, so the response head must fit in it) and
/// its bookkeeping.
pub const REQUEST_BUFFER_BYTES: usize = 64 << 10;

/// Bytes charged to a call's memory account, given back when dropped.
pub struct Charge {
    memory: MemoryAccount,
    bytes: u64,
}

impl Charge {
    pub fn new(memory: MemoryAccount) -> Self {
        Self { memory, bytes: 0 }
    }

    /// Charge `bytes` more; `false` (nothing charged) past the budget.
    pub fn add(&mut self, bytes: usize) -> bool {
        if self.memory.charge(bytes as u64).is_err() {
            return false;
        }
        self.bytes += bytes as u64;
        true
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.memory.release(self.bytes);
    }
}

/// One request in flight: its place under the call's bound and its
/// buffers' charge, held until the exchange (response body included) ends
/// or is dropped.
pub struct InFlight {
    _held: Held,
    _charge: Charge,
}

impl InFlight {
    /// `None` when the call cannot pay for the request's buffers.
    pub fn new(held: Held, memory: MemoryAccount) -> Option<Self> {
        let mut charge = Charge::new(memory);
        if !charge.add(REQUEST_BUFFER_BYTES) {
            return None;
        }
        Some(Self {
            _held: held,
            _charge: charge,
        })
    }
}

/// Collect a request body of at most `max` bytes, each frame charged to
/// `memory` before it is kept; the frames are sent as they came (no copy)
/// with their total length. The charge lasts as long as the body.
pub async fn collect(
    body: WasiBody,
    max: usize,
    memory: MemoryAccount,
) -> Result<(Chunks, Charge), Error> {
    let mut body = super::capped(body, max, Error::HttpRequestBodySize);
    let mut charge = Charge::new(memory);
    let mut chunks = Chunks::default();
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame?.into_data() else {
            continue; // trailers: not sent (the body goes with its length)
        };
        if !charge.add(data.len()) {
            let asked = chunks.len + data.len();
            return Err(Error::HttpRequestBodySize(Some(asked as u64)));
        }
        chunks.len += data.len();
        chunks.frames.push_back(data);
    }
    Ok((chunks, charge))
}

/// A body of frames already in memory, with its exact length (so it is
/// sent with `content-length`, never chunked).
#[derive(Default)]
pub struct Chunks {
    frames: VecDeque<Bytes>,
    len: usize,
}

impl Body for Chunks {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let next = self.frames.pop_front();
        if let Some(data) = &next {
            self.len -= data.len();
        }
        Poll::Ready(next.map(|data| Ok(Frame::data(data))))
    }

    fn is_end_stream(&self) -> bool {
        self.frames.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.len as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(frames: &[&'static [u8]]) -> WasiBody {
        let frames: Vec<Result<Frame<Bytes>, Error>> = frames
            .iter()
            .map(|f| Ok(Frame::data(Bytes::from_static(f))))
            .collect();
        http_body_util::StreamBody::new(futures_util::stream::iter(frames)).boxed_unsync()
    }

    #[tokio::test]
    async fn a_body_is_charged_while_held_and_refused_past_the_budget() {
        let memory = MemoryAccount::new(10);
        let (chunks, charge) = collect(body(&[b"abcd", b"efgh"]), 100, memory.share())
            .await
            .unwrap();
        assert_eq!(chunks.size_hint().exact(), Some(8));
        assert_eq!(memory.used(), 8);
        drop(charge);
        assert_eq!(memory.used(), 0);
        let refused = collect(body(&[b"abcd", b"efgh", b"ijkl"]), 100, memory.share()).await;
        assert!(matches!(refused, Err(Error::HttpRequestBodySize(Some(12)))));
        assert_eq!(memory.used(), 0, "a refused body's frames are given back");
    }
}
