//! The sender (`sieve send`): sieve, connect, split, send, and wait for durable acknowledgements.
//!
//! Order of work, and what the thesis's metrics (§5.1.1) measure:
//! 1. *sieve*: every document is prepared (marks found) before the network is touched, so a badly
//!    marked file fails with nothing sent;
//! 2. *connect*: channel 0 (TLS handshake), HELLO/SESSION, then the extra TLS channels (resumed
//!    sessions) and the plain channels, each joining with its token;
//! 3. *split*: the plan of each stream over its channels (ES/SS/BFS/BES/BSS) or the dynamic
//!    scheduler;
//! 4. *transfer*: manifests over channel 0, pieces over every channel at once, a DOC_END with the
//!    cleartext digest per document, until every document is acknowledged.
//!
//! Response time = sieve + split + transfer until the last acknowledgement (which includes the
//! receiver's combine, integrate and commit); total time = connect + response.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rustls::pki_types::ServerName;
use serde::Serialize;
use sieve_core::batch::BatchSplit;
use sieve_core::chunk::ChunkScheduler;
use sieve_core::frame::Limits;
use sieve_core::ledger::Ledger;
use sieve_core::message::{self, AckStatus, Doc, DocEnd, Hello, Join, Message, Mode};
use sieve_core::split::Split;
use sieve_core::{Kind, Piece, Plan};
use tokio::net::TcpStream;
use tokio::sync::Mutex as AsyncMutex;
use tokio::task::JoinSet;
use tokio_rustls::TlsConnector;

use crate::conn::{FrameReader, FrameWriter};
use crate::cpu::cpu_time;
use crate::mac::PlainMac;
use crate::sendq::SendQueues;
use crate::source::{Classify, Source};
use crate::tls::{LegacyConnector, Secured};
use crate::token::JoinKey;

/// Most documents a session has in progress (some bytes sent, not yet acknowledged) at once,
/// fewer if the receiver's SESSION says it holds fewer open (`max_open_docs`).
pub const MAX_UNACKED_DOCS: u32 = 512;

/// Everything `sieve send` needs besides the files.
#[derive(Clone)]
pub struct SendConfig {
    /// The receiver's TLS address, `host:port`.
    pub to: String,
    /// Name to verify in the receiver's certificate (default: the host of `to`).
    pub server_name: Option<String>,
    pub tls: Arc<rustls::ClientConfig>,
    pub mode: Mode,
    pub secure_channels: u8,
    pub plain_channels: u8,
    pub split: Split,
    pub batch_split: BatchSplit,
    pub classify: Classify,
    /// Bytes per data frame (and per dynamic chunk).
    pub chunk: u32,
    /// Give up when nothing moves for this long.
    pub idle_timeout: Duration,
    /// Emulated application work per MB of classified data (the thesis's "additional processing
    /// time" AP of §5.2.4.1: the client sleeps AP for every MB it must protect). Zero normally.
    pub processing_per_secure_mb: Duration,
    /// Map documents into memory instead of reading them (see [`crate::source`]).
    pub mmap: bool,
    /// INSECURE, laboratory only: open the secure channels with a thesis TLS 1.2 suite through
    /// OpenSSL instead of `tls` (feature `insecure-thesis-suites`; see `legacy_tls.rs`).
    pub legacy: Option<LegacyConnector>,
}

/// Live counters for a progress display.
#[derive(Debug, Default)]
pub struct Progress {
    pub total_bytes: AtomicU64,
    pub docs: AtomicU64,
    pub docs_acked: AtomicU64,
    /// Bytes sent per channel: secure channels first, then plain channels.
    pub per_channel: Mutex<Vec<Arc<AtomicU64>>>,
    /// Bytes not sent because the receiver had already failed their document.
    pub skipped: AtomicU64,
}

impl Progress {
    pub fn sent(&self) -> u64 {
        self.per_channel
            .lock()
            .map(|v| v.iter().map(|c| c.load(Ordering::Relaxed)).sum())
            .unwrap_or(0)
    }
}

/// Outcome of one document.
#[derive(Debug, Clone, Serialize)]
pub struct DocReport {
    pub name: String,
    pub path: PathBuf,
    pub bytes: u64,
    pub ok: bool,
    pub error: Option<String>,
}

/// One session's measurements (DESIGN.md §7), printed by `--json`.
#[derive(Debug, Clone, Serialize, Default)]
pub struct SessionReport {
    pub mode: String,
    pub secure_channels: u8,
    pub plain_channels: u8,
    pub split: String,
    pub batch_split: String,
    pub docs: usize,
    pub docs_ok: usize,
    pub bytes: u64,
    pub secure_bytes: u64,
    pub plain_bytes: u64,
    pub connect_ms: f64,
    pub connect_first_tls_ms: f64,
    pub connect_extra_tls_ms: f64,
    pub connect_plain_ms: f64,
    pub tls_resumed: usize,
    pub response_ms: f64,
    pub total_ms: f64,
    pub sieve_ms: f64,
    /// Emulated additional processing (see [`SendConfig::processing_per_secure_mb`]).
    pub processing_ms: f64,
    pub split_ms: f64,
    pub transfer_ms: f64,
    pub combine_ms: f64,
    pub integrate_ms: f64,
    pub commit_ms: f64,
    pub cpu_ms: f64,
    pub cipher: String,
    pub failures: Vec<DocReport>,
    #[serde(skip)]
    pub documents: Vec<DocReport>,
}

/// Why a session stopped before every document was answered, and what was delivered by then.
///
/// It is the outermost context of the error [`send`] returns once documents were announced, so
/// `err.downcast_ref::<Undelivered>()` finds it (`sieve send --json` prints it). Only documents
/// in `delivered` were acknowledged, that is verified, fsynced and renamed into place by the
/// receiver; every other document must be taken as not delivered.
#[derive(Debug, Clone, Serialize)]
pub struct Undelivered {
    /// What went wrong, in a few words.
    pub what: String,
    pub docs: usize,
    /// Names of the documents acknowledged as stored, in the order they were given.
    pub delivered: Vec<String>,
    /// Documents the receiver answered with a failure, with its reason.
    pub failed: Vec<DocReport>,
}

impl Undelivered {
    fn new(what: impl Into<String>, acks: &[Option<message::Ack>], sources: &[Source]) -> Self {
        let mut u = Undelivered {
            what: what.into(),
            docs: sources.len(),
            delivered: Vec::new(),
            failed: Vec::new(),
        };
        for (a, src) in acks.iter().zip(sources) {
            match a {
                Some(a) if a.status == AckStatus::Ok => u.delivered.push(src.name.clone()),
                Some(a) => u.failed.push(DocReport {
                    name: src.name.clone(),
                    path: src.path.clone(),
                    bytes: src.output_len(),
                    ok: false,
                    error: Some(format!("{:?}: {}", a.status, a.message)),
                }),
                None => {}
            }
        }
        u
    }
}

impl std::fmt::Display for Undelivered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const SHOWN: usize = 20;
        let list = |names: &[&str]| {
            let mut s = names
                .iter()
                .take(SHOWN)
                .copied()
                .collect::<Vec<_>>()
                .join(", ");
            if names.len() > SHOWN {
                s.push_str(&format!(" and {} more", names.len() - SHOWN));
            }
            s
        };
        write!(
            f,
            "{}; {} of {} documents were acknowledged",
            self.what,
            self.delivered.len(),
            self.docs
        )?;
        if !self.delivered.is_empty() {
            let names: Vec<&str> = self.delivered.iter().map(String::as_str).collect();
            write!(f, " ({})", list(&names))?;
        }
        if !self.failed.is_empty() {
            let names: Vec<&str> = self.failed.iter().map(|d| d.name.as_str()).collect();
            write!(
                f,
                "; {} failed on the receiver ({})",
                self.failed.len(),
                list(&names)
            )?;
        }
        if self.delivered.len() + self.failed.len() < self.docs {
            write!(f, "; the others were not delivered")?;
        }
        Ok(())
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn tls_connect(
    cfg: &SendConfig,
    connector: &TlsConnector,
    name: &ServerName<'static>,
    queues: &SendQueues,
) -> Result<Secured> {
    let tcp = TcpStream::connect(&cfg.to).await.with_context(|| {
        format!(
            "cannot connect to the receiver at {} (is `sieve serve` running there?)",
            cfg.to
        )
    })?;
    let _ = tcp.set_nodelay(true);
    queues.watch(&tcp);
    let handshake = async {
        match &cfg.legacy {
            None => Secured::from_client(
                connector
                    .connect(name.clone(), tcp)
                    .await
                    .map_err(anyhow::Error::from)?,
            ),
            #[cfg(feature = "insecure-thesis-suites")]
            Some(l) => l.connect(tcp, &name.to_str()).await,
            #[cfg(not(feature = "insecure-thesis-suites"))]
            Some(never) => match *never {},
        }
    };
    let secured = tokio::time::timeout(cfg.idle_timeout, handshake)
        .await
        .map_err(|_| {
            anyhow!(
                "TLS handshake with {} did not finish within {:?}",
                cfg.to,
                cfg.idle_timeout
            )
        })?;
    secured.map_err(|e| {
        anyhow!(
            "TLS handshake with {} failed: {e:#}. Check that --ca is the CA that signed the receiver's certificate \
             and that the certificate is valid for the host name you used",
            cfg.to
        )
    })
}

async fn join(
    mut r: FrameReader,
    mut w: FrameWriter,
    join: Join,
    what: &str,
    limit: Duration,
) -> Result<FrameWriter> {
    w.send(|o| join.encode(o)).await?;
    w.flush().await?;
    match tokio::time::timeout(limit, r.message())
        .await
        .map_err(|_| anyhow!("{what} was not accepted within {limit:?}"))?
        .with_context(|| format!("{what} was not accepted"))?
    {
        Message::JoinOk(_) => Ok(w),
        Message::Error(e) => bail!("{what} refused: {}", e.message),
        other => bail!("{what}: unexpected answer {other:?}"),
    }
}

/// Per-kind source of pieces for the channels.
enum Work {
    /// A precomputed thesis plan: channel i takes `plan.channels[i]` in order.
    Plan(Vec<Mutex<std::vec::IntoIter<Piece>>>),
    /// Whoever is free takes the next chunk.
    Dynamic(Mutex<ChunkScheduler>),
}

impl Work {
    fn new(plan: Option<Plan>, lens: &[u64], chunk: u64) -> Work {
        match plan {
            Some(p) => Work::Plan(
                p.channels
                    .into_iter()
                    .map(|c| Mutex::new(c.into_iter()))
                    .collect(),
            ),
            None => Work::Dynamic(Mutex::new(ChunkScheduler::new(lens, chunk))),
        }
    }

    fn next(&self, channel: usize) -> Option<Piece> {
        match self {
            Work::Plan(ch) => ch.get(channel)?.lock().ok()?.next(),
            Work::Dynamic(s) => s.lock().ok()?.next(),
        }
    }
}

struct Shared {
    sources: Vec<Source>,
    work: [Work; 2],
    /// Bytes of each document not yet sent (both kinds).
    remaining: Vec<AtomicU64>,
    plain_ledgers: Vec<Mutex<Ledger>>,
    ctl: AsyncMutex<FrameWriter>,
    chunk: usize,
    mac: PlainMac,
    /// Every document below this index is acknowledged.
    acked_below: tokio::sync::watch::Sender<u32>,
    /// Most documents in progress at once (see [`MAX_UNACKED_DOCS`]).
    window: u32,
    /// Documents the receiver has answered for; set for a failure that comes before all their
    /// bytes are sent (a full disk), whose remaining pieces the channels then skip.
    answered: Vec<AtomicBool>,
    progress: Arc<Progress>,
}

impl Shared {
    async fn send_doc_end(&self, doc: usize) -> Result<()> {
        let src = &self.sources[doc];
        let digest = self.plain_ledgers[doc]
            .lock()
            .map_err(|_| anyhow!("poisoned"))?
            .finish(src.stream_len(Kind::Plain))
            .context("internal error: the sender's own ledger is inconsistent")?;
        let end = DocEnd {
            doc: doc as u32,
            plain_digest: digest,
            secure_len: src.stream_len(Kind::Secure),
            plain_len: src.stream_len(Kind::Plain),
        };
        let mut w = self.ctl.lock().await;
        w.send(|o| end.encode(o)).await?;
        w.flush().await
    }

    /// `n` more bytes of `doc` are written (or skipped); after its last byte, its DOC_END goes.
    async fn piece_done(&self, doc: u32, n: u64, w: &mut Option<FrameWriter>) -> Result<()> {
        let left = self.remaining[doc as usize].fetch_sub(n, Ordering::AcqRel) - n;
        // A document the receiver has already answered for (a failure) needs no DOC_END, and
        // its ledger lacks the skipped pieces.
        if left == 0 && !self.answered[doc as usize].load(Ordering::Acquire) {
            // Everything of this document is written to its channels; the pieces on other
            // channels went out before their counters dropped, so flush ours too.
            if let Some(w) = w.as_mut() {
                w.flush().await?;
            } else {
                self.ctl.lock().await.flush().await?;
            }
            self.send_doc_end(doc as usize).await?;
        }
        Ok(())
    }

    /// Send every piece this channel is given. `w` is `None` for channel 0, which shares `ctl`.
    async fn channel(
        &self,
        kind: Kind,
        idx: usize,
        mut w: Option<FrameWriter>,
        counter: Arc<AtomicU64>,
    ) -> Result<()> {
        let mut buf = vec![0u8; self.chunk];
        // Mapped bytes this channel has sent since it last released pages: (document, raw range).
        let mut sent: Option<(usize, std::ops::Range<u64>)> = None;
        while let Some(piece) = self.work[kind.index()].next(idx) {
            if let Some(need) = piece.doc.checked_sub(self.window) {
                // The receiver holds a file open per document in progress: start this one only
                // once the document `window` places back (and all before it) is acknowledged.
                // Flush first: that document may still have bytes in our buffer.
                match w.as_mut() {
                    Some(w) => w.flush().await?,
                    None => self.ctl.lock().await.flush().await?,
                }
                let mut acked = self.acked_below.subscribe();
                acked
                    .wait_for(|&a| a > need)
                    .await
                    .map_err(|_| anyhow!("the session ended"))?;
            }
            let src = &self.sources[piece.doc as usize];
            let mut off = piece.offset;
            let end = piece.offset + piece.len;
            while off < end {
                if self.answered[piece.doc as usize].load(Ordering::Acquire) {
                    // The receiver failed this document already and drops whatever else of it
                    // comes: the rest of the piece is not worth the bandwidth.
                    let n = end - off;
                    self.progress.skipped.fetch_add(n, Ordering::Relaxed);
                    self.piece_done(piece.doc, n, &mut w).await?;
                    break;
                }
                let max = ((end - off) as usize).min(self.chunk);
                // Reads may block on the disk; a slice of a mapping is taken at once (its pages
                // are faulted in later, as the MAC and the socket read them).
                let frame = if src.is_mapped() {
                    src.frame(kind, off, max, &mut buf)
                } else {
                    tokio::task::block_in_place(|| src.frame(kind, off, max, &mut buf))
                }?;
                let bytes = frame.bytes;
                let n = bytes.len();
                if kind == Kind::Plain {
                    let h = self.mac.tag(piece.doc, off, bytes);
                    self.plain_ledgers[piece.doc as usize]
                        .lock()
                        .map_err(|_| anyhow!("poisoned"))?
                        .record_hashed(off, n as u64, h);
                }
                match (w.as_mut(), frame.at) {
                    // Cleartext straight from the page cache (see `FrameWriter::data_from_file`).
                    (Some(w), Some(at)) if kind == Kind::Plain => {
                        w.data_from_file(piece.doc, off, bytes, src.file(), at)
                            .await?
                    }
                    (Some(w), _) => w.data(piece.doc, off, bytes).await?,
                    (None, _) => {
                        let mut c = self.ctl.lock().await;
                        c.data(piece.doc, off, bytes).await?;
                    }
                }
                if let Some(at) = frame.at {
                    // The bytes are in the kernel (or our buffer) now: let the pages go every
                    // few MiB, so that resident memory stays small whatever the document size.
                    let doc = piece.doc as usize;
                    match &mut sent {
                        Some((d, r)) if *d == doc => {
                            r.start = r.start.min(at);
                            r.end = r.end.max(at + n as u64);
                        }
                        _ => {
                            if let Some((d, r)) = sent.take() {
                                self.sources[d].release(r);
                            }
                            sent = Some((doc, at..at + n as u64));
                        }
                    }
                    if let Some((d, r)) = sent
                        .as_mut()
                        .filter(|(_, r)| r.end - r.start >= RELEASE_EVERY)
                    {
                        self.sources[*d].release(r.clone());
                        r.start = r.end;
                    }
                }
                counter.fetch_add(n as u64, Ordering::Relaxed);
                off += n as u64;
                self.piece_done(piece.doc, n as u64, &mut w).await?;
            }
        }
        if let Some((d, r)) = sent {
            self.sources[d].release(r);
        }
        match w.as_mut() {
            Some(w) => {
                w.flush().await?;
                w.shutdown().await?;
            }
            None => self.ctl.lock().await.flush().await?,
        }
        Ok(())
    }
}

/// How many mapped bytes a channel sends between releases of their pages.
const RELEASE_EVERY: u64 = 8 << 20;

/// Send `files` in one session.
pub async fn send(
    cfg: &SendConfig,
    files: &[PathBuf],
    progress: Arc<Progress>,
) -> Result<SessionReport> {
    if files.is_empty() {
        bail!("no files to send");
    }
    let cpu0 = cpu_time(None);
    let secure_only = cfg.mode == Mode::SecureOnly;
    let n_secure = cfg.secure_channels.clamp(1, 16);
    let n_plain = if secure_only {
        0
    } else {
        cfg.plain_channels.clamp(1, 16)
    };

    // 1. Sieve.
    let t_sieve = Instant::now();
    let classify = if secure_only {
        match &cfg.classify {
            // Secure-only keeps the bytes as they are, unless marks must be stripped.
            Classify::Marks(m) if m.strip => Classify::Marks(m.clone()),
            _ => Classify::All,
        }
    } else {
        cfg.classify.clone()
    };
    let files_owned = files.to_vec();
    let mmap = cfg.mmap;
    let mut sources = tokio::task::spawn_blocking(move || {
        files_owned
            .iter()
            .map(|f| Source::prepare(f, &classify, mmap))
            .collect::<Result<Vec<_>>>()
    })
    .await??;
    if secure_only {
        // Everything classified: one secure segment per document.
        for s in &mut sources {
            s.set_all_secure();
        }
    }
    let sieve_time = t_sieve.elapsed();
    if !cfg.processing_per_secure_mb.is_zero() {
        let secure: u64 = sources.iter().map(|s| s.stream_len(Kind::Secure)).sum();
        tokio::time::sleep(cfg.processing_per_secure_mb.mul_f64(secure as f64 / 1e6)).await;
    }
    let processing_time = t_sieve.elapsed() - sieve_time;
    let total_bytes: u64 = sources.iter().map(|s| s.output_len()).sum();
    progress.total_bytes.store(
        sources.iter().map(|s| s.layout.content_len()).sum(),
        Ordering::Relaxed,
    );
    progress.docs.store(sources.len() as u64, Ordering::Relaxed);

    // 2. Connect.
    let t_connect = Instant::now();
    let host = cfg.server_name.clone().unwrap_or_else(|| host_of(&cfg.to));
    let name = ServerName::try_from(host.clone())
        .map_err(|_| anyhow!("'{host}' is not a valid server name"))?;
    let connector = TlsConnector::from(cfg.tls.clone());
    let queues = Arc::new(SendQueues::default());
    let tls0 = tls_connect(cfg, &connector, &name, &queues).await?;
    let first_tls = t_connect.elapsed();
    let cipher = tls0.cipher;
    let exported = tls0.exporter;
    let limits = Limits::default();
    let mut reader0 = FrameReader::new(tls0.read, limits);
    let mut writer0 = FrameWriter::new(tls0.write);
    let hello = Hello {
        version: message::PROTOCOL_VERSION,
        mode: cfg.mode,
        secure_channels: n_secure,
        plain_channels: n_plain,
        split: split_code(cfg.split),
        batch_split: batch_code(cfg.batch_split),
        chunk_size: cfg.chunk,
        docs: sources.len() as u32,
    };
    writer0.send(|o| hello.encode(o)).await?;
    writer0.flush().await?;
    let session = match tokio::time::timeout(cfg.idle_timeout, reader0.message())
        .await
        .map_err(|_| anyhow!("no answer to HELLO within {:?}", cfg.idle_timeout))?
        .context("the receiver closed the connection after HELLO")?
    {
        Message::Session(s) => s,
        Message::Error(e) => bail!("the receiver refused the session: {}", e.message),
        other => bail!("unexpected answer to HELLO: {other:?}"),
    };
    let key = JoinKey::derive(&exported, &session.session_id);
    let mac = PlainMac::derive(&exported, &session.session_id);

    let t_extra = Instant::now();
    let mut extra = JoinSet::new();
    for i in 1..n_secure {
        let (cfg, connector, name, key, queues) = (
            cfg.clone(),
            connector.clone(),
            name.clone(),
            key.clone(),
            queues.clone(),
        );
        let sid = session.session_id;
        extra.spawn(async move {
            let tls = tls_connect(&cfg, &connector, &name, &queues).await?;
            let (r, w, resumed) = (tls.read, tls.write, tls.resumed);
            let j = Join {
                session_id: sid,
                kind: Kind::Secure,
                index: i,
                token: key.token(Kind::Secure, i),
            };
            let w = join(
                FrameReader::new(r, limits),
                FrameWriter::new(w),
                j,
                "a secure channel",
                cfg.idle_timeout,
            )
            .await?;
            anyhow::Ok((i, w, resumed))
        });
    }
    let mut secure_writers: Vec<Option<FrameWriter>> = (0..n_secure).map(|_| None).collect();
    let mut resumed = 0;
    while let Some(r) = extra.join_next().await {
        let (i, w, res) = r??;
        secure_writers[i as usize] = Some(w);
        resumed += usize::from(res);
    }
    let extra_tls = t_extra.elapsed();

    let t_plain = Instant::now();
    let plain_addr = resolve_plain(&session.plain_addr, &cfg.to)?;
    let mut plains = JoinSet::new();
    let idle = cfg.idle_timeout;
    for i in 0..n_plain {
        let (key, queues) = (key.clone(), queues.clone());
        let sid = session.session_id;
        plains.spawn(async move {
            let tcp = TcpStream::connect(plain_addr).await.with_context(|| {
                format!("cannot open a plain channel to {plain_addr} (the address the receiver advertised; see --plain-advertise)")
            })?;
            let _ = tcp.set_nodelay(true);
            queues.watch(&tcp);
            let (r, w) = tcp.into_split();
            let j = Join { session_id: sid, kind: Kind::Plain, index: i, token: key.token(Kind::Plain, i) };
            // sendfile(2) spares the sender a copy of every cleartext byte, but when the receiver
            // is on the same host it must then copy out of the page cache instead of out of a
            // buffer the sender just wrote: on loopback that cost the receiver more than it saved
            // the sender (1 GiB at P = 0.1: response 724 ms against 641 ms with copies).
            let w = if plain_addr.ip().is_loopback() { FrameWriter::new(Box::new(w)) } else { FrameWriter::tcp(w) };
            let w = join(FrameReader::new(Box::new(r), limits), w, j, "a plain channel", idle).await?;
            anyhow::Ok((i, w))
        });
    }
    let mut plain_writers: Vec<Option<FrameWriter>> = (0..n_plain).map(|_| None).collect();
    while let Some(r) = plains.join_next().await {
        let (i, w) = r??;
        plain_writers[i as usize] = Some(w);
    }
    let plain_time = t_plain.elapsed();
    let connect_time = t_connect.elapsed();

    // Data frames must fit the receiver's frame limit, whatever chunk size was asked for.
    let chunk = cfg
        .chunk
        .min(
            session
                .max_payload
                .saturating_sub(message::DATA_PREFIX_LEN as u32),
        )
        .max(1);

    // 3. Split.
    let t_split = Instant::now();
    let work = [Kind::Plain, Kind::Secure].map(|kind| {
        let k = if kind == Kind::Secure {
            n_secure
        } else {
            n_plain.max(1)
        } as usize;
        let lens: Vec<u64> = sources.iter().map(|s| s.stream_len(kind)).collect();
        let plan = if sources.len() == 1 {
            cfg.split.plan(&sources[0].layout.lens_of(kind), k)
        } else {
            let docs: Vec<Vec<u64>> = sources.iter().map(|s| s.layout.lens_of(kind)).collect();
            cfg.batch_split.plan(&docs, k)
        };
        Work::new(plan, &lens, u64::from(chunk))
    });
    let split_time = t_split.elapsed();

    // 4. Transfer.
    let t_transfer = Instant::now();
    let manifests: Vec<Doc> = sources
        .iter()
        .enumerate()
        .map(|(i, s)| Doc {
            doc: i as u32,
            name: s.name.clone(),
            layout: s.layout.clone(),
            marks: s.marks.clone(),
        })
        .collect();
    // Check every manifest before any is sent, so an oversized one fails the session cleanly.
    for (m, s) in manifests.iter().zip(&sources) {
        m.validate()
            .with_context(|| format!("{} cannot be described to the receiver", s.path.display()))?;
        if m.encoded_len() > session.max_payload as usize {
            bail!(
                "{} has {} segments; its manifest ({} bytes) exceeds the receiver's frame limit of {} bytes. \
                 Merge adjacent classified parts or split the document",
                s.path.display(),
                m.layout.lens.len(),
                m.encoded_len(),
                session.max_payload
            );
        }
    }
    for doc in &manifests {
        writer0.send(|o| doc.encode(o)).await?;
    }
    writer0.flush().await?;
    let remaining = sources
        .iter()
        .map(|s| AtomicU64::new(s.layout.content_len()))
        .collect();
    let plain_ledgers = sources.iter().map(|_| Mutex::new(Ledger::new())).collect();
    let secure_bytes: u64 = sources.iter().map(|s| s.stream_len(Kind::Secure)).sum();
    let plain_bytes: u64 = sources.iter().map(|s| s.stream_len(Kind::Plain)).sum();
    let n_sources = sources.len();
    let shared = Arc::new(Shared {
        sources,
        work,
        remaining,
        plain_ledgers,
        ctl: AsyncMutex::new(writer0),
        chunk: chunk as usize,
        mac,
        acked_below: tokio::sync::watch::Sender::new(0),
        window: MAX_UNACKED_DOCS.min(session.max_open_docs).max(1),
        answered: (0..n_sources).map(|_| AtomicBool::new(false)).collect(),
        progress: progress.clone(),
    });
    for (i, s) in shared.sources.iter().enumerate() {
        if s.layout.content_len() == 0 {
            shared.send_doc_end(i).await?;
        }
    }
    let mut counters = Vec::new();
    let mut tasks: JoinSet<Result<()>> = JoinSet::new();
    for (i, w) in secure_writers.into_iter().enumerate() {
        let c = Arc::new(AtomicU64::new(0));
        counters.push(c.clone());
        let sh = shared.clone();
        tasks.spawn(async move {
            sh.channel(Kind::Secure, i, w, c)
                .await
                .with_context(|| format!("secure channel {i}"))
        });
    }
    for (i, w) in plain_writers.into_iter().enumerate() {
        let c = Arc::new(AtomicU64::new(0));
        counters.push(c.clone());
        let sh = shared.clone();
        tasks.spawn(async move {
            sh.channel(Kind::Plain, i, w, c)
                .await
                .with_context(|| format!("plain channel {i}"))
        });
    }
    if let Ok(mut pc) = progress.per_channel.lock() {
        *pc = counters;
    }

    // Acknowledgements arrive on channel 0 while the channels send.
    let n_docs = shared.sources.len();
    let mut acks: Vec<Option<message::Ack>> = vec![None; n_docs];
    let mut acked = 0usize;
    let mut sending_done = false;
    // Progress is a byte handed to a socket, a byte of the sockets' queues acknowledged by the
    // receiver (on a slow link the queues drain long after the last write) or an answer.
    let mut last_progress = (progress.sent(), queues.pending(), acked);
    // Every way out of this loop short of an answer for each document says what was delivered.
    let undelivered =
        |what: String, acks: &[Option<message::Ack>]| Undelivered::new(what, acks, &shared.sources);
    while acked < n_docs {
        tokio::select! {
            r = tasks.join_next(), if !sending_done => match r {
                None => sending_done = true,
                Some(Ok(Ok(()))) => {}
                Some(Ok(Err(e))) => {
                    tasks.abort_all();
                    return Err(e.context(undelivered("sending failed".into(), &acks)));
                }
                Some(Err(e)) => {
                    tasks.abort_all();
                    return Err(anyhow!("{e}").context(undelivered("a channel task failed".into(), &acks)));
                }
            },
            m = tokio::time::timeout(cfg.idle_timeout, reader0.message()) => match m {
                Err(_) => {
                    let now = (progress.sent(), queues.pending(), acked);
                    if now == last_progress {
                        tasks.abort_all();
                        let what = format!("no progress for {:?}: the receiver stopped answering", cfg.idle_timeout);
                        return Err(anyhow!(undelivered(what, &acks)));
                    }
                    last_progress = now;
                }
                Ok(Err(e)) => {
                    tasks.abort_all();
                    return Err(e.context(undelivered("lost the connection to the receiver".into(), &acks)));
                }
                Ok(Ok(Message::Ack(a))) => {
                    let i = a.doc as usize;
                    if i >= n_docs || acks[i].is_some() {
                        tasks.abort_all();
                        let what = format!("the receiver acknowledged document {} twice or out of range", a.doc);
                        return Err(anyhow!(undelivered(what, &acks)));
                    }
                    shared.answered[i].store(true, Ordering::Release);
                    acks[i] = Some(a);
                    acked += 1;
                    let below = *shared.acked_below.borrow() as usize;
                    let below = below + acks[below..].iter().take_while(|a| a.is_some()).count();
                    shared.acked_below.send_replace(below as u32);
                    progress.docs_acked.store(acked as u64, Ordering::Relaxed);
                }
                Ok(Ok(Message::Error(e))) => {
                    tasks.abort_all();
                    let what = format!("the receiver ended the session: {}", e.message);
                    return Err(anyhow!(undelivered(what, &acks)));
                }
                Ok(Ok(other)) => {
                    tasks.abort_all();
                    let what = format!("unexpected message from the receiver: {other:?}");
                    return Err(anyhow!(undelivered(what, &acks)));
                }
            }
        }
    }
    // Every document is answered; refused ones may leave channels with nothing to do.
    while let Some(r) = tasks.join_next().await {
        r.map_err(|e| anyhow!("a channel task failed: {e}"))
            .and_then(|r| r)
            .map_err(|e| {
                e.context(undelivered(
                    "a channel failed after the last answer".into(),
                    &acks,
                ))
            })?;
    }
    let transfer_time = t_transfer.elapsed();
    {
        let mut w = shared.ctl.lock().await;
        w.send(|o| message::Bye {}.encode(o)).await?;
        w.flush().await?;
        let _ = w.shutdown().await;
    }

    let mut report = SessionReport {
        mode: if secure_only { "secure-only" } else { "sieve" }.into(),
        secure_channels: n_secure,
        plain_channels: n_plain,
        split: cfg.split.to_string(),
        batch_split: cfg.batch_split.to_string(),
        docs: n_docs,
        bytes: total_bytes,
        secure_bytes,
        plain_bytes,
        connect_ms: ms(connect_time),
        connect_first_tls_ms: ms(first_tls),
        connect_extra_tls_ms: ms(extra_tls),
        connect_plain_ms: ms(plain_time),
        tls_resumed: resumed,
        sieve_ms: ms(sieve_time),
        split_ms: ms(split_time),
        transfer_ms: ms(transfer_time),
        cipher,
        ..Default::default()
    };
    report.processing_ms = ms(processing_time);
    report.response_ms =
        report.sieve_ms + report.processing_ms + report.split_ms + report.transfer_ms;
    report.total_ms = report.connect_ms + report.response_ms;
    for (i, a) in acks.into_iter().enumerate() {
        let src = &shared.sources[i];
        let a = a.context("internal error: missing acknowledgement")?;
        report.combine_ms += a.receive_us as f64 / 1000.0;
        report.integrate_ms += a.integrate_us as f64 / 1000.0;
        report.commit_ms += a.commit_us as f64 / 1000.0;
        let ok = a.status == AckStatus::Ok;
        let d = DocReport {
            name: src.name.clone(),
            path: src.path.clone(),
            bytes: src.output_len(),
            ok,
            error: (!ok).then(|| format!("{:?}: {}", a.status, a.message)),
        };
        if ok {
            report.docs_ok += 1;
        } else {
            report.failures.push(d.clone());
        }
        report.documents.push(d);
    }
    report.cpu_ms = ms(cpu_time(None).saturating_sub(cpu0));
    Ok(report)
}

fn host_of(addr: &str) -> String {
    match addr.rsplit_once(':') {
        Some((h, _)) => h.trim_start_matches('[').trim_end_matches(']').to_string(),
        None => addr.to_string(),
    }
}

/// The advertised plain address; an unspecified host (0.0.0.0) means "the host I reached".
fn resolve_plain(advertised: &str, to: &str) -> Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    let mut addr = advertised
        .to_socket_addrs()
        .with_context(|| {
            format!("the receiver advertised an unusable plain address '{advertised}'")
        })?
        .next()
        .with_context(|| {
            format!("the receiver advertised an unusable plain address '{advertised}'")
        })?;
    if addr.ip().is_unspecified() {
        let ip = to
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .map(|a| a.ip())
            .context("cannot resolve the receiver's address")?;
        addr.set_ip(ip);
    }
    Ok(addr)
}

fn split_code(s: Split) -> u8 {
    match s {
        Split::Dynamic => message::SPLIT_DYNAMIC,
        Split::Even => message::SPLIT_EVEN,
        Split::Segment => message::SPLIT_SEGMENT,
    }
}

fn batch_code(s: BatchSplit) -> u8 {
    match s {
        BatchSplit::Dynamic => message::SPLIT_DYNAMIC,
        BatchSplit::File => message::SPLIT_FILE,
        BatchSplit::Even => message::SPLIT_EVEN,
        BatchSplit::Segment => message::SPLIT_SEGMENT,
    }
}
