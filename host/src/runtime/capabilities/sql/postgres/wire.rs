//! Bytes from the server, counted on the socket as they arrive.
//!
//! tokio-postgres reads whole protocol messages before anyone sees them, and
//! its codec has no size limit: one `DataRow` of 500 MB, or an error or
//! notice text as large, would be buffered whole before a row is counted.
//! So the socket under the driver (under TLS too: what is counted is what
//! arrives) is wrapped in a [`Metered`] stream that takes every byte it
//! reads from the connection's [`Meter`]. A statement arms the meter with
//! its allowance (its result bound plus [`PG_WIRE_SLACK`]); as rows are
//! consumed, their wire bytes come back and their charged bytes are taken
//! instead ([`Meter::settle`]), so what the host holds for the statement,
//! rows kept plus bytes still in the driver's buffer, stays within the
//! allowance. A read past it fails the socket: the driver closes the
//! connection (never pooled again) and the statement ends as too large.
//!
//! Counting bytes on the socket (rather than parsing message lengths) needs
//! no knowledge of the protocol, works the same under TLS, and bounds every
//! message kind at once: rows, errors, notices, notifications.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// What a statement may receive beyond its result bound, and what a
/// connection may receive between statements (connect, reset, stray
/// notices): row descriptions (1,664 columns of 63-byte names fit), the
/// protocol's small messages, an error text. A backend message larger than
/// this (outside the rows the bound admits) closes the connection.
pub const PG_WIRE_SLACK: usize = 256 << 10;

/// The allowance of bytes one connection may still receive.
#[derive(Debug)]
pub struct Meter {
    left: AtomicI64,
    over: AtomicBool,
}

impl Meter {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            left: AtomicI64::new(PG_WIRE_SLACK as i64),
            over: AtomicBool::new(false),
        })
    }

    /// Start a new allowance of `bytes` (a statement's, or between
    /// statements [`PG_WIRE_SLACK`]).
    pub fn arm(&self, bytes: usize) {
        self.left
            .store(i64::try_from(bytes).unwrap_or(i64::MAX), Ordering::SeqCst);
    }

    /// A row was consumed: its `wire` bytes left the driver's buffer, its
    /// `charged` bytes are held as values now.
    pub fn settle(&self, wire: usize, charged: usize) {
        let delta = wire as i64 - charged as i64;
        self.left.fetch_add(delta, Ordering::SeqCst);
    }

    /// Whether the allowance ran out (the connection was closed for it).
    pub fn is_over(&self) -> bool {
        self.over.load(Ordering::SeqCst)
    }

    /// Take `n` received bytes; false once the allowance is spent.
    fn take(&self, n: usize) -> bool {
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        if self.left.fetch_sub(n, Ordering::SeqCst) - n < 0 {
            self.over.store(true, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// Bytes the next read may bring: the allowance, or one byte once it
    /// is spent, so that running out is noticed as a read (that fails)
    /// rather than as a stalled socket.
    fn room(&self) -> usize {
        usize::try_from(self.left.load(Ordering::SeqCst).max(1)).unwrap_or(usize::MAX)
    }
}

/// The byte stream a connection runs over (TCP or a Unix socket).
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

/// A socket whose reads are taken from a [`Meter`].
pub struct Metered {
    inner: Box<dyn Io>,
    meter: Arc<Meter>,
}

impl Metered {
    pub fn new(inner: Box<dyn Io>, meter: Arc<Meter>) -> Self {
        Self { inner, meter }
    }
}

impl AsyncRead for Metered {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.meter.is_over() {
            return Poll::Ready(Err(over()));
        }
        // Never read more than the allowance has room for: the driver's
        // buffer cannot outgrow it by one large read.
        let room = self.meter.room().min(buf.remaining());
        let mut limited = buf.take(room);
        let start = limited.filled().as_ptr();
        let this = &mut *self;
        std::task::ready!(Pin::new(&mut this.inner).poll_read(cx, &mut limited))?;
        assert_eq!(
            limited.filled().as_ptr(),
            start,
            "the reader kept its buffer"
        );
        let n = limited.filled().len();
        // SAFETY: `limited` wrote (initialised) `n` bytes at the start of
        // `buf`'s unfilled part.
        unsafe { buf.assume_init(n) };
        buf.advance(n);
        if !this.meter.take(n) {
            return Poll::Ready(Err(over()));
        }
        Poll::Ready(Ok(()))
    }
}

fn over() -> io::Error {
    io::Error::other("the server sent more than the statement's byte bound")
}

impl AsyncWrite for Metered {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn reads_stop_at_the_allowance_and_settling_gives_room_back() {
        let (mut tx, rx) = tokio::io::duplex(1 << 20);
        let meter = Meter::new();
        meter.arm(10);
        let mut s = Metered::new(Box::new(rx), meter.clone());
        tokio::io::AsyncWriteExt::write_all(&mut tx, &[7u8; 64])
            .await
            .unwrap();
        let mut buf = vec![0u8; 64];
        // Up to the allowance; then one more byte is read, and fails.
        let n = s.read(&mut buf).await.unwrap();
        assert_eq!(n, 10);
        meter.settle(10, 4);
        let n = s.read(&mut buf).await.unwrap();
        assert_eq!(n, 6);
        assert!(s.read(&mut buf).await.is_err());
        assert!(meter.is_over());
        assert!(s.read(&mut buf).await.is_err(), "stays failed");
    }
}
