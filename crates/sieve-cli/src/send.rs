//! `sieve send`: the sender.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use sieve_core::batch::BatchSplit;
use sieve_core::compress::Compression;
use sieve_core::marks::MarkConfig;
use sieve_core::message::{Mode, MAX_PLAIN_CHANNELS, MAX_SECURE_CHANNELS};
use sieve_core::split::Split;
use sieve_transport::sender::{
    self, Chunk, Progress, SendConfig, SendMode, Sendfile, SessionReport, Undelivered,
};
use sieve_transport::source::Classify;
use sieve_transport::tls::{Cipher, ClientTls};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeArg {
    /// Sieve or secure-only, whichever this machine's measured speeds predict to answer
    /// sooner for these documents.
    Auto,
    /// Classified parts over TLS, the rest over plain TCP.
    Sieve,
    /// Everything over TLS: the baseline the sieve is measured against.
    SecureOnly,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The receiver: HOST or HOST:PORT of its TLS listener (port 7443 when left out). Plain
    /// channels go where the receiver says (its --plain-listen or --plain-advertise).
    #[arg(long, default_value = "127.0.0.1:7443")]
    pub to: String,
    /// CA certificate (PEM) that signed the receiver's certificate.
    #[arg(long)]
    pub ca: PathBuf,
    /// Name to check in the receiver's certificate (default: the host of --to).
    #[arg(long)]
    pub server_name: Option<String>,
    /// Client certificate (PEM) for receivers that require mutual TLS.
    #[arg(long, requires = "client_key")]
    pub client_cert: Option<PathBuf>,
    /// Client private key (PEM).
    #[arg(long, requires = "client_cert")]
    pub client_key: Option<PathBuf>,
    /// auto: sieve or secure-only, chosen once the documents are sieved from their size, their
    /// share of classified bytes and this machine's measured speeds (`sieve calibrate`), and for
    /// a receiver on another host the path's rate its last session measured (kept in
    /// ~/.cache/sieve/paths.json) with what compression makes of a sample of the cleartext (a
    /// path not measured yet: the mode whose worst loss is smaller over rates from 100 Mbit/s
    /// up); the choice and its reason in --json as `decision`; sieve: split each document by its
    /// marks; secure-only: send every byte over TLS.
    #[arg(long, value_enum, default_value = "auto")]
    pub mode: ModeArg,
    /// Number of TLS channels (1-16).
    #[arg(long, short = 'n', default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=i64::from(MAX_SECURE_CHANNELS)))]
    pub secure_channels: u8,
    /// Number of plain TCP channels (1-16; ignored in secure-only mode). They connect to the
    /// plain port the receiver names in SESSION, over TLS; a receiver on another host's plain
    /// port is also remembered (~/.cache/sieve/paths.json), so the next session connects them
    /// during the TLS handshake and sends nothing on them until SESSION confirms the address.
    #[arg(long, short = 'm', default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=i64::from(MAX_PLAIN_CHANNELS)))]
    pub plain_channels: u8,
    /// How one document is divided among channels of a kind: dynamic (free channels take the
    /// next chunk), even (thesis ES: every segment cut in k), segment (thesis SS: whole segments
    /// to the least-loaded channel).
    #[arg(long, default_value = "dynamic")]
    pub split: Split,
    /// How several documents are divided: dynamic, file (thesis BFS), even (BES), segment (BSS).
    #[arg(long, default_value = "dynamic")]
    pub batch_split: BatchSplit,
    /// TLS 1.3 cipher suite: aes128gcm, aes256gcm or chacha20. Without it all three are
    /// offered, AES-128-GCM first where this machine runs AES-GCM in hardware and
    /// ChaCha20-Poly1305 first where it does not; a receiver without AES hardware takes
    /// ChaCha20-Poly1305. The suite used is `cipher` in `--json`.
    #[arg(long, value_name = "SUITE")]
    pub cipher: Option<Cipher>,
    /// Write documents without their marks (the thesis's output) instead of byte-identical.
    /// Without it the receiver writes the marks back, so a document arrives exactly as it was
    /// sent, marks included.
    #[arg(long)]
    pub strip_marks: bool,
    /// Classified ranges of the one FILE from a JSON file ({"ranges": [[start, end], ...]}:
    /// byte offsets, start included, end excluded) instead of inline marks. For several files,
    /// use --ranges-beside.
    #[arg(long, conflicts_with_all = ["ranges_beside", "policy"])]
    pub ranges: Option<PathBuf>,
    /// Classified ranges of each FILE from the JSON ranges file beside it, FILE.ranges.json
    /// (the format of --ranges). Ranges files sent alongside their files are not sent as
    /// documents of their own.
    #[arg(long, conflicts_with = "policy")]
    pub ranges_beside: bool,
    /// Send folders with everything beneath them, each file under its path relative to the
    /// folder's parent (`-r photos` stores photos/2024/a.jpg beneath the receiver's folder).
    /// Hidden entries (names beginning with '.'), symbolic links and special files are
    /// skipped, and each skip is reported.
    #[arg(long, short = 'r')]
    pub recursive: bool,
    /// Refuse to send a document that has no classified byte, in sieve mode and in auto mode
    /// whatever it chooses, instead of sending it secure-only (no marks, no ranges file, no
    /// policy) or, where a ranges file, a policy or --allow-clear said so, entirely in the
    /// clear with a warning.
    #[arg(long)]
    pub require_classified: bool,
    /// Send files for which no classification was given (no inline mark in them, and neither
    /// --ranges, --ranges-beside nor --policy) through the sieve as they are: entirely in the
    /// clear. Without it such files travel secure-only, whatever --mode says, and the sender
    /// says so (in --json: `unmarked`, and `decision.reason` beginning `unmarked` when no file
    /// of the session was classified). A ranges file (an empty one too) or a policy is a
    /// choice already: their files are sent as they say.
    #[arg(long)]
    pub allow_clear: bool,
    /// Send the files that can be sent when some cannot (badly marked, unreadable, a missing
    /// ranges file): they are listed on stderr and in --json as `skipped`, and the command
    /// exits non-zero. Without it, every file is checked first and nothing is sent if any fails.
    #[arg(long)]
    pub skip_invalid: bool,
    /// Laboratory only: do not warn that --split/--batch-split even|segment show where the
    /// classified parts sit.
    #[arg(long, hide = true)]
    pub quiet_layout_warning: bool,
    /// Classify each FILE with a marking policy instead of inline marks: a TOML file, or
    /// `default` (see `sieve mark --print-policy default`). Every file is classified before
    /// anything is sent; a policy that cannot be loaded stops the command first. --json adds
    /// `detections`, the findings per detector.
    #[arg(long, value_name = "FILE|default")]
    pub policy: Option<String>,
    /// Start mark.
    #[arg(long, default_value = "<$S>")]
    pub start_mark: String,
    /// End mark.
    #[arg(long, default_value = "<$E>")]
    pub end_mark: String,
    /// Escape that makes a following mark literal.
    #[arg(long, default_value = "\\")]
    pub escape: String,
    /// Bytes per dynamic chunk, and most bytes per data frame (1KiB..8MiB), or auto: 256KiB
    /// for documents of a few MB, growing to 4MiB as each channel's share of the session grows
    /// (eight chunks per channel), because every frame costs a MAC, a write and a wake-up at both
    /// ends, while small documents need small chunks to spread over several channels.
    #[arg(long, default_value = "auto")]
    pub chunk: Chunk,
    /// Seconds without progress before giving up. Progress is a frame written to a channel, an
    /// acknowledgement, or the channels' socket queues draining into the receiver at 32 KiB/s
    /// (256 kbit/s) or more on average, so a slow link is not mistaken for a dead one; links
    /// slower than that need a longer timeout.
    #[arg(long, default_value_t = 60)]
    pub idle_timeout: u64,
    /// Laboratory builds only (the `lab` feature): sleep this many milliseconds per MB of
    /// classified data once the documents are prepared and before the session is set up,
    /// emulating the thesis's additional processing time (AP, §5.2.4.1); reported as
    /// `processing_ms`, part of the response time.
    #[cfg(feature = "lab")]
    #[arg(long, default_value_t = 0.0)]
    pub emulate_processing_ms_per_mb: f64,
    /// Read documents with ordinary reads instead of mapping them into memory. Mapping saves the
    /// sender a copy of every byte, but a document truncated by another program while it is
    /// being sent (when no read lease could be taken on it) stops the sender with SIGBUS; this
    /// turns that into an error. It does not make a changing file safe to send: a document
    /// whose file changes while it is sent is cancelled either way (the sender watches each
    /// file, with a read lease where the system grants one), and bytes read after the change
    /// may have crossed a plain channel before it was noticed. Do not send files that other
    /// programs are writing.
    #[arg(long)]
    pub no_mmap: bool,
    /// How mapped cleartext reaches the plain sockets: auto (default: by sendfile(2) to a
    /// receiver on another host, which spares the sender a copy of every cleartext byte; by
    /// copying to one on this host, where the pages cost more than the copy), always, or never.
    #[arg(long, default_value = "auto")]
    pub sendfile: Sendfile,
    /// How the cleartext is compressed on the plain channels, each frame on its own: auto
    /// (default: per frame, off or a zstd level, from the measured compression speed, ratio,
    /// the rate the sockets drain and the receiver's decompression speed, on as many cores as
    /// the link needs; off by itself on loopback and other links faster than compression),
    /// accent (ACCENT's policy: FSCN's choice of level and TTSC's share of compressed frames),
    /// off, or zstd:N (always level N, 1 to 22 or -7 to -1). Frames that do not shrink by 5 %
    /// go as they are. Only public bytes are compressed: an observer of the plain channels,
    /// who reads the cleartext anyway, learns how well it compresses. Classified bytes are
    /// never compressed unless --compress-classified.
    #[arg(long, default_value = "auto", value_name = "auto|accent|off|zstd:N")]
    pub compress: Compression,
    /// Also compress classified bytes inside TLS, never in one context with any other byte:
    /// each classified segment of 4 KiB or more alone, with zstd at the level chosen for the
    /// cleartext; shorter ones (names, dates, amounts) in runs, in the field code, which codes
    /// every byte alone with one fixed model (the space in 3.4 bits, a digit in 5.4, common
    /// letters in 4-6), so a value's code never depends on its neighbours. This reveals
    /// compressed lengths: an observer who
    /// sees TLS record sizes and timing learns how well each long segment compresses, and for a
    /// run of short ones a weighted count of their letters, digits and other bytes; for a
    /// secret mixed with data the observer can influence or guess, the first is the leak CRIME
    /// and BREACH exploit. Use it only for classified parts whose compressibility says nothing
    /// (keys, random identifiers) or whose size is public anyway. The receiver must accept it
    /// (sieve serve --accept-compression all, the default).
    #[arg(long)]
    pub compress_classified: bool,
    /// INSECURE, for the laboratory only: open the secure channels with one of the thesis's
    /// broken TLS 1.2 suites through OpenSSL: 3des-ede-cbc-sha or aes256-cbc-sha. The receiver
    /// must run with --insecure-thesis-suites. Never use this for real documents.
    #[cfg(feature = "insecure-thesis-suites")]
    #[arg(long, value_name = "SUITE")]
    pub insecure_thesis_suite: Option<String>,
    /// Print one JSON object with the session's measurements on stdout.
    #[arg(long)]
    pub json: bool,
    /// Files to send, all in one session (folders with -r). No two may have the same name on
    /// the receiver. `-` is standard input (name it with --name); a named pipe is read to its
    /// end first. Either is copied into a temporary file before anything is sent, because a
    /// document is classified whole before its first byte goes.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// The name standard input (`-`) is stored under.
    #[arg(long)]
    pub name: Option<String>,
}

pub fn config(args: &Args) -> Result<SendConfig> {
    let identity = match (&args.client_cert, &args.client_key) {
        (Some(c), Some(k)) => Some((c.as_path(), k.as_path())),
        _ => None,
    };
    let tls = ClientTls {
        ca: &args.ca,
        cipher: args.cipher,
        identity,
    }
    .config()?;
    if args.compress_classified && args.compress == Compression::Off {
        bail!(
            "--compress-classified compresses classified segments at the level chosen for the \
             cleartext, and --compress off chooses none: give --compress auto, accent or zstd:N"
        );
    }
    if args.strip_marks && (args.ranges.is_some() || args.ranges_beside || args.policy.is_some()) {
        bail!(
            "--strip-marks has no effect with ranges files or --policy: they add no marks to strip"
        );
    }
    let classify = match (&args.ranges, &args.policy) {
        (Some(r), _) => Classify::RangesFile(r.clone()),
        (None, Some(p)) => {
            let policy = sieve_mark::Policy::load(p)
                .with_context(|| format!("the marking policy {p} cannot be used"))?;
            Classify::Policy(Arc::new(sieve_mark::PolicyRun::new(policy)))
        }
        (None, None) if args.ranges_beside => Classify::RangesBeside,
        (None, None) => Classify::Marks(MarkConfig {
            start: args.start_mark.as_bytes().to_vec(),
            end: args.end_mark.as_bytes().to_vec(),
            escape: args.escape.as_bytes().to_vec(),
            strip: args.strip_marks,
        }),
    };
    Ok(SendConfig {
        to: sender::with_default_port(&args.to),
        server_name: args.server_name.clone(),
        tls,
        mode: match args.mode {
            ModeArg::Auto => SendMode::Auto,
            ModeArg::Sieve => Mode::Sieve.into(),
            ModeArg::SecureOnly => Mode::SecureOnly.into(),
        },
        secure_channels: args.secure_channels,
        plain_channels: args.plain_channels,
        split: args.split,
        batch_split: args.batch_split,
        classify,
        chunk: args.chunk,
        idle_timeout: Duration::from_secs(args.idle_timeout),
        mmap: !args.no_mmap,
        sendfile: args.sendfile,
        require_classified: args.require_classified,
        allow_clear: args.allow_clear,
        skip_invalid: args.skip_invalid,
        legacy: legacy(args)?,
        compress: args.compress,
        compress_classified: args.compress_classified,
        path_memory: sieve_transport::paths::default_file(),
    })
}

/// Columns of the terminal on stderr, if it is one.
fn terminal_width() -> Option<u16> {
    let stderr = std::io::stderr();
    if !stderr.is_terminal() {
        return None;
    }
    rustix::termios::tcgetwinsize(&stderr)
        .ok()
        .map(|w| w.ws_col)
        .filter(|&c| c > 0)
}

/// A progress bar on stderr when it is a terminal; nothing otherwise.
///
/// It starts empty at the session's size (no first frame of a full bar over "0 B/0 B"), fits
/// the terminal's width (the bar takes what the figures leave; the shares of TLS and plain
/// channels are left out below 100 columns), and is cleared when the send ends.
pub fn progress_bar(
    progress: Arc<Progress>,
    total: u64,
) -> Option<(ProgressBar, tokio::task::JoinHandle<()>)> {
    let width = terminal_width()?;
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{wide_bar} {bytes}/{total_bytes} {bytes_per_sec} {eta} {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let b = bar.clone();
    let h = tokio::spawn(async move {
        loop {
            // Bytes of a document the receiver failed early are not sent; nor are they waited for.
            let total = progress
                .total_bytes
                .load(Ordering::Relaxed)
                .saturating_sub(progress.skipped.load(Ordering::Relaxed));
            if total > 0 {
                b.set_length(total);
            }
            let sent = progress.sent();
            b.set_position(sent);
            let docs = format!(
                "{}/{} docs",
                progress.docs_acked.load(Ordering::Relaxed),
                progress.docs.load(Ordering::Relaxed)
            );
            let counts: Vec<u64> = progress
                .per_channel
                .lock()
                .map(|v| v.iter().map(|c| c.load(Ordering::Relaxed)).collect())
                .unwrap_or_default();
            let secure = progress.secure_channels.load(Ordering::Relaxed) as usize;
            b.set_message(bar_message(docs, &counts, secure, width));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    Some((bar, h))
}

/// The bar's message: documents acknowledged, and on terminals of 100 columns or more the
/// shares of the bytes sent so far over TLS and in the clear (`counts`: bytes per channel, the
/// `secure` TLS channels first), labelled so that nobody has to guess which is which.
fn bar_message(docs: String, counts: &[u64], secure: usize, width: u16) -> String {
    let (tls, plain) = counts
        .iter()
        .enumerate()
        .fold((0u64, 0u64), |(t, p), (i, &n)| {
            if i < secure {
                (t + n, p)
            } else {
                (t, p + n)
            }
        });
    if width < 100 || tls + plain == 0 {
        return docs;
    }
    let pct = |n: u64| 100.0 * n as f64 / (tls + plain) as f64;
    format!("{docs} TLS {:.0}% plain {:.0}%", pct(tls), pct(plain))
}

/// What a split of the thesis shows an observer of the plain channels, if the documents are sent
/// with it (`--split` for one document, `--batch-split` for several).
fn layout_warning(args: &Args, docs: usize) -> Option<String> {
    if args.quiet_layout_warning || args.mode == ModeArg::SecureOnly {
        return None;
    }
    let (flag, name) = if docs == 1 {
        match args.split {
            Split::Even | Split::Segment => ("--split", args.split.to_string()),
            Split::Dynamic => return None,
        }
    } else {
        match args.batch_split {
            BatchSplit::Even | BatchSplit::Segment => {
                ("--batch-split", args.batch_split.to_string())
            }
            BatchSplit::Dynamic | BatchSplit::File => return None,
        }
    };
    Some(format!(
        "warning: {flag} {name} hands out the documents segment by segment, so the offsets of \
         the plain frames show an observer where the classified parts begin and end; the default \
         (dynamic) split cuts frames by size alone"
    ))
}

/// Says on stderr which files travel secure-only because nothing classified them, and how to
/// choose otherwise.
fn print_unmarked(unmarked: &[String], docs: usize) {
    const SHOWN: usize = 5;
    if unmarked.is_empty() {
        return;
    }
    let mut names = unmarked
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if unmarked.len() > SHOWN {
        names.push_str(&format!(" and {} more", unmarked.len() - SHOWN));
    }
    let which = if unmarked.len() == docs {
        "the session is secure-only"
    } else {
        "they travel secure-only"
    };
    eprintln!(
        "note: no classification was given for {names} (no inline mark, no --ranges, no \
         --policy): {which}. Mark the classified parts, give their ranges or a policy, or pass \
         --allow-clear to send such files in the clear"
    );
}

pub async fn run(args: &Args) -> Result<bool> {
    let cfg = config(args)?;
    crate::serve::raise_open_file_limit();
    let failed = |e: anyhow::Error| -> Result<bool> {
        if args.json {
            print_failure(&e)?;
        }
        Err(e)
    };
    let (files, recursive, beside) = (args.files.clone(), args.recursive, args.ranges_beside);
    let name = args.name.clone();
    let expanded = match tokio::task::spawn_blocking(move || {
        let spooled = crate::spool::spool(&files, name.as_deref())?;
        let mut e = sender::inputs::expand(&spooled.rest, recursive, beside)?;
        e.inputs.extend(spooled.inputs.iter().cloned());
        sender::inputs::check_unique(&e.inputs)?;
        anyhow::Ok((e, spooled))
    })
    .await?
    {
        Ok(e) => e,
        Err(e) => return failed(e),
    };
    let (expanded, _spooled) = expanded;
    for s in &expanded.skipped {
        eprintln!("warning: skipped {s}");
    }
    if let Some(w) = layout_warning(args, expanded.inputs.len()) {
        eprintln!("{w}");
    }
    let prepared = match sender::prepare(&cfg, expanded.inputs).await {
        Ok(p) => p,
        Err(e) => return failed(e),
    };
    for d in prepared.skipped() {
        eprintln!(
            "warning: not sent: {}",
            d.error.as_deref().unwrap_or("unknown error")
        );
    }
    for name in prepared.unclassified() {
        eprintln!(
            "warning: {name} has no classified byte: it travels entirely in the clear, as its \
             classification says (--require-classified refuses such files)"
        );
    }
    print_unmarked(prepared.unmarked(), prepared.len());
    let progress = Arc::new(Progress::default());
    let bar = progress_bar(progress.clone(), prepared.content_bytes());
    let docs = prepared.len();
    let send = async {
        let processing = emulate_processing(args, &prepared).await;
        let mut r = sender::send_prepared(&cfg, prepared, progress.clone()).await;
        if let Ok(r) = &mut r {
            let ms = processing.as_secs_f64() * 1e3;
            r.processing_ms = ms;
            r.response_ms += ms;
            r.total_ms += ms;
        }
        r
    };
    let result = tokio::select! {
        r = send => Some(r),
        _ = tokio::signal::ctrl_c() => None,
    };
    if let Some((b, h)) = bar {
        h.abort();
        b.finish_and_clear();
    }
    let Some(result) = result else {
        // Dropping the send closed every channel: the receiver removes what it had of the
        // documents not yet acknowledged.
        let delivered = progress
            .delivered
            .lock()
            .map(|d| d.clone())
            .unwrap_or_default();
        let i = Interrupted { docs, delivered };
        if args.json {
            println!(
                "{}",
                serde_json::json!({
                    "error": "interrupted",
                    "docs": i.docs,
                    "docs_ok": i.delivered.len(),
                    "delivered": i.delivered,
                })
            );
        }
        return Err(i.into());
    };
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            if args.json {
                print_failure(&e)?;
            }
            return Err(e);
        }
    };
    print_report(&report, args.json)?;
    Ok(report.docs_ok == report.docs && report.skipped.is_empty())
}

/// The thesis's additional processing time AP (`--emulate-processing-ms-per-mb`, laboratory
/// builds only): a sleep of AP per MB the session sends over TLS, between preparing the
/// documents and setting up the session (channel 0, dialled ahead, keeps connecting meanwhile,
/// as the application's work would let it). How long it took.
#[cfg(feature = "lab")]
async fn emulate_processing(args: &Args, prepared: &sender::Prepared) -> Duration {
    let t = std::time::Instant::now();
    let per_mb = Duration::from_secs_f64(args.emulate_processing_ms_per_mb / 1000.0);
    if !per_mb.is_zero() {
        tokio::time::sleep(per_mb.mul_f64(prepared.secure_bytes() as f64 / 1e6)).await;
    }
    t.elapsed()
}

/// Without the laboratory's `lab` feature there is no emulated processing.
#[cfg(not(feature = "lab"))]
async fn emulate_processing(_: &Args, _: &sender::Prepared) -> Duration {
    Duration::ZERO
}

/// The user interrupted the send (Ctrl-C): what was delivered by then. The command exits 130,
/// as a shell does for a program stopped by SIGINT.
#[derive(Debug)]
pub struct Interrupted {
    pub docs: usize,
    pub delivered: Vec<String>,
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = self.delivered.len();
        write!(f, "interrupted: ")?;
        match d {
            0 => write!(f, "no document was delivered")?,
            _ => {
                let shown: Vec<&str> = self.delivered.iter().take(20).map(String::as_str).collect();
                let more = if d > 20 {
                    format!(" and {} more", d - 20)
                } else {
                    String::new()
                };
                write!(
                    f,
                    "{d} of {} documents were delivered ({}{more})",
                    self.docs,
                    shown.join(", ")
                )?
            }
        }
        if d < self.docs {
            write!(
                f,
                "; {} {} not, and the receiver keeps nothing of {}",
                self.docs - d,
                if self.docs - d == 1 { "was" } else { "were" },
                if self.docs - d == 1 { "it" } else { "them" }
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for Interrupted {}

/// `--json` when the session failed: one object on stdout with the error and, once documents
/// were announced, which of them were acknowledged (`delivered`); the others were not delivered.
fn print_failure(e: &anyhow::Error) -> Result<()> {
    let mut v = serde_json::json!({ "error": format!("{e:#}") });
    if let Some(u) = e.downcast_ref::<Undelivered>() {
        v["docs"] = u.docs.into();
        v["docs_ok"] = u.delivered.len().into();
        v["delivered"] = serde_json::to_value(&u.delivered)?;
        v["failures"] = serde_json::to_value(&u.failed)?;
    }
    println!("{v}");
    Ok(())
}

pub fn print_report(r: &SessionReport, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string(r)?);
    } else {
        let marks = if r.marks_bytes > 0 {
            format!(", {} of marks written back by the receiver", r.marks_bytes)
        } else {
            String::new()
        };
        // Which mode `auto` chose, and why in a few words.
        let chosen = r
            .decision
            .as_ref()
            .map_or(String::new(), |d| format!("; {}", d.summary()));
        eprintln!(
            "{} of {} documents delivered: {} bytes ({} over TLS, {} in the clear{marks}) in \
             {:.1} ms (connect {:.1}, sieve {:.1}, split {:.1}, transfer {:.1}) over {} TLS + {} \
             plain channels, {}{chosen}",
            r.docs_ok,
            r.docs,
            r.bytes,
            r.secure_bytes,
            r.plain_bytes,
            r.total_ms,
            r.connect_ms,
            r.sieve_ms + r.processing_ms,
            r.split_ms,
            r.transfer_ms,
            r.secure_channels,
            r.plain_channels,
            r.cipher
        );

        if let Some(c) = r
            .compression
            .as_ref()
            .filter(|c| c.bytes_after < c.bytes_before)
        {
            eprintln!(
                "compression ({}): {} bytes sent as {} ({:.1} %), levels: {}",
                c.policy,
                c.bytes_before,
                c.bytes_after,
                100.0 * c.bytes_after as f64 / c.bytes_before.max(1) as f64,
                c.levels
                    .iter()
                    .map(|(l, n)| format!("{l} ×{}", n.frames))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    for f in &r.failures {
        eprintln!(
            "error: {} was not delivered: {}",
            f.path.display(),
            f.error.as_deref().unwrap_or("unknown error")
        );
    }
    Ok(())
}

#[cfg(feature = "insecure-thesis-suites")]
fn legacy(args: &Args) -> Result<Option<sieve_transport::tls::LegacyConnector>> {
    use sieve_transport::legacy_tls::{LegacyClient, LegacySuite};
    let Some(s) = &args.insecure_thesis_suite else {
        return Ok(None);
    };
    if args.client_cert.is_some() {
        bail!("--insecure-thesis-suite does not support client certificates");
    }
    let suite = LegacySuite::parse(s)?;
    tracing::warn!(
        "INSECURE: using the thesis suite {} for measurements",
        suite.name()
    );
    Ok(Some(Arc::new(LegacyClient::new(&args.ca, suite)?)))
}

#[cfg(not(feature = "insecure-thesis-suites"))]
fn legacy(_: &Args) -> Result<Option<sieve_transport::tls::LegacyConnector>> {
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::bar_message;

    #[test]
    fn the_bar_labels_its_shares_and_drops_them_on_narrow_terminals() {
        let docs = || "1/2 docs".to_string();
        // One TLS channel, two plain ones.
        assert_eq!(
            bar_message(docs(), &[10, 45, 45], 1, 120),
            "1/2 docs TLS 10% plain 90%"
        );
        assert_eq!(bar_message(docs(), &[10, 45, 45], 1, 80), "1/2 docs");
        // Nothing sent yet: no shares to show.
        assert_eq!(bar_message(docs(), &[0, 0], 1, 120), "1/2 docs");
        // Secure-only: every byte over TLS.
        assert_eq!(
            bar_message(docs(), &[7], 1, 120),
            "1/2 docs TLS 100% plain 0%"
        );
    }
}
