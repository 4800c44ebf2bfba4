//! Batched wake-ups for a reader in the middle of a large frame (`SO_RCVLOWAT`).
//!
//! On a fast link a receive loop is woken for every segment or two that arrives: each wake-up is
//! a scheduler round trip, an `epoll` event, a `read` and an early window update (an ACK the
//! sender must process). While a frame's payload is still far from complete, none of that is
//! useful. Telling the kernel how many bytes the reader still needs (`SO_RCVLOWAT`) makes it
//! wake the reader once that many have queued instead.
//!
//! The low-water mark must never exceed what is certain to come, or the reader would sleep on
//! bytes that never arrive: it is the rest of the current frame, less what the stream above the
//! socket may hold back (`slack`: part of a TLS record), capped at [`MAX`], and one byte between
//! frames. It is raised before a read (a busy reader rarely waits, finding a segment or two
//! each time it looks, so it must be raised before it is needed) and lowered only before a wait
//! (each change is a system call). Should the bytes still come too slowly (a slow link, a peer
//! that stalls mid-frame), the reader gives up batching for the rest of the frame after
//! [`PATIENCE`] (or a quarter of its idle timeout), so idle checks see every byte as before.

use std::os::fd::RawFd;
use std::time::Duration;

/// Below this many bytes still to come, the reader is woken as usual.
pub(crate) const MIN: usize = 64 << 10;
/// The most bytes a reader waits for at once.
pub const MAX: usize = 1 << 20;
/// How long a batched wait may last at most before the reader goes back to waking for every
/// byte (less if the reader's idle timeout is short; see [`Lowat::new`]).
pub(crate) const PATIENCE: Duration = Duration::from_millis(200);

/// The low-water mark of one socket, as its reader last set it.
#[derive(Debug)]
pub(crate) struct Lowat {
    /// A raw descriptor, not a `BorrowedFd`: the socket is owned by the stream the same
    /// `FrameReader` holds (boxed, behind TLS for a secure channel), and a borrow of it cannot be
    /// stored beside its owner. The reader keeps both and drops them together, which is the
    /// rule a `BorrowedFd` would state; a duplicate (`OwnedFd`) would cost every connection a
    /// second descriptor against the receiver's descriptor budget.
    fd: RawFd,
    slack: usize,
    patience: Duration,
    current: usize,
    /// Batching is off until the next frame (the last batched wait ran out of patience).
    paused: bool,
    /// The socket refused the option: batching is off for good.
    refused: bool,
}

impl Lowat {
    /// Manage `fd`'s low-water mark. `fd` must be the socket the reader reads from, kept open by
    /// it; `slack` is how many bytes the stream above the socket may hold back (0 for plain TCP,
    /// a record for TLS). A batched wait lasts at most a quarter of `idle`, the timeout after
    /// which the reader's owner calls a connection that shows no new bytes idle.
    pub fn new(fd: RawFd, slack: usize, idle: Duration) -> Lowat {
        Lowat {
            fd,
            slack,
            patience: PATIENCE.min(idle / 4),
            current: 1,
            paused: false,
            refused: false,
        }
    }

    /// How long the next batched wait may last.
    pub fn patience(&self) -> Duration {
        self.patience
    }

    /// A new frame begins: batching may resume.
    pub fn next_frame(&mut self) {
        self.paused = false;
    }

    /// The last batched wait ran out of patience: wake for every byte until the next frame.
    pub(crate) fn pause(&mut self) {
        self.paused = true;
        self.set(1);
    }

    /// The mark that suits a frame still `need` bytes short (0 between frames).
    fn target(&self, need: usize) -> usize {
        let coming = need.saturating_sub(self.slack);
        if self.paused || self.refused || coming < MIN {
            1
        } else {
            coming.min(MAX)
        }
    }

    /// The reader is about to read, its frame `need` bytes short: raise the mark if it is far
    /// below what the frame still needs. Raising is safe whether or not the read then waits.
    pub(crate) fn before_read(&mut self, need: usize) {
        let t = self.target(need);
        if t / 2 > self.current {
            self.set(t);
        }
    }

    /// The reader must wait, its frame `need` bytes short (0 between frames): lower the mark if
    /// it asks for more than will come. Returns whether the wait is batched (and so should be
    /// bounded by [`PATIENCE`]).
    pub(crate) fn before_wait(&mut self, need: usize) -> bool {
        let coming = need.saturating_sub(self.slack);
        if self.current > coming || self.paused {
            self.set(self.target(need));
        }
        self.current > 1
    }

    fn set(&mut self, bytes: usize) {
        if bytes != self.current {
            // A socket that refuses (or a platform without the option) keeps waking the
            // reader for every segment, which is only slower; remember that and stop asking.
            match set_rcvlowat(self.fd, bytes) {
                Ok(()) => self.current = bytes,
                Err(_) => self.refused = true,
            }
        }
    }
}

/// The descriptor is [`Lowat::new`]'s: the reader's own socket, which the reader keeps open as
/// long as it holds this `Lowat`.
#[cfg(target_os = "linux")]
fn set_rcvlowat(fd: RawFd, bytes: usize) -> std::io::Result<()> {
    crate::sockopt::set_int(fd, libc::SOL_SOCKET, libc::SO_RCVLOWAT, bytes)
}

/// Elsewhere `SO_RCVLOWAT` may not wake `poll`-style waiters as Linux does; leave it alone.
#[cfg(not(target_os = "linux"))]
fn set_rcvlowat(_fd: RawFd, _bytes: usize) -> std::io::Result<()> {
    Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[allow(unsafe_code)]
    fn rcvlowat(fd: RawFd) -> libc::c_int {
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `v` and `len` are valid for writes of the sizes given, for the whole call.
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVLOWAT,
                (&mut v as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        assert_eq!(r, 0);
        v
    }

    #[test]
    fn the_mark_follows_what_the_frame_still_needs() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let fd = s.as_raw_fd();
        let mut m = Lowat::new(fd, 32 << 10, Duration::from_secs(30));
        assert_eq!(m.patience(), PATIENCE);
        // A frame far from its end: raised and capped before the first read.
        m.before_read(4 << 20);
        assert_eq!(rcvlowat(fd), MAX as libc::c_int);
        // A wait while more than the mark is still to come keeps it.
        assert!(m.before_wait(2 << 20));
        assert_eq!(rcvlowat(fd), MAX as libc::c_int);
        // Nor does a read change it while it is not far below what is needed.
        m.before_read(1 << 20);
        assert_eq!(rcvlowat(fd), MAX as libc::c_int);
        // A wait near the end: exactly what must still come through the socket.
        assert!(m.before_wait(512 << 10));
        assert_eq!(rcvlowat(fd), ((512 - 32) << 10) as libc::c_int);
        // Closer than MIN (slack counted): every byte wakes again.
        assert!(!m.before_wait(90 << 10));
        assert_eq!(rcvlowat(fd), 1);
        // Between frames: one byte.
        m.before_read(4 << 20);
        assert!(!m.before_wait(0));
        assert_eq!(rcvlowat(fd), 1);
        // Out of patience: off until the next frame.
        m.before_read(4 << 20);
        m.pause();
        assert_eq!(rcvlowat(fd), 1);
        m.before_read(4 << 20);
        assert!(!m.before_wait(4 << 20));
        assert_eq!(rcvlowat(fd), 1);
        m.next_frame();
        m.before_read(4 << 20);
        assert!(m.before_wait(4 << 20));
        assert_eq!(rcvlowat(fd), MAX as libc::c_int);
    }

    #[test]
    fn a_descriptor_that_is_not_a_socket_turns_batching_off() {
        let f = std::fs::File::open("/dev/null").unwrap();
        let mut m = Lowat::new(f.as_raw_fd(), 0, Duration::from_millis(100));
        assert_eq!(m.patience(), Duration::from_millis(25));
        m.before_read(4 << 20);
        assert!(!m.before_wait(4 << 20));
        m.next_frame();
        m.before_read(4 << 20);
        assert!(!m.before_wait(4 << 20));
    }
}
