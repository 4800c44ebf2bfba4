//! `SessionMsg`: receiver → client on TLS channel 0, the answer to [`super::Hello`].
//!
//! The user gives the client one address (the receiver's TLS port); the plain address and the
//! session id arrive here, inside TLS.

use super::wire::{put_bytes, Reader};
use super::{write_frame, CompressFlags, MessageError, MAX_ADDR_LEN};
use crate::frame::FrameType;
use crate::mac::MacAlg;

/// The session the receiver opened.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionMsg {
    /// Random id that every [`super::Join`] names.
    pub session_id: [u8; 16],
    /// Where the plain channels connect (`host:port`), at most [`MAX_ADDR_LEN`] bytes of UTF-8.
    pub plain_addr: String,
    /// Largest frame payload the receiver accepts; the sender sizes data chunks below it.
    pub max_payload: u32,
    /// Most documents of this session the receiver holds open at once (each is a temporary
    /// file, so a descriptor): the sender keeps at most this many unacknowledged, and waits
    /// rather than have documents refused.
    pub max_open_docs: u32,
    /// The cleartext MAC the receiver chose among the sender's offer ([`super::Hello::macs`]);
    /// both ends derive its key from channel 0's exporter.
    pub mac: MacAlg,
    /// The compressed frames the receiver accepts: at most what the HELLO offered. The sender
    /// sends no other.
    pub compression: CompressFlags,
    /// The receiver's decompression speed as it measured it, in plain MB/s on one core (0: not
    /// measured). Part of ACCENT's receiver scale and of `auto`'s choice: a level the receiver
    /// cannot decompress as fast as the link delivers it is not worth choosing.
    pub decompress_mbps: u32,
    /// Cores the receiver decompresses frames on (each channel's frames on whichever is free).
    pub decompress_cores: u8,
}

impl SessionMsg {
    /// Append the whole frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        write_frame(out, FrameType::Session, |out| {
            out.extend_from_slice(&self.session_id);
            put_bytes(out, self.plain_addr.as_bytes());
            out.extend_from_slice(&self.max_payload.to_be_bytes());
            out.extend_from_slice(&self.max_open_docs.to_be_bytes());
            out.push(self.mac.code());
            out.push(self.compression.byte());
            out.extend_from_slice(&self.decompress_mbps.to_be_bytes());
            out.push(self.decompress_cores);
        });
    }

    /// Parse a payload.
    pub fn parse(payload: &[u8]) -> Result<SessionMsg, MessageError> {
        let mut r = Reader::new("Session", payload);
        let session = SessionMsg {
            session_id: r.array("session_id")?,
            plain_addr: r.string("plain_addr", MAX_ADDR_LEN)?,
            max_payload: r.u32("max_payload")?,
            max_open_docs: r.u32("max_open_docs")?,
            mac: {
                let code = r.u8("mac")?;
                MacAlg::from_code(code).ok_or_else(|| r.unknown("mac", code))?
            },
            compression: {
                let b = r.u8("compression")?;
                CompressFlags::from_byte(b).ok_or_else(|| r.unknown("compression", b))?
            },
            decompress_mbps: r.u32("decompress_mbps")?,
            decompress_cores: r.u8("decompress_cores")?,
        };
        r.finish()?;
        Ok(session)
    }
}
