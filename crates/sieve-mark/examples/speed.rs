//! A quick look at the scan's speed on one core, without criterion's statistics:
//! `cargo run -p sieve-mark --release --example speed -- [MiB]`. The benchmark
//! (`cargo bench -p sieve-mark`) is what the README's figures come from.

use std::time::{Duration, Instant};

/// CPU time this thread has used: the scan's cost whatever else the machine runs.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer to a local.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

use sieve_mark::labelled::{Format, Gen};
use sieve_mark::{Policy, ScanOptions};

fn main() {
    let mib: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(16);
    let policy = match std::env::var("POLICY") {
        Ok(p) => Policy::load(&p).unwrap_or_else(|e| panic!("{e}")),
        Err(_) => Policy::default_policy(),
    };
    let only = std::env::var("FORMAT").ok();
    for f in Format::ALL {
        if only
            .as_deref()
            .is_some_and(|o| !format!("{f:?}").eq_ignore_ascii_case(o))
        {
            continue;
        }
        let doc = Gen::new(1).document(f, mib << 20).bytes;
        let opts = ScanOptions {
            threads: 1,
            name: Some(f.file_name().to_string()),
            ..ScanOptions::default()
        };
        let mut best = f64::MAX;
        let mut best_cpu = f64::MAX;
        let rounds: usize = std::env::var("ROUNDS")
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(5);
        for _ in 0..rounds {
            let (t, c) = (Instant::now(), thread_cpu());
            std::hint::black_box(policy.scan_slice(&doc, &opts));
            best = best.min(t.elapsed().as_secs_f64());
            best_cpu = best_cpu.min((thread_cpu() - c).as_secs_f64());
        }
        println!(
            "{f:?}: {:.0} MB/s of wall time, {:.0} MB per CPU second (best of {rounds}, one thread)",
            doc.len() as f64 / best / 1e6,
            doc.len() as f64 / best_cpu / 1e6
        );
    }
}
