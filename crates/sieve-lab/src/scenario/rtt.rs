//! The round-trip time of an emulated link, measured as `ping` measures it: a small datagram
//! from the client's namespace to the server's and straight back, timed at the client. UDP
//! instead of ICMP so that no tool and no raw socket is needed; the link (netem or the delay
//! line) treats both alike.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::inside::in_netns;
use super::NetPair;

/// Payload of a probe: 56 bytes, ping's default.
const PROBE: usize = 56;

/// `probes` round trips over `net`, one after another, after one that is not counted (it may
/// pay for neighbour discovery on a veth link). Each probe waits for its answer at most two
/// seconds plus the link's nominal RTT.
pub(crate) fn round_trips(net: &NetPair, probes: usize) -> Result<Vec<Duration>> {
    let server_ip = net.server_ip;
    let patience = Duration::from_secs(2) + Duration::from_secs_f64(net.link.delay_ms * 2e-3);
    let done = AtomicBool::new(false);
    let (port_tx, port_rx) = mpsc::channel();
    std::thread::scope(|s| {
        let echo = s.spawn(|| {
            in_netns(&net.server_ns, || {
                let sock = UdpSocket::bind((server_ip, 0)).context("cannot bind the echo")?;
                sock.set_read_timeout(Some(Duration::from_millis(100)))?;
                let _ = port_tx.send(sock.local_addr()?.port());
                let mut buf = [0u8; 2 * PROBE];
                while !done.load(Ordering::Relaxed) {
                    if let Ok((n, from)) = sock.recv_from(&mut buf) {
                        sock.send_to(&buf[..n], from)?;
                    }
                }
                Ok(())
            })
        });
        let measured = port_rx
            .recv_timeout(Duration::from_secs(10))
            .context("the echo did not start")
            .and_then(|port| {
                let to = SocketAddr::from((server_ip, port));
                in_netns(&net.client_ns, || probe(to, probes, patience))
            });
        done.store(true, Ordering::Relaxed);
        let echoed = echo
            .join()
            .map_err(|_| anyhow::anyhow!("the echo thread panicked"))?;
        let rtts = measured?;
        echoed?;
        Ok(rtts)
    })
}

fn probe(to: SocketAddr, probes: usize, patience: Duration) -> Result<Vec<Duration>> {
    let sock = UdpSocket::bind("0.0.0.0:0").context("cannot bind the probe")?;
    sock.connect(to)?;
    sock.set_read_timeout(Some(patience))?;
    let mut rtts = Vec::with_capacity(probes);
    let mut buf = [0u8; 2 * PROBE];
    for seq in 0..=probes as u64 {
        let mut msg = [0u8; PROBE];
        msg[..8].copy_from_slice(&seq.to_be_bytes());
        let t = Instant::now();
        sock.send(&msg)?;
        // Skip stale answers (a late one of an earlier probe) until ours comes back.
        loop {
            let n = sock
                .recv(&mut buf)
                .with_context(|| format!("probe {seq} got no answer within {patience:?}"))?;
            if n >= 8 && buf[..8] == seq.to_be_bytes() {
                break;
            }
        }
        if seq > 0 {
            rtts.push(t.elapsed());
        }
        // Spaced like a quick ping, so probes never queue behind each other.
        std::thread::sleep(Duration::from_millis(5));
    }
    if rtts.is_empty() {
        bail!("no probe was answered");
    }
    Ok(rtts)
}
