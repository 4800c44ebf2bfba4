//! Arbitrary bytes into every frame and message decoder.
//!
//! Byte 0 picks the frame limit (small limits exercise `TooLarge`); the rest is read as a stream
//! of frames, the way a receive loop reads a socket buffer, and also as the payload of every
//! message type. Beyond "never panics", it checks:
//! - `check` and `parse` agree on every buffer;
//! - a message that parses re-encodes to exactly the same frame (the encoding is canonical), for
//!   every type in `FrameType::ALL`, `DocCancel` included;
//! - `Doc::parse_with_max_segments` agrees with `Doc::parse` whenever it accepts;
//! - a manifest padded to its bucket (`Doc::pad_to_bucket`) fills it exactly and parses back.
//! - a `ZData` that parses keeps its compressed bytes verbatim after the authenticated prefix;
//! - a manifest's placement as the receiver builds it (decoding the code as it travelled) is the
//!   one the sender builds from the layout (counting each codeword's bits).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sieve_core::frame::{self, FrameType, Limits, HEADER_LEN};
use sieve_core::message::{bucket_len, DataRef, Doc, DocRef, Message, ZDataRef, ZDATA_PREFIX_LEN};
use sieve_core::sieve::Placement;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, stream)) = data.split_first() else {
        return;
    };
    let limits = Limits {
        max_payload: if sel & 0x80 != 0 {
            u32::MAX
        } else {
            u32::from(sel) * 4
        },
    };

    // A receive loop over a buffer of concatenated frames.
    let mut rest = stream;
    loop {
        let checked = frame::check(rest, &limits);
        match frame::parse(rest, &limits) {
            Ok((f, used)) => {
                assert_eq!(checked, Ok(Some(used)));
                assert!(used >= HEADER_LEN && used <= rest.len());
                assert_eq!(f.payload.len(), used - HEADER_LEN);
                let header = frame::parse_header(rest, &limits).expect("header of a parsed frame");
                assert_eq!((header.ty, header.frame_len()), (f.ty, used));
                message(f.ty, f.payload);
                rest = &rest[used..];
            }
            Err(e) if e.is_incomplete() => {
                assert_eq!(checked, Ok(None));
                break;
            }
            Err(e) => {
                assert_eq!(checked, Err(e.clone()));
                assert_eq!(frame::parse_header(rest, &limits), Err(e));
                break;
            }
        }
    }

    // The whole input as the payload of every type.
    for ty in FrameType::ALL {
        message(ty, stream);
    }
});

fn message(ty: FrameType, payload: &[u8]) {
    if let Ok(m) = Message::parse(ty, payload) {
        assert_eq!(m.frame_type(), ty);
        let mut out = Vec::new();
        m.encode(&mut out);
        let len = u32::try_from(payload.len()).expect("fuzz inputs are small");
        assert_eq!(out[..HEADER_LEN], frame::encode_header(ty, len));
        assert_eq!(
            &out[HEADER_LEN..],
            payload,
            "{ty} encoding is not canonical"
        );
        if let Message::Doc(d) = &m {
            assert_eq!(d.encoded_len(), out.len());
            assert_eq!(d.validate(), Ok(()));
            let mut padded = d.clone();
            padded.padding = 0;
            let base = padded.encoded_len() - HEADER_LEN;
            padded.pad_to_bucket(u32::MAX);
            assert_eq!(padded.encoded_len() - HEADER_LEN, bucket_len(base));
            let mut again = Vec::new();
            padded.encode(&mut again);
            assert_eq!(Doc::parse(&again[HEADER_LEN..]), Ok(padded));
            let marks = d
                .marks
                .as_ref()
                .map(|(s, e)| (s.len() as u64, e.len() as u64));
            let travelled = DocRef::parse(payload).expect("a manifest that parsed as a Doc");
            assert_eq!(
                Placement::from_manifest(&travelled, marks),
                Placement::new(&d.layout, marks)
            );
        }
    }
    if let Ok(d) = DataRef::parse(payload) {
        assert_eq!(d.payload.len() + 12, payload.len());
    }
    if let Ok(z) = ZDataRef::parse(payload) {
        assert_eq!(z.compressed.len() + ZDATA_PREFIX_LEN, payload.len());
        assert_eq!(&payload[..ZDATA_PREFIX_LEN], &z.authenticated_prefix());
    }
    if let Ok(capped) = Doc::parse_with_max_segments(payload, 16) {
        assert!(capped.layout.lens.len() <= 16);
        assert_eq!(Doc::parse(payload), Ok(capped));
    }
}
