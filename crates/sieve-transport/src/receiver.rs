//! The receiver (`sieve serve`): accepts sessions, joins their channels, writes every piece to its
//! place, and commits each document durably before acknowledging it.
//!
//! One TLS listener (channel 0 and extra secure channels) and one plain listener (plain channels).
//! A session is created by a HELLO on a fresh TLS connection; every other connection must JOIN an
//! existing session with a token derived from that session's TLS exporter. Pieces are written by
//! position (thesis §3.2 integration becomes "check that every byte arrived"), the cleartext
//! digest is checked, and only then is the file renamed into place and the ACK sent.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use sieve_core::frame::FrameType;
use sieve_core::frame::Limits;
use sieve_core::ledger::Ledger;
use sieve_core::message::{
    self, Ack, AckStatus, DataRef, Doc, DocEnd, Hello, Join, JoinOk, Message, Mode,
    Session as SessionMsg,
};
use sieve_core::sieve::Placement;
use sieve_core::Kind;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, Semaphore};
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info, warn};

use crate::conn::{Activity, BufferExhausted, BufferStats, FrameBudget, FrameReader, FrameWriter};
use crate::mac::PlainMac;
use crate::store::{self, PartFile};
use crate::tls::{Acceptor, LegacyAcceptor};
use crate::token::JoinKey;

/// Most documents of one session whose temporary files are open at once (each holds a file
/// descriptor while its pieces arrive), whatever the descriptor budget. Each session is told its
/// own share ([`FdBudget::session_docs`]) in SESSION, and senders keep no more than that
/// unacknowledged.
pub const MAX_OPEN_DOCS: u64 = 1024;

/// Largest payload accepted before a connection is authenticated (its HELLO or JOIN; both are a
/// few dozen bytes). Without it every unauthenticated connection could make the receiver reserve
/// a buffer of the full frame limit (16 MiB) by sending one header.
pub const PREAUTH_MAX_PAYLOAD: u32 = 4096;

/// Points where a test can hold the receiver, to force an interleaving that timing alone makes
/// rare. Compiled only with the `test-hooks` feature, which the crate's own tests turn on.
#[cfg(feature = "test-hooks")]
pub mod hooks {
    use std::sync::{Arc, Mutex};

    /// A hook: called where it is installed, on whatever thread gets there.
    pub type Hook = Arc<dyn Fn() + Send + Sync>;

    /// Called on the blocking pool between a document's verification and its commit.
    pub static BEFORE_COMMIT: Mutex<Option<Hook>> = Mutex::new(None);

    pub(crate) fn run(hook: &Mutex<Option<Hook>>) {
        let h = hook.lock().ok().and_then(|h| h.clone());
        if let Some(h) = h {
            h();
        }
    }
}

/// Most channels of one session: 16 secure (channel 0 among them) and 16 plain.
pub const MAX_CHANNELS: u64 = 32;

/// Default of [`ServeLimits::max_buffer_bytes`]: 64 sessions × 32 channels × a 256 KiB frame
/// (the sender's default chunk) each.
pub const DEFAULT_MAX_BUFFER_BYTES: u64 = 512 << 20;

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

/// Smallest frame-buffer budget accepted: one frame's first step ([`crate::conn::GROW_STEP`])
/// and then some.
pub const MIN_BUFFER_BYTES: u64 = 4 << 20;

/// Limits that keep one receiver safe from any one peer.
#[derive(Debug, Clone)]
pub struct ServeLimits {
    pub max_sessions: usize,
    /// Largest document accepted, in bytes.
    pub max_doc_bytes: u64,
    /// A session with no traffic for this long is dropped.
    pub idle_timeout: Duration,
    /// Time allowed for a TLS handshake plus the first frame (HELLO or JOIN).
    pub handshake_timeout: Duration,
    pub max_docs_per_session: u32,
    /// Connections that have not yet authenticated.
    pub max_pending: usize,
    pub frame: Limits,
    /// Most segments in one manifest.
    pub max_segments: usize,
    /// File descriptors the receiver may use; `None`: the process's open-file limit
    /// (`ulimit -n`, RLIMIT_NOFILE). See [`FdBudget`].
    pub max_open_files: Option<u64>,
    /// Most bytes all connections together may hold in frame buffers (frames being received).
    /// A channel whose next piece of frame does not fit waits for others to give memory back; if
    /// it waits longer than `idle_timeout`, its session fails with [`BufferExhausted`]. See
    /// [`FrameBudget`].
    pub max_buffer_bytes: u64,
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
            frame: Limits::default(),
            max_segments: 4_000_000,
            max_open_files: None,
            max_buffer_bytes: DEFAULT_MAX_BUFFER_BYTES,
        }
    }
}

pub struct ServeConfig {
    pub dir: PathBuf,
    pub tls: Arc<rustls::ServerConfig>,
    pub listen: SocketAddr,
    pub plain_listen: SocketAddr,
    /// What senders are told to connect to for plain channels (default: the plain listen address).
    pub plain_advertise: Option<String>,
    /// Receive, verify and acknowledge, but write nothing.
    pub discard: bool,
    /// INSECURE, laboratory only: accept secure channels with OpenSSL, which also offers the
    /// thesis's TLS 1.2 suites (feature `insecure-thesis-suites`; see [`crate::legacy_tls`]).
    pub legacy: Option<LegacyAcceptor>,
    pub limits: ServeLimits,
}

/// Counters a receiver keeps; read them in tests and reports.
#[derive(Debug, Default)]
pub struct Stats {
    pub sessions_started: AtomicU64,
    pub sessions_completed: AtomicU64,
    pub sessions_failed: AtomicU64,
    pub docs_committed: AtomicU64,
    pub docs_failed: AtomicU64,
    pub bad_joins: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub bytes_received: AtomicU64,
    /// Connections, sessions and documents refused because the receiver was at its limit of
    /// open files ([`FdBudget`]).
    pub fd_limit_refusals: AtomicU64,
    /// Frame-buffer memory (see [`ServeLimits::max_buffer_bytes`]): held now, peak, waits, and
    /// reads failed because it stayed spent.
    pub buffer: Arc<BufferStats>,
    /// Sessions ended because a channel waited too long for frame-buffer memory.
    pub buffer_refusals: AtomicU64,
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
    pub conn_limit: u64,
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
    pub fn for_this_process() -> FdBudget {
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
struct Held(Arc<AtomicU64>);

impl Held {
    /// Take one unit if the count is below `limit`.
    fn take(count: &Arc<AtomicU64>, limit: u64) -> Option<Held> {
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

struct Shared {
    cfg: ServeConfig,
    stats: Arc<Stats>,
    sessions: Mutex<HashMap<[u8; 16], Arc<Session>>>,
    session_permits: Arc<Semaphore>,
    pending_permits: Arc<Semaphore>,
    acceptor: Acceptor,
    advertise: String,
    fds: FdBudget,
    /// Descriptors held by connections and documents (see [`FdBudget`]).
    fds_used: Arc<AtomicU64>,
    /// Frame-buffer memory of every authenticated connection.
    buffers: Arc<FrameBudget>,
}

/// A receiver bound to its ports, ready to run.
pub struct Receiver {
    tls: TcpListener,
    plain: TcpListener,
    shared: Arc<Shared>,
}

impl Receiver {
    pub async fn bind(cfg: ServeConfig) -> Result<Receiver> {
        if !cfg.discard {
            store::check_dir(&cfg.dir)?;
            let n = store::clean_stale(&cfg.dir)?;
            if n > 0 {
                info!(
                    removed = n,
                    "removed temporary files left by an interrupted receiver"
                );
            }
        }
        let tls = TcpListener::bind(cfg.listen).await.with_context(|| {
            format!(
                "cannot listen on {} (is another receiver running?)",
                cfg.listen
            )
        })?;
        let plain = TcpListener::bind(cfg.plain_listen).await.with_context(|| {
            format!(
                "cannot listen on {} (is another receiver running?)",
                cfg.plain_listen
            )
        })?;
        let advertise = match &cfg.plain_advertise {
            Some(a) => a.clone(),
            None => plain.local_addr()?.to_string(),
        };
        if cfg.limits.max_buffer_bytes < MIN_BUFFER_BYTES {
            bail!(
                "the frame-buffer budget of {} bytes is too small: give at least {} MiB \
                 (--max-buffer-memory)",
                cfg.limits.max_buffer_bytes,
                MIN_BUFFER_BYTES >> 20
            );
        }
        let stats = Arc::new(Stats::default());
        let buffers = Arc::new(FrameBudget::new(
            cfg.limits.max_buffer_bytes,
            cfg.limits.idle_timeout,
            stats.buffer.clone(),
        ));
        let fds = match cfg.limits.max_open_files {
            Some(n) => FdBudget::for_limit(n),
            None => FdBudget::for_this_process(),
        };
        let shared = Arc::new(Shared {
            fds,
            fds_used: Arc::new(AtomicU64::new(0)),
            acceptor: match &cfg.legacy {
                None => Acceptor::Rustls(TlsAcceptor::from(cfg.tls.clone())),
                #[cfg(feature = "insecure-thesis-suites")]
                Some(l) => Acceptor::Legacy(l.clone()),
                #[cfg(not(feature = "insecure-thesis-suites"))]
                Some(never) => match *never {},
            },
            session_permits: Arc::new(Semaphore::new(cfg.limits.max_sessions)),
            pending_permits: Arc::new(Semaphore::new(cfg.limits.max_pending)),
            stats,
            buffers,
            sessions: Mutex::new(HashMap::new()),
            advertise,
            cfg,
        });
        Ok(Receiver { tls, plain, shared })
    }

    pub fn tls_addr(&self) -> SocketAddr {
        self.tls
            .local_addr()
            .expect("bound listener has an address")
    }

    pub fn plain_addr(&self) -> SocketAddr {
        self.plain
            .local_addr()
            .expect("bound listener has an address")
    }

    pub fn stats(&self) -> Arc<Stats> {
        self.shared.stats.clone()
    }

    /// How file descriptors are shared out (see [`FdBudget`]).
    pub fn fd_budget(&self) -> FdBudget {
        self.shared.fds
    }

    /// Serve until the task is dropped.
    pub async fn run(self) -> Result<()> {
        info!(tls = %self.tls_addr(), plain = %self.plain_addr(), advertise = %self.shared.advertise,
              dir = %self.shared.cfg.dir.display(), discard = self.shared.cfg.discard, "receiver listening");
        let fds = self.shared.fds;
        info!(
            open_files = fds.nofile,
            connections_until = fds.conn_limit,
            documents_until = fds.doc_limit,
            "file descriptor budget"
        );
        let limits = &self.shared.cfg.limits;
        info!(mib = limits.max_buffer_bytes >> 20, "frame buffer budget");
        let honest = honest_buffer_bytes(limits.max_sessions);
        if limits.max_buffer_bytes < honest {
            warn!(
                budget_mib = limits.max_buffer_bytes >> 20,
                "the frame-buffer budget is below {} MiB, what {} sessions of {MAX_CHANNELS} \
                 channels with 256 KiB frames need to never wait for each other: busy sessions \
                 may wait for memory, and fail after the idle timeout",
                honest.div_ceil(1 << 20),
                limits.max_sessions
            );
        }
        let plain_shared = self.shared.clone();
        let plain = self.plain;
        let plain_loop = async move {
            loop {
                let (tcp, peer) = match plain.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        warn!("plain accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Some(fd) = plain_shared.take_conn_fd() else {
                    continue;
                };
                let Ok(permit) = plain_shared.pending_permits.clone().try_acquire_owned() else {
                    plain_shared
                        .stats
                        .rejected_connections
                        .fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                let s = plain_shared.clone();
                tokio::spawn(async move {
                    let _fd = fd;
                    if let Err(e) = s.clone().plain_conn(tcp, permit).await {
                        debug!(%peer, "plain connection refused: {e:#}");
                    }
                });
            }
        };
        let shared = self.shared.clone();
        let tls = self.tls;
        let tls_loop = async move {
            loop {
                let (tcp, peer) = match tls.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        warn!("TLS accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Some(fd) = shared.take_conn_fd() else {
                    continue;
                };
                let Ok(permit) = shared.pending_permits.clone().try_acquire_owned() else {
                    shared
                        .stats
                        .rejected_connections
                        .fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                let s = shared.clone();
                tokio::spawn(async move {
                    let _fd = fd;
                    if let Err(e) = s.clone().tls_conn(tcp, peer, permit).await {
                        debug!(%peer, "TLS connection ended: {e:#}");
                    }
                });
            }
        };
        tokio::join!(plain_loop, tls_loop);
        Ok(())
    }
}

impl Shared {
    /// Count a just-accepted connection against the descriptor budget; `None` (and the
    /// connection is to be closed) when the receiver is at its limit.
    fn take_conn_fd(&self) -> Option<Held> {
        let held = Held::take(&self.fds_used, self.fds.conn_limit);
        if held.is_none() {
            self.stats
                .rejected_connections
                .fetch_add(1, Ordering::Relaxed);
            self.stats.fd_limit_refusals.fetch_add(1, Ordering::Relaxed);
            debug!(
                limit = self.fds.conn_limit,
                "connection refused: at the limit of open files"
            );
        }
        held
    }

    /// Why a new session or document must wait, if the descriptor budget is spent.
    fn files_exhausted(&self) -> Option<String> {
        (self.fds_used.load(Ordering::Acquire) >= self.fds.doc_limit)
            .then(|| self.fd_limit_message())
    }

    fn fd_limit_message(&self) -> String {
        format!(
            "the receiver is at its limit of open files ({} connections and documents in \
             progress; its open-file limit is {}); try again later",
            self.fds_used.load(Ordering::Acquire),
            self.fds.nofile
        )
    }

    async fn tls_conn(
        self: Arc<Self>,
        tcp: TcpStream,
        peer: SocketAddr,
        permit: tokio::sync::OwnedSemaphorePermit,
    ) -> Result<()> {
        let _ = tcp.set_nodelay(true);
        let limits = &self.cfg.limits;
        let hs = tokio::time::timeout(limits.handshake_timeout, async {
            let tls = self.acceptor.accept(tcp).await?;
            // Keying material for join tokens; only used if this connection starts a session.
            let id: [u8; 16] = rand::random();
            let (km, cipher, w) = (tls.exporter, tls.cipher, tls.write);
            let mut reader = FrameReader::new(tls.read, preauth(limits.frame));
            let first = reader.message().await?;
            reader.set_limits(limits.frame);
            reader.set_budget(self.buffers.clone());
            anyhow::Ok((reader, w, first, id, km, cipher))
        })
        .await;
        let (mut reader, w, first, id, km, cipher) = match hs {
            Ok(r) => r?,
            Err(_) => {
                self.stats
                    .rejected_connections
                    .fetch_add(1, Ordering::Relaxed);
                bail!(
                    "no handshake and first frame within {:?}",
                    limits.handshake_timeout
                );
            }
        };
        drop(permit);
        let mut writer = FrameWriter::new(w);
        match first {
            Message::Hello(hello) => {
                if let Some(why) = self.files_exhausted() {
                    self.stats.fd_limit_refusals.fetch_add(1, Ordering::Relaxed);
                    let m = message::Error::new(message::Error::LIMIT, why.clone());
                    writer.send(|o| m.encode(o)).await?;
                    writer.flush().await?;
                    bail!("session refused ({peer}): {why}");
                }
                let Ok(session_permit) = self.session_permits.clone().try_acquire_owned() else {
                    let m = message::Error {
                        code: 3,
                        message: "the receiver is at its session limit; try again later".into(),
                    };
                    writer.send(|o| m.encode(o)).await?;
                    writer.flush().await?;
                    bail!("session limit reached ({peer})");
                };
                let r = self
                    .clone()
                    .start_session(
                        hello,
                        (JoinKey::derive(&km, &id), PlainMac::derive(&km, &id)),
                        id,
                        reader,
                        writer,
                        cipher,
                    )
                    .await;
                drop(session_permit);
                r
            }
            Message::Join(join) if join.kind == Kind::Secure => {
                let session = self.find_session(&join)?;
                writer.send(|o| JoinOk {}.encode(o)).await?;
                writer.flush().await?;
                reader.set_limits(session.frame);
                reader.count_waits_in(session.memory_waiters.clone());
                reader.report_activity_to(session.activity.clone());
                session.run_channel(Kind::Secure, &mut reader).await;
                Ok(())
            }
            other => {
                self.stats.bad_joins.fetch_add(1, Ordering::Relaxed);
                bail!(
                    "expected HELLO or a secure JOIN, got {}",
                    other.frame_type().name()
                )
            }
        }
    }

    async fn plain_conn(
        self: Arc<Self>,
        tcp: TcpStream,
        permit: tokio::sync::OwnedSemaphorePermit,
    ) -> Result<()> {
        let _ = tcp.set_nodelay(true);
        let limits = &self.cfg.limits;
        let (r, w) = tcp.into_split();
        let mut reader = FrameReader::new(Box::new(r), preauth(limits.frame));
        let first = match tokio::time::timeout(limits.handshake_timeout, reader.message()).await {
            Ok(m) => m,
            Err(_) => {
                self.stats
                    .rejected_connections
                    .fetch_add(1, Ordering::Relaxed);
                bail!("no JOIN within {:?}", limits.handshake_timeout);
            }
        };
        // Errors are shown with Display only: their Debug form carries a backtrace when
        // RUST_BACKTRACE is set, and resolving it for every hostile connection costs the
        // receiver ~140 MiB of debug information and milliseconds of CPU each (see RELIABILITY.md).
        let join = match first {
            Ok(Message::Join(j)) if j.kind == Kind::Plain => j,
            Ok(other) => {
                self.stats.bad_joins.fetch_add(1, Ordering::Relaxed);
                bail!("expected a plain JOIN, got {}", other.frame_type().name());
            }
            Err(e) => {
                self.stats.bad_joins.fetch_add(1, Ordering::Relaxed);
                bail!("expected a plain JOIN: {e:#}");
            }
        };
        let session = self.find_session(&join)?;
        drop(permit);
        reader.set_limits(session.frame);
        reader.set_budget(self.buffers.clone());
        let mut writer = FrameWriter::new(Box::new(w));
        writer.send(|o| JoinOk {}.encode(o)).await?;
        writer.flush().await?;
        reader.count_waits_in(session.memory_waiters.clone());
        reader.report_activity_to(session.activity.clone());
        session.run_channel(Kind::Plain, &mut reader).await;
        Ok(())
    }

    /// Authenticate a JOIN and claim its channel slot.
    fn find_session(&self, join: &Join) -> Result<Arc<Session>> {
        let session = self
            .sessions
            .lock()
            .map_err(|_| anyhow!("poisoned"))?
            .get(&join.session_id)
            .cloned();
        let Some(session) = session else {
            self.stats.bad_joins.fetch_add(1, Ordering::Relaxed);
            bail!("JOIN for an unknown session");
        };
        let count = match join.kind {
            Kind::Secure => session.hello.secure_channels,
            Kind::Plain => session.hello.plain_channels,
        };
        let ok_index = join.index < count && !(join.kind == Kind::Secure && join.index == 0);
        if !ok_index || !session.key.verify(join.kind, join.index, &join.token) {
            self.stats.bad_joins.fetch_add(1, Ordering::Relaxed);
            bail!("JOIN with a wrong token or channel index");
        }
        let mut joined = session.joined.lock().map_err(|_| anyhow!("poisoned"))?;
        if !joined.insert((join.kind, join.index)) {
            self.stats.bad_joins.fetch_add(1, Ordering::Relaxed);
            bail!(
                "channel {:?}/{} already joined (replayed token?)",
                join.kind,
                join.index
            );
        }
        drop(joined);
        Ok(session)
    }
}

/// The smallest frame-buffer budget with which `sessions` sessions of [`MAX_CHANNELS`] channels,
/// each receiving frames of 256 KiB + the DATA prefix (257 KiB of buffer), can never all wait
/// for each other.
///
/// A channel that holds its buffer never waits again; a session none of whose channels waits
/// finishes and gives its memory back. So the budget is stuck only if every session has a
/// waiting channel, which needs the channels holding memory (at most `sessions × (channels −
/// 1)`) plus the part of a frame handed to the first waiter (less than one frame) to fill the
/// whole budget. With one frame more than that, it cannot happen.
pub fn honest_buffer_bytes(sessions: usize) -> u64 {
    (sessions as u64 * (MAX_CHANNELS - 1) + 1) * (257 << 10)
}

/// The frame limit for a connection's first frame.
fn preauth(frame: Limits) -> Limits {
    Limits {
        max_payload: frame.max_payload.min(PREAUTH_MAX_PAYLOAD),
    }
}

/// Validate what a sender asks for.
fn check_hello(h: &Hello) -> Result<(), String> {
    if h.version != message::PROTOCOL_VERSION {
        return Err(format!(
            "protocol version {} is not supported (this receiver speaks {})",
            h.version,
            message::PROTOCOL_VERSION
        ));
    }
    if !(1..=16).contains(&h.secure_channels) {
        return Err(format!(
            "{} secure channels requested; 1 to 16 are allowed",
            h.secure_channels
        ));
    }
    match h.mode {
        Mode::Sieve if !(1..=16).contains(&h.plain_channels) => Err(format!(
            "{} plain channels requested; sieve mode needs 1 to 16",
            h.plain_channels
        )),
        Mode::SecureOnly if h.plain_channels != 0 => {
            Err("secure-only mode uses no plain channels".into())
        }
        _ => Ok(()),
    }
}

/// One session: its channels, its documents, and the writer of channel 0 for acknowledgements.
struct Session {
    id: [u8; 16],
    hello: Hello,
    key: JoinKey,
    mac: PlainMac,
    shared: Arc<Shared>,
    joined: Mutex<std::collections::HashSet<(Kind, u8)>>,
    docs: Mutex<HashMap<u32, Arc<DocSlot>>>,
    docs_changed: Notify,
    ctl: tokio::sync::Mutex<FrameWriter>,
    abort_tx: watch::Sender<bool>,
    /// Why the session was aborted (the first reason given).
    abort_why: Mutex<Option<String>>,
    /// Set when a channel gave up waiting for frame-buffer memory: what the sender is told.
    out_of_memory: Mutex<Option<String>>,
    /// Channels of this session waiting for frame-buffer memory now.
    memory_waiters: Arc<AtomicU64>,
    /// When a channel of this session last took a byte (its readers report to it).
    activity: Activity,
    started: Instant,
    /// Temporary files open (documents receiving pieces).
    open_docs: Arc<AtomicU64>,
    /// Documents refused at their manifest: their pieces are still on the way, and are dropped.
    refused: Mutex<std::collections::HashSet<u32>>,
    /// Frame limit of every channel of this session ([`session_frame_limit`]).
    frame: Limits,
}

struct DocSlot {
    doc: Doc,
    placement: Placement,
    io: RwLock<DocIo>,
    progress: Mutex<DocProgress>,
}

#[derive(Default)]
struct DocIo {
    file: Option<DocFile>,
    closed: bool,
    /// Could not be stored (and the sender was told): its remaining pieces are dropped.
    failed: bool,
}

/// A document's temporary file, counted in its session's and the receiver's open files until it
/// is committed or dropped.
struct DocFile {
    part: PartFile,
    _in_session: Held,
    _in_receiver: Held,
}

impl DocFile {
    fn commit(self) -> Result<PathBuf> {
        self.part.commit()
    }
}

/// What the sender is told about a document that could not be stored. The receiver's paths stay
/// in its own log; the sender learns the cause.
fn store_reason(name: &str, e: &anyhow::Error) -> String {
    const ENFILE: i32 = 23;
    const EMFILE: i32 = 24;
    const ENOSPC: i32 = 28;
    const EDQUOT: i32 = 122;
    let io = e.chain().find_map(|c| c.downcast_ref::<std::io::Error>());
    match io {
        Some(io) => match io.raw_os_error() {
            Some(ENOSPC) => {
                format!("cannot store {name}: no space left on the receiver's disk ({io})")
            }
            Some(EDQUOT) => {
                format!("cannot store {name}: the receiver's disk quota is exhausted ({io})")
            }
            Some(EMFILE | ENFILE) => {
                format!("cannot store {name}: the receiver has too many open files ({io})")
            }
            _ => format!("cannot store {name} on the receiver: {io}"),
        },
        None => format!("cannot store {name}: {e:#}"),
    }
}

#[derive(Default)]
struct DocProgress {
    ledgers: [Ledger; 2],
    end: Option<DocEnd>,
    finalizing: bool,
    first_data: Option<Instant>,
}

impl Session {
    fn hex_id(&self) -> String {
        self.id.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn touch(&self) {
        self.activity.touch();
    }

    fn idle_for(&self) -> Duration {
        self.activity.idle_for()
    }

    /// Read DATA frames from an extra channel until it closes or the session ends.
    async fn run_channel(self: &Arc<Self>, kind: Kind, reader: &mut FrameReader) {
        let mut abort = self.abort_tx.subscribe();
        let idle = self.shared.cfg.limits.idle_timeout;
        loop {
            let frame = tokio::select! {
                f = tokio::time::timeout(idle, reader.read()) => f,
                _ = abort.changed() => return,
            };
            let result = match frame {
                Err(_) if self.idle_for() < idle => continue,
                Err(_) => Err(match self.memory_wait_error(reader) {
                    Some(e) => e.into(),
                    None => anyhow!("channel idle for {idle:?}"),
                }),
                Ok(Ok(None)) => return,
                Ok(Ok(Some((FrameType::Data, payload)))) => match DataRef::parse(payload) {
                    Ok(d) => self.data(kind, d).await,
                    Err(e) => Err(e.into()),
                },
                Ok(Ok(Some((ty, _)))) => {
                    Err(anyhow!("unexpected {} frame on a data channel", ty.name()))
                }
                Ok(Err(e)) => Err(e),
            };
            if let Err(e) = result {
                if let Some(m) = e.downcast_ref::<BufferExhausted>() {
                    if let Ok(mut o) = self.out_of_memory.lock() {
                        o.get_or_insert_with(|| m.to_string());
                    }
                }
                self.abort(&format!("{kind:?} channel failed: {e:#}"));
                return;
            }
        }
    }

    fn abort(&self, why: &str) {
        if !*self.abort_tx.borrow() {
            if let Ok(mut w) = self.abort_why.lock() {
                w.get_or_insert_with(|| why.to_string());
            }
            warn!(session = %self.hex_id(), "session aborted: {why}");
            let _ = self.abort_tx.send(true);
        }
    }

    /// The document's slot, once its manifest has come; `None` if the document was refused.
    async fn slot(&self, doc: u32) -> Result<Option<Arc<DocSlot>>> {
        let deadline = Instant::now() + self.shared.cfg.limits.idle_timeout;
        loop {
            let notified = self.docs_changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(s) = self.docs.lock().map_err(|_| anyhow!("poisoned"))?.get(&doc) {
                return Ok(Some(s.clone()));
            }
            if self
                .refused
                .lock()
                .map_err(|_| anyhow!("poisoned"))?
                .contains(&doc)
            {
                return Ok(None);
            }
            if tokio::time::timeout_at(deadline.into(), notified)
                .await
                .is_err()
            {
                bail!("data for document {doc}, whose manifest never came");
            }
        }
    }

    async fn data(self: &Arc<Self>, kind: Kind, d: DataRef<'_>) -> Result<()> {
        self.touch();
        let Some(slot) = self.slot(d.doc).await? else {
            // A refused document: the sender did not wait for our answer before sending it.
            return Ok(());
        };
        let len = d.payload.len() as u64;
        let discard = self.shared.cfg.discard;
        if !discard {
            let mut err = None;
            let write = |io: &DocIo, err: &mut Option<anyhow::Error>| -> Result<()> {
                let f = &io.file.as_ref().context("document already closed")?.part;
                slot.placement
                    .place(kind, d.offset, len, |out, within, n| {
                        if err.is_none() {
                            if let Err(e) =
                                f.write_at(out, &d.payload[within as usize..(within + n) as usize])
                            {
                                *err = Some(e);
                            }
                        }
                    })?;
                Ok(())
            };
            let need_create = {
                let io = slot.io.read().map_err(|_| anyhow!("poisoned"))?;
                if io.failed {
                    // Its failure is already reported: the rest of it is dropped.
                    return Ok(());
                }
                if io.closed {
                    bail!("data for document {} after it was complete", d.doc);
                }
                if io.file.is_some() {
                    write(&io, &mut err)?;
                    false
                } else {
                    true
                }
            };
            if need_create {
                let mut io = slot.io.write().map_err(|_| anyhow!("poisoned"))?;
                if io.failed {
                    return Ok(());
                }
                if io.closed {
                    bail!("data for document {} after it was complete", d.doc);
                }
                if io.file.is_none() {
                    match self.create_part(&slot, true) {
                        Ok(f) => io.file = Some(f),
                        Err(e) => err = Some(e),
                    }
                }
                if err.is_none() {
                    write(&io, &mut err)?;
                }
            }
            if let Some(e) = err {
                // A store error (disk full, no descriptor) fails this document, not the session.
                self.fail_doc(&slot, &e).await;
                return Ok(());
            }
        } else {
            // Still check that the piece lies inside the stream.
            slot.placement.place(kind, d.offset, len, |_, _, _| {})?;
        }
        let hash = (kind == Kind::Plain).then(|| self.mac.tag(d.doc, d.offset, d.payload));
        self.shared
            .stats
            .bytes_received
            .fetch_add(len, Ordering::Relaxed);
        {
            let mut p = slot.progress.lock().map_err(|_| anyhow!("poisoned"))?;
            p.first_data.get_or_insert_with(Instant::now);
            match hash {
                Some(h) => p.ledgers[Kind::Plain.index()].record_hashed(d.offset, len, h),
                None => p.ledgers[Kind::Secure.index()].record_unhashed(d.offset, len),
            }
        }
        self.maybe_finalize(&slot);
        Ok(())
    }

    /// `limited`: the file stays open while the document's pieces arrive, so it counts against
    /// the session's limit of open documents.
    fn create_part(&self, slot: &DocSlot, limited: bool) -> Result<DocFile> {
        let session_limit = if limited {
            self.shared.fds.session_docs()
        } else {
            u64::MAX
        };
        let Some(in_session) = Held::take(&self.open_docs, session_limit) else {
            bail!(
                "more than {session_limit} documents of one session in progress at once (the \
                 receiver's SESSION said so; wait for acknowledgements before starting more)"
            );
        };
        let shared = &self.shared;
        let Some(in_receiver) = Held::take(&shared.fds_used, shared.fds.doc_limit) else {
            shared
                .stats
                .fd_limit_refusals
                .fetch_add(1, Ordering::Relaxed);
            bail!("{}", shared.fd_limit_message());
        };
        let part = PartFile::create(
            &shared.cfg.dir,
            &format!("{}-{}", self.hex_id(), slot.doc.doc),
            &slot.doc.name,
            slot.placement.output_len(),
        )?;
        Ok(DocFile {
            part,
            _in_session: in_session,
            _in_receiver: in_receiver,
        })
    }

    /// A document that cannot be stored (disk full, no file descriptor): remove its temporary
    /// file, tell the sender why, and go on with the session's other documents. Its remaining
    /// pieces are dropped as they come.
    async fn fail_doc(self: &Arc<Self>, slot: &Arc<DocSlot>, e: &anyhow::Error) {
        let first = match slot.progress.lock() {
            Ok(mut p) => {
                // `finalizing` marks a document whose outcome is decided.
                let first = !p.finalizing;
                p.finalizing = true;
                if first {
                    p.ledgers = Default::default();
                }
                first
            }
            Err(_) => false,
        };
        if !first {
            return;
        }
        if let Ok(mut io) = slot.io.write() {
            io.closed = true;
            io.failed = true;
            // Dropping the file removes it.
            io.file.take();
        }
        let name = &slot.doc.name;
        self.shared
            .stats
            .docs_failed
            .fetch_add(1, Ordering::Relaxed);
        warn!(session = %self.hex_id(), doc = slot.doc.doc, %name, "document failed: {e:#}");
        self.ack(Ack {
            doc: slot.doc.doc,
            status: AckStatus::StoreError,
            message: store_reason(name, e),
            receive_us: 0,
            integrate_us: 0,
            commit_us: 0,
        })
        .await;
    }

    fn maybe_finalize(self: &Arc<Self>, slot: &Arc<DocSlot>) {
        let ready = {
            let Ok(mut p) = slot.progress.lock() else {
                return;
            };
            let ready = !p.finalizing
                && p.end.is_some()
                && p.ledgers[Kind::Secure.index()].bytes()
                    >= slot.placement.stream_len(Kind::Secure)
                && p.ledgers[Kind::Plain.index()].bytes() >= slot.placement.stream_len(Kind::Plain);
            if ready {
                p.finalizing = true;
            }
            ready
        };
        if ready {
            let s = self.clone();
            let slot = slot.clone();
            tokio::spawn(async move { s.finalize(slot).await });
        }
    }

    /// Verify, restore marks, commit, acknowledge.
    async fn finalize(self: Arc<Self>, slot: Arc<DocSlot>) {
        let s = self.clone();
        let sl = slot.clone();
        let outcome = tokio::task::spawn_blocking(move || s.commit_doc(&sl)).await;
        let (status, message, times) = match outcome {
            Ok(Ok(times)) => (AckStatus::Ok, String::new(), times),
            Ok(Err((AckStatus::StoreError, e))) => (
                AckStatus::StoreError,
                store_reason(&slot.doc.name, &e),
                (0, 0, 0),
            ),
            Ok(Err((status, e))) => (status, format!("{e:#}"), (0, 0, 0)),
            Err(e) => (
                AckStatus::StoreError,
                format!("internal error: {e}"),
                (0, 0, 0),
            ),
        };
        let name = &slot.doc.name;
        if status == AckStatus::Ok {
            self.shared
                .stats
                .docs_committed
                .fetch_add(1, Ordering::Relaxed);
            info!(session = %self.hex_id(), doc = slot.doc.doc, %name, bytes = slot.placement.output_len(), "document committed");
        } else {
            self.shared
                .stats
                .docs_failed
                .fetch_add(1, Ordering::Relaxed);
            warn!(session = %self.hex_id(), doc = slot.doc.doc, %name, "document failed: {message}");
            // The document is finished: remove its temporary file now, not when the session ends.
            if let Ok(mut io) = slot.io.write() {
                io.closed = true;
                io.file.take();
            }
        }
        self.ack(Ack {
            doc: slot.doc.doc,
            status,
            message,
            receive_us: times.0,
            integrate_us: times.1,
            commit_us: times.2,
        })
        .await;
        // The slot stays in the map so late duplicates are recognised, but its memory is freed.
        if let Ok(mut p) = slot.progress.lock() {
            p.ledgers = Default::default();
        }
    }

    async fn ack(&self, ack: Ack) {
        let mut w = self.ctl.lock().await;
        let r = async {
            w.send(|o| ack.encode(o)).await?;
            w.flush().await
        }
        .await;
        if let Err(e) = r {
            self.abort(&format!("cannot send an acknowledgement: {e:#}"));
        }
    }

    /// Blocking part of finalisation. Returns (combine, integrate, commit) microseconds.
    fn commit_doc(&self, slot: &DocSlot) -> Result<(u64, u64, u64), (AckStatus, anyhow::Error)> {
        let t0 = Instant::now();
        let integrity =
            |e: sieve_core::ledger::LedgerError| (AckStatus::IntegrityError, anyhow::Error::new(e));
        {
            let mut p = slot
                .progress
                .lock()
                .map_err(|_| (AckStatus::StoreError, anyhow!("poisoned")))?;
            let end = p
                .end
                .ok_or_else(|| (AckStatus::ProtocolError, anyhow!("no DOC_END")))?;
            p.ledgers[Kind::Secure.index()]
                .finish(slot.placement.stream_len(Kind::Secure))
                .map_err(integrity)?;
            p.ledgers[Kind::Plain.index()]
                .verify(slot.placement.stream_len(Kind::Plain), &end.plain_digest)
                .map_err(integrity)?;
        }
        let t1 = Instant::now();
        #[cfg(feature = "test-hooks")]
        hooks::run(&hooks::BEFORE_COMMIT);
        let store_err = |e: anyhow::Error| (AckStatus::StoreError, e);
        let mut io = slot
            .io
            .write()
            .map_err(|_| (AckStatus::StoreError, anyhow!("poisoned")))?;
        if io.closed {
            // The session ended (and removed the temporary file) while this document was being
            // verified: there is nothing to commit.
            return Err((
                AckStatus::StoreError,
                anyhow!("the session ended before the document could be committed"),
            ));
        }
        io.closed = true;
        if self.shared.cfg.discard {
            return Ok((us(t1 - t0), 0, 0));
        }
        let no_pieces = slot.placement.stream_len(Kind::Secure) == 0
            && slot.placement.stream_len(Kind::Plain) == 0;
        let file = match io.file.take() {
            Some(f) => f,
            // A document with no pieces: its file is created, committed and closed right here.
            None if no_pieces => self.create_part(slot, false).map_err(store_err)?,
            None => {
                return Err((
                    AckStatus::StoreError,
                    anyhow!("internal error: the document's temporary file is gone"),
                ))
            }
        };
        drop(io);
        if let Some((start, end)) = &slot.doc.marks {
            for &(off, is_start) in slot.placement.mark_offsets() {
                file.part
                    .write_at(off, if is_start { start } else { end })
                    .map_err(store_err)?;
            }
        }
        let t2 = Instant::now();
        file.commit().map_err(store_err)?;
        Ok((us(t1 - t0), us(t2 - t1), us(t2.elapsed())))
    }

    async fn add_doc(self: &Arc<Self>, doc: Doc) -> Result<()> {
        let limits = &self.shared.cfg.limits;
        let refuse = |why: String| Ack {
            doc: doc.doc,
            status: AckStatus::Refused,
            message: why,
            receive_us: 0,
            integrate_us: 0,
            commit_us: 0,
        };
        let marks = doc
            .marks
            .as_ref()
            .map(|(s, e)| (s.len() as u64, e.len() as u64));
        let placement = Placement::new(&doc.layout, marks);
        let problem = if let Err(why) = store::check_name(&doc.name) {
            Some(format!("refused file name: {why}"))
        } else if placement.output_len() > limits.max_doc_bytes {
            Some(format!(
                "{} bytes exceed this receiver's limit of {} bytes",
                placement.output_len(),
                limits.max_doc_bytes
            ))
        } else if self.hello.mode == Mode::SecureOnly && placement.stream_len(Kind::Plain) > 0 {
            Some("plain bytes in a secure-only session".into())
        } else {
            None
        };
        if let Some(why) = problem {
            warn!(session = %self.hex_id(), doc = doc.doc, name = %doc.name, "document refused: {why}");
            self.shared
                .stats
                .docs_failed
                .fetch_add(1, Ordering::Relaxed);
            if !self
                .refused
                .lock()
                .map_err(|_| anyhow!("poisoned"))?
                .insert(doc.doc)
            {
                bail!("document {} announced twice", doc.doc);
            }
            self.docs_changed.notify_waiters();
            self.ack(refuse(why)).await;
            return Ok(());
        }
        let mut docs = self.docs.lock().map_err(|_| anyhow!("poisoned"))?;
        if docs.len() as u32 >= limits.max_docs_per_session {
            bail!(
                "more than {} documents in one session",
                limits.max_docs_per_session
            );
        }
        if docs.contains_key(&doc.doc) {
            bail!("document {} announced twice", doc.doc);
        }
        let id = doc.doc;
        let slot = Arc::new(DocSlot {
            doc,
            placement,
            io: RwLock::new(DocIo::default()),
            progress: Mutex::new(DocProgress::default()),
        });
        docs.insert(id, slot);
        drop(docs);
        self.docs_changed.notify_waiters();
        Ok(())
    }

    async fn doc_end(self: &Arc<Self>, end: DocEnd) -> Result<()> {
        let slot = self
            .docs
            .lock()
            .map_err(|_| anyhow!("poisoned"))?
            .get(&end.doc)
            .cloned();
        let Some(slot) = slot else {
            // A refused document: its end is expected and ignored.
            return Ok(());
        };
        if end.secure_len != slot.placement.stream_len(Kind::Secure)
            || end.plain_len != slot.placement.stream_len(Kind::Plain)
        {
            bail!(
                "DOC_END for document {} disagrees with its manifest",
                end.doc
            );
        }
        {
            let mut p = slot.progress.lock().map_err(|_| anyhow!("poisoned"))?;
            if p.end.is_some() {
                bail!("DOC_END for document {} sent twice", end.doc);
            }
            p.end = Some(end);
        }
        self.maybe_finalize(&slot);
        Ok(())
    }
}

fn us(d: Duration) -> u64 {
    d.as_micros() as u64
}

impl Shared {
    /// Start a session on a fresh TLS connection whose first frame was HELLO.
    async fn start_session(
        self: Arc<Self>,
        hello: Hello,
        (key, mac): (JoinKey, PlainMac),
        id: [u8; 16],
        mut reader: FrameReader,
        mut writer: FrameWriter,
        cipher: String,
    ) -> Result<()> {
        if let Err(why) = check_hello(&hello) {
            let m = message::Error {
                code: message::Error::PROTOCOL,
                message: why.clone(),
            };
            writer.send(|o| m.encode(o)).await?;
            writer.flush().await?;
            bail!("refused HELLO: {why}");
        }
        let frame = session_frame_limit(
            &self.cfg.limits,
            u64::from(hello.secure_channels) + u64::from(hello.plain_channels),
        );
        let reply = SessionMsg {
            session_id: id,
            plain_addr: self.advertise.clone(),
            max_payload: frame.max_payload,
            max_open_docs: u32::try_from(self.fds.session_docs()).unwrap_or(u32::MAX),
        };
        // Only buffered here: it goes out (below) once the session can be found by its JOINs.
        writer.send(|o| reply.encode(o)).await?;
        let (abort_tx, _) = watch::channel(false);
        let session = Arc::new(Session {
            id,
            hello,
            key,
            mac,
            shared: self.clone(),
            joined: Mutex::new(std::collections::HashSet::new()),
            docs: Mutex::new(HashMap::new()),
            docs_changed: Notify::new(),
            ctl: tokio::sync::Mutex::new(writer),
            abort_tx,
            abort_why: Mutex::new(None),
            out_of_memory: Mutex::new(None),
            memory_waiters: Arc::new(AtomicU64::new(0)),
            activity: Activity::default(),
            started: Instant::now(),
            open_docs: Arc::new(AtomicU64::new(0)),
            refused: Mutex::new(std::collections::HashSet::new()),
            frame,
        });
        self.sessions
            .lock()
            .map_err(|_| anyhow!("poisoned"))?
            .insert(id, session.clone());
        self.stats.sessions_started.fetch_add(1, Ordering::Relaxed);
        info!(session = %session.hex_id(), mode = ?hello.mode, secure = hello.secure_channels, plain = hello.plain_channels, %cipher, "session started");
        let sent = session.ctl.lock().await.flush().await;
        reader.set_limits(session.frame);
        reader.count_waits_in(session.memory_waiters.clone());
        reader.report_activity_to(session.activity.clone());
        let result = match sent {
            Ok(()) => session.control_loop(&mut reader).await,
            Err(e) => Err(e),
        };
        if let Err(e) = &result {
            session.tell_out_of_memory(e).await;
        }
        self.sessions
            .lock()
            .map_err(|_| anyhow!("poisoned"))?
            .remove(&id);
        let _ = session.abort_tx.send(true);
        // Drop every unfinished document: PartFile's Drop removes its temporary file.
        let slots: Vec<_> = session
            .docs
            .lock()
            .map(|d| d.values().cloned().collect())
            .unwrap_or_default();
        for s in slots {
            if let Ok(mut io) = s.io.write() {
                io.closed = true;
                io.file.take();
            }
        }
        let secs = session.started.elapsed().as_secs_f64();
        match &result {
            Ok(()) => {
                self.stats
                    .sessions_completed
                    .fetch_add(1, Ordering::Relaxed);
                info!(session = %session.hex_id(), secs, "session finished");
            }
            Err(e) => {
                self.stats.sessions_failed.fetch_add(1, Ordering::Relaxed);
                warn!(session = %session.hex_id(), secs, "session failed: {e:#}");
            }
        }
        result
    }
}

impl Session {
    /// Why a channel of this session saw no frame for the idle timeout, if it is for lack of
    /// frame-buffer memory: this channel, or another of the session, is waiting for it.
    fn memory_wait_error(&self, reader: &FrameReader) -> Option<BufferExhausted> {
        if let Some(e) = reader.memory_wait_error() {
            return Some(e);
        }
        (self.memory_waiters.load(Ordering::Acquire) > 0).then(|| BufferExhausted {
            what: "a frame of another channel of this session".into(),
            waited: self.idle_for(),
            limit_bytes: self.shared.buffers.limit_bytes(),
        })
    }

    fn abort_reason(&self) -> String {
        self.abort_why
            .lock()
            .ok()
            .and_then(|w| w.clone())
            .unwrap_or_else(|| "a data channel failed".into())
    }

    /// A session that failed for lack of frame-buffer memory tells its sender why (an ERROR
    /// with code LIMIT on channel 0), within a second: its sender may not be reading.
    async fn tell_out_of_memory(&self, e: &anyhow::Error) {
        let why = match e.downcast_ref::<BufferExhausted>() {
            Some(m) => Some(m.to_string()),
            None => self.out_of_memory.lock().ok().and_then(|o| o.clone()),
        };
        let Some(why) = why else {
            return;
        };
        self.shared
            .stats
            .buffer_refusals
            .fetch_add(1, Ordering::Relaxed);
        let m = message::Error::new(message::Error::LIMIT, why);
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            let mut w = self.ctl.lock().await;
            w.send(|o| m.encode(o)).await?;
            w.flush().await
        })
        .await;
    }

    async fn control_loop(self: &Arc<Self>, reader: &mut FrameReader) -> Result<()> {
        let idle = self.shared.cfg.limits.idle_timeout;
        let mut abort = self.abort_tx.subscribe();
        loop {
            let frame = tokio::select! {
                f = tokio::time::timeout(idle, reader.read()) => f,
                _ = abort.changed() => bail!("{}", self.abort_reason()),
            };
            let (ty, payload) = match frame {
                Err(_) if self.idle_for() < idle => continue,
                Err(_) => match self.memory_wait_error(reader) {
                    Some(e) => return Err(e.into()),
                    None => bail!("no traffic for {idle:?}"),
                },
                Ok(Ok(None)) => bail!("the sender closed channel 0 before saying goodbye"),
                Ok(Err(e)) => return Err(e),
                Ok(Ok(Some(f))) => f,
            };
            self.touch();
            match ty {
                FrameType::Data => self.data(Kind::Secure, DataRef::parse(payload)?).await?,
                FrameType::Doc => {
                    let doc =
                        Doc::parse_with_max_segments(payload, self.shared.cfg.limits.max_segments)?;
                    self.add_doc(doc).await?
                }
                FrameType::DocEnd => self.doc_end(DocEnd::parse(payload)?).await?,
                FrameType::Bye => return Ok(()),
                other => bail!("unexpected {} frame on channel 0", other.name()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(secure: u8, plain: u8) -> Hello {
        Hello {
            version: message::PROTOCOL_VERSION,
            mode: Mode::Sieve,
            secure_channels: secure,
            plain_channels: plain,
            split: message::SPLIT_DYNAMIC,
            batch_split: message::SPLIT_DYNAMIC,
            chunk_size: 256 << 10,
            docs: 1,
        }
    }

    /// The default frame-buffer budget lets the default number of sessions, each with as many
    /// channels as a HELLO may ask for, receive 256 KiB frames without ever all waiting.
    #[test]
    fn default_buffer_budget_fits_every_honest_channel() {
        let l = ServeLimits::default();
        assert!(check_hello(&hello(16, 16)).is_ok());
        assert!(check_hello(&hello(17, 16)).is_err() && check_hello(&hello(16, 17)).is_err());
        assert_eq!(MAX_CHANNELS, 16 + 16);
        let need = honest_buffer_bytes(l.max_sessions);
        assert!(
            l.max_buffer_bytes >= need,
            "default budget {} < {need} for {} sessions",
            l.max_buffer_bytes,
            l.max_sessions
        );
        // A 256 KiB chunk plus the DATA prefix is what honest_buffer_bytes counts per channel.
        let frame = (256 << 10) + message::DATA_PREFIX_LEN as u64;
        assert_eq!(frame.div_ceil(1024) * 1024, 257 << 10);
    }
}
