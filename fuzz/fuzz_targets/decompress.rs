//! Arbitrary bytes into the decompression path of compressed frames (zstd, and the field code of
//! classified values).
//!
//! The input is read three ways:
//! - as a `ZData` payload, then its compressed bytes into a `Decoder` with a fuzzer-chosen limit,
//!   in the codec the payload names: whatever decodes is exactly the declared length, and an
//!   error leaves nothing behind;
//! - as raw compressed bytes with a declared length taken from the first bytes, in zstd and in
//!   the field code (the fuzzer finds valid zstd frames quickly from the seed corpus it builds);
//! - as plain bytes: compress at a fuzzer-chosen level, then decompress: the identity; then the
//!   compressed frame corrupted at positions and to values the input chooses, and decoded again
//!   (libzstd is not instrumented, so the fuzzer would seldom build a valid frame by itself:
//!   this puts well-formed frames with a few wrong bytes in front of the decoder on every run);
//!   and the same bytes coded in the field code, decoded, corrupted and decoded again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sieve_core::compress::{fields, Codec, Decoder, Encoded, Encoder, FrameCodec};
use sieve_core::message::ZDataRef;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let max = (usize::from(sel) + 1) * 1024;
    let mut decoder = Decoder::new(max).expect("a zstd context");
    let mut out = Vec::new();

    if let Ok(z) = ZDataRef::parse(rest) {
        bounded(&mut decoder, z.codec, z.compressed, u64::from(z.declared_len), &mut out);
    }

    if let Some((head, compressed)) = rest.split_first_chunk::<2>() {
        let declared = u64::from(u16::from_be_bytes(*head));
        for codec in [FrameCodec::Zstd(Codec::zstd(3).expect("3 is a level")), FrameCodec::Fields] {
            bounded(&mut decoder, codec, compressed, declared, &mut out);
        }
    }

    let level = i32::from(sel % 9) + 1;
    let codec = Codec::zstd(level).expect("levels 1 to 9 are valid");
    let mut encoder = Encoder::new().expect("a zstd context");
    let mut packed = Vec::new();
    match encoder.compress(rest, codec, &mut packed).expect("compression succeeds") {
        Encoded::Compressed { len, .. } => {
            assert_eq!(len, packed.len());
            let mut big = Decoder::new(rest.len()).expect("a zstd context");
            big.decompress_into(codec.into(), &packed, rest.len() as u64, &mut out)
                .expect("what we compressed decompresses");
            assert_eq!(out, rest);
            for pair in rest.chunks_exact(3).take(4) {
                let at = usize::from(u16::from_be_bytes([pair[0], pair[1]])) % packed.len();
                packed[at] ^= pair[2] | 1;
                bounded(&mut big, codec.into(), &packed, rest.len() as u64, &mut out);
            }
        }
        Encoded::Raw { compressed_len } => {
            assert!(rest.is_empty() || compressed_len as f64 > 0.95 * rest.len() as f64);
        }
    }

    if !rest.is_empty() {
        fields::encode(rest, &mut packed);
        let mut big = Decoder::new(rest.len()).expect("a zstd context");
        big.decompress_into(FrameCodec::Fields, &packed, rest.len() as u64, &mut out)
            .expect("what the field code coded decodes");
        assert_eq!(out, rest);
        for pair in rest.chunks_exact(3).take(4) {
            let at = usize::from(u16::from_be_bytes([pair[0], pair[1]])) % packed.len();
            packed[at] ^= pair[2] | 1;
            bounded(&mut big, FrameCodec::Fields, &packed, rest.len() as u64, &mut out);
        }
    }
});

/// Decode, and check the one promise: exactly the declared length, or an error and nothing.
fn bounded(
    decoder: &mut Decoder,
    codec: FrameCodec,
    compressed: &[u8],
    declared: u64,
    out: &mut Vec<u8>,
) {
    match decoder.decompress_into(codec, compressed, declared, out) {
        Ok(()) => {
            assert_eq!(out.len() as u64, declared);
            assert!(out.len() <= decoder.max_len());
        }
        Err(_) => assert!(out.is_empty()),
    }
}
