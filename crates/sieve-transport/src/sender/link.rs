//! How fast the link drains: the plain sockets (and those sharing their path) sampled around
//! every write, cut into the stretches the compression policy learns the link's rate from.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use sieve_core::compress::auto::LinkSample;

use crate::sendq::SendQueues;

/// The plain sockets' drain, sampled around every write (see [`LinkSample`]).
///
/// The link is measured as everything that crosses it: the bytes the watched sockets drain and,
/// when the other kind's sockets go to the same address (`shared`), theirs too. Over one path
/// the classified flow takes its share of the link while it lasts (at P = 0.1 with the cleartext
/// compressed five times, a third of what crosses), and the watched sockets alone would measure
/// that remainder: 400-540 Mbit/s of a 1 Gbit/s link, over which `auto` chose zstd 3 for
/// generated JSON where zstd 1 was faster. The classified bytes cross the link whatever level
/// the cleartext takes, so what a level can gain is bounded by the whole link, and the flow
/// soon has it alone.
pub(super) struct LinkMonitor {
    pub(super) queues: Arc<SendQueues>,
    shared: Option<Arc<SendQueues>>,
    state: Mutex<LinkState>,
}

#[derive(Default)]
struct LinkState {
    /// When the sockets were last looked at, what had been acknowledged then (by the watched
    /// sockets, and by those sharing their path), and how long they had been limited by their
    /// peers' windows.
    last: Option<(Instant, u64, u64, u64)>,
    /// Bytes drained by the watched sockets and those sharing their path.
    drained: u64,
    /// Bytes drained by the watched sockets alone.
    own_drained: u64,
    busy_s: f64,
    busy_drained: u64,
    lower_bound: f64,
    growing_s: f64,
    growing_drained: u64,
}

/// An interval that ended with nothing queued bounds the link from below only if this much
/// left in it: acknowledgements come in bursts (of up to [`ACK_BURST`]), which over a shorter
/// interval would look like a fast link.
const MIN_BOUND_BYTES: u64 = 256 << 10;
const ACK_BURST: u64 = 64 << 10;

impl LinkMonitor {
    /// A monitor of `queues`, counting also what `shared` (sockets over the same path) drains.
    pub(super) fn new(queues: Arc<SendQueues>, shared: Option<Arc<SendQueues>>) -> LinkMonitor {
        LinkMonitor {
            queues,
            shared,
            state: Mutex::new(LinkState::default()),
        }
    }

    /// Look at the sockets now (call before and after every write of the watched kind).
    pub(super) fn mark(&self) {
        let drain = self.queues.counts();
        let (acked, waiting) = (drain.acknowledged, drain.unsent);
        let others = self.shared.as_ref().map_or(0, |q| q.counts().acknowledged);
        let now = Instant::now();
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        if let Some((t, a, o, p)) = s.last {
            let dt = now.duration_since(t).as_secs_f64();
            let own = acked.saturating_sub(a);
            let d = own + others.saturating_sub(o);
            s.own_drained += own;
            s.drained += d;
            if drain.queueing {
                // The path is full (a queue stands at its bottleneck): what left, left at the
                // path's rate, whatever the windows did.
                s.busy_s += dt;
                s.busy_drained += d;
            } else if drain.growing || drain.peer_limited_us > p {
                // A window, the sender's congestion window or the receiver's, not the link,
                // bounded this interval (see `LinkSample::growing_s`).
                s.growing_s += dt;
                s.growing_drained += d;
            } else if waiting > 0 {
                // Bytes waited for the window all through the interval: they left at the
                // path's rate. (Bytes merely in flight do not count: a sender that cannot fill
                // a long path keeps a round trip's worth in flight, draining at its own pace.)
                s.busy_s += dt;
                s.busy_drained += d;
            } else if d >= MIN_BOUND_BYTES && dt > 0.0 {
                let rate = (d - ACK_BURST) as f64 / dt;
                s.lower_bound = s.lower_bound.max(rate);
            }
        }
        s.last = Some((now, acked, others, drain.peer_limited_us));
    }

    /// What the sockets did since the last sample, over `elapsed_s`, and the bytes the watched
    /// sockets alone drained; starts a new stretch.
    pub(super) fn sample(&self, elapsed_s: f64) -> (LinkSample, u64) {
        let Ok(mut s) = self.state.lock() else {
            return (LinkSample::default(), 0);
        };
        let out = LinkSample {
            drained: s.drained,
            own_drained: s.own_drained,
            elapsed_s,
            busy_s: s.busy_s,
            busy_drained: s.busy_drained,
            lower_bound: s.lower_bound,
            growing_s: s.growing_s,
            growing_drained: s.growing_drained,
        };
        let (last, own) = (s.last, s.own_drained);
        *s = LinkState {
            last,
            ..LinkState::default()
        };
        (out, own)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A connected pair on loopback: (the writing end, the reading end).
    fn pair() -> (std::net::TcpStream, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let tx = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (rx, _) = listener.accept().unwrap();
        (tx, rx)
    }

    /// Send `n` bytes over the pair and wait until the peer has acknowledged them.
    fn cross(q: &SendQueues, (tx, rx): &mut (std::net::TcpStream, std::net::TcpStream), n: usize) {
        use std::io::{Read, Write};
        let writer = {
            let mut tx = tx.try_clone().unwrap();
            std::thread::spawn(move || tx.write_all(&vec![1u8; n]).unwrap())
        };
        let mut got = 0;
        let mut buf = vec![0u8; 1 << 16];
        while got < n {
            got += rx.read(&mut buf).unwrap();
        }
        writer.join().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while q.pending() != 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Over a shared path the link is what both kinds drain; ACCENT's own rate is the watched
    /// sockets' alone; without `shared`, the other kind's bytes are not counted.
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn the_link_counts_what_the_other_kind_drains_over_the_same_path() {
        for shared in [true, false] {
            let (mut plain, mut secure) = (pair(), pair());
            let (pq, sq) = (
                Arc::new(SendQueues::default()),
                Arc::new(SendQueues::default()),
            );
            pq.watch(&plain.0);
            sq.watch(&secure.0);
            let m = LinkMonitor::new(pq.clone(), shared.then(|| sq.clone()));
            m.mark();
            cross(&sq, &mut secure, 3 << 20);
            cross(&pq, &mut plain, 1 << 20);
            m.mark();
            let (link, own) = m.sample(0.5);
            assert_eq!(own, 1 << 20);
            let expected = if shared { 4 << 20 } else { 1 << 20 };
            assert_eq!(link.drained, expected, "shared: {shared}");
        }
    }
}
