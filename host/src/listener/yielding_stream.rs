//! The accepted TCP stream as hyper sees it: after each write that went to
//! the socket, the worker may give a peer on its CPU a turn
//! (`workers::after_response_write`, `[workers] yield_after_us`).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

pub struct YieldingStream(TcpStream);

impl YieldingStream {
    pub fn new(stream: TcpStream) -> Self {
        Self(stream)
    }
}

/// Whether a write's outcome put bytes on the socket.
fn wrote<T>(poll: &Poll<io::Result<T>>) -> bool {
    matches!(poll, Poll::Ready(Ok(_)))
}

impl AsyncRead for YieldingStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for YieldingStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.0).poll_write(cx, buf);
        if wrote(&poll) {
            crate::workers::after_response_write();
        }
        poll
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.0).poll_write_vectored(cx, bufs);
        if wrote(&poll) {
            crate::workers::after_response_write();
        }
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
