//! How a manifest writes its segment lengths: Exp-Golomb codes, one order per kind.
//!
//! A dense document (a classified value on every line) has hundreds of thousands of segments,
//! and its manifest is mostly their lengths. As LEB128 varints every length took at least a byte:
//! 545,522 bytes for the 453,677 segments of 32 MiB of `sieve gen --kind text` at P = 0.1. Both
//! kinds' lengths cluster (classified values of a dozen bytes, cleartext runs of a few dozen), so
//! a code tuned to each kind's typical size takes 7 bits a length on average: 396,880 bytes for
//! the same layout, and 26-32 % less than varints for the csv, json and log kinds. Manifests are
//! padded to a power of two (see [`super::Doc::pad_to_bucket`]), so fewer bytes often means half the bucket.
//!
//! Exp-Golomb of order `k` writes a length `v` as `z` zero bits, a one bit, then the `z + k` low
//! bits of `v - (2^z - 1)·2^k`, where `z` is the bit length of `(v >> k) + 1`, minus one. Lengths
//! below `2^k` take `k + 1` bits, and each doubling beyond adds two bits, so one huge cleartext run
//! costs a few bytes (a gigabyte at order 5: 7 bytes, against a varint's 5), where a Rice code's
//! unary part would grow by a bit per `2^k`. Every value has exactly one codeword (the `z` ranges are
//! disjoint), so the encoding stays canonical: a parser refuses codewords for values beyond
//! 64 bits, runs of zeros longer than any codeword's, a stream cut short and padding bits other
//! than zero.
//!
//! The sender picks each kind's order ([`LensCode::choose`], the shortest code) in one pass over
//! the layout; the two orders travel in the manifest before the lengths, and a receiver refuses
//! orders other than those, so that a layout has one encoding.
//!
//! Bits are written most significant first; the last byte is padded with zero bits.

use crate::layout::{Kind, Layout};

/// Largest order a manifest may name: a 64-bit length then takes at most 65 bits.
pub const MAX_ORDER: u8 = 63;

/// The Exp-Golomb order of each kind's segment lengths in a manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LensCode {
    /// Order by [`Kind::index`].
    order: [u8; 2],
}

impl LensCode {
    /// A code with these orders, or `None` if either exceeds [`MAX_ORDER`].
    pub fn new(plain: u8, secure: u8) -> Option<LensCode> {
        let mut order = [0; 2];
        order[Kind::Plain.index()] = plain;
        order[Kind::Secure.index()] = secure;
        (plain <= MAX_ORDER && secure <= MAX_ORDER).then_some(LensCode { order })
    }

    /// The order of `kind`'s lengths.
    pub fn order(self, kind: Kind) -> u8 {
        self.order[kind.index()]
    }

    /// The orders that minimise `layout`'s encoded size (see [`OrderChoice`]).
    pub fn choose(layout: &Layout) -> LensCode {
        LensCode::choose_with_bits(layout).0
    }

    /// [`LensCode::choose`], and the bits `layout`'s lengths take in that code.
    pub fn choose_with_bits(layout: &Layout) -> (LensCode, u64) {
        let mut choice = OrderChoice::new();
        for (kind, len) in layout.segments() {
            choice.add(kind, len);
        }
        choice.best_with_bits()
    }

    /// Bits the codeword of a `kind` segment of `len` bytes takes in this code.
    pub fn len_bits(self, kind: Kind, len: u64) -> u32 {
        codeword_bits(len, self.order(kind))
    }

    /// Bits `layout`'s lengths take in this code.
    pub fn bits(self, layout: &Layout) -> u64 {
        layout
            .segments()
            .map(|(kind, len)| u64::from(self.len_bits(kind, len)))
            .sum()
    }

    /// Bytes `layout`'s lengths take in this code (the last byte padded).
    pub fn bytes(self, layout: &Layout) -> usize {
        usize::try_from(self.bits(layout).div_ceil(8)).unwrap_or(usize::MAX)
    }

    /// Append `layout`'s lengths to `out`: [`LensCode::bytes`] bytes.
    pub fn encode(self, layout: &Layout, out: &mut Vec<u8>) {
        let mut w = self.encoder(out);
        for (kind, len) in layout.segments() {
            w.put(kind, len);
        }
        w.finish();
    }

    /// A writer of lengths in this code at the end of `out`, one segment at a time, that tells
    /// where each codeword starts: what a sender's placement needs to lay its checkpoints as it
    /// encodes, in the same pass.
    pub fn encoder(self, out: &mut Vec<u8>) -> LensEncoder<'_> {
        LensEncoder {
            code: self,
            w: BitWriter { out, acc: 0, n: 0 },
            pos: 0,
        }
    }

    /// Decode the lengths of a layout whose first segment is of kind `first` from the start of
    /// `bytes`.
    pub fn decoder<'a>(self, bytes: &'a [u8], first: Kind) -> LensDecoder<'a> {
        self.decoder_at(bytes, first, 0, 0)
    }

    /// Decode from bit `pos` of `bytes` on, where segment `seg` begins (a position some
    /// decoder's [`LensDecoder::bit_pos`] gave).
    pub fn decoder_at<'a>(
        self,
        bytes: &'a [u8],
        first: Kind,
        pos: u64,
        seg: usize,
    ) -> LensDecoder<'a> {
        LensDecoder {
            code: self,
            bytes,
            first,
            pos,
            seg: seg as u64,
        }
    }
}

/// Writes segment lengths in a [`LensCode`]; see [`LensCode::encoder`].
pub struct LensEncoder<'a> {
    code: LensCode,
    w: BitWriter<'a>,
    /// Bits written so far.
    pos: u64,
}

impl LensEncoder<'_> {
    /// Append the codeword of a `kind` segment of `len` bytes.
    #[inline]
    pub fn put(&mut self, kind: Kind, len: u64) {
        let k = u32::from(self.code.order(kind));
        // The codeword is `len + 2^k` in `2z + 1 + k` bits (its `z` leading bits zero).
        let z = zeros(len, k);
        let bits = 2 * z + 1 + k;
        if bits <= 64 {
            // Below 2^64, as its bit length is `z + k + 1`.
            self.w.put(len + (1u64 << k), bits);
        } else {
            let word = u128::from(len) + (1u128 << k);
            self.w.put(0, z);
            self.w.put((word >> 32) as u64, bits - z - 32);
            self.w.put(word as u64 & 0xffff_ffff, 32);
        }
        self.pos += u64::from(bits);
    }

    /// Bit position of the next codeword (bits written so far).
    pub fn bit_pos(&self) -> u64 {
        self.pos
    }

    /// Write out the last bits, the final byte padded with zero bits.
    pub fn finish(self) {
        self.w.finish();
    }
}

/// A layout's lengths in the code [`LensCode::choose`] picks for them: what its manifest
/// carries, computed once.
///
/// A sender needs these bytes twice: for the placement it sends by, and in the manifest. For
/// a dense document (hundreds of thousands of segments) choosing the orders and encoding cost
/// each about as much as the placement's walk, so the placement's encoding is handed to the
/// manifest ([`crate::sieve::Placement::encoded_lens`]) instead of being made again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedLens {
    code: LensCode,
    bytes: Vec<u8>,
}

impl EncodedLens {
    /// Choose the code for `layout` and encode its lengths.
    pub fn of(layout: &Layout) -> EncodedLens {
        let (code, bits) = LensCode::choose_with_bits(layout);
        let mut bytes = Vec::with_capacity(usize::try_from(bits.div_ceil(8)).unwrap_or(0));
        code.encode(layout, &mut bytes);
        EncodedLens { code, bytes }
    }

    /// Lengths already encoded in `code`, the code [`LensCode::choose`] gives their layout.
    pub(crate) fn from_parts(code: LensCode, bytes: Vec<u8>) -> EncodedLens {
        EncodedLens { code, bytes }
    }

    /// The code's orders.
    pub fn code(&self) -> LensCode {
        self.code
    }

    /// The encoded lengths, the last byte padded with zero bits.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// Finds the orders that minimise a layout's code, from one pass over its lengths.
///
/// A length's codeword depends on its bit length `n` and on how many one bits `m` it starts
/// with: in order `k < n`, `z` is `n - k - 1`, or `n - k` when `v >> k` is all ones
/// (`m >= n - k`). The lengths of each kind are counted by `(n, m)`; every order is then priced
/// from those counts, so choosing costs a pass over the layout and a few thousand operations,
/// not a pass per order. Ties go to the smaller order.
///
/// The sender picks its orders this way and the receiver checks that a manifest's orders are
/// the ones this picks, so a layout has exactly one encoding.
#[derive(Debug, Clone)]
pub struct OrderChoice {
    /// Counts by kind, `n` and `m`: `[kind][n * 65 + m]`.
    hist: Vec<u64>,
}

impl Default for OrderChoice {
    fn default() -> Self {
        OrderChoice::new()
    }
}

impl OrderChoice {
    /// No lengths counted yet.
    pub fn new() -> OrderChoice {
        OrderChoice {
            hist: vec![0; 2 * 65 * 65],
        }
    }

    /// Count a segment.
    pub fn add(&mut self, kind: Kind, len: u64) {
        let n = 64 - len.leading_zeros();
        let m = if n == 0 {
            0
        } else {
            (!(len << (64 - n))).leading_zeros()
        };
        self.hist[(kind.index() * 65 + n as usize) * 65 + m as usize] += 1;
    }

    /// The best order of each kind for the lengths counted.
    pub fn best(&self) -> LensCode {
        self.best_with_bits().0
    }

    /// [`OrderChoice::best`], and the bits the lengths counted take in that code.
    pub fn best_with_bits(&self) -> (LensCode, u64) {
        let best = |kind: usize| -> (u8, u64) {
            let cells: Vec<(u32, u32, u64)> = self.hist[kind * 65 * 65..(kind + 1) * 65 * 65]
                .iter()
                .enumerate()
                .filter(|&(_, &c)| c > 0)
                .map(|(i, &c)| ((i / 65) as u32, (i % 65) as u32, c))
                .collect();
            let cost = |k: u32| -> u64 {
                cells
                    .iter()
                    .map(|&(n, m, c)| {
                        let z = if n <= k {
                            0
                        } else {
                            n - k - 1 + u32::from(m >= n - k)
                        };
                        c * u64::from(2 * z + 1 + k)
                    })
                    .sum()
            };
            (0..=u32::from(MAX_ORDER))
                .map(|k| (cost(k), k))
                .min()
                .map_or((0, 0), |(bits, k)| (k as u8, bits))
        };
        // By `Kind::index`, as `order` is.
        let ((o0, b0), (o1, b1)) = (best(0), best(1));
        (LensCode { order: [o0, o1] }, b0 + b1)
    }
}

/// Why a run of segment lengths does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeError {
    /// The bytes end inside a codeword.
    Truncated,
    /// A codeword is longer than any 64-bit length's, or its value exceeds 64 bits.
    TooLong,
    /// The bits after the last codeword are not all zero.
    Padding,
    /// The orders are not the ones [`OrderChoice`] picks for these lengths.
    NotBest,
}

impl CodeError {
    /// A short description for error messages.
    pub fn as_str(self) -> &'static str {
        match self {
            CodeError::Truncated => "the lengths end inside a codeword",
            CodeError::TooLong => "a codeword exceeds 64 bits",
            CodeError::Padding => "the padding after the last length is not zero bits",
            CodeError::NotBest => "the code's orders are not the ones that make it shortest",
        }
    }
}

/// Reads segment lengths one after the other; see [`LensCode::decoder`].
#[derive(Debug, Clone)]
pub struct LensDecoder<'a> {
    code: LensCode,
    bytes: &'a [u8],
    first: Kind,
    /// Bit position of the next codeword.
    pos: u64,
    seg: u64,
}

impl LensDecoder<'_> {
    /// The code it reads.
    pub fn code(&self) -> LensCode {
        self.code
    }

    /// The next segment's kind and length.
    ///
    /// Inlined: a receiver decodes every length of a dense document's manifest several times
    /// (parsing it, building its placement, walking it for each frame), and as a call the fast
    /// path cost more in its prologue and spills than in its work. Codewords of more than 57
    /// bits, and the last bytes of the code, take a path out of line. Criterion's
    /// `manifest/parse` (a manifest parsed into its placement: two passes over the lengths),
    /// this build against the one before alternating, 7 rounds, Intel Xeon model 207: per-round
    /// median 0.86 [0.57..1.09] of the time for 453,677 segments of prose, 0.90 [0.69..1.18]
    /// for 562,379 of log. A whole sieve send of 32 MiB of CSV (557,318 segments, receiver
    /// included) moved by 0.95 [0.86..1.17] in 15 alternating rounds, within the noise.
    #[inline]
    pub fn next_len(&mut self) -> Result<(Kind, u64), CodeError> {
        let kind = if self.seg.is_multiple_of(2) {
            self.first
        } else {
            self.first.other()
        };
        let k = u32::from(self.code.order(kind));
        // Fast path: the codeword within the 57 or more bits that 8 bytes from here hold.
        let byte = (self.pos / 8) as usize;
        if let Some(chunk) = self.bytes.get(byte..byte.saturating_add(8)) {
            let mut eight = [0u8; 8];
            eight.copy_from_slice(chunk);
            let w = u64::from_be_bytes(eight) << (self.pos % 8);
            let z = w.leading_zeros();
            let bits = 2 * z + 1 + k;
            if bits <= 57 {
                // `bits` of `w` are the codeword `len + 2^k`.
                let len = (w >> (64 - bits)) - (1u64 << k);
                self.pos += u64::from(bits);
                self.seg += 1;
                return Ok((kind, len));
            }
        }
        self.next_len_slow(kind, k)
    }

    /// [`LensDecoder::next_len`] for a codeword that the 8 bytes from its position may not
    /// hold: a long one, or one near the end of the code.
    #[cold]
    #[inline(never)]
    fn next_len_slow(&mut self, kind: Kind, k: u32) -> Result<(Kind, u64), CodeError> {
        let window = self.peek(self.pos);
        let z = window.leading_zeros();
        if z == 128 || z > 64 - k {
            return Err(if self.pos + u64::from(z) >= self.bit_len() {
                CodeError::Truncated
            } else {
                CodeError::TooLong
            });
        }
        let n = z + k;
        // The one bit and the `n` bits after it, from the window if they are in it.
        let tail = if z + 1 + n <= 128 {
            window << z
        } else {
            self.peek(self.pos + u64::from(z))
        };
        let rest = if n == 0 { 0 } else { (tail << 1) >> (128 - n) };
        let end = self.pos + u64::from(z + 1 + n);
        if end > self.bit_len() {
            return Err(CodeError::Truncated);
        }
        let len = u64::try_from(base(z, k) + rest).map_err(|_| CodeError::TooLong)?;
        self.pos = end;
        self.seg += 1;
        Ok((kind, len))
    }

    /// Bit position of the next codeword.
    pub fn bit_pos(&self) -> u64 {
        self.pos
    }

    /// Bytes read so far (the last one partly, if the position is not on a byte boundary).
    pub fn bytes_read(&self) -> usize {
        usize::try_from(self.pos.div_ceil(8)).unwrap_or(usize::MAX)
    }

    /// Check that the bits after the last codeword, to the end of its byte, are zero; returns
    /// [`LensDecoder::bytes_read`].
    pub fn finish(&self) -> Result<usize, CodeError> {
        let used = self.bytes_read();
        let spare = (used as u64 * 8 - self.pos) as u32;
        if spare > 0 {
            let last = self.bytes[used - 1];
            if last & ((1u8 << spare) - 1) != 0 {
                return Err(CodeError::Padding);
            }
        }
        Ok(used)
    }

    fn bit_len(&self) -> u64 {
        self.bytes.len() as u64 * 8
    }

    /// The 128 bits from bit `pos` on, zeros past the end.
    fn peek(&self, pos: u64) -> u128 {
        let Ok(byte) = usize::try_from(pos / 8) else {
            return 0;
        };
        let shift = (pos % 8) as u32;
        let mut buf = [0u8; 17];
        let have = self.bytes.len().saturating_sub(byte).min(17);
        buf[..have].copy_from_slice(&self.bytes[byte..byte + have]);
        let mut head = [0u8; 16];
        head.copy_from_slice(&buf[..16]);
        let hi = u128::from_be_bytes(head);
        if shift == 0 {
            hi
        } else {
            (hi << shift) | u128::from(buf[16] >> (8 - shift))
        }
    }
}

/// `z` for `v` in order `k`: the bit length of `(v >> k) + 1`, minus one.
fn zeros(v: u64, k: u32) -> u32 {
    match (v >> k).checked_add(1) {
        Some(q) => 63 - q.leading_zeros(),
        None => 64,
    }
}

/// The smallest value whose codeword in order `k` starts with `z` zeros: `(2^z - 1)·2^k`.
fn base(z: u32, k: u32) -> u128 {
    ((1u128 << z) - 1) << k
}

/// Bits `v`'s codeword takes in order `k`.
fn codeword_bits(v: u64, k: u8) -> u32 {
    let k = u32::from(k);
    2 * zeros(v, k) + 1 + k
}

/// Appends bits to a byte vector, most significant first.
struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    /// Bits not yet written out: the low `n` bits (`n < 64`).
    acc: u128,
    n: u32,
}

impl BitWriter<'_> {
    /// Append the low `n` bits of `bits` (`n <= 64`, higher bits zero).
    fn put(&mut self, bits: u64, n: u32) {
        if n == 0 {
            return;
        }
        self.acc = (self.acc << n) | u128::from(bits);
        self.n += n;
        if self.n >= 64 {
            self.n -= 64;
            self.out
                .extend_from_slice(&((self.acc >> self.n) as u64).to_be_bytes());
            self.acc &= (1u128 << self.n) - 1;
        }
    }

    fn finish(self) {
        let bytes = self.n.div_ceil(8);
        if bytes > 0 {
            let last = (self.acc << (8 * bytes - self.n)) as u64;
            self.out
                .extend_from_slice(&last.to_be_bytes()[8 - bytes as usize..]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn layout(first: Kind, lens: Vec<u64>) -> Layout {
        Layout { first, lens }
    }

    fn decode_all(code: LensCode, l: &Layout, bytes: &[u8]) -> Result<Vec<u64>, CodeError> {
        let mut d = code.decoder(bytes, l.first);
        let lens = (0..l.lens.len())
            .map(|_| d.next_len().map(|(_, v)| v))
            .collect::<Result<Vec<_>, _>>()?;
        assert_eq!(d.finish()?, bytes.len());
        Ok(lens)
    }

    #[test]
    fn codewords_of_order_zero_and_two() {
        // Order 0: 0 -> 1, 1 -> 010, 2 -> 011, 3 -> 00100.
        let l = layout(Kind::Plain, vec![0, 1, 2, 3]);
        let code = LensCode::new(0, 0).unwrap();
        let mut out = Vec::new();
        code.encode(&l, &mut out);
        assert_eq!(out, vec![0b1010_0110, 0b0100_0000]);
        assert_eq!(code.bits(&l), 12);
        // Order 2: 5 -> z = 1, 5 - 4 = 1 in 3 bits: 0 1 001.
        let l = layout(Kind::Secure, vec![5]);
        let mut out = Vec::new();
        LensCode::new(0, 2).unwrap().encode(&l, &mut out);
        assert_eq!(out, vec![0b0100_1000]);
    }

    #[test]
    fn extremes_round_trip() {
        for k in [0u8, 1, 7, 31, 62, 63] {
            let l = layout(
                Kind::Secure,
                vec![u64::MAX, 0, u64::MAX - 1, 1 << 63, 0, u64::MAX],
            );
            let code = LensCode::new(k, k).unwrap();
            let mut out = Vec::new();
            code.encode(&l, &mut out);
            assert_eq!(out.len(), code.bytes(&l), "order {k}");
            assert_eq!(decode_all(code, &l, &out).unwrap(), l.lens, "order {k}");
        }
    }

    #[test]
    fn refuses_what_no_encoder_writes() {
        let code = LensCode::new(0, 0).unwrap();
        let one = layout(Kind::Plain, vec![0]);
        // 0 in order 0 is the single bit 1: the byte 0b1000_0001 has a one in its padding.
        assert_eq!(decode_all(code, &one, &[0x81]), Err(CodeError::Padding));
        // Cut short: 3 in order 0 is 00100, so 0b0010_0000 is fine but 0b0000_0000 never ends.
        assert_eq!(decode_all(code, &one, &[0x20]), Ok(vec![3]));
        assert_eq!(decode_all(code, &one, &[0]), Err(CodeError::Truncated));
        // Beyond 64 bits: 65 zeros then a one in order 0.
        let mut long = vec![0u8; 8];
        long.extend([0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(decode_all(code, &one, &long), Err(CodeError::TooLong));
        // 64 zeros then a one, then 64 bits: only u64::MAX (all zeros after the one) fits.
        let mut max = vec![0u8; 8];
        max.extend([0x80, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(decode_all(code, &one, &max), Ok(vec![u64::MAX]));
        let mut over = max.clone();
        over[16] = 0x80; // the last of the 64 bits: u64::MAX + 1
        assert_eq!(decode_all(code, &one, &over), Err(CodeError::TooLong));
        assert!(LensCode::new(MAX_ORDER + 1, 0).is_none());
    }

    #[test]
    fn choose_takes_each_kinds_typical_size() {
        // Classified values of 12-15 bytes take 5 bits in order 4 (6 in order 3: 0 1 then 4
        // bits); cleartext runs of 40-63, 7 bits in order 6.
        let lens = (0..200u64)
            .map(|i| if i % 2 == 0 { 40 + i % 24 } else { 12 + i % 4 })
            .collect();
        let l = layout(Kind::Plain, lens);
        let code = LensCode::choose(&l);
        assert_eq!((code.order(Kind::Plain), code.order(Kind::Secure)), (6, 4));
    }

    proptest! {
        #[test]
        fn encode_then_decode_is_identity(
            first in prop_oneof![Just(Kind::Plain), Just(Kind::Secure)],
            lens in proptest::collection::vec(
                prop_oneof![0u64..64, 0u64..100_000, any::<u64>()], 0..200),
            orders in proptest::option::of((0..=MAX_ORDER, 0..=MAX_ORDER)),
        ) {
            let l = layout(first, lens);
            let code = match orders {
                Some((p, s)) => LensCode::new(p, s).unwrap(),
                None => LensCode::choose(&l),
            };
            let mut out = Vec::new();
            code.encode(&l, &mut out);
            prop_assert_eq!(out.len(), code.bytes(&l));
            prop_assert_eq!(decode_all(code, &l, &out), Ok(l.lens.clone()));
        }

        #[test]
        fn chosen_orders_are_the_best(
            first in prop_oneof![Just(Kind::Plain), Just(Kind::Secure)],
            lens in proptest::collection::vec(
                prop_oneof![1u64..32, 10u64..5_000, 0u64..(1 << 40)], 1..300),
        ) {
            let l = layout(first, lens);
            let (code, counted) = LensCode::choose_with_bits(&l);
            let chosen = code.bits(&l);
            prop_assert_eq!(counted, chosen);
            // Each kind's best order, by trying them all.
            let best: u64 = [Kind::Plain, Kind::Secure]
                .into_iter()
                .map(|kind| {
                    (0..=MAX_ORDER)
                        .map(|k| {
                            l.segments()
                                .filter(|&(x, _)| x == kind)
                                .map(|(_, v)| u64::from(codeword_bits(v, k)))
                                .sum::<u64>()
                        })
                        .min()
                        .unwrap()
                })
                .sum();
            prop_assert_eq!(chosen, best);
        }

        #[test]
        fn any_bytes_decode_or_fail_cleanly(
            bytes in proptest::collection::vec(any::<u8>(), 0..40),
            count in 0usize..40,
            p in 0..=MAX_ORDER,
            s in 0..=MAX_ORDER,
        ) {
            // What decodes re-encodes to the same bytes (the code is canonical).
            let code = LensCode::new(p, s).unwrap();
            let mut d = code.decoder(&bytes, Kind::Plain);
            let lens: Result<Vec<u64>, _> =
                (0..count).map(|_| d.next_len().map(|(_, v)| v)).collect();
            if let (Ok(lens), Ok(used)) = (lens, d.finish()) {
                let l = layout(Kind::Plain, lens);
                let mut out = Vec::new();
                code.encode(&l, &mut out);
                prop_assert_eq!(&out[..], &bytes[..used]);
            }
        }
    }
}
