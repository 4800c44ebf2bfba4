//! Load: 64 concurrent senders x 50 documents of mixed sizes (13 bytes to ~200 KB)
//! against one receiver. Every document must arrive byte-identical, exactly once, none lost.
//! Prints throughput, p50/p99 session time, peak resident memory and file descriptors.
//!
//! `soak` (ignored in CI) repeats such rounds for `SIEVE_SOAK_SECS` seconds (default 600); see
//! RELIABILITY.md. `SIEVE_LOAD_SENDERS` and `SIEVE_LOAD_DOCS` scale either test.

mod common;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sieve_core::batch::BatchSplit;
use sieve_core::message::Mode;
use sieve_core::split::Split;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Document `d` of sender `s` in round `round`: a unique first line, then text with one or two
/// classified ranges; sizes spread log-uniformly from a few bytes to ~200 KB.
fn document(base: &[u8], round: u64, s: u64, d: u64) -> (String, Vec<u8>) {
    let mut rng = StdRng::seed_from_u64(round << 32 | s << 16 | d);
    let len = (10f64 * (20_000f64).powf(rng.gen::<f64>())) as usize; // 10 B .. 200 KB
    let name = format!("r{round}-s{s}-d{d}.txt");
    let mut doc = format!("{name}\n").into_bytes();
    let start = rng.gen_range(0..base.len() - len.max(1));
    let body = &base[start..start + len];
    let a = rng.gen_range(0..=len);
    let b = rng.gen_range(a..=len);
    doc.extend_from_slice(&body[..a]);
    doc.extend_from_slice(b"<$S>");
    doc.extend_from_slice(&body[a..b]);
    doc.extend_from_slice(b"<$E>");
    doc.extend_from_slice(&body[b..]);
    if d % 7 == 3 {
        doc.extend_from_slice(b"<$S>tail secret<$E>");
    }
    (name, doc)
}

struct RoundFigures {
    docs: u64,
    bytes: u64,
    wall: Duration,
    session_ms: Vec<f64>,
}

/// One round: `senders` sessions at once, `docs` documents each; checks every invariant.
async fn round(
    rx: &Arc<TestReceiver>,
    base: &Arc<Vec<u8>>,
    r: u64,
    senders: u64,
    docs: u64,
) -> RoundFigures {
    let src = fast_tempdir();
    let mut jobs = Vec::new();
    let mut bytes = 0u64;
    for s in 0..senders {
        let mut files: Vec<PathBuf> = Vec::new();
        let mut expected = Vec::new();
        for d in 0..docs {
            let (name, doc) = document(base, r, s, d);
            bytes += doc.len() as u64;
            files.push(write(src.path(), &name, &doc));
            expected.push((name, doc));
        }
        jobs.push((files, expected));
    }
    let committed0 = rx.stats.docs_committed.load(Ordering::Relaxed);
    let t = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (s, (files, expected)) in jobs.into_iter().enumerate() {
        let rx = rx.clone();
        tasks.spawn(async move {
            let (n, m) = (1 + (s % 2) as u8, 1 + (s / 2 % 2) as u8);
            let mut cfg = rx.config(Mode::Sieve, n, m, Split::Dynamic, BatchSplit::Dynamic);
            cfg.idle_timeout = Duration::from_secs(60);
            let t = Instant::now();
            rx.send_ok(&cfg, &files).await;
            (t.elapsed(), expected)
        });
    }
    let mut session_ms = Vec::new();
    let mut all_expected = Vec::new();
    while let Some(r) = tasks.join_next().await {
        let (d, expected) = r.expect("a sender panicked");
        session_ms.push(d.as_secs_f64() * 1000.0);
        all_expected.extend(expected);
    }
    let wall = t.elapsed();
    // Every document byte-identical, exactly once, none lost.
    let n = senders * docs;
    assert_eq!(
        rx.stats.docs_committed.load(Ordering::Relaxed) - committed0,
        n,
        "documents committed in this round"
    );
    for (name, doc) in &all_expected {
        rx.assert_received(name, doc);
    }
    let prefix = format!("r{r}-");
    let names: Vec<String> = rx
        .out_names()
        .into_iter()
        .filter(|f| f.starts_with(&prefix))
        .collect();
    assert_eq!(
        names.len() as u64,
        n,
        "files of round {r} in the output folder"
    );
    assert!(partials(&rx.out).is_empty());
    // Free the tmpfs for the next round.
    for name in names {
        std::fs::remove_file(rx.out.join(name)).unwrap();
    }
    RoundFigures {
        docs: n,
        bytes,
        wall,
        session_ms,
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

async fn run(rounds_or_secs: impl Fn(u64, Instant) -> bool, senders: u64, docs: u64) {
    // Every sender shares 127.0.0.1: allow each of them its session.
    let rx = Arc::new(
        TestReceiver::start_with(fast_tempdir(), |c| c.limits.max_sessions_per_client = 64).await,
    );
    let base = Arc::new(filler(99, 400_000));
    let (rss0, fd0) = (rss(), fd_count());
    let stop = Arc::new(AtomicBool::new(false));
    let (peak_rss, peak_fd) = (
        Arc::new(AtomicU64::new(rss0)),
        Arc::new(AtomicU64::new(fd0)),
    );
    let sampler = {
        let (stop, pr, pf) = (stop.clone(), peak_rss.clone(), peak_fd.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                pr.fetch_max(rss(), Ordering::Relaxed);
                pf.fetch_max(fd_count(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let t0 = Instant::now();
    let (mut docs_total, mut bytes_total, mut wall) = (0, 0, Duration::ZERO);
    let mut ms = Vec::new();
    let mut r = 0;
    while rounds_or_secs(r, t0) {
        let f = round(&rx, &base, r, senders, docs).await;
        docs_total += f.docs;
        bytes_total += f.bytes;
        wall += f.wall;
        ms.extend(f.session_ms);
        r += 1;
        if r % 25 == 0 {
            // A trend over a long run shows whether memory is leaking or only reused.
            eprintln!(
                "load: after round {r}: resident memory {} MiB, fds {}",
                rss() >> 20,
                fd_count()
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    sampler.await.unwrap();
    ms.sort_by(f64::total_cmp);
    let st = &rx.stats;
    assert_eq!(st.docs_failed.load(Ordering::Relaxed), 0);
    assert_eq!(st.sessions_failed.load(Ordering::Relaxed), 0);
    eprintln!(
        "load: {r} round(s) of {senders} senders x {docs} documents: {docs_total} documents, {:.1} MB in {:.2} s \
         = {:.1} MB/s, {:.0} documents/s; session time p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms; \
         resident memory {} -> peak {} MiB; fds {fd0} -> peak {}; documents lost 0, duplicated 0",
        bytes_total as f64 / 1e6,
        wall.as_secs_f64(),
        bytes_total as f64 / 1e6 / wall.as_secs_f64(),
        docs_total as f64 / wall.as_secs_f64(),
        percentile(&ms, 0.5),
        percentile(&ms, 0.99),
        ms.last().copied().unwrap_or(0.0),
        rss0 >> 20,
        peak_rss.load(Ordering::Relaxed) >> 20,
        peak_fd.load(Ordering::Relaxed),
    );
}

/// This process's soft limit of open files.
fn fd_limit() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
        .unwrap_or(u64::MAX)
}

/// Senders that fit the descriptor limit: the receiver holds a temporary file per document in
/// flight, so 64 x 50 needs about 4 100 descriptors in this one process (both ends).
fn fitting_senders(senders: u64, docs: u64) -> u64 {
    let limit = fd_limit();
    let per_sender = docs + 12;
    let fit = (limit.saturating_sub(200) / per_sender).max(1);
    if fit < senders {
        eprintln!(
            "load: only {fit} senders fit the open-file limit of {limit} (raise it with `ulimit -n 8192` \
             to run all {senders})"
        );
    }
    senders.min(fit)
}

/// CI: one round of 64 senders x 50 documents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_senders_fifty_documents_each() {
    let docs = env("SIEVE_LOAD_DOCS", 50);
    let senders = fitting_senders(env("SIEVE_LOAD_SENDERS", 64), docs);
    run(|r, _| r == 0, senders, docs).await;
}

/// The long run: rounds of the CI load for `SIEVE_SOAK_SECS` seconds (default 600).
#[tokio::test(flavor = "multi_thread")]
#[ignore = "long soak; run with --ignored (see RELIABILITY.md)"]
async fn soak() {
    let secs = env("SIEVE_SOAK_SECS", 600);
    let docs = env("SIEVE_LOAD_DOCS", 50);
    let senders = fitting_senders(env("SIEVE_LOAD_SENDERS", 64), docs);
    run(
        move |_, t0| t0.elapsed() < Duration::from_secs(secs),
        senders,
        docs,
    )
    .await;
}
