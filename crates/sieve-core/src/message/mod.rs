//! Typed payloads of the frames in [`crate::frame`], one file per message (as mini-redis has one
//! file per command).
//!
//! | frame | message | channel | replaces in the thesis (§4.2.4) |
//! |---|---|---|---|
//! | [`Hello`] | what the client wants | TLS channel 0 | fixed N = M, hard-wired ports |
//! | [`SessionMsg`] | session id, plain address | TLS channel 0 | — |
//! | [`Join`] / [`JoinOk`] | an extra channel proves membership | every extra channel | — (unauthenticated) |
//! | [`Doc`] | manifest: name, layout, marks | TLS | `<!First!>` tag, list order strings |
//! | [`Data`] / [`DataRef`] | a run of a secure or plain stream | any | `<!$!>` separators |
//! | [`ZData`] / [`ZDataRef`] | a compressed run of a plain stream | plain | — (no compression) |
//! | [`DocEnd`] | digest of the cleartext, stream lengths | TLS | `MSG_DONE` |
//! | [`DocCancel`] | the sender gives a document up (its file changed) | TLS | — |
//! | [`Ack`] | document committed (or not), timings | TLS channel 0 | `MSG_ACK` |
//! | [`Bye`], [`ErrorMsg`] | end of session | any | closing the socket |
//!
//! # Encoding
//!
//! Fixed-width big-endian integers; byte strings as a LEB128 varint length then the bytes; enum
//! fields as one byte. Every `parse` takes exactly one payload (the frame already delimits it) and
//! rejects truncation, trailing bytes, unknown enum values, non-minimal varints, invalid UTF-8 and
//! over-long fields; lengths and counts are checked against the bytes that remain before anything
//! is allocated. The encoding is canonical: a payload that parses re-encodes to the same bytes.
//!
//! Every `encode(&self, out)` appends a whole frame (header and payload) to `out`.

mod ack;
mod bye;
mod compress_flags;
mod data;
mod doc;
mod doc_cancel;
mod doc_end;
mod error;
pub mod golomb;
mod hello;
mod join;
mod join_ok;
mod session;
mod wire;
mod zdata;

pub use ack::{Ack, AckStatus};
pub use bye::Bye;
pub use compress_flags::CompressFlags;
pub use data::{Data, DataRef, DATA_HEADER_LEN, DATA_PREFIX_LEN};
pub use doc::{bucket_len, Doc, DocRef, Manifest, MIN_DOC_BUCKET};
pub use doc_cancel::DocCancel;
pub use doc_end::DocEnd;
pub use error::ErrorMsg;
pub use hello::{
    Hello, HelloRefusal, Mode, MAX_CHANNELS, MAX_PLAIN_CHANNELS, MAX_SECURE_CHANNELS,
    PROTOCOL_VERSION,
};
pub use join::Join;
pub use join_ok::JoinOk;
pub use session::SessionMsg;
pub use zdata::{ZData, ZDataRef, ZDATA_HEADER_LEN, ZDATA_PREFIX_LEN};

use crate::frame::{self, Frame, FrameType, HEADER_LEN};

/// Longest document name, in bytes of UTF-8.
pub const MAX_NAME_LEN: usize = 4096;
/// Longest address (`host:port`) in bytes.
pub const MAX_ADDR_LEN: usize = 512;
/// Longest human-readable message ([`Ack`], [`ErrorMsg`]) in bytes; longer ones are cut on encode.
pub const MAX_TEXT_LEN: usize = 4096;
/// Longest mark string ([`Doc::marks`]) in bytes; marks are never empty.
pub const MAX_MARK_LEN: usize = 64;

/// Why a payload is not a valid message. Every variant names the message and, where there is
/// one, the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    /// The payload ends before a field does, or a length/count claims more than what remains.
    #[error("{msg} message truncated: field `{field}` needs {need} bytes, {have} remain")]
    Truncated {
        /// Message type.
        msg: &'static str,
        /// Field being read.
        field: &'static str,
        /// Bytes the field needs (for a count: items, each at least one byte).
        need: u64,
        /// Bytes left in the payload.
        have: usize,
    },
    /// Bytes left over after the last field.
    #[error("{msg} message has {extra} trailing bytes")]
    TrailingBytes {
        /// Message type.
        msg: &'static str,
        /// Bytes left over.
        extra: usize,
    },
    /// A string is longer than its field allows.
    #[error("{msg} message: field `{field}` is {len} bytes, the limit is {max}")]
    TooLong {
        /// Message type.
        msg: &'static str,
        /// Field.
        field: &'static str,
        /// Claimed length.
        len: u64,
        /// Limit.
        max: usize,
    },
    /// A mark string is empty or longer than [`MAX_MARK_LEN`].
    #[error("{msg} message: field `{field}` is {len} bytes, must be 1..={max}")]
    BadMarkLen {
        /// Message type.
        msg: &'static str,
        /// Field.
        field: &'static str,
        /// Actual length.
        len: usize,
        /// Limit.
        max: usize,
    },
    /// A text field is not UTF-8.
    #[error("{msg} message: field `{field}` is not valid UTF-8")]
    BadUtf8 {
        /// Message type.
        msg: &'static str,
        /// Field.
        field: &'static str,
    },
    /// A varint is non-minimal or does not fit in 64 bits.
    #[error("{msg} message: field `{field}` is not a minimal 64-bit varint")]
    BadVarint {
        /// Message type.
        msg: &'static str,
        /// Field.
        field: &'static str,
    },
    /// An enum byte has no meaning.
    #[error("{msg} message: field `{field}` has unknown value {value}")]
    UnknownValue {
        /// Message type.
        msg: &'static str,
        /// Field.
        field: &'static str,
        /// The byte.
        value: u8,
    },
    /// A layout has more segments than the receiver accepts.
    #[error("{msg} message: layout of {count} segments exceeds the limit of {max}")]
    TooManySegments {
        /// Message type.
        msg: &'static str,
        /// Claimed segment count.
        count: u64,
        /// Limit.
        max: usize,
    },
    /// The segment lengths of a layout add up to more than `u64::MAX`.
    #[error("{msg} message: layout lengths overflow 64 bits")]
    LayoutOverflow {
        /// Message type.
        msg: &'static str,
    },
    /// A list of MACs that is empty or names one twice.
    #[error("{msg} message: field `{field}`: {why}")]
    BadOffer {
        /// Message type.
        msg: &'static str,
        /// Field.
        field: &'static str,
        /// What is wrong with the list.
        why: crate::mac::OfferError,
    },
    /// A layout's segment lengths do not decode (see [`golomb`]).
    #[error("{msg} message: segment lengths: {why} ({have} bytes remain)")]
    BadLengths {
        /// Message type.
        msg: &'static str,
        /// What is wrong.
        why: &'static str,
        /// Bytes left in the payload where the lengths begin.
        have: usize,
    },
    /// Padding holds a byte other than zero (padding is zeros, so the encoding is canonical).
    #[error("{msg} message: padding holds a byte other than zero")]
    NonZeroPadding {
        /// Message type.
        msg: &'static str,
    },
}

/// Append a frame of type `ty` whose payload `payload` writes, then patch the header's length.
///
/// # Panics
///
/// If the payload is longer than `u32::MAX` bytes, which no frame can carry.
pub(crate) fn write_frame(out: &mut Vec<u8>, ty: FrameType, payload: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER_LEN]);
    payload(out);
    let len = u32::try_from(out.len() - start - HEADER_LEN)
        .expect("message payload longer than u32::MAX bytes");
    out[start..start + HEADER_LEN].copy_from_slice(&frame::encode_header(ty, len));
}

/// Any message, for code that dispatches on the frame type.
///
/// [`Message::Data`] owns a copy of its payload; the data path should match
/// [`FrameType::Data`] first and use the zero-copy [`DataRef::parse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// [`FrameType::Hello`].
    Hello(Hello),
    /// [`FrameType::Session`].
    Session(SessionMsg),
    /// [`FrameType::Join`].
    Join(Join),
    /// [`FrameType::JoinOk`].
    JoinOk(JoinOk),
    /// [`FrameType::Doc`].
    Doc(Doc),
    /// [`FrameType::Data`] (copied; see [`DataRef`] for the zero-copy path).
    Data(Data),
    /// [`FrameType::DocEnd`].
    DocEnd(DocEnd),
    /// [`FrameType::DocCancel`].
    DocCancel(DocCancel),
    /// [`FrameType::Ack`].
    Ack(Ack),
    /// [`FrameType::Bye`].
    Bye(Bye),
    /// [`FrameType::Error`].
    Error(ErrorMsg),
    /// [`FrameType::ZData`] (copied; see [`ZDataRef`] for the zero-copy path).
    ZData(ZData),
}

impl Message {
    /// Parse the payload of a frame of type `ty`.
    pub fn parse(ty: FrameType, payload: &[u8]) -> Result<Message, MessageError> {
        Ok(match ty {
            FrameType::Hello => Message::Hello(Hello::parse(payload)?),
            FrameType::Session => Message::Session(SessionMsg::parse(payload)?),
            FrameType::Join => Message::Join(Join::parse(payload)?),
            FrameType::JoinOk => Message::JoinOk(JoinOk::parse(payload)?),
            FrameType::Doc => Message::Doc(Doc::parse(payload)?),
            FrameType::Data => Message::Data(Data::parse(payload)?),
            FrameType::DocEnd => Message::DocEnd(DocEnd::parse(payload)?),
            FrameType::DocCancel => Message::DocCancel(DocCancel::parse(payload)?),
            FrameType::Ack => Message::Ack(Ack::parse(payload)?),
            FrameType::Bye => Message::Bye(Bye::parse(payload)?),
            FrameType::Error => Message::Error(ErrorMsg::parse(payload)?),
            FrameType::ZData => Message::ZData(ZData::parse(payload)?),
        })
    }

    /// Parse a frame from [`frame::parse`].
    pub fn from_frame(frame: &Frame<'_>) -> Result<Message, MessageError> {
        Message::parse(frame.ty, frame.payload)
    }

    /// The frame type this message travels in.
    pub fn frame_type(&self) -> FrameType {
        match self {
            Message::Hello(_) => FrameType::Hello,
            Message::Session(_) => FrameType::Session,
            Message::Join(_) => FrameType::Join,
            Message::JoinOk(_) => FrameType::JoinOk,
            Message::Doc(_) => FrameType::Doc,
            Message::Data(_) => FrameType::Data,
            Message::DocEnd(_) => FrameType::DocEnd,
            Message::DocCancel(_) => FrameType::DocCancel,
            Message::Ack(_) => FrameType::Ack,
            Message::Bye(_) => FrameType::Bye,
            Message::Error(_) => FrameType::Error,
            Message::ZData(_) => FrameType::ZData,
        }
    }

    /// Append the whole frame (header and payload) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Message::Hello(m) => m.encode(out),
            Message::Session(m) => m.encode(out),
            Message::Join(m) => m.encode(out),
            Message::JoinOk(m) => m.encode(out),
            Message::Doc(m) => m.encode(out),
            Message::Data(m) => m.encode(out),
            Message::DocEnd(m) => m.encode(out),
            Message::DocCancel(m) => m.encode(out),
            Message::Ack(m) => m.encode(out),
            Message::Bye(m) => m.encode(out),
            Message::Error(m) => m.encode(out),
            Message::ZData(m) => m.encode(out),
        }
    }

    /// The whole frame as a new vector.
    pub fn to_frame(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }
}

macro_rules! impl_from {
    ($($variant:ident($t:ident)),*) => {$(
        impl From<$t> for Message {
            fn from(m: $t) -> Message {
                Message::$variant(m)
            }
        }
    )*};
}
impl_from!(
    Hello(Hello),
    Session(SessionMsg),
    Join(Join),
    JoinOk(JoinOk),
    Doc(Doc),
    Data(Data),
    DocEnd(DocEnd),
    DocCancel(DocCancel),
    Ack(Ack),
    Bye(Bye),
    Error(ErrorMsg),
    ZData(ZData)
);
