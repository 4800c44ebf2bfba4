//! `DocEnd`: the sender has sent every byte of a document; on a secure channel.
//!
//! Replaces the thesis's `MSG_DONE` string, and adds what the thesis lacked: the plain channels
//! are unprotected, so the sender commits inside TLS to a digest of the document's cleartext
//! stream: the digest of its [`crate::ledger::Ledger`], which folds, ordered by offset, the
//! AES-GMAC tag of every unit of the stream (a run of the layout within a 256 KiB block, tagged
//! under a key both ends derive from channel 0's TLS exporter; see the transport's `mac.rs`).
//! The receiver tags what it receives the same way and checks the digest (and both stream
//! lengths) before it commits; a changed, dropped or injected plain byte fails the document.
//! A sender that can no longer vouch for a document's bytes sends [`super::DocCancel`] instead.

use super::wire::Reader;
use super::{write_frame, MessageError};
use crate::frame::FrameType;

/// End of one document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DocEnd {
    /// Document index within the session.
    pub doc: u32,
    /// The ledger digest of the plain stream: every unit's `(offset, length, GMAC tag)`, in
    /// offset order, folded with the stream's length ([`crate::ledger::Ledger::finish`]).
    pub plain_digest: [u8; 32],
    /// Bytes of the secure stream.
    pub secure_len: u64,
    /// Bytes of the plain stream.
    pub plain_len: u64,
}

impl DocEnd {
    /// Payload bytes.
    pub const PAYLOAD_LEN: usize = 4 + 32 + 8 + 8;

    /// Append the whole frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        write_frame(out, FrameType::DocEnd, |out| {
            out.extend_from_slice(&self.doc.to_be_bytes());
            out.extend_from_slice(&self.plain_digest);
            out.extend_from_slice(&self.secure_len.to_be_bytes());
            out.extend_from_slice(&self.plain_len.to_be_bytes());
        });
    }

    /// Parse a payload.
    pub fn parse(payload: &[u8]) -> Result<DocEnd, MessageError> {
        let mut r = Reader::new("DocEnd", payload);
        let end = DocEnd {
            doc: r.u32("doc")?,
            plain_digest: r.array("plain_digest")?,
            secure_len: r.u64("secure_len")?,
            plain_len: r.u64("plain_len")?,
        };
        r.finish()?;
        Ok(end)
    }
}
