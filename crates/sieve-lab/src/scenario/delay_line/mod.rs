//! A userspace delay line, for kernels without `netem`: the link between the two namespaces is
//! a TUN interface in each, and two threads of the lab carry the packets between them, holding
//! each for the one-way delay, serializing it at the link's rate, and optionally losing it at
//! random. It is what mahimahi's `mm-delay` and `mm-link` do, with a store-and-forward link as
//! the model ([`queue`]).
//!
//! The forwarding threads never enter a namespace: each TUN interface is created by a short-lived
//! thread that has moved into its namespace ([`super::inside::in_netns`]), and its file
//! descriptor keeps working from anywhere. Dropping the line stops the threads and closes the
//! descriptors, which removes both interfaces.

pub(crate) mod queue;
pub(crate) mod tun;

use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::io::Errno;

use super::inside::in_netns;
use super::run;
use queue::{Counts, DelayQueue, LineSpec, Nanos};
use tun::Tun;

/// Ethernet framing around every IP packet on the emulated wire: 14 bytes of header, 4 of
/// frame check sequence, 8 of preamble and 12 of inter-frame gap. Counting them makes TCP's
/// goodput on a 100 Mbit/s line about 94.9 Mbit/s, as on real Fast Ethernet.
pub(crate) const FRAME_OVERHEAD: u64 = 38;

/// The longest a packet waits for the wire before it is dropped: 50 ms, what a small switch
/// buffers, and what the `tbf` shaping of the veth links allows.
pub(crate) const QUEUE_LIMIT: Duration = Duration::from_millis(50);

/// Longest time a forwarding thread sleeps without looking at its stop flag.
const TICK: Duration = Duration::from_millis(20);

/// Largest packet a TUN read can return: 64 KiB of IP packet plus the offload header.
const MAX_PACKET: usize = 65_536 + tun::VNET_HDR_LEN;

/// MTU of both interfaces, Ethernet's.
const MTU: u32 = 1500;

/// One end of the line: the namespace, the interface name and the addresses.
#[derive(Debug, Clone, Copy)]
pub(crate) struct End<'a> {
    pub(crate) ns: &'a str,
    pub(crate) dev: &'a str,
    pub(crate) ip: Ipv4Addr,
}

/// A running delay line between two namespaces; see the module documentation.
#[derive(Debug)]
pub(crate) struct DelayLine {
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
    /// What each direction did so far: client to server, server to client.
    counts: Arc<[Mutex<Counts>; 2]>,
}

impl DelayLine {
    /// Create both interfaces, address them to each other and start forwarding with `spec` in
    /// each direction (the seeds of the two directions differ). Offloads are used unless packets
    /// can be lost: a lost 64 KiB segment would be a burst of 44 lost frames.
    pub(crate) fn start(client: End<'_>, server: End<'_>, spec: LineSpec) -> Result<DelayLine> {
        let offload = spec.loss == 0.0;
        let open = |end: End<'_>| -> Result<Arc<Tun>> {
            let dev = end.dev.to_string();
            let tun = in_netns(end.ns, move || Tun::create(&dev, offload))?;
            Ok(Arc::new(tun))
        };
        let c = open(client)?;
        let s = open(server)?;
        for (end, peer) in [(client, server), (server, client)] {
            configure(end, peer.ip)
                .with_context(|| format!("cannot configure {} in {}", end.dev, end.ns))?;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let counts: Arc<[Mutex<Counts>; 2]> = Arc::new(Default::default());
        let mut line = DelayLine {
            stop: Arc::clone(&stop),
            workers: Vec::new(),
            counts: Arc::clone(&counts),
        };
        for (i, (from, to)) in [(&c, &s), (&s, &c)].into_iter().enumerate() {
            let spec = LineSpec {
                seed: spec.seed.wrapping_add(i as u64),
                ..spec
            };
            let (from, to, stop, counts) = (
                Arc::clone(from),
                Arc::clone(to),
                Arc::clone(&stop),
                Arc::clone(&counts),
            );
            let worker = std::thread::Builder::new()
                .name(format!("delay-line-{i}"))
                .spawn(move || forward(&from, &to, spec, &stop, &counts[i]))
                .context("cannot start a delay-line thread")?;
            line.workers.push(worker);
        }
        Ok(line)
    }

    /// What the line did so far: client to server, server to client.
    pub(crate) fn counts(&self) -> [Counts; 2] {
        let get = |m: &Mutex<Counts>| *m.lock().unwrap_or_else(|e| e.into_inner());
        [get(&self.counts[0]), get(&self.counts[1])]
    }
}

impl Drop for DelayLine {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// Address `end` point-to-point to `peer` and bring it up.
fn configure(end: End<'_>, peer: Ipv4Addr) -> Result<()> {
    let ip = |args: &[&str]| run(Command::new("ip").args(["-n", end.ns]).args(args)).map(drop);
    ip(&[
        "addr",
        "add",
        &end.ip.to_string(),
        "peer",
        &format!("{peer}/32"),
        "dev",
        end.dev,
    ])?;
    ip(&[
        "link",
        "set",
        end.dev,
        "mtu",
        &MTU.to_string(),
        "txqueuelen",
        "1000",
        "up",
    ])?;
    ip(&["link", "set", "lo", "up"])
}

/// Carry packets from `from` to `to` through a [`DelayQueue`] until `stop` is set. One thread
/// per direction: wait until a packet can be read or the first queued one is due, read all
/// that are ready, write all that are due.
fn forward(from: &Tun, to: &Tun, spec: LineSpec, stop: &AtomicBool, counts: &Mutex<Counts>) {
    // Wake at the due time, not up to the default 50 µs of timer slack later: on a short link
    // (the wired one's 0.2 ms each way) that slack alone would be a quarter of the delay.
    let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1_000));
    let origin = Instant::now();
    let now = || origin.elapsed().as_nanos() as Nanos;
    let header = from.header_len();
    let mut q: DelayQueue<Vec<u8>> = DelayQueue::new(spec);
    let mut buf = vec![0u8; MAX_PACKET];
    let mut write_failures = 0u64;
    let mut waking = Waking::default();
    while !stop.load(Ordering::Relaxed) {
        // Aim the wait at the first due time less how late timed waits have been waking here, so
        // that the packet is not held for the wake-up latency on top of its delay.
        let target = q.next_due().map(|due| due.saturating_sub(waking.lead()));
        let wait = target
            .map_or(TICK, |t| Duration::from_nanos(t.saturating_sub(now())))
            .min(TICK);
        if !wait.is_zero() {
            let ts = Timespec {
                tv_sec: 0,
                tv_nsec: i64::from(wait.subsec_nanos()),
            };
            let mut fds = [PollFd::new(&from.file, PollFlags::IN)];
            match poll(&mut fds, Some(&ts)) {
                // A timed wait that ran out: how late it woke teaches the next ones.
                Ok(0) => {
                    if let Some(t) = target.filter(|_| wait < TICK) {
                        waking.observe(now().saturating_sub(t));
                    }
                }
                Ok(_) | Err(Errno::INTR) => {}
                Err(e) => {
                    tracing::warn!("delay line: poll failed ({e}); stopping this direction");
                    return;
                }
            }
        }
        // A bounded batch, so a flood cannot starve the writes of due packets.
        for _ in 0..256 {
            match rustix::io::read(&from.file, &mut buf[..]) {
                Ok(0) => break,
                Ok(n) => {
                    let bytes = tun::wire_bytes(&buf[..n], header, FRAME_OVERHEAD);
                    q.push(now(), bytes, buf[..n].to_vec());
                }
                Err(Errno::INTR) => continue,
                // EAGAIN: nothing more to read now. Anything else (the interface went down
                // while the namespaces are being removed) is retried after the next wait.
                Err(_) => break,
            }
        }
        // Woken early on purpose: wait out the last stretch (at most the learned lead) on the CPU
        // rather than sleep again, so that no packet leaves before its due time and none waits
        // for another wake-up.
        if let Some(due) = q.next_due() {
            if due.saturating_sub(now()) <= waking.lead() {
                while now() < due {
                    std::hint::spin_loop();
                }
            }
        }
        let t = now();
        while let Some(p) = q.pop_due(t) {
            loop {
                match rustix::io::write(&to.file, &p) {
                    Ok(_) => break,
                    Err(Errno::INTR) => continue,
                    // The far side's backlog is full or it is going away: the packet is lost,
                    // as on a congested wire; TCP recovers.
                    Err(_) => {
                        write_failures += 1;
                        break;
                    }
                }
            }
        }
        if let Ok(mut c) = counts.lock() {
            *c = q.counts();
            c.overflow += write_failures;
        }
    }
}

/// How late timed waits wake in this thread: a moving average of the overshoot of each wait
/// that ran out, which the forwarder subtracts from its next wait (and spins through the rest).
/// Capped, so that a stall of the machine cannot turn into a long spin.
#[derive(Debug, Default)]
struct Waking {
    /// Average overshoot in ns, times 8 (an exponential average with weight 1/8).
    avg8: u64,
}

/// The most the forwarder wakes early (and so the longest it spins per wake).
const MAX_LEAD: Nanos = 200_000;

impl Waking {
    fn observe(&mut self, late: Nanos) {
        let late = late.min(MAX_LEAD);
        self.avg8 = self.avg8 - self.avg8 / 8 + late;
    }

    fn lead(&self) -> Nanos {
        (self.avg8 / 8).min(MAX_LEAD)
    }
}

#[cfg(test)]
mod waking_tests {
    use super::*;

    /// The lead follows the observed lateness, and never exceeds its cap however late a wait
    /// woke.
    #[test]
    fn the_lead_learns_the_lateness_and_stays_capped() {
        let mut w = Waking::default();
        assert_eq!(w.lead(), 0);
        for _ in 0..100 {
            w.observe(60_000);
        }
        assert!((55_000..=60_000).contains(&w.lead()), "{}", w.lead());
        for _ in 0..100 {
            w.observe(10_000_000);
        }
        assert_eq!(w.lead(), MAX_LEAD);
        for _ in 0..200 {
            w.observe(0);
        }
        assert!(w.lead() < 1_000, "{}", w.lead());
    }
}
