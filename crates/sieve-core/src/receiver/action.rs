//! What the state machine asks of the transport, and how it answers a data frame.

use std::sync::Arc;

use thiserror::Error;

use crate::ledger::{Ledger, LedgerError};
use crate::message::{Ack, AckStatus};
use crate::sieve::{OutOfStream, Placement};
use crate::Kind;

/// The temporary file of a document: what the transport needs to create it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSpec {
    /// Document index within the session.
    pub doc: u32,
    /// The name it is committed under (checked).
    pub name: String,
    /// Its final length, reserved when the file is created.
    pub len: u64,
}

/// One write of part of a frame's payload: `len` bytes from `within` in the payload, to
/// `output` in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WritePiece {
    /// Offset in the output file.
    pub output: u64,
    /// Offset within the frame's payload.
    pub within: u64,
    /// Bytes.
    pub len: u64,
}

/// The answer to a data frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Write these pieces of the payload into `file` (creating it on the document's first
    /// write), then report [`ReceiverSession::write_done`](super::ReceiverSession::write_done)
    /// exactly once, whatever happened. The frame's tags are already recorded.
    Write {
        /// The document's file.
        file: Arc<FileSpec>,
        /// Where the payload goes.
        pieces: Vec<WritePiece>,
    },
    /// Accepted and recorded, nothing to write (a receiver that discards what it verifies).
    Recorded,
    /// The document's manifest has not arrived yet (it comes on channel 0, and data on other
    /// channels may overtake it): wait until a manifest arrives, then offer the frame again.
    NotYet,
    /// The document was refused or has failed: drop the frame.
    Drop,
}

/// What the transport needs to know about a document before it hands in one of its frames.
#[derive(Debug, Clone)]
pub enum Lookup {
    /// Accepted: where its streams' bytes go, to cut a cleartext frame into tagged units.
    Placement(Arc<Placement>),
    /// No manifest yet: wait for one (see [`Verdict::NotYet`]).
    NotYet,
    /// Refused or failed: drop its frames.
    Drop,
}

/// A document's ledgers, closed and moved out of the session to be checked off its lock.
///
/// Nothing can be added to them any more: the document is closed. Run [`Verification::run`]
/// and report the result with
/// [`ReceiverSession::verified`](super::ReceiverSession::verified).
#[derive(Debug)]
pub struct Verification {
    /// Document index.
    pub doc: u32,
    pub(super) ledgers: Box<[Ledger; 2]>,
    pub(super) lens: [u64; 2],
    pub(super) digest: [u8; 32],
}

impl Verification {
    /// Check that the secure stream arrived whole and that the cleartext's tags, folded by
    /// offset, give the digest the sender sent over TLS.
    pub fn run(mut self) -> Result<(), LedgerError> {
        let secure = Kind::Secure.index();
        let plain = Kind::Plain.index();
        self.ledgers[secure].finish(self.lens[secure])?;
        self.ledgers[plain].verify(self.lens[plain], &self.digest)
    }
}

/// A verified document whose every write has landed: restore its marks, make it durable and
/// move it to its name, then report with
/// [`ReceiverSession::committed`](super::ReceiverSession::committed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    /// The document's file.
    pub file: Arc<FileSpec>,
    /// Whether a file was ever created for it: a document with no bytes gets none until here.
    pub opened: bool,
    /// The mark strings to write back, if they are restored.
    pub marks: Option<(Vec<u8>, Vec<u8>)>,
    /// Where they go: [`Placement::mark_offsets`].
    pub placement: Arc<Placement>,
}

/// Why a document could not be stored: the status and message its acknowledgement carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Usually [`AckStatus::StoreError`].
    pub status: AckStatus,
    /// What the sender is told (the receiver's paths stay in its own log).
    pub message: String,
}

/// Why a channel could not take the slot its token names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum JoinRefusal {
    /// No such channel in this session.
    #[error("JOIN for {kind:?} channel {index}, which this session does not have")]
    Index {
        /// Kind.
        kind: Kind,
        /// Index.
        index: u8,
    },
    /// The slot is taken (a replayed token?).
    #[error("{kind:?} channel {index} already joined (replayed token?)")]
    Taken {
        /// Kind.
        kind: Kind,
        /// Index.
        index: u8,
    },
}

/// Something the transport must do.
#[derive(Debug)]
pub enum Action {
    /// Check a closed document's ledgers (see [`Verification`]).
    Verify(Verification),
    /// Commit a verified document (see [`Commit`]).
    Commit(Commit),
    /// Remove the document's temporary file, if one was created: it failed, or the session
    /// ended. Writes still in flight may land in it; nothing is ever committed from it.
    Discard {
        /// Document index.
        doc: u32,
    },
    /// Send this acknowledgement on channel 0.
    Ack {
        /// The acknowledgement.
        ack: Ack,
        /// The document's name, for the receiver's log (empty if its manifest was not read).
        name: String,
    },
}

/// A peer broke the protocol: the session ends. Each says what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProtocolError {
    /// A document id beyond what the session announced.
    #[error("document {doc} is beyond the {max} documents this session announced")]
    DocOutOfRange {
        /// Id.
        doc: u32,
        /// Documents announced (or allowed).
        max: u32,
    },
    /// The same document id announced twice.
    #[error("document {0} announced twice")]
    Announced(u32),
    /// DATA for a document after it was complete (closed for verification, or committed).
    #[error("data for document {0} after it was complete")]
    AfterComplete(u32),
    /// A piece outside its stream.
    #[error(transparent)]
    OutOfStream(#[from] OutOfStream),
    /// The tags given do not cover the frame exactly (a transport bug).
    #[error("internal error: the tags of a {len}-byte frame at {offset} do not cover it")]
    Tags {
        /// Frame offset.
        offset: u64,
        /// Frame length.
        len: u64,
    },
    /// DOC_END for a document that was never announced.
    #[error("DOC_END for document {0}, which was never announced")]
    EndUnknown(u32),
    /// DOC_END twice.
    #[error("DOC_END for document {0} sent twice")]
    EndTwice(u32),
    /// DOC_END whose stream lengths differ from the manifest's.
    #[error("DOC_END for document {0} disagrees with its manifest")]
    EndMismatch(u32),
    /// DOC_CANCEL for a document that was never announced.
    #[error("DOC_CANCEL for document {0}, which was never announced")]
    CancelUnknown(u32),
    /// DOC_CANCEL after the document's DOC_END.
    #[error("DOC_CANCEL for document {0} after its DOC_END")]
    CancelAfterEnd(u32),
    /// A cleartext frame in a secure-only session, or on a secure channel.
    #[error("a {kind:?} data frame in a session that has no {kind:?} channels")]
    WrongKind {
        /// Kind of the frame.
        kind: Kind,
    },
    /// A compressed frame of a kind the session did not agree to (SESSION said which).
    #[error("a compressed {kind:?} frame, which this session did not agree to (the receiver's SESSION said which compressed frames it accepts)")]
    CompressionRefused {
        /// Kind of the frame.
        kind: Kind,
    },
    /// A compressed classified frame holding bytes of more than one classified segment: each
    /// segment must be compressed alone, so that no context mixes two secrets.
    #[error("a compressed classified frame at offset {offset} ({len} bytes) spans more than one classified segment; each segment must be compressed alone")]
    SegmentsMixed {
        /// Offset in the secure stream.
        offset: u64,
        /// Declared length.
        len: u64,
    },
}
