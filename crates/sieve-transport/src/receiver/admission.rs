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
//! - a client address, and under mutual TLS a client certificate, holds at most a few sessions.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
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

/// Sessions per client address and per client certificate.
pub(super) struct Clients {
    counts: Mutex<HashMap<String, usize>>,
    cap: usize,
}

/// A client's hold on one of its sessions; given back when dropped.
pub(super) struct ClientHold {
    clients: Arc<Clients>,
    keys: Vec<String>,
}

impl Clients {
    pub(super) fn new(cap: usize) -> Arc<Clients> {
        Arc::new(Clients {
            counts: Mutex::new(HashMap::new()),
            cap: cap.max(1),
        })
    }

    /// Take a session for the client known by `keys` (its address, and its certificate under
    /// mutual TLS), or say which key is at its limit.
    pub(super) fn take(self: &Arc<Self>, keys: Vec<String>) -> Result<ClientHold, String> {
        let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(full) = keys
            .iter()
            .find(|k| c.get(*k).copied().unwrap_or(0) >= self.cap)
        {
            return Err(full.clone());
        }
        for k in &keys {
            *c.entry(k.clone()).or_default() += 1;
        }
        Ok(ClientHold {
            clients: self.clone(),
            keys,
        })
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
    fn clients_hold_at_most_their_cap_by_address_or_certificate() {
        let c = Clients::new(2);
        let h1 = c.take(vec!["ip 1".into(), "cert a".into()]).unwrap();
        let _h2 = c.take(vec!["ip 2".into(), "cert a".into()]).unwrap();
        assert_eq!(
            c.take(vec!["ip 3".into(), "cert a".into()]).err(),
            Some("cert a".into())
        );
        drop(h1);
        assert!(c.take(vec!["ip 3".into(), "cert a".into()]).is_ok());
    }
}
