//! Byte classes of 64 bytes at a time, as bit masks (bit `k` for the `k`-th byte): what the
//! content scan ([`crate::scan`]) needs to know of every byte before it looks closer at a few.
//!
//! Documents are mostly letters and spaces, and a dense log has a candidate every few bytes, so
//! the scan's first step is to tell, for a whole block at once, which bytes are digits, digit
//! separators, trigger bytes (`@`, `:`, `=`), letters, capitals, hexadecimal digits, the
//! capitals that may start a title and the bytes that may start a key prefix. From those masks
//! the scan computes, with a few shifts and additions, where runs of digits start, which keys
//! start with a letter, which colons may start an IPv6 address, and so on (see
//! [`crate::scan`]), instead of asking byte by byte.
//!
//! On x86-64 with AVX-512 (BW and VBMI) a block is one 64-byte load, two lookups of every byte
//! in 128-entry tables of class bits (`vpermi2b`), and one test per class that yields its mask
//! directly; with AVX2 only, two 32-byte loads and a few dozen vector operations; elsewhere, a
//! plain loop computes the same masks (and is what the tests hold the vector code to).

/// The classes of one block of 64 bytes; bit `k` of each mask is about the block's `k`-th byte.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Block {
    /// `0`-`9`.
    pub digit: u64,
    /// Bytes that may join digit groups: space, `-`, `.`, `/`, `(`, `)`.
    pub sep: u64,
    /// `@`.
    pub at: u64,
    /// `:`.
    pub colon: u64,
    /// `=`.
    pub eq: u64,
    /// ASCII letters.
    pub alpha: u64,
    /// `_`.
    pub under: u64,
    /// `A`-`Z`.
    pub upper: u64,
    /// `0`-`9`, `a`-`f`, `A`-`F`.
    pub hex: u64,
    /// `-`.
    pub dash: u64,
    /// `.`.
    pub dot: u64,
    /// `D`, `M`, `P` or `S` followed by one of `a e i r s x` (the start of every title in
    /// [`crate::detect::person::TITLES`]); a capital that is a block's last byte is always
    /// included, its follower being in the next block.
    pub title: u64,
    /// The first bytes of the literal prefixes the classifier was built with (key prefixes).
    pub first: u64,
    /// Their second bytes.
    pub second: u64,
}

/// Separators between digit groups; the scan's `is_sep` says the same.
const SEPS: &[u8] = b" -./()";
/// First and second bytes of the titles.
const TITLE_CAPS: &[u8] = b"DMPS";
const TITLE_SECOND: &[u8] = b"aeirsx";

/// A table for `pshufb`: entry `n` is the one listed byte whose low nibble is `n`, or a byte
/// whose low nibble is not `n` (so that no byte compares equal to it). Every listed byte must be
/// below 0x80 and the low nibbles distinct.
const fn nibble_table(bytes: &[u8]) -> [u8; 16] {
    let mut t = [0u8; 16];
    let mut n = 0;
    while n < 16 {
        t[n] = (n as u8) ^ 1;
        n += 1;
    }
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        assert!(b < 0x80);
        let lo = (b & 15) as usize;
        assert!(
            t[lo] == (lo as u8) ^ 1,
            "two bytes with the same low nibble"
        );
        t[lo] = b;
        i += 1;
    }
    t
}

/// A set of ASCII bytes as two `pshufb` tables: byte `x` is in the set when
/// `lo[x & 15] & hi[x >> 4]` is not zero (`hi` has one bit per high nibble below 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSet {
    lo: [u8; 16],
    hi: [u8; 16],
}

impl ByteSet {
    /// The set of `bytes`; bytes of 0x80 and above cannot be members.
    pub fn new(bytes: &[u8]) -> ByteSet {
        let mut lo = [0u8; 16];
        let mut hi = [0u8; 16];
        for (h, slot) in hi.iter_mut().enumerate().take(8) {
            *slot = 1 << h;
        }
        for &b in bytes {
            assert!(b < 0x80, "byte sets hold ASCII bytes");
            lo[usize::from(b & 15)] |= 1 << (b >> 4);
        }
        ByteSet { lo, hi }
    }

    #[inline]
    pub fn contains(&self, b: u8) -> bool {
        self.lo[usize::from(b & 15)] & self.hi[usize::from(b >> 4)] != 0
    }
}

/// Which bytes may start a key prefix, and how to classify (AVX-512, AVX2 or the plain loop).
#[derive(Debug, Clone)]
pub struct Classifier {
    first: ByteSet,
    second: ByteSet,
    /// Every ASCII byte's classes as bits (see [`Tables`]), for the AVX-512 path.
    tables: Tables,
    #[cfg(target_arch = "x86_64")]
    avx2: bool,
    #[cfg(target_arch = "x86_64")]
    avx512: bool,
}

/// Two tables of 128 bytes: entry `x` holds the classes of byte `x` as bits, the first eight
/// in `lo`, the rest in `hi` (bit positions: the `LO_*` and `HI_*` constants). Bytes of 0x80
/// and above are in no class and have no entry.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
pub struct Tables {
    lo: [u8; 128],
    hi: [u8; 128],
}

const LO_DIGIT: u8 = 1;
const LO_SEP: u8 = 1 << 1;
const LO_AT: u8 = 1 << 2;
const LO_COLON: u8 = 1 << 3;
const LO_EQ: u8 = 1 << 4;
const LO_ALPHA: u8 = 1 << 5;
const LO_UNDER: u8 = 1 << 6;
const LO_UPPER: u8 = 1 << 7;
const HI_HEX: u8 = 1;
const HI_DASH: u8 = 1 << 1;
const HI_DOT: u8 = 1 << 2;
const HI_CAP: u8 = 1 << 3;
const HI_TITLE_SECOND: u8 = 1 << 4;
const HI_FIRST: u8 = 1 << 5;
const HI_SECOND: u8 = 1 << 6;

impl Tables {
    /// The classes of every ASCII byte, by the plain loop's own tests.
    fn new(first: &ByteSet, second: &ByteSet) -> Tables {
        let mut t = Tables {
            lo: [0; 128],
            hi: [0; 128],
        };
        for c in 0u8..128 {
            let bit = |yes: bool, b: u8| if yes { b } else { 0 };
            t.lo[usize::from(c)] = bit(c.is_ascii_digit(), LO_DIGIT)
                | bit(SEPS.contains(&c), LO_SEP)
                | bit(c == b'@', LO_AT)
                | bit(c == b':', LO_COLON)
                | bit(c == b'=', LO_EQ)
                | bit(c.is_ascii_alphabetic(), LO_ALPHA)
                | bit(c == b'_', LO_UNDER)
                | bit(c.is_ascii_uppercase(), LO_UPPER);
            t.hi[usize::from(c)] = bit(c.is_ascii_hexdigit(), HI_HEX)
                | bit(c == b'-', HI_DASH)
                | bit(c == b'.', HI_DOT)
                | bit(TITLE_CAPS.contains(&c), HI_CAP)
                | bit(TITLE_SECOND.contains(&c), HI_TITLE_SECOND)
                | bit(first.contains(c), HI_FIRST)
                | bit(second.contains(c), HI_SECOND);
        }
        t
    }
}

impl Classifier {
    /// A classifier whose `first` and `second` masks hold the bytes of `first` and `second`
    /// (ASCII).
    pub fn new(first: &[u8], second: &[u8]) -> Classifier {
        let (first, second) = (ByteSet::new(first), ByteSet::new(second));
        Classifier {
            first,
            second,
            tables: Tables::new(&first, &second),
            // Runtime detection: the binary runs on any x86-64, the vector paths where it can.
            #[cfg(target_arch = "x86_64")]
            avx2: std::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            avx512: std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512bw")
                && std::is_x86_feature_detected!("avx512vbmi"),
        }
    }

    /// The plain loop only, whatever the CPU (tests compare the paths).
    #[cfg(test)]
    pub fn scalar_only(mut self) -> Classifier {
        #[cfg(target_arch = "x86_64")]
        {
            self.avx2 = false;
            self.avx512 = false;
        }
        self
    }

    /// AVX2 at most, whatever the CPU (tests compare the paths).
    #[cfg(test)]
    pub fn avx2_at_most(mut self) -> Classifier {
        #[cfg(target_arch = "x86_64")]
        {
            self.avx512 = false;
        }
        self
    }

    /// Classify the 64 bytes of `b`.
    #[inline]
    pub fn block(&self, b: &[u8; 64]) -> Block {
        #[cfg(target_arch = "x86_64")]
        if self.avx512 {
            // SAFETY: `avx512` is set only when the CPU reports AVX-512 F, BW and VBMI
            // (`Classifier::new`), the features `avx512::block` is compiled for; it reads
            // nothing outside `b` and `self.tables`.
            return unsafe { avx512::block(b, &self.tables) };
        }
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: `avx2` is set only when the CPU reports AVX2 (`Classifier::new`), which
            // is the one requirement of `avx2::block`; it reads nothing outside `b`.
            return unsafe { avx2::block(b, &self.first, &self.second) };
        }
        scalar(b, &self.first, &self.second)
    }

    /// Classify the blocks of `s` that start at `at`, `at + 64`, ... into `out` (one per
    /// element), as [`Classifier::block_at`] would one by one. The vector path runs as one
    /// loop with its tables in registers, and the scan reads the blocks in place.
    pub fn blocks(&self, s: &[u8], at: isize, out: &mut [Block]) {
        #[cfg(target_arch = "x86_64")]
        if self.avx512 {
            // The blocks wholly inside `s` go through the vector loop; those that reach past
            // either end (only near the ends of a window) one by one.
            let mut k = 0;
            while k < out.len() && !whole(s, at + 64 * k as isize) {
                out[k] = self.block_at(s, at + 64 * k as isize);
                k += 1;
            }
            let mut n = 0;
            while k + n < out.len() && whole(s, at + 64 * (k + n) as isize) {
                n += 1;
            }
            if n > 0 {
                let from = (at + 64 * k as isize) as usize;
                // SAFETY: as in `Classifier::block`: `avx512` is set only when the CPU reports
                // AVX-512 F, BW and VBMI. `s[from..from + 64 * n]` is in bounds: each of those
                // `n` blocks was checked to lie wholly inside `s` (`whole`).
                unsafe {
                    avx512::blocks(&s[from..from + 64 * n], &self.tables, &mut out[k..k + n])
                };
            }
            for (j, slot) in out.iter_mut().enumerate().skip(k + n) {
                *slot = self.block_at(s, at + 64 * j as isize);
            }
            return;
        }
        for (j, slot) in out.iter_mut().enumerate() {
            *slot = self.block_at(s, at + 64 * j as isize);
        }
    }

    /// Classify the 64 bytes of `s` starting at `at`, which may reach past either end of `s`:
    /// bytes outside it count as NUL, which is in no class.
    #[inline]
    pub fn block_at(&self, s: &[u8], at: isize) -> Block {
        if at >= 0 {
            let a = at as usize;
            if let Some(b) = s.get(a..a + 64) {
                if let Ok(b) = <&[u8; 64]>::try_from(b) {
                    return self.block(b);
                }
            }
        }
        let mut buf = [0u8; 64];
        for (k, slot) in buf.iter_mut().enumerate() {
            let p = at + k as isize;
            if p >= 0 {
                if let Some(&c) = s.get(p as usize) {
                    *slot = c;
                }
            }
        }
        self.block(&buf)
    }
}

/// Whether the 64 bytes from `at` lie wholly inside `s`.
#[inline]
fn whole(s: &[u8], at: isize) -> bool {
    at >= 0 && (at as usize).checked_add(64).is_some_and(|e| e <= s.len())
}

/// The masks by a plain loop over the bytes.
pub fn scalar(b: &[u8; 64], first: &ByteSet, second: &ByteSet) -> Block {
    let mut k = Block::default();
    for (i, &c) in b.iter().enumerate() {
        let bit = 1u64 << i;
        let set = |m: &mut u64, yes: bool| {
            if yes {
                *m |= bit;
            }
        };
        set(&mut k.digit, c.is_ascii_digit());
        set(&mut k.sep, SEPS.contains(&c));
        set(&mut k.at, c == b'@');
        set(&mut k.colon, c == b':');
        set(&mut k.eq, c == b'=');
        set(&mut k.alpha, c.is_ascii_alphabetic());
        set(&mut k.under, c == b'_');
        set(&mut k.upper, c.is_ascii_uppercase());
        set(&mut k.hex, c.is_ascii_hexdigit());
        set(&mut k.dash, c == b'-');
        set(&mut k.dot, c == b'.');
        let second_ok = b.get(i + 1).is_none_or(|n| TITLE_SECOND.contains(n));
        set(&mut k.title, TITLE_CAPS.contains(&c) && second_ok);
        set(&mut k.first, first.contains(c));
        set(&mut k.second, second.contains(c));
    }
    k
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{nibble_table, Block, ByteSet, SEPS, TITLE_CAPS, TITLE_SECOND};
    use std::arch::x86_64::*;

    const SEP_TABLE: [u8; 16] = nibble_table(SEPS);
    const CAP_TABLE: [u8; 16] = nibble_table(TITLE_CAPS);
    const SECOND_TABLE: [u8; 16] = nibble_table(TITLE_SECOND);

    /// The bytes of `x` equal to the byte the table lists for their low nibble.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn listed(x: __m256i, table: __m256i) -> __m256i {
        _mm256_cmpeq_epi8(x, _mm256_shuffle_epi8(table, x))
    }

    /// The bytes of `x` in `lo..=lo + span` (unsigned).
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn within(x: __m256i, lo: u8, span: u8) -> __m256i {
        let d = _mm256_sub_epi8(x, _mm256_set1_epi8(lo as i8));
        _mm256_cmpeq_epi8(_mm256_min_epu8(d, _mm256_set1_epi8(span as i8)), d)
    }

    /// The bytes of `x` equal to `b`.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn is(x: __m256i, b: u8) -> __m256i {
        _mm256_cmpeq_epi8(x, _mm256_set1_epi8(b as i8))
    }

    /// The bytes of `x` in the [`ByteSet`] whose tables are `lo` and `hi`.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn in_set(x: __m256i, lo: __m256i, hi: __m256i) -> __m256i {
        // Low nibble through `lo`, high nibble through `hi`; a byte of 0x80 or above keeps its
        // top bit in the index, which makes `pshufb` give 0 (no member).
        let hi_n = _mm256_and_si256(_mm256_srli_epi16::<4>(x), _mm256_set1_epi8(0x0f));
        let hi_n = _mm256_or_si256(hi_n, _mm256_and_si256(x, _mm256_set1_epi8(-128)));
        let both = _mm256_and_si256(_mm256_shuffle_epi8(lo, x), _mm256_shuffle_epi8(hi, hi_n));
        _mm256_xor_si256(
            _mm256_cmpeq_epi8(both, _mm256_setzero_si256()),
            _mm256_set1_epi8(-1),
        )
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn table(t: &[u8; 16]) -> __m256i {
        let half = _mm_loadu_si128(t.as_ptr().cast());
        _mm256_broadcastsi128_si256(half)
    }

    /// The 64-bit mask of a class computed on both halves.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn mask(lo: __m256i, hi: __m256i) -> u64 {
        let a = _mm256_movemask_epi8(lo) as u32 as u64;
        let b = _mm256_movemask_epi8(hi) as u32 as u64;
        a | b << 32
    }

    /// The masks of [`super::scalar`], 32 bytes per vector operation.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn block(b: &[u8; 64], first: &ByteSet, second: &ByteSet) -> Block {
        let p = b.as_ptr();
        // Two unaligned loads of 32 bytes, both inside `b`.
        let x0 = _mm256_loadu_si256(p.cast());
        let x1 = _mm256_loadu_si256(p.add(32).cast());
        // A class's 64-bit mask: the expression in `v` on both halves.
        macro_rules! both {
            ($v:ident => $e:expr) => {{
                let lo = {
                    let $v = x0;
                    $e
                };
                let hi = {
                    let $v = x1;
                    $e
                };
                mask(lo, hi)
            }};
        }
        let (sep_t, cap_t, second_t) = (table(&SEP_TABLE), table(&CAP_TABLE), table(&SECOND_TABLE));
        let (first_lo, first_hi) = (table(&first.lo), table(&first.hi));
        let (second_lo, second_hi) = (table(&second.lo), table(&second.hi));
        let fold = _mm256_set1_epi8(0x20);
        let digit = both!(v => within(v, b'0', 9));
        let caps = both!(v => listed(v, cap_t));
        let title_second = both!(v => listed(v, second_t));
        Block {
            digit,
            sep: both!(v => listed(v, sep_t)),
            at: both!(v => is(v, b'@')),
            colon: both!(v => is(v, b':')),
            eq: both!(v => is(v, b'=')),
            alpha: both!(v => within(_mm256_or_si256(v, fold), b'a', 25)),
            under: both!(v => is(v, b'_')),
            upper: both!(v => within(v, b'A', 25)),
            hex: digit | both!(v => within(_mm256_or_si256(v, fold), b'a', 5)),
            dash: both!(v => is(v, b'-')),
            dot: both!(v => is(v, b'.')),
            title: caps & (title_second >> 1 | 1 << 63),
            first: both!(v => in_set(v, first_lo, first_hi)),
            second: both!(v => in_set(v, second_lo, second_hi)),
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::*;
    use std::arch::x86_64::*;

    /// The four 64-byte halves of the tables, in registers.
    struct Regs {
        lo_a: __m512i,
        lo_b: __m512i,
        hi_a: __m512i,
        hi_b: __m512i,
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    unsafe fn regs(t: &Tables) -> Regs {
        // Each load reads 64 bytes inside one array of 128 bytes.
        Regs {
            lo_a: _mm512_loadu_si512(t.lo.as_ptr().cast()),
            lo_b: _mm512_loadu_si512(t.lo.as_ptr().add(64).cast()),
            hi_a: _mm512_loadu_si512(t.hi.as_ptr().cast()),
            hi_b: _mm512_loadu_si512(t.hi.as_ptr().add(64).cast()),
        }
    }

    /// The masks of [`super::scalar`] for one block.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F, BW and VBMI.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub unsafe fn block(b: &[u8; 64], t: &Tables) -> Block {
        classes(b.as_ptr(), &regs(t))
    }

    /// The masks of the `out.len()` blocks of `s` (which holds exactly that many), one loop
    /// with the tables in registers.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F, BW and VBMI.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub unsafe fn blocks(s: &[u8], t: &Tables, out: &mut [Block]) {
        let r = regs(t);
        for (b, slot) in s.chunks_exact(64).zip(out.iter_mut()) {
            *slot = classes(b.as_ptr(), &r);
        }
    }

    /// The masks of [`super::scalar`], 64 bytes per vector operation: each byte's classes
    /// looked up in [`Tables`] (a two-register `vpermi2b` indexes 128 entries by the low seven
    /// bits; bytes with the top bit set are zeroed instead), then one `vptestmb` per class.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F, BW and VBMI, and `p` must point to 64 readable bytes.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    unsafe fn classes(p: *const u8, r: &Regs) -> Block {
        let x = _mm512_loadu_si512(p.cast());
        let (lo_a, lo_b, hi_a, hi_b) = (r.lo_a, r.lo_b, r.hi_a, r.hi_b);
        let ascii = !_mm512_movepi8_mask(x);
        let lo = _mm512_maskz_permutex2var_epi8(ascii, lo_a, x, lo_b);
        let hi = _mm512_maskz_permutex2var_epi8(ascii, hi_a, x, hi_b);
        let has = |v: __m512i, bit: u8| _mm512_test_epi8_mask(v, _mm512_set1_epi8(bit as i8));
        let caps = has(hi, HI_CAP);
        let title_second = has(hi, HI_TITLE_SECOND);
        Block {
            digit: has(lo, LO_DIGIT),
            sep: has(lo, LO_SEP),
            at: has(lo, LO_AT),
            colon: has(lo, LO_COLON),
            eq: has(lo, LO_EQ),
            alpha: has(lo, LO_ALPHA),
            under: has(lo, LO_UNDER),
            upper: has(lo, LO_UPPER),
            hex: has(hi, HI_HEX),
            dash: has(hi, HI_DASH),
            dot: has(hi, HI_DOT),
            title: caps & (title_second >> 1 | 1 << 63),
            first: has(hi, HI_FIRST),
            second: has(hi, HI_SECOND),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Bytes from every class and their neighbours in the code table.
    fn interesting() -> impl Strategy<Value = u8> {
        prop_oneof![
            prop::sample::select(
                b"0123456789 -./()@:=_AZazDMPSaeirsxfgFG/:@[`{\0\x7f\x80\xff+,;<>?".to_vec()
            ),
            any::<u8>(),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// The vector paths (AVX-512 where this CPU has it, and AVX2) give the masks of the
        /// plain loop, on any bytes.
        #[test]
        fn vector_and_plain_masks_agree(bytes in prop::collection::vec(interesting(), 64)) {
            let b: [u8; 64] = bytes.try_into().unwrap();
            for (first, second) in [(&b"ASgxsrnhde"[..], &b"KShloakIpGfy"[..]), (b"", b""), (b"\0\x7f/A", b"e")] {
                let fast = Classifier::new(first, second);
                let avx2 = Classifier::new(first, second).avx2_at_most();
                let plain = Classifier::new(first, second).scalar_only();
                prop_assert_eq!(fast.block(&b), plain.block(&b));
                prop_assert_eq!(avx2.block(&b), plain.block(&b));
                prop_assert_eq!(
                    plain.block(&b),
                    scalar(&b, &ByteSet::new(first), &ByteSet::new(second))
                );
            }
        }
    }

    #[test]
    fn blocks_past_either_end_read_as_nul() {
        let c = Classifier::new(b"a", b"");
        let s = b"a1 @Mr:=F";
        let k = c.block_at(s, -2);
        assert_eq!(k.alpha, 1 << 2 | 1 << 6 | 1 << 7 | 1 << 10);
        assert_eq!(k.digit, 1 << 3);
        assert_eq!(k.hex, 1 << 2 | 1 << 3 | 1 << 10);
        assert_eq!(k.sep, 1 << 4);
        assert_eq!((k.at, k.colon, k.eq), (1 << 5, 1 << 8, 1 << 9));
        assert_eq!(k.title, 1 << 6);
        assert_eq!(k.first, 1 << 2);
        let set = ByteSet::new(b"ASgx\0");
        assert!((0u8..=255).all(|b| set.contains(b) == b"ASgx\0".contains(&b)));
        assert_eq!(c.block_at(s, 9), Block::default());
    }
}
