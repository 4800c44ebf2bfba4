//! Split and combine costs, named after the thesis tables they stand beside.
//!
//! * `T5.2/{ES,SS}/{split,combine}`: Table 5.2, a 10MB-50 document over two channels
//!   (thesis: ES 0.24 / 13.5 ms, SS 0.36 / 0.14 ms).
//! * `TB.1/BFS`, `TB.2/BSS`, `TB.3/BES` `/k={2,3,5}/{split,combine}`: Tables B.1-B.3, the
//!   uneven file set UFS = {1MB-10, 10MB-50, 1MB-90} with N = M = k (thesis: BFS 0.12-0.14 /
//!   0.05-0.07 ms, BSS 0.38-0.39 / 0.14-0.26 ms, BES 0.18-0.28 / 18.9-22.6 ms).
//! * `T5.2/dynamic/...` and `TB/dynamic/...`: our default chunk scheduler on the same data.
//!
//! As in Appendix B, every figure is both kinds together: the plain and the secure list.
//! *split* = computing the plans and the zero-copy slices each channel's send loop writes;
//! *combine* = recomputing the plans from the lengths (the receiver has no `order` string) and
//! rebuilding every stream from contiguous per-channel buffers. Our combine copies every byte
//! into a fresh buffer; the thesis's SS combine only moved `String` references back into a list.

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion};
use sieve_core::batch::{batch_even_split, batch_file_split, batch_segment_split};
use sieve_core::chunk::{ChunkScheduler, Reassembler};
use sieve_core::split::{channel_bytes, channel_slices, combine, even_split, segment_split};
use sieve_core::{Piece, Plan};

const MB: u64 = 1_000_000;
/// Chunk size of the dynamic scheduler in these benchmarks.
const CHUNK: u64 = 64 * 1024;

/// Segment lengths of an xMB-P file per kind (§5.1.2): each MB is five times
/// [plain (1-P)·MB/5, secure P·MB/5], and the xMB file is that MB repeated x times.
/// Returns (plain list, secure list).
fn x_p(x: u64, p_percent: u64) -> (Vec<u64>, Vec<u64>) {
    let secure = MB * p_percent / 100 / 5;
    let plain = MB / 5 - secure;
    let n = (5 * x) as usize;
    (vec![plain; n], vec![secure; n])
}

fn stream(len: u64, salt: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ salt)
        .collect()
}

/// One kind's batch: per document, its segment lengths and its stream.
struct Kind {
    docs: Vec<Vec<u64>>,
    streams: Vec<Vec<u8>>,
}

impl Kind {
    fn new(docs: Vec<Vec<u64>>, salt: u8) -> Kind {
        let streams = docs.iter().map(|d| stream(d.iter().sum(), salt)).collect();
        Kind { docs, streams }
    }
    fn refs(&self) -> Vec<&[u8]> {
        self.streams.iter().map(Vec::as_slice).collect()
    }
    fn lens(&self) -> Vec<u64> {
        self.streams.iter().map(|s| s.len() as u64).collect()
    }
}

fn configure<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
    let mut g = c.benchmark_group(name);
    g.sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    g
}

/// Bench split and combine of `algo` over both kinds of a batch.
fn split_and_combine(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    kinds: &[Kind; 2],
    algo: impl Fn(&[Vec<u64>]) -> Plan,
) {
    g.bench_function(format!("{name}/split"), |b| {
        b.iter(|| {
            for kind in kinds {
                let plan = algo(black_box(&kind.docs));
                black_box(channel_slices(&plan, &kind.refs()));
            }
        })
    });
    let wire: Vec<Vec<Vec<u8>>> = kinds
        .iter()
        .map(|k| channel_bytes(&algo(&k.docs), &k.refs()))
        .collect();
    // Check once that the benchmark measures a correct combine.
    for (kind, w) in kinds.iter().zip(&wire) {
        let w: Vec<&[u8]> = w.iter().map(Vec::as_slice).collect();
        assert_eq!(
            combine(&algo(&kind.docs), &w, &kind.lens()).unwrap(),
            kind.streams
        );
    }
    g.bench_function(format!("{name}/combine"), |b| {
        b.iter(|| {
            for (kind, w) in kinds.iter().zip(&wire) {
                let plan = algo(black_box(&kind.docs));
                let w: Vec<&[u8]> = w.iter().map(Vec::as_slice).collect();
                black_box(combine(&plan, &w, &kind.lens()).unwrap());
            }
        })
    });
}

/// The dynamic scheduler: chunks handed round-robin to `k` channels (as if equally fast), and
/// the receiver placing each chunk by `(doc, offset)`.
fn dynamic(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, kinds: &[Kind; 2], k: usize) {
    g.bench_function(format!("{name}/split"), |b| {
        b.iter(|| {
            for kind in kinds {
                let refs = kind.refs();
                let mut channels: Vec<Vec<(Piece, &[u8])>> = vec![Vec::new(); k];
                for (i, piece) in ChunkScheduler::new(&kind.lens(), CHUNK).enumerate() {
                    let s = refs[piece.doc as usize];
                    let bytes = &s[piece.offset as usize..(piece.offset + piece.len) as usize];
                    channels[i % k].push((piece, bytes));
                }
                black_box(channels);
            }
        })
    });
    let received: Vec<Vec<(Piece, &[u8])>> = kinds
        .iter()
        .map(|kind| {
            ChunkScheduler::new(&kind.lens(), CHUNK)
                .map(|p| {
                    let s = &kind.streams[p.doc as usize];
                    (p, &s[p.offset as usize..(p.offset + p.len) as usize])
                })
                .collect()
        })
        .collect();
    g.bench_function(format!("{name}/combine"), |b| {
        b.iter(|| {
            for (kind, pieces) in kinds.iter().zip(&received) {
                let mut r = Reassembler::new(&kind.lens());
                for &(piece, bytes) in pieces {
                    r.place(piece, bytes).unwrap();
                }
                black_box(r.into_streams().unwrap());
            }
        })
    });
}

fn table_5_2(c: &mut Criterion) {
    let (plain, secure) = x_p(10, 50);
    let kinds = [Kind::new(vec![plain], 0x00), Kind::new(vec![secure], 0x5a)];
    let mut g = configure(c, "T5.2");
    split_and_combine(&mut g, "ES", &kinds, |d| even_split(&d[0], 2));
    split_and_combine(&mut g, "SS", &kinds, |d| segment_split(&d[0], 2));
    dynamic(&mut g, "dynamic", &kinds, 2);
    g.finish();
}

fn tables_b(c: &mut Criterion) {
    let ufs = [x_p(1, 10), x_p(10, 50), x_p(1, 90)];
    let kinds = [
        Kind::new(ufs.iter().map(|(p, _)| p.clone()).collect(), 0x00),
        Kind::new(ufs.iter().map(|(_, s)| s.clone()).collect(), 0x5a),
    ];
    for (table, name, algo) in [
        (
            "TB.1",
            "BFS",
            batch_file_split::<Vec<u64>> as fn(&[Vec<u64>], usize) -> Plan,
        ),
        ("TB.2", "BSS", batch_segment_split::<Vec<u64>>),
        ("TB.3", "BES", batch_even_split::<Vec<u64>>),
    ] {
        let mut g = configure(c, table);
        for k in [2, 3, 5] {
            split_and_combine(&mut g, &format!("{name}/k={k}"), &kinds, |d| algo(d, k));
        }
        g.finish();
    }
    let mut g = configure(c, "TB");
    dynamic(&mut g, "dynamic/k=2", &kinds, 2);
    g.finish();
}

criterion_group!(benches, table_5_2, tables_b);
criterion_main!(benches);
