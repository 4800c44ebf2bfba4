//! The field code: classified values too short for zstd, coded byte by byte with one fixed model
//! (`--compress-classified`).
//!
//! Why it exists: with `--compress-classified` each classified segment is compressed alone, never
//! in one context with another byte (docs/DESIGN.md §5, SECURITY.md §2). zstd alone gains nothing
//! on a value of a few dozen bytes (a frame header, and no history to match), and the fields that
//! are classified in real documents are that short: names, dates, amounts, account numbers (32 MiB
//! of `sieve gen --kind text` holds 226,838 classified values of 15 bytes on average). So such
//! values went uncompressed, and the option did nothing for the documents it is for.
//!
//! Why it is safe to code many values in one frame: the model is fixed in advance (`FREQ` here,
//! the same at both ends, never learnt from a document), so every byte is coded on its own, in
//! about `-log2(FREQ[b] / 4096)` bits, whatever came before it. A frame of several values is
//! exactly their codes one after the other, and its length is the sum of its bytes' code lengths
//! (to within the coder's last word or two). What the length tells an observer of TLS records is
//! that sum, a weighted count of letters, digits and other bytes; no byte's code depends on any
//! other byte, so a value an attacker chooses cannot be coded shorter for matching a secret, which
//! is what CRIME and BREACH need a compressor with memory for.
//!
//! The coder is constriction's ANS coder (16-bit words, 12-bit probabilities), within a few
//! tenths of a percent of the model's entropy; decoding reads a 4096-entry table per byte and
//! divides by nothing. It starts from state 1, not 0, so that every byte costs its bits (see
//! [`encode`]).
//!
//! On the classified values of the generated kinds (32 MiB documents at P = 0.1, sent with
//! `--compress zstd:3 --compress-classified`) it made 0.676 (prose), 0.705 (log), 0.721 (CSV)
//! and 0.729 (JSON) of their length; `cargo bench -p sieve-core --bench compress -- fields`
//! codes them at 108-116 MiB/s and decodes them at 117-127 MiB/s on one core of an Intel Xeon
//! (model 207). Bytes the model finds rare (binary, other scripts) code longer than 8 bits, and
//! such frames go raw (see [`super::encoder::shrinks`]).
//!
//! The model is part of the wire format: changing `FREQ` needs a new codec byte
//! ([`super::FrameCodec`]).

use std::sync::OnceLock;

use constriction::stream::model::{
    SmallContiguousCategoricalEntropyModel, SmallContiguousLookupDecoderModel,
};
use constriction::stream::stack::SmallAnsCoder;
use constriction::stream::Decode;

/// Why a field-coded frame was refused (the decoder reports it as a corrupt frame).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FieldsError {
    /// Words are 16 bits: a frame has an even number of bytes.
    #[error("a field-coded frame has an odd number of bytes")]
    OddLength,
    /// The coder never writes a zero last word.
    #[error("a field-coded frame ends with a zero word")]
    ZeroLastWord,
    /// Words, or state, left once the declared bytes are decoded.
    #[error("a field-coded frame does not end where its last byte does")]
    LeftOver,
}

/// Bits of the model's probabilities: each byte's frequency is a count out of `1 << PRECISION`
/// (the precision of constriction's "small" models, whose decoding table has that many entries).
#[cfg(test)]
const PRECISION: usize = 12;

/// How often each byte value is expected in a classified field, out of 4096 (every value at
/// least 1, so any byte can be coded). Derived once from a mixture written down before any
/// document was measured and never fitted to one: lowercase letters 45 % (English letter
/// frequencies), capitals 7 % (the same shape), digits 25 % (equally), space 10 %, the
/// punctuation of names, dates, amounts and addresses (`. , - / : @ ' ( ) + _ # &`) 7 %, other
/// printable ASCII 2 %, bytes 0x80-0xFF 2 % (UTF-8), tab and line ends 1.2 %; rounded to
/// 4096 by largest remainder.
#[rustfmt::skip]
const FREQ: [u16; 256] = [
    1, 1, 1, 1, 1, 1, 1, 1, 1, 16, 16, 1, 1, 16, 1, 1, // 0x00
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, // 0x10
    387, 5, 5, 5, 5, 5, 5, 11, 7, 7, 5, 7, 42, 62, 62, 21, // 0x20
    97, 97, 97, 97, 97, 97, 97, 97, 97, 97, 21, 5, 5, 5, 5, 5, // 0x30
    21, 23, 5, 8, 13, 35, 7, 6, 17, 20, 1, 3, 12, 7, 19, 21, // 0x40
    6, 1, 17, 18, 25, 8, 4, 7, 1, 6, 1, 5, 5, 5, 5, 11, // 0x50
    5, 143, 27, 49, 76, 221, 39, 36, 107, 122, 3, 15, 70, 43, 117, 131, // 0x60
    34, 3, 105, 110, 159, 49, 18, 43, 3, 36, 2, 5, 5, 5, 5, 1, // 0x70
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, // 0x80
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, // 0x90
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, // 0xa0
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, // 0xb0
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, // 0xc0
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, // 0xd0
    2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, // 0xe0
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, // 0xf0
];

type EncoderModel = SmallContiguousCategoricalEntropyModel;
type DecoderModel = SmallContiguousLookupDecoderModel;

/// The model, built once per process from [`FREQ`] (a few microseconds).
fn models() -> &'static (EncoderModel, DecoderModel) {
    static MODELS: OnceLock<(EncoderModel, DecoderModel)> = OnceLock::new();
    MODELS.get_or_init(|| {
        // FREQ sums to 1 << PRECISION with every entry nonzero (tested below), which is all
        // either constructor requires.
        let enc = EncoderModel::from_nonzero_fixed_point_probabilities(FREQ, false)
            .expect("FREQ is a valid 12-bit distribution");
        let dec = DecoderModel::from_nonzero_fixed_point_probabilities(FREQ, false)
            .expect("FREQ is a valid 12-bit distribution");
        (enc, dec)
    })
}

/// Code `plain` into `out` (replacing its contents): 16-bit words, little-endian; at least one
/// (the coder's starting state, which is all that empty input codes to).
pub fn encode(plain: &[u8], out: &mut Vec<u8>) {
    let (model, _) = models();
    // The coder starts from state 1, not 0: from 0, a byte whose interval starts at 0 (byte
    // 0x00) would cost nothing, so trailing zero bytes would code to no bits at all, and the
    // length would no longer be the sum of the bytes' code lengths (nor could the decoder
    // bound a frame's length from its size). Decoding must end in state 1 again.
    let mut coder = SmallAnsCoder::from_binary(Vec::new()).unwrap_or_else(|never| match never {});
    // ANS is a stack: the last byte is coded first, so that decoding reads the bytes in order.
    // Every byte is a symbol of the model (256 symbols, none of probability 0), and a Vec
    // backend cannot fail to take words: encoding cannot fail.
    coder
        .encode_iid_symbols_reverse(plain.iter().map(|&b| usize::from(b)), model.as_view())
        .expect("every byte value is in the model");
    let words = coder
        .into_compressed()
        .unwrap_or_else(|never| match never {});
    out.clear();
    out.reserve(words.len() * 2);
    for w in words {
        out.extend_from_slice(&w.to_le_bytes());
    }
}

/// Decode `compressed` into exactly `out.len()` bytes. Refused: an odd number of bytes, a last
/// word of zero (the coder never ends on one), and a coder not back in its starting state once
/// `out` is full (words or state left over). Never
/// reads past `compressed` or writes past `out`, whatever the input: ANS decoding of any bits is
/// some sequence of bytes. The code authenticates nothing: a changed frame may decode to other
/// bytes of the same length, which TLS (classified frames) or the plain channel's MAC (which
/// covers the coded bytes) catches.
pub fn decode(compressed: &[u8], out: &mut [u8]) -> Result<(), FieldsError> {
    if !compressed.len().is_multiple_of(2) {
        return Err(FieldsError::OddLength);
    }
    let words: Vec<u16> = compressed
        .chunks_exact(2)
        .map(|w| u16::from_le_bytes([w[0], w[1]]))
        .collect();
    let (_, model) = models();
    let mut coder = SmallAnsCoder::from_compressed(words).map_err(|_| FieldsError::ZeroLastWord)?;
    let n = out.len();
    for (slot, sym) in out
        .iter_mut()
        .zip(coder.decode_iid_symbols(n, model.as_view()))
    {
        // Decoding cannot fail (its error type is uninhabited); the model has 256 symbols, so
        // every symbol is a byte.
        *slot = sym.unwrap_or_else(|e| match e {}) as u8;
    }
    let (rest, state) = coder.into_raw_parts();
    if !rest.is_empty() || state != 1 {
        return Err(FieldsError::LeftOver);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(plain: &[u8]) -> Vec<u8> {
        let mut packed = Vec::new();
        encode(plain, &mut packed);
        let mut back = vec![0u8; plain.len()];
        decode(&packed, &mut back).expect("what was coded decodes");
        assert_eq!(back, plain);
        packed
    }

    #[test]
    fn the_model_is_a_12_bit_distribution_over_every_byte() {
        assert_eq!(
            FREQ.iter().map(|&f| u32::from(f)).sum::<u32>(),
            1 << PRECISION
        );
        assert!(FREQ.iter().all(|&f| f >= 1));
    }

    #[test]
    fn fields_shrink_and_binary_grows() {
        let fields = b"Timothy Smith2024-03-171129.79AT30 9696 7656 7873 8872 57Mary Clark";
        let packed = round_trip(fields);
        assert!(packed.len() * 10 < fields.len() * 8, "{}", packed.len());
        let binary: Vec<u8> = (0..=255u8).cycle().take(4096).collect();
        assert!(round_trip(&binary).len() > binary.len());
        assert_eq!(round_trip(b"").len(), 2, "the starting state alone");
    }

    /// A frame of values is their codes one after the other: its length is the sum of its
    /// bytes' code lengths, so a value's neighbours cannot shorten its code (the property the
    /// module's safety argument rests on).
    #[test]
    fn a_values_code_length_does_not_depend_on_its_neighbours() {
        let secret = b"Mary Clark";
        let bits = |b: &[u8]| -> f64 {
            b.iter()
                .map(|&x| -(f64::from(FREQ[usize::from(x)]) / 4096.0).log2())
                .sum()
        };
        let mut packed = Vec::new();
        for guess in [&b"Mary Clark"[..], b"Mary Clerk", b"Zqxj Vwkz!"] {
            let frame = [&secret[..], guess].concat();
            encode(&frame, &mut packed);
            let coded = packed.len() as f64 * 8.0;
            let ideal = bits(&frame);
            // Within the coder's sealing words of the sum of the parts, whether or not the
            // guess repeats the secret.
            assert!(
                coded >= ideal && coded <= ideal + 48.0,
                "{guess:?}: {coded} vs {ideal}"
            );
        }
    }

    /// Every byte costs its bits, wherever it stands: a run of the model's zero-based symbol at
    /// the end of a frame once coded to nothing (found by fuzzing), which broke the sum.
    #[test]
    fn trailing_zero_bytes_cost_their_bits() {
        let mut packed = Vec::new();
        encode(&[0, 0, 0], &mut packed);
        assert!(packed.len() >= 4, "{packed:?}");
        let text_then_zeros = [&b"Mary Clark"[..], &[0u8; 100]].concat();
        let coded = round_trip(&text_then_zeros);
        // 100 bytes of probability 1/4096 are 1200 bits.
        assert!(coded.len() * 8 >= 1200, "{}", coded.len());
        round_trip(&[0]);
        round_trip(&[0, b'a', 0]);
    }

    #[test]
    fn bad_frames_are_refused_not_trusted() {
        let mut out = [0u8; 8];
        assert_eq!(decode(&[1, 2, 3], &mut out), Err(FieldsError::OddLength));
        let mut packed = Vec::new();
        encode(b"Mary Clark", &mut packed);
        // Asked for fewer bytes than it holds: words are left.
        let mut five = [0u8; 5];
        assert_eq!(decode(&packed, &mut five), Err(FieldsError::LeftOver));
        // The coder never ends on a zero word.
        packed.extend_from_slice(&[0, 0]);
        let mut back = [0u8; 10];
        assert_eq!(decode(&packed, &mut back), Err(FieldsError::ZeroLastWord));
    }

    proptest! {
        #[test]
        fn decode_inverts_encode(plain in proptest::collection::vec(any::<u8>(), 0..2048)) {
            round_trip(&plain);
        }

        #[test]
        fn text_like_bytes_round_trip(plain in "[ -~]{0,600}") {
            round_trip(plain.as_bytes());
        }

        /// Any bytes decode to exactly the length asked for, or are refused; nothing panics.
        #[test]
        fn any_input_is_decoded_or_refused(
            compressed in proptest::collection::vec(any::<u8>(), 0..512),
            n in 0usize..2048,
        ) {
            let mut out = vec![0u8; n];
            let _ = decode(&compressed, &mut out);
            prop_assert_eq!(out.len(), n);
        }
    }
}
