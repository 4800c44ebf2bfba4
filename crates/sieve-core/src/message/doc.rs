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
//! Payload: `doc` u32, `name` (varint length, UTF-8), first kind u8, varint segment count, varint
//! segment lengths, marks flag u8 (0 none, 1 present), then if present start and end mark (each
//! varint length and bytes).

use super::wire::{kind_code, put_bytes, put_varint, varint_len, Reader};
use super::{write_frame, MessageError, MAX_MARK_LEN, MAX_NAME_LEN};
use crate::frame::{FrameType, HEADER_LEN};
use crate::layout::Layout;

const MSG: &str = "Doc";

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
}

impl Doc {
    /// Append the whole frame to `out`.
    ///
    /// Encoding does not validate: a name or marks outside the limits produce a frame the peer
    /// rejects. Senders call [`Doc::validate`] first.
    pub fn encode(&self, out: &mut Vec<u8>) {
        write_frame(out, FrameType::Doc, |out| {
            out.extend_from_slice(&self.doc.to_be_bytes());
            put_bytes(out, self.name.as_bytes());
            out.push(kind_code(self.layout.first));
            put_varint(out, self.layout.lens.len() as u64);
            for &len in &self.layout.lens {
                put_varint(out, len);
            }
            match &self.marks {
                None => out.push(0),
                Some((start, end)) => {
                    out.push(1);
                    put_bytes(out, start);
                    put_bytes(out, end);
                }
            }
        });
    }

    /// Bytes [`Doc::encode`] appends (header included), without encoding: a sender compares
    /// `encoded_len() - HEADER_LEN` with the peer's `max_payload` before sending a manifest of a
    /// document with very many segments.
    pub fn encoded_len(&self) -> usize {
        let bytes = |b: &[u8]| varint_len(b.len() as u64) + b.len();
        let lens: usize = self.layout.lens.iter().map(|&l| varint_len(l)).sum();
        let marks = match &self.marks {
            None => 1,
            Some((start, end)) => 1 + bytes(start) + bytes(end),
        };
        HEADER_LEN
            + 4
            + bytes(self.name.as_bytes())
            + 1
            + varint_len(self.layout.lens.len() as u64)
            + lens
            + marks
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
    /// least one byte), so by the frame limit: the layout never takes more than eight times the
    /// payload's size in memory. Use [`Doc::parse_with_max_segments`] for a tighter bound.
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
        // Checked against the remaining bytes before allocating: each length is >= 1 byte.
        let count = r.count("segments")?;
        if count > max_segments {
            return Err(MessageError::TooManySegments {
                msg: MSG,
                count: count as u64,
                max: max_segments,
            });
        }
        let mut lens = Vec::with_capacity(count);
        let mut total = 0u64;
        for _ in 0..count {
            let len = r.varint("segment_len")?;
            total = total
                .checked_add(len)
                .ok_or(MessageError::LayoutOverflow { msg: MSG })?;
            lens.push(len);
        }
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
        r.finish()?;
        Ok(Doc {
            doc,
            name,
            layout: Layout { first, lens },
            marks,
        })
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
        };
        d.validate().unwrap();
        assert_eq!(Doc::parse(&payload(&d)).unwrap(), d);
        assert_eq!(d.encoded_len(), payload(&d).len() + HEADER_LEN);
    }

    #[test]
    fn huge_segment_count_in_tiny_payload_is_refused_before_allocating() {
        // doc, empty name, first = plain, count = 2^32 (varint 80 80 80 80 10), marks = none.
        let p = [0, 0, 0, 0, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x10, 0];
        let e = Doc::parse(&p).unwrap_err();
        assert!(
            matches!(e, MessageError::Truncated { field: "segments", need, .. } if need == 1 << 32)
        );
    }

    #[test]
    fn segment_cap() {
        let d = Doc {
            doc: 0,
            name: String::new(),
            layout: Layout::whole(Kind::Secure, 5),
            marks: None,
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
}
