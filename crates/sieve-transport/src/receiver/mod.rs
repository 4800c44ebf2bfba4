//! The receiver (`sieve serve`): accepts sessions, joins their channels, writes every piece to its
//! place, and commits each document durably before acknowledging it.
//!
//! One TLS listener (channel 0 and extra secure channels) and one plain listener (plain channels).
//! A session is created by a HELLO on a fresh TLS connection; every other connection must JOIN an
//! existing session with a token derived from that session's TLS exporter. Pieces are written by
//! position (thesis §3.2 integration becomes "check that every byte arrived"), the cleartext
//! digest is checked, and only then is the file renamed into place and the ACK sent.
//!
//! - `mod.rs`: the listeners and the accept loops; what the receiver shares among sessions.
//! - `accept.rs`: one connection, from its handshake to HELLO (a new session) or JOIN.
//! - `session.rs`: one session's loops, feeding its protocol state machine
//!   (`sieve_core::receiver`) and carrying out its actions.
//! - `files.rs`: the temporary files of a session's documents, their writes and commits.
//! - `limits.rs`: what the receiver allows, and how its budgets are shared.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info, warn};

use sieve_core::mac::MacPreference;
use sieve_core::receiver::AtomicPool;

use crate::conn::{BufferStats, FrameBudget};
use crate::store::{Store, StoreOptions};
use crate::tls::{Acceptor, LegacyAcceptor};

use admission::{Clients, Ticket, Waiting};
use session::Session;

mod accept;
mod admission;
mod arriving;
mod files;
#[cfg(feature = "test-hooks")]
pub mod hooks;
mod inflate;
mod limits;
mod session;

pub use crate::progress::CREDIT_WINDOW;
pub(crate) use inflate::decompress_speed_mbps;
pub(crate) use limits::{protocol_memory_bytes, MIN_BUFFER_BYTES};
pub use limits::{
    session_frame_limit, stall_free_buffer_bytes, FdBudget, ServeLimits, DEFAULT_MIN_SESSION_RATE,
    MAX_CHANNELS, MAX_OPEN_DOCS, MIN_SESSION_PAYLOAD, SESSION_BUFFER_SHARE,
};

/// How a [`Receiver`] is set up: where it listens, its TLS, where documents go and its limits.
pub struct ServeConfig {
    /// The output folder: committed documents are renamed into it.
    pub dir: PathBuf,
    /// TLS 1.3 for channel 0 and the extra secure channels ([`crate::tls::ServerTls::config`]).
    pub tls: Arc<rustls::ServerConfig>,
    /// Where the TLS port listens (port 0: any free port, see [`Receiver::tls_addr`]).
    pub listen: SocketAddr,
    /// Where the plain port listens (port 0: any free port, see [`Receiver::plain_addr`]).
    pub plain_listen: SocketAddr,
    /// What senders are told to connect to for plain channels (default: the plain listen address).
    pub plain_advertise: Option<String>,
    /// Receive, verify and acknowledge, but write nothing.
    pub discard: bool,
    /// INSECURE, laboratory only: accept secure channels with OpenSSL, which also offers the
    /// thesis's TLS 1.2 suites (feature `insecure-thesis-suites`; see `legacy_tls.rs`).
    pub legacy: Option<LegacyAcceptor>,
    /// What one peer may make the receiver hold.
    pub limits: ServeLimits,
    /// Whether files are replaced, their mode, folders per client (see [`crate::store`]).
    pub store: StoreOptions,
    /// The cleartext MACs this receiver accepts, by its own measured speed
    /// ([`crate::calibrate`]); it picks one among each sender's offer
    /// ([`sieve_core::mac::negotiate`]).
    pub macs: MacPreference,
    /// The compressed frames this receiver accepts (a session uses those of them its sender
    /// offers); `CompressFlags::ALL` normally.
    pub accept_compression: sieve_core::message::CompressFlags,
}

/// Counters a receiver keeps; read them in tests and reports.
#[derive(Debug, Default)]
pub struct Stats {
    /// Sessions that got their SESSION answer.
    pub sessions_started: AtomicU64,
    /// Sessions that ended with BYE.
    pub sessions_completed: AtomicU64,
    /// Sessions that ended any other way.
    pub sessions_failed: AtomicU64,
    /// Of those, sessions ended to admit a newcomer, having moved less than
    /// [`ServeLimits::min_session_rate`].
    pub sessions_evicted: AtomicU64,
    /// Documents verified and committed to the output folder.
    pub docs_committed: AtomicU64,
    /// Documents refused or failed (each answered with a non-Ok ACK).
    pub docs_failed: AtomicU64,
    /// JOINs refused: unknown session, wrong token, or not a JOIN at all.
    pub bad_joins: AtomicU64,
    /// Connections dropped before they authenticated (timeouts, evictions, failed handshakes).
    pub rejected_connections: AtomicU64,
    /// Payload bytes of DATA and ZDATA frames received.
    pub bytes_received: AtomicU64,
    /// Connections, sessions and documents refused because the receiver was at its limit of
    /// open files ([`FdBudget`]).
    pub fd_limit_refusals: AtomicU64,
    /// Frame-buffer memory (see [`ServeLimits::max_buffer_bytes`]): held now, peak, waits, and
    /// reads failed because it stayed spent.
    pub buffer: Arc<BufferStats>,
    /// Sessions ended because a channel waited too long for frame-buffer memory.
    pub buffer_refusals: AtomicU64,
    /// Compressed frames decompressed, and the bytes they gave.
    pub frames_decompressed: AtomicU64,
    /// The bytes those compressed frames gave.
    pub bytes_decompressed: AtomicU64,
    /// Documents refused because their compressed frames would have decompressed too far before
    /// they were verified ([`ServeLimits::inflate`]).
    pub inflate_refusals: AtomicU64,
}

struct Shared {
    cfg: ServeConfig,
    stats: Arc<Stats>,
    sessions: Mutex<HashMap<[u8; 16], Arc<Session>>>,
    session_permits: Arc<Semaphore>,
    /// Unauthenticated connections of each listener ([`admission`]).
    waiting_tls: Arc<Waiting>,
    waiting_plain: Arc<Waiting>,
    /// Sessions per client address, network and certificate.
    clients: Arc<Clients>,
    acceptor: Acceptor,
    advertise: String,
    fds: FdBudget,
    /// Descriptors held by connections and documents (see [`FdBudget`]).
    fds_used: Arc<AtomicU64>,
    /// Frame-buffer memory of every authenticated connection.
    buffers: Arc<FrameBudget>,
    /// What every session's protocol state may hold ([`protocol_memory_bytes`]).
    protocol_memory: Arc<AtomicPool>,
    /// The output folder; `None` with `discard`.
    store: Option<Store>,
    /// This receiver's decompression speed, MB/s on one core (told to senders in SESSION).
    decompress_mbps: u32,
}

/// A receiver bound to its ports, ready to run.
pub struct Receiver {
    tls: TcpListener,
    plain: TcpListener,
    shared: Arc<Shared>,
}

impl Receiver {
    /// Open the output folder and bind both listeners; [`Receiver::run`] then serves.
    pub async fn bind(cfg: ServeConfig) -> Result<Receiver> {
        let store = (!cfg.discard)
            .then(|| Store::open(&cfg.dir, cfg.store))
            .transpose()?;
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
        check_reachable(cfg.listen, &advertise)?;
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
            waiting_tls: Waiting::new(cfg.limits.max_pending, cfg.limits.max_pending_per_addr),
            waiting_plain: Waiting::new(cfg.limits.max_pending, cfg.limits.max_pending_per_addr),
            clients: Clients::new(
                cfg.limits.max_sessions_per_client,
                cfg.limits.sessions_per_network(),
            ),
            protocol_memory: Arc::new(AtomicPool::new(protocol_memory_bytes(&cfg.limits))),
            stats,
            buffers,
            sessions: Mutex::new(HashMap::new()),
            advertise,
            store,
            decompress_mbps: if cfg.accept_compression == sieve_core::message::CompressFlags::NONE {
                0
            } else {
                decompress_speed_mbps()
            },
            cfg,
        });
        let receiver = Receiver { tls, plain, shared };
        receiver.announce();
        Ok(receiver)
    }

    /// The address the TLS port is bound to.
    pub fn tls_addr(&self) -> SocketAddr {
        self.tls
            .local_addr()
            .expect("bound listener has an address")
    }

    /// The address the plain port is bound to.
    pub fn plain_addr(&self) -> SocketAddr {
        self.plain
            .local_addr()
            .expect("bound listener has an address")
    }

    /// The receiver's counters, shared: they keep counting while it runs.
    pub fn stats(&self) -> Arc<Stats> {
        self.shared.stats.clone()
    }

    /// How file descriptors are shared out (see [`FdBudget`]).
    pub fn fd_budget(&self) -> FdBudget {
        self.shared.fds
    }

    /// Say where it listens and within which budgets. Said once both listeners are bound, so
    /// that it comes before anything a caller does on learning the receiver is ready (a ready
    /// file, a test's first connection), and a log that stops there still says where it was.
    fn announce(&self) {
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
        let honest = stall_free_buffer_bytes(limits.max_sessions);
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
    }

    /// Serve until the task is dropped.
    pub async fn run(self) -> Result<()> {
        let plain_loop = accept_loop(
            self.plain,
            self.shared.clone(),
            self.shared.waiting_plain.clone(),
            ("plain", "plain connection refused"),
            |s, tcp, peer, ticket| s.plain_conn(tcp, peer, ticket),
        );
        let tls_loop = accept_loop(
            self.tls,
            self.shared.clone(),
            self.shared.waiting_tls.clone(),
            ("TLS", "TLS connection ended"),
            |s, tcp, peer, ticket| s.tls_conn(tcp, peer, ticket),
        );
        tokio::join!(plain_loop, tls_loop);
        Ok(())
    }
}

/// Refuse to tell senders a loopback plain address while listening for them elsewhere: a sender
/// on another machine would open its plain channels to its own loopback.
fn check_reachable(listen: SocketAddr, advertise: &str) -> Result<()> {
    let Ok(plain) = advertise.parse::<SocketAddr>() else {
        // A host name: the operator chose it for the senders.
        return Ok(());
    };
    if plain.ip().is_loopback() && !listen.ip().is_loopback() {
        bail!(
            "senders reach this receiver at {listen} but would be told to open plain channels \
             to {plain}, a loopback address no other machine can reach: give --plain-listen an \
             address senders can reach (e.g. the host of --listen), or --plain-advertise"
        );
    }
    Ok(())
}

/// Accept connections on `listener` for as long as the receiver runs. Each one is counted against
/// the descriptor budget (refused, and counted, when it is spent), takes a place among the
/// listener's unauthenticated connections (evicting the oldest if need be, see [`admission`])
/// and is then served by `serve` on a task of its own. `what`: the listener's name and the log
/// message for a connection that ends in an error.
async fn accept_loop<F, Fut>(
    listener: TcpListener,
    shared: Arc<Shared>,
    waiting: Arc<Waiting>,
    what: (&'static str, &'static str),
    serve: F,
) where
    F: Fn(Arc<Shared>, TcpStream, SocketAddr, Ticket) -> Fut,
    Fut: Future<Output = Result<()>> + Send + 'static,
{
    let (name, ended) = what;
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                warn!("{name} accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(fd) = shared.take_conn_fd() else {
            continue;
        };
        let before = waiting.evicted();
        let ticket = waiting.admit(peer.ip());
        let evicted = waiting.evicted() - before;
        if evicted > 0 {
            shared
                .stats
                .rejected_connections
                .fetch_add(evicted, Ordering::Relaxed);
            debug!(%peer, "{name}: the oldest unauthenticated connection was dropped to make room");
        }
        let conn = serve(shared.clone(), tcp, peer, ticket);
        tokio::spawn(async move {
            let _fd = fd;
            if let Err(e) = conn.await {
                debug!(%peer, "{ended}: {e:#}");
            }
        });
    }
}
