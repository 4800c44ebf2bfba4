//! NH-Poly1305: the universal hash of Adiantum (Crowley and Biggers, "Adiantum: length-preserving
//! encryption for entry-level processors", IACR ToSC 2018), which the cleartext MAC
//! [`sieve_core::mac::MacAlg::NhPoly1305`] adds a pseudorandom pad to.
//!
//! Why this hash: on a CPU without carry-less multiply, GHASH runs in software and GMAC becomes
//! the slowest of the MACs offered, while the sieve's cleartext still has to be tagged at both ends at the
//! speed the network moves it. NH needs nothing but 32-bit additions and 32×32→64-bit
//! multiplications, which every SIMD unit has (SSE2, AVX2, AVX-512, NEON): it was designed for
//! exactly the devices without AES instructions where the sieve pays. It compresses each 1 KiB
//! of the message to 32 bytes, and Poly1305 hashes those, so Poly1305's cost is a
//! thirty-second of the message's.
//!
//! The construction, as Adiantum (and Linux's `nhpoly1305`) specifies it:
//! * the message is zero-padded to a multiple of 16 bytes and cut into chunks of at most 1 KiB;
//! * NH of a chunk, with key words `K` and message words `M` (little-endian `u32`), is four
//!   64-bit sums, one per pass `p`: `Σ (M[4i] + K[4i+4p]) · (M[4i+2] + K[4i+4p+2]) +
//!   (M[4i+1] + K[4i+4p+1]) · (M[4i+3] + K[4i+4p+3])` over the chunk's 16-byte units `i`,
//!   additions mod 2³², sums mod 2⁶⁴; the four little-endian sums are the chunk's 32 bytes;
//! * Poly1305 under `r` hashes the concatenated chunk hashes and adds `s`.
//!
//! The key is 16 bytes of `r` followed by 1072 bytes of NH key (1 KiB plus 16 bytes for each
//! of the three later passes). The zero padding makes messages that differ only in trailing
//! zeros collide, so the MAC binds the length elsewhere (in the pad's input).
//!
//! NH runs on AVX-512 or AVX2 when the CPU has them (detected at run time), else on portable
//! code; all give the same sums (property tests check each against NH's definition).

use poly1305::universal_hash::{KeyInit, UniversalHash};
use poly1305::{Block, Poly1305};

/// Bytes of one NH unit: four 32-bit words, the two pairs NH multiplies.
const UNIT: usize = 16;
/// The longest message one NH call hashes: 64 units.
const CHUNK: usize = 1024;
/// NH's passes, each with the key shifted by one unit (a Toeplitz extension to 128 bits).
const PASSES: usize = 4;
/// Words of NH key: one chunk plus a unit for each later pass.
const KEY_WORDS: usize = (CHUNK + UNIT * (PASSES - 1)) / 4;
/// Bytes of the whole key: Poly1305's `r`, then the NH key.
pub const KEY_BYTES: usize = 16 + KEY_WORDS * 4;

/// An NH-Poly1305 key, ready to hash.
pub struct NhPoly1305 {
    /// Poly1305's `r` (clamped by Poly1305 itself).
    r: [u8; 16],
    /// The NH key's words, each unit's four in the order 0, 2, 1, 3: the order the SIMD code
    /// multiplies in, so that it needs no shuffle of the key (see [`Words`]).
    key: [u32; KEY_WORDS],
}

impl NhPoly1305 {
    /// The hash keyed with `key`: `r` (16 bytes), then the NH key (1072 bytes), as Adiantum
    /// lays them out.
    pub fn new(key: &[u8; KEY_BYTES]) -> NhPoly1305 {
        let mut r = [0u8; 16];
        r.copy_from_slice(&key[..16]);
        let mut words = [0u32; KEY_WORDS];
        for (w, b) in words.iter_mut().zip(key[16..].chunks_exact(4)) {
            *w = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        for unit in words.chunks_exact_mut(4) {
            unit.swap(1, 2);
        }
        NhPoly1305 { r, key: words }
    }

    /// The hash of `msg` plus `s` (mod 2¹²⁸): Poly1305 under `(r, s)` of the NH hashes of `msg`'s
    /// chunks. With `s` all zero this is Adiantum's NH-Poly1305 of `msg`.
    pub fn hash(&self, msg: &[u8], s: &[u8; 16]) -> [u8; 16] {
        self.hash_on(Isa::detect(), msg, s)
    }

    /// [`NhPoly1305::hash`] with NH on `isa`, or `None` if this CPU lacks it: for benchmarks
    /// and tests, which compare the instruction sets on one machine.
    pub fn hash_with(&self, isa: Isa, msg: &[u8], s: &[u8; 16]) -> Option<[u8; 16]> {
        isa.supported().then(|| self.hash_on(isa, msg, s))
    }

    /// The hash, NH on `nh` (which the CPU must support).
    fn hash_on(&self, nh: Isa, msg: &[u8], s: &[u8; 16]) -> [u8; 16] {
        let mut key = [0u8; 32];
        key[..16].copy_from_slice(&self.r);
        key[16..].copy_from_slice(s);
        let mut poly = Poly1305::new(&key.into());
        // NH hashes wait here to reach Poly1305 in batches: its vector code takes four blocks
        // at a time, and each chunk gives two.
        let mut blocks = [Block::default(); BATCH];
        let mut filled = 0;
        let mut chunks = msg.chunks_exact(CHUNK);
        let mut padded = [0u8; CHUNK];
        let rest = chunks.remainder();
        let last = (!rest.is_empty()).then(|| {
            // The last chunk, zero-padded to whole units.
            padded[..rest.len()].copy_from_slice(rest);
            &padded[..rest.len().div_ceil(UNIT) * UNIT]
        });
        for chunk in (&mut chunks).chain(last) {
            let sums = nh.sums(&self.key, chunk);
            for (half, pair) in blocks[filled..filled + 2]
                .iter_mut()
                .zip(sums.chunks_exact(2))
            {
                half[..8].copy_from_slice(&pair[0].to_le_bytes());
                half[8..].copy_from_slice(&pair[1].to_le_bytes());
            }
            filled += 2;
            if filled == BATCH {
                poly.update(&blocks);
                filled = 0;
            }
        }
        poly.update(&blocks[..filled]);
        poly.finalize().into()
    }
}

/// Poly1305 blocks fed at once: the NH hashes of 32 chunks.
const BATCH: usize = 64;

/// Key words as [`NhPoly1305::key`] keeps them: each unit's in the order 0, 2, 1, 3.
type Words = [u32; KEY_WORDS];

/// The instruction sets NH has code for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// Portable Rust (which the compiler vectorises for the build's target).
    Portable,
    /// x86-64 AVX2: two units per step.
    Avx2,
    /// x86-64 AVX-512F: four units per step.
    Avx512,
}

impl Isa {
    /// Every instruction set, slowest first.
    pub const ALL: [Isa; 3] = [Isa::Portable, Isa::Avx2, Isa::Avx512];

    /// The fastest this CPU supports (`std`'s detection caches its answer).
    pub fn detect() -> Isa {
        [Isa::Avx512, Isa::Avx2]
            .into_iter()
            .find(|i| i.supported())
            .unwrap_or(Isa::Portable)
    }

    /// Whether this CPU runs it.
    pub fn supported(self) -> bool {
        match self {
            Isa::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => std::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => std::is_x86_feature_detected!("avx512f"),
            #[cfg(not(target_arch = "x86_64"))]
            Isa::Avx2 | Isa::Avx512 => false,
        }
    }

    /// NH of `chunk` (a whole number of units, at most [`CHUNK`] bytes). An instruction set
    /// the CPU lacks runs the portable code instead.
    fn sums(self, key: &Words, chunk: &[u8]) -> [u64; PASSES] {
        debug_assert!(chunk.len().is_multiple_of(UNIT) && chunk.len() <= CHUNK);
        match self {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the CPU said it has AVX2 (`supported`), all `x86::avx2` asks of its caller.
            #[allow(unsafe_code)]
            Isa::Avx2 if self.supported() => unsafe { x86::avx2(key, chunk) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above, for AVX-512F.
            #[allow(unsafe_code)]
            Isa::Avx512 if self.supported() => unsafe { x86::avx512(key, chunk) },
            _ => portable(key, chunk),
        }
    }
}

/// NH of `chunk` in portable code: the definition, unit by unit.
fn portable(key: &[u32], chunk: &[u8]) -> [u64; PASSES] {
    let mut sums = [0u64; PASSES];
    for (i, unit) in chunk.chunks_exact(UNIT).enumerate() {
        let m = |j: usize| {
            u32::from_le_bytes([
                unit[4 * j],
                unit[4 * j + 1],
                unit[4 * j + 2],
                unit[4 * j + 3],
            ])
        };
        let (m0, m1, m2, m3) = (m(0), m(1), m(2), m(3));
        for (p, sum) in sums.iter_mut().enumerate() {
            // The key's unit i + p, its words kept in the order 0, 2, 1, 3.
            let k = &key[4 * (i + p)..4 * (i + p) + 4];
            let a = u64::from(m0.wrapping_add(k[0])) * u64::from(m2.wrapping_add(k[1]));
            let b = u64::from(m1.wrapping_add(k[2])) * u64::from(m3.wrapping_add(k[3]));
            *sum = sum.wrapping_add(a).wrapping_add(b);
        }
    }
    sums
}

/// NH with x86-64 vector instructions. Each 16-byte unit of the message is shuffled to the
/// order 0, 2, 1, 3 of its words (the key already is), so that one 32-bit addition puts each
/// product's two factors side by side in a 64-bit lane, a shift brings the second down, and
/// one unsigned 32×32→64-bit multiplication per lane gives both of the unit's products.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod x86 {
    use super::{portable, Words, PASSES, UNIT};
    use std::arch::x86_64::*;

    /// Word order 0, 2, 1, 3 within each 128-bit lane.
    const SHUFFLE: i32 = 0b11_01_10_00;

    /// NH on AVX2, two units per step.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn avx2(key: &Words, chunk: &[u8]) -> [u64; PASSES] {
        const STEP: usize = 2 * UNIT;
        let whole = chunk.len() / STEP * STEP;
        let mut acc = [_mm256_setzero_si256(); PASSES];
        let mut i = 0;
        while i < whole {
            // SAFETY: `i + 32 <= whole <= chunk.len()`, so the 32 bytes read are the chunk's;
            // `loadu` takes any alignment.
            let m = unsafe { _mm256_loadu_si256(chunk.as_ptr().add(i).cast()) };
            let m = _mm256_shuffle_epi32::<SHUFFLE>(m);
            for (p, acc) in acc.iter_mut().enumerate() {
                // Key units i/16 + p and the next: at most 63 + 3 = 66, whose words end at
                // 4 · 67 = KEY_WORDS.
                let k = &key[4 * (i / UNIT + p)..4 * (i / UNIT + p) + 8];
                // SAFETY: `k` is eight words, the 32 bytes read.
                let k = unsafe { _mm256_loadu_si256(k.as_ptr().cast()) };
                let t = _mm256_add_epi32(m, k);
                let prod = _mm256_mul_epu32(t, _mm256_srli_epi64::<32>(t));
                *acc = _mm256_add_epi64(*acc, prod);
            }
            i += STEP;
        }
        let mut sums = [0u64; PASSES];
        for (sum, acc) in sums.iter_mut().zip(acc) {
            let mut lanes = [0u64; 4];
            // SAFETY: `lanes` is 32 bytes, the store's width; `storeu` takes any alignment.
            unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), acc) };
            *sum = lanes.iter().fold(0u64, |s, &l| s.wrapping_add(l));
        }
        tail(key, chunk, whole, sums)
    }

    /// NH on AVX-512, four units per step.
    ///
    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn avx512(key: &Words, chunk: &[u8]) -> [u64; PASSES] {
        const STEP: usize = 4 * UNIT;
        let whole = chunk.len() / STEP * STEP;
        let mut acc = [_mm512_setzero_si512(); PASSES];
        let mut i = 0;
        while i < whole {
            // SAFETY: `i + 64 <= whole <= chunk.len()`; `loadu` takes any alignment.
            let m = unsafe { _mm512_loadu_si512(chunk.as_ptr().add(i).cast()) };
            let m = _mm512_shuffle_epi32::<SHUFFLE>(m);
            for (p, acc) in acc.iter_mut().enumerate() {
                // Units i/16 + p to i/16 + p + 3: at most 60 + 3 + 3 = 66, within the key.
                let k = &key[4 * (i / UNIT + p)..4 * (i / UNIT + p) + 16];
                // SAFETY: `k` is sixteen words, the 64 bytes read.
                let k = unsafe { _mm512_loadu_si512(k.as_ptr().cast()) };
                let t = _mm512_add_epi32(m, k);
                let prod = _mm512_mul_epu32(t, _mm512_srli_epi64::<32>(t));
                *acc = _mm512_add_epi64(*acc, prod);
            }
            i += STEP;
        }
        let mut sums = [0u64; PASSES];
        for (sum, acc) in sums.iter_mut().zip(acc) {
            *sum = _mm512_reduce_add_epi64(acc) as u64;
        }
        tail(key, chunk, whole, sums)
    }

    /// The units from byte `from` on, in portable code, added to `sums`: NH is a sum over
    /// units, so the tail's part is NH of the tail alone with the key from its first unit on.
    fn tail(key: &Words, chunk: &[u8], from: usize, sums: [u64; PASSES]) -> [u64; PASSES] {
        if from == chunk.len() {
            return sums;
        }
        let rest = portable(&key[4 * (from / UNIT)..], &chunk[from..]);
        let mut out = sums;
        for (o, r) in out.iter_mut().zip(rest) {
            *o = o.wrapping_add(r);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key_from(seed: u8) -> [u8; KEY_BYTES] {
        let mut k = [0u8; KEY_BYTES];
        for (i, b) in k.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8;
        }
        k
    }

    /// NH straight from its definition, on the key as Adiantum lays it out (words in order).
    fn nh_reference(key: &[u8], chunk: &[u8]) -> [u64; PASSES] {
        let w = |b: &[u8], j: usize| u32::from_le_bytes(b[4 * j..4 * j + 4].try_into().unwrap());
        let mut sums = [0u64; PASSES];
        for i in 0..chunk.len() / UNIT {
            for (p, sum) in sums.iter_mut().enumerate() {
                let k = |j| w(key, 4 * (i + p) + j);
                let m = |j| w(chunk, 4 * i + j);
                let a = u64::from(m(0).wrapping_add(k(0))) * u64::from(m(2).wrapping_add(k(2)));
                let b = u64::from(m(1).wrapping_add(k(1))) * u64::from(m(3).wrapping_add(k(3)));
                *sum = sum.wrapping_add(a).wrapping_add(b);
            }
        }
        sums
    }

    /// Known answers of an independent implementation of Adiantum's definition (big-integer
    /// Poly1305, NH word by word), for this file's `key_from` keys and messages of `i · 7 mod
    /// 256`: lengths across a unit, a chunk and their padding.
    #[test]
    fn known_answers() {
        let cases: [(u8, usize, &str); 6] = [
            (0, 0, "00000000000000000000000000000000"),
            (1, 1, KAT_1),
            (2, 16, KAT_16),
            (3, 1000, KAT_1000),
            (4, 1024, KAT_1024),
            (5, 3000, KAT_3000),
        ];
        for (seed, len, want) in cases {
            let msg: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let got = NhPoly1305::new(&key_from(seed)).hash(&msg, &[0; 16]);
            let hex: String = got.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(hex, want, "seed {seed}, {len} bytes");
        }
    }

    const KAT_1: &str = "745318d06127f127900c4a7ee559804a";
    const KAT_16: &str = "df57418d0b503426ed130f23602bee1c";
    const KAT_1000: &str = "ce8afe612ed8e7fe36bf9a4349db5a1b";
    const KAT_1024: &str = "194c75a16dfddd395a53a78bfe4ae464";
    const KAT_3000: &str = "ad25806b2a727c4052d960b9ccc6f769";

    proptest! {
        /// Every NH code this CPU has gives the definition's sums, for every chunk length.
        #[test]
        fn every_nh_matches_the_definition(
            seed in any::<u8>(),
            units in 1usize..=CHUNK / UNIT,
            fill in any::<u64>(),
        ) {
            let raw = key_from(seed);
            let key = NhPoly1305::new(&raw);
            let chunk: Vec<u8> = (0..units * UNIT)
                .map(|i| (fill.rotate_left(i as u32 % 64) as u8) ^ (i as u8))
                .collect();
            let want = nh_reference(&raw[16..], &chunk);
            for isa in Isa::ALL {
                prop_assert_eq!(isa.sums(&key.key, &chunk), want, "{:?}", isa);
            }
        }

        /// Every instruction set gives the same hash, across chunks and padding.
        #[test]
        fn every_isa_gives_the_same_hash(len in 0usize..5000, seed in any::<u8>()) {
            let key = NhPoly1305::new(&key_from(seed));
            let msg: Vec<u8> = (0..len).map(|i| (i * 11) as u8 ^ seed).collect();
            let want = key.hash(&msg, &[seed; 16]);
            for isa in Isa::ALL.into_iter().filter(|i| i.supported()) {
                prop_assert_eq!(key.hash_with(isa, &msg, &[seed; 16]), Some(want), "{:?}", isa);
            }
        }

        /// The hash changes with any byte of the message, and `s` adds to it.
        #[test]
        fn the_hash_binds_every_byte(len in 1usize..4000, at in any::<prop::sample::Index>()) {
            let key = NhPoly1305::new(&key_from(9));
            let mut msg: Vec<u8> = (0..len).map(|i| (i * 13) as u8).collect();
            let h = key.hash(&msg, &[0; 16]);
            let i = at.index(len);
            msg[i] ^= 1;
            prop_assert_ne!(key.hash(&msg, &[0; 16]), h);
            msg[i] ^= 1;
            let mut s = [0u8; 16];
            s[0] = 1;
            let plus = key.hash(&msg, &s);
            let want = (u128::from_le_bytes(h).wrapping_add(1)).to_le_bytes();
            prop_assert_eq!(plus, want);
        }
    }
}
