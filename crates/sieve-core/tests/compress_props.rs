//! Properties of the frame codecs (zstd, and the field code of classified values): compress →
//! decompress is the identity, and no input, however made, gets the decoder to produce anything
//! but exactly the declared length.

use proptest::prelude::*;
use sieve_core::compress::{
    decompress, fields, Codec, Decoder, DecompressError, Encoded, Encoder, FrameCodec,
};
use sieve_core::frame::{self, Limits};
use sieve_core::message::{Message, ZData, ZDataRef};

/// Bytes from noise to highly repetitive: runs of a few words, random bytes, or both.
fn plain() -> impl Strategy<Value = Vec<u8>> {
    let words = prop::collection::vec(
        prop::sample::select(vec![
            &b"the "[..],
            b"sieve ",
            b"classified ",
            b"12.50,",
            b"\n",
            b"name=",
        ]),
        0..2000,
    )
    .prop_map(|w| w.concat());
    prop_oneof![
        3 => words,
        1 => prop::collection::vec(any::<u8>(), 0..4096),
        1 => (prop::collection::vec(any::<u8>(), 0..64), 1usize..200).prop_map(|(b, n)| b.repeat(n)),
    ]
}

fn level() -> impl Strategy<Value = Codec> {
    prop::sample::select(vec![-7, -1, 1, 3, 9, 19]).prop_map(|l| Codec::zstd(l).unwrap())
}

/// zstd at level 3, or the field code.
fn frame_codec() -> impl Strategy<Value = FrameCodec> {
    prop_oneof![
        Just(FrameCodec::Zstd(Codec::zstd(3).unwrap())),
        Just(FrameCodec::Fields)
    ]
}

/// A valid compressed frame of `plain` in `codec`, and its declared length.
fn frame_of(codec: FrameCodec, plain: &[u8]) -> (Vec<u8>, u64) {
    let z = match codec {
        FrameCodec::Zstd(c) => zstd::bulk::compress(plain, c.level()).unwrap(),
        FrameCodec::Fields => {
            let mut out = Vec::new();
            fields::encode(plain, &mut out);
            out
        }
    };
    (z, plain.len() as u64)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn compress_then_decompress_is_the_identity(p in plain(), codec in level()) {
        let mut enc = Encoder::new().unwrap();
        let mut out = Vec::new();
        match enc.compress(&p, codec, &mut out).unwrap() {
            Encoded::Compressed { codec: c, len } => {
                prop_assert_eq!(c, codec);
                prop_assert_eq!(len, out.len());
                prop_assert!(len as f64 <= 0.95 * p.len() as f64);
                prop_assert_eq!(decompress(codec.into(), &out, p.len() as u64).unwrap(), p);
            }
            Encoded::Raw { compressed_len } => {
                prop_assert!(p.is_empty() || compressed_len as f64 > 0.95 * p.len() as f64);
            }
        }
    }

    #[test]
    fn a_compressed_frame_survives_the_wire(
        p in plain(),
        codec in prop_oneof![level().prop_map(FrameCodec::Zstd), Just(FrameCodec::Fields)],
        doc: u32,
        offset: u64,
    ) {
        prop_assume!(!p.is_empty());
        let (out, _) = frame_of(codec, &p);
        let len = out.len();
        let declared_len = u32::try_from(p.len()).unwrap();
        let mut wire = ZData::encode_header(doc, offset, declared_len, codec, len).to_vec();
        wire.extend_from_slice(&out);
        let (f, used) = frame::parse(&wire, &Limits::default()).unwrap();
        prop_assert_eq!(used, wire.len());
        let z = ZDataRef::parse(f.payload).unwrap();
        prop_assert_eq!((z.doc, z.offset, z.declared_len, z.codec), (doc, offset, declared_len, codec));
        let mut d = Decoder::new(1 << 20).unwrap();
        let mut back = Vec::new();
        d.decompress_into(z.codec, z.compressed, u64::from(z.declared_len), &mut back).unwrap();
        prop_assert_eq!(&back, &p);
        prop_assert_eq!(Message::parse(f.ty, f.payload).unwrap(), Message::ZData(z.to_zdata()));
    }

    #[test]
    fn arbitrary_bytes_never_decode_past_the_declared_length(
        bytes in prop::collection::vec(any::<u8>(), 0..512),
        declared in 0u64..8192,
        codec in frame_codec(),
    ) {
        let mut d = Decoder::new(4096).unwrap();
        let mut out = Vec::new();
        match d.decompress_into(codec, &bytes, declared, &mut out) {
            Ok(()) => prop_assert_eq!(out.len() as u64, declared),
            Err(_) => prop_assert!(out.is_empty()),
        }
    }

    #[test]
    fn mutated_frames_decode_to_the_declared_length_or_fail(
        p in plain(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        declared_delta in prop_oneof![Just(0i64), -3i64..=3],
        codec in frame_codec(),
    ) {
        prop_assume!(!p.is_empty());
        let (mut z, n) = frame_of(codec, &p);
        for (i, b) in flips {
            let i = i.index(z.len());
            z[i] = b;
        }
        let declared = n.saturating_add_signed(declared_delta);
        let mut d = Decoder::new(1 << 20).unwrap();
        let mut out = Vec::new();
        match d.decompress_into(codec, &z, declared, &mut out) {
            Ok(()) => prop_assert_eq!(out.len() as u64, declared),
            Err(_) => prop_assert!(out.is_empty()),
        }
    }

    #[test]
    fn truncated_or_extended_frames_are_refused(
        p in plain(),
        cut in any::<prop::sample::Index>(),
        garbage in prop::collection::vec(any::<u8>(), 1..32),
    ) {
        prop_assume!(!p.is_empty());
        let zstd = FrameCodec::Zstd(Codec::zstd(3).unwrap());
        let (z, n) = frame_of(zstd, &p);
        let mut d = Decoder::new(1 << 20).unwrap();
        let mut out = Vec::new();
        let short = &z[..cut.index(z.len())];
        prop_assert!(d.decompress_into(zstd, short, n, &mut out).is_err());
        let mut long = z.clone();
        long.extend_from_slice(&garbage);
        prop_assert!(d.decompress_into(zstd, &long, n, &mut out).is_err());
        // The frame itself still decodes.
        d.decompress_into(zstd, &z, n, &mut out).unwrap();
        prop_assert_eq!(out, p);
    }

    /// The field code has no header to check, so a truncated or extended frame may decode, to
    /// other bytes of exactly the declared length (what travels is authenticated by TLS, or by
    /// the plain channel's MAC, not by the codec), or be refused; never more, never a panic.
    #[test]
    fn field_coded_frames_cut_or_extended_stay_bounded(
        p in plain(),
        cut in any::<prop::sample::Index>(),
        garbage in prop::collection::vec(any::<u8>(), 1..32),
    ) {
        prop_assume!(!p.is_empty());
        let (z, n) = frame_of(FrameCodec::Fields, &p);
        let mut d = Decoder::new(1 << 20).unwrap();
        let mut out = Vec::new();
        match d.decompress_into(FrameCodec::Fields, &z[..cut.index(z.len())], n, &mut out) {
            Ok(()) => prop_assert_eq!(out.len() as u64, n),
            Err(_) => prop_assert!(out.is_empty()),
        }
        let mut long = z.clone();
        long.extend_from_slice(&garbage);
        match d.decompress_into(FrameCodec::Fields, &long, n, &mut out) {
            Ok(()) => prop_assert_eq!(out.len() as u64, n),
            Err(_) => prop_assert!(out.is_empty()),
        }
        d.decompress_into(FrameCodec::Fields, &z, n, &mut out).unwrap();
        prop_assert_eq!(out, p);
    }

    #[test]
    fn a_declared_length_over_the_limit_allocates_nothing(
        p in plain(),
        max in 0usize..4096,
        codec in frame_codec(),
    ) {
        prop_assume!(p.len() > max);
        let (z, n) = frame_of(codec, &p);
        let mut d = Decoder::new(max).unwrap();
        let mut out = Vec::new();
        prop_assert_eq!(
            d.decompress_into(codec, &z, n, &mut out),
            Err(DecompressError::TooLarge { declared: n, max })
        );
        prop_assert_eq!(out.capacity(), 0);
    }
}

/// A zstd "bomb": 1 GiB of zeros compresses to about 32 KiB. Declared as 1 MiB it is refused by
/// its header, before a byte is produced; even declared honestly it is refused by the limit.
#[test]
fn a_decompression_bomb_is_refused_by_its_header() {
    let zeros = vec![0u8; 64 << 20];
    let z = zstd::bulk::compress(&zeros, 19).unwrap();
    assert!(z.len() < 8 << 10, "{}", z.len());
    let mut d = Decoder::new(1 << 20).unwrap();
    let mut out = Vec::new();
    assert_eq!(
        d.decompress_into(zstd3(), &z, 1 << 20, &mut out),
        Err(DecompressError::SizeMismatch {
            declared: 1 << 20,
            frame: 64 << 20
        })
    );
    assert_eq!(
        d.decompress_into(zstd3(), &z, 64 << 20, &mut out),
        Err(DecompressError::TooLarge {
            declared: 64 << 20,
            max: 1 << 20
        })
    );
    assert_eq!(out.capacity(), 0);
}

fn zstd3() -> FrameCodec {
    FrameCodec::Zstd(Codec::zstd(3).unwrap())
}
