//! `Ack`: receiver → client, the fate of one document.
//!
//! Replaces the thesis's `MSG_ACK` string. It is sent only after the document is complete,
//! verified against its [`super::DocEnd`] digest, written, fsynced and renamed into place, so the
//! sender's response time ends here (thesis §5.1.1). The three timings let the sender report where
//! the receiver spent its time.

use super::wire::{put_bytes, truncate_str, Reader};
use super::{write_frame, MessageError, MAX_TEXT_LEN};
use crate::frame::FrameType;

/// Outcome of one document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AckStatus {
    /// Committed under its final name.
    Ok = 0,
    /// The cleartext digest or a stream length did not match: nothing was written.
    IntegrityError = 1,
    /// Could not be stored (disk full, permissions, ...).
    StoreError = 2,
    /// Frames for the document were malformed or out of order.
    ProtocolError = 3,
    /// The receiver will not take it (name, size, policy).
    Refused = 4,
    /// A file of that name exists on the receiver, which does not replace files (unless it was
    /// started with `--overwrite`): nothing was written.
    Exists = 5,
    /// The sender cancelled it ([`super::DocCancel`]): its temporary file was removed.
    Cancelled = 6,
}

impl AckStatus {
    /// The wire value.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The status with wire value `code`, if any.
    pub(crate) fn from_code(code: u8) -> Option<AckStatus> {
        match code {
            0 => Some(AckStatus::Ok),
            1 => Some(AckStatus::IntegrityError),
            2 => Some(AckStatus::StoreError),
            3 => Some(AckStatus::ProtocolError),
            4 => Some(AckStatus::Refused),
            5 => Some(AckStatus::Exists),
            6 => Some(AckStatus::Cancelled),
            _ => None,
        }
    }
}

/// A document's outcome, with the receiver's timings in microseconds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ack {
    /// Document index within the session (as in [`super::Doc::doc`]).
    pub doc: u32,
    /// Outcome.
    pub status: AckStatus,
    /// Details for humans (empty when `Ok`), UTF-8, at most [`MAX_TEXT_LEN`] bytes (cut on a
    /// character boundary when encoding a longer one).
    pub message: String,
    /// From the manifest to the last data byte.
    pub receive_us: u64,
    /// Checking that every byte arrived and the digest matches (the thesis's `integrate()`).
    pub integrate_us: u64,
    /// fsync and rename.
    pub commit_us: u64,
}

impl Ack {
    /// Append the whole frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        write_frame(out, FrameType::Ack, |out| {
            out.extend_from_slice(&self.doc.to_be_bytes());
            out.push(self.status.code());
            out.extend_from_slice(&self.receive_us.to_be_bytes());
            out.extend_from_slice(&self.integrate_us.to_be_bytes());
            out.extend_from_slice(&self.commit_us.to_be_bytes());
            put_bytes(out, truncate_str(&self.message, MAX_TEXT_LEN).as_bytes());
        });
    }

    /// Parse a payload.
    pub fn parse(payload: &[u8]) -> Result<Ack, MessageError> {
        let mut r = Reader::new("Ack", payload);
        let doc = r.u32("doc")?;
        let status = r.u8("status")?;
        let status = AckStatus::from_code(status).ok_or_else(|| r.unknown("status", status))?;
        let receive_us = r.u64("receive_us")?;
        let integrate_us = r.u64("integrate_us")?;
        let commit_us = r.u64("commit_us")?;
        let message = r.string("message", MAX_TEXT_LEN)?;
        r.finish()?;
        Ok(Ack {
            doc,
            status,
            message,
            receive_us,
            integrate_us,
            commit_us,
        })
    }
}
