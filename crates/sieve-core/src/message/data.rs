//! `Data`: a run of one document's secure or plain stream, the hot path.
//!
//! The thesis separated pieces with the in-band string `<!$!>`, which broke on documents that
//! contain it and forced the receiver to scan every byte. A `Data` frame says which document and
//! where in that document's stream its bytes go, so the receiver writes them straight to their
//! place (positional writes) in whatever order channels deliver them.
//!
//! The offset is into the stream of the channel's kind: secure channels carry the secure stream,
//! plain channels the plain stream (see [`crate::plan::Piece`]). A channel never says which kind
//! it carries in its data frames; the kind was fixed when it joined.
//!
//! Neither direction copies the bytes: [`Data::encode_header`] gives the 17 bytes to write before
//! the caller's payload slice, and [`DataRef::parse`] borrows the payload from the frame.

use super::wire::Reader;
use super::{write_frame, MessageError};
use crate::frame::{self, FrameType, Limits, HEADER_LEN};

/// Bytes of a `Data` payload before the data: `doc` (u32) and `offset` (u64).
pub const DATA_PREFIX_LEN: usize = 4 + 8;
/// Frame header plus `doc` and `offset`: what [`Data::encode_header`] returns.
pub const DATA_HEADER_LEN: usize = HEADER_LEN + DATA_PREFIX_LEN;

/// An owned run of stream bytes (for [`super::Message`]; the data path uses [`DataRef`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Data {
    /// Document index within the session.
    pub doc: u32,
    /// Offset of the first byte within the document's stream of this channel's kind.
    pub offset: u64,
    /// The bytes.
    pub payload: Vec<u8>,
}

/// A run of stream bytes borrowed from a frame payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DataRef<'a> {
    /// Document index within the session.
    pub doc: u32,
    /// Offset of the first byte within the document's stream of this channel's kind.
    pub offset: u64,
    /// The bytes.
    pub payload: &'a [u8],
}

impl Data {
    /// Frame header, `doc` and `offset` of a `Data` frame carrying `len` bytes: write these
    /// [`DATA_HEADER_LEN`] bytes, then the `len` payload bytes, and the frame is complete.
    ///
    /// # Panics
    ///
    /// If `len + 12` does not fit in `u32`; keep `len` at most [`Data::max_len`] of the peer's
    /// limits, or the peer rejects the frame anyway.
    pub fn encode_header(doc: u32, offset: u64, len: usize) -> [u8; DATA_HEADER_LEN] {
        let payload_len = len
            .checked_add(DATA_PREFIX_LEN)
            .and_then(|n| u32::try_from(n).ok())
            .expect("Data frame payload longer than u32::MAX bytes");
        let mut out = [0u8; DATA_HEADER_LEN];
        out[..HEADER_LEN].copy_from_slice(&frame::encode_header(FrameType::Data, payload_len));
        out[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&doc.to_be_bytes());
        out[HEADER_LEN + 4..].copy_from_slice(&offset.to_be_bytes());
        out
    }

    /// Most data bytes one `Data` frame can carry under `limits`.
    pub fn max_len(limits: &Limits) -> usize {
        (limits.max_payload as usize).saturating_sub(DATA_PREFIX_LEN)
    }

    /// Borrow as a [`DataRef`].
    pub fn as_data_ref(&self) -> DataRef<'_> {
        DataRef {
            doc: self.doc,
            offset: self.offset,
            payload: &self.payload,
        }
    }

    /// Append the whole frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.as_data_ref().encode(out);
    }

    /// Parse a payload, copying the data.
    pub fn parse(payload: &[u8]) -> Result<Data, MessageError> {
        DataRef::parse(payload).map(DataRef::to_data)
    }
}

impl<'a> DataRef<'a> {
    /// Parse a payload without copying: the data borrows from `payload`.
    pub fn parse(payload: &'a [u8]) -> Result<DataRef<'a>, MessageError> {
        let mut r = Reader::new("Data", payload);
        let doc = r.u32("doc")?;
        let offset = r.u64("offset")?;
        let data = r.take(r.remaining(), "payload")?;
        r.finish()?;
        Ok(DataRef {
            doc,
            offset,
            payload: data,
        })
    }

    /// Append the whole frame to `out` (one copy, into `out`).
    pub fn encode(&self, out: &mut Vec<u8>) {
        write_frame(out, FrameType::Data, |out| {
            out.extend_from_slice(&self.doc.to_be_bytes());
            out.extend_from_slice(&self.offset.to_be_bytes());
            out.extend_from_slice(self.payload);
        });
    }

    /// Copy into an owned [`Data`].
    pub(crate) fn to_data(self) -> Data {
        Data {
            doc: self.doc,
            offset: self.offset,
            payload: self.payload.to_vec(),
        }
    }

    /// Offset one past the last byte, or `None` if it would overflow `u64` (a malformed frame).
    pub fn end(&self) -> Option<u64> {
        self.offset.checked_add(self.payload.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_then_payload_is_the_encoded_frame() {
        let payload = b"some cleartext";
        let mut written = Data::encode_header(7, 1 << 40, payload.len()).to_vec();
        written.extend_from_slice(payload);
        let mut encoded = Vec::new();
        DataRef {
            doc: 7,
            offset: 1 << 40,
            payload,
        }
        .encode(&mut encoded);
        assert_eq!(written, encoded);
        let (f, n) = frame::parse(&encoded, &Limits::default()).unwrap();
        assert_eq!(n, encoded.len());
        assert_eq!(
            DataRef::parse(f.payload).unwrap(),
            DataRef {
                doc: 7,
                offset: 1 << 40,
                payload
            }
        );
    }

    #[test]
    fn max_len_fills_the_limit() {
        let limits = Limits { max_payload: 100 };
        let h = Data::encode_header(0, 0, Data::max_len(&limits));
        let header = frame::parse_header(&h, &limits).unwrap();
        assert_eq!(header.len, 100);
        assert_eq!(Data::max_len(&Limits { max_payload: 3 }), 0);
    }

    #[test]
    fn short_payload_is_an_error() {
        for n in 0..DATA_PREFIX_LEN {
            assert!(DataRef::parse(&[0u8; DATA_PREFIX_LEN][..n]).is_err());
        }
        let d = DataRef::parse(&[0u8; DATA_PREFIX_LEN]).unwrap();
        assert!(d.payload.is_empty());
        let d = DataRef::parse(&[
            0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 9,
        ])
        .unwrap();
        assert_eq!(d.end(), None);
    }
}
