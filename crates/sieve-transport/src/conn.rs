//! Moving frames over a byte stream (TLS or plain TCP): the only place that reads or writes them.

use std::collections::HashMap;
use std::future::Future;
use std::io::IoSlice;
use std::net::IpAddr;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use sieve_core::frame::{self, FrameType, Limits, HEADER_LEN};
use sieve_core::message::{Data, Message};
use tokio::io::{
    AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter, Interest,
};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::{Notify, Semaphore, TryAcquireError};

use crate::lowat::Lowat;
use crate::progress::{Activity, ACTIVITY_STEP};

pub(crate) type BoxRead = Box<dyn AsyncRead + Send + Unpin>;
pub(crate) type BoxWrite = Box<dyn AsyncWrite + Send + Unpin>;

/// A frame buffer larger than this is given back once its frame is consumed; smaller ones are
/// kept for the next frame. Honest senders' data frames are at most 4 MiB
/// ([`crate::sender::AUTO_CHUNK_MAX`]) and their DATA prefix: a channel keeps the buffer of its
/// frames instead of zero-filling a fresh one for each, and once it holds it never waits for the
/// budget again (see [`crate::receiver::stall_free_buffer_bytes`]).
pub const RETAIN_BUFFER: usize = (4 << 20) + (64 << 10);

/// Most bytes of a frame's payload one read takes, so that whoever watches the frame arrive
/// ([`FrameReader::read_observed`]) sees it in steps that are still in the core's cache: the
/// receiver tags a plain frame's units as they arrive (see `mac::FrameTagger`). Two
/// [`crate::mac::MAC_BLOCK`]s: every step completes at least one unit. A read of a frame that has
/// already come costs a few microseconds per step, against hundreds for copying the step.
pub const READ_STEP: usize = 512 << 10;

/// A frame's payload buffer grows by at most this much at a time, as its bytes arrive.
pub const GROW_STEP: usize = 1 << 20;

/// A frame's payload buffer starts at this much (or the frame's length, if less) and doubles
/// as its bytes arrive, up to [`GROW_STEP`] at a time: a frame reserves about what has arrived
/// of it, never what it declares, and a header alone claiming 16 MiB costs this much.
pub const FIRST_STEP: usize = 64 << 10;

/// A frame in progress that has received less than its step ([`frame_step`]: a sixteenth of
/// the buffer it holds, 16 KiB at least) for this long, and a buffer between frames unused for
/// this long, give their memory back when another reader waits for it (see [`FrameBudget`]).
/// So a frame is sure of its memory while others wait only if that memory turns over within
/// 16 s: a peer cannot hold memory that honest frames need by sending its frames slowly, and
/// pinning any amount costs it a sixteenth of that amount every second, sent; a frame that
/// keeps arriving faster is never ended for another.
pub const FRAME_STALL: Duration = Duration::from_secs(1);

/// What a frame in progress holding a buffer of `held` bytes must receive within each
/// [`FRAME_STALL`] to be sure of its memory: a sixteenth of it, and at least 16 KiB. An honest 256 KiB frame needs 16 KiB/s; a 4 MiB one, 256 KiB/s.
pub fn frame_step(held: usize) -> usize {
    ACTIVITY_STEP.max(held / 16)
}

/// How often a reader waiting for memory looks again for memory to take back (see
/// [`FrameBudget`]).
const ROOM_CHECK: Duration = Duration::from_millis(100);

/// Frame-buffer memory shared by many [`FrameReader`]s: the receiver's global cap on what its
/// connections may hold in frames being received, whatever their headers claim.
///
/// Counted in KiB of buffer capacity. A reader takes its share before its buffer grows, keeps it
/// while the buffer is kept, and gives it back when the buffer is shrunk (after a frame larger
/// than [`RETAIN_BUFFER`]) or when the reader is dropped. A reader that finds the budget spent
/// waits, first come first served, at most `max_wait`; then its read fails with
/// [`BufferExhausted`].
///
/// The budget also keeps the buffers of readers that were dropped, up to [`POOLED_BUFFERS`]
/// of them, still counted as held, for the next connection's reader to take: a receiver serving
/// many short sessions would otherwise zero-fill, fault in and (growing it step by step) copy a
/// new buffer of up to [`RETAIN_BUFFER`] for every connection. A reader or reservation that
/// finds the budget spent frees the pooled buffers before it waits, so they never make anyone
/// wait.
///
/// Memory held by a peer that does not use it gives way to one that waits (checked every
/// [`ROOM_CHECK`] while anyone waits): a reader between frames whose buffer has been unused for
/// [`FRAME_STALL`] gives the buffer back (it grows another for its next frame), and of the
/// frames in progress that have received less than their [`frame_step`] for [`FRAME_STALL`],
/// the one slow longest ends, its read failing with [`FrameEvicted`] (a receiver ends its session). Buffers
/// are asked back first; a frame ends only if memory is still short a check later. A frame that
/// keeps arriving, and a reader that itself waits for memory, are never chosen by that rule.
///
/// Frames that wait for memory hold it too, and a peer that sends enough of its frames for all
/// of them to wait at once is never slow. So each network (a reader's network is given by
/// [`FrameReader::set_budget_shared`]: its peer's /24 or /64) has a share of the budget: the
/// budget over the networks holding memory or waiting for it, the waiter's own counted. While
/// a reader waits whose network holds less than its share, every other network holding more
/// gives way at once: its waiting frames end, its unused buffers are asked back, and its frames
/// in progress end, largest first, until what it holds is within its share; their reads fail
/// with [`FrameOverShare`]. A network is never made to give way to its own readers, nor to a
/// reader without a network: one honest sender alone, however many channels it has, waits for
/// its own memory as before, and two networks cannot end each other's frames at once (only the
/// one above its share gives way, to one below it).
#[derive(Debug)]
pub struct FrameBudget {
    permits: Semaphore,
    limit_kib: u64,
    max_wait: Duration,
    stats: Arc<BufferStats>,
    /// Buffers kept for the next reader, each a whole number of KiB long and counted as held.
    pool: std::sync::Mutex<Vec<Vec<u8>>>,
    /// Readers and reservations taking memory now (see [`FrameBudget::taking`]): while there
    /// are any, a dropped reader's buffer goes back to the budget, not to the pool, so that no
    /// one waits for memory that sits in the pool.
    taking: AtomicUsize,
    /// Every reader counted in this budget, by a number of its own, for [`FrameBudget::make_room`].
    holders: std::sync::Mutex<HashMap<u64, Arc<Holder>>>,
    next_holder: AtomicU64,
    /// [`FRAME_STALL`], or what a test sets.
    stall: Duration,
    /// What [`Holder::last_step_ms`] counts from.
    epoch: Instant,
}

/// What a [`FrameBudget`] knows of one reader, to ask it for memory back.
#[derive(Debug, Default)]
struct Holder {
    /// KiB of the budget the reader holds.
    kib: AtomicU64,
    /// Milliseconds after the budget's epoch of the reader's last step: a frame begun, another
    /// [`frame_step`] of one received, a wait for memory ended, a frame completed.
    last_step_ms: AtomicU64,
    /// [`IDLE`], [`PARTIAL`] or [`WAITING`].
    phase: AtomicU8,
    /// Set when the reader is to give back its unused buffer.
    give_back: Signal,
    /// Set when the reader's frame in progress is to end.
    evict: Signal,
    /// The reader's network (see [`FrameReader::set_budget_shared`]), if it has one.
    network: Option<IpAddr>,
    /// Set with [`Holder::evict`] when the frame ends because its network held more than its
    /// share: what the network held and its share then, in KiB, and the networks counted.
    over_share: std::sync::Mutex<Option<(u64, u64, usize)>>,
}

/// Between frames (or in a frame's header): the buffer is not in use.
const IDLE: u8 = 0;
/// In a frame's payload.
const PARTIAL: u8 = 1;
/// Waiting for the budget.
const WAITING: u8 = 2;

/// A flag another task waits on.
#[derive(Debug, Default)]
struct Signal {
    set: AtomicBool,
    notify: Notify,
}

impl Signal {
    fn raise(&self) {
        self.set.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    fn is_set(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }

    fn clear(&self) {
        self.set.store(false, Ordering::Release);
    }

    /// Completes once the flag is set (at once if it is).
    async fn wait(&self) {
        loop {
            let n = self.notify.notified();
            tokio::pin!(n);
            n.as_mut().enable();
            if self.is_set() {
                return;
            }
            n.await;
        }
    }
}

/// Counts one taker in [`FrameBudget::taking`] while it lives.
struct Taking<'a>(&'a AtomicUsize);

impl Drop for Taking<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Most buffers a [`FrameBudget`] keeps for readers to come.
pub const POOLED_BUFFERS: usize = 8;

/// What a [`FrameBudget`] has handed out.
#[derive(Debug, Default)]
pub struct BufferStats {
    /// Bytes of frame buffers held now, those kept in the pool included.
    pub bytes: AtomicU64,
    /// Bytes of the buffers kept in the pool for readers to come (see [`FrameBudget`]).
    pub pooled_bytes: AtomicU64,
    /// Most bytes of frame buffers ever held at once.
    pub peak_bytes: AtomicU64,
    /// Times a reader had to wait for the budget.
    pub waits: AtomicU64,
    /// Reads that failed because the budget stayed spent for `max_wait`.
    pub exhausted: AtomicU64,
    /// Frames in progress ended to make room, having received less than their [`frame_step`]
    /// for [`FRAME_STALL`] while others waited (see [`FrameBudget`]).
    pub evicted: AtomicU64,
    /// Unused buffers given back between frames because others waited.
    pub given_back: AtomicU64,
    /// Readers waiting for memory now.
    pub waiting: AtomicU64,
    /// Frames ended because their network held more than its share of the budget while a
    /// reader of another network waited (see [`FrameBudget`]).
    pub over_share: AtomicU64,
}

impl FrameBudget {
    /// A budget of `bytes` (rounded down to whole KiB) of frame buffers.
    pub fn new(bytes: u64, max_wait: Duration, stats: Arc<BufferStats>) -> FrameBudget {
        let limit_kib = (bytes / 1024).min(Semaphore::MAX_PERMITS as u64);
        FrameBudget {
            permits: Semaphore::new(limit_kib as usize),
            limit_kib,
            max_wait,
            stats,
            pool: std::sync::Mutex::new(Vec::new()),
            taking: AtomicUsize::new(0),
            holders: std::sync::Mutex::new(HashMap::new()),
            next_holder: AtomicU64::new(0),
            stall: FRAME_STALL,
            epoch: Instant::now(),
        }
    }

    /// The same budget, with frames and buffers giving way after `stall` instead of
    /// [`FRAME_STALL`].
    pub fn stall_after(mut self, stall: Duration) -> FrameBudget {
        self.stall = stall;
        self
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn holders_lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Holder>>> {
        // Inserts and removes of whole entries: a panic elsewhere cannot leave it inconsistent.
        self.holders.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn register(&self, network: Option<IpAddr>) -> (u64, Arc<Holder>) {
        let id = self.next_holder.fetch_add(1, Ordering::Relaxed);
        let h = Arc::new(Holder {
            network,
            ..Holder::default()
        });
        h.last_step_ms.store(self.now_ms(), Ordering::Relaxed);
        self.holders_lock().insert(id, h.clone());
        (id, h)
    }

    fn unregister(&self, id: u64) {
        self.holders_lock().remove(&id);
    }

    /// Someone of `network` waits for memory: ask for what is held and not used back, and for
    /// what other networks hold beyond their share (see [`FrameBudget`]).
    fn make_room(&self, network: Option<IpAddr>) {
        let now = self.now_ms();
        let stall = self.stall.as_millis() as u64;
        let holders = self.holders_lock();
        if let Some(w) = network {
            self.trim_shares(&holders, w);
        }
        let mut asked = false;
        let mut victim: Option<(&Arc<Holder>, u64)> = None;
        for h in holders.values() {
            if h.kib.load(Ordering::Acquire) == 0 {
                continue;
            }
            let quiet = now.saturating_sub(h.last_step_ms.load(Ordering::Acquire));
            if quiet < stall {
                continue;
            }
            match h.phase.load(Ordering::Acquire) {
                IDLE if !h.give_back.is_set() => {
                    h.give_back.raise();
                    asked = true;
                }
                PARTIAL if !h.evict.is_set() && victim.is_none_or(|(_, q)| quiet > q) => {
                    victim = Some((h, quiet));
                }
                _ => {}
            }
        }
        // Buffers asked back may be enough: a frame ends only if memory is still short then.
        if let (false, Some((h, _))) = (asked, victim) {
            h.evict.raise();
            self.stats.evicted.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A reader of `waiter`'s network waits: if that network holds less than its share, every
    /// other network holding more than its share gives way (see [`FrameBudget`]).
    fn trim_shares(&self, holders: &HashMap<u64, Arc<Holder>>, waiter: IpAddr) {
        // What each network holds, and will still hold once what it was asked for comes back.
        let mut held: HashMap<IpAddr, (u64, u64)> = HashMap::new();
        held.insert(waiter, (0, 0));
        for h in holders.values() {
            let Some(n) = h.network else { continue };
            let kib = h.kib.load(Ordering::Acquire);
            if kib == 0 && h.phase.load(Ordering::Acquire) != WAITING {
                // A connection that holds nothing and asks for nothing has no share.
                continue;
            }
            let e = held.entry(n).or_default();
            e.0 += kib;
            if !h.evict.is_set() {
                e.1 += kib;
            }
        }
        let networks = held.len();
        let share = self.limit_kib / networks as u64;
        if networks < 2 || held[&waiter].0 >= share {
            return;
        }
        for (net, (total, mut keeps)) in held {
            if net == waiter || keeps <= share {
                continue;
            }
            let mut frames: Vec<&Arc<Holder>> = holders
                .values()
                .filter(|h| h.network == Some(net) && !h.evict.is_set())
                .filter(|h| {
                    h.kib.load(Ordering::Acquire) > 0 || h.phase.load(Ordering::Acquire) == WAITING
                })
                .collect();
            // Waiting frames first (they would take more), then the largest.
            frames.sort_by_key(|h| {
                let waiting = h.phase.load(Ordering::Acquire) == WAITING;
                (!waiting, std::cmp::Reverse(h.kib.load(Ordering::Acquire)))
            });
            for h in frames {
                let kib = h.kib.load(Ordering::Acquire);
                match h.phase.load(Ordering::Acquire) {
                    WAITING => {}
                    _ if keeps <= share => break,
                    IDLE => {
                        if !h.give_back.is_set() {
                            h.give_back.raise();
                        }
                        keeps = keeps.saturating_sub(kib);
                        continue;
                    }
                    _ => {}
                }
                if let Ok(mut o) = h.over_share.lock() {
                    *o = Some((total, share, networks));
                }
                h.evict.raise();
                self.stats.over_share.fetch_add(1, Ordering::Relaxed);
                keeps = keeps.saturating_sub(kib);
            }
        }
    }

    /// Wait for `n` permits until `deadline`, making room every [`ROOM_CHECK`]; `Ok(false)` if
    /// the deadline passed.
    async fn acquire_making_room(
        &self,
        n: u32,
        deadline: Instant,
        network: Option<IpAddr>,
    ) -> Result<bool, BudgetError> {
        self.make_room(network);
        let acquire = self.permits.acquire_many(n);
        tokio::pin!(acquire);
        loop {
            let next = (Instant::now() + ROOM_CHECK).min(deadline);
            match tokio::time::timeout_at(next.into(), &mut acquire).await {
                Ok(Ok(p)) => {
                    p.forget();
                    return Ok(true);
                }
                Ok(Err(_)) => return Err(BudgetError::Closed),
                Err(_) if Instant::now() < deadline => self.make_room(network),
                Err(_) => return Ok(false),
            }
        }
    }

    /// Count the caller as taking memory until the guard is dropped. Taken before the pool is
    /// looked at: a reader dropped meanwhile then sees the taker and gives its memory back.
    fn taking(&self) -> Taking<'_> {
        self.taking.fetch_add(1, Ordering::SeqCst);
        Taking(&self.taking)
    }

    /// Take `kib` permits without waiting if they are free, freeing the pooled buffers first if
    /// they are not; `Ok(false)` if the budget is spent even so.
    fn try_take(&self, kib: u32) -> Result<bool, BudgetError> {
        for _ in 0..2 {
            match self.permits.try_acquire_many(kib) {
                Ok(p) => {
                    p.forget();
                    return Ok(true);
                }
                Err(TryAcquireError::NoPermits) => {
                    if !self.drain_pool() {
                        return Ok(false);
                    }
                }
                Err(TryAcquireError::Closed) => return Err(BudgetError::Closed),
            }
        }
        Ok(false)
    }

    /// Free every pooled buffer and give back its memory; whether there was any.
    fn drain_pool(&self) -> bool {
        let drained = std::mem::take(&mut *self.pool_lock());
        for b in &drained {
            self.stats
                .pooled_bytes
                .fetch_sub(b.len() as u64, Ordering::AcqRel);
            self.give_back((b.len() / 1024) as u64);
        }
        !drained.is_empty()
    }

    fn pool_lock(&self) -> std::sync::MutexGuard<'_, Vec<Vec<u8>>> {
        // The pool holds plain buffers: a panic elsewhere cannot leave it inconsistent.
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The largest pooled buffer (its memory already counted as held) no longer than `most`
    /// bytes, if there is one.
    fn take_pooled(&self, most: usize) -> Option<Vec<u8>> {
        let mut pool = self.pool_lock();
        let (i, _) = pool
            .iter()
            .enumerate()
            .filter(|(_, b)| b.len() <= most)
            .max_by_key(|(_, b)| b.len())?;
        let b = pool.swap_remove(i);
        drop(pool);
        self.stats
            .pooled_bytes
            .fetch_sub(b.len() as u64, Ordering::AcqRel);
        Some(b)
    }

    /// Keep `buf` (counted as held, a whole number of KiB long) for the next reader, or give
    /// its memory back if the pool is full.
    fn pool_or_give_back(&self, buf: Vec<u8>) {
        let kib = (buf.len() / 1024) as u64;
        let mut pool = self.pool_lock();
        if pool.len() < POOLED_BUFFERS && kib > 0 && self.taking.load(Ordering::SeqCst) == 0 {
            self.stats
                .pooled_bytes
                .fetch_add(buf.len() as u64, Ordering::AcqRel);
            pool.push(buf);
        } else {
            drop(pool);
            drop(buf);
            self.give_back(kib);
        }
    }

    /// The budget, in bytes.
    pub(crate) fn limit_bytes(&self) -> u64 {
        self.limit_kib * 1024
    }

    fn took(&self, kib: u64) {
        let now = self.stats.bytes.fetch_add(kib * 1024, Ordering::AcqRel) + kib * 1024;
        self.stats.peak_bytes.fetch_max(now, Ordering::AcqRel);
    }

    /// Take `bytes` of the budget for a buffer that is not a frame's (a decompressed frame),
    /// waiting like a frame buffer does, at most the budget's wait; [`BufferExhausted`] then.
    /// The memory is given back when the [`Reservation`] is dropped.
    pub async fn reserve(
        self: &Arc<Self>,
        bytes: usize,
        what: &str,
    ) -> Result<Reservation, BudgetError> {
        let kib = bytes.div_ceil(1024) as u64;
        let n = u32::try_from(kib).map_err(|e| BudgetError::TooLarge {
            what: "buffer reservation",
            source: e,
        })?;
        let since = Instant::now();
        let _taking = self.taking();
        if !self.try_take(n)? {
            self.stats.waits.fetch_add(1, Ordering::Relaxed);
            if !self
                .acquire_making_room(n, since + self.max_wait, None)
                .await?
            {
                self.stats.exhausted.fetch_add(1, Ordering::Relaxed);
                return Err(BufferExhausted {
                    what: what.to_string(),
                    waited: since.elapsed(),
                    limit_bytes: self.limit_bytes(),
                }
                .into());
            }
        }
        self.took(kib);
        Ok(Reservation {
            budget: self.clone(),
            kib,
        })
    }

    fn give_back(&self, kib: u64) {
        if kib > 0 {
            self.stats.bytes.fetch_sub(kib * 1024, Ordering::AcqRel);
            self.permits.add_permits(kib as usize);
        }
    }
}

/// Bytes of a [`FrameBudget`] held for a buffer that is not a frame's; given back on drop.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<FrameBudget>,
    kib: u64,
}

impl Reservation {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        (self.kib * 1024) as usize
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.give_back(self.kib);
    }
}

/// A frame could not be received because the receiver's frame-buffer budget stayed spent.
#[derive(Debug, thiserror::Error)]
#[error(
    "the receiver has no memory free for frame buffers: {what} waited {:.1} s while other \
     connections held all {} MiB of its frame-buffer budget (sieve serve --max-buffer-memory); \
     try again later or with fewer channels, or raise --max-buffer-memory on the receiver",
    waited.as_secs_f64(),
    limit_bytes >> 20
)]
pub struct BufferExhausted {
    /// What waited, e.g. "a 16777216-byte DATA frame".
    pub what: String,
    /// How long it waited for memory before giving up.
    pub waited: Duration,
    /// The whole frame-buffer budget, in bytes (what the other connections held).
    pub limit_bytes: u64,
}

/// A frame in progress was ended to make room for others (see [`FrameBudget`]).
#[derive(Debug, thiserror::Error)]
#[error(
    "the receiver needed this session's frame-buffer memory for other connections: {what}, \
     holding {} KiB, had received less than {} KiB in {:.1} s while they waited for the {} MiB \
     frame-buffer budget (sieve serve --max-buffer-memory), so it was ended; a frame must keep \
     arriving (each second a sixteenth of what it holds, 16 KiB at least) for the receiver to \
     hold its memory: send on a faster link, with smaller frames or with fewer channels",
    held >> 10,
    frame_step(*held) >> 10,
    stalled.as_secs_f64(),
    limit_bytes >> 20
)]
pub struct FrameEvicted {
    /// What was ended, e.g. "a 16777216-byte Data frame".
    pub what: String,
    /// Bytes of buffer it held.
    pub held: usize,
    /// How long the frame had gone without receiving its [`frame_step`].
    pub stalled: Duration,
    /// The whole frame-buffer budget, in bytes.
    pub limit_bytes: u64,
}

/// A frame (in progress, or waiting for memory) was ended because its network held more than
/// its share of the budget while a reader of another network waited (see [`FrameBudget`]).
#[derive(Debug, thiserror::Error)]
#[error(
    "the receiver needed frame-buffer memory for another network's connections: {what}, \
     holding {} KiB, was ended because its network held {} MiB of the {} MiB frame-buffer \
     budget (sieve serve --max-buffer-memory), more than its share ({} MiB, the budget over \
     the {networks} networks using it), while a connection of another network waited; send \
     with fewer sessions, channels or smaller frames, or raise --max-buffer-memory on the \
     receiver",
    held >> 10,
    network_bytes >> 20,
    limit_bytes >> 20,
    share_bytes >> 20
)]
pub struct FrameOverShare {
    /// What was ended, e.g. "a 16777216-byte Data frame".
    pub what: String,
    /// Bytes of buffer it held.
    pub held: usize,
    /// Bytes its network held.
    pub network_bytes: u64,
    /// The network's share, in bytes.
    pub share_bytes: u64,
    /// Networks the budget was shared among.
    pub networks: usize,
    /// The whole frame-buffer budget, in bytes.
    pub limit_bytes: u64,
}

/// Why a [`FrameBudget`] gave no memory. [`BudgetError::Exhausted`] and
/// [`BudgetError::Evicted`] are the ones a receiver tells its sender about; the others are
/// faults of the receiver itself.
#[derive(Debug, thiserror::Error)]
pub enum BudgetError {
    /// The budget stayed spent for its whole wait.
    #[error(transparent)]
    Exhausted(#[from] BufferExhausted),
    /// The frame in progress gave way to readers that waited.
    #[error(transparent)]
    Evicted(#[from] FrameEvicted),
    /// The frame's network held more than its share while another network waited.
    #[error(transparent)]
    OverShare(#[from] FrameOverShare),
    /// The budget's semaphore was closed (the receiver is going away).
    #[error("the frame-buffer budget was closed")]
    Closed,
    /// One request larger than a budget can count (over 4 TiB).
    #[error("{what} too large")]
    TooLarge {
        /// What asked: "buffer reservation" or "frame buffer step".
        what: &'static str,
        /// The failed conversion to a permit count.
        source: std::num::TryFromIntError,
    },
}

/// Why [`FrameReader::read`] returned no frame.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// No memory for the frame's buffer (see [`ReadError::buffer_exhausted`]).
    #[error(transparent)]
    Budget(#[from] BudgetError),
    /// The stream failed while reading a header or a payload.
    #[error("{context}")]
    Io {
        /// What was being read: "reading a frame header" or "reading a frame".
        context: &'static str,
        /// The stream's error.
        source: std::io::Error,
    },
    /// The header is malformed or claims more than the reader's limits.
    #[error(transparent)]
    Frame(#[from] frame::FrameError),
    /// The peer closed the stream part-way through a frame header.
    #[error("connection closed inside a frame header")]
    ClosedInHeader,
    /// The peer closed the stream part-way through a frame's payload.
    #[error("connection closed inside a {ty} frame of {len} bytes")]
    ClosedInFrame {
        /// The frame's type name.
        ty: &'static str,
        /// The payload length its header claimed.
        len: usize,
    },
}

impl ReadError {
    /// The frame-buffer budget stayed spent: the one failure a receiver reports to its sender.
    pub fn buffer_exhausted(&self) -> Option<&BufferExhausted> {
        match self {
            ReadError::Budget(BudgetError::Exhausted(e)) => Some(e),
            _ => None,
        }
    }
}

impl BufferExhausted {
    fn frame(len: usize, ty: FrameType, waited: Duration, limit_bytes: u64) -> BufferExhausted {
        BufferExhausted {
            what: format!("a {len}-byte {} frame", ty.name()),
            waited,
            limit_bytes,
        }
    }
}

/// Reads whole frames; the payload buffer is reused, and never grows past the limit.
///
/// The buffer grows as a frame's bytes arrive (from [`FIRST_STEP`], doubling, by at most
/// [`GROW_STEP`] at a time), not to the length its header claims. With a [`FrameBudget`]
/// ([`FrameReader::set_budget`]) every byte of it is counted there first, and the budget may
/// ask for it back (see [`FrameBudget`]).
///
/// Cancel-safe: [`FrameReader::read`] may be dropped at any await (a timeout, a `select!`) and
/// called again; bytes of a partly received frame are kept here, never lost, and so is the time
/// already spent waiting for the budget.
pub struct FrameReader {
    inner: BufReader<BoxRead>,
    /// Payload buffer; its length is its capacity (a whole number of KiB), all of it readable.
    buf: Vec<u8>,
    limits: Limits,
    /// The header of the frame being read, and how much of it (then of its payload) has come.
    hdr: [u8; HEADER_LEN],
    hdr_have: usize,
    body_have: usize,
    /// `body_have` at the frame's last step (see [`frame_step`]).
    step_at: usize,
    budget: Option<Arc<FrameBudget>>,
    /// This reader as `budget` knows it, and its number there.
    holder: Option<(u64, Arc<Holder>)>,
    /// KiB of `budget` held for `buf`.
    held_kib: u64,
    /// Since when this reader has been waiting for `budget`.
    waiting_since: Option<Instant>,
    /// Counts this reader while it waits (see [`FrameReader::count_waits_in`]).
    waiters: Option<Arc<AtomicU64>>,
    /// Told of every byte read (see [`FrameReader::report_activity_to`]).
    activity: Option<Activity>,
    /// The socket's low-water mark, if this reader batches its wake-ups (see [`crate::lowat`]).
    lowat: Option<Lowat>,
}

/// How a read of the socket under a [`FrameReader`] ended, when the budget may interrupt it.
enum Interrupted<T> {
    Read(T),
    /// The budget asked for the buffer back (between frames) or for the frame to end.
    Asked,
}

impl FrameReader {
    /// A reader whose buffers are limited only by `limits` (no [`FrameBudget`]).
    pub fn new(inner: BoxRead, limits: Limits) -> FrameReader {
        FrameReader {
            inner: BufReader::with_capacity(64 * 1024, inner),
            buf: Vec::new(),
            limits,
            hdr: [0; HEADER_LEN],
            hdr_have: 0,
            body_have: 0,
            step_at: 0,
            budget: None,
            holder: None,
            held_kib: 0,
            waiting_since: None,
            waiters: None,
            activity: None,
            lowat: None,
        }
    }

    /// Let the kernel wake this reader once most of a large frame has arrived rather than for
    /// every segment or two (see [`crate::lowat`]). `socket` must be the descriptor of the TCP
    /// socket under this reader's stream, which the stream keeps open; `slack` is how many bytes
    /// the stream may hold back from the reader (a TLS record; 0 for plain TCP); `idle` is the
    /// owner's idle timeout, which a batched wait must stay well within.
    pub(crate) fn batch_wakeups(&mut self, socket: RawFd, slack: usize, idle: Duration) {
        self.lowat = Some(Lowat::new(socket, slack, idle));
    }

    /// Tell `activity` of every byte read and of every whole frame other than data (a
    /// session's idle check and its rate, see [`crate::progress`]).
    pub(crate) fn report_activity_to(&mut self, activity: Activity) {
        self.activity = Some(activity);
    }

    fn moved(&self, n: usize) {
        if let Some(a) = &self.activity {
            a.moved(n);
        }
    }

    /// Change what the next frames may claim (e.g. a small limit before the peer is
    /// authenticated, the session's limit after).
    pub(crate) fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// Count this reader's buffers in `budget` from the next frame on (call it between frames,
    /// e.g. once the peer is authenticated). The buffer held so far is given back first.
    pub fn set_budget(&mut self, budget: Arc<FrameBudget>) {
        self.join_budget(budget, None);
    }

    /// [`FrameReader::set_budget`] for a reader whose peer is of `network` (its /24 or /64):
    /// the reader's memory counts in that network's share of the budget (see [`FrameBudget`]).
    pub fn set_budget_shared(&mut self, budget: Arc<FrameBudget>, network: IpAddr) {
        self.join_budget(budget, Some(network));
    }

    fn join_budget(&mut self, budget: Arc<FrameBudget>, network: Option<IpAddr>) {
        debug_assert!(
            self.hdr_have == 0 && self.body_have == 0,
            "set_budget mid-frame"
        );
        self.release_buffer();
        self.leave_budget();
        self.holder = Some(budget.register(network));
        self.budget = Some(budget);
    }

    fn leave_budget(&mut self) {
        if let (Some(b), Some((id, _))) = (&self.budget, self.holder.take()) {
            b.unregister(id);
        }
    }

    /// Tell the budget where this reader is (see [`FrameBudget::make_room`]); `step`: it made
    /// progress now.
    fn phase(&self, phase: u8, step: bool) {
        if let (Some(b), Some((_, h))) = (&self.budget, &self.holder) {
            if step {
                h.last_step_ms.store(b.now_ms(), Ordering::Release);
            }
            h.phase.store(phase, Ordering::Release);
        }
    }

    fn set_held(&mut self, kib: u64) {
        self.held_kib = kib;
        if let Some((_, h)) = &self.holder {
            h.kib.store(kib, Ordering::Release);
        }
    }

    /// How long this reader has been waiting for its [`FrameBudget`], if it is waiting.
    pub fn waiting_for_memory(&self) -> Option<Duration> {
        self.waiting_since.map(|t| t.elapsed())
    }

    /// The error to report for a reader that has been waiting for its budget (see
    /// [`FrameReader::waiting_for_memory`]) when its caller gives up on it.
    pub fn memory_wait_error(&self) -> Option<BufferExhausted> {
        let since = self.waiting_since?;
        let h = frame::parse_header(&self.hdr, &self.limits).ok()?;
        Some(BufferExhausted::frame(
            h.len as usize,
            h.ty,
            since.elapsed(),
            self.budget.as_ref().map_or(0, |b| b.limit_bytes()),
        ))
    }

    /// Bytes of buffer this reader holds now.
    pub fn buffer_capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Count this reader in `waiters` while it waits for its budget (a session counts its
    /// channels that wait for memory this way).
    pub(crate) fn count_waits_in(&mut self, waiters: Arc<AtomicU64>) {
        if self.waiting_since.is_some() {
            waiters.fetch_add(1, Ordering::AcqRel);
        }
        self.waiters = Some(waiters);
    }

    fn stop_waiting(&mut self) {
        if self.waiting_since.take().is_some() {
            if let Some(c) = &self.waiters {
                c.fetch_sub(1, Ordering::AcqRel);
            }
            if let Some(b) = &self.budget {
                b.stats.waiting.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// Give the buffer back: to the budget's pool if it is one a frame of an honest sender fits
    /// in (see [`RETAIN_BUFFER`]), else its memory to the budget.
    fn release_buffer(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        if let Some(b) = &self.budget {
            if buf.len() <= RETAIN_BUFFER && buf.len() as u64 == self.held_kib * 1024 {
                b.pool_or_give_back(buf);
            } else {
                drop(buf);
                b.give_back(self.held_kib);
            }
        }
        self.set_held(0);
    }

    /// The budget asked for the unused buffer (see [`FrameBudget`]): give it back, if this
    /// reader is still between frames (the payload not begun).
    fn give_back_if_asked(&mut self) {
        let Some((_, h)) = &self.holder else {
            return;
        };
        if h.give_back.is_set() && self.body_have == 0 {
            h.give_back.clear();
            if self.held_kib > 0 {
                if let Some(b) = &self.budget {
                    b.stats.given_back.fetch_add(1, Ordering::Relaxed);
                }
                self.release_buffer();
            }
        }
    }

    /// Grow the buffer towards a frame of `len` bytes: a reader without one takes the largest
    /// pooled buffer this frame fills (see [`FrameBudget`]); else to `len` at once if it is at
    /// most [`FIRST_STEP`], or doubles (by [`FIRST_STEP`] at least, [`GROW_STEP`] at most).
    /// Waits for the budget if there is one.
    ///
    /// A pooled buffer is never longer than the frame, so a reader holds no more memory than its
    /// frame needs, as without the pool: a session's share of the budget and the argument that
    /// honest sessions never stall each other (see [`crate::receiver::stall_free_buffer_bytes`])
    /// hold as they are.
    async fn grow(&mut self, len: usize, ty: FrameType) -> Result<(), BudgetError> {
        if let (true, Some(b)) = (self.buf.is_empty(), &self.budget) {
            if let Some(pooled) = b.take_pooled(len.div_ceil(1024) * 1024) {
                // Its memory is counted already.
                self.set_held((pooled.len() / 1024) as u64);
                self.buf = pooled;
                self.stop_waiting();
                return Ok(());
            }
        }
        let cur = self.buf.len();
        let target = if len <= FIRST_STEP {
            len
        } else {
            len.min(cur + cur.clamp(FIRST_STEP, GROW_STEP))
        };
        let kib = target.div_ceil(1024) as u64;
        if let Some(b) = self.budget.clone() {
            let need = kib.saturating_sub(self.held_kib);
            let need32 = u32::try_from(need).map_err(|e| BudgetError::TooLarge {
                what: "frame buffer step",
                source: e,
            })?;
            let _taking = b.taking();
            if !b.try_take(need32)? {
                let since = match self.waiting_since {
                    Some(t) => t,
                    None => {
                        b.stats.waits.fetch_add(1, Ordering::Relaxed);
                        b.stats.waiting.fetch_add(1, Ordering::AcqRel);
                        if let Some(c) = &self.waiters {
                            c.fetch_add(1, Ordering::AcqRel);
                        }
                        *self.waiting_since.insert(Instant::now())
                    }
                };
                self.phase(WAITING, false);
                let network = self.holder.as_ref().and_then(|(_, h)| h.network);
                let acquire = b.acquire_making_room(need32, since + b.max_wait, network);
                // A waiting frame ends only for its network's share (see [`FrameBudget`]).
                let got = match self.holder.as_ref().map(|(_, h)| h.clone()) {
                    Some(h) => tokio::select! {
                        biased;
                        _ = h.evict.wait() => {
                            self.stop_waiting();
                            return Err(self.evicted(len, ty));
                        }
                        r = acquire => r,
                    },
                    None => acquire.await,
                };
                // Waiting is not stalling: the wait counts as a step.
                self.phase(PARTIAL, true);
                self.step_at = self.body_have;
                if !got? {
                    b.stats.exhausted.fetch_add(1, Ordering::Relaxed);
                    self.stop_waiting();
                    return Err(
                        BufferExhausted::frame(len, ty, since.elapsed(), b.limit_bytes()).into(),
                    );
                }
            }
            self.stop_waiting();
            b.took(need);
            self.set_held(self.held_kib + need);
        }
        let new_len = (kib * 1024) as usize;
        self.buf.reserve_exact(new_len - cur);
        self.buf.resize(new_len, 0);
        Ok(())
    }

    /// The next frame, or `None` on a clean end of stream between frames.
    pub async fn read(&mut self) -> Result<Option<(FrameType, &[u8])>, ReadError> {
        self.read_observed(&mut |_, _, _| {}).await
    }

    /// [`FrameReader::read`], calling `seen(type, length, payload so far)` each time more of the
    /// frame's payload has come, at most [`READ_STEP`] bytes later than the last call: the caller
    /// can work on the bytes while they are still in cache. If this read is cancelled, the next
    /// call goes on with the same frame, so `seen` may keep state across calls (and must expect
    /// the payload so far to grow, never to start over, until the frame is returned).
    pub async fn read_observed(
        &mut self,
        seen: &mut (dyn FnMut(FrameType, usize, &[u8]) + Send),
    ) -> Result<Option<(FrameType, &[u8])>, ReadError> {
        if self.hdr_have == 0 && self.buf.len() > RETAIN_BUFFER {
            // The last frame was large and is consumed: its memory goes back.
            self.release_buffer();
        }
        self.give_back_if_asked();
        // Every await below is a single `read` (or a wait for the budget), which either takes
        // bytes or takes none.
        while self.hdr_have < HEADER_LEN {
            // A header is a few bytes, whatever the frame after it: never a batched wait. Its
            // wait gives way to the budget asking for the unused buffer.
            let asked = match (&self.holder, self.held_kib) {
                (Some((_, h)), kib) if kib > 0 => Some(h.clone()),
                _ => None,
            };
            let read = read_some(
                &mut self.inner,
                &mut self.hdr[self.hdr_have..],
                self.lowat.as_mut(),
                0,
            );
            let r = match asked {
                Some(h) => tokio::select! {
                    biased;
                    r = read => Interrupted::Read(r),
                    _ = h.give_back.wait() => Interrupted::Asked,
                },
                None => Interrupted::Read(read.await),
            };
            let Interrupted::Read(r) = r else {
                self.give_back_if_asked();
                continue;
            };
            let n = r
                .map_err(|source| ReadError::Io {
                    context: "reading a frame header",
                    source,
                })?
                .unwrap_or_default();
            if n == 0 {
                // A clean close (no byte of a new frame) or a truncated header.
                if self.hdr_have == 0 {
                    return Ok(None);
                }
                return Err(ReadError::ClosedInHeader);
            }
            self.hdr_have += n;
            self.moved(n);
            if self.hdr_have == HEADER_LEN {
                // A frame begins: from now on it must keep arriving to keep its memory, and
                // the buffer is in use (an unanswered request for it lapses).
                self.phase(PARTIAL, true);
                self.step_at = 0;
                if let Some((_, h)) = &self.holder {
                    h.give_back.clear();
                }
            }
        }
        let h = frame::parse_header(&self.hdr, &self.limits)?;
        let len = h.len as usize;
        if self.body_have == 0 {
            if let Some(l) = &mut self.lowat {
                l.next_frame();
            }
        }
        while self.body_have < len {
            if self.body_have == self.buf.len() {
                self.grow(len, h.ty).await?;
            }
            let end = len.min(self.buf.len()).min(self.body_have + READ_STEP);
            let evict = self.holder.as_ref().map(|(_, h)| h.clone());
            let read = read_some(
                &mut self.inner,
                &mut self.buf[self.body_have..end],
                self.lowat.as_mut(),
                len - self.body_have,
            );
            let r = match &evict {
                Some(e) => tokio::select! {
                    biased;
                    _ = e.evict.wait() => Interrupted::Asked,
                    r = read => Interrupted::Read(r),
                },
                None => Interrupted::Read(read.await),
            };
            let Interrupted::Read(r) = r else {
                return Err(self.evicted(len, h.ty).into());
            };
            let Some(n) = r.map_err(|source| ReadError::Io {
                context: "reading a frame",
                source,
            })?
            else {
                // A batched wait ran out of patience; batching is off for this frame.
                continue;
            };
            if n == 0 {
                return Err(ReadError::ClosedInFrame {
                    ty: h.ty.name(),
                    len,
                });
            }
            self.body_have += n;
            if self.body_have >= self.step_at + frame_step(self.buf.len()) {
                self.phase(PARTIAL, true);
                self.step_at = self.body_have;
            }
            self.moved(n);
            seen(h.ty, len, &self.buf[..self.body_have]);
        }
        self.hdr_have = 0;
        self.body_have = 0;
        self.phase(IDLE, true);
        if let Some((_, h)) = &self.holder {
            // The frame came whole before it was ended: nothing is held for it any more, and
            // the next frame starts afresh.
            h.evict.clear();
            if let Ok(mut o) = h.over_share.lock() {
                *o = None;
            }
        }
        if !matches!(h.ty, FrameType::Data | FrameType::ZData) {
            if let Some(a) = &self.activity {
                a.touch();
            }
        }
        Ok(Some((h.ty, &self.buf[..len])))
    }

    /// What a frame of `len` bytes that the budget ended is reported as.
    fn evicted(&self, len: usize, ty: FrameType) -> BudgetError {
        if let (Some(b), Some((_, h))) = (&self.budget, &self.holder) {
            let over = h.over_share.lock().ok().and_then(|o| *o);
            if let Some((network_kib, share_kib, networks)) = over {
                return FrameOverShare {
                    what: format!("a {len}-byte {} frame", ty.name()),
                    held: self.buf.len(),
                    network_bytes: network_kib * 1024,
                    share_bytes: share_kib * 1024,
                    networks,
                    limit_bytes: b.limit_bytes(),
                }
                .into();
            }
        }
        let (stalled, limit_bytes) = match (&self.budget, &self.holder) {
            (Some(b), Some((_, h))) => (
                Duration::from_millis(
                    b.now_ms()
                        .saturating_sub(h.last_step_ms.load(Ordering::Acquire)),
                ),
                b.limit_bytes(),
            ),
            _ => (Duration::ZERO, 0),
        };
        FrameEvicted {
            what: format!("a {len}-byte {} frame", ty.name()),
            held: self.buf.len(),
            stalled,
            limit_bytes,
        }
        .into()
    }

    /// The next frame as a typed message; end of stream is an error here.
    pub async fn message(&mut self) -> Result<Message> {
        let (ty, payload) = self
            .read()
            .await?
            .ok_or_else(|| anyhow!("the peer closed the connection"))?;
        Ok(Message::parse(ty, payload)?)
    }
}

/// One `read` of `inner` into `into`, for a frame still `need` bytes short (0: a header),
/// batching the wake-up if it has to wait (see [`crate::lowat`]). `Ok(None)`: a batched wait ran
/// out of patience and took no bytes (cancelling a read is safe); the caller asks again.
async fn read_some(
    inner: &mut BufReader<BoxRead>,
    into: &mut [u8],
    mut lowat: Option<&mut Lowat>,
    need: usize,
) -> std::io::Result<Option<usize>> {
    if let Some(l) = lowat.as_deref_mut() {
        l.before_read(need);
    }
    let mut read = std::pin::pin!(inner.read(into));
    let first = std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await;
    if let Poll::Ready(r) = first {
        return r.map(Some);
    }
    // A pending read left nothing in `inner`'s buffer: all `need` bytes but the stream's own
    // slack must still come through the socket.
    let Some(l) = lowat else {
        return read.await.map(Some);
    };
    if !l.before_wait(need) {
        return read.await.map(Some);
    }
    match tokio::time::timeout(l.patience(), read).await {
        Ok(r) => r.map(Some),
        Err(_) => {
            l.pause();
            Ok(None)
        }
    }
}

impl Drop for FrameReader {
    fn drop(&mut self) {
        self.stop_waiting();
        self.release_buffer();
        self.leave_budget();
    }
}

/// Writes frames; buffered so that small control frames do not cost a syscall each.
pub struct FrameWriter {
    inner: Sink,
    scratch: Vec<u8>,
}

/// Where frames go: any stream (TLS), or a plain TCP socket, which can also take file bytes
/// by `sendfile(2)` without them passing through this process.
enum Sink {
    Stream(BufWriter<BoxWrite>),
    Tcp(BufWriter<OwnedWriteHalf>),
}

impl FrameWriter {
    /// A writer on any stream (a TLS channel); control frames are buffered until
    /// [`FrameWriter::flush`].
    pub fn new(inner: BoxWrite) -> FrameWriter {
        FrameWriter {
            inner: Sink::Stream(BufWriter::with_capacity(64 * 1024, inner)),
            scratch: Vec::new(),
        }
    }

    /// A writer on a plain TCP socket; [`FrameWriter::data_from_file`] then sends payloads
    /// straight from the page cache.
    pub fn tcp(inner: OwnedWriteHalf) -> FrameWriter {
        FrameWriter {
            inner: Sink::Tcp(BufWriter::with_capacity(64 * 1024, inner)),
            scratch: Vec::new(),
        }
    }

    fn w(&mut self) -> &mut (dyn AsyncWrite + Send + Unpin) {
        match &mut self.inner {
            Sink::Stream(w) => w,
            Sink::Tcp(w) => w,
        }
    }

    /// Queue a control message (call [`FrameWriter::flush`] to send it now).
    pub async fn send(&mut self, encode: impl FnOnce(&mut Vec<u8>)) -> Result<()> {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        encode(&mut scratch);
        let r = self.w().write_all(&scratch).await;
        self.scratch = scratch;
        r.context("sending a control frame")
    }

    /// Write whole frames already encoded in `bytes` (a compressed frame, built by the worker
    /// that compressed it).
    pub(crate) async fn frame_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        self.w()
            .write_all(bytes)
            .await
            .context("sending a compressed frame")
    }

    /// Write a data frame without copying the payload.
    pub async fn data(&mut self, doc: u32, offset: u64, payload: &[u8]) -> Result<()> {
        let mut part = Some(vec![payload]);
        self.data_in_parts(doc, offset, payload.len(), || Ok(part.take()))
            .await
    }

    /// Write a data frame of `len` payload bytes that come in parts: `next` gives the slices of
    /// the next part, after doing whatever must happen just before they go (the plain channels
    /// tag them, so that the socket copies bytes still in cache), and `None` after the last.
    ///
    /// The header goes with the first part, in one vectored write, and each further part in one
    /// more: written alone, the header would leave as a tiny TCP segment (or TLS record) of its
    /// own that wakes the receiver for nothing, since a large payload bypasses the buffer.
    pub async fn data_in_parts<'p>(
        &mut self,
        doc: u32,
        offset: u64,
        len: usize,
        mut next: impl FnMut() -> Result<Option<Vec<&'p [u8]>>>,
    ) -> Result<()> {
        let hdr = Data::encode_header(doc, offset, len);
        let mut header = Some(&hdr[..]);
        let mut sent = 0;
        loop {
            let part = next()?;
            if part.is_none() && header.is_none() {
                break;
            }
            let part = part.unwrap_or_default();
            sent += part.iter().map(|p| p.len()).sum::<usize>();
            let mut bufs: Vec<IoSlice> = header
                .take()
                .into_iter()
                .chain(part)
                .map(IoSlice::new)
                .collect();
            let mut rest = &mut bufs[..];
            while !rest.is_empty() {
                let n = self
                    .w()
                    .write_vectored(rest)
                    .await
                    .context("sending a data frame")?;
                if n == 0 {
                    bail!("sending a data frame: the connection accepts no more bytes");
                }
                IoSlice::advance_slices(&mut rest, n);
            }
        }
        if sent != len {
            bail!("internal error: a data frame of {len} bytes was given {sent}");
        }
        Ok(())
    }

    /// [`FrameWriter::data_in_parts`] for parts that are slices of `file` (`(offset in the file,
    /// bytes)`).
    ///
    /// On a plain TCP socket the slices go by `sendfile(2)`: the kernel moves them from the page
    /// cache to the socket and this process never copies them (the cleartext path's one
    /// advantage over TLS, which must see every byte to encrypt it). The socket stays corked for
    /// the whole frame, so that segments are cut by size alone, never where one slice of the
    /// file ends and the next begins: that would show where the classified parts sat. Elsewhere
    /// this is [`FrameWriter::data_in_parts`].
    ///
    /// `next` has already authenticated each part. Should the file change between that and the
    /// kernel reading it, the receiver's MAC check fails the document; nothing wrong is ever
    /// committed.
    pub async fn data_from_file<'p>(
        &mut self,
        doc: u32,
        offset: u64,
        len: usize,
        file: &std::fs::File,
        mut next: impl FnMut() -> Result<Option<Vec<(u64, &'p [u8])>>>,
    ) -> Result<()> {
        let Sink::Tcp(w) = &mut self.inner else {
            return self
                .data_in_parts(doc, offset, len, || {
                    Ok(next()?.map(|v| v.into_iter().map(|(_, b)| b).collect()))
                })
                .await;
        };
        w.flush().await.context("sending a data frame")?;
        let tcp = w.get_ref().as_ref();
        rustix::net::sockopt::set_tcp_cork(tcp, true).context("corking a plain channel")?;
        send_more(tcp, &Data::encode_header(doc, offset, len)).await?;
        let mut total = 0;
        // Short slices are copied into `gathered` and sent in one call: a dense document (logs,
        // CSV) has a run of cleartext every hundred bytes or so, and a system call per run cost
        // more than copying it (8 MiB of logs with 70,000 runs: 290 ms on loopback against 15 ms
        // for secure-only, nearly all of it in `sendfile`).
        let mut gathered: Vec<u8> = Vec::new();
        while let Some(part) = next()? {
            for (at, bytes) in part {
                total += bytes.len();
                if bytes.len() < COPY_BELOW {
                    if gathered.capacity() == 0 {
                        gathered.reserve(GATHER);
                    }
                    gathered.extend_from_slice(bytes);
                    if gathered.len() >= GATHER {
                        send_more(tcp, &gathered).await?;
                        gathered.clear();
                    }
                    continue;
                }
                if !gathered.is_empty() {
                    send_more(tcp, &gathered).await?;
                    gathered.clear();
                }
                let (mut pos, end) = (at, at + bytes.len() as u64);
                while pos < end {
                    let want = usize::try_from(end - pos).unwrap_or(usize::MAX);
                    let n = tcp
                        .async_io(Interest::WRITABLE, || {
                            rustix::fs::sendfile(tcp, file, Some(&mut pos), want)
                                .map_err(std::io::Error::from)
                        })
                        .await
                        .context("sending a data frame")?;
                    if n == 0 {
                        bail!("the file ended early (was it truncated while being sent?)");
                    }
                }
            }
        }
        if !gathered.is_empty() {
            send_more(tcp, &gathered).await?;
        }
        // Uncorking sends what is left of the last segment at once.
        rustix::net::sockopt::set_tcp_cork(tcp, false).context("uncorking a plain channel")?;
        if total != len {
            bail!("internal error: a data frame of {len} bytes was given {total}");
        }
        Ok(())
    }

    /// Send what is buffered now.
    pub async fn flush(&mut self) -> Result<()> {
        self.w().flush().await.context("flushing a connection")
    }

    /// Flush, then close the stream for writing (TLS: close_notify; TCP: FIN).
    pub async fn shutdown(&mut self) -> Result<()> {
        self.w().shutdown().await.context("closing a connection")
    }
}

/// Slices of cleartext shorter than this are copied and sent together rather than each by
/// `sendfile(2)`: below it, a system call costs more than the copy it saves.
const COPY_BELOW: usize = 16 << 10;

/// Most bytes of short slices gathered before they are sent.
const GATHER: usize = 256 << 10;

/// Send all of `bytes` on a corked plain socket, telling the kernel more follows.
async fn send_more(tcp: &tokio::net::TcpStream, bytes: &[u8]) -> Result<()> {
    let mut sent = 0;
    while sent < bytes.len() {
        sent += tcp
            .async_io(Interest::WRITABLE, || {
                rustix::net::send(tcp, &bytes[sent..], rustix::net::SendFlags::MORE)
                    .map_err(std::io::Error::from)
            })
            .await
            .context("sending a data frame")?;
    }
    Ok(())
}
