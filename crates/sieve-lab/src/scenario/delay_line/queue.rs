//! The delay line's arithmetic, apart from any device or clock: when a packet that arrives at a
//! given time leaves the line. Pure, so its rules are tested without a network.
//!
//! The model is a store-and-forward link, as `mm-link` and a real wire behave: a packet first
//! waits for the packets ahead of it to finish serializing, then serializes at the line's rate,
//! then propagates for the one-way delay:
//!
//! ```text
//! start_i = max(arrival_i, end_{i-1});  end_i = start_i + bits_i / rate;  due_i = end_i + delay
//! ```
//!
//! Without a rate, `due_i = arrival_i + delay`. Arrivals are taken in order and the clock never
//! goes back, so `due` never decreases: packets leave in the order they came (a FIFO, as on one
//! wire; netem's reordering is not modelled). A packet that would wait longer than the queue
//! limit before it starts serializing is dropped at the tail, as a switch's full buffer drops it,
//! and a packet may be lost at random with a set probability, decided by a seeded generator so a
//! run can be repeated.

use std::collections::VecDeque;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Nanoseconds on the line's own clock (from any fixed origin).
pub(crate) type Nanos = u64;

/// What a line does to the packets crossing it in one direction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LineSpec {
    /// One-way propagation delay.
    pub(crate) delay_ns: Nanos,
    /// Rate in bit/s; `None` for no limit.
    pub(crate) rate_bps: Option<f64>,
    /// Probability that a packet is lost, in [0, 1).
    pub(crate) loss: f64,
    /// Longest wait before a packet starts serializing; beyond it the packet is dropped.
    pub(crate) queue_limit_ns: Nanos,
    /// Seed of the loss decisions.
    pub(crate) seed: u64,
}

/// What became of a packet offered to the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Queued; it leaves at this time.
    Due(Nanos),
    /// Lost at random.
    Lost,
    /// Dropped because the queue was full.
    Overflow,
}

/// Counts of what the line did, for reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) passed: u64,
    pub(crate) lost: u64,
    pub(crate) overflow: u64,
    pub(crate) bytes: u64,
}

/// Packets in flight on one direction of a line, in the order they leave.
#[derive(Debug)]
pub(crate) struct DelayQueue<T> {
    spec: LineSpec,
    /// When the last accepted packet finishes serializing (the wire is busy until then).
    busy_until: Nanos,
    /// The latest arrival time seen; an earlier one is taken as this (the clock never goes back).
    last_arrival: Nanos,
    queue: VecDeque<(Nanos, T)>,
    rng: StdRng,
    counts: Counts,
}

impl<T> DelayQueue<T> {
    pub(crate) fn new(spec: LineSpec) -> DelayQueue<T> {
        DelayQueue {
            spec,
            busy_until: 0,
            last_arrival: 0,
            queue: VecDeque::new(),
            rng: StdRng::seed_from_u64(spec.seed),
            counts: Counts::default(),
        }
    }

    /// Offer `item`, of `wire_bytes` bytes on the wire, arriving at `now`.
    pub(crate) fn push(&mut self, now: Nanos, wire_bytes: u64, item: T) -> Verdict {
        let now = now.max(self.last_arrival);
        self.last_arrival = now;
        if self.spec.loss > 0.0 && self.rng.gen_bool(self.spec.loss.min(1.0)) {
            self.counts.lost += 1;
            return Verdict::Lost;
        }
        let leaves_wire = match self.spec.rate_bps {
            Some(rate) => {
                let start = now.max(self.busy_until);
                if start - now > self.spec.queue_limit_ns {
                    self.counts.overflow += 1;
                    return Verdict::Overflow;
                }
                let serialize = (wire_bytes as f64 * 8.0 / rate * 1e9).ceil() as Nanos;
                self.busy_until = start + serialize;
                self.busy_until
            }
            None => now,
        };
        let due = leaves_wire + self.spec.delay_ns;
        self.queue.push_back((due, item));
        self.counts.passed += 1;
        self.counts.bytes += wire_bytes;
        Verdict::Due(due)
    }

    /// When the first packet leaves, if any is in flight.
    pub(crate) fn next_due(&self) -> Option<Nanos> {
        self.queue.front().map(|p| p.0)
    }

    /// The first packet, if it is due at `now`.
    pub(crate) fn pop_due(&mut self, now: Nanos) -> Option<T> {
        match self.queue.front() {
            Some(&(due, _)) if due <= now => self.queue.pop_front().map(|p| p.1),
            _ => None,
        }
    }

    pub(crate) fn counts(&self) -> Counts {
        self.counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: Nanos = 1_000_000;

    fn spec(delay_ms: u64, rate_bps: Option<f64>) -> LineSpec {
        LineSpec {
            delay_ns: delay_ms * MS,
            rate_bps,
            loss: 0.0,
            queue_limit_ns: 50 * MS,
            seed: 1,
        }
    }

    /// Drain everything, stepping the clock to each due time: (item, time it left).
    fn drain<T>(q: &mut DelayQueue<T>) -> Vec<(T, Nanos)> {
        let mut out = Vec::new();
        while let Some(due) = q.next_due() {
            assert!(q.pop_due(due - 1).is_none(), "left before its due time");
            let item = q.pop_due(due).expect("due packet leaves");
            out.push((item, due));
        }
        out
    }

    #[test]
    fn without_a_rate_every_packet_waits_exactly_the_delay() {
        let mut q = DelayQueue::new(spec(10, None));
        assert_eq!(q.push(0, 1500, 'a'), Verdict::Due(10 * MS));
        assert_eq!(q.push(3 * MS, 60_000, 'b'), Verdict::Due(13 * MS));
        assert!(q.pop_due(9 * MS).is_none());
        assert_eq!(q.pop_due(10 * MS), Some('a'));
        assert!(q.pop_due(12 * MS).is_none());
        assert_eq!(q.pop_due(20 * MS), Some('b'));
        assert_eq!(q.next_due(), None);
    }

    #[test]
    fn the_rate_spaces_packets_by_their_serialization_time() {
        // 100 Mbit/s: 1250 bytes take 100 µs on the wire.
        let mut q = DelayQueue::new(spec(1, Some(100e6)));
        for i in 0..10 {
            q.push(0, 1250, i);
        }
        let out = drain(&mut q);
        for (k, (i, t)) in out.iter().enumerate() {
            assert_eq!(*i, k);
            assert_eq!(*t, (k as Nanos + 1) * 100_000 + MS);
        }
        // An idle wire starts at once: a packet arriving later is not delayed by old ones.
        assert_eq!(
            q.push(50 * MS, 1250, 10),
            Verdict::Due(50 * MS + 100_000 + MS)
        );
    }

    #[test]
    fn a_full_queue_drops_at_the_tail() {
        // 8 Mbit/s: 1000 bytes take 1 ms, so the 51st back-to-back packet would wait 51 ms.
        let mut q = DelayQueue::new(spec(0, Some(8e6)));
        let verdicts: Vec<_> = (0..60).map(|i| q.push(0, 1000, i)).collect();
        let queued = verdicts
            .iter()
            .filter(|v| matches!(v, Verdict::Due(_)))
            .count();
        assert_eq!(queued, 51);
        assert_eq!(verdicts[51], Verdict::Overflow);
        assert_eq!(q.counts().overflow, 9);
        assert_eq!(q.counts().passed, 51);
    }

    #[test]
    fn loss_follows_its_probability_and_its_seed() {
        let mut s = spec(0, None);
        s.loss = 0.1;
        let lost = |seed| {
            let mut q = DelayQueue::new(LineSpec { seed, ..s });
            (0..100_000).for_each(|i| {
                q.push(i, 100, ());
            });
            q.counts().lost
        };
        let a = lost(7);
        assert!((9_000..11_000).contains(&a), "{a} of 100000 lost at 10 %");
        assert_eq!(a, lost(7), "the same seed loses the same packets");
    }

    proptest! {
        /// Whatever the arrivals, sizes and settings: packets leave in the order they came,
        /// never before arrival + delay, never before their turn on the wire, and over a backlog
        /// the wire carries exactly its rate.
        #[test]
        fn in_order_never_early_and_at_the_rate(
            delay_us in 0u64..50_000,
            rate_mbit in proptest::option::of(1.0f64..10_000.0),
            arrivals in proptest::collection::vec((0u64..2_000_000, 40u64..65_000), 1..200),
        ) {
            let mut s = spec(0, rate_mbit.map(|r| r * 1e6));
            s.delay_ns = delay_us * 1000;
            s.queue_limit_ns = u64::MAX / 4;
            let mut q = DelayQueue::new(s);
            let mut now = 0;
            let mut sent = Vec::new();
            for (i, &(gap, bytes)) in arrivals.iter().enumerate() {
                now += gap;
                prop_assert!(matches!(q.push(now, bytes, i), Verdict::Due(_)));
                sent.push((now, bytes));
            }
            let out = drain(&mut q);
            prop_assert_eq!(out.len(), arrivals.len());
            let mut wire_free = 0u64;
            for (k, &(i, left)) in out.iter().enumerate() {
                prop_assert_eq!(i, k, "out of order");
                let (arrived, bytes) = sent[i];
                prop_assert!(left >= arrived + s.delay_ns, "early");
                if let Some(rate) = s.rate_bps {
                    let serialize = (bytes as f64 * 8.0 / rate * 1e9).ceil() as u64;
                    // Its serialization starts when it has arrived and the wire is free.
                    let end = arrived.max(wire_free) + serialize;
                    prop_assert_eq!(left, end + s.delay_ns);
                    wire_free = end;
                }
            }
        }
    }
}
