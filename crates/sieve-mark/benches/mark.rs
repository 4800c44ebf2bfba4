//! Speed of the default policy on one core: `cargo bench -p sieve-mark --bench mark`.
//!
//! Documents from the seeded generator (`sieve_mark::labelled`): application logs and letters
//! (text), 16 MiB each, as they would come from disk, scanned on one thread (the goal is per
//! core: at least 500 MB/s). A bare `memchr` pass over the same bytes is the baseline measured
//! in the same run: the speed of reading the bytes at all. CSV and NDJSON, which add the
//! structure passes, are measured beside them.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sieve_mark::labelled::{Format, Gen};
use sieve_mark::{Policy, ScanOptions};

fn bench(c: &mut Criterion) {
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

criterion_group!(benches, bench);
criterion_main!(benches);
