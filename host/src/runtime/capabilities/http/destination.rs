//! Where an allowed origin's request may go: resolved once, checked once.
//! The [`Checked`] addresses are the only ones the connector is given.

use super::network::Resolve;
use super::{EgressError, Origin};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The addresses one request may connect to, in the order to try them.
/// Only [`destination`] makes one, and never an empty one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    first: SocketAddr,
    rest: Vec<SocketAddr>,
}

impl Checked {
    pub fn first(&self) -> SocketAddr {
        self.first
    }

    pub fn rest(&self) -> &[SocketAddr] {
        &self.rest
    }
}

/// How an origin's host is turned into addresses.
enum Host<'a> {
    /// The entry names an address: that address, whatever it is (the
    /// operator asked for it; this is also how tests reach 127.0.0.1).
    Literal(IpAddr),
    /// `localhost`: the loopback addresses, without asking any resolver
    /// (RFC 6761 §6.3).
    Localhost,
    /// A name: resolved once, and every answer must be public.
    Name(&'a str),
}

fn host(origin: &Origin) -> Host<'_> {
    match origin.host.parse::<IpAddr>() {
        Ok(ip) => Host::Literal(ip),
        Err(_) if origin.host == "localhost" => Host::Localhost,
        Err(_) => Host::Name(&origin.host),
    }
}

/// Resolve `origin` once and check every answer. A name with any
/// non-public answer is refused whole: a mixed answer is what a rebinding
/// attacker sends.
pub async fn destination(origin: &Origin, resolver: &dyn Resolve) -> Result<Checked, EgressError> {
    let port = origin.port;
    let name = match host(origin) {
        Host::Literal(ip) => {
            return Ok(Checked {
                first: SocketAddr::new(ip, port),
                rest: Vec::new(),
            });
        }
        Host::Localhost => {
            return Ok(Checked {
                first: SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port),
                rest: vec![SocketAddr::new(Ipv6Addr::LOCALHOST.into(), port)],
            });
        }
        Host::Name(name) => name,
    };
    let answers = resolver
        .resolve(name)
        .await
        .map_err(|source| EgressError::Resolve {
            host: name.to_owned(),
            source,
        })?;
    let mut addrs: Vec<SocketAddr> = Vec::with_capacity(answers.len());
    for ip in answers {
        let reach = super::address::reach(ip);
        if reach != super::address::Reach::Public {
            return Err(EgressError::NotPublic {
                host: name.to_owned(),
                ip,
                reach,
            });
        }
        // The port is the origin's, whatever the resolver says.
        let addr = SocketAddr::new(ip, port);
        if !addrs.contains(&addr) {
            addrs.push(addr);
        }
    }
    let mut addrs = addrs.into_iter();
    match addrs.next() {
        Some(first) => Ok(Checked {
            first,
            rest: addrs.collect(),
        }),
        None => Err(EgressError::NoAddress {
            host: name.to_owned(),
        }),
    }
}
