//! How the engine's connections are made: the pool's manager.
//!
//! The host opens the socket itself (rather than `Config::connect`) so that
//! it can put the [`Metered`] stream under the driver (TLS included), and
//! drives the connection itself (rather than awaiting it) so that NOTICEs
//! come to [`ConnectionNotices`] instead of the driver's own `log` line.
//! Every new connection's role is checked (`roles.rs`) before a guest gets
//! it, unless the section allows a privileged role.

use super::config::Tls;
use super::notices::{ConnectionNotices, SourceNotices};
use super::roles::{self, RoleCheckError};
use super::wire::{Io, Meter, Metered};
use crate::guest_text::GuestText;
use deadpool::managed::{self, Metrics, RecycleError, RecycleResult};
use std::future::poll_fn;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_postgres::config::Host;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{AsyncMessage, CancelToken, NoTls};

/// Why a new connection was not made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("connect: {0}")]
    Io(#[from] std::io::Error),
    // The server's text (e.g. a FATAL at startup) is not ours: escaped.
    #[error("startup: {}", GuestText::new(&.0.to_string()))]
    Startup(#[from] tokio_postgres::Error),
    #[error("TLS: {0}")]
    Tls(String),
    #[error(transparent)]
    Role(#[from] RoleCheckError),
}

/// One pooled connection: the driver's client, the meter under it, where
/// its notices go, and how to reach its server again (cancel requests).
pub struct PooledConnection {
    pub client: tokio_postgres::Client,
    pub meter: Arc<Meter>,
    pub notices: Arc<ConnectionNotices>,
    target: Target,
    tls: Tls,
    driver: JoinHandle<()>,
}

impl Drop for PooledConnection {
    fn drop(&mut self) {
        // The socket closes with the driver: nothing of it outlives the pool.
        self.driver.abort();
    }
}

impl PooledConnection {
    /// What cancels the statement running on this connection.
    pub fn canceller(&self) -> Canceller {
        Canceller {
            token: self.client.cancel_token(),
            target: self.target.clone(),
            tls: self.tls.clone(),
        }
    }
}

/// Sends a cancel request for one connection's running statement.
pub struct Canceller {
    token: CancelToken,
    target: Target,
    tls: Tls,
}

impl Canceller {
    /// Sent over a new socket of the connection's kind (concrete types: the
    /// driver's cancel future over a boxed stream is not provably `Send`).
    pub async fn cancel(self) -> Result<(), ConnectError> {
        let Canceller { token, target, tls } = self;
        match &target.host {
            Host::Tcp(name) => {
                let io = tokio::net::TcpStream::connect((name.as_str(), target.port)).await?;
                match tls {
                    Tls::Disable => token.cancel_query_raw(io, NoTls).await?,
                    Tls::Require(mut make) => {
                        let tls = MakeTlsConnect::<tokio::net::TcpStream>::make_tls_connect(
                            &mut make, name,
                        )
                        .map_err(|e| ConnectError::Tls(e.to_string()))?;
                        token.cancel_query_raw(io, tls).await?
                    }
                }
            }
            #[cfg(unix)]
            Host::Unix(dir) => {
                let path = dir.join(format!(".s.PGSQL.{}", target.port));
                let io = tokio::net::UnixStream::connect(path).await?;
                // No TLS over a Unix socket (the server refuses it there).
                token.cancel_query_raw(io, NoTls).await?
            }
        }
        Ok(())
    }
}

/// Where one connection went: a host of the config and its port.
#[derive(Clone, Debug)]
struct Target {
    host: Host,
    port: u16,
}

impl Target {
    async fn open(&self) -> std::io::Result<Box<dyn Io>> {
        match &self.host {
            Host::Tcp(name) => {
                let s = tokio::net::TcpStream::connect((name.as_str(), self.port)).await?;
                s.set_nodelay(true)?;
                Ok(Box::new(s))
            }
            #[cfg(unix)]
            Host::Unix(dir) => Ok(Box::new(
                tokio::net::UnixStream::connect(dir.join(format!(".s.PGSQL.{}", self.port)))
                    .await?,
            )),
        }
    }

    fn domain(&self) -> &str {
        match &self.host {
            Host::Tcp(name) => name,
            #[cfg(unix)]
            Host::Unix(_) => "localhost",
        }
    }
}

/// The pool's manager: one source's connections to one database.
pub struct Manager {
    pub pg: tokio_postgres::Config,
    pub tls: Tls,
    pub allow_privileged_role: bool,
    pub notices: Arc<SourceNotices>,
}

impl Manager {
    /// The first host of the config that accepts a connection, each tried
    /// for at most the connect timeout.
    async fn socket(&self) -> Result<(Box<dyn Io>, Target), ConnectError> {
        let timeout = self
            .pg
            .get_connect_timeout()
            .copied()
            .unwrap_or(Duration::from_secs(2));
        let ports = self.pg.get_ports();
        let mut last = None;
        for (i, host) in self.pg.get_hosts().iter().enumerate() {
            // One port applies to every host (libpq's rule).
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            let target = Target {
                host: host.clone(),
                port,
            };
            match tokio::time::timeout(timeout, target.open()).await {
                Ok(Ok(io)) => return Ok((io, target)),
                Ok(Err(e)) => last = Some(e),
                Err(_) => last = Some(std::io::ErrorKind::TimedOut.into()),
            }
        }
        Err(last
            .unwrap_or_else(|| std::io::Error::other("no host to connect to"))
            .into())
    }

    /// A new connection, its role checked (unless allowed privileged).
    pub async fn connect(&self) -> Result<PooledConnection, ConnectError> {
        let connection = self.connect_unchecked().await?;
        if !self.allow_privileged_role {
            roles::check(&connection.client).await?;
        }
        Ok(connection)
    }

    /// A new connection, its role not checked (the startup check does it).
    pub async fn connect_unchecked(&self) -> Result<PooledConnection, ConnectError> {
        let meter = Meter::new();
        let (io, target) = self.socket().await?;
        let stream = Metered::new(io, meter.clone());
        let notices = ConnectionNotices::new(self.notices.clone());
        let (client, driver) = match &self.tls {
            Tls::Disable => handshake(&self.pg, stream, NoTls, notices.clone()).await?,
            Tls::Require(make) => {
                let tls =
                    MakeTlsConnect::<Metered>::make_tls_connect(&mut make.clone(), target.domain())
                        .map_err(|e| ConnectError::Tls(e.to_string()))?;
                handshake(&self.pg, stream, tls, notices.clone()).await?
            }
        };
        Ok(PooledConnection {
            client,
            meter,
            notices,
            target,
            tls: self.tls.clone(),
            driver,
        })
    }
}

impl managed::Manager for Manager {
    type Type = PooledConnection;
    type Error = ConnectError;

    async fn create(&self) -> Result<PooledConnection, ConnectError> {
        self.connect().await
    }

    async fn recycle(
        &self,
        connection: &mut PooledConnection,
        _: &Metrics,
    ) -> RecycleResult<ConnectError> {
        // The reset (`DISCARD ALL`) ran when the connection was given back.
        if connection.client.is_closed() {
            return Err(RecycleError::message("closed"));
        }
        Ok(())
    }
}

/// The startup exchange over `stream`; the driver is spawned, polled for
/// its messages so that notices reach `notices`.
async fn handshake<T>(
    pg: &tokio_postgres::Config,
    stream: Metered,
    tls: T,
    notices: Arc<ConnectionNotices>,
) -> Result<(tokio_postgres::Client, JoinHandle<()>), ConnectError>
where
    T: TlsConnect<Metered>,
    T::Stream: Send + 'static,
{
    let (client, mut connection) = pg.connect_raw(stream, tls).await?;
    let driver = tokio::spawn(async move {
        loop {
            match poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notice(notice))) => notices.notice(&notice),
                // Notifications: no call listens past its own statements.
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    tracing::debug!(error = %GuestText::new(&e.to_string()), "postgres connection ended");
                    return;
                }
                None => return,
            }
        }
    });
    Ok((client, driver))
}
