//! `sieve demo` (also `sieve` with no arguments): the whole system on loopback in a few seconds.
//!
//! Makes certificates in a temporary folder, starts a receiver, generates a thesis x-P document,
//! sends it in secure-only and sieve modes (alternating, several rounds), checks that every
//! received file is byte-identical, and prints the comparison.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use sieve_core::batch::BatchSplit;
use sieve_core::gen::{write_xp, XpSpec};
use sieve_core::marks::MarkConfig;
use sieve_core::message::Mode;
use sieve_core::split::Split;
use sieve_transport::receiver::{Receiver, ServeConfig, ServeLimits};
use sieve_transport::sender::{self, Chunk, Progress, SendConfig, Sendfile, SessionReport};
use sieve_transport::source::Classify;
use sieve_transport::store::StoreOptions;
use sieve_transport::tls::{ClientTls, ServerTls};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Content size of the generated document.
    #[arg(long, default_value = "64MB", value_parser = sieve_core::gen::parse_size)]
    pub size: u64,
    /// Proportion of classified content.
    #[arg(long, short = 'p', default_value_t = 0.1)]
    pub proportion: f64,
    /// Rounds of (secure-only, sieve) transfers.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
}

impl Default for Args {
    fn default() -> Self {
        Args {
            size: 64_000_000,
            proportion: 0.1,
            rounds: 5,
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return f64::NAN;
    }
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub async fn run(args: &Args) -> Result<()> {
    let tmp = tempfile::tempdir().context("cannot create a temporary folder")?;
    let certs = tmp.path().join("certs");
    let out = tmp.path().join("received");
    std::fs::create_dir_all(&out)?;
    crate::certs::make(&certs, &[], false)?;
    eprintln!("demo: certificates in {}", certs.display());

    let tls = ServerTls {
        cert: certs.join("server.pem"),
        key: certs.join("server.key"),
        client_ca: None,
    }
    .config()?;
    let any: SocketAddr = "127.0.0.1:0".parse()?;
    let receiver = Receiver::bind(ServeConfig {
        dir: out.clone(),
        tls,
        listen: any,
        plain_listen: any,
        plain_advertise: None,
        discard: false,
        legacy: None,
        limits: ServeLimits::default(),
        // Each round sends the same document again.
        store: StoreOptions {
            overwrite: true,
            ..StoreOptions::default()
        },
        macs: sieve_transport::calibrate::Calibration::cached().mac_preference(),
        accept_compression: sieve_core::message::CompressFlags::ALL,
    })
    .await?;
    let to = receiver.tls_addr().to_string();
    eprintln!(
        "demo: receiver on {} (TLS) and {} (plain), writing to {}",
        to,
        receiver.plain_addr(),
        out.display()
    );
    let server = tokio::spawn(receiver.run());

    let pct = (args.proportion * 100.0).round() as u32;
    let name = format!("{}MB-{pct}.txt", args.size / 1_000_000);
    let doc: PathBuf = tmp.path().join(&name);
    {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&doc)?);
        write_xp(
            XpSpec {
                size: args.size,
                proportion: args.proportion,
                seed: 1,
            },
            &mut w,
        )?;
        std::io::Write::flush(&mut w)?;
    }
    let original = std::fs::read(&doc)?;
    eprintln!(
        "demo: generated {name} ({} bytes, P = {})",
        original.len(),
        args.proportion
    );

    let client = ClientTls {
        ca: &certs.join("ca.pem"),
        cipher: None,
        identity: None,
    }
    .config()?;
    let base = SendConfig {
        to,
        server_name: Some("localhost".into()),
        tls: client,
        mode: Mode::Sieve.into(),
        secure_channels: 1,
        plain_channels: 1,
        split: Split::Dynamic,
        batch_split: BatchSplit::Dynamic,
        classify: Classify::Marks(MarkConfig::default()),
        chunk: Chunk::Auto,
        idle_timeout: Duration::from_secs(30),
        mmap: true,
        sendfile: Sendfile::Always,
        require_classified: false,
        // The demo's document is the thesis's generated x-P file, classified by its marks
        // (none at P = 0, where the thesis sends it all in the clear).
        allow_clear: true,
        skip_invalid: false,
        legacy: None,
        compress: sieve_core::compress::Compression::Auto,
        compress_classified: false,
        path_memory: None,
    };
    let mut results: [Vec<SessionReport>; 2] = [Vec::new(), Vec::new()];
    for round in 0..args.rounds {
        for (i, mode) in [Mode::SecureOnly, Mode::Sieve].into_iter().enumerate() {
            let cfg = SendConfig {
                mode: mode.into(),
                ..base.clone()
            };
            let r = sender::send(
                &cfg,
                std::slice::from_ref(&doc),
                Arc::new(Progress::default()),
            )
            .await?;
            if r.docs_ok != 1 {
                bail!("the demo transfer failed: {:?}", r.failures);
            }
            let got = std::fs::read(out.join(&name))?;
            if got != original {
                bail!("the received file differs from the original ({mode:?}, round {round})");
            }
            results[i].push(r);
        }
    }
    server.abort();

    let row = |label: &str, rs: &[SessionReport]| {
        let m = |f: fn(&SessionReport) -> f64| median(rs.iter().map(f).collect());
        println!(
            "{label:<12} {:>11.1} {:>10.1} {:>10.1} {:>9.1} {:>9.1} {:>8.1} {:>13}",
            m(|r| r.response_ms),
            m(|r| r.connect_ms),
            m(|r| r.total_ms),
            m(|r| r.sieve_ms),
            m(|r| r.commit_ms),
            m(|r| r.cpu_ms),
            rs.first().map_or(0, |r| r.secure_bytes)
        );
    };
    println!();
    println!(
        "{} over loopback, {} rounds, medians (ms); every received file was byte-identical:",
        name, args.rounds
    );
    println!(
        "{:<12} {:>11} {:>10} {:>10} {:>9} {:>9} {:>8} {:>13}",
        "mode", "response", "connect", "total", "sieve", "commit", "cpu", "bytes on TLS"
    );
    row("secure-only", &results[0]);
    row("sieve", &results[1]);
    println!(
        "(commit: the receiver's fsync and rename, part of every response, since an \
         acknowledgement means the file is on disk)"
    );
    let so = median(results[0].iter().map(|r| r.response_ms).collect());
    let sv = median(results[1].iter().map(|r| r.response_ms).collect());
    let so_cpu = median(results[0].iter().map(|r| r.cpu_ms).collect());
    let sv_cpu = median(results[1].iter().map(|r| r.cpu_ms).collect());
    println!();
    println!(
        "improvement (thesis eq. 1): response {:.1} %, CPU of this process (sender and receiver both run in it) {:.1} %  (thesis, 1MB-10 over 100 Mbit/s with 3DES: 67 %)",
        (so - sv) / so * 100.0,
        (so_cpu - sv_cpu) / so_cpu * 100.0
    );
    println!("next: `sieve --help`, `sieve certs`, `sieve serve`, `sieve send`, `sieve gen`");
    Ok(())
}
