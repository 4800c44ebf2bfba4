//! The cleartext MACs' speed on one unit, as the transfer tags them.
//!
//! * `mac/{name}`: [`PlainMac::tag`] of a 256 KiB unit ([`MAC_BLOCK`]) for each algorithm the
//!   two ends can negotiate: what each end pays per byte of cleartext. `sieve calibrate`
//!   measures the same to rank them.
//! * `nh-poly1305/{isa}`: the NH-Poly1305 hash of that unit with NH on each instruction set
//!   this CPU has, to compare the vector code with the portable one (devices without AES
//!   instructions are often small ARM cores that run the portable code).
//! * `frame-4MiB/{tag-after-frame,tag-as-units-arrive,copy-only}`: a 4 MiB frame copied into
//!   the receiver's buffer and tagged with AES-GMAC once it is all in, or unit by unit as it is
//!   copied (what the receiver does, `FrameTagger`), beside the copy alone. Alone on a core the
//!   two differ little (the frame stays in the last-level cache); under a receiver's real load
//!   they differ more (see `FrameTagger`).
//!
//! Run under `OPENSSL_ia32cap` masks to see GMAC without carry-less multiply (see
//! `bench/mac.sh` for the whole transfer).

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sieve_core::mac::MacAlg;
use sieve_transport::mac::nh::{Isa, NhPoly1305, KEY_BYTES};
use sieve_transport::mac::{PlainMac, MAC_BLOCK};

fn macs(c: &mut Criterion) {
    let unit: Vec<u8> = (0..MAC_BLOCK as usize)
        .map(|i| (i * 7 + i / 251) as u8)
        .collect();
    let mut g = c.benchmark_group("mac");
    g.throughput(Throughput::Bytes(unit.len() as u64))
        .measurement_time(Duration::from_secs(3));
    for alg in MacAlg::ALL {
        let mac = PlainMac::derive_for(alg, &[3; 32], &[4; 16]);
        let mut at = 0u64;
        g.bench_function(alg.name(), |b| {
            b.iter(|| {
                at += MAC_BLOCK;
                black_box(mac.tag(0, at, black_box(&unit)))
            })
        });
    }
    g.finish();

    let hash = NhPoly1305::new(&[0x35; KEY_BYTES]);
    let mut g = c.benchmark_group("nh-poly1305");
    g.throughput(Throughput::Bytes(unit.len() as u64))
        .measurement_time(Duration::from_secs(3));
    for isa in Isa::ALL.into_iter().filter(|i| i.supported()) {
        g.bench_function(format!("{isa:?}").to_lowercase(), |b| {
            b.iter(|| black_box(hash.hash_with(isa, black_box(&unit), &[0; 16])))
        });
    }
    g.finish();

    // A 4 MiB frame arriving: copied in (as the socket's read copies it), then tagged whole
    // once it has all come, or each unit tagged as soon as it has come.
    let frame_len = 4usize << 20;
    let src: Vec<u8> = (0..frame_len).map(|i| (i * 13 + i / 509) as u8).collect();
    let mut buf = vec![0u8; frame_len];
    let mac = PlainMac::derive_for(MacAlg::Gmac, &[3; 32], &[4; 16]);
    let unit = MAC_BLOCK as usize;
    let mut g = c.benchmark_group("frame-4MiB");
    g.throughput(Throughput::Bytes(frame_len as u64))
        .measurement_time(Duration::from_secs(3));
    g.bench_function("tag-after-frame", |b| {
        b.iter(|| {
            buf.copy_from_slice(&src);
            for (i, u) in buf.chunks(unit).enumerate() {
                black_box(mac.tag(0, (i * unit) as u64, u).ok());
            }
        })
    });
    g.bench_function("tag-as-units-arrive", |b| {
        b.iter(|| {
            for (i, (d, s)) in buf.chunks_mut(unit).zip(src.chunks(unit)).enumerate() {
                d.copy_from_slice(s);
                black_box(mac.tag(0, (i * unit) as u64, d).ok());
            }
        })
    });
    g.bench_function("copy-only", |b| {
        b.iter(|| buf.copy_from_slice(black_box(&src)))
    });
    g.finish();
}

criterion_group!(benches, macs);
criterion_main!(benches);
