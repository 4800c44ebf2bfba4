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

    /// Bytes the peers of the watched sockets have acknowledged so far, and bytes still queued
    /// in them (sent and not acknowledged, or not sent yet), each summed over the sockets, and
    /// whether a socket's congestion window is still growing: how fast a link drains, whether
    /// it had bytes waiting, and whether TCP has found the link's rate yet (see the sender's link
    /// monitor). Sockets whose counts cannot be read count 0 and as not growing.
    pub fn counts(&self) -> Drain {
        self.0
            .lock()
            .map(|all| {
                all.iter().fold(Drain::default(), |d, fd| {
                    let fd = fd.as_fd();
                    let info = tcp_info(fd);
                    Drain {
                        acknowledged: d.acknowledged + info.as_ref().map_or(0, |i| i.bytes_acked),
                        queued: d.queued + unacknowledged(fd).unwrap_or(0),
                        growing: d.growing || info.is_some_and(|i| i.slow_start),
                    }
                })
            })
            .unwrap_or_default()
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
    /// Bytes written and not acknowledged yet.
    pub queued: u64,
    /// Some socket is in slow start: its window, not the link, bounds what leaves.
    pub growing: bool,
}

/// The few fields of a TCP socket's `tcp_info` the sender reads.
struct TcpInfo {
    /// Bytes its peer has acknowledged (`tcpi_bytes_acked`, Linux 4.1 and later).
    bytes_acked: u64,
    /// The congestion window is in slow start and still growing: below the slow-start threshold
    /// (`tcpi_snd_cwnd < tcpi_snd_ssthresh`; the threshold starts "infinite" and is set once
    /// TCP sees a loss or, with HyStart, a rising delay: once it has found the path's capacity),
    /// and limiting what is in flight by the kernel's own rule for slow start (`cwnd < 2 ·
    /// packets out`, `tcp_is_cwnd_limited`). A socket limited by its buffer or its peer's window
    /// does not grow its window, and its drain is as much as that path gives it.
    slow_start: bool,
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
    (r == 0 && len as usize >= needed).then_some(TcpInfo {
        bytes_acked: info.tcpi_bytes_acked,
        slow_start: info.tcpi_snd_cwnd < info.tcpi_snd_ssthresh
            && info.tcpi_snd_cwnd < 2 * info.tcpi_unacked,
    })
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn tcp_info(_fd: BorrowedFd<'_>) -> Option<TcpInfo> {
    None
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

    /// A connection with nothing in flight is not growing its window (nothing limits it); one
    /// whose peer does not read is limited by the peer's window, not its own, so it is not
    /// growing either: only a window that bounds what is in flight grows.
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn only_a_window_that_limits_what_is_in_flight_is_growing() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut tx = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let _rx = listener.accept().unwrap();
        let q = SendQueues::default();
        q.watch(&tx);
        let d = q.counts();
        assert!(!d.growing, "idle: {d:?}");
        tx.set_nonblocking(true).unwrap();
        let chunk = vec![7u8; 1 << 16];
        while tx.write(&chunk).is_ok() {}
        let d = q.counts();
        assert!(d.queued > 0 && !d.growing, "peer's window full: {d:?}");
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
