//! `ZData`: a run of one document's plain stream, compressed.
//!
//! The compressed sibling of [`super::Data`], for plain channels only (classified bytes are
//! never compressed on their way to the plain channels; see [`crate::compress`]). It says where
//! the run goes exactly as `Data` does (document, offset into the plain stream) and adds what the
//! receiver must know before it decompresses:
//!
//! ```text
//! doc u32 | offset u64 | declared_len u32 | codec u8 | compressed bytes (to the end of the frame)
//! ```
//!
//! - `declared_len`: bytes the run decompresses to. The receiver reserves that much against its
//!   memory budget, and the decoder refuses to produce a byte more or less
//!   ([`crate::compress::Decoder`]).
//! - `codec`: zstd and its level, or the field code ([`crate::compress::FrameCodec`]); unknown
//!   values are refused here.
//!
//! What the MAC binds: the whole payload as it travels, these 17 bytes and the compressed bytes.
//! The receiver takes the tag before it decompresses anything and records it for the frame's
//! declared length, so neither bytes nor offset, length or codec can be changed on the way
//! without failing the document (see [`crate::compress`] for what the decoder must withstand
//! meanwhile).

use super::wire::Reader;
use super::{write_frame, MessageError};
use crate::compress::FrameCodec;
use crate::frame::{self, FrameType, Limits, HEADER_LEN};

/// Bytes of a `ZData` payload before the compressed bytes: `doc`, `offset`, `declared_len`,
/// `codec`.
pub const ZDATA_PREFIX_LEN: usize = 4 + 8 + 4 + 1;
/// Frame header plus the prefix: what [`ZData::encode_header`] returns.
pub const ZDATA_HEADER_LEN: usize = HEADER_LEN + ZDATA_PREFIX_LEN;

/// An owned compressed run (for [`super::Message`]; the data path uses [`ZDataRef`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ZData {
    /// Document index within the session.
    pub doc: u32,
    /// Offset of the run's first (decompressed) byte within the document's plain stream.
    pub offset: u64,
    /// Bytes the run decompresses to.
    pub declared_len: u32,
    /// How it was compressed.
    pub codec: FrameCodec,
    /// The compressed bytes.
    pub compressed: Vec<u8>,
}

/// A compressed run borrowed from a frame payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ZDataRef<'a> {
    /// Document index within the session.
    pub doc: u32,
    /// Offset of the run's first (decompressed) byte within the document's plain stream.
    pub offset: u64,
    /// Bytes the run decompresses to.
    pub declared_len: u32,
    /// How it was compressed.
    pub codec: FrameCodec,
    /// The compressed bytes.
    pub compressed: &'a [u8],
}

impl ZData {
    /// Frame header and prefix of a `ZData` frame carrying `compressed_len` compressed bytes:
    /// write these [`ZDATA_HEADER_LEN`] bytes, then the compressed bytes.
    ///
    /// # Panics
    ///
    /// If the payload would not fit in `u32`; keep `compressed_len` at most [`ZData::max_len`].
    pub fn encode_header(
        doc: u32,
        offset: u64,
        declared_len: u32,
        codec: FrameCodec,
        compressed_len: usize,
    ) -> [u8; ZDATA_HEADER_LEN] {
        let payload_len = compressed_len
            .checked_add(ZDATA_PREFIX_LEN)
            .and_then(|n| u32::try_from(n).ok())
            .expect("ZData frame payload longer than u32::MAX bytes");
        let mut out = [0u8; ZDATA_HEADER_LEN];
        out[..HEADER_LEN].copy_from_slice(&frame::encode_header(FrameType::ZData, payload_len));
        out[HEADER_LEN..].copy_from_slice(&prefix(doc, offset, declared_len, codec));
        out
    }

    /// Most compressed bytes one `ZData` frame can carry under `limits`.
    pub fn max_len(limits: &Limits) -> usize {
        (limits.max_payload as usize).saturating_sub(ZDATA_PREFIX_LEN)
    }

    /// Borrow as a [`ZDataRef`].
    pub fn as_zdata_ref(&self) -> ZDataRef<'_> {
        ZDataRef {
            doc: self.doc,
            offset: self.offset,
            declared_len: self.declared_len,
            codec: self.codec,
            compressed: &self.compressed,
        }
    }

    /// Append the whole frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.as_zdata_ref().encode(out);
    }

    /// Parse a payload, copying the compressed bytes.
    pub fn parse(payload: &[u8]) -> Result<ZData, MessageError> {
        ZDataRef::parse(payload).map(ZDataRef::to_zdata)
    }
}

fn prefix(doc: u32, offset: u64, declared_len: u32, codec: FrameCodec) -> [u8; ZDATA_PREFIX_LEN] {
    let mut p = [0u8; ZDATA_PREFIX_LEN];
    p[..4].copy_from_slice(&doc.to_be_bytes());
    p[4..12].copy_from_slice(&offset.to_be_bytes());
    p[12..16].copy_from_slice(&declared_len.to_be_bytes());
    p[16] = codec.byte();
    p
}

impl<'a> ZDataRef<'a> {
    /// Parse a payload without copying: the compressed bytes borrow from `payload`.
    pub fn parse(payload: &'a [u8]) -> Result<ZDataRef<'a>, MessageError> {
        let mut r = Reader::new("ZData", payload);
        let doc = r.u32("doc")?;
        let offset = r.u64("offset")?;
        let declared_len = r.u32("declared_len")?;
        let byte = r.u8("codec")?;
        let codec = FrameCodec::from_byte(byte).map_err(|_| r.unknown("codec", byte))?;
        let compressed = r.take(r.remaining(), "compressed")?;
        r.finish()?;
        Ok(ZDataRef {
            doc,
            offset,
            declared_len,
            codec,
            compressed,
        })
    }

    /// The 17 bytes before the compressed ones, as they travel: with the compressed bytes, what
    /// the plain channel's MAC must cover.
    pub fn authenticated_prefix(&self) -> [u8; ZDATA_PREFIX_LEN] {
        prefix(self.doc, self.offset, self.declared_len, self.codec)
    }

    /// Append the whole frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        write_frame(out, FrameType::ZData, |out| {
            out.extend_from_slice(&self.authenticated_prefix());
            out.extend_from_slice(self.compressed);
        });
    }

    /// Copy into an owned [`ZData`].
    pub fn to_zdata(self) -> ZData {
        ZData {
            doc: self.doc,
            offset: self.offset,
            declared_len: self.declared_len,
            codec: self.codec,
            compressed: self.compressed.to_vec(),
        }
    }

    /// Offset one past the run's last decompressed byte, or `None` if it would overflow `u64`
    /// (a malformed frame).
    pub fn end(&self) -> Option<u64> {
        self.offset.checked_add(u64::from(self.declared_len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_then_bytes_is_the_encoded_frame() {
        let codec = FrameCodec::from(crate::compress::Codec::zstd(-3).unwrap());
        let z = ZDataRef {
            doc: 2,
            offset: 1 << 33,
            declared_len: 4 << 20,
            codec,
            compressed: b"\x28\xb5\x2f\xfd...",
        };
        let mut written =
            ZData::encode_header(2, 1 << 33, 4 << 20, codec, z.compressed.len()).to_vec();
        written.extend_from_slice(z.compressed);
        let mut encoded = Vec::new();
        z.encode(&mut encoded);
        assert_eq!(written, encoded);
        assert_eq!(
            &encoded[..ZDATA_HEADER_LEN],
            &[
                0, 0, 0, 24, 12, // header: 17 + 7 bytes, type 12
                0, 0, 0, 2, // doc
                0, 0, 0, 2, 0, 0, 0, 0, // offset
                0, 0x40, 0, 0,    // declared_len
                0xfd, // codec: zstd -3
            ]
        );
        let (f, _) = frame::parse(&encoded, &Limits::default()).unwrap();
        let back = ZDataRef::parse(f.payload).unwrap();
        assert_eq!(back, z);
        assert_eq!(&f.payload[..ZDATA_PREFIX_LEN], &back.authenticated_prefix());
        assert_eq!(back.end(), Some((1 << 33) + (4 << 20)));
    }

    #[test]
    fn bad_codec_and_short_prefix_are_refused() {
        let mut p = [0u8; ZDATA_PREFIX_LEN];
        for bad in [0u8, 23, 0x80, 0xf8] {
            p[16] = bad;
            assert_eq!(
                ZDataRef::parse(&p),
                Err(MessageError::UnknownValue {
                    msg: "ZData",
                    field: "codec",
                    value: bad
                })
            );
        }
        p[16] = 1;
        for n in 0..ZDATA_PREFIX_LEN {
            assert!(matches!(
                ZDataRef::parse(&p[..n]),
                Err(MessageError::Truncated { .. })
            ));
        }
        assert!(ZDataRef::parse(&p).unwrap().compressed.is_empty());
    }
}
