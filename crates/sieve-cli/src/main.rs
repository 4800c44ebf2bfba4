//! `sieve`: move documents whose classified parts travel over TLS and the rest over plain TCP.

// The only unsafe code is mapping input files; each site says why it is sound.
#![deny(unsafe_code)]

mod calibrate;
mod certs;
mod demo;
#[cfg(feature = "gen")]
mod gen;
mod mark;
mod output;
mod send;
mod serve;
mod spool;
#[cfg(feature = "ui")]
mod ui;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The security sieve: send documents whose classified parts travel over TLS 1.3 and whose other
/// parts travel over plain TCP, rebuilt byte for byte and committed durably by the receiver.
///
/// Classified parts are marked inline with <$S> ... <$E> (a backslash before a mark makes it
/// literal), or given as byte ranges in a JSON file. Run `sieve` with no arguments for a demo on
/// loopback; `sieve certs` makes development certificates; then `sieve serve` on the receiving
/// side and `sieve send` on the sending side.
#[derive(Parser, Debug)]
#[command(name = "sieve", version, about, long_about, after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

const EXAMPLES: &str = "Examples:
  sieve                                   # demo: certificates, receiver, send, compare
  sieve certs --dir certs
  sieve serve --dir inbox --cert certs/server.pem --key certs/server.key
  sieve gen --size 10MB --proportion 0.1 -o 10MB-10.txt
  sieve gen --kind csv --size 64MiB --proportion 0.1 -o customers.csv
  sieve send --ca certs/ca.pem 10MB-10.txt
  sieve send --ca certs/ca.pem --mode secure-only -n 2 --json 10MB-10.txt
  sieve send --ca certs/ca.pem --ranges fields.json record.bin
  sieve send --ca certs/ca.pem -r datasets/
  sieve mark -o export.ranges.json --explain export.csv
  sieve send --ca certs/ca.pem --policy default --json export.csv";

#[derive(Subcommand, Debug)]
enum Command {
    /// Write a development CA and a certificate for localhost/127.0.0.1.
    Certs(certs::Args),
    /// Receive documents into a folder (runs until stopped).
    ///
    /// Each document is written to a temporary file, its cleartext checked against the digest
    /// its sender sent over TLS, fsynced and renamed into --dir; only then is it acknowledged.
    /// Memory and open files are budgeted: frames being received share --max-buffer-memory, and
    /// documents in progress share the open-file limit (the soft limit is raised to the hard one
    /// at start). Each session is told its share of both, and its sender keeps within it. A
    /// session is dropped when none of its channels has received a byte for --idle-timeout
    /// seconds.
    Serve(serve::Args),
    /// Send files in one session; exits 0 only if every file was acknowledged.
    Send(send::Args),
    /// Find the classified parts of a document with a marking policy: write a ranges file
    /// (what `sieve send --ranges` reads), a marked copy, or an explanation.
    ///
    /// The built-in `default` policy finds payment cards (Luhn), IBANs (mod 97), US SSNs,
    /// e-mail addresses, phone numbers (numbering plans), IP addresses, PEM keys and
    /// certificates, cloud and API keys, JWTs, secrets after password/token/key keys, dates of
    /// birth near a keyword, names after a title, and CSV columns, JSON fields and log keys
    /// named like personal data. `--print-policy default` shows it, with every option explained.
    Mark(mark::Args),
    /// Serve the marking page on 127.0.0.1: open or drop a document, see what the policy
    /// classified, mark and unmark by selecting text, save a ranges file or a marked copy, and
    /// send it to a receiver.
    #[cfg(feature = "ui")]
    Ui(ui::Args),
    /// Generate a test document: a thesis x-P file, or realistic prose, CSV, JSON or logs.
    #[cfg(feature = "gen")]
    Gen(gen::Args),
    /// Run the demo: secure-only vs sieve on loopback, with a comparison.
    Demo(demo::Args),
    /// Measure how fast this machine runs the TLS suites and the cleartext MACs (a few ms,
    /// cached per machine and per OPENSSL_ia32cap value), and which MAC it prefers.
    Calibrate(calibrate::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let level = match &cli.command {
        Some(Command::Serve(_)) => "info",
        _ => "warn",
    };
    // Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org): logs
    // written to files or pipes stay plain text.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt()
        .with_ansi(colour)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level)),
        )
        .with_writer(std::io::stderr)
        .init();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    // One worker per core this process may use, as tokio would choose, but from the count the
    // sender reads once and keeps (`available_parallelism` reads the cgroup's files each time,
    // 25-70 µs of a 1 MB send). `TOKIO_WORKER_THREADS` still decides when it is set.
    if std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
        builder.worker_threads(sieve_transport::cpu::cores());
    }
    let rt = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async {
        match cli.command {
            None => {
                eprintln!(
                    "no command given: running the demo (see `sieve --help` for the commands)"
                );
                demo::run(&demo::Args::default()).await.map(|_| true)
            }
            Some(Command::Demo(a)) => demo::run(&a).await.map(|_| true),
            Some(Command::Certs(a)) => certs::run(&a).map(|_| true),
            #[cfg(feature = "gen")]
            Some(Command::Gen(a)) => gen::run(&a).map(|_| true),
            #[cfg(feature = "ui")]
            Some(Command::Ui(a)) => ui::run(&a).await,
            Some(Command::Mark(a)) => tokio::task::block_in_place(|| mark::run(&a)),
            Some(Command::Serve(a)) => serve::run(&a).await.map(|_| true),
            Some(Command::Send(a)) => send::run(&a).await,
            Some(Command::Calibrate(a)) => {
                tokio::task::block_in_place(|| calibrate::run(&a)).map(|_| true)
            }
        }
    });
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            if let Some(i) = e.downcast_ref::<send::Interrupted>() {
                eprintln!("{i}");
                return ExitCode::from(130);
            }
            // Library errors sometimes carry links to their manuals; a user needs the sentence.
            eprintln!(
                "error: {}",
                sieve_transport::explain::without_urls(&format!("{e:#}"))
            );
            ExitCode::FAILURE
        }
    }
}
