//! `Doc`: the manifest of one document, sent over a secure channel before its data.
//!
//! The thesis told the receiver how to reassemble a document with the `<!First!>` tag and
//! separator strings inside the streams. The manifest carries the same information as data: the
//! document's name, its [`Layout`] (kind of the first segment and every segment's length) and the
//! mark strings to restore. From the layout the receiver knows the offset of every byte of both
//! streams in the output, so it can write data frames straight to their place.
//!
//! The layout travels only inside TLS: an observer of the plain channels sees the cleartext but
//! not where the classified pieces sat or how long they were.
//!
//! TLS hides the manifest's bytes but not its length, and the length grows with the number of
//! segments: an observer could count a document's classified parts from the size of the TLS
//! record that carried its manifest. A sender therefore pads every manifest to a size bucket
//! ([`Doc::pad_to_bucket`]: the next power of two, at least [`MIN_DOC_BUCKET`] bytes), so the
//! record shows only the order of magnitude of the manifest.
//!
//! Payload: `doc` u32, `name` (varint length, UTF-8), first kind u8, varint segment count, the
//! Exp-Golomb order of the cleartext's lengths u8 and of the classified lengths u8, the segment
//! lengths in that code (see [`super::golomb`]: bits, the last byte padded with zero bits), marks
//! flag u8 (0 none, 1 present), then if present start and end mark (each varint length and
//! bytes), then `padding` u32 and that many zero bytes (any other byte is an error, so the
//! encoding stays canonical).

use super::golomb::{CodeError, EncodedLens, LensCode, LensDecoder, OrderChoice};
use super::wire::{kind_code, put_bytes, put_varint, varint_len, Reader};
use super::{write_frame, MessageError, MAX_MARK_LEN, MAX_NAME_LEN};
use crate::frame::{FrameType, HEADER_LEN};
use crate::layout::{Kind, Layout};

const MSG: &str = "Doc";

/// Smallest size bucket of a padded manifest's payload, in bytes: a manifest of a few segments
/// and a short name is a little over 20 bytes, so every ordinary document looks the same.
pub const MIN_DOC_BUCKET: usize = 512;

/// The bucket a manifest payload of `len` bytes is padded to: the next power of two, at least
/// [`MIN_DOC_BUCKET`].
pub fn bucket_len(len: usize) -> usize {
    len.max(MIN_DOC_BUCKET)
        .checked_next_power_of_two()
        .unwrap_or(usize::MAX)
}

/// A document manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Doc {
    /// Document index within the session; [`super::Data`], [`super::DocEnd`] and [`super::Ack`]
    /// refer to it.
    pub doc: u32,
    /// File name as the sender gives it, UTF-8, at most [`MAX_NAME_LEN`] bytes. Untrusted: the
    /// receiver's store must reduce it to a safe name inside its output folder.
    pub name: String,
    /// Segments in document order. The empty layout is an empty document.
    pub layout: Layout,
    /// Start and end mark strings (each 1..=[`MAX_MARK_LEN`] bytes) the receiver writes around
    /// every secure segment, so the output equals the input byte for byte; `None` to write the
    /// content without marks.
    pub marks: Option<(Vec<u8>, Vec<u8>)>,
    /// Zero bytes appended to the payload so that its length does not tell the number of
    /// segments (see [`Doc::pad_to_bucket`]); `0` for none.
    pub padding: u32,
}

/// Bytes `layout`'s lengths take in the code [`LensCode::choose`] picks for them.
fn lens_bytes(layout: &Layout) -> usize {
    usize::try_from(LensCode::choose_with_bits(layout).1.div_ceil(8)).unwrap_or(usize::MAX)
}

/// A manifest as a sender queues it: the [`Doc`] and its lengths, encoded once.
///
/// [`Doc::pad_to_bucket`] and [`Doc::encode`] each choose the code from the layout, and the
/// sender's placement of the same layout had chosen and encoded it already: for a dense
/// document that was three passes choosing and two encoding where one of each does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    doc: Doc,
    lens: EncodedLens,
}

impl Manifest {
    /// `doc` with `lens`, its layout's lengths already encoded ([`EncodedLens::of`], or a
    /// placement's [`crate::sieve::Placement::encoded_lens`]), or encoded here if `None`.
    pub fn new(doc: Doc, lens: Option<EncodedLens>) -> Manifest {
        let lens = lens.unwrap_or_else(|| EncodedLens::of(&doc.layout));
        debug_assert_eq!(
            lens,
            EncodedLens::of(&doc.layout),
            "the lengths given are not the layout's"
        );
        Manifest { doc, lens }
    }

    /// The manifest's content.
    pub fn doc(&self) -> &Doc {
        &self.doc
    }

    /// [`Doc::pad_to_bucket`].
    pub fn pad_to_bucket(&mut self, max_payload: u32) -> usize {
        self.doc.pad_with(self.lens.bytes().len(), max_payload)
    }

    /// [`Doc::encode`].
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.doc.encode_lens(&self.lens, out);
    }
}

impl Doc {
    /// Append the whole frame to `out`.
    ///
    /// Encoding does not validate: a name or marks outside the limits produce a frame the peer
    /// rejects. Senders call [`Doc::validate`] first.
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.encode_lens(&EncodedLens::of(&self.layout), out);
    }

    /// [`Doc::encode`] with the layout's lengths already encoded.
    fn encode_lens(&self, lens: &EncodedLens, out: &mut Vec<u8>) {
        write_frame(out, FrameType::Doc, |out| {
            out.extend_from_slice(&self.doc.to_be_bytes());
            put_bytes(out, self.name.as_bytes());
            out.push(kind_code(self.layout.first));
            put_varint(out, self.layout.lens.len() as u64);
            out.reserve(lens.bytes().len() + 16 + self.padding as usize);
            out.push(lens.code().order(Kind::Plain));
            out.push(lens.code().order(Kind::Secure));
            out.extend_from_slice(lens.bytes());
            match &self.marks {
                None => out.push(0),
                Some((start, end)) => {
                    out.push(1);
                    put_bytes(out, start);
                    put_bytes(out, end);
                }
            }
            out.extend_from_slice(&self.padding.to_be_bytes());
            out.resize(out.len() + self.padding as usize, 0);
        });
    }

    /// Set [`Doc::padding`] so that the payload is [`bucket_len`] of its unpadded length,
    /// without exceeding `max_payload` (the peer's frame limit): a manifest larger than the
    /// largest bucket that fits is padded up to the limit, and one already above it is left as
    /// it is (and will be refused for its size). Returns the padded [`Doc::encoded_len`].
    pub fn pad_to_bucket(&mut self, max_payload: u32) -> usize {
        let lens = lens_bytes(&self.layout);
        self.pad_with(lens, max_payload)
    }

    /// [`Doc::pad_to_bucket`] for lengths that take `lens` bytes.
    fn pad_with(&mut self, lens: usize, max_payload: u32) -> usize {
        self.padding = 0;
        let base = self.encoded_len_with(lens) - HEADER_LEN;
        let limit = usize::try_from(max_payload).unwrap_or(usize::MAX);
        let target = bucket_len(base).min(limit).max(base);
        self.padding = u32::try_from(target - base).unwrap_or(0);
        HEADER_LEN + base + self.padding as usize
    }

    /// Bytes [`Doc::encode`] appends (header included), without encoding: a sender compares
    /// `encoded_len() - HEADER_LEN` with the peer's `max_payload` before sending a manifest of a
    /// document with very many segments.
    pub fn encoded_len(&self) -> usize {
        self.encoded_len_with(lens_bytes(&self.layout))
    }

    /// [`Doc::encoded_len`] for lengths that take `lens` bytes.
    fn encoded_len_with(&self, lens: usize) -> usize {
        let bytes = |b: &[u8]| varint_len(b.len() as u64) + b.len();
        let marks = match &self.marks {
            None => 1,
            Some((start, end)) => 1 + bytes(start) + bytes(end),
        };
        HEADER_LEN
            + 4
            + bytes(self.name.as_bytes())
            + 1
            + varint_len(self.layout.lens.len() as u64)
            + 2
            + lens
            + marks
            + 4
            + self.padding as usize
    }

    /// Check what [`Doc::parse`] would check, on the sending side, before encoding.
    pub fn validate(&self) -> Result<(), MessageError> {
        if self.name.len() > MAX_NAME_LEN {
            return Err(MessageError::TooLong {
                msg: MSG,
                field: "name",
                len: self.name.len() as u64,
                max: MAX_NAME_LEN,
            });
        }
        let mut total = 0u64;
        for &len in &self.layout.lens {
            total = total
                .checked_add(len)
                .ok_or(MessageError::LayoutOverflow { msg: MSG })?;
        }
        if let Some((start, end)) = &self.marks {
            check_mark("start_mark", start)?;
            check_mark("end_mark", end)?;
        }
        Ok(())
    }

    /// Parse a payload. The number of segments is bounded only by the payload (each takes at
    /// least one bit), so by the frame limit: the layout never takes more than 64 times the
    /// payload's size in memory. Use [`Doc::parse_with_max_segments`] for a tighter bound, or
    /// [`DocRef::parse`], which allocates nothing.
    pub fn parse(payload: &[u8]) -> Result<Doc, MessageError> {
        Doc::parse_with_max_segments(payload, usize::MAX)
    }

    /// Parse a payload, refusing layouts of more than `max_segments` segments.
    pub fn parse_with_max_segments(
        payload: &[u8],
        max_segments: usize,
    ) -> Result<Doc, MessageError> {
        let mut r = Reader::new(MSG, payload);
        let doc = r.u32("doc")?;
        let name = r.string("name", MAX_NAME_LEN)?;
        let first = r.kind("first")?;
        let (count, mut lens) = read_lens_head(&mut r, first)?;
        if count > max_segments {
            return Err(MessageError::TooManySegments {
                msg: MSG,
                count: count as u64,
                max: max_segments,
            });
        }
        let mut layout = Layout {
            first,
            lens: Vec::with_capacity(count.min(r.remaining())),
        };
        let mut total = 0u64;
        let mut choice = OrderChoice::new();
        for _ in 0..count {
            let (kind, len) = lens.next_len().map_err(|e| code_error(&r, e))?;
            total = total
                .checked_add(len)
                .ok_or(MessageError::LayoutOverflow { msg: MSG })?;
            choice.add(kind, len);
            layout.lens.push(len);
        }
        let used = finish_lens(&r, &lens, &choice)?;
        r.take(used, "segment_len")?;
        let marks = match r.u8("marks")? {
            0 => None,
            1 => {
                let start = r.bytes("start_mark", MAX_MARK_LEN)?;
                check_mark("start_mark", start)?;
                let end = r.bytes("end_mark", MAX_MARK_LEN)?;
                check_mark("end_mark", end)?;
                Some((start.to_vec(), end.to_vec()))
            }
            other => return Err(r.unknown("marks", other)),
        };
        let padding = r.u32("padding")?;
        if r.take(padding as usize, "padding")?.iter().any(|&b| b != 0) {
            return Err(MessageError::NonZeroPadding { msg: MSG });
        }
        r.finish()?;
        Ok(Doc {
            doc,
            name,
            layout,
            marks,
            padding,
        })
    }
}

/// A manifest as a receiver reads it: borrowed from the frame, its segment lengths left in the
/// code they travel in (checked canonical, summed without overflow), so that reading it
/// allocates nothing, whatever its number of segments; [`crate::sieve::Placement::from_manifest`]
/// keeps those bytes as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocRef<'a> {
    /// Document index within the session.
    pub doc: u32,
    /// The name to store it under (not yet checked: see [`crate::name`]).
    pub name: &'a str,
    /// Kind of the first segment.
    pub first: Kind,
    /// Number of segments.
    pub segments: usize,
    /// The code of the segment lengths.
    pub code: LensCode,
    /// The segment lengths: `segments` codewords of [`DocRef::code`].
    pub lens: &'a [u8],
    /// Bytes of each stream, by [`Kind::index`].
    pub stream_len: [u64; 2],
    /// The mark strings to restore, if any.
    pub marks: Option<(&'a [u8], &'a [u8])>,
}

impl<'a> DocRef<'a> {
    /// Parse a payload (the same checks as [`Doc::parse`]).
    pub fn parse(payload: &'a [u8]) -> Result<DocRef<'a>, MessageError> {
        let mut r = Reader::new(MSG, payload);
        let doc = r.u32("doc")?;
        let name = r.str("name", MAX_NAME_LEN)?;
        let first = r.kind("first")?;
        let (segments, mut dec) = read_lens_head(&mut r, first)?;
        let code = dec.code();
        let mut stream_len = [0u64; 2];
        let mut total = 0u64;
        let mut choice = OrderChoice::new();
        for _ in 0..segments {
            let (kind, len) = dec.next_len().map_err(|e| code_error(&r, e))?;
            total = total
                .checked_add(len)
                .ok_or(MessageError::LayoutOverflow { msg: MSG })?;
            stream_len[kind.index()] += len;
            choice.add(kind, len);
        }
        let used = finish_lens(&r, &dec, &choice)?;
        let lens = r.take(used, "segment_len")?;
        let marks = match r.u8("marks")? {
            0 => None,
            1 => {
                let start = r.bytes("start_mark", MAX_MARK_LEN)?;
                check_mark("start_mark", start)?;
                let end = r.bytes("end_mark", MAX_MARK_LEN)?;
                check_mark("end_mark", end)?;
                Some((start, end))
            }
            other => return Err(r.unknown("marks", other)),
        };
        let padding = r.u32("padding")?;
        if r.take(padding as usize, "padding")?.iter().any(|&b| b != 0) {
            return Err(MessageError::NonZeroPadding { msg: MSG });
        }
        r.finish()?;
        Ok(DocRef {
            doc,
            name,
            first,
            segments,
            code,
            lens,
            stream_len,
            marks,
        })
    }

    /// The segment lengths, decoded (they were checked when parsed).
    pub fn lens(&self) -> impl Iterator<Item = u64> + 'a {
        let mut d = self.code.decoder(self.lens, self.first);
        (0..self.segments).map_while(move |_| d.next_len().ok().map(|(_, len)| len))
    }

    /// An owned [`Doc`] (its layout expanded: 8 bytes per segment).
    pub fn to_doc(&self) -> Doc {
        Doc {
            doc: self.doc,
            name: self.name.to_string(),
            layout: Layout {
                first: self.first,
                lens: self.lens().collect(),
            },
            marks: self.marks.map(|(s, e)| (s.to_vec(), e.to_vec())),
            padding: 0,
        }
    }
}

/// Read the segment count and the code's orders, and start decoding the lengths that follow.
/// The count is checked against the bits that remain before anything is allocated: every
/// codeword takes at least one bit.
fn read_lens_head<'a>(
    r: &mut Reader<'a>,
    first: Kind,
) -> Result<(usize, LensDecoder<'a>), MessageError> {
    let count = r.varint("segments")?;
    let plain = r.u8("plain_order")?;
    let secure = r.u8("secure_order")?;
    let code = LensCode::new(plain, secure).ok_or_else(|| r.unknown("order", plain.max(secure)))?;
    let bits = r.remaining() as u64 * 8;
    if count > bits {
        return Err(MessageError::Truncated {
            msg: MSG,
            field: "segments",
            need: count.div_ceil(8),
            have: r.remaining(),
        });
    }
    // At most 8 per byte of a payload that is in memory: it fits a usize.
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    Ok((count, code.decoder(r.rest(), first)))
}

/// After the last length: the padding bits must be zero and the orders the shortest code's.
/// Returns the bytes the lengths took.
fn finish_lens(
    r: &Reader<'_>,
    dec: &LensDecoder<'_>,
    choice: &OrderChoice,
) -> Result<usize, MessageError> {
    let used = dec.finish().map_err(|e| code_error(r, e))?;
    if choice.best() != dec.code() {
        return Err(code_error(r, CodeError::NotBest));
    }
    Ok(used)
}

fn code_error(r: &Reader<'_>, e: CodeError) -> MessageError {
    MessageError::BadLengths {
        msg: MSG,
        why: e.as_str(),
        have: r.remaining(),
    }
}

fn check_mark(field: &'static str, mark: &[u8]) -> Result<(), MessageError> {
    if mark.is_empty() || mark.len() > MAX_MARK_LEN {
        return Err(MessageError::BadMarkLen {
            msg: MSG,
            field,
            len: mark.len(),
            max: MAX_MARK_LEN,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Kind;

    fn payload(doc: &Doc) -> Vec<u8> {
        let mut out = Vec::new();
        doc.encode(&mut out);
        out.split_off(HEADER_LEN)
    }

    #[test]
    fn round_trip() {
        let d = Doc {
            doc: 3,
            name: "report.txt".into(),
            layout: Layout {
                first: Kind::Plain,
                lens: vec![2, 0, 1 << 40],
            },
            marks: Some((b"<$S>".to_vec(), b"<$E>".to_vec())),
            padding: 3,
        };
        d.validate().unwrap();
        assert_eq!(Doc::parse(&payload(&d)).unwrap(), d);
        assert_eq!(d.encoded_len(), payload(&d).len() + HEADER_LEN);
    }

    #[test]
    fn only_the_shortest_codes_orders_are_accepted() {
        // Classified values of 12-15 bytes and cleartext runs of 40-63: orders 6 and 4.
        let lens: Vec<u64> = (0..64u64)
            .map(|i| if i % 2 == 0 { 40 + i % 24 } else { 12 + i % 4 })
            .collect();
        let d = Doc {
            doc: 1,
            name: "d".into(),
            layout: Layout {
                first: Kind::Plain,
                lens: lens.clone(),
            },
            marks: None,
            padding: 0,
        };
        let good = payload(&d);
        // doc u32, name (1 + 1), first, count (1): then the two orders.
        assert_eq!(&good[8..10], &[6, 4]);
        assert_eq!(
            DocRef::parse(&good).unwrap().lens().collect::<Vec<_>>(),
            lens
        );
        // The same lengths in orders 5 and 4 decode, but are not the one encoding.
        let mut other = good[..8].to_vec();
        other.extend_from_slice(&[5, 4]);
        let code = LensCode::new(5, 4).unwrap();
        code.encode(&d.layout, &mut other);
        other.extend_from_slice(&[0, 0, 0, 0, 0]);
        let refused = MessageError::BadLengths {
            msg: MSG,
            why: CodeError::NotBest.as_str(),
            have: other.len() - 10,
        };
        assert_eq!(Doc::parse(&other), Err(refused.clone()));
        assert_eq!(DocRef::parse(&other), Err(refused));
        // An order beyond 63 is unknown.
        let mut bad = good.clone();
        bad[8] = 64;
        assert!(matches!(
            Doc::parse(&bad),
            Err(MessageError::UnknownValue {
                field: "order",
                value: 64,
                ..
            })
        ));
    }

    #[test]
    fn huge_segment_count_in_tiny_payload_is_refused_before_allocating() {
        // doc, empty name, first = plain, count = 2^32 (varint 80 80 80 80 10), orders 0 and 0,
        // marks = none, no padding. Each codeword takes at least a bit: 2^32 need 2^29 bytes.
        let p = [
            0, 0, 0, 0, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x10, 0, 0, 0, 0, 0, 0, 0,
        ];
        let e = Doc::parse(&p).unwrap_err();
        assert!(
            matches!(e, MessageError::Truncated { field: "segments", need, .. } if need == 1 << 29)
        );
        assert!(matches!(
            DocRef::parse(&p),
            Err(MessageError::Truncated {
                field: "segments",
                ..
            })
        ));
    }

    #[test]
    fn segment_cap() {
        let d = Doc {
            doc: 0,
            name: String::new(),
            layout: Layout::whole(Kind::Secure, 5),
            marks: None,
            padding: 0,
        };
        let p = payload(&d);
        assert!(Doc::parse_with_max_segments(&p, 1).is_ok());
        assert!(matches!(
            Doc::parse_with_max_segments(&p, 0),
            Err(MessageError::TooManySegments {
                count: 1,
                max: 0,
                ..
            })
        ));
    }

    #[test]
    fn overflowing_lengths_and_bad_marks_are_refused() {
        let d = Doc {
            doc: 0,
            name: String::new(),
            layout: Layout {
                first: Kind::Plain,
                lens: vec![u64::MAX, 1],
            },
            marks: None,
            padding: 0,
        };
        assert_eq!(d.validate(), Err(MessageError::LayoutOverflow { msg: MSG }));
        assert_eq!(
            Doc::parse(&payload(&d)),
            Err(MessageError::LayoutOverflow { msg: MSG })
        );
        for marks in [(vec![], b"e".to_vec()), (b"s".to_vec(), vec![b'x'; 65])] {
            let d = Doc {
                marks: Some(marks),
                ..Doc {
                    layout: Layout::empty(),
                    ..d.clone()
                }
            };
            assert!(matches!(d.validate(), Err(MessageError::BadMarkLen { .. })));
            assert!(Doc::parse(&payload(&d)).is_err());
        }
    }

    #[test]
    fn padding_hides_the_segment_count_and_must_be_zeros() {
        let doc = |segments: usize| Doc {
            doc: 1,
            name: "report.txt".into(),
            layout: Layout {
                first: Kind::Plain,
                lens: vec![1000; segments],
            },
            marks: Some((b"<$S>".to_vec(), b"<$E>".to_vec())),
            padding: 0,
        };
        let sizes: Vec<usize> = [1, 2, 9, 100]
            .into_iter()
            .map(|n| {
                let mut d = doc(n);
                let len = d.pad_to_bucket(1 << 20);
                let p = payload(&d);
                assert_eq!(len, HEADER_LEN + p.len());
                assert_eq!(Doc::parse(&p).unwrap(), d);
                p.len()
            })
            .collect();
        assert_eq!(sizes, vec![MIN_DOC_BUCKET; 4]);
        let mut big = doc(400);
        big.pad_to_bucket(1 << 20);
        assert_eq!(payload(&big).len(), 1024);
        // Capped by the frame limit, never below the manifest itself.
        big.pad_to_bucket(900);
        assert_eq!(payload(&big).len(), 900);
        big.pad_to_bucket(10);
        assert_eq!(big.padding, 0);
        let mut p = payload(&doc(1));
        let n = p.len();
        p[n - 4..].copy_from_slice(&1u32.to_be_bytes());
        p.push(0);
        assert!(Doc::parse(&p).is_ok());
        *p.last_mut().unwrap() = 7;
        assert_eq!(
            Doc::parse(&p),
            Err(MessageError::NonZeroPadding { msg: MSG })
        );
    }
}
