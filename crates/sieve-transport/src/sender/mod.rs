//! The sender (`sieve send`): sieve, connect, split, send, and wait for durable acknowledgements.
//!
//! Order of work, and what the thesis's metrics (§5.1.1) measure:
//! 0. *inputs* ([`inputs`]): files and folders become documents with the names the receiver will
//!    store them under, checked and unique before anything is opened;
//! 1. *sieve* ([`prepare`]): every document is prepared (marks found) before anything is sent,
//!    so a badly marked file fails with nothing sent (channel 0's connection is opened
//!    meanwhile, and dropped unused then: see `dial`); from here on each file is watched
//!    for changes (`crate::change`), and one that changes before its last byte is sent is
//!    cancelled instead of vouched for;
//! 2. *connect*: channel 0 (TLS handshake), HELLO/SESSION, then the extra TLS channels (resumed
//!    sessions) and the plain channels, each joining with its token;
//! 3. *split*: the plan of each stream over its channels (ES/SS/BFS/BES/BSS) or the dynamic
//!    scheduler;
//! 4. *transfer*: manifests over channel 0, pieces over every channel at once, a DOC_END with the
//!    cleartext digest per document, until every document is acknowledged.
//!
//! Response time = sieve + split + transfer until the last acknowledgement (which includes the
//! receiver's combine, integrate and commit); total time = connect + response, where connect is
//! what the send still waited for its connections once the documents were prepared: the time
//! from the first byte read to the last acknowledgement.
//!
//! What the protocol decides in phases 2 to 4 (what HELLO asks, whether SESSION is acceptable,
//! what each JOIN says, the plan, which piece each channel sends next and when the window lets
//! it, when a document's DOC_END or DOC_CANCEL goes, what an acknowledgement means) is
//! [`sieve_core::sender::SenderSession`]'s. This module and its files drive it: they open the
//! connections, read the files, compute the cleartext's MACs, compress, write the frames, and
//! feed the session what happened.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use sieve_core::batch::BatchSplit;
use sieve_core::compress::Compression;
use sieve_core::mac::MacOffer;
use sieve_core::message::{self, AckStatus, Mode};
use sieve_core::sender::{DocSpec, SenderConfig, SenderSession};
use sieve_core::split::Split;
use sieve_core::Kind;

use crate::change::Leases;
use crate::cpu::cpu_time;
use crate::sendq::SendQueues;
use crate::source::{Classify, KeepMapped, Source};
use crate::tls::LegacyConnector;

mod answers;
mod auto;
mod channel;
mod compress;
mod connect;
pub mod decide;
mod dial;
pub mod inputs;
mod link;
mod report;
mod transfer;
mod zchannel;

pub use decide::SendMode;
pub use sieve_core::report::{
    CompressionReport, DecisionReport, DocReport, LevelCount, SessionReport,
};

pub use inputs::{Expanded, Input};

use auto::{auto_place, choose_mode, mac_offer, AutoContext};
use connect::connect;
pub use connect::{with_default_port, DEFAULT_PORT};
use dial::Dial;

// What the session's protocol decides (frame sizes, the window of unacknowledged documents) is
// the core's; these are re-exported for the command line and the tests.
pub use sieve_core::sender::{
    Chunk, AUTO_CHUNKS_PER_CHANNEL, AUTO_CHUNK_MAX, AUTO_CHUNK_MIN, MAX_UNACKED_DOCS,
};

/// Everything `sieve send` needs besides the files.
#[derive(Clone)]
pub struct SendConfig {
    /// The receiver's TLS address, `host:port`.
    pub to: String,
    /// Name to verify in the receiver's certificate (default: the host of `to`).
    pub server_name: Option<String>,
    /// TLS 1.3 client configuration: the CA to verify the receiver with, and a client
    /// certificate under mutual TLS.
    pub tls: Arc<rustls::ClientConfig>,
    /// Sieve, secure-only, or auto: chosen per session once the documents are sieved
    /// ([`decide`]). The wire only ever carries the mode chosen.
    pub mode: SendMode,
    /// N: TLS channels, channel 0 included.
    pub secure_channels: u8,
    /// M: plain TCP channels (none in secure-only mode).
    pub plain_channels: u8,
    /// How one document's streams are split over the channels.
    pub split: Split,
    /// How a batch of documents is split over the channels.
    pub batch_split: BatchSplit,
    /// How the classified parts are found: marks, a ranges file, or a policy.
    pub classify: Classify,
    /// Bytes per dynamic chunk, and most bytes per data frame.
    pub chunk: Chunk,
    /// Give up when nothing moves for this long.
    pub idle_timeout: Duration,
    /// Map documents into memory instead of reading them (see [`crate::source`]).
    pub mmap: bool,
    /// Whether mapped cleartext goes to the plain sockets by `sendfile(2)`.
    pub sendfile: Sendfile,
    /// In sieve and auto modes, refuse documents that have no classified byte (the sieve would
    /// send them entirely in the clear) instead of only warning about them; in auto mode
    /// whatever it would choose, so that the refusal does not depend on the machine.
    pub require_classified: bool,
    /// Send documents for which no classification was given (no inline mark in them, and
    /// neither a ranges file nor a policy) as their classification says: entirely in the clear.
    /// Off by default, and such documents travel secure-only whatever the mode: nothing goes
    /// in the clear that nobody chose to send in the clear. A ranges file (an empty one too)
    /// or a policy is a choice already, and this changes nothing for them.
    pub allow_clear: bool,
    /// INSECURE, laboratory only: open the secure channels with a thesis TLS 1.2 suite through
    /// OpenSSL instead of `tls` (feature `insecure-thesis-suites`; see `legacy_tls.rs`).
    pub legacy: Option<LegacyConnector>,
    /// Send the documents that can be sent and list the others (badly marked, missing ranges
    /// file...) instead of refusing the whole batch.
    pub skip_invalid: bool,
    /// How the cleartext is compressed on the plain channels (`--compress`; see
    /// [`sieve_core::compress`]).
    pub compress: Compression,
    /// Also compress classified bytes, each classified segment alone, inside TLS
    /// (`--compress-classified`; off by default: the compressed length of a segment tells an
    /// observer how well it compresses).
    pub compress_classified: bool,
    /// Where this sender remembers its receivers' paths ([`crate::paths`]; the CLI uses
    /// [`crate::paths::default_file`]): the rate `--mode auto` weighs, and the plain address
    /// the next session connects to during its handshake. `None` remembers nothing.
    pub path_memory: Option<PathBuf>,
}

// The receiver keeps the buffer of every frame an automatic chunk makes.
const _: () = assert!(AUTO_CHUNK_MAX as usize + (64 << 10) <= crate::conn::RETAIN_BUFFER);

/// Whether the plain channels send mapped cleartext by `sendfile(2)` or copy it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Sendfile {
    /// `sendfile(2)` to a receiver on another host, copies to one on this host (a loopback
    /// address, or the address the channel comes from).
    ///
    /// Over a network interface, `sendfile(2)` hands the page-cache pages to the socket and
    /// spares the sender a copy of every cleartext byte, the one thing plain TCP can do that TLS
    /// cannot. Over loopback the sender's own system call also delivers each segment to the
    /// receiver's socket, and segments made of page-cache pages cost more there than copied
    /// ones: on an AMD EPYC (2 cores, both ends on one machine, 7 alternating rounds, response
    /// time as a share of secure-only's, per round), 1 GiB at P = 0.1 took 545 ms by
    /// `sendfile(2)` (1.58) and 265 ms copying (0.82), 100 MB 48 against 29 ms (1.39 and 0.81);
    /// the sender's CPU time halved.
    #[default]
    Auto,
    /// `sendfile(2)` wherever the receiver runs.
    Always,
    /// Every cleartext byte is copied into the socket.
    Never,
}

impl Sendfile {
    /// Whether a plain channel to a receiver on this host (`same_host`) uses `sendfile(2)`.
    pub fn uses_sendfile(self, same_host: bool) -> bool {
        match self {
            Sendfile::Auto => !same_host,
            Sendfile::Always => true,
            Sendfile::Never => false,
        }
    }
}

impl std::str::FromStr for Sendfile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Sendfile::Auto),
            "always" => Ok(Sendfile::Always),
            "never" => Ok(Sendfile::Never),
            _ => Err(format!(
                "unknown sendfile policy '{s}': use auto, always or never"
            )),
        }
    }
}

/// Live counters for a progress display.
#[derive(Debug, Default)]
pub struct Progress {
    /// Content bytes of every document of the session.
    pub total_bytes: AtomicU64,
    /// Documents in the session.
    pub docs: AtomicU64,
    /// Documents acknowledged as stored so far.
    pub docs_acked: AtomicU64,
    /// Bytes sent per channel: secure channels first, then plain channels.
    pub per_channel: Mutex<Vec<Arc<AtomicU64>>>,
    /// Bytes not sent because the receiver had already failed their document.
    pub skipped: AtomicU64,
    /// How many of `per_channel`'s counters are secure channels (the rest are plain).
    pub secure_channels: AtomicU64,
    /// Names of the documents acknowledged as stored so far, in the order of their answers.
    pub delivered: Mutex<Vec<String>>,
}

impl Progress {
    /// Bytes handed to the channels so far, all channels together.
    pub fn sent(&self) -> u64 {
        self.per_channel
            .lock()
            .map(|v| v.iter().map(|c| c.load(Ordering::Relaxed)).sum())
            .unwrap_or(0)
    }
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
    /// Documents in the session.
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
        let answered = self.delivered.len() + self.failed.len();
        write!(f, "{}", self.what)?;
        if self.docs == 1 && answered == 0 {
            return write!(f, "; the document was not delivered");
        }
        if self.delivered.is_empty() && self.failed.is_empty() {
            return write!(f, "; none of the {} documents was delivered", self.docs);
        }
        write!(
            f,
            "; {} of {} documents were delivered",
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
        if answered < self.docs {
            write!(f, "; the others were not delivered")?;
        }
        Ok(())
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Documents sieved and ready to send: phase 1 of [`send`], done before anything is sent.
pub struct Prepared {
    sources: Vec<Source>,
    /// Documents left out (`--skip-invalid`), each with why.
    skipped: Vec<DocReport>,
    sieve_time: std::time::Duration,
    /// The mode the session uses: the one asked for, or what `auto` chose.
    mode: Mode,
    /// Why, when `auto` chose, or when no document was classified ([`protect_unmarked`]).
    decision: Option<DecisionReport>,
    /// Documents sent secure-only because no classification was given for them.
    unmarked: Vec<String>,
    /// Channel 0, opened while the documents were prepared.
    dial: Option<Dial>,
    /// The cleartext MACs HELLO offers, fastest first by this machine's measurement.
    macs: MacOffer,
    /// What zstd 1 made of the first 256 KiB of cleartext, when `auto`'s choice measured it.
    sample_share: Option<f64>,
    /// Keeps the files' read leases answered while they are sent.
    _leases: Option<Leases>,
}

impl Prepared {
    /// Names of the documents that, in sieve mode, have no classified byte: they would travel
    /// entirely in the clear. (None in secure-only mode.)
    pub fn unclassified(&self) -> Vec<&str> {
        self.sources
            .iter()
            .filter(|s| s.unclassified())
            .map(|s| s.name.as_str())
            .collect()
    }

    /// Names of the documents that travel secure-only because no classification was given for
    /// them (no inline mark, no ranges file, no policy; see [`SendConfig::allow_clear`]).
    pub fn unmarked(&self) -> &[String] {
        &self.unmarked
    }

    /// Documents left out because they cannot be sent (`--skip-invalid`), each with why.
    pub fn skipped(&self) -> &[DocReport] {
        &self.skipped
    }

    /// Bytes of content (marks excluded) of the documents to send: what a progress bar counts.
    pub fn content_bytes(&self) -> u64 {
        self.sources.iter().map(Source::content_len).sum()
    }

    /// Bytes of the documents' secure streams: what goes over TLS in the mode chosen (all of
    /// each document in secure-only mode).
    pub fn secure_bytes(&self) -> u64 {
        self.sources
            .iter()
            .map(|s| s.stream_len(Kind::Secure))
            .sum()
    }

    /// How many documents.
    pub fn len(&self) -> usize {
        self.sources.len()
    }

    /// Whether there is no document to send.
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// The mode the session will use: the one asked for, or what `auto` chose.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// What `auto` chose and why (`None` when a mode was given).
    pub fn decision(&self) -> Option<&DecisionReport> {
        self.decision.as_ref()
    }
}

/// Phase 1, *sieve*: open every document, take its read lease where possible, and find its
/// classified ranges. Fails, with nothing sent, on a badly marked file, a missing ranges file, a
/// name the receiver would refuse, two documents with one name, one ranges file for several
/// documents, or (with [`SendConfig::require_classified`]) a document without a classified byte.
///
/// Runs in tokio's multi-thread runtime only, as the whole sender does (see [`send`]).
pub async fn prepare(cfg: &SendConfig, inputs: Vec<Input>) -> Result<Prepared> {
    if inputs.is_empty() {
        bail!("no files to send");
    }
    inputs::check_unique(&inputs)?;
    // `auto` sieves the documents as the sieve would, and chooses once it knows them.
    let secure_only = cfg.mode == SendMode::Fixed(Mode::SecureOnly);
    if let Classify::RangesFile(r) = &cfg.classify {
        if inputs.len() > 1 && !secure_only {
            bail!(
                "--ranges {} gives the ranges of one file, but {} files were given: send them one \
                 at a time, or put a ranges file beside each (FILE.ranges.json) and pass \
                 --ranges-beside",
                r.display(),
                inputs.len()
            );
        }
    }
    let mmap = cfg.mmap;
    let mode = cfg.mode;
    // A dense document `auto` will likely send secure-only is checked and counted, not
    // collected (see `Source::prepare_counting`).
    let likely = match mode {
        SendMode::Auto => auto::secure_only_likely(cfg),
        SendMode::Fixed(_) => None,
    };
    // Where auto guesses, the plain connections opened ahead wait for its first guess.
    let (plain_wanted, wanted) = match &likely {
        Some(_) => {
            let (tx, rx) = tokio::sync::watch::channel(None);
            (Some(tx), Some(rx))
        }
        None => (None, None),
    };
    // Connecting begins while the documents are prepared; nothing is said on the connections
    // until they are ready, and they are dropped unused if one of them cannot be sent.
    let bytes = input_bytes(&inputs);
    let dial = bytes.and_then(|b| dial_ahead(cfg, b, wanted));
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
    // Answering lease breaks needs the runtime; the handler must exist before the first lease.
    let leases = Leases::start();
    // Opening, mapping and scanning the documents blocks, and runs on this thread (below).
    let sieving = move || {
        // This machine's calibration is read here, before the documents, not on a thread of
        // its own: starting one took 100-250 µs on two cores busy with channel 0's handshake
        // (1 MB sends, AMD EPYC), longer than reading the cache (about 90 µs), and a small
        // document waited for it. `auto` needs it (measured the first time); a fixed mode only
        // orders the MACs it offers by it, if one was ever measured.
        let calibration = match mode {
            SendMode::Auto => Some(crate::calibrate::Calibration::cached()),
            SendMode::Fixed(_) => crate::calibrate::Calibration::cached_if_any(),
        };
        // Whether the sieve could win at all, were nothing classified: if not, auto sends
        // secure-only and the plain connections are not opened.
        if let (Some(tx), Some(f), Some(c), Some(bytes)) =
            (plain_wanted, &likely, &calibration, bytes)
        {
            let best_for_the_sieve = sieve_core::cost::DocShape {
                bytes,
                classified: 0,
                scanned: false,
                segments: 1,
                cleartext_wire: 1.0,
            };
            let _ = tx.send(Some(!f(c, &best_for_the_sieve)));
        }
        let mut keep = KeepMapped::new();
        let results: Vec<(Input, Result<Source>)> = inputs
            .into_iter()
            .map(|i| {
                let how = (mmap, leases.as_ref(), &mut keep);
                let r = match (&likely, &calibration) {
                    (Some(f), Some(c)) => {
                        Source::prepare_counting(&i.path, &i.name, &classify, how, &|shape| {
                            f(c, shape)
                        })
                    }
                    _ => Source::prepare(&i.path, &i.name, &classify, how.0, how.1, how.2),
                };
                (i, r)
            })
            .collect();
        (results, leases, calibration)
    };
    // Where the receiver runs, and what is remembered of the path to it: for a receiver named,
    // or elsewhere, in a task of its own meanwhile (a resolver's round trip, the path memory
    // read). On this host by its address it takes microseconds, less than handing a task's
    // result back (1 MB sends, AMD EPYC: auto's preparation 0.37 ms with the task, 0.30
    // without, 40 alternating rounds).
    let elsewhere = (mode == SendMode::Auto && !decide::names_this_host(&cfg.to))
        .then(|| tokio::spawn(auto_place(cfg.to.clone(), cfg.path_memory.clone())));
    // On this thread, which is running now: a blocking thread of the pool had first to be
    // started and scheduled on cores busy with channel 0's handshake, and the result handed
    // back. 1 MB sends, AMD EPYC, 40 alternating rounds: preparation 0.15 ms against 0.22
    // secure-only, 0.29 against 0.40 under auto. The worker's other tasks move to another
    // thread meanwhile (`block_in_place`: the sender needs tokio's multi-thread runtime, see
    // `send`).
    let sieved = tokio::task::block_in_place(sieving);
    let place = match (elsewhere, mode) {
        (Some(task), _) => Some(
            task.await
                .context("finding where the receiver runs stopped")?,
        ),
        (None, SendMode::Auto) => Some(auto_place(cfg.to.clone(), cfg.path_memory.clone()).await),
        (None, SendMode::Fixed(_)) => None,
    };
    let (results, leases, calibration) = sieved;
    // Every file is checked before anything is sent, and every bad one is named at once.
    let n_inputs = results.len();
    let mut sources = Vec::with_capacity(n_inputs);
    let mut skipped = Vec::new();
    for (input, r) in results {
        match r {
            Ok(s) => sources.push(s),
            Err(e) => skipped.push(DocReport {
                name: input.name.clone(),
                path: input.path.clone(),
                bytes: 0,
                ok: false,
                error: Some(format!("{e:#}")),
            }),
        }
    }
    if !skipped.is_empty() && (!cfg.skip_invalid || sources.is_empty()) {
        if n_inputs == 1 {
            let e = skipped.remove(0).error.unwrap_or_default();
            bail!("{e}");
        }
        let hint = if sources.is_empty() {
            ""
        } else {
            "; nothing was sent (--skip-invalid sends the others and lists these)"
        };
        let why = |d: &DocReport| d.error.clone().unwrap_or_else(|| "unknown error".into());
        if let [one] = skipped.as_slice() {
            bail!(
                "1 of {n_inputs} documents cannot be sent: {}{hint}",
                why(one)
            );
        }
        // Several: one per line, as a compiler lists its errors.
        let list: Vec<String> = skipped.iter().map(|d| format!("  {}", why(d))).collect();
        bail!(
            "{} of {n_inputs} documents cannot be sent{hint}:\n{}",
            skipped.len(),
            list.join("\n")
        );
    }
    if secure_only {
        // Everything classified: one secure segment per document.
        for s in &mut sources {
            s.set_all_secure();
        }
    }
    // Checked on the documents as sieved, before `auto` chooses: whether such a file is refused
    // must not depend on this machine's speeds.
    let bare: Vec<&str> = sources
        .iter()
        .filter(|s| s.unclassified())
        .map(|s| s.name.as_str())
        .collect();
    if cfg.require_classified && !bare.is_empty() {
        const SHOWN: usize = 20;
        let mut list = bare
            .iter()
            .take(SHOWN)
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
        if bare.len() > SHOWN {
            list.push_str(&format!(" and {} more", bare.len() - SHOWN));
        }
        bail!(
            "{} document{} no classified byte (--require-classified): {list}. Mark the \
             classified parts, give their ranges or a policy, or send with --mode secure-only",
            bare.len(),
            if bare.len() == 1 { " has" } else { "s have" },
        );
    }
    let unmarked = protect_unmarked(cfg, &mut sources);
    let all_unmarked = !unmarked.is_empty() && unmarked.len() == sources.len();
    let (mode, decision, macs, sample_share) = match (mode, place, calibration) {
        // Nothing was classified: the session is secure-only, whatever was asked for.
        (asked, _, known) if all_unmarked => (
            Mode::SecureOnly,
            Some(unmarked_decision(asked)),
            mac_offer(known.as_ref()),
            None,
        ),
        (SendMode::Fixed(m), _, known) => (m, None, mac_offer(known.as_ref()), None),
        (SendMode::Auto, Some(place), Some(calibration)) => {
            let macs = mac_offer(Some(&calibration));
            let context = AutoContext { place, calibration };
            let (d, sample_share) = choose_mode(cfg, &sources, context, macs)?;
            if d.chosen == Mode::SecureOnly {
                for s in &mut sources {
                    s.make_secure_only();
                }
            } else {
                sources = sieve_pending(sources).await?;
            }
            (d.chosen, Some(d), macs, sample_share)
        }
        (SendMode::Auto, ..) => unreachable!("auto gathers its place and its calibration"),
    };
    // `auto`'s choice (the calibration, where the receiver runs, a sample of the cleartext)
    // is part of preparing the documents, and counts in the response time like the sieve.
    let sieve_time = t_sieve.elapsed();
    let prepared = Prepared {
        sources,
        skipped,
        sieve_time,
        mode,
        decision,
        unmarked,
        dial,
        macs,
        sample_share,
        _leases: leases,
    };
    Ok(prepared)
}

/// Secure by default: every document for which no classification was given (the default
/// inline marks, none found in it) is made secure-only, unless [`SendConfig::allow_clear`]
/// says such documents may go in the clear. Returns their names.
///
/// Only inline marks can be absent without anyone having decided anything: a ranges file,
/// even an empty one, or a policy, even one that finds nothing, is a classification somebody
/// chose, and such a document is sent as it says (with a warning when nothing in it is
/// classified).
fn protect_unmarked(cfg: &SendConfig, sources: &mut [Source]) -> Vec<String> {
    if cfg.allow_clear || !matches!(cfg.classify, Classify::Marks(_)) {
        return Vec::new();
    }
    sources
        .iter_mut()
        .filter(|s| s.unclassified())
        .map(|s| {
            s.make_secure_only();
            s.name.clone()
        })
        .collect()
}

/// Why a session none of whose documents was classified is secure-only, for the report's
/// `decision`: the reason begins with `unmarked`, for scripts to match.
fn unmarked_decision(asked: SendMode) -> DecisionReport {
    DecisionReport {
        chosen: Mode::SecureOnly,
        requested: asked.to_string(),
        predicted_ms: None,
        reason: UNMARKED_REASON.to_string(),
    }
}

/// The `decision.reason` of a session sent secure-only because nothing in it was classified.
pub const UNMARKED_REASON: &str = "unmarked: no classification was given (no inline mark, ranges \
    file or policy), so every byte travelled over TLS; --allow-clear sends such documents in the clear";

/// The runs of every document that was only counted, collected now that `auto` chose the sieve
/// (on a blocking thread, as the first pass ran); documents already collected are untouched.
async fn sieve_pending(mut sources: Vec<Source>) -> Result<Vec<Source>> {
    if !sources.iter().any(Source::counted_only) {
        return Ok(sources);
    }
    tokio::task::spawn_blocking(move || {
        for s in &mut sources {
            s.sieve_pending()?;
        }
        Ok(sources)
    })
    .await
    .context("collecting the runs of the documents counted first failed")?
}

/// The bytes of `inputs` (`None` if one cannot be measured: preparing it then says why).
fn input_bytes(inputs: &[Input]) -> Option<u64> {
    let mut bytes = 0u64;
    for i in inputs {
        bytes = bytes.saturating_add(std::fs::metadata(&i.path).ok()?.len());
    }
    Some(bytes)
}

/// Channel 0 opened while documents of `bytes` in all are prepared ([`dial`]), unless they are
/// too large for it to pay; the plain connections too, once `wanted` says so if given.
fn dial_ahead(cfg: &SendConfig, bytes: u64, wanted: Option<dial::PlainWanted>) -> Option<Dial> {
    if bytes > dial::DIAL_AHEAD_MAX_BYTES {
        return None;
    }
    let n_plain = if cfg.mode == SendMode::Fixed(Mode::SecureOnly) {
        0
    } else {
        cfg.plain_channels
    };
    Dial::start(cfg, n_plain, wanted).ok()
}

/// Send `files`, each under its base name, in one session: [`prepare`] then [`send_prepared`].
///
/// Needs tokio's multi-thread runtime: reading the documents, sampling and setting up the
/// compressor block in place (`tokio::task::block_in_place`, which panics in a runtime of one
/// thread), so that they run at once on the thread that needs them rather than waiting for a
/// blocking thread on cores busy with the transfer.
pub async fn send(
    cfg: &SendConfig,
    files: &[PathBuf],
    progress: Arc<Progress>,
) -> Result<SessionReport> {
    let inputs = inputs::files(files)?;
    let prepared = prepare(cfg, inputs).await?;
    send_prepared(cfg, prepared, progress).await
}

/// Phases 2 to 4 for documents [`prepare`] made ready: connect, split, transfer, and wait for
/// every acknowledgement.
pub async fn send_prepared(
    cfg: &SendConfig,
    prepared: Prepared,
    progress: Arc<Progress>,
) -> Result<SessionReport> {
    let cpu0 = cpu_time(None);
    let unclassified = prepared
        .unclassified()
        .into_iter()
        .map(String::from)
        .collect();
    let Prepared {
        sources,
        skipped,
        sieve_time,
        mode,
        decision,
        unmarked,
        dial,
        macs,
        sample_share,
        _leases: leases,
    } = prepared;
    let docs_leased = sources.iter().filter(|s| s.watch().leased()).count();
    progress.total_bytes.store(
        sources.iter().map(Source::content_len).sum(),
        Ordering::Relaxed,
    );
    progress.docs.store(sources.len() as u64, Ordering::Relaxed);

    // 2. Connect. The session's protocol is the core's; this drives it.
    let mut sm = session_for(cfg, mode, &sources, macs);
    let t_connect = Instant::now();
    let connected = connect(cfg, &mut sm, dial).await?;
    let connect_time = t_connect.elapsed();
    if let Some(l) = &leases {
        l.watch_sockets(connected.queues.clone());
    }
    let same_host = (sm.channels(Kind::Plain), connected.same_host);
    let plain_addr = connected.plain_addr;
    let kind_queues = connected.kind_queues.clone();
    let compressor = compressor(
        cfg,
        mode,
        &connected.session,
        (&sources, sample_share),
        same_host,
        kind_queues,
    )
    .await?;

    // 3. Split.
    let t_split = Instant::now();
    sm.plan()?;
    let split_time = t_split.elapsed();

    // 4. Transfer.
    let t_transfer = Instant::now();
    let mut report = SessionReport {
        mode,
        decision,
        secure_channels: sm.channels(Kind::Secure),
        plain_channels: sm.channels(Kind::Plain),
        split: cfg.split,
        batch_split: cfg.batch_split,
        docs: sources.len(),
        connect_ms: ms(connect_time),
        connect_first_tls_ms: ms(connected.first_tls),
        connect_ahead_ms: ms(connected.ahead),
        connect_extra_tls_ms: ms(connected.extra_tls),
        connect_plain_ms: ms(connected.plain),
        connect_plain_early: connected.plain_early,
        tls_resumed: connected.resumed,
        sieve_ms: ms(sieve_time),
        split_ms: ms(split_time),
        cipher: connected.cipher.clone(),
        mac: connected.mac.alg().name().to_string(),
        unclassified,
        unmarked,
        docs_leased,
        skipped,
        ..Default::default()
    };
    let shared = transfer::Transfer {
        sm,
        sources,
        leases,
        compressor,
        progress,
    };
    let (shared, acks) = shared.run(cfg, connected).await?;
    report.transfer_ms = ms(t_transfer.elapsed());
    // The policy ran unless secure-only was asked for (`auto` runs it, whatever it chooses).
    if let (Classify::Policy(run), false) =
        (&cfg.classify, cfg.mode == SendMode::Fixed(Mode::SecureOnly))
    {
        report.detections = Some(run.counts());
    }
    report.response_ms = report.sieve_ms + report.split_ms + report.transfer_ms;
    report.total_ms = report.connect_ms + report.response_ms;
    report::add_answers(&mut report, acks, &shared.sources)?;
    report.cpu_ms = ms(cpu_time(None).saturating_sub(cpu0));
    report::add_compression(&mut report, cfg, &shared);
    if let Some(file) = &cfg.path_memory {
        let (file, to, r) = (file.clone(), cfg.to.clone(), report.clone());
        let on_this_host = same_host.1;
        let _ = tokio::task::spawn_blocking(move || {
            if on_this_host {
                // Where its plain port is, but no rate: between two ends on one host the
                // "path" is memory.
                crate::paths::remember_plain(&file, &to, &r, plain_addr)
            } else {
                crate::paths::remember(&file, &to, &r, plain_addr)
            }
        })
        .await;
    }
    Ok(report)
}

/// The protocol state machine of a session that sends `sources` in `mode` as `cfg` asks.
fn session_for(cfg: &SendConfig, mode: Mode, sources: &[Source], macs: MacOffer) -> SenderSession {
    let docs = sources
        .iter()
        .map(|s| DocSpec {
            name: s.name.clone(),
            layout: s.layout.clone(),
            marks: s.marks.clone(),
            // The placement the document is sent by has encoded these lengths already.
            lens: Some(s.streams().encoded_lens()),
        })
        .collect();
    let session_cfg = SenderConfig {
        mode,
        secure_channels: cfg.secure_channels,
        plain_channels: cfg.plain_channels,
        split: cfg.split,
        batch_split: cfg.batch_split,
        chunk: cfg.chunk,
        macs,
        compression: compress::offer(cfg, mode),
    };
    SenderSession::new(&session_cfg, docs)
}

/// The session's compressor, if the sender offered any compressed frame: the user's policy,
/// what the receiver accepted, its decompression speed, the sockets that measure the link
/// (plain ones, or in secure-only mode the secure ones), a sample of the cleartext for ACCENT's
/// profile, whether the receiver is on this host (`auto` then stays off), and for `auto` the
/// level its last session to this receiver kept ([`crate::paths`]), chosen by what zstd 1
/// makes of the first cleartext (`sample_share`, if `--mode auto` measured it already).
async fn compressor(
    cfg: &SendConfig,
    mode: Mode,
    session: &message::SessionMsg,
    (sources, sample_share): (&[Source], Option<f64>),
    (n_plain, same_host): (u8, bool),
    kind_queues: [Arc<SendQueues>; 2],
) -> Result<Option<Arc<compress::Compressor>>> {
    let offered = compress::offer(cfg, mode);
    let accepted = session.compression.intersect(offered);
    if offered == message::CompressFlags::NONE {
        return Ok(None);
    }
    let link_kind = if n_plain > 0 {
        Kind::Plain
    } else {
        Kind::Secure
    };
    let sample = match cfg.compress {
        sieve_core::compress::Compression::Accent => {
            let src = sources.iter().find(|s| s.stream_len(link_kind) > 0);
            match src {
                Some(src) => {
                    let n = src.stream_len(link_kind).min(64 << 10) as usize;
                    let mut buf = vec![0u8; n];
                    tokio::task::block_in_place(|| src.read(link_kind, 0, &mut buf))?;
                    buf
                }
                None => Vec::new(),
            }
        }
        _ => Vec::new(),
    };
    let queues = kind_queues[link_kind.index()].clone();
    // The other kind's sockets share the link if they go to the same address.
    let other = kind_queues[link_kind.other().index()].clone();
    let (ours, theirs) = (queues.peer_ips(), other.peer_ips());
    let shared = ours.iter().any(|ip| theirs.contains(ip)).then_some(other);
    let c = tokio::task::block_in_place(|| {
        // `auto` starts where the last session to this receiver left it; between two ends on
        // one host there is no path to remember, and `auto` does not compress there.
        // Among the levels kept, the one whose data were like these: what zstd 1 makes of the
        // first cleartext frame's bytes, measured by auto's choice already or here, before the
        // frame is cut.
        let first_share = || {
            let measured = sample_share.filter(|_| link_kind == Kind::Plain);
            measured.or_else(|| {
                auto::stream_sample(sources, link_kind).map(|s| crate::paths::cleartext_share(&s))
            })
        };
        let resume = match (&cfg.path_memory, cfg.compress, same_host) {
            (Some(file), sieve_core::compress::Compression::Auto, false) => {
                crate::paths::recall(file, &cfg.to)
                    .filter(crate::paths::PathRecord::has_auto_level)
                    .and_then(|r| {
                        let (level, anchor) = r.auto_start(first_share())?;
                        let level = sieve_core::compress::Codec::zstd(level).ok()?;
                        Some((level, anchor))
                    })
            }
            _ => None,
        };
        compress::Compressor::new(
            cfg.compress,
            (offered, accepted),
            (session.decompress_mbps, session.decompress_cores),
            (link_kind, queues, shared),
            &sample,
            same_host,
            resume,
        )
    })?;
    Ok(Some(Arc::new(c)))
}

#[cfg(test)]
mod tests {
    use super::Sendfile;

    #[test]
    fn sendfile_policy_parses_and_defaults_to_auto() {
        assert_eq!("Auto".parse::<Sendfile>().unwrap(), Sendfile::default());
        assert_eq!("always".parse::<Sendfile>().unwrap(), Sendfile::Always);
        assert_eq!("never".parse::<Sendfile>().unwrap(), Sendfile::Never);
        let err = "sometimes".parse::<Sendfile>().unwrap_err();
        assert!(err.contains("auto, always or never"), "{err}");
        // Auto copies to a receiver on this host and hands pages to one elsewhere.
        assert!(!Sendfile::Auto.uses_sendfile(true));
        assert!(Sendfile::Auto.uses_sendfile(false));
        assert!(Sendfile::Always.uses_sendfile(true));
        assert!(!Sendfile::Never.uses_sendfile(false));
    }
}
