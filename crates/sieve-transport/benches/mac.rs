//! The cleartext MACs' speed on one unit, as the transfer tags them.
//!
//! * `mac/{name}`: [`PlainMac::tag`] of a 256 KiB unit ([`MAC_BLOCK`]) for each algorithm the
//!   two ends can negotiate: what each end pays per byte of cleartext. `sieve calibrate`
//!   measures the same to rank them.
//! * `nh-poly1305/{isa}`: the NH-Poly1305 hash of that unit with NH on each instruction set
//!   this CPU has, to compare the vector code with the portable one (devices without AES
//!   instructions are often small ARM cores that run the portable code).
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
}

criterion_group!(benches, macs);
criterion_main!(benches);
