//! The two network operations outbound HTTP needs, behind traits so that a
//! test can answer a name differently each time it is asked (DNS rebinding)
//! or land a connection somewhere other than where it was sent (an
//! interposed path). The server always uses [`Network::system`].

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use tokio::net::TcpStream;

pub type Resolving<'a> = Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send + 'a>>;
pub type Connecting<'a> = Pin<Box<dyn Future<Output = io::Result<TcpStream>> + Send + 'a>>;

/// Turns a host name into addresses. Asked once per outbound request.
pub trait Resolve: Send + Sync {
    fn resolve<'a>(&'a self, host: &'a str) -> Resolving<'a>;
}

/// Opens a TCP connection to one address (never a name).
pub trait Connect: Send + Sync {
    fn connect(&self, addr: SocketAddr) -> Connecting<'_>;
}

/// The operating system's resolver (`getaddrinfo`) and plain TCP.
pub struct System;

impl Resolve for System {
    fn resolve<'a>(&'a self, host: &'a str) -> Resolving<'a> {
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host, 0)).await?;
            Ok(addrs.map(|a| a.ip()).collect())
        })
    }
}

impl Connect for System {
    fn connect(&self, addr: SocketAddr) -> Connecting<'_> {
        Box::pin(TcpStream::connect(addr))
    }
}

/// The resolver and connector one source's outbound requests use.
#[derive(Clone)]
pub struct Network {
    pub resolver: Arc<dyn Resolve>,
    pub connector: Arc<dyn Connect>,
}

impl Network {
    pub fn system() -> Self {
        Self {
            resolver: Arc::new(System),
            connector: Arc::new(System),
        }
    }
}

impl Default for Network {
    fn default() -> Self {
        Self::system()
    }
}

impl std::fmt::Debug for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Network")
    }
}
