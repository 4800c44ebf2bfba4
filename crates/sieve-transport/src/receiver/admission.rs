//! Who gets in: connections that have not yet authenticated, and sessions per client.
//!
//! Anyone who can reach the ports can open connections and then say nothing, or open sessions
//! and then trickle. Neither may lock honest senders out:
//!
//! - each listener has its own pool of places for unauthenticated connections, so that silent
//!   plain connections cannot keep TLS clients out, nor the reverse;
//! - one source address holds at most a share of a pool;
//! - a newcomer is never turned away for lack of a place: the oldest waiter (of its own address
//!   first, if that address is at its share) is dropped instead. An honest client finishes its
//!   handshake and JOIN in milliseconds, so it is never the oldest for long; a slow-loris
//!   attacker's connections are;
//! - a client address, and under mutual TLS a client certificate, holds at most a few sessions,
//!   and the network of an address (its /24, or /64 for IPv6) at most a few addresses' worth;
//! - a newcomer that finds the receiver (or its address, network or certificate) at its limit
//!   ends the session that falls furthest behind the minimum rate, if one does
//!   (`Shared::make_room_for`): sessions that trickle cannot keep an honest sender out, and one
//!   that moves data at a useful rate is never ended for a newcomer.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

/// Set when a waiter is evicted; the connection's task waits on it beside its handshake.
#[derive(Default)]
struct Evict {
    notify: Notify,
    done: std::sync::atomic::AtomicBool,
}

/// The places of one listener's unauthenticated connections.
pub(super) struct Waiting {
    state: Mutex<WaitState>,
    capacity: usize,
    per_addr: usize,
}

#[derive(Default)]
struct WaitState {
    next: u64,
    /// Waiters by age (admission order): their address and how to tell them they are evicted.
    by_age: BTreeMap<u64, (IpAddr, Arc<Evict>)>,
    per_addr: HashMap<IpAddr, usize>,
    evicted: u64,
}

/// A connection's place among the waiters; it frees the place when dropped (authenticated,
/// ended, or evicted).
pub(super) struct Ticket {
    waiting: Arc<Waiting>,
    seq: u64,
    evict: Arc<Evict>,
}

impl Waiting {
    /// `capacity` waiters in all, at most `per_addr` of them from one address.
    pub(super) fn new(capacity: usize, per_addr: usize) -> Arc<Waiting> {
        Arc::new(Waiting {
            state: Mutex::new(WaitState::default()),
            capacity: capacity.max(1),
            per_addr: per_addr.clamp(1, capacity.max(1)),
        })
    }

    fn lock(&self) -> MutexGuard<'_, WaitState> {
        // Plain inserts and removes only: a poisoned state is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Make room for a connection from `ip`, evicting the oldest waiter of its address if that
    /// address is at its share, else the oldest of all if the pool is full.
    pub(super) fn admit(self: &Arc<Self>, ip: IpAddr) -> Ticket {
        let mut st = self.lock();
        let of_addr = st.per_addr.get(&ip).copied().unwrap_or(0);
        let victim = if of_addr >= self.per_addr {
            st.by_age
                .iter()
                .find(|(_, (a, _))| *a == ip)
                .map(|(&seq, _)| seq)
        } else if st.by_age.len() >= self.capacity {
            st.by_age.keys().next().copied()
        } else {
            None
        };
        if let Some(seq) = victim {
            if let Some(e) = st.remove(seq) {
                e.done.store(true, std::sync::atomic::Ordering::Release);
                e.notify.notify_waiters();
            }
            st.evicted += 1;
        }
        let seq = st.next;
        st.next += 1;
        let evict = Arc::new(Evict::default());
        st.by_age.insert(seq, (ip, evict.clone()));
        *st.per_addr.entry(ip).or_default() += 1;
        Ticket {
            waiting: self.clone(),
            seq,
            evict,
        }
    }

    /// Waiters now.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.lock().by_age.len()
    }

    /// Waiters evicted so far.
    pub(super) fn evicted(&self) -> u64 {
        self.lock().evicted
    }
}

impl WaitState {
    fn remove(&mut self, seq: u64) -> Option<Arc<Evict>> {
        let (ip, evict) = self.by_age.remove(&seq)?;
        if let Some(n) = self.per_addr.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                self.per_addr.remove(&ip);
            }
        }
        Some(evict)
    }
}

impl Ticket {
    /// Completes when this waiter is evicted to make room for a newer one.
    pub(super) async fn evicted(&self) {
        loop {
            let n = self.evict.notify.notified();
            tokio::pin!(n);
            n.as_mut().enable();
            if self.evict.done.load(std::sync::atomic::Ordering::Acquire) {
                return;
            }
            n.await;
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.waiting.lock().remove(self.seq);
    }
}

/// Who a session is counted against: its address, the network around it, and under mutual TLS
/// its client certificate. Each has a cap of its own ([`Clients`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum ClientKey {
    /// The peer's address.
    Address(IpAddr),
    /// The network of the peer's address: its /24 (IPv4) or /64 (IPv6), the block one
    /// machine or one site usually has. An IPv6 host may use any of the 2^64 addresses of its
    /// /64, so a cap by address alone would not hold it.
    Network(IpAddr),
    /// The client certificate's identity (its fingerprint, see `secured::client_identity`).
    Certificate(String),
}

impl ClientKey {
    /// The keys of a session from `ip`, with `cert` under mutual TLS.
    pub(super) fn of(ip: IpAddr, cert: Option<&str>) -> Vec<ClientKey> {
        let ip = ip.to_canonical();
        let mut keys = vec![ClientKey::Address(ip), ClientKey::Network(network(ip))];
        keys.extend(cert.map(|c| ClientKey::Certificate(c.to_string())));
        keys
    }
}

impl std::fmt::Display for ClientKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientKey::Address(ip) => write!(f, "address {ip}"),
            ClientKey::Network(IpAddr::V4(n)) => write!(f, "network {n}/24"),
            ClientKey::Network(IpAddr::V6(n)) => write!(f, "network {n}/64"),
            ClientKey::Certificate(c) => write!(f, "client {c}"),
        }
    }
}

/// The /24 of an IPv4 address, the /64 of an IPv6 one.
pub(super) fn network(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(u32::from(a) & 0xffff_ff00)),
        IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(u128::from(a) & !((1u128 << 64) - 1))),
    }
}

/// Sessions per client address, per network and per client certificate.
pub(super) struct Clients {
    counts: Mutex<HashMap<ClientKey, usize>>,
    /// Of an address, and of a certificate.
    cap: usize,
    /// Of a network.
    network_cap: usize,
    /// Woken whenever a session gives its hold back.
    released: Notify,
}

/// A client's hold on one of its sessions; given back when dropped.
pub(super) struct ClientHold {
    clients: Arc<Clients>,
    keys: Vec<ClientKey>,
}

impl Clients {
    /// `cap` sessions per address and per certificate, `network_cap` per network.
    pub(super) fn new(cap: usize, network_cap: usize) -> Arc<Clients> {
        Arc::new(Clients {
            counts: Mutex::new(HashMap::new()),
            cap: cap.max(1),
            network_cap: network_cap.max(1),
            released: Notify::new(),
        })
    }

    /// How many sessions `key` may hold.
    pub(super) fn cap(&self, key: &ClientKey) -> usize {
        match key {
            ClientKey::Network(_) => self.network_cap,
            _ => self.cap,
        }
    }

    /// Take a session for the client known by `keys` (see [`ClientKey::of`]), or say which key
    /// is at its limit.
    pub(super) fn take(self: &Arc<Self>, keys: &[ClientKey]) -> Result<ClientHold, ClientKey> {
        let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(full) = keys
            .iter()
            .find(|k| c.get(*k).copied().unwrap_or(0) >= self.cap(k))
        {
            return Err(full.clone());
        }
        for k in keys {
            *c.entry(k.clone()).or_default() += 1;
        }
        Ok(ClientHold {
            clients: self.clone(),
            keys: keys.to_vec(),
        })
    }

    /// [`Clients::take`], waiting until `deadline` for a hold to be given back whenever a key is
    /// full and `make_room(key)` (which ends a session of that key, if one may give way) says
    /// one is on its way.
    pub(super) async fn take_or_make_room(
        self: &Arc<Self>,
        keys: &[ClientKey],
        deadline: std::time::Instant,
        make_room: impl Fn(&ClientKey) -> bool,
    ) -> Result<ClientHold, ClientKey> {
        loop {
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            let full = match self.take(keys) {
                Ok(h) => return Ok(h),
                Err(full) => full,
            };
            if !make_room(&full)
                || tokio::time::timeout_at(deadline.into(), released)
                    .await
                    .is_err()
            {
                return Err(full);
            }
        }
    }
}

impl Drop for ClientHold {
    fn drop(&mut self) {
        let mut c = self
            .clients
            .counts
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        for k in &self.keys {
            if let Some(n) = c.get_mut(k) {
                *n -= 1;
                if *n == 0 {
                    c.remove(k);
                }
            }
        }
        drop(c);
        self.clients.released.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn a_full_pool_evicts_the_oldest_and_an_address_its_own_oldest() {
        let w = Waiting::new(4, 2);
        let a1 = w.admit(ip(2));
        let a2 = w.admit(ip(2));
        // A third from the same address evicts its own oldest.
        let a3 = w.admit(ip(2));
        assert_eq!((w.len(), w.evicted()), (2, 1));
        let b1 = w.admit(ip(3));
        let b2 = w.admit(ip(3));
        assert_eq!(w.len(), 4);
        // The pool is full: a newcomer from elsewhere evicts the oldest of all (a2).
        let c1 = w.admit(ip(4));
        assert_eq!((w.len(), w.evicted()), (4, 2));
        // Evicted tickets know it; dropping them frees nothing twice.
        let now = |t: &Ticket| t.evict.done.load(std::sync::atomic::Ordering::Acquire);
        assert!(now(&a1) && now(&a2) && !now(&a3) && !now(&b1));
        drop((a1, a2));
        assert_eq!(w.len(), 4);
        drop((a3, b1, b2, c1));
        assert_eq!(w.len(), 0);
    }

    #[test]
    fn clients_hold_at_most_their_cap_by_address_network_or_certificate() {
        let c = Clients::new(2, 3);
        let of = |last, cert: &str| ClientKey::of(ip(last), Some(cert));
        let h1 = c.take(&of(1, "cert a")).unwrap();
        let _h2 = c.take(&of(2, "cert a")).unwrap();
        assert_eq!(
            c.take(&of(3, "cert a")).err(),
            Some(ClientKey::Certificate("cert a".into()))
        );
        drop(h1);
        let _h3 = c.take(&of(3, "cert a")).unwrap();
        let _h4 = c.take(&of(4, "cert b")).unwrap();
        // Three of 127.0.0.0/24 now: a fifth address of it is refused by its network.
        let full = c.take(&of(5, "cert c")).err();
        assert_eq!(full, Some(ClientKey::Network(ip(0))));
        assert_eq!(full.unwrap().to_string(), "network 127.0.0.0/24");
        assert!(c
            .take(&ClientKey::of(IpAddr::from([10, 0, 1, 4]), None))
            .is_ok());
    }

    #[test]
    fn networks_are_a_slash_24_or_a_slash_64() {
        let v6: IpAddr = "2001:db8:1:2:aa:bb:cc:dd".parse().unwrap();
        let keys = ClientKey::of(v6, None);
        assert_eq!(keys[1].to_string(), "network 2001:db8:1:2::/64");
        // An IPv4 peer on a dual-stack socket is the IPv4 address it is.
        let mapped: IpAddr = "::ffff:192.0.2.77".parse().unwrap();
        let keys = ClientKey::of(mapped, None);
        assert_eq!(keys[0].to_string(), "address 192.0.2.77");
        assert_eq!(keys[1].to_string(), "network 192.0.2.0/24");
    }
}
