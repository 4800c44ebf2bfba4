//! `sieve serve`: the receiver.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use sieve_core::mac::{MacAlg, MacPreference};
use sieve_core::message::CompressFlags;
use sieve_core::receiver::InflateLimit;
use sieve_transport::calibrate::Calibration;
use sieve_transport::receiver::{Receiver, ServeConfig, ServeLimits};
use sieve_transport::store::{self, StoreOptions};
use sieve_transport::tls::ServerTls;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Folder that received documents are written to (atomically, after verification); created
    /// if missing. Senders may create subfolders beneath it (`sieve send -r`), never anything
    /// outside it, and never through a symbolic link.
    #[arg(long)]
    pub dir: PathBuf,
    /// Replace a file that already exists under a received document's name. Without it such a
    /// document is refused (its sender is told the name exists) and the file is kept.
    #[arg(long)]
    pub overwrite: bool,
    /// Permission bits of received files, in octal (e.g. 640 to let the group read them). The
    /// default, 600, lets only this user read them; folders the receiver creates get the same
    /// bits plus search (x) wherever read is given.
    #[arg(long, value_name = "OCTAL", default_value = "600", value_parser = store::parse_mode)]
    pub file_mode: u32,
    /// With --client-ca: keep each client's documents in a folder of its own beneath --dir,
    /// named after the common name (CN) of its certificate (characters other than letters,
    /// digits and . - _ @ become _, followed by a short hash), so that clients cannot replace
    /// or read each other's files by name.
    #[arg(long, requires = "client_ca")]
    pub per_client_dirs: bool,
    /// Refuse names Windows cannot hold, for a folder shared with Windows: device names (CON,
    /// PRN, AUX, NUL, COM0-9, LPT0-9, in any case and with any extension: aux.txt is AUX), the
    /// characters < > : " | ? *, and components ending in a dot or a space. Names with control
    /// or Unicode format characters (bidirectional controls such as U+202E, zero-width
    /// characters) are refused always.
    #[arg(long)]
    pub portable_names: bool,
    /// Server certificate chain (PEM), e.g. from `sieve certs`.
    #[arg(long)]
    pub cert: PathBuf,
    /// Server private key (PEM).
    #[arg(long)]
    pub key: PathBuf,
    /// Address for TLS channels: channel 0 and extra secure channels.
    #[arg(long, default_value = "127.0.0.1:7443")]
    pub listen: SocketAddr,
    /// Address for plain (TCP) channels. Default: the host of --listen, port 7080 (so
    /// `--listen 10.0.0.2:7443` alone listens for plain channels on 10.0.0.2:7080).
    #[arg(long)]
    pub plain_listen: Option<SocketAddr>,
    /// Address senders are told to use for plain channels, when it differs from --plain-listen
    /// (NAT, proxies). Default: the plain listen address.
    #[arg(long)]
    pub plain_advertise: Option<String>,
    /// Require client certificates signed by this CA (mutual TLS).
    #[arg(long)]
    pub client_ca: Option<PathBuf>,
    /// Receive, verify and acknowledge, but write nothing (for benchmarks).
    #[arg(long)]
    pub discard: bool,
    /// Which compressed frames to accept from senders: all (default: compressed cleartext on
    /// the plain channels, and compressed classified segments inside TLS from senders run with
    /// --compress-classified), plain (compressed cleartext only) or none (senders then send
    /// everything as it is). Every compressed frame declares its length, is decompressed into a
    /// buffer counted in --max-buffer-memory, and never to more than it declared.
    #[arg(long, default_value = "all", value_parser = parse_accept)]
    pub accept_compression: CompressFlags,
    /// Most sessions served at once. A sender that finds them all taken takes the place of the
    /// session furthest below --min-session-rate, if one is below it; else it is told to retry.
    #[arg(long, default_value_t = 64)]
    pub max_sessions: usize,
    /// Largest document accepted (e.g. 100GiB).
    #[arg(long, default_value = "1TiB", value_parser = parse_size_arg)]
    pub max_doc_size: u64,
    /// Seconds a session may go without progress before it is dropped: progress is 16 KiB moved
    /// on its channels together, or a frame other than data (a manifest, a DOC_END). Neither
    /// trickled bytes nor tiny data frames count: a one-byte frame is one byte.
    #[arg(long, default_value_t = 60)]
    pub idle_timeout: u64,
    /// Seconds allowed for a TLS handshake.
    #[arg(long, default_value_t = 10)]
    pub handshake_timeout: u64,
    /// Seconds allowed for a connection's first frame (HELLO or JOIN) once it is open and, for
    /// TLS, its handshake is done. Connections that say nothing are dropped after this; when
    /// more than --max-pending wait at once, the oldest are dropped first.
    #[arg(long, default_value_t = 2.0)]
    pub join_timeout: f64,
    /// Connections that have not yet authenticated, per listener (the oldest is dropped for a
    /// newcomer when all are taken; one address holds at most a quarter of them).
    #[arg(long, default_value_t = 512)]
    pub max_pending: usize,
    /// Sessions one client address (and, with --client-ca, one client certificate, known by its
    /// fingerprint) may hold at once. A quarter of the default --max-sessions: one machine never
    /// takes every place. A newcomer that finds its address or certificate at this limit takes
    /// the place of its session furthest below --min-session-rate, if one is below it.
    #[arg(long, default_value_t = 16)]
    pub max_sessions_per_client: usize,
    /// Sessions one network may hold at once: an IPv4 /24 or an IPv6 /64 (one host may use
    /// every address of its /64, so a limit per address alone would not hold it). Default: half
    /// of --max-sessions (32), and never fewer than --max-sessions-per-client: one network
    /// never takes every place, and the other half stays open to everyone else. Raise it (to
    /// --max-sessions) when every sender shares one LAN. A newcomer that finds its network at
    /// this limit takes the place of the network's session furthest below --min-session-rate,
    /// if one is below it, so a sender is not locked out by others of its own network that only
    /// trickle.
    #[arg(long, value_name = "N")]
    pub max_sessions_per_network: Option<usize>,
    /// The rate a session must keep up, measured over its last 16 s, to be sure of its place
    /// (e.g. 64KiB, per second). When the receiver, or a newcomer's address, network or
    /// certificate, is at its limit of sessions, the newcomer takes the place of the session
    /// furthest below this rate; a session at or above it is never ended for a newcomer. The
    /// default, 64 KiB/s (512 kbit/s), is far below what a sender with a document to send
    /// moves on any link, and it makes holding the 64 default places cost 4 MiB/s sent without
    /// pause, instead of a byte now and then. A session that has just started is behind by no
    /// more than the moment it has had, so sessions that have trickled for longer go first. The
    /// session ended is told why. 0 turns this off: newcomers are refused at a limit.
    #[arg(long, default_value = "64KiB", value_parser = parse_size_arg)]
    pub min_session_rate: u64,
    /// Most memory all connections together may hold in frames being received (e.g. 1GiB).
    /// Caps the receiver's memory whatever frame lengths senders claim: a frame holds about what
    /// has arrived of it, never what it declares, and a channel whose frame does not fit waits
    /// for memory. While it waits, memory that is held and not used gives way: a channel's
    /// buffer unused for a second between frames goes back, and a frame that received less than
    /// a sixteenth of the memory it holds (16 KiB at least) in the last second ends, with its
    /// session (told why), the one slow longest first; a frame that keeps arriving faster is
    /// never ended for another, so memory pinned by a slow peer turns over within 16 s. After --idle-timeout a
    /// channel still waiting fails its session with a message saying so. The default fits 64
    /// sessions × 32 channels of 256 KiB frames. Manifests, and the records of pieces received,
    /// may hold a quarter of this again (one session an eighth of that): a document whose
    /// manifest does not fit is refused with LIMIT.
    #[arg(long, default_value = "512MiB", value_parser = parse_size_arg)]
    pub max_buffer_memory: u64,
    /// Compressed frames of a document not yet verified may decompress to at most N times the
    /// bytes they took on the wire (0: no bound). Past that, and past --compression-allowance,
    /// the document is refused with LIMIT before the frame is decompressed: a document's digest
    /// is checked only at its end, and without a bound a few kilobytes of zstd frames of zeros
    /// would fill gigabytes of temporary files first. Logs measured compress 3:1 to 12:1, the
    /// most repetitive (health checks differing only in their timestamps) up to 217:1; data
    /// of one repeated byte or line, 2,000:1 and more, passes within the allowance, with N
    /// raised, or sent with --compress off.
    #[arg(long, value_name = "N", default_value_t = InflateLimit::DEFAULT_RATIO)]
    pub max_compression_ratio: u32,
    /// Bytes beyond --max-compression-ratio that the unverified documents of one session may
    /// hold together (a small file of zeros, a run of zeros inside a log). Each session has its
    /// own; a document gives its share back once verified.
    #[arg(long, value_name = "SIZE", default_value = "8MiB", value_parser = parse_size_arg)]
    pub compression_allowance: u64,
    /// Once both listeners are bound, write their addresses to this file as JSON
    /// (`{"tls": "ADDR", "plain": "ADDR", "pid": N}`), atomically: a program that started the
    /// receiver with port 0 waits for the file instead of reading the log. `-` is standard
    /// output, and a named pipe is written through.
    #[arg(long, value_name = "PATH")]
    pub ready_file: Option<PathBuf>,
    /// The cleartext MAC to use: auto (the fastest on this machine among what each sender
    /// offers, by `sieve calibrate`'s measurement, cached), or one of aes-gmac, blake3,
    /// chacha20-poly1305, nh-poly1305 (senders that do not offer it are refused).
    #[arg(long, default_value = "auto", value_name = "auto|MAC")]
    pub mac: String,
    /// INSECURE, for the laboratory only: make secure channels with OpenSSL, which also accepts
    /// the thesis's broken TLS 1.2 suites (3DES-EDE-CBC-SHA, AES-256-CBC-SHA). Never use this for
    /// real documents.
    #[cfg(feature = "insecure-thesis-suites")]
    #[arg(long)]
    pub insecure_thesis_suites: bool,
}

/// The receiver's MAC preference for `--mac`.
fn mac_preference(arg: &str) -> Result<MacPreference> {
    if arg == "auto" {
        let c = Calibration::cached();
        let pref = c.mac_preference();
        tracing::info!(
            macs = ?pref.ranked(),
            cpu = %c.machine.cpu,
            "cleartext MACs by measured speed (GB/s), fastest first"
        );
        return Ok(pref);
    }
    let alg: MacAlg = arg
        .parse()
        .map_err(|e: String| anyhow::anyhow!("--mac: {e}, or auto"))?;
    Ok(MacPreference::only(alg))
}

fn parse_accept(s: &str) -> Result<CompressFlags, String> {
    match s.to_ascii_lowercase().as_str() {
        "all" => Ok(CompressFlags::ALL),
        "plain" => Ok(CompressFlags::PLAIN),
        "none" => Ok(CompressFlags::NONE),
        _ => Err(format!("'{s}': use all, plain or none")),
    }
}

fn parse_size_arg(s: &str) -> Result<u64, String> {
    if let Some(t) = s.strip_suffix("TiB") {
        return sieve_core::gen::parse_size(&format!("{t}GiB")).map(|g| g * 1024);
    }
    sieve_core::gen::parse_size(s)
}

pub async fn run(args: &Args) -> Result<()> {
    raise_open_file_limit();
    let tls = ServerTls {
        cert: args.cert.clone(),
        key: args.key.clone(),
        client_ca: args.client_ca.clone(),
    }
    .config()?;
    if !sieve_transport::tls::hardware_aes() {
        tracing::info!(
            "no AES hardware as aws-lc sees it: ChaCha20-Poly1305 is taken whenever a sender \
             offers it (AES-GCM would run in software)"
        );
    }
    let limits = ServeLimits {
        max_sessions: args.max_sessions,
        max_doc_bytes: args.max_doc_size,
        idle_timeout: Duration::from_secs(args.idle_timeout),
        handshake_timeout: Duration::from_secs(args.handshake_timeout),
        join_timeout: Duration::try_from_secs_f64(args.join_timeout)
            .map_err(|_| anyhow::anyhow!("--join-timeout must be a positive number of seconds"))?,
        max_pending: args.max_pending,
        max_pending_per_addr: (args.max_pending / 4).max(1),
        max_sessions_per_client: args.max_sessions_per_client,
        max_sessions_per_network: args.max_sessions_per_network,
        min_session_rate: args.min_session_rate,
        max_buffer_bytes: args.max_buffer_memory,
        inflate: InflateLimit {
            ratio: args.max_compression_ratio,
            allowance: args.compression_allowance,
        },
        ..ServeLimits::default()
    };
    let receiver = Receiver::bind(ServeConfig {
        dir: args.dir.clone(),
        tls,
        listen: args.listen,
        plain_listen: args
            .plain_listen
            .unwrap_or_else(|| default_plain_listen(args.listen)),
        plain_advertise: args.plain_advertise.clone(),
        discard: args.discard,
        legacy: legacy(args)?,
        limits,
        store: StoreOptions {
            overwrite: args.overwrite,
            file_mode: args.file_mode,
            per_client_dirs: args.per_client_dirs,
            portable_names: args.portable_names,
        },
        macs: mac_preference(&args.mac)?,
        accept_compression: args.accept_compression,
    })
    .await?;
    if let Some(path) = &args.ready_file {
        write_ready_file(path, receiver.tls_addr(), receiver.plain_addr())?;
    }
    tokio::select! {
        r = receiver.run() => r,
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}

/// Port of the plain listener when only --listen is given.
pub const DEFAULT_PLAIN_PORT: u16 = 7080;

/// The plain listener beside a TLS listener on `listen`: the same host, port 7080 (an ephemeral
/// port when `listen` asks for one, as tests do).
fn default_plain_listen(listen: SocketAddr) -> SocketAddr {
    let port = if listen.port() == 0 {
        0
    } else {
        DEFAULT_PLAIN_PORT
    };
    SocketAddr::new(listen.ip(), port)
}

/// Write `{"tls", "plain", "pid"}` to `path` by the rule of [`crate::output`]: a file is
/// written whole to a temporary file in the same folder and renamed, so a reader sees either no
/// file or the whole of it; a pipe a supervisor reads is written through; `-` is standard
/// output.
fn write_ready_file(path: &Path, tls: SocketAddr, plain: SocketAddr) -> Result<()> {
    let ready = serde_json::json!({
        "tls": tls.to_string(),
        "plain": plain.to_string(),
        "pid": std::process::id(),
    });
    crate::output::Output::new(path)
        .sync(false)
        .write(&serde_json::to_vec(&ready)?)
        .context("cannot write the ready file")
}

/// The receiver holds a descriptor per connection and per document in progress, the sender one
/// per document of a session. The usual soft limit of 1024 open files is a leftover from
/// select(2), which nothing here uses; raising it to the hard limit (as Go's runtime does for
/// every program) lets a busy receiver take more sessions before it must refuse documents, and a
/// sender send a folder of thousands of files in one session. A hard limit set by the
/// administrator still holds, and the receiver budgets whatever limit it ends up with.
pub fn raise_open_file_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let now = getrlimit(Resource::Nofile);
    let (Some(soft), Some(hard)) = (now.current, now.maximum) else {
        return;
    };
    if soft >= hard {
        return;
    }
    let raised = Rlimit {
        current: Some(hard),
        maximum: Some(hard),
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => tracing::info!("open-file limit raised from {soft} to {hard}"),
        Err(e) => tracing::debug!("open-file limit stays at {soft}: {e}"),
    }
}

#[cfg(feature = "insecure-thesis-suites")]
fn legacy(args: &Args) -> Result<Option<sieve_transport::tls::LegacyAcceptor>> {
    if !args.insecure_thesis_suites {
        return Ok(None);
    }
    if args.client_ca.is_some() {
        anyhow::bail!("--insecure-thesis-suites does not support --client-ca");
    }
    tracing::warn!(
        "INSECURE: accepting the thesis's TLS 1.2 suites (3DES-EDE-CBC-SHA, AES-256-CBC-SHA) for measurements"
    );
    Ok(Some(std::sync::Arc::new(
        sieve_transport::legacy_tls::LegacyServer::new(&args.cert, &args.key)?,
    )))
}

#[cfg(not(feature = "insecure-thesis-suites"))]
fn legacy(_: &Args) -> Result<Option<sieve_transport::tls::LegacyAcceptor>> {
    Ok(None)
}
