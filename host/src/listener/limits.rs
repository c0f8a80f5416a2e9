//! Connections open at once, in all and per peer IP address. A connection
//! over either cap is closed at once, before anything is read from it: it
//! costs one accept and no buffer, and a stalled client cannot hold more
//! than its address's share of descriptors.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub struct ConnectionLimits {
    max: usize,
    per_peer: usize,
    /// Connections open in all: changed under `state`'s lock, read without
    /// it by whoever shares it (the runtime's hand-over to guest threads).
    open: Arc<AtomicUsize>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Only peers with a connection open: the map cannot outgrow `max`.
    peers: HashMap<IpAddr, usize>,
}

/// Why a connection was closed at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("the server has its maximum of connections open")]
    Global,
    #[error("the peer address has its maximum of connections open")]
    PerPeer,
}

/// One open connection; dropping it (the connection ended) frees its place.
pub struct ConnectionGuard {
    limits: Arc<ConnectionLimits>,
    peer: IpAddr,
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
    /// Caps of `max` in all and `per_peer` per address, counting open
    /// connections in `open`.
    pub fn new(max: usize, per_peer: usize, open: Arc<AtomicUsize>) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            per_peer: per_peer.max(1),
            open,
            state: Mutex::new(State::default()),
        })
    }

    /// Admit a new connection from `peer`, or say which cap it is over.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<ConnectionGuard, Refused> {
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
        let limits = ConnectionLimits::new(3, 2, Arc::default());
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
        let limits = ConnectionLimits::new(10, 10, Arc::default());
        for i in 0..5u8 {
            drop(limits.admit(IpAddr::from([10, 0, 0, i])).unwrap());
        }
        assert!(limits.state.lock().unwrap().peers.is_empty() && limits.open() == 0);
    }
}
