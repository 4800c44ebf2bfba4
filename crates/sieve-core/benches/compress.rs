//! Compression and decompression speed of one plain frame per zstd level, on each kind of
//! document `sieve gen` writes.
//!
//! * `compress/{kind}/zstd{level}`: [`Encoder::compress`] of one frame, the sender's cost per
//!   frame (throughput in plain bytes);
//! * `decompress/{kind}/zstd{level}`: [`Decoder::decompress_into`] of that frame, the receiver's
//!   cost (throughput in plain bytes out).
//!
//! * `fields/{kind}/encode` and `fields/{kind}/decode`: the field code
//!   ([`sieve_core::compress::fields`]) on 1 MiB of the classified values of a `kind` document
//!   at P = 0.1, as `--compress-classified` codes runs of short values (throughput in plain
//!   bytes; the coded size is printed first).
//!
//! The frame is the cleartext of a document at P = 0.1 (the classified bytes taken out, as the
//! plain channels carry it), 4 MiB, the size of the sender's cleartext chunks on large
//! documents. The compressed size of each is printed once before its benchmarks, so one run
//! gives speed and ratio together. These are the C_L and D of `compress::auto` on this machine.
//!
//! The x-P letters repeat their 1 MB block (§5.1.2), so a 4 MiB frame of them holds the same
//! megabyte four times and levels whose window spans it find that: their ratio says more about
//! the x-P construction than about text.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sieve_core::compress::{fields, Codec, Decoder, Encoded, Encoder, FrameCodec};
use sieve_core::corpus::{self, DocKind};

const FRAME: usize = 4 << 20;
const LEVELS: [i32; 4] = [1, 3, 9, 19];

/// 4 MiB of the plain stream of a `kind` document at P = 0.1.
fn plain_stream(kind: DocKind) -> Vec<u8> {
    let mut doc = Vec::new();
    let mut ranges = Vec::new();
    let size = (FRAME as u64) * 12 / 10 + (1 << 20);
    corpus::write(kind, size, 0.1, 1, false, &mut doc, |r| ranges.push(r))
        .expect("writing to memory cannot fail");
    let mut plain = Vec::with_capacity(doc.len());
    let mut at = 0usize;
    for r in ranges {
        plain.extend_from_slice(&doc[at..r.start as usize]);
        at = r.end as usize;
    }
    plain.extend_from_slice(&doc[at..]);
    plain.truncate(FRAME);
    assert_eq!(plain.len(), FRAME, "{kind}: not enough cleartext");
    plain
}

/// 1 MiB of the classified stream of a `kind` document at P = 0.1 (its values one after the
/// other, as the secure channels carry them).
fn classified_stream(kind: DocKind) -> Vec<u8> {
    const N: usize = 1 << 20;
    let mut doc = Vec::new();
    let mut ranges = Vec::new();
    corpus::write(kind, 16 << 20, 0.1, 1, false, &mut doc, |r| ranges.push(r))
        .expect("writing to memory cannot fail");
    let mut classified = Vec::with_capacity(N);
    for r in ranges {
        classified.extend_from_slice(&doc[r.start as usize..r.end as usize]);
    }
    classified.truncate(N);
    assert_eq!(classified.len(), N, "{kind}: not enough classified bytes");
    classified
}

fn bench_fields(c: &mut Criterion) {
    for kind in DocKind::ALL {
        let values = classified_stream(kind);
        let mut packed = Vec::new();
        fields::encode(&values, &mut packed);
        eprintln!(
            "ratio {kind} fields: {} / {} = {:.3}",
            packed.len(),
            values.len(),
            packed.len() as f64 / values.len() as f64
        );
        let mut g = c.benchmark_group(format!("fields/{kind}"));
        g.throughput(Throughput::Bytes(values.len() as u64));
        g.sample_size(20);
        g.warm_up_time(Duration::from_secs(1));
        g.measurement_time(Duration::from_secs(3));
        let mut out = Vec::new();
        g.bench_function("encode", |b| {
            b.iter(|| fields::encode(black_box(&values), &mut out))
        });
        let mut dec = Decoder::new(values.len()).expect("a decoder");
        g.bench_function("decode", |b| {
            b.iter(|| {
                dec.decompress_into(
                    FrameCodec::Fields,
                    black_box(&packed),
                    values.len() as u64,
                    &mut out,
                )
                .unwrap()
            })
        });
        g.finish();
    }
}

fn bench(c: &mut Criterion) {
    let mut enc = Encoder::new().expect("a zstd context");
    for kind in DocKind::ALL {
        let plain = plain_stream(kind);
        for level in LEVELS {
            let codec = Codec::zstd(level).expect("a valid level");
            let mut packed = Vec::new();
            let encoded = enc
                .compress(&plain, codec, &mut packed)
                .expect("compression succeeds");
            let len = match encoded {
                Encoded::Compressed { len, .. } => len,
                Encoded::Raw { compressed_len } => compressed_len,
            };
            eprintln!(
                "ratio {kind} zstd{level}: {len} / {FRAME} = {:.3}",
                len as f64 / FRAME as f64
            );

            let mut g = c.benchmark_group(format!("compress/{kind}"));
            g.throughput(Throughput::Bytes(FRAME as u64));
            g.sample_size(10);
            g.warm_up_time(Duration::from_secs(1));
            g.measurement_time(Duration::from_secs(if level >= 19 { 12 } else { 4 }));
            let mut out = Vec::new();
            g.bench_function(format!("zstd{level}"), |b| {
                b.iter(|| enc.compress(black_box(&plain), codec, &mut out).unwrap())
            });
            g.finish();

            if let Encoded::Compressed { len, .. } = encoded {
                let mut g = c.benchmark_group(format!("decompress/{kind}"));
                g.throughput(Throughput::Bytes(FRAME as u64));
                g.sample_size(20);
                g.warm_up_time(Duration::from_secs(1));
                g.measurement_time(Duration::from_secs(3));
                let mut dec = Decoder::new(FRAME).expect("a zstd context");
                let mut out = Vec::new();
                g.bench_function(format!("zstd{level}"), |b| {
                    b.iter(|| {
                        dec.decompress_into(
                            codec.into(),
                            black_box(&packed[..len]),
                            FRAME as u64,
                            &mut out,
                        )
                        .unwrap()
                    })
                });
                g.finish();
            }
        }
    }
}

criterion_group!(benches, bench, bench_fields);
criterion_main!(benches);
