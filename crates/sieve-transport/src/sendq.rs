//! What the kernel still holds in the sender's sockets.
//!
//! The sender gives up on a session that makes no progress for its idle timeout. Counting the
//! bytes it hands to its sockets is not enough on a slow link: once the last frame is written,
//! megabytes may still sit in the socket buffers and drain for longer than the idle timeout while
//! the receiver works normally. The kernel's count of bytes a socket holds that the peer has not
//! acknowledged yet (`SIOCOUTQ`) shrinking is progress too.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Mutex;

/// The sockets of one session, watched for bytes still queued in the kernel.
#[derive(Debug, Default)]
pub(crate) struct SendQueues(Mutex<Vec<OwnedFd>>);

impl SendQueues {
    /// Watch `socket` (through a duplicate of its descriptor, dropped with `self`). A socket that
    /// cannot be duplicated is simply not watched: the idle check then counts only written bytes.
    pub fn watch(&self, socket: &impl AsFd) {
        if let (Ok(fd), Ok(mut all)) = (socket.as_fd().try_clone_to_owned(), self.0.lock()) {
            all.push(fd);
        }
    }

    /// Bytes written to the watched sockets that their peers have not acknowledged yet.
    pub fn pending(&self) -> u64 {
        self.0
            .lock()
            .map(|all| all.iter().filter_map(|fd| unacknowledged(fd.as_fd())).sum())
            .unwrap_or(0)
    }

    /// Bytes the peers of the watched sockets have acknowledged so far, and bytes written to them
    /// that TCP has not sent yet, each summed over the sockets, and whether a socket's congestion
    /// window is still growing: how fast a link drains, whether it had bytes waiting for it, and
    /// whether TCP has found the link's rate yet (see the sender's link monitor). Sockets whose
    /// counts cannot be read count 0 and as not growing.
    pub fn counts(&self) -> Drain {
        self.0
            .lock()
            .map(|all| {
                all.iter().fold(Drain::default(), |d, fd| {
                    let fd = fd.as_fd();
                    let info = tcp_info(fd);
                    Drain {
                        acknowledged: d.acknowledged + info.as_ref().map_or(0, |i| i.bytes_acked),
                        unsent: d.unsent + info.as_ref().map_or(0, |i| i.unsent),
                        growing: d.growing || info.as_ref().is_some_and(|i| i.slow_start),
                        queueing: d.queueing || info.as_ref().is_some_and(|i| i.queueing),
                        peer_limited_us: d.peer_limited_us
                            + info.as_ref().map_or(0, |i| i.rwnd_limited_us),
                    }
                })
            })
            .unwrap_or_default()
    }

    /// The addresses the watched sockets are connected to (sockets whose peer cannot be read
    /// are left out).
    pub fn peer_ips(&self) -> Vec<std::net::IpAddr> {
        self.0
            .lock()
            .map(|all| {
                all.iter()
                    .filter_map(|fd| rustix::net::getpeername(fd.as_fd()).ok().flatten())
                    .filter_map(|a| std::net::SocketAddr::try_from(a).ok())
                    .map(|a| a.ip())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The least round trip any watched socket has seen (`tcpi_min_rtt`, else its smoothed
    /// round trip), if one could be read: right after connecting, the handshake's.
    pub fn min_rtt(&self) -> Option<std::time::Duration> {
        let all = self.0.lock().ok()?;
        all.iter()
            .filter_map(|fd| tcp_info(fd.as_fd())?.min_rtt_us)
            .min()
            .map(|us| std::time::Duration::from_micros(u64::from(us)))
    }

    /// Let each watched socket take new bytes only while fewer than `bytes` of what it holds
    /// are not sent yet (`TCP_NOTSENT_LOWAT`); bytes in flight are not limited.
    ///
    /// Why: a sender that compresses chooses each frame's level from what the link did lately.
    /// A socket buffer tuned for a long fat path holds megabytes, and a sender free to fill it
    /// commits seconds of a slow link's time to the level chosen before anything was measured.
    /// With a small unsent queue, frames are compressed shortly before they leave, at the level
    /// chosen last. Sockets that refuse the option are left as they are.
    pub fn limit_unsent(&self, bytes: u32) {
        if let Ok(all) = self.0.lock() {
            for fd in all.iter() {
                let _ = set_notsent_lowat(fd.as_fd(), bytes);
            }
        }
    }

    /// For each watched socket, how many bytes its peer will have acknowledged once everything
    /// written to it so far has arrived: the acknowledged bytes plus those still queued. A mark
    /// for [`SendQueues::delivered`].
    ///
    /// Why it matters: `sendfile(2)` queues references to the file's pages, not copies, so a byte
    /// still queued goes out as the page holds it when it is transmitted. A sender that must not
    /// let a change to a file reach the wire waits until the bytes queued before the change are
    /// acknowledged (see `crate::change`).
    pub fn written(&self) -> Vec<Option<u64>> {
        self.0
            .lock()
            .map(|all| {
                all.iter()
                    .map(|fd| {
                        let fd = fd.as_fd();
                        Some(tcp_info(fd)?.bytes_acked + unacknowledged(fd)?)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether the peer of every socket of `mark` ([`SendQueues::written`]) has acknowledged
    /// that many bytes. Sockets whose counts cannot be read are taken as delivered.
    pub fn delivered(&self, mark: &[Option<u64>]) -> bool {
        let Ok(all) = self.0.lock() else {
            return true;
        };
        all.iter()
            .zip(mark)
            .all(|(fd, m)| match (m, tcp_info(fd.as_fd())) {
                (Some(m), Some(i)) => i.bytes_acked >= *m,
                _ => true,
            })
    }
}

/// What [`SendQueues::counts`] sums over the sockets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Drain {
    /// Bytes the peers acknowledged.
    pub acknowledged: u64,
    /// Bytes written and not sent yet: they wait for the congestion window or the peer's
    /// receive window. Bytes in flight (sent, not acknowledged) are not counted: on a long path
    /// a sender that cannot keep the pipe full still has a round trip's worth in flight, and
    /// those bytes say nothing of how fast the path could go.
    pub unsent: u64,
    /// Some socket is in slow start: its window, not the link, bounds what leaves.
    pub growing: bool,
    /// Some socket with bytes in flight sees its round trip grown well above the least it has
    /// seen: a queue stands at the path's bottleneck, so the path is full and what it drains
    /// is the path's rate, even while a window still grows.
    pub queueing: bool,
    /// Microseconds the sockets have spent, so far, with bytes to send that the peer's receive
    /// window did not admit (summed). A peer's window opens over the first round trips as its
    /// kernel tunes its buffer, and stays shut while its application is slow to read: either
    /// way the peer, not the link, set the pace.
    pub peer_limited_us: u64,
}

/// The few fields of a TCP socket's `tcp_info` the sender reads.
struct TcpInfo {
    /// Bytes its peer has acknowledged (`tcpi_bytes_acked`, Linux 4.1 and later).
    bytes_acked: u64,
    /// Bytes written and not sent yet (`tcpi_notsent_bytes`, Linux 4.6 and later; 0 before).
    unsent: u64,
    /// Microseconds limited by the peer's receive window (`tcpi_rwnd_limited`, Linux 4.10 and
    /// later; 0 before).
    rwnd_limited_us: u64,
    /// The congestion window is in slow start and still growing: below the slow-start threshold
    /// (`tcpi_snd_cwnd < tcpi_snd_ssthresh`; the threshold starts "infinite" and is set once
    /// TCP sees a loss or, with HyStart, a rising delay: once it has found the path's capacity),
    /// and what leaves is bounded by it: either the window is full by the kernel's own rule for
    /// slow start (`cwnd < 2 · packets out`, `tcp_is_cwnd_limited`), or written bytes wait to be
    /// sent (in slow start the kernel paces at twice the window per round trip, so bytes wait
    /// for the pacer even before the window is full: on a 1 Gbit/s path with a 20 ms round trip
    /// the first round trips leave at 2-4 MB/s). A socket limited by its buffer does not grow
    /// its window, and its drain is as much as that path gives it.
    slow_start: bool,
    /// Bytes are in flight and the smoothed round trip exceeds the least one seen
    /// (`tcpi_min_rtt`, Linux 4.6 and later) by a quarter of it and at least a millisecond.
    queueing: bool,
    /// The least round trip seen, in microseconds (`tcpi_min_rtt`, else `tcpi_rtt`; `None`
    /// before any was measured).
    min_rtt_us: Option<u32>,
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn tcp_info(fd: BorrowedFd<'_>) -> Option<TcpInfo> {
    use std::os::fd::AsRawFd;
    // rustix has no wrapper for TCP_INFO, so the option is read with libc.
    // SAFETY: `info` is a properly aligned, writable `tcp_info` that lives across the call, and
    // `len` says its size; the kernel writes at most `len` bytes into it and sets `len` to what
    // it wrote. A zeroed `tcp_info` is a valid value (integers only), so fields the kernel does
    // not fill stay 0, and `len` is checked to cover `tcpi_bytes_acked` (the last field read)
    // before anything is read.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    let needed = std::mem::offset_of!(libc::tcp_info, tcpi_bytes_acked) + 8;
    let has = |offset: usize, size: usize| len as usize >= offset + size;
    let has_unsent = has(std::mem::offset_of!(libc::tcp_info, tcpi_notsent_bytes), 4);
    let has_rwnd = has(std::mem::offset_of!(libc::tcp_info, tcpi_rwnd_limited), 8);
    let has_min_rtt = has(std::mem::offset_of!(libc::tcp_info, tcpi_min_rtt), 4);
    let (rtt, min_rtt) = (info.tcpi_rtt, info.tcpi_min_rtt);
    let queueing = has_min_rtt
        && info.tcpi_unacked > 0
        && min_rtt > 0
        && rtt > min_rtt.saturating_add((min_rtt / 4).max(1000));
    let least = if has_min_rtt && min_rtt > 0 {
        min_rtt
    } else {
        rtt
    };
    (r == 0 && len as usize >= needed).then_some(TcpInfo {
        queueing,
        min_rtt_us: (least > 0).then_some(least),
        bytes_acked: info.tcpi_bytes_acked,
        unsent: if has_unsent {
            u64::from(info.tcpi_notsent_bytes)
        } else {
            0
        },
        rwnd_limited_us: if has_rwnd { info.tcpi_rwnd_limited } else { 0 },
        slow_start: info.tcpi_snd_cwnd < info.tcpi_snd_ssthresh
            && (info.tcpi_snd_cwnd < 2 * info.tcpi_unacked
                || (has_unsent && info.tcpi_notsent_bytes > 0)),
    })
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn tcp_info(_fd: BorrowedFd<'_>) -> Option<TcpInfo> {
    None
}

/// Bytes of unsent data above which `fd` stops taking writes (see [`SendQueues::limit_unsent`]).
#[cfg(target_os = "linux")]
fn set_notsent_lowat(fd: BorrowedFd<'_>, bytes: u32) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    crate::sockopt::set_int(
        fd.as_raw_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_NOTSENT_LOWAT,
        bytes as usize,
    )
}

#[cfg(not(target_os = "linux"))]
fn set_notsent_lowat(_fd: BorrowedFd<'_>, _bytes: u32) -> std::io::Result<()> {
    Ok(())
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn unacknowledged(fd: BorrowedFd<'_>) -> Option<u64> {
    use rustix::ioctl::{ioctl, Getter, Opcode};
    /// `SIOCOUTQ` (the same number as `TIOCOUTQ`): for a TCP socket, the bytes sent but not yet
    /// acknowledged plus those not yet sent (tcp(7)).
    const SIOCOUTQ: Opcode = 0x5411;
    // SAFETY: `Getter::new` requires that the opcode is valid and that the kernel writes exactly
    // an `int` for it; tcp(7) documents SIOCOUTQ as taking a pointer to an int, and `Getter`
    // passes a pointer to its own `MaybeUninit<c_int>`, which lives across the call. On a
    // descriptor that is not a TCP socket the kernel answers with an error and writes nothing,
    // and `ioctl` then returns that error without reading the output.
    let n = unsafe { ioctl(fd, Getter::<SIOCOUTQ, std::ffi::c_int>::new()) }.ok()?;
    u64::try_from(n).ok()
}

#[cfg(not(target_os = "linux"))]
fn unacknowledged(_fd: BorrowedFd<'_>) -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn counts_bytes_the_peer_has_not_read_and_drops_to_zero_when_it_does() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut tx = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut rx, _) = listener.accept().unwrap();
        let q = SendQueues::default();
        q.watch(&tx);
        assert_eq!(q.pending(), 0);
        // Loopback acknowledges at once what fits the receiver's buffer, so only a full buffer
        // leaves bytes unacknowledged: write until the socket would block.
        tx.set_nonblocking(true).unwrap();
        let chunk = vec![7u8; 1 << 16];
        let mut written = 0u64;
        loop {
            match tx.write(&chunk) {
                Ok(n) => written += n as u64,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("write: {e}"),
            }
        }
        let stuck = q.pending();
        assert!(stuck > 0 && stuck <= written, "{stuck} of {written}");
        let mut sink = vec![0u8; 1 << 20];
        let mut read = 0u64;
        while read < written {
            read += std::io::Read::read(&mut rx, &mut sink).unwrap() as u64;
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while q.pending() != 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(q.pending(), 0);
    }

    /// The peer of each watched socket is read back: the sender compares the plain channels'
    /// peers with the secure ones' to know whether they share a link.
    #[test]
    fn names_the_addresses_its_sockets_connect_to() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let tx = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let _rx = listener.accept().unwrap();
        let q = SendQueues::default();
        assert!(q.peer_ips().is_empty());
        q.watch(&tx);
        let ip: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(q.peer_ips(), vec![ip]);
        // A socket that never connected has no peer and is left out.
        let unconnected = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        q.watch(&unconnected);
        assert_eq!(q.peer_ips(), vec![ip]);
    }

    /// A connection with nothing in flight is not growing its window (nothing limits it) and has
    /// nothing waiting; one whose peer does not read has bytes waiting, and the time its peer's
    /// window held them back accrues while the window stays shut.
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn an_idle_socket_is_not_limited_and_a_shut_peer_window_is_seen() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut tx = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let _rx = listener.accept().unwrap();
        let q = SendQueues::default();
        assert_eq!(q.min_rtt(), None, "no socket watched");
        q.watch(&tx);
        // The handshake measured the loopback round trip: well under a millisecond.
        let rtt = q.min_rtt().expect("the handshake's round trip");
        assert!(rtt < std::time::Duration::from_millis(100), "{rtt:?}");
        let d = q.counts();
        assert!(!d.growing && d.unsent == 0, "idle: {d:?}");
        tx.set_nonblocking(true).unwrap();
        let chunk = vec![7u8; 1 << 16];
        while tx.write(&chunk).is_ok() {}
        let d = q.counts();
        assert!(d.unsent > 0, "peer's window full: {d:?}");
        // The time held back by the peer's window accrues while it stays shut.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let later = q.counts();
        assert!(
            later.peer_limited_us > d.peer_limited_us,
            "{d:?} then {later:?}"
        );
    }

    /// A mark taken while bytes are queued is delivered only once the peer has read them, and
    /// bytes written after the mark do not hold it back.
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn a_mark_is_delivered_when_the_bytes_before_it_are() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut tx = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut rx, _) = listener.accept().unwrap();
        let q = SendQueues::default();
        q.watch(&tx);
        tx.set_nonblocking(true).unwrap();
        let chunk = vec![7u8; 1 << 16];
        let mut written = 0u64;
        loop {
            match tx.write(&chunk) {
                Ok(n) => written += n as u64,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("write: {e}"),
            }
        }
        let mark = q.written();
        // The kernel counts the SYN among the acknowledged bytes.
        let m = mark[0].unwrap();
        assert!(
            m == written || m == written + 1,
            "{m} for {written} written"
        );
        assert!(!q.delivered(&mark));
        let mut sink = vec![0u8; 1 << 20];
        let mut read = 0u64;
        while read < written {
            read += std::io::Read::read(&mut rx, &mut sink).unwrap() as u64;
        }
        // More bytes after the mark, never read: the mark is still delivered.
        let _ = tx.write(&chunk);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !q.delivered(&mark) {
            assert!(std::time::Instant::now() < deadline, "never delivered");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}
