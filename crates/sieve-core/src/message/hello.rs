//! `Hello`: the first frame of a session, client → receiver on TLS channel 0.
//!
//! The thesis hard-wired one TLS and one TCP port and always used as many plain channels as
//! secure ones. Here the client is told only the receiver's TLS address and says, inside TLS,
//! what it wants: the mode, N secure and M plain channels (independent, thesis §6.2), how streams
//! are split over channels and documents over batches, and how many documents will follow.

use super::wire::Reader;
use super::{write_frame, MessageError};
use crate::frame::FrameType;

/// Version of this wire format and of how its plain frames are authenticated; a receiver refuses
/// a `Hello` it does not speak. 3: cleartext is tagged by unit (a run of the layout within a
/// 256 KiB block), no longer by frame, so frames need not end where runs do. 4: manifests are
/// padded to size buckets ([`super::Doc::padding`]), names may be relative paths
/// ([`crate::name`]), a sender may cancel a document ([`super::DocCancel`]), and acknowledgements
/// say when a name exists or a document was cancelled.
pub const PROTOCOL_VERSION: u16 = 4;

/// Split code: channels take the next chunk when they are ready (the default).
pub const SPLIT_DYNAMIC: u8 = 0;
/// Split code: even split, thesis ES (§4.3.3) / BES (§4.5).
pub const SPLIT_EVEN: u8 = 1;
/// Split code: segment split, thesis SS (§4.3.4) / BSS (§4.5).
pub const SPLIT_SEGMENT: u8 = 2;
/// Split code: whole files per channel, thesis BFS (§4.5).
pub const SPLIT_FILE: u8 = 3;

/// What travels where.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Mode {
    /// Classified bytes over TLS, the rest over plain TCP.
    Sieve = 0,
    /// Every byte classified and sent over TLS: the baseline, through the same code path.
    SecureOnly = 1,
}

impl Mode {
    /// The wire value.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The mode with wire value `code`, if any.
    pub fn from_code(code: u8) -> Option<Mode> {
        match code {
            0 => Some(Mode::Sieve),
            1 => Some(Mode::SecureOnly),
            _ => None,
        }
    }
}

/// What the client asks for.
///
/// `split` and `batch_split` are raw codes (`SPLIT_*`): the split module owns their meaning, and
/// the receiver refuses codes it does not know with [`super::Error`] or a refused [`super::Ack`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Hello {
    /// [`PROTOCOL_VERSION`] of the client.
    pub version: u16,
    /// Sieve or secure-only.
    pub mode: Mode,
    /// N: TLS channels, channel 0 included.
    pub secure_channels: u8,
    /// M: plain TCP channels (0 in secure-only mode).
    pub plain_channels: u8,
    /// How one document's streams are split over channels (`SPLIT_*`).
    pub split: u8,
    /// How a batch of documents is split over channels (`SPLIT_*`).
    pub batch_split: u8,
    /// Chunk size in bytes for the dynamic split.
    pub chunk_size: u32,
    /// Number of documents the session will carry; 0 = not known in advance.
    pub docs: u32,
}

impl Hello {
    /// Payload bytes.
    pub const PAYLOAD_LEN: usize = 15;

    /// Append the whole frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        write_frame(out, FrameType::Hello, |out| {
            out.extend_from_slice(&self.version.to_be_bytes());
            out.extend_from_slice(&[
                self.mode.code(),
                self.secure_channels,
                self.plain_channels,
                self.split,
                self.batch_split,
            ]);
            out.extend_from_slice(&self.chunk_size.to_be_bytes());
            out.extend_from_slice(&self.docs.to_be_bytes());
        });
    }

    /// Parse a payload.
    pub fn parse(payload: &[u8]) -> Result<Hello, MessageError> {
        let mut r = Reader::new("Hello", payload);
        let version = r.u16("version")?;
        let mode = r.u8("mode")?;
        let mode = Mode::from_code(mode).ok_or_else(|| r.unknown("mode", mode))?;
        let hello = Hello {
            version,
            mode,
            secure_channels: r.u8("secure_channels")?,
            plain_channels: r.u8("plain_channels")?,
            split: r.u8("split")?,
            batch_split: r.u8("batch_split")?,
            chunk_size: r.u32("chunk_size")?,
            docs: r.u32("docs")?,
        };
        r.finish()?;
        Ok(hello)
    }
}
