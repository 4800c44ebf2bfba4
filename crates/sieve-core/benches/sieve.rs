//! Sieve and integrate of the thesis's x-P documents (F5.1: sieve 1.72 ms for 1 MB and 16.9 ms
//! for 10 MB; integrate 0.01 / 0.03 ms, which returned list references without copying).
//!
//! Our sieve parses the marks (escapes included) and yields zero-copy segment lists; our
//! integrate copies every byte into one output buffer with the marks restored, which is more
//! work than the thesis's reference shuffle, so it is the honest upper bound.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sieve_core::corpus::DocKind;
use sieve_core::frame::HEADER_LEN;
use sieve_core::gen::{write_xp, XpSpec, MB};
use sieve_core::layout::Kind;
use sieve_core::marks::{self, Collector, MarkConfig};
use sieve_core::marks_fast::{self, Fast};
use sieve_core::marks_parallel::{count_parallel_releasing, parse_parallel, Gather};
use sieve_core::message::golomb::LensCode;
use sieve_core::message::{Doc, DocRef, Manifest};
use sieve_core::sieve::{integrate, sieve_marked, Marks, Placement};

fn doc(size: u64, p: f64) -> Vec<u8> {
    let mut out = Vec::new();
    write_xp(
        XpSpec {
            size,
            proportion: p,
            seed: 1,
        },
        &mut out,
    )
    .expect("in-memory write");
    out
}

fn bench(c: &mut Criterion) {
    let cfg = MarkConfig::default();
    let marks = Marks {
        start: b"<$S>",
        end: b"<$E>",
    };
    let mut g = c.benchmark_group("sieve");
    g.sample_size(30);
    for x in [1u64, 10] {
        for p in [0.1, 0.5, 0.9] {
            let d = doc(x * MB, p);
            let id = format!("{x}MB-{}", (p * 100.0) as u32);
            g.throughput(Throughput::Bytes(d.len() as u64));
            g.bench_with_input(BenchmarkId::new("sieve", &id), &d, |b, d| {
                b.iter(|| sieve_marked(d, &cfg).expect("generated documents are well marked"))
            });
            let s = sieve_marked(&d, &cfg).expect("well marked");
            g.bench_with_input(BenchmarkId::new("integrate", &id), &s, |b, s| {
                b.iter(|| {
                    integrate(&s.layout, &s.secure, &s.plain, Some(marks)).expect("consistent")
                })
            });
        }
    }
    g.finish();
}

/// `size` bytes of a realistic document of `kind`, marked, at P = 0.1 (seed 1).
fn dense_doc(kind: DocKind, size: u64) -> Vec<u8> {
    let mut d = Vec::new();
    sieve_core::corpus::write(kind, size, 0.1, 1, true, &mut d, |_| {}).expect("in-memory write");
    d
}

/// The sender's marks pass over dense documents (a classified value every hundred bytes or so):
/// what `sieve send` does before it can choose or send, on two threads as on this project's
/// machines, from the bytes to the placement the sending walks; and the pass that only counts
/// (`--mode auto` on a dense document). Here the cost is per segment, not per byte.
fn dense(c: &mut Criterion) {
    let cfg = MarkConfig::default();
    let mut g = c.benchmark_group("marks-pass");
    g.sample_size(30);
    // The two dense kinds, and an x-P document (five values per MB) for the sparse case, where
    // the pass costs per byte.
    let docs = [
        (
            format!("{}-8MiB-10", DocKind::Log.name()),
            dense_doc(DocKind::Log, 8 << 20),
        ),
        (
            format!("{}-8MiB-10", DocKind::Csv.name()),
            dense_doc(DocKind::Csv, 8 << 20),
        ),
        ("letters-10MB-10".to_string(), doc(10 * MB, 0.1)),
    ];
    for (id, d) in &docs {
        let id = id.as_str();
        g.throughput(Throughput::Bytes(d.len() as u64));
        g.bench_with_input(BenchmarkId::new("sieve", id), &d, |b, d| {
            b.iter(|| {
                let parsed = parse_parallel(&cfg, d, 2, 1 << 20).expect("well marked");
                Placement::new(&parsed.layout(), Some((4, 4))).expect("fits")
            })
        });
        // What `--mode auto` spends on a dense document it then sends secure-only.
        g.bench_with_input(BenchmarkId::new("count", id), &d, |b, d| {
            b.iter(|| count_parallel_releasing(&cfg, d, 2, 1 << 20, &|_| {}).expect("well marked"))
        });
        // One thread, the general parser against the fast pass that the parallel passes now
        // take for the usual marks: the same events, found by the marks' first byte alone.
        let fast = Fast::new(&cfg).expect("the default marks take the fast pass");
        g.bench_with_input(BenchmarkId::new("count-1t-general", id), &d, |b, d| {
            b.iter(|| marks::count_all(&cfg, d).expect("well marked"))
        });
        // Counted in place, as the parallel count now does, not gathered from events.
        g.bench_with_input(BenchmarkId::new("count-1t-fast", id), &d, |b, d| {
            b.iter(|| marks_fast::count(&fast, d, 8 << 20, &mut |_| {}).expect("well marked"))
        });
        g.bench_with_input(BenchmarkId::new("collect-1t-general", id), &d, |b, d| {
            b.iter(|| marks::parse_all(&cfg, d).expect("well marked"))
        });
        g.bench_with_input(BenchmarkId::new("collect-1t-fast", id), &d, |b, d| {
            b.iter(|| fast_pass::<Collector>(&fast, d))
        });
    }
    g.finish();
}

/// The fast marks pass over a whole well-marked document on one thread, gathered by `G`.
fn fast_pass<G: Gather>(fast: &Fast<'_>, d: &[u8]) -> G::Out {
    let mut g = G::default();
    marks_fast::scan(fast, d, 0, 8 << 20, &mut |ev| g.event(ev), &mut |_| {}).expect("well marked");
    g.finish()
}

/// A dense document's manifest: the sender's encoding (choosing the code's orders, padding to
/// the bucket) and the receiver's parse into a placement. What a layout of hundreds of thousands
/// of segments costs at either end besides its bytes on the wire.
fn manifest(c: &mut Criterion) {
    let cfg = MarkConfig::default();
    let mut g = c.benchmark_group("manifest");
    g.sample_size(20);
    for kind in [DocKind::Text, DocKind::Log] {
        let d = dense_doc(kind, 32 << 20);
        let layout = parse_parallel(&cfg, &d, 2, 1 << 20)
            .expect("well marked")
            .layout();
        let doc = Doc {
            doc: 0,
            name: "doc".into(),
            layout,
            marks: Some((b"<$S>".to_vec(), b"<$E>".to_vec())),
            padding: 0,
        };
        let id = format!("{}-32MiB-10", kind.name());
        // What the code saves on the wire, beside what it costs here.
        let varints: u64 = doc
            .layout
            .lens
            .iter()
            .map(|&l| u64::from((64 - (l | 1).leading_zeros()).div_ceil(7)))
            .sum();
        let code = LensCode::choose(&doc.layout);
        eprintln!(
            "manifest/{id}: {} segments, lengths in {} bytes (orders {} plain, {} classified); \
             as varints {varints} bytes",
            doc.layout.lens.len(),
            code.bytes(&doc.layout),
            code.order(Kind::Plain),
            code.order(Kind::Secure),
        );
        g.throughput(Throughput::Elements(doc.layout.lens.len() as u64));
        g.bench_with_input(BenchmarkId::new("encode", &id), &doc, |b, doc| {
            b.iter(|| {
                let mut m = doc.clone();
                m.pad_to_bucket(u32::MAX);
                let mut out = Vec::new();
                m.encode(&mut out);
                out
            })
        });
        let mut frame = Vec::new();
        doc.encode(&mut frame);
        let payload = &frame[HEADER_LEN..];
        g.bench_with_input(BenchmarkId::new("parse", &id), payload, |b, p| {
            b.iter(|| {
                let m = DocRef::parse(p).expect("a valid manifest");
                Placement::from_manifest(&m, Some((4, 4))).expect("fits")
            })
        });
        // The sender's placement of the same layout.
        g.bench_with_input(BenchmarkId::new("placement", &id), &doc.layout, |b, l| {
            b.iter(|| Placement::new(l, Some((4, 4))).expect("fits"))
        });
        // What a sender does with a layout: its placement, then the manifest from the
        // placement's encoding of the lengths, padded and encoded.
        g.bench_with_input(BenchmarkId::new("sender", &id), &doc, |b, doc| {
            b.iter(|| {
                let p = Placement::new(&doc.layout, None).expect("fits");
                let mut m = Manifest::new(doc.clone(), Some(p.encoded_lens()));
                m.pad_to_bucket(u32::MAX);
                let mut out = Vec::new();
                m.encode(&mut out);
                (p, out)
            })
        });
        // The receiver's walks: every frame of either stream placed, plain frames of 4 MiB and
        // classified ones of 64 KiB (each walk decodes every segment of its range, both kinds).
        let placement = Placement::new(&doc.layout, Some((4, 4))).expect("fits");
        g.bench_with_input(BenchmarkId::new("place", &id), &placement, |b, p| {
            b.iter(|| {
                let mut sum = 0u64;
                for (kind, frame) in [(Kind::Plain, 4u64 << 20), (Kind::Secure, 64 << 10)] {
                    let total = p.stream_len(kind);
                    let mut at = 0;
                    while at < total {
                        let n = frame.min(total - at);
                        p.place(kind, at, n, |o, _, l| sum = sum.wrapping_add(o ^ l))
                            .expect("within the stream");
                        at += n;
                    }
                }
                sum
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench, dense, manifest);
criterion_main!(benches);
