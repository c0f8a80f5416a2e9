//! Connections open at once, in all and per peer. A connection over either
//! cap is closed at once, before anything is read from it: it costs one
//! accept and no buffer, and a stalled client cannot hold more than its
//! peer's share of descriptors.
//!
//! A peer is an address prefix, not an address: one IPv6 client is usually
//! given a whole /64 and could otherwise open the per-peer cap from each of
//! its 2^64 addresses. [`PeerPrefixes`] says how long a prefix is one peer
//! (by default: IPv6 /64, IPv4 /32, i.e. each IPv4 address).

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What one peer is, for the per-peer caps: an IPv6 client is usually
/// given a /64, so each of its addresses is not a peer of its own.
pub const DEFAULT_PEER_IPV6_PREFIX: u8 = 64;
/// IPv4: each address is a peer (a whole /24 is often many customers).
pub const DEFAULT_PEER_IPV4_PREFIX: u8 = 32;

/// How many leading bits of a peer's address name the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerPrefixes {
    /// 0..=32; 32: every IPv4 address is its own peer.
    pub v4: u8,
    /// 0..=128; 64: one peer per /64, what one IPv6 subscriber usually holds.
    pub v6: u8,
}

impl Default for PeerPrefixes {
    fn default() -> Self {
        Self {
            v4: DEFAULT_PEER_IPV4_PREFIX,
            v6: DEFAULT_PEER_IPV6_PREFIX,
        }
    }
}

impl PeerPrefixes {
    /// The peer `ip` belongs to: its prefix, host bits zeroed. An
    /// IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, a dual-stack socket's
    /// view of an IPv4 client) is grouped as the IPv4 address it is.
    /// Prefix lengths over the family's width are clamped to it.
    pub fn peer(&self, ip: IpAddr) -> IpNet {
        match ip.to_canonical() {
            IpAddr::V4(v4) => Ipv4Net::new(v4, self.v4.min(32))
                .expect("clamped to 32")
                .trunc()
                .into(),
            IpAddr::V6(v6) => Ipv6Net::new(v6, self.v6.min(128))
                .expect("clamped to 128")
                .trunc()
                .into(),
        }
    }
}

pub struct ConnectionLimits {
    max: usize,
    per_peer: usize,
    prefixes: PeerPrefixes,
    /// Connections open in all: changed under `state`'s lock, read without
    /// it by whoever shares it (the runtime's hand-over to guest threads).
    open: Arc<AtomicUsize>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Only peers with a connection open: the map cannot outgrow `max`.
    peers: HashMap<IpNet, usize>,
}

/// Why a connection was closed at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("the server has its maximum of connections open")]
    Global,
    #[error("the peer (its address prefix) has its maximum of connections open")]
    PerPeer,
}

/// One open connection; dropping it (the connection ended) frees its place.
pub struct ConnectionGuard {
    limits: Arc<ConnectionLimits>,
    peer: IpNet,
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        let mut st = self.limits.state.lock().unwrap();
        self.limits.open.fetch_sub(1, Ordering::Relaxed);
        if let Some(n) = st.peers.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                st.peers.remove(&self.peer);
            }
        }
    }
}

impl ConnectionLimits {
    /// Caps of `max` in all and `per_peer` per peer (an address prefix of
    /// `prefixes`), counting open connections in `open`.
    pub fn new(
        max: usize,
        per_peer: usize,
        prefixes: PeerPrefixes,
        open: Arc<AtomicUsize>,
    ) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            per_peer: per_peer.max(1),
            prefixes,
            open,
            state: Mutex::new(State::default()),
        })
    }

    /// Admit a new connection from address `ip`, or say which cap it is over.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<ConnectionGuard, Refused> {
        let peer = self.prefixes.peer(ip);
        let mut st = self.state.lock().unwrap();
        if self.open.load(Ordering::Relaxed) >= self.max {
            return Err(Refused::Global);
        }
        let from_peer = st.peers.entry(peer).or_default();
        if *from_peer >= self.per_peer {
            return Err(Refused::PerPeer);
        }
        *from_peer += 1;
        self.open.fetch_add(1, Ordering::Relaxed);
        Ok(ConnectionGuard {
            limits: self.clone(),
            peer,
        })
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_obeyed_and_violated() {
        let limits = ConnectionLimits::new(3, 2, PeerPrefixes::default(), Arc::default());
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        let a1 = limits.admit(a).unwrap();
        let _a2 = limits.admit(a).expect("just under the per-peer cap");
        assert_eq!(limits.admit(a).err(), Some(Refused::PerPeer));
        let _b1 = limits.admit(b).expect("another peer has its own share");
        assert_eq!(limits.admit(b).err(), Some(Refused::Global));
        drop(a1);
        assert_eq!(limits.open(), 2);
        let _a3 = limits
            .admit(a)
            .expect("a closed connection frees its place");
    }

    #[test]
    fn peers_are_forgotten_when_their_connections_close() {
        let limits = ConnectionLimits::new(10, 10, PeerPrefixes::default(), Arc::default());
        for i in 0..5u8 {
            drop(limits.admit(IpAddr::from([10, 0, 0, i])).unwrap());
        }
        assert!(limits.state.lock().unwrap().peers.is_empty() && limits.open() == 0);
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn ipv6_peers_are_grouped_by_their_prefix() {
        let p = PeerPrefixes::default();
        assert_eq!(p.v6, 64);
        assert_eq!(
            p.peer(ip("2001:db8:48::1")),
            p.peer(ip("2001:db8:48:0:ffff:ffff:ffff:ffff")),
            "one /64, one peer"
        );
        assert_eq!(p.peer(ip("2001:db8:48::1")).to_string(), "2001:db8:48::/64");
        assert_ne!(
            p.peer(ip("2001:db8:48::1")),
            p.peer(ip("2001:db8:48:1::1")),
            "the next /64 is another peer"
        );
        let wide = PeerPrefixes { v4: 32, v6: 48 };
        assert_eq!(
            wide.peer(ip("2001:db8:48::1")),
            wide.peer(ip("2001:db8:48:ffff::1"))
        );
        let each = PeerPrefixes { v4: 32, v6: 128 };
        assert_ne!(each.peer(ip("2001:db8::1")), each.peer(ip("2001:db8::2")));
    }

    #[test]
    fn ipv4_peers_are_addresses_unless_configured() {
        let p = PeerPrefixes::default();
        assert_eq!(p.v4, 32);
        assert_ne!(p.peer(ip("192.0.2.1")), p.peer(ip("192.0.2.2")));
        let net = PeerPrefixes { v4: 24, v6: 64 };
        assert_eq!(net.peer(ip("192.0.2.1")), net.peer(ip("192.0.2.254")));
        assert_ne!(net.peer(ip("192.0.2.1")), net.peer(ip("192.0.3.1")));
        // A dual-stack listener sees an IPv4 client as ::ffff:a.b.c.d: it is
        // grouped as IPv4, not lumped into ::ffff:0:0/64 with every other.
        assert_eq!(p.peer(ip("::ffff:192.0.2.1")), p.peer(ip("192.0.2.1")));
        assert_ne!(
            p.peer(ip("::ffff:192.0.2.1")),
            p.peer(ip("::ffff:192.0.2.2"))
        );
        // Out-of-range lengths are clamped, never a panic.
        let over = PeerPrefixes { v4: 99, v6: 200 };
        assert_ne!(over.peer(ip("192.0.2.1")), over.peer(ip("192.0.2.2")));
        assert_ne!(over.peer(ip("2001:db8::1")), over.peer(ip("2001:db8::2")));
    }

    /// The attack: one client with a /64 opens connections from many of
    /// its addresses. They share one per-peer cap; another /64 does not.
    #[test]
    fn many_addresses_in_one_ipv6_64_share_the_per_peer_cap() {
        let limits = ConnectionLimits::new(1000, 3, PeerPrefixes::default(), Arc::default());
        let mut held = Vec::new();
        for i in 1..=3u16 {
            held.push(
                limits
                    .admit(IpAddr::from([0x2001, 0xdb8, 0x48, 0, 0, 0, 0, i]))
                    .unwrap(),
            );
        }
        for i in 4..100u16 {
            assert_eq!(
                limits
                    .admit(IpAddr::from([0x2001, 0xdb8, 0x48, 0, i, i, i, i]))
                    .err(),
                Some(Refused::PerPeer),
                "address {i} of the same /64"
            );
        }
        let _other = limits
            .admit(ip("2001:db8:49::1"))
            .expect("another /64 has its own share");
        drop(held.pop());
        let _again = limits
            .admit(ip("2001:db8:48::abcd"))
            .expect("a closed connection frees the /64's place");
        assert_eq!(limits.state.lock().unwrap().peers.len(), 2);
    }
}
