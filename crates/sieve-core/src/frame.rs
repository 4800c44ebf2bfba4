//! Wire framing: every protocol unit is a length-prefixed, typed frame.
//!
//! ```text
//! +----------------------+---------+---------------------------+
//! | payload length (u32) | type u8 | payload (length bytes)    |
//! | big-endian           |         |                           |
//! +----------------------+---------+---------------------------+
//!  <------------- HEADER_LEN = 5 ------------>
//! ```
//!
//! Why frames and not separator strings: the thesis delimited its protocol in-band with strings
//! such as `<!$!>`, `MSG_DONE` and `<!First!>` (§4.2.4). A document that happens to contain one of
//! them breaks the transfer, and a receiver has to scan every content byte to find them. With a
//! length prefix the receiver knows where a frame ends before it reads it: no content byte can be
//! mistaken for protocol, and content is never scanned.
//!
//! Why the limit is checked on the header alone: a peer can claim any length up to 4 GiB in five
//! bytes. [`check`] and [`parse_header`] reject a length above [`Limits::max_payload`] as soon as
//! the header is buffered, so a reader that sizes its buffer from the header (the I/O layer reads
//! exactly `len` bytes after [`parse_header`]) never allocates what a hostile peer claims.
//!
//! This module only frames bytes; the typed payloads are in [`crate::message`]. Nothing here
//! panics on input bytes: incomplete input is [`FrameError::Incomplete`], anything else malformed
//! is an error naming what is wrong.

use thiserror::Error;

/// Bytes in a frame header: payload length (`u32`, big-endian) then frame type (`u8`).
pub const HEADER_LEN: usize = 5;

/// Default largest payload accepted: 16 MiB.
pub const DEFAULT_MAX_PAYLOAD: u32 = 16 * 1024 * 1024;

/// What a decoder accepts. Both ends should agree: the receiver announces its limit in
/// [`crate::message::SessionMsg::max_payload`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Limits {
    /// Largest payload (frame length minus [`HEADER_LEN`]) accepted.
    pub max_payload: u32,
}

impl Default for Limits {
    /// 16 MiB payloads: room for large data chunks and manifests of documents with hundreds of
    /// thousands of segments, small enough that a hostile length costs nothing.
    fn default() -> Limits {
        Limits {
            max_payload: DEFAULT_MAX_PAYLOAD,
        }
    }
}

/// The type byte of a frame. The values are part of the wire format and never change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum FrameType {
    /// Client → receiver on channel 0: what the session wants (mode, channels, split).
    Hello = 1,
    /// Receiver → client on channel 0: session id, plain address, limits.
    Session = 2,
    /// First frame on every extra channel: which session and slot, with the proof of membership.
    Join = 3,
    /// Receiver → joining channel: accepted.
    JoinOk = 4,
    /// The document manifest (name, layout, marks), on a secure channel.
    Doc = 5,
    /// A run of one document's secure or plain stream.
    Data = 6,
    /// End of a document: cleartext digest and stream lengths, on a secure channel.
    DocEnd = 7,
    /// Receiver → client: a document is committed (or why not).
    Ack = 8,
    /// Orderly end of the session.
    Bye = 9,
    /// Fatal protocol error, with a code and a message for humans.
    Error = 10,
    /// The sender gives up on a document (instead of its DOC_END), on a secure channel.
    DocCancel = 11,
    /// A compressed run of one document's plain stream.
    ZData = 12,
}

impl FrameType {
    /// Every frame type, in wire-value order.
    pub const ALL: [FrameType; 12] = [
        FrameType::Hello,
        FrameType::Session,
        FrameType::Join,
        FrameType::JoinOk,
        FrameType::Doc,
        FrameType::Data,
        FrameType::DocEnd,
        FrameType::Ack,
        FrameType::Bye,
        FrameType::Error,
        FrameType::DocCancel,
        FrameType::ZData,
    ];

    /// The wire value.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// A name for logs and error messages.
    pub fn name(self) -> &'static str {
        match self {
            FrameType::Hello => "Hello",
            FrameType::Session => "Session",
            FrameType::Join => "Join",
            FrameType::JoinOk => "JoinOk",
            FrameType::Doc => "Doc",
            FrameType::Data => "Data",
            FrameType::DocEnd => "DocEnd",
            FrameType::Ack => "Ack",
            FrameType::Bye => "Bye",
            FrameType::Error => "Error",
            FrameType::DocCancel => "DocCancel",
            FrameType::ZData => "ZData",
        }
    }
}

impl std::fmt::Display for FrameType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl TryFrom<u8> for FrameType {
    type Error = FrameError;

    fn try_from(value: u8) -> Result<FrameType, FrameError> {
        Ok(match value {
            1 => FrameType::Hello,
            2 => FrameType::Session,
            3 => FrameType::Join,
            4 => FrameType::JoinOk,
            5 => FrameType::Doc,
            6 => FrameType::Data,
            7 => FrameType::DocEnd,
            8 => FrameType::Ack,
            9 => FrameType::Bye,
            10 => FrameType::Error,
            11 => FrameType::DocCancel,
            12 => FrameType::ZData,
            other => return Err(FrameError::UnknownType(other)),
        })
    }
}

impl From<FrameType> for u8 {
    fn from(ty: FrameType) -> u8 {
        ty.code()
    }
}

/// Why bytes are not (yet) a frame.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    /// Not enough bytes buffered: read more, then try again. The only non-fatal error.
    #[error("incomplete frame: {have} bytes buffered, {need} needed")]
    Incomplete {
        /// Bytes available.
        have: usize,
        /// Bytes needed for what is known so far (the header, or the whole frame).
        need: usize,
    },
    /// The header's type byte is not a known [`FrameType`].
    #[error("unknown frame type {0:#04x}")]
    UnknownType(u8),
    /// The header claims a payload longer than [`Limits::max_payload`].
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// Claimed payload length.
        len: u32,
        /// The limit in force.
        max: u32,
    },
}

impl FrameError {
    /// True when more bytes could turn the input into a frame.
    pub fn is_incomplete(&self) -> bool {
        matches!(self, FrameError::Incomplete { .. })
    }
}

/// A parsed, validated frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    /// Frame type.
    pub ty: FrameType,
    /// Payload length in bytes (not counting the header); at most the limit it was parsed with.
    pub len: u32,
}

impl Header {
    /// Header plus payload, in bytes.
    pub fn frame_len(&self) -> usize {
        HEADER_LEN.saturating_add(self.len as usize)
    }

    /// The five wire bytes of this header.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        encode_header(self.ty, self.len)
    }
}

/// A whole frame borrowed from the input buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Frame type.
    pub ty: FrameType,
    /// The payload, exactly as long as the header said.
    pub payload: &'a [u8],
}

/// The header of a frame of type `ty` carrying `payload_len` bytes.
pub fn encode_header(ty: FrameType, payload_len: u32) -> [u8; HEADER_LEN] {
    let l = payload_len.to_be_bytes();
    [l[0], l[1], l[2], l[3], ty.code()]
}

/// Parse and validate the header at the start of `buf` (only the first [`HEADER_LEN`] bytes are
/// read; a `&[u8; 5]` works too).
///
/// Rejects an unknown type and a length above `limits.max_payload` without looking at, or
/// allocating for, the payload. Fewer than five bytes is [`FrameError::Incomplete`].
pub fn parse_header(buf: &[u8], limits: &Limits) -> Result<Header, FrameError> {
    let Some(&[l0, l1, l2, l3, t]) = buf.get(..HEADER_LEN) else {
        return Err(FrameError::Incomplete {
            have: buf.len(),
            need: HEADER_LEN,
        });
    };
    let ty = FrameType::try_from(t)?;
    let len = u32::from_be_bytes([l0, l1, l2, l3]);
    if len > limits.max_payload {
        return Err(FrameError::TooLarge {
            len,
            max: limits.max_payload,
        });
    }
    Ok(Header { ty, len })
}

/// Is a whole frame buffered at the start of `buf`?
///
/// `Ok(Some(n))`: the first `n` bytes are one frame. `Ok(None)`: need more bytes (including when
/// the header itself is not complete). `Err`: the header is invalid and the connection should be
/// dropped; this is decided as soon as the five header bytes are present.
pub fn check(buf: &[u8], limits: &Limits) -> Result<Option<usize>, FrameError> {
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    let header = parse_header(buf, limits)?;
    let total = header.frame_len();
    Ok((buf.len() >= total).then_some(total))
}

/// Parse the frame at the start of `buf`, returning it and the number of bytes it occupies.
///
/// The payload borrows from `buf`; nothing is copied or allocated. Bytes after the frame are left
/// for the next call.
pub fn parse<'a>(buf: &'a [u8], limits: &Limits) -> Result<(Frame<'a>, usize), FrameError> {
    let header = parse_header(buf, limits)?;
    let total = header.frame_len();
    match buf.get(HEADER_LEN..total) {
        Some(payload) => Ok((
            Frame {
                ty: header.ty,
                payload,
            },
            total,
        )),
        None => Err(FrameError::Incomplete {
            have: buf.len(),
            need: total,
        }),
    }
}

/// Append a whole frame (header and `payload`) to `out`.
///
/// # Panics
///
/// If `payload` is longer than `u32::MAX` bytes, which no frame can carry.
pub fn encode(ty: FrameType, payload: &[u8], out: &mut Vec<u8>) {
    let len = u32::try_from(payload.len()).expect("frame payload longer than u32::MAX bytes");
    out.reserve(HEADER_LEN + payload.len());
    out.extend_from_slice(&encode_header(ty, len));
    out.extend_from_slice(payload);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_layout() {
        assert_eq!(encode_header(FrameType::Data, 0x0102_0304), [1, 2, 3, 4, 6]);
        let h = parse_header(&[0, 0, 1, 0, 5], &Limits::default()).unwrap();
        assert_eq!(
            h,
            Header {
                ty: FrameType::Doc,
                len: 256
            }
        );
        assert_eq!(h.frame_len(), 261);
        assert_eq!(h.encode(), [0, 0, 1, 0, 5]);
    }

    #[test]
    fn type_codes_round_trip() {
        for ty in FrameType::ALL {
            assert_eq!(FrameType::try_from(ty.code()), Ok(ty));
        }
        for b in [0u8, 13, 42, 255] {
            assert_eq!(FrameType::try_from(b), Err(FrameError::UnknownType(b)));
        }
    }

    #[test]
    fn error_messages_say_what_is_wrong() {
        let limits = Limits::default();
        let e = parse_header(&[0xff, 0xff, 0xff, 0xff, 1], &limits).unwrap_err();
        assert_eq!(
            e.to_string(),
            "frame of 4294967295 bytes exceeds the limit of 16777216 bytes"
        );
        let e = parse_header(&[0, 0, 0, 0, 0x2a], &limits).unwrap_err();
        assert_eq!(e.to_string(), "unknown frame type 0x2a");
        let e = parse(&[0, 0, 0, 9, 1, 0], &limits).unwrap_err();
        assert_eq!(
            e.to_string(),
            "incomplete frame: 6 bytes buffered, 14 needed"
        );
        assert!(e.is_incomplete());
    }

    #[test]
    fn parse_and_check_agree() {
        let mut buf = Vec::new();
        encode(FrameType::Bye, &[], &mut buf);
        encode(FrameType::Data, b"hello", &mut buf);
        let limits = Limits::default();
        assert_eq!(check(&buf, &limits), Ok(Some(5)));
        let (f, n) = parse(&buf, &limits).unwrap();
        assert_eq!((f.ty, f.payload, n), (FrameType::Bye, &b""[..], 5));
        let rest = &buf[n..];
        assert_eq!(check(rest, &limits), Ok(Some(10)));
        let (f, n) = parse(rest, &limits).unwrap();
        assert_eq!((f.ty, f.payload, n), (FrameType::Data, &b"hello"[..], 10));
        assert_eq!(check(&rest[..9], &limits), Ok(None));
        assert_eq!(check(&[], &limits), Ok(None));
    }

    #[test]
    fn limit_is_inclusive() {
        let limits = Limits { max_payload: 3 };
        assert_eq!(check(&[0, 0, 0, 3, 9], &limits), Ok(None));
        assert_eq!(
            check(&[0, 0, 0, 4, 9], &limits),
            Err(FrameError::TooLarge { len: 4, max: 3 })
        );
    }
}
