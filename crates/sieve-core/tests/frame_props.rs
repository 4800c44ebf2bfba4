//! Properties of the wire format: frames and messages round-trip, `check` agrees with `parse`,
//! limits are enforced on the header alone, and no input makes a decoder panic.

use proptest::prelude::*;
use sieve_core::batch::BatchSplit;
use sieve_core::compress::{Codec, FrameCodec};
use sieve_core::frame::{self, FrameError, FrameType, Limits, HEADER_LEN};
use sieve_core::layout::{Kind, Layout};
use sieve_core::mac::{MacAlg, MacOffer, OfferError};
use sieve_core::message::golomb::{EncodedLens, LensCode};
use sieve_core::message::{
    bucket_len, Ack, AckStatus, Bye, CompressFlags, Data, DataRef, Doc, DocCancel, DocEnd,
    ErrorMsg, Hello, Join, JoinOk, Manifest, Message, MessageError, Mode, SessionMsg, ZData,
    ZDataRef, DATA_HEADER_LEN, MAX_ADDR_LEN, MAX_MARK_LEN, MAX_NAME_LEN, MAX_TEXT_LEN,
    ZDATA_PREFIX_LEN,
};
use sieve_core::sieve::Placement;
use sieve_core::split::Split;

// ---------- strategies ----------

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![Just(Kind::Plain), Just(Kind::Secure)]
}

/// UTF-8 text of at most `max` bytes, multi-byte characters included.
fn text(max: usize) -> impl Strategy<Value = String> {
    prop_oneof![
        3 => any::<String>(),
        1 => "[a-zA-Z0-9./_-]{0,40}",
        1 => Just(String::new()),
        1 => Just("é".repeat(max / 2)),
    ]
    .prop_map(move |s| {
        let mut end = s.len().min(max);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s[..end].to_owned()
    })
}

fn mark() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 1..=MAX_MARK_LEN)
}

/// Layouts whose lengths never overflow: up to 64 segments of at most `u64::MAX / 64`, plus the
/// extremes.
fn layout() -> impl Strategy<Value = Layout> {
    let lens = prop::collection::vec(
        prop_oneof![0..=300u64, 0..=u64::MAX / 64, Just(0u64)],
        0..64,
    );
    prop_oneof![
        8 => (kind(), lens).prop_map(|(first, lens)| Layout { first, lens }),
        1 => kind().prop_map(|k| Layout::whole(k, u64::MAX)),
        1 => Just(Layout::empty()),
    ]
}

fn mode() -> impl Strategy<Value = Mode> {
    prop_oneof![Just(Mode::Sieve), Just(Mode::SecureOnly)]
}

fn status() -> impl Strategy<Value = AckStatus> {
    prop_oneof![
        Just(AckStatus::Ok),
        Just(AckStatus::IntegrityError),
        Just(AckStatus::StoreError),
        Just(AckStatus::ProtocolError),
        Just(AckStatus::Refused),
        Just(AckStatus::Exists),
        Just(AckStatus::Cancelled),
    ]
}

fn hello() -> impl Strategy<Value = Hello> {
    (
        any::<u16>(),
        mode(),
        any::<u8>(),
        any::<u8>(),
        prop::sample::select(vec![Split::Dynamic, Split::Even, Split::Segment]),
        prop::sample::select(vec![
            BatchSplit::Dynamic,
            BatchSplit::File,
            BatchSplit::Even,
            BatchSplit::Segment,
        ]),
        any::<u32>(),
        any::<u32>(),
        mac_offer(),
        compress_flags(),
    )
        .prop_map(
            |(
                version,
                mode,
                secure_channels,
                plain_channels,
                split,
                batch_split,
                chunk_size,
                docs,
                macs,
                compression,
            )| {
                Hello {
                    version,
                    mode,
                    secure_channels,
                    plain_channels,
                    split,
                    batch_split,
                    chunk_size,
                    docs,
                    macs,
                    compression,
                }
            },
        )
}

fn mac_alg() -> impl Strategy<Value = MacAlg> {
    prop::sample::select(MacAlg::ALL.to_vec())
}

/// Any non-empty ordering of distinct algorithms.
fn mac_offer() -> impl Strategy<Value = MacOffer> {
    Just(MacAlg::ALL.to_vec())
        .prop_shuffle()
        .prop_flat_map(|algs| (1..=algs.len()).prop_map(move |n| algs[..n].to_vec()))
        .prop_map(|algs| MacOffer::new(&algs).expect("distinct and not empty"))
}

fn compress_flags() -> impl Strategy<Value = CompressFlags> {
    (0u8..4).prop_map(|b| CompressFlags::from_byte(b).expect("bits 0 and 1 are defined"))
}

fn session() -> impl Strategy<Value = SessionMsg> {
    (
        any::<[u8; 16]>(),
        text(MAX_ADDR_LEN),
        any::<u32>(),
        any::<u32>(),
        mac_alg(),
        compress_flags(),
        any::<u32>(),
        any::<u8>(),
    )
        .prop_map(
            |(
                session_id,
                plain_addr,
                max_payload,
                max_open_docs,
                mac,
                compression,
                decompress_mbps,
                decompress_cores,
            )| SessionMsg {
                session_id,
                plain_addr,
                max_payload,
                max_open_docs,
                mac,
                compression,
                decompress_mbps,
                decompress_cores,
            },
        )
}

fn join() -> impl Strategy<Value = Join> {
    (any::<[u8; 16]>(), kind(), any::<u8>(), any::<[u8; 32]>()).prop_map(
        |(session_id, kind, index, token)| Join {
            session_id,
            kind,
            index,
            token,
        },
    )
}

fn doc() -> impl Strategy<Value = Doc> {
    (
        any::<u32>(),
        text(MAX_NAME_LEN),
        layout(),
        prop::option::of((mark(), mark())),
        prop_oneof![3 => Just(0u32), 1 => 0..2000u32],
    )
        .prop_map(|(doc, name, layout, marks, padding)| Doc {
            doc,
            name,
            layout,
            marks,
            padding,
        })
}

fn doc_cancel() -> impl Strategy<Value = DocCancel> {
    (any::<u32>(), text(MAX_TEXT_LEN)).prop_map(|(doc, reason)| DocCancel { doc, reason })
}

fn data() -> impl Strategy<Value = Data> {
    (
        any::<u32>(),
        any::<u64>(),
        prop::collection::vec(any::<u8>(), 0..512),
    )
        .prop_map(|(doc, offset, payload)| Data {
            doc,
            offset,
            payload,
        })
}

fn codec() -> impl Strategy<Value = FrameCodec> {
    prop_oneof![
        10 => prop_oneof![-7i32..=-1, 1i32..=22]
            .prop_map(|l| FrameCodec::Zstd(Codec::zstd(l).expect("a valid level"))),
        1 => Just(FrameCodec::Fields),
    ]
}

fn zdata() -> impl Strategy<Value = ZData> {
    (
        any::<u32>(),
        any::<u64>(),
        any::<u32>(),
        codec(),
        prop::collection::vec(any::<u8>(), 0..512),
    )
        .prop_map(|(doc, offset, declared_len, codec, compressed)| ZData {
            doc,
            offset,
            declared_len,
            codec,
            compressed,
        })
}

fn doc_end() -> impl Strategy<Value = DocEnd> {
    (any::<u32>(), any::<[u8; 32]>(), any::<u64>(), any::<u64>()).prop_map(
        |(doc, plain_digest, secure_len, plain_len)| DocEnd {
            doc,
            plain_digest,
            secure_len,
            plain_len,
        },
    )
}

fn ack() -> impl Strategy<Value = Ack> {
    (
        any::<u32>(),
        status(),
        text(MAX_TEXT_LEN),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(
            |(doc, status, message, receive_us, integrate_us, commit_us)| Ack {
                doc,
                status,
                message,
                receive_us,
                integrate_us,
                commit_us,
            },
        )
}

fn error() -> impl Strategy<Value = ErrorMsg> {
    (any::<u16>(), text(MAX_TEXT_LEN)).prop_map(|(code, message)| ErrorMsg { code, message })
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        hello().prop_map(Message::from),
        session().prop_map(Message::from),
        join().prop_map(Message::from),
        Just(Message::JoinOk(JoinOk {})),
        doc().prop_map(Message::from),
        data().prop_map(Message::from),
        doc_end().prop_map(Message::from),
        doc_cancel().prop_map(Message::from),
        ack().prop_map(Message::from),
        Just(Message::Bye(Bye {})),
        error().prop_map(Message::from),
        zdata().prop_map(Message::from),
    ]
}

fn frame_type() -> impl Strategy<Value = FrameType> {
    prop::sample::select(FrameType::ALL.to_vec())
}

// ---------- helpers ----------

fn encoded(m: &Message) -> Vec<u8> {
    let mut out = Vec::new();
    m.encode(&mut out);
    out
}

/// encode → frame::parse → Message::parse, asserting the frame is consumed exactly.
fn through_the_wire(m: &Message) -> Message {
    let bytes = encoded(m);
    let limits = Limits::default();
    let (f, used) = frame::parse(&bytes, &limits).expect("frame parses");
    assert_eq!(used, bytes.len());
    assert_eq!(f.ty, m.frame_type());
    Message::from_frame(&f).expect("message parses")
}

/// Every decoder on one payload; must never panic. When a message parses, re-encoding it must
/// give back exactly the same payload (the encoding is canonical).
fn parse_everything(payload: &[u8]) {
    for ty in FrameType::ALL {
        if let Ok(m) = Message::parse(ty, payload) {
            assert_eq!(m.frame_type(), ty);
            let bytes = encoded(&m);
            assert_eq!(&bytes[HEADER_LEN..], payload, "{ty} is not canonical");
        }
    }
    let _ = DataRef::parse(payload);
    let _ = Doc::parse_with_max_segments(payload, 3);
    if let Ok(z) = ZDataRef::parse(payload) {
        assert_eq!(&payload[..ZDATA_PREFIX_LEN], &z.authenticated_prefix());
        assert_eq!(&payload[ZDATA_PREFIX_LEN..], z.compressed);
    }
}

// ---------- properties ----------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_message_round_trips(m in message()) {
        prop_assert_eq!(through_the_wire(&m), m);
    }

    #[test]
    fn data_ref_round_trips_without_copying(d in data()) {
        let bytes = encoded(&Message::Data(d.clone()));
        let (f, _) = frame::parse(&bytes, &Limits::default()).unwrap();
        let r = DataRef::parse(f.payload).unwrap();
        prop_assert_eq!(r, d.as_data_ref());
        // The data is a sub-slice of the frame buffer: nothing was copied.
        let range = bytes.as_ptr_range();
        prop_assert!(range.start <= r.payload.as_ptr() && r.payload.as_ptr_range().end <= range.end);
        // Header-then-slice writing gives the same bytes as encode.
        let mut written = Data::encode_header(d.doc, d.offset, d.payload.len()).to_vec();
        written.extend_from_slice(&d.payload);
        prop_assert_eq!(written, bytes);
    }

    /// A padded manifest's payload is exactly its bucket (or the frame limit, when the bucket
    /// would not fit and the manifest does), still round-trips, and manifests of any number of
    /// segments in the same bucket cannot be told apart by length.
    #[test]
    fn padded_manifests_fill_their_bucket(mut d in doc(), limit in prop_oneof![Just(16u32 << 20), 64u32..5000]) {
        d.padding = 0;
        let base = d.encoded_len() - HEADER_LEN;
        d.pad_to_bucket(limit);
        let len = d.encoded_len() - HEADER_LEN;
        let want = bucket_len(base).min(limit as usize).max(base);
        prop_assert_eq!(len, want);
        prop_assert!(len == base || len >= 512.min(limit as usize));
        prop_assert_eq!(through_the_wire(&Message::Doc(d.clone())), Message::Doc(d));
    }

    #[test]
    fn zdata_ref_round_trips_without_copying(z in zdata()) {
        let bytes = encoded(&Message::ZData(z.clone()));
        let (f, _) = frame::parse(&bytes, &Limits::default()).unwrap();
        let r = ZDataRef::parse(f.payload).unwrap();
        prop_assert_eq!(r, z.as_zdata_ref());
        let range = bytes.as_ptr_range();
        prop_assert!(range.start <= r.compressed.as_ptr() && r.compressed.as_ptr_range().end <= range.end);
        // Header-then-slice writing gives the same bytes as encode.
        let mut written =
            ZData::encode_header(z.doc, z.offset, z.declared_len, z.codec, z.compressed.len()).to_vec();
        written.extend_from_slice(&z.compressed);
        prop_assert_eq!(written, bytes);
    }

    #[test]
    fn zdata_with_a_bad_codec_is_refused(z in zdata(), bad in any::<u8>()) {
        prop_assume!(FrameCodec::from_byte(bad).is_err());
        let mut payload = encoded(&Message::ZData(z)).split_off(HEADER_LEN);
        payload[ZDATA_PREFIX_LEN - 1] = bad;
        prop_assert_eq!(
            Message::parse(FrameType::ZData, &payload),
            Err(MessageError::UnknownValue { msg: "ZData", field: "codec", value: bad })
        );
    }

    /// A manifest whose lengths a placement encoded (as a sender's are) pads to the same size
    /// and encodes to the same bytes as the manifest encoding them itself, and so does one
    /// given none; both parse back to the document.
    #[test]
    fn a_manifest_with_its_lengths_given_is_the_doc(mut d in doc(), limit in prop_oneof![Just(16u32 << 20), 64u32..5000]) {
        d.padding = 0;
        let given = Placement::new(&d.layout, None).unwrap().encoded_lens();
        prop_assert_eq!(&given, &EncodedLens::of(&d.layout));
        for lens in [Some(given), None] {
            let mut m = Manifest::new(d.clone(), lens);
            let mut plain = d.clone();
            prop_assert_eq!(m.pad_to_bucket(limit), plain.pad_to_bucket(limit));
            prop_assert_eq!(m.doc(), &plain);
            let mut bytes = Vec::new();
            m.encode(&mut bytes);
            prop_assert_eq!(&bytes, &encoded(&Message::Doc(plain.clone())));
            let (f, _) = frame::parse(&bytes, &Limits::default()).unwrap();
            prop_assert_eq!(Message::from_frame(&f), Ok(Message::Doc(plain)));
        }
    }

    #[test]
    fn doc_encoded_len_is_exact(d in doc()) {
        prop_assert_eq!(d.encoded_len(), encoded(&Message::Doc(d.clone())).len());
        prop_assert_eq!(d.validate(), Ok(()));
    }

    #[test]
    fn check_needs_the_whole_frame(m in message()) {
        let bytes = encoded(&m);
        let limits = Limits::default();
        for n in 0..bytes.len() {
            prop_assert_eq!(frame::check(&bytes[..n], &limits), Ok(None));
            let e = frame::parse(&bytes[..n], &limits).unwrap_err();
            prop_assert!(e.is_incomplete(), "{}", e);
        }
        prop_assert_eq!(frame::check(&bytes, &limits), Ok(Some(bytes.len())));
    }

    #[test]
    fn concatenated_frames_parse_in_sequence(ms in prop::collection::vec(message(), 0..12)) {
        let mut buf = Vec::new();
        for m in &ms {
            m.encode(&mut buf);
        }
        let limits = Limits::default();
        let mut rest = &buf[..];
        let mut got = Vec::new();
        while !rest.is_empty() {
            let n = frame::check(rest, &limits).unwrap().expect("a whole frame is buffered");
            let (f, used) = frame::parse(rest, &limits).unwrap();
            prop_assert_eq!(n, used);
            got.push(Message::from_frame(&f).unwrap());
            rest = &rest[used..];
        }
        prop_assert_eq!(got, ms);
    }

    #[test]
    fn over_limit_is_refused_on_the_header_alone(
        ty in frame_type(),
        max in 0u32..u32::MAX,
        excess in 1u32..=u32::MAX,
    ) {
        let len = max.saturating_add(excess);
        let limits = Limits { max_payload: max };
        // Only the five header bytes exist: the claimed payload cannot have been buffered or
        // allocated, yet the verdict is final.
        let header: [u8; HEADER_LEN] = frame::encode_header(ty, len);
        let e = FrameError::TooLarge { len, max };
        prop_assert_eq!(frame::check(&header, &limits), Err(e.clone()));
        prop_assert_eq!(frame::parse_header(&header, &limits), Err(e.clone()));
        prop_assert_eq!(frame::parse(&header, &limits).map(|_| ()), Err(e));
    }

    #[test]
    fn unknown_type_is_refused(t in any::<u8>(), len in any::<u32>()) {
        prop_assume!(FrameType::try_from(t).is_err());
        let mut header = len.to_be_bytes().to_vec();
        header.push(t);
        let limits = Limits { max_payload: u32::MAX };
        prop_assert_eq!(frame::check(&header, &limits), Err(FrameError::UnknownType(t)));
        prop_assert_eq!(frame::parse_header(&header, &limits), Err(FrameError::UnknownType(t)));
    }

    #[test]
    fn truncated_payloads_are_errors(m in message()) {
        let bytes = encoded(&m);
        let payload = &bytes[HEADER_LEN..];
        let ty = m.frame_type();
        for n in 0..payload.len() {
            // A Data payload of at least 12 bytes is a shorter but valid Data message, and a
            // ZData payload of at least its prefix a shorter ZData (its decoder, which checks the
            // zstd frame, refuses the cut: see compress_props).
            if (ty == FrameType::Data && n >= 12) || (ty == FrameType::ZData && n >= ZDATA_PREFIX_LEN) {
                break;
            }
            prop_assert!(Message::parse(ty, &payload[..n]).is_err(), "{} cut to {}", ty, n);
        }
    }

    #[test]
    fn trailing_garbage_is_an_error(
        m in message(),
        garbage in prop::collection::vec(any::<u8>(), 1..16),
    ) {
        // Data and ZData have no trailing bytes: their payload runs to the end of the frame (for
        // ZData the decoder refuses bytes after the zstd frame: see compress_props).
        prop_assume!(m.frame_type() != FrameType::Data && m.frame_type() != FrameType::ZData);
        let mut payload = encoded(&m).split_off(HEADER_LEN);
        payload.extend_from_slice(&garbage);
        let e = Message::parse(m.frame_type(), &payload).unwrap_err();
        prop_assert!(matches!(e, MessageError::TrailingBytes { .. }), "{}", e);
    }

    #[test]
    fn random_payloads_never_panic(payload in prop::collection::vec(any::<u8>(), 0..256)) {
        parse_everything(&payload);
    }

    #[test]
    fn mutated_payloads_never_panic(m in message(), flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4)) {
        let mut payload = encoded(&m).split_off(HEADER_LEN);
        if payload.is_empty() {
            return Ok(());
        }
        for (i, b) in flips {
            let i = i.index(payload.len());
            payload[i] = b;
        }
        parse_everything(&payload);
    }

    #[test]
    fn random_streams_never_panic(
        buf in prop::collection::vec(any::<u8>(), 0..512),
        max in prop_oneof![0u32..64, Just(u32::MAX)],
    ) {
        let limits = Limits { max_payload: max };
        let mut rest = &buf[..];
        loop {
            let checked = frame::check(rest, &limits);
            match frame::parse(rest, &limits) {
                Ok((f, used)) => {
                    prop_assert_eq!(checked, Ok(Some(used)));
                    parse_everything(f.payload);
                    rest = &rest[used..];
                }
                Err(e) if e.is_incomplete() => {
                    prop_assert_eq!(checked, Ok(None));
                    break;
                }
                Err(e) => {
                    prop_assert_eq!(checked, Err(e));
                    break;
                }
            }
        }
    }
}

// ---------- unit tests ----------

/// The payload of a Doc whose segment count varint says `count`, followed by `tail` (the orders
/// of its lengths' code, then the lengths).
fn doc_claiming(count: u64, tail: &[u8]) -> Vec<u8> {
    let mut p = vec![0, 0, 0, 1]; // doc
    p.push(0); // empty name
    p.push(1); // first = secure
    let mut c = count;
    while c >= 0x80 {
        p.push((c as u8 & 0x7f) | 0x80);
        c >>= 7;
    }
    p.push(c as u8);
    p.extend_from_slice(tail);
    p
}

/// The orders and codewords of `lens`, segments alternating from a classified one.
fn coded(lens: Vec<u64>) -> Vec<u8> {
    let layout = Layout {
        first: Kind::Secure,
        lens,
    };
    let code = LensCode::choose(&layout);
    let mut out = vec![code.order(Kind::Plain), code.order(Kind::Secure)];
    code.encode(&layout, &mut out);
    out
}

#[test]
fn doc_claiming_2_pow_32_segments_is_refused_without_allocating() {
    // If the decoder trusted the count it would reserve 32 GiB for the lengths and abort. Every
    // length takes at least a bit, so 2^32 of them need 2^29 bytes.
    let p = doc_claiming(1 << 32, &[0, 0, 1, 2, 3, 0]);
    let e = Doc::parse(&p).unwrap_err();
    assert!(
        matches!(e, MessageError::Truncated { field: "segments", need, have: 4, .. } if need == 1 << 29),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "Doc message truncated: field `segments` needs 536870912 bytes, 4 remain"
    );
    // Same through Message::parse and for the largest count a varint can say.
    assert!(Message::parse(FrameType::Doc, &p).is_err());
    assert!(Doc::parse(&doc_claiming(u64::MAX, &[])).is_err());
}

#[test]
fn doc_segment_cap_applies_before_reading_lengths() {
    let mut tail = coded(vec![1, 2, 3]);
    tail.extend_from_slice(&[0, 0, 0, 0, 0]);
    let p = doc_claiming(3, &tail);
    assert_eq!(
        Doc::parse(&p).unwrap().layout,
        Layout {
            first: Kind::Secure,
            lens: vec![1, 2, 3]
        }
    );
    assert!(matches!(
        Doc::parse_with_max_segments(&p, 2),
        Err(MessageError::TooManySegments {
            count: 3,
            max: 2,
            ..
        })
    ));
}

#[test]
fn doc_length_overflow_is_refused() {
    let mut tail = coded(vec![u64::MAX, 1]);
    tail.extend_from_slice(&[0, 0, 0, 0, 0]);
    assert!(matches!(
        Doc::parse(&doc_claiming(2, &tail)),
        Err(MessageError::LayoutOverflow { .. })
    ));
}

#[test]
fn empty_layout_is_legal() {
    let d = Doc {
        doc: 0,
        name: "empty".into(),
        layout: Layout::empty(),
        marks: None,
        padding: 0,
    };
    assert_eq!(through_the_wire(&Message::Doc(d.clone())), Message::Doc(d));
}

#[test]
fn string_length_beyond_payload_or_limit_is_refused() {
    // Name claims 4096 bytes (within the limit) but 3 remain.
    let p = [0, 0, 0, 0, 0x80, 0x20, b'a', b'b', b'c'];
    assert!(matches!(
        Doc::parse(&p),
        Err(MessageError::Truncated { field: "name", .. })
    ));
    // Name claims 4097 bytes: over the limit, refused before looking further.
    let p = [0, 0, 0, 0, 0x81, 0x20];
    assert!(matches!(
        Doc::parse(&p),
        Err(MessageError::TooLong {
            field: "name",
            len: 4097,
            max: MAX_NAME_LEN,
            ..
        })
    ));
    // Invalid UTF-8 in an error message.
    let p = [0, 1, 2, 0xff, 0xfe];
    assert!(matches!(
        ErrorMsg::parse(&p),
        Err(MessageError::BadUtf8 {
            field: "message",
            ..
        })
    ));
}

#[test]
fn unknown_enum_values_are_refused() {
    let mut p = encoded(&Message::Join(Join {
        session_id: [0; 16],
        kind: Kind::Plain,
        index: 0,
        token: [0; 32],
    }))
    .split_off(HEADER_LEN);
    p[16] = 2;
    assert!(matches!(
        Join::parse(&p),
        Err(MessageError::UnknownValue {
            field: "kind",
            value: 2,
            ..
        })
    ));
    let mut h = [0u8; Hello::FIXED_LEN + 2];
    h[Hello::FIXED_LEN] = 1; // one MAC: GMAC
    h[2] = 7;
    assert!(matches!(
        Hello::parse(&h),
        Err(MessageError::UnknownValue {
            field: "mode",
            value: 7,
            ..
        })
    ));
    // Reserved compression bits, in HELLO and in SESSION.
    let mut h = [0u8; Hello::FIXED_LEN + 2];
    h[Hello::FIXED_LEN - 1] = 0x80;
    h[Hello::FIXED_LEN] = 1; // one MAC: GMAC
    assert!(matches!(
        Hello::parse(&h),
        Err(MessageError::UnknownValue {
            field: "compression",
            value: 0x80,
            ..
        })
    ));
    let mut s = encoded(&Message::Session(SessionMsg {
        session_id: [0; 16],
        plain_addr: "127.0.0.1:7080".into(),
        max_payload: 1 << 20,
        max_open_docs: 8,
        mac: MacAlg::Gmac,
        compression: CompressFlags::ALL,
        decompress_mbps: 1000,
        decompress_cores: 2,
    }))
    .split_off(HEADER_LEN);
    let at = s.len() - 6;
    assert_eq!(s[at], 3);
    s[at] = 0x10;
    assert!(matches!(
        SessionMsg::parse(&s),
        Err(MessageError::UnknownValue {
            field: "compression",
            value: 0x10,
            ..
        })
    ));
}

/// The MAC offer in HELLO and the choice in SESSION: unknown codes, duplicates, an empty or an
/// over-long list are refused at parse, each with the field named.
#[test]
fn mac_offers_and_choices_parse_strictly() {
    let hello = |macs: &[u8]| {
        let mut h = vec![0u8; Hello::FIXED_LEN];
        h.push(macs.len() as u8);
        h.extend_from_slice(macs);
        Hello::parse(&h)
    };
    let ok = hello(&[2, 0]).expect("Poly1305 then GMAC");
    assert_eq!(ok.macs.algs(), &[MacAlg::Poly1305, MacAlg::Gmac]);
    let ok = hello(&[3]).expect("NH-Poly1305");
    assert_eq!(ok.macs.algs(), &[MacAlg::NhPoly1305]);
    assert!(matches!(
        hello(&[0, 4]),
        Err(MessageError::UnknownValue {
            field: "macs",
            value: 4,
            ..
        })
    ));
    assert!(matches!(
        hello(&[1, 1]),
        Err(MessageError::BadOffer {
            field: "macs",
            why: OfferError::Duplicate(MacAlg::Blake3),
            ..
        })
    ));
    assert!(matches!(
        hello(&[]),
        Err(MessageError::BadOffer {
            why: OfferError::Empty,
            ..
        })
    ));
    assert!(matches!(
        hello(&[0, 1, 2, 3, 0]),
        Err(MessageError::TooLong { field: "macs", .. })
    ));
    // A count that claims more codes than follow.
    let mut h = vec![0u8; Hello::FIXED_LEN];
    h.extend_from_slice(&[2, 0]);
    assert!(matches!(
        Hello::parse(&h),
        Err(MessageError::Truncated { field: "macs", .. })
    ));

    let s = SessionMsg {
        session_id: [1; 16],
        plain_addr: "127.0.0.1:7080".into(),
        max_payload: 1,
        max_open_docs: 1,
        mac: MacAlg::Blake3,
        compression: CompressFlags::NONE,
        decompress_mbps: 0,
        decompress_cores: 1,
    };
    let mut p = encoded(&Message::Session(s.clone())).split_off(HEADER_LEN);
    assert_eq!(SessionMsg::parse(&p), Ok(s));
    // The MAC's code comes before the compression byte, the speed and the cores.
    let at = p.len() - 7;
    p[at] = 9;
    assert!(matches!(
        SessionMsg::parse(&p),
        Err(MessageError::UnknownValue {
            field: "mac",
            value: 9,
            ..
        })
    ));
}

#[test]
fn long_text_is_cut_on_encode_so_errors_can_always_be_sent() {
    let e = ErrorMsg::new(ErrorMsg::INTERNAL, "ü".repeat(MAX_TEXT_LEN));
    let Message::Error(back) = through_the_wire(&Message::Error(e)) else {
        panic!()
    };
    assert_eq!(back.message, "ü".repeat(MAX_TEXT_LEN / 2));
}

#[test]
fn data_header_is_header_plus_prefix() {
    let h = Data::encode_header(1, 2, 3);
    assert_eq!(h.len(), DATA_HEADER_LEN);
    assert_eq!(h, [0, 0, 0, 15, 6, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2]);
}

#[test]
fn frame_types_are_stable() {
    let codes: Vec<u8> = FrameType::ALL.iter().map(|t| t.code()).collect();
    assert_eq!(codes, (1..=12).collect::<Vec<u8>>());
}
