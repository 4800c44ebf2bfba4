//! `DocCancel`: the sender gives up on one document; on a secure channel, instead of its
//! [`super::DocEnd`].
//!
//! A sender classifies a document once and reads its bytes again as it sends them. If the file
//! changes in between (another program rewrites it in place), the bytes sent no longer match
//! the classification: a classified part may have moved into a range that travels in the clear,
//! and the receiver's integrity check would pass, because the sender tags what it reads. A sender
//! that notices the change (its file's size, times or identity differ from when it was
//! classified, or its read lease was broken) sends this instead of `DocEnd`; the receiver
//! removes the document's temporary file and answers with an [`super::Ack`] of status
//! [`super::AckStatus::Cancelled`]. Nothing is stored under the document's name.
//!
//! Payload: `doc` u32, `reason` (varint length, UTF-8, at most [`MAX_TEXT_LEN`] bytes).

use super::wire::{put_bytes, truncate_str, Reader};
use super::{write_frame, MessageError, MAX_TEXT_LEN};
use crate::frame::FrameType;

/// The sender cancels one document.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DocCancel {
    /// Document index within the session.
    pub doc: u32,
    /// Why, for the receiver's log; UTF-8, at most [`MAX_TEXT_LEN`] bytes (cut on a character
    /// boundary when encoding a longer one).
    pub reason: String,
}

impl DocCancel {
    /// Append the whole frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        write_frame(out, FrameType::DocCancel, |out| {
            out.extend_from_slice(&self.doc.to_be_bytes());
            put_bytes(out, truncate_str(&self.reason, MAX_TEXT_LEN).as_bytes());
        });
    }

    /// Parse a payload.
    pub fn parse(payload: &[u8]) -> Result<DocCancel, MessageError> {
        let mut r = Reader::new("DocCancel", payload);
        let m = DocCancel {
            doc: r.u32("doc")?,
            reason: r.string("reason", MAX_TEXT_LEN)?,
        };
        r.finish()?;
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::HEADER_LEN;

    #[test]
    fn round_trip_and_long_reasons_are_cut() {
        let m = DocCancel {
            doc: 7,
            reason: "report.csv changed while it was being sent".into(),
        };
        let mut out = Vec::new();
        m.encode(&mut out);
        assert_eq!(DocCancel::parse(&out[HEADER_LEN..]), Ok(m));
        let long = DocCancel {
            doc: 1,
            reason: "é".repeat(MAX_TEXT_LEN),
        };
        let mut out = Vec::new();
        long.encode(&mut out);
        let back = DocCancel::parse(&out[HEADER_LEN..]).unwrap();
        assert!(back.reason.len() <= MAX_TEXT_LEN && long.reason.starts_with(&back.reason));
    }
}
