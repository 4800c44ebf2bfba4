//! Speed of the default policy on one core: `cargo bench -p sieve-mark --bench mark`.
//!
//! Documents from the seeded generator (`sieve_mark::labelled`): application logs and letters
//! (text), and CSV and NDJSON exports, 16 MiB each, scanned on one thread. The goal is per core
//! (at least 500 MB/s on text and logs), so the time measured is the CPU time of the scanning
//! thread: a machine shared with other work stretches wall time, not this. A bare `memchr`
//! pass over the same bytes, measured in the same run, is the baseline: what merely reading the
//! bytes costs.
//!
//! The generated documents are dense: a planted item every 140 to 180 bytes in logs and
//! letters (an IP address on every request line, a card, a key or a JWT on many others), so the
//! figures are those of a worst case for the detectors, not of an average file.

use std::time::Duration;

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sieve_mark::labelled::{Format, Gen};
use sieve_mark::{Policy, ScanOptions};

/// CPU time of the calling thread.
struct ThreadCpu;

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer to a local.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

static WALL: WallTime = WallTime;

impl Measurement for ThreadCpu {
    type Intermediate = Duration;
    type Value = Duration;
    fn start(&self) -> Duration {
        thread_cpu()
    }
    fn end(&self, i: Duration) -> Duration {
        thread_cpu().saturating_sub(i)
    }
    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }
    fn zero(&self) -> Duration {
        Duration::ZERO
    }
    fn to_f64(&self, v: &Duration) -> f64 {
        v.as_nanos() as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        WALL.formatter()
    }
}

fn bench(c: &mut Criterion<ThreadCpu>) {
    let policy = Policy::default_policy();
    let size = 16 << 20;
    let mut g = c.benchmark_group("default-policy-one-core");
    g.sample_size(15);
    for (label, f) in [
        ("log", Format::Log),
        ("text", Format::Prose),
        ("csv", Format::Csv),
        ("ndjson", Format::Ndjson),
    ] {
        let doc = Gen::new(1).document(f, size).bytes;
        g.throughput(Throughput::Bytes(doc.len() as u64));
        let opts = ScanOptions {
            threads: 1,
            name: Some(f.file_name().to_string()),
            ..ScanOptions::default()
        };
        g.bench_with_input(BenchmarkId::new("mark", label), &doc, |b, doc| {
            b.iter(|| policy.scan_slice(doc, &opts).spans.len())
        });
        g.bench_with_input(
            BenchmarkId::new("memchr-baseline", label),
            &doc,
            |b, doc| b.iter(|| memchr::memchr_iter(0, doc).count()),
        );
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpu);
    targets = bench
}
criterion_main!(benches);
