//! What one receiver allows: sessions, documents, frames, and how its two shared budgets (file
//! descriptors and frame-buffer memory) are divided among sessions so that none can starve the
//! others.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sieve_core::frame::Limits;
use sieve_core::receiver::InflateLimit;

/// Most documents of one session whose temporary files are open at once (each holds a file
/// descriptor while its pieces arrive), whatever the descriptor budget. Each session is told its
/// own share ([`FdBudget::session_docs`]) in SESSION, and senders keep no more than that
/// unacknowledged.
pub const MAX_OPEN_DOCS: u64 = 1024;

/// Largest payload accepted before a connection is authenticated (its HELLO or JOIN; both are a
/// few dozen bytes). Without it every unauthenticated connection could make the receiver reserve
/// a buffer of the full frame limit (16 MiB) by sending one header.
pub(crate) const PREAUTH_MAX_PAYLOAD: u32 = 4096;

pub use sieve_core::message::MAX_CHANNELS;

/// Default of [`ServeLimits::max_buffer_bytes`]: 64 sessions × 32 channels × a 256 KiB frame
/// (the sender's default chunk) each.
pub(crate) const DEFAULT_MAX_BUFFER_BYTES: u64 = 512 << 20;

/// One session may hold this fraction of the frame-buffer budget (or 1 / `max_sessions`, if
/// more): its frame limit is that share divided among its channels (each holds at most one
/// frame), so that one session, however large the frames it claims, never takes the budget from
/// the others.
pub const SESSION_BUFFER_SHARE: u64 = 8;

/// Smallest frame limit a session is given, whatever its share of the budget.
pub const MIN_SESSION_PAYLOAD: u32 = 64 << 10;

/// The frame limit of a session with `channels` channels: its share of the frame-buffer budget
/// ([`SESSION_BUFFER_SHARE`]) over its channels, within [`MIN_SESSION_PAYLOAD`] and the
/// receiver's frame limit. SESSION tells the sender, which sizes its frames below it.
pub fn session_frame_limit(limits: &ServeLimits, channels: u64) -> Limits {
    let sessions = SESSION_BUFFER_SHARE.min(limits.max_sessions as u64).max(1);
    let share = limits.max_buffer_bytes / sessions / channels.max(1);
    Limits {
        max_payload: u32::try_from(share)
            .unwrap_or(u32::MAX)
            .max(MIN_SESSION_PAYLOAD)
            .min(limits.frame.max_payload),
    }
}

/// What the protocol itself may hold (manifests, placements, ledgers; see
/// `sieve_core::receiver`), all sessions together: a quarter of the frame-buffer budget, on top of
/// it, so that `--max-buffer-memory` bounds both.
pub(crate) fn protocol_memory_bytes(limits: &ServeLimits) -> u64 {
    limits.max_buffer_bytes / 4
}

/// One session's share of [`protocol_memory_bytes`]: the same fraction as of the frame buffers
/// ([`SESSION_BUFFER_SHARE`]), so that one peer cannot hold what every other session needs.
pub(crate) fn protocol_memory_share(limits: &ServeLimits) -> u64 {
    let sessions = SESSION_BUFFER_SHARE.min(limits.max_sessions as u64).max(1);
    protocol_memory_bytes(limits) / sessions
}

/// Smallest frame-buffer budget accepted: one frame's first step ([`crate::conn::GROW_STEP`])
/// and then some.
pub(crate) const MIN_BUFFER_BYTES: u64 = 4 << 20;

/// Limits that keep one receiver safe from any one peer.
#[derive(Debug, Clone)]
pub struct ServeLimits {
    /// Sessions open at once; a HELLO beyond them is refused (ERROR with code LIMIT).
    pub max_sessions: usize,
    /// Largest document accepted, in bytes.
    pub max_doc_bytes: u64,
    /// A session that makes no progress for this long is dropped: progress is 16 KiB moved on
    /// its channels together, or a frame other than data (see [`crate::progress`]).
    pub idle_timeout: Duration,
    /// Time allowed for a TLS handshake.
    pub handshake_timeout: Duration,
    /// Most documents one session may announce.
    pub max_docs_per_session: u32,
    /// Connections that have not yet authenticated, per listener: when they are all taken, the
    /// oldest is dropped for a newcomer.
    pub max_pending: usize,
    /// Of those, from one source address.
    pub max_pending_per_addr: usize,
    /// Sessions of one client address (and, under mutual TLS, of one client certificate).
    pub max_sessions_per_client: usize,
    /// Sessions of one network: an IPv4 /24, an IPv6 /64 (one host may use every address of
    /// its /64). `None`: [`ServeLimits::sessions_per_network`]'s default.
    pub max_sessions_per_network: Option<usize>,
    /// Bytes per second a session must move, measured over the last
    /// [`CREDIT_WINDOW`](crate::progress::CREDIT_WINDOW), to be sure of its place: a newcomer
    /// that finds the receiver (or its address, network or certificate) at its limit ends the
    /// session furthest below this rate, if one is below it, instead of being refused. A
    /// session at or above it is never ended for a newcomer.
    pub min_session_rate: u64,
    /// Time allowed for the first frame (HELLO or JOIN) once a connection is open (plain) or
    /// its TLS handshake is done.
    pub join_timeout: Duration,
    /// Frame limit before a connection is authenticated; a session's channels get
    /// [`session_frame_limit`]'s.
    pub frame: Limits,
    /// Most segments in one manifest. A segment costs the receiver about 3 bytes (see
    /// `sieve_core::sieve::Placement`), charged to the session's share of the protocol's
    /// memory, which usually binds first.
    pub max_segments: usize,
    /// File descriptors the receiver may use; `None`: the process's open-file limit
    /// (`ulimit -n`, RLIMIT_NOFILE). See [`FdBudget`].
    pub max_open_files: Option<u64>,
    /// Most bytes all connections together may hold in frame buffers (frames being received).
    /// A channel whose next piece of frame does not fit waits for others to give memory back; if
    /// it waits longer than `idle_timeout`, its session fails with [`BufferExhausted`](crate::conn::BufferExhausted). See
    /// [`FrameBudget`](crate::conn::FrameBudget).
    pub max_buffer_bytes: u64,
    /// How far compressed frames of a document not yet verified may inflate (`sieve serve
    /// --max-compression-ratio`, `--compression-allowance`; see [`InflateLimit`]).
    pub inflate: InflateLimit,
}

impl Default for ServeLimits {
    fn default() -> Self {
        ServeLimits {
            max_sessions: 64,
            max_doc_bytes: 1 << 40,
            idle_timeout: Duration::from_secs(60),
            handshake_timeout: Duration::from_secs(10),
            max_docs_per_session: 1_000_000,
            max_pending: 512,
            max_pending_per_addr: 512 / 4,
            max_sessions_per_client: 16,
            max_sessions_per_network: None,
            min_session_rate: DEFAULT_MIN_SESSION_RATE,
            join_timeout: Duration::from_secs(2),
            frame: Limits::default(),
            max_segments: 64_000_000,
            max_open_files: None,
            max_buffer_bytes: DEFAULT_MAX_BUFFER_BYTES,
            inflate: InflateLimit::default(),
        }
    }
}

/// Default of [`ServeLimits::min_session_rate`]: 64 KiB/s (512 kbit/s). A sender with
/// anything to send moves far more, even on a slow link; one that stays below it for
/// [`CREDIT_WINDOW`](crate::progress::CREDIT_WINDOW) is not sending a document but holding a
/// place, and gives way when someone else needs it. To hold all 64 default places, a peer must
/// keep 4 MiB/s of frames coming.
pub const DEFAULT_MIN_SESSION_RATE: u64 = 64 << 10;

impl ServeLimits {
    /// Sessions one network may hold: [`ServeLimits::max_sessions_per_network`], or by default
    /// half of `max_sessions` (one network cannot take every place), and no fewer than one
    /// address may hold.
    pub fn sessions_per_network(&self) -> usize {
        self.max_sessions_per_network
            .unwrap_or((self.max_sessions / 2).max(self.max_sessions_per_client))
            .max(1)
    }
}

/// How the receiver shares its file descriptors (`ulimit -n`) so that it never runs out of them.
///
/// Every connection and every document being received holds one descriptor. Both are counted
/// here. A new connection is accepted only below [`FdBudget::conn_limit`]; a new session or a new
/// document's temporary file only below the lower [`FdBudget::doc_limit`], so that documents can
/// never take the descriptors that new connections (and the refusals they are owed) need. What
/// stays above `conn_limit` is kept for the process itself: its listeners, the runtime, the
/// folder opened for each commit's fsync. A document refused for this reason fails with a clear
/// message instead of EMFILE ("Too many open files") ending the whole session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdBudget {
    /// The open-file limit the budget was derived from.
    pub nofile: u64,
    /// Descriptors in use below which a new connection is accepted.
    pub conn_limit: u64,
    /// Descriptors in use below which a new session or document file is opened (below
    /// `conn_limit`).
    pub doc_limit: u64,
}

impl FdBudget {
    /// The budget for an open-file limit of `nofile`.
    pub fn for_limit(nofile: u64) -> FdBudget {
        let reserve = 32 + nofile / 16;
        let conn_limit = nofile.saturating_sub(reserve).max(2);
        FdBudget {
            nofile,
            conn_limit,
            doc_limit: (conn_limit - conn_limit / 4).max(1),
        }
    }

    /// How many documents one session may hold open at once: a quarter of the documents'
    /// budget (at most [`MAX_OPEN_DOCS`]), so that a session with many documents leaves room for
    /// others, and its sender (told this in SESSION) waits instead of having documents refused.
    pub fn session_docs(&self) -> u64 {
        (self.doc_limit / 4).clamp(1, MAX_OPEN_DOCS)
    }

    /// The budget for this process's soft RLIMIT_NOFILE (read from /proc/self/limits; 1024 if it
    /// cannot be read).
    pub(crate) fn for_this_process() -> FdBudget {
        FdBudget::for_limit(open_file_limit().unwrap_or(1024))
    }
}

/// The soft limit on open files of this process.
fn open_file_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line
        .trim_start_matches("Max open files")
        .split_whitespace()
        .next()?;
    if soft == "unlimited" {
        return Some(1 << 20);
    }
    soft.parse().ok()
}

/// One unit of a shared count, given back when dropped.
pub(super) struct Held(Arc<AtomicU64>);

impl Held {
    /// Take one unit if the count is below `limit`.
    pub(super) fn take(count: &Arc<AtomicU64>, limit: u64) -> Option<Held> {
        count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()
            .map(|_| Held(count.clone()))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

// The arithmetic both ends rely on lives in the core, beside the frame limits.
pub use sieve_core::budget::stall_free_buffer_bytes;

/// The frame limit for a connection's first frame.
pub(super) fn preauth(frame: Limits) -> Limits {
    Limits {
        max_payload: frame.max_payload.min(PREAUTH_MAX_PAYLOAD),
    }
}
