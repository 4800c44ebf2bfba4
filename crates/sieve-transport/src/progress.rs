//! How much a session moves: the receiver's measure of progress, for its idle timeout and for
//! choosing which session makes room when it is full.
//!
//! A frame is not progress by itself: a peer that sends a one-byte DATA frame every few seconds
//! completes frames, and 2^30 of them fit in a 1 GiB document. Bytes are. A session is *active*
//! while its channels together move [`ACTIVITY_STEP`] bytes, or a frame other than data (a
//! manifest, DOC_END, BYE), within each idle timeout; and it *keeps up* while it moves at least
//! a minimum rate ([`crate::receiver::ServeLimits::min_session_rate`]), measured over the last
//! [`CREDIT_WINDOW`]. Only the second decides who gives way: a receiver at its limit of sessions
//! ends the session furthest behind that rate to admit a newcomer, never one that keeps up.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bytes that count as activity (see the module's documentation); also the granularity of the
/// credit a session earns.
pub(crate) const ACTIVITY_STEP: usize = 16 << 10;

/// How far back a session's rate is measured: a session earns at most this long of the minimum
/// rate ahead, so that one that moved much a while ago and now trickles falls behind within
/// it; and owes at most as much, so that one that starts moving again catches up within it.
pub const CREDIT_WINDOW: Duration = Duration::from_secs(16);

/// What the channels of one session have moved, shared by their readers (see the module's
/// documentation).
#[derive(Debug, Clone)]
pub(crate) struct Activity {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    since: Instant,
    /// Milliseconds after `since` of the last activity.
    last_ms: AtomicU64,
    /// Bytes moved so far, every frame's header and payload.
    bytes: AtomicU64,
    /// The minimum rate, bytes per second.
    rate: f64,
    credit: Mutex<Credit>,
}

/// A leaky bucket: bytes moved, less the minimum rate times the time passed, within
/// ± [`CREDIT_WINDOW`] of the rate.
#[derive(Debug)]
struct Credit {
    bytes: f64,
    at: Instant,
}

impl Activity {
    /// A session that must move `min_rate` bytes per second to keep up; it starts level (a
    /// newcomer falls behind only as time passes without bytes).
    pub(crate) fn new(min_rate: u64) -> Activity {
        let now = Instant::now();
        Activity {
            inner: Arc::new(Inner {
                since: now,
                last_ms: AtomicU64::new(0),
                bytes: AtomicU64::new(0),
                rate: min_rate as f64,
                credit: Mutex::new(Credit {
                    bytes: 0.0,
                    at: now,
                }),
            }),
        }
    }

    /// Something that counts as activity happened now (a whole frame other than data).
    pub(crate) fn touch(&self) {
        let now = self.inner.since.elapsed().as_millis() as u64;
        self.inner.last_ms.fetch_max(now, Ordering::Relaxed);
    }

    /// A reader of the session took `n` more bytes: every [`ACTIVITY_STEP`] of the session's
    /// total is activity, and credit.
    pub(crate) fn moved(&self, n: usize) {
        let before = self.inner.bytes.fetch_add(n as u64, Ordering::Relaxed);
        let step = ACTIVITY_STEP as u64;
        let steps = (before + n as u64) / step - before / step;
        if steps > 0 {
            self.touch();
            let mut c = self.credit_lock();
            self.settle(&mut c, Instant::now());
            c.bytes = (c.bytes + (steps * step) as f64).min(self.window_bytes());
        }
    }

    /// How long since the last activity.
    pub(crate) fn idle_for(&self) -> Duration {
        let now = self.inner.since.elapsed().as_millis() as u64;
        Duration::from_millis(now.saturating_sub(self.inner.last_ms.load(Ordering::Relaxed)))
    }

    /// Bytes ahead of the minimum rate (negative: behind it) over the last [`CREDIT_WINDOW`].
    pub(crate) fn credit(&self) -> f64 {
        let mut c = self.credit_lock();
        self.settle(&mut c, Instant::now());
        c.bytes
    }

    /// The minimum rate, bytes per second.
    pub(crate) fn min_rate(&self) -> u64 {
        self.inner.rate as u64
    }

    /// The rate over [`CREDIT_WINDOW`] is what a bucket of that many seconds holds.
    fn window_bytes(&self) -> f64 {
        self.inner.rate * CREDIT_WINDOW.as_secs_f64()
    }

    /// Charge the minimum rate for the time since the bucket was last looked at.
    fn settle(&self, c: &mut Credit, now: Instant) {
        let dt = now.saturating_duration_since(c.at).as_secs_f64();
        c.bytes = (c.bytes - self.inner.rate * dt).max(-self.window_bytes());
        c.at = now;
    }

    fn credit_lock(&self) -> std::sync::MutexGuard<'_, Credit> {
        // Two numbers, each written whole: a panic elsewhere cannot leave them inconsistent.
        self.inner.credit.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_count_by_the_step_and_credit_follows_the_rate() {
        let a = Activity::new(64 << 10);
        // Frames of 18 bytes: nothing until 16 KiB of them.
        for _ in 0..900 {
            a.moved(18);
        }
        assert!(a.credit() <= 0.0);
        a.moved(400);
        let c = a.credit();
        assert!(c > 15_000.0 && c <= ACTIVITY_STEP as f64, "{c}");
        // Never more than the window's worth ahead.
        a.moved(100 << 20);
        let most = (64u64 << 10) as f64 * CREDIT_WINDOW.as_secs_f64();
        assert!(a.credit() <= most && a.credit() > most - 64.0 * 1024.0);
        // Time without bytes costs the rate.
        let mut c = a.credit_lock();
        c.at =
            c.at.checked_sub(Duration::from_secs(100))
                .expect("an instant 100 s ago");
        drop(c);
        assert_eq!(a.credit(), -most);
    }
}
